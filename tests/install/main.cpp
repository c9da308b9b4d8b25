// Uses an installed libsbsh through its C++ API: a session keeps its directory between two
// execs. Prints the second's output and exits with its exit code (3). Usage: PROGRAM SOCKET
#include <sbsh/client.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) return 100;
  sbsh::client::connect_options co;
  co.socket_path = argv[1];
  co.autostart = false;
  auto c = sbsh::client::connection::connect(co);
  if (!c) {
    std::fprintf(stderr, "connect: %s\n", c.err().message.c_str());
    return 101;
  }
  sbsh::client::exec_options o;
  o.session = "install-test";
  o.command = "cd /tmp";
  if (auto r = c->exec(o); !r || r->exit_code != 0) return 102;
  o.command = "pwd; exit 3";
  auto r = c->exec(o);
  if (!r) {
    std::fprintf(stderr, "exec: %s\n", r.err().message.c_str());
    return 103;
  }
  std::fputs(r->stdout_data.c_str(), stdout);
  return r->exit_code.value_or(104);
}
