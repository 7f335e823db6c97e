//! A blocking client that keeps its connection (a session), for the CLI, `bar --daemon`
//! and scripts written in Rust.
//!
//! Blocking std I/O on purpose: a client asks one question at a time, and a runtime
//! would cost more to start than the whole round trip (`kernstat get` as a process is
//! measured in docs/measured.md).

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::runtime::{runtime_dir, SYSTEM_SOCKET};

/// The user daemon's socket.
pub fn user_socket() -> PathBuf {
    runtime_dir().join("sock")
}

/// `$KERNSTAT_SOCKET` when set: the socket clients use, and a user daemon listens on,
/// when no `--socket` is given.
pub fn socket_from_env() -> Option<PathBuf> {
    std::env::var_os("KERNSTAT_SOCKET")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}

/// The socket a client should use: `$KERNSTAT_SOCKET`, else the user daemon's if one is
/// there, else the system daemon's. A runtime directory that another user could have made (see
/// [`crate::runtime`]) is not looked into: the error says why, and callers carry on
/// without a daemon.
pub fn default_socket() -> Result<PathBuf, crate::runtime::UnsafeDir> {
    if let Some(p) = socket_from_env() {
        return Ok(p);
    }
    choose_socket(user_socket(), Path::new(SYSTEM_SOCKET))
}

/// Connects to the daemon at `socket` (default: [`default_socket`]). Err says, in one
/// sentence, why there is none to talk to: no socket, a socket served by another user,
/// or a runtime directory kernstat does not trust.
pub fn connect_to(socket: Option<&Path>) -> Result<(PathBuf, Session), String> {
    let sock = match socket {
        Some(p) => p.to_path_buf(),
        None => default_socket().map_err(|e| e.to_string())?,
    };
    match Session::connect(&sock) {
        Ok(s) => Ok((sock, s)),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Err(e.to_string()),
        Err(e) => Err(format!("no daemon at {} ({e})", sock.display())),
    }
}

fn choose_socket(user: PathBuf, system: &Path) -> Result<PathBuf, crate::runtime::UnsafeDir> {
    // The system daemon's directory belongs to its --user once it runs (it must remove
    // its socket): when the user socket is that one (a runtime directory pointed at
    // it), the peer check (root listened on it) is the guard, not the owner.
    if user != system {
        if let Some(dir) = user.parent() {
            crate::runtime::check_existing(dir)?;
        }
    }
    Ok(if user.exists() || !system.exists() {
        user
    } else {
        system.to_path_buf()
    })
}

/// One reply.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Reply {
    /// Whether the request succeeded.
    pub ok: bool,
    /// The value (absent on errors).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    /// The key (in watch streams).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// How old the value is, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age_ms: Option<u64>,
    /// Older than the daemon's refresh interval allows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale: Option<bool>,
    /// What went wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Machine-readable error code (no_data, unknown_key, bad_request, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Who answered, filled in by `kernstat get`: `shm` (the shared-memory snapshot),
    /// `socket` (the daemon), `direct` (computed without a daemon).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
}

impl Reply {
    /// A reply carrying a value as the daemon serialised it (`null` or unparsable:
    /// `no_data`).
    pub fn from_json(json: &[u8]) -> Reply {
        match serde_json::from_slice::<serde_json::Value>(json).ok() {
            Some(serde_json::Value::Null) | None => Reply {
                ok: false,
                code: Some("no_data".into()),
                error: Some("no data".into()),
                ..Reply::default()
            },
            Some(v) => Reply {
                ok: true,
                data: Some(v),
                age_ms: Some(0),
                stale: Some(false),
                ..Reply::default()
            },
        }
    }

    /// The key had no value (a known key with nothing to report on this machine).
    pub fn no_data(&self) -> bool {
        self.code.as_deref() == Some("no_data")
    }

