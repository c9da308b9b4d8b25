// The allocation-free msgpack walk; see msgpack_scan.h. The format is msgpack's spec
// (github.com/msgpack/msgpack/blob/master/spec.md): one type byte, then for most types a
// big-endian length or value of 1, 2, 4 or 8 bytes.
#include "ipc/msgpack_scan.h"

#include <msgpack.hpp>

#include <array>
#include <cstdint>

#include <fmt/format.h>

#include "ipc/bounds.h"

namespace sbsh::ipc {

namespace {

enum class kind { scalar, str, ext, array, map, reserved };

struct head {
  kind k = kind::scalar;
  size_t extra = 0;    // bytes after the type byte that hold a length (str, ext, containers)
  size_t fixed = 0;    // bytes after the type byte that hold the value (scalars, fixext data)
  uint32_t small = 0;  // the length held in the type byte itself (fix types)
};

head head_of(uint8_t b) {
  if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) return {};
  if (b <= 0x8f) return {kind::map, 0, 0, b & 0x0fu};
  if (b <= 0x9f) return {kind::array, 0, 0, b & 0x0fu};
  if (b <= 0xbf) return {kind::str, 0, 0, b & 0x1fu};
  switch (b) {
    case 0xc4: return {kind::str, 1};  // bin: decoded as a str is
    case 0xc5: return {kind::str, 2};
    case 0xc6: return {kind::str, 4};
    case 0xc7: return {kind::ext, 1};
    case 0xc8: return {kind::ext, 2};
    case 0xc9: return {kind::ext, 4};
    case 0xca: return {kind::scalar, 0, 4};
    case 0xcb: return {kind::scalar, 0, 8};
    case 0xcc: case 0xd0: return {kind::scalar, 0, 1};
    case 0xcd: case 0xd1: return {kind::scalar, 0, 2};
    case 0xce: case 0xd2: return {kind::scalar, 0, 4};
    case 0xcf: case 0xd3: return {kind::scalar, 0, 8};
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: return {kind::ext};
    case 0xd9: return {kind::str, 1};
    case 0xda: return {kind::str, 2};
    case 0xdb: return {kind::str, 4};
    case 0xdc: return {kind::array, 2};
    case 0xdd: return {kind::array, 4};
    case 0xde: return {kind::map, 2};
    case 0xdf: return {kind::map, 4};
    default: return {kind::reserved};  // 0xc1
  }
}

error bad(std::string message) { return make_error(errc::bad_frame, std::move(message)); }

}  // namespace

result<size_t> msgpack_decoded_size(std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t pos = 0;
  size_t cost = sizeof(msgpack::object);  // the root
  // left[d]: values still to read in the container opened at depth d (depth 0: the root).
  std::array<uint64_t, kMaxDepth + 1> left{};
  size_t depth = 0;
  left[0] = 1;
  auto truncated = [&] { return bad(fmt::format("frame ends inside a msgpack value (at byte {})", pos)); };
  for (;;) {
    while (depth > 0 && left[depth] == 0) --depth;
    if (left[depth] == 0) break;
    --left[depth];
    if (pos >= n) return truncated();
    uint8_t b = p[pos++];
    head h = head_of(b);
    if (h.k == kind::reserved) return bad(fmt::format("frame is not msgpack: byte 0x{:02x} at {} is reserved", b, pos - 1));
    if (h.k == kind::ext) return bad("frame holds a msgpack extension type, which the protocol never uses");
    if (n - pos < h.extra + h.fixed) return truncated();
    uint64_t len = h.small;
    if (h.extra > 0) {
      len = 0;
      for (size_t i = 0; i < h.extra; ++i) len = (len << 8) | p[pos + i];
    }
    pos += h.extra + h.fixed;
    if (h.k == kind::str) {
      if (len > n - pos) return truncated();
      pos += len;
      cost += len;
      continue;
    }
    if (h.k != kind::array && h.k != kind::map) continue;
    bool map = h.k == kind::map;
    if (depth + 1 > kMaxDepth) return bad(fmt::format("frame nests containers deeper than {} levels", kMaxDepth));
    if (len > (map ? kMaxMap : kMaxArray))
      return bad(fmt::format("frame holds a {} of {} {}; at most {} are allowed", map ? "map" : "array", len,
                             map ? "entries" : "elements", map ? kMaxMap : kMaxArray));
    // Every element takes at least one byte: refuse a header its bytes cannot back.
    uint64_t values = map ? 2 * len : len;
    if (values > n - pos) return truncated();
    cost += len * (map ? sizeof(msgpack::object_kv) : sizeof(msgpack::object));
    left[++depth] = values;
  }
  if (pos != n) return bad("frame has bytes after its msgpack map");
  return cost;
}

}  // namespace sbsh::ipc
