//! Replay of the flight recorder's archive: which archive, which moment ("03:12",
//! "-10m", an RFC 3339 stamp), the recorded sample at it for `snapshot --at` and
//! `ps --at`, and `kernstat dump` of a time range as JSON, CSV or OpenMetrics. A
//! replayed sample is one more source: it feeds the views' own renderers.

use std::io::Write;

use anyhow::Context;

use kernstat_model::ps::PsRow;
use kernstat_model::record::{ExitedProcess, Frame};
pub use kernstat_record::locate::archive_dir;
pub use kernstat_record::time::{local_stamp, parse_time};
use kernstat_record::Archive;

use crate::cli::{DumpArgs, DumpFormat, ReplayArgs};

fn parse_or_usage(s: &str) -> anyhow::Result<u64> {
    match parse_time(s, jiff::Zoned::now()) {
        Ok(t) => Ok(t),
        Err(e) => crate::cli::usage!("{e}"),
    }
}

/// The recorded sample at `--at`; Err(1) after one sentence when there is none.
pub fn frame_at(r: &ReplayArgs, at: &str) -> anyhow::Result<Result<Frame, i32>> {
    let t = parse_or_usage(at)?;
    let dir = archive_dir(r.archive.as_deref());
    let archive = match Archive::open(&dir) {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "kernstat: no archive at {} ({e}); `kernstat daemon --record DIR` writes one",
                dir.display()
            );
            return Ok(Err(1));
        }
    };
    match archive.at(t, &mut |w| eprintln!("kernstat: {w}")) {
        Ok(f) => Ok(Ok(f)),
        Err(e) => {
            eprintln!("kernstat: {e}");
            Ok(Err(1))
        }
    }
}

/// A process that ended as a table row: state X, its last counters, its peak RSS.
pub fn exited_row(e: &ExitedProcess) -> PsRow {
    PsRow {
        pid: e.pid,
        tgid: e.pid,
        ppid: e.ppid,
        uid: e.uid,
        state: 'X',
        threads: 0,
        cpu_ns: e.cpu_ns,
        rss_bytes: e.maxrss_bytes,
        start_ns: e.start_ns,
        read_bytes: e.read_bytes,
        write_bytes: e.write_bytes,
        comm: kernstat_model::raw::TaskName::from_bytes(e.comm.as_bytes()),
        cmd: if e.cmd.is_empty() {
            e.comm.clone()
        } else {
            e.cmd.clone()
        },
        ..PsRow::default()
    }
}

/// `kernstat snapshot --at`: the recorded model as `snapshot` prints it, with when it
/// was recorded and the processes that ended since the sample before.
pub fn snapshot(r: &ReplayArgs, at: &str, json: bool) -> anyhow::Result<i32> {
    let frame = match frame_at(r, at)? {
        Ok(f) => f,
        Err(code) => return Ok(code),
    };
    let mut out = std::io::stdout().lock();
    if json {
        let view = kernstat_render::SnapshotView {
            model: &frame.model,
            sample_us: 0.0,
            self_cost_percent: None,
        };
        let mut v = serde_json::to_value(&view)?;
        if let Some(o) = v.as_object_mut() {
            o.remove("sample_us");
            o.insert("recorded_at".into(), local_stamp(frame.time_unix_ns).into());
            o.insert("recorded_unix_ns".into(), frame.time_unix_ns.into());
            o.insert("exited".into(), serde_json::to_value(&frame.exited)?);
            if let Some(h) = &frame.runqlat_us {
                o.insert("runqlat_us".into(), serde_json::to_value(h)?);
            }
            if !frame.writes.is_empty() {
                o.insert("writes".into(), serde_json::to_value(&frame.writes)?);
            }
        }
        serde_json::to_writer(&mut out, &v)?;
        writeln!(out)?;
    } else {
        let mut s = String::new();
        kernstat_render::tooltip::write_tooltip(
            &mut s,
            &frame.model,
            &kernstat_render::tooltip::TooltipExtras {
                sample_us: 0.0,
                self_cost_percent: None,
                markup: false,
            },
        )?;
        writeln!(out, "Recorded at {}", local_stamp(frame.time_unix_ns))?;
        writeln!(out, "{s}")?;
        if !frame.exited.is_empty() {
            writeln!(out, "Ended since the sample before: {}", frame.exited.len())?;
        }
    }
    Ok(0)
}

