// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * runqlat.bpf.c: run-queue latency, the time from a task becoming runnable (woken, or
 * preempted while still runnable) to it running.
 *
 * Two flavours of the same three hooks, chosen by userspace before load:
 *  - tp_btf (5.5+): typed task pointers, enqueue times in task-local storage (no pid
 *    hash to look up, insert and delete on every event, nothing to leak when a task
 *    dies before it runs);
 *  - raw_tp (older kernels): untyped arguments read with probe reads, enqueue times in
 *    a hash keyed by tid, as libbpf-tools does.
 * Filters (pid, cgroup of the task being woken) are rodata, applied before any map
 * work. The unkeyed histogram is per-CPU (no shared atomics; it is also what -C prints);
 * keyed histograms (-P, -L, --pidnss) are one hash entry per key, updated atomically.
 */
#include "kernel.h"
#include "compat.bpf.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "runqlat.h"
#include "bits.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 targ_tgid = 0;
const volatile bool targ_ms = false;
const volatile __u32 key_kind = KS_RQ_KEY_NONE;
const volatile bool filter_cg = false;
const volatile __u64 targ_cg_id = 0;
const volatile __s32 targ_cg_level = 0;
/* --offcpu: the same switch hook measures off-CPU time instead (a task that blocked, from
 * its switch-out to its next switch-in: what it waited for, and its run-queue wait after
 * the wake-up). tp_btf only. */
const volatile bool offcpu = false;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} start_ts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);
	__type(value, __u64);
} start_by_tid SEC(".maps");

/* --offcpu: when each task blocked. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} off_ts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ks_rq_hist);
} hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 10240);
	__type(key, __u32);
	__type(value, struct ks_rq_hist);
} keyed SEC(".maps");

/* A zeroed histogram to create keyed entries from (too big for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ks_rq_hist);
} zero SEC(".maps");

/* Largest latency seen per CPU, in ns (userspace resets it each interval). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} max_ns SEC(".maps");

/* Enqueue times that could not be stored, per CPU: the map refused the write because
 * this CPU was already inside it (an interrupt-time wake-up nested in a handler: the
 * hash's bucket lock, or task storage's busy counter). Those tasks' next run is not
 * measured; userspace reports the count. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

static __always_inline void count_lost(void)
{
	__u32 zero_key = 0;
	__u64 *n = bpf_map_lookup_elem(&lost, &zero_key);

	if (n)
		(*n)++;
}

/* Referenced so that their BTF (and so the Rust types) are emitted. */
struct ks_rq_hist _ks_rq_hist_type = {};
enum ks_rq_key_kind _ks_rq_key_kind_type = 0;

static __always_inline void record(__u32 key, __u64 delta_ns)
{
	__u64 v = targ_ms ? delta_ns / 1000000 : delta_ns / 1000;
	__u32 s = ks_hist_slot(v), zero_key = 0;
	struct ks_rq_hist *h;
	__u64 *m;

	if (s >= KS_RQ_SLOTS)
		s = KS_RQ_SLOTS - 1;
	if (key_kind == KS_RQ_KEY_NONE) {
		h = bpf_map_lookup_elem(&hist, &zero_key);
		if (h)
			h->slots[s]++;
	} else {
		h = bpf_map_lookup_elem(&keyed, &key);
		if (!h) {
			struct ks_rq_hist *z = bpf_map_lookup_elem(&zero, &zero_key);

			if (!z)
				return;
			bpf_map_update_elem(&keyed, &key, z, BPF_NOEXIST);
			h = bpf_map_lookup_elem(&keyed, &key);
			if (!h)
				return;
		}
		__sync_fetch_and_add(&h->slots[s], 1);
	}
	m = bpf_map_lookup_elem(&max_ns, &zero_key);
	if (m && delta_ns > *m)
		*m = delta_ns;
}

/* --- tp_btf flavour: typed pointers, task-local storage ------------------------- */

static __always_inline bool accept(struct task_struct *p)
{
	struct cgroup *cg;

	if (!p->pid)
		return false; /* the idle task */
	if (targ_tgid && p->tgid != targ_tgid)
		return false;
	if (filter_cg) {
		cg = p->cgroups->dfl_cgrp;
		if (cg->level < targ_cg_level)
			return false;
		if (ks_cgroup_ancestor_id(cg, targ_cg_level) != targ_cg_id)
			return false;
	}
	return true;
}

static __always_inline __u32 key_of(struct task_struct *p)
{
	switch (key_kind) {
	case KS_RQ_KEY_PID:
		return p->tgid;
	case KS_RQ_KEY_TID:
		return p->pid;
	case KS_RQ_KEY_PIDNS:
		return p->nsproxy->pid_ns_for_children->ns.inum;
	default:
		return 0;
	}
}

