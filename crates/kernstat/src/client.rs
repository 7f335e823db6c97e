//! The daemon's command-line clients: `kernstat get`, `watch` and `status`.
//!
//! Exit status for scripts and prompts: 0 with a value, 1 when the key has no value
//! (no battery on this machine, not a git repository), 2 on an error (unknown key, bad
//! input, no daemon for `watch`/`status`). Without a daemon, `get` computes the value
//! here from /proc and the repository's files, and says so on stderr.

use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

use std::collections::BTreeMap;

use kernstat_client::fill;
use kernstat_client::keys as providers;
use kernstat_client::keys::context;
use kernstat_client::lookup::{self, Lookup};
use kernstat_client::{default_socket, Query, Reply};

use crate::cli::{EvalArgs, GetArgs, PutArgs, StatusArgs, WatchArgs};
use kernstat_client::autostart;
use kernstat_client::format;
use kernstat_client::format::Format;

/// Window for rates when `get` computes a value itself.
/// How long a client waits for the daemon's answer.
pub const TIMEOUT: Duration = Duration::from_secs(5);

pub use kernstat_client::session::connect_to as connect;

fn fail(msg: impl std::fmt::Display) -> i32 {
    eprintln!("kernstat: {msg}");
    2
}

/// Prints a reply's value (strings bare, everything else as JSON) or its error, and
/// returns the exit status.
fn print_reply(key: &str, reply: &Reply, json: bool) -> i32 {
    let status = reply.exit_status();
    let mut out = io::stdout().lock();
    let written = if json {
        serde_json::to_writer(&mut out, reply)
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out))
    } else if let (0, Some(v)) = (status, &reply.data) {
        writeln!(out, "{}", format::text(v))
    } else {
        Ok(())
    };
    if written.is_err() {
        return status;
    }
    if !json && status != 0 {
        let why = reply.error.as_deref().unwrap_or("no data");
        eprintln!("kernstat: {key}: {why}");
    }
    status
}

/// Answers every key: from the daemon's shared-memory snapshot where it has the key
/// (no socket, no system call once mapped), the rest over one connection (pipelined),
/// or computed here when no daemon runs (then the user daemon is started for next time,
/// see `autostart`).
fn fetch(keys: &[String], path: Option<&Path>, socket: Option<&Path>) -> Result<Vec<Reply>, i32> {
    let mut paths = Vec::with_capacity(keys.len());
    for k in keys {
        match lookup::key_dir(k, path) {
            Ok(p) => paths.push(p),
            Err(e) => return Err(fail(format!("--path {e}"))),
        }
    }
    let env = lookup::process_env(keys.iter().map(String::as_str));
    let queries = queries(keys, &paths, &env);
    let sock = match socket {
        Some(p) => Ok(p.to_path_buf()),
        None => default_socket().map_err(|e| e.to_string()),
    };
    let fetched = match &sock {
        Ok(s) => Lookup::new(s.clone(), Some(TIMEOUT))
            .fetch(&queries)
            .map_err(|e| fail(format!("daemon at {}: {e}", s.display())))?,
        Err(why) => lookup::Fetched {
            replies: vec![None; keys.len()],
            unreachable: Some(why.clone()),
        },
    };
    complete(
        fetched,
        &queries,
        sock.ok().as_deref(),
        socket.is_some(),
        false,
    )
}

/// The queries for `keys`: each with its directory, and the environment for context keys.
pub fn queries<'a>(
    keys: &'a [String],
    paths: &'a [Option<String>],
    env: &'a BTreeMap<String, String>,
) -> Vec<Query<'a>> {
    keys.iter()
        .zip(paths)
        .map(|(k, p)| Query {
            key: k,
            path: p.as_deref(),
            env: context::lookup(k).is_some().then_some(env),
        })
        .collect()
}

