// How each C++ type travels in the schema's codec (wire.h): wire<T> packs a value, reads
// one back with a type check, and says what it is for errors and for the manual. Also the
// decoder that keeps the path of the field being read, and the view types that let a
// decoded message point into its frame instead of copying (bin_view, str_list).
#pragma once

#include <msgpack.hpp>

#include <array>
#include <concepts>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/frame.h"
#include "ipc/result.h"

namespace sbsh::ipc {

// Where a decoder is and what went wrong first. The path is a stack of keys and indexes,
// kept without allocating; it is spelt out only for an error.
class decoder {
 public:
  explicit decoder(std::string_view what) : what_(what) {}

  class scope {
   public:
    explicit scope(decoder& d) : d_(d) {}
    ~scope() { --d_.depth_; }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

   private:
    decoder& d_;
  };
  [[nodiscard]] scope enter(std::string_view key) { return push({key, 0}); }
  [[nodiscard]] scope enter(size_t index) { return push({{}, index}); }
  // "session.definition.env[2]"
  [[nodiscard]] std::string path() const;

  // Each records the first error and returns false, so a reader can `return d.x(...)`.
  bool wrong_type(std::string_view want, const msgpack::object& got);
  bool missing(std::string_view want);
  bool fail(std::string message);
  [[nodiscard]] error take_error() { return std::move(err_); }

 private:
  struct segment {
    std::string_view key;  // empty: an array index
    size_t index;
  };
  scope push(segment s) {
    if (depth_ < segs_.size()) segs_[depth_] = s;
    ++depth_;
    return scope(*this);
  }
  std::string_view what_;  // the message or record being read, for "exec needs ..."
  std::array<segment, 16> segs_;  // not cleared: only the first depth_ are ever read
  size_t depth_ = 0;
  // The first error; a flag beside it rather than std::optional, which GCC 12 under the
  // sanitizers takes for maybe-uninitialized.
  bool failed_ = false;
  error err_;
};

// What the wire carries for a member of type T:
//   noun      for errors: "field 'x' must be <noun>"
//   doc()     for the manual: "str", "array of str", ...
//   pack      writes the value
//   empty     true for the value kOmitEmpty leaves out
//   read      reads a non-nil value, or reports through the decoder and returns false
//   show      a default worth printing in the manual, or ""
template <typename T>
struct wire;

template <typename T>
concept has_wire = requires { wire<T>::noun; };

void pack_key(wire_packer& pk, std::string_view key);

template <std::integral T>
  requires(!std::same_as<T, bool>)
struct wire<T> {
  static constexpr bool is_signed = std::is_signed_v<T>;
  static constexpr std::string_view noun = is_signed ? "an integer" : "a non-negative integer";
  static std::string doc() { return is_signed ? "int" : "uint"; }
  static void pack(wire_packer& pk, T v) {
    if constexpr (is_signed) pk.pack_int64(v);
    else pk.pack_uint64(v);
  }
  static bool empty(T v) { return v == 0; }
  static std::string show(T v) { return v == 0 ? "" : std::to_string(v); }
  static bool read(const msgpack::object& o, T& out, decoder& d) {
    if (o.type == msgpack::type::POSITIVE_INTEGER) {
      if (o.via.u64 > static_cast<uint64_t>(std::numeric_limits<T>::max()))
        return d.fail("field '" + d.path() + "' is out of range");
      out = static_cast<T>(o.via.u64);
      return true;
    }
    if (is_signed && o.type == msgpack::type::NEGATIVE_INTEGER) {
      if (o.via.i64 < static_cast<int64_t>(std::numeric_limits<T>::min()))
        return d.fail("field '" + d.path() + "' is out of range");
      out = static_cast<T>(o.via.i64);
      return true;
    }
    return d.wrong_type(noun, o);
  }
};

template <>
struct wire<bool> {
  static constexpr std::string_view noun = "a boolean";
  static std::string doc() { return "bool"; }
  static void pack(wire_packer& pk, bool v) { v ? pk.pack_true() : pk.pack_false(); }
  static bool empty(bool v) { return !v; }
  static std::string show(bool v) { return v ? "true" : ""; }
  static bool read(const msgpack::object& o, bool& out, decoder& d) {
    if (o.type != msgpack::type::BOOLEAN) return d.wrong_type(noun, o);
    out = o.via.boolean;
    return true;
  }
};

template <typename T>
  requires std::same_as<T, std::string> || std::same_as<T, std::string_view>
struct wire<T> {
  static constexpr std::string_view noun = "a string";
  static std::string doc() { return "str"; }
  // Under the frame's text rule (frame.h): valid UTF-8 in every frame to a client.
  static void pack(wire_packer& pk, std::string_view v) { pk.pack_text(v); }
  static bool empty(std::string_view v) { return v.empty(); }
  static std::string show(std::string_view v) { return v.empty() ? "" : "\"" + std::string(v) + "\""; }
  static bool read(const msgpack::object& o, T& out, decoder& d) {
    if (o.type != msgpack::type::STR) return d.wrong_type(noun, o);
    out = T(o.via.str.ptr, o.via.str.size);
    return true;
  }
};

// Bytes sent as msgpack bin (output, stdin). A str is taken too: some msgpack libraries
// cannot emit bin.
struct bin_view {
  std::string_view bytes;
};
template <>
struct wire<bin_view> {
  static constexpr std::string_view noun = "binary";
  static std::string doc() { return "bin"; }
  static void pack(wire_packer& pk, bin_view v) {
    pk.pack_bin(static_cast<uint32_t>(v.bytes.size()));
    pk.pack_bin_body(v.bytes.data(), static_cast<uint32_t>(v.bytes.size()));
  }
  static bool empty(bin_view v) { return v.bytes.empty(); }
  static std::string show(bin_view) { return ""; }
  static bool read(const msgpack::object& o, bin_view& out, decoder& d) {
    if (o.type == msgpack::type::BIN) out.bytes = std::string_view(o.via.bin.ptr, o.via.bin.size);
    else if (o.type == msgpack::type::STR) out.bytes = std::string_view(o.via.str.ptr, o.via.str.size);
    else return d.wrong_type(noun, o);
    return true;
  }
};

// An array of strings without copies: over the caller's strings when encoding, over the
// message's bytes when decoded (each element was checked to be a string).
class str_list {
 public:
  str_list() = default;
  str_list(const std::vector<std::string>& v) : owned_(v.data()), n_(v.size()) {}  // NOLINT: implicit on purpose

