//! Context providers: what a shell prompt asks about its surroundings rather than the
//! machine — which Kubernetes context, cloud project and profile, Python environment,
//! pinned tool versions, whether direnv allowed this directory, whether sudo is cached.
//!
//! Every answer is read from the files the tools themselves keep (never by running the
//! tool: the seed measured a spawn at up to 500,000× a file read). A provider is a pure
//! function of a context — the asking shell's directory and the few environment variables
//! it names — to a `Reading`: its fields, the files it looked at (so the schedule can
//! watch them, including ones that do not exist yet), and whether something that exists
//! could not be read (so the schedule backs off). `schedule` decides when to call them.
//!
//! Keys are `provider.field`; `provider` alone is the whole object. Some providers have
//! fields named by the data (`asdf.nodejs`), declared as `dynamic`.

pub mod asdf;
pub mod aws;
pub mod conda;
pub mod direnv;
pub mod files;
pub mod gcloud;
pub mod kube;
pub mod mise;
pub mod python;
pub mod schedule;
pub mod sudo;
pub mod talos;
pub mod terraform;

use std::collections::BTreeMap;

use crate::client_files::Rights;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Whether a provider's answer depends on the asking directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One answer per environment (kubecontext, aws ...).
    Global,
    /// One answer per directory (and environment): python, asdf, terraform ...
    Path,
}

/// The environment a provider sees: the variables the client sent with its request, or,
/// for a request without `env`, the daemon's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Env {
    /// What the client sent (a variable it did not send is unset).
    Given(BTreeMap<String, String>),
    /// The daemon's environment.
    Process,
}

/// Most variables a request may carry, and the longest value.
pub const MAX_ENV_VARS: usize = 32;
/// Longest environment value accepted in a request, in bytes.
pub const MAX_ENV_VALUE: usize = 4096;

impl Env {
    /// The variable's value; an empty value counts as unset (as the tools treat them).
    pub fn var(&self, name: &str) -> Option<String> {
        match self {
            Env::Given(m) => m.get(name).cloned(),
            Env::Process => std::env::var(name).ok(),
        }
        .filter(|v| !v.is_empty())
    }
}

/// The asking process, for providers whose answer depends on who asks (sudo's
/// credentials belong to one terminal or shell).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Client {
    /// Its uid (from the socket's peer credentials).
    pub uid: u32,
    /// Its pid.
    pub pid: i32,
    /// Its parent (the shell, for `kernstat get` run from a prompt).
    pub ppid: Option<i32>,
    /// Its grandparent (the shell, for `$(kernstat get ...)`: a command substitution
    /// runs it from a subshell).
    pub gppid: Option<i32>,
    /// Its session.
    pub sid: Option<i32>,
    /// Its controlling terminal's device number, as /proc/PID/stat's tty_nr.
    pub tty: Option<u64>,
}

impl Client {
    /// Describes process `pid` of user `uid` from /proc/PID/stat.
    pub fn of(uid: u32, pid: i32) -> Client {
        // /proc/PID/stat after the command name: state ppid pgrp session tty_nr ...
        let fields = |pid: i32| -> Vec<i64> {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let rest = stat
                .rfind(')')
                .map_or("", |i| stat.get(i + 2..).unwrap_or(""));
            rest.split(' ')
                .skip(1)
                .take(4)
                .map(|f| f.parse::<i64>().unwrap_or(0))
                .collect()
        };
        let at = |v: &[i64], i: usize| v.get(i).copied().filter(|x| *x > 0);
        let me = fields(pid);
        let ppid = at(&me, 0).map(|v| v as i32);
        let gppid = ppid.and_then(|p| at(&fields(p), 0)).map(|v| v as i32);
        Client {
            uid,
            pid,
            ppid,
            gppid,
            sid: at(&me, 2).map(|v| v as i32),
            tty: at(&me, 3).map(|v| v as u64),
        }
    }

