// client/request_json.h, the generic call: a request's JSON form is checked against its
// declaration (each kind of bad request is refused with its name) and becomes the frame its
// declaration makes. A request declared only in this test, as ipc/messages.h declares the
// protocol's, gets its frame and its Python methods (python/gen/py_requests.h) with no other
// code.
#include <gtest/gtest.h>

#include "client/request_json.h"
#include "python/gen/py_requests.h"

namespace sbsh::client::request_json_tests {

namespace msg = ipc::msg;

// A request no sbshd serves, with a field of each kind the generator knows.
struct dummy_ping {
  static constexpr ipc::message_kind kind{static_cast<ipc::msg_type>(9901), "dummy_ping", ipc::route::client_to_daemon,
                                          true};
  uint64_t count = 0;
  std::string_view note = "hello";
  bool loud = false;
  ipc::str_list tags;
  static constexpr auto fields() {
    return std::tuple{ipc::field("count", &dummy_ping::count, ipc::kRequired),
                      ipc::field("note", &dummy_ping::note, ipc::kOmitEmpty), ipc::field("loud", &dummy_ping::loud),
                      ipc::field("tags", &dummy_ping::tags, ipc::kOmitEmpty)};
  }
};
using dummies = std::tuple<msg::session_show, dummy_ping, msg::exec>;

// The message in a frame, as sbshd reads it; its views point into `m`, kept beside it.
template <typename M>
struct read_back {
  ipc::message m;
  M v{};
  explicit read_back(const std::string& frame) {
    auto parsed = ipc::message::parse(frame.data() + 4, frame.size() - 4);
    EXPECT_TRUE(parsed) << parsed.err().message;
    if (!parsed) return;
    m = std::move(*parsed);
    auto r = ipc::decode_as<M>(m);
    EXPECT_TRUE(r) << r.err().message;
    if (r) v = *r;
  }
};

std::string refusal(const json_value& request) {
  auto r = request_frame(request, 7);
  EXPECT_FALSE(r) << request.dump();
  if (r) return {};
  EXPECT_EQ(r.err().code, "usage");
  return r.err().message;
}

TEST(RequestJson, AWellFormedRequestBecomesItsFrame) {
  auto frame = request_frame(json_value{{"type", "session_rm"}, {"name", "build"}, {"keep_copy", true}}, 7);
  ASSERT_TRUE(frame) << frame.err().message;
  auto m = ipc::message::parse(frame->data() + 4, frame->size() - 4);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->id(), 7u);
  read_back<msg::session_rm> req(*frame);
  EXPECT_EQ(req.v.name, "build");
  EXPECT_TRUE(req.v.keep_copy);
  // A signal by name, as sbshd reads one.
  auto kill = request_frame(json_value{{"type", "command_kill"}, {"command_id", 3}, {"signal", "TERM"}}, 1);
  ASSERT_TRUE(kill) << kill.err().message;
  EXPECT_EQ(read_back<msg::command_kill>(*kill).v.signal.number, SIGTERM);
}

