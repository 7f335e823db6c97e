//! The socket side, mini-redis shaped: an accept loop with a connection cap (in all and
//! per user) and a peer check, one task per connection, `serve(listener, daemon,
//! shutdown)`. A connection reads newline-delimited requests (each at most 64 KiB) and
//! answers each; answers to pipelined requests are written together, in one write. A
//! client that stops reading only stalls its own task, and a watch stream that cannot
//! be written for 10 s (configurable) is dropped.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{broadcast, Semaphore};

use crate::client_files::{Creds, Rights};
use crate::providers::git::schedule as git_schedule;
use kernstat_client::protocol::{self, Code, Request, MAX_REQUEST};

use super::{check_env, Access, Asking, Daemon, Event, Peer};

/// Whose rights files are read with for the client at the other end of `stream`: its
/// own (uid, primary and supplementary groups as it connected) when the daemon runs as
/// another user and the client is not root (a system daemon), so that nobody learns
/// through the daemon what they could not read; the daemon's own otherwise.
fn rights_for(stream: &UnixStream, peer: Peer) -> Rights {
    use std::os::fd::AsFd;
    let me = rustix::process::geteuid().as_raw();
    match (peer.uid, stream.peer_cred()) {
        (Some(uid), _) if uid == me || uid == 0 => Rights::Own,
        (Some(uid), Ok(c)) => Rights::Of(Creds {
            uid,
            gid: c.gid(),
            groups: crate::client_files::peer_groups(stream.as_fd()).unwrap_or_default(),
        }),
        // Nobody we can name: the rights of nobody.
        _ => Rights::Of(Creds {
            uid: 65534,
            gid: 65534,
            groups: Vec::new(),
        }),
    }
}

/// The process at the other end of `stream`.
fn peer_of(stream: &UnixStream) -> Peer {
    match stream.peer_cred() {
        Ok(c) => Peer {
            uid: Some(c.uid()),
            pid: c.pid(),
        },
        Err(_) => Peer::default(),
    }
}

fn allowed(access: &Access, uid: Option<u32>) -> bool {
    match (&access.uids, uid) {
        (None, _) => true,
        (Some(_), Some(0)) => true,
        (Some(list), Some(u)) => list.contains(&u),
        (Some(_), None) => false,
    }
}

async fn refuse(mut stream: UnixStream, msg: &str) {
    let mut out = Vec::new();
    protocol::write_error(&mut out, Code::Refused, msg);
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&out)).await;
}

/// Accepts connections on `listener` (from `bind`) until `shutdown` resolves. Must run
/// on a tokio runtime.
pub async fn serve(
    listener: std::os::unix::net::UnixListener,
    d: Arc<Daemon>,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = UnixListener::from_std(listener)?;
    let permits = Arc::new(Semaphore::new(d.config.max_connections));
    let per_user: Arc<Mutex<std::collections::HashMap<u32, usize>>> = Arc::default();
    tokio::pin!(shutdown);
    loop {
        let Some(stream) = crate::accept::next(|| listener.accept(), &mut shutdown).await else {
            return Ok(());
        };
        let peer = peer_of(&stream);
        if !allowed(&d.config.access, peer.uid) {
            tokio::spawn(refuse(stream, "not allowed to use this daemon"));
            continue;
        }
        // One user may not take every connection (root may).
        let uid = peer.uid.unwrap_or(u32::MAX);
        if uid != 0 {
            let mut g = per_user.lock().unwrap_or_else(|e| e.into_inner());
            let n = g.entry(uid).or_insert(0);
            if *n >= d.config.max_connections_per_user {
                drop(g);
                let why = format!(
                    "too many connections from uid {uid} (at most {} per user)",
                    d.config.max_connections_per_user
                );
                tokio::spawn(async move { refuse(stream, &why).await });
                continue;
            }
            *n += 1;
        }
        match permits.clone().try_acquire_owned() {
            Ok(permit) => {
                let d = d.clone();
                let per_user = per_user.clone();
                tokio::spawn(async move {
                    d.clients.fetch_add(1, Ordering::Relaxed);
                    let _ = connection(stream, &d, peer).await;
                    d.clients.fetch_sub(1, Ordering::Relaxed);
                    drop(permit);
                    if uid != 0 {
                        let mut g = per_user.lock().unwrap_or_else(|e| e.into_inner());
                        if let Some(n) = g.get_mut(&uid) {
                            *n -= 1;
                            if *n == 0 {
                                g.remove(&uid);
                            }
                        }
                    }
                });
            }
            Err(_) => {
                if uid != 0 {
                    let mut g = per_user.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(n) = g.get_mut(&uid) {
                        *n = n.saturating_sub(1);
                    }
                }
                tokio::spawn(refuse(stream, "too many connections"));
            }
        }
    }
}

/// Reads one line (without its newline) into `line`, at most `MAX_REQUEST` bytes.
/// Ok(false) at end of stream; Err(InvalidData) for a line that is too long.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<bool> {
    line.clear();
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(!line.is_empty());
        }
        let (chunk, found) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if line.len() + chunk.len() > MAX_REQUEST {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "too long",
            ));
        }
        line.extend_from_slice(chunk);
        let used = found.unwrap_or(buf.len());
        r.consume(used);
        if found.is_some() {
            return Ok(true);
        }
    }
}

