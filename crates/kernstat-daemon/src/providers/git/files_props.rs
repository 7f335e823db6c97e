//! Property tests: the reader against any repository a hostile user can lay out
//! Every file the reader opens (and the index and objects gix opens for the counts) is
//! absent, any bytes, a directory, a FIFO, or a link to /dev/zero, to another of the
//! files or in a loop: the read ends with a value or an error, never a panic, a hang or
//! unbounded memory. Cases: proptest's default (256) in `make test`; `make fuzz` more.

use super::*;
use proptest::prelude::*;
use std::fs;

const FILES: &[&str] = &[
    "HEAD",
    "config",
    "packed-refs",
    "refs/heads/main",
    "refs/tags/v1",
    "logs/refs/stash",
    "rebase-merge/msgnum",
    "rebase-merge/end",
    "commondir",
    "index",
    "objects/info/alternates",
];

#[derive(Debug, Clone)]
enum Kind {
    Absent,
    Bytes(Vec<u8>),
    Dir,
    Fifo,
    DevZero,
    LinkTo(usize),
    Loop,
}

fn kind() -> impl Strategy<Value = Kind> {
    let bytes = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..600),
        "ref: refs/heads/[a-z/.]{0,20}\n".prop_map(String::into_bytes),
        "[0-9a-f]{40}\n".prop_map(String::into_bytes),
        "([0-9a-f]{40} refs/(heads|tags)/[a-z]{1,5}\n(\\^[0-9a-f]{40}\n)?){0,5}"
            .prop_map(String::into_bytes),
        "\\[branch \"[a-z]{1,5}\"\\]\n\t(remote|merge|pushRemote) = [a-z/.]{0,10}\n"
            .prop_map(String::into_bytes),
    ];
    prop_oneof![
        3 => Just(Kind::Absent),
        6 => bytes.prop_map(Kind::Bytes),
        1 => Just(Kind::Dir),
        1 => Just(Kind::Fifo),
        1 => Just(Kind::DevZero),
        1 => (0..FILES.len()).prop_map(Kind::LinkTo),
        1 => Just(Kind::Loop),
    ]
}

fn lay_out(root: &Path, kinds: &[Kind]) {
    let g = root.join(".git");
    fs::create_dir_all(g.join("objects/info")).unwrap();
    fs::create_dir_all(g.join("refs/heads")).unwrap();
    fs::create_dir_all(g.join("refs/tags")).unwrap();
    fs::create_dir_all(g.join("logs/refs")).unwrap();
    fs::create_dir_all(g.join("rebase-merge")).unwrap();
    for (f, k) in FILES.iter().zip(kinds) {
        let p = g.join(f);
        match k {
            Kind::Absent => {}
            Kind::Bytes(b) => fs::write(&p, b).unwrap(),
            Kind::Dir => fs::create_dir_all(&p).unwrap(),
            Kind::Fifo => rustix::fs::mknodat(
                rustix::fs::CWD,
                &p,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o600),
                0,
            )
            .unwrap(),
            Kind::DevZero => std::os::unix::fs::symlink("/dev/zero", &p).unwrap(),
            Kind::LinkTo(i) => std::os::unix::fs::symlink(g.join(FILES[*i]), &p).unwrap(),
            Kind::Loop => std::os::unix::fs::symlink(&p, &p).unwrap(),
        }
    }
}

proptest! {
    #[test]
    fn any_repository_reads_to_a_value_or_an_error(
        kinds in proptest::collection::vec(kind(), FILES.len()),
    ) {
        let d = tempfile::tempdir().unwrap();
        lay_out(d.path(), &kinds);
        if let Ok(info) = read(&d.path().join("."), &Rights::Own) {
            prop_assert!(info.branch.as_deref().is_none_or(valid_ref_name));
            // The counts open the repository with gix, after their own checks.
            let _ = super::super::counts(&info);
        }
    }
}
