// sbsh mcp: an MCP server for agent hosts, on stdio or Streamable HTTP (client/mcp/).
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "client/cli/cli.h"
#include "client/mcp/mcp.h"
#include "ipc/protocol.h"

namespace sbsh::cli {

namespace {

struct mcp_args {
  std::string http;
  std::string token_file;
  bool allow_remote = false;
};

result<std::string> read_token(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(ipc::errc::usage, fmt::format("--token-file {}: cannot read it", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string t = ss.str();
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  if (t.size() < 16 || t.find_first_of(" \t\r\n") != std::string::npos)
    return make_error(ipc::errc::usage,
                      fmt::format("--token-file {}: the token must be one word of at least 16 characters", path));
  return t;
}

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
  if (!a.token_file.empty()) {
    auto t = read_token(a.token_file);
    if (!t) return fail(t.err());
    h.token = *t;
  }
  if (a.allow_remote && h.token.empty())
    return fail("--allow-remote needs --token-file: a server reachable from other hosts must ask for a token");
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
  cl.option("--token-file", "FILE", "with --http: require 'Authorization: Bearer TOKEN', TOKEN being FILE's text",
            a->token_file, check_not_empty("a file"));
  cl.footer("See sbsh(1), MCP SERVER, for how to register it with an agent host.");
  return [a](const global_opts& g) { return run_mcp(g, *a); };
}

}  // namespace sbsh::cli
