# Precompiled headers. msgpack-cxx, fmt, spdlog, GoogleTest and nlohmann-json take most of a
# source's compile time before a line of sbsh is read: a target that compiles several sources
# parses them once, and the tests share one parse per kind. SBSH_PCH=OFF builds without, which
# shows a source that leans on the precompiled header instead of including what it uses.
option(SBSH_PCH "Precompile the heavy third-party headers" ON)

# The headers most of sbsh's own sources read, directly or through ipc/.
set(sbsh_pch_common <msgpack.hpp> <fmt/format.h> <string> <string_view> <vector> <optional>
    <memory> <functional> <map> <algorithm>)

function(sbsh_precompile target)
  if(SBSH_PCH)
    target_precompile_headers(${target} PRIVATE ${ARGN})
  endif()
endfunction()

# Compiles TARGET with FROM's precompiled header: both must be built with the same flags.
function(sbsh_reuse_precompiled target from)
  if(SBSH_PCH)
    target_precompile_headers(${target} REUSE_FROM ${from})
  endif()
endfunction()
