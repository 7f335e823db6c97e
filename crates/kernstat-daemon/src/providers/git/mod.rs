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
//! done.

pub mod schedule;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

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

/// Finds the repository containing `dir`: (work tree root, git dir, common dir).
pub fn discover(dir: &Path) -> io::Result<(PathBuf, PathBuf, PathBuf)> {
    let mut d = dir.canonicalize()?;
    loop {
        let dot = d.join(".git");
        if dot.is_dir() {
            return Ok((d.clone(), dot.clone(), dot));
        }
        if dot.is_file() {
            let text = fs::read_to_string(&dot)?;
            let rel = text
                .trim()
                .strip_prefix("gitdir:")
                .ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidData, ".git file without gitdir:")
                })?
                .trim();
            let git_dir = d.join(rel);
            let common = match fs::read_to_string(git_dir.join("commondir")) {
                Ok(c) => git_dir.join(c.trim()),
                Err(_) => git_dir.clone(),
            };
            return Ok((d.clone(), git_dir, common));
        }
        if !d.pop() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "not in a git repository",
            ));
        }
    }
}

fn is_hex_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// (ref name, id) pairs of packed-refs, with peeled ids of annotated tags.
fn packed_refs(common: &Path) -> Vec<(String, String, Option<String>)> {
    let Ok(text) = fs::read_to_string(common.join("packed-refs")) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String, Option<String>)> = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if let Some(peeled) = line.strip_prefix('^') {
            if let Some(last) = out.last_mut() {
                last.2 = Some(peeled.trim().to_string());
            }
            continue;
        }
        if let Some((id, name)) = line.split_once(' ') {
            out.push((name.trim().to_string(), id.to_string(), None));
        }
    }
    out
}

fn resolve(
    common: &Path,
    git_dir: &Path,
    name: &str,
    packed: &[(String, String, Option<String>)],
) -> Option<String> {
    for base in [git_dir, common] {
        if let Ok(t) = fs::read_to_string(base.join(name)) {
            let t = t.trim();
            if let Some(r) = t.strip_prefix("ref: ") {
                return resolve(common, git_dir, r, packed);
            }
            if is_hex_id(t) {
                return Some(t.to_string());
            }
        }
    }
    packed
        .iter()
        .find(|(n, _, _)| n == name)
        .map(|(_, id, _)| id.clone())
}

fn loose_tags(dir: &Path, prefix: &str, out: &mut Vec<(String, String)>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let full = format!("{prefix}{name}");
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            loose_tags(&e.path(), &format!("{full}/"), out);
        } else if let Ok(id) = fs::read_to_string(e.path()) {
            out.push((full, id.trim().to_string()));
        }
    }
}

/// The commit an annotated tag object points to, when the object is loose (as `git tag
/// -a` leaves it until the next gc packs it, and then packed-refs carries the peeled id):
/// inflate its first bytes, `tag SIZE\0object ID\n...`; tags of tags are followed.
fn peel_loose(common: &Path, id: &str) -> Option<String> {
    use std::io::Read;
    let mut id = id.to_string();
    for _ in 0..4 {
        if !is_hex_id(&id) {
            return None;
        }
        let f = fs::File::open(common.join("objects").join(&id[..2]).join(&id[2..])).ok()?;
        let mut head = [0u8; 256];
        let mut z = flate2::read::ZlibDecoder::new(f);
        let mut n = 0;
        while n < head.len() {
            match z.read(&mut head[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(_) => return None,
            }
        }
        let text = &head[..n];
        let body = &text[text.iter().position(|&b| b == 0)? + 1..];
        let header = &text[..text.iter().position(|&b| b == b' ')?];
        let target = std::str::from_utf8(
            body.strip_prefix(b"object ")?
                .split(|&b| b == b'\n')
                .next()?,
        )
        .ok()?;
        match header {
            b"tag" => {
                let next = target.to_string();
                // The target's own type: a tag object means one more hop.
                if next == id {
                    return None;
                }
                id = next;
                if !is_tag_object(common, &id) {
                    return Some(id);
                }
            }
            _ => return None,
        }
    }
    None
}

/// Whether loose object `id` is a tag (false when it is anything else or not loose).
fn is_tag_object(common: &Path, id: &str) -> bool {
    use std::io::Read;
    let Ok(f) = fs::File::open(common.join("objects").join(&id[..2]).join(&id[2..])) else {
        return false;
    };
    let mut head = [0u8; 4];
    flate2::read::ZlibDecoder::new(f)
        .read_exact(&mut head)
        .is_ok()
        && &head == b"tag "
}

fn upstream(common: &Path, branch: &str) -> Option<String> {
    let config = fs::read_to_string(common.join("config")).ok()?;
    let header = format!("[branch \"{branch}\"]");
    let mut inside = false;
    let (mut remote, mut merge) = (None, None);
    for line in config.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            inside = l == header;
            continue;
        }
        if !inside {
            continue;
        }
        if let Some((k, v)) = l.split_once('=') {
            match k.trim() {
                "remote" => remote = Some(v.trim().to_string()),
                "merge" => merge = Some(v.trim().trim_start_matches("refs/heads/").to_string()),
                _ => {}
            }
        }
    }
    Some(format!("{}/{}", remote?, merge?))
}

