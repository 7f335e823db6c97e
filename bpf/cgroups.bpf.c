// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * cgroups.bpf.c: every control group below a root, with its CPU time, in one read of
 * a cgroup iterator (Linux 6.1+) instead of a directory listing and a cpu.stat file per
 * group. The iterator is sleepable so that it can flush the kernel's per-CPU counters
 * into each group's totals first, as reading cpu.stat does: once, at the walk's start,
 * for the whole subtree (css_rstat_flush since 6.16; cgroup_rstat_flush before).
 *
 * The root group's cpu.stat is computed from the machine's counters, not from these;
 * userspace reads that one file itself.
 */
#include "kernel.h"
#include "compat.bpf.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "cgroups.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

extern void css_rstat_flush(struct cgroup_subsys_state *css) __ksym __weak;
extern void cgroup_rstat_flush(struct cgroup *cgrp) __ksym __weak;

/* Records skipped because the name did not fit or the stream refused one. */
__u64 failed = 0;

/* Never written: it puts struct ks_cgroup_rec in the skeleton's types for userspace. */
struct ks_cgroup_rec layout = {};

SEC("iter.s/cgroup")
int cgroup_stats(struct bpf_iter__cgroup *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct cgroup *cgrp = ctx->cgroup;
	struct ks_cgroup_rec rec = {};
	const char *name;
	long n;

	if (!cgrp)
		return 0;
	if (ctx->meta->seq_num == 0) {
		if (bpf_ksym_exists(css_rstat_flush))
			css_rstat_flush(&cgrp->self);
		else if (bpf_ksym_exists(cgroup_rstat_flush))
			cgroup_rstat_flush(cgrp);
	}
	rec.id = BPF_CORE_READ(cgrp, kn, id);
	rec.level = BPF_CORE_READ(cgrp, level);
	if (ctx->meta->seq_num != 0)
		rec.parent_id = BPF_CORE_READ(cgrp, self.parent, cgroup, kn, id);
	rec.usage_ns = BPF_CORE_READ(cgrp, bstat.cputime.sum_exec_runtime);
	rec.user_ns = BPF_CORE_READ(cgrp, bstat.cputime.utime);
	rec.system_ns = BPF_CORE_READ(cgrp, bstat.cputime.stime);
	name = BPF_CORE_READ(cgrp, kn, name);
	n = bpf_probe_read_kernel_str(rec.name, sizeof(rec.name), name);
	if (n <= 0) {
		__sync_fetch_and_add(&failed, 1);
		return 0;
	}
	rec.name_len = n - 1;
	if (bpf_seq_write(seq, &rec, sizeof(rec)))
		__sync_fetch_and_add(&failed, 1);
	return 0;
}
