//! Least privilege for long-running commands: once the BPF programs are loaded and
//! attached, the capabilities that did it are no longer needed (the map, program and
//! link fds keep working), so they are dropped for good.
//!
//! Whether reading the iterator still needs CAP_BPF depends on the kernel: before 6.5
//! every bpf(2) command was refused to callers without CAP_BPF when
//! kernel.unprivileged_bpf_disabled is set (Debian's default); since 6.5 only map and
//! program creation are. Rather than guess from version numbers, `drop_after_load` turns
//! CAP_BPF off in the effective set, runs one real sample, and keeps it only if that
//! sample fails.

use caps::{CapSet, Capability, CapsHashSet};

/// What is left after dropping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// Every capability is gone.
    All,
    /// Only CAP_BPF remains (the kernel needs it for reading the iterator).
    KeptBpf,
    /// Nothing was dropped (not permitted to change capabilities, or no capabilities).
    Nothing,
}

fn set_all(keep: &CapsHashSet) -> Result<(), caps::errors::CapsError> {
    caps::set(None, CapSet::Effective, keep)?;
    caps::set(None, CapSet::Permitted, keep)?;
    caps::set(None, CapSet::Inheritable, &CapsHashSet::new())?;
    // The ambient set may not exist on old kernels; failure to clear it is harmless.
    let _ = caps::clear(None, CapSet::Ambient);
    Ok(())
}

/// Drops every capability; `works_without_bpf` runs one sample with CAP_BPF off in the
/// effective set and says whether it worked.
pub fn drop_after_load(works_without_bpf: impl FnOnce() -> bool) -> Dropped {
    let Ok(permitted) = caps::read(None, CapSet::Permitted) else {
        return Dropped::Nothing;
    };
    if permitted.is_empty() {
        return Dropped::Nothing;
    }
    // SAFETY: prctl with constant arguments.
    unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    let mut only_bpf = CapsHashSet::new();
    if permitted.contains(&Capability::CAP_BPF) {
        only_bpf.insert(Capability::CAP_BPF);
    }
    if caps::set(None, CapSet::Effective, &CapsHashSet::new()).is_err() {
        return Dropped::Nothing;
    }
    if works_without_bpf() {
        return match set_all(&CapsHashSet::new()) {
            Ok(()) => Dropped::All,
            Err(_) => Dropped::Nothing,
        };
    }
    match set_all(&only_bpf) {
        Ok(()) if !only_bpf.is_empty() => Dropped::KeptBpf,
        _ => Dropped::Nothing,
    }
}

use kernstat_sources::users::User;

/// Why switching user failed.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    /// A system call refused.
    #[error("{what}: {source}")]
    Sys {
        /// Which call.
        what: &'static str,
        /// Its error.
        source: std::io::Error,
    },
    /// After switching, the process could still regain root.
    #[error("still able to regain root after switching to {0}; refusing to run")]
    StillRoot(String),
}

fn check(rc: libc::c_int, what: &'static str) -> Result<(), SwitchError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(SwitchError::Sys {
            what,
            source: std::io::Error::last_os_error(),
        })
    }
}

/// Switches this process (call it before any thread exists) from root to `user`, with
/// no supplementary groups and no capabilities, and no way back (no_new_privs). If the
/// kernel still needs CAP_BPF to read an iterator (before 6.5 with
/// unprivileged_bpf_disabled, see the module header), `works_without_bpf` says so and
/// CAP_BPF alone is kept across the switch.
pub fn become_user(
    user: &User,
    works_without_bpf: impl FnOnce() -> bool,
) -> Result<Dropped, SwitchError> {
    let permitted = caps::read(None, CapSet::Permitted).unwrap_or_default();
    let mut keep = CapsHashSet::new();
    if permitted.contains(&Capability::CAP_BPF) {
        let _ = caps::set(None, CapSet::Effective, &CapsHashSet::new());
        if !works_without_bpf() {
            keep.insert(Capability::CAP_BPF);
        }
        let _ = caps::set(None, CapSet::Effective, &permitted);
    }
    // SAFETY: plain system calls with constant or checked arguments; no threads yet.
    unsafe {
        if !keep.is_empty() {
            check(
                libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0),
                "prctl(PR_SET_KEEPCAPS)",
            )?;
        }
        check(libc::setgroups(0, std::ptr::null()), "setgroups")?;
        check(libc::setresgid(user.gid, user.gid, user.gid), "setresgid")?;
        check(libc::setresuid(user.uid, user.uid, user.uid), "setresuid")?;
    }
    // Leaving uid 0 cleared the effective and permitted sets (KEEPCAPS keeps the
    // permitted one); now keep exactly `keep`.
    set_all(&keep).map_err(|e| SwitchError::Sys {
        what: "capset",
        source: std::io::Error::other(e.to_string()),
    })?;
    // SAFETY: prctl with constant arguments; setuid(0) is expected to fail.
    unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        if user.uid != 0 && libc::setuid(0) == 0 {
            return Err(SwitchError::StillRoot(user.name.clone()));
        }
    }
    Ok(if keep.is_empty() {
        Dropped::All
    } else {
        Dropped::KeptBpf
    })
}
