// The schema as the manual describes it: each message's number, name, direction and
// fields, and each record's fields, read from the tables of ipc/messages.h. The MESSAGES
// section of man/sbsh-protocol.7 is written from this (tests/unit/schema_test.cpp), so the
// page lists exactly what the code sends and reads.
#pragma once

#include <string>
#include <tuple>
#include <vector>

#include "ipc/messages.h"

namespace sbsh::ipc {

struct field_doc {
  std::string name;
  std::string type;                // "str", "array of str", "process map", ...
  std::vector<std::string> notes;  // "required", "default \"frames\"", "absent when empty", ...
};

struct message_doc {
  message_kind kind;
  std::vector<field_doc> fields;
};

struct record_doc {
  std::string name;
  std::vector<field_doc> fields;
};

namespace doc_detail {

template <typename T>
struct optional_of {
  using type = void;
};
template <typename T>
struct optional_of<std::optional<T>> {
  using type = T;
};

// The notes that say how a field travels. `sender_omits` is false for requests: every field
// of a request but the required ones may be left out anyway.
template <typename S, typename F>
field_doc describe_field(const F& f, bool sender_omits) {
  using M = typename F::type;
  field_doc d{std::string(f.name), wire<M>::doc(), {}};
  // An optional left out when empty is never nil: it is there, or it is not.
  if constexpr (!std::is_void_v<typename optional_of<M>::type>)
    if (f.flags & kOmitEmpty) d.type = wire<typename optional_of<M>::type>::doc();
  if (f.flags & kRequired) d.notes.emplace_back("required");
  if constexpr (!requires { f.value; }) {
    static const S defaults{};
    if (auto shown = wire<M>::show(f.get(defaults)); !shown.empty()) d.notes.push_back("default " + shown);
    if (!f.note.empty()) d.notes.emplace_back(f.note);
  }
  if ((f.flags & kOmitEmpty) && sender_omits) d.notes.emplace_back("absent when empty");
  if (f.flags & kNilIfZero) d.notes.emplace_back("nil when 0");
  return d;
}

template <typename S>
std::vector<field_doc> describe_fields(bool sender_omits) {
  return std::apply([&](const auto&... f) { return std::vector<field_doc>{describe_field<S>(f, sender_omits)...}; },
                    kTable<S>);
}

template <typename... M>
std::vector<message_doc> describe_all(std::tuple<M...>*) {
  return {message_doc{M::kind, describe_fields<M>(M::kind.dir != route::client_to_daemon)}...};
}

}  // namespace doc_detail

// Every message, in the order of msg::all.
inline std::vector<message_doc> describe_messages() {
  return doc_detail::describe_all(static_cast<msg::all*>(nullptr));
}

// The records that travel inside messages.
inline std::vector<record_doc> describe_records() {
  auto one = [](auto* tag) {
    using R = std::remove_pointer_t<decltype(tag)>;
    return record_doc{std::string(schema_of<R>::name), doc_detail::describe_fields<R>(true)};
  };
  return {one(static_cast<session_status*>(nullptr)), one(static_cast<session_detail*>(nullptr)),
          one(static_cast<session_spec*>(nullptr)),   one(static_cast<history_entry*>(nullptr)),
          one(static_cast<proc_info*>(nullptr)),      one(static_cast<command_info*>(nullptr))};
}

}  // namespace sbsh::ipc
