// sbsh file write|read|ls|stat|rm|mkdir|mv: files beneath a session's root, reached through
// sbshd (so also on a far host, through --host or --dial), never outside that root.
#include <sys/stat.h>

#include <cstdio>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "client/cli/cli.h"
#include "client/json.h"

namespace sbsh::cli {

namespace {

struct file_args {
  std::string session;
  std::string path, to;
  std::string mode;  // write --mode, octal
  bool no_parents = false;
  bool recursive = false;  // ls -R, rm -r
  bool parents = false;    // mkdir -p
  bool json = false;
  uint64_t offset = 0;
  uint64_t length = std::numeric_limits<uint64_t>::max();
};

std::string check_mode(std::string_view option, const std::string& v) {
  if (v.empty() || v.size() > 4 || v.find_first_not_of("01234567") != std::string::npos)
    return fmt::format("{}: '{}' is not an octal permission mode such as 644 or 0755", option, v);
  return {};
}

// "-rw-r--r--", as ls -l writes a mode.
std::string mode_text(const client::file_entry& e) {
  char t = e.type == "dir" ? 'd' : e.type == "symlink" ? 'l' : e.type == "fifo" ? 'p' : e.type == "socket" ? 's'
         : e.type == "char" ? 'c' : e.type == "block" ? 'b' : '-';
  std::string s(1, t);
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) s += (e.mode & (0400u >> i)) != 0 ? rwx[i] : '-';
  return s;
}

void print_entry_line(const client::file_entry& e) {
  std::string line = fmt::format("{} {:>12} {} {}", mode_text(e), e.size, client::rfc3339_ms(e.mtime_ms),
                                 displayable(e.path, false));
  if (e.type == "symlink") line += " -> " + displayable(e.target, false);
  std::puts(line.c_str());
}

int run_write(client::connection& conn, const file_args& a) {
  client::file_write_options o;
  if (!a.mode.empty()) o.mode = static_cast<uint32_t>(std::stoul(a.mode, nullptr, 8));
  o.parents = !a.no_parents;
  auto n = conn.write_file(a.session, a.path, 0, o);
  if (!n) return fail(n.err());
  return 0;
}

int run_read(client::connection& conn, const file_args& a) {
  client::file_read_options o;
  o.offset = a.offset;
  if (a.length != std::numeric_limits<uint64_t>::max()) o.length = a.length;
  std::fflush(stdout);
  auto n = conn.read_file(a.session, a.path, 1, o);
  if (!n) return fail(n.err());
  return 0;
}

int run_ls(client::connection& conn, const file_args& a) {
  auto entries = conn.list_files(a.session, a.path, a.recursive);
  if (!entries) return fail(entries.err());
  if (a.json) {
    std::puts(client::to_json(*entries).c_str());
  } else {
    for (const auto& e : *entries) print_entry_line(e);
  }
  return 0;
}

int run_stat(client::connection& conn, const file_args& a) {
  auto e = conn.stat_file(a.session, a.path);
  if (!e) return fail(e.err());
  if (a.json) std::puts(client::to_json(*e).c_str());
  else print_entry_line(*e);
  return 0;
}

}  // namespace

runner declare_file(command_line& cl) {
  auto a = std::make_shared<file_args>();
  cl.describe(
      "Reaches files beneath a session's root (session create --root DIR, or a --snapshot's copy) through sbshd, "
      "so also on a far host (--host, --dial). A PATH is taken from the root; an absolute one must lie beneath it. "
      "Symlinks are followed only while they stay beneath the root: '..' above it, an absolute path elsewhere and "
      "a symlink pointing out are refused, and no message names where they would lead.");
  auto session_option = [a](command_line& c) {
    c.option("-s,--session", "SESSION", "the session whose root the path is in (default: default)", a->session,
             check_session_name);
  };
  auto& write = cl.subcommand("write", "write stdin to a file, whole or not at all");
  write.describe(
      "Writes stdin, to its end, to PATH: into a new file beside it that then replaces it, so that a reader sees "
      "the old file or the new one, never part of one; on failure PATH is left as it was. Missing parent "
      "directories are made. An existing file keeps its mode unless --mode is given; a new one gets 0644.");
  session_option(write);
  write.option("--mode", "MODE", "the file's permission bits, in octal (644, 0755)", a->mode, check_mode);
  write.flag("--no-parents", "refuse when the parent directory is missing instead of making it", a->no_parents);
  write.argument("PATH", a->path);
  auto& read = cl.subcommand("read", "write a file's bytes to stdout");
  session_option(read);
  read.number("--offset", "N", "start at byte N", a->offset, "a byte offset", 0, std::numeric_limits<uint64_t>::max());
  read.number("--length", "N", "write at most N bytes", a->length, "a number of bytes", 0,
              std::numeric_limits<uint64_t>::max());
  read.argument("PATH", a->path);
  auto& ls = cl.subcommand("ls", "list a directory (default: the root)");
  session_option(ls);
  ls.flag("-R,--recursive", "list all beneath it too (symlinks are listed, not followed)", a->recursive);
  ls.flag("--json", "print a JSON array of entries: path, type, size, mode, mtime, target", a->json);
  ls.argument("PATH", a->path);
  auto& stat = cl.subcommand("stat", "describe a file, directory or symlink");
  session_option(stat);
  stat.flag("--json", "print one JSON object: path, type, size, mode, mtime, target", a->json);
  stat.argument("PATH", a->path);
  auto& rm = cl.subcommand("rm", "remove a file, a symlink or an empty directory");
  session_option(rm);
  rm.flag("-r,--recursive", "remove a directory and everything in it", a->recursive);
  rm.argument("PATH", a->path);
  auto& mkdir = cl.subcommand("mkdir", "make a directory");
  session_option(mkdir);
  mkdir.flag("-p,--parents", "make missing parents too; an existing directory is no error", a->parents);
  mkdir.argument("PATH", a->path);
  auto& mv = cl.subcommand("mv", "rename a file or directory (TO is replaced if it is a file)");
  session_option(mv);
  mv.argument("FROM", a->path);
  mv.argument("TO", a->to);
  cl.footer("Exit status: 0 when done; 255 when refused or failed, with the reason on stderr.");
  return [a, &cl, &write, &read, &ls, &stat, &rm, &mkdir, &mv](const global_opts& g) {
    bool any = write.given() || read.given() || ls.given() || stat.given() || rm.given() || mkdir.given() || mv.given();
    if (!any) {
      std::fputs(cl.help().c_str(), stdout);
      return 0;
    }
    if (a->path.empty() && !ls.given()) return fail("give the PATH of a file beneath the session's root");
    if (mv.given() && a->to.empty()) return fail("file mv needs FROM and TO");
    auto conn = connect(g);
    if (!conn) return fail(conn.err());
    if (write.given()) return run_write(*conn, *a);
    if (read.given()) return run_read(*conn, *a);
    if (ls.given()) return run_ls(*conn, *a);
    if (stat.given()) return run_stat(*conn, *a);
    sbsh::status s = rm.given()      ? conn->remove_file(a->session, a->path, a->recursive)
                     : mkdir.given() ? conn->make_directory(a->session, a->path, a->parents)
                                     : conn->move_file(a->session, a->path, a->to);
    if (!s) return fail(s.err());
    return 0;
  };
}

}  // namespace sbsh::cli