    /// What distinguishes its answers (not the pid: every `kernstat get` has a new one).
    fn scope(&self) -> String {
        format!(
            "{}:{}:{}:{}:{}",
            self.uid,
            self.sid.unwrap_or(0),
            self.tty.unwrap_or(0),
            self.ppid.unwrap_or(0),
            self.gppid.unwrap_or(0)
        )
    }
}

/// What a provider reads from: the directory (path-scoped providers), the environment,
/// and, for the providers that need it, who asks.
#[derive(Clone, Copy, Debug)]
pub struct Ctx<'a> {
    /// The asking shell's directory (absolute).
    pub path: Option<&'a Path>,
    /// Its environment.
    pub env: &'a Env,
    /// The asking process.
    pub client: Option<&'a Client>,
    /// Whose rights files are read with (a system daemon serving another user must not
    /// read on its behalf what that user may not).
    pub rights: &'a Rights,
}

impl Ctx<'_> {
    /// An empty reading that reads files with this context's rights.
    pub fn reading(&self) -> Reading {
        Reading {
            rights: self.rights.clone(),
            ..Reading::default()
        }
    }

    /// `$NAME`, if set and not empty.
    pub fn var(&self, name: &str) -> Option<String> {
        self.env.var(name)
    }

    /// The home directory: `$HOME`, else the daemon user's home from the passwd database.
    pub fn home(&self) -> Option<PathBuf> {
        self.var("HOME").map(PathBuf::from).or_else(|| {
            // SAFETY: geteuid has no preconditions.
            let uid = unsafe { libc::geteuid() };
            kernstat_sources::users::by_uid(uid).map(|u| PathBuf::from(u.home))
        })
    }

    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub fn config_home(&self) -> Option<PathBuf> {
        self.var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| Some(self.home()?.join(".config")))
    }

    /// `$XDG_DATA_HOME`, else `~/.local/share`.
    pub fn data_home(&self) -> Option<PathBuf> {
        self.var("XDG_DATA_HOME")
            .map(PathBuf::from)
            .or_else(|| Some(self.home()?.join(".local/share")))
    }
}

/// What one provider call found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    /// Field name (without the provider) and value; a declared field that is missing
    /// has no value (null).
    pub fields: Vec<(String, serde_json::Value)>,
    /// Every file whose appearance, change or removal may change the answer.
    pub watched: Vec<PathBuf>,
    /// A file that exists could not be read (permission, I/O): the provider failed.
    pub error: Option<String>,
    /// Read again after this long even without a file event (sudo's timestamp expires).
    pub expires: Option<Duration>,
    /// Whose rights reads are checked against (see [`Ctx::rights`]).
    pub rights: Rights,
}

impl Reading {
    /// Sets `field` to `value` (a string, number, bool or null).
    pub fn set(&mut self, field: &str, value: impl Into<serde_json::Value>) {
        self.fields.push((field.to_string(), value.into()));
    }

    /// Looks at `path` (watched), returning its text when it is a readable file; one
    /// that exists but cannot be read is recorded as the error.
    pub fn read(&mut self, path: &Path) -> Option<String> {
        self.read_bytes(path).map(files::text)
    }

    /// As [`Reading::read`], the bytes as they are. The file is reached and read as
    /// `client_files` does (links followed by hand, with the reading's rights, regular
    /// files only, at most `files::MAX_FILE`).
    pub fn read_bytes(&mut self, path: &Path) -> Option<Vec<u8>> {
        self.watched.push(path.to_path_buf());
        let found = crate::client_files::read_path(path, &self.rights, files::MAX_FILE);
        self.take(path, found)
    }

    /// A read's outcome as a value, or None; a file that exists but could not be read
    /// is recorded as the error (absent ones are not).
    fn take(&mut self, path: &Path, found: std::io::Result<Vec<u8>>) -> Option<Vec<u8>> {
        use std::io::ErrorKind::*;
        match found {
            Ok(buf) => Some(buf),
            Err(e) if matches!(e.kind(), NotFound | NotADirectory | IsADirectory) => None,
            Err(e) if e.kind() == PermissionDenied => {
                self.error = Some(e.to_string());
                None
            }
            Err(e) => {
                let text = e.to_string();
                self.error = Some(if text.contains(&*path.to_string_lossy()) {
                    text
                } else {
                    format!("{}: {text}", path.display())
                });
                None
            }
        }
    }

