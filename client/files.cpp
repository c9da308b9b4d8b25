// File requests of libsbsh: read, write, stat, list, remove, mkdir, move beneath a session's
// root. On a local connection sbshd passes the open file and the bytes go straight between
// it and the caller's descriptor; through a dial command they travel in chunks.
#include <fcntl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "client/connection_impl.h"
#include "ipc/fd.h"

namespace sbsh::client {

using ipc::msg_type;
namespace msg = ipc::msg;

namespace {

constexpr size_t kCopyBuffer = 1u << 20;

std::string_view session_or_default(const std::string& s) { return s.empty() ? std::string_view("default") : s; }

// A failure on this side (the caller's descriptor), which leaves the connection as it was.
error io_error(std::string_view what, int e) {
  return make_error(ipc::errc::file_failed, fmt::format("{}: {}", what, std::strerror(e)));
}

status write_out(int fd, std::string_view data) {
  if (int e = write_all(fd, data); e != 0) return io_error("cannot write the file's bytes out", e);
  return ok_status();
}

// Copies [offset, offset + length) of `in` to `out`: sendfile while the kernel can, else
// through a buffer.
result<uint64_t> copy_range(int in, uint64_t offset, uint64_t length, int out) {
  uint64_t done = 0;
  bool kernel = true;
  std::unique_ptr<char[]> buf;
  while (done < length) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(length - done, 1u << 30));
    if (kernel) {
      auto off = static_cast<off_t>(offset + done);
      ssize_t n = ::sendfile(out, in, &off, want);
      if (n > 0) {
        done += static_cast<uint64_t>(n);
        continue;
      }
      if (n == 0) break;  // the file shrank
      if (errno == EINTR) continue;
      if (errno != EINVAL && errno != ENOSYS) return io_error("cannot copy the file's bytes out", errno);
      kernel = false;
    }
    if (!buf) buf = std::make_unique_for_overwrite<char[]>(kCopyBuffer);
    ssize_t n = ::pread(in, buf.get(), std::min(want, kCopyBuffer), static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("cannot read the file", errno);
    if (n == 0) break;
    if (auto s = write_out(out, std::string_view(buf.get(), static_cast<size_t>(n))); !s) return s.err();
    done += static_cast<uint64_t>(n);
  }
  return done;
}

// Where a write's bytes come from: `fill` puts up to `cap` bytes in `buf` and returns how
// many (0 at the end), or an error; `fd`, when >= 0, is the descriptor it reads, which the
// kernel may copy from directly.
struct byte_source {
  std::function<result<size_t>(char* buf, size_t cap)> fill;
  int fd = -1;
};

byte_source from_fd(int fd) {
  return {[fd](char* buf, size_t cap) -> result<size_t> {
            for (;;) {
              ssize_t n = ::read(fd, buf, cap);
              if (n < 0 && errno == EINTR) continue;
              if (n < 0) return io_error("cannot read what is to be written", errno);
              return static_cast<size_t>(n);
            }
          },
          fd};
}

byte_source from_memory(std::string_view data) {
  return {[data](char* buf, size_t cap) mutable -> result<size_t> {
    size_t n = std::min(cap, data.size());
    std::memcpy(buf, data.data(), n);
    data.remove_prefix(n);
    return n;
  }};
}

// Copies all of `in` (from where it stands) to `out` in the kernel: copy_file_range from a
// file, splice from a pipe. False when neither applies to these descriptors and nothing was
// copied (the caller copies through a buffer then); an error for a failure on the way.
result<bool> kernel_copy(int in, int out) {
  bool moved = false;
  for (bool splicing : {false, true}) {
    for (;;) {
      ssize_t n = splicing ? ::splice(in, nullptr, out, nullptr, 1u << 30, SPLICE_F_MOVE)
                           : ::copy_file_range(in, nullptr, out, nullptr, 1u << 30, 0);
      if (n > 0) {
        moved = true;
        continue;
      }
      if (n == 0) {
        if (moved || splicing) return true;
        break;  // an empty file, or a source copy_file_range reads as empty (/proc): try splice
      }
      if (errno == EINTR) continue;
      if (!moved && (errno == EINVAL || errno == EXDEV || errno == ENOSYS || errno == EBADF || errno == EOPNOTSUPP))
        break;
      return io_error("cannot copy what is to be written", errno);
    }
  }
  return false;
}

}  // namespace

