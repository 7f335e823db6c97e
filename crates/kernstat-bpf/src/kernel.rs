//! What this kernel lets kernstat attach, decided in one place for every collector and
//! for `kernstat doctor`: the attachment kinds (named once, [`Attach`]), what the
//! kernel's BTF says (read once per process and kept: [`features`]), whether BPF
//! trampolines may be attached (tried once: [`trampolines`]), and the architecture's
//! names (the syscall wrappers fexit attaches to).
//!
//! Every kernel-version and architecture difference the Rust side meets is decided here,
//! from what the running kernel has, never from its version number; the BPF side's are
//! in bpf/compat.bpf.h and bpf/arch.h.

use std::sync::OnceLock;

use libbpf_rs::btf::types::{Func, FuncProto, Typedef};
use libbpf_rs::btf::{Btf, BtfType, ReferencesType};

/// How a program is attached. One name per kind, used by every collector's output
/// (`attach` in JSON) and by `doctor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Attach {
    /// BTF-typed tracepoints (`tp_btf`, 5.5+): typed arguments, read directly.
    TpBtf,
    /// Raw tracepoints (`raw_tp`): the same events, arguments read with probe reads.
    RawTp,
    /// fexit on a kernel function (BPF trampolines): arguments and result together.
    Fexit,
    /// Classic tracepoints through tracefs (`syscalls:sys_enter_*` and the like).
    Tracepoints,
}

impl Attach {
    /// "tp_btf", "raw_tp", "fexit" or "tracepoints".
    pub fn as_str(self) -> &'static str {
        match self {
            Attach::TpBtf => "tp_btf",
            Attach::RawTp => "raw_tp",
            Attach::Fexit => "fexit",
            Attach::Tracepoints => "tracepoints",
        }
    }
}

/// What the running kernel's BTF says, for the questions kernstat's collectors ask.
/// Read once ([`features`]); a kernel without BTF answers no to everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// /sys/kernel/btf/vmlinux could be read.
    pub btf: bool,
    /// BTF-typed tracepoints (the `btf_trace_*` types) with task-local storage
    /// (`bpf_task_storage_get`, 5.11+): what runqlat's and the sampler's tp_btf
    /// programs need.
    pub tp_btf: bool,
    /// The socket layer's tracepoints sock:sock_send_length and sock_recv_length (6.3+).
    pub sock_length_tracepoints: bool,
    /// `__sock_sendmsg`, where 6.1.56+ and 6.5+ moved the body of sock_sendmsg (the
    /// syscalls call it directly; fexit on sock_sendmsg then sees no send).
    pub split_sock_sendmsg: bool,
    /// Arguments of each tracepoint kernstat attaches to with tp_btf, where the kernel
    /// has it: the prototypes changed between versions (oom:mark_victim gained the
    /// uid in 6.x; tcp:tcp_retransmit_skb an error code in 6.17; block_rq_issue lost its
    /// queue in 5.11).
    pub tracepoint_args: Vec<(&'static str, usize)>,
}

/// Tracepoints whose argument count a collector needs to know.
const TRACEPOINTS: &[&str] = &[
    "sched_switch",
    "sock_send_length",
    "mark_victim",
    "tcp_retransmit_skb",
    "inet_sock_set_state",
    "block_rq_issue",
    "block_rq_complete",
];

impl Features {
    /// The number of arguments tracepoint `name` passes to a tp_btf program (None: this
    /// kernel has no such tracepoint, or no BTF).
    pub fn tracepoint_arity(&self, name: &str) -> Option<usize> {
        self.tracepoint_args
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, a)| *a)
    }

    fn read() -> Features {
        let Ok(btf) = Btf::from_vmlinux() else {
            return Features::default();
        };
        let func = |name: &str| btf.type_by_name::<Func<'_>>(name).is_some();
        let mut f = Features {
            btf: true,
            split_sock_sendmsg: func("__sock_sendmsg"),
            ..Features::default()
        };
        let task_storage = func("bpf_task_storage_get");
        for tp in TRACEPOINTS {
            if let Some(n) = tracepoint_arity(&btf, tp) {
                f.tracepoint_args.push((tp, n));
            }
        }
        f.tp_btf = task_storage && f.tracepoint_arity("sched_switch").is_some();
        f.sock_length_tracepoints = f.tracepoint_arity("sock_send_length").is_some();
        f
    }
}

