//! Archives from someone else (shared/security findings N2, N6, N7): what a hostile file
//! in an archive directory, a forged frame or a user churning long command lines can do
//! to the readers and the recorder.
//!
//! - N6: a link to /dev/zero, a FIFO, a 4 GiB sparse file and zstd bombs named as hour
//!   files end with one sentence each, in bounded time and at most 64 MiB of memory
//!   (wait4's maxrss), the good files beside them read;
//! - N7: a forged frame's names and command lines with terminal escapes and formula
//!   prefixes reach no output of `ps --at`, `cgroups --at`, `snapshot --at` or `dump` raw;
//! - N2: another user spawning 50 processes a second with 4 KB command lines neither
//!   deletes the older hours nor takes the archive past `--max-size`.
//!
//! The streaming dump (N10) is tested in record.rs (`dump_streams_in_memory_...`).

mod common;

use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::run;
use kernstat_record::codec::{self, FrameHead, FRAME_HEADER, MAGIC};
use kernstat_record::frame::{Frame, Group, Proc};
use kernstat_record::{Retention, Writer};
use kernstat_testkit::workload_bin;

#[path = "common/users.rs"]
mod users;

const HOUR: u64 = 3_600_000_000_000;

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// A few good frames from each of `starts`, 5 s apart, written by the recorder's own
/// writer, opened once: its lock stays taken for a moment after it is dropped when
/// another test's thread forks (the child holds a copy of the descriptor until it
/// execs), so a second writer opened at once could be refused.
fn write_good(dir: &Path, starts: &[u64], frames: usize, procs: Vec<Proc>, groups: Vec<Group>) {
    let retention = Retention {
        max_age: Duration::from_secs(7 * 86400),
        max_bytes: 1 << 30,
    };
    let mut w = Writer::open(dir, retention, 0o600).unwrap();
    for (t0, i) in starts
        .iter()
        .flat_map(|&t0| (0..frames).map(move |i| (t0, i)))
    {
        let mut procs = procs.clone();
        for p in procs.iter_mut() {
            p.cpu_ns += i as u64 * 1_000_000_000;
        }
        let f = Frame {
            time_unix_ns: t0 + i as u64 * 5_000_000_000,
            // One boot: the clock since boot moves with the wall clock.
            boot_ns: 1_000_000_000_000 + (t0 - starts[0]) + i as u64 * 5_000_000_000,
            procs,
            groups: groups.clone(),
            groups_layout: "v2".into(),
            exits_hook: true,
            ..Frame::default()
        };
        w.append(&f).unwrap();
    }
}

fn plain_procs() -> Vec<Proc> {
    (1..=3)
        .map(|pid| Proc {
            pid,
            uid: 0,
            start_ns: 100,
            state: b'S',
            threads: 1,
            comm: format!("proc{pid}"),
            cmd: format!("/bin/proc{pid} --flag"),
            ..Proc::default()
        })
        .collect()
}

/// A file with the archive's header, of the version written now.
fn header() -> Vec<u8> {
    let mut h = MAGIC.to_vec();
    h.extend_from_slice(&kernstat_record::VERSION.to_le_bytes());
    h
}

/// One frame whose payload is `payload`, declaring `raw_len` decompressed bytes.
fn frame_bytes(time: u64, payload: &[u8], raw_len: u32) -> Vec<u8> {
    let mut head = FrameHead {
        offset: 8,
        len: payload.len() as u32,
        crc: 0,
        key: true,
        raw_len,
        time,
    };
    let h = head.encode();
    head.crc = codec::crc(&h, payload);
    let mut out = head.encode().to_vec();
    assert_eq!(out.len(), FRAME_HEADER);
    out.extend_from_slice(payload);
    out
}

