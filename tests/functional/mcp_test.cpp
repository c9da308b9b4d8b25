// sbsh mcp on a real sbshd, spoken to in raw JSON-RPC: over stdio (the server a child with
// pipes) and over Streamable HTTP (port 0, a socket of our own). Checks the handshake, the
// tool list, that a session's state persists from one call to the next, that failures are
// results with isError while bad requests and arguments are JSON-RPC errors naming what was
// wrong, both protocol revisions, bounds on what a client sends, and that cancelling a call
// or vanishing mid-call leaves no process running.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "../schema_fit.h"
#include "fixture.h"

namespace sbsh::test {

using json = nlohmann::json;
using namespace std::chrono_literals;

namespace mcp_tests {

// "" when a tools/call answer's structuredContent fits the tool's outputSchema in `tools` (a
// tools/list answer), else where it does not.
std::string result_misfit(const json& tools, std::string_view tool, const json& answer) {
  for (const auto& t : tools["result"]["tools"])
    if (t["name"] == tool) return tests::schema_misfit(answer["result"]["structuredContent"], t["outputSchema"]);
  return "no tool " + std::string(tool);
}

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
    http_ = std::find(args.begin(), args.end(), "--http") != args.end();
    auto cargs = exec_argv(argv);
    EXPECT_EQ(::posix_spawn(&pid_, cargs[0], &fa, nullptr, cargs.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~mcp_child() {
    close_stdin();
    if (http_ && pid_ > 0) ::kill(pid_, SIGTERM);  // an HTTP server ends on SIGTERM, not on stdin's end
    if (pid_ > 0 && !wait_exit(10s)) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (from_ >= 0) ::close(from_);
  }
  mcp_child(const mcp_child&) = delete;
  mcp_child& operator=(const mcp_child&) = delete;

  void send_raw(const std::string& text) const {
    std::string_view s = text;
    while (!s.empty()) {
      ssize_t n = ::write(to_, s.data(), s.size());
      ASSERT_GT(n, 0);
      s.remove_prefix(static_cast<size_t>(n));
    }
  }
  void send(const json& j) const { send_raw(j.dump() + "\n"); }
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
  bool http_ = false;
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

// One HTTP/1.1 exchange on a new connection (Connection: close): the status, the headers
// (names in lower case) and the body, de-chunked.
struct http_reply {
  int status = 0;
  std::map<std::string, std::string> headers;
  std::string body;
  [[nodiscard]] json json_body() const { return json::parse(body, nullptr, false); }
};

// Where `where` (host:port or a socket path) is, as connect(2) takes it.
struct socket_address {
  sockaddr_storage storage{};
  socklen_t size = 0;
};
socket_address address_of(const std::string& where) {
  socket_address a;
  if (where.find('/') != std::string::npos) {
    auto* sa = reinterpret_cast<sockaddr_un*>(&a.storage);
    sa->sun_family = AF_UNIX;
    std::snprintf(sa->sun_path, sizeof sa->sun_path, "%s", where.c_str());
    a.size = sizeof(sockaddr_un);
  } else {
    auto* sa = reinterpret_cast<sockaddr_in*>(&a.storage);
    sa->sin_family = AF_INET;
    sa->sin_port = htons(static_cast<uint16_t>(std::stoi(where.substr(where.rfind(':') + 1))));
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.size = sizeof(sockaddr_in);
  }
  return a;
}

// A connected socket, or -1. Allocates nothing: a forked child may call it.
int connect_to(const socket_address& a) {
  int fd = ::socket(a.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&a.storage), a.size) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int http_connect(const std::string& where) { return connect_to(address_of(where)); }

void send_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    s.remove_prefix(static_cast<size_t>(n));
  }
}

http_reply read_reply(int fd) {
  std::string raw;
  char chunk[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 30000) <= 0) break;
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n <= 0) break;
    raw.append(chunk, static_cast<size_t>(n));
  }
  http_reply r;
  size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos) return r;
  std::string head = raw.substr(0, end);
  std::string body = raw.substr(end + 4);
  r.status = std::stoi(head.substr(9, 3));
  size_t at = head.find("\r\n");
  while (at != std::string::npos) {
    size_t next = head.find("\r\n", at + 2);
    std::string line = head.substr(at + 2, next == std::string::npos ? std::string::npos : next - at - 2);
    if (auto colon = line.find(':'); colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    }
    at = next;
  }
  if (r.headers["transfer-encoding"] == "chunked") {
    std::string out;
    size_t pos = 0;
    for (;;) {
      size_t nl = body.find("\r\n", pos);
      if (nl == std::string::npos) break;
      size_t len = std::stoul(body.substr(pos, nl - pos), nullptr, 16);
      if (len == 0) break;
      out += body.substr(nl + 2, len);
      pos = nl + 2 + len + 2;
    }
    body = out;
  }
  r.body = body;
  return r;
}

// Headers that http() and request_head() send unless the call gives its own of that name
// ("Name:" alone: none at all): the Host of the server under test and its token, which
// start_http sets.
std::vector<std::string> http_defaults;

std::string header_name(const std::string& h) {
  std::string name = h.substr(0, h.find(':'));
  for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return name;
}

// "METHOD /mcp HTTP/1.1" and its header lines, each of `headers` (where "Name:" alone leaves
// that header out) and then the defaults it does not name, without the blank line.
std::string request_head(const std::string& method, const std::vector<std::string>& headers,
                         const std::string& path = "/mcp") {
  std::string req = method + " " + path + " HTTP/1.1\r\n";
  std::set<std::string> named;
  for (const auto& h : headers) {
    named.insert(header_name(h));
    if (!h.ends_with(":")) req += h + "\r\n";
  }
  for (const auto& h : http_defaults)
    if (!named.contains(header_name(h))) req += h + "\r\n";
  return req;
}

// Sends one request to `where` (host:port or a socket path) and reads the reply.
http_reply http(const std::string& where, const std::string& method, const std::string& body,
                const std::vector<std::string>& headers = {}, const std::string& path = "/mcp") {
  int fd = http_connect(where);
  if (fd < 0) return {};
  std::vector<std::string> all = headers;
  all.emplace_back("Connection: close");
  if (method == "POST") {
    all.emplace_back("Content-Type: application/json");
    bool has_accept = false;
    for (const auto& h : headers) has_accept = has_accept || h.starts_with("Accept:");
    if (!has_accept) all.emplace_back("Accept: application/json, text/event-stream");
  }
  all.push_back("Content-Length: " + std::to_string(body.size()));
  send_all(fd, request_head(method, all, path) + "\r\n");
  send_all(fd, body);
  http_reply r = read_reply(fd);
  ::close(fd);
  return r;
}

// The head of a POST of `length` bytes of JSON, with `sid` (a header line), ending in the
// blank line.
std::string post_head(const std::string& sid, size_t length) {
  return request_head("POST", {"Content-Type: application/json", "Accept: application/json, text/event-stream", sid,
                               "Content-Length: " + std::to_string(length)}) +
         "\r\n";
}

// The same, asking the server to close the connection after its response, so that
// read_reply ends with it.
std::string post_head_closing(const std::string& sid, size_t length) {
  return request_head("POST", {"Content-Type: application/json", "Accept: application/json, text/event-stream", sid,
                               "Content-Length: " + std::to_string(length), "Connection: close"}) +
         "\r\n";
}

json initialize_request() {
  return request(0, "initialize",
                 {{"protocolVersion", "2025-11-25"},
                  {"capabilities", json::object()},
                  {"clientInfo", {{"name", "test"}, {"version", "1"}}}});
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
  // `sbsh mcp --http LISTEN ARGS...`; where it listens (host:port or the socket path).
  std::string start_http(const std::string& listen = "127.0.0.1:0", const std::vector<std::string>& args = {}) {
    std::vector<std::string> all{"--http", listen};
    all.insert(all.end(), args.begin(), args.end());
    http_server_ = start(all);
    std::string where;
    wait_until(
        [&] {
          std::ifstream in(dir + "/mcp.err");
          std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
          if (auto at = text.find("http://"); at != std::string::npos) {
            auto end = text.find("/mcp", at);
            where = text.substr(at + 7, end - at - 7);
            return true;
          }
          if (text.find("unix socket ") != std::string::npos) {
            where = listen;
            return true;
          }
          return false;
        },
        20s);
    http_defaults = {where.find('/') == std::string::npos ? "Host: " + where : "Host: localhost"};
    token_file = token_file_named();
    if (!token_file.empty()) http_defaults.push_back("Authorization: Bearer " + trim(read_file(token_file)));
    return where;
  }
  // The token file that the server's stderr names, "" when it names none.
  std::string token_file_named() const {
    std::string text = read_file(dir + "/mcp.err");
    constexpr std::string_view kSays = "TOKEN being the text of ";
    auto at = text.find(kSays);
    if (at == std::string::npos) return {};
    at += kSays.size();
    return text.substr(at, text.find('\n', at) - at);
  }
  std::string token_file;
  // A session made by initialize over HTTP: its Mcp-Session-Id header line.
  static std::string http_session(const std::string& where) {
    http_reply r = http(where, "POST", initialize_request().dump());
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_FALSE(r.headers["mcp-session-id"].empty());
    std::string h = "Mcp-Session-Id: " + r.headers["mcp-session-id"];
    http(where, "POST", json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}.dump(), {h});
    return h;
  }
  std::unique_ptr<mcp_child> http_server_;
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
                                             "wait_process", "process_logs", "await_command", "cancel_command", "send_input",
                                             "read_file", "write_file", "list_files", "edit_file", "search_files"}));
  json r1 = c->call(tool_call(2, "run_command", {{"command", "cd /tmp; X=1"}, {"session", "s1"}}));
  EXPECT_EQ(r1["result"]["isError"], false) << r1.dump();
  json r2 = c->call(tool_call(3, "run_command", {{"command", "echo $PWD $X"}, {"session", "s1"}}));
  const json& sc = r2["result"]["structuredContent"];
  EXPECT_EQ(sc["stdout"], "/tmp 1\n") << r2.dump();
  EXPECT_EQ(sc["exit_code"], 0);
  EXPECT_EQ(r2["result"]["isError"], false);
  // The text a model reads: a status line, then the output as it is.
  std::string text = r2["result"]["content"][0]["text"];
  EXPECT_TRUE(text.starts_with("exit code 0, ")) << text;
  EXPECT_TRUE(text.ends_with(" ms\n--- stdout ---\n/tmp 1\n")) << text;
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

