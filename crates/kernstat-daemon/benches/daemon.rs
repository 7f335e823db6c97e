//! The daemon's budgets, measured: cache read, round trip on a held connection, and
//! throughput with 1, 10 and 100 concurrent clients.
//!
//! `cargo bench -p kernstat-daemon --bench daemon -- [--secs S] [--pin|--pin-same]
//! [--socket PATH]` prints one JSON object. With `--pin` the daemon's threads run on
//! CPU 0 and the clients on CPU 1, with `--pin-same` all on CPU 0; without either the
//! scheduler places them (round trips then vary 2-3x with placement, so each figure is a
//! median of many). By default the daemon runs in this process on the same tokio
//! runtime shape as `kernstat daemon`; with `--socket` the same client load goes to a
//! daemon that is already running (a real `kernstat daemon`, or a peer that speaks the
//! same protocol, such as beachcomber's `comb`). Clients are `Session`s on their own
//! threads, one request outstanding each, as prompts and bars use them.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use kernstat_client::Session;
use kernstat_daemon::{providers, Cache, Config, Daemon};
use kernstat_model::Model;

fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; we pass its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn model() -> Model {
    Model {
        cpu_percent: 12.5,
        cores_percent: vec![10.0, 15.0],
        load: [0.42, 0.3, 0.2],
        ..Default::default()
    }
}

/// Nanoseconds per `Cache::get` of a global key, median of 31 batches.
fn cache_read_ns() -> f64 {
    let cache = Cache::new();
    providers::system::publish(&cache, &model(), 60.0);
    providers::basic::publish(&cache);
    const BATCH: u32 = 100_000;
    let mut per = Vec::new();
    for _ in 0..31 {
        let t = Instant::now();
        for _ in 0..BATCH {
            let e = cache.get(std::hint::black_box("load.one"), None);
            std::hint::black_box(e);
        }
        per.push(t.elapsed().as_nanos() as f64 / BATCH as f64);
    }
    median(&mut per)
}

/// The floor: round trip p50 (µs) to a blocking thread that answers every line with a
/// fixed reply, no parsing and no runtime. What the kernel and the two wakeups cost.
fn floor_rtt_us(dir: &Path, pinned: bool) -> f64 {
    use std::io::{BufRead, Write};
    let path = dir.join("floor");
    let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind floor");
    std::thread::spawn(move || {
        if pinned {
            pin_to(0);
        }
        let (s, _) = listener.accept().expect("accept");
        let mut w = s.try_clone().expect("clone");
        let mut r = std::io::BufReader::new(s);
        let mut line = Vec::new();
        while r.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            line.clear();
            if w.write_all(b"{\"ok\":true,\"data\":0.42,\"age_ms\":1,\"stale\":false}\n")
                .is_err()
            {
                break;
            }
        }
    });
    let mut s = Session::connect(&path).expect("connect floor");
    for _ in 0..2000 {
        s.raw(b"x").expect("warm-up");
    }
    let mut v: Vec<f64> = (0..50_000)
        .map(|_| {
            let t = Instant::now();
            s.raw(b"x").expect("floor");
            t.elapsed().as_nanos() as f64 / 1000.0
        })
        .collect();
    median(&mut v)
}

const REQ: &[u8] = br#"{"op":"get","key":"load.one"}"#;

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// Round trips (µs, sorted) on one held connection.
fn round_trips(sock: &Path) -> Vec<f64> {
    let mut s = Session::connect(sock).expect("connect");
    for _ in 0..2000 {
        s.raw(REQ).expect("warm-up");
    }
    let mut rtt: Vec<f64> = (0..50_000)
        .map(|_| {
            let t = Instant::now();
            s.raw(REQ).expect("get");
            t.elapsed().as_nanos() as f64 / 1000.0
        })
        .collect();
    rtt.sort_by(f64::total_cmp);
    rtt
}

/// Requests per second with `clients` connections, one request outstanding each.
fn throughput(sock: &Path, clients: usize, secs: f64, cpu: Option<usize>) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(clients + 1));
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (done, stop, start) = (done.clone(), stop.clone(), start.clone());
            let sock = sock.to_path_buf();
            std::thread::spawn(move || {
                if let Some(c) = cpu {
                    pin_to(c);
                }
                let mut s = Session::connect(&sock).expect("connect");
                start.wait();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    s.raw(REQ).expect("get");
                    n += 1;
                }
                done.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    start.wait();
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    for th in threads {
        th.join().expect("client thread");
    }
    (done.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64()).round()
}

/// Round trips and throughput at 1, 10 and 100 clients, as JSON fields.
fn client_load(sock: &Path, secs: f64, cpu: Option<usize>, floor_dir: &Path) -> serde_json::Value {
    let rtt = round_trips(sock);
    let mut rates = serde_json::Map::new();
    for clients in [1usize, 10, 100] {
        rates.insert(
            format!("clients_{clients}"),
            serde_json::json!(throughput(sock, clients, secs, cpu)),
        );
    }
    serde_json::json!({
        "rtt_p50_us": percentile(&rtt, 0.5),
        "rtt_p95_us": percentile(&rtt, 0.95),
        "rtt_p99_us": percentile(&rtt, 0.99),
        "floor_rtt_p50_us": floor_rtt_us(floor_dir, cpu.is_some()),
        "requests_per_s": rates,
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = arg(&args, "--secs")
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let pinned = args.iter().any(|a| a == "--pin" || a == "--pin-same");
    let client_cpu = if args.iter().any(|a| a == "--pin-same") {
        0
    } else {
        1
    };
    let cpu = pinned.then_some(client_cpu);
    let dir = tempfile::tempdir().expect("tempdir");

    if let Some(sock) = arg(&args, "--socket") {
        // Pin the external daemon yourself (taskset) to match --pin/--pin-same.
        if let Some(c) = cpu {
            pin_to(c);
        }
        let mut out = client_load(Path::new(sock), secs, cpu, dir.path());
        out["socket"] = sock.into();
        out["clients_cpu"] = serde_json::json!(cpu);
        println!("{out}");
        return;
    }

    let cache_ns = cache_read_ns();
    let sock = dir.path().join("sock");
    let daemon = Daemon::new(Config::default());
    daemon.publish_system(&model(), 60.0);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(2));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .on_thread_start(move || {
            if pinned {
                pin_to(0)
            }
        })
        .enable_all()
        .build()
        .expect("runtime");
    let listener = kernstat_daemon::bind(&sock, 0o600, 0o700).expect("bind");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    rt.spawn(kernstat_daemon::serve(listener, daemon.clone(), async {
        let _ = stop_rx.await;
    }));
    if let Some(c) = cpu {
        pin_to(c);
    }
    let mut s = Session::connect(&sock).expect("connect");
    assert!(s
        .raw(REQ)
        .unwrap()
        .starts_with(br#"{"ok":true,"data":0.42"#));
    let mut out = client_load(&sock, secs, cpu, dir.path());
    let _ = stop_tx.send(());
    out["pinned"] = match cpu {
        None => "no",
        Some(0) => "same cpu",
        Some(_) => "daemon cpu0, clients cpu1",
    }
    .into();
    out["cache_read_ns"] = ((cache_ns * 10.0).round() / 10.0).into();
    out["served"] = daemon.requests().into();
    println!("{out}");
}
