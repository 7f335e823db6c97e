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
    // It prints how many times it blocked from "go" to the end, by the kernel's own count
    // (voluntary context switches): a sleep whose deadline had passed before it began
    // (the interpreter kept off the CPU for 100 ms) does not block.
    let mut sleeper = Command::new("python3")
        .args([
            "-c",
            "import resource, sys, time\n\
             nvcsw = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw\n\
             sys.stdin.readline()\n\
             before = nvcsw()\n\
             for _ in range(20): time.sleep(0.1)\n\
             print(nvcsw() - before, flush=True)\n",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = sleeper.id().to_string();
    // Until Ctrl-C, which prints the whole run: a fixed interval could end before the
    // twentieth sleep on a loaded machine (19 seen in CI).
    let (trace, err) = common::traced(&["runqlat", "--offcpu", "-p", &pid, "--json"]);
    use std::io::Write;
    sleeper.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let slept = sleeper.wait_with_output().unwrap();
    assert!(slept.status.success());
    let blocked: u64 = String::from_utf8_lossy(&slept.stdout)
        .trim()
        .parse()
        .unwrap();
    let (text, said) = common::interrupt_with_stderr(trace, err);
    let v: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let count = v["count"].as_u64().unwrap();
    let p50 = v["p50"].as_f64().unwrap();
    // Every block the kernel counted (twenty sleeps, and any of the interpreter's), and
    // no more than a few besides: a switch away while falling asleep counts here too.
    assert!(
        blocked >= 15 && (blocked..=blocked + 10).contains(&count),
        "{count} blocks, the kernel counted {blocked}: {text}{said}"
    );
    assert!(
        (95_000.0..=140_000.0).contains(&p50),
        "median {p50} µs: {text}{said}"
    );
}
