// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * oom.bpf.c: every OOM kill, from `oom:mark_victim` (no kprobe): the victim (pid, uid,
 * command, resident set and virtual size, oom_score_adj), its memory cgroup, and the
 * task that invoked the killer. Fires only when the kernel picks a victim: free the
 * rest of the time.
 *
 * The tracepoint's arguments changed: `(struct task_struct *task, uid_t uid)` from 6.9
 * (commit "mm: update mark_victim tracepoints fields", backported to 6.1.130); `(int
 * pid)` before. Userspace picks the program by the arity the kernel's BTF declares
 * (kernstat-bpf kernel.rs). The older form reports the pid alone; userspace completes
 * what /proc still shows.
 */
#include "kernel.h"
#include "compat.bpf.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "oom.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

struct ks_oom_event _ks_oom_event_type = {};

static __always_inline struct ks_oom_event *start(void)
{
	struct ks_oom_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e)
		return 0;
	__builtin_memset(e, 0, sizeof(*e));
	e->boot_ns = bpf_ktime_get_boot_ns();
	e->killer_pid = bpf_get_current_pid_tgid() >> 32;
	bpf_get_current_comm(e->killer_comm, sizeof(e->killer_comm));
	return e;
}

SEC("tp_btf/mark_victim")
int BPF_PROG(oom_victim, struct task_struct *task, uid_t uid)
{
	struct ks_oom_event *e = start();
	struct cgroup_subsys_state *css;
	struct mm_struct *mm;
	int id = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);

	if (!e)
		return 0;
	e->pid = task->tgid;
	e->uid = uid;
	e->oom_score_adj = task->signal->oom_score_adj;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), task->comm);
	mm = task->mm;
	if (mm) {
		e->rss_pages = ks_mm_rss_pages(mm);
		e->total_vm_pages = mm->total_vm;
	}
	if (id >= 0 && id < 16) {
		css = task->cgroups->subsys[id];
		if (css && css->cgroup)
			e->memcg_id = css->cgroup->kn->id;
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("raw_tp/mark_victim")
int BPF_PROG(oom_victim_pid, int pid)
{
	struct ks_oom_event *e = start();

	if (!e)
		return 0;
	e->pid = pid;
	e->pid_only = 1;
	bpf_ringbuf_submit(e, 0);
	return 0;
}
