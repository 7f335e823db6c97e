// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ps.bpf.c: every task, for `kernstat ps`, from one read of a task iterator.
 *
 * Two programs, one record format:
 *  - ps_tasks (iter/task): every field but the command line.
 *  - ps_tasks_cmdline (iter.s/task, sleepable): the same, plus each process's command
 *    line copied out of its memory with bpf_copy_from_user_task(), as /proc/PID/cmdline
 *    does. That copy walks the other process's page tables under its locks and is most
 *    of the cost (measured at 10,000 processes: about half of 26 ms), so `kernstat ps`
 *    uses this program only when a command line is shown.
 *  - ps_run (syscall, 6.7+): the records of ps_tasks, from one walk of the open-coded
 *    task iterator into a buffer the loading process maps (walk.bpf.h): a fraction of
 *    the iterator's cost, for the process that loaded it (`top`, and `ps` without a pin).
 * The iterator holds a reference on each task while a program runs; every field is read
 * directly through the task's BTF pointers. No per-task state: both iterator programs
 * can be pinned in bpffs and read by unprivileged users (`kernstat ps --pin`); only
 * ps_run writes the walk's globals.
 */
#include "kernel.h"
#include "compat.bpf.h"
#include <bpf/bpf_helpers.h>
#include "ps.h"
#include "pidns.bpf.h"
#include "walk.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The reader's pid namespace in a container (pidns.bpf.h); 0 in the initial one. */
const volatile __u32 reader_pidns_inum = 0;

/* 128, not 256: the record, a kthread name buffer and one chunk share the 512-byte
 * stack (v3's eighth u64 did not fit beside a 256-byte chunk); most command lines are
 * one chunk either way. */
#define CHUNK 128

/* Referenced so that their BTF (and so the Rust types) are emitted. */
struct ks_ps_stream _ks_ps_stream_type = {};
struct ks_ps_rec _ks_ps_rec_type = {};
enum ks_ps_flags _ks_ps_flags_type = 0;

static const char zeros[8] = {};

/* Copies [start, start + len) of the task's memory into the stream, CHUNK bytes at a
 * time through the stack. A chunk that cannot be read (swapped out, unmapped) comes out
 * as zeros: the helper clears the buffer on failure, so the record keeps its length. */
static __always_inline void write_user(struct seq_file *seq, struct task_struct *task,
				       unsigned long start, __u32 len)
{
	char chunk[CHUNK];

	for (__u32 i = 0; i < KS_PS_CMDLINE_MAX / CHUNK; i++) {
		__u32 off = i * CHUNK;
		__u32 n;

		if (off >= len)
			break;
		n = len - off;
		if (n > CHUNK)
			n = CHUNK;
		/* Re-check after a compiler barrier, on the very register passed to the helper:
		 * the 6.1 verifier loses the bound otherwise ("invalid indirect access to stack
		 * ... size=512"). */
		barrier_var(n);
		if (n > CHUNK)
			break;
		bpf_copy_from_user_task(chunk, n, (void *)(start + off), task, 0);
		bpf_seq_write(seq, chunk, n);
	}
}

