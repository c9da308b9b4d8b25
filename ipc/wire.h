// The codec that the message schema (ipc/messages.h) drives.
//
// A message or record is a plain struct plus one table of its fields. Each entry names the
// field on the wire, the member that holds it and how it travels:
//
//     static constexpr auto fields() {
//       return std::tuple{field("command", &exec::command, kRequired),
//                         field("cwd", &exec::cwd, kOmitEmpty)};
//     }
//
// (a struct that cannot carry the function, such as the public records of ipc/records.h,
// specializes schema_of<T> instead). From the table, encode() writes a frame and decode()
// reads one; the member's type says how its value is packed (wire<T>, wire_types.h).
// Nothing is counted by hand: a nested map's size is the number of fields the table sends.
//
// Decoding keeps the protocol's promises: unknown keys are ignored, nil is the same as
// absent, an absent field keeps the struct's default, and a known field of the wrong type is
// an error that names it and where it sits ("field 'session.definition.env[2]' must be a
// string, not an integer"). Views (std::string_view, bin_view, str_list) point into the
// decoded message and are valid as long as it is. Nothing is allocated for them: the hot path
// (exec, output, exec_done, release) encodes and decodes without a heap allocation of its own.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ipc/frame.h"
#include "ipc/protocol.h"
#include "ipc/result.h"
#include "ipc/text.h"
#include "ipc/wire_types.h"

namespace sbsh::ipc {

// How a field travels; every field that is not kRequired may be absent.
enum field_flag : unsigned {
  kRequired = 1u << 0,   // decoding: absent or nil is an error naming the field
  kOmitEmpty = 1u << 1,  // encoding: not sent when empty ("", 0, false, nullopt, [])
  kNilIfZero = 1u << 2,  // encoding: 0 is sent as nil (an integer whose 0 means "none")
};

// ---- Field descriptors ----------------------------------------------------------------

// A member of S sent under `name`. only_if() sends it only when a predicate of S holds;
// `note` says when, for the manual.
template <typename S, typename M>
struct member_field {
  using owner = S;
  using type = M;
  std::string_view name;
  M S::*member;
  unsigned flags = 0;
  bool (*when)(const S&) = nullptr;
  std::string_view note;

  constexpr member_field only_if(bool (*w)(const S&), std::string_view why) const {
    member_field f = *this;
    f.when = w;
    f.note = why;
    return f;
  }
  const M& get(const S& s) const { return s.*member; }
  M* target(S& s) const { return &(s.*member); }
  bool condition(const S& s) const { return when == nullptr || when(s); }
};

template <typename S, typename M>
constexpr member_field<S, M> field(std::string_view name, M S::*member, unsigned flags = 0) {
  return {name, member, flags, nullptr, {}};
}

// A field of the struct in member `outer`, sent in S's own map (see embed()).
template <typename S, typename I, typename M>
struct nested_field {
  using owner = S;
  using type = M;
  std::string_view name;
  I S::*outer;
  M I::*member;
  unsigned flags = 0;
  bool (*when)(const I&) = nullptr;
  std::string_view note;

  const M& get(const S& s) const { return (s.*outer).*member; }
  M* target(S& s) const { return &((s.*outer).*member); }
  bool condition(const S& s) const { return when == nullptr || when(s.*outer); }
};

// A value computed from S when encoding (a name derived from a number, say); it is
// ignored when decoding.
template <typename S, typename R>
struct derived_field {
  using owner = S;
  using type = R;
  std::string_view name;
  R (*value)(const S&);
  unsigned flags = 0;
};

template <typename S, typename R>
constexpr derived_field<S, R> derived(std::string_view name, R (*value)(const S&), unsigned flags = 0) {
  return {name, value, flags};
}

// The exact bytes of the text in `member`, sent as bin beside that member's own str field,
// and only when the text is not valid UTF-8 (a frame to a client then carries the str with
// those bytes replaced: frame.h's text_rule). Decoding puts the bytes back in the member, so
// the reader gets the text exactly; in the table it comes after the str field, as on the wire.
// A list of texts (a definition's paths) has the bytes of each, as an array of bin, when any
// of them is not valid UTF-8.
inline bin_view bytes_view(const std::string& t) { return {t}; }
inline std::vector<bin_view> bytes_view(const std::vector<std::string>& l) {
  std::vector<bin_view> v;
  v.reserve(l.size());
  for (const auto& t : l) v.push_back({t});
  return v;
}
inline bool all_valid_utf8(const std::string& t) { return valid_utf8(t); }
inline bool all_valid_utf8(const std::vector<std::string>& l) {
  return std::ranges::all_of(l, [](const std::string& t) { return valid_utf8(t); });
}
// Puts read bytes back: into the text, or each into its text of a list of the same length.
inline void put_bytes(std::string& t, const bin_view& b) { t.assign(b.bytes); }
inline void put_bytes(std::vector<std::string>& l, const std::vector<bin_view>& b) {
  if (b.size() != l.size()) return;  // not the list beside it: the texts stay as they came
  for (size_t i = 0; i < l.size(); ++i) l[i].assign(b[i].bytes);
}

template <typename S, typename T = std::string>
struct bytes_of_field {
  using owner = S;
  using type = decltype(bytes_view(std::declval<const T&>()));
  static constexpr bool kBytesOf = true;
  std::string_view name;
  T S::*member;
  unsigned flags = 0;
  std::string_view note;

