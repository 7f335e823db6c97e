//! The Lua example (clients/lua/kernstat.lua) in a real, headless neovim against a live
//! daemon: the statusline text shows the repository's branch and a value the test put,
//! and follows a daemon restart.

mod common;
use common::DaemonProc;

use std::path::Path;
use std::process::{Command, Stdio};

#[test]
fn the_neovim_statusline_example_shows_live_values() {
    if !kernstat_testkit::tool_gate("nvim") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = DaemonProc::start(&["--no-bpf"]);
    let sock = d.sock.clone();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join(".git/refs/heads")).unwrap();
    std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/lua-branch\n").unwrap();
    d.put("var.editor", "first");
    // The test script: wait (at most 10 s) for each expected status line, print it, and
    // between the two, wait for the test to restart the daemon (a file appears).
    let restarted = dir.path().join("restarted");
    let script = dir.path().join("t.lua");
    std::fs::write(
        &script,
        format!(
            r#"
package.path = "{lua}/?.lua;" .. package.path
local ks = require("kernstat")
ks.setup({{ socket = "{sock}", keys = {{ "git.branch", "var.editor", "nope.x" }}, interval_ms = 50 }})
local function show(want)
  vim.wait(10000, function() return ks.status() == want end, 10)
  io.stdout:write(ks.status() .. "\n")
  io.stdout:flush()
end
show("lua-branch first")
vim.wait(20000, function() return vim.loop.fs_stat("{restarted}") ~= nil end, 20)
show("lua-branch second")
ks.stop()
vim.cmd("qa!")
"#,
            lua = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../clients/lua")
                .display(),
            sock = sock.display(),
            restarted = restarted.display(),
        ),
    )
    .unwrap();
    let mut nvim = Command::new("nvim")
        .args(["--headless", "-u", "NONE", "-i", "NONE", "-c"])
        .arg(format!("luafile {}", script.display()))
        .current_dir(&repo)
        .env("HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(nvim.stdout.take().unwrap());
    let mut line = String::new();
    use std::io::BufRead;
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "lua-branch first\n");
    let d = d.restart();
    d.put("var.editor", "second");
    std::fs::write(&restarted, "").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "lua-branch second\n", "after the daemon restarted");
    let st = nvim.wait().unwrap();
    assert!(st.success());
}
