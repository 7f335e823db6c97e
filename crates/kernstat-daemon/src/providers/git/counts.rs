//! The git keys that need the object database and the index — ahead/behind of the
//! upstream and the push branch, staged/unstaged/untracked/conflicted counts, changed
//! lines, HEAD's age and summary — computed with gix, never by spawning git.
//!
//! They run only in a daemon reading for its own user (a system daemon answers these
//! keys for nobody else: gix opens a repository with the daemon's rights through plain
//! std I/O). Even so the repository may be hostile (an archive the user unpacked): the
//! files gix opens first are checked to be regular files within bounds (a link to
//! /dev/zero as config or index would otherwise be read without end, a FIFO would
//! block), blobs larger than `MAX_BLOB` are not loaded for line counts (as git counts a
//! file above core.bigFileThreshold as binary), and work-tree files are read through
//! client_files.

use std::path::Path;

use super::{GitCounts, GitInfo};
use crate::client_files::{Rights, Walk};

/// Largest blob (or work-tree file) whose lines are counted; larger ones count as
/// binary (nothing), like git's bigFileThreshold.
pub const MAX_BLOB: u64 = 16 << 20;

/// Refuses a repository whose files gix would open are not what git leaves: each of
/// these that exists must be a regular file (config and alternates small), `objects` a
/// directory. Links are followed by hand (git follows them too).
fn check_layout(info: &GitInfo) -> Result<(), String> {
    use rustix::fs::FileType;
    let git = Walk::to(&info.git_dir, &Rights::Own).map_err(|e| e.to_string())?;
    let common = Walk::to(&info.common_dir, &Rights::Own).map_err(|e| e.to_string())?;
    let regular = |dir: &Walk, rel: &str, cap: Option<u64>| -> Result<(), String> {
        match dir.kind(Path::new(rel)).map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(FileType::RegularFile) => match cap {
                Some(cap) => dir
                    .read(Path::new(rel), cap)
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                None => Ok(()),
            },
            Some(k) => Err(format!("{rel} is not a regular file ({k:?})")),
        }
    };
    regular(&git, "HEAD", Some(64 * 1024))?;
    regular(&git, "index", None)?;
    regular(&common, "config", Some(4 << 20))?;
    regular(&common, "packed-refs", None)?;
    regular(&common, "objects/info/alternates", Some(64 * 1024))?;
    regular(&common, "info/exclude", Some(4 << 20))?;
    match common
        .kind(Path::new("objects"))
        .map_err(|e| e.to_string())?
    {
        Some(FileType::Directory) | None => Ok(()),
        Some(k) => Err(format!("objects is not a directory ({k:?})")),
    }
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
    check_layout(info)?;
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
    // A blob too large to diff counts as binary (nothing), before it is loaded.
    let blob = |id: &gix::oid| -> Option<Vec<u8>> {
        let size = repo.find_header(id).ok()?.size();
        if size > MAX_BLOB {
            return None;
        }
        repo.find_object(id).ok().map(|o| o.detach().data)
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
                let (old, new) = match &change {
                    ChangeRef::Addition { id, .. } => (Some(Vec::new()), blob(id)),
                    ChangeRef::Deletion { id, .. } => (blob(id), Some(Vec::new())),
                    ChangeRef::Modification {
                        previous_id, id, ..
                    } => (blob(previous_id), blob(id)),
                    ChangeRef::Rewrite { source_id, id, .. } => (blob(source_id), blob(id)),
                };
                if let (Some(old), Some(new)) = (old, new) {
                    add(&mut c.staged_lines, line_counts(&old, &new));
                }
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
                            .and_then(|rel| super::files::work_file(&info.root, &rel, MAX_BLOB))
                    }
                    _ => None,
                };
                if let (Some(now), Some(old)) = (now, blob(&entry.id)) {
                    add(&mut c.lines, line_counts(&old, &now));
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

#[cfg(test)]
mod tests {
    use super::super::count_values;
    use super::super::files::read as read_with;
    use super::*;
    use std::fs;

    pub(crate) fn read(dir: &Path) -> std::io::Result<GitInfo> {
        read_with(dir, &Rights::Own)
    }

    /// Runs git in `dir` with a fixed identity; its stdout. A failure fails the test,
    /// except for merge and rebase, which stop on purpose in some tests.
    pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
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
    use super::tests::read;
    use super::*;
    use std::fs;

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
