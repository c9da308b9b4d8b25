// The ctypes prototypes of libsbsh's C ABI, from its declarations in sbsh/sbsh.h: each
// function's return and argument types are read from its C type (decltype), so the Python
// package's binding cannot drift from the header. The names are those the package calls,
// listed once below; sbsh-pygen writes them into sbsh/_cabi.py.
//
// The structures passed by pointer (sbsh_exec_opts, ...) and the callback types keep their
// ctypes classes in sbsh/_lib.py, which passes them to the generated prototypes().
//
// Internal: a build tool and its test include it, nothing installed.
#pragma once

#include <fmt/format.h>

#include <cstdint>
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
  out += SBSH_PY_PROTOTYPE(sbsh_run_opts_init);
  out += SBSH_PY_PROTOTYPE(sbsh_plan_check);
  out += SBSH_PY_PROTOTYPE(sbsh_run_plan);
  out += SBSH_PY_PROTOTYPE(sbsh_run_plan_file);
  return out;
}

#undef SBSH_PY_PROTOTYPE
#undef SBSH_PY_PROTOTYPE_AS

}  // namespace sbsh::client::py
