//! The daemon's config file (`$XDG_CONFIG_HOME/kernstat/config.toml`, or `--config`):
//! context providers switched off or polled at another interval, and script providers —
//! the user's own questions, answered by their own commands. Parsed with serde + toml
//! (unknown fields are errors, so a typo is reported with its line, not ignored) and
//! checked as a whole before it replaces the running one: a broken edit is reported
//! and the previous settings stay.
//!
//! ```toml
//! [providers]
//! disabled = ["sudo"]
//! intervals = { kubecontext = 60 }
//!
//! [scripts]
//! concurrency = 4
//!
//! [[script]]
//! name = "weather"
//! command = ["curl", "-s", "wttr.in/?format=%t"]
//! poll_secs = 600
//! timeout_secs = 5
//! format = "text"          # text | kv | json
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// How a script's output becomes values.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// The whole output (trimmed) is the value of `NAME`.
    #[default]
    Text,
    /// `field=value` lines: `NAME.field`.
    Kv,
    /// A JSON object: `NAME.field` for each member.
    Json,
}

/// One script provider.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Its keys' first part: letters, digits, `_`, `-`; not a built-in provider's.
    pub name: String,
    /// The program and its arguments (no shell), or one string run by `sh -c` when
    /// `shell = true`.
    pub command: Vec<String>,
    /// Run `command[0]` with `sh -c`.
    #[serde(default)]
    pub shell: bool,
    /// Run again this often while someone asks (seconds; none: only on file changes).
    #[serde(default)]
    pub poll_secs: Option<f64>,
    /// Run again when one of these files changes.
    #[serde(default)]
    pub watch: Vec<PathBuf>,
    /// Killed (with its process group) after this long.
    #[serde(default = "default_timeout")]
    pub timeout_secs: f64,
    /// How its output is read.
    #[serde(default)]
    pub format: Format,
    /// Output beyond this many bytes is cut off (and the script stopped).
    #[serde(default = "default_max_bytes")]
    pub max_bytes: usize,
    /// Variables of the daemon's environment passed on (nothing else is).
    #[serde(default)]
    pub env: Vec<String>,
}

fn default_timeout() -> f64 {
    10.0
}

fn default_max_bytes() -> usize {
    64 * 1024
}

/// `[providers]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Providers {
    /// Context providers switched off (their keys answer `no_data`, saying why).
    #[serde(default)]
    pub disabled: Vec<String>,
    /// Poll intervals of context providers, seconds (default 30).
    #[serde(default)]
    pub intervals: BTreeMap<String, f64>,
}

/// `[scripts]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScriptLimits {
    /// Most scripts running at once, all keys together.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
}

fn default_concurrency() -> usize {
    4
}

impl Default for ScriptLimits {
    fn default() -> Self {
        ScriptLimits {
            concurrency: default_concurrency(),
        }
    }
}

/// `[why]`: when a finding is notable, by resource (`notable = { cpu = 0.2 }`); the
/// rest keep docs/why.md's defaults.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WhySettings {
    /// Scores by resource name.
    #[serde(default)]
    pub notable: std::collections::HashMap<String, f64>,
}

impl WhySettings {
    /// The thresholds these settings give.
    pub fn thresholds(&self) -> kernstat_why::Thresholds {
        kernstat_why::Thresholds::with(&self.notable)
    }
}

/// The whole file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Built-in providers.
    #[serde(default)]
    pub providers: Providers,
    /// Limits for scripts.
    #[serde(default)]
    pub scripts: ScriptLimits,
    /// `kernstat why`'s thresholds (docs/why.md).
    #[serde(default)]
    pub why: WhySettings,
    /// Script providers.
    #[serde(default, rename = "script")]
    pub script: Vec<Script>,
}

/// The default place: `$XDG_CONFIG_HOME/kernstat/config.toml`, else
/// `~/.config/kernstat/config.toml`.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from(std::env::var_os("HOME")?).join(".config")))?;
    Some(base.join("kernstat/config.toml"))
}

/// Whether a name is taken by a built-in key family.
fn builtin(name: &str) -> bool {
    kernstat_client::keys::context::provider(name).is_some()
        || !kernstat_client::keys::keys_under(name).is_empty()
        || matches!(name, "var" | "level" | "source" | "snapshot" | "summary")
}

