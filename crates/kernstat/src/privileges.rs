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
