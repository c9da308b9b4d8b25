// Writes the seed corpus of the fuzz targets from real messages, one file per input:
//   fuzz_seeds DIR     (DIR/frames/*, DIR/requests/*; the repository keeps tests/fuzz/corpus)
// A frames input is one byte of read size and pauses, then frames; a requests input is one
// byte holding the number of descriptors to pass, then what a client sends after its hello.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "ipc/frame.h"
#include "ipc/messages.h"

using namespace sbsh::ipc;

namespace {

std::vector<std::pair<std::string, std::string>> requests() {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](const char* name, frame_builder&& f) { out.emplace_back(name, f.take()); };
  add("status", frame_builder(msg_type::status, 2));
  add("session_list", frame_builder(msg_type::session_list, 2));
  add("session_show", std::move(frame_builder(msg_type::session_show, 2).str("name", "build")));
  frame_builder create(msg_type::session_create, 2);
  create.str("name", "build").str("cwd", "/tmp").str_array("env", {"A=1", "PATH=/bin"});
  create.str_array("init", {"cd /tmp"}).str("restart", "on-failure").str_array("limits", {"nofile=1024"});
  add("session_create", std::move(create));
  add("session_rm", std::move(frame_builder(msg_type::session_rm, 2).str("name", "build")));
  add("session_restart", std::move(frame_builder(msg_type::session_restart, 2).str("name", "build")));
  frame_builder exec(msg_type::exec, 3);
  exec.str("session", "build").str("command", "echo hi").str("cwd", "/tmp").str_array("env", {"X=y"});
  exec.u64("timeout_ms", 500).u64("grace_ms", 100).str("io", "frames").boolean("stdin", true);
  add("exec", std::move(exec));
  add("stdin_data", std::move(frame_builder(msg_type::stdin_data, 3).bin("data", "abc\n", 4)));
  add("stdin_eof", frame_builder(msg_type::stdin_eof, 3));
  add("cancel", std::move(frame_builder(msg_type::cancel, 3).i64("signal", 2)));
  add("release", frame_builder(msg_type::release, 3));
  frame_builder start(msg_type::proc_start, 4);
  start.str("session", "build").str("name", "web").str("command", "sleep 1").str("cwd", "/tmp");
  add("proc_start", std::move(start));
  add("proc_list", std::move(frame_builder(msg_type::proc_list, 4).boolean("all", true)));
  add("proc_kill", std::move(frame_builder(msg_type::proc_kill, 4).str("proc", "web").i64("signal", 15)));
  add("proc_wait", std::move(frame_builder(msg_type::proc_wait, 4).str("proc", "1").u64("timeout_ms", 10)));
  frame_builder logs(msg_type::proc_logs, 4);
  logs.str("proc", "web").boolean("follow", false).u64("tail", 5).boolean("stdout", true).boolean("stderr", true);
  add("proc_logs", std::move(logs));
  add("shutdown", std::move(frame_builder(msg_type::shutdown, 5).boolean("keep_sessions", false)));
  // A second hello: the requests target has sent one already.
  add("hello", std::move(frame_builder(msg_type::hello, 6).u64("version", kProtocolVersion)));
  // The other requests, from their declarations: each in msg::all that a client sends has a
  // seed (tests/unit/registry_test.cpp checks it).
  auto msg = [&](std::string_view name, std::string bytes) { out.emplace_back(std::string(name), std::move(bytes)); };
  msg("session_prune", encode(msg::session_prune{.idle_ms = 1000}, 7));
  msg("kept_list", encode(msg::kept_list{}, 7));
  msg("kept_prune", encode(msg::kept_prune{}, 7));
  msg("command_wait", encode(msg::command_wait{.command_id = 1, .timeout_ms = 10}, 8));
  msg("command_logs", encode(msg::command_logs{.command_id = 1, .follow = false, .out = true, .err = false}, 8));
  msg("command_kill", encode(msg::command_kill{.command_id = 1, .signal = {15}}, 8));
  msg("command_input", encode(msg::command_input{.command_id = 1, .data = {"yes\r"}, .typed = true, .eof = false}, 8));
  msg("lease", encode(msg::lease{.session = "build"}, 8));
  msg("file_read", encode(msg::file_read{.session = "build", .path = "a/b", .offset = 1, .length = 3}, 9));
  msg("file_write", encode(msg::file_write{.session = "build", .path = "a/b", .mode = 0644, .parents = true}, 9));
  msg("file_data", encode(msg::file_data{.data = {"abc"}}, 9));
  msg("file_close", encode(msg::file_close{.discard = false}, 9));
  msg("file_stat", encode(msg::file_stat{.session = "build", .path = "a"}, 10));
  msg("file_list", encode(msg::file_list{.session = "build", .path = "", .recursive = true}, 10));
  msg("file_remove", encode(msg::file_remove{.session = "build", .path = "a", .recursive = true}, 10));
  msg("file_mkdir", encode(msg::file_mkdir{.session = "build", .path = "a/b", .parents = true}, 10));
  msg("file_move", encode(msg::file_move{.session = "build", .from = "a", .to = "c"}, 10));
  msg("env_list", encode(msg::env_list{}, 11));
  msg("env_remove", encode(msg::env_remove{.hash = "0123456789abcdef", .force = false}, 11));
  msg("env_prune", encode(msg::env_prune{.keep = 1, .older_than_ms = 0}, 11));
  return out;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  std::string dir = argv[1];
  auto reqs = requests();
  std::string all;
  for (const auto& [name, bytes] : reqs) {
    write(dir + "/requests/" + name, std::string(1, name == "exec" ? '\x02' : '\x00') + bytes);
    write(dir + "/frames/" + name, std::string(1, '\x07') + bytes);
    if (name != "shutdown") all += bytes;
  }
  write(dir + "/requests/all", std::string(1, '\x00') + all);
  frame_builder reply(msg_type::output, 3);
  reply.u64("stream", 1).bin("data", "out\0put", 7);
  write(dir + "/frames/output", std::string(1, '\x3c') + reply.take());
  write(dir + "/frames/all_split", std::string(1, '\x80') + all);
  // Reads of 59 bytes, the reader paused every 2 frames: a kept frame with another begun behind it.
  write(dir + "/frames/all_paused", std::string(1, '\xb4') + all);
  return 0;
}
