//! `kernstat daemon --metrics` as a fleet uses it: scraped by the real Prometheus from
//! Debian, its series checked against /proc, a workload whose memory is known and
//! `kernstat runqlat` on the same load; `promtool check metrics` on the exposition; the
//! HTTP side against hostile clients; bad flags. BPF/root and tool gates as usual
//! (CI=true: nothing is skipped).

mod common;
use common::run;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kernstat_testkit::{bpf_gate, proc_rss_bytes, proc_stat_busy_ns, tool_gate, Workload};
use serde_json::Value;

use common::MetricsDaemon as Exporter;

/// The value of the series `name{labels}` (labels: exact text inside the braces, or "").
fn series(text: &str, name: &str, labels: &str) -> Option<f64> {
    let want = if labels.is_empty() {
        format!("{name} ")
    } else {
        format!("{name}{{{labels}}} ")
    };
    text.lines()
        .find_map(|l| l.strip_prefix(want.as_str()))
        .and_then(|v| v.trim().parse().ok())
}

fn meminfo_bytes(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// Every counter's value in a scrape, by series.
fn counters(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name, v) = l.rsplit_once(' ')?;
            let base = name.split('{').next()?;
            let counter =
                base.ends_with("_total") || base.ends_with("_count") || base.ends_with("_bucket");
            counter.then_some(())?;
            Some((name.to_string(), v.parse().ok()?))
        })
        .collect()
}

