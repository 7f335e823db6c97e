/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * threads.bpf.h: a process's counters summed over its threads, as /proc/PID/stat and
 * /proc/PID/io sum them: signal_struct holds what the released threads used, and every
 * thread not yet released is on signal->thread_head (the leader too, until the group is
 * reaped; a thread that exited and was joined, until __exit_signal). The sampler's walk
 * and the exit hook both add the threads on the list to the signal's totals, so a
 * process reads the same whichever of them reads it.
 */
#ifndef KS_THREADS_BPF_H
#define KS_THREADS_BPF_H

#include "compat.bpf.h"

/* A process with more threads than this is summed over the first ones only (the
 * sampler's records say so with KS_PROC_PARTIAL). */
#define KS_MAX_THREADS (1 << 16)

struct group_sum {
	struct list_head *head;
	struct list_head *pos;
	__u64 cpu_ns;
	__u64 read_bytes;
	__u64 write_bytes;
	__u64 run_delay;
	__u32 d_threads;
	__u32 complete;
};

/* One step along signal->thread_head: add one thread. */
static long add_thread(__u64 index, struct group_sum *g)
{
	struct list_head *pos = g->pos;
	struct task_struct *t;

	if (pos == g->head || !pos) {
		g->complete = 1;
		return 1;
	}
	t = (void *)pos - bpf_core_field_offset(struct task_struct, thread_node);
	g->cpu_ns += BPF_CORE_READ(t, se.sum_exec_runtime);
	g->read_bytes += BPF_CORE_READ(t, ioac.read_bytes);
	g->write_bytes += BPF_CORE_READ(t, ioac.write_bytes);
	g->run_delay += BPF_CORE_READ(t, sched_info.run_delay);
	if (ks_state_char(ks_task_state_probe(t), BPF_CORE_READ(t, exit_state)) == 'D')
		g->d_threads++;
	g->pos = BPF_CORE_READ(pos, next);
	return 0;
}

/* Every thread on sig's list into g (zeroed by the caller). */
static __always_inline void ks_sum_threads(struct signal_struct *sig, struct group_sum *g)
{
	g->head = &sig->thread_head;
	g->pos = BPF_CORE_READ(sig, thread_head.next);
	bpf_loop(KS_MAX_THREADS, add_thread, g, 0);
}

#endif
