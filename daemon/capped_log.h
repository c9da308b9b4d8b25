// A log file that keeps only its newest part: when the current file reaches half the cap it
// becomes FILE.1 (replacing the older one) and a new FILE starts, so between half the cap
// and the whole cap of the newest output is always kept, with no copying.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ipc/fd.h"
#include "ipc/result.h"

namespace sbsh::daemon {

class capped_log {
 public:
  status open(std::string path, uint64_t cap);
  void append(const char* data, size_t n);
  // Closes the file once nothing more will be written to it (the files stay).
  void close() { fd_.reset(); }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  void rotate();
  std::string path_;
  unique_fd fd_;
  uint64_t size_ = 0;
  uint64_t cap_ = 0;
};

// The files of the capped log at `path` (PATH and PATH.1).
std::vector<std::string> capped_log_files(const std::string& path);

// The kept contents of a capped log (FILE.1 then FILE); with tail_lines > 0, only its last
// lines. At most max_bytes (the newest) are returned.
std::string read_capped_log(const std::string& path, uint64_t tail_lines, uint64_t max_bytes);

}  // namespace sbsh::daemon
