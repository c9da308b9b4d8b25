// Files beneath a session's root (msgs file_*, `sbsh file`): read, write, stat, ls, rm, mkdir,
// mv, every path resolved by the kernel beneath the root (beneath.h).
//
// What may block (lookups, listing, removing a tree, opening) runs on the thread pool
// (off_loop.h); the bytes do not pass through sbshd's memory in bulk: on a local connection
// the client gets the open file itself, and over a dial command they go in chunks, a read
// paced by what the client has taken (as `logs` replies are), a write by the socket (each
// chunk is written out as it arrives, before the next is read). A write lands whole or not
// at all: its bytes go to a new file beside the target, renamed over it when the client
// closes it; one the client leaves or discards is deleted.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "ipc/fd.h"
#include "ipc/socket_io.h"
#include "ipc/records.h"

namespace sbsh::daemon {

class service_context;
class client_conn;

class file_service {
 public:
  explicit file_service(service_context& srv) : srv_(srv) {}
  ~file_service();  // deletes what writes still under way had written
  file_service(const file_service&) = delete;
  file_service& operator=(const file_service&) = delete;

  void handle_read(client_conn& c, ipc::envelope& env);
  void handle_write(client_conn& c, ipc::envelope& env);
  void handle_data(client_conn& c, ipc::envelope& env);
  void handle_close(client_conn& c, ipc::envelope& env);
  void handle_stat(client_conn& c, ipc::envelope& env);
  void handle_list(client_conn& c, ipc::envelope& env);
  void handle_remove(client_conn& c, ipc::envelope& env);
  void handle_mkdir(client_conn& c, ipc::envelope& env);
  void handle_move(client_conn& c, ipc::envelope& env);

  void client_drained(client_conn& c);
  void client_gone(client_conn& c);

  // What one connection may have under way at once: requests on the thread pool, files or
  // listings being sent in chunks (each holds a descriptor, or a listing), files being
  // written (each holds two descriptors).
  static constexpr size_t kMaxInFlight = 32;
  static constexpr size_t kMaxReadsPerClient = 8;
  static constexpr size_t kMaxWritesPerClient = 16;
  // Most entries one file_list answers (a larger tree is listed a directory at a time).
  static constexpr size_t kMaxListEntries = 200000;

 private:
  // A file_read answered in chunks, or a file_list in batches, paced by its client.
  struct reading {
    uint64_t serial, req;
    unique_fd fd;
    uint64_t pos = 0, end = 0;
    std::vector<file_entry> entries;  // a listing: what is left to send
    bool listing = false;
  };
  struct writing {
    uint64_t serial, req;
    unique_fd dir;     // the target's directory
    std::string name;  // the target's name in it
    std::string temp;  // the new file's name in it
    unique_fd fd;      // the new file
    uint32_t mode = 0644;
    std::string given;  // the path as the client gave it, for errors
    int error = 0;      // the first write error (errno)
    bool pass_fd = false;  // the client writes into the file itself
  };
  void pump(std::list<reading>::iterator it);
  [[nodiscard]] status check_reads(const client_conn& c) const;
  [[nodiscard]] status check_writes(const client_conn& c) const;
  std::list<writing>::iterator find_write(uint64_t serial, uint64_t req);
  void discard(std::list<writing>::iterator it);

  service_context& srv_;
  std::list<reading> reads_;
  std::list<writing> writes_;
  std::map<uint64_t, size_t> in_flight_;  // client serial -> its requests on the thread pool
};

}  // namespace sbsh::daemon