/// `kernstat dump`.
pub fn dump(args: &DumpArgs) -> anyhow::Result<i32> {
    let from = args.from.as_deref().map(parse_or_usage).transpose()?;
    let to = args.to.as_deref().map(parse_or_usage).transpose()?;
    let dir = archive_dir(args.archive.as_deref());
    let archive = match Archive::open(&dir) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("kernstat dump: no archive at {} ({e})", dir.display());
            return Ok(1);
        }
    };
    let frames = archive.frames(from.unwrap_or(0), to.unwrap_or(u64::MAX), &mut |w| {
        eprintln!("kernstat dump: {w}")
    })?;
    let sink: Box<dyn Write + Send> = match &args.output {
        Some(path) => Box::new(
            std::fs::File::create(path).with_context(|| format!("--output {}", path.display()))?,
        ),
        None if args.format == DumpFormat::Parquet
            && std::io::IsTerminal::is_terminal(&std::io::stdout()) =>
        {
            crate::cli::usage!("parquet is binary: give --output FILE, or redirect standard output")
        }
        None => Box::new(std::io::stdout()),
    };
    let mut out = std::io::BufWriter::new(sink);
    match args.format {
        DumpFormat::Json => {
            for f in &frames {
                let mut v = serde_json::to_value(f)?;
                if let Some(o) = v.as_object_mut() {
                    o.insert("time".into(), local_stamp(f.time_unix_ns).into());
                    // The table rows (rates and details joined), not their two halves.
                    o.remove("details");
                    o.insert("processes".into(), serde_json::to_value(f.processes())?);
                }
                serde_json::to_writer(&mut out, &v)?;
                out.write_all(b"\n")?;
            }
        }
        DumpFormat::Csv => csv(&mut out, &frames)?,
        DumpFormat::Openmetrics => openmetrics(&mut out, &frames)?,
        DumpFormat::Parquet => parquet(&mut out, &frames)?,
    }
    out.flush()?;
    Ok(if frames.is_empty() { 1 } else { 0 })
}

/// A text cell of the CSV: control characters as spaces (the one rule of every output),
/// quoted where it holds a comma or a quote, and a cell that a spreadsheet would take
/// for a formula (starting with =, +, -, @) made text with a leading apostrophe (OWASP's
/// advice for CSV injection).
fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    let s = kernstat_model::text::printable(s);
    let formula = s.starts_with(['=', '+', '-', '@']);
    if !formula && !s.contains([',', '"']) {
        return s;
    }
    let body = if formula {
        format!("'{s}")
    } else {
        s.into_owned()
    };
    if body.contains([',', '"']) {
        format!("\"{}\"", body.replace('"', "\"\"")).into()
    } else {
        body.into()
    }
}

fn csv(out: &mut impl Write, frames: &[Frame]) -> std::io::Result<()> {
    writeln!(
        out,
        "time,time_unix_ns,pid,ppid,uid,state,comm,cpu_percent,cpu_ns,rss_bytes,read_bytes,write_bytes,threads,start_ns,exit_unix_ns,cmd"
    )?;
    for f in frames {
        let t = local_stamp(f.time_unix_ns);
        for p in &f.processes() {
            writeln!(
                out,
                "{t},{},{},{},{},{},{},{:.2},{},{},{},{},{},{},,{}",
                f.time_unix_ns,
                p.pid,
                p.ppid,
                p.uid,
                p.state,
                csv_field(p.comm.as_str()),
                p.cpu_percent,
                p.cpu_ns,
                p.rss_bytes,
                p.read_bytes,
                p.write_bytes,
                p.threads,
                p.start_ns,
                csv_field(&p.cmd),
            )?;
        }
        for e in &f.exited {
            writeln!(
                out,
                "{t},{},{},{},{},X,{},,{},{},{},{},0,{},{},{}",
                f.time_unix_ns,
                e.pid,
                e.ppid,
                e.uid,
                csv_field(&e.comm),
                e.cpu_ns,
                e.maxrss_bytes,
                e.read_bytes,
                e.write_bytes,
                e.start_ns,
                e.exit_unix_ns,
                csv_field(&e.cmd),
            )?;
        }
    }
    Ok(())
}

