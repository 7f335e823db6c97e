//! `kernstat cgroups`: every control group with its CPU (and throttling), memory, I/O,
//! pressure, tasks and its processes' network over an interval, as a tree or NDJSON.
//!
//! Two readings of the cgroup v2 hierarchy `--interval` apart (the figures are the
//! groups' own files, hierarchical as the kernel keeps them); network bytes are the
//! per-process counters summed into each group and its ancestors (processes placed by
//! the task iterator's cgroup id).

use std::io::{self, Write};
use std::time::Instant;

use anyhow::Context;
use kernstat_collect::cgroups::{CgroupOptions, CgroupSampler};
use kernstat_model::cgroup::CgroupRate;
use kernstat_model::cgroup_tree::{tree, Column, TreeOrder};
use kernstat_render::sort::SortSpec;
use kernstat_sources::cgroup::{CgroupReader, CgroupWant};

use crate::cli::CgroupsArgs;

/// Runs `kernstat cgroups`; returns the exit status.
pub fn run(args: &CgroupsArgs) -> anyhow::Result<i32> {
    let spec = SortSpec::parse(&args.sort);
    let sort = match (spec.key, Column::parse(spec.key)) {
        ("path", _) => None,
        (_, Some(c)) => Some(c),
        _ => {
            let names: Vec<&str> = std::iter::once("path")
                .chain(Column::ALL.iter().map(|c| c.name()))
                .collect();
            crate::cli::usage!(
                "--sort {:?}: no such column (one of {})",
                args.sort,
                names.join(", ")
            );
        }
    };
    let (mut groups, layout) = match &args.replay.at {
        Some(at) => {
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
            let mut groups = kernstat_record::replay::model(cursor.before(), frame).cgroups;
            if let Some(d) = args.depth {
                groups.retain(|g| g.depth <= d);
            }
            (groups, frame.groups_layout.clone())
        }
        None => {
            let mut sampler = CgroupSampler::open(CgroupOptions {
                depth: args.depth,
                memory_stat: args.json,
                max_groups: Some(args.max_groups),
                network: !args.no_net,
                no_bpf: args.no_bpf,
            })?;
            if let Some(n) = args.bench {
                return bench(sampler.reader(), n, args.depth);
            }
            sampler.read().context("reading the cgroup hierarchy")?;
            std::thread::sleep(args.interval);
            sampler.read().context("reading the cgroup hierarchy")?
        }
    };
    if let Some(root) = &args.root {
        let root = kernstat_model::cgroup::normalize(root);
        groups.retain(|g| kernstat_model::cgroup::within(&g.path, &root));
        if groups.is_empty() {
            eprintln!("kernstat cgroups: no control group {root} (kernstat cgroups --depth 1 lists the top ones)");
            return Ok(1);
        }
    }
    let lines = tree(
        &groups,
        &TreeOrder {
            sort,
            descending: spec.descending,
            ..TreeOrder::default()
        },
    );
    let mut out = io::stdout().lock();
    if args.json {
        for l in &lines {
            serde_json::to_writer(
                &mut out,
                &JsonGroup {
                    group: &groups[l.index],
                    layout: &layout,
                },
            )?;
            out.write_all(b"\n")?;
        }
    } else {
        out.write_all(kernstat_render::cgroups::table(&groups, &lines, &layout).as_bytes())?;
    }
    Ok(0)
}

#[derive(serde::Serialize)]
struct JsonGroup<'a> {
    #[serde(flatten)]
    group: &'a CgroupRate,
    layout: &'a str,
}

/// `--bench N`: N readings of every group (what a refresh of `kernstat cgroups` or the
/// daemon's sample does), CPU time and wall time of each, medians. First, readings for a
/// little longer than the reader takes to keep a quiet group's pressure (its total
/// unmoved for AVERAGES_LAG_NS), as a refresh after the first seconds does.
fn bench(reader: &mut CgroupReader, n: u32, depth: Option<u32>) -> anyhow::Result<i32> {
    if n == 0 {
        crate::cli::usage!("--bench needs at least one reading");
    }
    let settle = std::time::Duration::from_nanos(kernstat_sources::cgroup::AVERAGES_LAG_NS)
        + std::time::Duration::from_millis(500);
    let warming = Instant::now();
    while warming.elapsed() < settle {
        reader.read(CgroupWant::default(), depth)?;
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    let mut cpu = Vec::with_capacity(n as usize);
    let mut wall = Vec::with_capacity(n as usize);
    let mut groups = 0;
    for i in 0..n + 2 {
        let c0 = kernstat_os::process_cpu_ns();
        let t0 = Instant::now();
        let tree = reader.read(CgroupWant::default(), depth)?;
        let w = t0.elapsed().as_nanos() as u64;
        let c = kernstat_os::process_cpu_ns() - c0;
        groups = tree.groups.len();
        if i >= 2 {
            cpu.push(c);
            wall.push(w);
        }
    }
    // The mean counts the readings that read every file (one in LIMITS_EVERY), which
    // the median leaves out: it is what a refresh costs on average.
    let cpu_mean = cpu.iter().sum::<u64>() as f64 / cpu.len() as f64;
    cpu.sort_unstable();
    wall.sort_unstable();
    let mut report = serde_json::json!({
        "n": n,
        "groups": groups,
        "cpu_us_mean": cpu_mean / 1e3,
        "cpu_us_p50": cpu[cpu.len() / 2] as f64 / 1e3,
        "wall_us_p50": wall[wall.len() / 2] as f64 / 1e3,
    });
    // Beside it, the BPF cgroup iterator over the same tree: ids, names and CPU time
    // only (what it can give fresh; pressure, memory and I/O stay the files').
    if let Ok(mut it) = kernstat_bpf::cgroups::CgroupIter::load(reader.mount()) {
        let mut cpu = Vec::with_capacity(n as usize);
        let mut seen = Ok(0);
        for i in 0..n + 2 {
            let c0 = kernstat_os::process_cpu_ns();
            seen = it.read().map(|g| g.len());
            if seen.is_err() {
                break;
            }
            if i >= 2 {
                cpu.push(kernstat_os::process_cpu_ns() - c0);
            }
        }
        match seen {
            Ok(groups) => {
                cpu.sort_unstable();
                report["iterator_groups"] = groups.into();
                report["iterator_cpu_us_p50"] = (cpu[cpu.len() / 2] as f64 / 1e3).into();
            }
            // The kernel's cgroup iterator cannot resume a walk across reads: a tree
            // whose records overflow one read's buffer fails with EOPNOTSUPP.
            Err(e) => report["iterator_error"] = e.to_string().into(),
        }
    }
    println!("{report}");
    Ok(0)
}
