// The options of an sbshd that serves requests but never starts a wrapper or a shell, nor
// copies a snapshot (options::no_sessions), in `dir`: for tests and the request fuzzer,
// which drive its loop themselves.
#pragma once

#include <string>

#include "daemon/server.h"

namespace sbsh::test {

inline daemon::options sessionless_options(const std::string& dir) {
  daemon::options o;
  o.socket_path = dir + "/run/sbshd.sock";
  o.state_dir = dir + "/state";
  o.wrapper_path = "/nonexistent/sbsh-wrapper";
  o.health_interval_ms = 0;
  o.spare_wrappers = 0;
  o.adopt_timeout_ms = 0;
  o.no_sessions = true;
  return o;
}

}  // namespace sbsh::test
