// A walk over msgpack bytes that allocates nothing, run before the decoder: it checks that
// the bytes hold exactly one well-formed value within the protocol's nesting and container
// limits, and says what decoding them with msgpack-cxx would cost.
//
// Why: msgpack-cxx allocates a container's elements when it reads the container's header,
// 24 bytes each, so a 3-byte header announcing 65535 elements costs 1.5 MiB before any
// element is seen, and a 16 MiB frame of nils costs 400 MiB once decoded. The walk refuses a
// container whose elements cannot fit in the bytes left, and message::parse refuses a frame
// whose decoding would cost more than its budget (bounds.h), before the decoder runs.
#pragma once

#include <cstddef>
#include <string_view>

#include "ipc/result.h"

namespace sbsh::ipc {

// The bytes msgpack-cxx would allocate to decode `bytes` (objects and copied strings), or an
// error (code bad_frame) that says what is wrong with them.
result<size_t> msgpack_decoded_size(std::string_view bytes);

}  // namespace sbsh::ipc
