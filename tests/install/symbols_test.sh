#!/usr/bin/env bash
# libsbsh.so exports its API and nothing else: every defined dynamic symbol is a function of
# the C ABI (sbsh_*, each one declared in sbsh.h, and each one declared there exported) or of
# the C++ API (sbsh::client::..., outside the connection's private implementation), and each
# has a version node of libsbsh.map. Catches a build without hidden visibility (fmt, msgpack
# and the standard library's templates would show up), an SBSH_API left off a declaration,
# and a version script that lets too much through.
# Usage: symbols_test.sh LIBSBSH_SO SBSH_H
set -euo pipefail
lib=$1
header=$2
fail=0

# "NAME@@NODE" (or "NAME@NODE") per defined dynamic symbol, demangled.
mapfile -t symbols < <(nm -D --defined-only --with-symbol-versions -C "$lib" | cut -d' ' -f3- | sort -u)
[[ ${#symbols[@]} -gt 0 ]] || { echo "FAIL: no dynamic symbols in $lib"; exit 1; }

declare -A exported_c=()
cxx=0
for s in "${symbols[@]}"; do
  name=${s%@*}
  name=${name%@}
  node=${s##*@}
  # The version node itself appears as an absolute symbol named like it.
  [[ $name == "$node" && $name == SBSH_* ]] && continue
  if [[ $node != SBSH_* ]]; then
    echo "FAIL: $name has no version node of libsbsh.map ($s)"; fail=1
  fi
  if [[ $name =~ ^sbsh_[a-z0-9_]+$ ]]; then
    exported_c[$name]=1
  elif [[ $name == sbsh::client::* && $name != sbsh::client::connection::impl* ]]; then
    cxx=$((cxx + 1))
  else
    echo "FAIL: exported but not part of the API: $name"; fail=1
  fi
done

# Every function sbsh.h declares is exported, and nothing else of that form is.
mapfile -t declared < <(grep -oE '^SBSH_API [^(]*[ *](sbsh_[a-z0-9_]+)\(' "$header" |
                        sed -E 's/.*[ *](sbsh_[a-z0-9_]+)\($/\1/' | sort -u)
[[ ${#declared[@]} -gt 0 ]] || { echo "FAIL: no SBSH_API declarations found in $header"; exit 1; }
declare -A in_header=()
for f in "${declared[@]}"; do
  in_header[$f]=1
  [[ -n ${exported_c[$f]:-} ]] || { echo "FAIL: $f is declared in sbsh.h but not exported"; fail=1; }
done
for f in "${!exported_c[@]}"; do
  [[ -n ${in_header[$f]:-} ]] || { echo "FAIL: $f is exported but not declared SBSH_API in sbsh.h"; fail=1; }
done
# Functions declared in sbsh.h without SBSH_API would be missing from the library.
if grep -nE '^(const char\*|int|void|uint64_t|int64_t) sbsh_[a-z0-9_]+\(' "$header"; then
  echo "FAIL: the declarations above lack SBSH_API"; fail=1
fi
[[ $cxx -gt 0 ]] || { echo "FAIL: no C++ API (sbsh::client::...) exported"; fail=1; }

[[ $fail == 0 ]] && echo "symbols: ${#exported_c[@]} C functions and $cxx C++ symbols exported, nothing else"
exit $fail
