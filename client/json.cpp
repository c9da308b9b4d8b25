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

std::string json_string(std::string_view s) {
  bool valid;
  std::string repaired;
  if (!std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
    repaired = utf8_repair(s, &valid);
    s = repaired;
  }
  return "\"" + ipc::json_escape(s) + "\"";
}

std::string rfc3339_ms(int64_t unix_ms) {
  auto secs = static_cast<time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, unix_ms % 1000);
}

void json_object::key(std::string_view k) {
  if (body_.size() > 1) body_ += ',';
  body_ += json_string(k);
  body_ += ':';
}
json_object& json_object::str(std::string_view k, std::string_view v) {
  key(k);
  body_ += json_string(v);
  return *this;
}
json_object& json_object::signal(std::string_view k, const std::optional<int>& sig) {
  return sig ? str(k, ipc::signal_name(*sig)) : null(k);
}
json_object& json_object::strs(std::string_view k, const std::vector<std::string>& v) {
  std::string a = "[";
  for (const auto& x : v) a += (a.size() > 1 ? "," : "") + json_string(x);
  return raw(k, a + "]");
}
json_object& json_object::num(std::string_view k, int64_t v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}
json_object& json_object::boolean(std::string_view k, bool v) {
  key(k);
  body_ += v ? "true" : "false";
  return *this;
}
json_object& json_object::null(std::string_view k) {
  key(k);
  body_ += "null";
  return *this;
}
json_object& json_object::raw(std::string_view k, std::string_view json) {
  key(k);
  body_ += json;
  return *this;
}

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

void add_exec_result(json_object& j, std::string_view session, std::string_view command, const exec_result& r) {
  j.str("session", session.empty() ? "default" : session).str("command", command);
  if (r.command_id != 0) j.str("id", command_ref(r.command_id));
  else j.null("id");
  j.boolean("running", r.running);
  j.opt_num("exit_code", r.exit_code);
  j.signal("signal", r.signal)
      .boolean("timed_out", r.timed_out)
      .boolean("shell_restarted", r.shell_restarted)
      .boolean("cancelled", r.cancelled);
  j.boolean("ran", r.ran);
  j.num("generation", static_cast<int64_t>(r.generation)).boolean("state_lost", r.state_lost);
  // Every key is always there, null when it has no value, so that a reader need not ask.
  if (r.state_lost) j.str("state_lost_reason", r.state_lost_reason);
  else j.null("state_lost_reason");
  j.boolean("oom_killed", r.oom_killed);
  bool out_ok, err_ok;
  std::string out = utf8_repair(r.stdout_data, &out_ok);
  std::string err = utf8_repair(r.stderr_data, &err_ok);
  j.str("stdout", out).str("stderr", err);
  if (!out_ok) j.str("stdout_base64", base64(r.stdout_data));
  else j.null("stdout_base64");
  if (!err_ok) j.str("stderr_base64", base64(r.stderr_data));
  else j.null("stderr_base64");
  j.boolean("stdout_truncated", r.stdout_truncated).boolean("stderr_truncated", r.stderr_truncated);
  j.num("stdout_omitted_bytes", static_cast<int64_t>(r.stdout_omitted_bytes));
  j.num("stderr_omitted_bytes", static_cast<int64_t>(r.stderr_omitted_bytes));
  j.num("duration_ms", static_cast<int64_t>(r.duration_us / 1000));
  if (r.started_at_ms > 0) j.str("started_at", rfc3339_ms(r.started_at_ms));
  else j.null("started_at");
  j.str_or_null("error", r.error);
}

namespace {

template <typename T>
std::string array(const std::vector<T>& v) {
  std::string out = "[";
  for (const auto& x : v) out += (out.size() > 1 ? "," : "") + to_json(x);
  return out + "]";
}

}  // namespace

