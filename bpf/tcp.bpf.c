// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tcp.bpf.c: TCP retransmits and connect latency from tracepoints (no kprobes).
 *
 * Retransmits (`tcp:tcp_retransmit_skb`, counted in segments, as the kernel's
 * RetransSegs counts them: one buffer can carry several) fire from timers and ACK processing, so the
 * task on the CPU is not the socket's owner: each is counted on the socket, with the
 * owner a connect recorded (the connecting task, `sock:inet_sock_set_state` to
 * SYN_SENT runs in it), the group the socket was made in (`sk_cgrp_data`, cgroup v2),
 * its peer, and its inode, from which userspace finds the owner of a socket that
 * nobody here saw connect (an accepted one). From 6.17 the tracepoint also fires for
 * retransmits that failed (`err` != 0, e.g. still queued in the host): only sent ones
 * count (`tcp_retrans_err`, chosen by userspace from the tracepoint's arity).
 *
 * Connect latency: SYN_SENT is stamped in the connecting task; SYN_SENT -> ESTABLISHED
 * (when the SYN-ACK is processed, in softirq) is measured on the stamp's owner; SYN_SENT
 * -> CLOSE is a failed connect.
 */
#include "kernel.h"
#include "compat.bpf.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "tcp.h"
#include "bits.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT 2
#define TCP_CLOSE 7

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct ks_tcp_owner);
} owners SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct ks_tcp_retrans);
} retrans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct ks_tcp_pending);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct ks_tcp_conn_stats);
} conn_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ks_tcp_hist);
} conn_hist SEC(".maps");

/* Retransmits counted machine-wide (per CPU), whatever happened to their socket's entry. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} total SEC(".maps");

struct ks_tcp_owner _ks_tcp_owner_type = {};
struct ks_tcp_retrans _ks_tcp_retrans_type = {};
struct ks_tcp_pending _ks_tcp_pending_type = {};
struct ks_tcp_conn_stats _ks_tcp_conn_stats_type = {};
struct ks_tcp_hist _ks_tcp_hist_type = {};

static __always_inline void current_owner(struct ks_tcp_owner *o, struct sock *sk)
{
	struct cgroup *cg = sk->sk_cgrp_data.cgroup;

	o->tgid = bpf_get_current_pid_tgid() >> 32;
	bpf_get_current_comm(o->comm, sizeof(o->comm));
	o->cgroup = cg ? cg->kn->id : 0;
}

/* Segments a retransmitted buffer carries (tcp_skb_pcount: what RetransSegs adds). */
static __always_inline __u64 segments(struct sk_buff *skb)
{
	__u16 segs = BPF_CORE_READ((struct tcp_skb_cb *)skb->cb, tcp_gso_segs);

	return segs ? segs : 1;
}

static __always_inline void retransmitted(struct sock *sk, __u64 segs)
{
	__u64 key = (__u64)sk, *n;
	__u32 zero = 0;
	struct ks_tcp_retrans *r;
	struct ks_tcp_owner *o;

	n = bpf_map_lookup_elem(&total, &zero);
	if (n)
		*n += segs;
	if (sk->sk_protocol != KS_IPPROTO_TCP)
		return;
	r = bpf_map_lookup_elem(&retrans, &key);
	if (!r) {
		struct ks_tcp_retrans fresh = {};
		struct sock_common *c = &sk->__sk_common;
		struct socket *so = sk->sk_socket;
		struct cgroup *cg = sk->sk_cgrp_data.cgroup;

		fresh.family = c->skc_family;
		fresh.sport = c->skc_num;
		fresh.dport = __builtin_bswap16(c->skc_dport);
		if (fresh.family == KS_AF_INET6) {
			BPF_CORE_READ_INTO(&fresh.saddr, c, skc_v6_rcv_saddr.in6_u.u6_addr8);
			BPF_CORE_READ_INTO(&fresh.daddr, c, skc_v6_daddr.in6_u.u6_addr8);
		} else {
			__builtin_memcpy(fresh.saddr, &c->skc_rcv_saddr, 4);
			__builtin_memcpy(fresh.daddr, &c->skc_daddr, 4);
		}
		if (so && so->file && so->file->f_inode)
			fresh.ino = so->file->f_inode->i_ino;
		o = bpf_map_lookup_elem(&owners, &key);
		if (o)
			fresh.owner = *o;
		else
			fresh.owner.cgroup = cg ? cg->kn->id : 0;
		bpf_map_update_elem(&retrans, &key, &fresh, BPF_NOEXIST);
		r = bpf_map_lookup_elem(&retrans, &key);
		if (!r)
			return;
	}
	__sync_fetch_and_add(&r->count, segs);
	r->state = sk->__sk_common.skc_state;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(tcp_retrans, struct sock *sk, struct sk_buff *skb)
{
	retransmitted(sk, segments(skb));
	return 0;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(tcp_retrans_err, struct sock *sk, struct sk_buff *skb, int err)
{
	if (!err)
		retransmitted(sk, segments(skb));
	return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(tcp_state, struct sock *sk, int oldstate, int newstate)
{
	__u64 key = (__u64)sk;
	struct ks_tcp_pending *p, now_p = {};

	if (sk->sk_protocol != KS_IPPROTO_TCP)
		return 0;
	if (newstate == TCP_SYN_SENT) {
		/* connect(): in the connecting task. */
		now_p.ts = bpf_ktime_get_ns();
		current_owner(&now_p.owner, sk);
		bpf_map_update_elem(&pending, &key, &now_p, BPF_ANY);
		bpf_map_update_elem(&owners, &key, &now_p.owner, BPF_ANY);
		return 0;
	}
	if (oldstate != TCP_SYN_SENT)
		return 0;
	p = bpf_map_lookup_elem(&pending, &key);
	if (!p)
		return 0;
	if (newstate == TCP_ESTABLISHED || newstate == TCP_CLOSE) {
		__u32 tgid = p->owner.tgid, zero = 0, slot;
		struct ks_tcp_conn_stats *st = bpf_map_lookup_elem(&conn_stats, &tgid);
		__u64 delta = bpf_ktime_get_ns() - p->ts;

		if (!st) {
			struct ks_tcp_conn_stats fresh = {};

			__builtin_memcpy(fresh.comm, p->owner.comm, sizeof(fresh.comm));
			bpf_map_update_elem(&conn_stats, &tgid, &fresh, BPF_NOEXIST);
			st = bpf_map_lookup_elem(&conn_stats, &tgid);
		}
		if (newstate == TCP_ESTABLISHED) {
			struct ks_tcp_hist *h = bpf_map_lookup_elem(&conn_hist, &zero);

			slot = ks_hist_slot(delta / 1000);
			asm volatile("" : "+r"(slot));
			if (slot >= KS_HIST_SLOTS)
				slot = KS_HIST_SLOTS - 1;
			if (h)
				h->slots[slot]++;
			if (st) {
				__sync_fetch_and_add(&st->connects, 1);
				__sync_fetch_and_add(&st->sum_ns, delta);
				if (delta > st->max_ns)
					st->max_ns = delta;
			}
		} else if (st) {
			__sync_fetch_and_add(&st->failed, 1);
		}
	}
	bpf_map_delete_elem(&pending, &key);
	return 0;
}
