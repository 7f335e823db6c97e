//! The context providers as clients see them: each one's name (the keys' first part),
//! whether its answer depends on the asking directory or process, the environment
//! variables a client must send with a request for it, and its fields. Data and the
//! rules over it only: the daemon's providers (kernstat-daemon's providers::context)
//! read the files, one per descriptor here, in the same order.

use std::collections::BTreeMap;

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
    pub fn scope(&self) -> String {
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

/// One provider as the catalogue describes it.
#[derive(Debug)]
pub struct ProviderInfo {
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
}

/// kubectl's current context (kubeconfig).
pub static KUBE: ProviderInfo = ProviderInfo {
    name: "kubecontext",
    scope: Scope::Global,
    env: &["KUBECONFIG", "HOME"],
    fields: &[
        ("context", "kubectl's current context (null when none)"),
        (
            "namespace",
            "the context's namespace (\"default\" when it sets none)",
        ),
        ("cluster", "the context's cluster"),
        ("user", "the context's user"),
    ],
    dynamic: None,
    per_client: false,
};

/// talosctl's current context.
pub static TALOS: ProviderInfo = ProviderInfo {
    name: "talos",
    scope: Scope::Global,
    env: &["TALOSCONFIG", "HOME"],
    fields: &[("context", "talosctl's active context (null when none)")],
    dynamic: None,
    per_client: false,
};

/// gcloud's active configuration.
pub static GCLOUD: ProviderInfo = ProviderInfo {
    name: "gcloud",
    scope: Scope::Global,
    env: &[
        "CLOUDSDK_CONFIG",
        "CLOUDSDK_ACTIVE_CONFIG_NAME",
        "CLOUDSDK_CORE_PROJECT",
        "CLOUDSDK_CORE_ACCOUNT",
        "HOME",
        "XDG_CONFIG_HOME",
    ],
    fields: &[
        ("configuration", "the active gcloud configuration"),
        ("project", "its core/project"),
        ("account", "its core/account"),
    ],
    dynamic: None,
    per_client: false,
};

/// the AWS CLI's profile and region.
pub static AWS: ProviderInfo = ProviderInfo {
    name: "aws",
    scope: Scope::Global,
    env: &[
        "AWS_PROFILE",
        "AWS_VAULT",
        "AWS_DEFAULT_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_CONFIG_FILE",
        "HOME",
    ],
    fields: &[
        ("profile", "the profile in use"),
        (
            "region",
            "its region (environment, else the profile's config)",
        ),
        (
            "profile_exists",
            "the config file has a section for the profile",
        ),
    ],
    dynamic: None,
    per_client: false,
};

/// the active conda environment.
pub static CONDA: ProviderInfo = ProviderInfo {
    name: "conda",
    scope: Scope::Global,
    env: &["CONDA_DEFAULT_ENV", "CONDA_PREFIX"],
    fields: &[
        ("env", "the active environment's name (null outside one)"),
        ("prefix", "its directory"),
        ("python", "the Python version installed in it"),
    ],
    dynamic: None,
    per_client: false,
};

/// the Terraform workspace of the directory.
pub static TERRAFORM: ProviderInfo = ProviderInfo {
    name: "terraform",
    scope: Scope::Path,
    env: &["TF_WORKSPACE", "TF_DATA_DIR"],
    fields: &[
        (
            "workspace",
            "the workspace (null outside an initialised directory)",
        ),
        ("root", "the directory holding the data directory"),
    ],
    dynamic: None,
    per_client: false,
};

/// the Python environment of the directory (venv, pyenv, .python-version).
pub static PYTHON: ProviderInfo = ProviderInfo {
    name: "python",
    scope: Scope::Path,
    env: &["VIRTUAL_ENV", "VIRTUAL_ENV_PROMPT"],
    fields: &[
        ("venv", "the virtualenv's directory (null when none)"),
        (
            "venv_name",
            "its prompt name (VIRTUAL_ENV_PROMPT, pyvenv.cfg's prompt, else the directory name)",
        ),
        (
            "version",
            "the venv's Python version, else .python-version's",
        ),
        ("requires", "pyproject.toml's requires-python"),
    ],
    dynamic: None,
    per_client: false,
};

/// asdf's pinned tool versions for the directory.
pub static ASDF: ProviderInfo = ProviderInfo {
    name: "asdf",
    scope: Scope::Path,
    env: &["ASDF_DEFAULT_TOOL_VERSIONS_FILENAME", "HOME"],
    fields: &[("file", "the .tool-versions in effect")],
    dynamic: Some("the version of each tool it pins, e.g. asdf.nodejs"),
    per_client: false,
};

/// mise's pinned tool versions for the directory.
pub static MISE: ProviderInfo = ProviderInfo {
    name: "mise",
    scope: Scope::Path,
    env: &[
        "MISE_ENV",
        "MISE_CONFIG_DIR",
        "MISE_GLOBAL_CONFIG_FILE",
        "XDG_CONFIG_HOME",
        "HOME",
    ],
    fields: &[(
        "file",
        "the nearest project config file (null when only the global one applies)",
    )],
    dynamic: Some("the version of each tool its config files pin, e.g. mise.node"),
    per_client: false,
};

/// whether direnv allowed the directory's .envrc.
pub static DIRENV: ProviderInfo = ProviderInfo {
    name: "direnv",
    scope: Scope::Path,
    env: &["XDG_DATA_HOME", "HOME", "DIRENV_DIR"],
    fields: &[
        (
            "status",
            "allowed, denied or blocked (null without an .envrc)",
        ),
        ("allowed", "direnv would load the .envrc"),
        ("envrc", "the .envrc in effect"),
        ("loaded", "the asking shell has it loaded ($DIRENV_DIR)"),
    ],
    dynamic: None,
    per_client: false,
};

/// whether sudo's credentials are cached for the asking terminal.
pub static SUDO: ProviderInfo = ProviderInfo {
    name: "sudo",
    scope: Scope::Global,
    env: &[],
    fields: &[
        (
            "active",
            "the asking shell's sudo credentials are cached (no value unless the daemon runs as root)",
        ),
        ("expires_in_s", "seconds until they expire"),
    ],
    dynamic: None,
    per_client: true,
};

/// Every context provider.
pub static PROVIDERS: &[&ProviderInfo] = &[
    &KUBE, &TALOS, &GCLOUD, &AWS, &CONDA, &TERRAFORM, &PYTHON, &ASDF, &MISE, &DIRENV, &SUDO,
];

/// The provider named `name`.
pub fn provider(name: &str) -> Option<&'static ProviderInfo> {
    PROVIDERS.iter().copied().find(|p| p.name == name)
}

/// For a key served by a context provider: the provider and the field (None for the
/// whole object). Unknown fields of providers without dynamic fields are not theirs.
pub fn lookup(key: &str) -> Option<(&'static ProviderInfo, Option<&str>)> {
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
    p: &ProviderInfo,
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
    p: &ProviderInfo,
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

/// Every key the context providers serve, with its meaning.
pub fn all_keys() -> impl Iterator<Item = (String, &'static str)> {
    PROVIDERS.iter().flat_map(|p| {
        p.fields
            .iter()
            .map(move |(f, help)| (format!("{}.{f}", p.name), *help))
            .chain(p.dynamic.map(|help| (format!("{}.<name>", p.name), help)))
    })
}
