/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * exits.h: one record per process that ended (its last thread exited), with the final
 * counters the recorder keeps for it. Shared with Rust only through the skeleton
 * libbpf-cargo generates.
 */
#ifndef KERNSTAT_EXITS_H
#define KERNSTAT_EXITS_H

#define KS_EXIT_COMM_LEN 16

struct ks_exit {
	__u32 tgid; /* in the reader's pid namespace */
	__u32 ppid; /* the real parent's, same namespace (0 outside it) */
	__u32 uid;
	__u32 nr_threads_max; /* threads alive at the exit of the last one: 1 */
	__u64 start_ns; /* group leader's start_boottime, ns since boot (ps's start) */
	__u64 exit_ns; /* bpf_ktime_get_boot_ns() at the exit */
	__u64 cpu_ns; /* every thread's runtime, ns */
	__u64 read_bytes; /* storage reads, bytes (signal + last thread) */
	__u64 write_bytes;
	__u64 maxrss_pages; /* peak resident set, pages (signal->maxrss) */
	__s32 exit_code; /* signal->group_exit_code or the task's exit_code */
	__u32 _pad;
	char comm[KS_EXIT_COMM_LEN]; /* the group leader's */
};

#endif /* KERNSTAT_EXITS_H */
