// JSON for the client side: the object writer, UTF-8 repair and base64 behind `--json` in
// the CLI, and the one JSON form of each listing (sessions, processes, status), shared by
// the CLI's --json output and the C ABI's *_json functions. Documented in sbsh(1).
// Internal to libsbsh: not installed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sbsh/client.h"

namespace sbsh::client {

// Replaces each invalid UTF-8 sequence with U+FFFD; *was_valid says whether all was valid.
std::string utf8_repair(std::string_view s, bool* was_valid);
std::string base64(std::string_view s);
// The bytes of base64 text (padding optional); nullopt when it is not base64.
std::optional<std::string> unbase64(std::string_view s);
// Quoted and escaped; invalid UTF-8 becomes U+FFFD, so the document always parses.
std::string json_string(std::string_view s);
std::string rfc3339_ms(int64_t unix_ms);  // 2026-11-22T13:58:50.123Z

// Builds one JSON object, fields in insertion order.
class json_object {
 public:
  json_object& str(std::string_view k, std::string_view v);
  json_object& str_or_null(std::string_view k, std::string_view v) { return v.empty() ? null(k) : str(k, v); }
  json_object& signal(std::string_view k, const std::optional<int>& sig);  // "SIGKILL" or null
  json_object& strs(std::string_view k, const std::vector<std::string>& v);
  json_object& num(std::string_view k, int64_t v);
  json_object& boolean(std::string_view k, bool v);
  json_object& null(std::string_view k);
  json_object& raw(std::string_view k, std::string_view json);
  template <typename T>
  json_object& opt_num(std::string_view k, const std::optional<T>& v) {
    return v ? num(k, static_cast<int64_t>(*v)) : null(k);
  }
  [[nodiscard]] std::string finish() const { return body_ + "}"; }

 private:
  void key(std::string_view k);
  std::string body_ = "{";
};

// A kept command's id as users write it: "%17" (a background process's id is a bare number,
// and no process name holds '%'). parse_command_ref reads one back; nullopt when `s` is not
// one.
std::string command_ref(uint64_t id);
std::optional<uint64_t> parse_command_ref(std::string_view s);

// The fields of `sbsh exec --json`'s result, added to `j` (so that `exec --jsonl` puts the
// same ones in its "finished" event). `session` empty: "default".
void add_exec_result(json_object& j, std::string_view session, std::string_view command, const exec_result& r);

// The JSON form of each listing.
std::string to_json(const session_status& s);
std::string to_json(const session_detail& d);
std::string to_json(const proc_info& p);
std::string to_json(const daemon_status& st);
std::string to_json(const std::vector<session_status>& v);
std::string to_json(const std::vector<proc_info>& v);
// A file beneath a session's root, as `sbsh file stat --json` prints it: path, type, size,
// mode (octal text), mtime (RFC 3339) and a symlink's target; a listing as an array of them.
std::string to_json(const file_entry& e);
std::string to_json(const std::vector<file_entry>& v);
// An environment, as `sbsh env ls --json` prints it (and `env prune --json` what it deleted).
std::string to_json(const environment_info& e);
std::string to_json(const std::vector<environment_info>& v);
// The snapshot copies kept after their sessions, as `sbsh session ls --kept --json` prints
// them; without `sized` (what `prune --kept` deleted) their sizes are left out.
std::string to_json(const std::vector<kept_copy>& v, bool sized = true);
// Names, such as the sessions `session prune` removed.
std::string to_json(const std::vector<std::string>& names);

}  // namespace sbsh::client
