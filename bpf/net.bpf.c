// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * net.bpf.c: every send and receive on a socket, counted for the process that made it
 * (the caller's tgid), in payload bytes and calls, by direction and by kind (TCP, UDP,
 * Unix, other). /proc has no per-process network counter; this is the one hot-path
 * hook kernstat adds for it, so it does the least work: the current task's key, one
 * per-CPU hash lookup, four additions.
 *
 * Two attachments, chosen by userspace:
 *  - tp_btf on sock:sock_send_length and sock:sock_recv_length (Linux 6.3+), which
 *    net/socket.c fires in the caller's context after every sock_sendmsg/sock_recvmsg
 *    with the socket and the byte count (send, sendto, sendmsg, write, writev, splice
 *    and io_uring sends alike);
 *  - before 6.3, fexit on the functions those tracepoints sit in, where the kernel
 *    allows BPF trampolines (Debian 12's 6.1 does): sock_recvmsg, and for sends
 *    __sock_sendmsg where it exists (6.1.56+ call it directly from the syscalls and
 *    write(2); userspace sets the target), else sock_sendmsg. Same calls, same context.
 * A receive with MSG_PEEK moves nothing and is not counted (the tracepoint's own rule).
 * Entries stay after a process exits, until userspace has read their last values.
 */
#include "kernel.h"
#include "compat.bpf.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "net.h"
#include "pidns.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* 8,192 processes that used a socket within two samples. Reading the map walks every
 * bucket: measured in `bar --bench` (fastest of 1,000 samples), 16,384 entries added
 * 14 us to a 90 us sample, 4,096 added 5 us. Processes beyond it, or beyond their
 * user's share, are counted per user in `crowded`. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct ks_net_key);
	__type(value, struct ks_net_val);
} procs SEC(".maps");

/* The reader's pid namespace in a container (pidns.bpf.h); 0 in the initial one. */
const volatile __u32 reader_pidns_inum = 0;

/* Entries one user other than root may hold at once (userspace sets it: a quarter of
 * `procs`), so that one user forking thousands of processes that each send a datagram
 * cannot leave everyone else's processes without a slot (security finding N8). Past
 * it, the user's new processes are counted together, per user, in `crowded`. */
const volatile __u32 uid_share = 2048;

/* Entries each user holds: those added (counted here, by this program only) less those
 * userspace deleted after the process exited (`freed_for`, written by userspace only).
 * One writer each, so no update is lost to a race between the two. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} added_by SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} freed_for SEC(".maps");

/* Bytes of processes without a slot of their own, per user: the machine's totals stay
 * whole. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct ks_net_val);
} crowded SEC(".maps");

/* And where even `crowded` had no room. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ks_net_val);
} uncounted SEC(".maps");

/* Sends and receives not counted per process (in `crowded` or `uncounted` instead). */
__u64 overflow = 0;

/* Referenced so that their BTF (and so the Rust types) are emitted. */
struct ks_net_key _ks_net_key_type = {};
struct ks_net_val _ks_net_val_type = {};
enum ks_net_kind _ks_net_kind_type = 0;
enum ks_net_dir _ks_net_dir_type = 0;

/* Direct loads through BTF pointers (the hooks' arguments and the current task are
 * typed): no probe-read helper calls on the path every send and receive takes. */
static __always_inline __u32 kind_of(struct sock *sk)
{
	__u16 family = sk->__sk_common.skc_family;
	__u16 proto;

	if (family == KS_AF_UNIX)
		return KS_NET_UNIX;
	if (family != KS_AF_INET && family != KS_AF_INET6)
		return KS_NET_OTHER;
	proto = sk->sk_protocol;
	if (proto == KS_IPPROTO_TCP || proto == KS_IPPROTO_MPTCP)
		return KS_NET_TCP;
	if (proto == KS_IPPROTO_UDP || proto == KS_IPPROTO_UDPLITE)
		return KS_NET_UDP;
	return KS_NET_OTHER;
}

/* A slot in `procs` for a process not seen yet, if its user has room and the map has. */
static __always_inline struct ks_net_val *admit(struct ks_net_key *key, __u32 uid)
{
	struct ks_net_val zero = {};
	__u64 *held = NULL;

	if (uid) {
		__u64 none = 0, *freed;

		held = bpf_map_lookup_elem(&added_by, &uid);
		if (!held) {
			bpf_map_update_elem(&added_by, &uid, &none, BPF_NOEXIST);
			held = bpf_map_lookup_elem(&added_by, &uid);
		}
		/* No room to count this user (4,096 users have sent since loading):
		 * admitted without a share rather than refused for good. */
		if (held) {
			__u64 gone, before;

			freed = bpf_map_lookup_elem(&freed_for, &uid);
			gone = freed ? *freed : 0;
			/* Taken first and given back when over: a check then an add let
			 * several CPUs pass the same last free place at once. */
			before = __sync_fetch_and_add(held, 1);
			if (before > gone && before - gone >= uid_share) {
				__sync_fetch_and_add(held, -1);
				return NULL;
			}
		}
	}
	bpf_get_current_comm(zero.comm, sizeof(zero.comm));
	zero.uid = uid;
	/* Not inserted (the map is full, or another thread of the process inserted it a
	 * moment ago on another CPU): this insert holds no entry, so it gives its count
	 * back either way. */
	if (bpf_map_update_elem(&procs, key, &zero, BPF_NOEXIST)) {
		if (held)
			__sync_fetch_and_add(held, -1);
	}
	return bpf_map_lookup_elem(&procs, key);
}

/* The user's shared counters, for a process without a slot of its own. */
static __always_inline struct ks_net_val *crowded_of(__u32 uid)
{
	struct ks_net_val *v;
	__u32 zero_key = 0;

	__sync_fetch_and_add(&overflow, 1);
	v = bpf_map_lookup_elem(&crowded, &uid);
	if (!v) {
		struct ks_net_val zero = {};

		zero.uid = uid;
		bpf_map_update_elem(&crowded, &uid, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&crowded, &uid);
	}
	if (!v)
		v = bpf_map_lookup_elem(&uncounted, &zero_key);
	return v;
}

static __always_inline void count(struct sock *sk, int ret, __u32 dir)
{
	struct task_struct *task;
	struct ks_net_key key = {};
	struct ks_net_val *v;
	__u32 kind, uid;

	if (ret <= 0 || !sk)
		return;
	task = bpf_get_current_task_btf();
	key.tgid = task->tgid;
	if (reader_pidns_inum) {
		/* In a container: its own processes only, by the pids it sees. */
		key.tgid = ks_ns_pid(task, reader_pidns_inum, true);
		if (!key.tgid)
			return;
	}
	key.start_ns = task->group_leader->start_time;
	kind = kind_of(sk) & 3;
	v = bpf_map_lookup_elem(&procs, &key);
	if (!v) {
		uid = (__u32)bpf_get_current_uid_gid();
		v = admit(&key, uid);
		if (!v)
			v = crowded_of(uid);
		if (!v)
			return;
	}
	v->bytes[dir & 1][kind] += ret;
	v->calls[dir & 1][kind] += 1;
}

/* --- Linux 6.3+: the socket layer's tracepoints ----------------------------------- */

SEC("tp_btf/sock_send_length")
int BPF_PROG(tp_send, struct sock *sk, int ret, int flags)
{
	count(sk, ret, KS_NET_TX);
	return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(tp_recv, struct sock *sk, int ret, int flags)
{
	if (flags & KS_MSG_PEEK)
		return 0;
	count(sk, ret, KS_NET_RX);
	return 0;
}

/* --- before 6.3: fexit on the functions those tracepoints sit in ------------------- */

SEC("fexit/sock_sendmsg")
int BPF_PROG(fx_send, struct socket *sock, struct msghdr *msg, int ret)
{
	count(sock->sk, ret, KS_NET_TX);
	return 0;
}

SEC("fexit/sock_recvmsg")
int BPF_PROG(fx_recv, struct socket *sock, struct msghdr *msg, int flags, int ret)
{
	if (flags & KS_MSG_PEEK)
		return 0;
	count(sock->sk, ret, KS_NET_RX);
	return 0;
}
