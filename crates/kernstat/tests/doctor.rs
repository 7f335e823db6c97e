//! `kernstat doctor` says what the system says: each fact against the file it comes
//! from, and each predicted path against the path the command then takes (the banner
//! `runqlat` and `writes` print). As root and as an unprivileged user.

mod common;
use common::run;

use std::path::Path;
use std::process::Stdio;

use kernstat_testkit::{bpf_gate, tool_gate, Workload};
use serde_json::Value;

fn doctor_json(out: &str) -> Value {
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The attachment a command reports on stderr ("Tracing ... (ATTACH...").
fn banner_attach(args: &[&str]) -> String {
    let (code, _, err) = run(args);
    assert_eq!(code, Some(0), "{args:?}: {err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("Tracing"))
        .unwrap_or_else(|| panic!("no banner: {err}"));
    line.split('(')
        .nth(1)
        .unwrap()
        .split([',', ')'])
        .next()
        .unwrap()
        .to_string()
}

fn bpffs_in_mount_table() -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .any(|l| {
            l.split_whitespace().nth(1) == Some("/sys/fs/bpf")
                && l.split_whitespace().nth(2) == Some("bpf")
        })
}

#[test]
fn facts_match_the_system_and_paths_match_what_commands_do() {
    if !bpf_gate() {
        return;
    }
    let bpffs_before = bpffs_in_mount_table();
    let (code, out, err) = run(&["doctor", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let v = doctor_json(&out);
    assert_eq!(v["btf"], Path::new("/sys/kernel/btf/vmlinux").exists());
    assert_eq!(v["root"], true);
    assert_eq!(v["bpf_privileges"], true);
    assert_eq!(
        v["unprivileged_bpf_disabled"].as_str(),
        std::fs::read_to_string("/proc/sys/kernel/unprivileged_bpf_disabled")
            .ok()
            .as_deref()
            .map(str::trim)
    );
    // bpffs: doctor asks statfs; the mount table says the same — when nothing mounted
    // or unmounted it while doctor ran (seen once in a full suite run: bpffs appeared at
    // /sys/fs/bpf between doctor's statfs and the test's read, and was gone again after).
    if bpffs_before == bpffs_in_mount_table() {
        assert_eq!(v["bpffs"], bpffs_before, "doctor vs /proc/self/mounts");
    } else {
        eprintln!("bpffs was mounted or unmounted at /sys/fs/bpf while doctor ran");
    }
    assert_eq!(
        v["tracefs"],
        Path::new("/sys/kernel/tracing/events").exists()
    );
    // What runqlat and writes then attach with.
    let rq = banner_attach(&["runqlat", "1", "1"]);
    let expect_rq = if v["tp_btf"] == true {
        "tp_btf"
    } else {
        "raw_tp"
    };
    assert_eq!(rq, expect_rq);
    assert!(v["paths"]["runqlat"]
        .as_str()
        .unwrap()
        .starts_with(expect_rq.split('_').next().unwrap()));
    let idle = Workload::start(&["alloc", "1"]);
    let pid = idle.pid().to_string();
    let wr = banner_attach(&["writes", "-p", &pid, "1", "1"]);
    let fexit = v["fexit"] == true;
    assert_eq!(wr, if fexit { "fexit" } else { "tracepoints" });
    assert_eq!(
        v["paths"]["writes"],
        if fexit {
            "fexit on the syscall wrappers"
        } else {
            "syscall tracepoints"
        }
    );
    // The text form says the same.
    let (code, text, _) = run(&["doctor"]);
    assert_eq!(code, Some(0));
    assert!(text.contains("can load BPF              yes"), "{text}");
}

/// doctor reports the system as it is and changes nothing: in a private mount
/// namespace without tracefs (every mount of it removed there: a machine just booted
/// without systemd, as CI's is) it
/// says so, and tracefs is still not mounted afterwards. Its fexit probe once loaded
/// the whole writes collector, whose fallback mounted tracefs: "tracefs: no" was
/// reported while doctor mounted it.
#[test]
fn doctor_mounts_nothing() {
    if !bpf_gate() || !tool_gate("unshare") {
        return;
    }
    let script = format!(
        "while umount /sys/kernel/tracing 2>/dev/null; do :; done; \
         grep -c ' /sys/kernel/tracing tracefs ' /proc/self/mounts; \
         {} doctor --json; \
         grep -c ' /sys/kernel/tracing tracefs ' /proc/self/mounts; true",
        common::kernstat().display()
    );
    let out = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .env("XDG_RUNTIME_DIR", common::private_runtime_dir())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.len() >= 3,
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        lines[0], "0",
        "tracefs still mounted in the private namespace"
    );
    let v = doctor_json(&lines[1..lines.len() - 1].join("\n"));
    assert_eq!(v["tracefs"], false, "{text}");
    assert_eq!(
        lines[lines.len() - 1],
        "0",
        "doctor mounted tracefs:\n{text}"
    );
    // As root, the writes path can still mount it when it runs.
    assert_ne!(v["paths"]["writes"], "unavailable (no tracefs)", "{text}");
}

#[test]
fn an_unprivileged_user_is_told_what_to_do() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !kernstat_testkit::gate("root (to fork an unprivileged user)", root, || {
        "not root".into()
    }) || !tool_gate("setpriv")
    {
        return;
    }
    let out = common::as_nobody()
        .args(["doctor"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "procfs only: exit 1\n{text}");
    assert!(text.contains("can load BPF              no"), "{text}");
    if Path::new("/sys/kernel/btf/vmlinux").exists() {
        assert!(text.contains("setcap cap_bpf,cap_perfmon+ep"), "{text}");
    }
    assert!(text.contains("bar, snapshot, daemon   procfs"), "{text}");
}

/// doctor's table is its own: libbpf's log lines (a refused fexit load prints five of
/// them) appear only when KERNSTAT_DEBUG asks for them.
#[test]
fn libbpf_speaks_only_when_asked() {
    if !bpf_gate() {
        return;
    }
    for json in [false, true] {
        let mut c = common::command();
        c.arg("doctor").env_remove("KERNSTAT_DEBUG");
        if json {
            c.arg("--json");
        }
        let o = c.output().unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            !all.lines().any(|l| l.trim_start().starts_with("libbpf:")),
            "{all}"
        );
    }
}
