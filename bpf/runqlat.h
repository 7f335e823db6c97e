/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * runqlat.h: the histograms `kernstat runqlat` reads.
 *
 * Slots are log2 buckets split into 8 linear sub-buckets: values 0..7 have a slot each;
 * a value v >= 8 with e = floor(log2 v) goes to slot 8 + (e - 3) * 8 + the three bits of
 * v below its top bit. Each power of two is so cut in eighths: interpolating within a
 * slot puts a percentile within 1/8 of its power of two of the truth (see kernstat-model
 * hist.rs), where a plain log2 histogram only knows it to within a factor of two.
 */
#ifndef KERNSTAT_RUNQLAT_H
#define KERNSTAT_RUNQLAT_H

#define KS_RQ_MAX_EXP 40
#define KS_RQ_SLOTS (8 + (KS_RQ_MAX_EXP - 3 + 1) * 8)

struct ks_rq_hist {
	__u64 slots[KS_RQ_SLOTS];
};

/* What a keyed histogram (-P, -L, --pidnss) is keyed by. */
enum ks_rq_key_kind {
	KS_RQ_KEY_NONE = 0,
	KS_RQ_KEY_PID = 1,
	KS_RQ_KEY_TID = 2,
	KS_RQ_KEY_PIDNS = 3,
};

#endif /* KERNSTAT_RUNQLAT_H */