std::string to_json(const session_status& s) {
  json_object o;
  o.str("name", s.name).str("state", s.state).num("shell_pid", s.shell_pid).num("wrapper_pid", s.wrapper_pid);
  o.num("restarts", static_cast<int64_t>(s.restarts)).num("queued", static_cast<int64_t>(s.queued));
  o.num("commands", static_cast<int64_t>(s.commands)).str("cwd", s.cwd).str("restart", s.restart);
  o.num("uptime_ms", static_cast<int64_t>(s.uptime_ms));
  if (s.started_at_ms > 0) o.str("started_at", rfc3339_ms(s.started_at_ms));
  else o.null("started_at");
  if (!s.running.empty()) o.str("running", s.running).num("running_ms", static_cast<int64_t>(s.running_ms));
  else o.null("running").null("running_ms");
  o.str_or_null("error", s.error);
  o.boolean("implicit", s.implicit);
  if (s.idle_expiry_ms > 0) o.num("idle_expiry_ms", static_cast<int64_t>(s.idle_expiry_ms));
  else o.null("idle_expiry_ms");
  if (s.idle_since_ms > 0) o.str("idle_since", rfc3339_ms(s.idle_since_ms));
  else o.null("idle_since");
  if (s.expires_at_ms > 0) o.str("expires_at", rfc3339_ms(s.expires_at_ms));
  else o.null("expires_at");
  if (s.timeout_ms > 0) o.num("timeout_ms", static_cast<int64_t>(s.timeout_ms));
  else o.null("timeout_ms");
  return o.finish();
}

std::string to_json(const session_detail& d) {
  std::string hist = "[";
  for (const auto& h : d.history) {
    json_object o;
    o.str("command", h.command).opt_num("exit_code", h.exit_code).boolean("timed_out", h.timed_out);
    o.boolean("shell_restarted", h.shell_restarted).str("started_at", rfc3339_ms(h.started_at_ms));
    o.num("duration_ms", static_cast<int64_t>(h.duration_ms));
    hist += (hist.size() > 1 ? "," : "") + o.finish();
  }
  hist += "]";
  const auto& def = d.definition;
  json_object dj;
  dj.str("cwd", def.cwd).strs("env", def.env).strs("init", def.init).str("restart", def.restart).strs("limits", def.limits);
  if (!def.root.empty()) dj.str("root", def.root);
  else dj.null("root");
  if (!def.snapshot.empty()) {
    dj.str("snapshot", def.snapshot).strs("ignore", def.ignore).boolean("no_default_ignores", def.no_default_ignores);
    dj.boolean("gitignore", def.gitignore).strs("ignore_rules", ignore_rules(def));
    dj.boolean("keep_copy_on_failure", def.keep_copy_on_failure);
    dj.num("special_skipped", static_cast<int64_t>(def.special_skipped));
  }
  if (def.timeout_ms > 0) dj.num("timeout_ms", static_cast<int64_t>(def.timeout_ms));
  else dj.null("timeout_ms");
  if (!def.setup.empty()) dj.str("setup", def.setup).strs("setup_keys", def.setup_keys).str("sbsh_env", def.sbsh_env);
  bool cgroup_limits = def.memory_max != 0 || def.pids_max != 0 || def.cpu_millis != 0;
  if (def.confine || def.no_network || cgroup_limits || !def.cgroup.empty()) {
    // What the kernel holds the session to: its Landlock rules besides the system's, its
    // namespaces and its limits.
    json_object c;
    c.boolean("landlock", def.confine).num("landlock_abi", static_cast<int64_t>(def.landlock_abi));
    std::string rules = "[";
    auto rule = [&rules](std::string_view path, std::string_view access) {
      json_object r;
      r.str("path", path).str("access", access);
      rules += (rules.size() > 1 ? "," : "") + r.finish();
    };
    if (def.confine) {
      rule(def.root.empty() ? def.cwd : def.root, "read-write");
      rule("$TMPDIR", "read-write");
      for (const auto& p : def.allow_write) rule(p, "read-write");
      for (const auto& p : def.allow_read) rule(p, "read-execute");
      for (const auto& p : def.read_only) rule(p, "read-only");
    }
    c.raw("rules", rules + "]");
    std::vector<std::string> ns;
    if (def.confine) ns.emplace_back("pid");
    if (def.no_network) ns.emplace_back("net");
    c.strs("namespaces", ns).strs("limits", def.limits);
    // The cgroup's limits (0: none) and its directory (null: the session has none).
    c.num("memory_max", static_cast<int64_t>(def.memory_max)).num("pids_max", static_cast<int64_t>(def.pids_max));
    c.num("cpu_millis", static_cast<int64_t>(def.cpu_millis)).str_or_null("cgroup", def.cgroup);
    dj.raw("confinement", c.finish());
  }
  json_object o;
  o.raw("session", to_json(d.status)).raw("definition", dj.finish()).raw("history", hist);
  o.str("init_output", d.init_output);
  return o.finish();
}