/// `kernstat ARGS` run through ks-workload rusage, killed after 30 s: (exit status of
/// kernstat, its peak RSS in bytes, its stderr, wall time).
fn measured(args: &[&str]) -> (Option<i32>, u64, String, Duration) {
    let t = Instant::now();
    let mut child = Command::new(workload_bin())
        .arg("rusage")
        .arg(common::kernstat())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if t.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = Command::new("pkill")
                .args(["-KILL", "-P", &child.id().to_string()])
                .status();
            panic!("kernstat {args:?} still running after 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("rusage "))
        .unwrap_or_else(|| panic!("{stdout}"))
        .to_string();
    let f: Vec<&str> = line.split(' ').collect();
    // ks-workload exits with its child's status.
    (
        out.status.code(),
        f[3].parse().unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        t.elapsed(),
    )
}

#[test]
fn hostile_files_in_an_archive_end_in_one_sentence_in_bounded_memory() {
    let t0 = now_ns() - 3 * HOUR;
    let hour_name = |h: u64| kernstat_record::file_name(t0 + h * HOUR);
    type Make = fn(&Path, u64);
    let cases: [(&str, Make); 5] = [
        ("a link to /dev/zero", |p, _| {
            std::os::unix::fs::symlink("/dev/zero", p).unwrap()
        }),
        ("a FIFO", |p, _| users::mkfifo(p)),
        ("a 4 GiB sparse file", |p, _| {
            let mut f = std::fs::File::create(p).unwrap();
            f.write_all(&header()).unwrap();
            f.set_len(4 << 30).unwrap();
        }),
        ("a zstd bomb declaring a small sample", |p, t| {
            // 256 MiB of zeros compress to a few KiB; the header says 1,000 bytes.
            let bomb = codec::compress(&vec![0u8; 256 << 20], None).unwrap();
            let mut b = header();
            b.extend(frame_bytes(t, &bomb, 1000));
            std::fs::write(p, b).unwrap();
        }),
        ("a zstd bomb declaring the largest sample", |p, t| {
            let bomb = codec::compress(&vec![0u8; 256 << 20], None).unwrap();
            let mut b = header();
            b.extend(frame_bytes(t, &bomb, codec::MAX_FRAME));
            std::fs::write(p, b).unwrap();
        }),
    ];
    for (i, (what, make)) in cases.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("archive");
        std::fs::create_dir(&archive).unwrap();
        // Good hours before and after the hostile one.
        write_good(&archive, &[t0, t0 + 2 * HOUR], 3, plain_procs(), Vec::new());
        let bad = archive.join(hour_name(1));
        make(&bad, t0 + HOUR + 1);
        let a = archive.to_str().unwrap();
        let (code, rss, err, took) = measured(&["dump", "--archive", a, "-o", "/dev/null"]);
        assert_eq!(
            code,
            Some(0),
            "{what} ({i}): the good hours are dumped: {err}"
        );
        assert!(rss <= 64 << 20, "{what}: peak RSS {rss} bytes");
        assert!(took < Duration::from_secs(10), "{what}: {took:?}");
        let lines: Vec<&str> = err.lines().collect();
        assert!(
            lines.len() == 1 && lines[0].contains(&hour_name(1)),
            "{what}: one sentence naming the file: {err}"
        );
        let (_, out, _) = run(&["dump", "--archive", a, "--format", "csv"]);
        assert_eq!(out.lines().count(), 1 + 6 * 3, "{what}: every good row");
        // --at inside the hostile hour: refused (no sample near it), in bounded memory.
        let at = format!("@{}", (t0 + HOUR + 1_800_000_000_000) / 1_000_000_000);
        let (code, rss, err, _) = measured(&["ps", "--at", &at, "--archive", a]);
        assert_eq!(code, Some(1), "{what}: {err}");
        assert!(rss <= 64 << 20, "{what}: ps --at peak RSS {rss} bytes");
        // Alone in an archive: one sentence and exit 1.
        let lone = dir.path().join("lone");
        std::fs::create_dir(&lone).unwrap();
        let moved = lone.join(hour_name(1));
        if std::fs::symlink_metadata(&bad)
            .unwrap()
            .file_type()
            .is_fifo()
        {
            users::mkfifo(&moved);
        } else {
            std::fs::rename(&bad, &moved).unwrap();
        }
        let (code, rss, err, _) = measured(&[
            "dump",
            "--archive",
            lone.to_str().unwrap(),
            "-o",
            "/dev/null",
        ]);
        assert_eq!(code, Some(1), "{what}: {err}");
        assert!(rss <= 64 << 20, "{what}: {rss}");
        assert!(err.lines().count() <= 2, "{what}: {err}");
    }
}

/// Bytes a terminal or a spreadsheet must never receive: controls other than newline
/// and tab, and DEL.
fn raw_controls(s: &str) -> Vec<char> {
    s.chars()
        .filter(|&c| (c < ' ' && c != '\n' && c != '\t') || c == '\u{7f}')
        .collect()
}

