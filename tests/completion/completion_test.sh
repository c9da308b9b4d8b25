#!/usr/bin/env bash
# The completions the build wrote with `sbsh completion` offer what sbsh declares: run as
# bash runs them (COMP_WORDS, then _sbsh), they complete verbs, subcommands, options and the
# values an option takes, and leave alone what is a value or the words of a command to run.
# With bash-completion installed, the same again with it loaded; zsh only parses _sbsh, when
# zsh is there. options_test.sh checks that every option is offered; this, that each is
# offered where it belongs. Usage: completion_test.sh SBSH_BINARY COMPLETIONS_DIR
set -euo pipefail
sbsh=$(realpath "$1")
comp=$(realpath "$2")
fail=0
checked=0
failed() { echo "FAIL: $*"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/plans" "$tmp/plans/sub"
touch "$tmp/plans/ci.yaml" "$tmp/plans/notes.txt" "$tmp/plans/sub.json"

# The scripts the build wrote are what sbsh prints now.
cmp -s "$comp/sbsh.bash" <("$sbsh" completion bash) || failed "sbsh.bash differs from 'sbsh completion bash'"
cmp -s "$comp/_sbsh" <("$sbsh" completion zsh) || failed "_sbsh differs from 'sbsh completion zsh'"
bash -n "$comp/sbsh.bash" || failed "sbsh.bash has a syntax error"
if command -v zsh >/dev/null; then zsh -n "$comp/_sbsh" || failed "_sbsh has a syntax error"; fi
out=$("$sbsh" completion fish 2>&1) && failed "completion fish succeeded"
grep -q "give bash or zsh" <<<"$out" || failed "completion fish says: $out"

# What bash offers for the words given, the last being the one completed, one per line and
# sorted. sbshd is not asked: the sessions are alpha and beta, the processes 7, web and *
# (a name, not a pattern of file names).
loader=''
offers() {
  (cd "$tmp/plans" && bash -c '
    '"$loader"'
    source "$1"; shift
    _sbsh_sessions() { printf "%s\n" alpha beta; }
    _sbsh_procs() { printf "%s\n" 7 web "*"; }
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
    _sbsh sbsh "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf "%s\n" "${COMPREPLY[@]}"' _ "$comp/sbsh.bash" "$@" 2> >(grep -v "not currently executing completion function" >&2)) | { grep -v '^$' || true; } | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//'
}
# expect "WANT" WORDS...: bash offers exactly WANT (sorted, spaces between).
expect() {
  local want=$1 got
  shift
  checked=$((checked + 1))
  got=$(offers "$@")
  [[ $got == "$want" ]] || failed "${loader:+(bash-completion) }'$*': offered '$got', not '$want'"
}
# offered "WORD" WORDS...: WORD is among what bash offers; not_offered: it is not.
offered() {
  checked=$((checked + 1))
  grep -qx -- "$1" <<<"$(offers "${@:2}" | tr ' ' '\n')" || failed "'${*:2}' does not offer $1"
}
not_offered() {
  checked=$((checked + 1))
  ! grep -qx -- "$1" <<<"$(offers "${@:2}" | tr ' ' '\n')" || failed "'${*:2}' offers $1"
}

checks() {
  # Verbs, subcommands (by name or alias), and help's command.
  expect "session" sbsh se
  expect "create" sbsh session cr
  expect "ls" sbsh env l
  expect "session" sbsh help se
  expect "bash zsh" sbsh completion ''
  offered exec sbsh ''
  offered dial-stdio sbsh ''
  offered help sbsh ''
  not_offered --socket sbsh ''
  # Options: of the command chosen, and of no other.
  expect "--timeout --tty" sbsh exec --t
  expect "--json" sbsh session list --j
  expect "--keep-copy" sbsh session rm --k
  offered --no-network sbsh session create --
  not_offered --no-network sbsh session ls --
  offered --socket sbsh -
  # A value is not a verb: the global options' values are skipped, options that take one
  # offer nothing else.
  expect "exec" sbsh -S /tmp/s.sock exe
  expect "exec" sbsh --dial "ssh h sbsh dial-stdio" exe
  expect "" sbsh exec -t ''
  expect "" sbsh session create --memory ''
  offered --json sbsh exec -t 5s --j
  # Choices and suggestions the declarations hold, as --opt VALUE and --opt=VALUE.
  expect "always never on-failure" sbsh session create --restart ''
  expect "on-failure" sbsh session create --restart=o
  expect "nofile= nproc=" sbsh session create --limit n
  offered TERM sbsh kill -s ''
  expect "-KILL" sbsh kill -K
  offered C-c sbsh input --key ''
  expect "ssh://" sbsh -H ss
  # Sessions and processes, asked of sbshd: for options and for arguments.
  expect "alpha beta" sbsh exec -s ''
  expect "alpha" sbsh file read --session a
  expect "alpha beta" sbsh session show ''
  expect "* 7 web" sbsh logs ''
  expect "* 7 web" sbsh kill -s KILL ''
  expect "" sbsh session create ''  # a new session's name
  # Files and directories: a plan by its extension, a directory where one is asked for.
  expect "ci.yaml sub sub.json" sbsh run ''
  expect "sub" sbsh exec -C ''
  offered notes.txt sbsh exec -f ''
  offered notes.txt sbsh session create --setup-key ''
  # The command to run: its name, then its own words, which are not sbsh's options.
  offered bash sbsh exec -s alpha ba
  not_offered --timeout sbsh exec ls --ti
  not_offered --timeout sbsh exec -- --ti
  offered --name sbsh start --n
}

checks
bc=/usr/share/bash-completion/bash_completion
if [[ -r $bc ]]; then
  loader="source $bc"
  checks
fi
[[ $fail == 0 ]] && echo "completions: $checked checks, 0 failed"
exit $fail
