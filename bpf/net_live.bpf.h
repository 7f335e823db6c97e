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

#endif /* KERNSTAT_NET_LIVE_BPF_H */
