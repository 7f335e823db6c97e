//! `kernstat session`: requests on stdin, values on stdout, one process and one
//! connection for as long as a shell lives — what bash's prompt hook runs as a
//! `coproc`, so that drawing a prompt forks nothing.
//!
//! A line-based protocol a shell can speak with builtins only (fields separated by a
//! TAB; in fields, `\\`, `\n` and `\t` stand for a backslash, a newline and a TAB):
//!
//! - `get DIR KEY...`: one line per KEY, its value as text (strings bare, numbers and
//!   objects as JSON; newlines and other control characters as spaces, so that a
//!   value is always one line), an empty line for a key without a value or with an
//!   error. DIR is the shell's directory, for per-directory keys.
//! - `env NAME VALUE` sets, `env NAME` unsets, a variable the context providers read
//!   (the shell sends those it changed); no reply.
//!
//! Values come from the shared-memory snapshot first and the kept connection for the
//! rest (`kernstat_daemon::Lookup`: it reconnects after a daemon restart); with no
//! daemon they are computed here, and the user daemon is started (see `autostart`).
//! Errors go to stderr, one line, and never end the session; end of input ends it.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::path::Path;

use kernstat_client::keys::context;
use kernstat_client::{default_socket, Lookup, Reply};

use crate::cli::SessionArgs;
use crate::client;
use kernstat_client::format;
use kernstat_client::line::{one_line, unescape};

/// `kernstat session`.
pub fn run(args: &SessionArgs) -> anyhow::Result<i32> {
    let explicit = args.socket.socket.is_some();
    let socket = match &args.socket.socket {
        Some(p) => Some(p.clone()),
        None => default_socket().ok(),
    };
    let mut state = Session {
        lookup: socket.map(|s| Lookup::new(s, Some(client::TIMEOUT))),
        explicit,
        env: BTreeMap::new(),
        warned: false,
    };
    let stdin = io::stdin().lock();
    let mut out = io::BufWriter::new(io::stdout().lock());
    for line in stdin.split(b'\n') {
        let line = line?;
        let line = String::from_utf8_lossy(line.strip_suffix(b"\r").unwrap_or(&line));
        let fields: Vec<String> = line.split('\t').map(unescape).collect();
        match fields.first().map(String::as_str) {
            Some("get") if fields.len() >= 2 => {
                for v in state.get(&fields[1], &fields[2..]) {
                    out.write_all(v.as_bytes())?;
                    out.write_all(b"\n")?;
                }
                out.flush()?;
            }
            Some("env") if fields.len() == 2 => {
                state.env.remove(&fields[1]);
            }
            Some("env") if fields.len() == 3 => {
                state.env.insert(fields[1].clone(), fields[2].clone());
            }
            Some("") if fields.len() == 1 => {}
            _ => eprintln!(
                "kernstat session: not a request: {line:?} (get DIR KEY..., env NAME [VALUE])"
            ),
        }
    }
    Ok(0)
}

struct Session {
    lookup: Option<Lookup>,
    explicit: bool,
    /// The shell's variables, as it sent them.
    env: BTreeMap<String, String>,
    /// Said once that there is no daemon (until one answers again).
    warned: bool,
}

impl Session {
    /// One line of text per key (empty: no value).
    fn get(&mut self, dir: &str, keys: &[String]) -> Vec<String> {
        // The directory resolved once per request, and only if a key needs it.
        let scoped: Vec<bool> = keys
            .iter()
            .map(|k| kernstat_daemon::providers::path_scoped(k))
            .collect();
        let resolved = scoped
            .contains(&true)
            .then(|| Path::new(dir).canonicalize().ok())
            .flatten()
            .map(|p| p.to_string_lossy().into_owned());
        let paths: Vec<Option<String>> = scoped
            .iter()
            .map(|&s| if s { resolved.clone() } else { None })
            .collect();
        let wanted = context::env_for(keys.iter().map(String::as_str));
        let env: BTreeMap<String, String> = self
            .env
            .iter()
            .filter(|(k, _)| wanted.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let queries = client::queries(keys, &paths, &env);
        let fetched = match &mut self.lookup {
            Some(l) => match l.fetch(&queries) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("kernstat session: daemon at {}: {e}", l.socket().display());
                    return vec![String::new(); keys.len()];
                }
            },
            None => kernstat_client::lookup::Fetched {
                replies: vec![None; keys.len()],
                unreachable: Some("no usable runtime directory".into()),
            },
        };
        if fetched.unreachable.is_none() {
            self.warned = false;
        }
        let quiet = std::mem::replace(&mut self.warned, fetched.unreachable.is_some());
        let socket = self.lookup.as_ref().map(|l| l.socket().to_path_buf());
        let replies = client::complete(fetched, &queries, socket.as_deref(), self.explicit, quiet)
            .unwrap_or_else(|_| vec![Reply::default(); keys.len()]);
        scoped
            .iter()
            .zip(&paths)
            .zip(replies)
            .map(|((&s, p), r)| {
                // A per-directory key in a directory that is gone has no value.
                if s && p.is_none() {
                    return String::new();
                }
                r.data
                    .filter(|_| r.ok)
                    .map(|v| one_line(&format::text(&v)))
                    .unwrap_or_default()
            })
            .collect()
    }
}
