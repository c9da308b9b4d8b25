// ipc/messages.h and ipc/wire.h: the schema sends exactly the bytes the protocol has always
// had, reads them back with errors that name the field and where it sits, agrees with the
// numbers in ipc/protocol.h, and is what man/sbsh-protocol.7 lists.
//
// The manual's MESSAGES and ERROR CODES sections are written from the schema. After a change
// to the schema, regenerate them with
//     SBSH_UPDATE_MAN=1 build/bin/unit_tests --gtest_filter='schema.ManualListsTheSchema'
// (any build directory) and commit the page.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "ipc/messages.h"
#include "ipc/schema_doc.h"

namespace sbsh::ipc::schema_tests {

result<message> parse(const std::string& frame) { return message::parse(frame.data() + 4, frame.size() - 4); }

// Decodes `frame` as M, keeping the parsed message alive in *keep (M may hold views).
template <typename M>
M decode_frame(const std::string& frame, message* keep) {
  auto m = parse(frame);
  EXPECT_TRUE(m.ok()) << m.err().message;
  *keep = *m;
  auto d = decode<M>(*keep);
  EXPECT_TRUE(d.ok()) << d.err().message;
  return d.ok() ? *d : M{};
}

// ---- The bytes: each frame as the code built it by hand before the schema ---------------

TEST(schema, ExecIsTheSameBytes) {
  frame_builder old(msg_type::exec, 7);
  old.str("command", "make").str_array("env", {"A=1"}).u64("timeout_ms", 500);
  old.str("session_cwd", "/home").str("io", "fds").boolean("stdin", false).boolean("drain", true).u64("fds", 4);
  std::vector<std::string> env{"A=1"};
  msg::exec e;
  e.session = "";
  e.command = "make";
  e.env = env;
  e.timeout_ms = 500;
  e.session_cwd = "/home";
  e.io = "fds";
  e.drain = true;
  e.fds = 4;
  EXPECT_EQ(encode(e, 7), old.take());

  frame_builder frames(msg_type::exec, 8);
  frames.str("session", "s").str("command", "x").str("io", "frames").boolean("stdin", true);
  msg::exec f;
  f.session = "s";
  f.command = "x";
  f.has_stdin = true;
  EXPECT_EQ(encode(f, 8), frames.take());
}

TEST(schema, ExecDoneIsTheSameBytes) {
  frame_builder old(msg_type::exec_done, 3);
  old.nil("exit_code").i64("signal", 9).str("signal_name", "SIGKILL");
  old.boolean("timed_out", true).boolean("cancelled", false).boolean("shell_restarted", true).boolean("ran", true);
  old.u64("duration_us", 412).u64("generation", 2).boolean("state_lost", true).boolean("release", false);
  old.i64("started_at_ms", 1795000000123).str("state_lost_reason", "the shell was restarted");
  old.str("error_code", "shell_restarted").str("error", "the shell ended");
  msg::exec_done d;
  d.signal = 9;
  d.timed_out = true;
  d.shell_restarted = true;
  d.duration_us = 412;
  d.generation = 2;
  d.state_lost = true;
  d.release = false;
  d.started_at_ms = 1795000000123;
  d.state_lost_reason = "the shell was restarted";
  d.error_code = "shell_restarted";
  d.error = "the shell ended";
  EXPECT_EQ(encode(d, 3), old.take());

  frame_builder plain(msg_type::exec_done, 4);
  plain.i64("exit_code", 0).nil("signal").boolean("timed_out", false).boolean("cancelled", false);
  plain.boolean("shell_restarted", false).boolean("ran", true).u64("duration_us", 6).u64("generation", 1);
  plain.boolean("state_lost", false).boolean("release", true).i64("started_at_ms", 5);
  msg::exec_done p;
  p.exit_code = 0;
  p.duration_us = 6;
  p.generation = 1;
  p.started_at_ms = 5;
  EXPECT_EQ(encode(p, 4), plain.take());

  // Never started: started_at_ms is nil; a reason without state_lost is not sent.
  frame_builder queued(msg_type::exec_done, 5);
  queued.nil("exit_code").nil("signal").boolean("timed_out", true).boolean("cancelled", false);
  queued.boolean("shell_restarted", false).boolean("ran", false).u64("duration_us", 0).u64("generation", 0);
  queued.boolean("state_lost", false).boolean("release", false).nil("started_at_ms");
  queued.str("error_code", "timeout").str("error", "not run");
  msg::exec_done q;
  q.timed_out = true;
  q.ran = false;
  q.release = false;
  q.state_lost_reason = "stale";
  q.error_code = "timeout";
  q.error = "not run";
  EXPECT_EQ(encode(q, 5), queued.take());
}

TEST(schema, OutputAndErrorAreTheSameBytes) {
  frame_builder old(msg_type::output, 2);
  old.u64("stream", 2).bin("data", "a\0b", 3);
  EXPECT_EQ(encode(msg::output{kStderr, {std::string_view("a\0b", 3)}}, 2), old.take());
  frame_builder err(msg_type::error, 0);
  err.str("code", "bad_frame").str("message", "no");
  EXPECT_EQ(encode(msg::error{"bad_frame", "no"}), err.take());
}

TEST(schema, ProcessMapIsTheSameBytes) {
  frame_builder old(msg_type::proc_info, 5);
  auto& pk = old.field("proc");
  pk.pack_map(14);
  auto kv = [&](std::string_view k) { pack_key(pk, k); };
  kv("id"), pk.pack_uint64(3);
  kv("name"), wire<std::string_view>::pack(pk, "web");
  kv("session"), wire<std::string_view>::pack(pk, "default");
  kv("command"), wire<std::string_view>::pack(pk, "npm start");
  kv("pid"), pk.pack_int64(4242);
  kv("pgid"), pk.pack_int64(4242);
  kv("state"), wire<std::string_view>::pack(pk, "killed");
  kv("exit_code"), pk.pack_nil();
  kv("signal"), pk.pack_int64(15);
  kv("signal_name"), wire<std::string_view>::pack(pk, "SIGTERM");
  kv("started_at_ms"), pk.pack_int64(100);
  kv("ended_at_ms"), pk.pack_nil();
  kv("error"), wire<std::string_view>::pack(pk, "");
  kv("log"), wire<std::string_view>::pack(pk, "/s/procs/3.out");
  proc_info p;
  p.id = 3;
  p.name = "web";
  p.session = "default";
  p.command = "npm start";
  p.pid = 4242;
  p.state = "killed";
  p.signal = 15;
  p.started_at_ms = 100;
  p.log_path = "/s/procs/3.out";
  EXPECT_EQ(encode(msg::proc_info{p}, 5), old.take());
}

TEST(schema, SessionDetailIsTheSameBytes) {
  frame_builder old(msg_type::session_detail, 9);
  auto& pk = old.field("session");
  pk.pack_map(17);
  auto str = [&](std::string_view k, std::string_view v) {
    pack_key(pk, k);
    wire<std::string_view>::pack(pk, v);
  };
  auto num = [&](std::string_view k, int64_t v) {
    pack_key(pk, k);
    pk.pack_int64(v);
  };
  str("name", "b");
  str("state", "running");
  num("wrapper_pid", 10);
  num("shell_pid", 11);
  num("restarts", 1);
  num("queued", 2);
  num("commands", 3);
  str("cwd", "/w");
  str("error", "");
  num("started_at_ms", 12);
  num("uptime_ms", 13);
  str("restart", "never");
  str("running", "sleep 1");
  num("running_ms", 14);
  pack_key(pk, "definition");
  pk.pack_map(6);
  str("cwd", "/w");
  pack_key(pk, "env");
  pk.pack_array(1);
  wire<std::string_view>::pack(pk, "A=1");
  pack_key(pk, "init");
  pk.pack_array(0);
  str("restart", "never");
  pack_key(pk, "limits");
  pk.pack_array(0);
  str("snapshot", "");
  str("init_output", "hi\n");
  pack_key(pk, "history");
  pk.pack_array(1);
  pk.pack_map(6);
  str("command", "false");
  num("exit_code", 1);
  pack_key(pk, "timed_out"), pk.pack_false();
  pack_key(pk, "shell_restarted"), pk.pack_false();
  num("started_at_ms", 15);
  num("duration_ms", 16);

  session_detail d;
  d.status = {"b", "running", 10, 11, 1, 2, 3, "sleep 1", 14, "/w", "", "never", 13, 12};
  d.definition.cwd = "/w";
  d.definition.env = {"A=1"};
  d.definition.restart = "never";
  d.init_output = "hi\n";
  d.history.push_back({"false", 1, false, false, 15, 16});
  std::string bytes = encode(msg::session_detail{d}, 9);
  EXPECT_EQ(bytes, old.take());

  // And back: every field, the nested ones included.
  message keep;
  auto back = decode_frame<msg::session_detail>(bytes, &keep).session;
  EXPECT_EQ(back.status.running, "sleep 1");
  EXPECT_EQ(back.status.running_ms, 14u);
  EXPECT_EQ(back.status.started_at_ms, 12);
  EXPECT_EQ(back.definition.env, d.definition.env);
  EXPECT_EQ(back.definition.restart, "never");
  ASSERT_EQ(back.history.size(), 1u);
  EXPECT_EQ(back.history[0].exit_code, 1);
  EXPECT_EQ(back.history[0].duration_ms, 16u);
}

TEST(schema, SessionCreateIsTheSameBytes) {
  using strs = std::vector<std::string>;
  frame_builder old(msg_type::session_create, 6);
  old.str("name", "b").str("cwd", "/w").str_array("env", strs{"A=1"}).str_array("init", strs{});
  old.str("restart", "never").str_array("limits", strs{});
  session_spec spec;
  spec.cwd = "/w";
  spec.env = {"A=1"};
  spec.restart = "never";
  EXPECT_EQ(encode(msg::session_create{"b", spec}, 6), old.take());

  // The snapshot travels only when there is one (the definition inside session_detail and
  // the state file always has it).
  frame_builder snap(msg_type::session_create, 7);
  snap.str("name", "c").str("cwd", "").str_array("env", strs{}).str_array("init", strs{});
  snap.str("restart", "always").str_array("limits", strs{}).str("snapshot", "/src");
  session_spec from;
  from.snapshot = "/src";
  EXPECT_EQ(encode(msg::session_create{"c", from}, 7), snap.take());
}

TEST(schema, NoRunningFieldsWhileNothingRuns) {
  session_status s;
  s.name = "idle";
  std::string bytes = encode(msg::session_info{{s}}, 1);
  auto m = parse(bytes);
  ASSERT_TRUE(m.ok());
  const auto& session = m->find("sessions")->via.array.ptr[0];
  EXPECT_EQ(session.via.map.size, 12u);
}

// The daemon <-> wrapper messages as they were built by hand before the schema: an sbshd
// adopts wrappers that an earlier sbshd started (and the other way round), so the schema
// must send exactly those bytes.
TEST(schema, WrapperMessagesAreTheSameBytes) {
  frame_builder ready(msg_type::wrapper_ready);
  ready.i64("shell_pid", 20).i64("wrapper_pid", 19);
  EXPECT_EQ(encode(msg::wrapper_ready{20, 19}), ready.take());
  frame_builder sig(msg_type::signal_command, 4);
  sig.i64("since_pid", 300).u64("since_ticks", 77).i64("signal", 15).boolean("interrupt", true);
  EXPECT_EQ(encode(msg::signal_command{300, 77, 15, true}, 4), sig.take());
  frame_builder exited(msg_type::shell_exited);
  exited.i64("signal", 9);
  EXPECT_EQ(encode(msg::shell_exited{{}, 9, {}}), exited.take());
  frame_builder failed(msg_type::shell_exited);
  failed.str("error", "no bash");
  EXPECT_EQ(encode(msg::shell_exited{{}, {}, "no bash"}), failed.take());
  frame_builder said(msg_type::shell_exited);
  said.i64("exit_code", 2).str("error", "bash said: no");
  EXPECT_EQ(encode(msg::shell_exited{2, {}, "bash said: no"}), said.take());
  frame_builder bare(msg_type::protect_group);
  bare.i64("pgid", 55);
  EXPECT_EQ(encode(msg::protect_group{55, 0, "", 0}), bare.take());
  frame_builder lent(msg_type::protect_group);
  lent.i64("pgid", 55).u64("proc", 2).str("streams", "oes").u64("fds", 3);
  EXPECT_EQ(encode(msg::protect_group{55, 2, "oes", 3}), lent.take());
  frame_builder adopted(msg_type::adopted, 1);
  adopted.str("session", "b").str("cwd", "/").i64("shell_pid", 7).i64("wrapper_pid", 6).i64("started_at_ms", 5);
  auto& pk = adopted.field("groups");
  pk.pack_array(1);
  pk.pack_int64(99);
  adopted.u64("procs", 1).boolean("initialized", false).u64("fds", 1).u64("generation", 3);
  EXPECT_EQ(encode(msg::adopted{"b", "/", 7, 6, 5, {99}, 1, false, 1, 3}, 1), adopted.take());
  frame_builder claim(msg_type::claim);
  claim.str("session", "b").str("cwd", "/w");
  EXPECT_EQ(encode(msg::claim{"b", "/w", {}, {}}), claim.take());
  frame_builder init(msg_type::initialized);
  init.u64("generation", 4);
  EXPECT_EQ(encode(msg::initialized{4}), init.take());
  frame_builder result(msg_type::signal_result, 4);
  result.u64("count", 2);
  EXPECT_EQ(encode(msg::signal_result{2}, 4), result.take());
  frame_builder adopt(msg_type::adopt, 1);
  adopt.i64("pid", 4242);
  EXPECT_EQ(encode(msg::adopt{4242}, 1), adopt.take());
  EXPECT_EQ(encode(msg::ping{}, 9), frame_builder(msg_type::ping, 9).take());
  EXPECT_EQ(encode(msg::pong{}, 9), frame_builder(msg_type::pong, 9).take());
  frame_builder unprotect(msg_type::unprotect_group);
  unprotect.i64("pgid", 55);
  EXPECT_EQ(encode(msg::unprotect_group{55}), unprotect.take());
}

// ---- Reading ----------------------------------------------------------------------------

TEST(schema, WrongTypesNameTheFieldAndWhereItSits) {
  frame_builder f(msg_type::exec, 1);
  f.u64("command", 3);
  message keep = *parse(f.take());
  auto e = decode<msg::exec>(keep);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.err().code, "bad_request");
  EXPECT_EQ(e.err().message, "field 'command' must be a string, not an integer");