/// Reads everything for the repository containing `dir`.
pub fn read(dir: &Path) -> io::Result<GitInfo> {
    let (root, git_dir, common) = discover(dir)?;
    let head = fs::read_to_string(git_dir.join("HEAD"))?;
    let head = head.trim();
    let packed = packed_refs(&common);
    let (branch, commit, detached) = match head.strip_prefix("ref: ") {
        Some(r) => (
            Some(r.trim_start_matches("refs/heads/").to_string()),
            resolve(&common, &git_dir, r, &packed),
            false,
        ),
        None if is_hex_id(head) => (None, Some(head.to_string()), true),
        None => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "unreadable HEAD",
            ))
        }
    };
    let tag = commit.as_ref().and_then(|c| {
        let mut loose = Vec::new();
        loose_tags(&common.join("refs/tags"), "", &mut loose);
        loose.sort();
        loose
            .into_iter()
            .find(|(_, id)| id == c || peel_loose(&common, id).as_deref() == Some(c.as_str()))
            .map(|(n, _)| n)
            .or_else(|| {
                packed
                    .iter()
                    .filter_map(|(n, id, peeled)| {
                        let t = n.strip_prefix("refs/tags/")?;
                        (peeled.as_ref().unwrap_or(id) == c).then(|| t.to_string())
                    })
                    .next()
            })
    });
    let stash = fs::read_to_string(common.join("logs/refs/stash"))
        .map(|s| s.lines().count() as u64)
        .unwrap_or(0);
    let state = if git_dir.join("rebase-merge").exists() || git_dir.join("rebase-apply").exists() {
        "rebase"
    } else if git_dir.join("MERGE_HEAD").exists() {
        "merge"
    } else if git_dir.join("CHERRY_PICK_HEAD").exists() {
        "cherry-pick"
    } else if git_dir.join("REVERT_HEAD").exists() {
        "revert"
    } else if git_dir.join("BISECT_LOG").exists() {
        "bisect"
    } else {
        "none"
    };
    let upstream = branch.as_deref().and_then(|b| upstream(&common, b));
    let push_ref = branch.as_deref().and_then(|b| push_ref(&common, b));
    // As git-prompt.sh reads them: rebase-merge/{msgnum,end}, rebase-apply/{next,last}.
    let num = |p: PathBuf| -> Option<u64> { fs::read_to_string(p).ok()?.trim().parse().ok() };
    let steps = [
        ("rebase-merge", "msgnum", "end"),
        ("rebase-apply", "next", "last"),
    ]
    .iter()
    .find_map(|(dir, step, total)| {
        let d = git_dir.join(dir);
        Some((num(d.join(step))?, num(d.join(total))?))
    });
    Ok(GitInfo {
        root,
        git_dir,
        common_dir: common,
        branch,
        commit,
        detached,
        tag,
        stash,
        state,
        upstream,
        steps,
        push_ref,
    })
}

