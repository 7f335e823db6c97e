//! The CPU one read costs, from the shared-memory snapshot and over the socket, against
//! a running daemon: `read_cost SOCKET [N]` (scripts/bench.sh prompt runs it pinned).
//!
//! The snapshot side is this process's CPU (getrusage) over N reads of `load.one`; the
//! socket side adds the daemon's CPU over N requests on one kept connection (from
//! /proc/PID/stat, 10 ms ticks: N is large enough for that to be < 1 %).

use std::path::PathBuf;
use std::time::Instant;

use kernstat_client::{shm, Session};

fn own_cpu_ns() -> u64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn proc_cpu_ns(pid: u64) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    let f: Vec<u64> = rest.split(' ').map(|x| x.parse().unwrap_or(0)).collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    (f[11] + f[12]) * 1_000_000_000 / hz
}

fn main() {
    let mut args = std::env::args().skip(1);
    let socket = PathBuf::from(args.next().expect("usage: read_cost SOCKET [N]"));
    let n: u64 = args.next().map_or(200_000, |v| v.parse().expect("N"));
    let mut session = Session::connect(&socket).expect("connect");
    let status = session.op("status").expect("status");
    let daemon_pid = status
        .data
        .as_ref()
        .and_then(|d| d["pid"].as_u64())
        .expect("pid");
    let mut reader = shm::Reader::beside(&socket).expect("snapshot");
    assert!(
        reader.get("load.one").is_some(),
        "load.one not in the snapshot yet"
    );

    let (cpu0, t0) = (own_cpu_ns(), Instant::now());
    for _ in 0..n {
        std::hint::black_box(reader.get("load.one"));
    }
    let shm_cpu = (own_cpu_ns() - cpu0) as f64 / n as f64;
    let shm_wall = t0.elapsed().as_nanos() as f64 / n as f64;

    let m = n / 4;
    let (cpu0, d0, t0) = (own_cpu_ns(), proc_cpu_ns(daemon_pid), Instant::now());
    for _ in 0..m {
        std::hint::black_box(session.get("load.one", None).expect("get"));
    }
    let client = (own_cpu_ns() - cpu0) as f64 / m as f64;
    let daemon = (proc_cpu_ns(daemon_pid) - d0) as f64 / m as f64;
    let wall = t0.elapsed().as_nanos() as f64 / m as f64;

    println!("shared memory: {shm_cpu:.0} ns CPU per read ({shm_wall:.0} ns wall), {n} reads");
    println!(
        "socket:        {:.0} ns CPU per read (client {client:.0} + daemon {daemon:.0}; {wall:.0} ns wall), {m} reads",
        client + daemon
    );
    println!(
        "ratio:         {:.0}x less CPU from shared memory",
        (client + daemon) / shm_cpu
    );
}
