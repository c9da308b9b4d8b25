// sbshd's side of the fork server (ipc/fork_server.h, wrapper/fork_server.h): one
// sbsh-wrapper --fork-server, started when the first wrapper is, that starts every other
// wrapper as a copy of itself so that they share the pages its runtime set up.
//
// It holds nothing of any session. Killed or ended, it is started again at the next wrapper;
// when it cannot start or serve three times in a row, or says it cannot serve at all (a
// kernel without PR_SET_MM_MAP), sbshd says so once and starts wrappers itself (posix_spawn)
// from then on. SBSH_FORK_SERVER=0 in sbshd's environment does the same from the start.
#pragma once

#include <uv.h>

#include <sys/resource.h>

#include <array>
#include <optional>
#include <span>
#include <string>

#include "ipc/fd.h"
#include "ipc/result.h"
#include "uv/child_process.h"

namespace sbsh::daemon {

class fork_server {
 public:
  fork_server(uv_loop_t* loop, std::string wrapper_path, int devnull);
  ~fork_server();
  fork_server(const fork_server&) = delete;
  fork_server& operator=(const fork_server&) = delete;

  // Starts a wrapper with `argv` and `envp` (each ending in nullptr) in `cwd` (nullptr:
  // sbshd's), `fds` its descriptors 0-5: its pid, sbshd's child, which the caller watches; an
  // error when it was refused (its directory is gone, say); nothing when the server cannot
  // take it, and the caller starts it itself.
  std::optional<result<pid_t>> start(char* const* argv, char* const* envp, const char* cwd, std::span<const int> fds);

 private:
  bool running();
  [[nodiscard]] bool same_limits() const;
  bool launch();
  void stop();
  void give_up(const std::string& why);

  uv_loop_t* loop_;
  std::string path_;
  int devnull_;
  uv::child_ptr proc_;
  unique_fd sock_;
  // sbshd's resource limits when the server started, which its copies inherit: when they
  // change (prlimit), a new server starts with the new ones.
  std::array<rlimit, RLIM_NLIMITS> limits_{};
  int failures_ = 0;  // starts in a row that did not serve
  bool given_up_ = false;
};

}  // namespace sbsh::daemon
