/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * arch.h: the one place where kernstat's BPF code differs by architecture: the layout
 * of the user registers a syscall wrapper receives (struct pt_regs *), which
 * bpf_tracing.h's PT_REGS_PARM*_CORE_SYSCALL read by field name. Only the fields read
 * are declared; CO-RE relocates them (kernel.h wraps this in preserve_access_index).
 *
 * The wrappers' names are not here: userspace sets each fexit program's target
 * (kernstat-bpf's kernel.rs: __x64_sys_write, __arm64_sys_write). Everything else in
 * bpf/ is architecture-neutral (tracepoints, iterators, the socket functions).
 *
 * Built for x86_64 and arm64 (crates/kernstat-bpf/tests/arches.rs compiles every
 * object for both); another architecture stops the build here, with this message.
 */
#ifndef KERNSTAT_ARCH_H
#define KERNSTAT_ARCH_H

#if defined(__TARGET_ARCH_x86)
/* x86_64: the syscall's arguments in di, si, dx, r10, r8, r9. */
struct pt_regs {
	unsigned long di;
	unsigned long si;
	unsigned long dx;
	unsigned long cx;
	unsigned long r10;
	unsigned long r8;
	unsigned long r9;
};
#elif defined(__TARGET_ARCH_arm64)
/* arm64: x0-x7 in regs[] (the first argument, which the return value overwrites, also
 * in pt_regs::orig_x0: bpf_tracing.h reads it through its own pt_regs___arm64). */
struct user_pt_regs {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
};
struct pt_regs;
#else
#error "kernstat's BPF programs know the registers of x86_64 and arm64 (bpf/arch.h)"
#endif

#endif /* KERNSTAT_ARCH_H */
