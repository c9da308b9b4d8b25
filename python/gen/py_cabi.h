// The ctypes prototypes of libsbsh's C ABI, from its declarations in sbsh/sbsh.h: each
// function's return and argument types are read from its C type (decltype), so the Python
// package's binding cannot drift from the header. The names are those the package calls,
// listed once below; sbsh-pygen writes them into sbsh/_cabi.py.
//
// The structures passed by pointer (sbsh_exec_opts, ...) get their ctypes classes the same
// way: each member's type is read from its declaration, and the list of members is checked
// against the structure's layout, so that one left out is an error of the build, not a
// misread field. The callback types keep their definitions in sbsh/_lib.py.
//
// Internal: a build tool and its test include it, nothing installed.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

#include "sbsh/sbsh.h"

namespace sbsh::client::py {

// A C type as the ctypes type the package names it by (the aliases prototypes() defines).
template <typename T>
std::string ctype_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_void_v<U>) {
    return "None";
  } else if constexpr (std::is_same_v<U, sbsh_output_fn>) {
    return "OUTPUT_FN";
  } else if constexpr (std::is_same_v<U, sbsh_event_fn>) {
    return "EVENT_FN";
  } else if constexpr (std::is_pointer_v<U>) {
    using V = std::remove_cv_t<std::remove_pointer_t<U>>;
    if constexpr (std::is_same_v<V, char> || std::is_void_v<V>) {
      // A C string, or bytes passed with their length (const void*); a void* that is not
      // const is the caller's own pointer (user data).
      return std::is_same_v<V, char> || std::is_const_v<std::remove_pointer_t<U>> ? "S" : "P";
    } else if constexpr (std::is_same_v<V, const char*>) {
      return "SA";  // const char* const*: an array of C strings
    } else if constexpr (std::is_pointer_v<V>) {
      return "PP";  // where a handle or a malloc'd buffer is stored
    } else if constexpr (std::is_same_v<V, sbsh_exec_opts>) {
      return "ctypes.POINTER(ExecOpts)";
    } else if constexpr (std::is_same_v<V, sbsh_session_spec>) {
      return "ctypes.POINTER(SessionSpec)";
    } else if constexpr (std::is_same_v<V, sbsh_run_opts>) {
      return "ctypes.POINTER(RunOpts)";
    } else if constexpr (std::is_arithmetic_v<V>) {
      return fmt::format("ctypes.POINTER({})", ctype_of<V>());
    } else {
      return "P";  // an opaque handle: sbsh_conn*, sbsh_result*, ...
    }
  } else if constexpr (std::is_same_v<U, int>) {
    return "I";
  } else if constexpr (std::is_same_v<U, unsigned>) {
    return "ctypes.c_uint";
  } else if constexpr (std::is_same_v<U, int64_t>) {
    return "I64";
  } else if constexpr (std::is_same_v<U, uint64_t>) {
    return "U64";  // size_t too where it is the same type (LP64)
  } else if constexpr (std::is_same_v<U, size_t>) {
    return "SZ";
  } else {
    static_assert(sizeof(T) == 0, "a C type the prototypes have no ctypes name for");
  }
}

// One function's entry, "name": (restype, [argtypes]), from its type alone (no reference to
// the function itself: the generator does not link libsbsh).
template <typename F>
struct c_function;
template <typename R, typename... A>
struct c_function<R(A...)> {
  static std::string entry(std::string_view name, std::string_view restype) {
    std::string args;
    ((args += (args.empty() ? "" : ", ") + ctype_of<A>()), ...);
    return fmt::format("        \"{}\": ({}, [{}]),\n", name, restype.empty() ? ctype_of<R>() : std::string(restype),
                       args);
  }
};
template <typename F>
std::string prototype(std::string_view name, std::string_view restype = {}) {
  return c_function<F>::entry(name, restype);
}

// The functions the package calls, each as its entry of prototypes()' dictionary. The name is
// the function's own (a macro: the string and the declaration cannot differ).
#define SBSH_PY_PROTOTYPE(fn) prototype<decltype(fn)>(#fn)
#define SBSH_PY_PROTOTYPE_AS(fn, restype) prototype<decltype(fn)>(#fn, restype)

