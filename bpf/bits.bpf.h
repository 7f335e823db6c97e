/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * bits.bpf.h: bit arithmetic the collectors share, so a histogram's bucket is computed
 * the same way in every program (and as kernstat-model computes it in Rust).
 */
#ifndef KERNSTAT_BITS_BPF_H
#define KERNSTAT_BITS_BPF_H

#include "hist.h"

/*
 * floor(log2(v)) for v >= 1, and 0 for v == 0: the log2 bucket of a value. Branch-free
 * (five compare-and-shift steps), so the verifier sees one straight path.
 */
static __always_inline __u32 ks_log2_u64(__u64 v)
{
	__u32 r, shift;

	shift = (v > 0xFFFFFFFF) << 5; v >>= shift; r = shift;
	shift = (v > 0xFFFF) << 4; v >>= shift; r |= shift;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

/* The slot of kernstat's histogram (hist.h) that a value goes to. */
static __always_inline __u32 ks_hist_slot(__u64 v)
{
	__u32 e;

	if (v < 8)
		return v;
	e = ks_log2_u64(v);
	if (e > KS_HIST_MAX_EXP)
		return KS_HIST_SLOTS - 1;
	return 8 + (e - 3) * 8 + ((v >> (e - 3)) & 7);
}

#endif /* KERNSTAT_BITS_BPF_H */
