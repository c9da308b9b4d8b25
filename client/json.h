// JSON for the client side: the value type and its writer (nlohmann-json), UTF-8 repair and
// base64 behind `--json` in the CLI, and the one JSON form of each listing (sessions, processes, status), shared by
// the CLI's --json output and the C ABI's *_json functions. Documented in sbsh(1).
// Internal to libsbsh: not installed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sbsh/client.h"

namespace sbsh::client {

// Replaces each invalid UTF-8 sequence with U+FFFD; *was_valid says whether all was valid.
std::string utf8_repair(std::string_view s, bool* was_valid);
std::string base64(std::string_view s);
// The bytes of base64 text (padding optional); nullopt when it is not base64.
std::optional<std::string> unbase64(std::string_view s);
std::string rfc3339_ms(int64_t unix_ms);  // 2026-11-22T13:58:50.123Z

// The one JSON value of the client side (--json, --jsonl, the C ABI's *_json, plans, MCP):
// nlohmann's, with keys in the order they are set.
using json_value = nlohmann::ordered_json;
// A document on one line; invalid UTF-8 in a string becomes U+FFFD instead of throwing, so
// the document always parses.
std::string dump_json(const json_value& j);
// A signal as its name ("SIGKILL"), null when there is none; a number, null when absent; a
// text, null when empty; a time.
json_value signal_json(const std::optional<int>& sig);
template <typename T>
json_value opt_json(const std::optional<T>& v) {
  return v ? json_value(*v) : json_value(nullptr);
}
json_value text_or_null(std::string_view s);
json_value time_or_null(int64_t unix_ms);  // RFC 3339 text, null when not known (0)

// A kept command's id as users write it: "%17" (a background process's id is a bare number,
// and no process name holds '%'). parse_command_ref reads one back; nullopt when `s` is not
// one.
// kCommandRefPattern: the refs command_ref writes (to 19 digits), as a JSON Schema pattern,
// which the MCP tools check their ids against.
std::string command_ref(uint64_t id);
std::optional<uint64_t> parse_command_ref(std::string_view s);
inline constexpr std::string_view kCommandRefPattern = "^%[1-9][0-9]{0,18}$";

// The fields of `sbsh exec --json`'s result, added to `j` (so that `exec --jsonl` puts the
// same ones in its "finished" event): session and command, then the result's JSON form
// (client/json_form.h, schema_of<exec_result>). `session` empty: "default".
void add_exec_result(json_value& j, std::string_view session, std::string_view command, const exec_result& r);

// The JSON form of each listing, as a value (json_of) and as one line of text (to_json). Each
// record's is derived from its field table (ipc/messages.h) by client/json_form.h, with the
// few ways it deliberately differs from the wire declared there as the record's override.
json_value json_of(const session_status& s);
json_value json_of(const session_detail& d);
json_value json_of(const proc_info& p);
json_value json_of(const command_info& c);
json_value json_of(const daemon_status& st);
// A file beneath a session's root, as `sbsh file stat --json` prints it: path, type, size,
// mode (octal text), mtime (RFC 3339) and a symlink's target.
json_value json_of(const file_entry& e);
// The file operations' results (client.h), as `sbsh file edit --json`, `file read --lines
// --json` and `file search --json` print them and MCP's edit_file, read_file by lines and
// search_files return them: {path, replacements, bytes, first_line}; {path, bytes, content,
// encoding (utf-8, or base64 when the bytes are not UTF-8), truncated, start_line, end_line,
// total_lines}; {matches: [{path, line, text}], files_searched, files_skipped, truncated,
// dir (what the matches' paths are from)}.
// write_file's result after its path: {path, bytes}.
struct file_written {
  uint64_t bytes = 0;  // bytes written
};
json_value json_of(std::string_view path, const file_edit_result& r);
json_value json_of(std::string_view path, const file_lines& l);
json_value json_of(std::string_view path, const file_written& w);
json_value json_of(const file_search_result& r);
// An environment, as `sbsh env ls --json` prints it (and `env prune --json` what it deleted).
json_value json_of(const environment_info& e);
// The snapshot copies kept after their sessions, as `sbsh session ls --kept --json` prints
// them; without `sized` (what `prune --kept` deleted) their sizes are left out.
json_value json_of(const std::vector<kept_copy>& v, bool sized = true);
// Names, such as the sessions `session prune` removed.
json_value json_of(const std::vector<std::string>& names);
// A listing: an array of the records' forms.
template <typename T>
json_value json_of(const std::vector<T>& v) {
  json_value a = json_value::array();
  for (const auto& x : v) a.push_back(json_of(x));
  return a;
}
template <typename... A>
std::string to_json(const A&... a) {
  return dump_json(json_of(a...));
}

}  // namespace sbsh::client
