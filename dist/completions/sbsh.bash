# bash completion for sbsh: subcommands, options, and live session and process names.
_sbsh_sessions() { sbsh session ls --json 2>/dev/null | grep -o '"name":"[^"]*"' | cut -d'"' -f4; }
_sbsh_procs() {
  sbsh ps -a --json 2>/dev/null | grep -o '"id":[0-9]*,"name":"[^"]*"' | sed -E 's/"id":([0-9]+),"name":"([^"]*)"/\1 \2/' | tr ' ' '\n' | grep -v '^$'
}
_sbsh() {
  local cur prev words cword
  _init_completion 2>/dev/null || { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
  local cmd="" i
  for ((i = 1; i < cword; i++)); do
    case ${words[i]} in
      -S|--socket|-H|--host|--dial) ((i++)) ;;
      -*) ;;
      *) cmd=${words[i]}; break ;;
    esac
  done
  case $prev in
    -s|--session) COMPREPLY=($(compgen -W "$(_sbsh_sessions)" -- "$cur")); return ;;
    -C|--cwd|-S|--socket|--snapshot|--artifacts) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --report|--events) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    -H|--host) COMPREPLY=($(compgen -W "ssh://" -- "$cur")); compopt -o nospace 2>/dev/null; return ;;
    --dial) return ;;
    --restart) COMPREPLY=($(compgen -W "always on-failure never" -- "$cur")); return ;;
    --signal) COMPREPLY=($(compgen -W "TERM KILL INT HUP QUIT USR1 USR2 STOP CONT" -- "$cur")); return ;;
  esac
  case $cmd in
    "") COMPREPLY=($(compgen -W "exec run session start logs kill wait ps attach status shutdown dial-stdio version help -S --socket --no-autostart -H --host --dial --help" -- "$cur")) ;;
    exec) COMPREPLY=($(compgen -W "-s --session -C --cwd -e --env -t --timeout --json --output-limit --" -- "$cur")) ;;
    run) COMPREPLY=($(compgen -W "--report --events --artifacts --keep-session -s --session --output-limit -q --quiet" -- "$cur"))
      [[ $cur == -* ]] || COMPREPLY+=($(compgen -f -X '!*.@(json|yaml|yml)' -- "$cur") $(compgen -d -- "$cur")) ;;
    session)
      local sub=${words[i+1]}
      if ((cword == i + 1)); then COMPREPLY=($(compgen -W "create ls show rm restart" -- "$cur"))
      elif [[ $sub == create ]]; then COMPREPLY=($(compgen -W "-C --cwd --snapshot -e --env --init --restart --limit" -- "$cur"))
      else COMPREPLY=($(compgen -W "$(_sbsh_sessions) --json" -- "$cur")); fi ;;
    start) COMPREPLY=($(compgen -W "-s --session --name -C --cwd -e --env --" -- "$cur")) ;;
    logs) COMPREPLY=($(compgen -W "-f --follow -n --tail --stdout --stderr $(_sbsh_procs)" -- "$cur")) ;;
    kill) COMPREPLY=($(compgen -W "-s --signal -TERM -KILL -INT -HUP $(_sbsh_procs)" -- "$cur")) ;;
    wait) COMPREPLY=($(compgen -W "-t --timeout $(_sbsh_procs)" -- "$cur")) ;;
    ps) COMPREPLY=($(compgen -W "-a --json" -- "$cur")) ;;
    attach) COMPREPLY=($(compgen -W "-s --session" -- "$cur")) ;;
    status) COMPREPLY=($(compgen -W "--json" -- "$cur")) ;;
    shutdown) COMPREPLY=($(compgen -W "--keep-sessions" -- "$cur")) ;;
  esac
}
complete -F _sbsh sbsh
