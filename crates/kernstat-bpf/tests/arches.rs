//! Every BPF object builds for each architecture kernstat supports, not only the one it
//! is built on: bpf/arch.h holds the one difference (the syscall wrappers' registers),
//! and this compiles every `bpf/*.bpf.c` with `-D__TARGET_ARCH_x86` and
//! `-D__TARGET_ARCH_arm64` (what libbpf-cargo passes when building for x86_64 and
//! aarch64), then checks in each object's BTF that the registers are that
//! architecture's. Needs clang only (no BPF, no root).

use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_cargo::SkeletonBuilder;

fn sources() -> Vec<PathBuf> {
    let bpf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bpf");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&bpf)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().is_some_and(|s| s.ends_with(".bpf.c")))
        .collect();
    v.sort();
    v
}

fn build(src: &Path, arch: &str, out: &Path) {
    let bpf = src.parent().unwrap();
    SkeletonBuilder::new()
        .source(src)
        .obj(out)
        .clang(std::env::var_os("KERNSTAT_CLANG").unwrap_or_else(|| "clang".into()))
        .clang_args([
            "-I".into(),
            bpf.as_os_str().to_owned(),
            format!("-D__TARGET_ARCH_{arch}").into(),
            "-mcpu=v3".into(),
            "-Wall".into(),
            "-Werror".into(),
        ])
        .build()
        .unwrap_or_else(|e| panic!("{} for {arch}: {e:#}", src.display()));
}

/// The struct names in an object's BTF (bpftool, where installed).
fn btf_structs(obj: &Path) -> Option<String> {
    let out = Command::new("bpftool")
        .args(["btf", "dump", "file"])
        .arg(obj)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn every_object_builds_for_x86_64_and_arm64() {
    let dir = tempfile::tempdir().unwrap();
    let srcs = sources();
    assert!(srcs.len() >= 7, "{srcs:?}");
    for arch in ["x86", "arm64"] {
        for src in &srcs {
            let name = src.file_name().unwrap().to_str().unwrap();
            let obj = dir.path().join(format!("{arch}-{name}.o"));
            build(src, arch, &obj);
            assert!(std::fs::metadata(&obj).unwrap().len() > 0);
        }
    }
    // The syscall wrappers' registers are each architecture's own.
    let writes = |arch: &str| dir.path().join(format!("{arch}-writes.bpf.c.o"));
    if let (Some(x86), Some(arm)) = (btf_structs(&writes("x86")), btf_structs(&writes("arm64"))) {
        assert!(
            x86.contains("'di'") && !x86.contains("user_pt_regs"),
            "x86: {x86:.400}"
        );
        assert!(
            arm.contains("'user_pt_regs'") && !arm.contains("'di'"),
            "arm64: {arm:.400}"
        );
    } else {
        kernstat_testkit::gate("bpftool", false, || "bpftool is not installed".into());
    }
}
