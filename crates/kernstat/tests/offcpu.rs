//! `kernstat runqlat --offcpu` against a workload whose answer is known: a process that
//! sleeps 100 ms twenty times is off the CPU twenty times for about 100 ms each (the
//! sleep, then its wake-up's run-queue wait), and the histogram of that process says so.
//! Needs root (BPF).

mod common;

use std::process::{Command, Stdio};

use kernstat_testkit::{bpf_gate, tool_gate};

#[test]
fn a_process_that_sleeps_100_ms_twenty_times_is_off_cpu_twenty_times_for_100_ms() {
    if !bpf_gate() || !tool_gate("python3") {
        return;
    }
    let mut sleeper = Command::new("python3")
        .args([
            "-c",
            "import sys, time\nsys.stdin.readline()\nfor _ in range(20): time.sleep(0.1)\n",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = sleeper.id().to_string();
    // Until Ctrl-C, which prints the whole run: a fixed interval could end before the
    // twentieth sleep on a loaded machine (19 seen in CI).
    let (trace, err) = common::traced(&["runqlat", "--offcpu", "-p", &pid, "--json"]);
    use std::io::Write;
    sleeper.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(sleeper.wait().unwrap().success());
    let (text, said) = common::interrupt_with_stderr(trace, err);
    let v: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let count = v["count"].as_u64().unwrap();
    let p50 = v["p50"].as_f64().unwrap();
    // Twenty sleeps, and a few more blocks of the interpreter (start, stdin).
    assert!((20..=30).contains(&count), "{count} blocks: {text}{said}");
    assert!(
        (95_000.0..=140_000.0).contains(&p50),
        "median {p50} µs: {text}{said}"
    );
}
