// sbsh input: type into a command that waits for input (exec --tty or --interactive, left
// running by --detach-after), then print its answer: what it wrote until it ended, waited for
// input again, or -t passed.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "cli/cli.h"
#include "client/json.h"
#include "ipc/fd.h"
#include "ipc/protocol.h"
#include "ipc/text.h"

namespace sbsh::cli {

namespace {

// More than this is a job for a file the command reads, not for typing.
constexpr uint64_t kMaxInput = uint64_t{256} << 20;

struct input_args {
  std::string id, file;
  std::vector<std::string> words, keys;
  bool no_enter = false, eof = false, json = false;
  std::chrono::milliseconds timeout{0};
  uint64_t output_limit = client::input_options{}.output_limit;
};

// What to type: the words joined by spaces and Enter (unless --no-enter), then each --key;
// or -f's bytes as they are.
result<std::string> what_to_type(const input_args& a, bool& typed) {
  if (!a.file.empty()) {
    if (!a.words.empty() || !a.keys.empty())
      return make_error(ipc::errc::usage, "-f sends a file's bytes as they are: give no TEXT nor --key with it");
    typed = false;
    return local_bytes("-f", a.file, kMaxInput, "sbsh input sends at once");
  }
  typed = true;
  std::string text;
  for (size_t i = 0; i < a.words.size(); ++i) text += (i > 0 ? " " : "") + a.words[i];
  if (!a.words.empty() && !a.no_enter) text += '\r';
  for (const auto& k : a.keys) {
    auto bytes = client::key_bytes(k);
    if (!bytes)
      return make_error(ipc::errc::usage,
                        fmt::format("--key {}: not a key sbsh knows; give Enter, Tab, Esc, Up, Down, Left, Right, "
                                    "Home, End, Backspace, Delete, PageUp, PageDown, Space or C-a ... C-z",
                                    k));
    text += *bytes;
  }
  if (text.empty() && !a.eof)
    return make_error(ipc::errc::usage, "nothing to type: give TEXT, --key NAME, -f FILE, or --eof");
  return text;
}

int run_input(const global_opts& g, input_args& a) {
  if (a.json) report_failures_as(failure_format::json);
  if (a.words.empty()) return fail("input needs the %ID of the command to type into (exec --detach-after printed it)");
  a.id = a.words.front();
  a.words.erase(a.words.begin());
  auto id = client::parse_command_ref(a.id);
  if (!id)
    return fail(
        fmt::format("'{}' is not a command's %ID: input goes to a command exec left running (exec "
                    "--tty or --interactive with --detach-after), as %N",
                    a.id));
  client::input_options o;
  auto text = what_to_type(a, o.typed);
  if (!text) return fail(text.err());
  o.eof = a.eof;
  o.timeout = a.timeout;
  o.output_limit = a.output_limit;
  auto conn = connect(g);
  if (!conn) return fail(conn.err());
  auto r = conn->send_input(*id, *text, o);
  if (!r) return fail(r.err());
  if (a.json) {
    print_exec_json(r->session, r->command, *r);
  } else {
    write_all(1, r->stdout_data);
    write_all(2, r->stderr_data);
  }
  if (!r->running) {
    if (!a.json) explain_result(r->session, {}, *r);
    return exec_exit_status(*r);
  }
  if (!a.json) {
    std::fflush(stdout);
    if (r->waiting_for_input)
      std::fprintf(stderr, "\nsbsh: %s waits for input again (its last line: %s)\n", a.id.c_str(),
                   ipc::printable(r->prompt, 120).c_str());
    else
      std::fprintf(stderr, "\nsbsh: %s is still running after %s\n", a.id.c_str(),
                   human_duration(static_cast<uint64_t>(a.timeout.count())).c_str());
  }
  return kExitDetached;
}

}  // namespace

runner declare_input(command_line& cl) {
  auto a = std::make_shared<input_args>();
  cl.describe(
      "Types TEXT into the command %ID that waits for input (exec --tty or --interactive, left running by "
      "--detach-after): the words joined by spaces, then Enter; then prints what it writes until it ends, waits for "
      "input again, or -t passes.");
  cl.flag("--no-enter", "type TEXT without the Enter after it", a->no_enter);
  cl.repeated(
      "--key", "NAME",
      "then send this key (repeatable, in order): Enter, Tab, Esc, Up, Down, Left, Right, Home, End, "
      "Backspace, Delete, PageUp, PageDown, Space, C-a ... C-z (C-c on a terminal is its SIGINT, C-d its end of "
      "input)",
      a->keys);
  cl.complete(value_kind::text, {"Enter", "Tab", "Esc", "Up", "Down", "Left", "Right", "Home", "End", "Backspace",
                                 "Delete", "PageUp", "PageDown", "Space", "C-c", "C-d"});
  cl.option("-f,--file", "FILE",
            "send FILE's bytes as they are (- reads stdin), of any size: fed as the command reads them, so a "
            "terminal's line limit never drops a byte",
            a->file, check_not_empty("a file, or - for stdin"));
  cl.flag("--eof", "then end its input (Ctrl-D on a terminal, the end of a pipe)", a->eof);
  cl.duration("-t,--timeout", "DURATION",
              "print what it wrote and exit 254 if it neither ends nor waits for input "
              "within DURATION (500ms, 30s, 5m, 1h, or seconds)",
              a->timeout);
  cl.flag("--json",
          "print the result as exec --json does: its output since the input, waiting_for_input, prompt, "
          "next_offset",
          a->json);
  cl.number("--output-limit", "N", "keep at most N bytes of each stream of its answer: the first and last N/2",
            a->output_limit, "a number of bytes", 0, std::numeric_limits<size_t>::max());
  // One list of words: options go before %ID, and what follows it is TEXT, as typed.
  cl.words("%ID", a->words, "%ID [TEXT...]");
  cl.complete(value_kind::text);
  cl.footer(
      "Exit status: the command's when it ended; 254 when it still runs (it waits for input again, or -t passed); "
      "255 when sbsh failed or the command takes no input (started without --interactive or --tty, or its input "
      "ended).");
  return [a](const global_opts& g) { return run_input(g, *a); };
}

}  // namespace sbsh::cli