namespace {

// Sends file_read or file_write `req` and reads its file_opened, with the file it carries
// (-1 when none: the bytes then travel in frames). `env` keeps that file open.
template <typename Request>
result<msg::file_opened> ask_opened(connection::impl& p, const Request& req, uint64_t id, ipc::envelope* env, int* fd) {
  auto got = p.call(ipc::encode(req, id), id);
  if (!got) return got.err();
  *env = std::move(*got);
  auto opened = read_reply<msg::file_opened>(env->msg);
  if (!opened) return opened.err();
  *fd = -1;
  if (opened->fds > 0) {
    if (env->fds.empty())
      return make_error(ipc::errc::protocol, "sbshd's file_opened says it carries the file, and does not");
    *fd = env->fds[0].get();
  }
  return opened;
}

// One file_read: into `out_fd` when >= 0, else to `sink`.
result<uint64_t> read_one(connection::impl& p, const std::string& session, const std::string& path, int out_fd,
                          const std::function<void(std::string_view)>& sink, const file_read_options& opts) {
  msg::file_read req;
  req.session = session_or_default(session);
  req.path = path;
  req.offset = opts.offset;
  req.length = opts.length;
  req.pass_fd = !p.remote;
  uint64_t id = p.next_id++;
  ipc::envelope env;
  int fd = -1;
  auto opened = ask_opened(p, req, id, &env, &fd);
  if (!opened) return opened.err();
  uint64_t offset = std::min(opts.offset, opened->size);
  if (fd >= 0) {
    if (out_fd >= 0) return copy_range(fd, offset, opened->length, out_fd);
    auto buf = std::make_unique_for_overwrite<char[]>(kCopyBuffer);
    uint64_t done = 0;
    while (done < opened->length) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(opened->length - done, kCopyBuffer));
      ssize_t n = ::pread(fd, buf.get(), want, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return io_error("cannot read the file", errno);
      if (n == 0) break;
      sink(std::string_view(buf.get(), static_cast<size_t>(n)));
      done += static_cast<uint64_t>(n);
    }
    return done;
  }
  // In chunks, then file_end; read to the end whatever happens here, to stay in step.
  std::optional<error> failed;
  for (;;) {
    auto next = p.recv_reply(id);
    if (!next) return next.err();
    if (next->msg.type() == msg_type::file_end) {
      auto end = read_reply<msg::file_end>(next->msg);
      if (!end) return end.err();
      if (failed) return *failed;
      return end->bytes;
    }
    auto chunk = read_reply<msg::file_chunk>(next->msg);
    if (!chunk) return chunk.err();
    if (failed) continue;
    if (out_fd < 0) sink(chunk->data.bytes);
    else if (auto s = write_out(out_fd, chunk->data.bytes); !s) failed = s.err();
  }
}

result<uint64_t> write_one(connection::impl& p, const std::string& session, const std::string& path,
                           const byte_source& source, const file_write_options& opts) {
  msg::file_write req;
  req.session = session_or_default(session);
  req.path = path;
  req.mode = opts.mode;
  req.parents = opts.parents;
  req.pass_fd = !p.remote;
  uint64_t id = p.next_id++;
  ipc::envelope env;
  int into = -1;
  auto opened = ask_opened(p, req, id, &env, &into);
  if (!opened) return opened.err();
  // The bytes: into the file itself (by the kernel when it can), or in file_data frames.
  std::optional<error> failed;
  bool copied = false;
  if (into >= 0 && source.fd >= 0) {
    auto k = kernel_copy(source.fd, into);
    if (!k) failed = k.err();
    else copied = *k;
  }
  size_t cap = into >= 0 ? kCopyBuffer : ipc::kMaxChunk;
  auto buf = std::make_unique_for_overwrite<char[]>(cap);
  while (!copied && !failed) {
    auto n = source.fill(buf.get(), cap);
    if (!n) {
      failed = n.err();
      break;
    }
    if (*n == 0) break;
    std::string_view bytes(buf.get(), *n);
    if (into >= 0) {
      if (auto s = write_out(into, bytes); !s) {
        failed = s.err();
        break;
      }
    } else if (auto s = p.send(ipc::encode(msg::file_data{ipc::bin_view{bytes}}, id)); !s) {
      return s.err();
    }
  }
  // Closed here before sbshd renames it: the descriptor passed is this process's copy.
  if (into >= 0) env.fds.clear();
  auto close = p.call(ipc::encode(msg::file_close{failed.has_value()}, id), id);
  if (failed) return *failed;  // discarded: the path is as it was
  if (!close) return close.err();
  auto end = read_reply<msg::file_end>(close->msg);
  if (!end) return end.err();
  return end->bytes;
}

}  // namespace

result<uint64_t> connection::read_file(const std::string& session, const std::string& path, int out_fd,
                                       const file_read_options& opts) {
  return read_one(*p_, session, path, out_fd, {}, opts);
}

result<uint64_t> connection::read_file(const std::string& session, const std::string& path,
                                       const std::function<void(std::string_view)>& sink,
                                       const file_read_options& opts) {
  return read_one(*p_, session, path, -1, sink, opts);
}

result<uint64_t> connection::write_file(const std::string& session, const std::string& path, int in_fd,
                                        const file_write_options& opts) {
  return write_one(*p_, session, path, from_fd(in_fd), opts);
}

result<uint64_t> connection::write_file(const std::string& session, const std::string& path, std::string_view data,
                                        const file_write_options& opts) {
  return write_one(*p_, session, path, from_memory(data), opts);
}

result<file_entry> connection::stat_file(const std::string& session, const std::string& path) {
  return request<msg::file_info>(*this, msg::file_stat{session_or_default(session), path}, &msg::file_info::entry);
}

result<std::vector<file_entry>> connection::list_files(const std::string& session, const std::string& path,
                                                       bool recursive) {
  uint64_t id = p_->next_id++;
  auto env = p_->call(ipc::encode(msg::file_list{session_or_default(session), path, recursive}, id), id);
  std::vector<file_entry> out;
  for (;;) {
    if (!env) return env.err();
    auto batch = read_reply<msg::file_entries>(env->msg);
    if (!batch) return batch.err();
    std::move(batch->entries.begin(), batch->entries.end(), std::back_inserter(out));
    if (!batch->more) return out;
    env = p_->recv_reply(id);
  }
}

sbsh::status connection::remove_file(const std::string& session, const std::string& path, bool recursive) {
  return request_ok(*this, msg::file_remove{session_or_default(session), path, recursive});
}

sbsh::status connection::make_directory(const std::string& session, const std::string& path, bool parents) {
  return request_ok(*this, msg::file_mkdir{session_or_default(session), path, parents});
}

sbsh::status connection::move_file(const std::string& session, const std::string& from, const std::string& to) {
  return request_ok(*this, msg::file_move{session_or_default(session), from, to});
}

}  // namespace sbsh::client
