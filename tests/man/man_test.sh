#!/usr/bin/env bash
# The manual pages render without warnings, every command `sbsh --help` lists is documented
# in sbsh.1, and every option `sbshd --help` lists in sbshd.8, in its synopsis and with an
# entry of its own, and the caveats it must keep are there. Usage: man_test.sh SOURCE_DIR
# SBSH_BINARY SBSHD_BINARY
set -euo pipefail
src=$1
sbsh=$2
sbshd=$3
fail=0
for page in "$src"/man/sbsh.1 "$src"/man/sbshd.8 "$src"/man/sbsh-protocol.7; do
  warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1 || true)
  if [[ -n $warnings ]]; then
    echo "FAIL: $page renders with warnings:"; echo "$warnings"; fail=1
  fi
  if command -v man >/dev/null; then
    warnings=$(MANWIDTH=80 man -l --warnings=w "$page" 2>&1 >/dev/null || true)
    [[ -z $warnings ]] || { echo "FAIL: man -l $page: $warnings"; fail=1; }
  fi
done
commands=$("$sbsh" --help | sed -n '/^Commands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }')
[[ -n $commands ]] || { echo "FAIL: no commands found in sbsh --help"; exit 1; }
# groff spells a hyphen \- (dial\-stdio): compare with it spelt as the command is.
page=$(sed 's/\\-/-/g' "$src/man/sbsh.1")
for c in $commands; do
  grep -qE "^\.SS \"?(.*\| )?$c( |\"|$)" <<<"$page" || { echo "FAIL: sbsh.1 has no section for '$c'"; fail=1; }
  "$sbsh" "$c" --help >/dev/null || { echo "FAIL: sbsh $c --help"; fail=1; }
done
# sbshd's --help is written as sbsh's: an "Options:" list, one "  [-x, ]--long VALUE" a row.
options=$("$sbshd" --help | sed -n '/^Options:/,/^$/p' | grep -oE '^ +(-[a-z], )?--[a-z-]+' | sed 's/^.*--/--/')
[[ -n $options ]] || { echo "FAIL: no options found in sbshd --help"; exit 1; }
page=$(sed 's/\\-/-/g' "$src/man/sbshd.8")
synopsis=$(sed -n '/^\.SH SYNOPSIS/,/^\.SH /p' <<<"$page")
for o in $options; do
  grep -qE "^\.(B|BI|BR) (.* )?$o( |\"|$)" <<<"$page" || { echo "FAIL: sbshd.8 has no entry for $o"; fail=1; }
  [[ $o == --help ]] || grep -qE "(^| )$o( |$)" <<<"$synopsis" || { echo "FAIL: sbshd.8's synopsis lacks $o"; fail=1; }
done
# A limit that does not do what its name says where sbshd often runs says so, and what does:
# the kernel exempts root from nproc, which --pids binds.
for doc in "$src/man/sbsh.1" "$src/README.md"; do
  text=$(sed 's/\\-/-/g; s/\\f[BIR]//g' "$doc" | tr '\n' ' ')
  grep -qE 'nproc[^.]*root[^.]*(\.[^.]*)?--pids' <<<"$text" ||
    { echo "FAIL: $doc does not say that --limit nproc does not bind root, and that --pids does"; fail=1; }
done
[[ $fail == 0 ]] && echo "man pages: $(wc -w <<<"$commands") commands and $(wc -w <<<"$options") sbshd options documented, 0 failed"
exit $fail
