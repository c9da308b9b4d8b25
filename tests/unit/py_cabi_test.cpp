// python/gen/py_cabi.h: a C function's ctypes prototype follows from its declaration
// alone. The functions here are declared only in this test (never defined: the prototype is
// read from the type), as sbsh.h declares libsbsh's.
#include <gtest/gtest.h>

#include "python/gen/py_cabi.h"

extern "C" {
int sbsh_dummy_call(sbsh_conn* conn, const char* name, const char* const* argv, const void* data, size_t len,
                    int64_t timeout_ms, uint64_t* id_out, char** json_out);
const char* sbsh_dummy_text(const sbsh_result* r, int* status_out);
void sbsh_dummy_run(sbsh_exec_opts* opts, sbsh_output_fn on_output, void* user, unsigned version);

// A structure as sbsh.h declares its options (there with a typedef, which C needs).
struct sbsh_dummy_opts {
  unsigned int version;
  const char* name;
  const char* const* env;
  size_t env_count;
  int flag;
  int64_t timeout_ms;
  sbsh_output_fn on_output;
};
}

namespace sbsh::client::py_cabi_tests {

using py::prototype;

TEST(PyCabi, ADeclarationGivesItsPrototype) {
  // size_t is uint64_t's type where both are unsigned long (LP64): one ctypes type.
  std::string len = std::is_same_v<size_t, uint64_t> ? "U64" : "SZ";
  EXPECT_EQ(prototype<decltype(sbsh_dummy_call)>("sbsh_dummy_call"),
            "        \"sbsh_dummy_call\": (I, [P, S, SA, S, " + len + ", I64, ctypes.POINTER(U64), PP]),\n");
  EXPECT_EQ(prototype<decltype(sbsh_dummy_text)>("sbsh_dummy_text"),
            "        \"sbsh_dummy_text\": (S, [P, ctypes.POINTER(I)]),\n");
  EXPECT_EQ(prototype<decltype(sbsh_dummy_run)>("sbsh_dummy_run"),
            "        \"sbsh_dummy_run\": (None, [ctypes.POINTER(ExecOpts), OUTPUT_FN, P, ctypes.c_uint]),\n");
}

TEST(PyCabi, ARestypeGivenReplacesTheDeclaredOne) {
  EXPECT_EQ(prototype<decltype(sbsh_dummy_text)>("sbsh_dummy_text", "BUF"),
            "        \"sbsh_dummy_text\": (BUF, [P, ctypes.POINTER(I)]),\n");
}

TEST(PyCabi, EveryFunctionThePackageCallsIsListed) {
  std::string all = py::python_prototypes();
  for (std::string_view name : {"\"sbsh_exec\": (I, [P, ctypes.POINTER(ExecOpts), PP])",
                                "\"sbsh_result_stdout\": (BUF, ", "\"sbsh_run_plan_file\": (I, "})
    EXPECT_NE(all.find(name), std::string::npos) << name;
}

#define MEMBER(m) py::member<decltype(sbsh_dummy_opts::m)>(#m, offsetof(sbsh_dummy_opts, m))

std::string dummy_structure(std::initializer_list<py::c_member> members, std::string* error) {
  return py::c_structure("sbsh_dummy_opts", "DummyOpts", sizeof(sbsh_dummy_opts), alignof(sbsh_dummy_opts), members,
                         error);
}

TEST(PyCabi, AStructureGivesItsClass) {
  std::string error;
  std::string len = std::is_same_v<size_t, uint64_t> ? "U64" : "SZ";
  EXPECT_EQ(dummy_structure({MEMBER(version), MEMBER(name), MEMBER(env), MEMBER(env_count), MEMBER(flag),
                             MEMBER(timeout_ms), MEMBER(on_output)},
                            &error),
            "    class DummyOpts(ctypes.Structure):\n"
            "        \"\"\"sbsh_dummy_opts (sbsh.h).\"\"\"\n"
            "        _fields_ = [\n"
            "            (\"version\", ctypes.c_uint),\n"
            "            (\"name\", S),\n"
            "            (\"env\", SA),\n"
            "            (\"env_count\", " + len + "),\n"
            "            (\"flag\", I),\n"
            "            (\"timeout_ms\", I64),\n"
            "            (\"on_output\", OUTPUT_FN),\n"
            "        ]\n\n");
  EXPECT_EQ(error, "");
}

TEST(PyCabi, AMemberLeftOutOfAStructureIsAnError) {
  std::string error;
  EXPECT_EQ(dummy_structure({MEMBER(version), MEMBER(name), MEMBER(env_count), MEMBER(flag), MEMBER(timeout_ms),
                             MEMBER(on_output)},
                            &error),
            "");
  EXPECT_EQ(error, "sbsh_dummy_opts: a member between name and env_count is missing from python/gen/py_cabi.h");
  error.clear();
  EXPECT_EQ(dummy_structure({MEMBER(version), MEMBER(name), MEMBER(env), MEMBER(env_count), MEMBER(flag),
                             MEMBER(timeout_ms)},
                            &error),
            "");
  EXPECT_EQ(error, "sbsh_dummy_opts: a member after timeout_ms is missing from python/gen/py_cabi.h");
}

TEST(PyCabi, TheStructuresThePackageFillsMatchTheirDeclarations) {
  std::string error;
  std::string all = py::python_structures(&error);
  EXPECT_EQ(error, "");
  for (std::string_view name : {"class ExecOpts(ctypes.Structure)", "(\"interactive\", I)",
                                "class SessionSpec(ctypes.Structure)", "(\"cpu_millis\", U64)",
                                "class RunOpts(ctypes.Structure)", "(\"on_event\", EVENT_FN)"})
    EXPECT_NE(all.find(name), std::string::npos) << name;
}

#undef MEMBER

}  // namespace sbsh::client::py_cabi_tests
