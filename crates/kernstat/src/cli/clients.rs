//! The flags of the daemon's clients: `get`, `session`, `init`, `put`, `eval`, `watch`
//! and `status`.

use super::*;
use kernstat_client::format::{Format, FORMATS};

/// Where to find the daemon.
#[derive(Clone, Debug, Args)]
pub struct SocketArg {
    /// The daemon's socket (default: $KERNSTAT_SOCKET, else the user daemon's if present,
    /// else the system daemon's).
    #[arg(long)]
    pub socket: Option<PathBuf>,
}

/// `get --format`'s parser: the names and help of kernstat-client's formats.
fn format_parser() -> impl clap::builder::TypedValueParser<Value = Format> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(FORMATS.map(|(name, _, help)| PossibleValue::new(name).help(help)))
        .map(|name| Format::by_name(&name).expect("one of the possible values"))
}

/// `kernstat get`.
#[derive(Clone, Debug, Args)]
pub struct GetArgs {
    /// Keys, e.g. load.one mem.used git.branch kubecontext.context, or a provider's name
    /// for all its fields (git, python); `kernstat get --list` names them.
    #[arg(required_unless_present = "list")]
    pub keys: Vec<String>,
    /// For per-directory keys (git, python, asdf ...): the directory (default: the
    /// current one).
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_parser = format_parser(), default_value = "text", conflicts_with = "json")]
    pub format: Format,
    /// Print the daemon's whole reply (value, age, staleness) as a JSON line per key.
    #[arg(long)]
    pub json: bool,
    /// List every key and what it means.
    #[arg(long)]
    pub list: bool,
    /// Where to find the daemon.
    #[command(flatten)]
    pub socket: SocketArg,
}

/// `kernstat session`: reads `get DIR KEY...` and `env NAME [VALUE]` lines (TAB
/// between fields) and prints one line per key.
#[derive(Clone, Debug, Args)]
pub struct SessionArgs {
    /// Where to find the daemon.
    #[command(flatten)]
    pub socket: SocketArg,
}

/// The shells `kernstat init` writes hooks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    /// A socket kept open with zsh/net/socket: a prompt forks nothing.
    Zsh,
    /// A `kernstat session` coprocess: a prompt forks nothing.
    Bash,
    /// One `kernstat get` for all keys per prompt (fish has no sockets or coprocesses).
    Fish,
}

/// `kernstat init`.
#[derive(Clone, Debug, Args)]
pub struct InitArgs {
    /// The shell.
    pub shell: Shell,
    /// The keys the hook refreshes before each prompt, as KS_* variables (change them
    /// later with the `kernstat_keys` array).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "git.branch,git.dirty,load.one"
    )]
    pub keys: Vec<String>,
    /// Where to find the daemon.
    #[command(flatten)]
    pub socket: SocketArg,
}

/// `kernstat put`.
#[derive(Clone, Debug, Args)]
pub struct PutArgs {
    /// The key: var.NAME (letters, digits, . _ -).
    pub key: String,
    /// The value: a string, or JSON with --json; omitted with --delete.
    #[arg(required_unless_present = "delete")]
    pub value: Option<String>,
    /// The value is JSON (a number, object ...), not a string.
    #[arg(long)]
    pub json: bool,
    /// Seconds until the value expires (default: until the daemon stops).
    #[arg(long)]
    pub ttl: Option<f64>,
    /// Removes the key.
    #[arg(long, conflicts_with_all = ["value", "json", "ttl"])]
    pub delete: bool,
    /// Where to find the daemon.
    #[command(flatten)]
    pub socket: SocketArg,
}

/// `kernstat eval`.
#[derive(Clone, Debug, Args)]
pub struct EvalArgs {
    /// The template: text with {key} fields, {{ and }} for braces, e.g.
    /// '{git.branch} {load.one}'. A field without a value is left empty.
    pub template: String,
    /// For per-directory keys: the directory (default: the current one).
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Where to find the daemon.
    #[command(flatten)]
    pub socket: SocketArg,
}

/// `kernstat watch`.
#[derive(Clone, Debug, Args)]
pub struct WatchArgs {
    /// The key.
    pub key: String,
    /// For git.* keys: the directory (default: the current one).
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Print each update as the daemon's JSON line.
    #[arg(long)]
    pub json: bool,
    /// Where to find the daemon.
    #[command(flatten)]
    pub socket: SocketArg,
}

/// `kernstat status`.
#[derive(Clone, Debug, Args)]
pub struct StatusArgs {
    /// Print the daemon's status object as JSON.
    #[arg(long)]
    pub json: bool,
    /// Where to find the daemon.
    #[command(flatten)]
    pub socket: SocketArg,
}
