// sbsh session create|ls|show|rm|restart, and sbsh ps: sessions and their shells.
#include <cstdio>

#include <fmt/format.h>

#include "client/cli/cli.h"
#include "client/json.h"
#include "ipc/limits.h"

namespace sbsh::cli {

std::string human_duration(uint64_t ms) {
  uint64_t s = ms / 1000;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}d{}h", s / 86400, (s % 86400) / 3600);
}

namespace {

std::string one_line(std::string s, size_t max) {
  for (auto& ch : s)
    if (ch == '\n' || ch == '\t') ch = ' ';
  if (s.size() > max) s = s.substr(0, max - 3) + "...";
  return s;
}

}  // namespace

void print_session_table(const std::vector<client::session_status>& v) {
  if (v.empty()) {
    std::puts("no sessions");
    return;
  }
  std::printf("%-16s %-10s %8s %8s %8s %8s %5s  %-24s %s\n", "SESSION", "STATE", "WRAPPER", "SHELL", "RESTARTS",
              "UPTIME", "QUEUE", "CWD", "RUNNING");
  for (const auto& s : v) {
    std::string running = s.running.empty() ? "" : fmt::format("{} ({})", one_line(s.running, 40), human_duration(s.running_ms));
    if (!s.error.empty() && s.running.empty()) running = one_line(s.error, 60);
    std::printf("%-16s %-10s %8lld %8lld %8llu %8s %5llu  %-24s %s\n", s.name.c_str(), s.state.c_str(),
                static_cast<long long>(s.wrapper_pid), static_cast<long long>(s.shell_pid),
                static_cast<unsigned long long>(s.restarts), human_duration(s.uptime_ms).c_str(),
                static_cast<unsigned long long>(s.queued), one_line(s.cwd, 24).c_str(), running.c_str());
  }
}

