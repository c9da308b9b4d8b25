// sbsh mcp: an MCP server for agent hosts, on stdio or Streamable HTTP (mcp/).
#include <signal.h>

#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/cli.h"
#include "mcp/mcp.h"
#include "mcp/token.h"
#include "ipc/protocol.h"

namespace sbsh::cli {

namespace {

struct mcp_args {
  std::string http;
  std::string token_file;
  bool allow_remote = false;
};

int run_mcp(const global_opts& g, const mcp_args& a) {
  // A client that closes stdout (or an HTTP peer that goes away) is an error to handle, not a
  // reason to die with the calls' commands still running.
  ::signal(SIGPIPE, SIG_IGN);
  mcp::server_options opts;
  opts.connect = [g] { return connect(g); };
  opts.version = SBSH_VERSION;
  if (a.http.empty()) {
    if (a.allow_remote || !a.token_file.empty())
      return fail("--allow-remote and --token-file apply to --http; stdio needs neither");
    return mcp::run_stdio(opts);
  }
  mcp::http_options h;
  h.listen = a.http;
  h.allow_remote = a.allow_remote;
  if (a.allow_remote && a.token_file.empty())
    return fail("--allow-remote needs --token-file: a server reachable from other hosts must ask for a token");
  // A TCP port is open to every local user: without --token-file the user's own token is
  // required. A unix socket is private (0600, and the peer's uid is checked).
  if (!a.token_file.empty() || !mcp::is_socket_path(a.http)) {
    auto t = a.token_file.empty() ? mcp::default_token() : mcp::read_token_file(a.token_file);
    if (!t) return fail(t.err());
    h.token = t->value;
    h.token_file = t->file;
  }
  return mcp::run_http(opts, h);
}

}  // namespace

runner declare_mcp(command_line& cl) {
  auto a = std::make_shared<mcp_args>();
  cl.describe(
      "Serves the Model Context Protocol for agent hosts: tools that run commands in persistent sessions, manage "
      "sessions and background processes. Speaks on stdin and stdout (one JSON-RPC message per line) unless "
      "--http is given. Protocol revisions 2026-07-28 and 2025-11-25.");
  cl.option("--http", "HOST:PORT|PATH",
            "serve Streamable HTTP at /mcp on HOST:PORT (port 0: any free port; the URL is printed on stderr) or "
            "on a unix socket PATH",
            a->http, check_not_empty("HOST:PORT or a socket path"));
  cl.flag("--allow-remote", "with --http: listen beyond loopback and accept any Origin (needs --token-file)",
          a->allow_remote);
  cl.option("--token-file", "FILE",
            "with --http: require 'Authorization: Bearer TOKEN', TOKEN being FILE's text (default on HOST:PORT: "
            "a token made once in $XDG_RUNTIME_DIR/sbsh/mcp-token, mode 0600)",
            a->token_file, check_not_empty("a file"));
  cl.footer("See sbsh(1), MCP SERVER, for how to register it with an agent host.");
  return [a](const global_opts& g) { return run_mcp(g, *a); };
}

}  // namespace sbsh::cli