  frame_builder nested(msg_type::session_detail, 1);
  auto& pk = nested.field("session");
  pk.pack_map(1);
  pack_key(pk, "definition");
  pk.pack_map(1);
  pack_key(pk, "env");
  pk.pack_array(3);
  wire<std::string_view>::pack(pk, "A=1");
  wire<std::string_view>::pack(pk, "B=2");
  pk.pack_int64(3);
  keep = *parse(nested.take());
  auto d = decode<msg::session_detail>(keep);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.err().message, "field 'session.definition.env[2]' must be a string, not an integer");

  frame_builder list(msg_type::proc_table, 1);
  auto& arr = list.field("procs");
  arr.pack_array(2);
  arr.pack_map(0);
  arr.pack_map(1);
  pack_key(arr, "pid");
  arr.pack_true();
  keep = *parse(list.take());
  auto l = decode<msg::proc_table>(keep);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.err().message, "field 'procs[1].pid' must be an integer, not a boolean");
}

TEST(schema, MissingRequiredFieldsAreNamed) {
  message m = *parse(frame_builder(msg_type::exec, 1).take());
  auto e = decode<msg::exec>(m);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.err().message, "exec needs 'command', a string");
  frame_builder nil(msg_type::proc_kill, 2);
  nil.nil("proc");
  m = *parse(nil.take());
  auto k = decode<msg::proc_kill>(m);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.err().message, "proc_kill needs 'proc', a process id or name");
}

