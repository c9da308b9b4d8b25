// The table of sbsh's subcommands, in the order `sbsh --help` lists them. To add one, write
// cmd_NAME.cpp with its declare_NAME (see cli.h) and add its two lines here.
#include "cli/cli.h"

namespace sbsh::cli {

runner declare_exec(command_line& cl);
runner declare_run(command_line& cl);
runner declare_session(command_line& cl);
runner declare_start(command_line& cl);
runner declare_file(command_line& cl);
runner declare_env(command_line& cl);
runner declare_logs(command_line& cl);
runner declare_kill(command_line& cl);
runner declare_wait(command_line& cl);
runner declare_input(command_line& cl);
runner declare_ps(command_line& cl);
runner declare_attach(command_line& cl);
runner declare_status(command_line& cl);
runner declare_shutdown(command_line& cl);
runner declare_mcp(command_line& cl);
runner declare_dial_stdio(command_line& cl);
runner declare_completion(command_line& cl);
runner declare_version(command_line& cl);

namespace {

constexpr command kCommands[] = {
    {"exec", "run a command in a session and exit with its exit code", declare_exec},
    {"run", "run a plan of staged commands in a fresh session; write a report", declare_run},
    {"session", "create, list, show, remove or restart sessions", declare_session},
    {"file", "read, write, edit and search files beneath a session's root", declare_file},
    {"env", "list and delete the environments that session setups built", declare_env},
    {"start", "start a background process from a session's state; prints its id", declare_start},
    {"logs", "show a background process's output", declare_logs},
    {"kill", "signal a background process and its whole tree", declare_kill},
    {"wait", "wait for a background process and exit with its exit code", declare_wait},
    {"input", "type into a command that waits for input, and print its answer", declare_input},
    {"ps", "list sessions with their pids, states and running commands", declare_ps},
    {"attach", "use a session interactively", declare_attach},
    {"status", "show the daemon and its sessions", declare_status},
    {"shutdown", "stop the daemon, its sessions and everything they started", declare_shutdown},
    {"mcp", "serve MCP tools to agent hosts on stdio or Streamable HTTP", declare_mcp},
    {"dial-stdio", "relay stdin and stdout to sbshd (the far end of --host and --dial)", declare_dial_stdio},
    {"completion", "print the bash or zsh completion script", declare_completion},
    {"version", "print the version", declare_version},
};

}  // namespace

std::span<const command> commands() { return kCommands; }

const command* find_command(std::string_view name) {
  for (const auto& c : kCommands)
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace sbsh::cli
