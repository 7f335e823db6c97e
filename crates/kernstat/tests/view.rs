//! `kernstat view` in a real browser (Debian's headless Chromium, which runs the page's
//! script and prints the DOM it built): a daemon records a known workload (three busy
//! loops on two CPUs for 6 s, killed at a known time), then the page over that archive
//! must show the CPU peak inside the burst, a busy loop first in the process table of a
//! moment inside it, a loop among the processes that ended in the interval holding the
//! kill, run-queue latencies in the heatmap, and `why` ranking cpu first for the burst
//! with a loop named. The page reports what it drew in a hidden element (its `state`);
//! screenshots go to the test's output directory. Access: no token or a wrong one is
//! 403; a non-loopback address without --token-file is refused; 1,000 requests at once
//! are each answered or closed, and the server answers after them. Two archives of
//! known CPU are compared side by side (`--compare`). Needs root (BPF).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kernstat_testkit::{bpf_gate, tool_gate, workload_bin};
use serde_json::Value;

/// The view server; killed on drop.
struct View {
    child: Child,
    url: String,
}

impl View {
    fn start(archive: &std::path::Path) -> View {
        View::start_with(archive, &[])
    }

    fn start_with(archive: &std::path::Path, extra: &[&str]) -> View {
        let mut child = common::command()
            .args(["view", "--listen", "127.0.0.1:0", "--archive"])
            .arg(archive)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("http://127.0.0.1:"), "{line:?}");
        View {
            child,
            url: line.trim().to_string(),
        }
    }

    fn base(&self) -> &str {
        self.url.split("/?").next().unwrap()
    }

    fn token(&self) -> &str {
        let t = self.url.split("token=").nth(1).unwrap();
        t.split('&').next().unwrap()
    }
}

