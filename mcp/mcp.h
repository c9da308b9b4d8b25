// sbsh's MCP server, as `sbsh mcp` runs it: the transports' entry points.
#pragma once

#include <string>

#include "mcp/server.h"

namespace sbsh::mcp {

// Serves one client on stdin and stdout (one JSON-RPC message per line) until stdin ends;
// then cancels every call still running, waits for them, and returns 0.
int run_stdio(const server_options& opts);

struct http_options {
  std::string listen;         // HOST:PORT (port 0: any free one) or a unix socket path
  bool allow_remote = false;  // bind beyond loopback and accept any Origin (needs a token)
  std::string token;          // non-empty: every request needs Authorization: Bearer TOKEN
  std::string token_file;     // where that token is, which a refusal names
};

// Whether --http names a unix socket (a word with a slash) rather than HOST:PORT.
inline bool is_socket_path(const std::string& listen) { return listen.find('/') != std::string::npos; }

// Serves Streamable HTTP at /mcp until SIGINT or SIGTERM. Prints the URL on stderr.
int run_http(const server_options& opts, const http_options& http);

}  // namespace sbsh::mcp
