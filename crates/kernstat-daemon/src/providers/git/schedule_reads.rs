//! One read of a path's files on a blocking thread, and what keeps its answer current:
//! the repository's stamps (the files a change shows in, checked by `stat` from kept
//! directory descriptors) and its inotify watch.

use super::*;

/// One read of a path's files, on a blocking thread.
pub(super) struct ReadJob {
    pub(super) path: PathBuf,
    pub(super) rights: Rights,
    /// The branch's ref as last read (its file is part of the stamp).
    pub(super) branch_ref: Option<String>,
    /// Start watching the repository (the daemon's own user, not yet watched): where
    /// events go, and under which scope.
    pub(super) watch: Option<(mpsc::UnboundedSender<String>, String)>,
}

pub(super) struct ReadOut {
    pub(super) info: std::io::Result<GitInfo>,
    pub(super) watcher: Option<notify::RecommendedWatcher>,
    pub(super) stamping: Option<Stamping>,
    /// The repository's stamp taken *before* the read: a change during the read makes
    /// the next request's stamp differ, and it reads again.
    pub(super) stamp: Vec<u64>,
}

impl ReadJob {
    pub(super) fn run(self) -> ReadOut {
        let before = stamping(&self.path, &self.rights, self.branch_ref.clone());
        let stamp = before.as_ref().map(stamp_of).unwrap_or_default();
        let info = read(&self.path, &self.rights);
        let branch_ref = info
            .as_ref()
            .ok()
            .and_then(|i| i.branch.as_ref().map(|b| format!("refs/heads/{b}")));
        // The descriptors for the next checks, with the branch now read (a new branch
        // makes the stamps differ in length: one read more, then they agree).
        let stamping = match before {
            Some(s)
                if branch_ref == self.branch_ref
                    && matches!(s.dirs, Dirs::Repo { .. }) == info.is_ok() =>
            {
                Some(s)
            }
            _ => stamping(&self.path, &self.rights, branch_ref),
        };
        let watcher = match (&info, self.watch) {
            (Ok(i), Some((tx, scope))) => watch_repo(i, tx, scope),
            _ => None,
        };
        ReadOut {
            info,
            watcher,
            stamping,
            stamp,
        }
    }
}

/// The directories a stamp check looks into (None: not even the directory asked
/// about could be reached).
pub(super) fn stamping(
    path: &std::path::Path,
    rights: &Rights,
    branch_ref: Option<String>,
) -> Option<Stamping> {
    let dup = |w: &Walk| w.fd().try_clone_to_owned().ok();
    match super::super::files::discover(path, rights) {
        Ok(repo) => {
            let (g, c) = (repo.git.path(), repo.common.path());
            let mut files = vec![
                g.join("HEAD"),
                g.join("index"),
                c.join("packed-refs"),
                c.join("logs/refs/stash"),
            ];
            if let Some(r) = &branch_ref {
                files.push(c.join(r));
            }
            // The work tree's own files, for the daemon's own user only (another
            // user's answers are kept current by the poll, see `counts.rs`).
            let work = match rights {
                Rights::Own => work_entries(&repo.git).and_then(|entries| {
                    // The descriptor first: the paths published must be the ones stamped.
                    let fd = Arc::new(dup(&repo.work)?);
                    let top = repo.work.path();
                    files.extend(entries.iter().map(|e| top.join(e)));
                    Some((fd, Arc::new(entries)))
                }),
                _ => None,
            };
            // Every directory stamped on the asking thread must answer `stat` without a
            // server (a linked worktree may sit on another file system than its .git).
            let local = is_local(&repo.git)
                && is_local(&repo.common)
                && (work.is_none() || is_local(&repo.work));
            Some(Stamping {
                local,
                files: Arc::new(files),
                dirs: Dirs::Repo {
                    git: Arc::new(dup(&repo.git)?),
                    common: Arc::new(dup(&repo.common)?),
                    branch_ref,
                    work,
                },
            })
        }
        Err(_) => {
            let mut w = Walk::to(path, rights).ok()?;
            let local = is_local(&w);
            let mut levels = Vec::with_capacity(w.depth() + 1);
            let mut files = Vec::with_capacity(w.depth() + 1);
            loop {
                files.push(w.path().join(".git"));
                levels.push(dup(&w)?);
                if w.depth() == 0 {
                    break;
                }
                w = w.parent();
            }
            Some(Stamping {
                local,
                files: Arc::new(files),
                dirs: Dirs::Outside(Arc::new(levels)),
            })
        }
    }
}

/// At most this many tracked files are stamped: each is one `stat` for the daemon and
/// for every prompt that reads the snapshot (0.6-0.8 µs each here, a C loop of lstat over
/// 128 files; the zsh hook took 175 µs with 63 tracked files, 80 µs in an empty
/// repository). A larger repository's work-tree edits reach the counts through the poll
/// (docs/limits.md).
pub(super) const WORK_STAMP_MAX: usize = 64;
/// An index larger than this holds more entries than are stamped: not read.
const WORK_INDEX_MAX_BYTES: u64 = 64 * 1024;

