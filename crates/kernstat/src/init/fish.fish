# kernstat's prompt values for fish (from `kernstat init fish`). fish has neither
# sockets nor coprocesses, so before each prompt one `kernstat get` asks for every key in
# $kernstat_keys (one process per prompt, reading the daemon's shared memory) and sets
# KS_* variables (KS_GIT_BRANCH, KS_LOAD_ONE ...).
set -q kernstat_keys; or set -g kernstat_keys @KEYS@
function __ks_update --on-event fish_prompt
    for line in (@BIN@ get @SOCKET_ARGS@ --format tsv -- $kernstat_keys 2>/dev/null)
        set -l kv (string split -m 1 \t -- $line)
        set -g KS_(string upper -- (string replace -ra '[^A-Za-z0-9]' _ -- $kv[1])) $kv[2]
    end
end
