//! The ps iterator against /proc, field by field, and at 10,000 processes. Runs as
//! root; skips elsewhere, fails under CI=true.

use std::collections::{BTreeMap, BTreeSet};

use kernstat_bpf::ps::PsReader;
use kernstat_model::ps::{processes, TaskRow};
use kernstat_testkit::{bpf_gate, ncpus, IdleProcs, Workload};

/// What /proc says about one process.
#[derive(Debug, PartialEq, Clone)]
struct Proc {
    ppid: u32,
    uid: u32,
    comm: String,
    state: char,
    threads: u32,
    cpu_ticks: u64,
    rss_pages: u64,
    kthread: bool,
    /// Times its live threads have run (/proc/PID/task/*/schedstat pcount, summed).
    runs: u64,
}

fn read_proc(pid: u32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let f: Vec<&str> = stat[close + 2..].split_whitespace().collect();
    let n = |i: usize| f[i - 3].parse::<u64>().unwrap();
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    // Every live thread's run count: a thread that starts another (which may exit again
    // before the second read) has to run to do it, so a thread count that changed and
    // came back between the reads is caught here even when the leader slept (seen once
    // with a test binary's worker threads, while a whole other suite ran beside).
    let mut runs = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        runs += text
            .split_whitespace()
            .nth(2)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(Proc {
        runs,
        ppid: n(4) as u32,
        uid,
        comm: stat[open + 1..close].to_string(),
        state: f[0].chars().next()?,
        threads: n(20) as u32,
        cpu_ticks: n(14) + n(15),
        rss_pages: n(24),
        kthread: n(9) & 0x0020_0000 != 0,
    })
}

fn proc_snapshot() -> BTreeMap<u32, Proc> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| Some((p, read_proc(p)?)))
        .collect()
}

fn reader() -> Option<PsReader> {
    if !bpf_gate() {
        return None;
    }
    Some(PsReader::load(true).expect("load the ps iterator"))
}

#[test]
fn every_field_agrees_with_proc() {
    let Some(mut r) = reader() else { return };
    let _busy = Workload::start(&["burn", "3", "100", "2", "50"]);
    let before = proc_snapshot();
    let tasks = r.read().unwrap();
    let after = proc_snapshot();
    let ours: BTreeMap<u32, TaskRow> = processes(tasks.clone())
        .into_iter()
        .map(|p| (p.pid, p))
        .collect();

    let alive: BTreeSet<u32> = before
        .keys()
        .filter(|p| after.contains_key(p))
        .copied()
        .collect();
    let missing: Vec<u32> = alive
        .iter()
        .filter(|p| !ours.contains_key(p))
        .copied()
        .collect();
    // This sandbox's kernel hides its PID 1 from task iterators (see docs/limits.md):
    // that one pid may be missing; nothing else.
    assert!(
        missing.iter().all(|&p| p == 1),
        "in /proc, not in the iterator: {missing:?}"
    );
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    let tick_ns = 1_000_000_000 / hz;
    let mut checked = 0;
    for pid in &alive {
        let (Some(a), Some(b), Some(o)) = (before.get(pid), after.get(pid), ours.get(pid)) else {
            continue;
        };
        assert_eq!(o.ppid, b.ppid, "ppid of {pid}");
        assert_eq!(o.uid, b.uid, "uid of {pid}");
        assert_eq!(o.kthread, b.kthread, "kthread flag of {pid}");
        // Names as /proc shows them, kernel threads' full names and workqueue workers'
        // suffixes included; a worker's suffix may change between the reads.
        if a.comm == b.comm {
            assert_eq!(o.comm.as_str(), b.comm, "comm of {pid}");
        }
        // A state is a moment: compare it only where nothing happened in between (the
        // same state on both sides and none of its threads ran: a process in a context-
        // switch storm flips between S and R thousands of times a second).
        if a.state == b.state && a.threads == b.threads && a.runs == b.runs {
            assert_eq!(o.state as char, b.state, "state of {pid} ({})", b.comm);
            assert_eq!(o.threads, b.threads, "threads of {pid}");
        }
        // CPU: /proc is in clock ticks for utime and stime separately (truncated each).
        let lo = a.cpu_ticks * tick_ns;
        let hi = (b.cpu_ticks + 2) * tick_ns;
        assert!(
            o.cpu_ns + 2 * tick_ns >= lo && o.cpu_ns <= hi,
            "cpu of {pid} ({}): {} vs {lo}..{hi}",
            b.comm,
            o.cpu_ns
        );
        // RSS: percpu_counter slack, and the process may have touched pages in between.
        if a.rss_pages == b.rss_pages {
            let slack = 3 * 32 * ncpus() * 4096;
            let theirs = b.rss_pages * 4096;
            assert!(
                o.rss_bytes.abs_diff(theirs) <= slack,
                "rss of {pid}: {} vs {theirs}",
                o.rss_bytes
            );
        }
        checked += 1;
    }
    assert!(checked > 20, "compared {checked} processes");
}

#[test]
fn ten_thousand_processes_none_lost_none_doubled() {
    let Some(mut r) = reader() else { return };
    let fleet = IdleProcs::spawn(10_000).expect("spawn 10,000 idle processes");
    let tasks = r.read().unwrap();
    let mut seen = BTreeSet::new();
    for t in &tasks {
        assert!(seen.insert(t.tid), "task {} appears twice", t.tid);
    }
    for pid in fleet.pids() {
        assert!(seen.contains(&pid), "idle process {pid} missing");
    }
    // The stream needed many read(2) calls (32 KiB each); records survived the restarts.
    assert!(r.read_raw().unwrap().len() > 10 * 32 * 1024);
    let procs = processes(tasks.clone());
    let sleepers = procs
        .iter()
        .filter(|p| fleet.pids().contains(&p.pid))
        .filter(|p| p.cmdline.starts_with(b"sleep\x00100000"))
        .count();
    assert_eq!(sleepers, fleet.len(), "every command line read whole");
}
