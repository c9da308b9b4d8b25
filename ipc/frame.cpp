// Frame encoding and defensive decoding; the grammar is written down in frame.h.
#include "ipc/frame.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "ipc/msgpack_scan.h"
#include "ipc/text.h"

namespace sbsh::ipc {

wire_packer& wire_packer::pack_text(std::string_view s) {
  if (fb_.rule() == text_rule::utf8 && !valid_utf8(s)) {
    std::string fixed = utf8_repair(s);
    pack_str(static_cast<uint32_t>(fixed.size()));
    pack_str_body(fixed.data(), static_cast<uint32_t>(fixed.size()));
    return *this;
  }
  pack_str(static_cast<uint32_t>(s.size()));
  pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
  return *this;
}

frame_builder::frame_builder(msg_type type, uint64_t id, text_rule rule) : pk_(*this), rule_(rule) {
  buf_.reserve(128);
  buf_.resize(kHeadroom);
  u64("type", static_cast<uint64_t>(type));
  if (id != 0) u64("id", id);
}

wire_packer& frame_builder::field(std::string_view key) {
  ++fields_;
  pk_.pack_str(static_cast<uint32_t>(key.size()));
  pk_.pack_str_body(key.data(), static_cast<uint32_t>(key.size()));
  return pk_;
}

frame_builder& frame_builder::u64(std::string_view key, uint64_t v) {
  field(key).pack_uint64(v);
  return *this;
}
frame_builder& frame_builder::i64(std::string_view key, int64_t v) {
  field(key).pack_int64(v);
  return *this;
}
frame_builder& frame_builder::str(std::string_view key, std::string_view v) {
  field(key).pack_text(v);
  return *this;
}
frame_builder& frame_builder::bin(std::string_view key, const void* data, size_t n) {
  auto& pk = field(key);
  pk.pack_bin(static_cast<uint32_t>(n));
  pk.pack_bin_body(static_cast<const char*>(data), static_cast<uint32_t>(n));
  return *this;
}
frame_builder& frame_builder::boolean(std::string_view key, bool v) {
  auto& pk = field(key);
  if (v) pk.pack_true(); else pk.pack_false();
  return *this;
}
frame_builder& frame_builder::nil(std::string_view key) {
  field(key).pack_nil();
  return *this;
}
frame_builder& frame_builder::str_array(std::string_view key, const std::vector<std::string>& v) {
  auto& pk = field(key);
  pk.pack_array(static_cast<uint32_t>(v.size()));
  for (const auto& s : v) pk.pack_text(s);
  return *this;
}

std::string_view frame_builder::finish() {
  if (finished_) return buf_;
  finished_ = true;
  char map_hdr[5];
  size_t hdr_len;
  if (fields_ < 16) {
    map_hdr[0] = static_cast<char>(0x80 | fields_);
    hdr_len = 1;
  } else if (fields_ < 65536) {
    map_hdr[0] = static_cast<char>(0xde);
    map_hdr[1] = static_cast<char>(fields_ >> 8);
    map_hdr[2] = static_cast<char>(fields_);
    hdr_len = 3;
  } else {
    map_hdr[0] = static_cast<char>(0xdf);
    for (int i = 0; i < 4; ++i) map_hdr[1 + i] = static_cast<char>(fields_ >> (24 - 8 * i));
    hdr_len = 5;
  }
  // The headroom holds the header of a map of up to 15 fields, which every message has; a
  // larger header makes room by moving the body once.
  if (hdr_len > kHeadroom - 4) buf_.insert(kHeadroom, hdr_len - (kHeadroom - 4), '\0');
  std::memcpy(&buf_[4], map_hdr, hdr_len);
  size_t body = buf_.size() - 4;
  for (int i = 0; i < 4; ++i) buf_[i] = static_cast<char>(body >> (24 - 8 * i));
  return buf_;
}

std::string frame_builder::take() {
  (void)finish();
  return std::move(buf_);  // the frame starts at the front: nothing to copy
}

namespace {

// Limits for the msgpack decoder, the same as msgpack_decoded_size checks first (a second
// line of defence: nothing in the protocol needs more).
msgpack::unpack_limit decode_limits() {
  return {/*array=*/kMaxArray, /*map=*/kMaxMap, /*str=*/kMaxFrame,
          /*bin=*/kMaxFrame, /*ext=*/0, /*depth=*/kMaxDepth};
}

std::string_view kind_name(msgpack::type::object_type t) {
  switch (t) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "a boolean";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER: return "an integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "a float";
    case msgpack::type::STR: return "a string";
    case msgpack::type::BIN: return "binary";
    case msgpack::type::ARRAY: return "an array";
    case msgpack::type::MAP: return "a map";
    default: return "an extension";
  }
}

error wrong_type(std::string_view key, std::string_view want, const msgpack::object& o) {
  return make_error(err::bad_request,
                    fmt::format("field '{}' must be {}, not {}", key, want, kind_name(o.type)));
}

}  // namespace

