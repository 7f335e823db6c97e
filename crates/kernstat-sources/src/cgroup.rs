//! cgroup v2 lookups: where the hierarchy is mounted, the path of a cgroup id (ids are
//! the directories' inode numbers, which is what BPF's bpf_get_current_cgroup_id and the
//! task iterator report), and the id and depth of a directory a user names (`runqlat
//! --cgroup`).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::Roots;

/// cgroup2's statfs magic (linux/magic.h).
pub const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// Why a directory cannot be used as a cgroup filter.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// It cannot be read.
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// It is not a directory on a cgroup2 mount.
    #[error("{0}: not a cgroup v2 directory (e.g. /sys/fs/cgroup/user.slice)")]
    NotCgroup2(PathBuf),
}

/// Where cgroup2 is mounted, from `<proc>/self/mounts`.
pub fn cgroup2_mount(roots: &Roots) -> Option<PathBuf> {
    let mounts = std::fs::read_to_string(roots.proc.join("self/mounts")).ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
    })
}

fn is_cgroup2(p: &Path) -> bool {
    // f_type's width differs between architectures: the cast is not always a no-op.
    #[allow(clippy::unnecessary_cast)]
    rustix::fs::statfs(p)
        .map(|s| s.f_type as i64 == CGROUP2_SUPER_MAGIC)
        .unwrap_or(false)
}

/// The cgroup id (its directory's inode) and level (depth below the hierarchy's root)
/// of `path`, which must be a directory on a cgroup2 mount.
pub fn target(path: &Path) -> Result<(u64, i32), TargetError> {
    let io = |e| TargetError::Io(path.to_path_buf(), e);
    let md = std::fs::metadata(path).map_err(io)?;
    if !md.is_dir() || !is_cgroup2(path) {
        return Err(TargetError::NotCgroup2(path.to_path_buf()));
    }
    let canon = path.canonicalize().map_err(io)?;
    let mut level = 0;
    let mut p = canon.as_path();
    while let Some(parent) = p.parent() {
        let same_mount = std::fs::metadata(parent).map_err(io)?.dev() == md.dev();
        if !is_cgroup2(parent) || !same_mount {
            break;
        }
        level += 1;
        p = parent;
    }
    Ok((md.ino(), level))
}

/// cgroup id -> path below the hierarchy's root ("/user.slice/..."), from one walk.
#[derive(Clone, Debug, Default)]
pub struct CgroupPaths {
    by_id: HashMap<u64, String>,
}

impl CgroupPaths {
    /// Walks the cgroup2 hierarchy mounted on this machine (empty without one).
    pub fn scan(roots: &Roots) -> Self {
        cgroup2_mount(roots)
            .map(|root| Self::scan_dir(&root))
            .unwrap_or_default()
    }

    /// Walks the hierarchy whose root directory is `root`.
    pub fn scan_dir(root: &Path) -> Self {
        let mut by_id = HashMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            if let Ok(md) = std::fs::metadata(&dir) {
                let rel = dir.strip_prefix(root).unwrap_or(&dir);
                by_id.insert(md.ino(), format!("/{}", rel.display()));
            }
            if let Ok(rd) = std::fs::read_dir(&dir) {
                for e in rd.flatten() {
                    if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        stack.push(e.path());
                    }
                }
            }
        }
        CgroupPaths { by_id }
    }

    /// The path of `id`: "" for 0 (no cgroup known), "#id" for one that has gone.
    pub fn path(&self, id: u64) -> String {
        self.by_id.get(&id).cloned().unwrap_or_else(|| {
            if id == 0 {
                String::new()
            } else {
                format!("#{id}")
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_a_tree_by_inode() {
        let t = tempfile::tempdir().unwrap();
        let svc = t.path().join("system.slice/cron.service");
        std::fs::create_dir_all(&svc).unwrap();
        let paths = CgroupPaths::scan_dir(t.path());
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        assert_eq!(paths.path(ino(t.path())), "/");
        assert_eq!(paths.path(ino(&svc)), "/system.slice/cron.service");
        assert_eq!(paths.path(0), "");
        assert_eq!(paths.path(u64::MAX), format!("#{}", u64::MAX));
    }

    #[test]
    fn the_mount_comes_from_the_mounts_table() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("self")).unwrap();
        std::fs::write(
            t.path().join("self/mounts"),
            "proc /proc proc rw 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid 0 0\n",
        )
        .unwrap();
        let roots = Roots {
            proc: t.path().to_path_buf(),
            ..Roots::default()
        };
        assert_eq!(
            cgroup2_mount(&roots),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
    }

    #[test]
    fn a_plain_directory_is_not_a_target() {
        let t = tempfile::tempdir().unwrap();
        assert!(matches!(target(t.path()), Err(TargetError::NotCgroup2(_))));
        assert!(matches!(
            target(&t.path().join("missing")),
            Err(TargetError::Io(..))
        ));
    }
}
