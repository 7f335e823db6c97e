//! The two ways every task walk can run (bpf/walk.bpf.h): one BPF_PROG_RUN of the
//! open-coded task iterator into a mapped buffer (6.7+), or a read of the task iterator.
//! Where the kernel has the first, collectors use it; both must see the same processes
//! with the same values. Runs as root; skips elsewhere, fails under CI=true.

use std::collections::{BTreeMap, BTreeSet};

use kernstat_bpf::ps::PsReader;
use kernstat_bpf::Sampler;
use kernstat_model::TaskTable;
use kernstat_testkit::{bpf_gate, IdleProcs};

fn sampler() -> Option<Sampler> {
    if !bpf_gate() {
        return None;
    }
    Some(Sampler::load().expect("load the BPF sampler"))
}

/// Whether this kernel has the open-coded task iterator (6.7+), which the walks run over.
fn kernel_has_task_kfuncs() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut parts = release.trim().split(['.', '-']);
    let major: u32 = parts.next().unwrap().parse().unwrap();
    let minor: u32 = parts.next().unwrap().parse().unwrap();
    (major, minor) >= (6, 7)
}

/// A sample is one BPF_PROG_RUN of the open-coded walk where the kernel has it, and that
/// walk and the task iterator's agree: a process in both walks of one kind was alive all
/// through the other kind's walk between them, so that walk saw it, with the same
/// identity and a CPU time between the two.
#[test]
fn the_run_and_the_iterator_agree() {
    let Some(mut s) = sampler() else { return };
    let idle = IdleProcs::spawn(20).unwrap();
    let ours: BTreeSet<u32> = idle.pids().into_iter().collect();
    let mut t = TaskTable::default();
    s.sample(&mut t).unwrap();
    if kernel_has_task_kfuncs() {
        assert_eq!(s.walk_mode(), ("run", 0), "this kernel runs the walk");
    }
    for outer_is_run in [false, true] {
        let mut walks = [
            TaskTable::default(),
            TaskTable::default(),
            TaskTable::default(),
        ];
        for (i, w) in walks.iter_mut().enumerate() {
            let run = outer_is_run == (i != 1);
            s.set_run(run);
            s.sample(w).unwrap();
            if kernel_has_task_kfuncs() {
                // The run really ran (no overflow, no fallback): both ways are compared.
                assert_eq!(s.walk_mode(), (if run { "run" } else { "iterator" }, 0));
            }
        }
        let key = |t: &TaskTable| -> BTreeMap<(u32, u64), kernstat_model::ProcSample> {
            t.procs.iter().map(|p| ((p.pid, p.start), *p)).collect()
        };
        let (a, b, c) = (key(&walks[0]), key(&walks[1]), key(&walks[2]));
        let mut checked = 0;
        for (k, first) in &a {
            let Some(last) = c.get(k) else { continue };
            let mid = b.get(k).unwrap_or_else(|| {
                panic!("{k:?} was in the walks before and after, not between (run outside: {outer_is_run})")
            });
            if ours.contains(&k.0) {
                // A process's CPU is its live threads' plus the exited ones' in the signal
                // struct, and a walk that meets a thread as it exits may count it in both
                // for an instant: exact only for a process of one thread, as these are.
                assert!(
                    first.cpu_ns <= mid.cpu_ns && mid.cpu_ns <= last.cpu_ns,
                    "{k:?}: CPU {} / {} / {}",
                    first.cpu_ns,
                    mid.cpu_ns,
                    last.cpu_ns
                );
                assert_eq!(
                    (mid.uid, mid.ppid, mid.comm.as_str()),
                    (first.uid, first.ppid, first.comm.as_str())
                );
                assert_eq!(mid.ppid, std::process::id());
                checked += 1;
            }
        }
        assert_eq!(checked, ours.len(), "every idle child in all three walks");
    }
    s.set_run(true);
}