result<message> message::parse(const char* data, size_t n, decode_budget budget) {
  auto cost = msgpack_decoded_size(std::string_view(data, n));
  if (!cost) return cost.err();
  if (cost.value() > budget.of(n))
    return make_error(err::bad_frame,
                      fmt::format("a frame of {} bytes would take {} bytes to decode, more than the {} allowed: "
                                  "it holds too many small values; send fewer, larger ones",
                                  n, cost.value(), budget.of(n)));
  message m;
  try {
    size_t off = 0;
    auto handle = std::make_shared<msgpack::object_handle>(
        msgpack::unpack(data, n, off, nullptr, nullptr, decode_limits()));
    if (off != n) return make_error(err::bad_frame, "frame has bytes after its msgpack map");
    m.handle_ = std::move(handle);
  } catch (const std::exception& e) {
    return make_error(err::bad_frame, fmt::format("frame is not valid msgpack ({})", e.what()));
  }
  const msgpack::object& root = m.handle_->get();
  if (root.type != msgpack::type::MAP)
    return make_error(err::bad_frame, fmt::format("frame must be a msgpack map, not {}",
                                                  kind_name(root.type)));
  m.fields_.reserve(root.via.map.size);
  for (uint32_t i = 0; i < root.via.map.size; ++i) {
    const auto& kv = root.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR)
      return make_error(err::bad_frame, "every key of a message map must be a string");
    m.fields_.emplace_back(std::string_view(kv.key.via.str.ptr, kv.key.via.str.size), &kv.val);
  }
  auto t = m.get_u64("type");
  if (!t) return t.err();
  if (!t.value()) return make_error(err::bad_request, "message has no 'type' field");
  if (*t.value() > UINT32_MAX) return make_error(err::bad_request, "field 'type' is out of range");
  m.type_ = static_cast<msg_type>(*t.value());
  auto id = m.get_u64("id");
  if (!id) return id.err();
  m.id_ = id.value().value_or(0);
  return m;
}

const msgpack::object* message::find(std::string_view key) const {
  for (const auto& [k, v] : fields_)
    if (k == key) return v;
  return nullptr;
}

bool message::is_nil(std::string_view key) const {
  const auto* o = find(key);
  return o != nullptr && o->type == msgpack::type::NIL;
}

result<std::optional<uint64_t>> message::get_u64(std::string_view key) const {
  const auto* o = find(key);
  if (o == nullptr || o->type == msgpack::type::NIL) return std::optional<uint64_t>{};
  if (o->type != msgpack::type::POSITIVE_INTEGER) return wrong_type(key, "a non-negative integer", *o);
  return std::optional<uint64_t>{o->via.u64};
}

