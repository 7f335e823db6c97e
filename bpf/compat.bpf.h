/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * compat.bpf.h: every kernel-version difference kernstat's BPF code knows about, in one
 * place, each with the kernel change that caused it. Callers use the helpers below and
 * never test kernel versions themselves. All choices are made by CO-RE at load time
 * (bpf_core_field_exists / bpf_core_type_exists), so one object runs on 5.11+ kernels.
 *
 * The helpers dereference BTF pointers directly (a JIT-ed load, no helper call), so they
 * are for tp_btf, fentry and iterator programs, whose arguments are typed pointers.
 */
#ifndef KERNSTAT_COMPAT_BPF_H
#define KERNSTAT_COMPAT_BPF_H

#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

/*
 * 5.14 (commit 2f064a59a11f "sched: Change task_struct::state") renamed task->state to
 * task->__state and made it unsigned int. Older kernels: long state.
 */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline unsigned int ks_task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return t->__state;
	return (unsigned int)((struct task_struct___pre514 *)t)->state;
}

/*
 * The thread that runs exec while the rest of its thread group dies (de_thread): when
 * it is not the leader, it takes the leader's place. signal->group_exec_task since 5.16
 * (commit 60700e38fb68 "signal: Rename group_exit_task group_exec_task"),
 * group_exit_task before.
 */
struct signal_struct___pre516 {
	struct task_struct *group_exit_task;
} __attribute__((preserve_access_index));

static __always_inline struct task_struct *ks_group_exec_task(struct signal_struct *sig)
{
	if (bpf_core_field_exists(sig->group_exec_task))
		return sig->group_exec_task;
	return ((struct signal_struct___pre516 *)sig)->group_exit_task;
}

/* The same through probe reads, for task pointers that are not typed BTF pointers
 * (found by walking a list). */
static __always_inline unsigned int ks_task_state_probe(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return (unsigned int)BPF_CORE_READ((struct task_struct___pre514 *)t, state);
}

/*
 * A kernel thread's name longer than comm's 16 bytes lives in its struct kthread:
 * `full_name`, added in 6.0 (commit d6986ce24fc0 "kthread: dynamically allocate memory
 * to store kthread's full name"), reached through task->worker_private since 5.17
 * (commit e32cf5dfbe22 "kthread: Generalize pf_io_worker so it can point to struct
 * kthread"). NULL when the name fits comm. Older kernels keep only comm: NULL here.
 */
struct kthread___ks {
	char *full_name;
	void *data;
} __attribute__((preserve_access_index));

static __always_inline const char *ks_kthread_full_name(struct task_struct *t)
{
	struct kthread___ks *kt;

	if (!bpf_core_field_exists(t->worker_private) ||
	    !bpf_core_field_exists(((struct kthread___ks *)0)->full_name))
		return 0;
	kt = (struct kthread___ks *)BPF_CORE_READ(t, worker_private);
	if (!kt)
		return 0;
	return BPF_CORE_READ(kt, full_name);
}

/*
 * A workqueue worker's name as /proc shows it: comm, then '+' (running a work item) or
 * '-' (idle), then the last workqueue it served (worker->desc), as wq_worker_comm()
 * writes it ("kworker/0:1-events"). The worker is the kthread's `data` (through
 * task->worker_private, 5.17+); older kernels: comm only (returns 0). Writes the name
 * into buf (KS_WQ_NAME_MAX bytes, NUL-terminated) and returns its length, or 0 when
 * the task is no worker, has no pool yet, or has served nothing.
 */
#define PF_WQ_WORKER 0x00000020
#define KS_WQ_DESC_MAX 32
#define KS_WQ_NAME_MAX 64

struct worker___ks {
	void *current_work;
	void *pool;
	char desc[24];
} __attribute__((preserve_access_index));