TEST(schema, UnknownFieldsAreIgnoredAndAbsentOnesKeepTheirDefaults) {
  frame_builder f(msg_type::exec, 1);
  f.str("command", "true").str("future_field", "x").nil("timeout_ms").u64("grace_ms", 5);
  message m = *parse(f.take());
  auto e = decode<msg::exec>(m);
  ASSERT_TRUE(e.ok()) << e.err().message;
  EXPECT_EQ(e->session, "default");
  EXPECT_EQ(e->io, "frames");
  EXPECT_EQ(e->timeout_ms, 0u);
  EXPECT_EQ(e->grace_ms, 5u);
  frame_builder logs(msg_type::proc_logs, 1);
  logs.u64("proc", 4);
  m = *parse(logs.take());
  auto l = decode<msg::proc_logs>(m);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->proc.id, 4u);
  EXPECT_TRUE(l->out && l->err);
  frame_builder done(msg_type::exec_done, 1);
  m = *parse(done.take());
  EXPECT_TRUE(decode<msg::exec_done>(m)->ran);
}

TEST(schema, SignalsAreNumbersOrNames) {
  auto sig = [](auto value) -> result<msg::cancel> {
    frame_builder f(msg_type::cancel, 1);
    if constexpr (std::is_same_v<decltype(value), int>) f.i64("signal", value);
    else f.str("signal", value);
    return decode<msg::cancel>(*parse(f.take()));  // a cancel holds no views into the frame
  };
  EXPECT_EQ(sig(2)->signal.number, 2);
  EXPECT_EQ(sig("TERM")->signal.number, SIGTERM);
  EXPECT_EQ(sig("SIGKILL")->signal.number, SIGKILL);
  EXPECT_EQ(sig(0).err().message, "signal 0 is out of range");
  EXPECT_EQ(sig(-3).err().message, "signal -3 is out of range");
  EXPECT_NE(sig("NOPE").err().message.find("unknown signal 'NOPE'"), std::string::npos);
  frame_builder absent(msg_type::proc_kill, 1);
  absent.str("proc", "web");
  message m = *parse(absent.take());
  auto k = decode<msg::proc_kill>(m);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->signal.number, SIGTERM);
  EXPECT_EQ(k->proc.name, "web");
}

