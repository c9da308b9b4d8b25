// What a result keeps of a stream longer than its limit: its first and its last part (an
// error is usually at the end), each about half the limit and cut between UTF-8 characters
// where the bytes are UTF-8, with the bytes between them left out and counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sbsh::client {

class head_tail {
 public:
  // Keeps into *out, which must outlive this, at most `limit` bytes.
  head_tail(std::string* out, size_t limit);
  void add(std::string_view chunk);
  // Appends the last part to *out; returns how many bytes were left out between the parts.
  uint64_t finish();
  [[nodiscard]] uint64_t total() const { return total_; }

 private:
  std::string* out_;
  size_t head_cap_, tail_cap_;
  std::string tail_;
  uint64_t total_ = 0;
  bool cut_ = false;  // bytes went past the head
};

}  // namespace sbsh::client
