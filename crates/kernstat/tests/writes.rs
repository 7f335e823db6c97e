//! `kernstat writes` on workloads whose answers are known exactly (ks-workload writes):
//! 5,000 unbuffered 25-byte writes, the same through a BufWriter flushed per record, the
//! same through an 8 KiB BufWriter, writev of three buffers, one call of each kind to a
//! file, a pipe and a socket, and 600 processes writing once each. Needs root (CI=true:
//! must run).

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;

use kernstat_testkit::{bpf_gate, Gated};
use serde_json::Value;

/// Traces `workload` (started gated) with `kernstat writes EXTRA... --json`, lets it run,
/// stops kernstat with SIGINT and returns its one report.
fn trace(workload: &[&str], extra: &[&str], by_pid: bool) -> (u32, Value) {
    let (pid, report, _) = trace_family(workload, extra, by_pid);
    (pid, report)
}

/// `trace`, and the workload's child processes as they were when kernstat stopped.
fn trace_family(workload: &[&str], extra: &[&str], by_pid: bool) -> (u32, Value, Vec<u32>) {
    let mut w = Gated::start(workload);
    let pid = w.pid().to_string();
    let mut args = vec!["writes", "--json"];
    if by_pid {
        args.extend_from_slice(&["-p", &pid]);
    }
    args.extend_from_slice(extra);
    let mut k = common::command()
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(k.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.starts_with("Tracing"), "kernstat writes: {line}");
    w.go();
    let children = kernstat_testkit::children_of(w.pid());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(k.id() as i32, libc::SIGINT) };
    let mut out = String::new();
    k.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let status = k.wait().unwrap();
    assert!(status.success(), "{out}");
    (
        w.pid(),
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}")),
        children,
    )
}

fn process(report: &Value, pid: u32) -> &Value {
    report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} in {report}"))
}

fn by<'a>(p: &'a Value, syscall: &str, kind: &str) -> &'a Value {
    p["by"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["syscall"] == syscall && b["kind"] == kind)
        .unwrap_or_else(|| panic!("{syscall} to {kind} in {p}"))
}

/// The non-empty buckets as (lo, hi, count).
fn nonzero(buckets: &Value) -> Vec<(u64, u64, u64)> {
    buckets
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["lo"].as_u64().unwrap(),
                b["hi"].as_u64().unwrap(),
                b["count"].as_u64().unwrap(),
            )
        })
        .filter(|b| b.2 > 0)
        .collect()
}

fn tmpfile(name: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let p = dir.path().join(name).to_string_lossy().into_owned();
    (dir, p)
}

#[test]
fn unbuffered_and_flushed_writes_are_5000_small_writes() {
    if !bpf_gate() {
        return;
    }
    for mode in ["unbuffered", "flushed"] {
        let (_d, path) = tmpfile(mode);
        let (pid, r) = trace(&["writes", mode, "5000", "25", &path], &[], true);
        let p = process(&r, pid);
        let w = by(p, "write", "file");
        assert_eq!(w["calls"], 5000, "{mode}");
        assert_eq!(
            nonzero(&w["asked"]),
            vec![(16, 31, 5000)],
            "{mode}: every write asked 25 bytes"
        );
        assert_eq!(
            nonzero(&w["done"]),
            vec![(16, 31, 5000)],
            "{mode}: every write wrote 25 bytes"
        );
        assert_eq!(w["done_bytes"], 125_000);
        assert_eq!(p["small_writes"], true, "{mode}: {p}");
        assert!(
            p["advice"].as_str().unwrap().contains("buffer the writes"),
            "{p}"
        );
    }
}

#[test]
fn an_8_kib_buffer_makes_15_big_writes_and_one_rest() {
    if !bpf_gate() {
        return;
    }
    let (_d, path) = tmpfile("buffered");
    let (pid, r) = trace(&["writes", "buffered", "5000", "25", &path], &[], true);
    let p = process(&r, pid);
    let w = by(p, "write", "file");
    assert_eq!(w["calls"], 16);
    // 125,000 bytes: 15 x 8,192 and the remaining 2,120.
    assert_eq!(
        nonzero(&w["asked"]),
        vec![(2048, 4095, 1), (8192, 16383, 15)]
    );
    assert_eq!(w["asked_bytes"], 125_000);
    assert_eq!(p["small_writes"], false, "{p}");
    assert_eq!(p["advice"], "");
}