TEST(schema, CancelIsTheSameBytes) {
  frame_builder stop(msg_type::cancel, 3);
  stop.i64("signal", 2).boolean("stop", true);
  EXPECT_EQ(encode(msg::cancel{{2}, true}, 3), stop.take());
  frame_builder once(msg_type::cancel, 3);
  once.i64("signal", 2);
  EXPECT_EQ(encode(msg::cancel{{2}, std::nullopt}, 3), once.take());
  EXPECT_EQ(encode(msg::cancel{}, 3), frame_builder(msg_type::cancel, 3).take());
  auto c = decode<msg::cancel>(*parse(encode(msg::cancel{{2}, std::nullopt}, 3)));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->signal.number, 2);
  EXPECT_FALSE(c->stop.has_value());
}

TEST(schema, NarrowIntegersAreRangeChecked) {
  frame_builder f(msg_type::proc_info, 1);
  auto& pk = f.field("proc");
  pk.pack_map(1);
  pack_key(pk, "exit_code");
  pk.pack_int64(int64_t{1} << 40);
  message m = *parse(f.take());
  auto p = decode<msg::proc_info>(m);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.err().message, "field 'proc.exit_code' is out of range");
}

TEST(schema, StateFilesRoundTrip) {
  sessions_file s;
  session_spec def;
  def.cwd = "/w";
  def.limits = {"nofile=64:64"};
  s.sessions["build"] = def;
  message keep;
  auto back = decode_frame<sessions_file>(encode(s), &keep);
  ASSERT_EQ(back.sessions.count("build"), 1u);
  EXPECT_EQ(back.sessions["build"].limits, def.limits);
  EXPECT_EQ(back.sessions["build"].restart, "always");

  frame_builder bad(msg_type::session_info);
  auto& pk = bad.field("sessions");
  pk.pack_map(1);
  pack_key(pk, "build");
  pk.pack_map(1);
  pack_key(pk, "init");
  pk.pack_str(0);
  keep = *parse(bad.take());
  auto d = decode<sessions_file>(keep);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.err().message, "field 'sessions.build.init' must be an array, not a string");
  keep = *parse(frame_builder(msg_type::session_info).take());
  EXPECT_EQ(decode<sessions_file>(keep).err().message, "the session table needs 'sessions', a map with string keys");
}