    /// The text of the first of `names` readable in `start` or an ancestor (nearest
    /// first), with its path; every candidate is watched.
    pub fn read_upward(&mut self, start: &Path, names: &[&str]) -> Option<(PathBuf, String)> {
        self.read_upward_bytes(start, names)
            .map(|(p, b)| (p, files::text(b)))
    }

    /// As [`Reading::read_upward`], the bytes as they are: the directory is walked to
    /// once, and each level above it looked into through the same descriptors.
    pub fn read_upward_bytes(
        &mut self,
        start: &Path,
        names: &[&str],
    ) -> Option<(PathBuf, Vec<u8>)> {
        let mut w = match crate::client_files::Walk::to(start, &self.rights) {
            Ok(w) => w,
            Err(e) => {
                for d in start.ancestors() {
                    for name in names {
                        self.watched.push(d.join(name));
                    }
                }
                self.take(start, Err(e));
                return None;
            }
        };
        loop {
            let dir = w.path();
            for name in names {
                let candidate = dir.join(name);
                self.watched.push(candidate.clone());
                let found = w.read(Path::new(name), files::MAX_FILE);
                if let Some(bytes) = self.take(&candidate, found) {
                    return Some((candidate, bytes));
                }
            }
            if w.depth() == 0 {
                return None;
            }
            w = w.parent();
        }
    }

    /// Whether `path` exists (links followed, with the reading's rights; watched).
    pub fn exists(&mut self, path: &Path) -> bool {
        self.watched.push(path.to_path_buf());
        crate::client_files::Walk::root(&self.rights)
            .and_then(|w| w.exists(path))
            .unwrap_or(false)
    }

    /// Whether `path` is a directory (links followed, with the reading's rights).
    pub fn is_dir(&self, path: &Path) -> bool {
        crate::client_files::Walk::to(path, &self.rights).is_ok()
    }

    /// The names in directory `path` (at most 4,096), with the reading's rights.
    pub fn list(&mut self, path: &Path) -> Vec<String> {
        self.watched.push(path.to_path_buf());
        crate::client_files::Walk::to(path, &self.rights)
            .and_then(|w| w.list(Path::new("."), 4096))
            .map(|v| {
                v.into_iter()
                    .map(|(n, _)| n.to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The value of `field`, if set.
    pub fn get(&self, field: &str) -> Option<&serde_json::Value> {
        self.fields.iter().find(|(f, _)| f == field).map(|(_, v)| v)
    }
}

/// One provider: its name (the keys' first part), scope, the variables it reads (part
/// of the cache key), its fields, and the function that reads.
#[derive(Debug)]
pub struct Provider {
    /// The keys' first part.
    pub name: &'static str,
    /// Global or per directory.
    pub scope: Scope,
    /// Environment variables it reads (documented; the cache key includes them).
    pub env: &'static [&'static str],
    /// Its fixed fields and their meaning.
    pub fields: &'static [(&'static str, &'static str)],
    /// Fields named by the data, and what they hold (`asdf.<tool>`).
    pub dynamic: Option<&'static str>,
    /// The answer depends on the asking process (its terminal, session, parent).
    pub per_client: bool,
    /// Reads the provider's state.
    pub read: fn(&Ctx) -> Reading,
}

/// Every context provider.
pub static PROVIDERS: &[&Provider] = &[
    &kube::PROVIDER,
    &talos::PROVIDER,
    &gcloud::PROVIDER,
    &aws::PROVIDER,
    &conda::PROVIDER,
    &terraform::PROVIDER,
    &python::PROVIDER,
    &asdf::PROVIDER,
    &mise::PROVIDER,
    &direnv::PROVIDER,
    &sudo::PROVIDER,
];

/// The provider named `name`.
pub fn provider(name: &str) -> Option<&'static Provider> {
    PROVIDERS.iter().copied().find(|p| p.name == name)
}

/// For a key served by a context provider: the provider and the field (None for the
/// whole object). Unknown fields of providers without dynamic fields are not theirs.
pub fn lookup(key: &str) -> Option<(&'static Provider, Option<&str>)> {
    let (name, field) = match key.split_once('.') {
        Some((n, f)) => (n, Some(f)),
        None => (key, None),
    };
    let p = provider(name)?;
    match field {
        None => Some((p, None)),
        Some(f)
            if p.fields.iter().any(|(k, _)| *k == f) || (p.dynamic.is_some() && !f.is_empty()) =>
        {
            Some((p, Some(f)))
        }
        Some(_) => None,
    }
}

/// The variables a client should send for `keys`: those of every context provider asked.
pub fn env_for<'a>(keys: impl IntoIterator<Item = &'a str>) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for k in keys {
        if let Some((p, _)) = lookup(k) {
            for v in p.env {
                if !out.contains(v) {
                    out.push(v);
                }
            }
        }
    }
    out
}

