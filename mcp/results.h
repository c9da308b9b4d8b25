// The results of the MCP tools that are not a record of the library's: each a struct with a
// field table, as ipc/messages.h declares the protocol's records, so that the JSON a tool
// returns (client::json_form_of) and its output schema (client::json_schema_of) follow from
// one declaration and cannot drift apart. The tools write only the descriptions, by key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "client/json_form.h"

namespace sbsh::mcp {

// remove_session's.
struct session_removed {
  std::string removed;
};

// create_session's: the session as list_sessions gives it, what its setup wrote when it ran
// for this call, and its definition read back from sbshd (what confines it).
struct session_created {
  client::session_status session;
  std::optional<std::string> setup_stdout, setup_stderr;
  std::optional<client::session_spec> definition;  // left out when it could not be read back
};

// A command's state in process_logs: what its result says, without the output.
struct command_state {
  uint64_t id = 0;
  std::string session;
  std::string command;
  bool running = false;
  std::optional<int> exit_code;
  std::optional<int> signal;
  uint64_t duration_ms = 0;
};

// What a result gives of one stream (put_stream): the part kept with its marker, and where it
// lies in the whole.
struct stream_part {
  std::string text;                   // invalid UTF-8 replaced by U+FFFD
  std::optional<std::string> base64;  // its exact bytes, when not UTF-8 and kept whole
  bool truncated = false;
  uint64_t omitted_bytes = 0;
  uint64_t omitted_from = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// process_logs': the command or the background process named, and the part of each stream
// asked for. run_command's result takes the streams' keys from it too.
struct logs_result {
  std::optional<command_state> command;
  std::optional<client::proc_info> process;
  stream_part out, err;
};

}  // namespace sbsh::mcp

namespace sbsh::ipc {

template <>
struct schema_of<mcp::session_removed> {
  static constexpr std::string_view name = "removed";
  static constexpr auto fields() { return std::tuple{field("removed", &mcp::session_removed::removed)}; }
};

template <>
struct schema_of<mcp::session_created> {
  static constexpr std::string_view name = "created";
  static constexpr auto fields() {
    using s = mcp::session_created;
    return std::tuple{field("session", &s::session), field("setup_stdout", &s::setup_stdout),
                      field("setup_stderr", &s::setup_stderr), field("definition", &s::definition)};
  }
};

template <>
struct schema_of<mcp::command_state> {
  static constexpr std::string_view name = "command";
  static constexpr auto fields() {
    using s = mcp::command_state;
    return std::tuple{field("id", &s::id),
                      field("session", &s::session),
                      field("command", &s::command),
                      field("running", &s::running),
                      field("exit_code", &s::exit_code),
                      field("signal", &s::signal),
                      field("duration_ms", &s::duration_ms)};
  }
};

template <>
struct schema_of<mcp::logs_result> {
  static constexpr std::string_view name = "logs";
  using s = mcp::logs_result;
  using p = mcp::stream_part;
  // Member M of stream S, as a field of its own (stdout_truncated: out.truncated).
  template <p s::*S, auto M>
  static auto of(const s& r) {
    return (r.*S).*M;
  }
  static constexpr auto fields() {
    return std::tuple{field("command", &s::command),
                      field("process", &s::process),
                      derived("stdout", of<&s::out, &p::text>),
                      derived("stdout_base64", of<&s::out, &p::base64>),
                      derived("stdout_truncated", of<&s::out, &p::truncated>),
                      derived("stdout_omitted_bytes", of<&s::out, &p::omitted_bytes>),
                      derived("stdout_omitted_from", of<&s::out, &p::omitted_from>),
                      derived("stdout_offset", of<&s::out, &p::offset>),
                      derived("stdout_bytes", of<&s::out, &p::bytes>),
                      derived("stderr", of<&s::err, &p::text>),
                      derived("stderr_base64", of<&s::err, &p::base64>),
                      derived("stderr_truncated", of<&s::err, &p::truncated>),
                      derived("stderr_omitted_bytes", of<&s::err, &p::omitted_bytes>),
                      derived("stderr_omitted_from", of<&s::err, &p::omitted_from>),
                      derived("stderr_offset", of<&s::err, &p::offset>),
                      derived("stderr_bytes", of<&s::err, &p::bytes>)};
  }
};

}  // namespace sbsh::ipc

namespace sbsh::client {

template <>
struct json_form<mcp::session_created> {
  static constexpr json_rule rules[] = {{"definition", json_as::absent_if_none}};
};

template <>
struct json_form<mcp::command_state> {
  static constexpr json_rule rules[] = {{"id", json_as::command_ref}, {"signal", json_as::signal_name}};
};

template <>
struct json_form<mcp::logs_result> {
  static constexpr json_rule rules[] = {{"command", json_as::absent_if_none}, {"process", json_as::absent_if_none}};
};

}  // namespace sbsh::client
