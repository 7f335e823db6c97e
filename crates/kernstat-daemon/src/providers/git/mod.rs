//! git.* keys for a directory, read from the repository's own files; git is never
//! spawned (beachcomber measured a `git status` spawn at 5.6 ms; these reads take
//! microseconds).
//!
//! What is read: HEAD (branch, or a detached commit), the branch's ref (a loose file or
//! packed-refs), tags pointing at the commit (loose lightweight tags, and packed tags
//! with their peeled lines), logs/refs/stash (one line per stash), the marker files of
//! an operation in progress (rebase, merge, cherry-pick, revert, bisect), and the
//! branch's upstream from config. Worktrees (.git files, commondir) are followed.
//!
//! Ahead/behind and the staged/unstaged/untracked counts need the object database and
//! the index: `counts` computes them with gix (no git process either). They cost from
//! milliseconds to seconds depending on the repository, so the daemon computes them
//! apart from the file-only keys, off the server's threads, and publishes them when
//! done. `files` reads the rest, guarded against hostile repositories; `schedule`
//! decides when.

pub mod counts;
pub mod files;
pub mod schedule;

use std::path::PathBuf;

use serde::Serialize;

pub use kernstat_client::keys::git::{COUNT_KEYS, GIT_KEYS};

/// What the files say.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GitInfo {
    /// Top directory of the work tree.
    pub root: PathBuf,
    /// The .git directory of this work tree.
    #[serde(skip)]
    pub git_dir: PathBuf,
    /// Where refs live (differs for linked worktrees).
    #[serde(skip)]
    pub common_dir: PathBuf,
    /// Branch name, when on one.
    pub branch: Option<String>,
    /// Commit id (hex), when there is one (not in a fresh repository).
    pub commit: Option<String>,
    /// HEAD points at a commit, not a branch.
    pub detached: bool,
    /// A tag on the commit.
    pub tag: Option<String>,
    /// Stash entries.
    pub stash: u64,
    /// Operation in progress.
    pub state: &'static str,
    /// Upstream branch.
    pub upstream: Option<String>,
    /// Rebase or am progress: (step, total).
    pub steps: Option<(u64, u64)>,
    /// Where HEAD's branch pushes: refs/remotes/REMOTE/BRANCH.
    #[serde(skip)]
    pub push_ref: Option<String>,
}

pub use counts::counts;
pub use files::read;

/// The keys and JSON values for `info`.
pub fn values(info: &GitInfo) -> Vec<(&'static str, Vec<u8>)> {
    let j = |v: serde_json::Value| serde_json::to_vec(&v).unwrap_or_default();
    vec![
        ("git.root", j(serde_json::json!(info.root))),
        ("git.branch", j(serde_json::json!(info.branch))),
        ("git.commit", j(serde_json::json!(info.commit))),
        (
            "git.short",
            j(serde_json::json!(info
                .commit
                .as_ref()
                .map(|c| &c[..7.min(c.len())]))),
        ),
        ("git.detached", j(serde_json::json!(info.detached))),
        ("git.tag", j(serde_json::json!(info.tag))),
        ("git.stash", j(serde_json::json!(info.stash))),
        ("git.state", j(serde_json::json!(info.state))),
        ("git.upstream", j(serde_json::json!(info.upstream))),
        (
            "git.state_step",
            j(serde_json::json!(info.steps.map(|s| s.0))),
        ),
        (
            "git.state_total",
            j(serde_json::json!(info.steps.map(|s| s.1))),
        ),
    ]
}

/// What needs the object database and the index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GitCounts {
    /// Commits on HEAD not on the upstream, when there is an upstream.
    pub ahead: Option<u64>,
    /// Commits on the upstream not on HEAD.
    pub behind: Option<u64>,
    /// Paths staged (HEAD tree vs index).
    pub staged: u64,
    /// Tracked files modified, deleted or renamed in the work tree (index vs work tree).
    pub unstaged: u64,
    /// Untracked files, not ignored.
    pub untracked: u64,
    /// Paths with unresolved conflicts.
    pub conflicted: u64,
    /// Unstaged lines (added, removed).
    pub lines: (u64, u64),
    /// Staged lines (added, removed).
    pub staged_lines: (u64, u64),
    /// Seconds since HEAD's commit time.
    pub last_commit_age_secs: Option<u64>,
    /// HEAD's commit message, first line.
    pub commit_summary: Option<String>,
    /// Commits on HEAD not on the push branch, and the reverse.
    pub push_ahead: Option<u64>,
    /// See `push_ahead`.
    pub push_behind: Option<u64>,
}

/// The keys and JSON values for `counts`.
pub fn count_values(c: &GitCounts) -> Vec<(&'static str, Vec<u8>)> {
    let j = |v: serde_json::Value| serde_json::to_vec(&v).unwrap_or_default();
    vec![
        ("git.ahead", j(serde_json::json!(c.ahead))),
        ("git.behind", j(serde_json::json!(c.behind))),
        ("git.staged", j(serde_json::json!(c.staged))),
        ("git.unstaged", j(serde_json::json!(c.unstaged))),
        ("git.untracked", j(serde_json::json!(c.untracked))),
        (
            "git.dirty",
            j(serde_json::json!(
                c.staged + c.unstaged + c.untracked + c.conflicted > 0
            )),
        ),
        ("git.conflicted", j(serde_json::json!(c.conflicted))),
        ("git.lines_added", j(serde_json::json!(c.lines.0))),
        ("git.lines_removed", j(serde_json::json!(c.lines.1))),
        (
            "git.lines_staged_added",
            j(serde_json::json!(c.staged_lines.0)),
        ),
        (
            "git.lines_staged_removed",
            j(serde_json::json!(c.staged_lines.1)),
        ),
        (
            "git.last_commit_age_secs",
            j(serde_json::json!(c.last_commit_age_secs)),
        ),
        ("git.commit_summary", j(serde_json::json!(c.commit_summary))),
        ("git.push_ahead", j(serde_json::json!(c.push_ahead))),
        ("git.push_behind", j(serde_json::json!(c.push_behind))),
    ]
}