// Each revision of the handshake is answered with itself, and its answers carry only what it
// defines: tool annotations and progress messages from 2025-03-26; outputSchema,
// structuredContent and titles from 2025-06-18. Another revision gets 2025-11-25.
TEST_F(mcp_test, initialize_answers_the_clients_revision_with_only_what_it_defines) {
  for (std::string v : {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2099-01-01"}) {
    SCOPED_TRACE(v);
    auto c = start();
    json init = c->call(request(0, "initialize",
                                {{"protocolVersion", v},
                                 {"capabilities", json::object()},
                                 {"clientInfo", {{"name", "test"}, {"version", "1"}}}}));
    std::string got = v == "2099-01-01" ? "2025-11-25" : v;
    EXPECT_EQ(init["result"]["protocolVersion"], got) << init.dump();
    c->send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    bool structured = got >= "2025-06-18", annotated = got >= "2025-03-26";
    EXPECT_EQ(init["result"]["serverInfo"].contains("title"), structured) << init.dump();
    json list = c->call(request(1, "tools/list"));
    for (const auto& t : list["result"]["tools"]) {
      EXPECT_EQ(t.contains("outputSchema"), structured) << t.dump();
      EXPECT_EQ(t.contains("title"), structured) << t.dump();
      EXPECT_EQ(t.contains("annotations"), annotated) << t.dump();
    }
    if (annotated) {
      const json& first = list["result"]["tools"][0];
      EXPECT_EQ(first["annotations"]["readOnlyHint"], false);
      EXPECT_EQ(first["annotations"].contains("title"), !structured);  // 2025-03-26: the title is there
    }
    std::vector<json> seen;
    json r = c->call(tool_call(2, "run_command", {{"command", "sleep 1.2; echo hi"}}, {{"progressToken", 7}}), &seen);
    EXPECT_EQ(r["result"]["isError"], false) << r.dump();
    EXPECT_EQ(r["result"].contains("structuredContent"), structured) << r.dump();
    EXPECT_NE(r["result"]["content"][0]["text"].get<std::string>().find("hi"), std::string::npos) << r.dump();
    ASSERT_FALSE(seen.empty());
    EXPECT_EQ(seen[0]["params"].contains("message"), annotated) << seen[0].dump();
  }
}

// The text of a result is for a model: a status line, stdout, stderr, notes, nothing escaped;
// a long command is not echoed back.
TEST_F(mcp_test, results_are_plain_text_with_stdout_before_stderr) {
  auto c = start_initialized();
  json r = c->call(tool_call(1, "run_command", {{"command", "echo 'a \"quoted\" line'; echo err >&2; exit 3"}}));
  std::string text = r["result"]["content"][0]["text"];
  EXPECT_TRUE(text.starts_with("exit code 3, ")) << text;
  EXPECT_NE(text.find("\n--- stdout ---\na \"quoted\" line\n--- stderr ---\nerr\n"), std::string::npos) << text;
  std::string heredoc = "cat <<'EOF' | wc -l\n";
  for (int i = 0; i < 600; ++i) heredoc += "a line of the heredoc, long enough to count\n";
  heredoc += "EOF";
  json h = c->call(tool_call(2, "run_command", {{"command", heredoc}}));
  const json& sc = h["result"]["structuredContent"];
  EXPECT_EQ(sc["stdout"], "600\n") << h.dump().substr(0, 400);
  EXPECT_LT(sc["command"].get<std::string>().size(), 200u);
  EXPECT_NE(sc["command"].get<std::string>().find(std::to_string(heredoc.size()) + " bytes"), std::string::npos);
  EXPECT_LT(h.dump().size(), 4000u);
  // `exit` ends the shell: that result says shell_restarted (as the description says), and
  // the next runs in a new shell, of another generation, without the state.
  json v = c->call(tool_call(3, "run_command", {{"command", "V=1"}, {"session", "ex"}}));
  json e = c->call(tool_call(4, "run_command", {{"command", "exit 3"}, {"session", "ex"}}));
  EXPECT_EQ(e["result"]["structuredContent"]["shell_restarted"], true) << e.dump();
  EXPECT_NE(e["result"]["content"][0]["text"].get<std::string>().find("shell replaced"), std::string::npos);
  json n = c->call(tool_call(5, "run_command", {{"command", "echo \"[$V]\""}, {"session", "ex"}}));
  EXPECT_EQ(n["result"]["structuredContent"]["stdout"], "[]\n");
  EXPECT_NE(n["result"]["structuredContent"]["generation"], v["result"]["structuredContent"]["generation"]);
  json list = c->call(request(6, "tools/list"));
  std::string run_description = list["result"]["tools"][0]["description"];
  EXPECT_NE(run_description.find("`exit`"), std::string::npos);
  EXPECT_NE(run_description.find("shell_restarted: true"), std::string::npos);
  // A shell replaced between two commands: the next result says state_lost, and its text too.
  c->call(tool_call(7, "restart_session", {{"name", "ex"}}));
  json lost = c->call(tool_call(8, "run_command", {{"command", "true"}, {"session", "ex"}}));
  EXPECT_EQ(lost["result"]["structuredContent"]["state_lost"], true) << lost.dump();
  EXPECT_NE(lost["result"]["content"][0]["text"].get<std::string>().find("note: it ran in a new shell"),
            std::string::npos)
      << lost.dump();
}

// 5 MB of output: a result within the budget, its head and tail with a marker at the cut
// naming the process_logs call that reads the middle, which reads it back exactly.
TEST_F(mcp_test, a_large_output_fits_the_budget_and_its_middle_reads_back) {
  auto c = start_initialized();
  json r = c->call(tool_call(1, "run_command", {{"command", "seq 1 700000; echo done >&2"}}));
  json tools = c->call(request(9, "tools/list"));
  EXPECT_EQ(result_misfit(tools, "run_command", r), "");
  const json& res = r["result"];
  const json& sc = res["structuredContent"];
  std::string text = res["content"][0]["text"];
  EXPECT_LE(text.size(), 30000u);
  EXPECT_LE(sc["stdout"].get<std::string>().size(), 30000u);
  EXPECT_GT(text.size(), 20000u);
  EXPECT_EQ(sc["stderr"], "done\n");
  EXPECT_EQ(sc["stdout_truncated"], true);
  uint64_t total = 0;
  for (int i = 1; i <= 700000; ++i) total += std::to_string(i).size() + 1;
  EXPECT_EQ(sc["stdout_bytes"], total);
  EXPECT_EQ(sc["stdout_omitted_bytes"].get<uint64_t>() + sc["stdout"].get<std::string>().size() > 20000, true);
  EXPECT_TRUE(text.ends_with("699999\n700000\n--- stderr ---\ndone\n")) << text.substr(text.size() - 200);
  // The marker: on a line of its own, between whole lines, with the exact call.
  std::string out = sc["stdout"];
  auto at = out.find("\n[sbsh: ");
  ASSERT_NE(at, std::string::npos);
  auto call_at = out.find("read them with process_logs ", at);
  ASSERT_NE(call_at, std::string::npos);
  auto call_end = out.find("]\n", call_at);
  json args = json::parse(out.substr(call_at + 28, call_end - call_at - 28));
  EXPECT_EQ(args["id"], sc["id"]);
  EXPECT_EQ(args["stream"], "stdout");
  uint64_t from = args["stdout_offset"];
  EXPECT_EQ(from, sc["stdout_omitted_from"]);
  EXPECT_EQ(text.find(out.substr(at, call_end - at)) != std::string::npos, true);  // the same marker in the text
  std::string head = out.substr(0, at + 1);
  EXPECT_EQ(head.size(), from);
  std::string last_head_line = head.substr(head.rfind('\n', head.size() - 2) + 1);
  // Reading on from the offset gives the next lines, and says where to go on from.
  json more = c->call(tool_call(2, "process_logs", args));
  const json& m = more["result"]["structuredContent"];
  ASSERT_TRUE(m.is_object()) << more.dump().substr(0, 500);
  EXPECT_EQ(result_misfit(tools, "process_logs", more), "");
  std::string middle = m["stdout"];
  EXPECT_EQ(m["stdout_offset"], from);
  EXPECT_EQ(middle.substr(0, middle.find('\n')), std::to_string(std::stoi(last_head_line) + 1)) << middle.substr(0, 50);
  EXPECT_LE(more["result"]["content"][0]["text"].get<std::string>().size(), 30000u);
  auto next_at = middle.find("read them with process_logs ");
  ASSERT_NE(next_at, std::string::npos);
  std::string chunk = middle.substr(0, middle.find("[sbsh: "));
  json next_args = json::parse(middle.substr(next_at + 28, middle.find("]\n", next_at) - next_at - 28));
  EXPECT_EQ(next_args["stdout_offset"].get<uint64_t>(), from + chunk.size());
  std::string last_chunk_line = chunk.substr(chunk.rfind('\n', chunk.size() - 2) + 1);
  json again = c->call(tool_call(3, "process_logs", next_args));
  std::string after = again["result"]["structuredContent"]["stdout"];
  EXPECT_EQ(after.substr(0, after.find('\n')), std::to_string(std::stoi(last_chunk_line) + 1));
  // A smaller budget when asked for.
  json small = c->call(tool_call(4, "run_command", {{"command", "seq 1 100000"}, {"max_output_chars", 5000}}));
  EXPECT_LE(small["result"]["content"][0]["text"].get<std::string>().size(), 5000u);
  // Without an offset, process_logs gives the newest output, from a line's start.
  json newest = c->call(tool_call(5, "process_logs", {{"id", sc["id"]}, {"max_output_chars", 3000}}));
  EXPECT_EQ(result_misfit(tools, "process_logs", newest), "");
  std::string tail = newest["result"]["structuredContent"]["stdout"];
  EXPECT_TRUE(tail.ends_with("\n699999\n700000\n")) << tail.substr(0, 300);
  EXPECT_TRUE(tail.starts_with("[sbsh: ")) << tail.substr(0, 300);
  std::string first = tail.substr(tail.find("]\n") + 2);
  uint64_t first_offset = newest["result"]["structuredContent"]["stdout_offset"];
  uint64_t before = 0;
  for (int i = 1; i < std::stoi(first.substr(0, first.find('\n'))); ++i) before += std::to_string(i).size() + 1;
  EXPECT_EQ(first_offset, before);
}

// A command that outlives the call: its result says when it started and in which shell, and
// await_command with the offsets gives only what is new.
// A command with a terminal that asks a question returns as soon as it waits, with its
// prompt; send_input answers it (typed keys, Enter) and returns what it wrote after.
TEST_F(mcp_test, send_input_answers_a_command_that_waits) {
  auto c = start_initialized();
  json r = c->call(tool_call(1, "run_command",
                             {{"command", "read -p 'Name? ' n; read -p 'Sure? ' y; echo \"hi $n $y\""},
                              {"session", "in"},
                              {"tty", true}}));
  const json& sc = r["result"]["structuredContent"];
  ASSERT_EQ(sc["waiting_for_input"], true) << r.dump();
  EXPECT_EQ(sc["prompt"], "Name? ");
  EXPECT_EQ(sc["running"], true);
  json a = c->call(tool_call(2, "send_input", {{"id", sc["id"]}, {"text", "Ada"}}));
  const json& ac = a["result"]["structuredContent"];
  EXPECT_EQ(ac["waiting_for_input"], true) << a.dump();
  EXPECT_EQ(ac["prompt"], "Sure? ");
  EXPECT_EQ(ac["stdout"], "Ada\r\nSure? ");
  json b =
      c->call(tool_call(3, "send_input", {{"id", sc["id"]}, {"text", "y"}, {"enter", false}, {"keys", {"Enter"}}}));
  const json& bc = b["result"]["structuredContent"];
  EXPECT_EQ(bc["running"], false) << b.dump();
  EXPECT_EQ(bc["exit_code"], 0);
  EXPECT_EQ(bc["stdout"], "y\r\nhi Ada y\r\n");
  EXPECT_EQ(bc["screen"], "Name? Ada\nSure? y\nhi Ada y\n");
  // Ended: refused with why, as a result the model reads.
  json again = c->call(tool_call(4, "send_input", {{"id", sc["id"]}, {"text", "more"}}));
  EXPECT_EQ(again["result"]["isError"], true);
  EXPECT_NE(again.dump().find("has ended"), std::string::npos) << again.dump();
  json bad = c->call(tool_call(5, "send_input", {{"id", sc["id"]}, {"keys", {"F13"}}}));
  EXPECT_EQ(bad["result"]["isError"], true);
}

// A command another sbsh mcp started: while it runs, await_command here says which shell runs
// it (sbshd keeps that), not generation 0.
TEST_F(mcp_test, a_command_another_server_started_has_its_generation) {
  auto first = start_initialized();
  json r = first->call(tool_call(1, "run_command", {{"command", "sleep 2; echo done"}, {"session", "gen"}, {"wait_seconds", 0.3}}));
  const json& sc = r["result"]["structuredContent"];
  ASSERT_EQ(sc["running"], true) << r.dump();
  uint64_t generation = sc["generation"];
  EXPECT_GT(generation, 0u);
  auto second = start_initialized();
  json a = second->call(tool_call(2, "await_command", {{"id", sc["id"]}, {"wait_seconds", 0.2}}));
  const json& ac = a["result"]["structuredContent"];
  EXPECT_EQ(ac["running"], true) << a.dump();
  EXPECT_EQ(ac["generation"], generation) << a.dump();
  EXPECT_NE(ac["started_at"], nullptr) << a.dump();
  // list_processes shows it too, by its id, beside the background processes.
  json l = second->call(tool_call(3, "list_processes", json::object()));
  const json& cmds = l["result"]["structuredContent"]["commands"];
  ASSERT_EQ(cmds.size(), 1u) << l.dump();
  EXPECT_EQ(cmds[0]["id"], sc["id"]);
  EXPECT_EQ(cmds[0]["state"], "running");
  EXPECT_EQ(cmds[0]["session"], "gen");
}

TEST_F(mcp_test, await_command_gives_what_is_new_since_the_offsets) {
  auto c = start_initialized();
  json r = c->call(
      tool_call(1, "run_command", {{"command", "echo one; echo e1 >&2; sleep 1.5; echo two"}, {"wait_seconds", 0.5}}));
  const json& sc = r["result"]["structuredContent"];
  ASSERT_EQ(sc["running"], true) << r.dump();
  EXPECT_EQ(sc["stdout"], "one\n");
  EXPECT_FALSE(sc["started_at"].is_null()) << r.dump();
  EXPECT_GT(sc["generation"].get<uint64_t>(), 0u) << r.dump();
  EXPECT_GT(sc["duration_ms"].get<uint64_t>(), 100u) << r.dump();
  EXPECT_EQ(sc["stdout_bytes"], 4);
  std::string text = r["result"]["content"][0]["text"];
  EXPECT_TRUE(text.starts_with("still running as " + sc["id"].get<std::string>())) << text;
  EXPECT_NE(text.find("await_command {\"id\":\"" + sc["id"].get<std::string>() +
                      "\",\"stderr_offset\":3,"
                      "\"stdout_offset\":4}"),
            std::string::npos)
      << text;
  json a = c->call(tool_call(2, "await_command",
                             {{"id", sc["id"]}, {"stdout_offset", 4}, {"stderr_offset", 3}, {"wait_seconds", 20}}));
  const json& ac = a["result"]["structuredContent"];
  EXPECT_EQ(ac["running"], false) << a.dump();
  EXPECT_EQ(ac["stdout"], "two\n");
  EXPECT_EQ(ac["stderr"], "");
  EXPECT_EQ(ac["stdout_offset"], 4);
  EXPECT_EQ(ac["stdout_bytes"], 8);
  EXPECT_EQ(ac["exit_code"], 0);
  json whole = c->call(tool_call(3, "await_command", {{"id", sc["id"]}}));
  EXPECT_EQ(whole["result"]["structuredContent"]["stdout"], "one\ntwo\n");
}

TEST_F(mcp_test, file_tools_reach_the_sessions_root_and_nothing_outside) {
  std::filesystem::create_directories(dir + "/ws");
  std::ofstream(dir + "/reqs.txt") << "pinned\n";
  auto c = start_initialized();
  // With an environment built by a setup, keyed by a file beside the root.
  json made = c->call(tool_call(10, "create_session",
                                {{"name", "ws"},
                                 {"root", dir + "/ws"},
                                 {"setup", "cp ../reqs.txt \"$SBSH_ENV/\"; echo copied; echo noted >&2"},
                                 {"setup_keys", {dir + "/reqs.txt"}}}));
  ASSERT_EQ(made["result"]["isError"], false) << made.dump();
  EXPECT_EQ(exec("ws", "cat \"$SBSH_ENV/reqs.txt\"").out, "pinned\n");
  // What the setup wrote comes back with the session; a session whose environment was built
  // already ran no setup.
  EXPECT_EQ(made["result"]["structuredContent"]["setup_stdout"], "copied\n") << made.dump();
  EXPECT_EQ(made["result"]["structuredContent"]["setup_stderr"], "noted\n") << made.dump();
  json again = c->call(tool_call(12, "create_session",
                                 {{"name", "ws3"},
                                  {"root", dir + "/ws"},
                                  {"setup", "cp ../reqs.txt \"$SBSH_ENV/\"; echo copied; echo noted >&2"},
                                  {"setup_keys", {dir + "/reqs.txt"}}}));
  EXPECT_TRUE(again["result"]["structuredContent"]["setup_stdout"].is_null()) << again.dump();
  json failed = c->call(tool_call(11, "create_session", {{"name", "ws2"}, {"setup", "echo no >&2; exit 9"}}));
  EXPECT_EQ(failed["result"]["isError"], true) << failed.dump();
  EXPECT_NE(failed.dump().find("setup_failed"), std::string::npos) << failed.dump();
  json w =
      c->call(tool_call(1, "write_file", {{"session", "ws"}, {"path", "in/config.yml"}, {"content", "mode: x\n"}}));
  EXPECT_EQ(w["result"]["isError"], false) << w.dump();
  EXPECT_EQ(w["result"]["structuredContent"]["bytes"], 8);
  std::string binary("\x00\xff\xfe ok", 6);
  json b = c->call(tool_call(2, "write_file",
                             {{"session", "ws"}, {"path", "bin"}, {"content", "AP/+IG9r"}, {"encoding", "base64"}}));
  EXPECT_EQ(b["result"]["isError"], false) << b.dump();
  std::ifstream in(dir + "/ws/bin", std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), {}), binary);
  json r = c->call(tool_call(3, "read_file", {{"session", "ws"}, {"path", "bin"}}));
  EXPECT_EQ(r["result"]["structuredContent"]["encoding"], "base64") << r.dump();
  EXPECT_EQ(r["result"]["structuredContent"]["content"], "AP/+IG9r");
  json t =
      c->call(tool_call(4, "read_file", {{"session", "ws"}, {"path", "in/config.yml"}, {"offset", 2}, {"length", 3}}));
  EXPECT_EQ(t["result"]["structuredContent"]["content"], "de:") << t.dump();
  EXPECT_EQ(t["result"]["structuredContent"]["truncated"], true);
  json l = c->call(tool_call(5, "list_files", {{"session", "ws"}, {"recursive", true}}));
  const json& entries = l["result"]["structuredContent"]["entries"];
  ASSERT_EQ(entries.size(), 3u) << l.dump();
  EXPECT_EQ(entries[1]["path"], "in");
  EXPECT_EQ(entries[2]["path"], "in/config.yml");
  // A name that is not UTF-8 comes with its exact bytes too.
  std::ofstream(dir + "/ws/caf\xe9") << "x";
  json n = c->call(tool_call(8, "list_files", {{"session", "ws"}}));
  const json& named = n["result"]["structuredContent"]["entries"];
  ASSERT_EQ(named.size(), 3u) << n.dump();
  EXPECT_EQ(named[1]["path"], "caf\uFFFD") << n.dump();
  EXPECT_EQ(named[1]["path_base64"], "Y2Fm6Q==") << n.dump();
  EXPECT_FALSE(named[0].contains("path_base64")) << n.dump();
  json o = c->call(tool_call(6, "read_file", {{"session", "ws"}, {"path", "../../etc/passwd"}}));
  EXPECT_EQ(o["result"]["isError"], true) << o.dump();
  EXPECT_NE(o.dump().find("leads outside the session's root"), std::string::npos) << o.dump();
  EXPECT_EQ(o.dump().find("root:"), std::string::npos);
  json bad = c->call(
      tool_call(7, "write_file", {{"session", "ws"}, {"path", "x"}, {"content", "%%"}, {"encoding", "base64"}}));
  EXPECT_EQ(bad["result"]["isError"], true) << bad.dump();
  EXPECT_FALSE(std::filesystem::exists(dir + "/ws/x"));
}

