// The MCP server's parts that need no sbshd: JSON-RPC message checks (mcp/jsonrpc.cpp),
// the argument checker and tool table (tools.cpp), and the protocol core's answers to
// requests that run no tool (server.cpp): revisions, discovery, errors.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "mcp/jsonrpc.h"
#include "mcp/render.h"
#include "mcp/results.h"
#include "mcp/server.h"
#include "mcp/tool_args.h"
#include "mcp/tools.h"
#include "tests/schema_fit.h"
#include "ipc/protocol.h"
#include "ipc/text.h"

namespace sbsh::mcp::mcp_tools_tests {

TEST(McpJsonRpc, ShapesOfMessages) {
  EXPECT_EQ(parse_message("{").error["error"]["code"], kParseError);
  EXPECT_EQ(parse_message("[]").error["error"]["code"], kInvalidRequest);
  EXPECT_EQ(parse_message("3").error["error"]["code"], kInvalidRequest);
  EXPECT_EQ(parse_message(R"({"id": 1, "method": "ping"})").error["error"]["code"], kInvalidRequest);
  auto bad_id = parse_message(R"({"jsonrpc": "2.0", "id": [1], "method": "ping"})");
  EXPECT_EQ(bad_id.error["error"]["code"], kInvalidRequest);
  EXPECT_TRUE(bad_id.error["id"].is_null());
  auto bad_params = parse_message(R"({"jsonrpc": "2.0", "id": "a", "method": "ping", "params": [1]})");
  EXPECT_EQ(bad_params.error["error"]["code"], kInvalidRequest);
  EXPECT_EQ(bad_params.error["id"], "a");  // the id is known, so the error names it

  auto req = parse_message(R"({"jsonrpc": "2.0", "id": 7, "method": "tools/list"})");
  ASSERT_TRUE(req.message);
  EXPECT_EQ(req.message->kind, message_kind::request);
  EXPECT_EQ(req.message->id, 7);
  EXPECT_TRUE(req.message->params.is_object());
  auto note = parse_message(R"({"jsonrpc": "2.0", "method": "notifications/initialized"})");
  ASSERT_TRUE(note.message);
  EXPECT_EQ(note.message->kind, message_kind::notification);
  auto resp = parse_message(R"({"jsonrpc": "2.0", "id": 1, "result": {}})");
  ASSERT_TRUE(resp.message);
  EXPECT_EQ(resp.message->kind, message_kind::response);
  // Invalid UTF-8 in what is sent back never breaks the line.
  EXPECT_NO_THROW(to_line(json{{"text", std::string("\xff\xfe")}}));
}

TEST(McpTools, FixedOrderAndSchemas) {
  std::vector<std::string> names;
  for (const auto& t : tool_list()) {
    names.push_back(t["name"]);
    EXPECT_EQ(t["inputSchema"]["type"], "object");
    EXPECT_EQ(t["outputSchema"]["type"], "object");
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"run_command", "list_sessions", "create_session", "remove_session",
                                      "restart_session", "start_process", "list_processes", "kill_process",
                                      "wait_process", "process_logs", "await_command", "cancel_command", "send_input",
                                      "read_file", "write_file", "list_files", "edit_file", "search_files"}));
}

