// The shell side of the exec path (see shell_protocol.h).
#include "daemon/shell_protocol.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include <fmt/format.h>

#include "daemon/exec_job.h"

namespace sbsh::daemon {

std::string shell_init_script(const std::string& link_dir) {
  // DIR/t, DIR/i, DIR/o and DIR/e are the slots (links to /proc/<owner>/fd/<n>). Every name below is quoted with \builtin
  // so that a user's aliases cannot change what the line does; the status is carried into
  // `if` so that `$?` at the start of a command is the previous command's.
  // Between commands bash's own stdout is the status pipe (during a command it is
  // redirected, and bash keeps the original in a close-on-exec descriptor), so the status
  // costs no open(); each status line starts with \037 so nothing else can pass for one.
  //
  // Ctrl-C: a command's job that dies of SIGINT makes bash act as if it had received SIGINT
  // itself, which would end a non-interactive shell and its state. With SIGINT trapped, bash
  // instead abandons the rest of the line being run, sets $? to 130 and reads the next
  // line, as an interactive shell returns to its prompt. So the run line ($__sbsh_x or
  // $__sbsh_i) and the status line ($__sbsh_y) are two lines (kRunLine): the status is
  // reported either way.
  auto slot = [&](const char* name) { return shell_quote(link_dir + "/" + name); };
  // The text, read in bulk up to its NUL (mapfile -n 1: see store_command_text), then
  // evaluated with the command's descriptors.
  auto run = [&](const std::string& in) {
    std::string redir = fmt::format("<{} >{} 2>{}", in, slot("o"), slot("e"));
    return fmt::format(
        "\\builtin mapfile -d \"\" -n 1 -t __sbsh_c <{0}||\\builtin :;"
        "if __sbsh_rc \"$__sbsh_s\";then \\builtin eval \"$__sbsh_c\" {1};"
        "else \\builtin eval \"$__sbsh_c\" {1};fi",
        slot("t"), redir);
  };
  std::string x = run("/dev/null");
  std::string i = run(slot("i"));
  std::string y = "__sbsh_s=$?;\\builtin printf '\\037%d\\n' \"$__sbsh_s\"";
  return fmt::format(
      "set -m\n"
      "trap : INT\n"
      "__sbsh_s=0\n"
      "__sbsh_rc() {{ return \"$1\"; }}\n"
      "readonly -f __sbsh_rc\n"
      "readonly __sbsh_x={} __sbsh_i={} __sbsh_y={}\n",
      shell_quote(x), shell_quote(i), shell_quote(y));
}

shell_link shell_link::with_slots(int devnull, const std::string& label) {
  auto dup = [devnull] { return unique_fd(::fcntl(devnull, F_DUPFD_CLOEXEC, 3)); };
  shell_link l;
  l.text = unique_fd(::memfd_create(("sbsh-" + label).c_str(), MFD_CLOEXEC));
  l.init = unique_fd(::memfd_create(("sbsh-init-" + label).c_str(), MFD_CLOEXEC));
  l.in = dup();
  l.out = dup();
  l.err = dup();
  return l;
}

status point_links(const std::string& dir, const shell_slots& s) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return make_error("io", fmt::format("cannot create {}: {}", dir, std::strerror(errno)));
  const int fds[] = {s.text, s.in, s.out, s.err};
  for (size_t k = 0; k < std::size(fds); ++k) {
    std::string link = dir + "/" + kLinkNames[k];
    std::string tmp = link + ".new";
    std::string target = fmt::format("/proc/{}/fd/{}", s.owner, fds[k]);
    ::unlink(tmp.c_str());
    if (::symlink(target.c_str(), tmp.c_str()) != 0 || ::rename(tmp.c_str(), link.c_str()) != 0)
      return make_error("io", fmt::format("cannot link {}: {}", link, std::strerror(errno)));
  }
  return ok_status();
}

void remove_links(const std::string& dir, const char* also) {
  if (dir.empty()) return;
  for (const char* name : kLinkNames) ::unlink((dir + "/" + name).c_str());
  if (also != nullptr) ::unlink((dir + "/" + also).c_str());
  ::rmdir(dir.c_str());
}

result<std::pair<unique_fd, unique_fd>> open_shell(shell_link& link, pid_t owner) {
  if (auto linked = point_links(link.dir, link.slots(owner)); !linked) return linked.err();
  int script[2] = {-1, -1}, st[2] = {-1, -1};
  if (::pipe2(script, O_CLOEXEC) != 0)
    return make_error("io", fmt::format("cannot create the shell's channels: {}", std::strerror(errno)));
  unique_fd script_r(script[0]);
  link.script_w = unique_fd(script[1]);
  if (::pipe2(st, O_CLOEXEC) != 0)
    return make_error("io", fmt::format("cannot create the shell's channels: {}", std::strerror(errno)));
  unique_fd status_w(st[1]);
  link.status_r = unique_fd(st[0]);
  // bash reads the start-up script in bulk from its own memfd (through its stdin it would
  // cost a read() per byte); the short line that sources it waits in the pipe until bash
  // starts, and the first command's line can follow at once.
  std::string init = shell_init_script(link.dir);
  std::string line = fmt::format(". /proc/{}/fd/{}\n", owner, link.init.get());
  if (::ftruncate(link.init.get(), 0) != 0 ||
      ::pwrite(link.init.get(), init.data(), init.size(), 0) != static_cast<ssize_t>(init.size()) ||
      ::write(link.script_w.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    return make_error("io", "cannot write the shell's start-up script");
  for (int fd : {link.script_w.get(), link.status_r.get()}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return std::pair(std::move(script_r), std::move(status_w));
}

bool store_command_text(int fd, std::string_view text, size_t& slot_size) {
  constexpr size_t kKeepBytes = 1u << 20;
  static constexpr char kEnd = '\0';
  size_t size = text.size() + 1;
  if (slot_size > kKeepBytes && size < slot_size) {
    if (::ftruncate(fd, 0) != 0) return false;
    slot_size = 0;
  }
  iovec iov[2] = {{const_cast<char*>(text.data()), text.size()}, {const_cast<char*>(&kEnd), 1}};
  if (::pwritev(fd, iov, 2, 0) != static_cast<ssize_t>(size)) return false;
  slot_size = std::max(slot_size, size);
  return true;
}

std::optional<int> parse_status_line(std::string_view line) {
  if (line.size() < 2 || line.size() > 4 || line[0] != '\037') return std::nullopt;
  int v = 0;
  for (char c : line.substr(1)) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v > 255) return std::nullopt;
  return v;
}

}  // namespace sbsh::daemon
