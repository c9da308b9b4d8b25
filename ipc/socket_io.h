// Unix-socket I/O with file descriptors attached (SCM_RIGHTS), and a blocking channel for
// the programs that do not run an event loop (the client library and the wrapper).
//
// Frames that carry descriptors say how many in their "fds" field. A sender attaches them to
// the sendmsg() that holds the frame's first byte; a receiver queues every descriptor it is
// handed and gives a frame its "fds" from the front of the queue once the frame is whole.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/fd.h"
#include "ipc/frame.h"
#include "ipc/result.h"

namespace sbsh::ipc {

// The most descriptors one message below may carry: the kernel's own limit (SCM_MAX_FD).
inline constexpr size_t kMaxPassedFds = 253;

// One sendmsg() of the bytes in `data` with `fds` attached (SCM_RIGHTS) when there are any,
// with MSG_NOSIGNAL, made again after EINTR. Returns bytes written or -1 with errno set
// (EINVAL: more than kMaxPassedFds descriptors). sbshd's frames and the wrapper's messages
// with descriptors are built here (sbshd's end of the shell channel has its own: it reads
// the sender's credentials).
ssize_t send_parts_with_fds(int sock, std::span<const iovec> data, std::span<const int> fds);

// What recv_parts_with_fds() received.
struct received {
  ssize_t bytes = -1;     // as recvmsg() returns: -1 with errno set, 0 at end of file
  size_t fds = 0;         // descriptors put in the caller's span, in the order sent
  bool data_cut = false;  // the message was longer than `data` (MSG_TRUNC)
  bool fds_cut = false;   // more descriptors came than the span holds: the others are closed
};
// One recvmsg() into `data` with MSG_CMSG_CLOEXEC and `flags`, made again after EINTR; the
// descriptors that came with it go to `fds`. The sender's credentials, where the socket has
// SO_PASSCRED, are read and dropped. Uses no memory but its stack, so that a child cloned
// with CLONE_VM may call it.
received recv_parts_with_fds(int sock, std::span<const iovec> data, std::span<int> fds, int flags = 0);

// One sendmsg() of a frame's bytes, at most kMaxFds descriptors. Returns bytes written or -1
// with errno set.
ssize_t send_with_fds(int sock, const char* data, size_t n, std::span<const int> fds);
// One recvmsg() of a frame's bytes; received descriptors are appended to `fds`. More than
// kMaxFds at once is -1 with EPROTO (the stream can no longer be trusted).
ssize_t recv_with_fds(int sock, char* data, size_t n, std::deque<unique_fd>& fds);

// A stream socket named `name` in the directory `dir`: bound and listening (non-blocking), or
// connected (blocking). The path goes through the directory's descriptor
// (/proc/self/fd/N/name), so it fits in sun_path however deep `dir` is.
result<unique_fd> listen_in(const std::string& dir, const char* name, int backlog);
result<unique_fd> connect_in(const std::string& dir, const char* name);

// The credentials of the peer of a connected unix socket, or nullopt when they cannot be read.
std::optional<ucred> peer_of(int sock);
// Bounds each blocking send and receive on `sock` to `seconds` (0: no bound again).
void set_io_timeout(int sock, int seconds);

// A message together with the descriptors its frame carried.
struct envelope {
  message msg;
  std::vector<unique_fd> fds;
};

// Pops the descriptors a parsed message declares (field "fds") from the queue.
result<std::vector<unique_fd>> take_fds(const message& m, std::deque<unique_fd>& queue);

// Blocking, single-threaded framed channel over a connected stream socket.
class channel {
 public:
  channel() = default;
  // read_chunk: bytes asked of each recvmsg (the buffer grows only for larger frames).
  explicit channel(unique_fd fd, size_t read_chunk = size_t{64} * 1024) : fd_(std::move(fd)), read_chunk_(read_chunk) {}

  [[nodiscard]] int fd() const { return fd_.get(); }
  [[nodiscard]] bool open() const { return fd_.valid(); }
  // Bytes already read but not yet returned by recv(): poll(2) on fd() would not show them.
  [[nodiscard]] bool buffered() const { return reader_.buffered() > 0; }
  void close() { fd_.reset(); }

  // Writes a whole frame; fds ride on its first byte.
  status send(std::string_view frame, std::span<const int> fds = {});
  // Reads until one whole message is available. error code "eof" when the peer closed.
  result<envelope> recv();

 private:
  unique_fd fd_;
  size_t read_chunk_ = size_t{64} * 1024;
  std::unique_ptr<char[]> scratch_;  // what recv() reads into; frames are cut from it in place
  frame_reader reader_;
  std::deque<unique_fd> fds_;
};

}  // namespace sbsh::ipc