/* One task's record to the stream (walk.bpf.h: `seq`, or the run's buffer when NULL). */
static __always_inline void emit_task(struct seq_file *seq, struct task_struct *task,
				      bool with_cmdline)
{
	struct ks_ps_rec rec = {};
	struct mm_struct *mm;
	struct signal_struct *sig;
	const struct cred *cred;
	unsigned long arg_start = 0, arg_end = 0;
	char name[KS_PS_NAME_MAX];
	const char *full_name = 0;
	__u32 len = 0, pad;
	long n_name;

	rec.state = ks_task_state_char(task);
	rec.flags = (task->flags & PF_KTHREAD) ? KS_PS_KTHREAD : 0;
	rec.policy = task->policy;
	if (reader_pidns_inum) {
		rec.pid = ks_ns_pid(task, reader_pidns_inum, false);
		rec.tgid = ks_ns_pid(task, reader_pidns_inum, true);
		rec.ppid = ks_ns_pid(task->real_parent, reader_pidns_inum, true);
	} else {
		rec.pid = task->pid;
		rec.tgid = task->tgid;
		rec.ppid = task->real_parent->tgid;
	}
	cred = task->cred;
	rec.uid = cred->uid.val;
	rec.euid = cred->euid.val;
	rec.gid = cred->gid.val;
	rec.nice = task->static_prio - 120;
	rec.prio = task->prio - 100;
	sig = task->signal;
	rec.nr_threads = sig->nr_threads;
	rec.start_ns = task->start_boottime;
	rec.cpu_ns = task->se.sum_exec_runtime;
	rec.run_delay_ns = task->sched_info.run_delay;
	rec.read_bytes = task->ioac.read_bytes;
	rec.write_bytes = task->ioac.write_bytes;
	mm = task->mm;
	rec.rss_pages = ks_mm_rss_pages(mm);
	if (mm)
		rec.vsz_pages = mm->total_vm;
	rec.cgroup_id = task->cgroups->dfl_cgrp->kn->id;
	__builtin_memcpy(rec.comm, task->comm, KS_PS_COMM_LEN);

	if (task->group_leader == task) {
		rec.flags |= KS_PS_LEADER;
		rec.dead_cpu_ns = sig->sum_sched_runtime;
		rec.dead_read_bytes = sig->ioac.read_bytes;
		rec.dead_write_bytes = sig->ioac.write_bytes;
		rec.reaped_children_cpu_ns = sig->cutime + sig->cstime;
		if (with_cmdline && mm) {
			arg_start = mm->arg_start;
			arg_end = mm->arg_end;
		}
		if (arg_end > arg_start) {
			unsigned long n = arg_end - arg_start;

			if (n > KS_PS_CMDLINE_MAX) {
				n = KS_PS_CMDLINE_MAX;
				rec.flags |= KS_PS_CMDLINE_CUT;
			}
			len = n;
		}
	}
	/* A kernel thread has no command line: its full name (when comm cut it) goes in
	 * that place, as /proc/PID/comm and /proc/PID/stat show it. */
	if (rec.flags & KS_PS_KTHREAD) {
		full_name = ks_kthread_full_name(task);
		n_name = ks_wq_worker_name(task, name);
		if (n_name > 0) {
			len = n_name;
			rec.flags |= KS_PS_FULL_NAME;
			full_name = 0;
		}
	}
	if (full_name) {
		n_name = bpf_probe_read_kernel_str(name, sizeof(name), full_name);
		if (n_name > 1) {
			len = n_name - 1; /* without the NUL */
			rec.flags |= KS_PS_FULL_NAME;
		}
	}
	rec.cmdline_len = len;
	pad = (8 - ((sizeof(rec) + len) & 7)) & 7;
	rec.rec_len = sizeof(rec) + len + pad;
	ks_walk_write(seq, &rec, sizeof(rec));
	if (rec.flags & KS_PS_FULL_NAME) {
		if (seq) {
			bpf_seq_write(seq, name, len & (KS_PS_NAME_MAX - 1));
		} else {
			/* The whole buffer (its tail and the padding are overwritten by what
			 * follows, or lie past the stream's end), then the stream's true length. */
			ks_walk_write(NULL, name, KS_PS_NAME_MAX);
			walk_len = walk_len - KS_PS_NAME_MAX + (len & (KS_PS_NAME_MAX - 1));
		}
	} else if (with_cmdline && len) { /* constant-folded away but in ps_tasks_cmdline */
		write_user(seq, task, arg_start, len);
	}
	if (pad) {
		if (seq)
			bpf_seq_write(seq, zeros, pad & 7);
		else
			ks_walk_write(NULL, zeros, 8), walk_len = walk_len - 8 + (pad & 7);
	}
}

static __always_inline void emit_header(struct seq_file *seq)
{
	struct ks_ps_stream hdr = {
		.magic = KS_PS_MAGIC,
		.version = KS_PS_VERSION,
		.rec_size = sizeof(struct ks_ps_rec),
	};

	ks_walk_write(seq, &hdr, sizeof(hdr));
}

static __always_inline int emit_iter(struct bpf_iter__task *ctx, bool with_cmdline)
{
	struct bpf_iter_meta *meta = ctx->meta;
	struct task_struct *task = ctx->task;
	struct seq_file *seq = meta->seq;

	/* Never NULL; said so that the buffer's half of every write is compiled out of
	 * the iterator programs (they touch no globals, and so can be pinned and shared). */
	if (!seq || !task)
		return 0;
	if (meta->seq_num == 0)
		emit_header(seq);
	emit_task(seq, task, with_cmdline);
	return 0;
}

/* The task ps_run is at, for emit_run. */
__u64 run_task = 0;

/* ps_run's emit_task, verified once as a global function (inlined into the run's loop
 * the verifier would walk it once per distinct state at the loop's head: see
 * sampler.bpf.c). The task comes as an address and is read untrusted (ks_walk_view). */
__noinline int emit_run(void)
{
	if (!ks_walk_supported())
		return 0;
	emit_task(NULL, ks_walk_view((struct task_struct *)run_task), false);
	return 0;
}



SEC("iter/task")
int ps_tasks(struct bpf_iter__task *ctx)
{
	return emit_iter(ctx, false);
}

SEC("iter.s/task")
int ps_tasks_cmdline(struct bpf_iter__task *ctx)
{
	return emit_iter(ctx, true);
}

/* ps_tasks' stream from the open-coded task iterator (walk.bpf.h). The idle task (pid 0)
 * heads the task list but is not in the iterator's walk; in a container only the tasks
 * with a pid in the reader's namespace are walked, as the iterator does. */
SEC("syscall")
int ps_run(void *ctx)
{
	if (!ks_walk_supported())
		return KS_WALK_UNSUPPORTED;
	ks_walk_begin();
	emit_header(NULL);
	ks_walk_threads(reader_pidns_inum, {
		run_task = (__u64)task;
		emit_run();
	});
	return 0;
}
