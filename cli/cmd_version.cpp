// sbsh version: this client's version and the protocol it speaks.
#include <cstdio>

#include "cli/cli.h"
#include "ipc/protocol.h"

namespace sbsh::cli {

runner declare_version(command_line&) {
  return [](const global_opts&) {
    std::printf("sbsh %s (protocol %u)\n", SBSH_VERSION, ipc::kProtocolVersion);
    return 0;
  };
}

}  // namespace sbsh::cli
