// Fuzzes the plan reader: arbitrary text parsed as a plan (sbsh/plan.h, parse_plan), as JSON,
// as YAML and as either, which is what `sbsh run`, the C ABI's sbsh_plan_check and the Python
// package's run_plan take from their callers. Besides crashes, leaks, undefined behaviour,
// deep recursion and large allocations (an alias that expands a tree, one inside what it
// names), it checks that a refusal says why, with the code invalid_plan.
// Input: one byte choosing the format, then the text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "ipc/protocol.h"
#include "sbsh/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using sbsh::client::plan_format;
  const plan_format formats[] = {plan_format::detect, plan_format::json, plan_format::yaml};
  auto format = formats[data[0] % 3];
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto p = sbsh::client::parse_plan(text, format);
  if (!p && (p.err().message.empty() || p.err().code != "invalid_plan")) {
    std::fprintf(stderr, "fuzz_plans: a refusal without its reason or code: %s: %s\n", p.err().code.c_str(),
                 p.err().message.c_str());
    std::abort();
  }
  return 0;
}
