/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * oom.h: an OOM kill as oom.bpf.c reports it through its ring buffer.
 */
#ifndef KERNSTAT_OOM_H
#define KERNSTAT_OOM_H

struct ks_oom_event {
	__u64 boot_ns;        /* when (CLOCK_BOOTTIME) */
	__u64 memcg_id;       /* the victim's memory cgroup (kernfs node id), 0: unknown */
	__u64 rss_pages;      /* its resident set at the kill */
	__u64 total_vm_pages; /* its virtual size */
	__u32 pid;            /* the victim (tgid) */
	__u32 uid;
	__u32 killer_pid;     /* the task whose allocation (or limit write) invoked the killer */
	__s32 oom_score_adj;
	__u32 pid_only;       /* the kernel's older tracepoint: the pid alone */
	__u32 pad;
	char comm[16];
	char killer_comm[16];
};

#endif /* KERNSTAT_OOM_H */