// edit_file replaces an exact text that occurs once (zero or two occurrences change nothing
// and say how many there were), or every one with replace_all; read_file reads lines, and a
// tail with a negative line.
TEST_F(mcp_test, edit_file_replaces_an_exact_text_and_read_file_reads_lines) {
  std::filesystem::create_directories(dir + "/ed");
  std::ofstream(dir + "/ed/app.py") << "def f():\n    return 1\n\ndef g():\n    return 1\n";
  ::chmod((dir + "/ed/app.py").c_str(), 0750);
  auto c = start_initialized();
  ASSERT_EQ(c->call(tool_call(1, "create_session", {{"name", "ed"}, {"root", dir + "/ed"}}))["result"]["isError"],
            false);
  auto edit = [&](int id, json args) {
    args["session"] = "ed";
    args["path"] = "app.py";
    return c->call(tool_call(id, "edit_file", std::move(args)))["result"];
  };
  json none = edit(2, {{"old_string", "return 2"}, {"new_string", "return 3"}});
  EXPECT_EQ(none["isError"], true);
  EXPECT_NE(none["content"][0]["text"].get<std::string>().find("occurs 0 times"), std::string::npos) << none.dump();
  json two = edit(3, {{"old_string", "    return 1\n"}, {"new_string", "    return 2\n"}});
  EXPECT_EQ(two["isError"], true);
  EXPECT_NE(two["content"][0]["text"].get<std::string>().find("occurs 2 times"), std::string::npos) << two.dump();
  EXPECT_EQ(read_file(dir + "/ed/app.py"), "def f():\n    return 1\n\ndef g():\n    return 1\n");
  json one = edit(4, {{"old_string", "def g():\n    return 1"}, {"new_string", "def g():\n    return 2"}});
  EXPECT_EQ(one["isError"], false) << one.dump();
  EXPECT_EQ(one["structuredContent"]["replacements"], 1);
  EXPECT_EQ(one["structuredContent"]["first_line"], 4);
  EXPECT_EQ(read_file(dir + "/ed/app.py"), "def f():\n    return 1\n\ndef g():\n    return 2\n");
  json all = edit(5, {{"old_string", "return"}, {"new_string", "yield"}, {"replace_all", true}});
  EXPECT_EQ(all["structuredContent"]["replacements"], 2) << all.dump();
  EXPECT_EQ(read_file(dir + "/ed/app.py"), "def f():\n    yield 1\n\ndef g():\n    yield 2\n");
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/ed/app.py").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);  // the file keeps its mode
  // Lines: a range, and the last two.
  json range = c->call(tool_call(6, "read_file", {{"session", "ed"}, {"path", "app.py"}, {"line", 2}, {"lines", 2}}));
  const json& rc = range["result"]["structuredContent"];
  EXPECT_EQ(rc["content"], "    yield 1\n\n") << range.dump();
  EXPECT_EQ(rc["start_line"], 2);
  EXPECT_EQ(rc["end_line"], 3);
  EXPECT_EQ(rc["total_lines"], 5);
  EXPECT_EQ(rc["truncated"], true);
  json tail = c->call(tool_call(7, "read_file", {{"session", "ed"}, {"path", "app.py"}, {"line", -2}}));
  EXPECT_EQ(tail["result"]["structuredContent"]["content"], "def g():\n    yield 2\n") << tail.dump();
  EXPECT_EQ(tail["result"]["structuredContent"]["truncated"], false);
  json zero = c->call(tool_call(8, "read_file", {{"session", "ed"}, {"path", "app.py"}, {"line", 0}}));
  EXPECT_EQ(zero["result"]["isError"], true);
  // No such session: the refusal names the tool that lists them (not the CLI's command).
  json missing = c->call(tool_call(10, "edit_file", {{"path", "x"}, {"old_string", "a"}, {"new_string", "b"}}));
  EXPECT_NE(missing["result"]["content"][0]["text"].get<std::string>().find("list_sessions lists them"),
            std::string::npos)
      << missing.dump();
}