/// The CSV's rows as a Parquet file: one row group per ~64 Ki rows, zstd.
fn parquet(out: &mut (impl Write + Send), frames: &[Frame]) -> anyhow::Result<()> {
    use arrow_array::builder::{
        BooleanBuilder, Float64Builder, StringBuilder, TimestampNanosecondBuilder, UInt32Builder,
        UInt64Builder,
    };
    use arrow_array::{ArrayRef, RecordBatch};
    use arrow_schema::{DataType, Field, Schema, TimeUnit};
    use std::sync::Arc;

    let ts = || DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    let schema = Arc::new(Schema::new(vec![
        Field::new("time", ts(), false),
        Field::new("pid", DataType::UInt32, false),
        Field::new("ppid", DataType::UInt32, false),
        Field::new("uid", DataType::UInt32, false),
        Field::new("state", DataType::Utf8, false),
        Field::new("comm", DataType::Utf8, false),
        Field::new("cpu_percent", DataType::Float64, true),
        Field::new("cpu_ns", DataType::UInt64, false),
        Field::new("rss_bytes", DataType::UInt64, false),
        Field::new("read_bytes", DataType::UInt64, false),
        Field::new("write_bytes", DataType::UInt64, false),
        Field::new("threads", DataType::UInt32, false),
        Field::new("start_ns", DataType::UInt64, false),
        Field::new("exited", DataType::Boolean, false),
        Field::new("exit_time", ts(), true),
        Field::new("cmd", DataType::Utf8, false),
    ]));
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
        .build();
    let mut writer = parquet::arrow::ArrowWriter::try_new(out, schema.clone(), Some(props))?;
    let utc = |b: TimestampNanosecondBuilder| b.with_timezone("UTC");
    for f in frames {
        let rows = f.processes();
        let n = rows.len() + f.exited.len();
        let mut time = utc(TimestampNanosecondBuilder::with_capacity(n));
        let mut pid = UInt32Builder::with_capacity(n);
        let mut ppid = UInt32Builder::with_capacity(n);
        let mut uid = UInt32Builder::with_capacity(n);
        let mut state = StringBuilder::new();
        let mut comm = StringBuilder::new();
        let mut cpu_percent = Float64Builder::with_capacity(n);
        let mut cpu_ns = UInt64Builder::with_capacity(n);
        let mut rss = UInt64Builder::with_capacity(n);
        let mut read = UInt64Builder::with_capacity(n);
        let mut write = UInt64Builder::with_capacity(n);
        let mut threads = UInt32Builder::with_capacity(n);
        let mut start = UInt64Builder::with_capacity(n);
        let mut exited = BooleanBuilder::with_capacity(n);
        let mut exit_time = utc(TimestampNanosecondBuilder::with_capacity(n));
        let mut cmd = StringBuilder::new();
        let at = f.time_unix_ns as i64;
        for p in &rows {
            time.append_value(at);
            pid.append_value(p.pid);
            ppid.append_value(p.ppid);
            uid.append_value(p.uid);
            state.append_value(p.state.to_string());
            comm.append_value(p.comm.as_str());
            cpu_percent.append_value(p.cpu_percent);
            cpu_ns.append_value(p.cpu_ns);
            rss.append_value(p.rss_bytes);
            read.append_value(p.read_bytes);
            write.append_value(p.write_bytes);
            threads.append_value(p.threads);
            start.append_value(p.start_ns);
            exited.append_value(false);
            exit_time.append_null();
            cmd.append_value(&p.cmd);
        }
        for e in &f.exited {
            time.append_value(at);
            pid.append_value(e.pid);
            ppid.append_value(e.ppid);
            uid.append_value(e.uid);
            state.append_value("X");
            comm.append_value(&e.comm);
            cpu_percent.append_null();
            cpu_ns.append_value(e.cpu_ns);
            rss.append_value(e.maxrss_bytes);
            read.append_value(e.read_bytes);
            write.append_value(e.write_bytes);
            threads.append_value(0);
            start.append_value(e.start_ns);
            exited.append_value(true);
            exit_time.append_value(e.exit_unix_ns as i64);
            cmd.append_value(&e.cmd);
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(time.finish()),
            Arc::new(pid.finish()),
            Arc::new(ppid.finish()),
            Arc::new(uid.finish()),
            Arc::new(state.finish()),
            Arc::new(comm.finish()),
            Arc::new(cpu_percent.finish()),
            Arc::new(cpu_ns.finish()),
            Arc::new(rss.finish()),
            Arc::new(read.finish()),
            Arc::new(write.finish()),
            Arc::new(threads.finish()),
            Arc::new(start.finish()),
            Arc::new(exited.finish()),
            Arc::new(exit_time.finish()),
            Arc::new(cmd.finish()),
        ];
        writer.write(&RecordBatch::try_new(schema.clone(), columns)?)?;
    }
    writer.close()?;
    Ok(())
}

