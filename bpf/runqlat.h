/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * runqlat.h: the histograms `kernstat runqlat` reads (kernstat's histogram: hist.h).
 */
#ifndef KERNSTAT_RUNQLAT_H
#define KERNSTAT_RUNQLAT_H

#include "hist.h"

#define KS_RQ_MAX_EXP KS_HIST_MAX_EXP
#define KS_RQ_SLOTS KS_HIST_SLOTS

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
