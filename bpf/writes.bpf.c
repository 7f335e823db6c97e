// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * writes.bpf.c: sizes of write-family (or, with --reads, read-family) syscalls, per
 * process, syscall and file kind.
 *
 * Where the cost lands matters more than anything here: the classic way (bpftrace on
 * tracepoint:syscalls:sys_enter_write) switches on the syscall tracepoints, which put
 * every task on the machine on the slow syscall path. Two attachments, chosen by
 * userspace (the cheaper one when the kernel allows it):
 *  - fexit on the syscall wrappers (__x64_sys_write, __arm64_sys_write, ...: userspace
 *    sets each program's target for the architecture): one program per syscall that
 *    sees arguments and result together; other syscalls, and other processes' other
 *    syscalls, pay nothing. Needs BPF trampolines (some kernels, like this project's CI
 *    kernel, refuse them: EPERM at load).
 *  - the per-syscall tracepoints syscalls:sys_{enter,exit}_X: enter remembers fd kind
 *    and size per thread, exit records. Every syscall of every task takes the slow
 *    path while they are on (measured here: +8 ns on getppid, +47 ns on a write).
 * Either way the process filter (pids, comm) runs first, before any map work.
 */
#include "kernel.h"
#include "compat.bpf.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "writes.h"
#include "bits.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 targ_pids[KS_WR_MAX_PIDS] = {};
const volatile __u32 n_pids = 0;
const volatile char targ_comm[KS_WR_COMM_LEN] = {};
const volatile bool filter_comm = false;
const volatile __u32 self_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 8192);
	__type(key, struct ks_wr_key);
	__type(value, struct ks_wr_val);
} stats SEC(".maps");

/* A zeroed value to create entries from (too big for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ks_wr_val);
} zero_val SEC(".maps");

/* Tracepoint path: what sys_enter saw, until sys_exit. */
struct pending {
	__u64 asked;
	__u8 sys;
	__u8 kind;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);
	__type(value, struct pending);
} inflight SEC(".maps");

/* Referenced so that their BTF (and so the Rust types) are emitted. */
struct ks_wr_key _ks_wr_key_type = {};
struct ks_wr_val _ks_wr_val_type = {};
enum ks_wr_sys _ks_wr_sys_type = 0;
enum ks_wr_kind _ks_wr_kind_type = 0;

static __always_inline bool accept(__u32 tgid)
{
	if (tgid == self_tgid)
		return false;
	if (n_pids) {
		bool hit = false;

		for (int i = 0; i < KS_WR_MAX_PIDS; i++)
			if (i < n_pids && targ_pids[i] == tgid)
				hit = true;
		if (!hit)
			return false;
	}
	if (filter_comm) {
		char comm[KS_WR_COMM_LEN];

		bpf_get_current_comm(comm, sizeof(comm));
		for (int i = 0; i < KS_WR_COMM_LEN; i++) {
			if (comm[i] != targ_comm[i])
				return false;
			if (!comm[i])
				break;
		}
	}
	return true;
}

/* include/uapi/linux/stat.h and the tty majors of Documentation/admin-guide/devices.txt
 * (4: tty, 5: /dev/tty, console, ptmx; 136-143: pseudo-terminal slaves). */
#define KS_S_IFMT 0170000
#define KS_S_IFSOCK 0140000
#define KS_S_IFREG 0100000
#define KS_S_IFCHR 0020000
#define KS_S_IFIFO 0010000

static __always_inline __u8 fd_kind(long fd)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds, *f = 0;
	unsigned int mode, major;
	struct inode *inode;

	if (!fdt || fd < 0 || fd >= BPF_CORE_READ(fdt, max_fds))
		return KS_KIND_OTHER;
	fds = BPF_CORE_READ(fdt, fd);
	bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	if (!f)
		return KS_KIND_OTHER;
	inode = BPF_CORE_READ(f, f_inode);
	mode = BPF_CORE_READ(inode, i_mode) & KS_S_IFMT;
	switch (mode) {
	case KS_S_IFREG:
		return KS_KIND_FILE;
	case KS_S_IFIFO:
		return KS_KIND_PIPE;
	case KS_S_IFSOCK:
		return KS_KIND_SOCKET;
	case KS_S_IFCHR:
		major = BPF_CORE_READ(inode, i_rdev) >> 20;
		if (major == 4 || major == 5 || (major >= 136 && major <= 143))
			return KS_KIND_TTY;
		return KS_KIND_OTHER;
	default:
		return KS_KIND_OTHER;
	}
}