inline std::string python_prototypes() {
  std::string out;
  out += SBSH_PY_PROTOTYPE(sbsh_error_name);
  out += SBSH_PY_PROTOTYPE(sbsh_last_error);
  out += SBSH_PY_PROTOTYPE(sbsh_last_error_code);
  out += SBSH_PY_PROTOTYPE(sbsh_version);
  out += SBSH_PY_PROTOTYPE(sbsh_free);
  out += SBSH_PY_PROTOTYPE(sbsh_connect_ex);
  out += SBSH_PY_PROTOTYPE(sbsh_connect_dial);
  out += SBSH_PY_PROTOTYPE(sbsh_connect_host);
  out += SBSH_PY_PROTOTYPE(sbsh_close);
  out += SBSH_PY_PROTOTYPE(sbsh_socket_path);
  out += SBSH_PY_PROTOTYPE(sbsh_canceller_new);
  out += SBSH_PY_PROTOTYPE(sbsh_canceller_fd);
  out += SBSH_PY_PROTOTYPE(sbsh_canceller_cancel);
  out += SBSH_PY_PROTOTYPE(sbsh_canceller_signal);
  out += SBSH_PY_PROTOTYPE(sbsh_canceller_reset);
  out += SBSH_PY_PROTOTYPE(sbsh_canceller_free);
  out += SBSH_PY_PROTOTYPE(sbsh_exec_opts_init_size);
  out += SBSH_PY_PROTOTYPE(sbsh_exec);
  out += SBSH_PY_PROTOTYPE(sbsh_exec_start);
  out += SBSH_PY_PROTOTYPE(sbsh_exec_call_fd);
  out += SBSH_PY_PROTOTYPE(sbsh_exec_call_step);
  out += SBSH_PY_PROTOTYPE(sbsh_exec_call_free);
  out += SBSH_PY_PROTOTYPE(sbsh_result_has_exit_code);
  out += SBSH_PY_PROTOTYPE(sbsh_result_exit_code);
  out += SBSH_PY_PROTOTYPE(sbsh_result_signal);
  out += SBSH_PY_PROTOTYPE(sbsh_result_timed_out);
  out += SBSH_PY_PROTOTYPE(sbsh_result_cancelled);
  out += SBSH_PY_PROTOTYPE(sbsh_result_shell_restarted);
  out += SBSH_PY_PROTOTYPE(sbsh_result_ran);
  out += SBSH_PY_PROTOTYPE_AS(sbsh_result_stdout, "BUF");  // bytes that may hold NUL: read with their length
  out += SBSH_PY_PROTOTYPE_AS(sbsh_result_stderr, "BUF");  // bytes that may hold NUL: read with their length
  out += SBSH_PY_PROTOTYPE(sbsh_result_stdout_truncated);
  out += SBSH_PY_PROTOTYPE(sbsh_result_stderr_truncated);
  out += SBSH_PY_PROTOTYPE(sbsh_result_stdout_omitted);
  out += SBSH_PY_PROTOTYPE(sbsh_result_stderr_omitted);
  out += SBSH_PY_PROTOTYPE(sbsh_result_running);
  out += SBSH_PY_PROTOTYPE(sbsh_result_waiting_for_input);
  out += SBSH_PY_PROTOTYPE(sbsh_result_prompt);
  out += SBSH_PY_PROTOTYPE(sbsh_result_screen);
  out += SBSH_PY_PROTOTYPE(sbsh_result_stdout_bytes);
  out += SBSH_PY_PROTOTYPE(sbsh_result_stderr_bytes);
  out += SBSH_PY_PROTOTYPE(sbsh_result_command_id);
  out += SBSH_PY_PROTOTYPE(sbsh_await_command);
  out += SBSH_PY_PROTOTYPE(sbsh_kill_command);
  out += SBSH_PY_PROTOTYPE(sbsh_command_input);
  out += SBSH_PY_PROTOTYPE(sbsh_command_logs);
  out += SBSH_PY_PROTOTYPE(sbsh_command_logs_since);
  out += SBSH_PY_PROTOTYPE(sbsh_result_duration_us);
  out += SBSH_PY_PROTOTYPE(sbsh_result_started_at_ms);
  out += SBSH_PY_PROTOTYPE(sbsh_result_generation);
  out += SBSH_PY_PROTOTYPE(sbsh_result_state_lost);
  out += SBSH_PY_PROTOTYPE(sbsh_result_state_lost_reason);
  out += SBSH_PY_PROTOTYPE(sbsh_result_oom_killed);
  out += SBSH_PY_PROTOTYPE(sbsh_result_error);
  out += SBSH_PY_PROTOTYPE(sbsh_result_free);
  out += SBSH_PY_PROTOTYPE(sbsh_session_spec_init_size);
  out += SBSH_PY_PROTOTYPE(sbsh_session_create_spec);
  out += SBSH_PY_PROTOTYPE(sbsh_session_create_spec_output);
  out += SBSH_PY_PROTOTYPE(sbsh_sessions_json);
  out += SBSH_PY_PROTOTYPE(sbsh_session_show_json);
  out += SBSH_PY_PROTOTYPE(sbsh_session_remove);
  out += SBSH_PY_PROTOTYPE(sbsh_session_remove_keep_copy);
  out += SBSH_PY_PROTOTYPE(sbsh_session_restart);
  out += SBSH_PY_PROTOTYPE(sbsh_session_prune);
  out += SBSH_PY_PROTOTYPE(sbsh_kept_copies_json);
  out += SBSH_PY_PROTOTYPE(sbsh_kept_copies_prune);
  out += SBSH_PY_PROTOTYPE(sbsh_environments_json);
  out += SBSH_PY_PROTOTYPE(sbsh_environment_remove);
  out += SBSH_PY_PROTOTYPE(sbsh_environments_prune);
  out += SBSH_PY_PROTOTYPE(sbsh_start);
  out += SBSH_PY_PROTOTYPE(sbsh_processes_json);
  out += SBSH_PY_PROTOTYPE(sbsh_commands_json);
  out += SBSH_PY_PROTOTYPE(sbsh_kill);
  out += SBSH_PY_PROTOTYPE(sbsh_wait);
  out += SBSH_PY_PROTOTYPE(sbsh_logs);
  out += SBSH_PY_PROTOTYPE(sbsh_proc_id);
  out += SBSH_PY_PROTOTYPE(sbsh_proc_name);
  out += SBSH_PY_PROTOTYPE(sbsh_proc_session);
  out += SBSH_PY_PROTOTYPE(sbsh_proc_command);
  out += SBSH_PY_PROTOTYPE(sbsh_proc_state);
  out += SBSH_PY_PROTOTYPE(sbsh_proc_pid);
  out += SBSH_PY_PROTOTYPE(sbsh_proc_has_exit_code);
  out += SBSH_PY_PROTOTYPE(sbsh_proc_exit_code);
  out += SBSH_PY_PROTOTYPE(sbsh_proc_signal);
  out += SBSH_PY_PROTOTYPE(sbsh_proc_started_at_ms);
  out += SBSH_PY_PROTOTYPE(sbsh_proc_ended_at_ms);
  out += SBSH_PY_PROTOTYPE(sbsh_proc_error);
  out += SBSH_PY_PROTOTYPE(sbsh_proc_log_path);
  out += SBSH_PY_PROTOTYPE(sbsh_proc_free);
  out += SBSH_PY_PROTOTYPE(sbsh_file_write);
  out += SBSH_PY_PROTOTYPE(sbsh_file_write_fd);
  out += SBSH_PY_PROTOTYPE(sbsh_file_read);
  out += SBSH_PY_PROTOTYPE(sbsh_file_read_fd);
  out += SBSH_PY_PROTOTYPE(sbsh_file_stat_json);
  out += SBSH_PY_PROTOTYPE(sbsh_file_list_json);
  out += SBSH_PY_PROTOTYPE(sbsh_file_remove);
  out += SBSH_PY_PROTOTYPE(sbsh_file_mkdir);
  out += SBSH_PY_PROTOTYPE(sbsh_file_move);
  out += SBSH_PY_PROTOTYPE(sbsh_file_edit);
  out += SBSH_PY_PROTOTYPE(sbsh_file_read_lines);
  out += SBSH_PY_PROTOTYPE(sbsh_file_search_json);
  out += SBSH_PY_PROTOTYPE(sbsh_file_list_depth_json);
  out += SBSH_PY_PROTOTYPE(sbsh_status_json);
  out += SBSH_PY_PROTOTYPE(sbsh_shutdown);
  out += SBSH_PY_PROTOTYPE(sbsh_shutdown_keep_sessions);
  out += SBSH_PY_PROTOTYPE(sbsh_request_json);
  out += SBSH_PY_PROTOTYPE(sbsh_lease_new);
  out += SBSH_PY_PROTOTYPE(sbsh_lease_run);
  out += SBSH_PY_PROTOTYPE(sbsh_lease_release);
  out += SBSH_PY_PROTOTYPE(sbsh_lease_held);
  out += SBSH_PY_PROTOTYPE(sbsh_lease_shell_pid);
  out += SBSH_PY_PROTOTYPE(sbsh_lease_generation);
  out += SBSH_PY_PROTOTYPE(sbsh_lease_free);
  out += SBSH_PY_PROTOTYPE(sbsh_run_opts_init);
  out += SBSH_PY_PROTOTYPE(sbsh_plan_check);
  out += SBSH_PY_PROTOTYPE(sbsh_run_plan);
  out += SBSH_PY_PROTOTYPE(sbsh_run_plan_file);
  return out;
}


