// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * sampler.bpf.c: the kernel half of `kernstat bar` and `kernstat snapshot`.
 *
 * Nothing here runs on a hot path. The counters the kernel already keeps per task
 * (se.sum_exec_runtime, ioac, mm->rss_stat) are read when someone samples, by one walk
 * of the task iterator; the only hooks are on task exit and task free, which fire once
 * per task lifetime.
 *
 * Per process: when the walk reaches a thread-group leader it adds up the group the way
 * /proc/PID/stat and /proc/PID/io do: the signal struct's totals for threads already
 * released, plus every thread still on signal->thread_head. All numbers of one process
 * therefore come from one instant, whatever order the iterator visits its threads in.
 *
 * Machine-wide busy time, exactly, without a sched_switch hook: each task carries in
 * task-local storage the runtime already "credited". Whoever looks at a task (the
 * iterator at sample time, sched_process_exit when it exits, sched_process_free after
 * its last schedule) credits the difference since the last look, with an atomic
 * exchange, to busy_total_ns. Because every credit is `now - exchange(seen, now)`, the
 * credits for one task telescope to its final runtime whatever order the three lookers
 * race in. So busy_ns never counts a task twice and never loses one that lived and died
 * between two samples; and the time a task runs after sched_process_exit (since 6.16
 * that includes exit_mm: measured here at 128-256 us per exit, about half of a fork
 * storm's CPU time) is credited by sched_process_free.
 *
 * In a container (a pid namespace of its own) the iterator walks only the namespace's
 * tasks, and the exit hook credits only those too (reader_pidns_*), so busy time is the
 * container's.
 *
 * Per-process network: net.bpf.c keeps each process's socket counters in task-local
 * storage of its leader. When userspace loads it, it gives it this object's `net_live`
 * map, and the walk writes those counters after the process's record: the network
 * figures cost no second walk of the task list. Without net.bpf.c the map stays empty.
 *
 * Two programs walk: the task iterator (sample_tasks, read(2) by userspace) and, on 6.7+,
 * sample_run over the open-coded task iterator (run by BPF_PROG_RUN, writing into a
 * buffer userspace maps), which costs a fraction of the first (walk.bpf.h). Userspace runs
 * sample_run and reads the iterator only when sample_run cannot run or its output does
 * not fit. */
#include "kernel.h"
#include "compat.bpf.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "sampler.h"
#include "net_live.bpf.h"
#include "pidns.bpf.h"
#include "walk.bpf.h"
#include "threads.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";


struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64); /* runtime of this task already added to busy_total_ns */
} credited SEC(".maps");

/* The reader's pid namespace, when it is not the initial one (a container): the exit
 * hooks then credit only tasks that have a pid in it, as the iterator only walks those.
 * Without this, a container's machine CPU % would count every exit on the host. */
const volatile __u32 reader_pidns_inum = 0;

/* All runtime credited so far. Atomically updated by all three programs. */
__u64 busy_total_ns = 0;
/* Per-walk counters, reset when a walk starts (only the iterator touches them). */
__u64 walk_tasks = 0, walk_procs = 0, walk_running = 0, walk_blocked = 0, walk_zombies = 0;
__u64 storage_failures = 0;
/* Whether a network counter shares `net_live` (userspace sets it): without one, no
 * lookup per process. */
__u32 net_shared = 0;

struct ks_walk_summary summary = {};

/* Referenced so that their BTF (and so the Rust types) are emitted. */
struct ks_proc_rec _ks_proc_rec_type = {};
enum ks_rec_kind _ks_rec_kind_type = 0;
enum ks_proc_flags _ks_proc_flags_type = 0;

static __always_inline void credit(struct task_struct *task, bool create)
{
	__u64 *seen, now;

	seen = bpf_task_storage_get(&credited, task, 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!seen) {
		if (create)
			__sync_fetch_and_add(&storage_failures, 1);
		return;
	}
	now = task->se.sum_exec_runtime;
	if (now != *seen)
		__sync_fetch_and_add(&busy_total_ns, now - __sync_lock_test_and_set(seen, now));
}


static __always_inline void finish_walk(void)
{
	struct ks_walk_summary *s = &summary;

	s->tasks = walk_tasks;
	s->procs = walk_procs;
	s->running = walk_running;
	s->blocked = walk_blocked;
	s->zombies = walk_zombies;
	s->storage_failures = storage_failures;
	s->busy_ns = __sync_fetch_and_add(&busy_total_ns, 0);
	s->ktime_ns = bpf_ktime_get_ns();
	__sync_fetch_and_add(&s->walks, 1);
}

/* One task of a walk, read through `t`: count it, and for a thread-group leader write
 * its process record to the walk's stream (walk.bpf.h). True for a leader. `untrusted`
 * (a constant): `t` is the run's untrusted view, read with plain loads. */
