// The C ABI (sbsh.h) over the C++ API (sbsh/client.h).
//
// Every entry point is a thin shim: check the arguments, call the C++ API, turn its result
// into a status code and a message. No exception may cross the ABI, so every entry point
// that can allocate runs inside guarded(), which catches everything. Listings are returned
// as the same JSON the CLI prints with --json (client/json.cpp).
#include "sbsh/sbsh.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "client/c_api.h"
#include "client/json.h"
#include "client/request_json.h"
#include "ipc/protocol.h"
#include "sbsh/client.h"

struct sbsh_result {
  sbsh::client::exec_result r;
};

struct sbsh_exec_call {
  sbsh_conn* conn;
  sbsh::client::exec_call call;
};

struct sbsh_proc {
  sbsh::client::proc_info p;
};

struct sbsh_canceller {
  sbsh::client::canceller c;
};

struct sbsh_lease {
  sbsh_conn* conn;  // the connection it was granted on; NULL once that is closed
  // Empty once its connection is closed: its C++ lease refers to the connection.
  std::optional<sbsh::client::lease> l;
  int64_t shell_pid = 0;  // the lease's, kept for after its connection's close
  uint64_t generation = 0;
};

// The leases' C++ objects go before the connection they refer to.
sbsh_conn::~sbsh_conn() {
  for (sbsh_lease* l : leases) {
    l->l.reset();  // releases it when held: tells sbshd and waits for its answer
    l->conn = nullptr;
  }
}

