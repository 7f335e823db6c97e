//! Unit tests of `files.rs`.

use super::*;
use std::fs;

const A: &str = "1111111111111111111111111111111111111111";
const B: &str = "2222222222222222222222222222222222222222";

fn own(dir: &Path) -> io::Result<GitInfo> {
    read(dir, &Rights::Own)
}

fn repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let g = d.path().join(".git");
    fs::create_dir_all(g.join("refs/heads")).unwrap();
    fs::create_dir_all(g.join("refs/tags/rel")).unwrap();
    fs::create_dir_all(g.join("logs/refs")).unwrap();
    fs::create_dir_all(d.path().join("src/deep")).unwrap();
    fs::write(g.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(g.join("refs/heads/main"), format!("{A}\n")).unwrap();
    fs::write(
        g.join("config"),
        "[core]\n\tbare = false\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n",
    )
    .unwrap();
    d
}

#[test]
fn branch_commit_upstream_from_a_subdirectory() {
    let d = repo();
    let i = own(&d.path().join("src/deep")).unwrap();
    assert_eq!(i.root, d.path().canonicalize().unwrap());
    assert_eq!(i.branch.as_deref(), Some("main"));
    assert_eq!(i.commit.as_deref(), Some(A));
    assert!(!i.detached);
    assert_eq!(i.upstream.as_deref(), Some("origin/main"));
    assert_eq!((i.stash, i.state, i.tag.as_deref()), (0, "none", None));
}

#[test]
fn packed_refs_tags_stash_and_state() {
    let d = repo();
    let g = d.path().join(".git");
    fs::remove_file(g.join("refs/heads/main")).unwrap();
    fs::write(
        g.join("packed-refs"),
        format!("# pack-refs with: peeled fully-peeled sorted \n{A} refs/heads/main\n{B} refs/tags/v1.0\n^{A}\n"),
    )
    .unwrap();
    fs::write(g.join("logs/refs/stash"), "x\ny\n").unwrap();
    fs::write(g.join("MERGE_HEAD"), B).unwrap();
    let i = own(d.path()).unwrap();
    assert_eq!(i.commit.as_deref(), Some(A), "resolved through packed-refs");
    assert_eq!(
        i.tag.as_deref(),
        Some("v1.0"),
        "annotated tag, by its peeled id"
    );
    assert_eq!(i.stash, 2);
    assert_eq!(i.state, "merge");
    fs::create_dir(g.join("rebase-merge")).unwrap();
    assert_eq!(own(d.path()).unwrap().state, "rebase");
}

#[test]
fn detached_head_and_loose_tag() {
    let d = repo();
    let g = d.path().join(".git");
    fs::write(g.join("HEAD"), format!("{B}\n")).unwrap();
    fs::write(g.join("refs/tags/rel/2"), format!("{B}\n")).unwrap();
    let i = own(d.path()).unwrap();
    assert!(i.detached);
    assert_eq!(i.branch, None);
    assert_eq!(i.commit.as_deref(), Some(B));
    assert_eq!(i.tag.as_deref(), Some("rel/2"));
}

#[test]
fn worktrees_follow_the_gitdir_file() {
    let d = repo();
    let wt_git = d.path().join(".git/worktrees/wt");
    fs::create_dir_all(&wt_git).unwrap();
    fs::write(wt_git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(wt_git.join("commondir"), "../..\n").unwrap();
    let wt = tempfile::tempdir().unwrap();
    fs::write(
        wt.path().join(".git"),
        format!("gitdir: {}\n", wt_git.display()),
    )
    .unwrap();
    let i = own(wt.path()).unwrap();
    assert_eq!(
        i.commit.as_deref(),
        Some(A),
        "refs come from the common dir"
    );
}

#[test]
fn outside_a_repository() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(own(d.path()).unwrap_err().kind(), io::ErrorKind::NotFound);
}

#[test]
fn a_symbolic_link_head_is_read_not_followed() {
    let d = repo();
    let g = d.path().join(".git");
    fs::remove_file(g.join("HEAD")).unwrap();
    std::os::unix::fs::symlink("refs/heads/main", g.join("HEAD")).unwrap();
    assert_eq!(own(d.path()).unwrap().branch.as_deref(), Some("main"));
    fs::remove_file(g.join("HEAD")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", g.join("HEAD")).unwrap();
    assert!(own(d.path()).is_err());
}

/// Every file the reader opens, replaced in turn by a link to /dev/zero, a FIFO, a
/// huge sparse file and a line without end: each read ends (no hang, no unbounded
/// memory) with a value or an error.
#[test]
fn hostile_files_neither_hang_nor_grow() {
    let files = [
        "HEAD",
        "config",
        "packed-refs",
        "refs/heads/main",
        "logs/refs/stash",
        "rebase-merge/msgnum",
        "commondir",
    ];
    for f in files {
        for kind in ["zero", "fifo", "sparse", "noline"] {
            let d = repo();
            let g = d.path().join(".git");
            fs::create_dir_all(g.join("rebase-merge")).unwrap();
            fs::write(g.join("rebase-merge/end"), "3\n").unwrap();
            let p = g.join(f);
            let _ = fs::remove_file(&p);
            match kind {
                "zero" => std::os::unix::fs::symlink("/dev/zero", &p).unwrap(),
                "fifo" => rustix::fs::mknodat(
                    rustix::fs::CWD,
                    &p,
                    rustix::fs::FileType::Fifo,
                    rustix::fs::Mode::from_raw_mode(0o600),
                    0,
                )
                .unwrap(),
                "sparse" => fs::File::create(&p).unwrap().set_len(1 << 36).unwrap(),
                _ => fs::write(&p, vec![b'x'; 200_000]).unwrap(),
            }
            let t = std::time::Instant::now();
            let _ = own(d.path());
            // A hang guard, not a timing: a blocking open would never return.
            assert!(
                t.elapsed() < std::time::Duration::from_secs(60),
                "{f} as {kind}: the read must end"
            );
        }
    }
}

#[test]
fn names_that_could_fool_a_prompt_are_refused() {
    let d = repo();
    let g = d.path().join(".git");
    fs::write(g.join("HEAD"), "ref: refs/heads/x\u{1b}]0;T\u{7}%F{red}\n").unwrap();
    assert!(own(d.path()).is_err());
    assert!(valid_ref_name("refs/heads/feature/x-1"));
    for bad in [
        "a b", "a..b", "a\tb", "a~1", "a^", "a:b", "x.lock", "/a", "a/",
    ] {
        assert!(!valid_ref_name(bad), "{bad}");
    }
}
