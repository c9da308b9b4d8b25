// sbshd's entry point, called by main.cpp once options are parsed.
#pragma once

#include "daemon/server.h"

namespace sbsh::daemon {

struct run_options : options {
  std::string log_level = "info";
  std::string log_format = "text";
};

int run_or_die(run_options opts);

}  // namespace sbsh::daemon
