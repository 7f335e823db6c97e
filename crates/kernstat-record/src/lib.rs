//! The flight recorder's archive: what `kernstat daemon --record DIR` writes and every
//! `--at` view and `kernstat dump` reads. The format is in docs/recorder.md; in short:
//!
//! - one file per UTC hour, `YYYYMMDDTHH.ksr` (and `YYYYMMDDTHH.N.ksr` when the writer
//!   starts another within the hour), starting with an 8-byte header (`KSREC`, a NUL,
//!   the format version as a little-endian u16);
//! - then frames, appended: a 24-byte frame header and one sample ([`Frame`]: cumulative
//!   counters, no rate) serialised with postcard and zstd-compressed, a *key* frame
//!   alone, a *delta* frame with the previous sample as zstd's prefix;
//! - a key frame starts every file, follows any failed write, and comes every
//!   [`KEY_EVERY`] frames.
//!
//! `codec` holds the bytes and reads them without trusting them; `writer` appends (one
//! writer per directory, retention with a floor); `archive` reads through a cursor;
//! `v1` and `v2` read the files of formats 1 and 2; `names`, `locate` and `time` are file names, which
//! archive to read, and the times people type.
#![deny(missing_docs)]

pub mod archive;
pub mod build;
pub mod codec;
pub mod delta;
pub mod frame;
pub mod locate;
pub mod names;
pub mod replay;
pub mod time;
mod v1;
pub mod v2;
pub mod writer;

pub use archive::{Archive, Cursor, ReadError, SeekError};
pub use frame::Frame;
pub use names::{file_hour, file_name, is_archive_entry};
pub use writer::{Appended, OpenError, Retention, Writer, KEY_EVERY, VERSION};