// ---- The numbers and the manual ---------------------------------------------------------

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ---- Text: every str sent to a client is valid UTF-8 --------------------------------------

// The value under `key` in msgpack map `m`, or null.
const msgpack::object* in_map(const msgpack::object& m, std::string_view key) {
  if (m.type != msgpack::type::MAP) return nullptr;
  for (uint32_t i = 0; i < m.via.map.size; ++i) {
    const auto& kv = m.via.map.ptr[i];
    if (kv.key.type == msgpack::type::STR && std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == key)
      return &kv.val;
  }
  return nullptr;
}

TEST(schema, FramesToClientsCarryOnlyValidUtf8) {
  const std::string replaced = "caf\xef\xbf\xbd \xef\xbf\xbd!";
  message keep;
  std::string error_text(decode_frame<msg::error>(encode(msg::error{"bad_request", "caf\xe9 \xff!"}, 3), &keep).message);
  EXPECT_EQ(error_text, replaced);
  // Nested records and arrays too: a listing of sessions, a definition's init commands.
  msg::session_info info;
  info.sessions.emplace_back();
  info.sessions[0].name = "n\xc3";
  info.sessions[0].error = "e\x80";
  info.sessions[0].cwd = "/d\x80";
  auto listed = decode_frame<msg::session_info>(encode(info, 4), &keep);
  ASSERT_EQ(listed.sessions.size(), 1u);
  EXPECT_EQ(listed.sessions[0].name, "n\xef\xbf\xbd");
  EXPECT_EQ(listed.sessions[0].error, "e\xef\xbf\xbd");
  // A path sent with its bytes beside it (cwd_bytes) comes back exactly.
  EXPECT_EQ(listed.sessions[0].cwd, "/d\x80");
  sbsh::session_detail d;
  d.definition.init = {"echo \xe2\x82", "echo ok \xe2\x9c\x93"};
  auto shown = decode_frame<msg::session_detail>(encode(msg::session_detail{d}, 5), &keep).session;
  // Each byte that is not part of valid UTF-8 is replaced: a cut sequence by as many.
  EXPECT_EQ(shown.definition.init,
            (std::vector<std::string>{"echo \xef\xbf\xbd\xef\xbf\xbd", "echo ok \xe2\x9c\x93"}));
  for (const auto& s : {error_text, listed.sessions[0].name, shown.definition.init[0]})
    EXPECT_TRUE(valid_utf8(s)) << s;

  // Frames between sbshd and its wrappers, its state files and requests keep text exactly.
  auto claimed = decode_frame<msg::claim>(encode(msg::claim{"s", "/d\xff", {}, {}}), &keep);
  EXPECT_EQ(std::string(claimed.cwd), "/d\xff");
  sessions_file file;
  file.sessions["a"].init = {"echo \xe9"};
  auto saved = decode_frame<sessions_file>(encode(file), &keep);
  EXPECT_EQ(saved.sessions["a"].init, std::vector<std::string>{"echo \xe9"});
  msg::exec ex;
  ex.command = "echo \xe9";
  EXPECT_EQ(std::string(decode_frame<msg::exec>(encode(ex, 6), &keep).command), "echo \xe9");
  // A frame built by hand follows the rule it is given.
  frame_builder strict(msg_type::error, 7, text_rule::utf8);
  strict.str("message", "\xff").str_array("list", {"\xfe"});
  auto m = parse(strict.take());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m->get_str("message").value(), "\xef\xbf\xbd");
}