    /// The exit status a client reports for this reply (README: exit codes): 0 with a
    /// value, 1 without one (no battery here, not a repository), 2 for an error.
    pub fn exit_status(&self) -> i32 {
        match (&self.data, self.ok) {
            (Some(_), true) => 0,
            (None, true) => 1,
            _ if self.no_data() => 1,
            _ => 2,
        }
    }
}

/// A value as one line of text, as `kernstat get` prints it: strings bare, null empty,
/// anything else as JSON; control characters (a newline, ESC, BEL, C1 codes) as spaces,
/// so that a value from a hostile repository or a `put` cannot drive the terminal it is
/// printed on (shared/security L1).
pub fn value_text(v: &serde_json::Value) -> String {
    let s = match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    };
    printable(s)
}

/// `s` with every control character replaced by a space.
pub fn printable(s: String) -> String {
    if s.chars().any(char::is_control) {
        s.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    } else {
        s
    }
}

/// A connection to the daemon, kept across requests.
#[derive(Debug)]
pub struct Session {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    line: Vec<u8>,
    request: Vec<u8>,
}

impl Session {
    /// Connects to the daemon at `path`, if it is served by this user or root (a socket
    /// another user listens on is refused with PermissionDenied, saying whose it is).
    pub fn connect(path: &Path) -> io::Result<Session> {
        let stream = UnixStream::connect(path)?;
        crate::runtime::check_peer(&stream, path)?;
        let writer = stream.try_clone()?;
        Ok(Session {
            reader: BufReader::with_capacity(64 * 1024, stream),
            writer,
            line: Vec::with_capacity(4096),
            request: Vec::with_capacity(256),
        })
    }

    /// Gives up on a reply that takes longer than `t` (None: wait forever).
    pub fn set_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.writer.set_read_timeout(t)?;
        self.writer.set_write_timeout(t)
    }

    /// Sends one request line (without its newline) and returns the raw reply line.
    pub fn raw(&mut self, request: &[u8]) -> io::Result<&[u8]> {
        self.request.clear();
        self.request.extend_from_slice(request);
        self.request.push(b'\n');
        match self.writer.write_all(&self.request) {
            Ok(()) => self.read_line(),
            // A daemon that refuses a connection says why and hangs up: the reason
            // may already be waiting even though our request could not be sent.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => self.read_line().map_err(|_| e),
            Err(e) => Err(e),
        }
    }

    fn read_line(&mut self) -> io::Result<&[u8]> {
        self.line.clear();
        let n = self.reader.read_until(b'\n', &mut self.line)?;
        if n == 0 || self.line.last() != Some(&b'\n') {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection",
            ));
        }
        self.line.pop();
        Ok(&self.line)
    }

    fn call(&mut self, req: serde_json::Value) -> io::Result<Reply> {
        let body = serde_json::to_vec(&req)?;
        let line = self.raw(&body)?;
        serde_json::from_slice(line).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// `get`: the value of `key` (and `path`, for git.* keys).
    pub fn get(&mut self, key: &str, path: Option<&str>) -> io::Result<Reply> {
        self.call(match path {
            Some(p) => serde_json::json!({"op": "get", "key": key, "path": p}),
            None => serde_json::json!({"op": "get", "key": key}),
        })
    }

    /// Several `get`s in one write (pipelined), their replies in order.
    pub fn get_many(&mut self, queries: &[Query<'_>]) -> io::Result<Vec<Reply>> {
        self.request.clear();
        for q in queries {
            serde_json::to_writer(&mut self.request, &q.request("get"))?;
            self.request.push(b'\n');
        }
        let sent = self.writer.write_all(&self.request);
        let mut out = Vec::with_capacity(queries.len());
        for _ in queries {
            match self.read_line() {
                Ok(line) => out.push(
                    serde_json::from_slice(line)
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?,
                ),
                Err(e) => return Err(sent.err().unwrap_or(e)),
            }
        }
        Ok(out)
    }

    /// `watch` with a path and environment (see [`Query`]).
    pub fn watch_query(mut self, q: &Query<'_>) -> io::Result<Watch> {
        let mut body = serde_json::to_vec(&q.request("watch"))?;
        body.push(b'\n');
        self.writer.write_all(&body)?;
        Ok(Watch { session: self })
    }

    /// Another op without arguments: `list`, `status`, `hello`, `refresh`.
    pub fn op(&mut self, op: &str) -> io::Result<Reply> {
        self.call(serde_json::json!({ "op": op }))
    }

    /// `watch`: turns the session into a stream of updates of `key`.
    pub fn watch(mut self, key: &str, path: Option<&str>) -> io::Result<Watch> {
        let req = match path {
            Some(p) => serde_json::json!({"op": "watch", "key": key, "path": p}),
            None => serde_json::json!({"op": "watch", "key": key}),
        };
        let mut body = serde_json::to_vec(&req)?;
        body.push(b'\n');
        self.writer.write_all(&body)?;
        Ok(Watch { session: self })
    }
}

/// One key to ask for: with the directory for path-scoped keys, and the asking shell's
/// variables for context keys (`providers::context::env_for` names them).
#[derive(Clone, Debug, Default)]
pub struct Query<'a> {
    /// The key, or a provider's name.
    pub key: &'a str,
    /// The directory (absolute).
    pub path: Option<&'a str>,
    /// The variables.
    pub env: Option<&'a std::collections::BTreeMap<String, String>>,
}

