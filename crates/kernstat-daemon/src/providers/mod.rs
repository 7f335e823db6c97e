//! What fills the cache besides the requests themselves: system metrics from the
//! sampler, fixed facts about the host, and per-path git state.

pub mod basic;
pub mod git;
pub mod system;

/// Every key the daemon can serve, with its meaning (the `list` op returns the ones
/// that have values; this is the documentation).
pub fn all_keys() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    system::SYSTEM_KEYS
        .iter()
        .chain(basic::BASIC_KEYS)
        .chain(git::GIT_KEYS)
}
