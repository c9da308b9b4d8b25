// Every frame sbshd sends is valid msgpack for a strict decoder: each str in it is valid
// UTF-8, whatever bytes a client sent. Requests here quote invalid UTF-8 back (a session
// name, a signal, a process, a directory, a variable) and run a command whose text is not
// UTF-8; every reply frame is read raw and every str in it, map keys included, is checked
// by a validator of its own (not sbsh's). Where the exact bytes matter they come back in a
// bin field: a history entry's command_bytes, which the client library puts back in place.
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "fixture.h"
#include "ipc/frame.h"
#include "ipc/socket_io.h"

namespace sbsh::test::bounds_tests {

// RFC 3629, table 3-7 of the Unicode standard: the well-formed byte sequences.
bool strict_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  for (size_t i = 0; i < n;) {
    unsigned char b = p[i];
    auto in = [&](size_t k, unsigned lo, unsigned hi) { return i + k < n && p[i + k] >= lo && p[i + k] <= hi; };
    // RFC 3629's table of well-formed sequences, row by row.
    // NOLINTBEGIN(bugprone-branch-clone)
    if (b <= 0x7f) i += 1;
    else if (b >= 0xc2 && b <= 0xdf && in(1, 0x80, 0xbf)) i += 2;
    else if (b == 0xe0 && in(1, 0xa0, 0xbf) && in(2, 0x80, 0xbf)) i += 3;
    else if (((b >= 0xe1 && b <= 0xec) || b == 0xee || b == 0xef) && in(1, 0x80, 0xbf) && in(2, 0x80, 0xbf)) i += 3;
    else if (b == 0xed && in(1, 0x80, 0x9f) && in(2, 0x80, 0xbf)) i += 3;
    else if (b == 0xf0 && in(1, 0x90, 0xbf) && in(2, 0x80, 0xbf) && in(3, 0x80, 0xbf)) i += 4;
    else if (b >= 0xf1 && b <= 0xf3 && in(1, 0x80, 0xbf) && in(2, 0x80, 0xbf) && in(3, 0x80, 0xbf)) i += 4;
    else if (b == 0xf4 && in(1, 0x80, 0x8f) && in(2, 0x80, 0xbf) && in(3, 0x80, 0xbf)) i += 4;
    else return false;
    // NOLINTEND(bugprone-branch-clone)
  }
  return true;
}

// Walks a decoded value: every str in it must be valid UTF-8. *bad gets the first that is not.
bool text_valid(const msgpack::object& o, std::string* bad) {
  switch (o.type) {
    case msgpack::type::STR: {
      std::string_view s(o.via.str.ptr, o.via.str.size);
      if (strict_utf8(s)) return true;
      *bad = std::string(s.substr(0, 200));
      return false;
    }
    case msgpack::type::ARRAY:
      for (uint32_t i = 0; i < o.via.array.size; ++i)
        if (!text_valid(o.via.array.ptr[i], bad)) return false;
      return true;
    case msgpack::type::MAP:
      for (uint32_t i = 0; i < o.via.map.size; ++i)
        if (!text_valid(o.via.map.ptr[i].key, bad) || !text_valid(o.via.map.ptr[i].val, bad)) return false;
      return true;
    default: return true;
  }
}

class utf8_test : public daemon_test {
 protected:
  // Sends one frame on a raw connection.
  static void send(ipc::channel& ch, ipc::frame_builder& f) { ASSERT_TRUE(ch.send(f.take()).ok()); }

  // Reads frames until the reply to request `id` that ends it (error, or `last`); checks
  // every str of every frame read. Returns that reply's error message, or "".
  std::string reply(ipc::channel& ch, uint64_t id, ipc::msg_type last, std::vector<std::string>* texts = nullptr) {
    for (;;) {
      auto env = ch.recv();
      EXPECT_TRUE(env.ok()) << (env.ok() ? "" : env.err().message);
      if (!env.ok()) return "no reply";
      ++frames_;
      for (const auto& [key, value] : env->msg.fields()) {
        std::string bad;
        EXPECT_TRUE(strict_utf8(key)) << "a key of a " << ipc::type_name(env->msg.type()) << " frame";
        EXPECT_TRUE(text_valid(*value, &bad))
            << "field '" << key << "' of a " << ipc::type_name(env->msg.type()) << " frame holds invalid UTF-8: "
            << bad;
        if (texts != nullptr && value->type == msgpack::type::STR) texts->emplace_back(value->via.str.ptr, value->via.str.size);
      }
      if (env->msg.id() != id) continue;
      if (env->msg.type() == ipc::msg_type::error) return std::string(env->msg.get_str("message").value().value_or(""));
      if (env->msg.type() == last) return "";
    }
  }

