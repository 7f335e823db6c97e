//! Links `kernstat` (src/main.rs, the program a prompt or a tmux `#()` job starts again
//! and again) as a static position-independent executable, so that starting it runs no
//! dynamic loader. Measured beside `/bin/true` (hyperfine -N, 1,500 runs, pinned to one
//! CPU), the same snapshot reader costs 0.09 ms more linked statically and 0.29 ms more
//! linked dynamically (libc and libgcc_s to load and bind); the budget is 0.3 ms.
//! `kernstat-full` stays a normal dynamic executable.
//!
//! Cargo cannot set `crt-static` for one binary of a package (and setting it for the
//! build breaks proc-macros), so this changes the link line of that binary alone:
//! `-static-pie`, and a directory searched first where the libraries rustc names as
//! shared ones (`-lgcc_s`, `-lc`, `-lm`) are linker scripts naming the static archives
//! the C compiler reports. Where the compiler has no static libc, nothing is changed and
//! `kernstat` is linked dynamically (correct, 0.2 ms slower to start).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The static archive `cc` would link for `name`, if it has one.
fn archive(cc: &str, name: &str) -> Option<PathBuf> {
    let out = Command::new(cc)
        .arg(format!("-print-file-name={name}"))
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (path.is_absolute() && path.exists()).then_some(path)
}

fn script(dir: &Path, file: &str, archives: &[&Path]) {
    let list: Vec<String> = archives
        .iter()
        .map(|a| format!("\"{}\"", a.display()))
        .collect();
    std::fs::write(dir.join(file), format!("GROUP ( {} )\n", list.join(" ")))
        .expect("OUT_DIR is writable");
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    if !std::env::var("TARGET")
        .unwrap_or_default()
        .ends_with("-linux-gnu")
    {
        return;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let (Some(libc), Some(libm), Some(unwind)) = (
        archive(&cc, "libc.a"),
        archive(&cc, "libm.a"),
        archive(&cc, "libgcc_eh.a"),
    ) else {
        println!("cargo:warning=no static libc: kernstat is linked dynamically");
        return;
    };
    let dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("static");
    std::fs::create_dir_all(&dir).expect("OUT_DIR is writable");
    script(&dir, "libgcc_s.so", &[&unwind]);
    script(&dir, "libc.so", &[&libc, &unwind]);
    script(&dir, "libm.so", &[&libm]);
    println!("cargo:rustc-link-arg-bin=kernstat=-static-pie");
    println!("cargo:rustc-link-arg-bin=kernstat=-L{}", dir.display());
}