/// `typedef void (*btf_trace_NAME)(void *ctx, ARGS...)`: the count of ARGS.
fn tracepoint_arity(btf: &Btf<'_>, name: &str) -> Option<usize> {
    let td = btf.type_by_name::<Typedef<'_>>(&format!("btf_trace_{name}"))?;
    let mut t: BtfType<'_> = td.referenced_type();
    // Through the pointer (and any qualifiers) to the prototype.
    for _ in 0..4 {
        if let Ok(proto) = FuncProto::try_from(t) {
            return Some(proto.len().saturating_sub(1));
        }
        t = t.next_type()?;
    }
    None
}

/// The kernel's features, read from its BTF the first time they are asked for.
pub fn features() -> &'static Features {
    static FEATURES: OnceLock<Features> = OnceLock::new();
    FEATURES.get_or_init(Features::read)
}

/// The prefix of the syscall wrappers on this architecture (fexit attaches to
/// `<prefix>write`): x86_64 `__x64_sys_`, arm64 `__arm64_sys_`. Both take the user's
/// registers as one `struct pt_regs *` (bpf/arch.h reads the arguments from it).
pub const SYSCALL_PREFIX: &str = if cfg!(target_arch = "aarch64") {
    "__arm64_sys_"
} else if cfg!(target_arch = "x86_64") {
    "__x64_sys_"
} else if cfg!(target_arch = "s390x") {
    "__s390x_sys_"
} else if cfg!(target_arch = "riscv64") {
    "__riscv_sys_"
} else {
    "__se_sys_"
};

/// Whether this kernel loads `syscall` programs (5.14+), which the walks by
/// BPF_PROG_RUN are (bpf/walk.bpf.h): an object holding one fails to load where the type
/// is unknown, so collectors load those programs only where this says yes. Probed once
/// per process with a one-instruction program (libbpf_probe_bpf_prog_type).
pub fn syscall_programs() -> bool {
    static PROBED: OnceLock<bool> = OnceLock::new();
    *PROBED.get_or_init(|| {
        libbpf_rs::ProgramType::Syscall
            .is_supported()
            .unwrap_or(false)
    })
}

/// The kernel function fexit attaches to for syscall `name` (`write`, `sendmsg`...).
pub fn syscall_function(name: &str) -> String {
    format!("{SYSCALL_PREFIX}{name}")
}

/// A pidfd for `tid`, the key of task-local storage from userspace. A thread that is
/// not its process's leader needs PIDFD_THREAD (Linux 6.9): before that kernel, or
/// once `tid` has exited, None.
pub fn pidfd_open(tid: u32, thread: bool) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let flags = if thread { libc::PIDFD_THREAD } else { 0 };
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid as libc::pid_t, flags) };
    // SAFETY: a descriptor the call just returned, owned by nobody else.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attach_kinds_have_one_name_each() {
        let names: Vec<&str> = [
            Attach::TpBtf,
            Attach::RawTp,
            Attach::Fexit,
            Attach::Tracepoints,
        ]
        .iter()
        .map(|a| a.as_str())
        .collect();
        assert_eq!(names, ["tp_btf", "raw_tp", "fexit", "tracepoints"]);
    }

    #[test]
    fn syscall_wrappers_are_named_for_this_architecture() {
        #[cfg(target_arch = "x86_64")]
        assert_eq!(syscall_function("write"), "__x64_sys_write");
        #[cfg(target_arch = "aarch64")]
        assert_eq!(syscall_function("write"), "__arm64_sys_write");
    }

    #[test]
    fn features_are_read_once_and_agree_with_btf() {
        let f = features();
        assert!(std::ptr::eq(f, features()), "one reading per process");
        if !std::path::Path::new(crate::loader::VMLINUX_BTF).exists() {
            assert_eq!(*f, Features::default());
            return;
        }
        eprintln!("{f:?}");
        assert!(f.btf);
        // sched_switch(bool preempt, prev, next, prev_state) since 5.18.
        assert!(f.tracepoint_arity("sched_switch").is_some_and(|n| n >= 3));
        assert_eq!(f.tracepoint_arity("no_such_tracepoint"), None);
    }
}
