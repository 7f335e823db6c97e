//! ks-workload: processes whose answers are known, for kernstat's accuracy tests.
//!
//! Each mode does its work, prints "ready" on stdout, and then sleeps until killed, so a
//! test can sample it at rest and compare kernstat's numbers with /proc's.
//!
//!   ks-workload burn THREADS MS [EXITED_THREADS EXITED_MS]
//!       first EXITED_THREADS threads burn EXITED_MS each and exit; then THREADS threads
//!       burn MS each and stay alive (parked)
//!   ks-workload write BYTES PATH     write BYTES to PATH in 64 KiB writes, fsync
//!   ks-workload alloc MIB            allocate and touch MIB MiB
//!   ks-workload idle N               N idle child processes (killed with us)
use std::io::Write;
use std::time::Duration;

fn ready_and_wait() -> ! {
    println!("ready");
    std::io::stdout().flush().ok();
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn arg(args: &[String], i: usize, what: &str) -> u64 {
    args.get(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("ks-workload: argument {i} ({what}) must be a number"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("burn") => {
            let threads = arg(&args, 2, "THREADS");
            let ms = arg(&args, 3, "MS");
            let exited = args
                .get(4)
                .map(|_| arg(&args, 4, "EXITED_THREADS"))
                .unwrap_or(0);
            let exited_ms = args.get(5).map(|_| arg(&args, 5, "EXITED_MS")).unwrap_or(0);
            let hs: Vec<_> = (0..exited)
                .map(|_| {
                    std::thread::spawn(move || {
                        kernstat_testkit::burn(Duration::from_millis(exited_ms))
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            let (tx, rx) = std::sync::mpsc::channel();
            for _ in 0..threads {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    kernstat_testkit::burn(Duration::from_millis(ms));
                    tx.send(()).unwrap();
                    loop {
                        std::thread::park();
                    }
                });
            }
            for _ in 0..threads {
                rx.recv().unwrap();
            }
            ready_and_wait();
        }
        Some("write") => {
            let bytes = arg(&args, 2, "BYTES");
            let path = args.get(3).expect("ks-workload write BYTES PATH");
            let mut f = std::fs::File::create(path).expect("create");
            let chunk = vec![0x5au8; 64 * 1024];
            let mut left = bytes;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                f.write_all(&chunk[..n]).expect("write");
                left -= n as u64;
            }
            f.sync_all().expect("fsync");
            ready_and_wait();
        }
        Some("alloc") => {
            let mib = arg(&args, 2, "MIB") as usize;
            let mut v = vec![0u8; mib << 20];
            for i in (0..v.len()).step_by(4096) {
                v[i] = 1;
            }
            std::hint::black_box(&v);
            ready_and_wait();
        }
        Some("idle") => {
            let n = arg(&args, 2, "N") as usize;
            let procs = kernstat_testkit::IdleProcs::spawn(n).expect("spawn idle processes");
            std::hint::black_box(&procs);
            ready_and_wait();
        }
        _ => {
            eprintln!("usage: ks-workload burn|write|alloc|idle ... (see the source header)");
            std::process::exit(2);
        }
    }
}