TEST(McpTools, ArgumentsAreCheckedAndNamed) {
  const tool& run = *find_tool("run_command");
  EXPECT_EQ(check_arguments(run, {{"command", "ls"}}), "");
  EXPECT_EQ(check_arguments(run, {{"command", "ls"}, {"timeout_seconds", 2}, {"env", {{"A", "b"}}}}), "");
  EXPECT_EQ(check_arguments(run, json::object()), "argument 'command' is missing");
  EXPECT_EQ(check_arguments(run, {{"command", ""}}), "argument 'command' must not be empty");
  EXPECT_EQ(check_arguments(run, {{"command", 1}}), "argument 'command' must be a string, not an integer");
  EXPECT_EQ(check_arguments(run, {{"command", "ls"}, {"x", 1}}).substr(0, 43),
            "unknown argument 'x': it takes command, cwd");
  EXPECT_NE(check_arguments(run, {{"command", "ls"}, {"timeout_seconds", 0}}).find("'timeout_seconds'"),
            std::string::npos);
  EXPECT_NE(check_arguments(run, {{"command", "ls"}, {"session", "-bad"}}).find("'session'"), std::string::npos);
  EXPECT_NE(check_arguments(run, {{"command", "ls"}, {"env", {{"A", 1}}}}).find("'env.A'"), std::string::npos);
  EXPECT_NE(check_arguments(run, {{"command", "ls"}, {"env", {{"A=B", "c"}}}}).find("'env' has a key 'A=B'"),
            std::string::npos);
  // Long texts are refused by length before any pattern meets them, and quoted cut short.
  EXPECT_NE(check_arguments(run, {{"command", "ls"}, {"session", std::string(100, 'a')}}).find("at most 64"),
            std::string::npos);
  std::string key(1u << 20, 'K');
  std::string e = check_arguments(run, {{"command", "ls"}, {"env", {{key, "v"}}}});
  EXPECT_NE(e.find("'env' has a key"), std::string::npos) << e.substr(0, 200);
  EXPECT_LT(e.size(), 300u);
  const tool& create = *find_tool("create_session");
  EXPECT_NE(check_arguments(create, {{"name", "s"}, {"restart", "sometimes"}}).find("one of always"),
            std::string::npos);
  EXPECT_NE(check_arguments(create, {{"name", "s"}, {"init", {"ok", 2}}}).find("'init[1]'"), std::string::npos);
  EXPECT_EQ(check_arguments(create, {{"name", "s"},
                                     {"root", "/r"},
                                     {"confine", true},
                                     {"allow_write", {"/a"}},
                                     {"read_only", {"/b"}},
                                     {"no_network", true},
                                     {"memory", "512M"},
                                     {"pids", 64},
                                     {"cpu", 0.5}}),
            "");
  EXPECT_EQ(check_arguments(create, {{"name", "s"}, {"memory", 1 << 30}}), "");
  EXPECT_NE(check_arguments(create, {{"name", "s"}, {"confine", true}, {"allow_read", {"rel"}}})
                .find("'allow_read[0]' must match"),
            std::string::npos);
  EXPECT_NE(check_arguments(create, {{"name", "s"}, {"memory", true}}).find("'memory' must be an integer or string"),
            std::string::npos);
  EXPECT_NE(check_arguments(create, {{"name", "s"}, {"cpu", 0}}).find("'cpu' must be at least"), std::string::npos);
  EXPECT_NE(check_arguments(create, {{"name", "s"}, {"pids", 1e30}}).find("'pids' must be at most"), std::string::npos);
  EXPECT_NE(check_arguments(create, {{"name", "s"}, {"confine", "yes"}}).find("'confine' must be a boolean"),
            std::string::npos);
  const tool& logs = *find_tool("process_logs");
  EXPECT_EQ(check_arguments(logs, {{"id", 3}, {"tail", 10}}), "");
  EXPECT_EQ(check_arguments(logs, {{"id", "web"}, {"tail", 10.0}}), "");  // an integral number is an integer
  EXPECT_NE(check_arguments(logs, {{"id", true}}).find("'id'"), std::string::npos);
  EXPECT_NE(check_arguments(logs, {{"id", 1}, {"tail", 0}}).find("at least 1"), std::string::npos);
}

// A tool's arguments are declared once, as a struct with a table: an argument added there has
// its schema property, its check and its parse with no other code.
struct probe_args {
  std::string label;
  std::optional<uint64_t> count;
  std::vector<std::string> tags;
  static constexpr std::string_view kColours[] = {"red", "green"};
  std::string colour = "red";
  static constexpr auto arguments() {
    using s = probe_args;
    return std::tuple{arg("label", &s::label, "a label").required().matching("^[a-z]+$").longest(8),
                      arg("count", &s::count, "how many").at_least(1).at_most(10),
                      arg("tags", &s::tags, "tags").most_items(2).items_non_empty(),
                      arg("colour", &s::colour, "which").among(kColours)};
  }
};

