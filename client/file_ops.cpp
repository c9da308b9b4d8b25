// The file operations agents use, built on the file requests of files.cpp: an exact-text
// edit, a range of lines, a search of the files beneath a directory, a listing to a depth.
// The CLI (sbsh file edit, search, read --lines, ls --depth), the C ABI, Python and the MCP
// server's tools all call these, so each rule (uniqueness of the old text, what a search
// leaves out, where a range of lines ends) is written once. sbshd has no request for them:
// they read and write whole files, which the file API gives exactly.
#include "client/file_ops.h"

#include <fnmatch.h>
#include <regex.h>

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "client/json.h"
#include "ipc/protocol.h"

namespace sbsh::client {

namespace {

bool is_no_root(const error& e) { return e.code == ipc::wire_name(ipc::errc::no_root); }

// Runs `script` in a subshell of the session's shell, its arguments in variables (env), never
// in its text; its stdout, at most kMaxWholeFile + 1 bytes (one more says it was larger).
result<std::string> in_shell(connection& conn, const std::string& session, const std::string& script,
                             std::vector<std::string> env, std::optional<std::string> input = std::nullopt) {
  exec_options o;
  o.session = session;
  o.command = "(\n" + script + "\n)";
  o.env = std::move(env);
  o.stdin_data = std::move(input);
  o.timeout = std::chrono::minutes(2);
  std::string out, err;
  o.on_output = [&](stream st, std::string_view d) {
    std::string& to = st == stream::out ? out : err;
    size_t room = kMaxWholeFile + 1 > to.size() ? kMaxWholeFile + 1 - to.size() : 0;
    to.append(d.substr(0, room));
  };
  auto r = conn.exec(o);
  if (!r) return r.err();
  if (!r->ok()) {
    while (!err.empty() && err.back() == '\n') err.pop_back();
    std::string why = !err.empty()               ? utf8_repair(err.substr(0, 400), nullptr)
                      : !r->error.empty()        ? r->error
                      : r->exit_code.has_value() ? fmt::format("exit code {}", *r->exit_code)
                                                 : std::string("it did not finish");
    return make_error(ipc::errc::file_failed, fmt::format("in session '{}', which has no root, as its shell: {}",
                                                          session.empty() ? "default" : session, why));
  }
  return out;
}

// A file whole, refused past kMaxWholeFile.
result<std::string> whole_file(connection& conn, const std::string& session, const std::string& path, bool as_shell) {
  auto bytes = read_bytes(conn, session, path, 0, kMaxWholeFile + 1, as_shell);
  if (!bytes) return bytes.err();
  if (bytes->size() > kMaxWholeFile)
    return make_error(ipc::errc::file_failed,
                      fmt::format("'{}' is larger than {} MiB: edit, search and read by lines take files of at most "
                                  "that size; read it by bytes (offset and length) or with a command",
                                  path, kMaxWholeFile >> 20));
  return bytes;
}

// find(1)'s -printf fields, NUL-separated, as entries.
std::vector<file_entry> entries_of_find(const std::string& out) {
  std::vector<std::string> f;
  for (size_t i = 0; i < out.size();) {
    size_t z = out.find('\0', i);
    if (z == std::string::npos) break;
    f.push_back(out.substr(i, z - i));
    i = z + 1;
  }
  std::vector<file_entry> entries;
  for (size_t i = 0; i + 6 <= f.size(); i += 6) {
    file_entry e;
    e.path = f[i];
    char y = f[i + 1].empty() ? '?' : f[i + 1][0];
    e.type = y == 'f'   ? "file"
             : y == 'd' ? "dir"
             : y == 'l' ? "symlink"
             : y == 'p' ? "fifo"
             : y == 's' ? "socket"
             : y == 'c' ? "char"
             : y == 'b' ? "block"
                        : "other";
    e.size = std::strtoull(f[i + 2].c_str(), nullptr, 10);
    e.mode = static_cast<uint32_t>(std::strtoul(f[i + 3].c_str(), nullptr, 8));
    e.mtime_ms = static_cast<int64_t>(std::strtod(f[i + 4].c_str(), nullptr) * 1000);
    e.target = f[i + 5];
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return entries;
}

// Whether a path from the tree searched lies in what a snapshot leaves out by default
// (node_modules, .git, .venv, ...): a pattern without a slash matches any component.
bool left_out_of_search(const std::string& rel) {
  size_t start = 0;
  while (start <= rel.size()) {
    size_t end = rel.find('/', start);
    std::string part = rel.substr(start, end == std::string::npos ? std::string::npos : end - start);
    for (auto pattern : sbsh::kDefaultIgnores)
      if (::fnmatch(std::string(pattern).c_str(), part.c_str(), 0) == 0) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

// A compiled POSIX extended regular expression, freed with its owner.
class posix_regex {
 public:
  posix_regex(const posix_regex&) = delete;
  posix_regex& operator=(const posix_regex&) = delete;
  posix_regex(const std::string& pattern, bool ignore_case) {
    int rc = ::regcomp(&re_, pattern.c_str(), REG_EXTENDED | REG_NOSUB | REG_NEWLINE | (ignore_case ? REG_ICASE : 0));
    if (rc != 0) {
      char text[256];
      ::regerror(rc, &re_, text, sizeof text);
      why_ = text;
    }
  }
  ~posix_regex() {
    if (why_.empty()) ::regfree(&re_);
  }
  // Empty when it compiled, else why not.
  [[nodiscard]] const std::string& why() const { return why_; }
  [[nodiscard]] bool matches(const std::string& line) const {
    return ::regexec(&re_, line.c_str(), 0, nullptr, 0) == 0;
  }

 private:
  regex_t re_{};
  std::string why_;
};

// A line's text cut to `max` bytes (at a UTF-8 character's start), marked with its length.
std::string cut_line(const std::string& line, size_t max) {
  if (max == 0 || line.size() <= max) return line;
  size_t keep = max;
  while (keep > 0 && (static_cast<unsigned char>(line[keep]) & 0xC0) == 0x80) --keep;
  return fmt::format("{}... ({} bytes in all)", line.substr(0, keep), line.size());
}

}  // namespace

result<std::string> read_bytes(connection& conn, const std::string& session, const std::string& path, uint64_t offset,
                               uint64_t length, bool as_shell) {
  std::string bytes;
  file_read_options o;
  o.offset = offset;
  o.length = length;
  auto n = conn.read_file(
      session, path, [&bytes](std::string_view d) { bytes.append(d); }, o);
  if (n) return bytes;
  if (!as_shell || !is_no_root(n.err())) return n.err();
  auto all = in_shell(conn, session, "cat -- \"$SBSH_FILE\"", {"SBSH_FILE=" + path});
  if (!all) return all.err();
  return offset >= all->size() ? std::string() : all->substr(offset, length);
}

result<uint64_t> write_bytes(connection& conn, const std::string& session, const std::string& path,
                             const std::string& content, std::optional<uint32_t> mode, bool as_shell) {
  file_write_options o;
  o.mode = mode;
  auto n = conn.write_file(session, path, content, o);
  if (n || !as_shell || !is_no_root(n.err())) return n;
  constexpr std::string_view kScript = R"SH(f=$SBSH_FILE
d=$(dirname -- "$f") && mkdir -p -- "$d" || exit 1
t=$(mktemp -- "$f.sbsh-XXXXXX") || exit 1
if cat >"$t" &&
  if [ -n "$SBSH_MODE" ]; then chmod "$SBSH_MODE" -- "$t"
  elif [ -e "$f" ]; then chmod --reference="$f" -- "$t"
  else chmod 644 -- "$t"; fi && mv -f -- "$t" "$f"; then exit 0; fi
rm -f -- "$t"
exit 1)SH";
  auto r = in_shell(conn, session, std::string(kScript),
                    {"SBSH_FILE=" + path, "SBSH_MODE=" + (mode ? fmt::format("{:o}", *mode) : std::string())}, content);
  if (!r) return r.err();
  return content.size();
}

result<std::vector<file_entry>> connection::list_files(const std::string& session, const std::string& path,
                                                       const file_list_options& opts) {
  bool recursive = opts.recursive || opts.depth > 0;
  auto v = list_files(session, path, recursive);
  if (!v && opts.as_shell && is_no_root(v.err())) {
    auto out = in_shell(*this, session,
                        "cd -- \"${SBSH_DIR:-.}\" && find . -mindepth 1 ${SBSH_DEPTH:+-maxdepth \"$SBSH_DEPTH\"} "
                        "-printf '%P\\0%y\\0%s\\0%m\\0%T@\\0%l\\0'",
                        {"SBSH_DIR=" + path, "SBSH_DEPTH=" + (opts.depth > 0 ? std::to_string(opts.depth)
                                                              : recursive    ? std::string()
                                                                             : "1")});
    if (!out) return out.err();
    return entries_of_find(*out);
  }
  if (!v) return v.err();
  if (opts.depth > 0)  // entries at most `depth` levels down: "a/b" is two
    std::erase_if(*v, [depth = opts.depth](const file_entry& e) {
      return static_cast<uint64_t>(std::count(e.path.begin(), e.path.end(), '/')) >= depth;
    });
  return v;
}

result<file_edit_result> connection::edit_file(const std::string& session, const std::string& path,
                                               std::string_view old_text, std::string_view new_text,
                                               const file_edit_options& opts) {
  if (old_text.empty()) return make_error(ipc::errc::usage, "the text to replace is empty: give the text to replace");
  if (old_text == new_text)
    return make_error(ipc::errc::usage, "the text to replace and its replacement are the same: nothing would change");
  auto content = whole_file(*this, session, path, opts.as_shell);
  if (!content) return content.err();
  std::vector<size_t> at;
  for (size_t i = content->find(old_text); i != std::string::npos; i = content->find(old_text, i + old_text.size()))
    at.push_back(i);
  if (at.empty())
    return make_error("no_match", fmt::format("the text to replace occurs 0 times in {}: nothing was changed. It must "
                                              "match the file exactly, whitespace and indentation included",
                                              path));
  if (at.size() > 1 && !opts.replace_all)
    return make_error("not_unique", fmt::format("the text to replace occurs {} times in {}: nothing was changed. Give "
                                                "more of the text around it so that it occurs once, or replace all",
                                                at.size(), path));
  std::string out;
  out.reserve(content->size() + at.size() * new_text.size());
  size_t from = 0;
  for (size_t i : at) {
    out.append(*content, from, i - from);
    out += new_text;
    from = i + old_text.size();
  }
  out.append(*content, from);
  auto n = write_bytes(*this, session, path, out, std::nullopt, opts.as_shell);
  if (!n) return n.err();
  file_edit_result r;
  r.replacements = at.size();
  r.bytes = *n;
  r.first_line = 1 + static_cast<uint64_t>(
                         std::count(content->begin(), content->begin() + static_cast<std::ptrdiff_t>(at[0]), '\n'));
  return r;
}

result<file_lines> connection::read_lines(const std::string& session, const std::string& path,
                                          const file_lines_options& opts) {
  if (opts.line == 0)
    return make_error(ipc::errc::usage, "lines count from 1, or from the end when negative (-1 the last); not 0");
  auto content = whole_file(*this, session, path, opts.as_shell);
  if (!content) return content.err();
  std::vector<size_t> starts;  // where each line starts
  for (size_t i = 0; i < content->size();) {
    starts.push_back(i);
    size_t nl = content->find('\n', i);
    i = nl == std::string::npos ? content->size() : nl + 1;
  }
  auto total = static_cast<int64_t>(starts.size());
  int64_t first = opts.line > 0 ? opts.line : std::max<int64_t>(total + opts.line + 1, 1);
  uint64_t want = opts.count.value_or(static_cast<uint64_t>(total));
  int64_t last = first - 1;
  size_t from = first <= total ? starts[static_cast<size_t>(first - 1)] : content->size(), to = from;
  while (last < total && static_cast<uint64_t>(last + 1 - first) < want) {
    size_t end = last + 1 < total ? starts[static_cast<size_t>(last + 1)] : content->size();
    if (opts.max_bytes && end - from > *opts.max_bytes && last >= first) break;  // a first line always comes
    to = end;
    ++last;
  }
  file_lines r;
  r.content = content->substr(from, to - from);
  r.start_line = first;
  r.end_line = last;
  r.total_lines = total;
  r.truncated = last < total;
  return r;
}

result<file_search_result> connection::search_files(const std::string& session, const std::string& pattern,
                                                    const file_search_options& opts) {
  if (pattern.empty()) return make_error(ipc::errc::usage, "the pattern is empty: give a regular expression");
  if (pattern.find('\0') != std::string::npos)
    return make_error(ipc::errc::usage, "the pattern holds a NUL byte, which no line can match");
  posix_regex re(pattern, opts.ignore_case);
  if (!re.why().empty())
    return make_error(ipc::errc::usage,
                      fmt::format("'{}' is not a POSIX extended regular expression: {}", pattern, re.why()));
  file_search_result r;
  r.dir = opts.path;
  // A path that names a file: that file alone, its path from the directory holding it.
  std::vector<file_entry> entries;
  bool one_file = false;
  if (!opts.path.empty()) {
    auto st = stat_file(session, opts.path);
    if (st && st->type == "file") {
      one_file = true;
      size_t slash = opts.path.rfind('/');
      r.dir = slash == std::string::npos ? std::string() : opts.path.substr(0, slash);
      st->path = opts.path.substr(slash == std::string::npos ? 0 : slash + 1);
      entries.push_back(std::move(*st));
    }
  }
  if (!one_file) {
    file_list_options lo;
    lo.recursive = true;
    lo.as_shell = opts.as_shell;
    auto listed = list_files(session, opts.path, lo);
    if (!listed) return listed.err();
    entries = std::move(*listed);
  }
  uint64_t used = 0;
  for (const auto& e : entries) {
    if (r.truncated) break;
    if (e.type != "file" || (!one_file && left_out_of_search(e.path))) continue;
    std::string name = e.path.substr(e.path.rfind('/') + 1);
    if (!opts.glob.empty() && ::fnmatch(opts.glob.c_str(), name.c_str(), 0) != 0) continue;
    if (e.size > kMaxWholeFile) {
      ++r.files_skipped;
      continue;
    }
    std::string rel = one_file ? opts.path : opts.path.empty() || opts.path == "." ? e.path : opts.path + "/" + e.path;
    auto content = whole_file(*this, session, rel, opts.as_shell);
    if (!content) return content.err();
    if (content->find('\0') != std::string::npos) {
      ++r.files_skipped;
      continue;
    }
    ++r.files_searched;
    size_t start = 0;
    for (uint64_t line = 1; start < content->size(); ++line) {
      size_t nl = content->find('\n', start);
      std::string one = content->substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      start = nl == std::string::npos ? content->size() : nl + 1;
      if (!re.matches(one)) continue;
      one = cut_line(one, opts.max_line);
      // As `path:line: text\n` counts it.
      uint64_t size = e.path.size() + fmt::formatted_size("{}", line) + one.size() + 4;
      if (opts.max_bytes && used + size > *opts.max_bytes) {
        r.truncated = true;
        break;
      }
      used += size;
      r.matches.push_back({e.path, line, std::move(one)});
    }
  }
  return r;
}

}  // namespace sbsh::client
