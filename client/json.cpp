// JSON for --json and the C ABI: the writer and the JSON form of each listing.
#include "client/json.h"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "ipc/text.h"

namespace sbsh::client {

std::string utf8_repair(std::string_view s, bool* was_valid) { return ipc::utf8_repair(s, was_valid); }

std::string base64(std::string_view s) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((s.size() + 2) / 3 * 4);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8) | p[i + 2];
    for (int k = 18; k >= 0; k -= 6) out += kAlphabet[(v >> k) & 63];
  }
  if (i < s.size()) {
    uint32_t v = uint32_t{p[i]} << 16;
    if (i + 1 < s.size()) v |= uint32_t{p[i + 1]} << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < s.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> unbase64(std::string_view s) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  while (!s.empty() && s.back() == '=') s.remove_suffix(1);
  if (s.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(s.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    int v = value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

std::string rfc3339_ms(int64_t unix_ms) {
  auto secs = static_cast<time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, unix_ms % 1000);
}

std::string dump_json(const json_value& j) { return j.dump(-1, ' ', false, json_value::error_handler_t::replace); }

json_value signal_json(const std::optional<int>& sig) {
  return sig ? json_value(std::string(ipc::signal_name(*sig))) : json_value(nullptr);
}

json_value text_or_null(std::string_view s) { return s.empty() ? json_value(nullptr) : json_value(s); }

json_value time_or_null(int64_t unix_ms) { return unix_ms > 0 ? json_value(rfc3339_ms(unix_ms)) : json_value(nullptr); }

namespace {

// A count, null when it is 0 (none is set).
json_value count_or_null(uint64_t n) { return n > 0 ? json_value(n) : json_value(nullptr); }

// A name or path at `key`. A file name is bytes, and JSON text cannot hold those that are not
// UTF-8: such a name is there with U+FFFD in their place and, beside it at KEY_base64, its
// exact bytes, as stdout_base64 goes with stdout, so that a reader can name the file again.
// (The names that sbshd sends with their exact bytes, at NAME_bytes beside NAME, use it: a
// file entry's path and target, a session's cwd, root and snapshot, a kept copy's path; the
// others reach the client as UTF-8 already.)
void put_name(json_value& o, const std::string& key, std::string_view name) {
  bool valid = true;
  std::string text = utf8_repair(name, &valid);
  o[key] = std::move(text);
  if (!valid) o[key + "_base64"] = base64(name);
}

// A list of names at `key`, each as put_name() puts one; when any is not UTF-8, KEY_base64
// beside it holds each one's exact bytes (null for those that are UTF-8).
void put_names(json_value& o, const std::string& key, const std::vector<std::string>& names) {
  json_value texts = json_value::array(), exact = json_value::array();
  bool any = false;
  for (const auto& n : names) {
    bool valid = true;
    texts.push_back(utf8_repair(n, &valid));
    exact.push_back(valid ? json_value(nullptr) : json_value(base64(n)));
    any = any || !valid;
  }
  o[key] = std::move(texts);
  if (any) o[key + "_base64"] = std::move(exact);
}

}  // namespace

std::string command_ref(uint64_t id) { return "%" + std::to_string(id); }

std::optional<uint64_t> parse_command_ref(std::string_view s) {
  if (s.size() < 2 || s.size() > 21 || s[0] != '%') return std::nullopt;
  uint64_t v = 0;
  for (char c : s.substr(1)) {
    if (c < '0' || c > '9' || v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v == 0) return std::nullopt;
  return v;
}

void add_exec_result(json_value& j, std::string_view session, std::string_view command, const exec_result& r) {
  j["session"] = session.empty() ? "default" : session;
  j["command"] = command;
  j["id"] = r.command_id != 0 ? json_value(command_ref(r.command_id)) : json_value(nullptr);
  j["running"] = r.running;
  j["waiting_for_input"] = r.waiting_for_input;
  j["prompt"] = r.running ? json_value(r.prompt) : json_value(nullptr);
  j["screen"] = r.screen.empty() ? json_value(nullptr) : json_value(r.screen);
  j["next_offset"] = fmt::format("{}:{}", r.stdout_bytes, r.stderr_bytes);
  j["exit_code"] = opt_json(r.exit_code);
  j["signal"] = signal_json(r.signal);
  j["timed_out"] = r.timed_out;
  j["shell_restarted"] = r.shell_restarted;
  j["cancelled"] = r.cancelled;
  j["ran"] = r.ran;
  j["generation"] = r.generation;
  j["state_lost"] = r.state_lost;
  // Every key is always there, null when it has no value, so that a reader need not ask.
  j["state_lost_reason"] = r.state_lost ? json_value(r.state_lost_reason) : json_value(nullptr);
  j["oom_killed"] = r.oom_killed;
  bool out_ok, err_ok;
  j["stdout"] = utf8_repair(r.stdout_data, &out_ok);
  j["stderr"] = utf8_repair(r.stderr_data, &err_ok);
  j["stdout_base64"] = out_ok ? json_value(nullptr) : json_value(base64(r.stdout_data));
  j["stderr_base64"] = err_ok ? json_value(nullptr) : json_value(base64(r.stderr_data));
  j["stdout_truncated"] = r.stdout_truncated;
  j["stderr_truncated"] = r.stderr_truncated;
  j["stdout_omitted_bytes"] = r.stdout_omitted_bytes;
  j["stderr_omitted_bytes"] = r.stderr_omitted_bytes;
  j["duration_ms"] = r.duration_us / 1000;
  j["started_at"] = time_or_null(r.started_at_ms);
  j["error"] = text_or_null(r.error);
}

json_value json_of(const session_status& s) {
  json_value o;
  o["name"] = s.name;
  o["state"] = s.state;
  o["shell_pid"] = s.shell_pid;
  o["wrapper_pid"] = s.wrapper_pid;
  o["restarts"] = s.restarts;
  o["queued"] = s.queued;
  o["commands"] = s.commands;
  put_name(o, "cwd", s.cwd);
  o["restart"] = s.restart;
  o["uptime_ms"] = s.uptime_ms;
  o["started_at"] = time_or_null(s.started_at_ms);
  o["running"] = text_or_null(s.running);
  o["running_ms"] = s.running.empty() ? json_value(nullptr) : json_value(s.running_ms);
  o["error"] = text_or_null(s.error);
  o["implicit"] = s.implicit;
  o["idle_expiry_ms"] = count_or_null(s.idle_expiry_ms);
  o["idle_since"] = time_or_null(s.idle_since_ms);
  o["expires_at"] = time_or_null(s.expires_at_ms);
  o["timeout_ms"] = count_or_null(s.timeout_ms);
  return o;
}

namespace {

// What the kernel holds a session to: its Landlock rules besides the system's, its
// namespaces and its limits; the cgroup's limits (0: none) and its directory (null: none).
json_value confinement_json(const session_spec& def) {
  json_value c;
  c["landlock"] = def.confine;
  c["landlock_abi"] = def.landlock_abi;
  json_value rules = json_value::array();
  auto rule = [&rules](std::string_view path, std::string_view access) {
    json_value r;
    put_name(r, "path", path);
    r["access"] = access;
    rules.push_back(std::move(r));
  };
  if (def.confine) {
    rule(def.root.empty() ? def.cwd : def.root, "read-write");
    rule("$TMPDIR", "read-write");
    for (const auto& p : def.allow_write) rule(p, "read-write");
    for (const auto& p : def.allow_read) rule(p, "read-execute");
    for (const auto& p : def.read_only) rule(p, "read-only");
  }
  c["rules"] = std::move(rules);
  std::vector<std::string> ns;
  if (def.confine) ns.emplace_back("pid");
  if (def.no_network) ns.emplace_back("net");
  c["namespaces"] = ns;
  c["limits"] = def.limits;
  c["memory_max"] = def.memory_max;
  c["pids_max"] = def.pids_max;
  c["cpu_millis"] = def.cpu_millis;
  c["cgroup"] = text_or_null(def.cgroup);
  return c;
}

json_value definition_json(const session_spec& def) {
  json_value d;
  put_name(d, "cwd", def.cwd);
  d["env"] = def.env;
  d["init"] = def.init;
  d["restart"] = def.restart;
  d["limits"] = def.limits;
  if (def.root.empty()) d["root"] = nullptr;
  else put_name(d, "root", def.root);
  if (!def.snapshot.empty()) {
    put_name(d, "snapshot", def.snapshot);
    d["ignore"] = def.ignore;
    d["no_default_ignores"] = def.no_default_ignores;
    d["gitignore"] = def.gitignore;
    d["ignore_rules"] = ignore_rules(def);
    d["keep_copy_on_failure"] = def.keep_copy_on_failure;
    d["special_skipped"] = def.special_skipped;
  }
  d["timeout_ms"] = count_or_null(def.timeout_ms);
  if (!def.setup.empty()) {
    d["setup"] = def.setup;
    put_names(d, "setup_keys", def.setup_keys);
    d["sbsh_env"] = def.sbsh_env;
  }
  bool cgroup_limits = def.memory_max != 0 || def.pids_max != 0 || def.cpu_millis != 0;
  if (def.confine || def.no_network || cgroup_limits || !def.cgroup.empty()) d["confinement"] = confinement_json(def);
  return d;
}

}  // namespace

json_value json_of(const session_detail& d) {
  json_value history = json_value::array();
  for (const auto& h : d.history) {
    json_value o;
    o["command"] = h.command;
    o["exit_code"] = opt_json(h.exit_code);
    o["timed_out"] = h.timed_out;
    o["shell_restarted"] = h.shell_restarted;
    o["started_at"] = rfc3339_ms(h.started_at_ms);
    o["duration_ms"] = h.duration_ms;
    history.push_back(std::move(o));
  }
  json_value o;
  o["session"] = json_of(d.status);
  o["definition"] = definition_json(d.definition);
  o["history"] = std::move(history);
  o["init_output"] = d.init_output;
  return o;
}

json_value json_of(const proc_info& p) {
  json_value o;
  o["id"] = p.id;
  o["name"] = p.name;
  o["session"] = p.session;
  o["command"] = p.command;
  o["state"] = p.state;
  o["pid"] = p.pid > 0 ? json_value(p.pid) : json_value(nullptr);
  o["pgid"] = o["pid"];
  o["exit_code"] = opt_json(p.exit_code);
  o["signal"] = signal_json(p.signal);
  o["started_at"] = rfc3339_ms(p.started_at_ms);
  o["ended_at"] = time_or_null(p.ended_at_ms);
  o["error"] = text_or_null(p.error);
  put_name(o, "log", p.log_path);
  return o;
}

json_value json_of(const command_info& c) {
  json_value o;
  o["id"] = command_ref(c.id);
  o["session"] = c.session;
  o["command"] = c.command;
  o["state"] = c.state;
  o["detached"] = c.detached;
  o["pid"] = c.pid > 0 ? json_value(c.pid) : json_value(nullptr);
  o["exit_code"] = opt_json(c.exit_code);
  o["signal"] = signal_json(c.signal);
  o["timed_out"] = c.timed_out;
  o["cancelled"] = c.cancelled;
  o["started_at"] = time_or_null(c.started_at_ms);
  o["ended_at"] = time_or_null(c.ended_at_ms);
  return o;
}

json_value json_of(const daemon_status& st) {
  const auto& n = st.counters;
  json_value c;
  c["commands"] = n.commands;
  c["failed"] = n.failed;
  c["timed_out"] = n.timed_out;
  c["shell_restarts"] = n.shell_restarts;
  c["bytes_streamed"] = n.bytes_streamed;
  c["clients"] = n.clients;
  json_value o;
  o["pid"] = st.pid;
  o["version"] = st.version;
  o["uptime_ms"] = st.uptime_ms;
  o["socket"] = st.socket_path;
  o["counters"] = std::move(c);
  o["descriptor_limit"] = st.descriptor_limit;
  o["sessions_supported"] = st.sessions_supported;
  o["sessions"] = json_of(st.sessions);
  return o;
}

json_value json_of(const file_entry& e) {
  json_value o;
  put_name(o, "path", e.path);
  o["type"] = e.type;
  o["size"] = e.size;
  o["mode"] = fmt::format("{:04o}", e.mode);
  o["mtime"] = rfc3339_ms(e.mtime_ms);
  if (e.type == "symlink") put_name(o, "target", e.target);
  return o;
}

json_value json_of(std::string_view path, const file_edit_result& r) {
  json_value o;
  put_name(o, "path", path);
  o["replacements"] = r.replacements;
  o["bytes"] = r.bytes;
  o["first_line"] = r.first_line;
  return o;
}

json_value json_of(std::string_view path, const file_lines& l) {
  json_value o;
  put_name(o, "path", path);
  o["bytes"] = l.content.size();
  bool utf8 = ipc::valid_utf8(l.content);
  o["content"] = utf8 ? l.content : base64(l.content);
  o["encoding"] = utf8 ? "utf-8" : "base64";
  o["truncated"] = l.truncated;
  o["start_line"] = l.start_line;
  o["end_line"] = l.end_line;
  o["total_lines"] = l.total_lines;
  return o;
}

json_value json_of(const file_search_result& r) {
  json_value matches = json_value::array();
  for (const auto& m : r.matches) {
    json_value one;
    put_name(one, "path", m.path);
    one["line"] = m.line;
    put_name(one, "text", m.text);
    matches.push_back(std::move(one));
  }
  json_value o;
  o["matches"] = std::move(matches);
  o["files_searched"] = r.files_searched;
  o["files_skipped"] = r.files_skipped;
  o["truncated"] = r.truncated;
  put_name(o, "dir", r.dir);
  return o;
}

json_value json_of(const environment_info& e) {
  json_value o;
  o["hash"] = e.hash;
  put_name(o, "path", e.path);
  o["setup"] = e.setup;
  o["keys"] = e.keys;
  o["size_bytes"] = e.size_bytes;
  o["created_at"] = rfc3339_ms(e.created_at_ms);
  o["last_used"] = rfc3339_ms(e.last_used_ms);
  o["sessions"] = e.sessions;
  return o;
}

json_value json_of(const std::vector<kept_copy>& v, bool sized) {
  json_value a = json_value::array();
  for (const auto& k : v) {
    json_value o;
    o["session"] = k.session;
    put_name(o, "path", k.path);
    o["kept_at"] = rfc3339_ms(k.kept_at_ms);
    if (sized) o["size_bytes"] = k.size_bytes;
    a.push_back(std::move(o));
  }
  return a;
}

json_value json_of(const std::vector<std::string>& names) { return names; }

}  // namespace sbsh::client
