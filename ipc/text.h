// Small text helpers shared by the daemon and the client: signal names, JSON escaping,
// shell quoting, UTF-8 checks, and client text quoted in messages.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sbsh::ipc {

// "TERM", "SIGTERM", "term" or "15" -> 15; nullopt for anything else.
std::optional<int> signal_from_name(std::string_view s);
// 15 -> "SIGTERM" (or "SIG15" for a number without a name).
std::string signal_name(int sig);
// Escapes a string for the inside of a JSON string literal (no quotes added).
std::string json_escape(std::string_view s);
// Single-quotes `s` for a POSIX shell: 'it'\''s'.
std::string shell_quote(std::string_view s);

// Whether `s` is valid UTF-8: no stray continuation bytes, truncated sequences, overlong
// forms, surrogates or values past U+10FFFF.
bool valid_utf8(std::string_view s);
// `s` with every byte that is not part of valid UTF-8 replaced by U+FFFD; *was_valid (when
// given) says whether there was none.
std::string utf8_repair(std::string_view s, bool* was_valid = nullptr);
// The longest prefix of `s` of at most `n` bytes that does not end inside a UTF-8 character.
std::string_view utf8_prefix(std::string_view s, size_t n);
// How many bytes at the end of `s` (0 to 3) begin a UTF-8 character that is not complete
// yet but may be once more bytes follow: what a stream cut into chunks carries over to the
// next one.
size_t utf8_incomplete_tail(std::string_view s);
// Text a client sent, for an error message or a log line: control characters and bytes
// that are not valid UTF-8 written as escapes (\n, \t, \e, \xNN), and, past `max` bytes,
// cut with "..." and the full length. The result is valid UTF-8 on one line.
std::string printable(std::string_view s, size_t max = 128);

}  // namespace sbsh::ipc
