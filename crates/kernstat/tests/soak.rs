//! The soak: `kernstat daemon` (metrics on, runqlat and writes collected) with a bar
//! rendering from it, 100 socket clients asking all the time, and `ps`, `runqlat` and
//! `writes` run beside it now and then, all under `stress-ng --fork 4 --switch 2`.
//! Every so often the daemon's resident memory, descriptors, BPF map entries and CPU
//! are sampled. Asserted: memory and descriptors flat (within 5 % after a warm-up), the
//! writes map never full, every bar tick arrives, no client error, no error line from
//! the daemon or the bar.
//!
//! `make test` runs it for 2 minutes; `make soak` for an hour
//! (KERNSTAT_SOAK_SECS=3600), drawing the samples into KERNSTAT_SOAK_PLOT (docs/testing.md's
//! docs/soak.svg) and printing them as CSV.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kernstat_render::plot::{plot_panels, Panel};
use kernstat_testkit::{bpf_gate, tool_gate};

fn env_secs(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One look at the daemon.
#[derive(Clone, Copy, Debug, Default)]
struct Look {
    t: f64,
    rss_kib: u64,
    fds: u64,
    map_entries: u64,
    map_capacity: u64,
    cpu_s: f64,
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|v| v.trim().parse().ok())
}

/// Lines of a child's stream, collected by a thread.
fn collect(stream: impl std::io::Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            l.lock().unwrap().push(line);
        }
    });
    lines
}

fn stop(child: &mut Child) {
    kernstat_testkit::terminate(child);
}