fn label(s: &str) -> String {
    kernstat_model::text::printable(s)
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// OpenMetrics text: each family's samples together, each series' in time order,
/// timestamps in seconds; ends with `# EOF`.
fn openmetrics(out: &mut impl Write, frames: &[Frame]) -> std::io::Result<()> {
    let ts = |f: &Frame| f.time_unix_ns as f64 / 1e9;
    type Family = (&'static str, &'static str, &'static str, fn(&Frame) -> f64);
    let machine: [Family; 5] = [
        (
            "kernstat_cpu_busy_percent",
            "gauge",
            "Machine CPU busy, percent of all CPUs.",
            |f| f.model.cpu_percent,
        ),
        (
            "kernstat_memory_used_bytes",
            "gauge",
            "RAM in use (total - available), bytes.",
            |f| f.model.mem.used_bytes as f64,
        ),
        ("kernstat_load1", "gauge", "1-minute load average.", |f| {
            f.model.load[0]
        }),
        ("kernstat_processes", "gauge", "Processes.", |f| {
            f.model.process_count as f64
        }),
        (
            "kernstat_processes_ended",
            "gauge",
            "Processes that ended since the sample before.",
            |f| f.exited.len() as f64,
        ),
    ];
    for (name, kind, help, get) in machine {
        writeln!(out, "# TYPE {name} {kind}\n# HELP {name} {help}")?;
        for f in frames {
            writeln!(out, "{name} {} {:.3}", get(f), ts(f))?;
        }
    }
    // Per process: keyed by pid and start, so a reused pid is another series.
    type Series = std::collections::BTreeMap<(u32, u64), (String, Vec<(f64, f64, u64)>)>;
    let mut series: Series = Series::new();
    for f in frames {
        for p in &f.processes() {
            let e = series
                .entry((p.pid, p.start_ns))
                .or_insert_with(|| (p.comm.as_str().to_string(), Vec::new()));
            e.1.push((ts(f), p.cpu_ns as f64 / 1e9, p.rss_bytes));
        }
    }
    let families: [(&str, &str, &str); 2] = [
        (
            "kernstat_process_cpu_seconds",
            "counter",
            "CPU time of the process, seconds.",
        ),
        (
            "kernstat_process_resident_bytes",
            "gauge",
            "Resident set of the process, bytes.",
        ),
    ];
    for (i, (name, kind, help)) in families.iter().enumerate() {
        writeln!(out, "# TYPE {name} {kind}\n# HELP {name} {help}")?;
        let sample = if *kind == "counter" {
            format!("{name}_total")
        } else {
            name.to_string()
        };
        for ((pid, _), (comm, points)) in &series {
            for (t, cpu, rss) in points {
                let v = if i == 0 { *cpu } else { *rss as f64 };
                writeln!(
                    out,
                    "{sample}{{pid=\"{pid}\",comm=\"{}\"}} {v} {t:.3}",
                    label(comm)
                )?;
            }
        }
    }
    writeln!(out, "# EOF")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Zoned {
        "2026-11-25T09:30:00+01:00[Europe/Paris]".parse().unwrap()
    }

    fn stamp(s: &str) -> u64 {
        s.parse::<jiff::Timestamp>().unwrap().as_nanosecond() as u64
    }

    #[test]
    fn times_people_type() {
        assert_eq!(
            parse_time("03:12", now()).unwrap(),
            stamp("2026-11-25T02:12:00Z")
        );
        assert_eq!(
            parse_time("23:00", now()).unwrap(),
            stamp("2026-11-24T22:00:00Z"),
            "a time still to come today is yesterday's"
        );
        assert_eq!(
            parse_time("-10m", now()).unwrap(),
            stamp("2026-11-25T08:20:00Z")
        );
        assert_eq!(
            parse_time("-2h", now()).unwrap(),
            stamp("2026-11-25T06:30:00Z")
        );
        assert_eq!(
            parse_time("2026-11-25T03:12:00Z", now()).unwrap(),
            stamp("2026-11-25T03:12:00Z")
        );
        assert_eq!(
            parse_time("2026-11-25 03:12", now()).unwrap(),
            stamp("2026-11-25T02:12:00Z")
        );
        assert!(parse_time("yesterday-ish", now())
            .unwrap_err()
            .contains("is not a time"));
        assert!(parse_time("-10x", now()).is_err());
        assert_eq!(
            parse_time("@1764000000", now()).unwrap(),
            1_764_000_000_000_000_000
        );
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("=cmd|' /C calc'!A0"), "'=cmd|' /C calc'!A0");
        assert_eq!(csv_field("-x,y"), "\"'-x,y\"");
        assert_eq!(csv_field("a\u{1b}]0;T\u{7}b"), "a ]0;T b");
        assert_eq!(csv_field("a,b \"c\""), "\"a,b \"\"c\"\"\"");
    }
}
