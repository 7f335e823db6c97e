//! What the CLI test files share: the binary under test, running it to completion, and
//! the BPF/procfs source choice. (Each test file is its own crate and uses a part of
//! this module, so unused-item warnings here are expected.)
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The kernstat binary cargo built for these tests.
pub fn kernstat() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kernstat"))
}

/// Runs kernstat to completion: (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(kernstat())
        .args(args)
        .output()
        .expect("run kernstat");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One JSON line, or a failure that shows it.
pub fn json(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

/// Both sources when root (BPF must work under CI); procfs alone otherwise.
pub fn sources() -> Vec<&'static [&'static str]> {
    if kernstat_testkit::bpf_gate() {
        vec![&[], &["--no-bpf"]]
    } else {
        vec![&["--no-bpf"]]
    }
}
