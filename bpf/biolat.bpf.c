// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * biolat.bpf.c: block I/O latency, per device and operation, from the block layer's
 * request tracepoints (no kprobes).
 *
 * The single-hook form (the default): at `block_rq_complete` the request carries its
 * own stamps, so nothing is kept between issue and completion (no hash map, no second
 * hook): `io_start_time_ns` (set when the device got it, on queues that keep I/O
 * statistics: every blk-mq queue with writeback throttling, the default) for the
 * device time, and `start_time_ns` (set when it was made, with I/O accounting or a
 * scheduler) for the queued time (-Q). A request without the stamp asked for is counted
 * in `unstamped` and not measured; `--pair` then measures it the way libbpf-tools'
 * biolatency does, with a hash keyed by the request from `block_rq_issue`.
 * tests/biolat.rs shows the two forms agree on this kernel and on Debian's 6.1.
 *
 * A request can complete in parts (`nr_bytes` below what is left of it): its bytes
 * are added at each part, it is counted and measured once, at the last.
 *
 * Two flavours of each hook, chosen by userspace before load: tp_btf (typed pointers)
 * and raw_tp (probe reads), as the other collectors.
 */
#include "kernel.h"
#include "compat.bpf.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "biolat.h"
#include "bits.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile bool queued = false;    /* -Q: from the request's making, not its issue */
const volatile bool per_flags = false; /* -F */
const volatile bool pair = false;      /* --pair: stamp at issue in a hash */
const volatile bool per_cgroup = false;
const volatile __u32 targ_dev = 0;     /* only this disk (kernel dev_t), 0: all */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1024);
	__type(key, struct ks_bio_key);
	__type(value, struct ks_bio_hist);
} hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, struct ks_bio_cg_key);
	__type(value, struct ks_bio_cg);
} groups SEC(".maps");

/* --pair: issue time by request (requests are reused per tag: always deleted). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u64);
	__type(value, __u64);
} issued SEC(".maps");

/* A zeroed histogram to create entries from (too big for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ks_bio_hist);
} zero SEC(".maps");

/* Requests completed without the stamp asked for (not measured), and keys that did not
 * fit a map; per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} missed SEC(".maps");

struct ks_bio_key _ks_bio_key_type = {};
struct ks_bio_hist _ks_bio_hist_type = {};
struct ks_bio_cg_key _ks_bio_cg_key_type = {};
struct ks_bio_cg _ks_bio_cg_type = {};
enum ks_bio_op _ks_bio_op_type = 0;

static __always_inline void miss(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&missed, &which);

	if (n)
		(*n)++;
}

static __always_inline struct ks_bio_hist *hist_of(struct ks_bio_key *k)
{
	struct ks_bio_hist *h = bpf_map_lookup_elem(&hists, k);
	__u32 zero_key = 0;

	if (h)
		return h;
	h = bpf_map_lookup_elem(&zero, &zero_key);
	if (!h)
		return 0;
	bpf_map_update_elem(&hists, k, h, BPF_NOEXIST);
	h = bpf_map_lookup_elem(&hists, k);
	if (!h)
		miss(1);
	return h;
}

/* One completion (or part of one): what the request was, its stamp (0: none), the
 * bytes of this part, what is left of it, its status and its group. */