// A member of a structure, for its ctypes class: its name, its ctypes type, where it lies.
struct c_member {
  std::string_view name;
  std::string ctype;
  size_t offset, size, align;
};
template <typename T>
c_member member(std::string_view name, size_t offset) {
  return {name, ctype_of<T>(), offset, sizeof(T), alignof(T)};
}

// The ctypes class `py_name` of C structure `c_name` (of `size` bytes, aligned to `align`),
// from its members in order. A member left out of the list shows as a gap the layout does
// not have (one of the same size and alignment put in its place is not seen); *error then
// names where, and nothing is returned.
inline std::string c_structure(std::string_view c_name, std::string_view py_name, size_t size, size_t align,
                               std::initializer_list<c_member> members, std::string* error) {
  auto align_up = [](size_t n, size_t a) { return (n + a - 1) / a * a; };
  std::string fields;
  size_t end = 0;
  std::string_view last = "its start";
  for (const auto& m : members) {
    if (m.offset != align_up(end, m.align)) {
      *error = fmt::format("{}: a member between {} and {} is missing from python/gen/py_cabi.h", c_name, last, m.name);
      return {};
    }
    fields += fmt::format("            (\"{}\", {}),\n", m.name, m.ctype);
    end = m.offset + m.size;
    last = m.name;
  }
  if (align_up(end, align) != size) {
    *error = fmt::format("{}: a member after {} is missing from python/gen/py_cabi.h", c_name, last);
    return {};
  }
  return fmt::format("    class {}(ctypes.Structure):\n        \"\"\"{} (sbsh.h).\"\"\"\n        _fields_ = [\n{}        ]\n\n",
                     py_name, c_name, fields);
}