struct iov_sum {
	const struct iovec *iov;
	__u64 total;
};

static long add_iov(__u64 i, struct iov_sum *s)
{
	struct iovec v = {};

	if (bpf_probe_read_user(&v, sizeof(v), s->iov + i))
		return 1;
	s->total += v.iov_len;
	return 0;
}

/* Total length of a user iovec array (at most UIO_MAXIOV = 1024 entries). */
static __always_inline __u64 iov_total(const struct iovec *iov, __u64 n)
{
	struct iov_sum s = { .iov = iov };

	if (n > 1024)
		n = 1024;
	bpf_loop(n, add_iov, &s, 0);
	return s.total;
}

static __always_inline __u64 msg_total(const struct user_msghdr *msg)
{
	struct user_msghdr m = {};

	if (bpf_probe_read_user(&m, sizeof(m), msg))
		return 0;
	return iov_total(m.msg_iov, m.msg_iovlen);
}

static __always_inline __u32 size_slot(__u64 v)
{
	__u32 r = ks_log2_u64(v);

	return r < KS_WR_SLOTS ? r : KS_WR_SLOTS - 1;
}

static __always_inline void record(__u32 tgid, __u8 sys, __u8 kind, __u64 asked, long ret)
{
	struct ks_wr_key key = { .tgid = tgid, .sys = sys, .kind = kind };
	struct ks_wr_val *v;
	__u32 zero = 0, s;

	v = bpf_map_lookup_elem(&stats, &key);
	if (!v) {
		struct ks_wr_val *z = bpf_map_lookup_elem(&zero_val, &zero);

		if (!z)
			return;
		bpf_get_current_comm(z->comm, sizeof(z->comm));
		bpf_map_update_elem(&stats, &key, z, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&stats, &key);
		if (!v)
			return;
	}
	__sync_fetch_and_add(&v->calls, 1);
	__sync_fetch_and_add(&v->asked_bytes, asked);
	s = size_slot(asked);
	if (s >= KS_WR_SLOTS)
		s = KS_WR_SLOTS - 1;
	__sync_fetch_and_add(&v->asked[s], 1);
	if (ret < 0) {
		__sync_fetch_and_add(&v->errors, 1);
		return;
	}
	__sync_fetch_and_add(&v->done_bytes, ret);
	s = size_slot(ret);
	if (s >= KS_WR_SLOTS)
		s = KS_WR_SLOTS - 1;
	__sync_fetch_and_add(&v->done[s], 1);
}

/* --- fexit on the syscall wrappers (targets set by userspace, per architecture) ----- */

#define CURRENT_TGID() ((__u32)(bpf_get_current_pid_tgid() >> 32))

