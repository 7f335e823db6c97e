//! From a command's source flags (`--no-bpf`, `--temp`, the hidden `--root` of the tests)
//! to an open collector (kernstat-collect), saying once on stderr when BPF could not be
//! used.

use anyhow::Context;
use kernstat_collect::{CollectOptions, Collector};

/// The collector's options from a command's source flags (`--no-bpf`, `--temp`, the
/// hidden `--root` of the tests).
pub fn collect_options(src: &crate::cli::SourceArgs) -> CollectOptions {
    let mut roots = kernstat_sources::Roots::default();
    if let Some(r) = &src.root {
        roots.proc = r.join("proc");
        roots.sys = r.join("sys");
    }
    CollectOptions {
        no_bpf: src.no_bpf,
        temp: src.temp.clone(),
        roots,
        machine_only: false,
    }
}

/// Opens the collector and says once on stderr if BPF could not be used.
pub fn open_collector(src: &crate::cli::SourceArgs) -> anyhow::Result<Collector> {
    let c = Collector::open(&collect_options(src)).context("opening /proc")?;
    if let Some(notice) = c.notice(src.no_bpf) {
        eprintln!("kernstat: {notice}");
    }
    Ok(c)
}
