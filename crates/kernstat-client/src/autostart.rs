//! Starting the user daemon when a client finds none, so that prompts, tmux lines and
//! scripts get cached values from their second question on instead of computing every
//! time.
//!
//! Only the user daemon at the default socket is started (a `--socket` names a daemon
//! someone else runs; a dead system daemon is the administrator's). Where the user's
//! systemd manager runs and a `kernstat.service` user unit is installed, the unit is
//! started (`systemctl --user start --no-block`), so it is supervised and logged like
//! any service; otherwise `kernstat daemon` is spawned in its own session. Either way
//! under an exclusive lock in the runtime directory, taken without waiting and handed
//! to the spawned daemon, which holds it for its whole life: of many shells opening at
//! once, one starts the daemon and the others carry on without. `KERNSTAT_NO_AUTOSTART=1`
//! turns it off.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::runtime;
use crate::session::{runtime_dir, user_socket};
use rustix::fs::{FlockOperation, OFlags};

/// Tells the spawned daemon which descriptor is the lock (see [`adopt_lock`]).
const LOCK_FD_VAR: &str = "KERNSTAT_AUTOSTART_LOCK_FD";

/// In a daemon that autostart spawned: marks the inherited lock close-on-exec, so that
/// the programs it runs (script providers) do not hold the lock after it is gone.
pub fn adopt_lock() {
    let Some(fd) = std::env::var(LOCK_FD_VAR)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return;
    };
    // SAFETY: fcntl on a descriptor number; an invalid one fails with EBADF.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
        }
    }
}

/// What happened, for the client's message.
#[derive(Debug, PartialEq, Eq)]
pub enum Started {
    /// The daemon was spawned (its stderr goes to this log).
    Spawned(PathBuf),
    /// The systemd user unit was started.
    Unit,
    /// Another client holds the lock: a daemon is starting or running.
    Busy,
}

/// Whether the user turned autostart off.
pub fn disabled() -> bool {
    std::env::var_os("KERNSTAT_NO_AUTOSTART").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Starts the user daemon if `socket` is its socket and autostart is on. None: not
/// tried (off, another socket, or the runtime directory cannot be used).
pub fn start_user_daemon(socket: &Path) -> Option<Result<Started, String>> {
    if disabled() || socket != user_socket() {
        return None;
    }
    let dir = runtime_dir();
    runtime::prepare(&dir, false).ok()?;
    Some(start_in(&dir))
}

fn start_in(dir: &Path) -> Result<Started, String> {
    let lock = runtime::open_private_file(
        &dir.join("autostart.lock"),
        OFlags::CREATE | OFlags::RDWR,
        0o600,
    )
    .map_err(|e| format!("autostart lock: {e}"))?;
    if rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive).is_err() {
        return Ok(Started::Busy);
    }
    if let Some(unit) = user_unit() {
        let ok = Command::new("systemctl")
            .args(["--user", "start", "--no-block", "kernstat.service"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Ok(Started::Unit);
        }
        eprintln!(
            "kernstat: systemctl --user start kernstat.service failed ({}); starting the daemon directly",
            unit.display()
        );
    }
    spawn(dir, lock)
}

/// The installed user unit, when the user's systemd manager runs.
fn user_unit() -> Option<PathBuf> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")?;
    if !Path::new(&runtime).join("systemd/private").exists() {
        return None;
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")))?;
    unit_in(&[
        config.join("systemd/user"),
        "/etc/systemd/user".into(),
        "/usr/local/lib/systemd/user".into(),
        "/usr/lib/systemd/user".into(),
        "/lib/systemd/user".into(),
    ])
}

fn unit_in(dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter()
        .map(|d| d.join("kernstat.service"))
        .find(|u| u.exists())
}

/// `kernstat daemon` in a session of its own (a closing terminal does not hang it
/// up), stdio away from the terminal, stderr appended to `daemon.log`, holding `lock`.
fn spawn(dir: &Path, lock: OwnedFd) -> Result<Started, String> {
    let exe = std::env::current_exe().map_err(|e| format!("autostart: {e}"))?;
    let log_path = dir.join("daemon.log");
    let log = runtime::open_private_file(
        &log_path,
        OFlags::CREATE | OFlags::WRONLY | OFlags::APPEND,
        0o600,
    )
    .map_err(|e| format!("autostart log {}: {e}", log_path.display()))?;
    let lock_fd = lock.as_raw_fd();
    let mut cmd = Command::new(exe);
    cmd.arg("daemon")
        .env(LOCK_FD_VAR, lock_fd.to_string())
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log));
    // SAFETY: between fork and exec only async-signal-safe calls (setsid, fcntl) on
    // this process's own descriptors.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            // Keep the lock across exec: the daemon holds it while it lives.
            let flags = libc::fcntl(lock_fd, libc::F_GETFD);
            libc::fcntl(lock_fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            Ok(())
        });
    }
    cmd.spawn().map_err(|e| format!("autostart: {e}"))?;
    drop(lock);
    Ok(Started::Spawned(log_path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_unit_directory_holding_the_unit_wins() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        assert_eq!(unit_in(&[a.clone(), b.clone()]), None);
        std::fs::write(b.join("kernstat.service"), "").unwrap();
        assert_eq!(
            unit_in(&[a.clone(), b.clone()]),
            Some(b.join("kernstat.service"))
        );
        std::fs::write(a.join("kernstat.service"), "").unwrap();
        assert_eq!(unit_in(&[a.clone(), b]), Some(a.join("kernstat.service")));
    }
}
