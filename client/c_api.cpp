// The C ABI (sbsh.h) over the C++ API. No exception may cross it: every entry point catches.
#include "sbsh/sbsh.h"

#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "sbsh/client.h"

struct sbsh_conn {
  sbsh::client::connection c;
  std::string error, code;
};

struct sbsh_result {
  sbsh::client::exec_result r;
};

namespace {

int fail(sbsh_conn* conn, const sbsh::error& e) {
  conn->error = e.message;
  conn->code = e.code;
  if (e.code == "unreachable") return SBSH_ERR_UNREACHABLE;
  if (e.code == "io" || e.code == "eof" || e.code == "protocol") return SBSH_ERR_IO;
  if (e.code == "timeout") return SBSH_ERR_TIMEOUT;
  return SBSH_ERR_REFUSED;
}

template <typename F>
int guarded(sbsh_conn* conn, F&& f) {
  if (conn == nullptr) return SBSH_ERR_INVALID;
  try {
    return f();
  } catch (const std::exception& e) {
    conn->error = e.what();
    conn->code = "internal";
    return SBSH_ERR_INTERNAL;
  }
}

std::vector<std::string> strings(const char* const* v, size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; v != nullptr && i < n; ++i)
    if (v[i] != nullptr) out.emplace_back(v[i]);
  return out;
}

}  // namespace

