/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * walk.bpf.h: a walk of every task that writes one byte stream, either to a task
 * iterator's seq_file or into a buffer userspace has mapped, so one emit function serves
 * both ways of walking:
 *
 *  - iter/task (5.8+): userspace creates an iterator fd and read(2)s it. The kernel finds
 *    each task by pid (find_ge_pid, get_pid_task: a reference taken and dropped per task)
 *    and copies the records out through the seq_file.
 *  - SEC("syscall"), run by BPF_PROG_RUN over the open-coded task iterator
 *    (bpf_iter_task_new, 6.7+): one walk of the task list under RCU, no reference per
 *    task, records written straight into `walk_buf`, which userspace has mmap-ed.
 *    Measured on the ps record (issue 38, a C harness reading both in one run, kernel
 *    6.18): 30.5 -> 3.2 us of CPU at 68 tasks, 6.4-7.8 -> 1.9-2.5 ms at ~10,000.
 *
 * Userspace sizes `walk_buf` at load (the datasec's last array is resized) and gives the
 * same size in `walk_cap`, a read-only constant the verifier bounds every write with.
 * A walk whose stream does not fit sets `walk_full` and stops, and userspace reads the
 * iterator instead, from then on. On a kernel without the open-coded iterator the program
 * returns KS_WALK_UNSUPPORTED (bpf_ksym_exists is false there and the verifier drops the
 * walk as dead code, so the object still loads: tried on Debian's 6.1); before 5.14,
 * which has no `syscall` programs, userspace does not load it (kernel.rs).
 */
#ifndef KERNSTAT_WALK_BPF_H
#define KERNSTAT_WALK_BPF_H

#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

/* The open-coded task iterator's state (include/linux/bpf.h; not in kernel.h, whose
 * types come from the oldest supported kernel). */
struct bpf_iter_task {
	__u64 __opaque[3];
} __attribute__((aligned(8)));

enum {
	KS_BPF_TASK_ITER_ALL_PROCS = 0, /* BPF_TASK_ITER_ALL_PROCS: thread-group leaders */
	KS_BPF_TASK_ITER_ALL_THREADS = 1, /* BPF_TASK_ITER_ALL_THREADS */
};

extern int bpf_iter_task_new(struct bpf_iter_task *it, struct task_struct *task,
			     unsigned int flags) __weak __ksym;
extern struct task_struct *bpf_iter_task_next(struct bpf_iter_task *it) __weak __ksym;
extern void bpf_iter_task_destroy(struct bpf_iter_task *it) __weak __ksym;
extern void bpf_rcu_read_lock(void) __weak __ksym;
extern void bpf_rcu_read_unlock(void) __weak __ksym;
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __weak __ksym;

/* What a walk program returns besides 0. */
#define KS_WALK_UNSUPPORTED 1

/* The largest single write (a record, a name): a write never starts past
 * walk_cap - KS_WALK_MAX_WRITE, which is all the verifier needs to bound it. */
#define KS_WALK_MAX_WRITE 256
/* The buffer's size in the object; userspace resizes it before load. */
#define KS_WALK_BUF_MIN 4096

const volatile __u32 walk_cap = KS_WALK_BUF_MIN;
__u32 walk_len = 0;
__u32 walk_full = 0;
SEC(".data.walk") __u8 walk_buf[KS_WALK_BUF_MIN];

/* Whether the kernel has the open-coded task iterator (6.7+); the other kfuncs used here
 * are older. Only this one is tested: bpf_ksym_exists() of a kfunc the kernel has loads
 * its address with ld_imm64, which verifiers before 6.4 refuse ("pseudo btf_id ... isn't
 * KIND_VAR") even in dead code, and bpf_rcu_read_lock exists from 6.2. */
static __always_inline bool ks_walk_supported(void)
{
	return bpf_ksym_exists(bpf_iter_task_new);
}

/* The task the open-coded iterator gave, as an untrusted pointer for reading its fields.
 * Every pointer loaded through a trusted or RCU pointer makes the verifier look up four
 * "__safe_trusted"/"__safe_rcu" type names by a linear search of the kernel's BTF
 * (btf_nested_type_is_trusted), and it verifies the loop's body several times: reading
 * through the trusted task took the sampler's load from 0.07 to 0.30 s here (perf: 15 %
 * of a short `bar --bench` in btf_find_by_name_kind). Loads through an untrusted pointer
 * are the same fault-handled loads without that lookup. */
static __always_inline struct task_struct *ks_walk_view(struct task_struct *task)
{
	return bpf_rdonly_cast(task, bpf_core_type_id_kernel(struct task_struct));
}

/* For every thread the task iterator would walk (not the idle task, which heads the task
 * list; in a container, with `pidns` the reader's namespace, only the tasks with a pid in
 * it), runs the statement given, which may use `task` (the trusted pointer, for helpers
 * that take a task) and `t` (its untrusted view, for reading fields), under the RCU read
 * lock the open-coded iterator needs. Needs pidns.bpf.h. */
#define ks_walk_threads(pidns, ...)                                                      \
	do {                                                                             \
		struct bpf_iter_task __it;                                               \
		struct task_struct *task;                                                \
                                                                                         \
		bpf_rcu_read_lock();                                                     \
		bpf_iter_task_new(&__it, NULL, KS_BPF_TASK_ITER_ALL_THREADS);           \
		while ((task = bpf_iter_task_next(&__it))) {                             \
			struct task_struct *t = ks_walk_view(task);                      \
                                                                                         \
			if (walk_full) /* userspace reads the iterator instead */        \
				break;                                                   \
			if (!t->pid)                                                     \
				continue;                                                \
			if ((pidns) && !ks_ns_pid(t, (pidns), false))                    \
				continue;                                                \
			__VA_ARGS__;                                                     \
		}                                                                        \
		bpf_iter_task_destroy(&__it);                                            \
		bpf_rcu_read_unlock();                                                   \
	} while (0)

/* Starts a buffer walk. */
static __always_inline void ks_walk_begin(void)
{
	walk_len = 0;
	walk_full = 0;
}

/* Appends `n` bytes (a constant, <= KS_WALK_MAX_WRITE) to the stream: to the iterator's seq_file,
 * or, when `seq` is NULL, to walk_buf. The length is read back from memory on every
 * write: a length kept in a register would make every step of the walk a new verifier
 * state, and the loop would never converge. */
static __always_inline void ks_walk_write(struct seq_file *seq, const void *p, __u32 n)
{
	__u32 off;

	if (seq) {
		bpf_seq_write(seq, (void *)p, n);
		return;
	}
	off = walk_len;
	if (walk_full || off > walk_cap - KS_WALK_MAX_WRITE || n > KS_WALK_MAX_WRITE) {
		walk_full = 1;
		return;
	}
	/* A copy the compiler unrolls (n is a constant at every call): a probe read here
	 * was 12 % of a sample at 300 processes (copy_from_kernel_nofault). */
	__builtin_memcpy(&walk_buf[off], p, n);
	walk_len = off + n;
}

#endif /* KERNSTAT_WALK_BPF_H */
