// A verb is one declaration plus its handler, and every interface reaches it: each request a
// client may send (msg::all, route client_to_daemon) has a row in sbshd's dispatch table
// (which daemon/handlers.cpp also checks as it compiles), a seed in the fuzz corpus, a
// function of the C ABI (sbsh.h) and a method of the Python package, sync and async. A
// request the generic call sends (client/request_json.h) has sbsh_request_json and, unless
// python/gen/py_requests.h names it hand-written, generated methods; kBindings below names
// the others' function and methods. A request added without them, or a row left behind
// when a request goes, fails here with what is missing.
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>

#include <gtest/gtest.h>

#include "daemon/server.h"
#include "daemon/session.h"
#include "ipc/messages.h"
#include "python/gen/py_requests.h"

namespace sbsh::ipc::registry_tests {

// Where each request is reached from. A request that is one step of another's exchange
// (exec's stdin, a dialled write's chunks) names that exchange's function and method. A
// Python name starting with a capital is a class (the connection, the canceller).
struct binding {
  std::string_view request, c_function, python;
};
constexpr binding kBindings[] = {
    {"hello", "sbsh_connect", "Client"},
    {"session_create", "sbsh_session_create_spec", "create_session"},
    {"session_rm", "sbsh_session_remove", "remove_session"},
    {"session_prune", "sbsh_session_prune", "prune_sessions"},
    {"exec", "sbsh_exec", "exec"},
    {"stdin_data", "sbsh_exec", "exec"},
    {"stdin_eof", "sbsh_exec", "exec"},
    {"cancel", "sbsh_canceller_cancel", "Canceller"},
    {"release", "sbsh_exec", "exec"},
    {"command_wait", "sbsh_await_command", "await_command"},
    {"command_logs", "sbsh_command_logs", "command_logs"},
    {"command_kill", "sbsh_kill_command", "kill_command"},
    {"command_input", "sbsh_command_input", "send_input"},
    {"status", "sbsh_status_json", "status"},
    {"shutdown", "sbsh_shutdown", "shutdown"},
    {"proc_start", "sbsh_start", "start"},
    {"proc_list", "sbsh_processes_json", "processes"},
    {"proc_kill", "sbsh_kill", "kill"},
    {"proc_wait", "sbsh_wait", "wait"},
    {"proc_logs", "sbsh_logs", "logs"},
    {"file_read", "sbsh_file_read", "read_file"},
    {"file_write", "sbsh_file_write", "write_file"},
    {"file_data", "sbsh_file_write", "write_file"},
    {"file_close", "sbsh_file_write", "write_file"},
    {"file_stat", "sbsh_file_stat_json", "stat_file"},
    {"file_list", "sbsh_file_list_json", "list_files"},
    {"file_remove", "sbsh_file_remove", "remove_file"},
    {"file_mkdir", "sbsh_file_mkdir", "make_directory"},
    {"file_move", "sbsh_file_move", "move_file"},
    {"env_prune", "sbsh_environments_prune", "prune_environments"},
    {"lease", "sbsh_lease_new", "lease"},
};

std::string source(const std::string& path) {
  std::ifstream f(std::string(SBSH_SOURCE_DIR) + "/" + path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

const binding* binding_of(std::string_view request) {
  for (const auto& b : kBindings)
    if (b.request == request) return &b;
  return nullptr;
}

// Calls f(kind, generated) for every message of msg::all: generated when the generic call
// sends it and its Python methods are generated.
template <typename F>
void each_message(F&& f) {
  std::apply([&](auto... m) { (f(decltype(m)::kind, client::py::generated<decltype(m)>()), ...); }, msg::all{});
}

TEST(registry, EveryRequestHasAHandlerAFuzzSeedACFunctionAndAPythonMethod) {
  const std::string header = source("client/include/sbsh/sbsh.h");
  const std::string sync_py = source("python/sbsh/client.py");
  const std::string async_py = source("python/sbsh/aio.py");
  ASSERT_FALSE(header.empty() || sync_py.empty() || async_py.empty()) << "the sources are not at " SBSH_SOURCE_DIR;
  std::set<std::string_view> requests;
  each_message([&](const message_kind& k, bool generated) {
    SCOPED_TRACE(std::string(k.name));
    bool request = k.dir == route::client_to_daemon;
    EXPECT_EQ(daemon::server::handles(k.type), request)
        << (request ? "not in SBSH_REQUEST_HANDLERS (daemon/handlers.h)" : "a handler for what no client sends");
    if (!request) return;
    requests.insert(k.name);
    std::ifstream seed(std::string(SBSH_SOURCE_DIR) + "/tests/fuzz/corpus/requests/" + std::string(k.name));
    EXPECT_TRUE(seed.good()) << "no seed: add it to tests/fuzz/seeds.cpp and write the corpus with fuzz_seeds";
    const binding* b = binding_of(k.name);
    if (generated) {
      EXPECT_EQ(b, nullptr) << "its methods are generated (python/gen/py_requests.h): no row in kBindings";
      EXPECT_NE(header.find(" sbsh_request_json("), std::string::npos);
      return;
    }
    if (b == nullptr) {
      ADD_FAILURE() << "no row in kBindings: name the C function and Python method that send it";
      return;
    }
    EXPECT_NE(header.find(" " + std::string(b->c_function) + "("), std::string::npos)
        << b->c_function << " is not declared in sbsh.h";
    if (std::isupper(static_cast<unsigned char>(b->python[0])) != 0) {
      EXPECT_NE(sync_py.find("class " + std::string(b->python)), std::string::npos) << b->python;
    } else {
      EXPECT_NE(sync_py.find("    def " + std::string(b->python) + "("), std::string::npos)
          << "Client." << b->python << " is missing from python/sbsh/client.py";
      EXPECT_NE(async_py.find("    async def " + std::string(b->python) + "("), std::string::npos)
          << "AsyncClient." << b->python << " is missing from python/sbsh/aio.py";
    }
  });
  for (const auto& b : kBindings)
    EXPECT_TRUE(requests.count(b.request) == 1) << b.request << " in kBindings is not a request of msg::all";
}

}  // namespace sbsh::ipc::registry_tests
