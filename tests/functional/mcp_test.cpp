// sbsh mcp on a real sbshd, spoken to in raw JSON-RPC: over stdio (the server a child with
// pipes) and over Streamable HTTP (port 0, a socket of our own). Checks the handshake, the
// tool list, that a session's state persists from one call to the next, that failures are
// results with isError while bad requests and arguments are JSON-RPC errors naming what was
// wrong, both protocol revisions, bounds on what a client sends, and that cancelling a call
// or vanishing mid-call leaves no process running.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "fixture.h"

extern char** environ;

namespace sbsh::test {

using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// `sbsh mcp ARGS...` as a child with pipes on stdin and stdout (stderr: a file).
class mcp_child {
 public:
  mcp_child(const std::string& sock, const std::vector<std::string>& args, const std::string& err_file) {
    int in[2], out[2];
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    std::vector<std::string> argv{bin("sbsh"), "--socket", sock, "--no-autostart", "mcp"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargs;
    for (auto& a : argv) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    EXPECT_EQ(::posix_spawn(&pid_, cargs[0], &fa, nullptr, cargs.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~mcp_child() {
    close_stdin();
    if (pid_ > 0 && !wait_exit(10s)) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (from_ >= 0) ::close(from_);
  }
  mcp_child(const mcp_child&) = delete;
  mcp_child& operator=(const mcp_child&) = delete;

  void send_raw(const std::string& text) {
    std::string_view s = text;
    while (!s.empty()) {
      ssize_t n = ::write(to_, s.data(), s.size());
      ASSERT_GT(n, 0);
      s.remove_prefix(static_cast<size_t>(n));
    }
  }
  void send(const json& j) { send_raw(j.dump() + "\n"); }
  // The next message, or null when none came within `limit`.
  json next(std::chrono::milliseconds limit = 30s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      if (size_t nl = buf_.find('\n'); nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return json::parse(line);
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return nullptr;
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return nullptr;
      char chunk[65536];
      ssize_t n = ::read(from_, chunk, sizeof chunk);
      if (n <= 0) return nullptr;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }
  // Sends a request and returns its response; notifications met on the way go to `seen`.
  json call(const json& request, std::vector<json>* seen = nullptr) {
    send(request);
    return response_to(request["id"], seen);
  }
  json response_to(const json& id, std::vector<json>* seen = nullptr) {
    for (;;) {
      json m = next();
      if (m.is_null()) return m;
      if (m.contains("id") && m["id"] == id) return m;
      if (seen != nullptr) seen->push_back(m);
    }
  }
  void close_stdin() {
    if (to_ >= 0) ::close(to_);
    to_ = -1;
  }
  bool wait_exit(std::chrono::milliseconds limit) {
    return wait_until(
        [&] {
          int st;
          if (::waitpid(pid_, &st, WNOHANG) != pid_) return false;
          status_ = st;
          pid_ = -1;
          return true;
        },
        limit);
  }
  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] int status() const { return status_; }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  int status_ = -1;
  std::string buf_;
};

json request(int id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

json tool_call(int id, const std::string& tool, json args, json meta = nullptr) {
  json params = {{"name", tool}, {"arguments", std::move(args)}};
  if (!meta.is_null()) params["_meta"] = std::move(meta);
  return request(id, "tools/call", std::move(params));
}

json modern_meta() {
  return {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
          {"io.modelcontextprotocol/clientCapabilities", json::object()}};
}

class mcp_test : public daemon_test {
 protected:
  std::unique_ptr<mcp_child> start(const std::vector<std::string>& args = {}) {
    return std::make_unique<mcp_child>(sock, args, dir + "/mcp.err");
  }
  std::unique_ptr<mcp_child> start_initialized() {
    auto c = start();
    json r = c->call(request(0, "initialize",
                             {{"protocolVersion", "2025-11-25"},
                              {"capabilities", json::object()},
                              {"clientInfo", {{"name", "test"}, {"version", "1"}}}}));
    EXPECT_EQ(r["result"]["protocolVersion"], "2025-11-25") << r.dump();
    c->send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    return c;
  }
  std::string pidfile() const { return dir + "/tmp/cmd.pid"; }
  // The pid a command wrote to pidfile(), once it has.
  pid_t read_pid() {
    pid_t pid = 0;
    wait_until(
        [&] {
          std::ifstream in(pidfile());
          return static_cast<bool>(in >> pid) && pid > 0;
        },
        20s);
    return pid;
  }
  std::string sleeper() const {
    return "sh -c 'echo $$ > " + pidfile() + ".new && mv " + pidfile() + ".new " + pidfile() + " && exec sleep 30'";
  }
};

TEST_F(mcp_test, handshake_lists_tools_in_order_and_a_session_keeps_its_state) {
  auto c = start_initialized();
  json list = c->call(request(1, "tools/list"));
  std::vector<std::string> names;
  for (const auto& t : list["result"]["tools"]) {
    names.push_back(t["name"]);
    EXPECT_TRUE(t["inputSchema"].is_object()) << t["name"];
    EXPECT_TRUE(t["outputSchema"].is_object()) << t["name"];
  }
  EXPECT_EQ(names, (std::vector<std::string>{"run_command", "list_sessions", "create_session", "remove_session",
                                             "restart_session", "start_process", "list_processes", "kill_process",
                                             "wait_process", "process_logs"}));
  json r1 = c->call(tool_call(2, "run_command", {{"command", "cd /tmp; X=1"}, {"session", "s1"}}));
  EXPECT_EQ(r1["result"]["isError"], false) << r1.dump();
  json r2 = c->call(tool_call(3, "run_command", {{"command", "echo $PWD $X"}, {"session", "s1"}}));
  const json& sc = r2["result"]["structuredContent"];
  EXPECT_EQ(sc["stdout"], "/tmp 1\n") << r2.dump();
  EXPECT_EQ(sc["exit_code"], 0);
  EXPECT_EQ(r2["result"]["isError"], false);
  // The same JSON as text.
  EXPECT_EQ(json::parse(r2["result"]["content"][0]["text"].get<std::string>()), sc);
  EXPECT_FALSE(r2["result"].contains("resultType"));  // a 2025-11-25 result
}

TEST_F(mcp_test, a_failing_command_is_a_result_with_is_error) {
  auto c = start_initialized();
  json r = c->call(tool_call(1, "run_command", {{"command", "echo out; echo err >&2; exit 3"}}));
  ASSERT_TRUE(r.contains("result")) << r.dump();
  EXPECT_EQ(r["result"]["isError"], true);
  EXPECT_EQ(r["result"]["structuredContent"]["exit_code"], 3);
  EXPECT_EQ(r["result"]["structuredContent"]["stdout"], "out\n");
  EXPECT_EQ(r["result"]["structuredContent"]["stderr"], "err\n");
  json t = c->call(tool_call(2, "run_command", {{"command", "sleep 5"}, {"timeout_seconds", 0.3}}));
  EXPECT_EQ(t["result"]["isError"], true);
  EXPECT_EQ(t["result"]["structuredContent"]["timed_out"], true) << t.dump();
  // sbsh refusing (no such session) is a result too.
  json k = c->call(tool_call(3, "restart_session", {{"name", "nosuch"}}));
  EXPECT_EQ(k["result"]["isError"], true) << k.dump();
}

TEST_F(mcp_test, bad_messages_get_json_rpc_errors_and_the_server_goes_on) {
  auto c = start_initialized();
  c->send_raw("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \n");
  json e = c->next();
  EXPECT_EQ(e["error"]["code"], -32700) << e.dump();
  EXPECT_TRUE(e["id"].is_null());
  EXPECT_TRUE(c->call(request(2, "ping"))["result"].is_object());
  EXPECT_EQ(c->call(request(3, "no/such/method"))["error"]["code"], -32601);
  c->send_raw("[1, 2]\n");
  EXPECT_EQ(c->next()["error"]["code"], -32600);

  auto arg_error = [&](int id, json args) {
    json r = c->call(tool_call(id, "run_command", std::move(args)));
    EXPECT_EQ(r["error"]["code"], -32602) << r.dump();
    return r["error"]["message"].get<std::string>();
  };
  EXPECT_NE(arg_error(4, {{"command", 5}}).find("'command' must be a string"), std::string::npos);
  EXPECT_NE(arg_error(5, json::object()).find("'command' is missing"), std::string::npos);
  EXPECT_NE(arg_error(6, {{"command", "true"}, {"colour", "red"}}).find("unknown argument 'colour'"), std::string::npos);
  EXPECT_NE(arg_error(7, {{"command", "true"}, {"session", "no spaces"}}).find("'session'"), std::string::npos);
  EXPECT_NE(arg_error(8, {{"command", "true"}, {"env", {{"A", 1}}}}).find("'env.A'"), std::string::npos);
  EXPECT_NE(arg_error(9, {{"command", "true"}, {"timeout_seconds", "1"}}).find("'timeout_seconds'"), std::string::npos);
  json unknown = c->call(tool_call(10, "no_such_tool", json::object()));
  EXPECT_EQ(unknown["error"]["code"], -32602);
  // Still serving.
  EXPECT_EQ(c->call(tool_call(11, "run_command", {{"command", "echo alive"}}))["result"]["structuredContent"]["stdout"],
            "alive\n");
}

TEST_F(mcp_test, a_ten_megabyte_line_is_refused_and_the_server_goes_on) {
  auto c = start_initialized();
  std::string big = tool_call(1, "run_command", {{"command", "echo " + std::string(10u << 20, 'x')}}).dump() + "\n";
  c->send_raw(big);
  json e = c->next();
  EXPECT_EQ(e["error"]["code"], -32600) << e.dump().substr(0, 300);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("longer than"), std::string::npos);
  EXPECT_EQ(c->call(tool_call(2, "run_command", {{"command", "echo alive"}}))["result"]["structuredContent"]["stdout"],
            "alive\n");
}

TEST_F(mcp_test, the_2026_07_28_revision_is_stateless_and_refuses_versions_it_does_not_speak) {
  auto c = start();  // no initialize
  json d = c->call(request(1, "server/discover", {{"_meta", modern_meta()}}));
  EXPECT_EQ(d["result"]["resultType"], "complete") << d.dump();
  EXPECT_EQ(d["result"]["supportedVersions"], json::array({"2026-07-28", "2025-11-25"}));
  EXPECT_EQ(d["result"]["capabilities"]["tools"], json::object());
  json l = c->call(request(2, "tools/list", {{"_meta", modern_meta()}}));
  EXPECT_EQ(l["result"]["resultType"], "complete");
  EXPECT_GT(l["result"]["ttlMs"].get<int64_t>(), 0);
  EXPECT_EQ(l["result"]["cacheScope"], "public");
  json r = c->call(tool_call(3, "run_command", {{"command", "echo modern"}}, modern_meta()));
  EXPECT_EQ(r["result"]["resultType"], "complete") << r.dump();
  EXPECT_EQ(r["result"]["structuredContent"]["stdout"], "modern\n");
  json meta = modern_meta();
  meta["io.modelcontextprotocol/protocolVersion"] = "1900-01-01";
  json u = c->call(request(4, "tools/list", {{"_meta", meta}}));
  EXPECT_EQ(u["error"]["code"], -32022) << u.dump();
  EXPECT_EQ(u["error"]["data"]["requested"], "1900-01-01");
  EXPECT_EQ(u["error"]["data"]["supported"], json::array({"2026-07-28", "2025-11-25"}));
}

TEST_F(mcp_test, progress_notifications_increase_while_a_command_runs) {
  auto c = start_initialized();
  std::vector<json> seen;
  json r = c->call(tool_call(1, "run_command", {{"command", "sleep 1.6"}}, {{"progressToken", "tok"}}), &seen);
  EXPECT_EQ(r["result"]["isError"], false);
  double last = -1;
  size_t n = 0;
  for (const auto& m : seen) {
    ASSERT_EQ(m["method"], "notifications/progress") << m.dump();
    EXPECT_EQ(m["params"]["progressToken"], "tok");
    double p = m["params"]["progress"];
    EXPECT_GT(p, last);
    last = p;
    ++n;
  }
  EXPECT_GE(n, 2u);
  // Without a token, none.
  seen.clear();
  c->call(tool_call(2, "run_command", {{"command", "sleep 1.2"}}), &seen);
  EXPECT_TRUE(seen.empty());
}

TEST_F(mcp_test, cancelling_a_call_stops_the_command_and_keeps_the_shell) {
  auto c = start_initialized();
  c->call(tool_call(1, "run_command", {{"command", "X=kept"}, {"session", "c"}}));
  c->send(tool_call(2, "run_command", {{"command", sleeper()}, {"session", "c"}}));
  pid_t pid = read_pid();
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(pid_alive(pid));
  c->send({{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 2}}}});
  std::vector<json> seen;
  json r = c->call(tool_call(3, "run_command", {{"command", "echo $X"}, {"session", "c"}}), &seen);
  EXPECT_EQ(r["result"]["structuredContent"]["stdout"], "kept\n") << r.dump();
  EXPECT_TRUE(seen.empty()) << seen[0].dump();  // no response for the cancelled call
  EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, 10s));
}

TEST_F(mcp_test, a_client_that_closes_stdin_mid_call_leaves_nothing_running) {
  auto c = start_initialized();
  c->send(tool_call(1, "run_command", {{"command", sleeper()}}));
  pid_t pid = read_pid();
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(pid_alive(pid));
  c->close_stdin();
  EXPECT_TRUE(c->wait_exit(15s));
  EXPECT_TRUE(WIFEXITED(c->status()) && WEXITSTATUS(c->status()) == 0) << c->status();
  EXPECT_FALSE(pid_alive(pid));
}

}  // namespace
}  // namespace sbsh::test
