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

pub use kernstat_client::keys::{all_keys, is_known, is_whole, keys_under, path_scoped};
