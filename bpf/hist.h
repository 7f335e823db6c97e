/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * hist.h: kernstat's latency histogram, shared by every collector that keeps one
 * (run-queue latency, block I/O latency, TCP connect latency).
 *
 * Slots are log2 buckets split into 8 linear sub-buckets: values 0..7 have a slot each;
 * a value v >= 8 with e = floor(log2 v) goes to slot 8 + (e - 3) * 8 + the three bits of
 * v below its top bit. Each power of two is so cut in eighths: interpolating within a
 * slot puts a percentile within 1/8 of its power of two of the truth (see kernstat-model
 * hist.rs), where a plain log2 histogram only knows it to within a factor of two.
 */
#ifndef KERNSTAT_HIST_H
#define KERNSTAT_HIST_H

#define KS_HIST_MAX_EXP 40
#define KS_HIST_SLOTS (8 + (KS_HIST_MAX_EXP - 3 + 1) * 8)

#endif /* KERNSTAT_HIST_H */
