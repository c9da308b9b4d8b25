// Fuzzes the frame decoder: an arbitrary byte stream cut into frames by ipc::frame_reader,
// fed in reads of arbitrary sizes, and every frame decoded by message::parse and read with
// every typed getter. Besides crashes, leaks, undefined behaviour and large allocations
// (scripts/fuzz.sh runs it with -malloc_limit_mb), it checks two properties:
//   - the frames and the error that come out do not depend on how the stream was split or
//     whether the reader was paused (keep_rest) between frames;
//   - the walk that guards the decoder (msgpack_scan.h) accepts exactly what the decoder
//     accepts.
// Input: one byte choosing the read size and how often to pause, then the stream.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "ipc/bounds.h"
#include "ipc/frame.h"
#include "ipc/msgpack_scan.h"
#include "ipc/socket_io.h"

namespace {

using namespace sbsh;

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_frames: %s\n", what);
  std::abort();
}

struct cut_result {
  std::vector<std::string> bodies;
  std::string error;
};

// The frames of `stream`, fed `read` bytes at a time, the reader paused every `pause` frames.
cut_result cut(std::string_view stream, size_t read, size_t pause) {
  cut_result out;
  ipc::frame_reader r;
  for (size_t off = 0; off < stream.size() && out.error.empty(); off += read) {
    std::string chunk(stream.substr(off, read));  // gone after this read, as a socket's buffer
    r.feed(chunk.data(), chunk.size());
    for (size_t taken = 1;; ++taken) {
      auto b = r.next_body();
      if (!b) {
        out.error = b.err().message;
        break;
      }
      if (!b.value()) break;
      out.bodies.emplace_back(*b.value());
      if (pause != 0 && taken % pause == 0) {
        r.keep_rest();
        break;
      }
    }
  }
  r.feed("", 0);
  while (out.error.empty()) {
    auto b = r.next_body();
    if (!b) out.error = b.err().message;
    else if (!b.value()) break;
    else out.bodies.emplace_back(*b.value());
  }
  return out;
}

// Reads every field with every getter, as handlers would.
void read_all(const ipc::message& m) {
  static const char* keys[] = {"type", "id", "session", "command", "env", "data", "stream", "follow", "tail",
                               "fds", "signal", "timeout_ms", "name", "proc", "x"};
  for (const char* k : keys) {
    (void)m.get_u64(k);
    (void)m.get_i64(k);
    (void)m.get_str(k);
    (void)m.get_bin(k);
    (void)m.get_bool(k);
    (void)m.get_str_array(k);
    (void)m.is_nil(k);
  }
  std::deque<unique_fd> none;
  (void)ipc::take_fds(m, none);
}

bool decoder_accepts(std::string_view body) {
  try {
    size_t off = 0;
    auto h = msgpack::unpack(body.data(), body.size(), off, nullptr, nullptr,
                             msgpack::unpack_limit(ipc::kMaxArray, ipc::kMaxMap, ipc::kMaxFrame, ipc::kMaxFrame, 0,
                                                   ipc::kMaxDepth));
    return off == body.size();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t read = data[0] % 61 + 1;
  size_t pause = data[0] / 61;  // 0 (never) to 4
  cut_result whole = cut(stream, stream.size() + 1, 0);
  cut_result split = cut(stream, read, pause);
  check(whole.bodies == split.bodies, "the frames depend on how the stream was split");
  check(whole.error.empty() == split.error.empty(), "an error depends on how the stream was split");
  for (const auto& body : whole.bodies) {
    bool walk = ipc::msgpack_decoded_size(body).ok();
    check(walk == decoder_accepts(body), "the walk and the decoder disagree");
    for (auto budget : {ipc::kRequestDecode, ipc::kReplyDecode}) {
      auto m = ipc::message::parse(body.data(), body.size(), budget);
      if (m) read_all(*m);
    }
  }
  return 0;
}
