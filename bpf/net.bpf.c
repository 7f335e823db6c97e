// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * net.bpf.c: every send and receive on a socket, counted for the process that made it
 * (the caller's thread group), in payload bytes and calls, by direction and by kind
 * (TCP, UDP, Unix, other). /proc has no per-process network counter; this is the one
 * hot-path hook kernstat adds for it, so it does the least work: the group leader's
 * task-local storage (a pointer kept in the task: no hashing), two additions (atomic
 * when the process has more than one thread).
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
 *
 * Reading: a task iterator writes each live process's storage (`net_walk`, or the
 * sampler's walk, which userspace gives this map). When the last thread of a process
 * exits, its counters are copied to `exited`, where userspace reads them until it has
 * seen them gone twice, then deletes them: a process that lived and died between two
 * reads is counted whole. An exec from a thread other than the leader makes that
 * thread the leader: the counters move to it.
 *
 * The counters were first kept in a per-CPU hash keyed by (tgid, start time): 121-248
 * ns an event here, of which the hash lookup was ~60 ns, and 1 KiB writes ran at 0.90
 * of their speed (docs/measured.md, section `net`). Task storage needs no key and no
 * table that one user can fill: every live process has its own counters. The threads
 * of one process share them, hence the atomic additions when there are several.
 */
#include "kernel.h"
#include "compat.bpf.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "net.h"
#include "net_live.bpf.h"
#include "pidns.bpf.h"
#include "walk.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Each live process that used a socket: its counters, on its group leader
 * (`net_live`, net_live.bpf.h). */

/* 8,192 processes that ended since userspace last read them twice. Reading the map walks
 * every bucket: measured in `bar --bench` (fastest of 1,000 samples), 16,384 entries
 * added 14 us to a 90 us sample, 4,096 added 5 us. Processes beyond it, or beyond their
 * user's share, are counted per user in `crowded`. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct ks_net_key);
	__type(value, struct ks_net_val);
} exited SEC(".maps");

/* The reader's pid namespace in a container (pidns.bpf.h); 0 in the initial one. */
const volatile __u32 reader_pidns_inum = 0;

/* Entries of `exited` one user other than root may hold at once (userspace sets it: a
 * quarter of the map), so that one user whose thousands of processes each send a
 * datagram and exit cannot leave everyone else's exits without a slot (security finding
 * N8). Past it, the user's processes are counted together, per user, in `crowded`. */
const volatile __u32 uid_share = 2048;

/* Entries each user holds: those added (counted here, by this program only) less those
 * userspace deleted (`freed_for`, written by userspace only). One writer each, so no
 * update is lost to a race between the two. */
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

/* Bytes of processes without an entry of their own (no storage given, or no place in
 * `exited`), per user: the machine's totals stay whole. */
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

/* Entries ever inserted into `exited`: userspace, which counts its deletes, reads the
 * map only when it is not empty. */
__u64 exited_added = 0;

/* Referenced so that their BTF (and so the Rust types) are emitted. */
struct ks_net_key _ks_net_key_type = {};
struct ks_net_val _ks_net_val_type = {};
struct ks_net_proc _ks_net_proc_type = {};
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

/* The user's shared counters, for a process without an entry of its own; `calls` of
 * its sends and receives are counted in `overflow`. */
static __always_inline struct ks_net_val *crowded_of(__u32 uid, __u64 calls)
{
	struct ks_net_val *v;
	__u32 zero_key = 0;

	__sync_fetch_and_add(&overflow, calls);
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

/* The storage of a process's first send or receive: its key, name and owner. NULL when
 * the kernel gives none (memory, or another storage operation on this CPU). */
static __always_inline struct ks_net_proc *admit(struct task_struct *leader)
{
	struct ks_net_proc init = {};
	struct ks_net_proc *p;

	/* In a container: its own processes only, by the pids it sees (0: not counted). */
	init.key.tgid = reader_pidns_inum ? ks_ns_pid(leader, reader_pidns_inum, true)
					  : leader->tgid;
	init.key.start_ns = leader->start_time;
	init.val.uid = (__u32)bpf_get_current_uid_gid();
	__builtin_memcpy(init.val.comm, leader->comm, KS_NET_COMM_LEN);
	p = bpf_task_storage_get(&net_live, leader, &init, BPF_LOCAL_STORAGE_GET_F_CREATE);
	/* Another thread of the process created it a moment ago on another CPU. */
	if (!p)
		p = bpf_task_storage_get(&net_live, leader, 0, 0);
	return p;
}

static __always_inline void count(struct sock *sk, int ret, __u32 dir)
{
	struct task_struct *leader;
	struct ks_net_proc *p;
	struct ks_net_val *v;
	__u32 kind;

	if (ret <= 0 || !sk)
		return;
	leader = bpf_get_current_task_btf()->group_leader;
	kind = kind_of(sk) & 3;
	p = bpf_task_storage_get(&net_live, leader, 0, 0);
	if (!p) {
		p = admit(leader);
		if (!p) {
			/* No storage: counted per user, if the process is the reader's. */
			if (reader_pidns_inum && !ks_ns_pid(leader, reader_pidns_inum, true))
				return;
			v = crowded_of((__u32)bpf_get_current_uid_gid(), 1);
			if (v) {
				v->bytes[dir & 1][kind] += ret;
				v->calls[dir & 1][kind] += 1;
			}
			return;
		}
	}
	if (!p->key.tgid)
		return;
	/* The only thread of its process (no other can appear while this one is here, as
	 * only it could clone one): nobody else adds to these counters, so plain additions
	 * do (two locked additions were ~10 ns of a ~70 ns event here). */
	if (leader->signal->nr_threads == 1) {
		p->val.bytes[dir & 1][kind] += ret;
		p->val.calls[dir & 1][kind] += 1;
		return;
	}
	__sync_fetch_and_add(&p->val.bytes[dir & 1][kind], ret);
	__sync_fetch_and_add(&p->val.calls[dir & 1][kind], 1);
}

/* A place in `exited` for `key`, if its user has room and the map has. */
static __always_inline struct ks_net_val *exited_slot(struct ks_net_key *key,
						      struct ks_net_val *val)
{
	__u32 uid = val->uid;
	__u64 *held = NULL;
	struct ks_net_val *v;

	v = bpf_map_lookup_elem(&exited, key);
	if (v)
		return v; /* another thread of the dying process was here first */
	if (uid) {
		__u64 none = 0, *freed;

		held = bpf_map_lookup_elem(&added_by, &uid);
		if (!held) {
			bpf_map_update_elem(&added_by, &uid, &none, BPF_NOEXIST);
			held = bpf_map_lookup_elem(&added_by, &uid);
		}
		/* No room to count this user (4,096 users have had exits counted since
		 * loading): admitted without a share rather than refused for good. */
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
	/* Not inserted (the map is full, or another exiting thread inserted it a moment
	 * ago on another CPU): this insert holds no entry, so it gives its count back. */
	if (bpf_map_update_elem(&exited, key, val, BPF_NOEXIST)) {
		if (held)
			__sync_fetch_and_add(held, -1);
	} else {
		__sync_fetch_and_add(&exited_added, 1);
	}
	return bpf_map_lookup_elem(&exited, key);
}

static __always_inline void add_counts(struct ks_net_val *to, __u64 bytes[2][KS_NET_NKINDS],
					__u64 calls[2][KS_NET_NKINDS])
{
	for (int d = 0; d < 2; d++)
		for (int k = 0; k < KS_NET_NKINDS; k++) {
			to->bytes[d][k] += bytes[d][k];
			to->calls[d][k] += calls[d][k];
		}
}

static __always_inline __u64 calls_of(__u64 calls[2][KS_NET_NKINDS])
{
	__u64 n = 0;

	for (int d = 0; d < 2; d++)
		for (int k = 0; k < KS_NET_NKINDS; k++)
			n += calls[d][k];
	return n;
}

/* The last thread of a process is exiting: nothing of it sends any more, and its
 * storage goes when its leader is freed. Its totals go to `exited` whole, or, without a
 * place there, what no walk has written of them to its user's shared counters (the rest
 * was listed already) and it is listed no more. Several threads that exit at once may
 * each see the group dead: one of them does this.
 *
 * Or an exec from a thread other than the leader: the leader dies first and the exec'ing
 * thread takes its place (de_thread), so the counters go to that thread's storage. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(net_exit, struct task_struct *task)
{
	struct signal_struct *sig = task->signal;
	__u64 unseen_bytes[2][KS_NET_NKINDS], unseen_calls[2][KS_NET_NKINDS];
	struct ks_net_proc *p;
	struct ks_net_key key;
	struct ks_net_val *v;

	if (BPF_CORE_READ(sig, live.counter) != 0) {
		struct task_struct *heir;

		if (task != task->group_leader)
			return 0; /* not the last thread */
		heir = ks_group_exec_task(sig);
		if (!heir || heir == task)
			return 0;
		p = bpf_task_storage_get(&net_live, task, 0, 0);
		if (p)
			bpf_task_storage_get(&net_live, heir, p, BPF_LOCAL_STORAGE_GET_F_CREATE);
		return 0;
	}
	p = bpf_task_storage_get(&net_live, task->group_leader, 0, 0);
	if (!p || __sync_lock_test_and_set(&p->exit_claimed, 1))
		return 0;
	key = p->key;
	if (!key.tgid)
		return 0;
	v = exited_slot(&key, &p->val);
	if (v) {
		__builtin_memcpy(v, &p->val, sizeof(*v));
		return 0;
	}
	__sync_lock_test_and_set(&p->key.tgid, 0); /* a full barrier before `seen` is read */
	for (int d = 0; d < 2; d++)
		for (int k = 0; k < KS_NET_NKINDS; k++) {
			unseen_bytes[d][k] = p->val.bytes[d][k] - p->seen_bytes[d][k];
			unseen_calls[d][k] = p->val.calls[d][k] - p->seen_calls[d][k];
		}
	v = crowded_of(p->val.uid, calls_of(unseen_calls));
	if (v)
		add_counts(v, unseen_bytes, unseen_calls);
	return 0;
}

/* Each live process with counters, once per walk, when the iterator reaches its leader. */
SEC("iter/task")
int net_walk(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct ks_net_rec copy;

	if (task && task->group_leader == task)
		if (ks_net_take(task, &copy))
			bpf_seq_write(ctx->meta->seq, &copy, sizeof(copy));
	return 0;
}

/* net_walk's records from one walk of the open-coded task iterator over processes
 * (leaders only), run by BPF_PROG_RUN into the buffer userspace maps (walk.bpf.h, 6.7+).
 * In a container only the processes with a pid in the reader's namespace, as the
 * iterator walks. */
SEC("syscall")
int net_run(void *ctx)
{
	struct bpf_iter_task it;
	struct task_struct *task;
	struct ks_net_rec copy;

	if (!ks_walk_supported())
		return KS_WALK_UNSUPPORTED;
	ks_walk_begin();
	bpf_rcu_read_lock();
	bpf_iter_task_new(&it, NULL, KS_BPF_TASK_ITER_ALL_PROCS);
	while ((task = bpf_iter_task_next(&it))) {
		if (walk_full) /* userspace reads the iterator instead */
			break;
		if (reader_pidns_inum &&
		    !ks_ns_pid(ks_walk_view(task), reader_pidns_inum, true))
			continue;
		if (ks_net_take(task, &copy))
			ks_walk_write(NULL, &copy, sizeof(copy));
	}
	bpf_iter_task_destroy(&it);
	bpf_rcu_read_unlock();
	return 0;
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
