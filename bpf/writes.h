/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * writes.h: what `kernstat writes` counts, per process, syscall and file kind.
 */
#ifndef KERNSTAT_WRITES_H
#define KERNSTAT_WRITES_H

/* log2 size slots: slot 0 holds 0 and 1 byte, slot k holds [2^k, 2^(k+1)). */
#define KS_WR_SLOTS 34
#define KS_WR_MAX_PIDS 8
#define KS_WR_COMM_LEN 16

/* The syscalls, in the order the tool lists them (writes; --reads mirrors them). */
enum ks_wr_sys {
	KS_WR_WRITE = 0, /* read */
	KS_WR_PWRITE64 = 1, /* pread64 */
	KS_WR_WRITEV = 2, /* readv */
	KS_WR_PWRITEV = 3, /* preadv, preadv2 and pwritev2 too */
	KS_WR_SENDTO = 4, /* recvfrom */
	KS_WR_SENDMSG = 5, /* recvmsg */
	KS_WR_NSYS = 6,
};

/* What the file descriptor refers to. */
enum ks_wr_kind {
	KS_KIND_FILE = 0,
	KS_KIND_PIPE = 1,
	KS_KIND_SOCKET = 2,
	KS_KIND_TTY = 3,
	KS_KIND_OTHER = 4,
};

struct ks_wr_key {
	__u32 tgid;
	__u8 sys;
	__u8 kind;
	__u16 _pad;
};

struct ks_wr_val {
	__u64 calls;
	__u64 errors;
	__u64 asked_bytes;
	__u64 done_bytes;
	__u64 asked[KS_WR_SLOTS]; /* sizes asked for (count, or the iovecs' total) */
	__u64 done[KS_WR_SLOTS]; /* sizes actually moved (the return value) */
	char comm[KS_WR_COMM_LEN];
};

#endif /* KERNSTAT_WRITES_H */
