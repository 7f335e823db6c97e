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

/* A record as the iterators write it: the first KS_NET_REC_LEN bytes of the storage. */
struct ks_net_rec {
	struct ks_net_key key;
	struct ks_net_val val;
};

/* Takes leader `task`'s counters for a walk's output, if it has any: one copy into
 * `copy`, kept as seen before it is written; true when the caller is to write it. net_exit,
 * for an exit without a place in `exited`, takes the key (tgid 0) and then adds what is
 * past `seen` to its user's counters; the walk writes only if the key is still there
 * after keeping `seen` (the atomic read orders the two). So a walk and an exit at the
 * same moment never both count the same bytes: at worst (the walk kept `seen`, then found
 * the key taken) one walk's bytes of that process are in neither. */
static __always_inline bool ks_net_take(struct task_struct *task, struct ks_net_rec *copy)
{
	struct ks_net_proc *p = bpf_task_storage_get(&net_live, task, 0, 0);

	if (!p || !p->key.tgid)
		return false;
	__builtin_memcpy(copy, p, sizeof(*copy));
	__builtin_memcpy(p->seen_bytes, copy->val.bytes, sizeof(p->seen_bytes));
	__builtin_memcpy(p->seen_calls, copy->val.calls, sizeof(p->seen_calls));
	return __sync_fetch_and_or(&p->key.tgid, 0) != 0;
}

#endif /* KERNSTAT_NET_LIVE_BPF_H */