TEST(McpTools, ArgumentsFollowFromTheirDeclaration) {
  const json& schema = input_schema_of<probe_args>();
  EXPECT_EQ(schema["required"], json::array({"label"}));
  EXPECT_EQ(schema["additionalProperties"], false);
  EXPECT_EQ(schema["properties"]["label"],
            (json{{"type", "string"}, {"pattern", "^[a-z]+$"}, {"maxLength", 8}, {"description", "a label"}}));
  EXPECT_EQ(schema["properties"]["count"],
            (json{{"type", "integer"}, {"minimum", 1}, {"maximum", 10}, {"description", "how many"}}));
  EXPECT_EQ(schema["properties"]["tags"], (json{{"type", "array"},
                                                {"maxItems", 2},
                                                {"items", {{"type", "string"}, {"minLength", 1}}},
                                                {"description", "tags"}}));
  EXPECT_EQ(schema["properties"]["colour"]["enum"], json::array({"red", "green"}));

  EXPECT_EQ(check_arguments_of<probe_args>({{"label", "abc"}, {"count", 3}}), "");
  EXPECT_EQ(check_arguments_of<probe_args>(json::object()), "argument 'label' is missing");
  EXPECT_EQ(check_arguments_of<probe_args>({{"label", 7}}), "argument 'label' must be a string, not an integer");
  EXPECT_EQ(check_arguments_of<probe_args>({{"label", "ABC"}}), "argument 'label' must match ^[a-z]+$");
  EXPECT_EQ(check_arguments_of<probe_args>({{"label", "abc"}, {"count", 11}}), "argument 'count' must be at most 10");
  EXPECT_EQ(check_arguments_of<probe_args>({{"label", "abc"}, {"tags", {"a", ""}}}),
            "argument 'tags[1]' must not be empty");
  EXPECT_EQ(check_arguments_of<probe_args>({{"label", "abc"}, {"colour", "blue"}}),
            "argument 'colour' must be one of red, green");
  EXPECT_EQ(check_arguments_of<probe_args>({{"label", "abc"}, {"size", 1}}),
            "unknown argument 'size': it takes colour, count, label, tags");

  auto a = parse_arguments<probe_args>({{"label", "abc"}, {"count", 3.0}, {"tags", {"x"}}});
  EXPECT_EQ(a.label, "abc");
  EXPECT_EQ(a.count, 3u);
  EXPECT_EQ(a.tags, std::vector<std::string>{"x"});
  EXPECT_EQ(a.colour, "red");  // not given: the member's default
  EXPECT_FALSE(parse_arguments<probe_args>({{"label", "abc"}}).count.has_value());
}

// The tools' session names and command ids follow the rules sbshd and the CLI use.
TEST(McpTools, SharedRulesComeFromTheProtocol) {
  for (const auto& t : tool_list()) {
    const json& props = t["inputSchema"]["properties"];
    for (const char* key : {"session", "name"})
      if (props.contains(key) && props[key].contains("maxLength")) {
        EXPECT_EQ(props[key]["pattern"], ipc::kSessionNamePattern) << t["name"];
        EXPECT_EQ(props[key]["maxLength"], ipc::kSessionNameMax) << t["name"];
      }
  }
  EXPECT_NE(check_arguments(*find_tool("await_command"), {{"id", "%0"}}).find("'id' must match"), std::string::npos);
  EXPECT_EQ(check_arguments(*find_tool("await_command"), {{"id", "%12"}}), "");
  // A CPU limit the schema lets through is one sbshd takes (0.01 to 1000 CPUs).
  json cpu;
  for (const auto& t : tool_list())
    if (t["name"] == "create_session") cpu = t["inputSchema"]["properties"]["cpu"];
  EXPECT_EQ(cpu["minimum"], 0.01);
  EXPECT_EQ(cpu["maximum"], 1000.0);
  EXPECT_NE(check_arguments(*find_tool("create_session"), {{"name", "x"}, {"cpu", 0.005}}), "");
}

// The results of remove_session, create_session and process_logs are their records' JSON
// form (mcp/results.h); each form, with and without the values that make a key null, left
// out or add its _base64, fits the output schema tools/list gives, which names every key.
TEST(McpTools, TheComposedResultsFitTheirOutputSchemas) {
  auto output_of = [](std::string_view name) {
    for (const auto& t : tool_list())
      if (t["name"] == name) return t["outputSchema"];
    return json();
  };
  auto misfit = [&](std::string_view tool, const auto& r) {
    return tests::schema_misfit(json(client::json_form_of(r)), output_of(tool));
  };
  EXPECT_EQ(misfit("remove_session", session_removed{"s"}), "");
  EXPECT_EQ(json(client::json_form_of(session_removed{"s"})), json({{"removed", "s"}}));

  session_created c;
  c.session.name = "s\xff";
  EXPECT_EQ(misfit("create_session", c), "");
  json form(client::json_form_of(c));
  EXPECT_FALSE(form.contains("definition"));
  EXPECT_TRUE(form["setup_stdout"].is_null() && form["setup_stderr"].is_null());
  c.setup_stdout = "out";
  c.setup_stderr = "";
  c.session.running = "sleep 1";
  c.definition.emplace();
  EXPECT_EQ(misfit("create_session", c), "");
  c.definition->root = "/r\xfe";
  c.definition->confine = true;
  c.definition->allow_read = {"/a\xff"};
  c.definition->no_network = true;
  c.definition->snapshot = "/src";
  c.definition->setup = "make";
  c.definition->setup_keys = {"k"};
  c.definition->timeout_ms = 5;
  EXPECT_EQ(misfit("create_session", c), "");
  form = json(client::json_form_of(c));
  EXPECT_EQ(form["definition"]["confinement"]["namespaces"], json::array({"pid", "net"}));

  logs_result l;
  EXPECT_EQ(misfit("process_logs", l), "");
  form = json(client::json_form_of(l));
  EXPECT_FALSE(form.contains("command") || form.contains("process"));
  EXPECT_TRUE(form["stdout_base64"].is_null());
  l.process.emplace();
  l.process->pid = 4;
  l.process->signal = 9;
  l.out = {"a\ufffd", "Yf8=", false, 0, 0, 0, 2};
  l.err = {"e", std::nullopt, true, 10, 3, 0, 13};
  EXPECT_EQ(misfit("process_logs", l), "");
  l.process.reset();
  l.command = command_state{17, "s", "make", false, 2, std::nullopt, 40};
  EXPECT_EQ(misfit("process_logs", l), "");
  form = json(client::json_form_of(l));
  EXPECT_EQ(form["command"]["id"], "%17");
  EXPECT_TRUE(form["command"]["signal"].is_null());
  EXPECT_EQ(form["stderr_omitted_from"], 3);
  l.command->signal = 15;
  l.command->exit_code.reset();
  EXPECT_EQ(json(client::json_form_of(l))["command"]["signal"], "SIGTERM");
}