// In a session without a root, the file tools act as its shell would: paths from its
// current directory, with its user's rights.
TEST_F(mcp_test, file_tools_in_a_session_without_a_root_act_as_its_shell) {
  std::string here = dir + "/plain";
  std::filesystem::create_directories(here + "/node_modules");
  std::ofstream(here + "/node_modules/m.js") << "needle\n";
  auto c = start_initialized();
  c->call(tool_call(1, "run_command", {{"command", "cd " + here}, {"session", "nr"}}));
  json w = c->call(
      tool_call(2, "write_file", {{"session", "nr"}, {"path", "sub/notes.txt"}, {"content", "one\nneedle two\n"}}));
  EXPECT_EQ(w["result"]["isError"], false) << w.dump();
  EXPECT_EQ(read_file(here + "/sub/notes.txt"), "one\nneedle two\n");
  ::chmod((here + "/sub/notes.txt").c_str(), 0640);
  json e =
      c->call(tool_call(3, "edit_file",
                        {{"session", "nr"}, {"path", "sub/notes.txt"}, {"old_string", "two"}, {"new_string", "2"}}));
  EXPECT_EQ(e["result"]["isError"], false) << e.dump();
  EXPECT_EQ(read_file(here + "/sub/notes.txt"), "one\nneedle 2\n");
  struct stat st {};
  ASSERT_EQ(::stat((here + "/sub/notes.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  json r = c->call(tool_call(4, "read_file", {{"session", "nr"}, {"path", "sub/notes.txt"}, {"line", -1}}));
  EXPECT_EQ(r["result"]["structuredContent"]["content"], "needle 2\n") << r.dump();
  json b =
      c->call(tool_call(5, "read_file", {{"session", "nr"}, {"path", "sub/notes.txt"}, {"offset", 4}, {"length", 6}}));
  EXPECT_EQ(b["result"]["structuredContent"]["content"], "needle") << b.dump();
  EXPECT_EQ(b["result"]["structuredContent"]["truncated"], true);
  json l = c->call(tool_call(6, "list_files", {{"session", "nr"}, {"depth", 1}}));
  std::vector<std::string> names;
  for (const auto& x : l["result"]["structuredContent"]["entries"]) names.push_back(x["path"]);
  EXPECT_EQ(names, (std::vector<std::string>{"node_modules", "sub"})) << l.dump();
  json f = c->call(tool_call(7, "search_files", {{"session", "nr"}, {"pattern", "needle"}}));
  EXPECT_EQ(f["result"]["structuredContent"]["matches"],
            json::parse(R"([{"path": "sub/notes.txt", "line": 2, "text": "needle 2"}])"))
      << f.dump();
  json gone = c->call(tool_call(8, "read_file", {{"session", "nr"}, {"path", "nosuch"}}));
  EXPECT_EQ(gone["result"]["isError"], true);
  EXPECT_NE(gone.dump().find("No such file"), std::string::npos) << gone.dump();
  // The shell's state is untouched: its directory, and no variable left behind.
  json pwd = c->call(tool_call(9, "run_command", {{"command", "echo \"$PWD ${SBSH_FILE-unset}\""}, {"session", "nr"}}));
  EXPECT_EQ(pwd["result"]["structuredContent"]["stdout"], here + " unset\n");
}

// search_files: a regex over the tree, with line numbers, leaving out what a snapshot leaves
// out (node_modules, .git); list_files to a depth.
TEST_F(mcp_test, search_files_finds_lines_and_skips_node_modules) {
  std::string root = dir + "/sr";
  std::filesystem::create_directories(root + "/src/deep");
  std::filesystem::create_directories(root + "/node_modules/pkg");
  std::filesystem::create_directories(root + "/.git");
  std::ofstream(root + "/src/a.py") << "import os\ndef needle():\n    pass\n";
  std::ofstream(root + "/src/deep/b.txt") << "no\nNEEDLE here\n";
  std::ofstream(root + "/node_modules/pkg/index.js") << "needle()\n";
  std::ofstream(root + "/.git/config") << "needle\n";
  auto c = start_initialized();
  ASSERT_EQ(c->call(tool_call(1, "create_session", {{"name", "sr"}, {"root", root}}))["result"]["isError"], false);
  json r = c->call(tool_call(2, "search_files", {{"session", "sr"}, {"pattern", "needle"}, {"ignore_case", true}}));
  const json& sc = r["result"]["structuredContent"];
  ASSERT_TRUE(sc.is_object()) << r.dump();
  EXPECT_EQ(sc["matches"], json::parse(R"([{"path": "src/a.py", "line": 2, "text": "def needle():"},
                            {"path": "src/deep/b.txt", "line": 2, "text": "NEEDLE here"}])"))
      << r.dump();
  EXPECT_EQ(r["result"]["content"][0]["text"], "src/a.py:2: def needle():\nsrc/deep/b.txt:2: NEEDLE here\n");
  json py = c->call(tool_call(3, "search_files", {{"session", "sr"}, {"pattern", "^def [a-z]+\\("}, {"glob", "*.py"}}));
  EXPECT_EQ(py["result"]["structuredContent"]["matches"].size(), 1u) << py.dump();
  json bad = c->call(tool_call(4, "search_files", {{"session", "sr"}, {"pattern", "("}}));
  EXPECT_EQ(bad["result"]["isError"], true);
  EXPECT_NE(bad.dump().find("argument 'pattern'"), std::string::npos) << bad.dump();
  json one = c->call(tool_call(5, "list_files", {{"session", "sr"}, {"path", "src"}, {"depth", 1}}));
  std::vector<std::string> names;
  for (const auto& e : one["result"]["structuredContent"]["entries"]) names.push_back(e["path"]);
  EXPECT_EQ(names, (std::vector<std::string>{"a.py", "deep"})) << one.dump();
  json two = c->call(tool_call(6, "list_files", {{"session", "sr"}, {"path", "src"}, {"depth", 2}}));
  EXPECT_EQ(two["result"]["structuredContent"]["entries"].size(), 3u) << two.dump();
}

TEST_F(mcp_test, create_session_confines_by_the_kernel_and_reads_it_back) {
  std::filesystem::create_directories(dir + "/box");
  std::ofstream(dir + "/box/inside") << "inside\n";
  std::ofstream(dir + "/secret") << "secret\n";
  std::string root = std::filesystem::canonical(dir + "/box").string();
  auto c = start_initialized();
  json made = c->call(
      tool_call(1, "create_session", {{"name", "box"}, {"root", root}, {"confine", true}, {"no_network", true}}));
  if (made["result"]["isError"] == true && made.dump().find("not_supported") != std::string::npos)
    GTEST_SKIP() << made.dump();
  ASSERT_EQ(made["result"]["isError"], false) << made.dump();
  json tools = c->call(request(9, "tools/list"));
  EXPECT_EQ(result_misfit(tools, "create_session", made), "");
  const json& conf = made["result"]["structuredContent"]["definition"]["confinement"];
  EXPECT_GE(conf["landlock_abi"].get<int>(), 1) << made.dump();
  EXPECT_EQ(conf["namespaces"], json::array({"pid", "net"})) << made.dump();
  json r = c->call(tool_call(2, "run_command", {{"session", "box"}, {"command", "cat inside"}}));
  EXPECT_EQ(r["result"]["structuredContent"]["stdout"], "inside\n") << r.dump();
  EXPECT_EQ(r["result"]["structuredContent"]["oom_killed"], false) << r.dump();
  r = c->call(tool_call(3, "run_command", {{"session", "box"}, {"command", "cat " + dir + "/secret"}}));
  const json& out = r["result"]["structuredContent"];
  EXPECT_EQ(r["result"]["isError"], true) << r.dump();
  EXPECT_NE(out["exit_code"], 0) << r.dump();
  EXPECT_EQ(out["stdout"], "") << r.dump();
  EXPECT_NE(out["stderr"].get<std::string>().find("No such file or directory"), std::string::npos) << r.dump();
  // A memory limit reaches sbshd: made where a cgroup v2 is delegated to it, else refused
  // with the reason.
  json mem = c->call(tool_call(4, "create_session", {{"name", "mem"}, {"memory", "256M"}}));
  if (mem["result"]["isError"] == true) {
    std::string text = mem["result"]["content"][0]["text"].get<std::string>();
    EXPECT_NE(text.find("not_supported"), std::string::npos) << text;
    EXPECT_TRUE(text.find("memory") != std::string::npos || text.find("cgroup") != std::string::npos) << text;
  } else {
    EXPECT_EQ(mem["result"]["structuredContent"]["definition"]["confinement"]["memory_max"], 256 << 20) << mem.dump();
  }
  json removed = c->call(tool_call(5, "remove_session", {{"name", "box"}}));
  EXPECT_EQ(removed["result"]["structuredContent"], json({{"removed", "box"}})) << removed.dump();
  EXPECT_EQ(result_misfit(tools, "remove_session", removed), "");
}

TEST_F(mcp_test, create_session_refuses_confinement_it_cannot_honour_saying_why) {
  auto c = start_initialized();
  // A relative path, by the schema: a result with isError naming the argument.
  json rel = c->call(
      tool_call(1, "create_session", {{"name", "b"}, {"root", dir}, {"confine", true}, {"allow_write", {"out"}}}));
  EXPECT_EQ(rel["result"]["isError"], true) << rel.dump();
  EXPECT_NE(rel.dump().find("allow_write[0]"), std::string::npos) << rel.dump();
  // Paths without confine, a memory size that is none, a confined session without a root.
  json no_confine = c->call(tool_call(2, "create_session", {{"name", "b"}, {"root", dir}, {"read_only", {"/etc"}}}));
  EXPECT_EQ(no_confine["result"]["isError"], true) << no_confine.dump();
  EXPECT_NE(no_confine.dump().find("read_only adds to a confined session's rules: give confine: true too"),
            std::string::npos)
      << no_confine.dump();
  json size = c->call(tool_call(3, "create_session", {{"name", "b"}, {"memory", "lots"}}));
  EXPECT_EQ(size["result"]["isError"], true) << size.dump();
  EXPECT_NE(size.dump().find("is not a memory size"), std::string::npos) << size.dump();
  json rootless = c->call(tool_call(4, "create_session", {{"name", "b"}, {"confine", true}}));
  EXPECT_EQ(rootless["result"]["isError"], true) << rootless.dump();
  EXPECT_NE(rootless.dump().find("give root too"), std::string::npos) << rootless.dump();
  EXPECT_NE(sbsh({"session", "show", "b"}).code, 0);
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

  // A wrong argument is a tool result with isError, which the model sees and can correct.
  auto arg_error = [&](int id, json args) {
    json r = c->call(tool_call(id, "run_command", std::move(args)));
    EXPECT_EQ(r["result"]["isError"], true) << r.dump();
    EXPECT_FALSE(r["result"].contains("structuredContent")) << r.dump();
    return r["result"]["content"][0]["text"].get<std::string>();
  };
  EXPECT_NE(arg_error(4, {{"command", 5}}).find("'command' must be a string"), std::string::npos);
  EXPECT_NE(arg_error(5, json::object()).find("'command' is missing"), std::string::npos);
  EXPECT_NE(arg_error(6, {{"command", "true"}, {"colour", "red"}})
                .find("unknown argument 'colour': it takes command, "),
            std::string::npos);
  EXPECT_NE(arg_error(12, {{"command", "touch " + dir + "/ran"}, {"wait_seconds", "5"}})
                .find("Invalid arguments for run_command: argument 'wait_seconds' must be a number, not a string; "
                      "nothing was run"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir + "/ran"));
  EXPECT_NE(arg_error(7, {{"command", "true"}, {"session", "no spaces"}}).find("'session'"), std::string::npos);
  EXPECT_NE(arg_error(8, {{"command", "true"}, {"env", {{"A", 1}}}}).find("'env.A'"), std::string::npos);
  EXPECT_NE(arg_error(9, {{"command", "true"}, {"timeout_seconds", "1"}}).find("'timeout_seconds'"), std::string::npos);
  // An unknown tool, and arguments that are no object, stay protocol errors.
  json unknown = c->call(tool_call(10, "no_such_tool", json::object()));
  EXPECT_EQ(unknown["error"]["code"], -32602);
  json not_object = c->call(request(13, "tools/call", {{"name", "run_command"}, {"arguments", json::array()}}));
  EXPECT_EQ(not_object["error"]["code"], -32602) << not_object.dump();
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
  EXPECT_EQ(d["result"]["supportedVersions"],
            json::array({"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}));
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
  EXPECT_EQ(u["error"]["data"]["supported"],
            json::array({"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}));
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
  // Output sends progress too (rate limited), its message counting the bytes so far.
  seen.clear();
  c->call(tool_call(3, "run_command", {{"command", "for i in 1 2 3 4 5 6 7 8 9 10; do echo $i; sleep 0.1; done"}},
                    {{"progressToken", "out"}}),
          &seen);
  EXPECT_GE(seen.size(), 3u);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back()["params"]["message"].get<std::string>().find(", 0 bytes"), std::string::npos)
      << seen.back().dump();
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

TEST_F(mcp_test, http_sessions_run_commands_that_keep_state) {
  std::string where = start_http();
  std::string sid = http_session(where);
  http_reply a = http(where, "POST", tool_call(1, "run_command", {{"command", "cd /tmp; X=1"}}).dump(), {sid});
  EXPECT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.headers["content-type"], "application/json");
  http_reply b = http(where, "POST", tool_call(2, "run_command", {{"command", "echo $PWD $X"}}).dump(), {sid});
  EXPECT_EQ(b.json_body()["result"]["structuredContent"]["stdout"], "/tmp 1\n") << b.body;
  http_reply fail = http(where, "POST", tool_call(3, "run_command", {{"command", "exit 4"}}).dump(), {sid});
  EXPECT_EQ(fail.json_body()["result"]["isError"], true);
  http_reply unknown = http(where, "POST", request(4, "no/such").dump(), {sid});
  EXPECT_EQ(unknown.json_body()["error"]["code"], -32601);
  http_reply wrong = http(where, "POST", tool_call(5, "run_command", {{"command", true}}).dump(), {sid});
  EXPECT_EQ(wrong.json_body()["result"]["isError"], true) << wrong.body;
  EXPECT_NE(wrong.json_body()["result"]["content"][0]["text"].get<std::string>().find("'command'"), std::string::npos);
  // Without a session, with an unknown one, elsewhere than /mcp, with a version not spoken.
  EXPECT_EQ(http(where, "POST", request(6, "ping").dump()).status, 400);
  EXPECT_EQ(http(where, "POST", request(7, "ping").dump(), {"Mcp-Session-Id: nosuch"}).status, 404);
  EXPECT_EQ(http(where, "POST", request(8, "ping").dump(), {sid}, "/other").status, 404);
  EXPECT_EQ(http(where, "POST", request(9, "ping").dump(), {sid, "MCP-Protocol-Version: 1999-01-01"}).status, 400);
  EXPECT_EQ(http(where, "POST", request(10, "ping").dump(), {sid, "MCP-Protocol-Version: 2025-11-25"}).status, 200);
  // A progress token gets the answer as an SSE stream, progress first.
  http_reply sse =
      http(where, "POST",
           tool_call(11, "run_command", {{"command", "sleep 1.2; echo done"}}, {{"progressToken", 1}}).dump(), {sid});
  EXPECT_EQ(sse.headers["content-type"], "text/event-stream");
  EXPECT_NE(sse.body.find("notifications/progress"), std::string::npos) << sse.body;
  EXPECT_NE(sse.body.find("done\\n"), std::string::npos) << sse.body;
  // GET opens the session's SSE stream; DELETE ends the session, and the stream with it.
  int stream = http_connect(where);
  ASSERT_GE(stream, 0);
  send_all(stream, request_head("GET", {"Accept: text/event-stream", sid}) + "\r\n");
  EXPECT_EQ(http(where, "GET", "", {"Accept: text/event-stream"}).status, 405);  // no session: no stream
  EXPECT_EQ(http(where, "DELETE", "", {sid}).status, 200);
  http_reply ended = read_reply(stream);
  ::close(stream);
  EXPECT_EQ(ended.status, 200);
  EXPECT_EQ(ended.headers["content-type"], "text/event-stream");
  EXPECT_EQ(http(where, "POST", request(12, "ping").dump(), {sid}).status, 404);
}

TEST_F(mcp_test, http_refuses_large_bodies_bad_json_and_foreign_origins) {
  std::string where = start_http();
  std::string sid = http_session(where);
  std::string big = tool_call(1, "run_command", {{"command", "echo " + std::string(10u << 20, 'x')}}).dump();
  http_reply r = http(where, "POST", big, {sid});
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.json_body()["error"]["code"], -32600) << r.body;
  http_reply bad = http(where, "POST", "{\"jsonrpc\": ", {sid});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json_body()["error"]["code"], -32700);
  http_reply evil = http(where, "POST", request(2, "ping").dump(), {sid, "Origin: http://evil.example.com"});
  EXPECT_EQ(evil.status, 403);
  EXPECT_TRUE(evil.json_body().contains("error")) << evil.body;
  std::string port = where.substr(where.rfind(':') + 1);
  EXPECT_EQ(http(where, "POST", request(3, "ping").dump(), {sid, "Origin: http://localhost:" + port}).status, 200);
  EXPECT_EQ(http(where, "POST", request(4, "ping").dump(), {sid, "Origin: http://127.0.0.1:" + port}).status, 200);
  // Loopback, but not this server: another port, another address.
  EXPECT_EQ(http(where, "POST", request(4, "ping").dump(), {sid, "Origin: http://localhost:1234"}).status, 403);
  EXPECT_EQ(http(where, "POST", request(4, "ping").dump(), {sid, "Origin: http://[::1]:" + port}).status, 403);
  // Still serving.
  http_reply ok = http(where, "POST", tool_call(5, "run_command", {{"command", "echo alive"}}).dump(), {sid});
  EXPECT_EQ(ok.json_body()["result"]["structuredContent"]["stdout"], "alive\n");
}

TEST_F(mcp_test, http_with_a_token_needs_it_and_remote_needs_a_token) {
  { std::ofstream(dir + "/token") << "0123456789abcdef0123\n"; }
  std::string where = start_http("127.0.0.1:0", {"--token-file", dir + "/token"});
  EXPECT_EQ(token_file, dir + "/token");
  http_reply none = http(where, "POST", initialize_request().dump(), {"Authorization:"});
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.headers["www-authenticate"].rfind("Bearer", 0), 0u) << none.headers["www-authenticate"];
  EXPECT_TRUE(none.json_body().contains("error"));
  EXPECT_EQ(http(where, "POST", initialize_request().dump(), {"Authorization: Bearer wrong"}).status, 401);
  EXPECT_EQ(http(where, "POST", initialize_request().dump(), {"Authorization: Bearer 0123456789abcdef0123"}).status,
            200);

  run_result remote = sbsh({"mcp", "--http", "127.0.0.1:0", "--allow-remote"});
  EXPECT_EQ(remote.code, 255);
  EXPECT_NE(remote.err.find("--token-file"), std::string::npos) << remote.err;
  run_result wide = sbsh({"mcp", "--http", "0.0.0.0:0"});
  EXPECT_EQ(wide.code, 255);
  EXPECT_NE(wide.err.find("loopback"), std::string::npos) << wide.err;
}

TEST_F(mcp_test, http_2026_07_28_requests_are_stateless_and_headers_must_match_the_body) {
  std::string where = start_http();
  std::vector<std::string> h{"MCP-Protocol-Version: 2026-07-28", "Mcp-Method: server/discover"};
  http_reply d = http(where, "POST", request(1, "server/discover", {{"_meta", modern_meta()}}).dump(), h);
  EXPECT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(d.json_body()["result"]["resultType"], "complete");
  EXPECT_TRUE(d.headers["mcp-session-id"].empty());
  http_reply call = http(where, "POST", tool_call(2, "run_command", {{"command", "echo hi"}}, modern_meta()).dump(),
                         {"MCP-Protocol-Version: 2026-07-28", "Mcp-Method: tools/call", "Mcp-Name: run_command"});
  EXPECT_EQ(call.json_body()["result"]["structuredContent"]["stdout"], "hi\n") << call.body;
  EXPECT_EQ(call.json_body()["result"]["resultType"], "complete");
  http_reply mismatch = http(where, "POST", tool_call(3, "run_command", {{"command", "echo hi"}}, modern_meta()).dump(),
                             {"MCP-Protocol-Version: 2026-07-28", "Mcp-Method: tools/call", "Mcp-Name: other"});
  EXPECT_EQ(mismatch.status, 400);
  EXPECT_EQ(mismatch.json_body()["error"]["code"], -32020);
  json old = modern_meta();
  old["io.modelcontextprotocol/protocolVersion"] = "1900-01-01";
  http_reply unsupported = http(where, "POST", request(4, "tools/list", {{"_meta", old}}).dump(),
                                {"MCP-Protocol-Version: 1900-01-01", "Mcp-Method: tools/list"});
  EXPECT_EQ(unsupported.status, 400);
  EXPECT_EQ(unsupported.json_body()["error"]["code"], -32022);
  EXPECT_EQ(unsupported.json_body()["error"]["data"]["requested"], "1900-01-01");
  http_reply missing = http(where, "POST", request(5, "no/such", {{"_meta", modern_meta()}}).dump(),
                            {"MCP-Protocol-Version: 2026-07-28", "Mcp-Method: no/such"});
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.json_body()["error"]["code"], -32601);
}

TEST_F(mcp_test, http_a_dropped_connection_cancels_its_call) {
  std::string where = start_http();
  std::string sid = http_session(where);
  http(where, "POST", tool_call(1, "run_command", {{"command", "Z=kept"}}).dump(), {sid});
  int fd = http_connect(where);
  ASSERT_GE(fd, 0);
  std::string body = tool_call(2, "run_command", {{"command", sleeper()}}).dump();
  send_all(fd, post_head(sid, body.size()) + body);
  pid_t pid = read_pid();
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(pid_alive(pid));
  ::close(fd);
  EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, 10s));
  http_reply r = http(where, "POST", tool_call(3, "run_command", {{"command", "echo $Z"}}).dump(), {sid});
  EXPECT_EQ(r.json_body()["result"]["structuredContent"]["stdout"], "kept\n") << r.body;

  // notifications/cancelled, on another connection of the session: the command stops, and
  // the request held open gets a whole response, an error for its id (-32800).
  ::unlink(pidfile().c_str());
  fd = http_connect(where);
  ASSERT_GE(fd, 0);
  body = tool_call(4, "run_command", {{"command", sleeper()}}).dump();
  send_all(fd, post_head_closing(sid, body.size()) + body);
  pid = read_pid();
  ASSERT_GT(pid, 0);
  json cancel = {{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 4}}}};
  EXPECT_EQ(http(where, "POST", cancel.dump(), {sid}).status, 202);
  http_reply answered = read_reply(fd);
  ::close(fd);
  EXPECT_EQ(answered.status, 200) << answered.body;
  EXPECT_EQ(answered.json_body()["id"], 4) << answered.body;
  EXPECT_EQ(answered.json_body()["error"]["code"], -32800) << answered.body;
  EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, 10s));
  r = http(where, "POST", tool_call(5, "run_command", {{"command", "echo $Z"}}).dump(), {sid});
  EXPECT_EQ(r.json_body()["result"]["structuredContent"]["stdout"], "kept\n") << r.body;

  // The same with the answer asked for as SSE (a progress token): the stream ends whole.
  ::unlink(pidfile().c_str());
  fd = http_connect(where);
  ASSERT_GE(fd, 0);
  body = tool_call(6, "run_command", {{"command", sleeper()}}, {{"progressToken", 6}}).dump();
  send_all(fd, post_head_closing(sid, body.size()) + body);
  pid = read_pid();
  ASSERT_GT(pid, 0);
  cancel["params"]["requestId"] = 6;
  EXPECT_EQ(http(where, "POST", cancel.dump(), {sid}).status, 202);
  http_reply streamed = read_reply(fd);
  ::close(fd);
  EXPECT_EQ(streamed.status, 200);
  EXPECT_EQ(streamed.headers["content-type"], "text/event-stream");
  EXPECT_NE(streamed.body.find("\"code\":-32800"), std::string::npos) << streamed.body;
  EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, 10s));

  // A DELETE of the session while a call runs: the call stops and its request is answered.
  ::unlink(pidfile().c_str());
  fd = http_connect(where);
  ASSERT_GE(fd, 0);
  body = tool_call(7, "run_command", {{"command", sleeper()}}).dump();
  send_all(fd, post_head_closing(sid, body.size()) + body);
  pid = read_pid();
  ASSERT_GT(pid, 0);
  EXPECT_EQ(http(where, "DELETE", "", {sid}).status, 200);
  http_reply deleted = read_reply(fd);
  ::close(fd);
  EXPECT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(deleted.json_body()["error"]["code"], -32800) << deleted.body;
  EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, 10s));

  // SIGTERM ends the server cleanly.
  ::kill(http_server_->pid(), SIGTERM);
  ASSERT_TRUE(http_server_->wait_exit(15s));
  EXPECT_TRUE(WIFEXITED(http_server_->status()) && WEXITSTATUS(http_server_->status()) == 0) << http_server_->status();
}

