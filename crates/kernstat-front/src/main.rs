//! The `kernstat` program users run: answers `kernstat get KEY` and `kernstat eval
//! TEMPLATE` from the daemon's shared-memory snapshot itself, and hands everything else
//! to `kernstat-full` (beside it) by exec, with the same arguments.
//!
//! Why two programs: a tmux `#()` job, a starship module or a fish prompt starts `kernstat
//! get` again and again, and loading the whole of kernstat (16 MB, position-independent,
//! libbpf with libelf and zlib) costs 1.3-1.5 ms before `main` — 31,000 relocations and
//! ~325 page faults, against ~50 faults for `/bin/true` (perf stat -r 300, see
//! docs/measured.md). This program links the snapshot reader, serde_json and the template parser,
//! statically (build.rs), and skips Rust's runtime set-up (`no_main`: no /proc/self/maps
//! read, no signal stack): measured at /bin/true's start-up time (scripts/bench.sh,
//! section `shm`). What it cannot answer from memory — another format, several keys, a
//! key the snapshot lacks, no daemon, a bad flag — it leaves to `kernstat-full`, so every
//! other answer and every error message is the full program's.

#![cfg_attr(not(test), no_main)]

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use kernstat_client::fill;
use kernstat_client::keys::{self as providers, context};
use kernstat_client::lookup::{self, Lookup};
use kernstat_client::session::value_text;
use kernstat_client::{default_socket, Query, Reply};

/// The full program's file name, in the directory of this one.
const FULL: &str = "kernstat-full";

/// What a fast `get` or `eval` was asked.
#[derive(Debug, Default, PartialEq)]
struct Fast {
    ask: Ask,
    path: Option<PathBuf>,
    socket: Option<PathBuf>,
}

#[derive(Debug, PartialEq)]
enum Ask {
    /// `get KEY`, `get --json KEY`.
    Get { key: String, json: bool },
    /// `eval TEMPLATE`.
    Eval { template: String },
}

impl Default for Ask {
    fn default() -> Ask {
        Ask::Get {
            key: String::new(),
            json: false,
        }
    }
}

/// `get [--json] [--path DIR] [--socket SOCK] KEY` with one key that is not a whole
/// provider, or `eval [--path DIR] [--socket SOCK] TEMPLATE`; None for anything else (the
/// full program parses it, with its messages).
fn parse(args: &[OsString]) -> Option<Fast> {
    let mut rest = args.iter().skip(1).map(|a| a.to_str());
    let command = rest.next()??;
    if command != "get" && command != "eval" {
        return None;
    }
    let mut fast = Fast::default();
    let mut json = false;
    let mut positional = None;
    while let Some(a) = rest.next() {
        let a = a?;
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (a, None),
        };
        let mut value = || -> Option<PathBuf> {
            let v = match inline {
                Some(v) => v,
                None => rest.next()??,
            };
            (!v.is_empty()).then(|| PathBuf::from(v))
        };
        match flag {
            "--json" if inline.is_none() && command == "get" => json = true,
            "--path" if fast.path.is_none() => fast.path = Some(value()?),
            "--socket" if fast.socket.is_none() => fast.socket = Some(value()?),
            _ if a.starts_with('-') || positional.is_some() || a.is_empty() => return None,
            _ => positional = Some(a.to_string()),
        }
    }
    let positional = positional?;
    fast.ask = if command == "eval" {
        Ask::Eval {
            template: positional,
        }
    } else if providers::is_whole(&positional) {
        return None;
    } else {
        Ask::Get {
            key: positional,
            json,
        }
    };
    Some(fast)
}

/// Every key's reply from the snapshot, if it has a value for each.
fn from_memory(fast: &Fast, keys: &[String]) -> Option<Vec<Reply>> {
    if keys.is_empty() {
        return Some(Vec::new());
    }
    let socket = match &fast.socket {
        Some(s) => s.clone(),
        None => default_socket().ok()?,
    };
    let mut dirs = Vec::with_capacity(keys.len());
    for k in keys {
        dirs.push(lookup::key_dir(k, fast.path.as_deref()).ok()?);
    }
    let env = lookup::process_env(keys.iter().map(String::as_str));
    let queries: Vec<Query<'_>> = keys
        .iter()
        .zip(&dirs)
        .map(|(k, d)| Query {
            key: k,
            path: d.as_deref(),
            env: context::lookup(k).is_some().then_some(&env),
        })
        .collect();
    Lookup::new(socket, None)
        .from_snapshot(&queries)
        .into_iter()
        .map(|r| r.filter(|r| r.ok && r.data.is_some()))
        .collect()
}

