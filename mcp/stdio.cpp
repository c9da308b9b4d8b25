// The stdio transport: a reader thread takes lines from stdin (any kind of descriptor: a
// pipe, a file, a terminal) and hands each to the loop, which answers on stdout.
//
// A line longer than kMaxMessage is not kept: the rest of it is skipped and the answer is an
// Invalid Request error (its id unknown), and the next line is read as usual.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <thread>

#include "mcp/mcp.h"
#include "ipc/fd.h"
#include "uv/handles.h"
#include "uv/loop_queue.h"

namespace sbsh::mcp {

namespace {

constexpr uint64_t kOwner = 1;

// Reads stdin until end-of-file, calling `line` with each line (without its newline; an
// over-long line as nullopt) and `eof` once at the end.
void read_lines(const std::function<void(std::optional<std::string>)>& line, const std::function<void()>& eof) {
  std::string buf;
  bool skipping = false;
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(0, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::string_view in(chunk, static_cast<size_t>(n));
    while (!in.empty()) {
      size_t nl = in.find('\n');
      std::string_view part = in.substr(0, nl);
      if (!skipping) buf.append(part);
      if (buf.size() > kMaxMessage) {
        buf.clear();
        buf.shrink_to_fit();
        if (!skipping) line(std::nullopt);
        skipping = true;
      }
      if (nl == std::string_view::npos) break;
      if (!skipping && !buf.empty() && buf != "\r") line(std::move(buf));
      buf.clear();
      skipping = false;
      in.remove_prefix(nl + 1);
    }
  }
  if (!skipping && !buf.empty()) line(std::move(buf));
  eof();
}

}  // namespace

int run_stdio(const server_options& opts) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  uv::loop_queue queue(&loop);
  server core(opts, [&queue](std::function<void()> f) { queue.post(std::move(f)); });
  peer_state peer;
  bool ending = false;
  auto ticker = uv::make_handle<uv::timer>(&loop);
  ticker->start(
      500, [&core] { core.tick(); }, 500);

  auto finish = [&] {
    ticker.reset();
    queue.close();
  };
  // The client went away (stdin ended, or stdout lost its reader): every call is cancelled,
  // and the loop ends once the last has finished, so nothing it started is left running.
  auto end = [&] {
    if (ending) return;
    ending = true;
    core.when_idle(finish);
    core.cancel_all();
    if (core.idle()) finish();
  };
  sink out = [&](const json& j) {
    if (ending || j.is_null()) return;
    if (write_all(1, to_line(j) + "\n") != 0) end();
  };

  std::atomic<bool> reader_done{false};
  std::thread reader([&] {
    read_lines(
        [&](std::optional<std::string> text) {
          queue.post([&, text = std::move(text)] {
            if (ending) return;
            if (!text) {
              out(error_response(nullptr, kInvalidRequest,
                                 "Invalid Request: the message is longer than 4194304 bytes, the most this server "
                                 "reads; it was skipped"));
              return;
            }
            auto parsed = parse_message(*text);
            if (!parsed.message) {
              out(parsed.error);
              return;
            }
            core.handle(*parsed.message, peer, kOwner, out);
          });
        },
        [&] { queue.post(end); });
    reader_done = true;
  });
  uv_run(&loop, UV_RUN_DEFAULT);
  // Ended by stdout losing its reader while stdin is still open: the reader thread is
  // blocked in read() and may never return. Every call has finished; nothing is left to do.
  if (!reader_done) ::_exit(0);
  reader.join();
  int rc = uv_loop_close(&loop);
  return rc == 0 ? 0 : 1;
}

}  // namespace sbsh::mcp