#[test]
fn writev_counts_once_with_the_total_size() {
    if !bpf_gate() {
        return;
    }
    let (_d, path) = tmpfile("writev");
    let (pid, r) = trace(&["writes", "writev", "1", "25", &path], &[], true);
    let p = process(&r, pid);
    let v = by(p, "writev", "file");
    assert_eq!(v["calls"], 1);
    assert_eq!(v["asked_bytes"], 75, "three buffers of 25 bytes, one call");
    assert_eq!(nonzero(&v["asked"]), vec![(64, 127, 1)]);
}

#[test]
fn file_kinds_and_socket_calls() {
    if !bpf_gate() {
        return;
    }
    let (_d, path) = tmpfile("kinds");
    let (pid, r) = trace(&["writes", "kinds", "1", "100", &path], &[], true);
    let p = process(&r, pid);
    for (sys, kind) in [
        ("write", "file"),
        ("write", "socket"),
        ("sendto", "socket"),
        ("sendmsg", "socket"),
    ] {
        let b = by(p, sys, kind);
        assert_eq!(b["calls"], 1, "{sys} to {kind}: {b}");
        assert_eq!(b["asked_bytes"], 100, "{sys} to {kind}");
        assert_eq!(b["done_bytes"], 100, "{sys} to {kind}");
    }
    // The pipe got our 100 bytes, and the workload's own "done\n" on its stdout pipe.
    let pipe = by(p, "write", "pipe");
    assert_eq!(
        nonzero(&pipe["asked"]),
        vec![(4, 7, 1), (64, 127, 1)],
        "{pipe}"
    );
    // --reads: the same workload's read of the pipe.
    let (_d2, path2) = tmpfile("kinds-reads");
    let (pid, r) = trace(&["writes", "kinds", "1", "100", &path2], &["--reads"], true);
    assert_eq!(r["family"], "reads");
    let b = by(process(&r, pid), "read", "pipe");
    assert_eq!(b["done_bytes"], 100, "{b}");
}

#[test]
fn a_comm_filter_and_no_filter_find_the_writer() {
    if !bpf_gate() {
        return;
    }
    let (_d, path) = tmpfile("comm");
    let (pid, r) = trace(
        &["writes", "unbuffered", "300", "25", &path],
        &["-c", "ks-workload"],
        false,
    );
    let procs = r["processes"].as_array().unwrap();
    assert!(procs.iter().all(|p| p["comm"] == "ks-workload"), "{r}");
    assert_eq!(by(process(&r, pid), "write", "file")["calls"], 300);
    let (_d, path) = tmpfile("all");
    let (pid, r) = trace(
        &["writes", "unbuffered", "300", "25", &path],
        &["--top", "1000"],
        false,
    );
    assert_eq!(by(process(&r, pid), "write", "file")["calls"], 300);
}

/// 600 processes that write once each: more entries than one batched read of the
/// kernel's map takes (256), so the read must go on past a batch the kernel returns short
/// (a hash bucket that did not fit): libbpf-rs's batched read stopped there, and a
/// reading lost every process after it (kernstat-bpf's batch module).
#[test]
fn six_hundred_writers_are_six_hundred_rows() {
    if !bpf_gate() {
        return;
    }
    let (_d, path) = tmpfile("forked");
    // Only ks-workload's processes: the map (8,192 entries) is not shared with whatever
    // else a busy machine writes, and 1,200 keys (a file and a pipe write each) still
    // take five batches.
    let (_, r, children) = trace_family(
        &["writes", "forked", "600", "25", &path],
        &["-c", "ks-workload", "--top", "100000"],
        false,
    );
    assert_eq!(children.len(), 600, "the workload's writers");
    let mut missing = Vec::new();
    for pid in &children {
        let Some(p) = r["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pid"] == *pid)
        else {
            missing.push(*pid);
            continue;
        };
        let w = by(p, "write", "file");
        assert_eq!(
            (w["calls"].as_u64(), w["asked_bytes"].as_u64()),
            (Some(1), Some(25)),
            "{p}"
        );
    }
    assert!(
        missing.is_empty(),
        "{} of 600 writers missing from the report ({} rows)",
        missing.len(),
        r["processes"].as_array().unwrap().len()
    );
    // The file holds the 600 records the rows count.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 600 * 25);
}

#[test]
fn bad_input() {
    for (args, needle) in [
        (
            &["writes", "-c", "a-very-long-command-name"][..],
            "at most 15 bytes",
        ),
        (&["writes", "--small-share", "2"][..], "between 0 and 1"),
        (
            &[
                "writes", "-p", "1", "-p", "2", "-p", "3", "-p", "4", "-p", "5", "-p", "6", "-p",
                "7", "-p", "8", "-p", "9",
            ][..],
            "at most 8",
        ),
    ] {
        let out = common::command().args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