TEST(schema, AHistoryEntryKeepsItsCommandsExactBytes) {
  sbsh::session_detail d;
  d.history.push_back({"echo ok \xe2\x9c\x93", 0, false, false, 1, 2});
  d.history.push_back({"printf 'caf\xe9'", 0, false, false, 3, 4});
  std::string bytes = encode(msg::session_detail{d}, 9);
  auto m = parse(bytes);
  ASSERT_TRUE(m.ok());
  const auto* history = in_map(*m->find("session"), "history");
  ASSERT_NE(history, nullptr);
  ASSERT_EQ(history->via.array.size, 2u);
  // Valid UTF-8: the str alone.
  EXPECT_EQ(in_map(history->via.array.ptr[0], "command_bytes"), nullptr);
  // Not: the str with the byte replaced, and the bytes as bin.
  const auto* text = in_map(history->via.array.ptr[1], "command");
  const auto* exact = in_map(history->via.array.ptr[1], "command_bytes");
  ASSERT_NE(text, nullptr);
  ASSERT_NE(exact, nullptr);
  EXPECT_EQ(std::string(text->via.str.ptr, text->via.str.size), "printf 'caf\xef\xbf\xbd'");
  ASSERT_EQ(exact->type, msgpack::type::BIN);
  EXPECT_EQ(std::string(exact->via.bin.ptr, exact->via.bin.size), "printf 'caf\xe9'");
  // Decoding puts the exact bytes back.
  message keep;
  auto back = decode_frame<msg::session_detail>(bytes, &keep).session;
  ASSERT_EQ(back.history.size(), 2u);
  EXPECT_EQ(back.history[0].command, "echo ok \xe2\x9c\x93");
  EXPECT_EQ(back.history[1].command, "printf 'caf\xe9'");
}

TEST(schema, AnEmbeddedRecordsPathKeepsItsExactBytes) {
  // session_detail carries session_status's fields in its own map (embed), its cwd_bytes too.
  sbsh::session_detail d;
  d.status.cwd = "/caf\xe9";
  d.definition.snapshot = "/src\xff";
  std::string bytes = encode(msg::session_detail{d}, 9);
  auto m = parse(bytes);
  ASSERT_TRUE(m.ok());
  const auto* session = m->find("session");
  ASSERT_NE(session, nullptr);
  const auto* exact = in_map(*session, "cwd_bytes");
  ASSERT_NE(exact, nullptr);
  ASSERT_EQ(exact->type, msgpack::type::BIN);
  EXPECT_EQ(std::string(exact->via.bin.ptr, exact->via.bin.size), "/caf\xe9");
  const auto* text = in_map(*session, "cwd");
  ASSERT_NE(text, nullptr);
  EXPECT_EQ(std::string(text->via.str.ptr, text->via.str.size), "/caf\xef\xbf\xbd");
  message keep;
  auto back = decode_frame<msg::session_detail>(bytes, &keep).session;
  EXPECT_EQ(back.status.cwd, "/caf\xe9");
  EXPECT_EQ(back.definition.snapshot, "/src\xff");
  EXPECT_EQ(back.definition.root, "");
}