/// Fills in what no daemon answered by computing it here, after saying why on stderr
/// (unless `quiet`) and starting the user daemon for next time (unless `explicit`: a
/// `--socket` names a daemon someone else runs).
pub fn complete(
    fetched: lookup::Fetched,
    queries: &[Query<'_>],
    socket: Option<&Path>,
    explicit: bool,
    quiet: bool,
) -> Result<Vec<Reply>, i32> {
    if let Some(why) = &fetched.unreachable {
        let started = socket
            .filter(|_| !explicit)
            .and_then(autostart::start_user_daemon);
        let then = match started {
            Some(Ok(autostart::Started::Spawned(log))) => {
                format!("started the user daemon (log: {})", log.display())
            }
            Some(Ok(autostart::Started::Unit)) => "started kernstat.service".to_string(),
            Some(Ok(autostart::Started::Busy)) => "the user daemon is starting".to_string(),
            Some(Err(e)) => format!("could not start the user daemon: {e}"),
            None => "`kernstat daemon` serves cached values".to_string(),
        };
        if !quiet {
            eprintln!("kernstat: {why}; computed directly ({then})");
        }
    }
    let mut out = Vec::with_capacity(queries.len());
    for (q, r) in queries.iter().zip(fetched.replies) {
        out.push(match r {
            Some(r) => r,
            None => {
                let mut r = kernstat_service::direct::answer(q.key, q.path).map_err(fail)?;
                r.answered_by = Some("direct".into());
                r
            }
        });
    }
    Ok(out)
}

/// `kernstat get`.
pub fn get(args: &GetArgs) -> i32 {
    if args.list {
        let mut out = io::stdout().lock();
        for (k, what) in providers::all_keys() {
            if writeln!(out, "{k:<26}{what}").is_err() {
                break;
            }
        }
        return 0;
    }
    if args.keys.is_empty() {
        return fail("get needs a KEY (kernstat get --list names them)");
    }
    let replies = match fetch(
        &args.keys,
        args.path.as_deref(),
        args.socket.socket.as_deref(),
    ) {
        Ok(r) => r,
        Err(status) => return status,
    };
    if args.json || (args.keys.len() == 1 && args.format == Format::Text) {
        return args
            .keys
            .iter()
            .zip(&replies)
            .map(|(k, r)| {
                if args.json || !providers::is_whole(k) {
                    print_reply(k, r, args.json)
                } else {
                    print_values(
                        args.format,
                        std::slice::from_ref(k),
                        std::slice::from_ref(r),
                    )
                }
            })
            .max()
            .unwrap_or(0);
    }
    print_values(args.format, &args.keys, &replies)
}

fn print_values(format: Format, keys: &[String], replies: &[Reply]) -> i32 {
    let values: Vec<(String, Option<serde_json::Value>, bool)> = keys
        .iter()
        .zip(replies)
        .map(|(k, r)| {
            (
                k.clone(),
                r.data.clone().filter(|_| r.ok),
                providers::is_whole(k),
            )
        })
        .collect();
    let _ = io::stdout()
        .lock()
        .write_all(format::render(format, &values).as_bytes());
    let mut status = 0;
    for (k, r) in keys.iter().zip(replies) {
        let st = r.exit_status();
        if st == 2 {
            eprintln!("kernstat: {k}: {}", r.error.as_deref().unwrap_or("failed"));
        }
        status = status.max(st);
    }
    status
}

/// `kernstat put`.
pub fn put(args: &PutArgs) -> i32 {
    let data: serde_json::Value = match (&args.value, args.json, args.delete) {
        (_, _, true) => serde_json::Value::Null,
        (Some(v), true, _) => match serde_json::from_str(v) {
            Ok(j) => j,
            Err(e) => return fail(format!("--json: {v:?} is not JSON: {e}")),
        },
        (Some(v), false, _) => serde_json::Value::String(v.clone()),
        (None, _, _) => return fail("put needs a VALUE (or --delete)"),
    };
    let (sock, mut s) = match connect(args.socket.socket.as_deref()) {
        Ok(c) => c,
        Err(why) => return fail(format!("{why}; put needs a daemon (`kernstat daemon`)")),
    };
    let _ = s.set_timeout(Some(TIMEOUT));
    let mut req = serde_json::json!({"op": "put", "key": args.key, "data": data});
    if let Some(t) = args.ttl {
        req["ttl_s"] = t.into();
    }
    let line = match serde_json::to_vec(&req)
        .map_err(io::Error::from)
        .and_then(|b| s.raw(&b).map(<[u8]>::to_vec))
    {
        Ok(l) => l,
        Err(e) => return fail(format!("daemon at {}: {e}", sock.display())),
    };
    match serde_json::from_slice::<Reply>(&line) {
        Ok(r) if r.ok => 0,
        Ok(r) => fail(format!(
            "{}: {}",
            args.key,
            r.error.as_deref().unwrap_or("refused")
        )),
        Err(e) => fail(format!("daemon at {}: {e}", sock.display())),
    }
}

/// `kernstat eval`.
pub fn eval(args: &EvalArgs) -> i32 {
    let pieces = match fill::parse(&args.template) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let keys: Vec<String> = fill::keys(&pieces)
        .into_iter()
        .map(str::to_string)
        .collect();
    let replies = if keys.is_empty() {
        Vec::new()
    } else {
        match fetch(&keys, args.path.as_deref(), args.socket.socket.as_deref()) {
            Ok(r) => r,
            Err(status) => return status,
        }
    };
    let mut status = 0;
    for (k, r) in keys.iter().zip(&replies) {
        if r.exit_status() == 2 {
            eprintln!("kernstat: {k}: {}", r.error.as_deref().unwrap_or("failed"));
            status = 2;
        }
    }
    let text = fill::render(&pieces, |k| {
        keys.iter()
            .position(|x| x == k)
            .and_then(|i| replies[i].data.as_ref().filter(|_| replies[i].ok))
            .map(format::text)
            .unwrap_or_default()
    });
    let _ = writeln!(io::stdout().lock(), "{text}");
    status
}

/// `kernstat watch`.
pub fn watch(args: &WatchArgs) -> i32 {
    let path = match lookup::key_dir(&args.key, args.path.as_deref()) {
        Ok(p) => p,
        Err(e) => return fail(format!("--path {e}")),
    };
    let sock = match args.socket.socket.clone() {
        Some(p) => p,
        None => match default_socket() {
            Ok(p) => p,
            Err(e) => return fail(e),
        },
    };
    // A machine-wide key is followed in the shared-memory snapshot (no socket, nothing
    // for the daemon to do); when that stops (the daemon went away), the socket says why
    // or serves on.
    if let Some(follow) = lookup::Follow::new(sock.clone(), &args.key) {
        for reply in follow {
            match print_update(&args.key, &reply, args.json) {
                Ok(true) => {}
                Ok(false) => return 0,
                Err(status) => return status,
            }
        }
    }
    let session = match connect(Some(&sock)) {
        Ok((_, s)) => s,
        Err(why) => return fail(format!("{why}; start one with `kernstat daemon`")),
    };
    let env = lookup::process_env([args.key.as_str()]);
    let query = Query {
        key: &args.key,
        path: path.as_deref(),
        env: context::lookup(&args.key).is_some().then_some(&env),
    };
    let stream = match session.watch_query(&query) {
        Ok(w) => w,
        Err(e) => return fail(format!("daemon at {}: {e}", sock.display())),
    };
    for update in stream {
        let mut reply = match update {
            Ok(r) => r,
            Err(e) => return fail(format!("daemon at {}: {e}", sock.display())),
        };
        reply.answered_by = Some("socket".into());
        match print_update(&args.key, &reply, args.json) {
            Ok(true) => {}
            Ok(false) => return 0,
            Err(status) => return status,
        }
    }
    fail(format!(
        "the daemon at {} closed the stream",
        sock.display()
    ))
}

/// One line of `watch`. Ok(false): the reader went away; Err: the value's error, printed,
/// as the exit status.
fn print_update(key: &str, reply: &Reply, json: bool) -> Result<bool, i32> {
    if !reply.ok {
        return Err(print_reply(key, reply, json));
    }
    let mut out = io::stdout().lock();
    let written = if json {
        serde_json::to_writer(&mut out, reply)
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        match &reply.data {
            Some(serde_json::Value::String(s)) => writeln!(out, "{s}"),
            Some(v) => writeln!(out, "{v}"),
            None => writeln!(out, "null"),
        }
    };
    Ok(written.and_then(|()| out.flush()).is_ok())
}

/// `kernstat status`.
pub fn status(args: &StatusArgs) -> i32 {
    let (sock, mut s) = match connect(args.socket.socket.as_deref()) {
        Ok(c) => c,
        Err(why) => return fail(why),
    };
    let _ = s.set_timeout(Some(TIMEOUT));
    let reply = match s.op("status") {
        Ok(r) => r,
        Err(e) => return fail(format!("daemon at {}: {e}", sock.display())),
    };
    let Some(d) = reply.data.as_ref().filter(|_| reply.ok) else {
        return print_reply("status", &reply, args.json);
    };
    let text = if args.json {
        format!("{d}\n")
    } else {
        kernstat_render::status::status_text(d, &sock, &kernstat_record::time::local_stamp)
    };
    let _ = io::stdout().lock().write_all(text.as_bytes());
    0
}