// A member of structure S: its name as a string and as a member cannot differ.
#define SBSH_PY_MEMBER(S, m) member<decltype(S::m)>(#m, offsetof(S, m))
#define SBSH_PY_STRUCT(S, py_name, ...) c_structure(#S, py_name, sizeof(S), alignof(S), {__VA_ARGS__}, error)

// A member added at a structure's end may fit in its padding, where the layout cannot show
// it missing: each structure's lists below are of the version named here, and a new version
// fails the build until its members are listed.
static_assert(SBSH_EXEC_OPTS_VERSION == 4, "sbsh_exec_opts has a new version: list its members below");
static_assert(SBSH_SESSION_SPEC_VERSION == 4, "sbsh_session_spec has a new version: list its members below");
static_assert(SBSH_RUN_OPTS_VERSION == 1, "sbsh_run_opts has a new version: list its members below");

// The structures the package fills, as the body of the generated structures(): each class
// in turn; "" with *error set when a list of members no longer matches its structure.
inline std::string python_structures(std::string* error) {
  std::string out;
  out += SBSH_PY_STRUCT(
      sbsh_exec_opts, "ExecOpts", SBSH_PY_MEMBER(sbsh_exec_opts, version), SBSH_PY_MEMBER(sbsh_exec_opts, command),
      SBSH_PY_MEMBER(sbsh_exec_opts, session), SBSH_PY_MEMBER(sbsh_exec_opts, cwd), SBSH_PY_MEMBER(sbsh_exec_opts, env),
      SBSH_PY_MEMBER(sbsh_exec_opts, env_count), SBSH_PY_MEMBER(sbsh_exec_opts, timeout_ms),
      SBSH_PY_MEMBER(sbsh_exec_opts, grace_ms), SBSH_PY_MEMBER(sbsh_exec_opts, stdin_data),
      SBSH_PY_MEMBER(sbsh_exec_opts, stdin_len), SBSH_PY_MEMBER(sbsh_exec_opts, stdin_fd),
      SBSH_PY_MEMBER(sbsh_exec_opts, on_output), SBSH_PY_MEMBER(sbsh_exec_opts, user),
      SBSH_PY_MEMBER(sbsh_exec_opts, stdout_fd), SBSH_PY_MEMBER(sbsh_exec_opts, stderr_fd),
      SBSH_PY_MEMBER(sbsh_exec_opts, output_limit), SBSH_PY_MEMBER(sbsh_exec_opts, cancel_fd),
      SBSH_PY_MEMBER(sbsh_exec_opts, session_cwd), SBSH_PY_MEMBER(sbsh_exec_opts, detach_after_ms),
      SBSH_PY_MEMBER(sbsh_exec_opts, keep), SBSH_PY_MEMBER(sbsh_exec_opts, tty), SBSH_PY_MEMBER(sbsh_exec_opts, cols),
      SBSH_PY_MEMBER(sbsh_exec_opts, rows), SBSH_PY_MEMBER(sbsh_exec_opts, interactive),
      SBSH_PY_MEMBER(sbsh_exec_opts, collect_output));
  out += SBSH_PY_STRUCT(
      sbsh_session_spec, "SessionSpec", SBSH_PY_MEMBER(sbsh_session_spec, version),
      SBSH_PY_MEMBER(sbsh_session_spec, name), SBSH_PY_MEMBER(sbsh_session_spec, cwd),
      SBSH_PY_MEMBER(sbsh_session_spec, env), SBSH_PY_MEMBER(sbsh_session_spec, env_count),
      SBSH_PY_MEMBER(sbsh_session_spec, init), SBSH_PY_MEMBER(sbsh_session_spec, init_count),
      SBSH_PY_MEMBER(sbsh_session_spec, restart), SBSH_PY_MEMBER(sbsh_session_spec, limits),
      SBSH_PY_MEMBER(sbsh_session_spec, limit_count), SBSH_PY_MEMBER(sbsh_session_spec, snapshot),
      SBSH_PY_MEMBER(sbsh_session_spec, root), SBSH_PY_MEMBER(sbsh_session_spec, setup),
      SBSH_PY_MEMBER(sbsh_session_spec, setup_keys), SBSH_PY_MEMBER(sbsh_session_spec, setup_key_count),
      SBSH_PY_MEMBER(sbsh_session_spec, confine), SBSH_PY_MEMBER(sbsh_session_spec, allow_write),
      SBSH_PY_MEMBER(sbsh_session_spec, allow_write_count), SBSH_PY_MEMBER(sbsh_session_spec, allow_read),
      SBSH_PY_MEMBER(sbsh_session_spec, allow_read_count), SBSH_PY_MEMBER(sbsh_session_spec, read_only),
      SBSH_PY_MEMBER(sbsh_session_spec, read_only_count), SBSH_PY_MEMBER(sbsh_session_spec, no_network),
      SBSH_PY_MEMBER(sbsh_session_spec, memory_max), SBSH_PY_MEMBER(sbsh_session_spec, pids_max),
      SBSH_PY_MEMBER(sbsh_session_spec, cpu_millis));
  out += SBSH_PY_STRUCT(sbsh_run_opts, "RunOpts", SBSH_PY_MEMBER(sbsh_run_opts, version),
                        SBSH_PY_MEMBER(sbsh_run_opts, session), SBSH_PY_MEMBER(sbsh_run_opts, keep_session),
                        SBSH_PY_MEMBER(sbsh_run_opts, output_limit), SBSH_PY_MEMBER(sbsh_run_opts, artifacts_dir),
                        SBSH_PY_MEMBER(sbsh_run_opts, report_path), SBSH_PY_MEMBER(sbsh_run_opts, events_path),
                        SBSH_PY_MEMBER(sbsh_run_opts, events_fd), SBSH_PY_MEMBER(sbsh_run_opts, cancel_fd),
                        SBSH_PY_MEMBER(sbsh_run_opts, on_event), SBSH_PY_MEMBER(sbsh_run_opts, user));
  return error->empty() ? out : std::string();
}

#undef SBSH_PY_PROTOTYPE
#undef SBSH_PY_PROTOTYPE_AS
#undef SBSH_PY_MEMBER
#undef SBSH_PY_STRUCT

}  // namespace sbsh::client::py
