//! kernstat's daemon: one sampler and one cache, many consumers over a Unix socket.
//!
//! Status bars, tmux lines and shell prompts all ask the same questions every few
//! seconds. Here they are answered once: the sampler publishes every metric as a key,
//! providers add facts prompts need (host, user, git state of a path), and clients read
//! the cached answers in microseconds over newline-delimited JSON (docs/protocol.md).
//!
//! - `protocol`: the request and reply formats.
//! - `cache`: every key's latest value, already serialised.
//! - `providers`: what fills the cache besides the sampler.
//! - `hub`: what the providers' schedules share with the server (below both).
//! - `server`: the daemon's state and the socket server.
//! - `client`: a blocking client that keeps its connection, for the CLI and scripts.
//! - `lookup`: the shared-memory snapshot first, that connection for the rest.
//! - `shm`: the snapshot's writer and reader.
//! - `client_files`, `jobs`: reading the files a client names safely, and off the
//!   threads that answer everyone.

#![deny(missing_docs)]

mod accept;
pub mod cache;
pub mod client;
pub mod client_files;
pub mod hub;
pub mod jobs;
pub mod lookup;
pub mod memory;
pub mod metrics;
pub mod protocol;
pub mod providers;
pub mod runtime;
pub mod server;
pub mod settings;
pub mod shm;

pub use cache::Cache;
pub use client::{default_socket, Query, Reply, Session};
pub use lookup::Lookup;
pub use server::{bind, serve, Access, Config, Daemon};