impl Settings {
    /// Parses and checks `text`; the error names the line (toml's) or the entry.
    pub fn parse(text: &str) -> Result<Settings, String> {
        let s: Settings = toml::from_str(text).map_err(|e| e.to_string().trim().to_string())?;
        for name in &s.providers.disabled {
            if kernstat_client::keys::context::provider(name).is_none() {
                return Err(format!(
                    "[providers] disabled: {name:?} is not a context provider"
                ));
            }
        }
        for (name, secs) in &s.providers.intervals {
            if kernstat_client::keys::context::provider(name).is_none() {
                return Err(format!(
                    "[providers.intervals] {name:?} is not a context provider"
                ));
            }
            if !(secs.is_finite() && *secs >= 1.0) {
                return Err(format!("[providers.intervals] {name}: at least 1 second"));
            }
        }
        s.why.thresholds().check()?;
        if s.scripts.concurrency == 0 {
            return Err("[scripts] concurrency: at least 1".into());
        }
        let mut seen = Vec::new();
        for (i, sc) in s.script.iter().enumerate() {
            let at = format!("[[script]] #{} ({:?})", i + 1, sc.name);
            let ok_name = !sc.name.is_empty()
                && sc.name.len() <= 64
                && sc
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !ok_name {
                return Err(format!(
                    "{at}: a name is letters, digits, _ and - (at most 64)"
                ));
            }
            if builtin(&sc.name) {
                return Err(format!("{at}: {:?} is a built-in provider's name", sc.name));
            }
            if seen.contains(&&sc.name) {
                return Err(format!("{at}: a second script of that name"));
            }
            seen.push(&sc.name);
            if sc.command.is_empty() || (sc.shell && sc.command.len() != 1) {
                return Err(format!(
                    "{at}: command is [program, args...], or one string with shell = true"
                ));
            }
            if !(sc.timeout_secs.is_finite() && sc.timeout_secs > 0.0) {
                return Err(format!("{at}: timeout_secs must be more than 0"));
            }
            if let Some(p) = sc.poll_secs {
                if !(p.is_finite() && p >= 0.1) {
                    return Err(format!("{at}: poll_secs must be at least 0.1"));
                }
            }
            if sc.max_bytes == 0 || sc.max_bytes > 16 << 20 {
                return Err(format!("{at}: max_bytes between 1 and 16 MiB"));
            }
        }
        Ok(s)
    }

    /// Reads and parses `path`; a missing file is the default settings.
    pub fn load(path: &Path) -> Result<Settings, String> {
        Settings::load_or_why(path).map_err(|(_, e)| e)
    }

    /// As [`Settings::load`], with the I/O error's kind when the file could not be read
    /// at all (None: it was read and is wrong).
    ///
    /// A config runs its scripts as the daemon's user, so, as ssh does with its files,
    /// one that belongs to someone else (a root daemon started with another user's HOME:
    /// shared/security L3) or that others may write is refused, kind `Other`.
    pub fn load_or_why(path: &Path) -> Result<Settings, (Option<std::io::ErrorKind>, String)> {
        use std::io::Read;
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let read = || -> std::io::Result<String> {
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
                .open(path)?;
            let meta = f.metadata()?;
            let me = rustix::process::geteuid().as_raw();
            if !meta.is_file() {
                return Err(std::io::Error::other("is not a regular file"));
            }
            if meta.uid() != me && meta.uid() != 0 {
                return Err(std::io::Error::other(format!(
                    "belongs to uid {}, not to you (uid {me}): its scripts would run as you; refusing it",
                    meta.uid()
                )));
            }
            if meta.mode() & 0o022 != 0 {
                return Err(std::io::Error::other(
                    "is writable by others: anyone could add a script to it; refusing it (chmod go-w)",
                ));
            }
            let mut text = String::new();
            f.by_ref().take(1 << 20).read_to_string(&mut text)?;
            Ok(text)
        };
        match read() {
            Ok(text) => {
                Settings::parse(&text).map_err(|e| (None, format!("{}: {e}", path.display())))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Settings::default()),
            Err(e) => Err((Some(e.kind()), format!("{}: {e}", path.display()))),
        }
    }

    /// The script named `name`.
    pub fn script(&self, name: &str) -> Option<&Script> {
        self.script.iter().find(|s| s.name == name)
    }

    /// A context provider's poll interval.
    pub fn interval(&self, provider: &str) -> Option<Duration> {
        self.providers
            .intervals
            .get(provider)
            .map(|s| Duration::from_secs_f64(*s))
    }

    /// Whether a context provider is switched off.
    pub fn disabled(&self, provider: &str) -> bool {
        self.providers.disabled.iter().any(|d| d == provider)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_file_and_its_mistakes() {
        let s = Settings::parse(
            "[providers]\ndisabled = [\"sudo\"]\nintervals = { kubecontext = 60 }\n\n[[script]]\nname = \"weather\"\ncommand = [\"echo\", \"20C\"]\npoll_secs = 600\n",
        )
        .unwrap();
        assert!(s.disabled("sudo"));
        assert_eq!(s.interval("kubecontext"), Some(Duration::from_secs(60)));
        let w = s.script("weather").unwrap();
        assert_eq!(
            (w.format, w.timeout_secs, w.max_bytes),
            (Format::Text, 10.0, 65536)
        );
        // A typo names its line.
        let e = Settings::parse(
            "[providers]\ndisabled = []\n\n[[script]]\nname = \"x\"\ncomand = [\"true\"]\n",
        )
        .unwrap_err();
        assert!(e.contains("line 6"), "{e}");
        assert!(e.contains("comand"), "{e}");
        let e = Settings::parse("[[script]]\nname = \"git\"\ncommand = [\"true\"]\n").unwrap_err();
        assert!(e.contains("built-in"), "{e}");
        let e = Settings::parse("[providers]\ndisabled = [\"kube\"]\n").unwrap_err();
        assert!(e.contains("not a context provider"), "{e}");
        let e =
            Settings::parse("[[script]]\nname = \"a\"\ncommand = [\"x\", \"y\"]\nshell = true\n")
                .unwrap_err();
        assert!(e.contains("shell"), "{e}");
        assert_eq!(Settings::parse("").unwrap(), Settings::default());
    }
}
