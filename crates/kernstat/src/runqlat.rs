//! `kernstat runqlat`: run-queue latency histograms, with libbpf-tools runqlat's flags
//! and output, plus per-CPU histograms, interpolated percentiles (CSV and JSON), a
//! cumulative mode and a plot.
//!
//! Each interval stands alone by default: the kernel's histograms only ever grow, and
//! each interval is the difference between two readings, so no event is lost between a
//! read and a reset.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use kernstat_bpf::runqlat::{Config, KeyKind, Runqlat};
use kernstat_model::hist::Hist;
use kernstat_render::hist::{csv_header, csv_row, write_log2, Summary};
use kernstat_render::plot::{self, Point};
use serde::Serialize;

use crate::cli::RunqlatArgs;
use crate::signals::{Signals, Wake};

/// cgroup2's statfs magic.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// The cgroup v2 id (its directory's inode) and level (depth below the root) of `path`.
fn cgroup_target(path: &Path) -> anyhow::Result<(u64, i32)> {
    // f_type's width differs between architectures: the cast is not always a no-op.
    #[allow(clippy::unnecessary_cast)]
    let is_cg2 = |p: &Path| {
        rustix::fs::statfs(p)
            .map(|s| s.f_type as i64 == CGROUP2_SUPER_MAGIC)
            .unwrap_or(false)
    };
    let md = std::fs::metadata(path).with_context(|| format!("--cgroup {}", path.display()))?;
    if !md.is_dir() || !is_cg2(path) {
        bail!(
            "--cgroup {}: not a cgroup v2 directory (e.g. /sys/fs/cgroup/unified/user.slice)",
            path.display()
        );
    }
    let canon = path.canonicalize()?;
    let mut level = 0;
    let mut p = canon.as_path();
    while let Some(parent) = p.parent() {
        if !is_cg2(parent) || std::fs::metadata(parent)?.dev() != md.dev() {
            break;
        }
        level += 1;
        p = parent;
    }
    Ok((md.ino(), level))
}

fn comm_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

#[derive(Serialize)]
struct JsonHist<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    comm: Option<String>,
    #[serde(flatten)]
    summary: Summary,
    buckets: &'a [kernstat_model::hist::Log2Bucket],
}

#[derive(Serialize)]
struct JsonInterval<'a> {
    timestamp: f64,
    unit: &'static str,
    attach: &'static str,
    #[serde(flatten)]
    summary: Summary,
    buckets: &'a [kernstat_model::hist::Log2Bucket],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    per: Vec<JsonHist<'a>>,
}

fn epoch_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn clock() -> String {
    let now = epoch_s() as i64;
    // SAFETY: localtime_r writes into the tm we pass.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        let t: libc::time_t = now as libc::time_t;
        libc::localtime_r(&t, &mut tm);
        tm
    };
    format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
}

