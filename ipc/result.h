// A value or an error a user can act on. Functions that can fail return this instead of
// throwing, so nothing unwinds through a libuv callback.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace sbsh {

struct error {
  std::string code;     // machine-readable, from ipc::err where it crosses the wire
  std::string message;  // one line: what was wrong and how to fix it
};

template <typename T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  result(error e) : v_(std::move(e)) {}      // NOLINT(google-explicit-constructor)
  [[nodiscard]] bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  const error& err() const { return std::get<1>(v_); }

 private:
  std::variant<T, error> v_;
};

struct ok_t {};
using status = result<ok_t>;
inline status ok_status() { return ok_t{}; }

inline error make_error(std::string_view code, std::string message) {
  return error{std::string(code), std::move(message)};
}

}  // namespace sbsh
