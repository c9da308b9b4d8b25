// ipc/frame.cpp: round trips, the size cap, and defensive decoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "ipc/frame.h"

namespace sbsh::ipc::frame_tests {

result<message> decode(std::string_view frame) {
  frame_reader r;
  r.feed(frame.data(), frame.size());
  auto body = r.next_body();
  if (!body) return body.err();
  if (!body.value()) return make_error("more", "incomplete");
  return message::parse(body.value()->data(), body.value()->size());
}

TEST(frame, RoundTripsEveryFieldKind) {
  frame_builder f(msg_type::exec, 42);
  f.u64("u", 1ull << 40).i64("i", -5).str("s", "héllo").bin("b", "a\0b", 3).boolean("t", true).nil("n");
  f.str_array("arr", {"x", "y"});
  auto m = decode(f.take());
  ASSERT_TRUE(m.ok()) << m.err().message;
  EXPECT_EQ(m->type(), msg_type::exec);
  EXPECT_EQ(m->id(), 42u);
  EXPECT_EQ(*m->get_u64("u").value(), 1ull << 40);
  EXPECT_EQ(*m->get_i64("i").value(), -5);
  EXPECT_EQ(*m->get_str("s").value(), "héllo");
  EXPECT_EQ(*m->get_bin("b").value(), std::string_view("a\0b", 3));
  EXPECT_TRUE(*m->get_bool("t").value());
  EXPECT_TRUE(m->is_nil("n"));
  EXPECT_EQ(m->get_str_array("arr").value()->size(), 2u);
  EXPECT_FALSE(m->get_u64("absent").value().has_value());
}

TEST(frame, ManyFieldsUseTheRightMapHeader) {
  frame_builder f(msg_type::status, 1);
  for (int i = 0; i < 40; ++i) f.u64("k" + std::to_string(i), static_cast<uint64_t>(i));
  auto m = decode(f.take());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m->get_u64("k39").value(), 39u);
}

TEST(frame, WrongTypesNameTheField) {
  frame_builder f(msg_type::exec, 1);
  f.u64("command", 3);
  auto m = decode(f.take());
  ASSERT_TRUE(m.ok());
  auto s = m->get_str("command");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.err().message, "field 'command' must be a string, not an integer");
}

TEST(frame, LengthIsCheckedBeforeAnythingIsBuffered) {
  frame_reader r;
  r.feed("\x7f\xff\xff\xff", 4);
  auto b = r.next_body();
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.err().message.find("outside"), std::string::npos);
  EXPECT_LT(r.held(), 64u);
}

TEST(frame, PartialFramesWait) {
  frame_builder f(msg_type::ok, 7);
  std::string bytes = f.take();
  frame_reader r;
  for (size_t i = 0; i + 1 < bytes.size(); ++i) {
    r.feed(&bytes[i], 1);
    auto b = r.next_body();
    ASSERT_TRUE(b.ok());
    EXPECT_FALSE(b.value().has_value());
  }
  r.feed(&bytes.back(), 1);
  auto b = r.next_body();
  ASSERT_TRUE(b.ok() && b.value().has_value());
}

// A header announcing the largest frame costs nothing until the bytes come, the buffer grows
// with them, and it is given back once the frame has been taken.
TEST(frame, MemoryFollowsTheBytesThatArrivedNotTheHeader) {
  std::string body(kMaxFrame - 64, 'x');
  frame_builder f(msg_type::exec, 1);
  f.str("command", body);
  std::string bytes = f.take();
  ASSERT_LE(bytes.size() - 4, kMaxFrame);
  frame_reader r;
  r.feed(bytes.data(), 4);
  ASSERT_FALSE(r.next_body().value().has_value());
  EXPECT_LT(r.held(), 64u);
  size_t off = 4;
  for (size_t chunk = size_t{64} * 1024; off < bytes.size(); off += chunk) {
    size_t n = std::min(chunk, bytes.size() - off);
    r.feed(bytes.data() + off, n);
    auto b = r.next_body();
    ASSERT_TRUE(b.ok());
    if (off + n < bytes.size()) {
      ASSERT_FALSE(b.value().has_value());
      // Never more than twice what arrived, never more than the frame.
      EXPECT_LE(r.held(), 2 * (off + n) + 64) << off;
      EXPECT_LE(r.held(), bytes.size() + 64) << off;
    } else {
      ASSERT_TRUE(b.value().has_value());
      EXPECT_EQ(b.value()->size(), bytes.size() - 4);
    }
  }
  r.feed("", 0);
  EXPECT_FALSE(r.next_body().value().has_value());
  EXPECT_LT(r.held(), 64u);  // the frame's memory went with it
}

