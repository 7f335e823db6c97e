//! Writes a long archive for measuring `kernstat view` (docs/measured.md): a recorded
//! frame of a real archive, its processes repeated to N, written every 5 s over H hours
//! ending now, with counters that grow (CPU along a daily curve with a one-frame spike
//! every hour), as the recorder's writer writes them (delta frames, key frames).
//!
//! cargo run --release -p kernstat-view --example synth_archive -- SRC DST HOURS PROCS

use std::time::Duration;

use kernstat_record::archive::Archive;
use kernstat_record::writer::{Retention, Writer};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (src, dst) = (&a[1], &a[2]);
    let hours: u64 = a[3].parse().unwrap();
    let procs: usize = a[4].parse().unwrap();
    let mut c = Archive::open(src.as_ref()).unwrap().cursor().unwrap();
    assert!(c.first(), "no frame in {src}");
    let mut f = c.current().unwrap().clone();
    let template = f.procs.clone();
    f.procs.clear();
    for k in 0..procs {
        let mut p = template[k % template.len()].clone();
        p.pid = 100_000 + k as u32;
        f.procs.push(p);
    }
    f.ended.clear();
    f.events.clear();
    let mut w = Writer::open(
        dst.as_ref(),
        Retention {
            max_age: Duration::from_secs(8 * 86_400),
            max_bytes: 64 << 30,
        },
        0o600,
    )
    .unwrap();
    let step = 5_000_000_000u64;
    let n = hours * 720;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let start = now - n * step;
    let ncpus = u64::from(f.machine.ncpus.max(1));
    for i in 0..n {
        let day = (i as f64 / 17_280.0 * std::f64::consts::TAU).sin() * 0.3 + 0.35;
        let busy = if i % 720 == 360 { 0.95 } else { day };
        f.time_unix_ns = start + i * step;
        f.boot_ns += step;
        f.machine.mono_ns += step;
        f.machine.busy_ns += (busy * (step * ncpus) as f64) as u64;
        for (k, p) in f.procs.iter_mut().enumerate() {
            p.cpu_ns += (k as u64 % 7) * 1_000_000;
            p.read_bytes += (k as u64 % 3) * 4096;
        }
        w.append(&f).unwrap();
    }
    eprintln!("{n} frames of {procs} processes, {} bytes", w.total_bytes());
}
