#include "daemon/terminal_screen.h"

#include <vterm.h>

#include <vector>

namespace sbsh::daemon {

terminal_screen::terminal_screen(uint16_t cols, uint16_t rows)
    : vt_(vterm_new(rows > 0 ? rows : 24, cols > 0 ? cols : 80)), screen_(vterm_obtain_screen(vt_)) {
  vterm_set_utf8(vt_, 1);
  vterm_output_set_callback(vt_, &terminal_screen::on_output, this);
  vterm_screen_reset(screen_, 1);
  // Beyond what libvterm answers (DSR, DA): the colour queries (OSC 10 and 11 with "?").
  static const VTermParserCallbacks fallbacks = [] {
    VTermParserCallbacks c{};
    c.osc = &terminal_screen::on_osc;
    return c;
  }();
  vterm_screen_set_unrecognised_fallbacks(screen_, &fallbacks, this);
}

terminal_screen::~terminal_screen() { vterm_free(vt_); }

void terminal_screen::on_output(const char* s, size_t len, void* self) {
  static_cast<terminal_screen*>(self)->answers_.append(s, len);
}

// Answered as a terminal with light text on a black background does.
int terminal_screen::on_osc(const char* command, size_t len, void* self) {
  std::string_view c(command, len);
  auto* t = static_cast<terminal_screen*>(self);
  if (c == "10;?") t->answers_ += "\x1b]10;rgb:e5e5/e5e5/e5e5\x1b\\";
  else if (c == "11;?") t->answers_ += "\x1b]11;rgb:0000/0000/0000\x1b\\";
  else return 0;
  return 1;
}

std::string terminal_screen::feed(std::string_view output) {
  answers_.clear();
  if (!output.empty()) vterm_input_write(vt_, output.data(), output.size());
  return std::move(answers_);
}

std::string terminal_screen::text() const {
  int rows = 0, cols = 0;
  vterm_get_size(vt_, &rows, &cols);
  std::string out;
  size_t kept = 0;  // out's size up to the last row that is not empty
  std::vector<char> row(static_cast<size_t>(cols) * 4 + 1);
  for (int r = 0; r < rows; ++r) {
    VTermRect rect{r, r + 1, 0, cols};
    size_t n = vterm_screen_get_text(screen_, row.data(), row.size(), rect);
    std::string_view line(row.data(), n);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\0')) line.remove_suffix(1);
    out.append(line);
    out += '\n';
    if (!line.empty()) kept = out.size();
  }
  out.resize(kept);
  return out;
}

}  // namespace sbsh::daemon