TEST(schema, AListOfPathsKeepsEachOnesExactBytes) {
  sbsh::session_detail d;
  d.definition.allow_read = {"/ok", "/caf\xe9"};
  d.definition.allow_write = {"/plain"};
  std::string bytes = encode(msg::session_detail{d}, 9);
  auto m = parse(bytes);
  ASSERT_TRUE(m.ok());
  const auto* def = in_map(*m->find("session"), "definition");
  ASSERT_NE(def, nullptr);
  const auto* exact = in_map(*def, "allow_read_bytes");
  ASSERT_NE(exact, nullptr);
  ASSERT_EQ(exact->type, msgpack::type::ARRAY);
  ASSERT_EQ(exact->via.array.size, 2u);
  EXPECT_EQ(std::string(exact->via.array.ptr[1].via.bin.ptr, exact->via.array.ptr[1].via.bin.size), "/caf\xe9");
  EXPECT_EQ(in_map(*def, "allow_write_bytes"), nullptr);  // all UTF-8: the texts alone
  message keep;
  auto back = decode_frame<msg::session_detail>(bytes, &keep).session;
  EXPECT_EQ(back.definition.allow_read, (std::vector<std::string>{"/ok", "/caf\xe9"}));
  EXPECT_EQ(back.definition.allow_write, std::vector<std::string>{"/plain"});
}

TEST(text, ClientTextIsQuotedPrintableAndShort) {
  EXPECT_EQ(printable("plain name"), "plain name");
  EXPECT_EQ(printable("caf\xe9\n\x1b[2J\t\x7f"), "caf\\xe9\\n\\e[2J\\t\\x7f");
  EXPECT_EQ(printable("ok \xe2\x9c\x93"), "ok \xe2\x9c\x93");
  std::string quoted = printable(std::string(1000, 'x'), 10);
  EXPECT_EQ(quoted, "xxxxxxxxxx... (1000 bytes in all)");
  EXPECT_TRUE(valid_utf8(printable("\xf0\x9f\x98")));
  // A prefix never ends inside a character.
  EXPECT_EQ(utf8_prefix("ab\xe2\x9c\x93", 4), "ab");
  EXPECT_EQ(utf8_prefix("ab\xe2\x9c\x93", 5), "ab\xe2\x9c\x93");
  EXPECT_EQ(utf8_prefix("abcdef", 3), "abc");
  // What a stream cut into chunks carries over: the start of a character that may complete.
  EXPECT_EQ(utf8_incomplete_tail("caf\xc3"), 1u);
  EXPECT_EQ(utf8_incomplete_tail("caf\xc3\xa9"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\xe2\x82"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("\xf0\x9f\x98"), 3u);
  EXPECT_EQ(utf8_incomplete_tail("\xf0\x9f\x98\x80"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("abc"), 0u);
  EXPECT_EQ(utf8_incomplete_tail(""), 0u);
  EXPECT_EQ(utf8_incomplete_tail("\xff"), 0u);          // never a character
  EXPECT_EQ(utf8_incomplete_tail("\xe0\x80"), 0u);      // overlong whatever follows
  EXPECT_EQ(utf8_incomplete_tail("\xed\xa0"), 0u);      // a surrogate whatever follows
  EXPECT_EQ(utf8_incomplete_tail("\xf4\x90"), 0u);      // past U+10FFFF
  EXPECT_EQ(utf8_incomplete_tail("x\x80\x80\x80"), 0u);  // stray continuation bytes
  EXPECT_FALSE(valid_utf8("\xc0\xaf"));        // overlong
  EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));    // surrogate
  EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_TRUE(valid_utf8("\xf4\x8f\xbf\xbf"));
}

TEST(schema, EveryNumberInProtocolHIsAMessageOfTheSameName) {
  std::string header = read_file(SBSH_SOURCE_DIR "/ipc/protocol.h");
  auto begin = header.find("enum class msg_type");
  auto end = header.find("};", begin);
  ASSERT_NE(begin, std::string::npos);
  std::string body = header.substr(begin, end - begin);
  std::map<uint32_t, std::string> numbered;
  // Lines "  name = 123,  // ..." (std::regex is avoided: GCC 12 warns inside it under ASan).
  std::istringstream lines(body);
  for (std::string l; std::getline(lines, l);) {
    char name[64];
    unsigned number = 0;
    if (std::sscanf(l.c_str(), " %63[A-Za-z0-9_] = %u,", name, &number) == 2) numbered[number] = name;
  }
  std::map<uint32_t, std::string> declared;
  for (const auto& m : describe_messages()) {
    EXPECT_TRUE(declared.emplace(static_cast<uint32_t>(m.kind.type), std::string(m.kind.name)).second)
        << m.kind.name << " is declared twice";
    EXPECT_EQ(type_name(m.kind.type), m.kind.name);
  }
  EXPECT_EQ(numbered, declared);
  EXPECT_EQ(type_name(static_cast<msg_type>(999)), "unknown");
}

std::string roff(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else out += c;
  }
  return out;
}