/// The same for `ps`'s records, thread by thread: a thread in both walks of one kind was
/// in the other's, with its identity, and its CPU time between the two.
#[test]
fn ps_run_and_iterator_agree() {
    if !bpf_gate() {
        return;
    }
    let mut r = PsReader::load(false).expect("load the ps iterator");
    let idle = IdleProcs::spawn(20).unwrap();
    let ours: BTreeSet<u32> = idle.pids().into_iter().collect();
    r.read().unwrap();
    if kernel_has_task_kfuncs() {
        assert_eq!(r.walk_mode(), "run", "this kernel runs the walk");
    }
    for outer_is_run in [false, true] {
        let mut walks = Vec::new();
        for i in 0..3 {
            let run = outer_is_run == (i != 1);
            r.set_run(run);
            let rows = r.read().unwrap();
            if kernel_has_task_kfuncs() {
                assert_eq!(r.walk_mode(), if run { "run" } else { "iterator" });
            }
            walks.push(
                rows.into_iter()
                    .map(|t| ((t.tid, t.start_ns), t))
                    .collect::<BTreeMap<_, _>>(),
            );
        }
        let (mut checked, mut long_names) = (0, 0);
        for (k, first) in &walks[0] {
            let Some(last) = walks[2].get(k) else {
                continue;
            };
            let mid = walks[1].get(k).unwrap_or_else(|| {
                panic!("thread {k:?} was in the walks before and after, not between (run outside: {outer_is_run})")
            });
            // A thread's own CPU time only grows.
            assert!(
                first.cpu_ns <= mid.cpu_ns && mid.cpu_ns <= last.cpu_ns,
                "{k:?}"
            );
            assert_eq!(mid.kthread, first.kthread, "{k:?}");
            // A kernel thread's full name travels after its record, in bytes the run
            // writes whole and then takes back: the same name. Not a workqueue worker's,
            // which names the work it last ran and changes from one walk to the next.
            if first.kthread && !first.comm.as_str().starts_with("kworker/") {
                assert_eq!(mid.comm, first.comm, "{k:?}");
                long_names += usize::from(first.comm.as_str().len() > 15);
            }
            if ours.contains(&k.0) {
                assert_eq!(
                    (mid.ppid, mid.uid, mid.comm.as_str()),
                    (std::process::id(), first.uid, "sleep")
                );
                checked += 1;
            }
        }
        // Where the kernel keeps full names (6.0+) and has such a thread, one was compared.
        let named = |t: &kernstat_model::ps::TaskRow| {
            t.kthread && !t.comm.as_str().starts_with("kworker/") && t.comm.as_str().len() > 15
        };
        // (In both outer walks: a kernel thread that came or went between them has no
        // middle to compare.)
        if walks[0]
            .iter()
            .any(|(k, t)| named(t) && walks[2].contains_key(k))
        {
            assert!(
                long_names > 0,
                "a kernel thread named past comm's 15 bytes was compared"
            );
        }
        assert_eq!(checked, ours.len(), "every idle child in all three walks");
    }
}

/// A machine with more tasks than the run's buffer holds (sized at load) is read by the
/// iterator from the first walk that did not fit: the table is whole, the overflow said.
#[test]
fn a_walk_that_does_not_fit_reads_the_iterator() {
    if !bpf_gate() || !kernel_has_task_kfuncs() {
        return;
    }
    let idle = IdleProcs::spawn(40).unwrap();
    // One page: ~40 processes' records, fewer than this machine and the 40 have.
    let mut s = Sampler::load_sized(4096).expect("load the BPF sampler");
    assert_eq!(
        s.walk_mode(),
        ("iterator", 1),
        "the load's first walk overflowed"
    );
    let mut t = TaskTable::default();
    s.sample(&mut t).unwrap();
    assert_eq!(s.walk_mode(), ("iterator", 1), "and it is not tried again");
    let seen: BTreeSet<u32> = t.procs.iter().map(|p| p.pid).collect();
    for pid in idle.pids() {
        assert!(
            seen.contains(&pid),
            "idle child {pid} in the iterator's table"
        );
    }
    s.set_run(true);
    s.sample(&mut t).unwrap();
    assert_eq!(
        s.walk_mode(),
        ("iterator", 2),
        "forced again, it overflows again"
    );
    assert!(t.procs.len() > 40);
}
