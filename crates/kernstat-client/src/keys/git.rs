//! A repository's keys (answered per directory: a request names the path), and the stamp
//! that tells a reader of the snapshot whether a cached value is still the
//! repository's: the same files the daemon stats before each read, compared by the
//! reader (lookup.rs).

use std::path::PathBuf;

/// Every key this provider publishes (per path).
pub const GIT_KEYS: &[(&str, &str)] = &[
    ("git.root", "the repository's top directory"),
    ("git.branch", "current branch (null when detached)"),
    ("git.commit", "commit id of HEAD"),
    ("git.short", "first 7 characters of git.commit"),
    ("git.detached", "HEAD is not on a branch"),
    ("git.tag", "a tag pointing at HEAD (null when none)"),
    ("git.stash", "number of stashes"),
    (
        "git.state",
        "none, rebase, merge, cherry-pick, revert or bisect",
    ),
    (
        "git.upstream",
        "the branch's upstream, e.g. origin/main (null when none)",
    ),
    (
        "git.ahead",
        "commits on HEAD not on the upstream (null without one)",
    ),
    (
        "git.behind",
        "commits on the upstream not on HEAD (null without one)",
    ),
    ("git.staged", "paths whose index entry differs from HEAD"),
    (
        "git.unstaged",
        "tracked files changed in the work tree and not staged",
    ),
    (
        "git.untracked",
        "untracked files (each file, as `git status -uall`; ignored ones not)",
    ),
    ("git.dirty", "any staged, unstaged or untracked change"),
    (
        "git.conflicted",
        "paths with unresolved merge conflicts (not counted in unstaged)",
    ),
    (
        "git.lines_added",
        "lines added in the work tree, not staged (git diff --numstat)",
    ),
    ("git.lines_removed", "lines removed in the work tree, not staged"),
    (
        "git.lines_staged_added",
        "lines added in the index (git diff --cached --numstat)",
    ),
    ("git.lines_staged_removed", "lines removed in the index"),
    (
        "git.state_step",
        "during a rebase or am: the step being applied (null otherwise)",
    ),
    ("git.state_total", "during a rebase or am: the number of steps"),
    ("git.last_commit_age_secs", "seconds since HEAD's commit time"),
    ("git.commit_summary", "the first line of HEAD's commit message"),
    (
        "git.push_ahead",
        "commits on HEAD not on the branch it pushes to (pushRemote, pushDefault, else the upstream's remote)",
    ),
    ("git.push_behind", "commits on the push branch not on HEAD"),
];

/// The keys `counts` computes (the rest come from `read`).
pub const COUNT_KEYS: &[&str] = &[
    "git.ahead",
    "git.behind",
    "git.conflicted",
    "git.lines_added",
    "git.lines_removed",
    "git.lines_staged_added",
    "git.lines_staged_removed",
    "git.last_commit_age_secs",
    "git.commit_summary",
    "git.push_ahead",
    "git.push_behind",
    "git.staged",
    "git.unstaged",
    "git.untracked",
    "git.dirty",
];

/// Where a path's stamp is published (not a key of `get --list`).
pub const STAMP_KEY: &str = "git.stamp";

/// The stamp of `files` now, as the daemon takes it: for each, (inode, size,
/// modification ns, change ns), zeros for one that is absent.
pub fn stamp_files(files: &[PathBuf]) -> Vec<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::with_capacity(files.len() * 4);
    for f in files {
        match std::fs::symlink_metadata(f) {
            Ok(m) => out.extend([
                m.ino(),
                m.size(),
                (m.mtime() as u64).wrapping_mul(1_000_000_000) + m.mtime_nsec() as u64,
                (m.ctime() as u64).wrapping_mul(1_000_000_000) + m.ctime_nsec() as u64,
            ]),
            Err(_) => out.extend([0, 0, 0, 0]),
        }
    }
    out
}