// What a process of another user gets: the status of `request`, sent by a child that became
// uid 65534 (nobody) before it connected, and whether it could open the token file. Needs
// root (setresuid); status 0 when the child could not say.
struct foreign_result {
  int status = 0;
  bool read_token = true;
};
foreign_result as_nobody(const std::string& where, const std::string& request, const std::string& token_path) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return {};
  socket_address server = address_of(where);  // the child only makes system calls
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    char out[4] = {'?', '0', '0', '0'};  // 'r' or 'n' (token file readable or not), the status's digits
    if (::setgroups(0, nullptr) == 0 && ::setresgid(65534, 65534, 65534) == 0 &&
        ::setresuid(65534, 65534, 65534) == 0) {
      int tf = ::open(token_path.c_str(), O_RDONLY | O_CLOEXEC);
      out[0] = tf >= 0 ? 'r' : 'n';
      int fd = connect_to(server);
      char head[16] = {};
      // A server that refuses at once may close before it has read the request: read its
      // answer whether or not the request was all sent.
      if (fd >= 0) (void)!::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
      if (fd >= 0 && ::read(fd, head, sizeof head - 1) >= 12) std::memcpy(out + 1, head + 9, 3);  // "HTTP/1.1 401 ..."
    }
    (void)!::write(p[1], out, sizeof out);
    ::_exit(0);
  }
  ::close(p[1]);
  foreign_result r;
  char in[4];
  pollfd pf{p[0], POLLIN, 0};
  if (::poll(&pf, 1, 30000) == 1 && ::read(p[0], in, sizeof in) == 4) {
    r.read_token = in[0] != 'n';
    r.status = std::atoi(std::string(in + 1, 3).c_str());
  }
  ::close(p[0]);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return r;
}

