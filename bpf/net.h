/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * net.h: what net.bpf.c counts per process: payload bytes and calls of every send and
 * receive on a socket, by direction and kind. Shared with Rust only through the
 * skeleton libbpf-cargo generates.
 */
#ifndef KERNSTAT_NET_H
#define KERNSTAT_NET_H

#define KS_NET_COMM_LEN 16

/* What the socket is. */
enum ks_net_kind {
	KS_NET_TCP = 0, /* AF_INET/AF_INET6 stream: TCP, MPTCP */
	KS_NET_UDP = 1, /* AF_INET/AF_INET6 datagrams: UDP, UDP-Lite */
	KS_NET_UNIX = 2, /* AF_UNIX, any type */
	KS_NET_OTHER = 3, /* netlink, packet, vsock, raw ... */
	KS_NET_NKINDS = 4,
};

enum ks_net_dir {
	KS_NET_RX = 0,
	KS_NET_TX = 1,
};

/* One process: its pid and its start time (task->group_leader->start_time, ns since
 * boot), so that a pid reused after an exit is another key. */
struct ks_net_key {
	__u32 tgid;
	__u32 _pad;
	__u64 start_ns;
};

/* One process's counters since it first used a socket. */
struct ks_net_val {
	__u64 bytes[2][KS_NET_NKINDS]; /* [dir][kind] */
	__u64 calls[2][KS_NET_NKINDS];
	char comm[KS_NET_COMM_LEN]; /* the leader's when first seen (the name an exited one keeps) */
	__u32 uid; /* the owner when first seen */
	__u32 _pad;
};

/* What a live process carries in task-local storage (on its group leader). The
 * iterators write its first KS_NET_REC_LEN bytes (key and counters); key.tgid 0: not
 * listed (a process without a pid in the reader's namespace, or one whose counters went
 * to its user's shared ones at its exit). */
struct ks_net_proc {
	struct ks_net_key key;
	struct ks_net_val val;
	/* The counters as the last walk wrote them: at an exit without a place in `exited`,
	 * only what no reader was given goes to the user's shared counters. */
	__u64 seen_bytes[2][KS_NET_NKINDS];
	__u64 seen_calls[2][KS_NET_NKINDS];
	/* Set by the one exiting thread that moves the counters (several can see their
	 * group dead at once). */
	__u32 exit_claimed;
	__u32 _pad;
};

/* The bytes of a record the iterators write: key and counters. */
#define KS_NET_REC_LEN (sizeof(struct ks_net_key) + sizeof(struct ks_net_val))

#endif /* KERNSTAT_NET_H */