namespace sbsh::c_abi {

// The calling thread's most recent failure, for sbsh_last_error(NULL): the only place the
// reason of a failed sbsh_connect can be kept, since there is no handle yet.
thread_local std::string t_error;
thread_local std::string t_code;

// The codes a caller must tell apart (ipc/protocol.h, sbshd's and the library's own); every
// other one is a refusal.
int status_for(sbsh::ipc::errc code) {
  using sbsh::ipc::errc;
  switch (code) {
    case errc::unreachable:
    case errc::unsafe_dir: return SBSH_ERR_UNREACHABLE;
    case errc::io:
    case errc::eof:
    case errc::write_error: return SBSH_ERR_IO;
    case errc::bad_socket:
    case errc::usage: return SBSH_ERR_INVALID;
    case errc::protocol:
    case errc::bad_frame:
    case errc::version_mismatch:
    case errc::unknown_request:
    case errc::handshake_required: return SBSH_ERR_PROTOCOL;
    case errc::timeout: return SBSH_ERR_TIMEOUT;
    case errc::no_such_session:
    case errc::no_such_process:
    case errc::no_such_command:
    case errc::no_such_env: return SBSH_ERR_NOT_FOUND;
    default: return SBSH_ERR_REFUSED;
  }
}

// A code as a string: one this library knows, or a newer sbshd's (a refusal).
int status_for(std::string_view code) {
  auto known = sbsh::ipc::errc_from_name(code);
  return known ? status_for(*known) : SBSH_ERR_REFUSED;
}

// After these, replies may be out of step with requests (or the socket is gone): refuse
// further use of the handle instead of misreading the next reply.
bool breaks_connection(std::string_view code) {
  using sbsh::ipc::errc;
  auto known = sbsh::ipc::errc_from_name(code);
  return known == errc::io || known == errc::eof || known == errc::protocol || known == errc::bad_frame ||
         known == errc::version_mismatch || known == errc::handshake_required;
}

int record(sbsh_conn* conn, int status, std::string_view code, std::string_view message) {
  t_error.assign(message);
  t_code.assign(code);
  if (conn != nullptr) {
    conn->error.assign(message);
    conn->code.assign(code);
  }
  return status;
}

int fail(sbsh_conn* conn, const sbsh::error& e) {
  if (conn != nullptr && breaks_connection(e.code))
    conn->broken = "this connection failed earlier (" + e.message + "); close it and connect again";
  return record(conn, status_for(e.code), e.code, e.message);
}

int invalid(sbsh_conn* conn, std::string_view message) {
  return record(conn, SBSH_ERR_INVALID, "invalid_argument", message);
}

std::string str_or_empty(const char* s) { return s != nullptr ? std::string(s) : std::string(); }

// Copies a string to malloc'd memory for a `char**` out-parameter (released by sbsh_free).
char* malloc_copy(const std::string& s) {
  auto* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

}  // namespace sbsh::c_abi

namespace {

using sbsh::client::stream;
using namespace sbsh::c_abi;

// A C string array of `n` entries; false (with *why set) when it has NULL entries.
bool strings(const char* const* v, size_t n, const char* what, std::vector<std::string>* out, std::string* why) {
  if (n > 0 && v == nullptr) {
    *why = std::string(what) + " is NULL but its count is not 0";
    return false;
  }
  for (size_t i = 0; i < n; ++i) {
    if (v[i] == nullptr) {
      *why = std::string(what) + "[" + std::to_string(i) + "] is NULL";
      return false;
    }
    out->emplace_back(v[i]);
  }
  return true;
}

// Hands the caller a malloc'd copy of `s` (a JSON document, a path) to release with
// sbsh_free; nothing when `out` is NULL (an optional out-parameter).
int give_string(const std::string& s, char** out) {
  if (out != nullptr) *out = malloc_copy(s);
  return SBSH_OK;
}

void give_proc(sbsh::client::proc_info&& p, sbsh_proc** out) {
  if (out != nullptr) *out = new sbsh_proc{std::move(p)};
}

// What a *_json entry point does once its arguments are checked: json_out is required, the
// call's reply is given as its record's JSON form (client/json.h), or its error recorded.
// `fn` names the entry point in the error.
template <typename Call>
int json_reply(sbsh_conn* conn, const char* fn, char** json_out, Call&& call) {
  if (json_out == nullptr) return invalid(conn, std::string(fn) + ": json_out is NULL");
  auto v = call();
  if (!v) return fail(conn, v.err());
  return give_string(sbsh::client::to_json(*v), json_out);
}

// sbsh_logs' and sbsh_command_logs' follow, tail, streams and cancel_fd, checked, into `o`.
int logs_options_of(sbsh_conn* conn, const char* fn, int follow, uint64_t tail, int streams, int cancel_fd,
                    sbsh::client::logs_options& o) {
  if (streams < 0 || streams > 3) return invalid(conn, std::string(fn) + ": streams must be 0, 1, 2 or 3");
  o.follow = follow != 0;
  o.tail = tail;
  o.cancel_fd = cancel_fd < 0 ? -1 : cancel_fd;
  if (streams != 0) {
    o.out = (streams & 1) != 0;
    o.err = (streams & 2) != 0;
  }
  return SBSH_OK;
}

// The file calls' options; C++ types, so they live outside the extern "C" block.
sbsh::client::file_write_options write_options(int mode, int parents) {
  sbsh::client::file_write_options o;
  if (mode >= 0) o.mode = static_cast<uint32_t>(mode);
  o.parents = parents != 0;
  return o;
}

sbsh::client::file_read_options read_options(uint64_t offset, int64_t length) {
  sbsh::client::file_read_options o;
  o.offset = offset;
  if (length >= 0) o.length = static_cast<uint64_t>(length);
  return o;
}

std::function<void(stream, std::string_view)> output_callback(sbsh_output_fn fn, void* user) {
  return [fn, user](stream s, std::string_view d) { fn(user, static_cast<int>(s), d.data(), d.size()); };
}

}  // namespace

extern "C" {

// ---- Errors, version, memory ---------------------------------------------------------------

const char* sbsh_error_name(int status) {
  switch (status) {
    case SBSH_OK: return "ok";
    case SBSH_ERR_UNREACHABLE: return "unreachable";
    case SBSH_ERR_REFUSED: return "refused";
    case SBSH_ERR_IO: return "io";
    case SBSH_ERR_TIMEOUT: return "timeout";
    case SBSH_ERR_INVALID: return "invalid";
    case SBSH_ERR_INTERNAL: return "internal";
    case SBSH_ERR_PROTOCOL: return "protocol";
    case SBSH_ERR_NOT_FOUND: return "not_found";
    case SBSH_PENDING: return "pending";
    default: return "unknown";
  }
}

const char* sbsh_last_error(const sbsh_conn* conn) { return conn != nullptr ? conn->error.c_str() : t_error.c_str(); }
const char* sbsh_last_error_code(const sbsh_conn* conn) {
  return conn != nullptr ? conn->code.c_str() : t_code.c_str();
}
const char* sbsh_version(void) { return SBSH_VERSION; }
void sbsh_free(void* p) { std::free(p); }

// ---- Connections ---------------------------------------------------------------------------

int sbsh_connect_ex(const char* socket_path, int autostart, const char* daemon_path, sbsh_conn** out) {
  return guarded_no_conn([&]() -> int {
    if (out == nullptr) return invalid(nullptr, "sbsh_connect: out is NULL");
    sbsh::client::connect_options o;
    o.socket_path = str_or_empty(socket_path);
    o.autostart = autostart != 0;
    o.daemon_path = str_or_empty(daemon_path);
    auto c = sbsh::client::connection::connect(o);
    if (!c) return fail(nullptr, c.err());
    *out = new sbsh_conn(std::move(*c));
    return SBSH_OK;
  });
}

int sbsh_connect(const char* socket_path, int autostart, sbsh_conn** out) {
  return sbsh_connect_ex(socket_path, autostart, nullptr, out);
}

namespace {

int connect_through(std::vector<std::string> argv, sbsh_conn** out) {
  sbsh::client::connect_options o;
  o.dial_command = std::move(argv);
  auto c = sbsh::client::connection::connect(o);
  if (!c) return fail(nullptr, c.err());
  *out = new sbsh_conn(std::move(*c));
  return SBSH_OK;
}

}  // namespace

int sbsh_connect_dial(const char* const* argv, sbsh_conn** out) {
  return guarded_no_conn([&]() -> int {
    if (out == nullptr) return invalid(nullptr, "sbsh_connect_dial: out is NULL");
    if (argv == nullptr || argv[0] == nullptr || argv[0][0] == '\0')
      return invalid(nullptr, "sbsh_connect_dial: argv is empty; give the program that reaches `sbsh dial-stdio`");
    std::vector<std::string> v;
    for (const char* const* a = argv; *a != nullptr; ++a) v.emplace_back(*a);
    return connect_through(std::move(v), out);
  });
}

int sbsh_connect_host(const char* url, const char* remote_socket, int autostart, sbsh_conn** out) {
  return guarded_no_conn([&]() -> int {
    if (out == nullptr) return invalid(nullptr, "sbsh_connect_host: out is NULL");
    auto argv = sbsh::client::host_dial_command(str_or_empty(url), str_or_empty(remote_socket), autostart != 0);
    if (!argv) return fail(nullptr, argv.err());
    return connect_through(std::move(*argv), out);
  });
}

void sbsh_close(sbsh_conn* conn) { delete conn; }
const char* sbsh_socket_path(const sbsh_conn* conn) { return conn != nullptr ? conn->c.socket_path().c_str() : ""; }
int sbsh_fd(const sbsh_conn* conn) { return conn != nullptr ? conn->c.fd() : -1; }

// ---- Cancellers ----------------------------------------------------------------------------

int sbsh_canceller_new(sbsh_canceller** out) {
  return guarded_no_conn([&]() -> int {
    if (out == nullptr) return invalid(nullptr, "sbsh_canceller_new: out is NULL");
    auto* c = new sbsh_canceller;
    if (c->c.fd() < 0) {
      int e = errno;
      delete c;
      return record(nullptr, SBSH_ERR_INTERNAL, "io", std::string("cannot create a pipe: ") + std::strerror(e));
    }
    *out = c;
    return SBSH_OK;
  });
}
int sbsh_canceller_fd(const sbsh_canceller* c) { return c != nullptr ? c->c.fd() : -1; }
void sbsh_canceller_cancel(const sbsh_canceller* c) {
  if (c != nullptr) c->c.cancel();
}
void sbsh_canceller_signal(const sbsh_canceller* c, int sig) {
  if (c != nullptr) c->c.signal(sig);
}
void sbsh_canceller_reset(const sbsh_canceller* c) {
  if (c == nullptr || c->c.fd() < 0) return;
  // The read end is non-blocking (canceller() makes it so): read until it is empty.
  char buf[64];
  while (::read(c->c.fd(), buf, sizeof buf) > 0) {
  }
}
void sbsh_canceller_free(sbsh_canceller* c) { delete c; }

// ---- Exec ----------------------------------------------------------------------------------

namespace {
// Version 1's structure: the one without the fields version 2 added at its end; version 2's,
// without version 3's; version 3's, without version 4's.
constexpr size_t kExecOptsV1Size = offsetof(sbsh_exec_opts, detach_after_ms);
constexpr size_t kExecOptsV2Size = offsetof(sbsh_exec_opts, tty);
constexpr size_t kExecOptsV3Size = offsetof(sbsh_exec_opts, collect_output);
}  // namespace

void sbsh_exec_opts_init_size(sbsh_exec_opts* opts, size_t size) {
  if (opts == nullptr || size < kExecOptsV1Size) return;
  sbsh_exec_opts d{};
  d.version = size >= sizeof d           ? SBSH_EXEC_OPTS_VERSION
              : size >= kExecOptsV3Size ? 3
              : size >= kExecOptsV2Size ? 2
                                        : 1;
  d.stdin_fd = -1;
  d.stdout_fd = -1;
  d.stderr_fd = -1;
  d.cancel_fd = -1;
  // Never past the caller's structure: one built against an earlier sbsh.h is shorter.
  std::memcpy(opts, &d, std::min(size, sizeof d));
}

// The function behind the macro of the same name, for programs built against sbsh.h of
// version 1, whose structure has version 1's size.
void(sbsh_exec_opts_init)(sbsh_exec_opts* opts) { sbsh_exec_opts_init_size(opts, kExecOptsV1Size); }

namespace {

// sbsh_exec_opts as exec_options; SBSH_OK, or what was wrong (recorded on conn). `fn`
// names the calling function in the messages.
int exec_options_from(sbsh_conn* conn, const sbsh_exec_opts* opts, const char* fn, sbsh::client::exec_options* o) {
  // Earlier versions, the same structure without its last fields, are still taken.
  if (opts->version < 1 || opts->version > SBSH_EXEC_OPTS_VERSION)
    return invalid(conn, std::string(fn) + ": opts.version is " + std::to_string(opts->version) +
                             "; initialize the options with sbsh_exec_opts_init()");
  if (opts->command == nullptr) return invalid(conn, std::string(fn) + ": opts.command is NULL");
  if (opts->timeout_ms < 0 || opts->grace_ms < 0)
    return invalid(conn, std::string(fn) + ": timeout_ms and grace_ms must not be negative");
  if (opts->stdin_data == nullptr && opts->stdin_len > 0)
    return invalid(conn, std::string(fn) + ": stdin_data is NULL but stdin_len is not 0");
  std::string why;
  if (!strings(opts->env, opts->env_count, "opts.env", &o->env, &why))
    return invalid(conn, std::string(fn) + ": " + why);
  o->command = opts->command;
  o->session = str_or_empty(opts->session);
  o->cwd = str_or_empty(opts->cwd);
  o->session_cwd = str_or_empty(opts->session_cwd);
  o->timeout = std::chrono::milliseconds(opts->timeout_ms);
  o->grace = std::chrono::milliseconds(opts->grace_ms);
  if (opts->stdin_data != nullptr) o->stdin_data.emplace(opts->stdin_data, opts->stdin_len);
  else o->stdin_fd = opts->stdin_fd < 0 ? -1 : opts->stdin_fd;
  if (opts->on_output != nullptr) o->on_output = output_callback(opts->on_output, opts->user);
  o->stdout_fd = opts->stdout_fd < 0 ? -1 : opts->stdout_fd;
  o->stderr_fd = opts->stderr_fd < 0 ? -1 : opts->stderr_fd;
  o->signal_fd = opts->cancel_fd < 0 ? -1 : opts->cancel_fd;
  if (opts->output_limit > 0) o->output_limit = opts->output_limit;
  if (opts->version >= 2) {
    if (opts->detach_after_ms < 0) return invalid(conn, std::string(fn) + ": detach_after_ms must not be negative");
    o->detach_after = std::chrono::milliseconds(opts->detach_after_ms);
    o->keep = opts->keep != 0;
  }
  if (opts->version >= 3) {
    if (opts->cols > 10000 || opts->rows > 10000 || ((opts->cols != 0 || opts->rows != 0) && opts->tty == 0))
      return invalid(conn, std::string(fn) + ": cols and rows size the terminal of tty (set tty), from 1 to 10000");
    o->tty = opts->tty != 0;
    o->cols = static_cast<uint16_t>(opts->cols);
    o->rows = static_cast<uint16_t>(opts->rows);
    o->interactive = opts->interactive != 0;
  }
  if (opts->version >= 4) o->collect_output = opts->collect_output != 0;
  return SBSH_OK;
}

}  // namespace

int sbsh_exec(sbsh_conn* conn, const sbsh_exec_opts* opts, sbsh_result** out) {
  return guarded(conn, [&]() -> int {
    if (opts == nullptr || out == nullptr) return invalid(conn, "sbsh_exec: opts and out must not be NULL");
    sbsh::client::exec_options o;
    if (int rc = exec_options_from(conn, opts, "sbsh_exec", &o); rc != SBSH_OK) return rc;
    auto r = conn->c.exec(o);
    if (!r) return fail(conn, r.err());
    *out = new sbsh_result{std::move(*r)};
    return SBSH_OK;
  });
}

int sbsh_exec_start(sbsh_conn* conn, const sbsh_exec_opts* opts, sbsh_exec_call** out) {
  return guarded(conn, [&]() -> int {
    if (opts == nullptr || out == nullptr) return invalid(conn, "sbsh_exec_start: opts and out must not be NULL");
    sbsh::client::exec_options o;
    if (int rc = exec_options_from(conn, opts, "sbsh_exec_start", &o); rc != SBSH_OK) return rc;
    auto call = conn->c.start_exec(std::move(o));
    if (!call) return fail(conn, call.err());
    *out = new sbsh_exec_call{conn, std::move(*call)};
    return SBSH_OK;
  });
}

int sbsh_exec_call_fd(const sbsh_exec_call* call) { return call == nullptr ? -1 : call->call.fd(); }

int sbsh_exec_call_step(sbsh_exec_call* call, sbsh_result** out) {
  sbsh_conn* conn = call == nullptr ? nullptr : call->conn;
  return guarded(conn, [&]() -> int {
    if (call == nullptr || out == nullptr) return invalid(conn, "sbsh_exec_call_step: call and out must not be NULL");
    if (call->call.done()) return invalid(conn, "sbsh_exec_call_step: the call has ended already");
    auto r = call->call.step();
    if (!r) return fail(conn, r.err());
    if (!*r) return SBSH_PENDING;
    *out = new sbsh_result{std::move(**r)};
    return SBSH_OK;
  });
}

void sbsh_exec_call_free(sbsh_exec_call* call) {
  if (call == nullptr) return;
  // Its replies would still come, and be taken for those of the next request.
  if (!call->call.done() && call->conn->broken.empty())
    call->conn->broken =
        "an exec on this connection was abandoned before it ended (sbsh_exec_call_free); connect again";
  delete call;
}

int sbsh_result_has_exit_code(const sbsh_result* r) { return r != nullptr && r->r.exit_code ? 1 : 0; }
int sbsh_result_exit_code(const sbsh_result* r) { return r != nullptr ? r->r.exit_code.value_or(-1) : -1; }
int sbsh_result_signal(const sbsh_result* r) { return r != nullptr ? r->r.signal.value_or(0) : 0; }
int sbsh_result_timed_out(const sbsh_result* r) { return r != nullptr && r->r.timed_out ? 1 : 0; }
int sbsh_result_cancelled(const sbsh_result* r) { return r != nullptr && r->r.cancelled ? 1 : 0; }
int sbsh_result_shell_restarted(const sbsh_result* r) { return r != nullptr && r->r.shell_restarted ? 1 : 0; }
int sbsh_result_ran(const sbsh_result* r) { return r != nullptr && r->r.ran ? 1 : 0; }
const char* sbsh_result_stdout(const sbsh_result* r, size_t* len) {
  if (len != nullptr) *len = r != nullptr ? r->r.stdout_data.size() : 0;
  return r != nullptr ? r->r.stdout_data.c_str() : "";
}
const char* sbsh_result_stderr(const sbsh_result* r, size_t* len) {
  if (len != nullptr) *len = r != nullptr ? r->r.stderr_data.size() : 0;
  return r != nullptr ? r->r.stderr_data.c_str() : "";
}
int sbsh_result_stdout_truncated(const sbsh_result* r) { return r != nullptr && r->r.stdout_truncated ? 1 : 0; }
int sbsh_result_stderr_truncated(const sbsh_result* r) { return r != nullptr && r->r.stderr_truncated ? 1 : 0; }
uint64_t sbsh_result_stdout_omitted(const sbsh_result* r) { return r != nullptr ? r->r.stdout_omitted_bytes : 0; }
uint64_t sbsh_result_stderr_omitted(const sbsh_result* r) { return r != nullptr ? r->r.stderr_omitted_bytes : 0; }
int sbsh_result_running(const sbsh_result* r) { return r != nullptr && r->r.running ? 1 : 0; }
int sbsh_result_waiting_for_input(const sbsh_result* r) { return r != nullptr && r->r.waiting_for_input ? 1 : 0; }
const char* sbsh_result_prompt(const sbsh_result* r) { return r != nullptr ? r->r.prompt.c_str() : ""; }
const char* sbsh_result_screen(const sbsh_result* r) { return r != nullptr ? r->r.screen.c_str() : ""; }
uint64_t sbsh_result_stdout_bytes(const sbsh_result* r) { return r != nullptr ? r->r.stdout_bytes : 0; }
uint64_t sbsh_result_stderr_bytes(const sbsh_result* r) { return r != nullptr ? r->r.stderr_bytes : 0; }
uint64_t sbsh_result_command_id(const sbsh_result* r) { return r != nullptr ? r->r.command_id : 0; }

int sbsh_await_command(sbsh_conn* conn, uint64_t command_id, int64_t timeout_ms, size_t output_limit,
                       sbsh_result** out) {
  return guarded(conn, [&]() -> int {
    if (out == nullptr) return invalid(conn, "sbsh_await_command: out must not be NULL");
    if (timeout_ms < 0) return invalid(conn, "sbsh_await_command: timeout_ms must not be negative");
    auto r = conn->c.await_command(command_id, std::chrono::milliseconds(timeout_ms),
                                   output_limit > 0 ? output_limit : sbsh::client::exec_options{}.output_limit);
    if (!r) return fail(conn, r.err());
    *out = new sbsh_result{std::move(*r)};
    return SBSH_OK;
  });
}

int sbsh_command_input(sbsh_conn* conn, uint64_t command_id, const void* data, size_t len, int flags,
                       int64_t timeout_ms, sbsh_result** out) {
  return guarded(conn, [&]() -> int {
    if (data == nullptr && len > 0) return invalid(conn, "sbsh_command_input: data is NULL with a length");
    if ((flags & ~(SBSH_INPUT_TYPED | SBSH_INPUT_EOF | SBSH_INPUT_NO_WAIT)) != 0)
      return invalid(conn, "sbsh_command_input: flags takes SBSH_INPUT_TYPED, SBSH_INPUT_EOF and SBSH_INPUT_NO_WAIT");
    if (timeout_ms < 0) return invalid(conn, "sbsh_command_input: timeout_ms must not be negative");
    sbsh::client::input_options o;
    o.typed = (flags & SBSH_INPUT_TYPED) != 0;
    o.eof = (flags & SBSH_INPUT_EOF) != 0;
    o.wait = (flags & SBSH_INPUT_NO_WAIT) == 0;
    o.timeout = std::chrono::milliseconds(timeout_ms);
    auto r = conn->c.send_input(command_id, {static_cast<const char*>(data), len}, o);
    if (!r) return fail(conn, r.err());
    if (out != nullptr) *out = new sbsh_result{std::move(*r)};
    return SBSH_OK;
  });
}

int sbsh_kill_command(sbsh_conn* conn, uint64_t command_id, int sig, sbsh_result** out) {
  return guarded(conn, [&]() -> int {
    if (out == nullptr) return invalid(conn, "sbsh_kill_command: out must not be NULL");
    if (sig < 0 || sig > 64) return invalid(conn, "sbsh_kill_command: sig must be 0 (SIGTERM) or a signal number");
    auto r = conn->c.kill_command(command_id, sig);
    if (!r) return fail(conn, r.err());
    *out = new sbsh_result{std::move(*r)};
    return SBSH_OK;
  });
}
int sbsh_command_logs(sbsh_conn* conn, uint64_t command_id, int follow, int streams, int cancel_fd,
                      sbsh_output_fn fn, void* user, sbsh_result** out) {
  return sbsh_command_logs_since(conn, command_id, 0, 0, follow, streams, cancel_fd, fn, user, out);
}
int sbsh_command_logs_since(sbsh_conn* conn, uint64_t command_id, uint64_t stdout_offset, uint64_t stderr_offset,
                            int follow, int streams, int cancel_fd, sbsh_output_fn fn, void* user, sbsh_result** out) {
  return guarded(conn, [&]() -> int {
    if (fn == nullptr) return invalid(conn, "sbsh_command_logs: fn must not be NULL");
    sbsh::client::logs_options o;
    if (int rc = logs_options_of(conn, "sbsh_command_logs", follow, 0, streams, cancel_fd, o); rc != SBSH_OK) return rc;
    o.stdout_offset = stdout_offset;
    o.stderr_offset = stderr_offset;
    auto r = conn->c.command_logs(command_id, o, output_callback(fn, user));
    if (!r) return fail(conn, r.err());
    if (out != nullptr) *out = new sbsh_result{std::move(*r)};
    return SBSH_OK;
  });
}

uint64_t sbsh_result_duration_us(const sbsh_result* r) { return r != nullptr ? r->r.duration_us : 0; }
int64_t sbsh_result_started_at_ms(const sbsh_result* r) { return r != nullptr ? r->r.started_at_ms : 0; }
uint64_t sbsh_result_generation(const sbsh_result* r) { return r != nullptr ? r->r.generation : 0; }
int sbsh_result_state_lost(const sbsh_result* r) { return r != nullptr && r->r.state_lost ? 1 : 0; }
const char* sbsh_result_state_lost_reason(const sbsh_result* r) {
  return r != nullptr ? r->r.state_lost_reason.c_str() : "";
}
int sbsh_result_oom_killed(const sbsh_result* r) { return r != nullptr && r->r.oom_killed ? 1 : 0; }
int sbsh_result_ok(const sbsh_result* r) { return r != nullptr && r->r.ok() ? 1 : 0; }
const char* sbsh_result_error(const sbsh_result* r) { return r != nullptr ? r->r.error.c_str() : ""; }
void sbsh_result_free(sbsh_result* r) { delete r; }

// ---- Leases --------------------------------------------------------------------------------

namespace {

// The lease's connection for a call on it, or a reason (recorded) why there is none to use.
int lease_conn(const sbsh_lease* lease, const char* fn, sbsh_conn** conn) {
  if (lease == nullptr) return invalid(nullptr, std::string(fn) + ": the lease handle is NULL");
  if (lease->conn == nullptr || !lease->l)
    return invalid(nullptr, std::string(fn) +
                                ": the lease's connection was closed (sbsh_close), which released it; "
                                "free it with sbsh_lease_free");
  *conn = lease->conn;
  return SBSH_OK;
}

}  // namespace

int sbsh_lease_new(sbsh_conn* conn, const char* session, sbsh_lease** out) {
  return guarded(conn, [&]() -> int {
    if (out == nullptr) return invalid(conn, "sbsh_lease_new: out is NULL");
    std::string name = str_or_empty(session);
    auto l = conn->c.lease(name.empty() ? "default" : name);
    if (!l) return fail(conn, l.err());
    auto h = std::make_unique<sbsh_lease>();
    h->conn = conn;
    h->l.emplace(std::move(*l));
    h->shell_pid = h->l->shell_pid();
    h->generation = h->l->generation();
    conn->leases.push_back(h.get());
    *out = h.release();
    return SBSH_OK;
  });
}

int sbsh_lease_run(sbsh_lease* lease, const char* command, int64_t timeout_ms, sbsh_result** out) {
  sbsh_conn* conn = nullptr;
  if (int rc = lease_conn(lease, "sbsh_lease_run", &conn); rc != SBSH_OK) return rc;
  return guarded(conn, [&]() -> int {
    if (command == nullptr || out == nullptr) return invalid(conn, "sbsh_lease_run: command and out must not be NULL");
    if (timeout_ms < 0) return invalid(conn, "sbsh_lease_run: timeout_ms must not be negative (0: no timeout)");
    auto r = lease->l->run(command, static_cast<uint64_t>(timeout_ms));
    // The lease's socket, not the connection: a failure ends the lease (recorded, and the
    // connection serves again once it is released), never the connection.
    if (!r) return record(conn, status_for(r.err().code), r.err().code, r.err().message);
    *out = new sbsh_result{std::move(*r)};
    return SBSH_OK;
  });
}

int sbsh_lease_release(sbsh_lease* lease) {
  sbsh_conn* conn = nullptr;
  if (int rc = lease_conn(lease, "sbsh_lease_release", &conn); rc != SBSH_OK) return rc;
  return guarded(conn, [&]() -> int {
    if (auto s = lease->l->release(); !s) return fail(conn, s.err());
    return SBSH_OK;
  });
}

int sbsh_lease_held(const sbsh_lease* lease) {
  return lease != nullptr && lease->conn != nullptr && lease->l && lease->l->held() ? 1 : 0;
}
int64_t sbsh_lease_shell_pid(const sbsh_lease* lease) { return lease != nullptr ? lease->shell_pid : 0; }
uint64_t sbsh_lease_generation(const sbsh_lease* lease) { return lease != nullptr ? lease->generation : 0; }

void sbsh_lease_free(sbsh_lease* lease) {
  if (lease == nullptr) return;
  if (lease->conn != nullptr) {
    if (lease->l && lease->l->held()) (void)sbsh_lease_release(lease);
    auto& v = lease->conn->leases;
    v.erase(std::remove(v.begin(), v.end(), lease), v.end());
  }
  delete lease;  // its C++ lease, released above, has nothing left to tell sbshd
}

// ---- Sessions ------------------------------------------------------------------------------

int sbsh_session_create(sbsh_conn* conn, const char* name, const char* cwd, const char* const* env,
                        size_t env_count, const char* const* init, size_t init_count, const char* restart) {
  return sbsh_session_create_limited(conn, name, cwd, env, env_count, init, init_count, restart, nullptr, 0);
}

int sbsh_session_create_limited(sbsh_conn* conn, const char* name, const char* cwd, const char* const* env,
                                size_t env_count, const char* const* init, size_t init_count, const char* restart,
                                const char* const* limits, size_t limit_count) {
  sbsh_session_spec spec;
  sbsh_session_spec_init(&spec);
  spec.name = name;
  spec.cwd = cwd;
  spec.env = env;
  spec.env_count = env_count;
  spec.init = init;
  spec.init_count = init_count;
  spec.restart = restart;
  spec.limits = limits;
  spec.limit_count = limit_count;
  return sbsh_session_create_spec(conn, &spec);
}

// The size of each version of sbsh_session_spec: where the next version's fields begin.
constexpr size_t kSpecSizes[] = {offsetof(sbsh_session_spec, root), offsetof(sbsh_session_spec, setup),
                                 offsetof(sbsh_session_spec, confine), sizeof(sbsh_session_spec)};
static_assert(std::size(kSpecSizes) == SBSH_SESSION_SPEC_VERSION, "a new spec version needs its size here");

void sbsh_session_spec_init_size(sbsh_session_spec* spec, size_t size) {
  if (spec == nullptr || size < kSpecSizes[0]) return;  // too small for any version: left unset, so refused
  // The newest version that fits in the caller's structure; nothing past it is written.
  unsigned version = 1;
  while (version < std::size(kSpecSizes) && kSpecSizes[version] <= size) ++version;
  std::memset(spec, 0, kSpecSizes[version - 1]);
  spec->version = version;
}

// (The name in parentheses: sbsh.h makes sbsh_session_spec_init a macro.) Programs built
// before the macro existed call this one; the only structure they can be sure to have is
// version 1's, which came with the first release.
void(sbsh_session_spec_init)(sbsh_session_spec* spec) { sbsh_session_spec_init_size(spec, kSpecSizes[0]); }

int sbsh_session_create_spec(sbsh_conn* conn, const sbsh_session_spec* spec) {
  return sbsh_session_create_spec_output(conn, spec, nullptr, nullptr);
}

int sbsh_session_create_spec_output(sbsh_conn* conn, const sbsh_session_spec* spec, sbsh_output_fn on_output,
                                    void* user) {
  return guarded(conn, [&]() -> int {
    if (spec == nullptr) return invalid(conn, "sbsh_session_create: spec is NULL");
    // Older versions, the same structure without the fields added since, are still taken:
    // nothing past what their version has is read.
    if (spec->version < 1 || spec->version > SBSH_SESSION_SPEC_VERSION)
      return invalid(conn, "sbsh_session_create_spec: spec.version is " + std::to_string(spec->version) +
                               "; initialize the spec with sbsh_session_spec_init()");
    if (spec->name == nullptr) return invalid(conn, "sbsh_session_create: name is NULL");
    sbsh::client::session_spec s;
    std::string why;
    if (!strings(spec->env, spec->env_count, "env", &s.env, &why) ||
        !strings(spec->init, spec->init_count, "init", &s.init, &why) ||
        !strings(spec->limits, spec->limit_count, "limits", &s.limits, &why))
      return invalid(conn, "sbsh_session_create: " + why);
    s.name = spec->name;
    s.cwd = str_or_empty(spec->cwd);
    s.snapshot = str_or_empty(spec->snapshot);
    if (spec->version >= 2) s.root = str_or_empty(spec->root);
    if (spec->version >= 3) {
      s.setup = str_or_empty(spec->setup);
      if (!strings(spec->setup_keys, spec->setup_key_count, "setup_keys", &s.setup_keys, &why))
        return invalid(conn, "sbsh_session_create: " + why);
    }
    if (spec->version >= 4) {
      s.confine = spec->confine != 0;
      if (s.confine && s.root.empty() && s.snapshot.empty())
        return invalid(conn, "sbsh_session_create: confine confines the session to its root: set root or snapshot too");
      if (!strings(spec->allow_write, spec->allow_write_count, "allow_write", &s.allow_write, &why) ||
          !strings(spec->allow_read, spec->allow_read_count, "allow_read", &s.allow_read, &why) ||
          !strings(spec->read_only, spec->read_only_count, "read_only", &s.read_only, &why))
        return invalid(conn, "sbsh_session_create: " + why);
      if (!s.confine && (!s.allow_write.empty() || !s.allow_read.empty() || !s.read_only.empty()))
        return invalid(conn, "sbsh_session_create: allow_write, allow_read and read_only add to a confined "
                             "session's rules: set confine too");
      for (const auto* list : {&s.allow_write, &s.allow_read, &s.read_only})
        for (const auto& p : *list)
          if (p.empty() || p[0] != '/')
            return invalid(conn, "sbsh_session_create: the path '" + p +
                                     "' a confined session is allowed must be absolute");
      s.no_network = spec->no_network != 0;
      s.memory_max = spec->memory_max;
      s.pids_max = spec->pids_max;
      s.cpu_millis = spec->cpu_millis;
    }
    if (spec->restart != nullptr) s.restart = spec->restart;
    auto r = on_output != nullptr ? conn->c.create_session(s, output_callback(on_output, user))
                                  : conn->c.create_session(s);
    return r ? SBSH_OK : fail(conn, r.err());
  });
}

int sbsh_sessions_json(sbsh_conn* conn, char** json_out) {
  return guarded(conn,
                 [&] { return json_reply(conn, "sbsh_sessions_json", json_out, [&] { return conn->c.sessions(); }); });
}

int sbsh_session_show_json(sbsh_conn* conn, const char* name, char** json_out) {
  return guarded(conn, [&]() -> int {
    if (name == nullptr || json_out == nullptr)
      return invalid(conn, "sbsh_session_show_json: name and json_out must not be NULL");
    return json_reply(conn, "sbsh_session_show_json", json_out, [&] { return conn->c.show_session(name); });
  });
}

int sbsh_session_remove(sbsh_conn* conn, const char* name) {
  return guarded(conn, [&]() -> int {
    if (name == nullptr) return invalid(conn, "sbsh_session_remove: name is NULL");
    auto r = conn->c.remove_session(name);
    return r ? SBSH_OK : fail(conn, r.err());
  });
}

int sbsh_session_remove_keep_copy(sbsh_conn* conn, const char* name, char** path_out) {
  return guarded(conn, [&]() -> int {
    if (name == nullptr) return invalid(conn, "sbsh_session_remove_keep_copy: name is NULL");
    auto r = conn->c.remove_session(name, true);
    if (!r) return fail(conn, r.err());
    return give_string(*r, path_out);
  });
}

int sbsh_session_restart(sbsh_conn* conn, const char* name) {
  return guarded(conn, [&]() -> int {
    if (name == nullptr) return invalid(conn, "sbsh_session_restart: name is NULL");
    auto r = conn->c.restart_session(name);
    return r ? SBSH_OK : fail(conn, r.err());
  });
}

int sbsh_request_json(sbsh_conn* conn, const char* request_json, char** reply_json) {
  return guarded(conn, [&]() -> int {
    if (request_json == nullptr || reply_json == nullptr)
      return invalid(conn, "sbsh_request_json: request_json and reply_json must not be NULL");
    auto r = sbsh::client::request_json(conn->c, std::string_view(request_json));
    if (!r) return fail(conn, r.err());
    return give_string(*r, reply_json);
  });
}

int sbsh_session_prune(sbsh_conn* conn, int64_t idle_ms, char** json_out) {
  return guarded(conn, [&]() -> int {
    if (idle_ms < 0) return invalid(conn, "sbsh_session_prune: idle_ms must not be negative");
    auto names = conn->c.prune_sessions(std::chrono::milliseconds(idle_ms));
    if (!names) return fail(conn, names.err());
    return give_string(sbsh::client::to_json(*names), json_out);
  });
}

int sbsh_kept_copies_json(sbsh_conn* conn, char** json_out) {
  return guarded(conn, [&] {
    return json_reply(conn, "sbsh_kept_copies_json", json_out, [&] { return conn->c.kept_copies(); });
  });
}

int sbsh_kept_copies_prune(sbsh_conn* conn, char** json_out) {
  return guarded(conn, [&]() -> int {
    auto v = conn->c.prune_kept_copies();
    if (!v) return fail(conn, v.err());
    return give_string(sbsh::client::to_json(*v, false), json_out);
  });
}

// ---- Environments --------------------------------------------------------------------------

int sbsh_environments_json(sbsh_conn* conn, char** json_out) {
  return guarded(conn, [&] {
    return json_reply(conn, "sbsh_environments_json", json_out, [&] { return conn->c.environments(); });
  });
}

int sbsh_environment_remove(sbsh_conn* conn, const char* hash, int force) {
  return guarded(conn, [&]() -> int {
    if (hash == nullptr) return invalid(conn, "sbsh_environment_remove: hash is NULL");
    auto r = conn->c.remove_environment(hash, force != 0);
    return r ? SBSH_OK : fail(conn, r.err());
  });
}

int sbsh_environments_prune(sbsh_conn* conn, int64_t keep, int64_t older_than_ms, char** json_out) {
  return guarded(conn, [&]() -> int {
    if (keep < -1) return invalid(conn, "sbsh_environments_prune: keep must be a count, or -1 for no bound");
    if (older_than_ms < 0) return invalid(conn, "sbsh_environments_prune: older_than_ms must not be negative");
    std::optional<uint64_t> k;
    if (keep >= 0) k = static_cast<uint64_t>(keep);
    auto v = conn->c.prune_environments(k, std::chrono::milliseconds(older_than_ms));
    if (!v) return fail(conn, v.err());
    return give_string(sbsh::client::to_json(*v), json_out);
  });
}

// ---- Background processes ------------------------------------------------------------------

int sbsh_start(sbsh_conn* conn, const char* command, const char* session, const char* name, const char* cwd,
               const char* const* env, size_t env_count, uint64_t* id_out) {
  return guarded(conn, [&]() -> int {
    if (command == nullptr) return invalid(conn, "sbsh_start: command is NULL");
    sbsh::client::start_options o;
    std::string why;
    if (!strings(env, env_count, "env", &o.env, &why)) return invalid(conn, "sbsh_start: " + why);
    o.command = command;
    o.session = str_or_empty(session);
    o.name = str_or_empty(name);
    o.cwd = str_or_empty(cwd);
    auto p = conn->c.start(o);
    if (!p) return fail(conn, p.err());
    if (id_out != nullptr) *id_out = p->id;
    return SBSH_OK;
  });
}

int sbsh_processes_json(sbsh_conn* conn, int include_finished, char** json_out) {
  return guarded(conn, [&] {
    return json_reply(conn, "sbsh_processes_json", json_out, [&] { return conn->c.processes(include_finished != 0); });
  });
}

int sbsh_commands_json(sbsh_conn* conn, int include_finished, char** json_out) {
  return guarded(conn, [&] {
    return json_reply(conn, "sbsh_commands_json", json_out, [&] { return conn->c.commands(include_finished != 0); });
  });
}

int sbsh_kill(sbsh_conn* conn, const char* proc, int signal, sbsh_proc** out) {
  return guarded(conn, [&]() -> int {
    if (proc == nullptr) return invalid(conn, "sbsh_kill: proc is NULL");
    if (signal < 0 || signal >= NSIG) return invalid(conn, "sbsh_kill: no such signal " + std::to_string(signal));
    auto p = conn->c.kill(proc, signal);
    if (!p) return fail(conn, p.err());
    give_proc(std::move(*p), out);
    return SBSH_OK;
  });
}

int sbsh_wait(sbsh_conn* conn, const char* proc, int64_t timeout_ms, sbsh_proc** out) {
  return guarded(conn, [&]() -> int {
    if (proc == nullptr) return invalid(conn, "sbsh_wait: proc is NULL");
    if (timeout_ms < 0) return invalid(conn, "sbsh_wait: timeout_ms must not be negative");
    auto p = conn->c.wait(proc, std::chrono::milliseconds(timeout_ms));
    if (!p) return fail(conn, p.err());
    give_proc(std::move(*p), out);
    return SBSH_OK;
  });
}

int sbsh_logs(sbsh_conn* conn, const char* proc, int follow, uint64_t tail, int streams, int cancel_fd,
              sbsh_output_fn fn, void* user, sbsh_proc** out) {
  return guarded(conn, [&]() -> int {
    if (proc == nullptr || fn == nullptr) return invalid(conn, "sbsh_logs: proc and fn must not be NULL");
    sbsh::client::logs_options o;
    if (int rc = logs_options_of(conn, "sbsh_logs", follow, tail, streams, cancel_fd, o); rc != SBSH_OK) return rc;
    auto p = conn->c.logs(proc, o, output_callback(fn, user));
    if (!p) return fail(conn, p.err());
    give_proc(std::move(*p), out);
    return SBSH_OK;
  });
}

uint64_t sbsh_proc_id(const sbsh_proc* p) { return p != nullptr ? p->p.id : 0; }
const char* sbsh_proc_name(const sbsh_proc* p) { return p != nullptr ? p->p.name.c_str() : ""; }
const char* sbsh_proc_session(const sbsh_proc* p) { return p != nullptr ? p->p.session.c_str() : ""; }
const char* sbsh_proc_command(const sbsh_proc* p) { return p != nullptr ? p->p.command.c_str() : ""; }
const char* sbsh_proc_state(const sbsh_proc* p) { return p != nullptr ? p->p.state.c_str() : ""; }
int64_t sbsh_proc_pid(const sbsh_proc* p) { return p != nullptr ? p->p.pid : 0; }
int sbsh_proc_has_exit_code(const sbsh_proc* p) { return p != nullptr && p->p.exit_code ? 1 : 0; }
int sbsh_proc_exit_code(const sbsh_proc* p) { return p != nullptr ? p->p.exit_code.value_or(-1) : -1; }
int sbsh_proc_signal(const sbsh_proc* p) { return p != nullptr ? p->p.signal.value_or(0) : 0; }
int64_t sbsh_proc_started_at_ms(const sbsh_proc* p) { return p != nullptr ? p->p.started_at_ms : 0; }
int64_t sbsh_proc_ended_at_ms(const sbsh_proc* p) { return p != nullptr ? p->p.ended_at_ms : 0; }
const char* sbsh_proc_error(const sbsh_proc* p) { return p != nullptr ? p->p.error.c_str() : ""; }
const char* sbsh_proc_log_path(const sbsh_proc* p) { return p != nullptr ? p->p.log_path.c_str() : ""; }
void sbsh_proc_free(sbsh_proc* p) { delete p; }

// ---- The daemon ----------------------------------------------------------------------------

int sbsh_status_json(sbsh_conn* conn, char** json_out) {
  return guarded(conn,
                 [&] { return json_reply(conn, "sbsh_status_json", json_out, [&] { return conn->c.status(); }); });
}

namespace {

int shutdown_daemon(sbsh_conn* conn, bool keep_sessions) {
  return guarded(conn, [&]() -> int {
    auto r = conn->c.shutdown(keep_sessions);
    if (!r) return fail(conn, r.err());
    // sbshd closes the connection as it exits: nothing more can be asked on it.
    conn->broken = "sbshd was shut down through this connection; close it";
    return SBSH_OK;
  });
}

}  // namespace

// ---- Files beneath a session's root -----------------------------------------------------------

namespace {

// Checks the file calls' common arguments; an error status when one is wrong.
int check_file_args(sbsh_conn* conn, std::string_view fn, const char* path) {
  if (path == nullptr) return invalid(conn, fmt::format("{}: path is NULL", fn));
  return SBSH_OK;
}

}  // namespace

int sbsh_file_write_fd(sbsh_conn* conn, const char* session, const char* path, int in_fd, int mode, int parents,
                       uint64_t* written) {
  return guarded(conn, [&]() -> int {
    if (int s = check_file_args(conn, "sbsh_file_write_fd", path); s != SBSH_OK) return s;
    if (in_fd < 0) return invalid(conn, "sbsh_file_write_fd: in_fd is negative");
    if (mode > 07777) return invalid(conn, "sbsh_file_write_fd: mode is not a permission mode (-1, or 0 to 07777)");
    auto n = conn->c.write_file(str_or_empty(session), path, in_fd, write_options(mode, parents));
    if (!n) return fail(conn, n.err());
    if (written != nullptr) *written = *n;
    return SBSH_OK;
  });
}

int sbsh_file_write(sbsh_conn* conn, const char* session, const char* path, const void* data, size_t len, int mode,
                    int parents) {
  return guarded(conn, [&]() -> int {
    if (int s = check_file_args(conn, "sbsh_file_write", path); s != SBSH_OK) return s;
    if (data == nullptr && len > 0) return invalid(conn, "sbsh_file_write: data is NULL");
    if (mode > 07777) return invalid(conn, "sbsh_file_write: mode is not a permission mode (-1, or 0 to 07777)");
    std::string_view bytes(static_cast<const char*>(data), data == nullptr ? 0 : len);
    auto n = conn->c.write_file(str_or_empty(session), path, bytes, write_options(mode, parents));
    return n ? SBSH_OK : fail(conn, n.err());
  });
}

int sbsh_file_read_fd(sbsh_conn* conn, const char* session, const char* path, int out_fd, uint64_t offset,
                      int64_t length, uint64_t* copied) {
  return guarded(conn, [&]() -> int {
    if (int s = check_file_args(conn, "sbsh_file_read_fd", path); s != SBSH_OK) return s;
    if (out_fd < 0) return invalid(conn, "sbsh_file_read_fd: out_fd is negative");
    auto n = conn->c.read_file(str_or_empty(session), path, out_fd, read_options(offset, length));
    if (!n) return fail(conn, n.err());
    if (copied != nullptr) *copied = *n;
    return SBSH_OK;
  });
}

int sbsh_file_read(sbsh_conn* conn, const char* session, const char* path, uint64_t offset, int64_t length,
                   char** data_out, size_t* len_out) {
  return guarded(conn, [&]() -> int {
    if (int s = check_file_args(conn, "sbsh_file_read", path); s != SBSH_OK) return s;
    if (data_out == nullptr || len_out == nullptr) return invalid(conn, "sbsh_file_read: data_out and len_out must not be NULL");
    std::string bytes;
    auto n = conn->c.read_file(str_or_empty(session), path, [&bytes](std::string_view d) { bytes.append(d); },
                               read_options(offset, length));
    if (!n) return fail(conn, n.err());
    char* out = static_cast<char*>(std::malloc(bytes.size() + 1));
    if (out == nullptr) return record(conn, SBSH_ERR_INTERNAL, "internal", "out of memory");
    std::memcpy(out, bytes.data(), bytes.size());
    out[bytes.size()] = '\0';
    *data_out = out;
    *len_out = bytes.size();
    return SBSH_OK;
  });
}

int sbsh_file_stat_json(sbsh_conn* conn, const char* session, const char* path, char** json_out) {
  return guarded(conn, [&]() -> int {
    if (int s = check_file_args(conn, "sbsh_file_stat_json", path); s != SBSH_OK) return s;
    return json_reply(conn, "sbsh_file_stat_json", json_out,
                      [&] { return conn->c.stat_file(str_or_empty(session), path); });
  });
}

int sbsh_file_list_json(sbsh_conn* conn, const char* session, const char* path, int recursive, char** json_out) {
  return guarded(conn, [&] {
    return json_reply(conn, "sbsh_file_list_json", json_out,
                      [&] { return conn->c.list_files(str_or_empty(session), str_or_empty(path), recursive != 0); });
  });
}

int sbsh_file_remove(sbsh_conn* conn, const char* session, const char* path, int recursive) {
  return guarded(conn, [&]() -> int {
    if (int s = check_file_args(conn, "sbsh_file_remove", path); s != SBSH_OK) return s;
    auto r = conn->c.remove_file(str_or_empty(session), path, recursive != 0);
    return r ? SBSH_OK : fail(conn, r.err());
  });
}

int sbsh_file_mkdir(sbsh_conn* conn, const char* session, const char* path, int parents) {
  return guarded(conn, [&]() -> int {
    if (int s = check_file_args(conn, "sbsh_file_mkdir", path); s != SBSH_OK) return s;
    auto r = conn->c.make_directory(str_or_empty(session), path, parents != 0);
    return r ? SBSH_OK : fail(conn, r.err());
  });
}

int sbsh_file_move(sbsh_conn* conn, const char* session, const char* from, const char* to) {
  return guarded(conn, [&]() -> int {
    if (from == nullptr || to == nullptr) return invalid(conn, "sbsh_file_move: from and to must not be NULL");
    auto r = conn->c.move_file(str_or_empty(session), from, to);
    return r ? SBSH_OK : fail(conn, r.err());
  });
}

int sbsh_file_edit(sbsh_conn* conn, const char* session, const char* path, const void* old_text, size_t old_len,
                   const void* new_text, size_t new_len, int replace_all, char** json_out) {
  return guarded(conn, [&]() -> int {
    if (int s = check_file_args(conn, "sbsh_file_edit", path); s != SBSH_OK) return s;
    if (old_text == nullptr || old_len == 0)
      return invalid(conn, "sbsh_file_edit: old_text is empty: give the text to replace");
    if (new_text == nullptr && new_len > 0) return invalid(conn, "sbsh_file_edit: new_text is NULL");
    sbsh::client::file_edit_options o;
    o.replace_all = replace_all != 0;
    std::string_view from(static_cast<const char*>(old_text), old_len);
    std::string_view to(new_text == nullptr ? "" : static_cast<const char*>(new_text), new_len);
    auto r = conn->c.edit_file(str_or_empty(session), path, from, to, o);
    if (!r) return fail(conn, r.err());
    return give_string(sbsh::client::to_json(std::string_view(path), *r), json_out);
  });
}

int sbsh_file_read_lines(sbsh_conn* conn, const char* session, const char* path, int64_t line, int64_t count,
                         char** data_out, size_t* len_out, char** json_out) {
  return guarded(conn, [&]() -> int {
    if (int s = check_file_args(conn, "sbsh_file_read_lines", path); s != SBSH_OK) return s;
    if ((data_out == nullptr) != (len_out == nullptr))
      return invalid(conn, "sbsh_file_read_lines: data_out and len_out go together: both NULL or neither");
    if (line == 0)
      return invalid(conn, "sbsh_file_read_lines: line counts from 1, or from the end when negative; not 0");
    if (count < -1) return invalid(conn, "sbsh_file_read_lines: count is a number of lines, or -1 for all");
    sbsh::client::file_lines_options o;
    o.line = line;
    if (count >= 0) o.count = static_cast<uint64_t>(count);
    auto r = conn->c.read_lines(str_or_empty(session), path, o);
    if (!r) return fail(conn, r.err());
    if (data_out != nullptr) {
      *data_out = malloc_copy(r->content);
      *len_out = r->content.size();
    }
    return give_string(sbsh::client::to_json(std::string_view(path), *r), json_out);
  });
}

int sbsh_file_search_json(sbsh_conn* conn, const char* session, const char* pattern, const char* dir, const char* glob,
                          int ignore_case, char** json_out) {
  return guarded(conn, [&]() -> int {
    if (pattern == nullptr || *pattern == '\0')
      return invalid(conn, "sbsh_file_search_json: pattern is empty: give a regular expression");
    if (json_out == nullptr) return invalid(conn, "sbsh_file_search_json: json_out is NULL");
    sbsh::client::file_search_options o;
    o.path = str_or_empty(dir);
    o.glob = str_or_empty(glob);
    o.ignore_case = ignore_case != 0;
    return json_reply(conn, "sbsh_file_search_json", json_out,
                      [&] { return conn->c.search_files(str_or_empty(session), pattern, o); });
  });
}

int sbsh_file_list_depth_json(sbsh_conn* conn, const char* session, const char* path, uint64_t depth, char** json_out) {
  return guarded(conn, [&]() -> int {
    if (json_out == nullptr) return invalid(conn, "sbsh_file_list_depth_json: json_out is NULL");
    if (depth == 0) return invalid(conn, "sbsh_file_list_depth_json: depth is 0: give 1 or more levels");
    sbsh::client::file_list_options o;
    o.depth = depth;
    return json_reply(conn, "sbsh_file_list_depth_json", json_out,
                      [&] { return conn->c.list_files(str_or_empty(session), str_or_empty(path), o); });
  });
}

int sbsh_shutdown(sbsh_conn* conn) { return shutdown_daemon(conn, false); }

int sbsh_shutdown_keep_sessions(sbsh_conn* conn) { return shutdown_daemon(conn, true); }

}  // extern "C"