std::string route_text(route r) {
  switch (r) {
    case route::client_to_daemon: return "client to daemon";
    case route::daemon_to_client: return "daemon to client";
    case route::daemon_to_wrapper: return "daemon to wrapper";
    case route::wrapper_to_daemon: return "wrapper to daemon";
    case route::state_file: return "state file";
  }
  return "";
}

std::string fields_text(const std::vector<field_doc>& fields) {
  std::string out;
  for (const auto& f : fields) {
    if (!out.empty()) out += ", ";
    out += "\\fB" + roff(f.name) + "\\fR (" + roff(f.type);
    for (const auto& n : f.notes) out += "; " + roff(n);
    out += ")";
  }
  return out;
}

// The two generated sections, as they must stand in the page.
std::string messages_section() {
  std::string s =
      ".SH MESSAGES\n"
      ".\\\" Written from ipc/messages.h by tests/unit/schema_test.cpp; change the schema, not this.\n"
      "Every message by number, with the side that sends it and its fields. \\fBid\\fR marks a\n"
      "message that carries a request id. A field not marked required may be absent and then has\n"
      "its default (0, false, an empty string or array, or the one given); nil is the same as\n"
      "absent. \"absent when empty\" marks a field the sender leaves out when it is empty.\n";
  for (const auto& m : describe_messages()) {
    s += ".TP\n.B " + std::to_string(static_cast<uint32_t>(m.kind.type)) + " " + roff(m.kind.name) + "\n";
    s += route_text(m.kind.dir) + (m.kind.has_id ? "; \\fBid\\fR" : "");
    s += m.fields.empty() ? ".\n" : ": " + fields_text(m.fields) + ".\n";
  }
  s += ".SS Records\nThe maps that travel inside messages.\n";
  for (const auto& r : describe_records()) s += ".TP\n.B " + roff(r.name) + " map\n" + fields_text(r.fields) + ".\n";
  return s;
}

std::string error_codes_section() {
  std::string s =
      ".SH ERROR CODES\n"
      ".\\\" Written from ipc/protocol.h by tests/unit/schema_test.cpp; change kErrorCodes, not this.\n"
      "The \\fBcode\\fR of an \\fBerror\\fR message, and \\fBerror_code\\fR of \\fBexec_done\\fR:\n";
  auto list = [&](errc_origin origin) {
    for (const auto& e : kErrorCodes)
      if (e.origin == origin) s += ".TP\n.B " + roff(e.wire) + "\n" + roff(e.meaning) + ".\n";
  };
  list(errc_origin::sbshd);
  s += ".PP\nCodes that sbshd never sends: a program or the client library gives them itself, "
       "where no reply from sbshd is involved (\\fBsbsh_last_error_code\\fR() of the C ABI, "
       "\\fBcode\\fR of the Python binding's errors and of the CLI's errors under \\fB--json\\fR):\n";
  list(errc_origin::local);
  return s;
}

// The section of `page` that begins with `heading` (up to the next .SH).
std::pair<size_t, size_t> section_at(const std::string& page, const std::string& heading) {
  size_t begin = page.find("\n" + heading + "\n");
  if (begin == std::string::npos) return {std::string::npos, 0};
  ++begin;
  size_t end = page.find("\n.SH ", begin);
  return {begin, end == std::string::npos ? page.size() : end + 1};
}

TEST(schema, ManualListsTheSchema) {
  std::string path = SBSH_SOURCE_DIR "/man/sbsh-protocol.7";
  std::string page = read_file(path);
  ASSERT_FALSE(page.empty()) << path;
  std::string updated = page;
  bool differs = false;
  for (const auto& [heading, want] :
       {std::pair{std::string(".SH MESSAGES"), messages_section()}, std::pair{std::string(".SH ERROR CODES"), error_codes_section()}}) {
    auto [begin, end] = section_at(updated, heading);
    ASSERT_NE(begin, std::string::npos) << "man/sbsh-protocol.7 has no " << heading << " section";
    if (updated.compare(begin, end - begin, want) == 0) continue;
    differs = true;
    ADD_FAILURE() << heading << " of man/sbsh-protocol.7 is not what the schema says. Regenerate it with\n"
                  << "  SBSH_UPDATE_MAN=1 bin/unit_tests --gtest_filter='schema.ManualListsTheSchema'\n"
                  << "The section should be:\n"
                  << want;
    updated.replace(begin, end - begin, want);
  }
  if (differs && std::getenv("SBSH_UPDATE_MAN") != nullptr) {
    std::ofstream(path) << updated;
    std::cout << "rewrote " << path << "\n";
  }
}

}  // namespace sbsh::ipc::schema_tests
