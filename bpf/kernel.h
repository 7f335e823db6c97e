/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * kernel.h: the one place where kernstat's BPF programs learn the kernel's types.
 *
 * Why not a generated vmlinux.h: it is 3-4 MB per kernel, ties the build to the build
 * machine's BTF (or to bpftool), and hides which fields we depend on. Instead every
 * struct below lists only the fields kernstat reads and carries
 * `preserve_access_index`, so clang emits CO-RE relocations and libbpf fixes every
 * offset against the running kernel's BTF at load time. Field names must match the
 * kernel's; sizes and order need not. A field that moved or was renamed between
 * kernel versions is handled in compat.bpf.h, never here.
 *
 * The UAPI constants at the end are ABI and never change value.
 */
#ifndef KERNSTAT_KERNEL_H
#define KERNSTAT_KERNEL_H

/* Tells bpf_tracing.h that struct pt_regs has the kernel's field names (di, si, ...),
 * as with a generated vmlinux.h. */
#define __VMLINUX_H__ 1

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
enum { false = 0, true = 1 };
typedef __s32 pid_t;
typedef __u32 uid_t;
typedef __u32 gid_t;
typedef long long loff_t;
typedef unsigned long size_t;
typedef long ssize_t;

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct list_head {
	struct list_head *next, *prev;
};

/* Since 6.2 mm->rss_stat is an array of these (see compat.bpf.h). */
struct percpu_counter {
	__s64 count;
};

struct mm_struct {
	struct percpu_counter rss_stat[4];
	unsigned long total_vm;
	unsigned long arg_start;
	unsigned long arg_end;
};

struct inode {
	unsigned short i_mode;
	__u32 i_rdev;
	unsigned long i_ino;
};

struct file {
	struct inode *f_inode;
};

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
};

struct files_struct {
	struct fdtable *fdt;
};

struct iovec {
	void *iov_base;
	size_t iov_len;
};

struct user_msghdr {
	void *msg_name;
	int msg_namelen;
	struct iovec *msg_iov;
	size_t msg_iovlen;
};

/* The user registers a syscall wrapper receives (writes.bpf.c's fexit programs). */
#include "arch.h"

/* The raw syscall tracepoints' context (syscalls:sys_enter_* and sys_exit_*). */
struct trace_event_raw_sys_enter {
	long id;
	unsigned long args[6];
};

struct trace_event_raw_sys_exit {
	long id;
	long ret;
};

struct kernfs_node {
	__u64 id;
	const char *name;
};

struct cgroup;

struct cgroup_subsys_state {
	struct cgroup *cgroup;
	struct cgroup_subsys_state *parent;
};

/* A group's CPU time, its own and its descendants', as cpu.stat shows it once the
 * kernel's per-CPU counters are flushed into it (cgroups.bpf.c). */
struct task_cputime {
	__u64 stime;
	__u64 utime;
	unsigned long long sum_exec_runtime;
};

struct cgroup_base_stat {
	struct task_cputime cputime;
};

struct cgroup {
	struct cgroup_subsys_state self;
	struct kernfs_node *kn;
	int level;
	struct cgroup_base_stat bstat;
	/* 6.0+ (ancestor_ids before, see compat.bpf.h) */
	struct cgroup *ancestors[0];
};

struct bpf_iter__cgroup {
	struct bpf_iter_meta *meta;
	struct cgroup *cgroup;
};

struct ns_common {
	unsigned int inum;
};

struct pid_namespace {
	struct ns_common ns;
	unsigned int level;
};

struct nsproxy {
	struct pid_namespace *pid_ns_for_children;
};

/* The controllers a task's css_set points at, by `enum cgroup_subsys_id` (the enum's
 * values are relocated by CO-RE: they depend on the kernel's config). */
enum cgroup_subsys_id {
	cpuset_cgrp_id,
	cpu_cgrp_id,
	cpuacct_cgrp_id,
	io_cgrp_id,
	memory_cgrp_id,
};

struct css_set {
	struct cgroup *dfl_cgrp;
	struct cgroup_subsys_state *subsys[16];
};

struct sched_entity {
	__u64 sum_exec_runtime;
};

/* Time spent runnable but waiting for a CPU (CONFIG_SCHED_INFO: /proc/PID/schedstat's
 * second field). */
struct sched_info {
	unsigned long long run_delay;
};

struct task_io_accounting {
	__u64 rchar;
	__u64 wchar;
	__u64 syscr;
	__u64 syscw;
	__u64 read_bytes;
	__u64 write_bytes;
	__u64 cancelled_write_bytes;
};

typedef struct {
	int counter;
} atomic_t;