/// The tracked files a stamp covers, relative to the top: an edit changes a file's size
/// or times, and removing it makes its `stat` fail. Directories are left out on purpose:
/// their times move whenever any file is created in them (a shell's history lock in a
/// repository at $HOME), which would recount on every prompt; a new untracked file is
/// seen by the poll. None (only the poll sees edits) when there are more than
/// [`WORK_STAMP_MAX`], the index cannot be read or is split (the shared part holds the
/// rest), or a path is not UTF-8 (it could not be named to the reader).
pub(super) fn work_entries(git: &Walk) -> Option<Vec<String>> {
    let bytes = git
        .read(std::path::Path::new("index"), WORK_INDEX_MAX_BYTES)
        .ok()?;
    let (state, _) = gix::index::State::from_bytes(
        &bytes,
        filetime::FileTime::zero(),
        gix::hash::Kind::Sha1,
        Default::default(),
    )
    .ok()?;
    if state.link().is_some() || state.entries().len() > WORK_STAMP_MAX {
        return None;
    }
    state
        .entries()
        .iter()
        .map(|e| std::str::from_utf8(e.path(&state)).ok().map(str::to_string))
        .collect()
}

/// Whether `stat` on this directory's file system answers without a server that could
/// hang (network and FUSE file systems are checked in a job instead).
pub(super) fn is_local(w: &Walk) -> bool {
    const NFS: i64 = 0x6969;
    const SMB: i64 = 0x517b;
    const CIFS: i64 = 0xff53_4d42;
    const SMB2: i64 = 0xfe53_4d42;
    const FUSE: i64 = 0x6573_5546;
    const CEPH: i64 = 0x00c3_6400;
    const AFS: i64 = 0x5346_414f;
    const NINEP: i64 = 0x0102_1997;
    // f_type's width differs between architectures.
    #[allow(clippy::unnecessary_cast)]
    match rustix::fs::fstatfs(w.fd()) {
        Ok(s) => ![NFS, SMB, CIFS, SMB2, FUSE, CEPH, AFS, NINEP].contains(&(s.f_type as i64)),
        Err(_) => false,
    }
}

// The stat fields' types differ between architectures.
#[allow(clippy::unnecessary_cast)]
pub(super) fn stamp_of(s: &Stamping) -> Vec<u64> {
    let mut out = Vec::with_capacity(24 + 4 * WORK_STAMP_MAX);
    let mut one = |dir: &OwnedFd, rel: &str| match rustix::fs::statat(
        dir.as_fd(),
        rel,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    ) {
        Ok(st) => out.extend([
            st.st_ino,
            st.st_size as u64,
            (st.st_mtime as u64).wrapping_mul(1_000_000_000) + st.st_mtime_nsec as u64,
            (st.st_ctime as u64).wrapping_mul(1_000_000_000) + st.st_ctime_nsec as u64,
        ]),
        Err(_) => out.extend([0, 0, 0, 0]),
    };
    match &s.dirs {
        Dirs::Repo {
            git,
            common,
            branch_ref,
            work,
        } => {
            one(git, "HEAD");
            one(git, "index");
            one(common, "packed-refs");
            one(common, "logs/refs/stash");
            if let Some(r) = branch_ref {
                one(common, r);
            }
            if let Some((top, entries)) = work {
                for e in entries.iter() {
                    one(top, e);
                }
            }
        }
        Dirs::Outside(levels) => {
            for l in levels.iter() {
                one(l, ".git");
            }
        }
    }
    out
}

/// Publishes the stamp a read was made at (key `git.stamp`, the daemon's own user only:
/// the snapshot holds per-path keys for it alone), so that a reader of the snapshot can
/// tell a cached git value from one the repository has moved past: it `stat`s the same
/// files and compares (lookup.rs).
pub(super) fn publish_stamp(h: &Hub, scope: &str, p: &GitPath) {
    let Some(s) = p.stamping.as_ref().filter(|_| p.rights.uid().is_none()) else {
        return;
    };
    let v = serde_json::json!({ "files": &*s.files, "stamp": p.stamp, "counts_of": p.counts_of });
    h.cache.put(
        STAMP_KEY,
        Some(scope),
        serde_json::to_vec(&v).unwrap_or_default(),
    );
}

pub(super) fn watch_repo(
    info: &GitInfo,
    tx: mpsc::UnboundedSender<String>,
    scope: String,
) -> Option<notify::RecommendedWatcher> {
    let mut w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if res.is_ok() {
            let _ = tx.send(scope.clone());
        }
    })
    .ok()?;
    w.watch(&info.git_dir, RecursiveMode::NonRecursive).ok()?;
    for sub in ["refs", "logs"] {
        let dir = info.common_dir.join(sub);
        if dir.is_dir() {
            let _ = w.watch(&dir, RecursiveMode::Recursive);
        }
    }
    if info.common_dir != info.git_dir {
        let _ = w.watch(&info.common_dir, RecursiveMode::NonRecursive);
    }
    Some(w)
}
