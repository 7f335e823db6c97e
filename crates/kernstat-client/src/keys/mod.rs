//! The key catalogue: every key the daemon serves, what it means and how it is asked
//! for (which are answered per directory, which need the asker's environment, which
//! name a whole provider, which can go stale). Data and rules only, with no provider
//! behind it: what a client needs to ask well (the small `kernstat` front, the shell
//! hooks), and what the daemon's settings and providers read, below both.

pub mod context;
pub mod git;
pub mod host;
pub mod system;

use std::time::Duration;

/// The namespace clients may write (`kernstat put var.deploy v1`).
pub const PUT_PREFIX: &str = "var.";

/// Every key the daemon can serve, with its meaning (the `list` op returns the ones
/// that have values; this is the documentation). Dynamic context fields are named
/// `provider.<name>`.
pub fn all_keys() -> impl Iterator<Item = (String, &'static str)> {
    system::SYSTEM_KEYS
        .iter()
        .map(|m| (m.key.to_string(), m.help))
        .chain(host::BASIC_KEYS.iter().map(|(k, h)| (k.to_string(), *h)))
        .chain(git::GIT_KEYS.iter().map(|(k, h)| (k.to_string(), *h)))
        .chain(
            host::NETWORK_KEYS
                .iter()
                .map(|(k, h)| (k.to_string(), *h)),
        )
        .chain(context::all_keys())
        .chain([(
            "var.<name>".to_string(),
            "a value a client set with put (at most 1,000, 16 KiB each, optional TTL)",
        )])
        .chain([(
            "cgroup.<path>.<field>".to_string(),
            "a control group's figure, e.g. cgroup./system.slice/nginx.service.memory (fields: cpu_percent, throttled_percent, memory, memory_max, memory_high, psi_cpu, psi_memory, psi_io, io_read_bps, io_write_bps, pids)",
        )])
}

/// Whether `key` is one the daemon can serve: a key, or a context provider's field or
/// name.
pub fn is_known(key: &str) -> bool {
    context::lookup(key).is_some()
        || key.starts_with(PUT_PREFIX)
        || system::is_cgroup_key(key)
        || all_keys().any(|(k, _)| k == key)
}

/// The fixed keys under `prefix.` (for a whole-provider request such as `git`), when
/// `prefix` is not itself a key.
pub fn keys_under(prefix: &str) -> Vec<&'static str> {
    system::SYSTEM_KEYS
        .iter()
        .map(|m| m.key)
        .chain(host::BASIC_KEYS.iter().map(|(k, _)| *k))
        .chain(git::GIT_KEYS.iter().map(|(k, _)| *k))
        .chain(host::NETWORK_KEYS.iter().map(|(k, _)| *k))
        .filter(|k| k.strip_prefix(prefix).is_some_and(|r| r.starts_with('.')))
        .collect()
}

/// Whether `key` names a whole provider (its fields as one object).
pub fn is_whole(key: &str) -> bool {
    !key.contains('.') && (context::provider(key).is_some() || !keys_under(key).is_empty())
}

/// Whether `key` (or provider name) is answered per directory: a request needs `path`.
pub fn path_scoped(key: &str) -> bool {
    key == "git"
        || key.starts_with("git.")
        || context::lookup(key).is_some_and(|(p, _)| p.scope == context::Scope::Path)
}

/// Whether a value of `key` this old is stale for a daemon sampling every `interval`:
/// system keys are refreshed every interval, so one older than three intervals and a
/// second means the sampler is stuck; git, context and put keys change on events and are
/// never stale. (The daemon and the shared-memory readers judge by this one rule.)
pub fn is_stale(key: &str, age: Duration, interval: Duration) -> bool {
    !key.starts_with("git.")
        && !key.starts_with(PUT_PREFIX)
        && context::lookup(key).is_none()
        && age > interval * 3 + Duration::from_secs(1)
}
