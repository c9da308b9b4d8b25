// The Streamable HTTP transport (see mcp.h).
#include <cstdio>

#include "client/mcp/mcp.h"

namespace sbsh::mcp {

int run_http(const server_options&, const http_options&) {
  std::fputs("sbsh: mcp --http is not available in this build\n", stderr);
  return 255;
}

}  // namespace sbsh::mcp
