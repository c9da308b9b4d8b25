// Every bound on what a peer can make sbsh hold in memory, in one place. man/sbsh-protocol.7
// (LIMITS) and docs/architecture.md (Invariants) say the same to users and contributors:
// keep the three in step. The frame cap itself, kMaxFrame, is part of the protocol
// (protocol.h).
//
// sbshd's memory for its clients is bounded three ways: per frame (a frame's bytes are
// buffered only as they arrive, and decoding it may cost only a small multiple of its
// size), per connection (replies queued, command text held), and overall (everything held
// for every client together, kMaxClientMemory).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ipc/protocol.h"

namespace sbsh::ipc {

// What decoding one frame may cost: msgpack objects (24 bytes each, whatever their size on
// the wire) and copies of its strings, at most `per_byte` times the frame's size plus
// `slack`. A scan of the bytes (msgpack_scan.h) checks it before anything is allocated.
struct decode_budget {
  size_t per_byte;
  size_t slack;
  [[nodiscard]] constexpr size_t of(size_t n) const { return per_byte * n + slack; }
};
// Frames that sbshd reads from its clients and wrappers: requests are mostly strings.
inline constexpr decode_budget kRequestDecode{2, 1u << 20};
// Frames read from sbshd (replies, by the client library and the wrapper) and sbshd's own
// state files: listings are many small fields, each several times its size once decoded.
inline constexpr decode_budget kReplyDecode{8, 4u << 20};
// Nesting and container sizes no message needs more of.
inline constexpr size_t kMaxDepth = 8;
inline constexpr size_t kMaxArray = 65536;
inline constexpr size_t kMaxMap = 4096;

// Per client connection of sbshd.
// Replies queued beyond this: sbshd stops reading the client's requests until they drain.
inline constexpr size_t kReplyQueuePause = 4u << 20;
// A client whose replies stay beyond kReplyQueuePause this long is dropped with an error.
inline constexpr uint64_t kStalledClientMs = 60'000;
// Replies queued beyond this (no producer should get there): the client is dropped at once.
inline constexpr size_t kReplyQueueMax = 32u << 20;
// Commands in flight on one connection, and their text.
inline constexpr size_t kMaxJobsPerClient = 256;
inline constexpr size_t kMaxTextPerClient = 32u << 20;
// What each command in flight is counted as holding besides its text.
inline constexpr size_t kJobCharge = 1024;
// A log follower (`sbsh logs -f`) whose client has this much queued is ended with an error.
inline constexpr size_t kMaxFollowerQueue = 16u << 20;
// A logs reply is read from its files while less than kLogAhead waits for the client, and at
// most kLogBurst in one turn of the loop (daemon/log_stream.h).
inline constexpr size_t kLogAhead = 1u << 20;
inline constexpr size_t kLogBurst = 4u << 20;

// Session definitions (directory, variables, init commands, limits), which sbshd keeps for
// the session's life and saves in one state file that must stay readable as one frame: each
// definition, and all of them together.
inline constexpr size_t kMaxDefinitionText = 1u << 20;
inline constexpr size_t kMaxDefinitionsText = 8u << 20;

// All clients of sbshd together: frames partly received, replies queued and command text
// held. Beyond it, the connection holding the most is dropped with an error.
inline constexpr size_t kMaxClientMemory = 64u << 20;
// Connections beyond this are refused with an error.
inline constexpr size_t kMaxClients = 4096;
// How long a refused or dropped connection is given to take its last error frame.
inline constexpr uint64_t kFarewellMs = 5000;

}  // namespace sbsh::ipc