static __always_inline bool emit_task(struct seq_file *seq, struct task_struct *t,
				      bool untrusted)
{
	struct signal_struct *sig;
	struct ks_proc_rec rec;
	struct group_sum g = {};
	char state;

	walk_tasks++;
	state = ks_task_state_char(t);
	if (state == 'R')
		walk_running++;
	else if (state == 'D')
		walk_blocked++;
	if (t->group_leader != t)
		return false;

	walk_procs++;
	if (state == 'Z')
		walk_zombies++;
	rec.kind = KS_REC_PROC;
	rec.state = state;
	rec.flags = (t->flags & PF_KTHREAD) ? KS_PROC_KTHREAD : 0;
	rec._pad = 0;
	rec.tgid = reader_pidns_inum ? ks_ns_pid(t, reader_pidns_inum, true) : t->tgid;
	rec.start_ns = t->start_time;
	sig = t->signal;
	if (sig->nr_threads == 1) {
		/* The leader is the group's only thread (a zombie leader still counts in
		 * nr_threads while another thread lives): its own counters, by typed loads,
		 * instead of five probe reads in a walk of one (most processes; measured in
		 * `bar --bench` at 300 processes, the probe reads were ~11 % of a sample). */
		g.cpu_ns = t->se.sum_exec_runtime;
		g.read_bytes = t->ioac.read_bytes;
		g.write_bytes = t->ioac.write_bytes;
		g.run_delay = t->sched_info.run_delay;
		g.d_threads = state == 'D';
		g.complete = 1;
	} else {
		ks_sum_threads(sig, &g);
	}
	if (!g.complete)
		rec.flags |= KS_PROC_PARTIAL;
	if (g.d_threads)
		rec.flags |= KS_PROC_D_THREAD;
	rec.cpu_ns = g.cpu_ns + sig->sum_sched_runtime;
	rec.read_bytes = g.read_bytes + sig->ioac.read_bytes;
	rec.write_bytes = g.write_bytes + sig->ioac.write_bytes;
	rec.rss_pages = ks_mm_rss_pages(t->mm);
	rec.nr_threads = sig->nr_threads;
	if (untrusted) {
		/* Plain loads through the untrusted view: the probe reads below were 15 % of
		 * a run's sample at 300 processes. */
		rec.uid = t->real_cred->uid.val;
		rec.euid = t->cred->euid.val;
		rec.ppid = reader_pidns_inum ? 0 : t->real_parent->tgid;
	} else {
		/* Probe reads: a pointer loaded through the iterator's trusted task costs the
		 * verifier a search of the kernel's BTF at load (walk.bpf.h: ks_walk_view). */
		rec.uid = BPF_CORE_READ(t, real_cred, uid.val);
		rec.euid = BPF_CORE_READ(t, cred, euid.val);
		rec.ppid = reader_pidns_inum ? 0 : BPF_CORE_READ(t, real_parent, tgid);
	}
	if (reader_pidns_inum)
		rec.ppid = ks_ns_pid(t->real_parent, reader_pidns_inum, true);
	rec.children_cpu_ns = sig->cutime + sig->cstime;
	rec.run_delay_ns = g.run_delay;
	__builtin_memcpy(rec.comm, t->comm, KS_COMM_LEN);
	ks_walk_write(seq, &rec, sizeof(rec));

	return true;
}

/* A leader's network counters after its record, when a counter shares `net_live`. */
static __always_inline void emit_net(struct seq_file *seq, struct task_struct *task)
{
	const __u8 net_header[8] = { KS_REC_NET };
	struct ks_net_rec net;

	/* Not once the run's buffer is full: the counters taken would be thrown away with
	 * the stream, and an exit before the iterator's walk would not count them. */
	if (!seq && walk_full)
		return;
	if (net_shared && ks_net_take(task, &net)) {
		ks_walk_write(seq, net_header, sizeof(net_header));
		ks_walk_write(seq, &net, sizeof(net));
	}
}

/* The task the run is at, for emit_task_run. */
__u64 run_task = 0;

/* The run's emit_task, verified once as a global function: inlined into the run's loop,
 * whose body the verifier walks once per distinct state at the loop's head, it cost 31,580
 * instructions and 37 ms of verification at every load (against 10 ms for the whole
 * iterator program). A global function cannot take a task pointer before 6.8, so the
 * task comes as an address in run_task and is read untrusted (ks_walk_view). */
__noinline int emit_task_run(void)
{
	if (!ks_walk_supported())
		return 0;
	return emit_task(NULL, ks_walk_view((struct task_struct *)run_task), true);
}

static __always_inline void start_walk(void)
{
	walk_tasks = walk_procs = walk_running = walk_blocked = walk_zombies = 0;
}

/* The walk through the kernel's task iterator: any kernel with BTF (5.8+). */
SEC("iter/task")
int sample_tasks(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;

	if (!task) {
		finish_walk();
		return 0;
	}
	if (!seq) /* never; compiles the buffer's half of each write out of this program */
		return 0;
	if (ctx->meta->seq_num == 0)
		start_walk();
	credit(task, true);
	if (emit_task(seq, task, false))
		emit_net(seq, task);
	return 0;
}

/* The same walk over the open-coded task iterator, into walk_buf (6.7+; walk.bpf.h). The
 * idle task (pid 0) heads the task list but is no process; in a container only the
 * tasks with a pid in the reader's namespace are walked, as the iterator does. */
SEC("syscall")
int sample_run(void *ctx)
{
	if (!ks_walk_supported())
		return KS_WALK_UNSUPPORTED;
	ks_walk_begin();
	start_walk();
	ks_walk_threads(reader_pidns_inum, {
		credit(task, true);
		run_task = (__u64)task;
		if (emit_task_run())
			emit_net(NULL, task);
	});
	finish_walk();
	return 0;
}

/* A thread is exiting: credit it now (its storage and counters are certainly there). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(sample_exit, struct task_struct *task)
{
	if (reader_pidns_inum && !ks_ns_pid(task, reader_pidns_inum, false))
		return 0;
	credit(task, true);
	return 0;
}

/* The task has run for the last time: credit its exit path (exit_mm and the rest). */
SEC("tp_btf/sched_process_free")
int BPF_PROG(sample_free, struct task_struct *task)
{
	credit(task, false);
	return 0;
}
