// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * exits.bpf.c: every process that ends, with its final counters, for the flight
 * recorder. A process that lived 300 ms between two samples is in no task walk; this
 * hook sees it once, when its last thread exits (signal->live has dropped to zero), and
 * puts one record in a ring buffer that the recorder drains at each sample.
 *
 * At sched_process_exit the last thread still runs: its own runtime and I/O are on the
 * task; the other threads' are folded into signal_struct once each is released
 * (__exit_signal), and until then they are on signal->thread_head, where they are added
 * (as the sampler's walk does). pthread_join returns before its thread is released (the
 * tid is cleared in exit_mm), so a process can end while a thread that burned all its
 * CPU is in neither place that the old rule looked at: in the 6.1 guest one was
 * recorded with 34 ms of its 342. A leader that exits before its threads stays on the
 * list too. The peak RSS is in
 * signal->maxrss (do_exit updates it from the mm before the tracepoint). Only processes
 * with a pid in the reader's namespace are recorded (pidns.bpf.h).
 */
#include "kernel.h"
#include "compat.bpf.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "exits.h"
#include "pidns.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* 256 KiB: 2,730 exits between two reads (a fork storm of 546 processes a second at
 * the default 5 s); beyond that they are counted in `lost`. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} exits SEC(".maps");

const volatile __u32 reader_pidns_inum = 0;

__u64 lost = 0;

/* A process with more threads than this has the rest left out (never, in practice: all
 * its other threads have exited when the last one does). */
#define KS_MAX_THREADS (1 << 16)

/* The threads still on signal->thread_head other than the exiting one: exited, not yet
 * released, so their counters are not in signal_struct yet. */
struct unreleased {
	struct list_head *head;
	struct list_head *pos;
	struct task_struct *exiting;
	__u64 cpu_ns;
	__u64 read_bytes;
	__u64 write_bytes;
};

static long add_unreleased(__u64 index, struct unreleased *u)
{
	struct list_head *pos = u->pos;
	struct task_struct *t;

	if (!pos || pos == u->head)
		return 1;
	t = (void *)pos - bpf_core_field_offset(struct task_struct, thread_node);
	if (t != u->exiting) {
		u->cpu_ns += BPF_CORE_READ(t, se.sum_exec_runtime);
		u->read_bytes += BPF_CORE_READ(t, ioac.read_bytes);
		u->write_bytes += BPF_CORE_READ(t, ioac.write_bytes);
	}
	u->pos = BPF_CORE_READ(pos, next);
	return 0;
}

/* Never written: it puts struct ks_exit in the skeleton's types for userspace. */
struct ks_exit layout = {};

SEC("tp_btf/sched_process_exit")
int BPF_PROG(record_exit, struct task_struct *task)
{
	struct signal_struct *sig = task->signal;
	struct task_struct *leader = task->group_leader;
	struct unreleased u = {};
	struct ks_exit *e;
	__u32 tgid;

	if (BPF_CORE_READ(sig, live.counter) != 0)
		return 0; /* not the last thread */
	if (task->flags & PF_KTHREAD)
		return 0;
	tgid = reader_pidns_inum ? ks_ns_pid(task, reader_pidns_inum, true) : task->tgid;
	if (!tgid)
		return 0;
	e = bpf_ringbuf_reserve(&exits, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost, 1);
		return 0;
	}
	e->tgid = tgid;
	e->ppid = reader_pidns_inum ? ks_ns_pid(task->real_parent, reader_pidns_inum, true)
				    : BPF_CORE_READ(task, real_parent, tgid);
	e->uid = BPF_CORE_READ(task, cred, uid.val);
	e->nr_threads_max = BPF_CORE_READ(sig, nr_threads);
	e->start_ns = BPF_CORE_READ(leader, start_boottime);
	e->exit_ns = bpf_ktime_get_boot_ns();
	u.head = &sig->thread_head;
	u.pos = BPF_CORE_READ(sig, thread_head.next);
	u.exiting = task;
	bpf_loop(KS_MAX_THREADS, add_unreleased, &u, 0);
	e->cpu_ns = BPF_CORE_READ(sig, sum_sched_runtime) + task->se.sum_exec_runtime + u.cpu_ns;
	e->read_bytes = BPF_CORE_READ(sig, ioac.read_bytes) + task->ioac.read_bytes +
			u.read_bytes;
	e->write_bytes = BPF_CORE_READ(sig, ioac.write_bytes) + task->ioac.write_bytes +
			 u.write_bytes;
	e->maxrss_pages = BPF_CORE_READ(sig, maxrss);
	e->exit_code = BPF_CORE_READ(sig, group_exit_code);
	if (!e->exit_code)
		e->exit_code = BPF_CORE_READ(task, exit_code);
	e->_pad = 0;
	BPF_CORE_READ_STR_INTO(&e->comm, leader, comm);
	bpf_ringbuf_submit(e, 0);
	return 0;
}
