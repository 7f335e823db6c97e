//! `kernstat ps`: the process table from the BPF task iterator (a pin when one exists,
//! else a freshly loaded program), procfs when BPF cannot be used (tasks.rs).
//!
//! One-shot: read, add threads up into processes, filter, sort, print. With --interval,
//! two reads and CPU % over the interval; otherwise CPU % over each process's life, as
//! procps ps computes it.

use std::io::{self, Write};
use std::time::Instant;

use anyhow::{bail, Context};
use kernstat_bpf::ps as bpf_ps;
use kernstat_model::ps::{lifetime_percent, row_rates, PsRow};
use kernstat_model::rates::Children;
use kernstat_render::ps::{sort_rows, BootClock, RowFilter};
use kernstat_render::table::{self, Column, COLUMNS};
use kernstat_sources::users::UserNames;
use kernstat_sources::Want;

use crate::cli::PsArgs;
use kernstat_collect::net_interval::NetInterval;
use kernstat_collect::tasks::{self, TaskSource};
use kernstat_collect::tcp_interval::TcpInterval;

/// Runs `kernstat ps`; returns the exit status.
pub fn run(args: &PsArgs) -> anyhow::Result<i32> {
    if args.columns_help {
        let mut out = io::stdout().lock();
        for (name, _, header, what) in COLUMNS {
            writeln!(out, "{name:8} {header:8} {what}")?;
        }
        return Ok(0);
    }
    if let Some(dir) = &args.pin {
        for path in bpf_ps::pin(dir).context("pinning the ps iterator")? {
            eprintln!("kernstat: pinned {} (mode 0444)", path.display());
        }
        return Ok(0);
    }
    if let Some(dir) = &args.unpin {
        if !bpf_ps::unpin(dir)? {
            eprintln!(
                "kernstat: no pin at {}",
                bpf_ps::pin_path(dir, false).display()
            );
        }
        return Ok(0);
    }
    let columns =
        match table::parse_columns(args.fields.as_deref().unwrap_or(table::DEFAULT_COLUMNS)) {
            Ok(c) => c,
            Err(e) => crate::cli::usage!("--fields: {e}"),
        };
    let sort = parse_sort(&args.sort)?;
    let comm_re = match &args.comm {
        Some(re) => match regex::Regex::new(re) {
            Ok(r) => Some(r),
            Err(e) => crate::cli::usage!("--comm {re:?}: {e}"),
        },
        None => None,
    };
    if let Some(at) = &args.replay.at {
        return replay(args, at, &columns, sort, comm_re.as_ref());
    }
    // Command lines cost most of an iterator read: only read them when they are shown.
    // With --bench, --json is about the report: the columns decide what is read.
    let json_rows = args.json && args.bench.is_none();
    let cmdline = json_rows || columns.contains(&Column::Cmd);
    let want = Want {
        cmdline,
        cgroup: json_rows || columns.contains(&Column::Cgroup) || args.cgroup.is_some(),
    };
    let net_columns = columns
        .iter()
        .any(|c| matches!(c, Column::NetRx | Column::NetTx));
    if net_columns && args.interval.is_none() && args.bench.is_none() {
        // The kernel keeps no per-process network counter: kernstat counts from the
        // moment its hooks are attached, so a rate needs an interval.
        crate::cli::usage!("the netrx and nettx columns need --interval (e.g. --interval 1s)");
    }
    let retrans_column = columns.contains(&Column::Retrans);
    if retrans_column && args.interval.is_none() && args.bench.is_none() {
        crate::cli::usage!("the retrans column needs --interval (e.g. --interval 1s)");
    }
    let mut source = TaskSource::open(args.no_bpf, &args.pin_dir, cmdline)?;
    if let Some(n) = args.bench {
        return bench(&mut source, n, want, args.json);
    }
    let mut net = match args.interval {
        Some(_) if net_columns || json_rows => NetInterval::start(args.no_bpf, net_columns),
        _ => None,
    };
    // Only when asked for: the TCP hooks are attached for the interval.
    let mut tcp = match args.interval {
        Some(_) if retrans_column => TcpInterval::start(args.no_bpf, true),
        _ => None,
    };
    let mut extra = None;
    let first = source.read(args.threads, want, &mut extra)?;
    let (tasks, interval) = match args.interval {
        None => (first, None),
        Some(d) => {
            let t0 = Instant::now();
            if let Some(n) = net.as_mut() {
                n.read_first();
            }
            if let Some(t) = tcp.as_mut() {
                t.read_first();
            }
            std::thread::sleep(d);
            let second = source.read(args.threads, want, &mut extra)?;
            let dt = t0.elapsed();
            if let Some(n) = net.as_mut() {
                n.read_second(dt.as_secs_f64());
            }
            if let Some(t) = tcp.as_mut() {
                t.read_second(dt.as_secs_f64());
            }
            // The rate engine's rules (live top's and every replay's): no exit hook
            // here, so children reaped in the interval count on their parent.
            let mut rates = Vec::new();
            let dt_s = dt.as_secs_f64();
            row_rates(
                &first,
                &second,
                args.threads,
                dt_s,
                Children::OnParent,
                &mut rates,
            );
            (second, Some(rates))
        }
    };
    let now_boot = kernstat_sources::boottime_ns();
    let want_names = args.json || columns.contains(&Column::User);
    let mut rows = tasks::ps_rows(
        &tasks,
        args.threads,
        want,
        want_names,
        |i, t| match &interval {
            Some(rates) => rates[i].cpu_percent,
            None => lifetime_percent(t, now_boot),
        },
    );
    if let (Some(n), false) = (&net, args.threads) {
        for r in rows.iter_mut() {
            (r.net_rx_bps, r.net_tx_bps) = n.rates(r.tgid);
        }
    }
    if let (Some(t), false) = (&tcp, args.threads) {
        for r in rows.iter_mut() {
            r.tcp_retrans_per_s = Some(t.rate(r.tgid));
        }
    }
    let source_of = |r: &PsRow| -> &'static str {
        // Rows completed from /proc (PID 1 here, see Source::read) say so.
        if extra.is_some() && r.tgid == 1 {
            "procfs"
        } else {
            source.name()
        }
    };
    emit(
        args,
        rows,
        &columns,
        sort,
        comm_re.as_ref(),
        &source_of,
        BootClock::now(now_boot),
    )
}

