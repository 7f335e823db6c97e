// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * exits.bpf.c: every process that ends, with its final counters, for the flight
 * recorder. A process that lived 300 ms between two samples is in no task walk; this
 * hook sees it once, when its last thread exits (signal->live has dropped to zero), and
 * puts one record in a ring buffer that the recorder drains at each sample.
 *
 * At sched_process_exit the last thread still runs. The counters are the signal's
 * totals of released threads plus every thread still on signal->thread_head, this one
 * included (threads.bpf.h, the sampler's rule). Not this thread plus the signal's
 * totals alone: pthread_join returns before the joined thread is released (its tid is
 * cleared in exit_mm, __exit_signal comes later), so a process could end with a thread
 * that burned all its CPU in neither (in the 6.1 guest, 34 ms recorded of 342), and a
 * leader that exited before its threads was missed too. The peak RSS is in
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
#include "threads.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* 256 KiB: 2,730 exits between two reads (a fork storm of 546 processes a second at
 * the default 5 s); beyond that they are counted in `lost`. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} exits SEC(".maps");

const volatile __u32 reader_pidns_inum = 0;

__u64 lost = 0;

/* Never written: it puts struct ks_exit in the skeleton's types for userspace. */
struct ks_exit layout = {};

SEC("tp_btf/sched_process_exit")
int BPF_PROG(record_exit, struct task_struct *task)
{
	struct signal_struct *sig = task->signal;
	struct task_struct *leader = task->group_leader;
	struct group_sum g = {};
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
	/* The exiting thread is on the list too: it is released after this tracepoint. */
	ks_sum_threads(sig, &g);
	e->cpu_ns = BPF_CORE_READ(sig, sum_sched_runtime) + g.cpu_ns;
	e->read_bytes = BPF_CORE_READ(sig, ioac.read_bytes) + g.read_bytes;
	e->write_bytes = BPF_CORE_READ(sig, ioac.write_bytes) + g.write_bytes;
	e->maxrss_pages = BPF_CORE_READ(sig, maxrss);
	e->exit_code = BPF_CORE_READ(sig, group_exit_code);
	if (!e->exit_code)
		e->exit_code = BPF_CORE_READ(task, exit_code);
	e->_pad = 0;
	BPF_CORE_READ_STR_INTO(&e->comm, leader, comm);
	bpf_ringbuf_submit(e, 0);
	return 0;
}
