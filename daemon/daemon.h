// sbshd's entry point, called by main.cpp once options are parsed.
#pragma once

#include "daemon/log.h"
#include "daemon/server.h"

namespace sbsh::daemon {

struct run_options : options {
  // The log: level and format from the options; sbshd sets `file` (STATE/sbshd.log) itself
  // when it detaches, and the options set its rotation.
  log_options log;
};

int run_or_die(run_options opts);

}  // namespace sbsh::daemon