#[test]
fn a_forged_archive_reaches_no_output_raw() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let evil = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}31m\u{7f}";
    let mut procs = plain_procs();
    procs[0].comm = format!("x{evil}");
    procs[0].cmd = format!("=cmd|' /C calc'!A0 {evil}");
    procs[1].cgroup = format!("/evil{evil}");
    procs[2].comm = "@SUM(1+1)".into();
    let groups = vec![
        Group {
            path: "/".into(),
            ..Group::default()
        },
        Group {
            path: format!("/evil{evil}"),
            depth: 1,
            ..Group::default()
        },
    ];
    let t0 = now_ns() - 60_000_000_000;
    write_good(&archive, &[t0], 3, procs, groups);
    let a = archive.to_str().unwrap();
    let at = format!("@{}", (t0 + 10_000_000_000) / 1_000_000_000);
    let outputs = [
        run(&["ps", "--at", &at, "--archive", a]),
        run(&["ps", "--at", &at, "--archive", a, "--json"]),
        run(&[
            "ps",
            "--at",
            &at,
            "--archive",
            a,
            "--fields",
            "pid,comm,cgroup,cmd",
        ]),
        run(&["cgroups", "--at", &at, "--archive", a]),
        run(&["cgroups", "--at", &at, "--archive", a, "--json"]),
        run(&["snapshot", "--at", &at, "--archive", a]),
        run(&["dump", "--archive", a]),
        run(&["dump", "--archive", a, "--format", "csv"]),
        run(&["dump", "--archive", a, "--format", "openmetrics"]),
    ];
    for (i, (code, out, err)) in outputs.iter().enumerate() {
        assert_eq!(*code, Some(0), "output {i}: {err}");
        assert!(raw_controls(out).is_empty(), "output {i}: {out}");
        assert!(raw_controls(err).is_empty(), "output {i} (stderr): {err}");
    }
    let csv = &outputs[7].1;
    assert!(csv.contains(",'=cmd|"), "a formula made text: {csv}");
    assert!(csv.contains(",'@SUM(1+1)"), "{csv}");
    assert!(!csv.contains(",=") && !csv.contains(",@"), "{csv}");
}

#[test]
fn a_user_churning_long_command_lines_erases_no_history() {
    if !users::gate() || !kernstat_testkit::bpf_gate() {
        return;
    }
    let dir = users::open_dir();
    let archive = dir.path().join("archive");
    // Six older hours of history, ~150 KB each.
    let now = now_ns();
    let many: Vec<Proc> = (1..=400)
        .map(|pid| Proc {
            pid,
            start_ns: 100 + u64::from(pid),
            state: b'S',
            comm: format!("old{pid}"),
            cmd: format!("/usr/bin/old{pid} {}", "y".repeat(300 + pid as usize)),
            ..Proc::default()
        })
        .collect();
    let hours: Vec<u64> = (1..=6).rev().map(|h| now - h * HOUR).collect();
    write_good(&archive, &hours, 4, many, Vec::new());
    let older: Vec<String> = std::fs::read_dir(&archive)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".ksr"))
        .collect();
    assert!(older.len() >= 6, "{older:?}");
    users::chown_r(&archive, users::NOBODY);
    let max = "2M";
    let mut daemon = users::SysDaemon::start_opts(
        true,
        &[
            "--record",
            archive.to_str().unwrap(),
            "--record-interval",
            "1",
            "--max-size",
            max,
        ],
        |_| {},
    );
    // Another user: 50 processes a second, each with a 4 KB command line.
    let churn = format!(
        "while :; do i=0; while [ $i -lt 50 ]; do /bin/sleep 0.2 {} & i=$((i+1)); done; sleep 1; done",
        "z".repeat(4096)
    );
    let mut churner = users::as_uid(users::CHURNER, Path::new("/bin/sh"))
        .args(["-c", &churn])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(30));
    let _ = churner.kill();
    let _ = churner.wait();
    let _ = Command::new("pkill")
        .args(["-u", &users::CHURNER.to_string()])
        .status();
    assert!(daemon.alive(), "{}", daemon.stderr());
    drop(daemon);
    let left: Vec<String> = std::fs::read_dir(&archive)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    for f in &older {
        assert!(left.contains(f), "{f} was deleted: {left:?}");
    }
    let total: u64 = std::fs::read_dir(&archive)
        .unwrap()
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    assert!(
        total <= 2 << 20,
        "the archive is {total} bytes, over --max-size {max}"
    );
    // And the churn is in it, within the per-user bounds: no frame lists more than
    // 16 KiB of command lines of that user's processes new since the frame before (one
    // line may cross the bound), or more than 64 new processes of theirs.
    let (_, out, err) = run(&["dump", "--archive", archive.to_str().unwrap()]);
    assert!(err.is_empty(), "{err}");
    let mut seen = std::collections::HashSet::new();
    let mut churned = 0;
    for line in out.lines() {
        let f = common::json(line);
        let mut new_bytes = 0;
        let mut new_procs = 0;
        let mut now = std::collections::HashSet::new();
        for p in f["processes"].as_array().unwrap() {
            if p["uid"] != users::CHURNER {
                continue;
            }
            churned += 1;
            let key = (p["pid"].as_u64().unwrap(), p["start_ns"].as_u64().unwrap());
            now.insert(key);
            if !seen.contains(&key) && p["state"] != "X" {
                new_procs += 1;
                new_bytes += p["cmd"].as_str().unwrap().len();
            }
        }
        assert!(
            new_bytes <= (16 << 10) + 4200 && new_procs <= 64,
            "{new_procs} new processes with {new_bytes} bytes of command lines in {}",
            f["time"]
        );
        seen = now;
    }
    assert!(churned > 0, "the churning user's processes were recorded");
}