#[test]
fn series_match_proc_and_a_known_workload_and_promtool_accepts_them() {
    if !bpf_gate() || !tool_gate("promtool") {
        return;
    }
    let big = Workload::start(&["alloc", "256"]);
    let e = Exporter::start(
        "0.5",
        &["--collect", "runqlat,writes", "--metrics-top", "5"],
    );
    let first = e.scrape();
    std::thread::sleep(Duration::from_millis(1500));
    let text = e.scrape();

    // promtool's linter: names, units, HELP and TYPE in the classic text format.
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // Memory against /proc/meminfo.
    assert_eq!(
        series(&text, "kernstat_memory_total_bytes", ""),
        Some(meminfo_bytes("MemTotal:") as f64)
    );
    // Other tests allocate beside this one: a scrape whose value is within 2 % of
    // /proc read just after it, in ten tries (a wrong reading fails them all).
    let mut tries = Vec::new();
    for _ in 0..10 {
        let now = e.scrape();
        let avail = series(&now, "kernstat_memory_available_bytes", "").unwrap();
        let want = meminfo_bytes("MemAvailable:") as f64;
        tries.push((avail, want));
        if (avail - want).abs() / want < 0.02 {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let (avail, want) = *tries.last().unwrap();
    assert!(
        (avail - want).abs() / want < 0.02,
        "available vs /proc: {tries:?}"
    );

    // The 256 MiB process is among the top 5 by memory, with its /proc RSS.
    let labels = format!("pid=\"{}\",comm=\"ks-workload\"", big.pid());
    let rss = series(&text, "kernstat_process_resident_memory_bytes", &labels)
        .expect("the 256 MiB workload in the top 5 by memory");
    let proc_rss = proc_rss_bytes(big.pid()) as f64;
    assert!(rss >= 256.0 * 1048576.0, "{rss}");
    assert!(
        (rss - proc_rss).abs() / proc_rss < 0.02,
        "{rss} vs {proc_rss}"
    );
    let per_process = text
        .lines()
        .filter(|l| l.starts_with("kernstat_process_resident_memory_bytes{"))
        .count();
    assert!(per_process <= 5, "--metrics-top 5 bounds the series");

    // Counters never go back between scrapes.
    let before = counters(&first);
    let after = counters(&text);
    assert!(before.len() > 10, "{before:?}");
    for (name, v) in &before {
        if let Some((_, w)) = after.iter().find(|(n, _)| n == name) {
            assert!(w >= v, "{name} went from {v} to {w}");
        }
    }
    // The histograms and kernstat's own cost are there.
    assert!(series(&text, "kernstat_runqueue_latency_seconds_count", "").unwrap() > 0.0);
    assert!(text.contains("kernstat_write_size_bytes_bucket{"));
    assert!(series(&text, "kernstat_self_cpu_seconds_total", "").unwrap() > 0.0);
    assert!(text.contains("kernstat_bpf_program_runs_total{collector=\"runqlat\""));

    // Protobuf when a scraper asks for it.
    let mut r = ureq::get(&e.url())
        .header(
            "Accept",
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited",
        )
        .call()
        .unwrap();
    let ct = r
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(ct.contains("encoding=delimited"), "{ct}");
    let body = r.body_mut().read_to_vec().unwrap();
    assert!(body.len() > 1000);
}

/// A free loopback port (the kernel's choice; released before returning).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Prometheus {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: SocketAddr) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("prometheus.yml");
        std::fs::write(
            &cfg,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
                 scrape_configs:\n  - job_name: kernstat\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        // The port is free when chosen, but another process may take it (as the source
        // port of a connection) before Prometheus binds it: then Prometheus exits, and
        // another port is tried.
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new("prometheus")
                .arg(format!("--config.file={}", cfg.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--enable-feature=native-histograms")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start prometheus");
            let base = format!("http://127.0.0.1:{port}");
            let t = Instant::now();
            loop {
                if ureq::get(&format!("{base}/-/ready")).call().is_ok() {
                    return Prometheus {
                        child,
                        base,
                        _dir: dir,
                    };
                }
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                if t.elapsed() > Duration::from_secs(30) {
                    kernstat_testkit::terminate(&mut child);
                    panic!("prometheus not ready in 30 s");
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        panic!("prometheus exited at start five times (no free port?)");
    }

    /// An instant query at `time` (unix seconds): each result's labels and value.
    fn query(&self, q: &str, time: f64) -> Vec<(Value, f64)> {
        let text = ureq::get(&format!("{}/api/v1/query", self.base))
            .query("query", q)
            .query("time", format!("{time:.3}"))
            .call()
            .unwrap_or_else(|e| panic!("{q}: {e}"))
            .body_mut()
            .read_to_string()
            .unwrap();
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["status"], "success", "{q}: {body}");
        body["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let v = r["value"][1].as_str().unwrap().parse().unwrap_or(f64::NAN);
                (r["metric"].clone(), v)
            })
            .collect()
    }

    fn one(&self, q: &str, time: f64) -> f64 {
        let r = self.query(q, time);
        assert_eq!(r.len(), 1, "{q}: {r:?}");
        r[0].1
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        kernstat_testkit::terminate(&mut self.child);
    }
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn prometheus_scrapes_kernstat() {
    if !bpf_gate() || !tool_gate("prometheus") || !tool_gate("stress-ng") {
        return;
    }
    let big = Workload::start(&["alloc", "256"]);
    let e = Exporter::start("0.5", &["--collect", "runqlat"]);
    let prom = Prometheus::start(e.addr);
    let mut load = Command::new("stress-ng")
        .args([
            "--cpu",
            "1",
            "--switch",
            "1",
            "--timeout",
            "120s",
            "--quiet",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Two scrapes in, and the load running for a while.
    let t = Instant::now();
    while prom.query("up{job=\"kernstat\"} == 1", now_s()).is_empty()
        || prom.one("count_over_time(up{job=\"kernstat\"}[1m])", now_s()) < 2.0
    {
        assert!(t.elapsed() < Duration::from_secs(30), "no two scrapes");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));

    // One 10-second window: /proc/stat beside the daemon.
    let window = 10.0;
    let (busy0, t0) = (proc_stat_busy_ns(), now_s());
    std::thread::sleep(Duration::from_secs_f64(window));
    let (busy1, t1) = (proc_stat_busy_ns(), now_s());
    // Scrapes trail the kernel by up to a sample interval (0.5 s) plus a scrape
    // interval (1 s): query the window that ends that much later.
    std::thread::sleep(Duration::from_secs(2));
    let at = t1 + 1.5;
    let ncpus = kernstat_testkit::ncpus() as f64;
    let proc_busy = (busy1 - busy0) as f64 / ((t1 - t0) * 1e9 * ncpus) * 100.0;
    let prom_busy = prom.one(
        "rate(kernstat_system_cpu_busy_seconds_total[10s]) / kernstat_cpus_online * 100",
        at,
    );
    assert!(
        proc_busy > 40.0,
        "stress-ng keeps a CPU busy: /proc/stat says {proc_busy:.1} %"
    );
    // Against /proc/stat read at the same instants: the per-CPU series are /proc/stat
    // sampled with each of the daemon's samples (checked against /proc/stat itself by
    // counters_and_own_cost_lie_between_readings_of_their_sources), so this window
    // matches the BPF series' window exactly, however busy or bursty the machine is.
    let stat_busy = prom.one(
        "sum(rate(kernstat_cpu_busy_seconds_total[10s])) / sum(kernstat_cpus_online) * 100",
        at,
    );
    assert!(
        (prom_busy - stat_busy).abs() <= 5.0,
        "CPU busy: Prometheus {prom_busy:.1} %, /proc/stat over the same samples \
         {stat_busy:.1} % (and over this test's own window {proc_busy:.1} %)"
    );

    assert_eq!(prom.one("up{job=\"kernstat\"}", at), 1.0);
    assert_eq!(
        prom.one("kernstat_memory_total_bytes", at),
        meminfo_bytes("MemTotal:") as f64
    );
    let rss = prom.one(
        &format!(
            "kernstat_process_resident_memory_bytes{{pid=\"{}\"}}",
            big.pid()
        ),
        at,
    );
    let proc_rss = proc_rss_bytes(big.pid()) as f64;
    assert!(
        (rss - proc_rss).abs() / proc_rss < 0.02,
        "{rss} vs {proc_rss}"
    );

    // The run-queue histogram, ingested as a native histogram: the same events that
    // the endpoint served. Its counters only grow, so a scrape Prometheus took between
    // two reads of the endpoint holds a count and a sum between those reads' (the same
    // histogram at the same scrape, not two quantiles of two windows).
    let (count_a, sum_a, read_a) = runqueue_totals(&e);
    let scraped_at = loop {
        std::thread::sleep(Duration::from_millis(300));
        let ts = prom.one("timestamp(up{job=\"kernstat\"})", now_s());
        if ts > read_a + 0.05 {
            break ts;
        }
        assert!(now_s() - read_a < 30.0, "no scrape after {read_a}");
    };
    let (count_b, sum_b, _) = runqueue_totals(&e);
    let count = prom.one(
        "histogram_count(kernstat_runqueue_latency_seconds)",
        scraped_at,
    );
    let sum = prom.one(
        "histogram_sum(kernstat_runqueue_latency_seconds)",
        scraped_at,
    );
    assert!(count_a > 1000.0, "the load switches: {count_a} events");
    assert!(
        count_a <= count && count <= count_b,
        "events: Prometheus {count} at its scrape, the endpoint {count_a} before it and {count_b} after"
    );
    // The sum is a float Prometheus stores as parsed: allow its rounding.
    let eps = sum_b * 1e-9;
    assert!(
        sum_a - eps <= sum && sum <= sum_b + eps,
        "waited: Prometheus {sum} s at its scrape, the endpoint {sum_a} s before it and {sum_b} s after"
    );
    kernstat_testkit::terminate(&mut load);
}

/// The run-queue histogram's event count and summed wait as the endpoint serves them now,
/// and when the answer had arrived (Unix seconds).
fn runqueue_totals(e: &Exporter) -> (f64, f64, f64) {
    let text = e.scrape();
    let t = now_s();
    let count = series(&text, "kernstat_runqueue_latency_seconds_count", "")
        .unwrap_or_else(|| panic!("no run-queue count in {text:.300}"));
    let sum = series(&text, "kernstat_runqueue_latency_seconds_sum", "").unwrap();
    (count, sum, t)
}

/// Sends raw bytes and returns whatever the server answers before closing or `wait`.
fn raw(addr: SocketAddr, bytes: &[u8], wait: Duration) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn hostile_http_clients_cannot_stall_the_sampler_or_the_socket() {
    if !bpf_gate() {
        return;
    }
    let e = Exporter::start("0.5", &[]);
    let sock = e.sock.to_str().unwrap().to_string();
    // Other methods and paths.
    let post = raw(
        e.addr,
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        Duration::from_secs(2),
    );
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
    let other = raw(
        e.addr,
        b"GET /etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
        Duration::from_secs(2),
    );
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");
    // A header far larger than the buffer: refused, not buffered.
    let mut huge = b"GET /metrics HTTP/1.1\r\nX-Big: ".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 1 << 20));
    huge.extend_from_slice(b"\r\n\r\n");
    let answer = raw(e.addr, &huge, Duration::from_secs(5));
    assert!(
        answer.is_empty()
            || answer.starts_with("HTTP/1.1 431")
            || answer.starts_with("HTTP/1.1 400"),
        "{answer:.200}"
    );

    // 1,000 connections that never finish their headers (slowloris), held open.
    let mut idle: Vec<TcpStream> = Vec::new();
    for _ in 0..1000 {
        if let Ok(mut s) = TcpStream::connect(e.addr) {
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: slow");
            idle.push(s);
        }
    }
    // Meanwhile the socket clients are served, and samples keep coming.
    let t = Instant::now();
    for _ in 0..20 {
        let (code, out, err) = run(&["get", "--socket", &sock, "uptime.seconds"]);
        assert_eq!(code, Some(0), "{err}");
        assert!(!out.trim().is_empty());
    }
    let (code, out, _) = run(&["get", "--socket", &sock, "--json", "cpu.percent"]);
    assert_eq!(code, Some(0));
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(
        v["age_ms"].as_u64().unwrap() < 5000,
        "the sampler kept publishing: {v}"
    );
    assert!(t.elapsed() < Duration::from_secs(30));
    // The slow clients are cut off at the header timeout (5 s), and a real scrape
    // then gets through.
    std::thread::sleep(Duration::from_secs(6));
    let mut closed = 0;
    for s in &mut idle {
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut b = [0u8; 512];
        // Closed: end of stream, an answer (408), or a reset (over the connection cap,
        // closed with the request unread).
        let still_open = matches!(
            s.read(&mut b),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
        );
        if !still_open {
            closed += 1;
        }
    }
    assert!(
        closed > 900,
        "only {closed} of {} slow clients were closed",
        idle.len()
    );
    drop(idle);
    assert!(e.scrape().contains("kernstat_memory_total_bytes"));
}

#[test]
fn bad_metrics_flags_exit_2_and_start_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("run/sock");
    let s = sock.to_str().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, _, err) = run(&["daemon", "--no-bpf", "--socket", s, "--metrics", &addr]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--metrics") && err.contains("in use"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one message: {err}");
    assert!(!Path::new(s).exists(), "nothing else started");
    let (code, _, err) = run(&[
        "daemon",
        "--no-bpf",
        "--socket",
        s,
        "--metrics",
        "localhost",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("invalid socket address"), "{err}");
    let (code, _, err) = run(&[
        "daemon",
        "--no-bpf",
        "--socket",
        s,
        "--metrics",
        "127.0.0.1:0",
        "--collect",
        "tcp",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--collect"), "{err}");
    assert!(!Path::new(s).exists(), "nothing else started");
}

#[test]
fn a_system_daemon_serves_metrics_after_dropping_to_nobody() {
    if !bpf_gate() {
        return;
    }
    // --system: BPF loaded and both sockets bound as root, then user nobody without
    // capabilities under the seccomp allow-list, which the HTTP server must live with.
    let e = Exporter::start("0.5", &["--system", "--collect", "runqlat,writes"]);
    let status = std::fs::read_to_string(format!("/proc/{}/status", e.child.id())).unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(uid.contains("65534"), "{uid}");
    let cap_eff = status.lines().find(|l| l.starts_with("CapEff:")).unwrap();
    assert!(cap_eff.ends_with("0000000000000000"), "{cap_eff}");
    std::thread::sleep(Duration::from_millis(1200));
    let text = e.scrape();
    assert!(series(&text, "kernstat_runqueue_latency_seconds_count", "").unwrap() > 0.0);
    assert!(
        text.contains("kernstat_write_size_bytes_count{"),
        "writes readable as nobody"
    );
    assert!(series(&text, "kernstat_memory_total_bytes", "").is_some());
}

/// /proc/stat's busy time of each CPU (user+nice+system+irq+softirq+steal), seconds.
fn proc_stat_cores_busy_s() -> Vec<f64> {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| {
            let v: Vec<f64> = l
                .split_whitespace()
                .skip(1)
                .map(|x| x.parse().unwrap())
                .collect();
            (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / hz
        })
        .collect()
}

/// /proc/pressure/cpu's "some" total, seconds.
fn psi_cpu_some_s() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let line = s.lines().find(|l| l.starts_with("some"))?;
    let total: f64 = line.split("total=").nth(1)?.trim().parse().ok()?;
    Some(total / 1e6)
}

fn run_time_s(pid: u32) -> f64 {
    kernstat_testkit::process_schedstat(pid).0 as f64 / 1e9
}

/// Scrapes until `fresh` holds for a scrape (a sample taken after the caller's first
/// reading), then returns that scrape.
fn scrape_until(e: &Exporter, fresh: impl Fn(&str) -> bool) -> String {
    let t = Instant::now();
    loop {
        let text = e.scrape();
        if fresh(&text) {
            return text;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no fresh sample: {text:.2000}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn counters_and_own_cost_lie_between_readings_of_their_sources() {
    if !bpf_gate() {
        return;
    }
    let mut spin = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let e = Exporter::start("0.5", &[]);
    let (daemon, spinner) = (e.child.id(), spin.id());
    std::thread::sleep(Duration::from_millis(300));
    // First readings of each source; then a scrape whose sample is later than them
    // (each of these only grows, and the daemon's own CPU and the spinner's grow at
    // every sample); then second readings. Every series lies between the two.
    let cores0 = proc_stat_cores_busy_s();
    let psi0 = psi_cpu_some_s();
    let (own0, spin0) = (run_time_s(daemon), run_time_s(spinner));
    let spin_labels = format!("pid=\"{spinner}\",comm=\"sh\"");
    let text = scrape_until(&e, |t| {
        series(t, "kernstat_self_cpu_seconds_total", "").is_some_and(|v| v > own0)
            && series(t, "kernstat_process_cpu_seconds_total", &spin_labels)
                .is_some_and(|v| v > spin0)
    });
    let cores1 = proc_stat_cores_busy_s();
    let psi1 = psi_cpu_some_s();
    let (own1, spin1) = (run_time_s(daemon), run_time_s(spinner));
    let tick = 0.011; // one clock tick of /proc/stat, and rounding
    for (cpu, (a, b)) in cores0.iter().zip(&cores1).enumerate() {
        let v = series(
            &text,
            "kernstat_cpu_busy_seconds_total",
            &format!("cpu=\"{cpu}\""),
        )
        .unwrap_or_else(|| panic!("cpu {cpu} series"));
        assert!(
            *a - tick <= v && v <= *b + tick,
            "cpu {cpu}: {v} outside /proc/stat's {a}..{b}"
        );
    }
    if let (Some(a), Some(b)) = (psi0, psi1) {
        let v = series(
            &text,
            "kernstat_pressure_stalled_seconds_total",
            "resource=\"cpu\",kind=\"some\"",
        )
        .unwrap();
        // The sample may predate the first reading by up to an interval here (PSI
        // grows only while tasks wait): bounded above, and not behind by more.
        assert!(
            v <= b + 1e-6 && v >= a - 0.5,
            "psi cpu some {v} vs {a}..{b}"
        );
    }
    let own = series(&text, "kernstat_self_cpu_seconds_total", "").unwrap();
    assert!(
        own > own0 && own <= own1 + 1e-6,
        "own CPU {own} vs schedstat {own0}..{own1}"
    );
    let spun = series(&text, "kernstat_process_cpu_seconds_total", &spin_labels).unwrap();
    assert!(
        spun > spin0 && spun <= spin1 + 1e-6,
        "spinner {spun} vs {spin0}..{spin1}"
    );
    let rss = series(&text, "kernstat_self_resident_memory_bytes", "").unwrap();
    let proc_rss = proc_rss_bytes(daemon) as f64;
    assert!(
        (rss - proc_rss).abs() / proc_rss < 0.1,
        "own RSS {rss} vs {proc_rss}"
    );
    kernstat_testkit::terminate(&mut spin);
}

#[test]
fn the_write_histogram_counts_a_known_writer() {
    if !bpf_gate() {
        return;
    }
    let e = Exporter::start("0.5", &["--collect", "writes"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("w");
    let mut w = kernstat_testkit::Gated::start(&[
        "writes",
        "unbuffered",
        "1000",
        "25",
        file.to_str().unwrap(),
    ]);
    let file_writes = "syscall=\"write\",kind=\"file\"";
    let get = |t: &str, suffix: &str, extra: &str| {
        series(
            t,
            &format!("kernstat_write_size_bytes{suffix}"),
            &format!("{extra}{file_writes}"),
        )
        .unwrap_or(0.0)
    };
    let runs = |t: &str| -> f64 {
        t.lines()
            .filter(|l| l.starts_with("kernstat_bpf_program_runs_total{collector=\"writes\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let before = e.scrape();
    w.go(); // 1,000 writes of 25 bytes to a file
    let after = scrape_until(&e, |t| {
        get(t, "_count", "") - get(&before, "_count", "") >= 1000.0
    });
    // 25 bytes is in the 16-31 bucket: le="31.0" minus le="15.0" grew by (at least,
    // if something else wrote such sizes meanwhile) 1,000, and so did the sum by 25,000.
    let in_bucket = |t: &str| get(t, "_bucket", "le=\"31.0\",") - get(t, "_bucket", "le=\"15.0\",");
    assert!(
        in_bucket(&after) - in_bucket(&before) >= 1000.0,
        "{:.3000}",
        after
    );
    assert!(get(&after, "_sum", "") - get(&before, "_sum", "") >= 25_000.0);
    if series(&after, "kernstat_bpf_stats_enabled", "") == Some(1.0) {
        assert!(runs(&after) - runs(&before) >= 1000.0, "program runs");
    }
}