TEST(RequestJson, EachKindOfBadRequestIsNamed) {
  EXPECT_NE(refusal(json_value::array({1, 2})).find("a JSON object"), std::string::npos);
  EXPECT_NE(refusal(json_value{{"name", "x"}}).find("names its type as a string"), std::string::npos);
  EXPECT_NE(refusal(json_value{{"type", 5}}).find("names its type as a string"), std::string::npos);
  std::string unknown = refusal(json_value{{"type", "session_shwo"}});
  EXPECT_NE(unknown.find("unknown request type 'session_shwo'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("session_show"), std::string::npos) << unknown;  // the requests are listed
  // A reply is not a request.
  EXPECT_NE(refusal(json_value{{"type", "session_info"}}).find("unknown request type"), std::string::npos);
  for (const char* own : {"exec", "session_create", "file_read", "proc_logs", "hello"})
    EXPECT_NE(refusal(json_value{{"type", own}}).find("not sent by the generic call"), std::string::npos) << own;
  EXPECT_EQ(refusal(json_value{{"type", "session_show"}, {"nmae", "x"}}),
            "request 'session_show' has no field 'nmae' (its fields: name)");
  std::string mistyped = refusal(json_value{{"type", "session_show"}, {"name", 5}});
  EXPECT_NE(mistyped.find("name"), std::string::npos) << mistyped;
  EXPECT_NE(mistyped.find("str"), std::string::npos) << mistyped;
  std::string wrong_list = refusal(json_value{{"type", "proc_list"}, {"all", "yes"}});
  EXPECT_NE(wrong_list.find("all"), std::string::npos) << wrong_list;
  std::string missing = refusal(json_value{{"type", "session_show"}});
  EXPECT_NE(missing.find("needs 'name'"), std::string::npos) << missing;
  EXPECT_NE(refusal(json_value{{"type", "session_show"}, {"name", nullptr}}).find("needs 'name'"), std::string::npos);
}

TEST(RequestJson, TheRequestsItSendsAreTheSimpleOnes) {
  auto names = generic_requests();
  for (const char* n :
       {"session_list", "session_show", "session_rm", "env_list", "proc_kill", "command_kill", "status", "shutdown"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  for (const char* n : {"exec", "hello", "file_list", "session_info", "ok"})
    EXPECT_EQ(std::find(names.begin(), names.end(), n), names.end()) << n;
}

TEST(RequestJson, ADeclaredRequestGetsItsFrameWithNoOtherCode) {
  using request_detail::request_frame_in;
  auto frame =
      request_frame_in<dummies>(json_value{{"type", "dummy_ping"}, {"count", 3}, {"loud", true}, {"tags", {"a", "b"}}},
                                9);
  ASSERT_TRUE(frame) << frame.err().message;
  auto m = ipc::message::parse(frame->data() + 4, frame->size() - 4);
  ASSERT_TRUE(m);
  EXPECT_EQ(static_cast<uint32_t>(m->type()), 9901u);
  EXPECT_EQ(*m->get_u64("count").value(), 3u);
  EXPECT_EQ(*m->get_bool("loud").value(), true);
  EXPECT_EQ(*m->get_str("note").value(), "hello");  // its default, as the declaration has it
  auto tags = m->get_str_array("tags").value();
  ASSERT_TRUE(tags);
  EXPECT_EQ(tags->size(), 2u);
  auto missing = request_frame_in<dummies>(json_value{{"type", "dummy_ping"}}, 9);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.err().message.find("needs 'count'"), std::string::npos) << missing.err().message;
  auto unknown = request_frame_in<dummies>(json_value{{"type", "dummy_ping"}, {"count", 1}, {"colour", "red"}}, 9);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.err().message, "request 'dummy_ping' has no field 'colour' (its fields: count, note, loud, tags)");
  auto own = request_frame_in<dummies>(json_value{{"type", "exec"}}, 9);
  ASSERT_FALSE(own);
  EXPECT_NE(own.err().message.find("not sent by the generic call"), std::string::npos);
}

TEST(RequestJson, ADeclaredRequestGetsItsPythonMethods) {
  // No py_request entry: named as the request, its fields as arguments (the required one
  // first, without a default), the reply's JSON form returned.
  EXPECT_EQ(
      py::python_method<dummy_ping>(),
      R"(    def dummy_ping(self, count: int, note: str = "hello", loud: bool = False, tags: Sequence[str] = ()) -> Dict[str, Any]:
        """Sends the request dummy_ping (sbsh-protocol(7)) and returns its reply's JSON form."""
        r = self._request({"type": "dummy_ping", "count": count, "note": note, "loud": loud, "tags": tags})
        return r
)");
  EXPECT_EQ(
      py::python_async_method<dummy_ping>(),
      R"(    async def dummy_ping(self, count: int, note: str = "hello", loud: bool = False, tags: Sequence[str] = ()) -> Dict[str, Any]:
        """Sends the request dummy_ping (sbsh-protocol(7)) and returns its reply's JSON form."""
        return await self._run(lambda c, k: c.dummy_ping(count, note, loud, tags), stoppable=False)
)");
  // An entry names it and says what it returns: here a list of records, and None for ok.
  EXPECT_EQ(py::python_method<msg::session_list>(),
            R"(    def sessions(self) -> List[SessionInfo]:
        """The sessions, as `sbsh session ls --json` lists them."""
        r = self._request({"type": "session_list"})
        return [session_info(d) for d in sequence_of(r.get("sessions"))]
)");
  EXPECT_TRUE(py::python_method<msg::env_remove>().starts_with(
      "    def remove_environment(self, hash: str, force: bool = False) -> None:\n"));
  EXPECT_NE(py::python_method<msg::env_remove>().find(
                R"(        self._request({"type": "env_remove", "hash": hash, "force": force})
)"),
            std::string::npos);
}

TEST(RequestJson, EveryRequestItSendsGetsMethodsButTheHandWrittenOnes) {
  // The module's text over a list: the dummy and session_show get methods, exec (its own
  // call) none; over msg::all, the hand-written ones (remove_session: session_rm) none.
  std::string sync = py::python_methods<dummies>(), async = py::python_async_methods<dummies>();
  EXPECT_NE(sync.find("    def dummy_ping(self, count: int"), std::string::npos) << sync;
  EXPECT_NE(sync.find("    def session_details(self, name: str) -> SessionDetails:"), std::string::npos) << sync;
  EXPECT_NE(sync.find(R"(        return session_details(r.get("session") or {}))"), std::string::npos) << sync;
  EXPECT_NE(async.find("    async def dummy_ping("), std::string::npos) << async;
  EXPECT_EQ(sync.find("def exec"), std::string::npos);
  std::string all = py::python_methods<msg::all>();
  EXPECT_EQ(all.find("def session_rm("), std::string::npos);
  for (const char* m : {"sessions", "session_details", "restart_session", "kept_copies", "prune_kept_copies",
                        "environments", "remove_environment"})
    EXPECT_NE(all.find(fmt::format("    def {}(self", m)), std::string::npos) << m;
}

}  // namespace sbsh::client::request_json_tests