/* p (accepted) is on a run queue from `now`. */
static __always_inline void stamp(struct task_struct *p, __u64 now)
{
	__u64 *ts = bpf_task_storage_get(&start_ts, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (ts)
		*ts = now;
	else
		count_lost();
}

/* The filter first: a task nobody traces costs no clock read. */
static __always_inline void enqueue(struct task_struct *p)
{
	if (accept(p))
		stamp(p, bpf_ktime_get_ns());
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(rq_wakeup, struct task_struct *p)
{
	enqueue(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(rq_wakeup_new, struct task_struct *p)
{
	enqueue(p);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(rq_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	/* At most one clock read per switch, and only when a traced task is involved:
	 * prev leaves the CPU and next gets it at the same instant. Reading the clock for
	 * next after enqueueing prev (as libbpf-tools does) adds the enqueue's own cost to
	 * every latency measured at a preemption: up to ~1 us with the raw_tp flavour's
	 * hash insert, measured with a pinned ping-pong against the tp_btf flavour
	 * (tests/runqlat.rs). */
	__u64 now = 0, *ts, t;

	if (offcpu) {
		/* Blocked (not preempted): off the CPU from now until it runs again. */
		if (ks_task_state(prev) != TASK_RUNNING && accept(prev)) {
			now = bpf_ktime_get_ns();
			ts = bpf_task_storage_get(&off_ts, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
			if (ts)
				*ts = now;
			else
				count_lost();
		}
		if (!next->pid)
			return 0;
		ts = bpf_task_storage_get(&off_ts, next, 0, 0);
		if (!ts || !*ts)
			return 0;
		t = *ts;
		*ts = 0;
		if (!now)
			now = bpf_ktime_get_ns();
		record(key_of(next), now - t);
		return 0;
	}
	/* Preempted, not sleeping: back on the run queue from now. */
	if (ks_task_state(prev) == TASK_RUNNING && accept(prev)) {
		now = bpf_ktime_get_ns();
		stamp(prev, now);
	}
	if (!next->pid)
		return 0;
	ts = bpf_task_storage_get(&start_ts, next, 0, 0);
	if (!ts || !*ts)
		return 0;
	t = *ts;
	*ts = 0;
	if (!now)
		now = bpf_ktime_get_ns();
	record(key_of(next), now - t);
	return 0;
}

/* --- raw_tp flavour: untyped arguments, probe reads, a tid hash ------------------ */

static __always_inline bool accept_raw(struct task_struct *p, __u32 pid)
{
	struct cgroup *cg;

	if (!pid)
		return false;
	if (targ_tgid && BPF_CORE_READ(p, tgid) != targ_tgid)
		return false;
	if (filter_cg) {
		cg = BPF_CORE_READ(p, cgroups, dfl_cgrp);
		if (BPF_CORE_READ(cg, level) < targ_cg_level)
			return false;
		if (ks_cgroup_ancestor_id(cg, targ_cg_level) != targ_cg_id)
			return false;
	}
	return true;
}

static __always_inline __u32 key_of_raw(struct task_struct *p, __u32 pid)
{
	switch (key_kind) {
	case KS_RQ_KEY_PID:
		return BPF_CORE_READ(p, tgid);
	case KS_RQ_KEY_TID:
		return pid;
	case KS_RQ_KEY_PIDNS:
		return BPF_CORE_READ(p, nsproxy, pid_ns_for_children, ns.inum);
	default:
		return 0;
	}
}

/* Whether p is traced; then it is on a run queue from the clock read here, which
 * is returned (0: not traced, no clock read). */
static __always_inline __u64 enqueue_raw(struct task_struct *p)
{
	__u32 pid = BPF_CORE_READ(p, pid);
	__u64 now;

	if (!accept_raw(p, pid))
		return 0;
	now = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&start_by_tid, &pid, &now, BPF_ANY))
		count_lost();
	return now;
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(rq_wakeup_raw, struct task_struct *p)
{
	enqueue_raw(p);
	return 0;
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(rq_wakeup_new_raw, struct task_struct *p)
{
	enqueue_raw(p);
	return 0;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(rq_switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	/* At most one clock read per switch, before the enqueue: see rq_switch. */
	__u64 now = 0, *tsp, t;
	__u32 pid = BPF_CORE_READ(next, pid);

	if (ks_task_state_probe(prev) == TASK_RUNNING)
		now = enqueue_raw(prev);
	if (!pid)
		return 0;
	tsp = bpf_map_lookup_elem(&start_by_tid, &pid);
	if (!tsp)
		return 0;
	t = *tsp;
	bpf_map_delete_elem(&start_by_tid, &pid);
	if (!now)
		now = bpf_ktime_get_ns();
	record(key_of_raw(next, pid), now - t);
	return 0;
}
