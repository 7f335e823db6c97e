//! One sampler per bar configuration. Waybar starts a module per output (monitor), and
//! two identical `kernstat bar` processes would sample the same machine twice. The first
//! takes an flock on `bar-<config hash>.lock` in the runtime directory and publishes each
//! rendered line to `bar-<hash>.out` (write, then rename, so a reader never sees half a
//! line); the others follow that file with inotify and print what it says. When the
//! leader exits, its lock is released and the next follower to notice takes over.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::{flock, inotify, openat, renameat, FlockOperation, Mode, OFlags, CWD};

/// The runtime directory for kernstat's locks and sockets: $XDG_RUNTIME_DIR/kernstat,
/// else /run/kernstat-root for root, else /tmp/kernstat-UID.
pub fn runtime_dir() -> PathBuf {
    crate::runtime::runtime_dir()
}

/// FNV-1a: a stable name for a configuration (not security-relevant).
pub fn config_key(config: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in config.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("paths have no NUL")
}

/// The instance that samples.
pub struct Leader {
    _lock: OwnedFd,
    out: CString,
    tmp: CString,
}

impl Leader {
    /// Publishes one rendered line for followers (a leading ',' of the i3bar protocol is
    /// left to each follower). Errors are ignored: followers are a convenience.
    pub fn publish(&self, line: &[u8]) {
        let line = line.strip_prefix(b",").unwrap_or(line);
        let Ok(fd) = openat(
            CWD,
            self.tmp.as_c_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o600),
        ) else {
            return;
        };
        if rustix::io::write(&fd, line).is_ok() {
            drop(fd);
            let _ = renameat(CWD, self.tmp.as_c_str(), CWD, self.out.as_c_str());
        }
    }
}

/// An instance that prints what the leader publishes.
pub struct Follower {
    lock_path: PathBuf,
    out: PathBuf,
    out_name: Vec<u8>,
    inotify: OwnedFd,
}

/// Who we are.
pub enum Role {
    /// We sample.
    Leader(Leader),
    /// Someone else samples.
    Follower(Follower),
}

/// Takes the lock for `key`, or becomes a follower of whoever holds it.
/// The runtime directory must be ours alone (see crate::runtime): an error
/// says why it is not, and the caller samples alone.
pub fn claim(dir: &Path, key: &str) -> io::Result<Role> {
    crate::runtime::prepare(dir, false)?;
    let lock_path = dir.join(format!("bar-{key}.lock"));
    let out = dir.join(format!("bar-{key}.out"));
    let lock = private_file(&lock_path, OFlags::RDWR | OFlags::CREATE)?;
    match flock(&lock, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {
            let tmp = dir.join(format!("bar-{key}.out.{}", std::process::id()));
            Ok(Role::Leader(Leader {
                _lock: lock,
                out: cpath(&out),
                tmp: cpath(&tmp),
            }))
        }
        Err(rustix::io::Errno::WOULDBLOCK) => {
            let inotify =
                inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
            inotify::add_watch(
                &inotify,
                dir,
                inotify::WatchFlags::MOVED_TO | inotify::WatchFlags::CLOSE_WRITE,
            )?;
            let out_name = out
                .file_name()
                .map(|n| n.as_bytes().to_vec())
                .unwrap_or_default();
            Ok(Role::Follower(Follower {
                lock_path,
                out,
                out_name,
                inotify,
            }))
        }
        Err(e) => Err(e.into()),
    }
}

/// Opens a file of ours in the runtime directory: no links, regular files only.
fn private_file(path: &Path, flags: OFlags) -> io::Result<OwnedFd> {
    crate::runtime::open_private_file(path, flags, 0o600)
}

/// The leader's current line, read through [`private_file`] (a FIFO or a link to
/// /dev/zero in its place is refused, not read).
fn read_line_file(path: &Path, into: &mut Vec<u8>) -> io::Result<()> {
    use std::io::Read;
    let fd = private_file(path, OFlags::RDONLY)?;
    into.clear();
    // A line is at most a few KiB; more is not something a leader wrote.
    fs::File::from(fd).take(1 << 20).read_to_end(into)?;
    Ok(())
}

/// Why following stopped.
pub enum FollowEnd {
    /// Asked to stop (signal) or stdout closed.
    Stop,
    /// The leader is gone: try to lead.
    LeaderGone,
}

