// ipc/msgpack_scan.cpp: the walk that refuses costly or malformed msgpack before decoding,
// and message::parse's decode budget built on it.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "ipc/bounds.h"
#include "ipc/frame.h"
#include "ipc/msgpack_scan.h"

namespace sbsh::ipc::msgpack_scan_tests {

std::string body_of(frame_builder& f) { return f.take().substr(4); }

std::string error_of(std::string_view bytes) {
  auto r = msgpack_decoded_size(bytes);
  return r ? std::string() : r.err().message;
}

TEST(msgpack_scan, CountsWhatTheDecoderAllocates) {
  // {"type": 300} : the root, one key-value pair, the key's 4 bytes.
  frame_builder f(msg_type::exec);
  auto cost = msgpack_decoded_size(body_of(f));
  ASSERT_TRUE(cost.ok()) << cost.err().message;
  EXPECT_EQ(cost.value(), sizeof(msgpack::object) + sizeof(msgpack::object_kv) + 4);
  // Strings are copied: a long command costs about its length.
  frame_builder g(msg_type::exec, 1);
  g.str("command", std::string(100000, 'x')).str_array("env", {"A=1", "B=2"});
  cost = msgpack_decoded_size(body_of(g));
  ASSERT_TRUE(cost.ok());
  EXPECT_GT(cost.value(), 100000u);
  EXPECT_LT(cost.value(), 101000u);
}

TEST(msgpack_scan, RefusesMalformedBytesAndSaysWhy) {
  EXPECT_NE(error_of(std::string("\x81\xa1x", 3)).find("ends inside"), std::string::npos);
  EXPECT_NE(error_of(std::string("\x80\x01", 2)).find("bytes after"), std::string::npos);
  EXPECT_NE(error_of(std::string("\x81\xa1x\xc1", 4)).find("reserved"), std::string::npos);
  EXPECT_NE(error_of(std::string("\x81\xa1x\xd4\x01\x02", 6)).find("extension"), std::string::npos);
  // A header that announces more elements than there are bytes left is refused at once.
  EXPECT_NE(error_of(std::string("\x81\xa1x\xdd\x00\x00\xff\xff\xc0", 9)).find("ends inside"), std::string::npos);
  std::string deep = "\x81\xa1x";
  for (int i = 0; i < 8; ++i) deep += "\x91";
  deep += "\xc0";
  EXPECT_NE(error_of(deep).find("deeper than 8"), std::string::npos);
  std::string wide("\x81\xa1x\xdd\x00\x01\x00\x01", 8);
  wide.append(65537, '\xc0');
  EXPECT_NE(error_of(wide).find("at most 65536"), std::string::npos);
}

TEST(msgpack_scan, NestingUpToTheLimitIsFine) {
  std::string ok = "\x81\xa1x";
  for (int i = 0; i < 7; ++i) ok += "\x91";
  ok += "\xc0";
  EXPECT_EQ(error_of(ok), "");
}

// A frame of nils costs 24 bytes per byte once decoded: refused by the budget of requests
// before the decoder runs, accepted by a budget that allows it.
TEST(msgpack_scan, ParseRefusesFramesOverTheirDecodeBudget) {
  std::string body("\x82\xa4type\xcd\x01\x90\xa1x\xdc\x00\x10", 14);
  for (int i = 0; i < 16; ++i) {
    body += "\xdc\xff\xff";
    body.append(65535, '\xc0');
  }
  auto m = message::parse(body.data(), body.size(), kRequestDecode);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.err().code, "bad_frame");
  EXPECT_NE(m.err().message.find("to decode"), std::string::npos) << m.err().message;
  EXPECT_TRUE(message::parse(body.data(), body.size(), decode_budget{32, 0}).ok());
}

// On random bytes the walk and msgpack-cxx agree on what is acceptable, so the walk never
// lets through what the decoder would choke on, nor refuses what it would take.
TEST(msgpack_scan, AgreesWithTheDecoderOnRandomBytes) {
  std::mt19937 rng(4321);
  const std::string alphabet("\x80\x81\x82\x90\x91\x92\xa0\xa1\xa3\xc0\xc2\xc3\xc4\xcc\xcd\xd0\xd9\xdc\xde\x01\x7f\xff"
                             "\xca\xcb\x00\x02",
                             26);
  int accepted = 0;
  // Under the sanitizers, where each round costs thirty times as much, the first eighth of
  // the same rounds (the frames fuzzer walks this code under them for longer).
#ifdef SBSH_SANITIZED
  const int rounds = 25000;
#else
  const int rounds = 200000;
#endif
  for (int i = 0; i < rounds; ++i) {
    std::string bytes(rng() % 24, '\0');
    for (auto& c : bytes) c = rng() % 3 == 0 ? static_cast<char>(rng()) : alphabet[rng() % alphabet.size()];
    bool walk = msgpack_decoded_size(bytes).ok();
    bool decoder = true;
    try {
      size_t off = 0;
      auto h = msgpack::unpack(bytes.data(), bytes.size(), off, nullptr, nullptr,
                               msgpack::unpack_limit(kMaxArray, kMaxMap, kMaxFrame, kMaxFrame, 0, kMaxDepth));
      decoder = off == bytes.size();
    } catch (const std::exception&) {
      decoder = false;
    }
    ASSERT_EQ(walk, decoder) << testing::PrintToString(bytes);
    accepted += walk ? 1 : 0;
  }
  EXPECT_GT(accepted, rounds / 200);  // the comparison saw both answers
}

}  // namespace sbsh::ipc::msgpack_scan_tests