impl Query<'_> {
    fn request(&self, op: &str) -> serde_json::Value {
        let mut v = serde_json::json!({"op": op, "key": self.key});
        if let Some(p) = self.path {
            v["path"] = p.into();
        }
        if let Some(env) = self.env {
            v["env"] = serde_json::json!(env);
        }
        v
    }
}

/// The updates of one key, as they happen.
#[derive(Debug)]
pub struct Watch {
    session: Session,
}

impl Watch {
    /// The next update as the daemon's raw JSON line (None when the daemon closed the
    /// stream), for callers that parse it into their own types.
    pub fn next_raw(&mut self) -> io::Result<Option<&[u8]>> {
        match self.session.read_line() {
            Ok(line) => Ok(Some(line)),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl Iterator for Watch {
    type Item = io::Result<Reply>;

    fn next(&mut self) -> Option<io::Result<Reply>> {
        match self.session.read_line() {
            Ok(line) => Some(
                serde_json::from_slice(line)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            ),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => None,
            Err(e) => Some(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn exit_status_is_0_with_a_value_1_without_and_2_for_an_error() {
        let value = Reply {
            ok: true,
            data: Some(serde_json::json!(3)),
            ..Reply::default()
        };
        let empty = Reply {
            ok: true,
            ..Reply::default()
        };
        let no_data = Reply {
            ok: false,
            code: Some("no_data".into()),
            ..Reply::default()
        };
        let error = Reply {
            ok: false,
            code: Some("unknown_key".into()),
            ..Reply::default()
        };
        let statuses: Vec<i32> = [value, empty, no_data, error]
            .iter()
            .map(Reply::exit_status)
            .collect();
        assert_eq!(statuses, [0, 1, 1, 2]);
    }

    #[test]
    fn an_untrusted_user_directory_is_refused_but_not_the_system_sockets() {
        let t = tempfile::tempdir().unwrap();
        let open = t.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let sock = open.join("sock");
        // A user socket in a directory others can write: refused, whatever the system
        // socket is.
        let e = choose_socket(sock.clone(), &t.path().join("elsewhere/sock")).unwrap_err();
        assert_eq!(e.why, "is writable by others");
        // The same path as the system socket (root, no XDG_RUNTIME_DIR): used; the
        // peer check on connect decides.
        assert_eq!(choose_socket(sock.clone(), &sock).unwrap(), sock);
    }
}
