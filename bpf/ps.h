/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ps.h: the stream `kernstat ps` reads from its task iterator (pinned or not).
 *
 * Versioning: the stream starts with a ks_ps_stream header carrying KS_PS_MAGIC and
 * KS_PS_VERSION, and the pin's file name carries the version too (ps_v<N>: bpffs refuses
 * names with dots). A reader
 * that finds another magic or version refuses the stream with a message that says to
 * re-pin; a new binary looks for its own version's file and never opens an old one by
 * accident. Any change to a record's layout or meaning bumps KS_PS_VERSION.
 */
#ifndef KERNSTAT_PS_H
#define KERNSTAT_PS_H

#define KS_PS_MAGIC 0x5350534bu /* "KSPS" little-endian */
#define KS_PS_VERSION 4
/* Command lines are cut at this many bytes (ps shows at most a screen line). */
#define KS_PS_CMDLINE_MAX 4096
#define KS_PS_COMM_LEN 16
/* A kernel thread's full name, as /proc prints it (proc_task_name's 64-byte buffer). */
#define KS_PS_NAME_MAX 64

/* First bytes of the stream. */
struct ks_ps_stream {
	__u32 magic;
	__u32 version;
	__u32 rec_size; /* sizeof(struct ks_ps_rec), a second guard */
	__u32 _pad;
};

enum ks_ps_flags {
	KS_PS_KTHREAD = 1,
	KS_PS_LEADER = 2,
	/* The command line was longer than KS_PS_CMDLINE_MAX and is cut. */
	KS_PS_CMDLINE_CUT = 4,
	/* v2: a kernel thread whose name does not fit comm: the bytes after the record
	 * (cmdline_len of them) are its full name instead of a command line. */
	KS_PS_FULL_NAME = 8,
};

/*
 * One per task (thread). A process is its leader's record plus its other threads'
 * records: its CPU time and I/O are the leader's dead_* (threads already released)
 * plus every thread's own counters, as /proc/PID/stat and /proc/PID/io add them up.
 * The leader's record is followed by cmdline_len bytes of command line (NUL-separated
 * arguments), and every record is padded to a multiple of 8 bytes: rec_len says where
 * the next one starts.
 */
struct ks_ps_rec {
	__u16 rec_len;
	__u16 cmdline_len;
	__u8 state; /* /proc state letter */
	__u8 flags; /* enum ks_ps_flags */
	__u8 policy; /* SCHED_* */
	__u8 _pad0;
	__u32 pid; /* thread id */
	__u32 tgid; /* process id */
	__u32 ppid; /* real parent's tgid */
	__u32 uid; /* real uid */
	__u32 euid;
	__u32 gid; /* real gid */
	__s32 nice;
	__s32 prio; /* as /proc/PID/stat field 18 */
	__u32 nr_threads;
	__u64 start_ns; /* start_boottime: ns after boot, suspend included, like /proc */
	__u64 cpu_ns; /* this thread's runtime */
	__u64 read_bytes; /* this thread's storage reads */
	__u64 write_bytes;
	__u64 dead_cpu_ns; /* leader only: runtime of released threads (signal struct) */
	__u64 dead_read_bytes; /* leader only: I/O of released threads and reaped children */
	__u64 dead_write_bytes;
	__u64 reaped_children_cpu_ns; /* leader only: signal cutime + cstime (v3) */
	__u64 run_delay_ns; /* this thread's wait for a CPU while runnable (v4) */
	__u64 rss_pages;
	__u64 vsz_pages;
	__u64 cgroup_id; /* cgroup v2 id (kernfs node id) of the task's cgroup */
	char comm[KS_PS_COMM_LEN];
};

#endif /* KERNSTAT_PS_H */
