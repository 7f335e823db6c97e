//! What fills the cache besides the requests themselves: system metrics from the
//! sampler, fixed facts about the host, and per-path git state.

pub mod basic;
pub mod git;
pub mod system;

/// Every key the daemon can serve, with its meaning (the `list` op returns the ones
/// that have values; this is the documentation).
pub fn all_keys() -> impl Iterator<Item = (&'static str, &'static str)> {
    system::METRICS
        .iter()
        .map(|m| (m.key, m.help))
        .chain(basic::BASIC_KEYS.iter().copied())
        .chain(git::GIT_KEYS.iter().copied())
}

/// Whether `key` is one the daemon can serve.
pub fn is_known(key: &str) -> bool {
    all_keys().any(|(k, _)| k == key)
}
