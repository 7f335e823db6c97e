/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * tcp.h: what tcp.bpf.c keeps: retransmits per socket (with who owns it, its group and
 * its peer), and connect latency (a histogram, and per process: connects, failures,
 * summed and largest latency).
 */
#ifndef KERNSTAT_TCP_H
#define KERNSTAT_TCP_H

#include "hist.h"

struct ks_tcp_owner {
	__u32 tgid;   /* 0: not known in BPF (userspace finds it by the socket's inode) */
	__u32 pad;
	__u64 cgroup; /* cgroup v2 id the socket was made in */
	char comm[16];
};

struct ks_tcp_retrans {
	__u64 count;
	__u64 ino;         /* the socket's inode (socket:[ino] in /proc/PID/fd) */
	struct ks_tcp_owner owner;
	__u8 saddr[16];    /* IPv4 in the first 4 bytes */
	__u8 daddr[16];
	__u16 sport;       /* host order */
	__u16 dport;       /* host order */
	__u16 family;
	__u8 state;        /* TCP state at the last retransmit */
	__u8 pad;
};

struct ks_tcp_pending {
	__u64 ts;
	struct ks_tcp_owner owner;
};

struct ks_tcp_conn_stats {
	__u64 connects;    /* completed (SYN_SENT -> ESTABLISHED) */
	__u64 failed;      /* SYN_SENT -> CLOSE (refused, timed out, reset) */
	__u64 sum_ns;
	__u64 max_ns;
	char comm[16];
};

struct ks_tcp_hist {
	__u64 slots[KS_HIST_SLOTS];
};

#endif /* KERNSTAT_TCP_H */
