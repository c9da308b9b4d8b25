// What the file operations of client.h (edit_file, read_lines, search_files, list_files to a
// depth) are built on, for the MCP server's read_file and write_file too: a file's bytes read
// and written beneath a session's root or, in a session without one and `as_shell`, as its
// shell would. Internal to libsbsh: not installed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sbsh/client.h"

namespace sbsh::client {

// At most `length` bytes of `path` from `offset`.
result<std::string> read_bytes(connection& conn, const std::string& session, const std::string& path, uint64_t offset,
                               uint64_t length, bool as_shell);
// Writes `content` to `path` whole (a new file renamed over it; missing directories made), with
// `mode`, else an existing file's, else 0644. Returns the bytes written.
result<uint64_t> write_bytes(connection& conn, const std::string& session, const std::string& path,
                             const std::string& content, std::optional<uint32_t> mode, bool as_shell);

}  // namespace sbsh::client
