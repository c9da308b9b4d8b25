// What a person at a command's terminal would see (exec --tty): its output fed through a
// terminal emulator (libvterm), which also answers what a program asks its terminal (the
// cursor's position, the device's attributes, its colours) as a terminal would, so that a
// program that asks never waits for an answer that does not come.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

struct VTerm;
struct VTermScreen;

namespace sbsh::daemon {

class terminal_screen {
 public:
  terminal_screen(uint16_t cols, uint16_t rows);
  ~terminal_screen();
  terminal_screen(const terminal_screen&) = delete;
  terminal_screen& operator=(const terminal_screen&) = delete;

  // Takes output as the terminal would show it; returns what the terminal answers to the
  // queries in it (to be written to the terminal's master), mostly nothing.
  std::string feed(std::string_view output);

  // The screen as text, in UTF-8: each row without its trailing blanks, rows ending in "\n",
  // the empty rows at the bottom left out.
  [[nodiscard]] std::string text() const;

 private:
  static void on_output(const char* s, size_t len, void* self);
  static int on_osc(const char* command, size_t len, void* self);

  VTerm* vt_;
  VTermScreen* screen_;
  std::string answers_;  // gathered during one feed()
};

}  // namespace sbsh::daemon