  [[nodiscard]] size_t size() const { return n_; }
  [[nodiscard]] bool empty() const { return n_ == 0; }
  std::string_view operator[](size_t i) const {
    if (owned_ != nullptr) return owned_[i];
    return {wire_[i].via.str.ptr, wire_[i].via.str.size};
  }
  [[nodiscard]] std::vector<std::string> to_vector() const {
    std::vector<std::string> out;
    out.reserve(n_);
    for (size_t i = 0; i < n_; ++i) out.emplace_back((*this)[i]);
    return out;
  }

  class iterator {
   public:
    iterator(const str_list* l, size_t i) : l_(l), i_(i) {}
    std::string_view operator*() const { return (*l_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const iterator& o) const { return i_ != o.i_; }

   private:
    const str_list* l_;
    size_t i_;
  };
  [[nodiscard]] iterator begin() const { return {this, 0}; }
  [[nodiscard]] iterator end() const { return {this, n_}; }

 private:
  friend struct wire<str_list>;
  const std::string* owned_ = nullptr;
  const msgpack::object* wire_ = nullptr;
  size_t n_ = 0;
};

// Reads a msgpack array element by element into `each(index, element)`, with the index in
// the decoder's path.
template <typename F>
bool read_array(const msgpack::object& o, std::string_view noun, decoder& d, F&& each) {
  if (o.type != msgpack::type::ARRAY) return d.wrong_type(noun, o);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    auto at = d.enter(i);
    if (!each(i, o.via.array.ptr[i])) return false;
  }
  return true;
}

template <>
struct wire<str_list> {
  static constexpr std::string_view noun = "an array of strings";
  static std::string doc() { return "array of str"; }
  static void pack(wire_packer& pk, const str_list& v) {
    pk.pack_array(static_cast<uint32_t>(v.size()));
    for (auto s : v) wire<std::string_view>::pack(pk, s);
  }
  static bool empty(const str_list& v) { return v.empty(); }
  static std::string show(const str_list&) { return ""; }
  static bool read(const msgpack::object& o, str_list& out, decoder& d) {
    if (!read_array(o, noun, d, [&](uint32_t, const msgpack::object& e) {
          return e.type == msgpack::type::STR || d.wrong_type("a string", e);
        }))
      return false;
    out = str_list();
    out.wire_ = o.via.array.ptr;
    out.n_ = o.via.array.size;
    return true;
  }
};

template <has_wire T>
struct wire<std::optional<T>> {
  static constexpr std::string_view noun = wire<T>::noun;
  static std::string doc() { return wire<T>::doc() + " or nil"; }
  static void pack(wire_packer& pk, const std::optional<T>& v) {
    if (v) wire<T>::pack(pk, *v);
    else pk.pack_nil();
  }
  static bool empty(const std::optional<T>& v) { return !v.has_value(); }
  static std::string show(const std::optional<T>&) { return ""; }
  static bool read(const msgpack::object& o, std::optional<T>& out, decoder& d) {
    return wire<T>::read(o, out.emplace(), d);
  }
};

template <has_wire T>
struct wire<std::vector<T>> {
  static constexpr std::string_view noun = "an array";
  static std::string doc() { return "array of " + wire<T>::doc(); }
  static void pack(wire_packer& pk, const std::vector<T>& v) {
    pk.pack_array(static_cast<uint32_t>(v.size()));
    for (const auto& e : v) wire<T>::pack(pk, e);
  }
  static bool empty(const std::vector<T>& v) { return v.empty(); }
  static std::string show(const std::vector<T>&) { return ""; }
  static bool read(const msgpack::object& o, std::vector<T>& out, decoder& d) {
    out.clear();
    if (o.type == msgpack::type::ARRAY) out.reserve(o.via.array.size);
    return read_array(o, noun, d, [&](uint32_t, const msgpack::object& e) {
      return wire<T>::read(e, out.emplace_back(), d);
    });
  }
};

// A map from names to values (the state file's sessions).
template <has_wire T>
struct wire<std::map<std::string, T>> {
  static constexpr std::string_view noun = "a map with string keys";
  static std::string doc() { return "map of str to " + wire<T>::doc(); }
  static void pack(wire_packer& pk, const std::map<std::string, T>& v) {
    pk.pack_map(static_cast<uint32_t>(v.size()));
    for (const auto& [k, e] : v) {
      pack_key(pk, k);
      wire<T>::pack(pk, e);
    }
  }
  static bool empty(const std::map<std::string, T>& v) { return v.empty(); }
  static std::string show(const std::map<std::string, T>&) { return ""; }
  static bool read(const msgpack::object& o, std::map<std::string, T>& out, decoder& d) {
    if (o.type != msgpack::type::MAP) return d.wrong_type(noun, o);
    out.clear();
    for (uint32_t i = 0; i < o.via.map.size; ++i) {
      const auto& kv = o.via.map.ptr[i];
      if (kv.key.type != msgpack::type::STR) return d.fail("field '" + d.path() + "' has a key that is not a string");
      std::string key(kv.key.via.str.ptr, kv.key.via.str.size);
      auto at = d.enter(std::string_view(kv.key.via.str.ptr, kv.key.via.str.size));
      if (!wire<T>::read(kv.val, out[key], d)) return false;
    }
    return true;
  }
};

}  // namespace sbsh::ipc