/// The remote-tracking ref HEAD's branch pushes to, as `git push` with push.default
/// simple/current chooses the remote: `branch.B.pushRemote`, else `remote.pushDefault`,
/// else `branch.B.remote`; the branch of the same name there.
fn push_ref(common: &Path, branch: &str) -> Option<String> {
    let config = fs::read_to_string(common.join("config")).ok()?;
    let mut section = String::new();
    let (mut push_remote, mut push_default, mut remote) = (None, None, None);
    let want = format!("branch \"{branch}\"");
    for line in config.lines() {
        let l = line.trim();
        if let Some(h) = l.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            section = h.trim().to_string();
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
        if section == want && k == "pushremote" {
            push_remote = Some(v);
        } else if section == want && k == "remote" {
            remote = Some(v);
        } else if section == "remote" && k == "pushdefault" {
            push_default = Some(v);
        }
    }
    let r = push_remote.or(push_default).or(remote)?;
    (r != ".").then(|| format!("refs/remotes/{r}/{branch}"))
}

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

/// Lines added and removed between two blobs, as `git diff --numstat` counts them
/// (Myers); binary content (a NUL in the first 8,000 bytes, git's test) counts nothing.
fn line_counts(old: &[u8], new: &[u8]) -> (u64, u64) {
    use gix::diff::blob::{sources::byte_lines, Algorithm, Diff, InternedInput};
    let binary = |b: &[u8]| b[..b.len().min(8000)].contains(&0);
    if binary(old) || binary(new) {
        return (0, 0);
    }
    let input = InternedInput::new(byte_lines(old), byte_lines(new));
    let diff = Diff::compute(Algorithm::Myers, &input);
    (
        u64::from(diff.count_additions()),
        u64::from(diff.count_removals()),
    )
}

/// The upstream's ref name for `info.upstream` ("origin/main" is
/// refs/remotes/origin/main; a local upstream "./main" is refs/heads/main).
fn upstream_ref(upstream: &str) -> String {
    match upstream.strip_prefix("./") {
        Some(local) => format!("refs/heads/{local}"),
        None => format!("refs/remotes/{upstream}"),
    }
}