namespace {

int session_create(const global_opts& g, const args& a) {
  client::session_spec spec;
  std::string err;
  for (size_t i = 0; i < a.size(); ++i) {
    std::string_view v;
    if (a[i] == "-h" || a[i] == "--help") return print_usage(*find_command("session"));
    if (take_option(a, i, "-C", "--cwd", &v, &err)) {
      spec.cwd = std::string(v);
    } else if (take_option(a, i, "", "--snapshot", &v, &err)) {
      spec.snapshot = std::string(v);
    } else if (take_option(a, i, "-e", "--env", &v, &err)) {
      if (v.find('=') == std::string_view::npos) err = fmt::format("option -e takes NAME=VALUE, not '{}'", v);
      spec.env.emplace_back(v);
    } else if (take_option(a, i, "", "--init", &v, &err)) {
      spec.init.emplace_back(v);
    } else if (take_option(a, i, "", "--limit", &v, &err)) {
      if (auto l = ipc::parse_limit(v); !l) err = l.err().message;
      spec.limits.emplace_back(v);
    } else if (take_option(a, i, "", "--restart", &v, &err)) {
      if (v != "always" && v != "on-failure" && v != "never")
        err = fmt::format("--restart takes always, on-failure or never, not '{}'", v);
      spec.restart = std::string(v);
    } else if (!a[i].empty() && a[i][0] == '-') {
      return fail(fmt::format("unknown option '{}' for session create", a[i]));
    } else if (spec.name.empty()) {
      spec.name = std::string(a[i]);
    } else {
      return fail(fmt::format("unexpected argument '{}': session create takes one NAME", a[i]));
    }
    if (!err.empty()) return fail(err);
  }
  if (spec.name.empty()) return fail("session create needs a NAME");
  if (!spec.cwd.empty() && !spec.snapshot.empty())
    return fail("-C and --snapshot do not go together: a session made from a snapshot starts in its copy");
  auto conn = connect(g, true);
  if (!conn) return fail(conn.err().message);
  // The library takes a relative directory from this one; on a far host that means nothing.
  for (auto [option, dir] : {std::pair{"-C", &spec.cwd}, std::pair{"--snapshot", &spec.snapshot}})
    if (conn->remote() && !dir->empty() && (*dir)[0] != '/')
      return fail(fmt::format("{} {}: give an absolute path; this directory is on the far host, where this "
                              "one's current directory means nothing",
                              option, *dir));
  if (auto s = conn->create_session(spec); !s) return fail(s.err().message);
  return 0;
}

int session_ls(const global_opts& g, const args& a, bool all_columns) {
  bool json = false, all = false;
  for (auto v : a) {
    if (v == "--json") json = true;
    else if ((v == "-a" || v == "--all") && all_columns) all = true;
    else if (v == "-h" || v == "--help") return print_usage(*find_command(all_columns ? "ps" : "session"));
    else return fail(fmt::format("unknown argument '{}'", v));
  }
  auto conn = connect(g, false);
  if (!conn) {
    if (conn.err().code != "unreachable") return fail(conn.err().message);
    if (json) std::puts(all_columns ? "{\"sessions\":[],\"processes\":[]}" : "[]");
    else std::puts("no sessions (sbshd is not running)");
    return 0;
  }
  auto v = conn->sessions();
  if (!v) return fail(v.err().message);
  std::vector<client::proc_info> procs;
  if (all_columns) {
    auto p = conn->processes(all);
    if (!p) return fail(p.err().message);
    procs = std::move(*p);
  }
  if (json) {
    std::string s = client::to_json(*v);
    if (all_columns) s = "{\"sessions\":" + s + ",\"processes\":" + client::to_json(procs) + "}";
    std::puts(s.c_str());
  } else {
    print_session_table(*v);
    print_proc_table(procs);
  }
  return 0;
}

int session_named(const global_opts& g, const args& a, std::string_view what) {
  std::string name;
  bool json = false;
  for (auto v : a) {
    if (v == "--json" && what == "show") json = true;
    else if (v == "-h" || v == "--help") return print_usage(*find_command("session"));
    else if (!v.empty() && v[0] == '-') return fail(fmt::format("unknown option '{}' for session {}", v, what));
    else if (name.empty()) name = std::string(v);
    else return fail(fmt::format("session {} takes one NAME", what));
  }
  if (name.empty()) return fail(fmt::format("session {} needs a NAME", what));
  auto conn = connect(g, false);
  if (!conn) return fail(conn.err().message);
  if (what == "rm") {
    if (auto s = conn->remove_session(name); !s) return fail(s.err().message);
    return 0;
  }
  if (what == "restart") {
    if (auto s = conn->restart_session(name); !s) return fail(s.err().message);
    return 0;
  }
  auto d = conn->show_session(name);
  if (!d) return fail(d.err().message);
  if (json) {
    std::puts(client::to_json(*d).c_str());
    return 0;
  }
  const auto& def = d->definition;
  const auto& s = d->status;
  std::printf("session     %s\nstate       %s%s%s\n", s.name.c_str(), s.state.c_str(), s.error.empty() ? "" : ": ",
              s.error.c_str());
  std::printf("pids        wrapper %lld, shell %lld\nrestarts    %llu (policy %s)\nuptime      %s\n",
              static_cast<long long>(s.wrapper_pid), static_cast<long long>(s.shell_pid),
              static_cast<unsigned long long>(s.restarts), def.restart.c_str(), human_duration(s.uptime_ms).c_str());
  std::printf("cwd         %s\ndefined in  %s\n", s.cwd.c_str(), def.cwd.c_str());
  for (const auto& e : def.env) std::printf("env         %s\n", e.c_str());
  for (const auto& i : def.init) std::printf("init        %s\n", one_line(i, 100).c_str());
  for (const auto& l : def.limits) std::printf("limit       %s\n", l.c_str());
  if (!def.snapshot.empty()) std::printf("snapshot of %s\n", def.snapshot.c_str());
  if (!s.running.empty())
    std::printf("running     %s (%s)\n", one_line(s.running, 80).c_str(), human_duration(s.running_ms).c_str());
  if (!d->init_output.empty()) std::printf("init output:\n%s%s", d->init_output.c_str(), d->init_output.back() == '\n' ? "" : "\n");
  if (!d->history.empty()) {
    std::puts("last commands:");
    for (const auto& h : d->history) {
      std::string code = h.timed_out ? "timeout" : h.exit_code ? std::to_string(*h.exit_code) : "lost";
      std::printf("  %s  %7s  %6llums  %s\n", client::rfc3339_ms(h.started_at_ms).c_str(), code.c_str(),
                  static_cast<unsigned long long>(h.duration_ms), one_line(h.command, 80).c_str());
    }
  }
  return 0;
}

}  // namespace

int cmd_session(const global_opts& g, const args& a) {
  if (a.empty() || a[0] == "-h" || a[0] == "--help") return print_usage(*find_command("session"));
  args rest(a.begin() + 1, a.end());
  if (a[0] == "create") return session_create(g, rest);
  if (a[0] == "ls" || a[0] == "list") return session_ls(g, rest, false);
  if (a[0] == "show" || a[0] == "rm" || a[0] == "restart") return session_named(g, rest, a[0]);
  return fail(fmt::format("unknown session command '{}': use create, ls, show, rm or restart", a[0]));
}

int cmd_ps(const global_opts& g, const args& a) { return session_ls(g, a, true); }

}  // namespace sbsh::cli
