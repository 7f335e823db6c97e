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

/// A private runtime directory for this test binary: kernstat's locks, published bar
/// lines and default daemon socket go here, never into the user's. Under cargo's
/// per-target temporary directory, so nothing is left on the machine outside target/.
pub fn private_runtime_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("rt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("create the private runtime directory");
        // The runtime directory is private to its user (kernstat refuses others).
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    })
}

/// kernstat, isolated from whatever the user runs on this machine: a private runtime
/// directory (bar locks, the user daemon's socket) and a pin directory where no pin is
/// (so a user's `kernstat ps --pin` does not change what the tests read).
pub fn command() -> Command {
    let mut c = Command::new(kernstat());
    c.env("XDG_RUNTIME_DIR", private_runtime_dir()).env(
        "KERNSTAT_PIN_DIR",
        private_runtime_dir().join("no-pin-here"),
    );
    c
}

/// Runs kernstat to completion: (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = command().args(args).output().expect("run kernstat");
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
