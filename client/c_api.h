// The C ABI's own pieces (client/c_api.cpp), shared with the entry points of plans
// (plans/plan_c_api.cpp): the connection handle, and how a call records its failure for
// sbsh_last_error and keeps exceptions from crossing into C. Internal to libsbsh.
#pragma once

#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sbsh/client.h"
#include "sbsh/sbsh.h"

struct sbsh_conn {
  explicit sbsh_conn(sbsh::client::connection&& conn) : c(std::move(conn)) {}
  sbsh_conn(const sbsh_conn&) = delete;
  sbsh_conn& operator=(const sbsh_conn&) = delete;
  // Releases a lease still held on it and detaches the lease handles not freed yet, whose
  // C++ leases refer to the connection (client/c_api.cpp).
  ~sbsh_conn();
  sbsh::client::connection c;
  std::vector<sbsh_lease*> leases;  // granted on it (sbsh_lease_new) and not freed
  std::string error, code;  // of the most recent call on this handle ("" after a success)
  // Set when the handle cannot serve requests any more (an I/O or protocol failure left the
  // stream out of step, or the daemon was shut down): why, for the calls that follow.
  std::string broken;
};

namespace sbsh::c_abi {

// Records a failure (status, code, message) on `conn` (may be NULL) and on the calling thread;
// returns status.
int record(sbsh_conn* conn, int status, std::string_view code, std::string_view message);
// An error of the client library, as its SBSH_ERR_* status; one that leaves the connection out
// of step with sbshd marks the handle broken.
int fail(sbsh_conn* conn, const sbsh::error& e);
// A caller's mistake: SBSH_ERR_INVALID with code invalid_argument.
int invalid(sbsh_conn* conn, std::string_view message);
// Whether an error of this code leaves the connection unusable.
bool breaks_connection(std::string_view code);
std::string str_or_empty(const char* s);
char* malloc_copy(const std::string& s);

// Runs f() with no exception escaping: any becomes SBSH_ERR_INTERNAL, recorded on `conn`
// (may be NULL: connect, canceller_new) and on the calling thread.
template <typename F>
int guarded_no_conn(F&& f, sbsh_conn* conn = nullptr) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return record(conn, SBSH_ERR_INTERNAL, "internal", "out of memory");
  } catch (const std::exception& e) {
    return record(conn, SBSH_ERR_INTERNAL, "internal", e.what());
  } catch (...) {
    return record(conn, SBSH_ERR_INTERNAL, "internal", "unexpected exception in libsbsh");
  }
}

// Runs f() for a call on `conn`: checks the handle, clears its error, refuses a broken
// connection, and catches as guarded_no_conn does.
template <typename F>
int guarded(sbsh_conn* conn, F&& f) {
  if (conn == nullptr) return invalid(nullptr, "the connection handle is NULL");
  conn->error.clear();
  conn->code.clear();
  if (!conn->broken.empty()) return record(conn, SBSH_ERR_IO, "io", conn->broken);
  return guarded_no_conn(std::forward<F>(f), conn);
}

}  // namespace sbsh::c_abi