#[test]
fn a_loaded_daemon_stays_flat() {
    if !bpf_gate() || !tool_gate("stress-ng") {
        return;
    }
    let secs = env_secs("KERNSTAT_SOAK_SECS", 120);
    let every = env_secs("KERNSTAT_SOAK_EVERY", (secs / 12).clamp(5, 60));
    let mut d = common::MetricsDaemon::start("1", &["--collect", "runqlat,writes"]);
    let s = d.sock.to_str().unwrap().to_string();
    let sock = d.sock.clone();
    let daemon_err = d.stderr_lines.clone();
    let t = Instant::now();
    while !d.scrape().contains("kernstat_bpf_map_entries") {
        assert!(t.elapsed() < Duration::from_secs(30), "no writes map yet");
        std::thread::sleep(Duration::from_millis(100));
    }

    let mut load = Command::new("stress-ng")
        .args(["--fork", "4", "--switch", "2", "--quiet"])
        .args(["--timeout", &format!("{}s", secs + 60)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut bar = common::command()
        .args(["bar", "--daemon", "--socket", &s, "--format", "text"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bar_out = collect(bar.stdout.take().unwrap());
    let bar_err = collect(bar.stderr.take().unwrap());
    let bar_start = Instant::now();

    // 100 clients, each on one connection, asking every 100 ms.
    let stop_all = Arc::new(AtomicBool::new(false));
    let (answers, client_errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let clients: Vec<_> = (0..100)
        .map(|i| {
            let (sock, stop_all) = (sock.clone(), stop_all.clone());
            let (answers, errors) = (answers.clone(), client_errors.clone());
            std::thread::spawn(move || {
                let key = ["cpu.percent", "mem.used", "load.one", "top.cpu"][i % 4];
                let req = format!("{{\"op\":\"get\",\"key\":\"{key}\"}}\n");
                let mut conn = UnixStream::connect(&sock).expect("connect");
                let mut rd = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                while !stop_all.load(Ordering::Relaxed) {
                    line.clear();
                    let ok = conn.write_all(req.as_bytes()).is_ok()
                        && rd.read_line(&mut line).unwrap_or(0) > 0
                        && line.starts_with("{\"ok\":true");
                    if ok {
                        answers.fetch_add(1, Ordering::Relaxed);
                    } else {
                        errors.fetch_add(1, Ordering::Relaxed);
                        eprintln!("client {i}: {line:?}");
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        })
        .collect();

    // ps, runqlat and writes beside it, in turn, every 10 s.
    let side = {
        let stop_all = stop_all.clone();
        std::thread::spawn(move || {
            let runs: [&[&str]; 3] = [
                &["ps", "--json"],
                &["runqlat", "1", "1"],
                &["writes", "1", "1"],
            ];
            let mut failures = Vec::new();
            let mut i = 0;
            while !stop_all.load(Ordering::Relaxed) {
                let args = runs[i % runs.len()];
                let out = common::command().args(args).output().unwrap();
                if !out.status.success() {
                    failures.push(format!(
                        "{args:?}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                i += 1;
                std::thread::sleep(Duration::from_secs(10));
            }
            failures
        })
    };

    let pid = d.child.id();
    let mut looks = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        let text = d.scrape();
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count() as u64;
        looks.push(Look {
            t: start.elapsed().as_secs_f64(),
            rss_kib: status_kib(pid, "VmRSS:"),
            fds,
            map_entries: metric(
                &text,
                "kernstat_bpf_map_entries{collector=\"writes\",map=\"stats\"} ",
            )
            .unwrap_or(0.0) as u64,
            map_capacity: metric(
                &text,
                "kernstat_bpf_map_capacity{collector=\"writes\",map=\"stats\"} ",
            )
            .unwrap_or(0.0) as u64,
            cpu_s: metric(&text, "kernstat_self_cpu_seconds_total ").unwrap_or(0.0),
        });
        std::thread::sleep(Duration::from_secs(every));
    }
    let bar_secs = bar_start.elapsed().as_secs_f64();
    stop_all.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let side_failures = side.join().unwrap();
    stop(&mut bar);
    stop(&mut load);
    stop(&mut d.child);
    std::thread::sleep(Duration::from_millis(200));

    // The samples, as CSV and (make soak) as a plot.
    println!("t_s,rss_kib,fds,writes_map_entries,cpu_percent");
    for (i, l) in looks.iter().enumerate() {
        let cpu = if i == 0 {
            0.0
        } else {
            let p = looks[i - 1];
            (l.cpu_s - p.cpu_s) / (l.t - p.t) * 100.0
        };
        println!(
            "{:.0},{},{},{},{cpu:.3}",
            l.t, l.rss_kib, l.fds, l.map_entries
        );
    }
    if let Ok(path) = std::env::var("KERNSTAT_SOAK_PLOT") {
        let series = |f: &dyn Fn(&Look) -> f64| -> Vec<(f64, f64)> {
            looks.iter().map(|l| (l.t / 60.0, f(l))).collect()
        };
        let cpu: Vec<(f64, f64)> = looks
            .windows(2)
            .map(|w| {
                (
                    w[1].t / 60.0,
                    (w[1].cpu_s - w[0].cpu_s) / (w[1].t - w[0].t) * 100.0,
                )
            })
            .collect();
        let panel = |title: &str, unit: &str, lines: Vec<(String, Vec<(f64, f64)>)>| Panel {
            title: title.into(),
            unit: unit.into(),
            lines,
        };
        plot_panels(
            &PathBuf::from(path),
            "minutes",
            &[
                panel(
                    "kernstat daemon: resident memory",
                    "MiB",
                    vec![("VmRSS".into(), series(&|l| l.rss_kib as f64 / 1024.0))],
                ),
                panel(
                    "open descriptors (100 clients connected)",
                    "fds",
                    vec![("fds".into(), series(&|l| l.fds as f64))],
                ),
                panel(
                    "writes map entries (of its capacity)",
                    "entries",
                    vec![("entries".into(), series(&|l| l.map_entries as f64))],
                ),
                panel(
                    "daemon CPU (its own clock), sampling at 1 s",
                    "% of a core",
                    vec![("cpu".into(), cpu)],
                ),
            ],
        )
        .expect("plot");
    }

    // Flat after a warm-up: a quarter of the run, at least 30 s.
    let warm = (secs as f64 / 4.0).max(30.0);
    let settled: Vec<&Look> = looks.iter().filter(|l| l.t >= warm).collect();
    assert!(settled.len() >= 3, "too few samples: {looks:?}");
    let flat = |what: &str, f: &dyn Fn(&Look) -> u64| {
        let min = settled.iter().map(|l| f(l)).min().unwrap() as f64;
        let max = settled.iter().map(|l| f(l)).max().unwrap() as f64;
        assert!(
            max <= min * 1.05,
            "{what} grew from {min} to {max} after the warm-up: {looks:?}"
        );
    };
    flat("resident memory (KiB)", &|l| l.rss_kib);
    flat("descriptors", &|l| l.fds);
    for l in &looks {
        assert!(
            l.map_capacity > 0 && l.map_entries < l.map_capacity,
            "the writes map filled up: {l:?}"
        );
    }
    // Every bar tick arrived (one a second, the daemon's interval; allow the first
    // and the one cut off at the end).
    let ticks = bar_out.lock().unwrap().len() as f64;
    assert!(
        ticks >= bar_secs - 3.0,
        "{ticks} bar lines in {bar_secs:.0} s"
    );
    assert!(
        bar_err.lock().unwrap().is_empty(),
        "{:?}",
        bar_err.lock().unwrap()
    );
    let answered = answers.load(Ordering::Relaxed);
    assert_eq!(client_errors.load(Ordering::Relaxed), 0, "client errors");
    assert!(
        answered as f64 >= 100.0 * secs as f64 * 5.0,
        "{answered} answers"
    );
    assert!(side_failures.is_empty(), "{side_failures:?}");
    let errs: Vec<String> = daemon_err
        .lock()
        .unwrap()
        .iter()
        .filter(|l| !l.contains("listening on"))
        .cloned()
        .collect();
    assert!(errs.is_empty(), "daemon said: {errs:?}");
}
