// Session definitions: validation, comparison and their msgpack form.
#include "daemon/session_def.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "daemon/exec_job.h"
#include "ipc/limits.h"

namespace sbsh::daemon {

std::string_view policy_name(restart_policy p) {
  switch (p) {
    case restart_policy::always: return "always";
    case restart_policy::on_failure: return "on-failure";
    case restart_policy::never: return "never";
  }
  return "always";
}

std::optional<restart_policy> parse_policy(std::string_view s) {
  if (s == "always") return restart_policy::always;
  if (s == "on-failure") return restart_policy::on_failure;
  if (s == "never") return restart_policy::never;
  return std::nullopt;
}

namespace {

void pack_str(msgpack::packer<ipc::frame_builder>& pk, std::string_view s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

void pack_strs(msgpack::packer<ipc::frame_builder>& pk, const std::vector<std::string>& v) {
  pk.pack_array(static_cast<uint32_t>(v.size()));
  for (const auto& s : v) pack_str(pk, s);
}

status check_def(const session_def& d) {
  if (!d.cwd.empty() && d.cwd[0] != '/')
    return make_error(ipc::err::bad_request, fmt::format("the session directory '{}' must be an absolute path", d.cwd));
  for (const auto& e : d.env) {
    if (auto s = check_env_entry(e); !s) return s;
  }
  for (const auto& c : d.init)
    if (c.find('\0') != std::string::npos) return make_error(ipc::err::bad_request, "an init command contains a NUL byte");
  if (d.init.size() > 64) return make_error(ipc::err::bad_request, "a session may have at most 64 init commands");
  if (!d.snapshot.empty() && d.snapshot[0] != '/')
    return make_error(ipc::err::bad_request,
                      fmt::format("the snapshot source '{}' must be an absolute path", d.snapshot));
  return ok_status();
}

// The most open files the kernel allows a process, even a privileged one.
uint64_t nr_open() {
  std::ifstream f("/proc/sys/fs/nr_open");
  uint64_t n = 0;
  return f >> n && n > 0 ? n : RLIM_INFINITY;
}

// Validates each limit and puts it in canonical form, so that equal definitions compare
// equal. A hard limit above sbshd's own cannot be set without privilege: say so now rather
// than at each start of the shell.
status normalize_limits(std::vector<std::string>& limits) {
  std::vector<int> seen;
  for (auto& l : limits) {
    auto spec = ipc::parse_limit(l);
    if (!spec) return spec.err();
    std::string name = l.substr(0, l.find('='));
    if (std::find(seen.begin(), seen.end(), spec->resource) != seen.end())
      return make_error(ipc::err::bad_request, fmt::format("limit {} is given twice", name));
    seen.push_back(spec->resource);
    rlimit own{};
    if (::geteuid() != 0 && ::getrlimit(spec->resource, &own) == 0 && spec->value.rlim_max > own.rlim_max)
      return make_error(ipc::err::bad_request,
                        fmt::format("limit {}: the hard limit here is {}; ask for at most that", name,
                                    own.rlim_max == RLIM_INFINITY ? std::string("infinity")
                                                                  : std::to_string(own.rlim_max)));
    if (uint64_t most = nr_open(); spec->resource == RLIMIT_NOFILE && spec->value.rlim_max > most)
      return make_error(ipc::err::bad_request,
                        fmt::format("limit nofile: the kernel allows at most {} (fs.nr_open)", most));
    l = ipc::format_limit(*spec);
  }
  return ok_status();
}

}  // namespace

void pack_def(msgpack::packer<ipc::frame_builder>& pk, const session_def& d) {
  pk.pack_map(6);
  pack_str(pk, "cwd");
  pack_str(pk, d.cwd);
  pack_str(pk, "env");
  pack_strs(pk, d.env);
  pack_str(pk, "init");
  pack_strs(pk, d.init);
  pack_str(pk, "restart");
  pack_str(pk, policy_name(d.restart));
  pack_str(pk, "limits");
  pack_strs(pk, d.limits);
  pack_str(pk, "snapshot");
  pack_str(pk, d.snapshot);
}

result<session_def> read_def(const msgpack::object& o) {
  if (o.type != msgpack::type::MAP) return make_error(ipc::err::bad_request, "a session definition must be a map");
  session_def d;
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    const auto& kv = o.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR) continue;
    std::string_view k(kv.key.via.str.ptr, kv.key.via.str.size);
    auto strs = [&](std::vector<std::string>& out) -> status {
      if (kv.val.type != msgpack::type::ARRAY)
        return make_error(ipc::err::bad_request, fmt::format("field '{}' must be an array of strings", k));
      for (uint32_t j = 0; j < kv.val.via.array.size; ++j) {
        const auto& e = kv.val.via.array.ptr[j];
        if (e.type != msgpack::type::STR)
          return make_error(ipc::err::bad_request, fmt::format("field '{}' must be an array of strings", k));
        out.emplace_back(e.via.str.ptr, e.via.str.size);
      }
      return ok_status();
    };
    if (k == "cwd" && kv.val.type == msgpack::type::STR) {
      d.cwd.assign(kv.val.via.str.ptr, kv.val.via.str.size);
    } else if (k == "snapshot" && kv.val.type == msgpack::type::STR) {
      d.snapshot.assign(kv.val.via.str.ptr, kv.val.via.str.size);
    } else if (k == "env") {
      if (auto s = strs(d.env); !s) return s.err();
    } else if (k == "init") {
      if (auto s = strs(d.init); !s) return s.err();
    } else if (k == "limits") {
      if (auto s = strs(d.limits); !s) return s.err();
    } else if (k == "restart" && kv.val.type == msgpack::type::STR) {
      auto p = parse_policy(std::string_view(kv.val.via.str.ptr, kv.val.via.str.size));
      if (!p) return make_error(ipc::err::bad_request, "field 'restart' must be always, on-failure or never");
      d.restart = *p;
    }
  }
  if (auto s = check_def(d); !s) return s.err();
  if (auto s = normalize_limits(d.limits); !s) return s.err();
  return d;
}

result<session_def> def_from_request(const ipc::message& m) {
  session_def d;
  auto cwd = m.get_str("cwd");
  if (!cwd) return cwd.err();
  d.cwd = std::string(cwd.value().value_or(""));
  auto snapshot = m.get_str("snapshot");
  if (!snapshot) return snapshot.err();
  d.snapshot = std::string(snapshot.value().value_or(""));
  if (!d.snapshot.empty() && !d.cwd.empty())
    return make_error(ipc::err::bad_request,
                      "a session made from a snapshot starts in its copy: give either cwd or snapshot, not both");
  for (auto [key, out] : {std::pair{"env", &d.env}, std::pair{"init", &d.init}, std::pair{"limits", &d.limits}}) {
    auto v = m.get_str_array(key);
    if (!v) return v.err();
    for (auto s : v.value().value_or(std::vector<std::string_view>{})) out->emplace_back(s);
  }
  auto restart = m.get_str("restart");
  if (!restart) return restart.err();
  if (restart.value()) {
    auto p = parse_policy(*restart.value());
    if (!p)
      return make_error(ipc::err::bad_request,
                        fmt::format("restart policy '{}' is not always, on-failure or never", *restart.value()));
    d.restart = *p;
  }
  if (auto s = check_def(d); !s) return s.err();
  if (auto s = normalize_limits(d.limits); !s) return s.err();
  return d;
}

}  // namespace sbsh::daemon
