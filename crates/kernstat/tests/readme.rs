//! The README is what a user reads in five minutes, and it must stay true: it is at most
//! 400 lines, every example in a block marked `sh` runs as written (with the binaries of
//! this build first on PATH and a daemon of the test's own on the default socket), and
//! every link in the README and in docs/ resolves — to a file, and to a heading where it
//! names one.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn the_readme_is_short() {
    let n = read("README.md").lines().count();
    assert!(
        n <= 400,
        "README.md has {n} lines; keep it at most 400 (move the rest to docs/)"
    );
}

#[test]
fn every_sh_example_in_the_readme_runs_as_written() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !kernstat_testkit::gate(
        "root (the examples include doctor and ps as root)",
        root,
        || "not root".into(),
    ) {
        return;
    }
    let text = read("README.md");
    // Only the blocks marked `sh`: a simple fence parser (the README has no nested fences).
    let mut examples = Vec::new();
    let mut inside: Option<(bool, String)> = None;
    for line in text.lines() {
        match (&mut inside, line.strip_prefix("```")) {
            (None, Some(info)) => inside = Some((info.trim() == "sh", String::new())),
            (Some((run, body)), Some(_)) => {
                if *run {
                    examples.push(std::mem::take(body));
                }
                inside = None;
            }
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(
        examples.len() >= 4,
        "the README's runnable examples: {examples:?}"
    );

    // A daemon of the test's own on the default socket of a private runtime directory.
    let rt = tempfile::tempdir().unwrap();
    let bin_dir = common::kernstat().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = |c: &mut Command| {
        c.env("XDG_RUNTIME_DIR", rt.path())
            .env("PATH", &path)
            .env("KERNSTAT_NO_AUTOSTART", "1")
            .env("XDG_CONFIG_HOME", rt.path().join("config"));
    };
    let mut daemon = Command::new(common::kernstat());
    daemon
        .args(["daemon", "--no-bpf", "--interval", "0.5"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    env(&mut daemon);
    let mut daemon = daemon.spawn().unwrap();
    let sock = rt.path().join("kernstat/sock");
    let t = Instant::now();
    while !common::daemon_answers(&sock, "cpu.percent") {
        assert!(t.elapsed() < Duration::from_secs(20), "no daemon");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut failures = Vec::new();
    for ex in &examples {
        let mut c = Command::new("bash");
        c.args(["-c", &format!("set -euo pipefail\n{ex}")])
            .current_dir(rt.path())
            .stdin(Stdio::null());
        env(&mut c);
        let o = c.output().unwrap();
        if !o.status.success() || o.stdout.is_empty() {
            failures.push(format!(
                "{ex}-> {:?}\nstdout: {}\nstderr: {}",
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ));
        }
    }
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert!(
        failures.is_empty(),
        "README examples that fail:\n{}",
        failures.join("\n")
    );
}

/// GitHub's anchor for a heading: lower case, spaces as `-`, punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn headings(text: &str) -> Vec<String> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.starts_with("```") {
                fenced = !fenced;
            }
            !fenced && l.starts_with('#')
        })
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

#[test]
fn every_link_in_the_readme_and_docs_resolves() {
    let mut files = vec![repo().join("README.md")];
    for e in std::fs::read_dir(repo().join("docs")).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "md") {
            files.push(e.path());
        }
    }
    let mut broken = Vec::new();
    let mut checked = 0;
    for f in &files {
        // Links outside code blocks (a block may hold `[$output]($style)` as code).
        let mut fenced = false;
        let text: String = std::fs::read_to_string(f)
            .unwrap()
            .lines()
            .filter(|l| {
                if l.starts_with("```") {
                    fenced = !fenced;
                }
                !fenced
            })
            .collect::<Vec<_>>()
            .join("\n");
        let mut rest = text.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            rest = &rest[end..];
            if target.starts_with("http://")
                || target.starts_with("https://")
                || target.starts_with("mailto:")
                || target.contains(' ')
            {
                continue;
            }
            checked += 1;
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target, None),
            };
            let dest = if file.is_empty() {
                f.clone()
            } else {
                f.parent().unwrap().join(file)
            };
            if !dest.exists() {
                broken.push(format!("{}: {target} (no such file)", f.display()));
                continue;
            }
            if let Some(a) = anchor {
                let t = std::fs::read_to_string(&dest).unwrap_or_default();
                if !headings(&t).iter().any(|h| h == a) {
                    broken.push(format!("{}: {target} (no such heading)", f.display()));
                }
            }
        }
    }
    assert!(checked > 20, "links checked: {checked}");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