TEST_F(mcp_test, http_serves_on_a_unix_socket) {
  std::string path = dir + "/mcp.sock";
  std::string where = start_http(path);
  ASSERT_EQ(where, path);
  std::string sid = http_session(where);
  http_reply r = http(where, "POST", tool_call(1, "run_command", {{"command", "echo unix"}}).dump(), {sid});
  EXPECT_EQ(r.json_body()["result"]["structuredContent"]["stdout"], "unix\n") << r.body;
  // A second server does not take the socket away from the first.
  run_result second = sbsh({"mcp", "--http", path});
  EXPECT_EQ(second.code, 255);
  EXPECT_NE(second.err.find("listening there already"), std::string::npos) << second.err;
  EXPECT_EQ(http(where, "POST", request(2, "ping").dump(), {sid}).status, 200);
  // Only this user: the socket is 0600, and even opened to all, another uid is refused.
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  if (::getuid() == 0) {
    ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
    ASSERT_EQ(::chmod(dir.c_str(), 0711), 0);  // nobody may reach the socket, not list the directory
    std::string body = request(3, "ping").dump();
    foreign_result nobody =
        as_nobody(where,
                  request_head("POST", {sid, "Content-Type: application/json", "Accept: application/json",
                                        "Connection: close", "Content-Length: " + std::to_string(body.size())}) +
                      "\r\n" + body,
                  "");
    ::chmod(dir.c_str(), 0700);
    EXPECT_EQ(nobody.status, 403);
    EXPECT_EQ(http(where, "POST", request(4, "ping").dump(), {sid}).status, 200);
  }
}

