// sbsh session create|ls|show|rm|restart|prune: define sessions, list them, look at one,
// remove or restart one, remove those made implicitly that are idle.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <memory>

#include <fmt/format.h>

#include "cli/cli.h"
#include "client/json.h"
#include "client/request.h"
#include "client/resources.h"
#include "common/limits.h"
#include "ipc/protocol.h"

namespace sbsh::cli {

namespace {

namespace msg = ipc::msg;

struct session_args {
  client::session_spec spec;  // create
  std::string idle_expiry;    // create
  std::string memory, cpu;    // create: as given, checked
  std::chrono::milliseconds timeout{0};  // create: the default timeout of its commands
  std::string name;           // show, rm, restart
  bool json = false;          // ls, show, prune
  bool kept = false;          // ls, prune: the kept copies rather than sessions
  bool keep_copy = false;     // rm
  std::chrono::milliseconds idle{0};  // prune
};

// --idle-expiry: a duration, or never.
std::string check_expiry(std::string_view option, const std::string& v) {
  if (v == "never") return {};
  auto d = client::parse_duration(v);
  if (!d) return fmt::format("{}: {}", option, d.err().message);
  return d->count() > 0 ? std::string() : fmt::format("{}: give a duration above zero, or never", option);
}

int prune_sessions(const global_opts& g, const session_args& a) {
  auto conn = connect(g);
  if (!conn) return fail(conn.err());
  auto idle = static_cast<uint64_t>(std::max<int64_t>(a.idle.count(), 0));
  auto names = client::request<msg::session_pruned>(*conn, msg::session_prune{idle}, client::pruned_names);
  if (!names) return fail(names.err());
  if (a.json) {
    std::puts(client::to_json(*names).c_str());
  } else {
    for (const auto& n : *names) std::printf("removed session %s\n", n.c_str());
  }
  return 0;
}

// ls --kept and prune --kept: the snapshot copies kept after their sessions.
int kept_copies(const global_opts& g, const session_args& a, bool prune) {
  auto conn = connect(g);
  if (!conn) return fail(conn.err());
  auto copies = prune ? client::request<msg::kept_info>(*conn, msg::kept_prune{}, &msg::kept_info::copies)
                      : client::request<msg::kept_info>(*conn, msg::kept_list{}, &msg::kept_info::copies);
  if (!copies) return fail(copies.err());
  if (a.json) {
    std::puts(client::to_json(*copies, !prune).c_str());
  } else if (prune) {
    for (const auto& k : *copies) std::printf("deleted %s\n", displayable(k.path, false).c_str());
  } else if (!copies->empty()) {
    std::printf("%-20s %-24s %10s  %s\n", "SESSION", "KEPT", "SIZE", "PATH");
    for (const auto& k : *copies)
      std::printf("%-20s %-24s %10s  %s\n", displayable(k.session, false).c_str(), client::rfc3339_ms(k.kept_at_ms).c_str(),
                  human_bytes(k.size_bytes).c_str(), displayable(k.path, false).c_str());
  }
  return 0;
}

int create_session(const global_opts& g, client::session_spec& spec, const std::string& idle_expiry) {
  if (spec.name.empty()) return fail("session create needs a NAME");
  if (spec.snapshot.empty() && (!spec.ignore.empty() || spec.no_default_ignores || spec.gitignore))
    return fail("--ignore, --no-default-ignores and --gitignore say what a snapshot leaves out: give --snapshot DIR too");
  if (spec.setup.empty() && !spec.setup_keys.empty())
    return fail("--setup-key names a file the environment's setup depends on: give --setup COMMAND too");
  if (spec.snapshot.empty() && spec.keep_copy_on_failure)
    return fail("--keep-copy-on-failure keeps a snapshot's copy: give --snapshot DIR too");
  if (!idle_expiry.empty() && idle_expiry != "never")
    spec.idle_expiry_ms = static_cast<uint64_t>(client::parse_duration(idle_expiry)->count());
  if (!spec.cwd.empty() && !spec.snapshot.empty())
    return fail("-C and --snapshot do not go together: a session made from a snapshot starts in its copy");
  if (!spec.root.empty() && !spec.snapshot.empty())
    return fail("--root and --snapshot do not go together: a session made from a snapshot has its copy as its root");
  if (spec.confine && spec.root.empty() && spec.snapshot.empty())
    return fail("--confine confines the session to its root: give --root DIR or --snapshot DIR too");
  if (!spec.confine && (!spec.allow_write.empty() || !spec.allow_read.empty() || !spec.read_only.empty()))
    return fail("--allow-write, --allow-read and --read-only add to a confined session's rules: give --confine too");
  auto conn = connect(g);
  if (!conn) return fail(conn.err());
  // The library takes a relative directory from this one; on a far host that means nothing.
  // With --root, a relative -C is taken from the root instead.
  std::string no_cwd;
  for (auto [option, dir] : {std::pair{"-C", spec.root.empty() ? &spec.cwd : &no_cwd},
                             std::pair{"--snapshot", &spec.snapshot}, std::pair{"--root", &spec.root}})
    if (conn->remote() && !dir->empty() && (*dir)[0] != '/')
      return fail(
          fmt::format("{} {}: give an absolute path; this directory is on the far host, where this "
                      "one's current directory means nothing",
                      option, *dir));
  // A confined session's paths are the kernel's: absolute, from this directory.
  for (auto [option, list] : {std::pair{"--allow-write", &spec.allow_write}, std::pair{"--allow-read", &spec.allow_read},
                              std::pair{"--read-only", &spec.read_only}})
    for (auto& p : *list) {
      if (p[0] == '/') continue;
      if (conn->remote()) return fail(fmt::format("{} {}: give an absolute path for the far host", option, p));
      p = std::filesystem::absolute(p).lexically_normal().string();
    }
  // A setup's output, as it runs, to this terminal.
  bool shown = false;
  auto s = conn->create_session(spec, [&shown](client::stream st, std::string_view data) {
    shown = true;
    std::fwrite(data.data(), 1, data.size(), st == client::stream::err ? stderr : stdout);
    std::fflush(st == client::stream::err ? stderr : stdout);
  });
  if (!s) {
    // The end of a failed setup's output, which the error repeats, is already on the screen.
    std::string message = s.err().message;
    size_t tail = message.find(ipc::kSetupOutputFollows);
    if (shown && ipc::has_code(s.err(), ipc::errc::setup_failed) && tail != std::string::npos)
      message = message.substr(0, tail) + "; its output is above";
    return fail(message, s.err().code);
  }
  return 0;
}

void print_detail(const client::session_detail& d) {
  const auto& def = d.definition;
  const auto& s = d.status;
  auto show = [](std::string_view t) { return displayable(t, false); };
  std::printf("session     %s\nstate       %s%s%s\n", show(s.name).c_str(), show(s.state).c_str(),
              s.error.empty() ? "" : ": ", show(s.error).c_str());
  std::printf("pids        wrapper %lld, shell %lld\nrestarts    %llu (policy %s)\nuptime      %s\n",
              static_cast<long long>(s.wrapper_pid), static_cast<long long>(s.shell_pid),
              static_cast<unsigned long long>(s.restarts), show(def.restart).c_str(), human_duration(s.uptime_ms).c_str());
  std::printf("cwd         %s\ndefined in  %s\n", show(s.cwd).c_str(), show(def.cwd).c_str());
  if (!def.root.empty()) std::printf("root        %s\n", show(def.root).c_str());
  for (const auto& e : def.env) std::printf("env         %s\n", show(e).c_str());
  for (const auto& i : def.init) std::printf("init        %s\n", one_line(i, 100).c_str());
  for (const auto& l : def.limits) std::printf("limit       %s\n", show(l).c_str());
  if (!def.snapshot.empty()) {
    std::printf("snapshot of %s\n", show(def.snapshot).c_str());
    // The rules in force, in the order they apply (a later one wins).
    for (const auto& r : ignore_rules(def)) std::printf("ignore      %s\n", show(r).c_str());
    if (def.gitignore) std::puts("ignore      and the tree's own .gitignore files");
    std::printf("skipped     %llu special files (fifos, sockets, devices)\n",
                static_cast<unsigned long long>(def.special_skipped));
    if (def.keep_copy_on_failure) std::puts("keep copy   when the last command failed, at session rm");
  }
  if (def.confine) {
    std::printf("confined    by Landlock ABI %llu, in a PID namespace of its own\n",
                static_cast<unsigned long long>(def.landlock_abi));
    for (const auto& p : def.allow_write) std::printf("may write   %s\n", show(p).c_str());
    for (const auto& p : def.allow_read) std::printf("may read    %s\n", show(p).c_str());
    for (const auto& p : def.read_only) std::printf("read-only   %s\n", show(p).c_str());
  }
  if (def.no_network) std::puts("network     none (loopback only)");
  if (!def.cgroup.empty()) std::printf("cgroup      %s\n", show(def.cgroup).c_str());
  if (def.memory_max != 0) std::printf("memory      at most %s, swap included\n", human_bytes(def.memory_max).c_str());
  if (def.pids_max != 0) std::printf("processes   at most %llu\n", static_cast<unsigned long long>(def.pids_max));
  if (def.cpu_millis != 0)
    std::printf("cpu         at most %llu.%03llu CPUs\n", static_cast<unsigned long long>(def.cpu_millis / 1000),
                static_cast<unsigned long long>(def.cpu_millis % 1000));
  if (!def.setup.empty()) {
    std::printf("setup       %s\n", one_line(def.setup, 100).c_str());
    for (const auto& k : def.setup_keys) std::printf("setup key   %s\n", show(k).c_str());
    std::printf("SBSH_ENV    %s\n", show(def.sbsh_env).c_str());
  }
  std::printf("made        %s\n", s.implicit ? "implicitly (exec -s or start -s)" : "by session create");
  if (s.idle_expiry_ms == 0) std::puts("expiry      never");
  else if (s.expires_at_ms > 0)
    std::printf("expiry      after %s idle: at %s\n", human_duration(s.idle_expiry_ms).c_str(),
                client::rfc3339_ms(s.expires_at_ms).c_str());
  else std::printf("expiry      after %s idle (busy now)\n", human_duration(s.idle_expiry_ms).c_str());
  if (def.timeout_ms == 0) std::puts("timeout     none");
  else std::printf("timeout     %s, for a command that gives none\n",
                   def.timeout_ms % 1000 != 0 ? fmt::format("{}ms", def.timeout_ms).c_str()
                                              : human_duration(def.timeout_ms).c_str());
  if (!s.running.empty())
    std::printf("running     %s (%s)\n", one_line(s.running, 80).c_str(), human_duration(s.running_ms).c_str());
  if (!d.init_output.empty()) {
    // Output, so its lines stay; but no escape sequence of it reaches the terminal.
    std::string out = displayable(d.init_output, true);
    std::printf("init output:\n%s%s", out.c_str(), out.back() == '\n' ? "" : "\n");
  }
  if (!d.history.empty()) {
    std::puts("last commands:");
    for (const auto& h : d.history) {
      std::string code = h.timed_out ? "timeout" : h.exit_code ? std::to_string(*h.exit_code) : "lost";
      std::printf("  %s  %7s  %6llums  %s\n", client::rfc3339_ms(h.started_at_ms).c_str(), code.c_str(),
                  static_cast<unsigned long long>(h.duration_ms), one_line(h.command, 80).c_str());
    }
  }
}

// show, rm and restart: one session by name.
int named(const global_opts& g, const session_args& a, std::string_view what) {
  if (a.name.empty()) return fail(fmt::format("session {} needs a NAME", what));
  auto conn = connect(g);
  if (!conn) return fail(conn.err());
  if (what == "rm") {
    auto kept = conn->remove_session(a.name, a.keep_copy);
    if (!kept) return fail(kept.err());
    if (!kept->empty()) std::printf("%s\n", kept->c_str());  // the last line: where to look
    return 0;
  }
  if (what == "restart") {
    if (auto s = client::request_ok(*conn, msg::session_restart{a.name}); !s) return fail(s.err());
    return 0;
  }
  auto d = client::request<msg::session_detail>(*conn, msg::session_show{a.name}, client::detail_of);
  if (!d) return fail(d.err());
  if (a.json) std::puts(client::to_json(*d).c_str());
  else print_detail(*d);
  return 0;
}

void declare_create(command_line& cl, session_args& a) {
  client::session_spec& spec = a.spec;
  cl.describe(
      "Defines a session: every new shell of it starts in DIR with the variables given, runs the --init "
      "commands before any other command, and is restarted after it dies as POLICY says. Creating a session "
      "that exists with the same definition does nothing; with another it is an error.");
  cl.option("-C,--cwd", "DIR", "every shell starts in DIR (default: this directory, or the root with --root)",
            spec.cwd, check_not_empty("a directory"));
  cl.option("--root", "DIR",
            "give the session the root DIR: every shell starts there (or in -C DIR, taken from it and within it) "
            "with SBSH_ROOT set to it, and exec -C and start -C must name a directory beneath it",
            spec.root, check_not_empty("a directory"));
  cl.option("--snapshot", "DIR",
            "copy DIR for the session first, without what the ignore patterns leave out (links copied as links, "
            "special files skipped), and return once the copy is made: every shell then starts in the copy, which "
            "is the session's own until 'session rm' deletes it; DIR itself is never changed",
            spec.snapshot, check_not_empty("a directory"));
  cl.repeated("--ignore", "PATTERN",
              "with --snapshot: leave out what PATTERN matches, a .gitignore line (*.log, data/raw/, !keep.log), "
              "after the defaults (.git, node_modules, .venv, __pycache__, ...); repeatable",
              spec.ignore);
  cl.flag("--no-default-ignores", "with --snapshot: copy what the default ignore patterns would leave out",
          spec.no_default_ignores);
  cl.flag("--gitignore", "with --snapshot: also leave out what the tree's own .gitignore files ignore", spec.gitignore);
  cl.flag("--keep-copy-on-failure",
          "with --snapshot: when the session is removed and its last command failed (non-zero, timed out, or shell "
          "lost), keep its copy (session ls --kept)",
          spec.keep_copy_on_failure);
  cl.option("--setup", "COMMAND",
            "build the session's environment first: COMMAND runs once in bash, in the session's directory with "
            "SBSH_ENV naming a directory of its own (a venv, a node_modules), and every shell then gets SBSH_ENV; "
            "sessions whose setup and key files are the same share one environment, built once",
            spec.setup, check_not_empty("a command"));
  cl.repeated("--setup-key", "FILE|DIR",
              "with --setup: FILE's contents are part of what keys the environment (requirements.txt, "
              "package-lock.json), so a change to it builds a new one; a DIR (wheels/) counts as its files' "
              "relative paths, executable bits and bytes, less what a snapshot leaves out (node_modules, .git); "
              "relative to the session's directory; repeatable",
              spec.setup_keys, check_not_empty("a file or directory"));
  cl.flag("--confine",
          "confine the session to its root (--root or --snapshot) by the kernel (namespaces, Landlock, seccomp): "
          "its shell and all it starts hold no privilege, see only the root and a private TMPDIR (read and write), "
          "the system's programs and their own processes, and reach no socket of the host's; the shell is the init "
          "of a PID namespace of its own, so all it starts ends with it",
          spec.confine);
  cl.repeated("--allow-write", "PATH", "with --confine: may also read and write beneath PATH; repeatable",
              spec.allow_write, check_not_empty("a path"));
  cl.repeated("--allow-read", "PATH", "with --confine: may also read and run what is beneath PATH; repeatable",
              spec.allow_read, check_not_empty("a path"));
  cl.repeated("--read-only", "PATH", "with --confine: may also read (not run) what is beneath PATH; repeatable",
              spec.read_only, check_not_empty("a path"));
  cl.flag("--no-network",
          "run the shell in a network namespace of its own, with only loopback: nothing it starts reaches another "
          "host or a server listening outside the session",
          spec.no_network);
  cl.option("--memory", "SIZE",
            "hold the session's shell and all it starts to SIZE of memory (bytes, or with K, M, G or T), swap "
            "included, in a cgroup of the session's own: over it the kernel kills one of its processes, and the "
            "command's result says so (oom_killed); needs cgroup v2 with the memory controller delegated to sbshd",
            a.memory, [](std::string_view, const std::string& v) {
              auto m = client::parse_memory(v);
              return m ? std::string() : m.err().message;
            });
  cl.number("--pids", "N",
            "let the session's shell and all it starts be at most N processes and threads at once (a cgroup's "
            "pids.max; a fork beyond fails with EAGAIN); needs cgroup v2 with the pids controller delegated to sbshd",
            spec.pids_max, "a number of processes", 1, ipc::kMaxSessionPids);
  cl.option("--cpu", "FRACTION",
            "let the session's shell and all it starts use at most FRACTION of one CPU's time (0.5, 2, 1.25: a "
            "cgroup's cpu.max over 100 ms); needs cgroup v2 with the cpu controller delegated to sbshd",
            a.cpu, [](std::string_view, const std::string& v) {
              auto m = client::parse_cpu_millis(v);
              return m ? std::string() : m.err().message;
            });
  cl.repeated("-e,--env", "NAME=VALUE", "a variable of every shell; repeatable", spec.env, check_assignment);
  cl.repeated("--init", "COMMAND", "a command each new shell runs before any other; repeatable", spec.init);
  cl.choice("--restart", "POLICY", "always, on-failure or never (default always): when a shell that ended is replaced",
            spec.restart, {std::begin(ipc::kRestartPolicies), std::end(ipc::kRestartPolicies)});
  cl.repeated("--limit", "NAME=VALUE",
              "a resource limit of the shell and so of every command: NAME is as, core, cpu, data, fsize, memlock, "
              "nofile, nproc or stack; VALUE is SOFT:HARD or one value for both, a number (bytes with K, M, G or T; "
              "cpu seconds with s, m or h) or infinity; repeatable",
              spec.limits, [](std::string_view, const std::string& v) {
                auto l = parse_limit(v);
                return l ? std::string() : l.err().message;
              });
  cl.complete(value_kind::text, {"as=", "core=", "cpu=", "data=", "fsize=", "memlock=", "nofile=", "nproc=", "stack="});
  cl.option("--idle-expiry", "DURATION",
            "remove the session once it has been idle (no command, no background process) for DURATION (default: "
            "never, for a session made with session create)",
            a.idle_expiry, check_expiry);
  cl.complete(value_kind::text, {"never"});
  cl.duration("-t,--timeout", "DURATION",
              "stop a command of the session after DURATION when it gives no timeout of its own (exec without -t; "
              "default: none)",
              a.timeout, "a default timeout of zero would stop every command at once; omit --timeout for none");
  cl.argument("NAME", spec.name);
}

}  // namespace

runner declare_session(command_line& cl) {
  auto a = std::make_shared<session_args>();
  auto& create = cl.subcommand("create", "define a session: its directory, variables, init commands, limits");
  declare_create(create, *a);
  auto& ls = cl.subcommand("ls", "list sessions with their states, pids and running commands", "list");
  ls.flag("--json", "print a JSON array instead of a table", a->json);
  ls.flag("--kept", "list the snapshot copies kept after their sessions (rm --keep-copy, --keep-copy-on-failure)",
          a->kept);
  auto& show = cl.subcommand("show", "show a session's definition, state and last commands");
  show.describe(
      "Prints the session's definition, state, pids, restarts, current directory, the last commands with their "
      "exit codes and durations, and the output of the last start's init commands.");
  show.flag("--json", "print one JSON object instead of text", a->json);
  show.argument("NAME", a->name);
  show.complete(value_kind::session);
  auto& rm = cl.subcommand("rm", "end a session's shell and every process it started, and forget it");
  rm.flag("--keep-copy",
          "leave the snapshot's copy in place, among the kept copies, and print its path as the last line", a->keep_copy);
  rm.argument("NAME", a->name);
  rm.complete(value_kind::session);
  auto& restart = cl.subcommand("restart", "end a session's shell and start a new one");
  restart.describe("Ends the shell and starts a new one, also after the session failed or exited.");
  restart.argument("NAME", a->name);
  restart.complete(value_kind::session);
  auto& prune = cl.subcommand("prune", "remove the sessions made by exec -s or start -s that are idle");
  prune.describe(
      "Removes every session made implicitly (by exec -s NAME or start -s NAME) that has had no command running or "
      "queued and no background process running for at least --idle (default 0: every idle one), and prints the "
      "name of each. Sessions made with session create are kept.");
  prune.duration("--idle", "DURATION", "only sessions idle for at least DURATION", a->idle);
  prune.flag("--json", "print a JSON array of the names removed", a->json);
  prune.flag("--kept", "delete the kept snapshot copies instead, printing the path of each", a->kept);
  return [a, &cl, &create, &ls, &show, &rm, &restart, &prune](const global_opts& g) {
    if (create.given()) {
      a->spec.timeout_ms = static_cast<uint64_t>(a->timeout.count());
      if (!a->memory.empty()) a->spec.memory_max = *client::parse_memory(a->memory);
      if (!a->cpu.empty()) a->spec.cpu_millis = *client::parse_cpu_millis(a->cpu);
      return create_session(g, a->spec, a->idle_expiry);
    }
    if (prune.given()) return a->kept ? kept_copies(g, *a, true) : prune_sessions(g, *a);
    if (ls.given()) return a->kept ? kept_copies(g, *a, false) : list_sessions(g, a->json, false, false);
    if (show.given()) return named(g, *a, "show");
    if (rm.given()) return named(g, *a, "rm");
    if (restart.given()) return named(g, *a, "restart");
    std::fputs(cl.help().c_str(), stdout);  // "sbsh session" alone, as before
    return 0;
  };
}

}  // namespace sbsh::cli