/// Answers from the snapshot: the exit status (0), or None when the snapshot lacks a
/// value (no daemon, a key nobody asked about yet, no data, an error) or the template
/// does not parse.
fn answer(fast: &Fast) -> Option<i32> {
    let mut line = match &fast.ask {
        Ask::Get { key, json } => {
            let reply = from_memory(fast, std::slice::from_ref(key))?.pop()?;
            if *json {
                serde_json::to_vec(&reply).ok()?
            } else {
                value_text(reply.data.as_ref()?).into_bytes()
            }
        }
        Ask::Eval { template } => {
            let pieces = fill::parse(template).ok()?;
            let keys: Vec<String> = fill::keys(&pieces)
                .into_iter()
                .map(str::to_string)
                .collect();
            let replies = from_memory(fast, &keys)?;
            fill::render(&pieces, |k| {
                keys.iter()
                    .position(|x| x == k)
                    .and_then(|i| replies[i].data.as_ref())
                    .map(value_text)
                    .unwrap_or_default()
            })
            .into_bytes()
        }
    };
    line.push(b'\n');
    // As the full program: a reader that went away is not an error (status 0).
    // SAFETY: setting a signal's disposition to SIG_IGN.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let mut out = io::stdout().lock();
    let _ = out.write_all(&line).and_then(|()| out.flush());
    Some(0)
}

/// Runs the full program in this process with the same arguments; returns only if it
/// cannot be run.
fn exec_full(args: &[OsString]) -> i32 {
    let full = match std::env::current_exe() {
        Ok(me) => me.with_file_name(FULL),
        Err(e) => {
            eprintln!("kernstat: cannot find this program's path ({e}), so not {FULL}");
            return 2;
        }
    };
    let mut cmd = Command::new(&full);
    if let Some(arg0) = args.first() {
        cmd.arg0(arg0);
    }
    let err = cmd.args(args.iter().skip(1)).exec();
    eprintln!(
        "kernstat: cannot run {} ({err}); kernstat's two programs, kernstat and {FULL}, belong in one directory",
        full.display()
    );
    2
}

/// The C entry point: Rust's `main` set-up is skipped (see the module header).
#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    run()
}

/// Answers from memory, or becomes the full program.
#[cfg_attr(test, allow(dead_code))]
fn run() -> i32 {
    let args: Vec<OsString> = std::env::args_os().collect();
    if let Some(status) = parse(&args).and_then(|fast| answer(&fast)) {
        return status;
    }
    exec_full(&args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Option<Fast> {
        let v: Vec<OsString> = std::iter::once("kernstat")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        parse(&v)
    }

    #[test]
    fn one_key_or_one_template_with_the_flags_they_take() {
        assert_eq!(
            p(&["get", "load.one"]),
            Some(Fast {
                ask: Ask::Get {
                    key: "load.one".into(),
                    json: false
                },
                ..Fast::default()
            })
        );
        assert_eq!(
            p(&[
                "get",
                "--json",
                "--path=/tmp",
                "git.branch",
                "--socket",
                "/s"
            ]),
            Some(Fast {
                ask: Ask::Get {
                    key: "git.branch".into(),
                    json: true
                },
                path: Some("/tmp".into()),
                socket: Some("/s".into()),
            })
        );
        assert_eq!(
            p(&["eval", "--path", "/r", "{git.branch} {load.one}"]),
            Some(Fast {
                ask: Ask::Eval {
                    template: "{git.branch} {load.one}".into()
                },
                path: Some("/r".into()),
                socket: None,
            })
        );
    }

    #[test]
    fn everything_else_goes_to_the_full_program() {
        for args in [
            &[][..],
            &["get"],
            &["eval"],
            &["bar"],
            &["get", "load.one", "mem.used"],
            &["get", "--format", "shell", "load.one"],
            &["get", "--list"],
            &["get", "--help"],
            &["get", "-h", "load.one"],
            &["get", "--json=1", "load.one"],
            &["get", "--path", "load.one"],
            &["get", "--path", "", "git.branch"],
            &["get", "--path", "/a", "--path", "/b", "git.branch"],
            &["get", "git"],
            &["get", "load"],
            &["get", "kubecontext"],
            &["get", ""],
            &["eval", "--json", "{load.one}"],
            &["eval", "{a}", "{b}"],
            &["eval", "-x"],
            &["--version"],
            &["getx", "load.one"],
        ] {
            assert_eq!(p(args), None, "{args:?}");
        }
    }
}