/// `ps --at`: the recorded rows (and the processes that ended since the sample
/// before, state X) through the same filters, sort and table.
fn replay(
    args: &PsArgs,
    at: &str,
    columns: &[Column],
    sort: (Column, bool),
    comm_re: Option<&regex::Regex>,
) -> anyhow::Result<i32> {
    let (cursor, off) = match crate::replay::cursor_at(&args.replay, at)? {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let frame = cursor.current().expect("cursor_at stands on a frame");
    if !args.json {
        eprintln!(
            "kernstat: {}",
            kernstat_record::replay::recorded_line(&cursor, off)
        );
    }
    let mut users = UserNames::default();
    let rows: Vec<PsRow> = kernstat_record::replay::rows(cursor.before(), frame)
        .into_iter()
        .map(|(mut r, _)| {
            r.user = users.name(r.uid).to_string();
            r
        })
        .collect();
    let start = BootClock::at(frame.time_unix_ns, frame.boot_ns);
    emit(args, rows, columns, sort, comm_re, &|_| "archive", start)
}

/// Filters, sorts and prints rows (a live read's or a recorded sample's).
fn emit(
    args: &PsArgs,
    mut rows: Vec<PsRow>,
    columns: &[Column],
    sort: (Column, bool),
    comm_re: Option<&regex::Regex>,
    source_of: &dyn Fn(&PsRow) -> &'static str,
    start: BootClock,
) -> anyhow::Result<i32> {
    let comm_matches = comm_re.map(|re| move |name: &str| re.is_match(name));
    let missing = RowFilter {
        uid: args.user.as_ref().map(|u| resolve_user(u)).transpose()?,
        pids: &args.pid,
        comm: comm_matches.as_ref().map(|f| f as &dyn Fn(&str) -> bool),
        cgroup: args.cgroup.as_deref(),
    }
    .apply(&mut rows);
    sort_rows(&mut rows, sort.0, sort.1);
    // A pid asked for that is not there is the question's mistake, said in one line
    // rather than a bare header (README: exit codes).
    if !args.pid.is_empty() && rows.is_empty() {
        let missing: Vec<String> = missing.iter().map(u32::to_string).collect();
        eprintln!(
            "kernstat ps: --pid: no process {} matches",
            missing.join(", ")
        );
        return Ok(2);
    }

    let mut out = io::stdout().lock();
    if args.json {
        for r in &rows {
            serde_json::to_writer(
                &mut out,
                &JsonRow {
                    row: r,
                    source: source_of(r),
                },
            )?;
            out.write_all(b"\n")?;
        }
    } else {
        let width = kernstat_os::stdout::terminal_width();
        out.write_all(table::render(&rows, columns, args.tree, width, &start).as_bytes())?;
    }
    Ok(if rows.is_empty() { 1 } else { 0 })
}

#[derive(serde::Serialize)]
struct JsonRow<'a> {
    #[serde(flatten)]
    row: &'a PsRow,
    source: &'static str,
}

fn parse_sort(s: &str) -> anyhow::Result<(Column, bool)> {
    let (name, desc) = match s.strip_prefix('-') {
        Some(n) => (n, true),
        None => (s, false),
    };
    match table::column_by_name(name) {
        Some(c) => Ok((c, desc)),
        None => crate::cli::usage!("--sort: {}", table::parse_columns(name).unwrap_err()),
    }
}

/// `--user` takes a name or a number.
fn resolve_user(u: &str) -> anyhow::Result<u32> {
    match kernstat_sources::users::by_name_or_uid(u) {
        Some(user) => Ok(user.uid),
        None => crate::cli::usage!("--user: no user named {u:?}"),
    }
}

fn bench(source: &mut TaskSource, n: u32, want: Want, json: bool) -> anyhow::Result<i32> {
    if n == 0 {
        crate::cli::usage!("--bench needs at least one run");
    }
    let TaskSource::Bpf(reader) = source else {
        bail!("--bench compares the BPF iterator with procfs: it needs BPF (root, or a pin)");
    };
    let b = tasks::bench_iterator(reader, n, want)?;
    // After the walks: a kernel that cannot run it says so at the first.
    let reader_walk = reader.walk_mode();
    let round = |v: f64| (v * 100.0).round() / 100.0;
    let report = serde_json::json!({
        "n": n,
        "tasks": b.tasks,
        "processes": b.processes,
        "source": source.name(),
        "walk": reader_walk,
        "cmdline": want.cmdline,
        "bpf_p50_us": round(b.bpf_p50_us),
        "procfs_p50_us": round(b.procfs_p50_us),
        "ratio": round(b.procfs_p50_us / b.bpf_p50_us),
    });
    let mut out = io::stdout().lock();
    if json {
        writeln!(out, "{report}")?;
    } else {
        writeln!(
            out,
            "{n} runs, {} tasks ({} processes): iterator p50 {} µs, procfs p50 {} µs, {}x",
            b.tasks, b.processes, report["bpf_p50_us"], report["procfs_p50_us"], report["ratio"]
        )?;
    }
    Ok(0)
}
