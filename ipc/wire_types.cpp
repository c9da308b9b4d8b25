// The non-template half of wire_types.h: the decoder's errors and paths, and map keys.
#include "ipc/wire_types.h"

#include <fmt/format.h>

#include "ipc/protocol.h"

namespace sbsh::ipc {

void pack_key(wire_packer& pk, std::string_view key) { pk.pack_text(key); }

std::string decoder::path() const {
  std::string p;
  for (size_t i = 0; i < std::min(depth_, segs_.size()); ++i) {
    const auto& s = segs_[i];
    if (s.key.empty()) {
      p += fmt::format("[{}]", s.index);
    } else {
      if (!p.empty()) p += '.';
      p += s.key;
    }
  }
  return p;
}

bool decoder::wrong_type(std::string_view want, const msgpack::object& got) {
  if (!failed_) err_ = field_type_error(path(), want, got);
  failed_ = true;
  return false;
}

bool decoder::missing(std::string_view want) {
  return fail(fmt::format("{} needs '{}', {}", what_, path(), want));
}

bool decoder::fail(std::string message) {
  if (!failed_) err_ = make_error(errc::bad_request, std::move(message));
  failed_ = true;
  return false;
}

}  // namespace sbsh::ipc
