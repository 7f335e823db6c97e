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

use kernstat_client::keys::context as keys;
pub use kernstat_client::keys::context::{
    all_keys, env_for, scope_id, Client, Env, ProviderInfo, Scope, MAX_ENV_VALUE, MAX_ENV_VARS,
};

use crate::client_files::Rights;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// One provider: what the catalogue says of it (name, scope, the variables it reads,
/// its fields: kernstat-client's keys::context) and the function that reads.
#[derive(Debug)]
pub struct Provider {
    /// Its description in the catalogue.
    pub info: &'static ProviderInfo,
    /// Reads the provider's state.
    pub read: fn(&Ctx) -> Reading,
}

impl std::ops::Deref for Provider {
    type Target = ProviderInfo;
    fn deref(&self) -> &ProviderInfo {
        self.info
    }
}

/// Every context provider, in the catalogue's order (a test checks it).
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
/// whole object), by the catalogue's rule.
pub fn lookup(key: &str) -> Option<(&'static Provider, Option<&str>)> {
    let (info, field) = keys::lookup(key)?;
    Some((provider(info.name)?, field))
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

/// Computes `p` for a context now, in this thread (the daemon-less `kernstat get`).
pub fn read_now(p: &Provider, path: Option<&Path>, env: &Env, client: Option<&Client>) -> Reading {
    (p.read)(&Ctx {
        path,
        env,
        client,
        rights: &Rights::Own,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_provider_of_the_catalogue_reads_and_in_its_order() {
        let ours: Vec<&str> = super::PROVIDERS.iter().map(|p| p.name).collect();
        let catalogue: Vec<&str> = super::keys::PROVIDERS.iter().map(|p| p.name).collect();
        assert_eq!(ours, catalogue);
    }
}
