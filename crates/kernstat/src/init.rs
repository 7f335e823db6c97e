//! `kernstat init zsh|bash|fish`: prints the prompt hook a shell evaluates from its rc
//! file (`eval "$(kernstat init zsh)"`), and starts the user daemon if none runs.
//!
//! The hooks are shell code in `init/`; what they must know of kernstat is filled in
//! here from the same tables the daemon uses, so that they cannot drift: which providers
//! are answered per directory (the hook sends the shell's directory) and which
//! variables each context provider reads (the hook sends those the shell exports).

use std::io::Write;

use kernstat_client::keys::{self as providers, context};
use kernstat_client::{default_socket, Session};

use crate::cli::{InitArgs, Shell};
use kernstat_client::autostart;
use kernstat_client::format::{fish_quote, shell_quote};

const ZSH: &str = include_str!("init/zsh.zsh");
const BASH: &str = include_str!("init/bash.bash");
const FISH: &str = include_str!("init/fish.fish");

/// `kernstat init`.
pub fn run(args: &InitArgs) -> anyhow::Result<i32> {
    for k in &args.keys {
        if !providers::is_known(k) && !providers::is_whole(k) {
            eprintln!("kernstat: init: unknown key {k:?} (kernstat get --list names them)");
            return Ok(2);
        }
    }
    let socket = match &args.socket.socket {
        Some(p) => p.clone(),
        None => default_socket().map_err(|e| anyhow::anyhow!("{e}"))?,
    };
    if args.socket.socket.is_none() && Session::connect(&socket).is_err() {
        if let Some(Err(e)) = autostart::start_user_daemon(&socket) {
            eprintln!("kernstat: init: could not start the user daemon: {e}");
        }
    }
    let exe = std::env::current_exe()?;
    let snippet = render(
        args.shell,
        &exe.to_string_lossy(),
        &socket.to_string_lossy(),
        args.socket.socket.is_some(),
        &args.keys,
    );
    std::io::stdout().lock().write_all(snippet.as_bytes())?;
    Ok(0)
}

/// The hook for `shell` with kernstat's binary, socket and default keys filled in. The
/// kernstat processes the hook runs get `--socket` when init was given one (`explicit`);
/// otherwise they find the daemon as any client does.
fn render(shell: Shell, bin: &str, socket: &str, explicit: bool, keys: &[String]) -> String {
    let (template, quote): (&str, fn(&str) -> String) = match shell {
        Shell::Zsh => (ZSH, shell_quote),
        Shell::Bash => (BASH, shell_quote),
        Shell::Fish => (FISH, fish_quote),
    };
    let mut path_providers = vec!["git"];
    let mut env_table = Vec::new();
    for p in context::PROVIDERS {
        if p.scope == context::Scope::Path {
            path_providers.push(p.name);
        }
        if !p.env.is_empty() {
            env_table.push(format!("[{}]={}", p.name, quote(&p.env.join(" "))));
        }
    }
    template
        .replace("@BIN@", &quote(bin))
        .replace(
            "@SOCKET_ARGS@",
            &if explicit {
                format!("--socket {}", quote(socket))
            } else {
                String::new()
            },
        )
        .replace("@SOCKET@", &quote(socket))
        .replace(
            "@KEYS@",
            &keys.iter().map(|k| quote(k)).collect::<Vec<_>>().join(" "),
        )
        .replace("@PATH_PROVIDERS@", &path_providers.join(" "))
        .replace("@ENV_TABLE@", &env_table.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_filled_and_odd_paths_are_quoted() {
        let keys = vec!["git.branch".to_string(), "load.one".to_string()];
        for shell in [Shell::Zsh, Shell::Bash, Shell::Fish] {
            let s = render(shell, "/opt/it's here/kernstat", "/run/x/sock", true, &keys);
            for p in [
                "@BIN@",
                "@SOCKET@",
                "@SOCKET_ARGS@",
                "@KEYS@",
                "@PATH_PROVIDERS@",
                "@ENV_TABLE@",
            ] {
                assert!(!s.contains(p), "{shell:?}: {p} left in {s}");
            }
            assert!(s.contains("git.branch"), "{shell:?}");
        }
        let z = render(Shell::Zsh, "/opt/it's/ks", "/s", false, &keys);
        assert!(z.contains(r"'/opt/it'\''s/ks'"), "{z}");
        assert!(z.contains("[kubecontext]='KUBECONFIG HOME'"), "{z}");
        let f = render(Shell::Fish, "/opt/it's/ks", "/s", true, &keys);
        assert!(f.contains(r"'/opt/it\'s/ks'"), "{f}");
    }
}
