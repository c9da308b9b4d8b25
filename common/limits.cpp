// Parsing and formatting of session resource limits; see limits.h.
#include "common/limits.h"
#include "ipc/text.h"

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include "ipc/protocol.h"

namespace sbsh {
using ipc::errc;
using ipc::printable;

namespace {

enum class unit { bytes, count, seconds };

struct resource_name {
  std::string_view name;
  int resource;
  unit u;
};

constexpr std::array<resource_name, 9> kResources{{
    {"as", RLIMIT_AS, unit::bytes},
    {"core", RLIMIT_CORE, unit::bytes},
    {"cpu", RLIMIT_CPU, unit::seconds},
    {"data", RLIMIT_DATA, unit::bytes},
    {"fsize", RLIMIT_FSIZE, unit::bytes},
    {"memlock", RLIMIT_MEMLOCK, unit::bytes},
    {"nofile", RLIMIT_NOFILE, unit::count},
    {"nproc", RLIMIT_NPROC, unit::count},
    {"stack", RLIMIT_STACK, unit::bytes},
}};

const resource_name* by_name(std::string_view n) {
  for (const auto& r : kResources)
    if (r.name == n) return &r;
  return nullptr;
}

const resource_name* by_resource(int res) {
  for (const auto& r : kResources)
    if (r.resource == res) return &r;
  return nullptr;
}

std::optional<rlim_t> parse_value(std::string_view v, unit u) {
  if (v == "infinity" || v == "unlimited") return RLIM_INFINITY;
  size_t digits = 0;
  while (digits < v.size() && v[digits] >= '0' && v[digits] <= '9') ++digits;
  if (digits == 0 || digits > 19) return std::nullopt;
  uint64_t n = std::strtoull(std::string(v.substr(0, digits)).c_str(), nullptr, 10);
  std::string_view suffix = v.substr(digits);
  uint64_t scale = 1;
  if (u == unit::bytes && suffix.size() == 1) {
    constexpr std::string_view kSuffixes = "KMGT";
    size_t at = kSuffixes.find(static_cast<char>(suffix[0] & ~0x20));  // k or K
    if (at == std::string_view::npos) return std::nullopt;
    scale = uint64_t{1} << (10 * (at + 1));
  } else if (u == unit::seconds && suffix.size() == 1) {
    if (suffix[0] == 's') scale = 1;
    else if (suffix[0] == 'm') scale = 60;
    else if (suffix[0] == 'h') scale = 3600;
    else return std::nullopt;
  } else if (!suffix.empty()) {
    return std::nullopt;
  }
  if (n > UINT64_MAX / scale || n * scale >= RLIM_INFINITY) return std::nullopt;
  return static_cast<rlim_t>(n * scale);
}

std::string value_text(rlim_t v) { return v == RLIM_INFINITY ? std::string("infinity") : std::to_string(v); }

}  // namespace

result<rlimit_spec> parse_limit(std::string_view spec) {
  size_t eq = spec.find('=');
  std::string_view name = spec.substr(0, eq);
  const resource_name* r = by_name(name);
  if (eq == std::string_view::npos || r == nullptr)
    return make_error(errc::bad_request,
                      fmt::format("'{}' is not a limit: use NAME=VALUE with NAME one of as, core, cpu, data, fsize, "
                                  "memlock, nofile, nproc, stack",
                                  printable(spec, 80)));
  std::string_view value = spec.substr(eq + 1);
  size_t colon = value.find(':');
  auto soft = parse_value(value.substr(0, colon), r->u);
  auto hard = colon == std::string_view::npos ? soft : parse_value(value.substr(colon + 1), r->u);
  if (!soft || !hard) {
    const char* form = r->u == unit::bytes     ? "bytes, or with K, M, G or T"
                       : r->u == unit::seconds ? "seconds, or with s, m or h"
                                               : "a number";
    return make_error(errc::bad_request, fmt::format("limit {}: '{}' is not SOFT:HARD or one value ({}, or infinity)",
                                                    name, printable(value, 80), form));
  }
  if (*soft > *hard)
    return make_error(errc::bad_request,
                      fmt::format("limit {}: the soft limit {} is above the hard limit {}", name, value_text(*soft),
                                  value_text(*hard)));
  return rlimit_spec{r->resource, rlimit{*soft, *hard}};
}

std::string format_limit(const rlimit_spec& l) {
  const resource_name* r = by_resource(l.resource);
  return fmt::format("{}={}:{}", r != nullptr ? r->name : "?", value_text(l.value.rlim_cur), value_text(l.value.rlim_max));
}

}  // namespace sbsh