/// Runs `kernstat runqlat`; returns the exit status.
pub fn run(args: &RunqlatArgs) -> anyhow::Result<i32> {
    let per = [args.pids, args.tids, args.pidnss, args.cpus]
        .iter()
        .filter(|&&b| b)
        .count();
    if per > 1 {
        bail!("choose one of -P, -L, --pidnss and -C");
    }
    if args.csv && args.json {
        bail!("choose one of --csv and --json");
    }
    if let Some(p) = &args.plot {
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !ext.eq_ignore_ascii_case("png") && !ext.eq_ignore_ascii_case("svg") {
            bail!(
                "--plot {}: the file name must end in .png or .svg",
                p.display()
            );
        }
    }
    let cfg = Config {
        pid: args.pid,
        ms: args.milliseconds,
        key: if args.pids {
            KeyKind::Pid
        } else if args.tids {
            KeyKind::Tid
        } else if args.pidnss {
            KeyKind::PidNs
        } else {
            KeyKind::None
        },
        cgroup: args.cgroup.as_deref().map(cgroup_target).transpose()?,
        force_raw_tp: args.raw_tp,
    };
    let signals = Signals::block();
    let rq = Runqlat::load(&cfg).context("runqlat needs BPF")?;
    let unit = if args.milliseconds { "msecs" } else { "usecs" };
    let short = if args.milliseconds { "ms" } else { "us" };
    let ns_per_unit = if args.milliseconds { 1e6 } else { 1e3 };
    eprintln!(
        "Tracing run queue latency ({})... Hit Ctrl-C to end.",
        rq.attach_kind().as_str()
    );

    let mut out = io::stdout().lock();
    if args.csv {
        writeln!(out, "{}", csv_header(short))?;
    }
    let start = Instant::now();
    let mut prev_cpu: Vec<Hist> = rq.read_per_cpu()?;
    let base_cpu = prev_cpu.clone();
    let mut prev_keyed: BTreeMap<u32, Hist> = BTreeMap::new();
    let mut idle_keys: BTreeMap<u32, u32> = BTreeMap::new();
    let mut points: Vec<Point> = Vec::new();
    let mut run_max_ns = 0u64;
    // The whole run's distribution, for the plot.
    let mut dist = Hist::default();
    let interval = args.interval.map(Duration::from_secs);
    let mut printed = 0u64;
    loop {
        let stop = match interval {
            Some(d) => {
                let deadline = Instant::now() + d;
                let mut stop = false;
                loop {
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    if signals.wait(deadline - now) == Wake::Stop {
                        stop = true;
                        break;
                    }
                }
                stop
            }
            None => loop {
                if signals.wait(Duration::from_secs(3600)) == Wake::Stop {
                    break true;
                }
            },
        };
        // Read and take this interval's view.
        let cur_cpu = rq.read_per_cpu()?;
        let base = if args.cumulative {
            &base_cpu
        } else {
            &prev_cpu
        };
        let cpu_hists: Vec<Hist> = cur_cpu
            .iter()
            .zip(base.iter().chain(std::iter::repeat(&Hist::default())))
            .map(|(c, b)| c.since(b))
            .collect();
        if !args.cumulative {
            prev_cpu = cur_cpu;
        }
        let mut keyed: Vec<(u32, Hist)> = Vec::new();
        if cfg.key != KeyKind::None {
            let cur = rq.read_keyed()?;
            let mut forget = Vec::new();
            for (k, h) in cur {
                let d = match prev_keyed.get(&k) {
                    Some(p) if !args.cumulative => h.since(p),
                    _ => h.clone(),
                };
                let n = d.count();
                if !args.cumulative {
                    // Keys that stay quiet (exited tasks) are dropped from the kernel map.
                    let idle = idle_keys.entry(k).or_insert(0);
                    *idle = if n == 0 { *idle + 1 } else { 0 };
                    if *idle >= 3 {
                        forget.push(k);
                    }
                    prev_keyed.insert(k, h);
                }
                if n > 0 {
                    keyed.push((k, d));
                }
            }
            if !forget.is_empty() {
                rq.forget_keys(&forget);
                for k in &forget {
                    prev_keyed.remove(k);
                    idle_keys.remove(k);
                }
            }
        }
        let max_ns = rq.take_max_ns()?;
        run_max_ns = run_max_ns.max(max_ns);
        let shown_max = if args.cumulative { run_max_ns } else { max_ns } as f64 / ns_per_unit;
        let mut total = Hist::default();
        match cfg.key {
            KeyKind::None => cpu_hists.iter().for_each(|h| total.add(h)),
            _ => keyed.iter().for_each(|(_, h)| total.add(h)),
        }
        let summary = Summary::of(
            &total,
            Some(if total.count() > 0 { shown_max } else { 0.0 }),
        );
        if args.cumulative {
            dist = total.clone();
        } else {
            dist.add(&total);
        }
        points.push(Point {
            t: start.elapsed().as_secs_f64(),
            p50: summary.p50,
            p90: summary.p90,
            p99: summary.p99,
            max: summary.max.unwrap_or(0.0),
        });

        if args.csv {
            writeln!(out, "{}", csv_row(epoch_s(), &summary))?;
        } else if args.json {
            let total_buckets = total.log2();
            let kind = match cfg.key {
                KeyKind::Pid => Some("pid"),
                KeyKind::Tid => Some("tid"),
                KeyKind::PidNs => Some("pidns"),
                KeyKind::None if args.cpus => Some("cpu"),
                KeyKind::None => None,
            };
            let per_src: Vec<(u64, &Hist)> = if args.cpus {
                cpu_hists
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| h.count() > 0)
                    .map(|(i, h)| (i as u64, h))
                    .collect()
            } else {
                keyed.iter().map(|(k, h)| (*k as u64, h)).collect()
            };
            let buckets: Vec<Vec<kernstat_model::hist::Log2Bucket>> =
                per_src.iter().map(|(_, h)| h.log2()).collect();
            let per = per_src
                .iter()
                .zip(&buckets)
                .map(|((k, h), b)| JsonHist {
                    kind,
                    key: Some(*k),
                    comm: matches!(cfg.key, KeyKind::Pid | KeyKind::Tid)
                        .then(|| comm_of(*k as u32)),
                    summary: Summary::of(h, None),
                    buckets: b,
                })
                .collect();
            let line = JsonInterval {
                timestamp: epoch_s(),
                unit: short,
                attach: rq.attach_kind().as_str(),
                summary,
                buckets: &total_buckets,
                per,
            };
            serde_json::to_writer(&mut out, &line)?;
            writeln!(out)?;
        } else {
            let mut s = String::new();
            if args.timestamp {
                s.push_str(&clock());
                s.push('\n');
            }
            if args.cpus {
                for (i, h) in cpu_hists.iter().enumerate().filter(|(_, h)| h.count() > 0) {
                    s.push_str(&format!("\ncpu = {i}\n"));
                    write_log2(&mut s, unit, &h.log2());
                }
            } else if cfg.key != KeyKind::None {
                for (k, h) in &keyed {
                    match cfg.key {
                        KeyKind::Pid => s.push_str(&format!("\npid = {k} {}\n", comm_of(*k))),
                        KeyKind::Tid => s.push_str(&format!("\ntid = {k} {}\n", comm_of(*k))),
                        _ => s.push_str(&format!("\npidns = {k}\n")),
                    }
                    write_log2(&mut s, unit, &h.log2());
                }
            } else {
                s.push('\n');
                write_log2(&mut s, unit, &total.log2());
            }
            if summary.count > 0 {
                s.push_str(&format!(
                    "p50 {:.1} {short}, p90 {:.1} {short}, p99 {:.1} {short}, max {:.1} {short} ({} events)\n",
                    summary.p50,
                    summary.p90,
                    summary.p99,
                    summary.max.unwrap_or(0.0),
                    summary.count
                ));
            }
            out.write_all(s.as_bytes())?;
        }
        out.flush()?;
        printed += 1;
        if stop || args.count.is_some_and(|c| printed >= c) {
            break;
        }
    }

    if let Some(path) = &args.plot {
        plot::plot(path, unit, &points, &dist.log2())?;
        eprintln!("kernstat: wrote {}", path.display());
    }
    Ok(0)
}