async fn connection(stream: UnixStream, d: &Arc<Daemon>, peer: Peer) -> std::io::Result<()> {
    let rights = rights_for(&stream, peer);
    let (rd, wr) = stream.into_split();
    // Small per-connection buffers (requests are short; answers are built in `out` and
    // written with one call), so that thousands of idle clients cost little memory.
    let mut rd = BufReader::with_capacity(4096, rd);
    let mut wr = wr;
    let mut line = Vec::with_capacity(256);
    let mut out = Vec::with_capacity(1024);
    loop {
        match read_line(&mut rd, &mut line).await {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                protocol::write_error(
                    &mut out,
                    Code::TooLong,
                    &format!("request longer than {MAX_REQUEST} bytes; closing"),
                );
                return wr.write_all(&out).await;
            }
            Err(e) => return Err(e),
        }
        d.requests.fetch_add(1, Ordering::Relaxed);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        match protocol::parse(&line) {
            Err(e) => protocol::write_error(&mut out, Code::BadRequest, &e.to_string()),
            Ok(Request::Watch { key, path, env }) => {
                if let Err(why) = check_env(env.as_ref()) {
                    protocol::write_error(&mut out, Code::BadRequest, &why);
                    continue_or_flush(&mut rd, &mut wr, &mut out).await?;
                    continue;
                }
                let key = key.to_string();
                let path = path.map(str::to_string);
                wr.write_all(&out).await?;
                out.clear();
                let ask = Asking {
                    path: path.as_deref(),
                    env: env.as_ref(),
                    peer,
                    rights: &rights,
                };
                return watch(d, &key, &ask, rd, wr).await;
            }
            Ok(req) => d.respond(&req, peer, &rights, &mut out).await,
        }
        // Answers to pipelined requests go out together.
        if rd.buffer().is_empty() {
            wr.write_all(&out).await?;
            out.clear();
            if out.capacity() > 64 * 1024 {
                // Do not keep a snapshot-sized buffer for every idle client.
                out = Vec::with_capacity(1024);
            }
        }
    }
}

/// Writes the answers gathered so far unless more pipelined requests are waiting.
async fn continue_or_flush(
    rd: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    wr: &mut tokio::net::unix::OwnedWriteHalf,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    if rd.buffer().is_empty() {
        wr.write_all(out).await?;
        out.clear();
    }
    Ok(())
}

async fn watch(
    d: &Arc<Daemon>,
    key: &str,
    ask: &Asking<'_>,
    mut rd: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut wr: tokio::net::unix::OwnedWriteHalf,
) -> std::io::Result<()> {
    let path = ask.path;
    // What a change event names: the path for git keys, the scope for context keys.
    let scope = d.context_scope(key, ask).or_else(|| {
        path.filter(|_| key == "git" || key.starts_with("git."))
            .map(|p| git_schedule::scope(p, ask.rights))
    });
    let wakes_on = scope.as_deref().or(path);
    let mut rx = d.subscribe();
    let mut out = Vec::with_capacity(1024);
    let mut last: Option<Instant> = None;
    let mut scratch = [0u8; 512];
    loop {
        if let Some(e) = d.value(key, ask).await {
            if last != Some(e.updated) {
                last = Some(e.updated);
                out.clear();
                out.extend_from_slice(b"{\"ok\":true,\"key\":");
                let _ = serde_json::to_writer(&mut out, key);
                out.extend_from_slice(b",\"data\":");
                out.extend_from_slice(&e.json);
                out.extend_from_slice(b"}\n");
                // A client that does not read its stream is dropped.
                let write = wr.write_all(&out);
                match tokio::time::timeout(d.config.watch_write_timeout, write).await {
                    Ok(r) => r?,
                    Err(_) => return Ok(()),
                }
            }
        } else if last.is_none() && !d.known(key) {
            out.clear();
            protocol::write_error(&mut out, Code::UnknownKey, &format!("unknown key {key:?}"));
            return wr.write_all(&out).await;
        }
        tokio::select! {
            ev = rx.recv() => match ev {
                Ok(Event::System) if wakes_on.is_none() => {}
                Ok(Event::Path(p)) if Some(&*p) == wakes_on => {}
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            },
            n = rd.read(&mut scratch) => {
                // The client closed (or sent something: watch streams take no requests).
                if n.unwrap_or(0) == 0 {
                    return Ok(());
                }
            }
        }
    }
}

/// Binds `path` for the daemon: prepares its directory (created 0755 for a system
/// daemon, 0700 for a user daemon; an existing one only when it is ours and nobody else
/// can write it: see [`kernstat_client::runtime::prepare`]), replaces a stale socket, and sets the
/// socket's mode. A plain std listener, so that it can be bound before the runtime's
/// threads exist (a system daemon binds as root, then drops privileges, then starts
/// threads).
pub fn bind(
    path: &Path,
    mode: u32,
    dir_mode: u32,
) -> std::io::Result<std::os::unix::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Some(dir) = path.parent() {
        // Made with `dir_mode` when missing; an existing one is left as it is (M1).
        kernstat_client::runtime::prepare(dir, dir_mode & 0o077 != 0)?;
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a socket; refusing to replace it",
                    path.display()
                ),
            ));
        }
        // Someone answering there is a live daemon: do not take its socket.
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("a daemon is already listening on {}", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let l = std::os::unix::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(l)
}
