//! `kernstat doctor`: prints kernstat-bpf's examination of this machine (what the kernel
//! and these privileges allow, which path each command takes) as text or JSON.

use kernstat_bpf::doctor::examine;
use kernstat_bpf::loader::VMLINUX_BTF;
use serde_json::json;

use crate::cli::DoctorArgs;

/// Runs `kernstat doctor`; returns the exit status (0: BPF works here; 1: procfs only).
pub fn run(args: &DoctorArgs) -> anyhow::Result<i32> {
    let r = examine();
    let p = &r.paths;
    if args.json {
        let v = json!({
            "kernel": r.release,
            "btf": r.btf,
            "root": r.root,
            "capabilities": r.capabilities,
            "bpf_privileges": r.bpf_privileges,
            "bpffs": r.bpffs,
            "tracefs": r.tracefs,
            "tp_btf": r.tp_btf,
            "fexit": r.fexit.as_ref().map(|f| f.is_ok()),
            "kprobes": r.kprobes,
            "lockdown": r.lockdown,
            "unprivileged_bpf_disabled": r.unprivileged_bpf_disabled,
            "paths": {
                "bar": p.sampler, "snapshot": p.sampler, "daemon": p.sampler,
                "ps": p.ps, "runqlat": p.runqlat, "writes": p.writes,
                "network": p.network,
            },
            "advice": r.advice,
        });
        println!("{v}");
    } else {
        let yes = |b: bool| if b { "yes" } else { "no" };
        let mut out = String::new();
        let mut line = |k: &str, v: String| out.push_str(&format!("{k:<26}{v}\n"));
        line("kernel", r.release.clone());
        line("BTF", format!("{} ({VMLINUX_BTF})", yes(r.btf)));
        line(
            "privileges",
            format!(
                "{}{}",
                if r.root { "root" } else { "not root" },
                if r.capabilities.is_empty() {
                    ", no BPF capabilities".to_string()
                } else {
                    format!(", effective: {}", r.capabilities.join(" "))
                }
            ),
        );
        line("can load BPF", yes(r.can_load_bpf()).to_string());
        line("bpffs at /sys/fs/bpf", yes(r.bpffs).to_string());
        line("tracefs", yes(r.tracefs).to_string());
        line("tp_btf + task storage", yes(r.tp_btf).to_string());
        line(
            "fexit (BPF trampolines)",
            match &r.fexit {
                None => "not tried (needs BPF)".into(),
                Some(Ok(())) => "yes".into(),
                Some(Err(e)) => format!("no: {e}"),
            },
        );
        line("kprobes", yes(r.kprobes).to_string());
        line(
            "lockdown",
            r.lockdown.clone().unwrap_or_else(|| "not reported".into()),
        );
        line(
            "unprivileged_bpf_disabled",
            r.unprivileged_bpf_disabled
                .clone()
                .unwrap_or_else(|| "not reported".into()),
        );
        out.push_str("\nwhich path each command takes here:\n");
        for (cmd, path) in [
            ("bar, snapshot, daemon", p.sampler),
            ("ps", p.ps),
            ("runqlat", p.runqlat),
            ("writes", p.writes),
            ("network", &p.network),
        ] {
            out.push_str(&format!("  {cmd:<24}{path}\n"));
        }
        for a in &r.advice {
            out.push_str(&format!("\nadvice: {a}\n"));
        }
        print!("{out}");
    }
    Ok(if r.can_load_bpf() { 0 } else { 1 })
}
