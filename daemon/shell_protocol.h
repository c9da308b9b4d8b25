// The shell side of the exec path: what sbshd writes to a session's bash, and what bash
// writes back. One definition serves the daemon and the benchmark that measures this
// protocol on its own (bench/sbsh_bench.cpp, the "floor" rows).
//
// For each command the owner of the slots (sbshd) stores the text in the text slot, points
// the in/out/err slots at the command's pipes, and writes kRunLine to bash's stdin. bash
// opens the slots through the shell's link directory, whose links point at
// /proc/<owner>/fd/<n>, evaluates the text at its top level, and prints a status line
// ("\037<status>\n") to its own stdout, the status pipe.
//
// bash's start-up script names the link directory, never the owner: a new sbshd that takes
// over a running shell (adoption, after sbshd restarted) points the links at slots of its
// own, and the shell goes on without noticing.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ipc/fd.h"
#include "ipc/result.h"

namespace sbsh::daemon {

// Descriptor numbers in the owner's process through which bash reaches a command's text
// and I/O.
struct shell_slots {
  pid_t owner = 0;
  int text = -1;
  int in = -1;
  int out = -1;
  int err = -1;
};

// The links in a shell's link directory, one per slot.
inline constexpr const char* kLinkNames[] = {"t", "i", "o", "e"};

// Points the links in `dir` (created 0700 if missing) at the slots of `s.owner`, each link
// replaced atomically. Returns why it could not.
[[nodiscard]] status point_links(const std::string& dir, const shell_slots& s);
// Removes the links of `dir`, `also` (a name in it, or nullptr), and `dir` itself when it is
// then empty.
void remove_links(const std::string& dir, const char* also = nullptr);

// What sbshd holds of one bash: the slots (fixed descriptor numbers in sbshd that bash
// opens through the links in `dir`) and sbshd's ends of bash's two pipes.
struct shell_link {
  std::string dir;     // the link directory, one per start of a shell
  unique_fd text;      // memfd with the command text
  unique_fd init;      // memfd with the shell's start-up script
  unique_fd in, out, err;
  unique_fd script_w;  // bash's stdin: the lines it runs
  unique_fd status_r;  // bash's stdout between commands: the status lines

  // The slots, in, out and err pointing at `devnull`; `label` names the memfds.
  static shell_link with_slots(int devnull, const std::string& label);
  [[nodiscard]] shell_slots slots(pid_t owner) const {
    return {owner, text.get(), in.get(), out.get(), err.get()};
  }
};

// Makes bash's two pipes for `link` (replacing any earlier ones), points the links in
// `link.dir` at its slots, and queues the line that makes bash source its start-up script,
// written to the init slot. Returns bash's ends (the
// script pipe's read end, the status pipe's write end), for its wrapper, or why it could
// not.
[[nodiscard]] result<std::pair<unique_fd, unique_fd>> open_shell(shell_link& link, pid_t owner);

// The constant lines written to bash for every command: run it, then report its status.
// bash reads its script input one byte per read() call (about 0.2 us a byte), so they are
// kept short and the command text travels in bulk through the text slot instead. The first
// gives the command /dev/null as stdin; the second, the in slot (the caller sends input).
// `\builtin eval`: the backslash keeps a user's alias out, and `builtin` a user's function
// named eval (bash looks functions up before builtins, even special ones, outside POSIX mode).
// A function named `builtin` itself still defeats every line; nothing but POSIX mode could
// stop that, and POSIX mode would change the semantics of the user's commands.
inline constexpr std::string_view kRunLine =
    "\\builtin eval \"$__sbsh_x\"\n\\builtin eval \"$__sbsh_y\"\n";
inline constexpr std::string_view kRunLineStdin =
    "\\builtin eval \"$__sbsh_i\"\n\\builtin eval \"$__sbsh_y\"\n";

// Stores a command's text in the text slot `fd` (a memfd) as the text and a NUL. bash reads
// up to the first NUL (a shell string cannot hold one anyway), so the slot is not truncated
// between commands (one pwrite on the hot path): what follows the NUL is the tail of a longer
// earlier text and is not read. After a large text the slot is cut back so that its memory
// is not kept. `slot_size` is the caller's record of the slot's size. Sets errno on failure.
[[nodiscard]] bool store_command_text(int fd, std::string_view text, size_t& slot_size);

// The script a new shell runs (sourced) before any command: job control, the Ctrl-C trap
// and the read-only definitions kRunLine expands, which open the slots through the links in
// `link_dir`.
[[nodiscard]] std::string shell_init_script(const std::string& link_dir);

// Written by a new owner after it took over a running shell: bash prints kSyncStatus when it
// reaches this line, so every status line before it belongs to a command the earlier owner
// started. `\builtin printf` leaves the status that the next command sees as `$?` alone.
inline constexpr std::string_view kSyncLine = "\\builtin printf '\\037-\\n'\n";
inline constexpr std::string_view kSyncStatus = "\037-";

// The status in one line the shell printed (without its '\n'), or nullopt when the line is
// not a status line.
[[nodiscard]] std::optional<int> parse_status_line(std::string_view line);

}  // namespace sbsh::daemon