/// Where a provider's answer for this context is cached: the directory (path-scoped
/// providers) and each variable it reads that is set, NUL-separated; a long one as its
/// SHA-256 (a client sending kilobytes of variables costs the cache 65 bytes per key,
/// not kilobytes: findings M6).
pub fn scope_id(
    p: &Provider,
    path: Option<&str>,
    env: &Env,
    client: Option<&Client>,
    on_behalf: Option<u32>,
) -> String {
    let s = scope_text(p, path, env, client, on_behalf);
    if s.len() <= 256 {
        return s;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(s.as_bytes());
    let mut out = String::with_capacity(65);
    out.push('#');
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

fn scope_text(
    p: &Provider,
    path: Option<&str>,
    env: &Env,
    client: Option<&Client>,
    on_behalf: Option<u32>,
) -> String {
    let mut s = String::new();
    if let Some(uid) = on_behalf {
        s.push_str(&uid.to_string());
        s.push('\0');
    }
    if p.scope == Scope::Path {
        s.push_str(path.unwrap_or(""));
    }
    if let (true, Some(c)) = (p.per_client, client) {
        s.push('\0');
        s.push_str(&c.scope());
    }
    for name in p.env {
        if let Some(v) = env.var(name) {
            s.push('\0');
            s.push_str(name);
            s.push('=');
            s.push_str(&v);
        }
    }
    s
}

/// The provider's answer as (key, JSON) pairs: every declared field (null when
/// missing), every dynamic field found, and the whole object under the provider's name.
pub fn values(p: &Provider, r: &Reading) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::with_capacity(p.fields.len() + 1);
    let mut whole = serde_json::Map::new();
    for (f, _) in p.fields {
        let v = r.get(f).cloned().unwrap_or(serde_json::Value::Null);
        out.push((format!("{}.{f}", p.name), json(&v)));
        whole.insert(f.to_string(), v);
    }
    if p.dynamic.is_some() {
        for (f, v) in &r.fields {
            if !p.fields.iter().any(|(k, _)| k == f) {
                out.push((format!("{}.{f}", p.name), json(v)));
                whole.insert(f.clone(), v.clone());
            }
        }
    }
    // A provider that found nothing (no kubeconfig, not in a venv) has no value at all.
    let whole = if r.fields.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::Value::Object(whole)
    };
    out.push((p.name.to_string(), json(&whole)));
    out
}

fn json(v: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_else(|_| b"null".to_vec())
}

/// Every key the context providers serve, with its meaning.
pub fn all_keys() -> impl Iterator<Item = (String, &'static str)> {
    PROVIDERS.iter().flat_map(|p| {
        p.fields
            .iter()
            .map(move |(f, help)| (format!("{}.{f}", p.name), *help))
            .chain(p.dynamic.map(|help| (format!("{}.<name>", p.name), help)))
    })
}

/// Computes `p` for a context now, in this thread (the daemon-less `kernstat get`).
pub fn read_now(p: &Provider, path: Option<&Path>, env: &Env, client: Option<&Client>) -> Reading {
    (p.read)(&Ctx {
        path,
        env,
        client,
        rights: &Rights::Own,
    })
}
