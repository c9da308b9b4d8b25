# bash completion for sbsh: subcommands, options, and live session and process names.
# tests/man/options_test.sh checks that it offers every option each command's --help prints.
_sbsh_sessions() { sbsh session ls --json 2>/dev/null | grep -o '"name":"[^"]*"' | cut -d'"' -f4; }
_sbsh_procs() {
  sbsh ps -a --json 2>/dev/null | grep -o '"id":[0-9]*,"name":"[^"]*"' | sed -E 's/"id":([0-9]+),"name":"([^"]*)"/\1 \2/' | tr ' ' '\n' | grep -v '^$'
}
_sbsh() {
  local cur prev words cword
  _init_completion 2>/dev/null || { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
  local commands="exec run session file env start logs kill wait input ps attach status shutdown mcp dial-stdio version help"
  local cmd="" i
  for ((i = 1; i < cword; i++)); do
    case ${words[i]} in
      -S|--socket|-H|--host|--dial) ((i++)) ;;
      -*) ;;
      *) cmd=${words[i]}; break ;;
    esac
  done
  # The value of an option.
  if [[ $cmd == kill ]] && [[ $prev == -s || $prev == --signal ]]; then
    COMPREPLY=($(compgen -W "TERM KILL INT HUP QUIT USR1 USR2 STOP CONT" -- "$cur")); return
  fi
  if [[ $cmd == exec ]] && [[ $prev == -f || $prev == --file ]]; then
    COMPREPLY=($(compgen -f -- "$cur")); return
  fi
  case $prev in
    -s|--session) COMPREPLY=($(compgen -W "$(_sbsh_sessions)" -- "$cur")); return ;;
    -C|--cwd|-S|--socket|--snapshot|--root|--artifacts) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --report|--events) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    -H|--host) COMPREPLY=($(compgen -W "ssh://" -- "$cur")); compopt -o nospace 2>/dev/null; return ;;
    --restart) COMPREPLY=($(compgen -W "always on-failure never" -- "$cur")); return ;;
    --limit) COMPREPLY=($(compgen -W "as= core= cpu= data= fsize= memlock= nofile= nproc= stack=" -- "$cur")); compopt -o nospace 2>/dev/null; return ;;
    --dial|-e|--env|-t|--timeout|-n|--tail|--output-limit|--detach-after|--cols|--rows|--name|--init|--mode|--offset|--length) return ;;
  esac
  case $cmd in
    "") COMPREPLY=($(compgen -W "$commands -S --socket --no-autostart -H --host --dial --version --help" -- "$cur")) ;;
    help) COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
    exec) COMPREPLY=($(compgen -W "-s --session -C --cwd -e --env -t --timeout -f --file --json --jsonl --output-limit --detach-after --tty --interactive --cols --rows --help --" -- "$cur")) ;;
    run) COMPREPLY=($(compgen -W "--report --events --artifacts --output-limit --keep-session -s --session -q --quiet --help" -- "$cur"))
      [[ $cur == -* ]] || COMPREPLY+=($(compgen -f -X '!*.@(json|yaml|yml)' -- "$cur") $(compgen -d -- "$cur")) ;;
    session)
      local sub=${words[i+1]}
      if ((cword == i + 1)); then COMPREPLY=($(compgen -W "create ls show rm restart prune" -- "$cur")); return; fi
      case $sub in
        create) COMPREPLY=($(compgen -W "-C --cwd --root --snapshot --ignore --no-default-ignores --gitignore --keep-copy-on-failure --setup --setup-key --confine --allow-write --allow-read --read-only --no-network --memory --pids --cpu -e --env --init --restart --limit --idle-expiry -t --timeout --help" -- "$cur")) ;;
        prune) COMPREPLY=($(compgen -W "--idle --json --kept --help" -- "$cur")) ;;
        ls|list) COMPREPLY=($(compgen -W "--json --kept --help" -- "$cur")) ;;
        show) COMPREPLY=($(compgen -W "$(_sbsh_sessions) --json --help" -- "$cur")) ;;
        rm) COMPREPLY=($(compgen -W "$(_sbsh_sessions) --keep-copy --help" -- "$cur")) ;;
        restart) COMPREPLY=($(compgen -W "$(_sbsh_sessions) --help" -- "$cur")) ;;
      esac ;;
    file)
      local sub=${words[i+1]}
      if ((cword == i + 1)); then COMPREPLY=($(compgen -W "write read ls stat rm mkdir mv edit search" -- "$cur")); return; fi
      case $sub in
        write) COMPREPLY=($(compgen -W "-s --session --mode --no-parents --help" -- "$cur")) ;;
        read) COMPREPLY=($(compgen -W "-s --session --offset --length --lines --json --help" -- "$cur")) ;;
        ls) COMPREPLY=($(compgen -W "-s --session -R --recursive --depth --json --help" -- "$cur")) ;;
        stat) COMPREPLY=($(compgen -W "-s --session --json --help" -- "$cur")) ;;
        rm) COMPREPLY=($(compgen -W "-s --session -r --recursive --help" -- "$cur")) ;;
        mkdir) COMPREPLY=($(compgen -W "-s --session -p --parents --help" -- "$cur")) ;;
        mv) COMPREPLY=($(compgen -W "-s --session --help" -- "$cur")) ;;
        edit)
          if [[ $prev == --old-file || $prev == --new-file ]]; then COMPREPLY=($(compgen -f -- "$cur")); return; fi
          COMPREPLY=($(compgen -W "-s --session --old --new --old-file --new-file --all --json --help" -- "$cur")) ;;
        search) COMPREPLY=($(compgen -W "-s --session --glob -i --ignore-case --json --help" -- "$cur")) ;;
      esac ;;
    env)
      local sub=${words[i+1]}
      if ((cword == i + 1)); then COMPREPLY=($(compgen -W "ls rm prune" -- "$cur")); return; fi
      case $sub in
        ls|list) COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
        rm) COMPREPLY=($(compgen -W "--force --help" -- "$cur")) ;;
        prune) COMPREPLY=($(compgen -W "--keep --older-than --json --help" -- "$cur")) ;;
      esac ;;
    start) COMPREPLY=($(compgen -W "-s --session --name -C --cwd -e --env --help --" -- "$cur")) ;;
    logs) COMPREPLY=($(compgen -W "-f --follow -n --tail --since --screen --stdout --stderr --help $(_sbsh_procs)" -- "$cur")) ;;
    kill) COMPREPLY=($(compgen -W "-s --signal -TERM -KILL -INT -HUP --help $(_sbsh_procs)" -- "$cur")) ;;
    wait) COMPREPLY=($(compgen -W "-t --timeout --json --output-limit --help $(_sbsh_procs)" -- "$cur")) ;;
    input) COMPREPLY=($(compgen -W "--no-enter --key -f --file --eof -t --timeout --json --output-limit --help" -- "$cur")) ;;
    ps) COMPREPLY=($(compgen -W "-a --all --json --help" -- "$cur")) ;;
    attach) COMPREPLY=($(compgen -W "-s --session --help" -- "$cur")) ;;
    status) COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
    shutdown) COMPREPLY=($(compgen -W "--keep-sessions --help" -- "$cur")) ;;
    mcp) COMPREPLY=($(compgen -W "--http --allow-remote --token-file --help" -- "$cur")) ;;
    dial-stdio|version) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
  esac
}
complete -F _sbsh sbsh
