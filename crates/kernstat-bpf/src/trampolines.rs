//! Whether BPF trampolines (fentry/fexit) attach on this kernel: only an attempt tells
//! (some kernels refuse them with EPERM), made with the writes collector's fexit
//! programs. Apart from kernel.rs (which every collector, writes included, reads) so
//! that no module circle forms.

use std::sync::OnceLock;

/// Whether BPF trampolines (fentry/fexit) can be attached here: some kernels refuse them
/// (EPERM: this project's development kernel), which only an attempt tells. Tried once
/// per process with the writes collector's fexit programs filtered to this process
/// (nothing is counted and nothing else is changed: no tracefs is mounted), and kept.
/// Err carries the one line that says why not.
pub fn available() -> &'static Result<(), String> {
    static TRIED: OnceLock<Result<(), String>> = OnceLock::new();
    TRIED.get_or_init(|| {
        let cfg = crate::writes::Config {
            pids: vec![std::process::id()],
            ..Default::default()
        };
        crate::writes::Writes::fexit_available(&cfg).map_err(|e| e.summary())
    })
}
