/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pidns.bpf.h: pids as a reader in a pid namespace of its own (a container) sees them.
 *
 * task->pid and task->tgid are the initial namespace's numbers; inside a container
 * /proc shows others, and tasks outside the container not at all. Each collector gets
 * the reader's namespace inode from userspace (`reader_pidns_inum`, 0 in the initial
 * namespace, where nothing here runs) and translates through task->thread_pid, whose
 * numbers[] hold the task's pid at each level from the initial namespace down.
 */
#ifndef KERNSTAT_PIDNS_BPF_H
#define KERNSTAT_PIDNS_BPF_H

/* Levels looked at: containers nest one or two deep (the kernel allows 32). */
#define KS_MAX_PIDNS_LEVELS 8

/* The pid of `task` in the namespace whose inode is `inum` (of its thread group, with
 * `group`), or 0 when the task has none there (it is outside the reader's view). */
static __always_inline __u32 ks_ns_pid(struct task_struct *task, __u32 inum, bool group)
{
	struct pid *pid;
	struct upid up;
	__u32 level, i;

	if (group)
		task = BPF_CORE_READ(task, group_leader);
	pid = BPF_CORE_READ(task, thread_pid);
	if (!pid)
		return 0;
	level = BPF_CORE_READ(pid, level);
	for (i = 0; i < KS_MAX_PIDNS_LEVELS; i++) {
		if (i > level)
			break;
		if (bpf_probe_read_kernel(&up, sizeof(up),
					  (void *)pid + bpf_core_field_offset(struct pid, numbers) +
						  i * bpf_core_type_size(struct upid)))
			return 0;
		if (BPF_CORE_READ(up.ns, ns.inum) == inum)
			return up.nr;
	}
	return 0;
}

#endif /* KERNSTAT_PIDNS_BPF_H */