// Frames cut at every possible place, fed in reads of every size, come out whole and in
// order, whether taken at once or kept (keep_rest) while the reader is paused.
TEST(frame, FramesSurviveAnySplitAndPause) {
  std::string stream;
  for (int i = 1; i <= 20; ++i) {
    frame_builder f(msg_type::output, static_cast<uint64_t>(i));
    f.bin("data", std::string(static_cast<size_t>(i) * 37, static_cast<char>('a' + i % 26)).data(),
          static_cast<size_t>(i) * 37);
    stream += f.take();
  }
  for (size_t read = 1; read <= 97; read += 8) {
    for (int pause_every : {0, 3}) {
      frame_reader r;
      std::vector<uint64_t> ids;
      for (size_t off = 0; off < stream.size(); off += read) {
        std::string chunk = stream.substr(off, read);  // gone after this iteration
        r.feed(chunk.data(), chunk.size());
        for (int taken = 0;; ++taken) {
          if (pause_every != 0 && taken == pause_every) {
            r.keep_rest();
            break;
          }
          auto b = r.next_body();
          ASSERT_TRUE(b.ok());
          if (!b.value()) break;
          auto m = message::parse(b.value()->data(), b.value()->size());
          ASSERT_TRUE(m.ok()) << m.err().message;
          ids.push_back(m->id());
        }
      }
      r.feed("", 0);
      while (auto b = r.next_body().value()) ids.push_back(message::parse(b->data(), b->size())->id());
      ASSERT_EQ(ids.size(), 20u) << read << " " << pause_every;
      for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], i + 1);
    }
  }
}

// A pause can keep a whole frame and part of the next. Once the whole one is taken, the
// bytes that complete the other may arrive with more frames behind them: all come out.
TEST(frame, AFrameBegunBehindAKeptOneIsCompletedAndWhatFollowsKept) {
  std::string frames[4];
  for (uint64_t i = 0; i < 4; ++i) {
    frame_builder f(msg_type::output, i + 1);
    f.bin("data", std::string(40, 'x').data(), 40);
    frames[i] = f.take();
  }
  std::string first = frames[0] + frames[1] + frames[2].substr(0, 10);
  std::string second = frames[2].substr(10) + frames[3];
  frame_reader r;
  std::vector<uint64_t> ids;
  auto take = [&] {
    auto b = r.next_body();
    EXPECT_TRUE(b.ok());
    if (!b.ok() || !b.value()) return false;
    ids.push_back(message::parse(b.value()->data(), b.value()->size())->id());
    return true;
  };
  r.feed(first.data(), first.size());
  ASSERT_TRUE(take());
  r.keep_rest();  // paused: the second frame and the third's beginning are kept
  r.feed(second.data(), second.size());
  while (take()) {
  }
  r.feed("", 0);
  while (take()) {
  }
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(r.buffered(), 0u);
}

TEST(frame, GarbageIsAnErrorNeverACrash) {
  EXPECT_FALSE(message::parse("\x93\x01\x02\x03", 4).ok());      // array
  EXPECT_FALSE(message::parse("\x81\x01\x02", 3).ok());          // non-string key
  EXPECT_FALSE(message::parse("\xc1", 1).ok());                  // reserved byte
  EXPECT_FALSE(message::parse("\x81\xa1x\xdd\xff\xff\xff\xff", 8).ok());  // 4G-element array
  EXPECT_FALSE(message::parse("\x80", 1).ok());                  // map without type
  std::mt19937 rng(1234);
  for (int i = 0; i < 20000; ++i) {
    std::string junk(rng() % 64, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    (void)message::parse(junk.data(), junk.size());
  }
}

}  // namespace sbsh::ipc::frame_tests