TEST_F(mcp_test, http_on_tcp_makes_the_users_token_and_refuses_requests_without_it) {
  std::string where = start_http();
  // The token: made in the runtime directory, 0600, this user's, 32 random bytes in hex.
  std::string path = dir + "/run/sbsh/mcp-token";
  ASSERT_EQ(token_file, path) << read_file(dir + "/mcp.err");
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, ::getuid());
  std::string token = trim(read_file(path));
  EXPECT_EQ(token.size(), 64u);
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos) << token;

  http_reply none = http(where, "POST", initialize_request().dump(), {"Authorization:"});
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.headers["www-authenticate"].rfind("Bearer", 0), 0u) << none.headers["www-authenticate"];
  EXPECT_NE(none.body.find(path), std::string::npos) << none.body;  // says where the token is
  EXPECT_EQ(http(where, "POST", initialize_request().dump(), {"Authorization: Bearer " + std::string(64, 'a')}).status,
            401);
  EXPECT_EQ(http(where, "POST", initialize_request().dump(), {"Authorization: Bearer " + token.substr(1)}).status, 401);
  EXPECT_EQ(http(where, "POST", initialize_request().dump(), {"Authorization: Basic " + token}).status, 401);
  // Stateless requests too, and nothing runs for them.
  http_reply call =
      http(where, "POST", tool_call(2, "run_command", {{"command", "touch " + dir + "/ran"}}, modern_meta()).dump(),
           {"Authorization:", "MCP-Protocol-Version: 2026-07-28", "Mcp-Method: tools/call", "Mcp-Name: run_command"});
  EXPECT_EQ(call.status, 401);
  EXPECT_FALSE(std::filesystem::exists(dir + "/ran"));
  // With it: served.
  EXPECT_EQ(http(where, "POST", initialize_request().dump()).status, 200);

  // Another user, without the token (which it cannot read), is refused.
  if (::getuid() == 0) {
    std::string body = initialize_request().dump();
    std::string req =
        request_head("POST", {"Authorization:", "Content-Type: application/json", "Accept: application/json",
                              "Connection: close", "Content-Length: " + std::to_string(body.size())}) +
        "\r\n" + body;
    foreign_result nobody = as_nobody(where, req, path);
    EXPECT_EQ(nobody.status, 401);
    EXPECT_FALSE(nobody.read_token);
  }

  // A second server reuses the token; one in a file others could read is replaced. (One that
  // cannot listen, on port 99999, has read or made the token first.)
  run_result again = run({bin("sbsh"), "--no-autostart", "mcp", "--http", "127.0.0.1:99999"});
  EXPECT_NE(again.code, 0);
  EXPECT_EQ(trim(read_file(path)), token);
  ::chmod(path.c_str(), 0644);
  again = run({bin("sbsh"), "--no-autostart", "mcp", "--http", "127.0.0.1:99999"});
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_NE(trim(read_file(path)), token);
  // A runtime directory others may enter keeps no token; the error says how to fix it.
  ASSERT_EQ(::chmod((dir + "/run/sbsh").c_str(), 0755), 0);
  run_result open_dir = run({bin("sbsh"), "--no-autostart", "mcp", "--http", "127.0.0.1:0"});
  ::chmod((dir + "/run/sbsh").c_str(), 0700);
  EXPECT_NE(open_dir.code, 0);
  EXPECT_NE(open_dir.err.find("chmod 700"), std::string::npos) << open_dir.err;
  EXPECT_NE(open_dir.err.find("--token-file"), std::string::npos) << open_dir.err;
}

// Connections that the test holds open, closed at the end of the scope.
struct held_connections {
  std::vector<int> fds;
  held_connections() = default;
  held_connections(const held_connections&) = delete;
  held_connections& operator=(const held_connections&) = delete;
  ~held_connections() {
    for (int fd : fds) ::close(fd);
  }
  // Opens `n` connections to `where`, sending `text` on each.
  void open(const std::string& where, size_t n, const std::string& text) {
    for (size_t i = 0; i < n; ++i) {
      int fd = http_connect(where);
      ASSERT_GE(fd, 0) << "connection " << i;
      fds.push_back(fd);
      if (!text.empty()) send_all(fd, text);
    }
  }
};

