//! kernstat's daemon: one sampler and one cache, many consumers over a Unix socket.
//!
//! Status bars, tmux lines and shell prompts all ask the same questions every few
//! seconds. Here they are answered once: the sampler publishes every metric as a key,
//! providers add facts prompts need (host, user, git state of a path), and clients read
//! the cached answers in microseconds over newline-delimited JSON (docs/protocol.md).
//!
//! - `cache`: every key's latest value, already serialised.
//! - `providers`: what fills the cache besides the sampler.
//! - `hub`: what the providers' schedules share with the server (below both).
//! - `server`: the daemon's state and the socket server.
//! - `shm_publish`: the snapshot's writer (kernstat-shm) fed from the cache.
//! - `client_files`, `jobs`: reading the files a client names safely, and off the
//!   threads that answer everyone.
//!
//! What clients link (the protocol, a session, the lookup, the key catalogue) is
//! kernstat-client; the daemon is built on it.

#![deny(missing_docs)]

mod accept;
pub mod cache;
pub mod client_files;
pub mod hub;
pub mod jobs;
pub mod memory;
pub mod metrics;
pub mod providers;
pub mod server;
pub mod settings;
pub mod shm_publish;

pub use cache::Cache;
pub use server::{bind, serve, Access, Config, Daemon};