// wait_seconds: at most 50 s for a call that sends nothing meanwhile; a progress token lifts it.
TEST(McpTools, WaitIsCappedWithoutAProgressToken) {
  using std::chrono::milliseconds;
  EXPECT_EQ(wait_limit(std::nullopt, false), milliseconds(30000));
  EXPECT_EQ(wait_limit(3600.0, false), milliseconds(50000));
  EXPECT_EQ(wait_limit(3600.0, true), milliseconds(3600000));
  EXPECT_EQ(wait_limit(0.25, false), milliseconds(250));
}

class McpServer : public ::testing::Test {
 protected:
  json ask(const std::string& text, peer_state& peer) {
    json answer;
    auto parsed = parse_message(text);
    EXPECT_TRUE(parsed.message) << text;
    core.handle(*parsed.message, peer, 1, [&](const json& j) { answer = j; });
    return answer;
  }
  server core{server_options{[] {
                               return result<client::connection>(error{"test", "no sbshd here"});
                             },
                             "9.9"},
              [](const std::function<void()>&) {}};
};

TEST_F(McpServer, InitializeAnswersTheClientsRevisionWhenSpoken) {
  peer_state peer;
  json r = ask(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})", peer);
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(r["result"]["serverInfo"]["version"], "9.9");
  EXPECT_TRUE(r["result"]["capabilities"].contains("tools"));
  EXPECT_FALSE(r["result"].contains("resultType"));
  EXPECT_EQ(peer.version, "2025-06-18");
  peer_state other;
  json n = ask(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2099-01-01"}})", other);
  EXPECT_EQ(n["result"]["protocolVersion"], "2025-11-25");
  EXPECT_EQ(ask(R"({"jsonrpc":"2.0","id":2,"method":"resources/list"})", peer)["error"]["code"], kMethodNotFound);
}

TEST_F(McpServer, ModernRequestsCarryTheirRevision) {
  peer_state peer;
  json d = ask(R"({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{
    "io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}})",
               peer);
  EXPECT_EQ(d["result"]["resultType"], "complete");
  EXPECT_EQ(d["result"]["supportedVersions"],
            json::array({"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}));
  EXPECT_EQ(d["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "sbsh");
  json l = ask(R"({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{
    "io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}})",
               peer);
  EXPECT_EQ(l["result"]["resultType"], "complete");
  EXPECT_EQ(l["result"]["cacheScope"], "public");
  EXPECT_GT(l["result"]["ttlMs"], 0);
  json u = ask(R"({"jsonrpc":"2.0","id":3,"method":"ping","params":{"_meta":{
    "io.modelcontextprotocol/protocolVersion":"2099-01-01"}}})",
               peer);
  EXPECT_EQ(u["error"]["code"], kUnsupportedProtocolVersion);
  EXPECT_EQ(u["error"]["data"]["requested"], "2099-01-01");
  // Without its client's capabilities, or with the handshake's methods, which it has not:
  // refused with what is wrong.
  json caps = ask(R"({"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"_meta":{
    "io.modelcontextprotocol/protocolVersion":"2026-07-28"}}})",
                  peer);
  EXPECT_EQ(caps["error"]["code"], kInvalidParams);
  EXPECT_NE(caps["error"]["message"].get<std::string>().find("clientCapabilities"), std::string::npos) << caps;
  for (const char* method : {"ping", "initialize"}) {
    json old = ask(fmt::format(R"({{"jsonrpc":"2.0","id":7,"method":"{}","params":{{"_meta":{{
      "io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}})",
                               method),
                   peer);
    EXPECT_EQ(old["error"]["code"], kMethodNotFound) << method << ": " << old;
  }
  json n = ask(R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nope","arguments":{}}})", peer);
  EXPECT_EQ(n["error"]["code"], kInvalidParams);
  EXPECT_NE(n["error"]["message"].get<std::string>().find("nope"), std::string::npos);
  json a =
      ask(R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run_command","arguments":[]}})", peer);
  EXPECT_EQ(a["error"]["code"], kInvalidParams);
  EXPECT_TRUE(core.idle());
}

}  // namespace sbsh::mcp::mcp_tools_tests

