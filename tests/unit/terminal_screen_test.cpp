// The terminal emulator behind exec --tty: what the screen shows, and the answers to what a
// program asks its terminal.
#include "daemon/terminal_screen.h"

#include <gtest/gtest.h>

namespace sbsh::test::terminal_screen_tests {

using daemon::terminal_screen;

TEST(terminal_screen, ShowsWhatAPersonWouldSee) {
  terminal_screen s(80, 24);
  EXPECT_EQ(s.text(), "");
  EXPECT_EQ(s.feed("hello\r\nworld   \r\n"), "");
  EXPECT_EQ(s.text(), "hello\nworld\n");
  // A carriage return overwrites, colours leave no trace, and the screen is cleared.
  s.feed("\x1b[2J\x1b[Hprogress 10%\rprogress 100%\r\n\x1b[31mred\x1b[0m done");
  EXPECT_EQ(s.text(), "progress 100%\nred done\n");
  // UTF-8 stays whole.
  s.feed("\r\nna\xc3\xafve \xe2\x9c\x93");
  EXPECT_EQ(s.text(), "progress 100%\nred done\nna\xc3\xafve \xe2\x9c\x93\n");
}

TEST(terminal_screen, KeepsOnlyWhatFitsItsSize) {
  terminal_screen s(10, 3);
  s.feed("0123456789abc\r\nline2\r\nline3\r\nline4");
  // Wrapped at 10 columns, and scrolled: the first rows are gone.
  EXPECT_EQ(s.text(), "line2\nline3\nline4\n");
}

TEST(terminal_screen, AnswersWhatAProgramAsksItsTerminal) {
  terminal_screen s(80, 24);
  // The cursor's position (DSR 6), where the output left it.
  EXPECT_EQ(s.feed("\x1b[6n"), "\x1b[1;1R");
  EXPECT_EQ(s.feed("ab\r\ncde\x1b[6n"), "\x1b[2;4R");
  // The device's attributes (DA) and status (DSR 5): a VT100-like terminal, in good order.
  std::string da = s.feed("\x1b[c");
  EXPECT_TRUE(da.starts_with("\x1b[?")) << da;
  EXPECT_TRUE(da.ends_with("c")) << da;
  EXPECT_EQ(s.feed("\x1b[5n"), "\x1b[0n");
  // Its colours (OSC 10 and 11).
  EXPECT_EQ(s.feed("\x1b]11;?\x07"), "\x1b]11;rgb:0000/0000/0000\x1b\\");
  EXPECT_EQ(s.feed("\x1b]10;?\x1b\\"), "\x1b]10;rgb:e5e5/e5e5/e5e5\x1b\\");
  // A query split across two reads is answered once it is whole; output without one, never.
  EXPECT_EQ(s.feed("\x1b["), "");
  EXPECT_EQ(s.feed("6n"), "\x1b[2;4R");
  EXPECT_EQ(s.feed("plain text\r\n"), "");
}

}  // namespace sbsh::test::terminal_screen_tests
