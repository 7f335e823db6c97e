/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * net_live.bpf.h: the task-local storage that holds each live process's network
 * counters (struct ks_net_proc, net.h), defined alike in net.bpf.c, which counts into
 * it, and sampler.bpf.c, whose walk reads it: userspace gives the sampler's map to the
 * counter. Both call it `net_live`, since a reused map takes the kernel's name for it
 * and the skeletons find their maps by name.
 */
#ifndef KERNSTAT_NET_LIVE_BPF_H
#define KERNSTAT_NET_LIVE_BPF_H

#include "net.h"

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ks_net_proc);
} net_live SEC(".maps");

/* Writes leader `task`'s counters into an iterator's output, if it has any, and keeps
 * them as seen. A send in the nanoseconds between the write and the copy counts as
 * seen without being written: it is missed only if the process then exits without a
 * place in `exited` (net.bpf.c's net_exit). */
static __always_inline void ks_net_write(struct seq_file *seq, struct task_struct *task,
					 const __u8 *header, __u32 header_len)
{
	struct ks_net_proc *p = bpf_task_storage_get(&net_live, task, 0, 0);

	if (!p || !p->key.tgid)
		return;
	if (header_len)
		bpf_seq_write(seq, header, header_len);
	bpf_seq_write(seq, p, KS_NET_REC_LEN);
	__builtin_memcpy(p->seen_bytes, p->val.bytes, sizeof(p->seen_bytes));
	__builtin_memcpy(p->seen_calls, p->val.calls, sizeof(p->seen_calls));
}

#endif /* KERNSTAT_NET_LIVE_BPF_H */