result<std::optional<int64_t>> message::get_i64(std::string_view key) const {
  const auto* o = find(key);
  if (o == nullptr || o->type == msgpack::type::NIL) return std::optional<int64_t>{};
  if (o->type == msgpack::type::NEGATIVE_INTEGER) return std::optional<int64_t>{o->via.i64};
  if (o->type == msgpack::type::POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
    return std::optional<int64_t>{static_cast<int64_t>(o->via.u64)};
  return wrong_type(key, "an integer", *o);
}

result<std::optional<std::string_view>> message::get_str(std::string_view key) const {
  const auto* o = find(key);
  if (o == nullptr || o->type == msgpack::type::NIL) return std::optional<std::string_view>{};
  if (o->type != msgpack::type::STR) return wrong_type(key, "a string", *o);
  return std::optional<std::string_view>{std::string_view(o->via.str.ptr, o->via.str.size)};
}

result<std::optional<std::string_view>> message::get_bin(std::string_view key) const {
  const auto* o = find(key);
  if (o == nullptr || o->type == msgpack::type::NIL) return std::optional<std::string_view>{};
  if (o->type == msgpack::type::BIN)
    return std::optional<std::string_view>{std::string_view(o->via.bin.ptr, o->via.bin.size)};
  if (o->type == msgpack::type::STR)  // lenient: some msgpack libraries cannot emit bin
    return std::optional<std::string_view>{std::string_view(o->via.str.ptr, o->via.str.size)};
  return wrong_type(key, "binary", *o);
}

result<std::optional<bool>> message::get_bool(std::string_view key) const {
  const auto* o = find(key);
  if (o == nullptr || o->type == msgpack::type::NIL) return std::optional<bool>{};
  if (o->type != msgpack::type::BOOLEAN) return wrong_type(key, "a boolean", *o);
  return std::optional<bool>{o->via.boolean};
}

result<std::optional<std::vector<std::string_view>>> message::get_str_array(
    std::string_view key) const {
  const auto* o = find(key);
  if (o == nullptr || o->type == msgpack::type::NIL)
    return std::optional<std::vector<std::string_view>>{};
  if (o->type != msgpack::type::ARRAY) return wrong_type(key, "an array of strings", *o);
  std::vector<std::string_view> out;
  out.reserve(o->via.array.size);
  for (uint32_t i = 0; i < o->via.array.size; ++i) {
    const auto& e = o->via.array.ptr[i];
    if (e.type != msgpack::type::STR) return wrong_type(key, "an array of strings", e);
    out.emplace_back(e.via.str.ptr, e.via.str.size);
  }
  return std::optional<std::vector<std::string_view>>{std::move(out)};
}

namespace {

// The body length in a frame's 4-byte header, or an error when it is out of bounds.
result<uint32_t> frame_length(const char* header) {
  const auto* p = reinterpret_cast<const unsigned char*>(header);
  uint32_t len = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  if (len == 0 || len > kMaxFrame)
    return make_error(err::bad_frame, fmt::format("frame length {} is outside 1..{}", len, kMaxFrame));
  return len;
}

}  // namespace

void frame_reader::keep(size_t n, size_t frame_end) {
  if (n == 0) return;
  if (begin_ > 0) {  // drop what was taken before growing
    kept_.erase(kept_.begin(), kept_.begin() + static_cast<ptrdiff_t>(begin_));
    frame_end -= begin_;
    begin_ = 0;
  }
  size_t need = kept_.size() + n;
  if (need > kept_.capacity())  // double as bytes arrive, but never past the frame's end
    kept_.reserve(std::max(need, std::min(2 * kept_.capacity(), frame_end)));
  kept_.insert(kept_.end(), in_, in_ + n);
  in_ += n;
  in_len_ -= n;
}

void frame_reader::keep_rest() {
  if (in_len_ > 0) keep(in_len_, kept_.size() + in_len_);
}

result<std::optional<std::string_view>> frame_reader::next_body() {
  if (begin_ == kept_.size() && begin_ > 0) {
    std::vector<char>().swap(kept_);  // the kept frame was taken: give its memory back
    begin_ = 0;
  }
  if (begin_ < kept_.size()) {
    // A frame begun in an earlier read: complete it from the bytes fed since.
    if (kept_.size() - begin_ < 4) keep(std::min(in_len_, 4 - (kept_.size() - begin_)), begin_ + 4);
    if (kept_.size() - begin_ < 4) return std::optional<std::string_view>{};
    auto len = frame_length(kept_.data() + begin_);
    if (!len) return len.err();
    // Counted from begin_, which keep() moves to 0 when it drops the frames taken before.
    size_t frame = 4 + size_t{len.value()};
    if (kept_.size() - begin_ < frame) keep(std::min(in_len_, frame - (kept_.size() - begin_)), begin_ + frame);
    if (kept_.size() - begin_ < frame) return std::optional<std::string_view>{};
    std::string_view body(kept_.data() + begin_ + 4, len.value());
    begin_ += frame;
    return std::optional<std::string_view>{body};
  }
  // Straight from the fed bytes: the common case, a read that holds whole frames.
  if (in_len_ < 4) {
    keep(in_len_, 4);
    return std::optional<std::string_view>{};
  }
  auto len = frame_length(in_);
  if (!len) return len.err();
  if (in_len_ - 4 < len.value()) {
    keep(in_len_, 4 + size_t{len.value()});
    return std::optional<std::string_view>{};
  }
  std::string_view body(in_ + 4, len.value());
  in_ += 4 + size_t{len.value()};
  in_len_ -= 4 + size_t{len.value()};
  return std::optional<std::string_view>{body};
}

error field_type_error(std::string_view key, std::string_view want, const msgpack::object& got) {
  return wrong_type(key, want, got);
}

}  // namespace sbsh::ipc
