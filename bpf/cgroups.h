/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * cgroups.h: one record per control group from the cgroup iterator (cgroups.bpf.c):
 * its id (the directory's inode), its parent's, its depth, its name, and its CPU time
 * as cpu.stat gives it. Shared with Rust only through the skeleton.
 */
#ifndef KERNSTAT_CGROUPS_H
#define KERNSTAT_CGROUPS_H

#define KS_CGROUP_NAME_LEN 64

struct ks_cgroup_rec {
	__u64 id;
	__u64 parent_id; /* 0 for the iteration's root */
	__u64 usage_ns; /* bstat.cputime.sum_exec_runtime after a flush */
	__u64 user_ns;
	__u64 system_ns;
	__u32 level;
	__u32 name_len;
	char name[KS_CGROUP_NAME_LEN];
};

#endif /* KERNSTAT_CGROUPS_H */
