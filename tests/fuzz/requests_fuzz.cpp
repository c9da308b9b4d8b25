// Fuzzes request handling on a real loop: a real daemon::server, listening on a private
// socket in a temporary directory, gets each input as what a client sends after a valid
// hello (with 0 to 3 descriptors attached, as exec's io "fds" would be), and its loop runs
// until it has answered and closed the connection (the client's side is shut after the
// input). A server that shut down on request is replaced by a new one for the next input.
//
// Sessions are off (options::no_sessions): a fuzzed exec must never reach a real shell, nor
// a fuzzed snapshot copy a real directory. So this covers everything before a shell runs:
// framing, decoding and its budget, the handshake, the handler table, every request's
// validation and error replies, lookups of sessions, processes and jobs that do not exist,
// cancel, release and stdin of unknown commands, status, shutdown, and the bounds on what
// clients hold. The engine behind sessions is covered by the functional tests.
// Input: one byte whose low two bits are the number of descriptors, then the stream.
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "daemon/server.h"
#include "ipc/frame.h"
#include "ipc/socket_io.h"
#include "tests/sessionless_server.h"

namespace {

using namespace sbsh;

std::string g_dir;
std::unique_ptr<daemon::server> g_server;
bool g_shut_down = false;

// At exit: a server still serving is shut down first (its signal handles keep its loop
// alive, so destroying it as it is would wait for ever), then its directory goes.
void at_exit() {
  if (g_server && !g_shut_down) {
    g_server->begin_shutdown("the fuzzer is done", false);
    uv_run(g_server->loop(), UV_RUN_DEFAULT);
  }
  g_server.reset();
  if (!g_dir.empty()) (void)std::system(("rm -rf '" + g_dir + "'").c_str());
}

daemon::server& server() {
  if (g_server && g_shut_down) g_server.reset();  // its loop has ended: a new one
  if (!g_server) {
    g_server = std::make_unique<daemon::server>(test::sessionless_options(g_dir));
    if (auto s = g_server->listen(); !s) {
      std::fprintf(stderr, "fuzz_requests: cannot listen: %s\n", s.err().message.c_str());
      std::abort();
    }
    g_server->start(nullptr);
    g_shut_down = false;
  }
  return *g_server;
}

unique_fd connect_client(const std::string& path) {
  auto dir = path.substr(0, path.rfind('/'));
  auto fd = ipc::connect_in(dir, "sbshd.sock");
  if (!fd) {
    std::fprintf(stderr, "fuzz_requests: cannot connect: %s\n", fd.err().message.c_str());
    std::abort();
  }
  ::fcntl(fd->get(), F_SETFL, O_NONBLOCK);
  return std::move(*fd);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  char tmpl[] = "/tmp/sbsh-fuzz.XXXXXX";
  g_dir = ::mkdtemp(tmpl);
  ::mkdir((g_dir + "/run").c_str(), 0700);
  ::setenv("HOME", g_dir.c_str(), 1);
  std::atexit(at_exit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  daemon::server& srv = server();
  uv_loop_t* loop = srv.loop();
  unique_fd client = connect_client(srv.opts().socket_path);
  ipc::frame_builder hello(ipc::msg_type::hello, 1);
  hello.u64("version", ipc::kProtocolVersion);
  std::string out = hello.take();
  out.append(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<unique_fd> passed;
  std::vector<int> raw;
  for (int i = 0; i < (data[0] & 3); ++i) {
    passed.emplace_back(::open("/dev/null", O_RDWR | O_CLOEXEC));
    raw.push_back(passed.back().get());
  }
  size_t off = 0;
  bool eof = false;
  // Write, serve and read until sbshd closes the connection. Each turn either moves bytes
  // or runs the loop; the bound only stops a server that would never close it.
  for (int turn = 0; turn < 100000 && !eof; ++turn) {
    if (off < out.size()) {
      ssize_t n = ipc::send_with_fds(client.get(), out.data() + off, out.size() - off,
                                     off == 0 ? std::span<const int>(raw) : std::span<const int>());
      if (n > 0) off += static_cast<size_t>(n);
      else if (errno != EAGAIN) off = out.size();  // sbshd closed it first
      if (off == out.size()) ::shutdown(client.get(), SHUT_WR);
    }
    uv_run(loop, UV_RUN_NOWAIT);
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(client.get(), buf, sizeof buf);
      if (n > 0) continue;
      if (n == 0 || errno != EAGAIN) eof = true;
      break;
    }
    if (uv_loop_alive(loop) == 0) {  // shut down on request
      g_shut_down = true;
      break;
    }
  }
  if (!eof && !g_shut_down) {
    std::fprintf(stderr, "fuzz_requests: sbshd never closed the connection\n");
    std::abort();
  }
  // A shutdown the input asked for may still be closing handles when sbshd has closed the
  // connection (its socket is gone already): it is finished here, and the next input gets a
  // new server.
  if (!g_shut_down && srv.shutting_down()) {
    uv_run(loop, UV_RUN_DEFAULT);
    g_shut_down = true;
  }
  // Let deferred work run (freeing closed connections, enforcing bounds).
  for (int i = 0; i < 4 && !g_shut_down; ++i) uv_run(loop, UV_RUN_NOWAIT);
  return 0;
}
