# kernstat's prompt hook for zsh (from `kernstat init zsh`). Before each prompt it sets
# KS_* variables (KS_GIT_BRANCH, KS_LOAD_ONE ...) for the keys in $kernstat_keys, asked
# over one socket to the daemon kept open for the life of the shell (zsh/net/socket) and
# read with sysread: drawing a prompt forks nothing. When the daemon restarted, the hook
# connects again; with no daemon, it runs `kernstat get` once (which starts the daemon).
(( ${+kernstat_keys} )) || typeset -ga kernstat_keys=(@KEYS@)
typeset -g _ks_bin=@BIN@ _ks_sock=@SOCKET@ _ks_fd= _ks_req= _ks_state=
typeset -ga _ks_vars _ks_names
typeset -ga _ks_path_providers=(@PATH_PROVIDERS@)
typeset -gA _ks_env=(@ENV_TABLE@)
zmodload zsh/net/socket zsh/system zsh/parameter || return
# zstat only (as a builtin of its own name: `stat` stays the command users know).
zmodload -F zsh/stat b:zstat || return

# Whether the socket may be talked to, checked before every (re)connect without a fork:
# its directory a real directory of this user's or root's that nobody else can write,
# the socket itself this user's or root's. A directory someone else made where ours
# belongs (no XDG_RUNTIME_DIR, /tmp/kernstat-UID taken first) is never connected to:
# it would receive every prompt's variables and directory, and answer the prompt.
_ks_trusted() {
  local -A st
  zstat -L -H st -- ${_ks_sock:h} 2>/dev/null || return 1
  (( (st[mode] & 8#170000) == 8#040000 && (st[mode] & 8#022) == 0 )) || return 1
  (( st[uid] == EUID || st[uid] == 0 )) || return 1
  zstat -L -H st -- $_ks_sock 2>/dev/null || return 1
  (( (st[mode] & 8#170000) == 8#140000 && (st[uid] == EUID || st[uid] == 0) ))
}

# $1 as the contents of a JSON string, in REPLY.
_ks_json() {
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}; s=${s//$'\n'/\\n}; s=${s//$'\t'/\\t}; s=${s//$'\r'/\\r}
  REPLY=$s
}

# The request lines for $kernstat_keys (each reply: the value as a line of text), in
# REPLY; the variables they carry in _ks_vars, the KS_* names in _ks_names.
_ks_request() {
  local k p e req= dir envj
  _ks_vars=() _ks_names=()
  _ks_json ${PWD:A}; dir=$REPLY
  for k in $kernstat_keys; do
    p=${k%%.*}
    _ks_json $k
    req+='{"op":"get","key":"'$REPLY'"'
    (( ${_ks_path_providers[(Ie)$p]} )) && req+=',"path":"'$dir'"'
    if [[ -n ${_ks_env[$p]} ]]; then
      envj=
      for e in ${=_ks_env[$p]}; do
        _ks_vars+=($e)
        [[ ${parameters[$e]} == *export* ]] || continue
        _ks_json ${(P)e}; envj+=${envj:+,}'"'$e'":"'$REPLY'"'
      done
      req+=',"env":{'$envj'}'
    fi
    req+=$',"text":true}\n'
    _ks_names+=(KS_${(U)k//[^a-zA-Z0-9]/_})
  done
  REPLY=$req
}

# Before each prompt. Everything inline: a zsh function call costs more here than the
# work it would hold (~11 µs a call on the 2-vCPU VM). The requests are rebuilt only
# when the directory, the keys or a variable they carry changed.
_ks_precmd() {
  (( ${#kernstat_keys} )) || return 0
  # A daemon that went away between two prompts must not take the shell with it.
  setopt localoptions localtraps; trap '' PIPE
  local state=$PWD$'\0'"$kernstat_keys" e i buf chunk nl try
  local -a lines
  for e in $_ks_vars; do [[ ${parameters[$e]} == *export* ]] && state+=$'\0'$e=${(P)e}; done
  if [[ $state != $_ks_state ]]; then
    _ks_request; _ks_req=$REPLY; _ks_state=$state
  fi
  for try in 1 2; do
    if [[ -z $_ks_fd ]]; then
      _ks_trusted || break
      zsocket $_ks_sock 2>/dev/null || break
      _ks_fd=$REPLY
    fi
    buf=
    if syswrite -o $_ks_fd -- $_ks_req 2>/dev/null; then
      while sysread -i $_ks_fd -t 2 chunk 2>/dev/null; do
        buf+=$chunk; nl=${buf//[^$'\n']/}
        (( ${#nl} < ${#_ks_names} )) && continue
        lines=("${(@f)buf}")
        for i in {1..${#_ks_names}}; do typeset -g $_ks_names[i]=$lines[i]; done
        return 0
      done
    fi
    exec {_ks_fd}>&-; _ks_fd=
  done
  # No daemon: once through `kernstat get`, which starts one.
  eval "$($_ks_bin get @SOCKET_ARGS@ --format shell -- $kernstat_keys 2>/dev/null)"
  return 0
}

autoload -Uz add-zsh-hook
add-zsh-hook precmd _ks_precmd
