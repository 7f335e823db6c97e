//! What every client of kernstat's daemon links, and nothing of the server: the small
//! static `kernstat` front, the CLI's `get`/`eval`/`watch`/`session`, the shell hooks and
//! any other program that reads kernstat.
//!
//! - `protocol`: the request and reply formats (docs/protocol.md).
//! - `session`: a blocking client that keeps its connection; replies; socket paths.
//! - `lookup`: the shared-memory snapshot first, that connection for the rest.
//! - `runtime`: the runtime directory rules (whose directory, who serves a socket).
//! - `keys`: the key catalogue (what exists, how each is asked for).
//! - `fill`: `eval`'s `{key}` templates.
//! - `autostart`: starting the user daemon when a client finds none.
//! - `instance`: one sampler per `kernstat bar` configuration, the others following it.
//! - `line`: the fields of `kernstat session`'s line protocol.
//! - `format`: `get`'s output formats (text, JSON, shell, fish, TSV, CSV).
//!
//! The snapshot's format, reader and writer are kernstat-shm's.

#![deny(missing_docs)]

pub mod autostart;
pub mod fill;
pub mod format;
pub mod instance;
pub mod keys;
pub mod line;
pub mod lookup;
pub mod protocol;
pub mod runtime;
pub mod session;

pub use kernstat_shm as shm;
pub use lookup::Lookup;
pub use session::{default_socket, Query, Reply, Session};
