// The sbsh command-line interface: global options, the subcommand table, shared helpers.
// One file per subcommand (cmd_*.cpp); main.cpp parses global options and dispatches.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sbsh/client.h"

namespace sbsh::cli {

inline constexpr int kExitFailure = 255;  // sbsh itself failed (not the command)
inline constexpr int kExitTimeout = 124;

struct global_opts {
  std::string socket;
  bool autostart = true;
  std::string host;  // ssh://[USER@]HOST[:PORT]: sbshd over there, through ssh
  std::string dial;  // a command line whose stdin and stdout reach `sbsh dial-stdio`
};

using args = std::vector<std::string_view>;

struct command {
  std::string_view name;
  int (*run)(const global_opts&, const args&);
  std::string_view summary;
  std::string_view usage;
};

int cmd_exec(const global_opts& g, const args& a);
int cmd_run(const global_opts& g, const args& a);
int cmd_status(const global_opts& g, const args& a);
int cmd_shutdown(const global_opts& g, const args& a);
int cmd_version(const global_opts& g, const args& a);
int cmd_session(const global_opts& g, const args& a);
int cmd_ps(const global_opts& g, const args& a);
int cmd_start(const global_opts& g, const args& a);
int cmd_logs(const global_opts& g, const args& a);
int cmd_kill(const global_opts& g, const args& a);
int cmd_wait(const global_opts& g, const args& a);
int cmd_attach(const global_opts& g, const args& a);
int cmd_dial_stdio(const global_opts& g, const args& a);
void print_proc_table(const std::vector<client::proc_info>& v);

// Shared by the listing commands.
std::string human_duration(uint64_t ms);
void print_session_table(const std::vector<client::session_status>& v);

// From now on SIGINT, SIGTERM, SIGHUP and SIGQUIT are not fatal to sbsh: each becomes a byte
// on the returned descriptor, for exec_options::signal_fd: SIGINT and SIGQUIT are forwarded to
// the command (as ssh does), SIGTERM and SIGHUP stop it whole. Calling it again reuses the
// same pipe.
int forward_signals_to_command();

// Prints "sbsh: MESSAGE" on stderr and returns kExitFailure.
int fail(std::string_view message);
// Prints the usage of `c` on stdout (for --help) and returns 0.
int print_usage(const command& c);
const command* find_command(std::string_view name);

result<client::connection> connect(const global_opts& g, bool autostart);

// Option parsing helpers: "-x VALUE", "-xVALUE", "--long VALUE", "--long=VALUE".
// Returns true when args[i] is that option; the value goes to *value and i advances past it.
bool take_option(const args& a, size_t& i, std::string_view short_name, std::string_view long_name,
                 std::string_view* value, std::string* error);

}  // namespace sbsh::cli
