// The environment sbsh passes on (see environ.h).
#include "common/environ.h"

#include <unistd.h>  // environ (g++ defines _GNU_SOURCE)

#include <algorithm>
#include <array>

namespace sbsh {

namespace {

// Whether `entry` ("NAME=value") sets the variable `name`.
bool sets(std::string_view entry, std::string_view name) {
  return entry.size() > name.size() && entry.substr(0, name.size()) == name && entry[name.size()] == '=';
}

}  // namespace

bool is_service_manager_variable(std::string_view entry) {
  static constexpr std::array<std::string_view, 6> kNames = {
      "NOTIFY_SOCKET", "WATCHDOG_PID", "WATCHDOG_USEC", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"};
  return std::ranges::any_of(kNames, [entry](std::string_view name) { return sets(entry, name); });
}

std::vector<std::string> inherited_environment(std::string_view drop) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (is_service_manager_variable(entry) || (!drop.empty() && sets(entry, drop))) continue;
    out.emplace_back(entry);
  }
  return out;
}

std::vector<char*> c_pointers(std::vector<std::string>& entries) {
  std::vector<char*> out;
  out.reserve(entries.size() + 1);
  for (auto& e : entries) out.push_back(e.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace sbsh