  ipc::channel greeted() {
    ipc::channel ch{unique_fd(raw_connect(sock))};
    ipc::frame_builder hello(ipc::msg_type::hello, 1);
    hello.u64("version", ipc::kProtocolVersion);
    send(ch, hello);
    EXPECT_EQ(reply(ch, 1, ipc::msg_type::welcome), "");
    return ch;
  }

  int frames_ = 0;
};

TEST_F(utf8_test, RepliesQuotingInvalidUtf8AreValidAndSayWhatWasSent) {
  ipc::channel ch = greeted();
  uint64_t id = 10;
  auto expect_error = [&](ipc::frame_builder& f, const std::string& escaped) {
    send(ch, f);
    std::string err = reply(ch, id++, ipc::msg_type::ok);
    EXPECT_NE(err, "");
    EXPECT_NE(err.find(escaped), std::string::npos) << err;
  };
  {
    ipc::frame_builder f(ipc::msg_type::session_show, id);
    f.str("name", "caf\xe9\xff");
    expect_error(f, "caf\\xe9\\xff");
  }
  {
    ipc::frame_builder f(ipc::msg_type::session_rm, id);
    f.str("name", "x\xc3");
    expect_error(f, "x\\xc3");
  }
  {
    ipc::frame_builder f(ipc::msg_type::exec, id);
    f.str("session", "s\xfe").str("command", "true").str("io", "frames");
    expect_error(f, "s\\xfe");
  }
  {
    ipc::frame_builder f(ipc::msg_type::exec, id);
    f.str("command", "true").str("io", "frames").str_array("env", {"A\x80" "B=1"});
    expect_error(f, "A\\x80B=1");
  }
  {
    ipc::frame_builder f(ipc::msg_type::exec, id);
    f.str("command", "true").str("io", "fr\xe2\x82");
    expect_error(f, "fr\\xe2\\x82");
  }
  {
    ipc::frame_builder f(ipc::msg_type::cancel, id);
    f.str("signal", "TERM\xff");
    expect_error(f, "TERM\\xff");
  }
  {
    ipc::frame_builder f(ipc::msg_type::proc_kill, id);
    f.u64("proc", 1).str("signal", "\xedKILL");
    expect_error(f, "\\xedKILL");
  }
  {
    ipc::frame_builder f(ipc::msg_type::session_create, id);
    f.str("name", "d").str("cwd", "/no/such/\xff dir");
    expect_error(f, "/no/such/\\xff dir");
  }
  {
    // A process named in invalid UTF-8: the error is valid whatever it quotes.
    ipc::frame_builder f(ipc::msg_type::proc_wait, id);
    f.str("proc", "p\xff");
    send(ch, f);
    EXPECT_NE(reply(ch, id++, ipc::msg_type::proc_info), "");
  }
  EXPECT_GE(frames_, 10);
}

TEST_F(utf8_test, ACommandThatIsNotUtf8IsListedValidlyAndItsBytesKept) {
  // Latin-1 text, a lone continuation byte and a cut sequence: bash runs them as bytes. It
  // waits for a file, so that it is seen running.
  std::string go = dir + "/go";
  const std::string command =
      "printf '%s' 'caf\xe9 \x80 \xe2\x82' >/dev/null; until [ -e " + go + " ]; do sleep 0.02; done";
  ipc::channel ch = greeted();
  ipc::frame_builder ex(ipc::msg_type::exec, 20);
  ex.str("session", "u").str("command", command).str("io", "frames");
  send(ch, ex);
  // While it runs, the status and the session's listing show it; then its result.
  ASSERT_TRUE(wait_until(
      [&] {
        ipc::frame_builder st(ipc::msg_type::session_list, 21);
        send(ch, st);
        std::vector<std::string> texts;
        EXPECT_EQ(reply(ch, 21, ipc::msg_type::session_info, &texts), "");
        return session_status("u").state == "running";
      },
      std::chrono::seconds(20)));
  ipc::frame_builder st(ipc::msg_type::status, 22);
  send(ch, st);
  EXPECT_EQ(reply(ch, 22, ipc::msg_type::status_reply), "");
  std::ofstream(go).put('\n');
  EXPECT_EQ(reply(ch, 20, ipc::msg_type::exec_done), "");

  ipc::frame_builder show(ipc::msg_type::session_show, 23);
  show.str("name", "u");
  send(ch, show);
  EXPECT_EQ(reply(ch, 23, ipc::msg_type::session_detail), "");

  // The library reads the exact bytes back from command_bytes.
  auto c = conn();
  auto d = c.show_session("u");
  ASSERT_TRUE(d.ok()) << d.err().message;
  ASSERT_EQ(d->history.size(), 1u);
  EXPECT_EQ(d->history[0].command, command);

  // So does `session show --json`, as valid JSON (invalid bytes replaced there).
  auto shown = sbsh({"session", "show", "u", "--json"});
  EXPECT_EQ(shown.code, 0) << shown.err;
  EXPECT_TRUE(strict_utf8(shown.out));
}

}  // namespace sbsh::test::bounds_tests
