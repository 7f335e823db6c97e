/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * biolat.h: what `kernstat biolat`, the daemon and the recorder read of block I/O:
 * per device and operation (and with -F, per request flags), a latency histogram
 * (kernstat's, hist.h, in µs), and the requests, bytes and errors it counts; per
 * control group, the same counts and the summed latency.
 */
#ifndef KERNSTAT_BIOLAT_H
#define KERNSTAT_BIOLAT_H

#include "hist.h"

/* REQ_OP_* (include/linux/blk_types.h; the same values from 6.0 on; below, 0-3 too). */
enum ks_bio_op {
	KS_BIO_READ = 0,
	KS_BIO_WRITE = 1,
	KS_BIO_FLUSH = 2,
	KS_BIO_DISCARD = 3,
};

struct ks_bio_key {
	__u32 dev;   /* the kernel's dev_t: major << 20 | minor (the whole disk) */
	__u32 op;    /* cmd_flags & 0xff */
	__u32 flags; /* cmd_flags above the op, with -F; else 0 */
	__u32 pad;
};

struct ks_bio_hist {
	__u64 slots[KS_HIST_SLOTS];
	__u64 count;
	__u64 bytes;
	__u64 errors;
};

struct ks_bio_cg_key {
	__u64 cgroup; /* the request's blkcg's cgroup id (kernfs node id) */
	__u32 dev;
	__u32 op;
};

struct ks_bio_cg {
	__u64 count;
	__u64 bytes;
	__u64 latency_ns;
};

#endif /* KERNSTAT_BIOLAT_H */
