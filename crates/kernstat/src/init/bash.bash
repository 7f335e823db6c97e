# kernstat's prompt hook for bash (from `kernstat init bash`). Before each prompt it sets
# KS_* variables (KS_GIT_BRANCH, KS_LOAD_ONE ...) for the keys in the kernstat_keys
# array, asked through one `kernstat session` coprocess started once per shell, written
# and read with builtins: drawing a prompt forks nothing. The session reconnects to the
# daemon by itself; if it dies, the next prompt starts another.
[[ ${kernstat_keys+set} ]] || kernstat_keys=(@KEYS@)
__ks_bin=@BIN@
declare -A __ks_env=(@ENV_TABLE@)
declare -A __ks_sent=()

__ks_start() {
  coproc __KS { exec "$__ks_bin" session @SOCKET_ARGS@ 2>/dev/null; }
  __ks_sent=()
}

__ks_stop() {
  [[ -n ${__KS_PID-} ]] && kill "$__KS_PID" 2>/dev/null
  [[ -n ${__KS[1]-} ]] && eval "exec ${__KS[1]}>&- ${__KS[0]}<&-"
  unset __KS __KS_PID
}

# $1 escaped for a session field (backslash, newline, TAB), in REPLY.
__ks_field() {
  local s=${1//\\/\\\\}
  s=${s//$'\n'/\\n}; REPLY=${s//$'\t'/\\t}
}

__ks_precmd() {
  local status=$?
  ((${#kernstat_keys[@]})) || return $status
  [[ -n ${__KS[1]-} ]] || __ks_start
  local k p e v req= line name
  for k in "${kernstat_keys[@]}"; do
    p=${k%%.*}
    for e in ${__ks_env[$p]-}; do
      if [[ ${!e+set} && ${!e@a} == *x* ]]; then v=${!e}; else v=$'\x01'; fi
      [[ ${__ks_sent[$e]-$'\x02'} == "$v" ]] && continue
      __ks_sent[$e]=$v
      if [[ $v == $'\x01' ]]; then
        req+=env$'\t'$e$'\n'
      else
        __ks_field "$v"; req+=env$'\t'$e$'\t'$REPLY$'\n'
      fi
    done
  done
  __ks_field "$PWD"; req+=get$'\t'$REPLY
  for k in "${kernstat_keys[@]}"; do req+=$'\t'$k; done
  if ! printf '%s\n' "$req" >&"${__KS[1]}" 2>/dev/null; then
    __ks_stop; return $status
  fi
  for k in "${kernstat_keys[@]}"; do
    if ! IFS= read -r -t 5 -u "${__KS[0]}" line; then
      __ks_stop; break
    fi
    name=KS_${k^^}
    printf -v "${name//[^A-Z0-9_]/_}" '%s' "$line"
  done
  return $status
}

if [[ ${PROMPT_COMMAND@a} == *a* ]]; then
  PROMPT_COMMAND=(__ks_precmd "${PROMPT_COMMAND[@]}")
else
  PROMPT_COMMAND="__ks_precmd${PROMPT_COMMAND:+;$PROMPT_COMMAND}"
fi
