//! `kernstat cgroups`: every control group with its CPU (and throttling), memory, I/O,
//! pressure, tasks and its processes' network over an interval, as a tree or NDJSON.
//!
//! Two readings of the cgroup v2 hierarchy `--interval` apart (the figures are the
//! groups' own files, hierarchical as the kernel keeps them); network bytes are the
//! per-process counters summed into each group and its ancestors (processes placed by
//! the task iterator's cgroup id).

use std::collections::HashMap;
use std::io::{self, Write};
use std::time::Instant;

use anyhow::Context;
use kernstat_model::cgroup::{rates, CgroupNet, CgroupRate};
use kernstat_sources::cgroup::{CgroupReader, CgroupWant};
use kernstat_sources::{Roots, Want};

use crate::cli::CgroupsArgs;
use crate::net_interval::NetInterval;
use crate::tasks::TaskSource;

/// A column: name for --sort, header, width.
struct Col {
    name: &'static str,
    header: &'static str,
    width: usize,
}

const COLS: &[Col] = &[
    Col {
        name: "cpu",
        header: "CPU%",
        width: 6,
    },
    Col {
        name: "throttled",
        header: "THR%",
        width: 5,
    },
    Col {
        name: "mem",
        header: "MEM",
        width: 6,
    },
    Col {
        name: "limit",
        header: "LIMIT",
        width: 6,
    },
    Col {
        name: "ioread",
        header: "IO_R/s",
        width: 7,
    },
    Col {
        name: "iowrite",
        header: "IO_W/s",
        width: 7,
    },
    Col {
        name: "psicpu",
        header: "P_CPU",
        width: 5,
    },
    Col {
        name: "psimem",
        header: "P_MEM",
        width: 5,
    },
    Col {
        name: "psiio",
        header: "P_IO",
        width: 5,
    },
    Col {
        name: "pids",
        header: "TASKS",
        width: 5,
    },
    Col {
        name: "netrx",
        header: "NET_RX/s",
        width: 8,
    },
    Col {
        name: "nettx",
        header: "NET_TX/s",
        width: 8,
    },
];

/// Runs `kernstat cgroups`; returns the exit status.
pub fn run(args: &CgroupsArgs) -> anyhow::Result<i32> {
    let (sort, descending) = match args.sort.strip_prefix('-') {
        Some(n) => (n, true),
        None => (args.sort.as_str(), false),
    };
    if sort != "path" && !COLS.iter().any(|c| c.name == sort) {
        let names: Vec<&str> = std::iter::once("path")
            .chain(COLS.iter().map(|c| c.name))
            .collect();
        crate::cli::usage!(
            "--sort {:?}: no such column (one of {})",
            args.sort,
            names.join(", ")
        );
    }
    let roots = Roots::default();
    let Some(reader) = CgroupReader::open(&roots) else {
        anyhow::bail!("no cgroup v2 hierarchy is mounted here (see /proc/self/mounts)");
    };
    let mut reader = reader.with_bounds(kernstat_sources::cgroup::CgroupBounds {
        max_groups: args.max_groups.max(1),
        max_children: (args.max_groups / 4).max(16),
    });
    let want = CgroupWant {
        memory_stat: args.json,
    };
    if let Some(n) = args.bench {
        return bench(&mut reader, n, args.depth);
    }
    let mut net = if args.no_net {
        None
    } else {
        NetInterval::start(args.no_bpf, false)
    };
    let first = reader
        .read(want, args.depth)
        .context("reading the cgroup hierarchy")?;
    if let Some(n) = net.as_mut() {
        n.read_first();
    }
    let t0 = Instant::now();
    std::thread::sleep(args.interval);
    let second = reader
        .read(want, args.depth)
        .context("reading the cgroup hierarchy")?;
    if let Some(n) = net.as_mut() {
        n.read_second(t0.elapsed().as_secs_f64());
    }
    let mut groups = rates(&first, &second);
    if let Some(n) = &net {
        add_network(&mut groups, n, args.no_bpf)?;
    }
    if let Some(root) = &args.root {
        let root = normalize(root);
        groups.retain(|g| kernstat_model::cgroup::within(&g.path, &root));
    }
    let order = tree_order(&groups, sort, descending);
    let mut out = io::stdout().lock();
    if args.json {
        for &i in &order {
            let g = &groups[i];
            serde_json::to_writer(
                &mut out,
                &JsonGroup {
                    group: g,
                    layout: &second.layout,
                },
            )?;
            out.write_all(b"\n")?;
        }
    } else {
        out.write_all(table(&groups, &order, &second.layout).as_bytes())?;
    }
    Ok(0)
}

#[derive(serde::Serialize)]
struct JsonGroup<'a> {
    #[serde(flatten)]
    group: &'a CgroupRate,
    layout: &'a str,
}

fn normalize(p: &str) -> String {
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        "/".into()
    } else if t.starts_with('/') {
        t.into()
    } else {
        format!("/{t}")
    }
}

/// Sums every process's socket bytes into its group and the group's ancestors.
fn add_network(groups: &mut [CgroupRate], net: &NetInterval, no_bpf: bool) -> anyhow::Result<()> {
    let mut source = TaskSource::open(no_bpf, &crate::tasks::pin_dir(), false)?;
    let want = Want {
        cmdline: false,
        cgroup: true,
    };
    let mut extra = None;
    let tasks = source.read(false, want, &mut extra)?;
    let by_id: HashMap<u64, usize> = groups.iter().enumerate().map(|(i, g)| (g.id, i)).collect();
    let by_path: HashMap<String, usize> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (g.path.clone(), i))
        .collect();
    for g in groups.iter_mut() {
        g.net = Some(CgroupNet::default());
    }
    for t in &tasks {
        let (Some(rx), Some(tx)) = net.rates(t.pid) else {
            continue;
        };
        if rx + tx == 0.0 {
            continue;
        }
        // The process's group, by id (the iterator) or path (procfs); then every
        // ancestor shown.
        let mut path = match (by_id.get(&t.cgroup_id), &t.cgroup_path) {
            (Some(&i), _) => groups[i].path.clone(),
            (None, Some(p)) => p.clone(),
            (None, None) => continue,
        };
        loop {
            if let Some(&i) = by_path.get(&path) {
                if let Some(n) = groups[i].net.as_mut() {
                    n.rx_bps += rx;
                    n.tx_bps += tx;
                }
            }
            if path == "/" {
                break;
            }
            path = match path.rfind('/') {
                Some(0) | None => "/".into(),
                Some(i) => path[..i].to_string(),
            };
        }
    }
    Ok(())
}