// Whether the server closed `fd` (end of file, or a reset) within the hang guard; what it sent
// first is skipped.
bool closed_by_server(int fd) {
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 60000) != 1) return false;
    if (::read(fd, buf, sizeof buf) <= 0) return true;
  }
}

TEST_F(mcp_test, http_keeps_no_body_of_a_request_it_will_refuse) {
  std::string where = start_http();
  pid_t server = http_server_->pid();
  long before = status_kb(server, "VmHWM");
  ASSERT_GT(before, 0);
  // 64 clients without the token each send most of a 4 MB body; were the bodies kept, the
  // server would hold 256 MB at once.
  constexpr size_t kBody = 4'000'000, kSent = 3'900'000;
  std::string head =
      request_head("POST", {"Authorization:", "Content-Type: application/json", "Accept: application/json",
                            "Connection: close", "Content-Length: " + std::to_string(kBody)}) +
      "\r\n";
  held_connections clients;
  clients.open(where, 64, head);
  std::string part(kSent, ' ');
  for (int fd : clients.fds) send_all(fd, part);
  for (int fd : clients.fds) send_all(fd, std::string(kBody - kSent, ' '));
  for (int fd : clients.fds) EXPECT_EQ(read_reply(fd).status, 401);
  long after = status_kb(server, "VmHWM");
  EXPECT_LT(after - before, 64 * 1024) << "peak resident KiB went from " << before << " to " << after;
  EXPECT_EQ(http(where, "POST", initialize_request().dump()).status, 200);
}

TEST_F(mcp_test, http_idle_and_slow_connections_do_not_lock_out_a_request) {
  std::string where = start_http();
  std::string sid = http_session(where);
  held_connections idle, slow;
  idle.open(where, 64, "");
  http_reply r = http(where, "POST", tool_call(1, "run_command", {{"command", "echo past the idle"}}).dump(), {sid});
  EXPECT_EQ(r.json_body()["result"]["structuredContent"]["stdout"], "past the idle\n") << r.status << r.body;
  // Headers that never end, more of them than the server keeps connections for.
  slow.open(where, 200, request_head("POST", {"Content-Type: application/json"}) + "X-Slow: ");
  r = http(where, "POST", tool_call(2, "run_command", {{"command", "echo past the slow"}}).dump(), {sid});
  EXPECT_EQ(r.json_body()["result"]["structuredContent"]["stdout"], "past the slow\n") << r.status << r.body;
  // And they do not stay: each is closed, by the header timeout if not to make room.
  EXPECT_TRUE(closed_by_server(idle.fds.back()));
  EXPECT_TRUE(closed_by_server(slow.fds.back()));
}

TEST_F(mcp_test, http_open_sse_streams_do_not_lock_out_a_request) {
  std::string where = start_http();
  std::string sid = http_session(where);
  held_connections streams;
  std::vector<std::string> sessions(35);
  for (auto& session : sessions) session = http_session(where);
  for (int i = 0; i < 70; ++i) {
    int fd = http_connect(where);
    ASSERT_GE(fd, 0);
    streams.fds.push_back(fd);
    send_all(fd, request_head("GET", {"Accept: text/event-stream", sessions[i / 2]}) + "\r\n");
  }
  // Every stream is answered: opened (200) or, past the cap on streams, refused (503).
  int opened = 0, refused = 0;
  for (int fd : streams.fds) {
    char head[13] = {};
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 30000), 1);
    ASSERT_EQ(::recv(fd, head, 12, MSG_PEEK), 12);
    std::string status(head + 9, 3);
    opened += status == "200" ? 1 : 0;
    refused += status == "503" ? 1 : 0;
  }
  EXPECT_GT(opened, 0);
  EXPECT_EQ(opened + refused, 70);
  http_reply r = http(where, "POST", tool_call(1, "run_command", {{"command", "echo past the streams"}}).dump(), {sid});
  EXPECT_EQ(r.json_body()["result"]["structuredContent"]["stdout"], "past the streams\n") << r.status << r.body;
}

TEST_F(mcp_test, http_a_burst_of_initialize_calls_ends_no_live_session) {
  std::string where = start_http();
  std::string sid = http_session(where);
  ASSERT_EQ(http(where, "POST", tool_call(1, "run_command", {{"command", "W=kept"}}).dump(), {sid}).status, 200);
  int made = 0, refused = 0;
  for (int i = 0; i < 300; ++i) {
    http_reply r = http(where, "POST", initialize_request().dump());
    if (r.status == 200) ++made;
    if (r.status == 503) {
      ++refused;
      EXPECT_FALSE(r.headers["retry-after"].empty());
      EXPECT_NE(r.body.find("sessions"), std::string::npos) << r.body;
    }
  }
  EXPECT_EQ(made, 255);  // the cap, with the first session
  EXPECT_EQ(refused, 45);
  http_reply r = http(where, "POST", tool_call(2, "run_command", {{"command", "echo $W"}}).dump(), {sid});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json_body()["result"]["structuredContent"]["stdout"], "kept\n") << r.body;
  // Stateless requests need no session, and still work.
  http_reply d = http(where, "POST", request(3, "server/discover", {{"_meta", modern_meta()}}).dump(),
                      {"MCP-Protocol-Version: 2026-07-28", "Mcp-Method: server/discover"});
  EXPECT_EQ(d.status, 200) << d.body;
}

// A 2026-07-28 request without the _meta that revision's carry is refused, 400 with Invalid
// params naming what is missing; its removed methods (initialize, ping) are 404.
TEST_F(mcp_test, http_stateless_requests_without_their_meta_are_refused) {
  std::string where = start_http();
  auto post = [&](const std::string& method, const json& meta) {
    json params = json::object();
    if (!meta.is_null()) params["_meta"] = meta;
    return http(where, "POST", request(1, method, params).dump(),
                {"MCP-Protocol-Version: 2026-07-28", "Mcp-Method: " + method});
  };
  const std::vector<std::pair<json, std::string>> lacking{
      {nullptr, "params._meta"},
      {{{"io.modelcontextprotocol/clientCapabilities", json::object()}}, "protocolVersion"},
      {{{"io.modelcontextprotocol/protocolVersion", "2026-07-28"}}, "clientCapabilities"}};
  for (const auto& [meta, named] : lacking) {
    http_reply r = post("tools/list", meta);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.json_body()["error"]["code"], -32602) << r.body;
    EXPECT_NE(r.body.find(named), std::string::npos) << r.body;
  }
  for (const char* removed : {"ping", "initialize"}) {
    http_reply r = post(removed, modern_meta());
    EXPECT_EQ(r.status, 404) << removed << ": " << r.body;
    EXPECT_EQ(r.json_body()["error"]["code"], -32601) << r.body;
  }
  EXPECT_EQ(post("tools/list", modern_meta()).status, 200);
}

TEST_F(mcp_test, http_refuses_hosts_and_origins_that_are_not_exactly_its_own) {
  std::string where = start_http();
  std::string port = where.substr(where.rfind(':') + 1);
  std::string ping = request(1, "server/discover", {{"_meta", modern_meta()}}).dump();
  std::vector<std::string> modern{"MCP-Protocol-Version: 2026-07-28", "Mcp-Method: server/discover"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), modern.begin(), modern.end());
    return http(where, "POST", ping, extra);
  };
  EXPECT_EQ(with({}).status, 200);
  EXPECT_EQ(with({"Host: localhost:" + port}).status, 200);
  EXPECT_EQ(with({"Host: LOCALHOST:" + port}).status, 200);
  http_reply longer = with({"Host: 127.0.0.1:" + port + ".evil.example"});
  EXPECT_EQ(longer.status, 403);
  EXPECT_NE(longer.body.find("Host"), std::string::npos) << longer.body;
  EXPECT_EQ(with({"Host: evil.example"}).status, 403);
  EXPECT_EQ(with({"Host: 127.0.0.1"}).status, 403);    // no port
  EXPECT_EQ(with({"Host: 127.0.0.1:1"}).status, 403);  // another port
  EXPECT_EQ(with({"Host: 127.0.0.1:" + port, "Host: evil.example"}).status, 400);
  EXPECT_EQ(with({"Host: 127.0.0.1:" + port, "Host: 127.0.0.1:" + port}).status, 400);
  http_reply nohost = with({"Host:"});
  EXPECT_EQ(nohost.status, 400);
  EXPECT_NE(nohost.body.find("Host"), std::string::npos) << nohost.body;
  EXPECT_EQ(with({"Origin: http://127.0.0.1:" + port}).status, 200);
  http_reply userinfo = with({"Origin: http://127.0.0.1:1@evil.example"});
  EXPECT_EQ(userinfo.status, 403);
  EXPECT_NE(userinfo.body.find("Origin"), std::string::npos) << userinfo.body;
  EXPECT_EQ(with({"Origin: http://127.0.0.1:" + port + "@evil.example"}).status, 403);
  EXPECT_EQ(with({"Origin: http://127.0.0.1:" + port + ".evil.example"}).status, 403);
  EXPECT_EQ(with({"Origin: http://127.0.0.1:" + port + "/path"}).status, 403);
  EXPECT_EQ(with({"Origin: https://127.0.0.1:" + port}).status, 403);
  EXPECT_EQ(with({"Origin: null"}).status, 403);
  EXPECT_EQ(with({"Origin: http://127.0.0.1:" + port, "Origin: http://evil.example"}).status, 403);
}

}  // namespace mcp_tests
}  // namespace sbsh::test