#define FEXIT_PLAIN(name, sys, fdarg, sizearg)                                          \
	SEC("fexit")                                                                    \
	int BPF_PROG(fx_##name, const struct pt_regs *regs, long ret)                   \
	{                                                                               \
		__u32 tgid = CURRENT_TGID();                                              \
		if (!accept(tgid))                                                        \
			return 0;                                                         \
		long fd = PT_REGS_PARM##fdarg##_CORE_SYSCALL(regs);                       \
		record(tgid, sys, fd_kind(fd), PT_REGS_PARM##sizearg##_CORE_SYSCALL(regs), ret); \
		return 0;                                                                 \
	}

#define FEXIT_IOV(name, sys)                                                            \
	SEC("fexit")                                                                    \
	int BPF_PROG(fx_##name, const struct pt_regs *regs, long ret)                   \
	{                                                                               \
		__u32 tgid = CURRENT_TGID();                                              \
		if (!accept(tgid))                                                        \
			return 0;                                                         \
		long fd = PT_REGS_PARM1_CORE_SYSCALL(regs);                               \
		const struct iovec *iov = (void *)PT_REGS_PARM2_CORE_SYSCALL(regs);       \
		record(tgid, sys, fd_kind(fd), iov_total(iov, PT_REGS_PARM3_CORE_SYSCALL(regs)), ret); \
		return 0;                                                                 \
	}

#define FEXIT_MSG(name, sys)                                                            \
	SEC("fexit")                                                                    \
	int BPF_PROG(fx_##name, const struct pt_regs *regs, long ret)                   \
	{                                                                               \
		__u32 tgid = CURRENT_TGID();                                              \
		if (!accept(tgid))                                                        \
			return 0;                                                         \
		const struct user_msghdr *m = (void *)PT_REGS_PARM2_CORE_SYSCALL(regs);   \
		record(tgid, sys, KS_KIND_SOCKET, msg_total(m), ret);                     \
		return 0;                                                                 \
	}

FEXIT_PLAIN(write, KS_WR_WRITE, 1, 3)
FEXIT_PLAIN(pwrite64, KS_WR_PWRITE64, 1, 3)
FEXIT_IOV(writev, KS_WR_WRITEV)
FEXIT_IOV(pwritev, KS_WR_PWRITEV)
FEXIT_IOV(pwritev2, KS_WR_PWRITEV)
FEXIT_PLAIN(sendto, KS_WR_SENDTO, 1, 3)
FEXIT_MSG(sendmsg, KS_WR_SENDMSG)

FEXIT_PLAIN(read, KS_WR_WRITE, 1, 3)
FEXIT_PLAIN(pread64, KS_WR_PWRITE64, 1, 3)
FEXIT_IOV(readv, KS_WR_WRITEV)
FEXIT_IOV(preadv, KS_WR_PWRITEV)
FEXIT_IOV(preadv2, KS_WR_PWRITEV)
FEXIT_PLAIN(recvfrom, KS_WR_SENDTO, 1, 3)
FEXIT_MSG(recvmsg, KS_WR_SENDMSG)

/* --- syscall tracepoints: enter remembers, exit records -------------------------- */

static __always_inline void remember(__u8 sys, __u8 kind, __u64 asked)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct pending p = { .asked = asked, .sys = sys, .kind = kind };

	bpf_map_update_elem(&inflight, &tid, &p, BPF_ANY);
}

static __always_inline void finish(long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct pending *p = bpf_map_lookup_elem(&inflight, &tid);

	if (!p)
		return;
	record(id >> 32, p->sys, p->kind, p->asked, ret);
	bpf_map_delete_elem(&inflight, &tid);
}

#define TP_PAIR(name, enter_body)                                                       \
	SEC("tracepoint/syscalls/sys_enter_" #name)                                    \
	int tp_enter_##name(struct trace_event_raw_sys_enter *ctx)                      \
	{                                                                               \
		if (!accept(CURRENT_TGID()))                                              \
			return 0;                                                         \
		enter_body;                                                               \
		return 0;                                                                 \
	}                                                                               \
	SEC("tracepoint/syscalls/sys_exit_" #name)                                     \
	int tp_exit_##name(struct trace_event_raw_sys_exit *ctx)                        \
	{                                                                               \
		if (!accept(CURRENT_TGID()))                                              \
			return 0;                                                         \
		finish(ctx->ret);                                                         \
		return 0;                                                                 \
	}

#define PLAIN(sys) remember(sys, fd_kind(ctx->args[0]), ctx->args[2])
#define IOV(sys) remember(sys, fd_kind(ctx->args[0]), iov_total((void *)ctx->args[1], ctx->args[2]))
#define MSG(sys) remember(sys, KS_KIND_SOCKET, msg_total((void *)ctx->args[1]))

TP_PAIR(write, PLAIN(KS_WR_WRITE))
TP_PAIR(pwrite64, PLAIN(KS_WR_PWRITE64))
TP_PAIR(writev, IOV(KS_WR_WRITEV))
TP_PAIR(pwritev, IOV(KS_WR_PWRITEV))
TP_PAIR(pwritev2, IOV(KS_WR_PWRITEV))
TP_PAIR(sendto, PLAIN(KS_WR_SENDTO))
TP_PAIR(sendmsg, MSG(KS_WR_SENDMSG))

TP_PAIR(read, PLAIN(KS_WR_WRITE))
TP_PAIR(pread64, PLAIN(KS_WR_PWRITE64))
TP_PAIR(readv, IOV(KS_WR_WRITEV))
TP_PAIR(preadv, IOV(KS_WR_PWRITEV))
TP_PAIR(preadv2, IOV(KS_WR_PWRITEV))
TP_PAIR(recvfrom, PLAIN(KS_WR_SENDTO))
TP_PAIR(recvmsg, MSG(KS_WR_SENDMSG))
