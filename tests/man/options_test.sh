#!/usr/bin/env bash
# The manual and both shell completions keep up with the command line: every command that
# `sbsh --help` lists (and every subcommand of one, such as session create) and every option
# that each one's --help prints is named in sbsh.1 (in that command's section, the global
# options in GLOBAL OPTIONS), in the bash completion (by running it: what it offers after
# "sbsh COMMAND -") and in the zsh completion (in that command's function, _sbsh_COMMAND),
# both as the build wrote them with `sbsh completion` into COMPLETIONS_DIR.
# Usage: options_test.sh SOURCE_DIR SBSH_BINARY COMPLETIONS_DIR
set -euo pipefail
src=$1
sbsh=$2
comp=$3
fail=0
failed() { echo "FAIL: $*"; fail=1; }

# The names in a help text's "Commands:" list, and the options in its "Options:" list
# (every -x and --long of the left column), without -h and --help, which every command has.
commands_of() { sed -n '/^Commands:/,/^$/p' | awk 'NR > 1 && /^  [^ ]/ { print $1 }'; }
options_of() {
  sed -n '/^Options:/,/^$/p' | grep -E '^ {2,6}-' | sed -E 's/^ +//; s/  .*//' |
    grep -oE '(^|[ ,])--?[A-Za-z0-9][-A-Za-z0-9]*' | tr -d ' ,' | grep -vxE -- '-h|--help' || true
}

# sbsh.1 with hyphens and font changes plain, so that options read as typed.
page=$(sed -E 's/\\-/-/g; s/\\f[BIRP]//g; s/\\\(aq/'"'"'/g' "$src/man/sbsh.1")
# The text of a section: .SS for a command ("exec", "session create"), .SH for the rest.
man_section() {
  if [[ $1 == sbsh ]]; then
    awk '/^\.SH GLOBAL OPTIONS/ { on = 1; next } /^\.SH/ { on = 0 } on' <<<"$page"
  else
    re="^\\.SS \"?(.*\\| )?${1#sbsh }( |\"|\$)" awk '/^\.S[SH]/ { on = ($0 ~ ENVIRON["re"]) } on' <<<"$page"
  fi
}
names() { grep -qE -- "(^|[^-A-Za-z0-9])$2([^-A-Za-z0-9]|$)" <<<"$1"; }

# What the bash completion offers after the words given (the last one being completed).
bash_offers() {
  bash -c '
    source "$1"; shift
    _sbsh_sessions() { :; }; _sbsh_procs() { :; }   # no daemon to ask
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
    _sbsh sbsh "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf "%s\n" "${COMPREPLY[@]}"' _ "$comp/sbsh.bash" "$@"
}
# The body of a zsh completion function.
zsh_function() {
  # A one-line function ends on its first line; another at the first line that is "}".
  f="^$1\\(\\) \\{" awk '$0 ~ ENVIRON["f"] { on = 1; print; if (/}$/) exit; next } on { print } on && /^}/ { exit }' \
    "$comp/_sbsh"
}

bash -n "$comp/sbsh.bash" || failed "sbsh.bash has a syntax error"
if command -v zsh >/dev/null; then zsh -n "$comp/_sbsh" || failed "_sbsh has a syntax error"; fi

paths=(sbsh)
for c in $("$sbsh" --help | commands_of); do
  paths+=("sbsh $c")
  for s in $("$sbsh" "$c" --help | commands_of); do paths+=("sbsh $c $s"); done
done
[[ ${#paths[@]} -gt 12 ]] || { echo "FAIL: sbsh --help lists too few commands: ${paths[*]}"; exit 1; }

checked=0
for path in "${paths[@]}"; do
  read -ra words <<<"$path"
  help=$("${words[0]/sbsh/$sbsh}" "${words[@]:1}" --help) || { failed "$path --help"; continue; }
  section=$(man_section "$path")
  [[ -n $section ]] || failed "sbsh.1 has no section for '$path'"
  fn=_$(tr ' -' '__' <<<"$path")
  zsh=$(zsh_function "$fn")
  [[ -n $zsh ]] || failed "_sbsh has no function $fn for '$path'"
  # A subcommand is offered where its parent's subcommands are.
  if [[ ${#words[@]} -gt 1 ]]; then
    offered=$(bash_offers "${words[@]:0:${#words[@]}-1}" "")
    grep -qx -- "${words[-1]}" <<<"$offered" || failed "sbsh.bash does not offer '${words[-1]}' after '${words[*]:0:${#words[@]}-1}'"
  fi
  offered=$(bash_offers "${words[@]}" -)
  for o in $(options_of <<<"$help"); do
    checked=$((checked + 1))
    names "$section" "$o" || failed "sbsh.1 does not name $o in the section for '$path'"
    grep -qx -- "$o" <<<"$offered" || failed "sbsh.bash does not offer $o for '$path'"
    names "$zsh" "$o" || failed "_sbsh does not name $o in $fn"
  done
done
[[ $fail == 0 ]] && echo "manual and completions: ${#paths[@]} commands, $checked options, 0 failed"
exit $fail
