//! Compiles every `bpf/<name>.bpf.c` listed in `PROGRAMS` with clang (CO-RE, BTF on) and
//! generates its libbpf-rs skeleton into OUT_DIR. The kernel types come from
//! bpf/kernel.h, so the build needs clang but no vmlinux.h, bpftool or kernel headers.
use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const PROGRAMS: &[&str] = &[
    "sampler", "ps", "runqlat", "writes", "net", "exits", "cgroups", "biolat", "oom", "tcp",
];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let bpf_dir = manifest.join("../../bpf");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let clang = env::var_os("KERNSTAT_CLANG").unwrap_or_else(|| "clang".into());
    for name in PROGRAMS {
        let src = bpf_dir.join(format!("{name}.bpf.c"));
        let skel = out.join(format!("{name}.skel.rs"));
        if let Err(err) = SkeletonBuilder::new()
            .source(&src)
            .clang(&clang)
            .clang_args([
                "-I".into(),
                bpf_dir.clone().into_os_string(),
                "-mcpu=v3".into(),
                "-Wall".into(),
                "-Werror".into(),
            ])
            .build_and_generate(&skel)
        {
            panic!(
                "building {}: {err:#}\n(kernstat needs clang >= 12 for its BPF programs: \
                 `make deps` or `apt-get install clang`)",
                src.display()
            );
        }
    }
    println!("cargo:rerun-if-changed={}", bpf_dir.display());
    println!("cargo:rerun-if-env-changed=KERNSTAT_CLANG");
}
