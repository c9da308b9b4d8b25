// Results made for a model's context: a command's output kept within a budget of characters
// (its head and its tail, cut at line ends, with a marker at the cut that says how many bytes
// were left out and the exact call that reads them), and the short plain text a host shows
// the model in place of the JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "mcp/jsonrpc.h"

namespace sbsh::mcp {

// A result's budget when the call gives no max_output_chars (as OpenHands uses).
inline constexpr size_t kDefaultBudget = 30000;
// What a result's status line, headers, notes and markers may take of the budget; the
// output gets the rest.
inline constexpr size_t kBudgetReserve = 1000;

// One stream of output, read from byte `skip` on (the bytes before are counted, not kept):
// its first `cap` bytes and its last `cap` bytes, enough to cut any share of a budget of
// `cap` from.
class kept_stream {
 public:
  // `first`: the offset in the stream of the first byte added (sbshd skipped those before).
  kept_stream(size_t cap, uint64_t skip, uint64_t first = 0) : cap_(cap), skip_(skip), seen_(first) {}
  void add(std::string_view d);
  // Bytes of the stream seen, those skipped included: the offset where new output starts.
  [[nodiscard]] uint64_t end() const { return seen_; }
  // Bytes from skip on.
  [[nodiscard]] uint64_t size() const { return seen_ > skip_ ? seen_ - skip_ : 0; }
  [[nodiscard]] uint64_t skip() const { return skip_; }

  enum class keep { head_and_tail, head, tail };
  struct piece {
    std::string bytes;          // what is kept, the marker not included
    size_t head = 0;            // bytes of it before the cut (all of it when nothing was cut)
    uint64_t omitted = 0;       // bytes left out at the cut
    uint64_t omitted_from = 0;  // the offset in the stream of the first byte left out
  };
  // At most `budget` bytes of it, kept as `how` says, cut at line ends where a line ends
  // near the cut, else between UTF-8 characters.
  [[nodiscard]] piece cut(size_t budget, keep how) const;

 private:
  size_t cap_;
  uint64_t skip_;
  uint64_t seen_ = 0;
  std::string head_, tail_;
};

// Splits a budget between two streams of `a` and `b` bytes: each gets half, and what one
// does not need goes to the other.
std::pair<size_t, size_t> share_budget(size_t budget, uint64_t a, uint64_t b);

// The marker put at a cut: how many bytes of `stream` were left out, and the call that reads
// them (process_logs with `id` and the offset).
std::string cut_marker(std::string_view stream, const kept_stream::piece& p, const json& id, uint64_t stream_end);
// The piece with its marker at the cut (in place of the bytes left out).
std::string with_marker(const kept_stream::piece& p, const std::string& marker);

// A command's text shown as given, or, past 200 bytes, its start and how long it is: the
// caller has it already, and a heredoc echoed back would fill the context twice.
std::string short_command(std::string_view command);

// The plain text of a command result (run_command, await_command, cancel_command): a status
// line, then stdout, then stderr, then notes; `j` is its structuredContent.
std::string render_command(const json& j);
// The plain text of process_logs.
std::string render_logs(const json& j);

}  // namespace sbsh::mcp