static __always_inline long ks_wq_worker_name(struct task_struct *t, char *buf)
{
	struct kthread___ks *kt;
	struct worker___ks *w;
	__u32 desc_size, off = 0, i;
	long n;

	if (!(t->flags & PF_WQ_WORKER) || !bpf_core_field_exists(t->worker_private) ||
	    !bpf_core_field_exists(((struct kthread___ks *)0)->data))
		return 0;
	kt = (struct kthread___ks *)BPF_CORE_READ(t, worker_private);
	if (!kt)
		return 0;
	w = (struct worker___ks *)BPF_CORE_READ(kt, data);
	if (!w || !BPF_CORE_READ(w, pool))
		return 0;
	for (i = 0; i < 15; i++) {
		char c = t->comm[i];

		if (!c)
			break;
		buf[i] = c;
		off++;
	}
	buf[off & (KS_WQ_NAME_MAX - 1)] = BPF_CORE_READ(w, current_work) ? '+' : '-';
	off++;
	/* WORKER_DESC_LEN is 24 on some kernels, 32 on others: the relocated size. The
	 * description lands right after the separator (off <= 16, so off + 32 < 64). */
	desc_size = bpf_core_field_size(w->desc);
	if (desc_size > KS_WQ_DESC_MAX)
		desc_size = KS_WQ_DESC_MAX;
	n = bpf_probe_read_kernel_str(buf + (off & (KS_WQ_DESC_MAX - 1)), desc_size, &w->desc);
	if (n <= 1)
		return 0; /* has served nothing yet: /proc shows comm alone */
	return off + n - 1;
}

/*
 * 6.2 (commit f1a7941243c1 "mm: convert mm's rss stats into percpu_counter") turned
 * mm->rss_stat from `struct mm_rss_stat { atomic_long_t count[NR_MM_COUNTERS]; }` into
 * `struct percpu_counter rss_stat[NR_MM_COUNTERS]`. In both layouts we read the shared
 * (approximate) total, which is exactly what get_mm_counter() and so /proc/PID/statm
 * report: the per-CPU deltas not yet folded in are at most batch * nr_cpus pages.
 */
typedef struct {
	__s64 counter;
} ks_atomic_long___pre62;

struct mm_rss_stat___pre62 {
	ks_atomic_long___pre62 count[4];
} __attribute__((preserve_access_index));

struct mm_struct___pre62 {
	struct mm_rss_stat___pre62 rss_stat;
} __attribute__((preserve_access_index));

/* Resident pages as /proc/PID/statm counts them: file + anon + shmem. The indices are
 * literals on purpose: CO-RE scales an array index by the kernel's element size only when
 * the index is a constant in the access expression itself. */
static __always_inline __u64 ks_mm_rss_pages(struct mm_struct *mm)
{
	__s64 pages;

	if (!mm)
		return 0;
	if (bpf_core_type_exists(struct mm_rss_stat___pre62)) {
		struct mm_struct___pre62 *old = (void *)mm;

		/* Probe reads here: the 6.1 verifier cannot walk a direct load through the
		 * atomic_long_t typedef ("Type 'atomic_long_t' is not a struct"). */
		pages = BPF_CORE_READ(old, rss_stat.count[MM_FILEPAGES].counter) +
			BPF_CORE_READ(old, rss_stat.count[MM_ANONPAGES].counter) +
			BPF_CORE_READ(old, rss_stat.count[MM_SHMEMPAGES].counter);
	} else {
		pages = mm->rss_stat[MM_FILEPAGES].count + mm->rss_stat[MM_ANONPAGES].count +
			mm->rss_stat[MM_SHMEMPAGES].count;
	}
	return pages > 0 ? (__u64)pages : 0;
}

/*
 * The one-letter state /proc shows ("RSDTtXZPI"), computed as fs/proc/array.c's
 * task_state_index() does. The TASK_* bit values below have been stable since 4.14;
 * TASK_IDLE (UNINTERRUPTIBLE | NOLOAD, idle kernel threads) reports as I, and is tested
 * as a mask because newer kernels add TASK_FREEZABLE to it; TASK_RTLOCK_WAIT (5.15,
 * PREEMPT_RT sleeping spinlocks) reports as D.
 */