static __always_inline void complete(__u32 dev, __u32 cmd_flags, __u64 stamp,
				     __u32 nr_bytes, __u32 left, int error, __u64 cgroup)
{
	struct ks_bio_key k = {};
	struct ks_bio_hist *h;
	bool last = nr_bytes >= left;
	__u64 now, delta = 0;
	__u32 slot;

	if (targ_dev && dev != targ_dev)
		return;
	k.dev = dev;
	k.op = cmd_flags & 0xff;
	k.flags = per_flags ? cmd_flags & ~0xffU : 0;
	h = hist_of(&k);
	if (!h)
		return;
	__sync_fetch_and_add(&h->bytes, nr_bytes);
	if (!last)
		return;
	if (error)
		__sync_fetch_and_add(&h->errors, 1);
	if (!stamp) {
		miss(0);
		return;
	}
	now = bpf_ktime_get_ns();
	/* A queue's cached clock (6.9+ plugs) can be a few µs behind: a negative time is 0. */
	if (now > stamp)
		delta = now - stamp;
	slot = ks_hist_slot(delta / 1000);
	/* The compiler knows the slot is in range; the verifier must be shown. */
	asm volatile("" : "+r"(slot));
	if (slot >= KS_HIST_SLOTS)
		slot = KS_HIST_SLOTS - 1;
	__sync_fetch_and_add(&h->count, 1);
	__sync_fetch_and_add(&h->slots[slot], 1);
	if (per_cgroup && cgroup) {
		struct ks_bio_cg_key gk = { .cgroup = cgroup, .dev = dev, .op = k.op };
		struct ks_bio_cg *g = bpf_map_lookup_elem(&groups, &gk);

		if (!g) {
			struct ks_bio_cg fresh = {};

			bpf_map_update_elem(&groups, &gk, &fresh, BPF_NOEXIST);
			g = bpf_map_lookup_elem(&groups, &gk);
			if (!g) {
				miss(1);
				return;
			}
		}
		__sync_fetch_and_add(&g->count, 1);
		__sync_fetch_and_add(&g->bytes, nr_bytes);
		__sync_fetch_and_add(&g->latency_ns, delta);
	}
}

/* The pair's issue stamp of `rq`, taken out of the hash. */
static __always_inline __u64 take_issued(void *rq)
{
	__u64 key = (__u64)rq, *ts, t;

	ts = bpf_map_lookup_elem(&issued, &key);
	if (!ts)
		return 0;
	t = *ts;
	bpf_map_delete_elem(&issued, &key);
	return t;
}

static __always_inline void stamp_issue(void *rq)
{
	__u64 key = (__u64)rq, now = bpf_ktime_get_ns();

	if (bpf_map_update_elem(&issued, &key, &now, BPF_ANY))
		miss(1);
}

/* --- tp_btf flavour ----------------------------------------------------------------- */

SEC("tp_btf/block_rq_issue")
int BPF_PROG(bio_issue, struct request *rq)
{
	stamp_issue(rq);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(bio_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	struct gendisk *disk = ks_rq_disk(rq);
	__u64 stamp, cgroup = 0;
	__u32 dev = 0;

	if (disk)
		dev = (__u32)disk->major << 20 | (__u32)disk->first_minor;
	if (pair)
		stamp = nr_bytes >= rq->__data_len ? take_issued(rq) : 1;
	else
		stamp = queued ? rq->start_time_ns : rq->io_start_time_ns;
	if (per_cgroup && rq->bio && rq->bio->bi_blkg)
		cgroup = rq->bio->bi_blkg->blkcg->css.cgroup->kn->id;
	complete(dev, rq->cmd_flags, stamp, nr_bytes, rq->__data_len, error, cgroup);
	return 0;
}

/* --- raw_tp flavour ----------------------------------------------------------------- */

SEC("raw_tp/block_rq_issue")
int BPF_PROG(bio_issue_raw, struct request *rq)
{
	stamp_issue(rq);
	return 0;
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(bio_complete_raw, struct request *rq, int error, unsigned int nr_bytes)
{
	struct gendisk *disk = ks_rq_disk_probe(rq);
	__u32 left = BPF_CORE_READ(rq, __data_len), dev = 0;
	__u64 stamp, cgroup = 0;
	struct bio *bio;

	if (disk)
		dev = (__u32)BPF_CORE_READ(disk, major) << 20 |
		      (__u32)BPF_CORE_READ(disk, first_minor);
	if (pair)
		stamp = nr_bytes >= left ? take_issued(rq) : 1;
	else
		stamp = queued ? BPF_CORE_READ(rq, start_time_ns) :
				 BPF_CORE_READ(rq, io_start_time_ns);
	bio = BPF_CORE_READ(rq, bio);
	if (per_cgroup && bio)
		cgroup = BPF_CORE_READ(bio, bi_blkg, blkcg, css.cgroup, kn, id);
	complete(dev, BPF_CORE_READ(rq, cmd_flags), stamp, nr_bytes, left, error, cgroup);
	return 0;
}