namespace sbsh::mcp::render_tests {

// Output within a budget: head and tail cut at line ends, the bytes between counted, and
// their offset, which process_logs reads from.
TEST(McpRender, HeadAndTailAreCutAtLineEnds) {
  kept_stream k(100, 0);
  std::string all;
  for (int i = 0; i < 1000; ++i) all += fmt::format("line {}\n", i);
  for (size_t at = 0; at < all.size(); at += 7) k.add(std::string_view(all).substr(at, 7));
  EXPECT_EQ(k.end(), all.size());
  auto p = k.cut(100, kept_stream::keep::head_and_tail);
  std::string head = p.bytes.substr(0, p.head), tail = p.bytes.substr(p.head);
  EXPECT_TRUE(head.starts_with("line 0\n")) << head;
  EXPECT_EQ(head.back(), '\n');
  EXPECT_TRUE(tail.starts_with("line ")) << tail;
  EXPECT_TRUE(tail.ends_with("line 999\n"));
  EXPECT_LE(p.bytes.size(), 100u);
  EXPECT_EQ(p.omitted_from, head.size());
  EXPECT_EQ(all.substr(0, head.size()), head);
  EXPECT_EQ(all.substr(head.size() + p.omitted), tail);
  std::string marked = with_marker(p, cut_marker("stdout", p, "%3", k.end()));
  EXPECT_NE(marked.find(fmt::format("\n[sbsh: {} bytes of stdout left out here (bytes {} to {} of {}); read them with "
                                    "process_logs {{\"id\":\"%3\",\"stdout_offset\":{},\"stream\":\"stdout\"}}]\n",
                                    p.omitted, p.omitted_from, p.omitted_from + p.omitted, all.size(), p.omitted_from)),
            std::string::npos)
      << marked;
  // From an offset: what follows it, to a line end; the newest: from a line's start.
  kept_stream from(100, 700);
  from.add(all);
  auto h = from.cut(100, kept_stream::keep::head);
  EXPECT_EQ(h.bytes, all.substr(700, h.bytes.size()));
  EXPECT_EQ(h.bytes.back(), '\n');
  EXPECT_EQ(h.omitted_from, 700 + h.bytes.size());
  auto t = from.cut(100, kept_stream::keep::tail);
  EXPECT_TRUE(t.bytes.starts_with("line ")) << t.bytes;
  EXPECT_EQ(t.head, 0u);
  EXPECT_EQ(t.omitted_from, 700u);
  EXPECT_EQ(700 + t.omitted + t.bytes.size(), all.size());
}

TEST(McpRender, NoCharacterIsSplitAndTheBudgetIsShared) {
  // One long line of 3-byte characters: the cut falls between characters.
  std::string euros;
  for (int i = 0; i < 100; ++i) euros += "\xe2\x82\xac";
  kept_stream k(50, 0);
  k.add(euros);
  auto p = k.cut(50, kept_stream::keep::head_and_tail);
  EXPECT_EQ(p.head % 3, 0u);
  EXPECT_EQ((p.bytes.size() - p.head) % 3, 0u);
  EXPECT_TRUE(ipc::valid_utf8(p.bytes));
  EXPECT_EQ(share_budget(100, 10, 10), (std::pair<size_t, size_t>{10, 10}));
  EXPECT_EQ(share_budget(100, 10, 500), (std::pair<size_t, size_t>{10, 90}));
  EXPECT_EQ(share_budget(100, 500, 20), (std::pair<size_t, size_t>{80, 20}));
  EXPECT_EQ(share_budget(100, 500, 500), (std::pair<size_t, size_t>{50, 50}));
  EXPECT_EQ(short_command("ls"), "ls");
  EXPECT_EQ(short_command(std::string(300, 'x')).size() < 140, true);
}

}  // namespace sbsh::mcp::render_tests
