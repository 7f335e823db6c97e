//! Writes the format fixture of this version (tests/fixtures/vN, N = VERSION): four
//! frames of three processes, a key and three deltas, with known counters. Run it when
//! the format changes, after keeping the old version's reader and fixture:
//!
//! cargo run -p kernstat-record --example write_fixture -- crates/kernstat-record/tests/fixtures/v3

use std::time::Duration;

use kernstat_record::frame::{Frame, Proc};
use kernstat_record::writer::{Retention, Writer};

fn main() {
    let dir = std::env::args().nth(1).expect("the fixture directory");
    let mut w = Writer::open(
        dir.as_ref(),
        Retention {
            max_age: Duration::from_secs(3650 * 86_400),
            max_bytes: 1 << 30,
        },
        0o644,
    )
    .expect("open the fixture directory");
    let t0 = 1_795_694_400_000_000_000u64; // 2026-11-26T12:00:00Z
    for i in 0..4u64 {
        let mut f = Frame {
            time_unix_ns: t0 + i * 5_000_000_000,
            boot_ns: 1_000_000_000_000 + i * 5_000_000_000,
            exits_hook: true,
            ..Frame::default()
        };
        f.machine.mono_ns = f.boot_ns;
        f.machine.ncpus = 2;
        f.machine.busy_ns = 500_000_000_000 + i * 3_000_000_000;
        for (k, pid) in [1u32, 42, 4242].iter().enumerate() {
            let k = k as u64;
            f.procs.push(Proc {
                pid: *pid,
                ppid: u32::from(*pid != 1),
                uid: 1000 * k as u32,
                start_ns: 1_000_000 * u64::from(*pid),
                state: b'S',
                threads: 1 + k as u32,
                cpu_ns: 1_000_000_000 * (k + 1) + i * 250_000_000 * k,
                children_cpu_ns: 7,
                run_delay_ns: 1_000 * k * (i + 1),
                read_bytes: 4096 * i,
                write_bytes: 8192 * i * k,
                rss_bytes: 10 << 20,
                vsz_bytes: 100 << 20,
                minflt: 10 + i,
                majflt: 1,
                net: Some([[1, 2, 3, 4], [5, 6, 7, 8 + i]]),
                comm: format!("proc{pid}"),
                cmd: format!("/bin/proc{pid} --flag"),
                cgroup: "/system.slice/x.service".into(),
                ..Proc::default()
            });
        }
        w.append(&f).expect("append");
    }
}
