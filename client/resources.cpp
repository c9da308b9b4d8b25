// Memory sizes, CPU shares and process counts from text, for plans and the MCP tools
// (client/resources.h).
#include "client/resources.h"
#include "ipc/protocol.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

namespace sbsh::client {

namespace {

// A finite number of the whole text, or nothing (strtod would also take "inf", "nan" or hex).
bool number_of(std::string_view text, std::string_view suffixes, double* n, char* suffix) {
  std::string t(text);
  *suffix = '\0';
  if (!t.empty() && suffixes.find(t.back()) != std::string_view::npos) {
    *suffix = t.back();
    t.pop_back();
  }
  if (t.empty() || t.find_first_not_of("0123456789.") != std::string::npos) return false;
  char* end = nullptr;
  *n = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size() && std::isfinite(*n);
}

}  // namespace

result<uint64_t> parse_memory(std::string_view text) {
  double n = 0;
  char suffix = '\0';
  auto bad = [&] {
    return make_error(ipc::errc::usage,
                      fmt::format("\"{}\" is not a memory size: give bytes, or a number with K, M, G or T "
                                  "(powers of 1024), such as 512M or 2G",
                                  text.substr(0, 40)));
  };
  if (!number_of(text, "KkMmGgTt", &n, &suffix)) return bad();
  int shift = 0;
  switch (suffix) {
    case 'K':
    case 'k': shift = 10; break;
    case 'M':
    case 'm': shift = 20; break;
    case 'G':
    case 'g': shift = 30; break;
    case 'T':
    case 't': shift = 40; break;
    default:
      if (std::floor(n) != n) return bad();  // a fraction of a byte
  }
  double bytes = n * static_cast<double>(uint64_t{1} << shift);
  if (!(bytes >= 1) || bytes > 1e18) return bad();
  return static_cast<uint64_t>(bytes);
}

result<uint64_t> parse_cpu_millis(std::string_view text) {
  double n = 0;
  char suffix = '\0';
  if (!number_of(text, "", &n, &suffix) || !(n >= 0.001) || n > 1e6)
    return make_error(ipc::errc::usage,
                      fmt::format("\"{}\" is not a number of CPUs: give one such as 0.5, 1 or 2", text.substr(0, 40)));
  return static_cast<uint64_t>(std::llround(n * 1000));
}

result<uint64_t> parse_pids(std::string_view text) {
  double n = 0;
  char suffix = '\0';
  if (!number_of(text, "", &n, &suffix) || std::floor(n) != n || !(n >= 1) || n > 1e12)
    return make_error(ipc::errc::usage, fmt::format("\"{}\" is not a number of processes: give a whole number from 1",
                                                    text.substr(0, 40)));
  return static_cast<uint64_t>(n);
}

}  // namespace sbsh::client