std::string to_json(const proc_info& p) {
  json_object o;
  o.num("id", static_cast<int64_t>(p.id)).str("name", p.name).str("session", p.session).str("command", p.command);
  o.str("state", p.state);
  if (p.pid > 0) o.num("pid", p.pid).num("pgid", p.pid);
  else o.null("pid").null("pgid");
  o.opt_num("exit_code", p.exit_code);
  o.signal("signal", p.signal);
  o.str("started_at", rfc3339_ms(p.started_at_ms));
  if (p.ended_at_ms > 0) o.str("ended_at", rfc3339_ms(p.ended_at_ms));
  else o.null("ended_at");
  o.str_or_null("error", p.error).str("log", p.log_path);
  return o.finish();
}

std::string to_json(const daemon_status& st) {
  const auto& n = st.counters;
  json_object c;
  c.num("commands", static_cast<int64_t>(n.commands)).num("failed", static_cast<int64_t>(n.failed));
  c.num("timed_out", static_cast<int64_t>(n.timed_out)).num("shell_restarts", static_cast<int64_t>(n.shell_restarts));
  c.num("bytes_streamed", static_cast<int64_t>(n.bytes_streamed)).num("clients", static_cast<int64_t>(n.clients));
  json_object o;
  o.num("pid", st.pid).str("version", st.version).num("uptime_ms", static_cast<int64_t>(st.uptime_ms));
  o.str("socket", st.socket_path).raw("counters", c.finish()).raw("sessions", to_json(st.sessions));
  return o.finish();
}

std::string to_json(const std::vector<session_status>& v) { return array(v); }
std::string to_json(const std::vector<proc_info>& v) { return array(v); }

std::string to_json(const file_entry& e) {
  json_object o;
  o.str("path", e.path).str("type", e.type).num("size", static_cast<int64_t>(e.size));
  o.str("mode", fmt::format("{:04o}", e.mode)).str("mtime", rfc3339_ms(e.mtime_ms));
  if (e.type == "symlink") o.str("target", e.target);
  return o.finish();
}

std::string to_json(const std::vector<file_entry>& v) { return array(v); }

std::string to_json(const environment_info& e) {
  json_object o;
  o.str("hash", e.hash).str("path", e.path).str("setup", e.setup).strs("keys", e.keys);
  o.num("size_bytes", static_cast<int64_t>(e.size_bytes));
  o.str("created_at", rfc3339_ms(e.created_at_ms)).str("last_used", rfc3339_ms(e.last_used_ms));
  o.strs("sessions", e.sessions);
  return o.finish();
}

std::string to_json(const std::vector<environment_info>& v) { return array(v); }

std::string to_json(const std::vector<kept_copy>& v, bool sized) {
  std::string out = "[";
  for (const auto& k : v) {
    json_object o;
    o.str("session", k.session).str("path", k.path).str("kept_at", rfc3339_ms(k.kept_at_ms));
    if (sized) o.num("size_bytes", static_cast<int64_t>(k.size_bytes));
    out += (out.size() > 1 ? "," : "") + o.finish();
  }
  return out + "]";
}

std::string to_json(const std::vector<std::string>& names) {
  std::string out = "[";
  for (const auto& n : names) out += (out.size() > 1 ? "," : "") + json_string(n);
  return out + "]";
}

}  // namespace sbsh::client