struct signal_struct {
	atomic_t live; /* threads not yet past do_exit's start; 0 at the last one's exit */
	int nr_threads;
	int group_exit_code;
	unsigned long maxrss; /* peak resident set of any thread, pages */
	short oom_score_adj;
	struct list_head thread_head;
	struct task_io_accounting ioac;
	unsigned long long sum_sched_runtime;
	/* Reaped children's (and their reaped descendants') times, ns, added at reap. */
	unsigned long long cutime;
	unsigned long long cstime;
	/* The thread running exec while the rest of its group dies (de_thread), 5.16+;
	 * `group_exit_task` before (compat.bpf.h). */
	struct task_struct *group_exec_task;
};

typedef struct {
	uid_t val;
} kuid_t;

typedef struct {
	gid_t val;
} kgid_t;

struct cred {
	kuid_t uid;
	kgid_t gid;
	kuid_t euid;
};

/* A task's pids, one per namespace level (sampler.bpf.c: exits counted only in the
 * reader's namespace). */
struct upid {
	int nr;
	struct pid_namespace *ns;
};

struct pid {
	unsigned int level;
	struct upid numbers[1];
};

struct task_struct {
	unsigned int __state;
	unsigned int flags;
	int prio;
	int static_prio;
	unsigned int policy;
	struct sched_entity se;
	struct sched_info sched_info;
	struct mm_struct *mm;
	int exit_state;
	int exit_code;
	pid_t pid;
	pid_t tgid;
	struct task_struct *real_parent;
	struct task_struct *group_leader;
	struct pid *thread_pid;
	struct list_head thread_node;
	__u64 start_time;
	__u64 start_boottime;
	const struct cred *real_cred;
	const struct cred *cred;
	char comm[16];
	struct signal_struct *signal;
	struct task_io_accounting ioac;
	struct css_set *cgroups;
	struct nsproxy *nsproxy;
	struct files_struct *files;
	void *worker_private;
};

/* The socket a send or receive went through (net.bpf.c): its family and protocol. */
struct in6_addr {
	union {
		__u8 u6_addr8[16];
	} in6_u;
};

/* A socket's addresses and state (tcp.bpf.c), as include/net/sock.h keeps them. */
struct sock_common {
	__u32 skc_daddr;
	__u32 skc_rcv_saddr;
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	volatile unsigned char skc_state;
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
};

/* A TCP segment buffer: its control block holds how many segments it carries (what
 * the kernel's RetransSegs counts). */
struct sk_buff {
	char cb[48];
};

struct tcp_skb_cb {
	__u32 seq;
	__u32 end_seq;
	__u16 tcp_gso_segs;
};

/* The group a socket was made in (cgroup v2, set at creation: it stays when the
 * process moves). */
struct sock_cgroup_data {
	struct cgroup *cgroup;
};

struct socket;

struct sock {
	struct sock_common __sk_common;
	__u16 sk_protocol;
	struct sock_cgroup_data sk_cgrp_data;
	struct socket *sk_socket;
};

struct socket {
	struct sock *sk;
	struct file *file;
};

struct msghdr;


/* Block requests (biolat.bpf.c). rq->q->disk is the whole disk (5.15+; before, the
 * request's own rq_disk: compat.bpf.h); the stamps are CLOCK_MONOTONIC, 0 when the
 * queue does not keep them (see biolat.bpf.c). */
struct gendisk {
	int major;
	int first_minor;
};

struct request_queue {
	struct gendisk *disk;
};

struct blkcg {
	struct cgroup_subsys_state css;
};

struct blkcg_gq {
	struct blkcg *blkcg;
};

struct bio {
	struct blkcg_gq *bi_blkg;
};

struct request {
	struct request_queue *q;
	unsigned int cmd_flags;
	unsigned int __data_len;
	struct bio *bio;
	__u64 start_time_ns;
	__u64 io_start_time_ns;
};

struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
	__u64 session_id;
	__u64 seq_num;
};

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
};

enum {
	MM_FILEPAGES = 0,
	MM_ANONPAGES = 1,
	MM_SWAPENTS = 2,
	MM_SHMEMPAGES = 3,
};

#pragma clang attribute pop

/* UAPI (include/uapi/linux/bpf.h): stable values. */
enum bpf_map_type {
	BPF_MAP_TYPE_UNSPEC = 0,
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
	BPF_MAP_TYPE_RINGBUF = 27,
};

#define TASK_RUNNING 0x0000

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

enum {
	BPF_F_NO_PREALLOC = (1U << 0),
};

enum {
	BPF_LOCAL_STORAGE_GET_F_CREATE = (1ULL << 0),
};

/* include/linux/socket.h, include/uapi/linux/in.h: families and protocols (ABI). */
#define KS_AF_UNIX 1
#define KS_AF_INET 2
#define KS_AF_INET6 10
#define KS_IPPROTO_TCP 6
#define KS_IPPROTO_UDP 17
#define KS_IPPROTO_UDPLITE 136
#define KS_IPPROTO_MPTCP 262
#define KS_MSG_PEEK 2

/* include/linux/sched.h task->flags (stable since 2.6). */
#define PF_EXITING 0x00000004
#define PF_KTHREAD 0x00200000

#endif /* KERNSTAT_KERNEL_H */
