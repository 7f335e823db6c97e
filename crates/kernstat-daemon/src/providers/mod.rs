//! What fills the cache besides the requests themselves: system metrics from the
//! sampler, facts about the host and its network, per-path git state, and the context
//! of the asking shell.

pub mod basic;
pub mod context;
pub mod git;
pub mod network;
pub mod puts;
pub mod scripts;
pub mod system;

/// Every key the daemon can serve, with its meaning (the `list` op returns the ones
/// that have values; this is the documentation). Dynamic context fields are named
/// `provider.<name>`.
pub fn all_keys() -> impl Iterator<Item = (String, &'static str)> {
    system::METRICS
        .iter()
        .map(|m| (m.key.to_string(), m.help))
        .chain(basic::BASIC_KEYS.iter().map(|(k, h)| (k.to_string(), *h)))
        .chain(git::GIT_KEYS.iter().map(|(k, h)| (k.to_string(), *h)))
        .chain(
            network::NETWORK_KEYS
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
        || key.starts_with(puts::PREFIX)
        || system::is_cgroup_key(key)
        || all_keys().any(|(k, _)| k == key)
}

/// The fixed keys under `prefix.` (for a whole-provider request such as `git`), when
/// `prefix` is not itself a key.
pub fn keys_under(prefix: &str) -> Vec<&'static str> {
    system::METRICS
        .iter()
        .map(|m| m.key)
        .chain(basic::BASIC_KEYS.iter().map(|(k, _)| *k))
        .chain(git::GIT_KEYS.iter().map(|(k, _)| *k))
        .chain(network::NETWORK_KEYS.iter().map(|(k, _)| *k))
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
