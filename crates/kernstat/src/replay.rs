//! Replay of the flight recorder's archive: which archive, which moment ("03:12",
//! "-10m", an RFC 3339 stamp) and the cursor standing on the recorded sample there for
//! the `--at` views (refused, with the archive's span, when there is none near it), and
//! `kernstat dump`, streamed by kernstat-export. A replayed sample is one more source:
//! its rates are the rate engine's over the interval from the sample before, and it
//! feeds the views' own renderers.

use std::io::Write;

use anyhow::Context;

use kernstat_export::Format;
pub use kernstat_record::locate::archive_dir;
pub use kernstat_record::time::{local_stamp, parse_time};
use kernstat_record::{Archive, Cursor};
use kernstat_sources::users::UserNames;

use crate::cli::{DumpArgs, DumpFormat, ReplayArgs};

fn parse_or_usage(s: &str) -> anyhow::Result<u64> {
    match parse_time(s, jiff::Zoned::now()) {
        Ok(t) => Ok(t),
        Err(e) => crate::cli::usage!("{e}"),
    }
}

/// The archive `--archive` names (or the default), open; Err(1) after one sentence.
fn open_archive(explicit: Option<&std::path::Path>, who: &str) -> Result<Archive, i32> {
    let dir = archive_dir(explicit);
    Archive::open(&dir).map_err(|e| {
        eprintln!(
            "{who}: no archive at {} ({e}); `kernstat daemon --record DIR` writes one",
            dir.display()
        );
        1
    })
}

/// A cursor on the recorded sample at `--at`, and how far that sample is from the time
/// asked (ns); Err(1) after one sentence when there is none near it (`--nearest` takes
/// the closest anyway). What the archive holds damaged is said on standard error.
pub fn cursor_at(r: &ReplayArgs, at: &str) -> anyhow::Result<Result<(Cursor, u64), i32>> {
    let t = parse_or_usage(at)?;
    let archive = match open_archive(r.archive.as_deref(), "kernstat") {
        Ok(a) => a,
        Err(code) => return Ok(Err(code)),
    };
    let mut cursor = match archive.cursor() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kernstat: {e}");
            return Ok(Err(1));
        }
    };
    let found = cursor.seek_at(t, r.nearest);
    for w in cursor.warnings.drain(..) {
        eprintln!("kernstat: {w}");
    }
    match found {
        Ok(off) => Ok(Ok((cursor, off))),
        Err(e) => {
            eprintln!("kernstat: {e}");
            Ok(Err(1))
        }
    }
}

/// `kernstat snapshot --at`: the machine over the interval ending at the recorded
/// sample, as `snapshot` prints it, with when it was recorded and the processes that
/// ended in that interval.
pub fn snapshot(r: &ReplayArgs, at: &str, json: bool) -> anyhow::Result<i32> {
    let (cursor, off) = match cursor_at(r, at)? {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let frame = cursor.current().expect("cursor_at stands on a frame");
    let model = kernstat_record::replay::model(cursor.before(), frame);
    let ended: Vec<_> = kernstat_record::replay::rows(cursor.before(), frame)
        .into_iter()
        .filter(|(row, _)| row.end_ns.is_some())
        .map(|(row, _)| row)
        .collect();
    let mut out = std::io::stdout().lock();
    if json {
        let view = kernstat_render::SnapshotView {
            model: &model,
            sample_us: 0.0,
            self_cost_percent: None,
        };
        let mut v = serde_json::to_value(&view)?;
        if let Some(o) = v.as_object_mut() {
            o.remove("sample_us");
            o.insert("recorded_at".into(), local_stamp(frame.time_unix_ns).into());
            o.insert("recorded_unix_ns".into(), frame.time_unix_ns.into());
            o.insert(
                "interval_s".into(),
                kernstat_record::replay::interval_s(cursor.before(), frame).into(),
            );
            o.insert("off_by_s".into(), (off as f64 / 1e9).into());
            o.insert("ended".into(), serde_json::to_value(&ended)?);
            o.insert("events".into(), serde_json::to_value(&frame.events)?);
        }
        serde_json::to_writer(&mut out, &v)?;
        writeln!(out)?;
    } else {
        let mut s = String::new();
        kernstat_render::tooltip::write_tooltip(
            &mut s,
            &model,
            &kernstat_render::tooltip::TooltipExtras {
                sample_us: 0.0,
                self_cost_percent: None,
                markup: false,
            },
        )?;
        let line = kernstat_record::replay::recorded_line(&cursor, off);
        writeln!(out, "{}{}", line[..1].to_uppercase(), &line[1..])?;
        writeln!(out, "{s}")?;
        if !ended.is_empty() {
            writeln!(out, "Ended in that interval: {}", ended.len())?;
        }
    }
    Ok(0)
}

/// `kernstat dump`: streamed, so that memory does not grow with the range.
pub fn dump(args: &DumpArgs) -> anyhow::Result<i32> {
    let from = args.from.as_deref().map(parse_or_usage).transpose()?;
    let to = args.to.as_deref().map(parse_or_usage).transpose()?;
    if let (Some(f), Some(t)) = (from, to) {
        if f > t {
            crate::cli::usage!("--from is after --to");
        }
    }
    let archive = match open_archive(args.archive.as_deref(), "kernstat dump") {
        Ok(a) => a,
        Err(code) => return Ok(code),
    };
    let mut cursor = match archive.cursor() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kernstat dump: {e}");
            return Ok(1);
        }
    };
    let format = match args.format {
        DumpFormat::Json => Format::Json,
        DumpFormat::Csv => Format::Csv,
        DumpFormat::Openmetrics => Format::OpenMetrics,
        #[cfg(feature = "parquet")]
        DumpFormat::Parquet => Format::Parquet,
    };
    #[cfg(feature = "parquet")]
    let binary = format == Format::Parquet;
    #[cfg(not(feature = "parquet"))]
    let binary = false;
    let sink: Box<dyn Write + Send> = match &args.output {
        Some(path) => Box::new(
            std::fs::File::create(path).with_context(|| format!("--output {}", path.display()))?,
        ),
        None if binary && std::io::IsTerminal::is_terminal(&std::io::stdout()) => {
            crate::cli::usage!("parquet is binary: give --output FILE, or redirect standard output")
        }
        None => Box::new(std::io::stdout()),
    };
    let out = std::io::BufWriter::with_capacity(64 * 1024, sink);
    let mut users = UserNames::default();
    let summary = kernstat_export::dump(
        &mut cursor,
        from.unwrap_or(0),
        to.unwrap_or(u64::MAX),
        format,
        out,
        &mut |uid| users.name(uid).to_string(),
        &mut |w| eprintln!("kernstat dump: {w}"),
    );
    match summary {
        Ok(s) if s.frames == 0 => {
            let span = archive.span().ok().flatten();
            match span {
                Some((a, b)) => eprintln!(
                    "kernstat dump: no sample in that range; the archive {} holds {} to {}",
                    archive.dir().display(),
                    local_stamp(a),
                    local_stamp(b)
                ),
                None => eprintln!(
                    "kernstat dump: {} holds no recorded sample",
                    archive.dir().display()
                ),
            }
            Ok(1)
        }
        Ok(_) => Ok(0),
        Err(kernstat_export::Error::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(anyhow::anyhow!("kernstat dump: {e}")),
    }
}