extern "C" {

int sbsh_connect(const char* socket_path, int autostart, sbsh_conn** out) {
  if (out == nullptr) return SBSH_ERR_INVALID;
  try {
    sbsh::client::connect_options o;
    if (socket_path != nullptr) o.socket_path = socket_path;
    o.autostart = autostart != 0;
    auto c = sbsh::client::connection::connect(o);
    if (!c) return c.err().code == "unreachable" ? SBSH_ERR_UNREACHABLE : SBSH_ERR_IO;
    *out = new sbsh_conn{std::move(*c), {}, {}};
    return SBSH_OK;
  } catch (...) {
    return SBSH_ERR_INTERNAL;
  }
}

void sbsh_close(sbsh_conn* conn) { delete conn; }
const char* sbsh_last_error(const sbsh_conn* conn) { return conn != nullptr ? conn->error.c_str() : ""; }
const char* sbsh_last_error_code(const sbsh_conn* conn) { return conn != nullptr ? conn->code.c_str() : ""; }
const char* sbsh_version(void) { return SBSH_VERSION; }

int sbsh_exec(sbsh_conn* conn, const sbsh_exec_opts* opts, sbsh_result** out) {
  return guarded(conn, [&]() -> int {
    if (opts == nullptr || opts->command == nullptr || out == nullptr) return SBSH_ERR_INVALID;
    sbsh::client::exec_options o;
    if (opts->session != nullptr) o.session = opts->session;
    o.command = opts->command;
    if (opts->cwd != nullptr) o.cwd = opts->cwd;
    o.env = strings(opts->env, opts->env_count);
    o.timeout = std::chrono::milliseconds(opts->timeout_ms);
    if (opts->has_stdin) o.stdin_data = std::string(opts->stdin_data != nullptr ? opts->stdin_data : "", opts->stdin_len);
    if (opts->on_output != nullptr) {
      auto fn = opts->on_output;
      void* user = opts->user;
      o.on_output = [fn, user](sbsh::client::stream s, std::string_view d) { fn(user, static_cast<int>(s), d.data(), d.size()); };
    }
    if (opts->output_limit > 0) o.output_limit = opts->output_limit;
    auto r = conn->c.exec(o);
    if (!r) return fail(conn, r.err());
    *out = new sbsh_result{std::move(*r)};
    return SBSH_OK;
  });
}

int sbsh_result_exit_code(const sbsh_result* r, int* code) {
  if (r == nullptr || !r->r.exit_code) return 0;
  if (code != nullptr) *code = *r->r.exit_code;
  return 1;
}
int sbsh_result_signal(const sbsh_result* r) { return r != nullptr ? r->r.signal.value_or(0) : 0; }
int sbsh_result_flags(const sbsh_result* r) {
  if (r == nullptr) return 0;
  return (r->r.timed_out ? SBSH_TIMED_OUT : 0) | (r->r.shell_restarted ? SBSH_SHELL_RESTARTED : 0) |
         (r->r.cancelled ? SBSH_CANCELLED : 0) | (r->r.stdout_truncated ? SBSH_STDOUT_TRUNCATED : 0) |
         (r->r.stderr_truncated ? SBSH_STDERR_TRUNCATED : 0);
}
const char* sbsh_result_stdout(const sbsh_result* r, size_t* len) {
  if (len != nullptr) *len = r != nullptr ? r->r.stdout_data.size() : 0;
  return r != nullptr ? r->r.stdout_data.c_str() : "";
}
const char* sbsh_result_stderr(const sbsh_result* r, size_t* len) {
  if (len != nullptr) *len = r != nullptr ? r->r.stderr_data.size() : 0;
  return r != nullptr ? r->r.stderr_data.c_str() : "";
}
uint64_t sbsh_result_duration_us(const sbsh_result* r) { return r != nullptr ? r->r.duration_us : 0; }
int64_t sbsh_result_started_at_ms(const sbsh_result* r) { return r != nullptr ? r->r.started_at_ms : 0; }
const char* sbsh_result_error(const sbsh_result* r) { return r != nullptr ? r->r.error.c_str() : ""; }
void sbsh_result_free(sbsh_result* r) { delete r; }

int sbsh_session_create(sbsh_conn* conn, const char* name, const char* cwd, const char* const* env, size_t env_count,
                        const char* const* init, size_t init_count, const char* restart) {
  return guarded(conn, [&]() -> int {
    if (name == nullptr) return SBSH_ERR_INVALID;
    sbsh::client::session_spec s;
    s.name = name;
    if (cwd != nullptr) s.cwd = cwd;
    s.env = strings(env, env_count);
    s.init = strings(init, init_count);
    if (restart != nullptr) s.restart = restart;
    auto r = conn->c.create_session(s);
    return r ? SBSH_OK : fail(conn, r.err());
  });
}

int sbsh_session_list(sbsh_conn* conn, sbsh_session_fn fn, void* user) {
  return guarded(conn, [&]() -> int {
    if (fn == nullptr) return SBSH_ERR_INVALID;
    auto v = conn->c.sessions();
    if (!v) return fail(conn, v.err());
    for (const auto& s : *v) fn(user, s.name.c_str(), s.state.c_str(), s.shell_pid, s.wrapper_pid);
    return SBSH_OK;
  });
}

int sbsh_session_remove(sbsh_conn* conn, const char* name) {
  return guarded(conn, [&]() -> int {
    if (name == nullptr) return SBSH_ERR_INVALID;
    auto r = conn->c.remove_session(name);
    return r ? SBSH_OK : fail(conn, r.err());
  });
}

int sbsh_session_restart(sbsh_conn* conn, const char* name) {
  return guarded(conn, [&]() -> int {
    if (name == nullptr) return SBSH_ERR_INVALID;
    auto r = conn->c.restart_session(name);
    return r ? SBSH_OK : fail(conn, r.err());
  });
}

int sbsh_start(sbsh_conn* conn, const char* session, const char* name, const char* command, uint64_t* id_out) {
  return guarded(conn, [&]() -> int {
    if (command == nullptr) return SBSH_ERR_INVALID;
    sbsh::client::start_options o;
    if (session != nullptr) o.session = session;
    if (name != nullptr) o.name = name;
    o.command = command;
    auto p = conn->c.start(o);
    if (!p) return fail(conn, p.err());
    if (id_out != nullptr) *id_out = p->id;
    return SBSH_OK;
  });
}

int sbsh_kill(sbsh_conn* conn, const char* proc, int signal) {
  return guarded(conn, [&]() -> int {
    if (proc == nullptr) return SBSH_ERR_INVALID;
    auto p = conn->c.kill(proc, signal);
    return p ? SBSH_OK : fail(conn, p.err());
  });
}

int sbsh_wait(sbsh_conn* conn, const char* proc, int64_t timeout_ms, int* exit_code_out, char state_out[16]) {
  return guarded(conn, [&]() -> int {
    if (proc == nullptr) return SBSH_ERR_INVALID;
    auto p = conn->c.wait(proc, std::chrono::milliseconds(timeout_ms));
    if (!p) return fail(conn, p.err());
    if (exit_code_out != nullptr)
      *exit_code_out = p->exit_code ? *p->exit_code : (p->signal ? 128 + *p->signal : -1);
    if (state_out != nullptr) {
      std::strncpy(state_out, p->state.c_str(), 15);
      state_out[15] = '\0';
    }
    return SBSH_OK;
  });
}

int sbsh_logs(sbsh_conn* conn, const char* proc, int follow, uint64_t tail, sbsh_output_fn fn, void* user) {
  return guarded(conn, [&]() -> int {
    if (proc == nullptr || fn == nullptr) return SBSH_ERR_INVALID;
    sbsh::client::logs_options o;
    o.follow = follow != 0;
    o.tail = tail;
    auto p = conn->c.logs(proc, o, [fn, user](sbsh::client::stream s, std::string_view d) {
      fn(user, static_cast<int>(s), d.data(), d.size());
    });
    return p ? SBSH_OK : fail(conn, p.err());
  });
}

int sbsh_process_list(sbsh_conn* conn, int include_finished, sbsh_process_fn fn, void* user) {
  return guarded(conn, [&]() -> int {
    if (fn == nullptr) return SBSH_ERR_INVALID;
    auto v = conn->c.processes(include_finished != 0);
    if (!v) return fail(conn, v.err());
    for (const auto& p : *v)
      fn(user, p.id, p.name.c_str(), p.session.c_str(), p.state.c_str(), p.pid, p.exit_code.value_or(-1),
         p.command.c_str());
    return SBSH_OK;
  });
}

int sbsh_shutdown(sbsh_conn* conn) {
  return guarded(conn, [&]() -> int {
    auto r = conn->c.shutdown();
    return r ? SBSH_OK : fail(conn, r.err());
  });
}

}  // extern "C"