/// Ahead/behind and the status counts of the repository `info` describes.
pub fn counts(info: &GitInfo) -> Result<GitCounts, String> {
    use gix::status::index_worktree::Item as Worktree;
    let repo = gix::open(&info.root).map_err(|e| e.to_string())?;
    let mut c = GitCounts::default();
    let only = |from: gix::ObjectId, hide: gix::ObjectId| -> Result<u64, String> {
        let walk = repo
            .rev_walk([from])
            .with_hidden([hide])
            .all()
            .map_err(|e| e.to_string())?;
        let mut n = 0;
        for commit in walk {
            commit.map_err(|e| e.to_string())?;
            n += 1;
        }
        Ok(n)
    };
    let peeled = |name: &str| -> Option<gix::ObjectId> {
        Some(repo.find_reference(name).ok()?.peel_to_id().ok()?.detach())
    };
    if let Some(head) = info.commit.as_deref() {
        let head = gix::ObjectId::from_hex(head.as_bytes()).map_err(|e| e.to_string())?;
        if let Some(up) = info
            .upstream
            .as_deref()
            .and_then(|u| peeled(&upstream_ref(u)))
        {
            c.ahead = Some(only(head, up)?);
            c.behind = Some(only(up, head)?);
        }
        if let Some(push) = info.push_ref.as_deref().and_then(peeled) {
            c.push_ahead = Some(only(head, push)?);
            c.push_behind = Some(only(push, head)?);
        }
        if let Ok(commit) = repo.find_commit(head) {
            if let Ok(t) = commit.time() {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64);
                c.last_commit_age_secs = Some(now.saturating_sub(t.seconds).max(0) as u64);
            }
            if let Ok(m) = commit.message() {
                c.commit_summary = Some(m.summary().to_string());
            }
        }
    }
    let blob = |id: &gix::oid| -> Vec<u8> {
        repo.find_object(id)
            .map(|o| o.detach().data)
            .unwrap_or_default()
    };
    let status = repo
        .status(gix::progress::Discard)
        .map_err(|e| e.to_string())?
        .untracked_files(gix::status::UntrackedFiles::Files)
        .index_worktree_submodules(gix::status::Submodule::Given {
            ignore: gix::submodule::config::Ignore::All,
            check_dirty: false,
        })
        .into_iter(Vec::<gix::bstr::BString>::new())
        .map_err(|e| e.to_string())?;
    let add = |acc: &mut (u64, u64), (a, r): (u64, u64)| {
        acc.0 += a;
        acc.1 += r;
    };
    for item in status {
        match item.map_err(|e| e.to_string())? {
            gix::status::Item::TreeIndex(change) => {
                use gix::diff::index::ChangeRef;
                c.staged += 1;
                let counted = match &change {
                    ChangeRef::Addition { id, .. } => line_counts(&[], &blob(id)),
                    ChangeRef::Deletion { id, .. } => line_counts(&blob(id), &[]),
                    ChangeRef::Modification {
                        previous_id, id, ..
                    } => line_counts(&blob(previous_id), &blob(id)),
                    ChangeRef::Rewrite { source_id, id, .. } => {
                        line_counts(&blob(source_id), &blob(id))
                    }
                };
                add(&mut c.staged_lines, counted);
            }
            gix::status::Item::IndexWorktree(Worktree::Modification {
                status: gix::status::plumbing::index_as_worktree::EntryStatus::Conflict { .. },
                ..
            }) => c.conflicted += 1,
            gix::status::Item::IndexWorktree(Worktree::Modification {
                entry,
                rela_path,
                status,
                ..
            }) => {
                use gix::bstr::ByteSlice;
                use gix::status::plumbing::index_as_worktree::{Change, EntryStatus};
                c.unstaged += 1;
                let now: Option<Vec<u8>> = match status {
                    EntryStatus::Change(Change::Removed) => Some(Vec::new()),
                    EntryStatus::Change(Change::Modification { .. }) => {
                        gix::path::from_bstr(rela_path.as_slice().as_bstr())
                            .ok()
                            .and_then(|rel| fs::read(info.root.join(rel)).ok())
                    }
                    _ => None,
                };
                if let Some(now) = now {
                    add(&mut c.lines, line_counts(&blob(&entry.id), &now));
                }
            }
            gix::status::Item::IndexWorktree(Worktree::Rewrite { .. }) => c.unstaged += 1,
            gix::status::Item::IndexWorktree(Worktree::DirectoryContents { entry, .. }) => {
                if entry.status == gix::dir::entry::Status::Untracked {
                    c.untracked += 1;
                }
            }
        }
    }
    Ok(c)
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

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let g = d.path().join(".git");
        fs::create_dir_all(g.join("refs/heads")).unwrap();
        fs::create_dir_all(g.join("refs/tags/rel")).unwrap();
        fs::create_dir_all(g.join("logs/refs")).unwrap();
        fs::create_dir_all(d.path().join("src/deep")).unwrap();
        fs::write(g.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        fs::write(g.join("refs/heads/main"), format!("{A}\n")).unwrap();
        fs::write(g.join("config"), "[core]\n\tbare = false\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n").unwrap();
        d
    }

    #[test]
    fn branch_commit_upstream_from_a_subdirectory() {
        let d = repo();
        let i = read(&d.path().join("src/deep")).unwrap();
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
        let i = read(d.path()).unwrap();
        assert_eq!(i.commit.as_deref(), Some(A), "resolved through packed-refs");
        assert_eq!(
            i.tag.as_deref(),
            Some("v1.0"),
            "annotated tag, by its peeled id"
        );
        assert_eq!(i.stash, 2);
        assert_eq!(i.state, "merge");
        fs::create_dir(g.join("rebase-merge")).unwrap();
        assert_eq!(read(d.path()).unwrap().state, "rebase");
    }

    #[test]
    fn detached_head_and_loose_tag() {
        let d = repo();
        let g = d.path().join(".git");
        fs::write(g.join("HEAD"), format!("{B}\n")).unwrap();
        fs::write(g.join("refs/tags/rel/2"), format!("{B}\n")).unwrap();
        let i = read(d.path()).unwrap();
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
        let i = read(wt.path()).unwrap();
        assert_eq!(
            i.commit.as_deref(),
            Some(A),
            "refs come from the common dir"
        );
    }

    #[test]
    fn outside_a_repository() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read(d.path()).unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    /// Runs git in `dir` with a fixed identity; its stdout. A failure fails the test,
    /// except for merge and rebase, which stop on purpose in some tests.
    pub(super) fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.org",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .env("GIT_EDITOR", "true")
            .output()
            .expect("run git");
        assert!(
            out.status.success() || matches!(args[0], "merge" | "rebase"),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn git_out(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[test]
    fn counts_agree_with_git() {
        if !kernstat_testkit::tool_gate("git") {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let up = d.path().join("up");
        fs::create_dir(&up).unwrap();
        git(&up, &["init", "-q"]);
        fs::write(up.join("a"), "a\n").unwrap();
        git(&up, &["add", "a"]);
        git(&up, &["commit", "-qm", "a"]);
        git(d.path(), &["clone", "-q", "up", "work"]);
        let work = d.path().join("work");
        for f in ["b", "c"] {
            fs::write(work.join(f), f).unwrap();
            git(&work, &["add", f]);
            git(&work, &["commit", "-qm", f]);
        }
        fs::write(up.join("d"), "d").unwrap();
        git(&up, &["add", "d"]);
        git(&up, &["commit", "-qm", "d"]);
        git(&work, &["fetch", "-q"]);
        // One staged new file, one modified tracked file, two untracked files (one in a
        // new directory), one ignored file.
        fs::write(work.join("s"), "s").unwrap();
        git(&work, &["add", "s"]);
        fs::write(work.join("a"), "changed\n").unwrap();
        fs::create_dir(work.join("newdir")).unwrap();
        fs::write(work.join("newdir/u2"), "u").unwrap();
        fs::write(work.join("u1"), "u").unwrap();
        fs::write(work.join(".git/info/exclude"), "*.log\n").unwrap();
        fs::write(work.join("x.log"), "ignored").unwrap();

        let info = read(&work).unwrap();
        assert_eq!(info.upstream.as_deref(), Some("origin/main"));
        let c = counts(&info).unwrap();
        let lr = git_out(
            &work,
            &["rev-list", "--left-right", "--count", "origin/main...HEAD"],
        );
        let (behind, ahead) = lr.trim().split_once('\t').unwrap();
        assert_eq!((c.ahead, c.behind), (Some(2), Some(1)));
        assert_eq!(
            (c.ahead.unwrap().to_string(), c.behind.unwrap().to_string()),
            (ahead.to_string(), behind.to_string())
        );
        let porcelain = git_out(&work, &["status", "--porcelain", "-uall"]);
        let count =
            |pred: &dyn Fn(&str) -> bool| porcelain.lines().filter(|l| pred(l)).count() as u64;
        let staged = count(&|l| !l.starts_with('?') && !l.starts_with(' '));
        let unstaged = count(&|l| l.as_bytes().get(1).is_some_and(|&b| b != b' ' && b != b'?'));
        let untracked = count(&|l| l.starts_with("??"));
        assert_eq!(
            (c.staged, c.unstaged, c.untracked),
            (staged, unstaged, untracked),
            "{porcelain}"
        );
        assert_eq!((c.staged, c.unstaged, c.untracked), (1, 1, 2));
        let v = count_values(&c);
        assert!(v.contains(&("git.dirty", b"true".to_vec())));

        // No upstream: ahead/behind are null, the rest still counted.
        git(&work, &["checkout", "-qb", "topic"]);
        let c = counts(&read(&work).unwrap()).unwrap();
        assert_eq!((c.ahead, c.behind, c.staged), (None, None, 1));
    }
}

#[cfg(test)]
mod extras {
    use super::tests::git;
    use super::*;

    /// (added, removed) summed over `git diff --numstat` lines.
    fn numstat(out: &str) -> (u64, u64) {
        out.lines().fold((0, 0), |(a, r), l| {
            let mut f = l.split('\t');
            (
                a + f.next().unwrap().parse::<u64>().unwrap(),
                r + f.next().unwrap().parse::<u64>().unwrap(),
            )
        })
    }

    #[test]
    fn lines_summary_age_push_and_tags_agree_with_git() {
        if !kernstat_testkit::tool_gate("git") {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let w = d.path();
        git(w, &["init", "-q"]);
        fs::write(w.join("a"), "1\n2\n3\n4\n").unwrap();
        fs::write(w.join("b"), "x\n").unwrap();
        git(w, &["add", "."]);
        git(w, &["commit", "-qm", "first\n\nbody"]);
        let first = git(w, &["rev-parse", "HEAD"]);
        fs::write(w.join("b"), "x\ny\n").unwrap();
        git(w, &["commit", "-qam", "second: the summary"]);
        // A push remote one commit behind.
        git(w, &["update-ref", "refs/remotes/fork/main", &first]);
        git(w, &["config", "branch.main.pushRemote", "fork"]);
        // Annotated, loose: the ref names the tag object, not the commit.
        git(w, &["tag", "-a", "v2", "-m", "release"]);
        // Unstaged: a modified with 2 added and 1 removed; staged: b with 1 added.
        fs::write(w.join("a"), "1\n3\n4\n5\n6\n").unwrap();
        fs::write(w.join("c"), "new\nfile\n").unwrap();
        git(w, &["add", "c"]);
        let info = read(w).unwrap();
        assert_eq!(
            info.tag.as_deref(),
            Some("v2"),
            "the loose annotated tag, peeled"
        );
        let c = counts(&info).unwrap();
        assert_eq!(c.lines, numstat(&git(w, &["diff", "--numstat"])));
        assert_eq!(
            c.staged_lines,
            numstat(&git(w, &["diff", "--cached", "--numstat"]))
        );
        assert_eq!(
            c.commit_summary.as_deref(),
            Some(git(w, &["log", "-1", "--format=%s"]).as_str())
        );
        let ct: u64 = git(w, &["log", "-1", "--format=%ct"]).parse().unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(c.last_commit_age_secs.unwrap().abs_diff(now - ct) <= 2);
        let ahead: u64 = git(w, &["rev-list", "--count", "fork/main..HEAD"])
            .parse()
            .unwrap();
        assert_eq!((c.push_ahead, c.push_behind), (Some(ahead), Some(0)));
        assert_eq!(c.conflicted, 0);
    }

    #[test]
    fn a_conflict_and_a_rebase_at_step_two_of_three() {
        if !kernstat_testkit::tool_gate("git") {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let w = d.path();
        git(w, &["init", "-q"]);
        fs::write(w.join("f"), "base\n").unwrap();
        fs::write(w.join("g"), "base\n").unwrap();
        git(w, &["add", "."]);
        git(w, &["commit", "-qm", "base"]);
        git(w, &["checkout", "-qb", "other"]);
        fs::write(w.join("f"), "other\n").unwrap();
        fs::write(w.join("g"), "other\n").unwrap();
        git(w, &["commit", "-qam", "other"]);
        git(w, &["checkout", "-q", "main"]);
        fs::write(w.join("f"), "main\n").unwrap();
        fs::write(w.join("g"), "main\n").unwrap();
        git(w, &["commit", "-qam", "main"]);
        git(w, &["merge", "other"]);
        let info = read(w).unwrap();
        assert_eq!(info.state, "merge");
        let unmerged = git(w, &["diff", "--name-only", "--diff-filter=U"])
            .lines()
            .count() as u64;
        assert_eq!(unmerged, 2);
        let c = counts(&info).unwrap();
        assert_eq!(c.conflicted, unmerged);
        git(w, &["merge", "--abort"]);

        // Three commits, the second marked `edit`: the rebase stops at step 2 of 3.
        for i in 1..=3 {
            fs::write(w.join("f"), format!("{i}\n")).unwrap();
            git(w, &["commit", "-qam", &format!("c{i}")]);
        }
        let out = std::process::Command::new("git")
            .args(["rebase", "-q", "-i", "HEAD~3"])
            .env("GIT_SEQUENCE_EDITOR", "sed -i 2s/^pick/edit/")
            .current_dir(w)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let info = read(w).unwrap();
        assert_eq!(info.state, "rebase");
        assert_eq!(info.steps, Some((2, 3)));
        git(w, &["rebase", "--abort"]);
        assert_eq!(read(w).unwrap().steps, None);
    }
}
