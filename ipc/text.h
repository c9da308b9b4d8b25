// Small text helpers shared by the daemon and the client: signal names, JSON escaping,
// shell quoting.
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

}  // namespace sbsh::ipc
