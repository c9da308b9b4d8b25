// sbsh dial-stdio: the far end of --host and --dial. Connects to this host's sbshd and
// copies bytes between it and stdin and stdout.
#include <unistd.h>

#include "cli/cli.h"

namespace sbsh::cli {

runner declare_dial_stdio(command_line& cl) {
  cl.describe(
      "Connects to this host's sbshd (starting it as usual) and copies bytes between it and stdin and stdout "
      "until sbshd closes the connection. It is what 'sbsh --host URL' runs over there (through ssh, or an engine's "
      "exec in a container), and "
      "what a --dial command such as 'kubectl exec -i POD -- sbsh dial-stdio' must reach. sbshd checks its uid "
      "like any local client's. The global options -S and --no-autostart apply, before dial-stdio.");
  return [](const global_opts& g) {
    client::connect_options o;
    o.socket_path = g.socket;
    o.autostart = g.autostart;
    if (auto s = client::dial_stdio(o, STDIN_FILENO, STDOUT_FILENO); !s) return fail(s.err().message);
    return 0;
  };
}

}  // namespace sbsh::cli
