/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * sampler.h: the records the sampler's task iterator writes and the summary it leaves in
 * .bss. Shared with Rust only through the skeleton libbpf-cargo generates from this
 * object's BTF; nothing here is copied by hand into Rust.
 */
#ifndef KERNSTAT_SAMPLER_H
#define KERNSTAT_SAMPLER_H

#define KS_COMM_LEN 16

/* The first byte of every record says which record it is. */
enum ks_rec_kind {
	KS_REC_PROC = 1,
	/* An 8-byte header (this kind, then zeroes), then the process's struct
	 * ks_net_proc (net.h): its network counters, right after its KS_REC_PROC. */
	KS_REC_NET = 2,
};

enum ks_proc_flags {
	KS_PROC_KTHREAD = 1,
	/* More threads than the walk adds up: cpu_ns and I/O are a lower bound. */
	KS_PROC_PARTIAL = 2,
	/* Some thread of the process is in uninterruptible sleep (D). */
	KS_PROC_D_THREAD = 4,
};

/* One per process (thread group), written when the iterator reaches the group leader. */
struct ks_proc_rec {
	__u8 kind; /* KS_REC_PROC */
	__u8 state; /* /proc state letter of the leader: R S D T t X Z P I */
	__u8 flags; /* enum ks_proc_flags */
	__u8 _pad;
	__u32 tgid;
	/* task->start_time (ns since boot, CLOCK_MONOTONIC): (tgid, start_ns) names one
	 * process even after its pid is reused. */
	__u64 start_ns;
	/* CPU time of every thread, live or exited, as /proc/PID/stat utime+stime (in ns,
	 * not clock ticks). */
	__u64 cpu_ns;
	/* Storage I/O, as /proc/PID/io read_bytes and write_bytes: every thread, live or
	 * exited, and (like /proc) children the process has reaped. */
	__u64 read_bytes;
	__u64 write_bytes;
	/* Resident pages (file + anon + shmem), as /proc/PID/statm field 2. */
	__u64 rss_pages;
	__u32 nr_threads;
	/* Real and effective uid of the leader (in the initial user namespace): whose
	 * process it is, for showing its I/O and network counters only to that user and
	 * root (as /proc/PID/io's ptrace rule does). */
	__u32 uid;
	__u32 euid;
	__u32 ppid; /* the real parent's tgid (0 when it has none in the reader's namespace) */
	/* CPU time of the children it reaped (signal cutime + cstime), ns: the rate engine
	 * shows what children used unseen on the parent. */
	__u64 children_cpu_ns;
	/* Time its live threads waited runnable for a CPU (sched_info.run_delay), ns. */
	__u64 run_delay_ns;
	char comm[KS_COMM_LEN];
};

/* Left in .bss by the last call of every walk; read through the mmap-ed .bss. */
struct ks_walk_summary {
	__u64 walks; /* completed walks; bumped last */
	__u64 ktime_ns; /* bpf_ktime_get_ns() at the end of the walk */
	/* CPU time of every task, credited exactly once each (see sampler.bpf.c); only
	 * differences between walks mean anything. Never decreases. */
	__u64 busy_ns;
	__u64 tasks; /* tasks (threads) visited */
	__u64 procs; /* thread groups visited */
	__u64 running; /* tasks in state R */
	__u64 blocked; /* tasks in state D */
	__u64 zombies; /* processes in state Z */
	__u64 storage_failures; /* tasks the kernel gave no task-local storage (ENOMEM) */
};

#endif /* KERNSTAT_SAMPLER_H */
