//! The Python client (clients/python, stdlib only) against a live daemon: its socket
//! session (get, pipelined get_many, errors, put, status, watch) and its shared-memory
//! reader (values from memory, a new file followed), run with `python3 -m unittest`.

mod common;
use common::DaemonProc;

#[test]
fn the_python_client_talks_to_a_live_daemon() {
    if !kernstat_testkit::tool_gate("python3") {
        return;
    }
    let d = DaemonProc::start(&["--no-bpf"]);
    let client = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python");
    let out = std::process::Command::new("python3")
        .args(["-m", "unittest", "-v", "test_kernstat"])
        .current_dir(&client)
        .env("PYTHONPATH", &client)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("KERNSTAT_TEST_SOCKET", &d.sock)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("Ran 4 tests") && err.contains("OK"), "{err}");
}