impl Drop for View {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.1 GET: (status, body).
fn get(base: &str, path: &str) -> (u16, String) {
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

/// The page at `query` in headless Chromium: the state it published, and a screenshot
/// named `shot` in the test's output directory.
fn page(view: &View, query: &str, shot: &str) -> Value {
    let url = format!("{}&{query}", view.url);
    let run = |extra: &[&str]| {
        Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--window-size=1300,2000",
                "--virtual-time-budget=30000",
            ])
            .args(extra)
            .arg(&url)
            .stderr(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    let state = dom
        .split("<pre id=\"state\" hidden=\"\">")
        .nth(1)
        .and_then(|s| s.split("</pre>").next())
        .unwrap_or_else(|| panic!("no state in the page: {dom}"));
    let state = state
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let shot = dir.join(shot);
    run(&[&format!("--screenshot={}", shot.display())]);
    serde_json::from_str(&state).unwrap_or_else(|e| panic!("{e}: {state}"))
}

#[test]
fn the_page_shows_a_recorded_burst_where_and_who_it_was() {
    if !bpf_gate() || !tool_gate("chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let daemon = common::DaemonProc::start(&[
        "--record",
        archive.to_str().unwrap(),
        "--record-interval",
        "1",
        "--metrics",
        "127.0.0.1:0",
        "--collect",
        "runqlat",
    ]);
    std::thread::sleep(Duration::from_secs(4));
    let burst_start = kernstat_testkit::unix_now_s();
    let mut loops: Vec<Child> = (0..3)
        .map(|_| {
            Command::new(workload_bin())
                .arg("spin")
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let pids: Vec<u32> = loops.iter().map(Child::id).collect();
    std::thread::sleep(Duration::from_secs(6));
    for l in &mut loops {
        let _ = l.kill();
        let _ = l.wait();
    }
    let burst_end = kernstat_testkit::unix_now_s();
    std::thread::sleep(Duration::from_secs(4));
    drop(daemon);

    let view = View::start(&archive);
    let mid = (burst_start + burst_end) / 2.0;
    let (from, to) = (burst_start - 4.0, burst_end + 3.0);

    // The burst and who it was.
    let s = page(
        &view,
        &format!("from={from:.3}&to={to:.3}&t={mid:.3}"),
        "view-burst.png",
    );
    assert!(s.get("error").is_none(), "{s:#}");
    let series = &s["series"];
    let peak_t = series["cpu_peak_time"].as_f64().unwrap();
    assert!(
        peak_t >= burst_start - 1.0 && peak_t <= burst_end + 1.0,
        "the CPU peak at {peak_t} is outside the burst {burst_start}..{burst_end}: {s:#}"
    );
    assert!(series["cpu_peak"].as_f64().unwrap() > 50.0, "{s:#}");
    let top = &s["moment"]["top_cpu"];
    assert!(
        pids.contains(&(top["pid"].as_u64().unwrap() as u32)),
        "the busiest process at {mid} is not a loop ({pids:?}): {s:#}"
    );
    assert!(s["heatmap"]["total"].as_u64().unwrap() > 0, "{s:#}");
    let why = &s["why"][0];
    assert_eq!(why["resource"], "cpu", "{s:#}");
    assert_eq!(why["notable"], true, "{s:#}");
    assert!(
        why["culprits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| pids.contains(&(p.as_u64().unwrap_or(0) as u32))),
        "{s:#}"
    );

    // The interval holding the kill lists the loops as ended.
    let s = page(
        &view,
        &format!("from={from:.3}&to={to:.3}&t={burst_end:.3}&why=0"),
        "view-ended.png",
    );
    let ended: Vec<u64> = s["moment"]["ended"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pid"].as_u64().unwrap())
        .collect();
    assert!(
        pids.iter().any(|p| ended.contains(&u64::from(*p))),
        "no loop among the ended {ended:?} ({pids:?}): {s:#}"
    );

    // Access.
    let base = view.base().to_string();
    assert_eq!(get(&base, "/").0, 403);
    assert_eq!(
        get(&base, "/?token=0123456789abcdef0123456789abcdef").0,
        403
    );
    assert_eq!(get(&base, "/api/span").0, 403);
    let (code, body) = get(&base, &format!("/api/span?token={}", view.token()));
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        get(
            &base,
            &format!("/api/series?token={}&from=x&to=1", view.token())
        )
        .0,
        400
    );
    assert_eq!(
        get(&base, &format!("/api/nope?token={}", view.token())).0,
        404
    );
    let refused = common::command()
        .args(["view", "--listen", "0.0.0.0:0", "--archive"])
        .arg(&archive)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));

    // 1,000 requests at once: each answered (200, or 503 when the queue is full) or its
    // connection closed, none left hanging, and the server answers afterwards.
    let t = Instant::now();
    let token = view.token().to_string();
    let threads: Vec<_> = (0..1000)
        .map(|i| {
            let base = base.clone();
            let token = token.clone();
            std::thread::spawn(move || {
                let path = if i % 2 == 0 {
                    format!("/api/span?token={token}")
                } else {
                    format!("/api/series?token={token}&from=0&to=99999999999&points=100")
                };
                get(&base, &path).0
            })
        })
        .collect();
    let codes: Vec<u16> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(
        codes.iter().all(|c| [0, 200, 503].contains(c)),
        "{:?}",
        codes
            .iter()
            .filter(|c| ![0, 200, 503].contains(*c))
            .collect::<Vec<_>>()
    );
    assert!(codes.iter().filter(|c| **c == 200).count() > 0);
    eprintln!(
        "1,000 requests in {:?}: {} answered, {} busy, {} closed",
        t.elapsed(),
        codes.iter().filter(|c| **c == 200).count(),
        codes.iter().filter(|c| **c == 503).count(),
        codes.iter().filter(|c| **c == 0).count()
    );
    assert_eq!(get(&base, &format!("/api/span?token={token}")).0, 200);
}

/// `--live`: the page follows an archive a recorder is writing — its range moves to
/// each new frame (asked with `/api/span?after=T`, which the server holds until one is
/// there), and its timelines are read again.
#[test]
fn a_live_page_follows_the_recorder() {
    if !tool_gate("chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let _daemon = common::DaemonProc::start(&[
        "--no-bpf",
        "--record",
        archive.to_str().unwrap(),
        "--record-interval",
        "1",
    ]);
    // A few frames first (an hour file appears with the first).
    let t = std::time::Instant::now();
    while !std::fs::read_dir(&archive).is_ok_and(|d| {
        d.flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".ksr"))
    }) {
        assert!(t.elapsed() < Duration::from_secs(20), "no archive");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    let view = View::start_with(&archive, &["--live"]);
    assert!(view.url.ends_with("&follow=1"), "{}", view.url);
    let token = view.token().to_string();
    let span = |q: &str| -> f64 {
        let (code, body) = get(view.base(), &format!("/api/span?token={token}{q}"));
        assert_eq!(code, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()["last_unix_ns"]
            .as_f64()
            .unwrap()
            / 1e9
    };
    // Held until a newer frame: the answer is newer than what was asked about.
    let now = span("");
    assert!(span(&format!("&after={now:.9}")) > now);
    // The page: two moves, each to a newer frame than the archive had when it opened.
    let opened = span("");
    let s = page(&view, "follow_max=2", "view-live.png");
    assert!(s.get("error").is_none(), "{s:#}");
    assert_eq!(s["follow"]["moved"], 2, "{s:#}");
    let to = s["follow"]["to"].as_f64().unwrap();
    assert!(
        to > opened,
        "the range ends at {to}, the archive did at {opened}: {s:#}"
    );
}

/// Run-queue latencies the steady archives record: this many a second, each 1,000 µs.
const WAITS_PER_S: u64 = 10;

/// An archive written with the recorder's own writer whose machine is `busy` % busy on
/// two CPUs in every interval and records [`WAITS_PER_S`] run-queue waits of 1 ms a
/// second: `frames` frames a second apart from `start` (s).
fn steady_archive(dir: &std::path::Path, start: f64, frames: u64, busy: u64) {
    use kernstat_record::frame::{Frame, Hists, Machine, Memory};
    let slot = kernstat_model::hist::slot_of(1000);
    let mut w = kernstat_record::Writer::open(
        dir,
        kernstat_record::Retention {
            max_age: Duration::from_secs(30 * 86_400),
            max_bytes: 1 << 30,
        },
        0o600,
    )
    .unwrap();
    for i in 0..frames {
        let f = Frame {
            time_unix_ns: (start * 1e9) as u64 + i * 1_000_000_000,
            boot_ns: 1_000_000_000_000 + i * 1_000_000_000,
            machine: Machine {
                mono_ns: 1_000_000_000_000 + i * 1_000_000_000,
                ncpus: 2,
                busy_ns: i * 2 * busy * 10_000_000,
                mem: Memory {
                    total: 1 << 30,
                    available: 1 << 29,
                    ..Memory::default()
                },
                ..Machine::default()
            },
            hists: Hists {
                runqlat_us: Some({
                    let mut h = vec![0; slot + 1];
                    h[slot] = i * WAITS_PER_S;
                    h
                }),
                ..Hists::default()
            },
            ..Frame::default()
        };
        w.append(&f).unwrap();
    }
}

/// `--compare DIR`: a second archive beside the first. Two archives of known CPU (20 %
/// and 70 % busy, an hour apart) compared range against range: the API's means are
/// those, the page opened on archive b with both ranges in its URL draws b's timeline
/// and the same comparison, and a name other than a or b is refused.
#[test]
fn two_archives_are_compared_side_by_side() {
    if !tool_gate("chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let now = kernstat_testkit::unix_now_s().floor();
    steady_archive(&a, now - 7200.0, 30, 20);
    steady_archive(&b, now - 3600.0, 30, 70);
    let view = View::start_with(&a, &["--compare", b.to_str().unwrap()]);
    let (base, token) = (view.base().to_string(), view.token().to_string());
    let json = |path: &str| -> Value {
        let (code, body) = get(&base, &format!("{path}&token={token}"));
        assert_eq!(code, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    };
    let span_b = json("/api/span?archive=b");
    assert_eq!(span_b["archive"], b.to_str().unwrap());
    assert_eq!(span_b["archives"].as_array().unwrap().len(), 2);
    let first_b = span_b["first_unix_ns"].as_f64().unwrap() / 1e9;
    assert!((first_b - (now - 3600.0)).abs() < 0.01, "{span_b}");
    let (wa, wb) = (
        format!("{:.3},{:.3}", now - 7200.0, now - 7200.0 + 29.0),
        format!("{:.3},{:.3}", now - 3600.0, now - 3600.0 + 29.0),
    );
    let (pa, pb): (Vec<&str>, Vec<&str>) = (wa.split(',').collect(), wb.split(',').collect());
    let c = json(&format!(
        "/api/compare?a_from={}&a_to={}&a_archive=a&b_from={}&b_to={}&b_archive=b",
        pa[0], pa[1], pb[0], pb[1]
    ));
    let cpu = c["means"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "cpu")
        .unwrap();
    let close = |v: &Value, want: f64| (v.as_f64().unwrap() - want).abs() < 0.01;
    assert!(close(&cpu["a"], 20.0) && close(&cpu["b"], 70.0), "{c:#}");
    assert!(close(&cpu["difference"], 50.0), "{c:#}");
    assert_eq!(
        get(&base, &format!("/api/span?archive=c&token={token}")).0,
        400
    );
    // The heatmap of b's whole span: every recorded wait, in the row of 512-1023 µs.
    let h = json(&format!(
        "/api/heatmap?archive=b&hist=runqlat&from={}&to={}&points=50",
        pb[0], pb[1]
    ));
    assert_eq!(h["total"], 29 * WAITS_PER_S, "{h:#}");
    let row = h["slots_us"]
        .as_array()
        .unwrap()
        .iter()
        .position(|v| v == 512)
        .unwrap();
    let in_row: u64 = h["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[row].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(in_row, 29 * WAITS_PER_S, "{h:#}");
    // An archive the user cannot read is refused in one sentence (the server reads as
    // the user running it).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 && tool_gate("setpriv") {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o700)).unwrap();
        let out = common::as_nobody()
            .args(["view", "--listen", "127.0.0.1:0", "--archive"])
            .arg(&a)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("Permission denied"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // Without --compare there is no b.
    let single = View::start(&a);
    assert_eq!(
        get(
            single.base(),
            &format!("/api/span?archive=b&token={}", single.token())
        )
        .0,
        404
    );

    let s = page(
        &view,
        &format!("archive=b&why=0&cmp_a={wa},a&cmp_b={wb},b"),
        "view-compare.png",
    );
    assert!(s.get("error").is_none(), "{s:#}");
    assert_eq!(s["archive"], "b", "{s:#}");
    let peak = s["series"]["cpu_peak"].as_f64().unwrap();
    assert!((peak - 70.0).abs() < 0.01, "archive b's CPU is 70 %: {s:#}");
    let cpu = s["compare"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "cpu")
        .unwrap();
    assert!(close(&cpu["a"], 20.0) && close(&cpu["b"], 70.0), "{s:#}");
}

/// The Grafana dashboard in dist/ asks only for series the live endpoint serves: every
/// metric name in its queries is a family of a daemon's /metrics (with the histograms
/// collected, after its first `why` window).
#[test]
fn the_grafana_dashboard_asks_for_series_that_exist() {
    if !bpf_gate() {
        return;
    }
    let dash: Value =
        serde_json::from_str(include_str!("../../../dist/grafana/kernstat.json")).unwrap();
    let mut names = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(i) = rest.find("kernstat_") {
                let name: String = rest[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                rest = &rest[i + name.len()..];
                names.push(name);
            }
        }
    }
    assert!(names.len() >= 10, "{names:?}");
    let d = common::MetricsDaemon::start("1", &["--collect", "runqlat,biolat"]);
    let t = Instant::now();
    loop {
        let text = d.scrape();
        let missing: Vec<&String> = names
            .iter()
            .filter(|n| {
                !text
                    .lines()
                    .any(|l| l.starts_with(&format!("{n}{{")) || l.starts_with(&format!("{n} ")))
            })
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "not served: {missing:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
