// What the message schema (messages.h) cannot say in a table: the field types that check
// their values, the values computed when a record is sent, and type_name.
#include "ipc/messages.h"

#include <fmt/format.h>

#include "ipc/text.h"

namespace sbsh::ipc {

bool wire<signal_spec>::read(const msgpack::object& o, signal_spec& out, decoder& d) {
  if (o.type == msgpack::type::POSITIVE_INTEGER || o.type == msgpack::type::NEGATIVE_INTEGER) {
    int64_t n = o.type == msgpack::type::NEGATIVE_INTEGER ? o.via.i64 : static_cast<int64_t>(std::min<uint64_t>(o.via.u64, INT64_MAX));
    if (n <= 0 || n >= NSIG) return d.fail(fmt::format("signal {} is out of range", n));
    out.number = static_cast<int>(n);
    return true;
  }
  if (o.type != msgpack::type::STR) return d.wrong_type(noun, o);
  std::string_view name(o.via.str.ptr, o.via.str.size);
  auto sig = signal_from_name(name);
  if (!sig) return d.fail(fmt::format("unknown signal '{}': use a name such as TERM, KILL, INT or a number",
                                   printable(name, 32)));
  out.number = *sig;
  return true;
}

bool wire<proc_ref>::read(const msgpack::object& o, proc_ref& out, decoder& d) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) out = proc_ref{o.via.u64, {}};
  else if (o.type == msgpack::type::STR) out = proc_ref{0, std::string_view(o.via.str.ptr, o.via.str.size)};
  else return d.wrong_type(noun, o);
  return true;
}

std::optional<int64_t> pgid_of(const proc_info& p) {
  return p.pid > 0 ? std::optional<int64_t>(p.pid) : std::nullopt;
}

std::string signal_name_of(const proc_info& p) { return p.signal ? signal_name(*p.signal) : std::string(); }
std::string signal_name_of_command(const command_info& c) { return c.signal ? signal_name(*c.signal) : std::string(); }

std::string msg::done_signal_name(const exec_done& d) { return d.signal ? signal_name(*d.signal) : std::string(); }

namespace {

template <typename... M>
constexpr auto kinds_of(std::tuple<M...>*) {
  return std::array<message_kind, sizeof...(M)>{M::kind...};
}
constexpr auto kKinds = kinds_of(static_cast<msg::all*>(nullptr));

}  // namespace

std::string_view type_name(msg_type t) {
  for (const auto& k : kKinds)
    if (k.type == t) return k.name;
  return "unknown";
}

}  // namespace sbsh::ipc
