// ipc/frame.cpp: round trips, the size cap, and defensive decoding.
#include <gtest/gtest.h>

#include <random>

#include "ipc/frame.h"

namespace sbsh::ipc {
namespace {

result<message> decode(std::string_view frame) {
  frame_reader r;
  size_t room;
  char* p = r.prepare(frame.size(), &room);
  std::memcpy(p, frame.data(), frame.size());
  r.commit(frame.size());
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
  size_t room;
  char* p = r.prepare(4, &room);
  std::memcpy(p, "\x7f\xff\xff\xff", 4);
  r.commit(4);
  auto b = r.next_body();
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.err().message.find("outside"), std::string::npos);
  EXPECT_LT(r.buffered(), 64u);
}

TEST(frame, PartialFramesWait) {
  frame_builder f(msg_type::ok, 7);
  std::string bytes = f.take();
  frame_reader r;
  size_t room;
  for (size_t i = 0; i + 1 < bytes.size(); ++i) {
    char* p = r.prepare(1, &room);
    *p = bytes[i];
    r.commit(1);
    auto b = r.next_body();
    ASSERT_TRUE(b.ok());
    EXPECT_FALSE(b.value().has_value());
  }
  char* p = r.prepare(1, &room);
  *p = bytes.back();
  r.commit(1);
  auto b = r.next_body();
  ASSERT_TRUE(b.ok() && b.value().has_value());
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

}  // namespace
}  // namespace sbsh::ipc
