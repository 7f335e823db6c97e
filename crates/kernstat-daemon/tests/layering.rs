//! The daemon's layering rule: the server depends on the providers, never the reverse.
//! Providers' schedules see the daemon only through `hub.rs` (the cache, events,
//! settings, timing and job slots), so no file under src/providers/ may name the
//! server module or its `Daemon`. (This test reads the sources; it fails on the layout
//! of 2026-11-24, where three schedules imported `server::{Daemon, Event}`.)

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_provider_depends_on_the_server() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/providers");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(
        files.len() > 10,
        "the providers are where they were: {files:?}"
    );
    let mut offenders = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("server::")
                || code.contains("crate::server")
                || code.contains("Daemon")
            {
                offenders.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "providers must use hub.rs, not the server:\n{}",
        offenders.join("\n")
    );
}
