//! The exit hook against what the kernel charged: a child burns a known CPU time on
//! two threads and exits; its record's CPU time and pids are compared with wait4's
//! rusage and the pids the test knows. Runs as root; skips elsewhere, fails under CI=true.

use std::process::Command;

use kernstat_bpf::exits::Exits;
use kernstat_testkit::{bpf_gate, workload_bin};

#[test]
fn a_process_that_ended_is_recorded_with_what_the_kernel_charged_it() {
    if !bpf_gate() {
        return;
    }
    let mut exits = Exits::load().expect("load the exits hook");
    exits.drain().unwrap();
    let child = Command::new(workload_bin())
        .args(["burn-exit", "2", "300"])
        .spawn()
        .unwrap();
    let pid = child.id();
    // SAFETY: wait4 on our own child with valid out-pointers.
    let (status, usage) = unsafe {
        let mut status = 0;
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(
            libc::wait4(pid as i32, &mut status, 0, &mut usage),
            pid as i32
        );
        (status, usage)
    };
    std::mem::forget(child);
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    let charged = tv(usage.ru_utime) + tv(usage.ru_stime);
    let got = exits.drain().unwrap();
    let rec = got
        .iter()
        .find(|e| e.pid == pid)
        .unwrap_or_else(|| panic!("pid {pid} not among {} exits", got.len()));
    assert_eq!(rec.ppid, std::process::id());
    // SAFETY: getuid has no preconditions.
    assert_eq!(rec.uid, unsafe { libc::getuid() });
    assert_eq!(rec.comm, "ks-workload");
    assert_eq!(rec.exit_code, status);
    assert!(rec.exit_ns > rec.start_ns);
    // Peak RSS: the same signal_struct field getrusage reads (ru_maxrss, KiB).
    let rusage_maxrss = usage.ru_maxrss as u64 * 1024;
    assert!(
        rec.maxrss_bytes > 0 && rec.maxrss_bytes.abs_diff(rusage_maxrss) <= rusage_maxrss / 10,
        "recorded peak RSS {} B, rusage {rusage_maxrss} B",
        rec.maxrss_bytes
    );
    // The hook runs before the exit path ends (exit_mm, the last switch): a fraction of
    // a millisecond that rusage includes and the record cannot.
    let diff = charged.abs_diff(rec.cpu_ns) as f64;
    assert!(
        charged >= 600_000_000 && diff <= charged as f64 * 0.02,
        "recorded {} ns, rusage {charged} ns",
        rec.cpu_ns
    );
    assert_eq!(exits.lost(), 0);
}
