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
];

/// The keys `counts` computes (the rest come from `read`).
pub const COUNT_KEYS: &[&str] = &[
    "git.ahead",
    "git.behind",
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
            .find(|(_, id)| id == c)
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
    })
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
    if let (Some(head), Some(up)) = (info.commit.as_deref(), info.upstream.as_deref()) {
        let head = gix::ObjectId::from_hex(head.as_bytes()).map_err(|e| e.to_string())?;
        if let Ok(mut r) = repo.find_reference(upstream_ref(up).as_str()) {
            let up = r.peel_to_id().map_err(|e| e.to_string())?.detach();
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
            c.ahead = Some(only(head, up)?);
            c.behind = Some(only(up, head)?);
        }
    }
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
    for item in status {
        match item.map_err(|e| e.to_string())? {
            gix::status::Item::TreeIndex(_) => c.staged += 1,
            gix::status::Item::IndexWorktree(
                Worktree::Modification { .. } | Worktree::Rewrite { .. },
            ) => c.unstaged += 1,
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
            j(serde_json::json!(c.staged + c.unstaged + c.untracked > 0)),
        ),
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

    fn git(dir: &Path, args: &[&str]) {
        let st = std::process::Command::new("git")
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
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run git");
        assert!(st.success(), "git {args:?}");
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