impl Follower {
    /// Whether the leader's line file can be trusted: absent (not published yet) or a
    /// regular file of ours; Err says what is there instead.
    pub fn check(&self) -> io::Result<()> {
        match private_file(&self.out, OFlags::RDONLY) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            r => r.map(drop),
        }
    }

    /// Calls `emit` with every line the leader publishes until `stop()` says so or the
    /// leader's lock becomes free. `emit` returns false to stop (stdout closed).
    pub fn follow(
        &self,
        check_every: Duration,
        mut stop: impl FnMut() -> bool,
        mut emit: impl FnMut(&[u8]) -> bool,
    ) -> io::Result<FollowEnd> {
        let mut events = vec![std::mem::MaybeUninit::<u8>::uninit(); 4096];
        let mut line = Vec::with_capacity(8192);
        // Print the current line at once, if there is one.
        // Emits the leader's current line; false once `emit` says stop. A file that
        // is not ours to trust is an error; one that is briefly missing is not.
        let mut show = |line: &mut Vec<u8>| -> io::Result<bool> {
            match read_line_file(&self.out, line) {
                Ok(()) => Ok(emit(line)),
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Err(e),
                Err(_) => Ok(true),
            }
        };
        if !show(&mut line)? {
            return Ok(FollowEnd::Stop);
        }
        loop {
            if stop() {
                return Ok(FollowEnd::Stop);
            }
            let mut fds = [rustix::event::PollFd::new(
                &self.inotify,
                rustix::event::PollFlags::IN,
            )];
            let timeout = rustix::event::Timespec {
                tv_sec: check_every.as_secs() as _,
                tv_nsec: check_every.subsec_nanos() as _,
            };
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(0) | Err(rustix::io::Errno::INTR) => {
                    if self.leader_gone()? {
                        return Ok(FollowEnd::LeaderGone);
                    }
                    continue;
                }
                Ok(_) => {}
                Err(e) => return Err(e.into()),
            }
            let mut reader = inotify::Reader::new(self.inotify.as_fd(), &mut events);
            let mut changed = false;
            while let Ok(ev) = reader.next() {
                if ev
                    .file_name()
                    .map(|n| n.to_bytes() == self.out_name.as_slice())
                    == Some(true)
                {
                    changed = true;
                }
            }
            if changed && !show(&mut line)? {
                return Ok(FollowEnd::Stop);
            }
        }
    }

    fn leader_gone(&self) -> io::Result<bool> {
        let fd = private_file(&self.lock_path, OFlags::RDWR)?;
        Ok(match flock(&fd, FlockOperation::NonBlockingLockShared) {
            Ok(()) => true,
            Err(rustix::io::Errno::WOULDBLOCK) => false,
            Err(e) => return Err(e.into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_distinct() {
        assert_eq!(config_key("a"), config_key("a"));
        assert_ne!(config_key("a"), config_key("b"));
        assert_eq!(config_key("").len(), 16);
    }

    #[test]
    fn second_claim_follows_first_and_sees_its_lines() {
        let dir = tempfile::tempdir().unwrap();
        let Role::Leader(leader) = claim(dir.path(), "k").unwrap() else {
            panic!("first claim leads");
        };
        let Role::Follower(follower) = claim(dir.path(), "k").unwrap() else {
            panic!("second claim follows");
        };
        leader.publish(b",{\"text\":\"1\"}\n");
        let mut got = Vec::new();
        let mut calls = 0;
        let end = follower
            .follow(
                Duration::from_millis(50),
                || {
                    calls += 1;
                    if calls == 2 {
                        leader.publish(b"{\"text\":\"2\"}\n");
                    }
                    calls > 4
                },
                |l| {
                    got.push(String::from_utf8_lossy(l).into_owned());
                    true
                },
            )
            .unwrap();
        assert!(matches!(end, FollowEnd::Stop));
        assert_eq!(got.first().map(String::as_str), Some("{\"text\":\"1\"}\n"));
        assert!(got.iter().any(|l| l == "{\"text\":\"2\"}\n"), "{got:?}");
        // The leader still holds the lock.
        assert!(!follower.leader_gone().unwrap());
        drop(leader);
        assert!(follower.leader_gone().unwrap());
    }
}
