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

}  // namespace sbsh::client::py_cabi_tests
