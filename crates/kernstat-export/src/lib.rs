//! `kernstat dump`: the flight recorder's archive as JSON lines, CSV, OpenMetrics or
//! Parquet, streamed from an archive cursor one frame at a time, so that memory does
//! not grow with the range dumped (docs/recorder.md). Every process row has the
//! columns `ps --json` has, and its rates are kernstat-model's rate engine's over the
//! interval between the frame and the one before, as every replayed view computes them.

mod columns;
mod csv;
mod json;
mod openmetrics;
#[cfg(feature = "parquet")]
mod parquet;

use std::io::Write;

use kernstat_model::ps::PsRow;
use kernstat_model::rates::Rates;
use kernstat_record::{Cursor, Frame};

pub use columns::{Cell, Column, Kind, Row, COLUMNS};
pub use csv::csv_field;

/// What `dump` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per frame, per line.
    Json,
    /// One CSV line per process per frame.
    Csv,
    /// OpenMetrics text with timestamps.
    OpenMetrics,
    /// Apache Parquet, a row per process per frame.
    #[cfg(feature = "parquet")]
    Parquet,
}

/// Why a dump stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing the output (or a temporary file).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A format's encoder refused.
    #[error("{0}")]
    Encode(String),
}

/// What a dump wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Frames.
    pub frames: u64,
    /// Process rows (ended processes included).
    pub rows: u64,
}

/// One frame as a format receives it.
pub struct FrameRows<'a> {
    /// The frame.
    pub frame: &'a Frame,
    /// The frame before it (the start of its interval), when readable.
    pub before: Option<&'a Frame>,
    /// Seconds between the two.
    pub interval_s: f64,
    /// Its processes (live, then ended) with their rates.
    pub rows: &'a [(PsRow, Rates)],
}

trait Sink {
    fn frame(&mut self, f: &FrameRows<'_>) -> Result<(), Error>;
    fn finish(&mut self) -> Result<(), Error>;
}

/// Writes the frames from `from` to `to` (ns since the Unix epoch, both included) in
/// `format` to `out`; `user` names a uid; what the cursor finds damaged goes to `warn`.
pub fn dump<W: Write + Send>(
    cursor: &mut Cursor,
    from: u64,
    to: u64,
    format: Format,
    out: W,
    user: &mut dyn FnMut(u32) -> String,
    warn: &mut dyn FnMut(String),
) -> Result<Summary, Error> {
    let mut sink: Box<dyn Sink + '_> = match format {
        Format::Json => Box::new(json::Json::new(out)),
        Format::Csv => Box::new(csv::Csv::new(out)?),
        Format::OpenMetrics => Box::new(openmetrics::OpenMetrics::new(out)),
        #[cfg(feature = "parquet")]
        Format::Parquet => Box::new(parquet::Parquet::new(out)?),
    };
    let mut summary = Summary::default();
    let mut on = cursor.seek_from(from);
    while on {
        cursor.warnings.drain(..).for_each(&mut *warn);
        let Some(frame) = cursor.current() else {
            break;
        };
        if frame.time_unix_ns > to {
            break;
        }
        let before = cursor.before();
        let mut rows = kernstat_record::replay::rows(before, frame);
        for (r, _) in rows.iter_mut() {
            r.user = user(r.uid);
        }
        sink.frame(&FrameRows {
            frame,
            before,
            interval_s: kernstat_record::replay::interval_s(before, frame),
            rows: &rows,
        })?;
        summary.frames += 1;
        summary.rows += rows.len() as u64;
        on = cursor.forward();
    }
    cursor.warnings.drain(..).for_each(&mut *warn);
    sink.finish()?;
    Ok(summary)
}
