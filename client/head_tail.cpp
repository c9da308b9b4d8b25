#include "client/head_tail.h"

#include <algorithm>

#include "ipc/text.h"

namespace sbsh::client {

head_tail::head_tail(std::string* out, size_t limit) : out_(out), head_cap_(limit - limit / 2), tail_cap_(limit / 2) {}

void head_tail::add(std::string_view chunk) {
  total_ += chunk.size();
  if (!cut_) {
    size_t room = head_cap_ > out_->size() ? head_cap_ - out_->size() : 0;
    size_t take = std::min(room, chunk.size());
    out_->append(chunk.substr(0, take));
    chunk.remove_prefix(take);
    if (chunk.empty()) return;
    cut_ = true;
    // The head ends between characters: a character it would split goes to the tail's side.
    size_t partial = ipc::utf8_incomplete_tail(*out_);
    tail_.assign(out_->end() - static_cast<std::ptrdiff_t>(partial), out_->end());
    out_->erase(out_->size() - partial);
  }
  tail_.append(chunk);
  // Trimmed now and then, not at every chunk: amortized linear.
  // (The head may have left up to 3 bytes of room to the tail: keep 4 more.)
  if (tail_.size() > 2 * tail_cap_ + (64u << 10)) tail_.erase(0, tail_.size() - tail_cap_ - 4);
}

uint64_t head_tail::finish() {
  size_t room = head_cap_ + tail_cap_ - out_->size();  // what the head left of the limit
  if (tail_.size() > room) {
    size_t start = tail_.size() - room;
    // Starts at a character: skips at most three continuation bytes of one cut in two.
    for (int i = 0; i < 3 && start < tail_.size() && (static_cast<unsigned char>(tail_[start]) & 0xC0) == 0x80; ++i)
      ++start;
    tail_.erase(0, start);
  }
  out_->append(tail_);
  tail_.clear();
  return total_ - out_->size();
}

}  // namespace sbsh::client