fn value(g: &CgroupRate, col: &str) -> Option<f64> {
    let psi = |i: usize| match i {
        0 => g.psi_cpu.some.map(|l| f64::from(l.avg10)),
        1 => g.psi_memory.some.map(|l| f64::from(l.avg10)),
        _ => g.psi_io.some.map(|l| f64::from(l.avg10)),
    };
    match col {
        "cpu" => Some(g.cpu_percent),
        "throttled" => g.throttled_percent,
        "mem" => g.memory.map(|m| m.current as f64),
        "limit" => g.memory.and_then(|m| m.max.or(m.high)).map(|v| v as f64),
        "ioread" => g.io_read_bps,
        "iowrite" => g.io_write_bps,
        "psicpu" => psi(0),
        "psimem" => psi(1),
        "psiio" => psi(2),
        "pids" => g.pids.map(|v| v as f64),
        "netrx" => g.net.map(|n| n.rx_bps),
        "nettx" => g.net.map(|n| n.tx_bps),
        _ => None,
    }
}

/// Parents before children; siblings by the sort column (unmeasured last).
fn tree_order(groups: &[CgroupRate], sort: &str, descending: bool) -> Vec<usize> {
    let mut children: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    let paths: std::collections::HashSet<&str> = groups.iter().map(|g| g.path.as_str()).collect();
    for (i, g) in groups.iter().enumerate() {
        let parent = match g.path.rfind('/') {
            _ if g.path == "/" => None,
            Some(0) => Some("/"),
            Some(j) => Some(&g.path[..j]),
            None => None,
        };
        match parent.filter(|p| paths.contains(p)) {
            Some(p) => children.entry(p).or_default().push(i),
            None => roots.push(i),
        }
    }
    let cmp = |a: &usize, b: &usize| {
        let (ga, gb) = (&groups[*a], &groups[*b]);
        let o = if sort == "path" {
            ga.path.cmp(&gb.path)
        } else {
            match (value(ga, sort), value(gb, sort)) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                (x, y) => x.is_some().cmp(&y.is_some()),
            }
        };
        let o = if descending { o.reverse() } else { o };
        o.then_with(|| ga.path.cmp(&gb.path))
    };
    let mut out = Vec::with_capacity(groups.len());
    fn walk(
        i: usize,
        groups: &[CgroupRate],
        children: &mut HashMap<&str, Vec<usize>>,
        cmp: &dyn Fn(&usize, &usize) -> std::cmp::Ordering,
        out: &mut Vec<usize>,
    ) {
        out.push(i);
        if let Some(mut kids) = children.remove(groups[i].path.as_str()) {
            kids.sort_by(cmp);
            for k in kids {
                walk(k, groups, children, cmp, out);
            }
        }
    }
    roots.sort_by(cmp);
    for r in roots {
        walk(r, groups, &mut children, &cmp, &mut out);
    }
    out
}

fn cell(g: &CgroupRate, col: &str) -> String {
    let mut s = String::new();
    let Some(v) = value(g, col) else {
        return "-".into();
    };
    match col {
        "cpu" | "throttled" | "psicpu" | "psimem" | "psiio" => {
            s = format!("{v:.1}");
        }
        "pids" => s = format!("{v:.0}"),
        _ => {
            let _ = kernstat_render::human::bytes(&mut s, v);
        }
    }
    s
}

fn table(groups: &[CgroupRate], order: &[usize], layout: &str) -> String {
    let mut out = String::new();
    for c in COLS {
        out.push_str(&format!("{:>w$} ", c.header, w = c.width));
    }
    out.push_str("CGROUP\n");
    for &i in order {
        let g = &groups[i];
        for c in COLS {
            out.push_str(&format!("{:>w$} ", cell(g, c.name), w = c.width));
        }
        let name = if g.path == "/" {
            "/"
        } else {
            g.path.rsplit('/').next().unwrap_or(&g.path)
        };
        let indent = (g.depth as usize).min(16) * 2;
        out.push_str(&format!(
            "{:indent$}{}",
            "",
            kernstat_model::text::printable(name)
        ));
        if g.truncated > 0 {
            out.push_str(&format!(
                "  (+{} groups below not read: in this one's figures)",
                g.truncated
            ));
        }
        out.push('\n');
    }
    if layout == "hybrid" {
        out.push_str(
            "(hybrid layout: memory, io and tasks are on cgroup v1 here; kernstat reads cgroup v2, so they show -)\n",
        );
    }
    out
}

/// `--bench N`: N readings of every group (what a refresh of `kernstat cgroups` or the
/// daemon's sample does), CPU time and wall time of each, medians.
fn bench(reader: &mut CgroupReader, n: u32, depth: Option<u32>) -> anyhow::Result<i32> {
    if n == 0 {
        crate::cli::usage!("--bench needs at least one reading");
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
    cpu.sort_unstable();
    wall.sort_unstable();
    let mut report = serde_json::json!({
        "n": n,
        "groups": groups,
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