#define KS_TASK_INTERRUPTIBLE 0x0001
#define KS_TASK_UNINTERRUPTIBLE 0x0002
#define KS_TASK_NOLOAD 0x0400
#define KS_TASK_RTLOCK_WAIT 0x1000
#define KS_TASK_REPORT 0x007f
#define KS_TASK_IDLE (KS_TASK_UNINTERRUPTIBLE | KS_TASK_NOLOAD)

static __always_inline char ks_state_char(unsigned int raw, int exit_state)
{
	unsigned int state = (raw | (unsigned int)exit_state) & KS_TASK_REPORT;
	int idx = 0;

	if ((raw & KS_TASK_IDLE) == KS_TASK_IDLE)
		return 'I';
	if (raw & KS_TASK_RTLOCK_WAIT)
		return 'D';
	/* fls(state): index of the highest set bit, 1-based. */
	for (int i = 6; i >= 0; i--) {
		if (state & (1u << i)) {
			idx = i + 1;
			break;
		}
	}
	switch (idx) {
	case 0: return 'R';
	case 1: return 'S';
	case 2: return 'D';
	case 3: return 'T';
	case 4: return 't';
	case 5: return 'X';
	case 6: return 'Z';
	default: return 'P';
	}
}

static __always_inline char ks_task_state_char(struct task_struct *t)
{
	return ks_state_char(ks_task_state(t), t->exit_state);
}

/*
 * 6.0 (commit 7f203bc89eb6 "cgroup: Replace cgroup->ancestor_ids[] with ->ancestors[]")
 * turned the array of ancestor ids into an array of ancestor pointers. Both are indexed
 * by level. Returns the id of the ancestor of `cg` at `level` (cg itself at its level).
 * Probe reads: the index is a variable.
 */
struct cgroup___pre60 {
	int level;
	__u64 ancestor_ids[0];
} __attribute__((preserve_access_index));

static __always_inline __u64 ks_cgroup_ancestor_id(struct cgroup *cg, int level)
{
	/* Addresses are computed as plain numbers: the verifier forbids variable offsets
	 * on typed pointers. */
	__u64 base = (__u64)(void *)cg;

	if (bpf_core_field_exists(cg->ancestors)) {
		struct cgroup *anc = 0;

		base += bpf_core_field_offset(cg->ancestors) + (__u64)level * sizeof(anc);
		bpf_probe_read_kernel(&anc, sizeof(anc), (void *)base);
		return anc ? BPF_CORE_READ(anc, kn, id) : 0;
	} else {
		struct cgroup___pre60 *old = (void *)cg;
		__u64 id = 0;

		base += bpf_core_field_offset(old->ancestor_ids) + (__u64)level * sizeof(id);
		bpf_probe_read_kernel(&id, sizeof(id), (void *)base);
		return id;
	}
}

/*
 * The whole disk of a block request: rq->rq_disk until 5.17 (commit f3fa33acca9f
 * "block: remove the ->rq_disk field in struct request"), rq->q->disk after (added in
 * 5.15, commit d152c682f03c). NULL for a request without a disk.
 */
struct request___pre517 {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

static __always_inline struct gendisk *ks_rq_disk(struct request *rq)
{
	if (bpf_core_field_exists(((struct request___pre517 *)0)->rq_disk))
		return BPF_CORE_READ((struct request___pre517 *)rq, rq_disk);
	return rq->q->disk;
}

/* The same through probe reads (raw_tp arguments are untyped). */
static __always_inline struct gendisk *ks_rq_disk_probe(struct request *rq)
{
	if (bpf_core_field_exists(((struct request___pre517 *)0)->rq_disk))
		return BPF_CORE_READ((struct request___pre517 *)rq, rq_disk);
	return BPF_CORE_READ(rq, q, disk);
}

#endif /* KERNSTAT_COMPAT_BPF_H */
