// sbsh ps: sessions with their pids, states and running commands, then background
// processes. `session ls` is the same list without the processes.
#include <cstdio>
#include <memory>

#include "cli/cli.h"
#include "client/json.h"
#include "client/request.h"
#include "ipc/protocol.h"

namespace sbsh::cli {

int list_sessions(const global_opts& g, bool json, bool with_processes, bool all) {
  auto conn = connect(g);
  if (!conn) {
    if (!ipc::has_code(conn.err(), ipc::errc::unreachable)) return fail(conn.err());
    if (json) std::puts(with_processes ? R"({"sessions":[],"processes":[],"commands":[]})" : "[]");
    else std::puts("no sessions (sbshd is not running)");
    return 0;
  }
  auto v = client::request<ipc::msg::session_info>(*conn, ipc::msg::session_list{}, &ipc::msg::session_info::sessions);
  if (!v) return fail(v.err());
  std::vector<client::proc_info> procs;
  std::vector<client::command_info> commands;
  if (with_processes) {
    // And the commands exec left running detached (--detach-after), by %ID: background work too.
    auto t = client::request<ipc::msg::proc_table>(*conn, ipc::msg::proc_list{all});
    if (!t) return fail(t.err());
    procs = std::move(t->procs);
    commands = std::move(t->commands);
  }
  if (json) {
    std::string s = with_processes ? client::dump_json({{"sessions", client::json_of(*v)},
                                                        {"processes", client::json_of(procs)},
                                                        {"commands", client::json_of(commands)}})
                                   : client::to_json(*v);
    std::puts(s.c_str());
  } else {
    print_session_table(*v);
    print_proc_table(procs);
    print_command_table(commands);
  }
  return 0;
}

namespace {
struct ps_args {
  bool all = false, json = false;
};
}  // namespace

runner declare_ps(command_line& cl) {
  auto a = std::make_shared<ps_args>();
  cl.describe(
      "Lists each session (state, wrapper and shell pids, restarts, uptime, queue length, current directory, the "
      "running command and how long it has run), then the running background processes, then the commands exec "
      "left running detached (--detach-after), by %ID.");
  cl.flag("-a,--all", "include background processes that have finished, and every command sbshd keeps", a->all);
  cl.flag("--json", "print one JSON object with sessions, processes and commands arrays instead of tables", a->json);
  return [a](const global_opts& g) { return list_sessions(g, a->json, true, a->all); };
}

}  // namespace sbsh::cli