  type get(const S& s) const { return bytes_view(s.*member); }
  T* target(S& s) const { return &(s.*member); }
  bool condition(const S& s) const { return !all_valid_utf8(s.*member); }
};

// A bytes_of field of the struct in member `outer`, sent in S's own map (see embed()).
template <typename S, typename I, typename T = std::string>
struct nested_bytes_field {
  using owner = S;
  using type = decltype(bytes_view(std::declval<const T&>()));
  static constexpr bool kBytesOf = true;
  std::string_view name;
  I S::*outer;
  T I::*member;
  unsigned flags = 0;
  std::string_view note;

  type get(const S& s) const { return bytes_view((s.*outer).*member); }
  T* target(S& s) const { return &((s.*outer).*member); }
  bool condition(const S& s) const { return !all_valid_utf8((s.*outer).*member); }
};

template <typename S, typename T>
constexpr bytes_of_field<S, T> bytes_of(std::string_view name, T S::*member, std::string_view note) {
  return {name, member, 0, note};
}

// The table of a struct that cannot carry fields() itself (the public records of
// ipc/records.h), with the record's name in the manual:
//   template <> struct schema_of<history_entry> { static constexpr std::string_view name = ...;
//                                                 static constexpr auto fields() {...} };
template <typename T>
struct schema_of;

template <typename T>
concept has_member_table = requires { T::fields(); };
template <typename T>
concept is_record = requires { schema_of<T>::fields(); };

template <typename T>
constexpr auto table_of() {
  if constexpr (has_member_table<T>) return T::fields();
  else return schema_of<T>::fields();
}
template <typename T>
inline constexpr auto kTable = table_of<T>();

// Every field of the struct in member `outer`, as fields of S's own map: how the session
// map inside session_detail carries the fields of session_status.
// `omit_empty` names a field that S leaves out when empty although I's own table sends it
// always (session_create's snapshot).
template <typename S, typename I>
constexpr auto embed(I S::*outer, std::string_view omit_empty = {}) {
  auto one = [&](const auto& f) {
    using F = std::decay_t<decltype(f)>;
    unsigned flags = f.flags | (f.name == omit_empty ? kOmitEmpty : 0u);
    if constexpr (requires { F::kBytesOf; })
      return nested_bytes_field<S, I, std::remove_cvref_t<decltype(std::declval<I&>().*(f.member))>>{
          f.name, outer, f.member, flags, f.note};
    else return nested_field<S, I, typename F::type>{f.name, outer, f.member, flags, f.when, f.note};
  };
  return std::apply([&](const auto&... f) { return std::tuple{one(f)...}; }, kTable<I>);
}

// ---- Encoding -------------------------------------------------------------------------

template <typename F, typename S>
bool sends(const F& f, const S& s) {
  using M = typename F::type;
  if constexpr (requires { f.value; }) {
    return !(f.flags & kOmitEmpty) || !wire<M>::empty(f.value(s));
  } else {
    if (!f.condition(s)) return false;
    return !(f.flags & kOmitEmpty) || !wire<M>::empty(f.get(s));
  }
}

template <typename F, typename S>
void pack_value(wire_packer& pk, const F& f, const S& s) {
  using M = typename F::type;
  if constexpr (requires { f.value; }) {
    wire<M>::pack(pk, f.value(s));
  } else {
    const M& v = f.get(s);
    if constexpr (std::integral<M>) {
      if ((f.flags & kNilIfZero) && v == 0) {
        pk.pack_nil();
        return;
      }
    }
    wire<M>::pack(pk, v);
  }
}

// Adds field f of `m` to a frame, if it is sent. A derived value is computed once.
template <typename F, typename M>
void add_field(frame_builder& fb, const F& f, const M& m) {
  if constexpr (requires { f.value; }) {
    using R = typename F::type;
    R v = f.value(m);
    if (!(f.flags & kOmitEmpty) || !wire<R>::empty(v)) wire<R>::pack(fb.field(f.name), v);
  } else if (sends(f, m)) {
    pack_value(fb.field(f.name), f, m);
  }
}

// Adds the fields of `m` to a frame begun with its message type.
template <typename M>
void encode_fields(frame_builder& fb, const M& m) {
  std::apply([&](const auto&... f) { (add_field(fb, f, m), ...); }, kTable<M>);
}

// One whole frame (length prefix included) for message `m`; id 0: none.
template <typename M>
std::string encode(const M& m, uint64_t id = 0) {
  frame_builder fb(M::kind.type, id, M::kind.texts());
  encode_fields(fb, m);
  return fb.take();
}

// ---- Decoding -------------------------------------------------------------------------

template <typename F, typename S>
bool read_value(const F& f, S& s, const msgpack::object& o, decoder& d) {
  if constexpr (requires { f.value; }) {
    return true;  // computed when sent: nothing to read back
  } else if constexpr (requires { F::kBytesOf; }) {
    auto at = d.enter(f.name);
    typename F::type bytes;
    if (!wire<typename F::type>::read(o, bytes, d)) return false;
    put_bytes(*f.target(s), bytes);
    return true;
  } else {
    auto at = d.enter(f.name);
    return wire<typename F::type>::read(o, *f.target(s), d);
  }
}

// Reads one key of a map into s; `seen` marks the table's fields found so far.
template <typename S>
bool read_entry(std::string_view key, const msgpack::object& o, S& s, decoder& d, uint64_t& seen) {
  if (o.type == msgpack::type::NIL) return true;  // nil is absent
  constexpr auto& t = kTable<S>;
  return [&]<size_t... I>(std::index_sequence<I...>) {
    bool ok = true;
    (void)((std::get<I>(t).name == key ? (seen |= uint64_t{1} << I, ok = read_value(std::get<I>(t), s, o, d), true)
                                       : false) ||
           ...);
    return ok;
  }
  (std::make_index_sequence<std::tuple_size_v<std::decay_t<decltype(t)>>>{});
}

template <typename S>
bool check_required(uint64_t seen, decoder& d) {
  constexpr auto& t = kTable<S>;
  static_assert(std::tuple_size_v<std::decay_t<decltype(t)>> <= 64, "a record has at most 64 fields");
  return [&]<size_t... I>(std::index_sequence<I...>) {
    auto check = [&](const auto& f, size_t i) {
      if (!(f.flags & kRequired) || (seen >> i & 1) != 0) return true;
      auto at = d.enter(f.name);
      return d.missing(wire<typename std::decay_t<decltype(f)>::type>::noun);
    };
    (void)check;  // a table without fields
    return (check(std::get<I>(t), I) && ...);
  }
  (std::make_index_sequence<std::tuple_size_v<std::decay_t<decltype(t)>>>{});
}

// Records: a nested msgpack map.
template <is_record T>
struct wire<T> {
  static constexpr std::string_view noun = "a map";
  static std::string doc() { return std::string(schema_of<T>::name) + " map"; }
  static void pack(wire_packer& pk, const T& v) {
    uint32_t n = 0;
    std::apply([&](const auto&... f) { ((n += sends(f, v) ? 1 : 0), ...); }, kTable<T>);
    pk.pack_map(n);
    std::apply(
        [&](const auto&... f) {
          auto one = [&](const auto& fd) {
            if (!sends(fd, v)) return;
            pack_key(pk, fd.name);
            pack_value(pk, fd, v);
          };
          (one(f), ...);
        },
        kTable<T>);
  }
  static bool empty(const T&) { return false; }
  static std::string show(const T&) { return ""; }
  static bool read(const msgpack::object& o, T& out, decoder& d) {
    if (o.type != msgpack::type::MAP) return d.wrong_type(noun, o);
    uint64_t seen = 0;
    for (uint32_t i = 0; i < o.via.map.size; ++i) {
      const auto& kv = o.via.map.ptr[i];
      if (kv.key.type != msgpack::type::STR) continue;
      if (!read_entry(std::string_view(kv.key.via.str.ptr, kv.key.via.str.size), kv.val, out, d, seen)) return false;
    }
    return check_required<T>(seen, d);
  }
};

// Reads message `m` (whose type the caller has checked) into an M. String views in the
// result point into m.
template <typename M>
result<M> decode(const message& m) {
  M out{};
  decoder d(M::kind.name);
  uint64_t seen = 0;
  for (const auto& [key, o] : m.fields())
    if (!read_entry(key, *o, out, d, seen)) return d.take_error();
  if (!check_required<M>(seen, d)) return d.take_error();
  return out;
}

// Reads `m` as an M when it is one. Another type is errc::protocol, saying which came where
// an M was due; a malformed M is decode()'s error.
template <typename M>
result<M> decode_as(const message& m) {
  if (m.type() != M::kind.type)
    return make_error(errc::protocol, fmt::format("{} where {} was due", type_name(m.type()), M::kind.name));
  return decode<M>(m);
}

}  // namespace sbsh::ipc
