// sbsh file write|read|ls|stat|rm|mkdir|mv|edit|search: files beneath a session's root,
// reached through sbshd (so also on a far host, through --host or --dial), never outside that
// root. edit, search, read --lines and ls --depth are the library's file operations
// (client/file_ops.cpp), the ones the MCP server's tools are.
#include <fcntl.h>
#include <sys/stat.h>
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
  std::string lines;                                   // read --lines START[:END]
  uint64_t depth = 0;                                  // ls --depth
  std::string old_text, new_text, old_file, new_file;  // edit
  bool all = false;                                    // edit --all
  std::string pattern, glob;                           // search
  bool ignore_case = false;
};

// Exit status of edit and search when the text was not found (or, for edit, not once): the
// file is as it was, as grep says 1 for no line selected.
constexpr int kExitNotFound = 1;

// read --lines: "N" (that line), "N:M" (N to M), "N:" (N to the end), ":M" (the first M),
// "-N:" (the last N), as sed -n 'N,Mp', head -n M and tail -n N choose them.
struct line_range {
  int64_t first = 1;
  std::optional<uint64_t> count;
};

std::optional<uint64_t> line_number(std::string_view t) {
  if (t.empty() || t.size() > 18 || t.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  return std::stoull(std::string(t));
}

result<line_range> parse_lines(std::string_view option, const std::string& v) {
  auto bad = [&](std::string_view why) {
    return make_error(ipc::errc::usage,
                      fmt::format("{}: '{}' {}; write N (one line), N:M (lines N to M), N: (from N to the end), "
                                  ":M (the first M) or -N: (the last N), lines counting from 1",
                                  option, v, why));
  };
  size_t colon = v.find(':');
  std::string_view start = std::string_view(v).substr(0, colon);
  std::string_view end = colon == std::string::npos ? std::string_view() : std::string_view(v).substr(colon + 1);
  line_range r;
  if (start.starts_with('-')) {
    auto n = line_number(start.substr(1));
    if (!n || *n == 0) return bad("is not a range of lines");
    if (colon == std::string::npos || !end.empty()) return bad("counts from the end only as -N:, to the end");
    r.first = -static_cast<int64_t>(*n);
    return r;
  }
  if (!start.empty()) {
    auto n = line_number(start);
    if (!n) return bad("is not a range of lines");
    if (*n == 0) return bad("starts at line 0");
    r.first = static_cast<int64_t>(*n);
  }
  if (colon == std::string::npos) {
    if (start.empty()) return bad("is empty");
    r.count = 1;
    return r;
  }
  if (end.empty()) {
    if (start.empty()) return bad("names no line");
    return r;
  }
  auto m = line_number(end);
  if (!m) return bad("is not a range of lines");
  if (*m < static_cast<uint64_t>(r.first)) return bad("ends before it starts");
  r.count = *m - static_cast<uint64_t>(r.first) + 1;
  return r;
}

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

int run_read_lines(client::connection& conn, const file_args& a) {
  auto range = parse_lines("--lines", a.lines);
  if (!range) return fail(range.err());
  client::file_lines_options o;
  o.line = range->first;
  o.count = range->count;
  auto r = conn.read_lines(a.session, a.path, o);
  if (!r) return fail(r.err());
  if (a.json) {
    std::puts(client::to_json(a.path, *r).c_str());
    return 0;
  }
  std::fwrite(r->content.data(), 1, r->content.size(), stdout);
  return 0;
}

int run_read(client::connection& conn, const file_args& a) {
  if (!a.lines.empty()) return run_read_lines(conn, a);
  client::file_read_options o;
  o.offset = a.offset;
  if (a.length != std::numeric_limits<uint64_t>::max()) o.length = a.length;
  std::fflush(stdout);
  auto n = conn.read_file(a.session, a.path, 1, o);
  if (!n) return fail(n.err());
  return 0;
}

int run_ls(client::connection& conn, const file_args& a) {
  client::file_list_options o;
  o.recursive = a.recursive;
  o.depth = a.depth;
  auto entries = conn.list_files(a.session, a.path, o);
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

int run_edit(client::connection& conn, const file_args& a) {
  std::string old_text = a.old_text, new_text = a.new_text;
  if (!a.old_file.empty()) {
    auto b = local_bytes("--old-file", a.old_file, client::kMaxWholeFile, "a file edited may hold");
    if (!b) return fail(b.err());
    old_text = std::move(*b);
  }
  if (!a.new_file.empty()) {
    auto b = local_bytes("--new-file", a.new_file, client::kMaxWholeFile, "a file edited may hold");
    if (!b) return fail(b.err());
    new_text = std::move(*b);
  }
  client::file_edit_options o;
  o.replace_all = a.all;
  auto r = conn.edit_file(a.session, a.path, old_text, new_text, o);
  if (!r) {
    if (r.err().code == "not_unique") {
      error e = r.err();
      e.message += " (--all replaces every one)";
      fail(e);
      return kExitNotFound;
    }
    int status = fail(r.err());
    return r.err().code == "no_match" ? kExitNotFound : status;
  }
  if (a.json) std::puts(client::to_json(a.path, *r).c_str());
  return 0;
}

int run_search(client::connection& conn, const file_args& a) {
  client::file_search_options o;
  o.path = a.path;
  o.glob = a.glob;
  o.ignore_case = a.ignore_case;
  auto r = conn.search_files(a.session, a.pattern, o);
  if (!r) return fail(r.err());
  if (a.json) {
    std::puts(client::to_json(*r).c_str());
  } else {
    // As grep -rn prints them: the path as `file read` takes it, the line's number, its bytes.
    std::string prefix = r->dir.empty() || r->dir == "." ? std::string() : r->dir;
    if (!prefix.empty() && !prefix.ends_with('/')) prefix += '/';
    for (const auto& m : r->matches) {
      std::string line = fmt::format("{}:{}:", displayable(prefix + m.path, false), m.line);
      line += m.text;
      line += '\n';
      std::fwrite(line.data(), 1, line.size(), stdout);
    }
  }
  return r->matches.empty() ? kExitNotFound : 0;
}

void session_option(command_line& c, file_args& a) {
  c.option("-s,--session", "SESSION", "the session whose root the path is in (default: default)", a.session,
           check_session_name);
}

command_line& declare_edit(command_line& cl, file_args& a) {
  auto& edit = cl.subcommand("edit", "replace an exact text in a file");
  edit.describe(
      "Replaces the text --old (or --old-file's bytes) in PATH with --new (or --new-file's), exactly: whitespace, "
      "indentation and newlines included, no pattern. The text must occur exactly once unless --all is given; "
      "otherwise nothing changes and the error says how many times it occurs. The file is written whole, as file "
      "write writes it, and keeps its mode. Files of at most 16 MiB.");
  session_option(edit, a);
  edit.option("--old", "TEXT", "the exact text to replace (--old=TEXT when it starts with '-')", a.old_text);
  edit.option("--new", "TEXT", "the text to put in its place (empty: remove it)", a.new_text);
  edit.option("--old-file", "FILE", "the text to replace is this local file's bytes ('-': standard input)", a.old_file);
  edit.option("--new-file", "FILE", "the text to put in its place is this local file's bytes ('-': stdin)", a.new_file);
  edit.flag("--all", "replace every occurrence", a.all);
  edit.flag("--json", "print one JSON object: path, replacements, bytes, first_line", a.json);
  edit.argument("PATH", a.path);
  return edit;
}

// What is wrong with edit's texts as given, "" when nothing is.
std::string edit_usage_error(const command_line& edit, const file_args& a) {
  if (!a.old_file.empty() && edit.given("--old")) return "file edit: give --old or --old-file, not both";
  if (!a.new_file.empty() && edit.given("--new")) return "file edit: give --new or --new-file, not both";
  if (a.old_file.empty() && !edit.given("--old")) return "file edit: give the text to replace, --old TEXT";
  if (a.new_file.empty() && !edit.given("--new"))
    return "file edit: give the text to put in its place, --new TEXT (--new '' removes it)";
  if (a.old_file == "-" && a.new_file == "-")
    return "file edit: only one of --old-file and --new-file can be standard input";
  return {};
}

command_line& declare_search(command_line& cl, file_args& a) {
  auto& search = cl.subcommand("search", "print the lines that match a regular expression, in files beneath PATH");
  search.describe(
      "Prints each line matching PATTERN, a POSIX extended regular expression (as grep -E takes it), in the files "
      "beneath PATH (default: the root; a file: that one) as grep -rn does: path:line:text, the path as file read "
      "takes it. Leaves out what a snapshot leaves out by default (.git, node_modules, .venv, __pycache__ and the "
      "like), files that are not text (a NUL byte) and files of more than 16 MiB.");
  session_option(search, a);
  search.option("--glob", "GLOB", "only files whose name matches this shell pattern, such as '*.py'", a.glob);
  search.flag("-i,--ignore-case", "match regardless of case", a.ignore_case);
  search.flag("--json", "print one JSON object: matches (path, line, text), files_searched, files_skipped, truncated",
              a.json);
  search.argument("PATTERN", a.pattern);
  search.argument("PATH", a.path);
  return search;
}

}  // namespace

runner declare_file(command_line& cl) {
  auto a = std::make_shared<file_args>();
  cl.describe(
      "Reaches files beneath a session's root (session create --root DIR, or a --snapshot's copy) through sbshd, "
      "so also on a far host (--host, --dial). A PATH is taken from the root; an absolute one must lie beneath it. "
      "Symlinks are followed only while they stay beneath the root: '..' above it, an absolute path elsewhere and "
      "a symlink pointing out are refused, and no message names where they would lead.");
  auto& write = cl.subcommand("write", "write stdin to a file, whole or not at all");
  write.describe(
      "Writes stdin, to its end, to PATH: into a new file beside it that then replaces it, so that a reader sees "
      "the old file or the new one, never part of one; on failure PATH is left as it was. Missing parent "
      "directories are made. An existing file keeps its mode unless --mode is given; a new one gets 0644.");
  session_option(write, *a);
  write.option("--mode", "MODE", "the file's permission bits, in octal (644, 0755)", a->mode, check_mode);
  write.flag("--no-parents", "refuse when the parent directory is missing instead of making it", a->no_parents);
  write.argument("PATH", a->path);
  auto& read = cl.subcommand("read", "write a file's bytes to stdout");
  session_option(read, *a);
  read.number("--offset", "N", "start at byte N", a->offset, "a byte offset", 0, std::numeric_limits<uint64_t>::max());
  read.number("--length", "N", "write at most N bytes", a->length, "a number of bytes", 0,
              std::numeric_limits<uint64_t>::max());
  read.option("--lines", "RANGE",
              "write lines instead of bytes: N, N:M (N to M), N: (N to the end), :M (the first M), -N: (the last N)",
              a->lines, [](std::string_view option, const std::string& v) {
                auto r = parse_lines(option, v);
                return r ? std::string() : r.err().message;
              });
  read.flag("--json",
            "with --lines: print one JSON object: path, bytes, content, encoding, truncated, start_line, end_line, "
            "total_lines",
            a->json);
  read.argument("PATH", a->path);
  auto& ls = cl.subcommand("ls", "list a directory (default: the root)");
  session_option(ls, *a);
  ls.flag("-R,--recursive", "list all beneath it too (symlinks are listed, not followed)", a->recursive);
  ls.number("--depth", "N", "list N levels beneath it (1: its own entries); implies -R", a->depth, "a number of levels",
            1, 1000);
  ls.flag("--json", "print a JSON array of entries: path, type, size, mode, mtime, target", a->json);
  ls.argument("PATH", a->path);
  auto& stat = cl.subcommand("stat", "describe a file, directory or symlink");
  session_option(stat, *a);
  stat.flag("--json", "print one JSON object: path, type, size, mode, mtime, target", a->json);
  stat.argument("PATH", a->path);
  auto& rm = cl.subcommand("rm", "remove a file, a symlink or an empty directory");
  session_option(rm, *a);
  rm.flag("-r,--recursive", "remove a directory and everything in it", a->recursive);
  rm.argument("PATH", a->path);
  auto& mkdir = cl.subcommand("mkdir", "make a directory");
  session_option(mkdir, *a);
  mkdir.flag("-p,--parents", "make missing parents too; an existing directory is no error", a->parents);
  mkdir.argument("PATH", a->path);
  auto& mv = cl.subcommand("mv", "rename a file or directory (TO is replaced if it is a file)");
  session_option(mv, *a);
  mv.argument("FROM", a->path);
  mv.argument("TO", a->to);
  auto& edit = declare_edit(cl, *a);
  auto& search = declare_search(cl, *a);
  cl.footer(
      "Exit status: 0 when done; 1 when edit found its text 0 times or, without --all, more than once (the file "
      "is as it was), or search found no line; 255 when refused or failed, with the reason on stderr.");
  return [a, &cl, &write, &read, &ls, &stat, &rm, &mkdir, &mv, &edit, &search](const global_opts& g) {
    bool any = write.given() || read.given() || ls.given() || stat.given() || rm.given() || mkdir.given() ||
               mv.given() || edit.given() || search.given();
    if (!any) {
      std::fputs(cl.help().c_str(), stdout);
      return 0;
    }
    if (search.given() && a->pattern.empty()) return fail("give the PATTERN to search for");
    if (a->path.empty() && !ls.given() && !search.given())
      return fail("give the PATH of a file beneath the session's root");
    if (mv.given() && a->to.empty()) return fail("file mv needs FROM and TO");
    if (read.given() && !a->lines.empty() && (read.given("--offset") || read.given("--length")))
      return fail("file read: --lines reads lines, --offset and --length bytes: give one or the other");
    if (read.given() && a->json && a->lines.empty())
      return fail("file read: --json goes with --lines (without it the bytes go to stdout as they are)");
    if (ls.given() && a->depth > 0 && a->recursive)
      return fail("file ls: --depth N lists N levels, -R all of them: give one or the other");
    if (edit.given())
      if (auto why = edit_usage_error(edit, *a); !why.empty()) return fail(why);
    auto conn = connect(g);
    if (!conn) return fail(conn.err());
    if (write.given()) return run_write(*conn, *a);
    if (read.given()) return run_read(*conn, *a);
    if (ls.given()) return run_ls(*conn, *a);
    if (edit.given()) return run_edit(*conn, *a);
    if (search.given()) return run_search(*conn, *a);
    if (stat.given()) return run_stat(*conn, *a);
    sbsh::status s = rm.given()      ? conn->remove_file(a->session, a->path, a->recursive)
                     : mkdir.given() ? conn->make_directory(a->session, a->path, a->parents)
                                     : conn->move_file(a->session, a->path, a->to);
    if (!s) return fail(s.err());
    return 0;
  };
}

}  // namespace sbsh::cli
