// Frames: the one codec used on every sbsh link.
//
// Grammar (all integers big-endian):
//   frame   = length:u32 body
//   body    = msgpack map, 1 <= length <= kMaxFrame
//   map     = { "type": uint, ["id": uint], field... }   keys are msgpack str
// The length is checked against kMaxFrame as soon as the header is read, and a frame's bytes
// are buffered only as they arrive, so a header alone costs nothing. Before the msgpack
// decoder runs, a walk over the bytes (msgpack_scan.h) checks nesting and container sizes and
// what decoding would cost, against a budget of a small multiple of the frame's size
// (bounds.h). Unknown fields are ignored; a known field of the wrong type is an error that
// names the field.
#pragma once

#include <msgpack.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/bounds.h"
#include "ipc/protocol.h"
#include "ipc/result.h"

namespace sbsh::ipc {

// How a frame carries text. msgpack's str holds UTF-8, and a strict decoder (Python's
// msgpack, say) refuses a whole frame for one str that is not: so every frame sbshd sends a
// client has every str valid UTF-8 (bytes that are not replaced by U+FFFD; a field whose
// exact bytes matter has them beside it in a bin field, see wire.h's bytes_of). Frames
// between sbshd and its wrappers, its state files and clients' requests carry text exactly.
enum class text_rule { exact, utf8 };

class frame_builder;

// The packer a frame's fields are written with: msgpack's, plus pack_text(), which packs a
// str under the frame's text rule. Every str of the schema goes through it.
class wire_packer : public msgpack::packer<frame_builder> {
 public:
  explicit wire_packer(frame_builder& fb) : msgpack::packer<frame_builder>(fb), fb_(fb) {}
  wire_packer& pack_text(std::string_view s);

 private:
  frame_builder& fb_;
};

// Builds one frame in place: body first, then the map and length headers are written into
// reserved headroom, so finishing never copies the body.
class frame_builder {
 public:
  explicit frame_builder(msg_type type, uint64_t id = 0, text_rule rule = text_rule::exact);

  frame_builder& u64(std::string_view key, uint64_t v);
  frame_builder& i64(std::string_view key, int64_t v);
  frame_builder& str(std::string_view key, std::string_view v);
  frame_builder& bin(std::string_view key, const void* data, size_t n);
  frame_builder& boolean(std::string_view key, bool v);
  frame_builder& nil(std::string_view key);
  frame_builder& str_array(std::string_view key, const std::vector<std::string>& v);
  // For nested values: packs the key, counts the field, and returns the packer for the value.
  wire_packer& field(std::string_view key);
  [[nodiscard]] text_rule rule() const { return rule_; }

  // The finished frame (length prefix included). The builder must not be used afterwards.
  [[nodiscard]] std::string_view finish();
  [[nodiscard]] std::string take();

  // msgpack::packer's sink.
  void write(const char* p, size_t n) { buf_.append(p, n); }

 private:
  static constexpr size_t kHeadroom = 4 + 1;  // u32 length + a fixmap header (see finish())
  std::string buf_;
  wire_packer pk_;
  text_rule rule_;
  uint32_t fields_ = 0;
  bool finished_ = false;
};

// One decoded message: a msgpack map with typed accessors.
class message {
 public:
  message() = default;
  // Refuses (bad_frame) a body whose decoding would cost more than `budget` allows.
  static result<message> parse(const char* data, size_t n, decode_budget budget = kReplyDecode);

  [[nodiscard]] msg_type type() const { return type_; }
  [[nodiscard]] uint64_t id() const { return id_; }
  [[nodiscard]] const msgpack::object* find(std::string_view key) const;
  // Every entry of the map, in order ("type" and "id" included).
  [[nodiscard]] const std::vector<std::pair<std::string_view, const msgpack::object*>>& fields() const {
    return fields_;
  }

  // Each getter: absent -> nullopt (or the default), present with the wrong type -> error
  // naming the field.
  result<std::optional<uint64_t>> get_u64(std::string_view key) const;
  result<std::optional<int64_t>> get_i64(std::string_view key) const;
  result<std::optional<std::string_view>> get_str(std::string_view key) const;
  result<std::optional<std::string_view>> get_bin(std::string_view key) const;
  result<std::optional<bool>> get_bool(std::string_view key) const;
  result<std::optional<std::vector<std::string_view>>> get_str_array(std::string_view key) const;
  // True when the key is present and nil.
  [[nodiscard]] bool is_nil(std::string_view key) const;

 private:
  std::shared_ptr<msgpack::object_handle> handle_;
  std::vector<std::pair<std::string_view, const msgpack::object*>> fields_;
  msg_type type_{};
  uint64_t id_ = 0;
};

// Cuts a byte stream into frames. The caller reads into a buffer of its own and hands the
// bytes over (feed); whole frames among them are returned without a copy, and only the bytes
// of a frame still incomplete are kept, in a buffer that grows with what has arrived (never
// with what a header announces) and is freed once that frame has been taken.
class frame_reader {
 public:
  // Offers bytes just read; they must stay valid until next_body() has returned nullopt or
  // keep_rest() was called, and only then may more be fed.
  void feed(const char* data, size_t n) {
    in_ = data;
    in_len_ = n;
  }
  // The next whole frame's body, valid until the next call of any method; nullopt when more
  // bytes are needed (what was fed is then kept); error when the stream is corrupt (the
  // connection must then be closed: framing is lost).
  result<std::optional<std::string_view>> next_body();
  // Keeps what was fed and not taken yet, before the caller's buffer is reused (a caller that
  // stops taking frames, to apply backpressure, calls this).
  void keep_rest();
  // Bytes received and not yet taken as frames.
  [[nodiscard]] size_t buffered() const { return kept_.size() - begin_ + in_len_; }
  // Memory this reader holds (its buffer's capacity).
  [[nodiscard]] size_t held() const { return kept_.capacity(); }

 private:
  // Moves up to `n` fed bytes to the end of kept_, growing it at most to `frame_end`.
  void keep(size_t n, size_t frame_end);
  // An incomplete frame (or, after keep_rest, frames not taken yet). A vector, whose
  // reserve() is exact: a string's would round up to twice its capacity.
  std::vector<char> kept_;
  size_t begin_ = 0;  // where kept_'s first frame not taken yet starts
  const char* in_ = nullptr;
  size_t in_len_ = 0;
};

// "field 'KEY' must be WANT, not <what GOT is>": the error of a field of the wrong type.
error field_type_error(std::string_view key, std::string_view want, const msgpack::object& got);

}  // namespace sbsh::ipc
