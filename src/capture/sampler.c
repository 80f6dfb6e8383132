/* The sampling loop.  */
#include "cprof/sampler.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "capture/blocked.h"
#include "capture/clock.h"
#include "cprof/addrspace.h"
#include "cprof/error.h"
#include "cprof/procfs.h"
#include "util/hashidx.h"
#include "symbolize/resolver.h"
#include "arch/x86_64/regs.h"
#include "arch/x86_64/waits.h"

/* How long a tick polls for the stops it asked for before going back to
 * waiting (stragglers are served when they arrive).  */
#define SPIN_US 300

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- hist */

static size_t bucket_of(uint64_t ns)
{
	if (ns < CP_HIST_SUB)
		return (size_t)ns;
	int exp = 63 - __builtin_clzll(ns);       /* >= 5 */
	int shift = exp - 5;                       /* keep 5 bits: 32 subs */
	size_t sub = (size_t)((ns >> shift) & (CP_HIST_SUB - 1));
	size_t b = (size_t)(shift + 1) * CP_HIST_SUB + sub;
	size_t last = CP_HIST_EXP * CP_HIST_SUB - 1;
	return b > last ? last : b;
}

/* The lower bound of bucket B, in nanoseconds.  */
static uint64_t bucket_value(size_t b)
{
	if (b < CP_HIST_SUB)
		return b;
	size_t shift = b / CP_HIST_SUB - 1;
	uint64_t sub = b % CP_HIST_SUB;
	return (CP_HIST_SUB + sub) << shift;
}

void cp_hist_add(struct cp_hist *h, uint64_t ns)
{
	h->buckets[bucket_of(ns)]++;
	h->count++;
	h->sum_ns += ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

uint64_t cp_hist_quantile(const struct cp_hist *h, double q)
{
	if (h->count == 0)
		return 0;
	uint64_t rank = (uint64_t)ceil(q * (double)h->count);
	if (rank == 0)
		rank = 1;
	uint64_t seen = 0;
	for (size_t b = 0; b < CP_HIST_EXP * CP_HIST_SUB; b++) {
		seen += h->buckets[b];
		if (seen >= rank) {
			/* Report the middle of the bucket.  */
			uint64_t lo = bucket_value(b);
			uint64_t hi = b + 1 < CP_HIST_EXP * CP_HIST_SUB
					      ? bucket_value(b + 1)
					      : lo;
			uint64_t v = lo + (hi - lo) / 2;
			return v > h->max_ns ? h->max_ns : v;
		}
	}
	return h->max_ns;
}

/* ---------------------------------------------------------------- run */

struct cp_sampler {
	struct cp_target *target;
	struct cp_unwinder *unwinder;
	struct cp_symbols *symbols;
	struct cp_profile *profile;
	const struct cp_sampler_options *o; /* &OPTIONS */
	struct cp_sampler_options options;
	struct cp_sampler_stats *stats;     /* &OWN_STATS */
	struct cp_sampler_stats own_stats;
	int sig_fd;                  /* SIGCHLD: a tracee reported */
	uint64_t next_tick;          /* CLOCK_MONOTONIC ns of the next
				      * deadline */
	bool late_told;              /* on_late was called */
	uint64_t end;                /* the duration's end, 0: none */
	uint64_t next_progress;
	bool events;                 /* a tracee may have reported */
	bool finished;               /* cp_sampler_finish was called */
	struct cp_capture *capture;  /* stop -> copy -> resume -> unwind */
	struct cp_capture_slot *snaps; /* stops served, not yet unwound */
	size_t nsnaps, snaps_cap;
	int error;                   /* from on_stop */
	uint64_t *snap_times;        /* when each snapshot was taken */
	uint64_t start;              /* CLOCK_MONOTONIC ns of the start */
	/* samples waiting for their frames' names (on_sample) */
	struct streamed {
		uint64_t t_ns, weight;
		pid_t tid;
		uint32_t stack;
	} *stream;
	size_t nstream, stream_cap;
	struct acct *accts;           /* per thread, between ticks */
	size_t naccts, accts_cap;
	struct cp_hashidx acct_index; /* tid -> index in accts */
	uint64_t period;              /* ns between ticks */
	size_t cpus;                  /* CPUs the target can run on */
	uint64_t *pcs;
	uint32_t *locs;
	pid_t *tids;
	size_t tids_cap;
	struct cp_resolver *resolver; /* address -> location, symbolized
				       * once, on a thread of its own */
	/* --wall: threads off the CPU, sampled without a stop.  */
	struct cp_blocked *blocked;   /* per thread, between ticks */
	uint64_t ticks;               /* the table's clock */
	struct unstopped *unstopped;  /* read this tick, not yet unwound */
	size_t nunstopped, unstopped_cap;
	size_t wall_first;            /* where a tick's look at the threads
				       * starts: the first one put off */
	uint32_t truncated_loc;       /* the "[truncated]" frame, or
				       * UINT32_MAX until first needed */
	/* CPU mode: the threads' CPU clocks (capture/clock.h), readable
	 * when a thread has run a period; waited for with SIG_FD in one
	 * epoll.  Threads without one are looked at each tick.  */
	int ep_fd;                    /* -1: ticks only */
	uint32_t serial;              /* this sampler, as clock_owner */
	size_t synced_seen, synced_n; /* the thread table when last synced */
	size_t tick_threads;          /* selected threads without a clock */
	bool clocks_on;               /* counting (inside a step) */
	/* Bytes of stack a thread's clock records copy at first (with the
	 * registers), so that a sample needs no stop; 0: bare clocks.  */
	uint32_t copy;
	unsigned char *copy_scratch;  /* a record that wrapped the ring */
	size_t copy_scratch_cap;
	bool clocks_dirty;            /* a clock to reopen: sync them */
	/* Clocks with copies wake us at half a ring only: every such
	 * ring is taken at drain ticks, drain_ns apart.  */
	size_t copy_clocks;           /* clocks with copies now */
	uint64_t drain_ns;
	uint64_t next_drain;
};

/* The stack each clock record copies at first: deep enough for the
 * stacks of most programs (perf's --call-graph dwarf copies 8 KiB).  A
 * copy costs the sampled thread in the kernel at each record (below), so
 * copies are sized to the thread's frames, and at most CLOCK_COPY_MAX: a
 * thread whose frames go beyond that is sampled by stops, which copy up
 * to CP_TARGET_STACK_MAX.  */
#define CLOCK_COPY_FIRST (8 * 1024)
#define CLOCK_COPY_MAX (32 * 1024)

/* A thread's copies are sized by its stack: after COPY_LEARN samples at
 * a size whose frames all fit, to a quarter again as much as the deepest
 * any went, and COPY_SLACK more (the outermost frame's own slots), in
 * steps of COPY_STEP, CLOCK_COPY_MIN at least, and twice the largest
 * size that fell short at least.  The kernel writes each copy into the
 * ring, cold in the cache (bench/clockcost.c, interleaved on a quiet
 * machine: 15.0-16.9 us a sample with 1.25 KiB copies, 18.5-19.9 with 8
 * KiB; 768 to 1280 bytes could not be told apart).  Copies that fall
 * short are made four times as large (up to CLOCK_COPY_MAX), then sized
 * again.  */
#define CLOCK_COPY_MIN 1024
#define COPY_STEP 256
#define COPY_SLACK 256
#define COPY_LEARN 32

/* Drain ticks: four periods apart, within these bounds.  At most a few
 * records wait in a ring between two, far from the half ring that would
 * make the thread wake us (capture/clock.c): the target pays for no
 * wake-up at 999 Hz, and a stream of samples lags by at most the
 * upper bound.  */
#define DRAIN_MIN_NS 10000000ull
#define DRAIN_MAX_NS 50000000ull

/* Threads whose clocks copy stacks, at most: each ring is about 24
 * copies (260 KiB for 8 KiB copies, 68 KiB for those of most threads
 * once sized), locked in memory; threads beyond get bare clocks, sampled
 * by stops.  */
#define COPY_THREADS_MAX 64

/* A thread off the CPU, read without a stop at a tick.  */
struct unstopped {
	struct cp_blocked_read read;
	uint64_t t_ns;                /* the tick */
};

/* What the sampler keeps of a thread between ticks.  */
struct acct {
	pid_t tid;
	/* Ticks beyond one that the thread's next sample stands for: with
	 * --wall, ticks that found it still on its way to a stop asked for
	 * earlier (its stack is the one it had all along); in CPU mode, the
	 * CPU time of the stop asked for, in ticks, minus one.  */
	uint32_t owed;
	bool cpu_known;     /* CPU_NS holds a reading */
	uint64_t cpu_ns;    /* its run time at the last reading (schedstat) */
	int64_t credit_ns;  /* CPU time run and not yet stood for by a
			     * sample (negative: sampled ahead) */
	bool runnable;      /* its state was R when last read */
	/* Its voluntary switches (cp_target_thread_run) when RUNNABLE was
	 * last known, plus one for each stop of ours since; UINT64_MAX:
	 * unknown.  */
	uint64_t voluntary;
	/* Clock copies: the size whose samples are counted (COPY_SIZE),
	 * those that reached the outermost frame at it (UINT32_MAX: its
	 * size is learned), the deepest any went, bytes, and the largest
	 * size that fell short.  */
	uint32_t copy_size;
	uint32_t copy_seen;
	uint32_t copy_need;
	uint32_t copy_floor;
};

struct acct_key {
	const struct cp_sampler *r;
	pid_t tid;
};

static bool acct_eq(const void *ctx, uint32_t id)
{
	const struct acct_key *k = ctx;
	return k->r->accts[id].tid == k->tid;
}

/* TID's accounts; created (zero) when CREATE, else NULL if none.  A TID
 * is never removed: a thread's successor under the same TID is told by
 * its run time going backwards.  */
static struct acct *acct_of(struct cp_sampler *r, pid_t tid, bool create)
{
	uint64_t hash = cp_hash_u64((uint64_t)tid);
	struct acct_key key = {r, tid};
	uint32_t id = cp_hashidx_find(&r->acct_index, hash, acct_eq, &key);
	if (id != UINT32_MAX)
		return &r->accts[id];
	if (!create)
		return NULL;
	if (r->naccts == r->accts_cap) {
		size_t cap = r->accts_cap ? r->accts_cap * 2 : 16;
		struct acct *grown = realloc(r->accts, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		r->accts = grown;
		r->accts_cap = cap;
	}
	if (!cp_hashidx_insert(&r->acct_index, hash, (uint32_t)r->naccts))
		return NULL;
	r->accts[r->naccts] = (struct acct){.tid = tid};
	return &r->accts[r->naccts++];
}

/* Hand the streamed samples whose stacks are fully named to the caller,
 * oldest first; with ALL, every one (after the resolver finished).  */
static void flush_stream(struct cp_sampler *r, bool all)
{
	size_t done = 0;
	for (; done < r->nstream; done++) {
		struct streamed *sm = &r->stream[done];
		if (!all) {
			size_t n;
			const uint32_t *locs =
				cp_profile_stack(r->profile, sm->stack, &n);
			bool named = true;
			for (size_t i = 0; i < n && named; i++)
				named = cp_profile_location(r->profile, locs[i])
						->nlines > 0;
			if (!named)
				break;
		}
		r->o->on_sample(r->o->on_sample_arg, sm->t_ns, sm->tid,
				sm->stack, sm->weight);
	}
	if (done == 0)
		return;
	memmove(r->stream, r->stream + done,
		(r->nstream - done) * sizeof(*r->stream));
	r->nstream -= done;
}

static int stream_sample(struct cp_sampler *r, uint64_t t_ns, pid_t tid,
			 uint32_t stack, uint64_t weight)
{
	if (r->nstream == r->stream_cap) {
		size_t cap = r->stream_cap ? r->stream_cap * 2 : 256;
		struct streamed *grown = realloc(r->stream, cap * sizeof(*grown));
		if (!grown)
			return -CP_E_NOMEM;
		r->stream = grown;
		r->stream_cap = cap;
	}
	r->stream[r->nstream++] = (struct streamed){
		.t_ns = t_ns, .weight = weight, .tid = tid, .stack = stack};
	return 0;
}

/* Add one sample of STACK on TID at T_NS, with the ticks owed to it.  */
static int record_stack(struct cp_sampler *r, pid_t tid, uint64_t t_ns,
			uint32_t stack)
{
	struct acct *a = acct_of(r, tid, false);
	uint64_t count = 1 + (a ? a->owed : 0);
	if (a)
		a->owed = 0;
	r->stats->samples += count;
	if (r->o->on_sample &&
	    stream_sample(r, t_ns, tid, stack, count) < 0)
		return -CP_E_NOMEM;
	return cp_profile_add(r->profile, tid, stack, count);
}

/* Record R->pcs[0..NPCS), then the location OUTER when it is not
 * UINT32_MAX (the "[truncated]" mark); the stack id in *STACK.  */
static int record(struct cp_sampler *r, pid_t tid, uint64_t t_ns, size_t npcs,
		  uint32_t outer, uint32_t *stack_out)
{
	for (size_t i = 0; i < npcs; i++) {
		r->locs[i] = cp_resolver_location(r->resolver, r->pcs[i]);
		if (r->locs[i] == UINT32_MAX)
			return -CP_E_NOMEM;
	}
	if (outer != UINT32_MAX)
		r->locs[npcs++] = outer;
	uint32_t stack = cp_profile_intern_stack(r->profile, r->locs, npcs);
	if (stack == UINT32_MAX)
		return -CP_E_NOMEM;
	if (stack_out)
		*stack_out = stack;
	return record_stack(r, tid, t_ns, stack);
}

static void name_thread(struct cp_sampler *r, pid_t tid)
{
	char name[64];
	cp_procfs_comm(cp_target_pid(r->target), tid, name, sizeof(name));
	if (name[0])
		cp_profile_set_thread_name(r->profile, tid, name);
}

/* Unwind a capture taken this tick and add it to the profile.  */
static int unwind_and_record(struct cp_sampler *r,
			     const struct cp_capture_slot *slot, uint64_t t_ns)
{
	const struct cp_snapshot *snap = &slot->snap;
	size_t npcs = cp_capture_unwind(r->capture, slot, r->pcs,
					r->o->max_depth);
	if (npcs == 0) {
		r->stats->unwind_errors++;
		return 0;
	}
	if (!cp_profile_thread_name(r->profile, snap->tid))
		name_thread(r, snap->tid);
	uint32_t stack;
	int rc = record(r, snap->tid, t_ns, npcs, UINT32_MAX, &stack);
	struct cp_blocked_thread *bt =
		r->blocked ? cp_blocked_find(r->blocked, snap->tid) : NULL;
	/* Our stop made the thread run (it took the trap, and a wait it
	 * was in restarts): its counters moved because of us.  They are
	 * taken as the baseline of this stack once the thread is back where
	 * the stop found it.  */
	if (rc == 0 && bt)
		cp_blocked_stopped(bt, stack, cp_regs_sp(&snap->regs),
				   cp_regs_pc(&snap->regs));
	return rc;
}

/* Thread TID is held in our stop with REGS.  A thread stopped while it
 * enters or sleeps in a wait the kernel does not restart after a stop
 * (epoll_wait, sigtimedwait, a socket with a timeout...) has that wait
 * fail with EINTR: the stop was ours, so was the error.  Threads off the
 * CPU are not stopped (sample_without_stop), but one seen running can
 * block in the microseconds before our interrupt lands: mend the call's
 * result so that the kernel restarts it (waits.h).  */
static void undo_our_eintr(struct cp_sampler *r, pid_t tid,
			   const struct user_regs_struct *regs)
{
	struct user_regs_struct mended = *regs;
	if (cp_waits_undo_eintr(&mended) &&
	    cp_target_set_regs(r->target, tid, &mended) == 0)
		r->stats->eintr_undone++;
}

/* The gate turned TID away once it was held: in CPU mode, the CPU time
 * its sample was to stand for goes back to its credit, for its next
 * sample.  */
static void refund(struct cp_sampler *r, pid_t tid)
{
	struct acct *a = acct_of(r, tid, false);
	if (!a || r->o->wall)
		return;
	a->credit_ns += (int64_t)(((uint64_t)a->owed + 1) * r->period);
	a->owed = 0;
}

/* A thread is held in the stop we asked for: copy what the unwinder
 * needs and let it go.  Runs inside cp_target_serve.  */
static void on_stop(void *arg, pid_t tid)
{
	struct cp_sampler *r = arg;
	uint64_t held = now_ns();
	struct cp_thread *th = cp_target_thread(r->target, tid);
	if (th && th->interrupt_ns && held > th->interrupt_ns)
		cp_hist_add(&r->stats->stop_latency, held - th->interrupt_ns);
	if (r->nsnaps == r->snaps_cap) {
		size_t cap = r->snaps_cap ? r->snaps_cap * 2 : 8;
		struct cp_capture_slot *grown =
			realloc(r->snaps, cap * sizeof(*grown));
		uint64_t *times = grown ? realloc(r->snap_times,
						  cap * sizeof(*times))
					: NULL;
		if (grown) {
			memset(grown + r->snaps_cap, 0,
			       (cap - r->snaps_cap) * sizeof(*grown));
			r->snaps = grown;
		}
		if (times)
			r->snap_times = times;
		if (!grown || !times) {
			cp_target_resume(r->target, tid);
			r->error = -CP_E_NOMEM;
			return;
		}
		r->snaps_cap = cap;
	}
	/* The stop was a voluntary switch of the thread's (cpu_due).  */
	struct acct *a = r->o->wall ? NULL : acct_of(r, tid, false);
	if (a && a->voluntary != UINT64_MAX)
		a->voluntary++;
	r->snap_times[r->nsnaps] = held - r->start;
	int rc = cp_capture_take(r->capture, tid, &r->snaps[r->nsnaps]);
	if (rc == 0)
		undo_our_eintr(r, tid, &r->snaps[r->nsnaps].snap.regs);
	/* Asked while the thread is still held: it may have left the gate
	 * between the tick and its stop.  */
	bool admitted = rc != 0 || !r->o->gate ||
			r->o->gate(r->o->gate_arg, tid,
				   &r->snaps[r->nsnaps].snap, NULL);
	cp_target_resume(r->target, tid);
	cp_hist_add(&r->stats->stopped, now_ns() - held);
	if (rc == 0 && admitted)
		r->nsnaps++;
	else if (rc == 0)
		refund(r, tid);
	else if (rc == -CP_E_NOMEM)
		r->error = rc;
}

/* ------------------------------------------------ threads off the CPU */

/* The location of the frame that ends a stack cut short: unwinding
 * needed a register that a thread read without a stop does not give.  */
static uint32_t truncated_location(struct cp_sampler *r)
{
	if (r->truncated_loc == UINT32_MAX) {
		static const char name[] = "[truncated]";
		struct cp_line line = {
			.function = cp_profile_intern(r->profile, name,
						      sizeof(name) - 1),
		};
		if (line.function != UINT32_MAX)
			r->truncated_loc = cp_profile_add_location(
				r->profile, 0, 0, &line, 1);
	}
	return r->truncated_loc;
}

static void owe_tick(struct cp_sampler *r, pid_t tid)
{
	struct acct *a = acct_of(r, tid, true);
	if (a)
		a->owed++;
}

/* CPU mode, at a tick: is TH due for a stop, and for how many ticks
 * does its sample stand?  A runnable thread may be waiting for a CPU
 * rather than running: it is stopped only when it has run for at least
 * half a tick's worth of CPU time since it was last stood for, and its
 * sample weighs the CPU time it ran, in ticks (the remainder is carried
 * to its next sample), so a host short of CPUs does not count run-queue
 * time as CPU (perf's cpu-clock counts only time on a CPU the same way).
 * The run time (schedstat) is read first and the state only for a thread
 * that has the credit for a sample: a thread that has not run is passed
 * for one pread.  Without schedstat, every tick that finds it runnable
 * counts one, as before.  Returns whether to stop it; the ticks its
 * sample stands for beyond one are then in its accounts' OWED.  */
static bool cpu_due(struct cp_sampler *r, struct cp_thread *th)
{
	uint64_t now_cpu, voluntary;
	struct acct *a = NULL;
	if (cp_target_thread_run(r->target, th, &now_cpu, &voluntary) < 0 ||
	    !(a = acct_of(r, th->tid, true)))
		return cp_target_thread_state(r->target, th) == 'R';
	if (r->o->gate) {
		/* The gate's clock instead: the CPU time run inside, from 0
		 * (a thread's time before it is first seen counts too).  */
		r->o->gate(r->o->gate_arg, th->tid, NULL, &now_cpu);
		if (!a->cpu_known || now_cpu < a->cpu_ns) {
			a->cpu_known = true;
			a->cpu_ns = 0;
			a->credit_ns = 0;
		}
	}
	bool first = !a->cpu_known || now_cpu < a->cpu_ns;
	if (first) {
		/* First seen (or a new thread under an old TID): what it ran
		 * before is not ours to count; a tick that finds it runnable
		 * counts one, as a tick always did.  */
		a->cpu_known = true;
		a->cpu_ns = now_cpu;
		a->credit_ns = (int64_t)r->period;
		a->runnable = false; /* its state is to be read */
	} else {
		a->credit_ns += (int64_t)(now_cpu - a->cpu_ns);
		a->cpu_ns = now_cpu;
	}
	if (a->credit_ns < (int64_t)(r->period / 2)) {
		if (a->runnable)
			r->stats->ticks_waiting++;
		return false;
	}
	/* Found runnable before and it has not left a CPU of its own
	 * accord since (its stops by us counted): runnable still, without
	 * reading its state, as for a thread that never sleeps.  Else the
	 * state, even when its run time has not moved since it was found
	 * asleep: the run time of a thread on a CPU is brought up to date
	 * only at the scheduler's tick or when it leaves the CPU, so a
	 * thread that woke since may be running with no sign of it here.  */
	if (!a->runnable || voluntary == UINT64_MAX ||
	    voluntary != a->voluntary) {
		a->runnable = cp_target_thread_state(r->target, th) == 'R';
		a->voluntary = voluntary;
	}
	if (!a->runnable) {
		/* Asleep: its credit waits for the tick that finds it
		 * running (none was earned before it was first seen).  */
		if (first)
			a->credit_ns = 0;
		return false;
	}
	uint64_t weight = ((uint64_t)a->credit_ns + r->period / 2) / r->period;
	if (weight > UINT32_MAX)
		weight = UINT32_MAX;
	a->credit_ns -= (int64_t)(weight * r->period);
	a->owed = (uint32_t)weight - 1;
	return true;
}

/* --wall, at a tick: sample TH without stopping it if it is off the CPU
 * (cp_blocked_look).  Returns false when it must be stopped.  */
static bool sample_without_stop(struct cp_sampler *r, const struct cp_thread *th,
				struct cp_blocked_thread *bt, uint64_t t_ns)
{
	if (r->nunstopped == r->unstopped_cap) {
		size_t cap = r->unstopped_cap ? r->unstopped_cap * 2 : 8;
		struct unstopped *grown =
			realloc(r->unstopped, cap * sizeof(*grown));
		if (!grown)
			return false;
		memset(grown + r->unstopped_cap, 0,
		       (cap - r->unstopped_cap) * sizeof(*grown));
		r->unstopped = grown;
		r->unstopped_cap = cap;
	}
	struct unstopped *u = &r->unstopped[r->nunstopped];
	int look = cp_blocked_look(r->blocked, r->target, th, bt, &u->read);
	switch (look) {
	case CP_BLOCKED_REPEAT:
		r->stats->samples_unchanged++;
		if (record_stack(r, th->tid, t_ns, bt->stack) < 0)
			r->error = -CP_E_NOMEM;
		return true;
	case CP_BLOCKED_READ:
		u->t_ns = t_ns;
		r->nunstopped++;
		return true;
	case CP_BLOCKED_NONE:
		/* It ran while its stack was copied: the tick goes to its
		 * next sample.  */
		r->stats->torn_reads++;
		owe_tick(r, th->tid);
		return true;
	case CP_BLOCKED_STOP:
		return false;
	default:
		r->error = look;
		return true;
	}
}

/* Unwind a thread read without a stop and record it; if unwinding
 * needed a register that /proc does not give and could not recover,
 * either stop the thread after all (when its wait survives a stop) or
 * record the frames found, ended by "[truncated]".  */
static int unwind_unstopped(struct cp_sampler *r, struct unstopped *u)
{
	struct cp_blocked_read *read = &u->read;
	pid_t tid = read->snap.tid;
	if (r->o->gate && !r->o->gate(r->o->gate_arg, tid, &read->snap, NULL))
		return 0;
	cp_target_learn_stack(r->target, tid, cp_regs_sp(&read->snap.regs));
	struct cp_unwind_partial partial = {.known = read->known};
	size_t npcs = cp_unwinder_unwind_partial(r->unwinder, &read->snap,
						 &partial, r->pcs,
						 r->o->max_depth);
	if (npcs == 0) {
		r->stats->unwind_errors++;
		return 0;
	}
	struct cp_blocked_thread *bt = cp_blocked_find(r->blocked, tid);
	uint32_t outer = UINT32_MAX;
	if (partial.needed) {
		/* The thread may have moved since it was read: stop it only
		 * if its counters say it is still in that wait (the window
		 * left is the one between this pread and the interrupt).  */
		if (bt && cp_blocked_unmoved(r->blocked, bt, read) &&
		    cp_waits_stop_is_harmless(cp_target_pid(r->target),
					      &read->syscall)) {
			/* The stop's sample stands for this tick too.  */
			owe_tick(r, tid);
			r->stats->blocked_stops++;
			cp_target_interrupt(r->target, tid);
			return 0;
		}
		outer = truncated_location(r);
		r->stats->samples_truncated++;
	}
	r->stats->samples_unstopped++;
	if (partial.rbp_scanned)
		r->stats->rbp_recovered++;
	if (!cp_profile_thread_name(r->profile, tid))
		name_thread(r, tid);
	uint32_t stack;
	int rc = record(r, tid, u->t_ns, npcs, outer, &stack);
	if (rc == 0 && bt)
		cp_blocked_read_done(bt, stack, read);
	return rc;
}

/* Serve the stops that have arrived (COLLECT: a tracee may have
 * reported; SPIN_US: interrupts were just sent, wait that long for their
 * stops), then, with every thread running again, unwind the copies: the
 * slow part never holds the target.  */
static int serve(struct cp_sampler *r, bool collect, unsigned spin_us,
		 size_t want)
{
	if (collect || spin_us)
		cp_target_serve_some(r->target, spin_us, want, on_stop, r);
	for (size_t i = 0; i < r->nsnaps; i++) {
		int rc = unwind_and_record(r, &r->snaps[i], r->snap_times[i]);
		if (rc < 0)
			return rc;
	}
	r->nsnaps = 0;
	for (size_t i = 0; i < r->nunstopped; i++) {
		int rc = unwind_unstopped(r, &r->unstopped[i]);
		if (rc < 0)
			return rc;
	}
	r->nunstopped = 0;
	cp_resolver_collect(r->resolver);
	if (r->o->on_sample)
		flush_stream(r, false);
	return r->error;
}

/* Room in R->tids for N threads.  */
static int tids_room(struct cp_sampler *r, size_t n)
{
	if (n <= r->tids_cap)
		return 0;
	pid_t *grown = realloc(r->tids, n * sizeof(*grown));
	if (!grown)
		return -CP_E_NOMEM;
	r->tids = grown;
	r->tids_cap = n;
	return 0;
}

/* Ask the COUNT threads of R->tids to stop at once; serve each as it
 * stops.  No thread waits for another's snapshot, and a thread that must
 * first get a CPU is served when it does, without holding up the
 * clock.  */
static int stop_and_serve(struct cp_sampler *r, size_t count)
{
	for (size_t i = 0; i < count; i++)
		cp_target_interrupt(r->target, r->tids[i]);
	/* No stop asked for: nothing to collect (a report of another kind
	 * raises SIGCHLD, which wakes the step).  Of more threads than
	 * there are CPUs, at most that many can be on one and stop within
	 * microseconds; the others stop when they get a CPU, and are served
	 * when their SIGCHLD wakes the step, not waited for here.  */
	size_t want = count < r->cpus - 1 ? count : r->cpus - 1;
	if (want == 0)
		want = 1;
	return serve(r, false, count ? SPIN_US : 0, want);
}

static bool clocked(const struct cp_sampler *r, const struct cp_thread *th)
{
	return r->ep_fd >= 0 && th->clock_fd >= 0 &&
	       th->clock_owner == r->serial;
}

/* --wall: threads read afresh (their stack copied and unwound, about
 * 0.2 ms each the first time) at most in a tick; the others that would
 * need it wait for a later tick, their ticks owed to their next sample.
 * The first tick on 248 sleeping threads took 48 ms, and 3 ticks were
 * missed behind it.  A tick looks at the threads from the first one it
 * put off, so every thread has its turn.  */
#define WALL_READS_PER_TICK 16

/* --wall: is TH's next sample a repeat, or a check of a wait our stop
 * caused, whatever it does (not a read afresh)?  */
static bool wall_cheap(const struct cp_blocked_thread *bt)
{
	return bt->stack != UINT32_MAX && (bt->has_baseline || bt->settling);
}

static int tick(struct cp_sampler *r)
{
	size_t n;
	struct cp_thread *threads = cp_target_threads(r->target, &n);
	if (tids_room(r, n) < 0)
		return -CP_E_NOMEM;
	size_t count = 0;
	uint64_t t_ns = now_ns() - r->start;
	if (r->blocked)
		cp_blocked_begin_tick(r->blocked, ++r->ticks);
	size_t first = r->wall_first < n ? r->wall_first : 0;
	bool put_off = false;
	for (size_t k = 0; k < n; k++) {
		size_t i = r->o->wall ? (first + k) % n : k;
		if (!threads[i].selected ||
		    (r->o->gate &&
		     !r->o->gate(r->o->gate_arg, threads[i].tid, NULL, NULL)))
			continue;
		/* CPU mode: the run time and the state are read before
		 * interrupting (afterwards the state is always "tracing
		 * stop"); a sleeping thread costs one or two preads and is
		 * never stopped.  A stop of ours still on its way: the CPU
		 * time it runs meanwhile is counted at its next reading.  */
		if (!r->o->wall) {
			if (threads[i].group_stopped ||
			    threads[i].interrupting || clocked(r, &threads[i]))
				continue;
			if (cpu_due(r, &threads[i]))
				r->tids[count++] = threads[i].tid;
			continue;
		}
		struct cp_blocked_thread *bt =
			r->blocked ? cp_blocked_thread(r->blocked,
						       threads[i].tid)
				   : NULL;
		if (threads[i].interrupting) {
			owe_tick(r, threads[i].tid);
			continue;
		}
		if (bt && !wall_cheap(bt) &&
		    r->nunstopped >= WALL_READS_PER_TICK) {
			if (!put_off)
				r->wall_first = i;
			put_off = true;
			owe_tick(r, threads[i].tid);
			continue;
		}
		/* --wall: a thread off the CPU is read, not stopped: a stop
		 * would make some of the waits it may be in (epoll_wait,
		 * sigtimedwait, a socket with a timeout) fail with EINTR.  */
		if (bt && sample_without_stop(r, &threads[i], bt, t_ns))
			continue;
		r->tids[count++] = threads[i].tid;
	}
	if (r->blocked)
		cp_blocked_prune(r->blocked);
	return stop_and_serve(r, count);
}

/* ------------------------------------------------------ CPU clocks */

static void clock_copies(struct cp_sampler *r, struct cp_thread *th);

/* Give thread TH (selected) a clock of this sampler's period, in its
 * epoll (counting if the step is on), or the one it has again at another
 * size; *COPYING counts the clocks with copies given so far.  A thread
 * whose clock is refused is looked at each tick instead.  */
static void clock_fit(struct cp_sampler *r, struct cp_thread *th,
		      size_t *copying)
{
	uint32_t copy = 0;
	if (r->copy && !th->no_copy)
		copy = th->copy_want ? th->copy_want : r->copy;
	if (copy && !th->clock_copy && *copying >= COPY_THREADS_MAX)
		copy = 0;
	if (th->clock_fd >= 0 &&
	    (th->clock_period != r->period || th->clock_copy != copy)) {
		/* Its records first: a close drops them.  */
		if (clocked(r, th) && th->clock_copy)
			clock_copies(r, th);
		cp_thread_clock_close(th);
	}
	if (th->clock_fd < 0 && !th->no_clock &&
	    cp_thread_clock_open(th, r->period, copy) >= 0 && copy &&
	    !th->clock_copy)
		th->no_copy = true; /* refused: not asked again */
	if (th->clock_copy)
		(*copying)++;
	if (th->clock_fd >= 0 && th->clock_owner != r->serial) {
		struct epoll_event ev = {
			.events = EPOLLIN | EPOLLET,
			.data.u64 = (uint64_t)th->tid,
		};
		if (epoll_ctl(r->ep_fd, EPOLL_CTL_ADD, th->clock_fd, &ev) < 0 ||
		    (r->clocks_on && cp_thread_clock_enable(th, true) < 0)) {
			cp_thread_clock_close(th);
			th->no_clock = true;
		} else {
			th->clock_owner = r->serial;
		}
	}
}

/* Give every selected thread its clock (clock_fit) once the thread
 * table changed (FORCE: whatever it is).  */
static void clocks_sync(struct cp_sampler *r, bool force)
{
	if (r->ep_fd < 0)
		return;
	size_t n;
	struct cp_thread *threads = cp_target_threads(r->target, &n);
	size_t seen = cp_target_threads_seen(r->target);
	if (!force && !r->clocks_dirty && seen == r->synced_seen &&
	    n == r->synced_n)
		return;
	r->synced_seen = seen;
	r->synced_n = n;
	r->clocks_dirty = false;
	size_t ticking = 0, clocks = 0, copying = 0;
	for (size_t i = 0; i < n; i++) {
		struct cp_thread *th = &threads[i];
		if (!th->selected)
			continue;
		clock_fit(r, th, &copying);
		if (clocked(r, th))
			clocks++;
		else
			ticking++;
	}
	r->tick_threads = ticking;
	r->copy_clocks = copying;
	if (clocks > r->stats->threads_clocked)
		r->stats->threads_clocked = clocks;
}

void cp_sampler_born(struct cp_sampler *r, pid_t tid)
{
	struct cp_thread *th = cp_target_thread(r->target, tid);
	if (!th || !th->selected || r->ep_fd < 0)
		return;
	/* Its clock now, before it runs: what it runs until clocks_sync
	 * would otherwise be run unseen.  The table's count is left for
	 * clocks_sync, which sees the thread is new.  */
	size_t copying = r->copy_clocks;
	clock_fit(r, th, &copying);
	r->copy_clocks = copying;
}

/* Start (ON) or stop the clocks counting: they count only while a step
 * runs, so that the target pays nothing between steps.  */
static void clocks_switch(struct cp_sampler *r, bool on)
{
	if (r->ep_fd < 0 || r->clocks_on == on)
		return;
	r->clocks_on = on;
	size_t n;
	struct cp_thread *threads = cp_target_threads(r->target, &n);
	for (size_t i = 0; i < n; i++)
		if (clocked(r, &threads[i]))
			cp_thread_clock_enable(&threads[i], on);
}

/* Thread TID's clock is readable: the periods it ran since its last
 * sample.  A thread due is put in R->tids[*COUNT] for a stop; its sample
 * weighs the periods (a stop already on its way takes them too).  A
 * wake-up that found more than one period is late by that much: those
 * are ticks missed, as a tick the sampling thread slept through is.  */
/* A clock record with a copy, being taken: its thread, and whether a
 * copy fell short.  */
struct copy_take {
	struct cp_sampler *r;
	struct cp_thread *th;
	pid_t tid;
	uint32_t copy;      /* bytes its clock copies */
	bool learned;       /* that size is learned */
	uint64_t samples;
	uint64_t short_copies;
	bool short_copy;
};

/* Whether TH's copies have been sized at the size they are.  */
static bool copy_learned(struct cp_sampler *r, const struct cp_thread *th)
{
	const struct acct *a = acct_of(r, th->tid, false);
	return a && a->copy_size == th->clock_copy &&
	       a->copy_seen == UINT32_MAX;
}

/* A sample of TH needed NEED bytes of its stack in a copy of the size it
 * has: once COPY_LEARN have, its copies get the size they need
 * (CLOCK_COPY_MIN at least, twice the largest that fell short at least,
 * never larger than now).  True once the size is learned.  */
static bool learn_copy(struct cp_sampler *r, struct cp_thread *th,
		       uint64_t need)
{
	struct acct *a = acct_of(r, th->tid, true);
	if (!a)
		return true;
	if (need > a->copy_need)
		a->copy_need = need > UINT32_MAX ? UINT32_MAX : (uint32_t)need;
	if (a->copy_size != th->clock_copy) {
		a->copy_size = th->clock_copy;
		a->copy_seen = 0;
	}
	if (a->copy_seen == UINT32_MAX)
		return true;
	if (++a->copy_seen < COPY_LEARN)
		return false;
	a->copy_seen = UINT32_MAX;
	uint64_t want = (uint64_t)a->copy_need;
	want += want / 4 + COPY_SLACK;
	want = (want + COPY_STEP - 1) / COPY_STEP * COPY_STEP;
	if (want < CLOCK_COPY_MIN)
		want = CLOCK_COPY_MIN;
	if (want < 2 * (uint64_t)a->copy_floor)
		want = 2 * (uint64_t)a->copy_floor;
	if (want < th->clock_copy) {
		th->copy_want = (uint32_t)want;
		r->clocks_dirty = true;
	}
	return true;
}

/* Unwind and record the copy of one clock record: a sample of the
 * thread at the period's end, taken by the kernel without a stop.  */
static void on_copy(void *arg, const struct cp_perf_sample *smp)
{
	struct copy_take *c = arg;
	struct cp_sampler *r = c->r;
	if (r->error || smp->tid != c->tid || !smp->regs)
		return; /* the period goes to the next sample (owed) */
	struct cp_snapshot snap = {
		.tid = c->tid,
		.stack = (unsigned char *)(uintptr_t)smp->stack,
		.stack_len = smp->stack_len,
		.stack_cap = smp->stack_len,
		.copied_running = true,
	};
	cp_regs_from_perf(smp->regs, &snap.regs);
	snap.stack_addr = cp_regs_sp(&snap.regs);
	cp_target_learn_stack(r->target, c->tid, snap.stack_addr);
	size_t max = r->o->max_depth ? r->o->max_depth : 1;
	bool ended;
	size_t npcs = cp_unwinder_unwind_ended(r->unwinder, &snap, r->pcs, max,
					       &ended);
	if (npcs == 0) {
		c->samples++;
		r->stats->unwind_errors++;
		return;
	}
	/* The copy was full and the frames stop short of the outermost:
	 * the stack goes on beyond the copy.  Not recorded: its period goes
	 * to the thread's next sample, of a larger copy (or a stop's, past
	 * the largest), which shows the whole stack.  */
	if (!ended && npcs < max && smp->stack_len >= c->copy) {
		c->short_copies++;
		c->short_copy = true;
		return;
	}
	c->samples++;
	/* What the copy needs: up to the outermost frame; or, where the
	 * kernel copied less than asked and the frames go on (a page of the
	 * stack between them never touched: the kernel copies no further),
	 * what it copied.  */
	if (!c->learned && (ended || smp->stack_len < c->copy))
		c->learned = learn_copy(
			r, c->th,
			ended ? cp_unwinder_outer_sp(r->unwinder) -
					snap.stack_addr
			      : smp->stack_len);
	r->stats->samples_copied++;
	if (!cp_profile_thread_name(r->profile, c->tid))
		name_thread(r, c->tid);
	uint64_t t_ns = smp->time_ns > r->start ? smp->time_ns - r->start : 0;
	if (record(r, c->tid, t_ns, npcs, UINT32_MAX, NULL) < 0)
		r->error = -CP_E_NOMEM;
}

/* Thread TH's clock copies stacks: unwind and record each period's copy
 * now.  Periods without one (lost records, a period that ended with no
 * user registers) weigh on the thread's next sample.  */
static void clock_copies(struct cp_sampler *r, struct cp_thread *th)
{
	struct copy_take c = {
		.r = r, .th = th, .tid = th->tid, .copy = th->clock_copy,
		.learned = copy_learned(r, th)};
	uint64_t periods = cp_thread_clock_take_samples(
		th, &r->copy_scratch, &r->copy_scratch_cap, on_copy, &c);
	r->stats->ticks_scheduled += periods;
	r->stats->copies_short += c.short_copies;
	/* Periods without a sample: lost records (missed ticks), and copies
	 * that fell short (taken, their weight moved on).  */
	uint64_t owe = periods > c.samples ? periods - c.samples : 0;
	if (owe > c.short_copies)
		r->stats->ticks_missed += owe - c.short_copies;
	if (owe) {
		struct acct *a = acct_of(r, th->tid, true);
		if (a) {
			uint64_t owed = (uint64_t)a->owed + owe;
			a->owed = owed > UINT32_MAX ? UINT32_MAX
						    : (uint32_t)owed;
		}
	}
	if (!c.short_copy)
		return;
	if (c.copy < CLOCK_COPY_MAX) {
		uint32_t want = c.copy * 4 < CLOCK_COPY_MAX ? c.copy * 4
							    : CLOCK_COPY_MAX;
		struct acct *a = acct_of(r, th->tid, true);
		if (a && c.copy > a->copy_floor)
			a->copy_floor = c.copy;
		if (want > th->copy_want) {
			th->copy_want = want;
			r->clocks_dirty = true;
		}
	} else if (!th->no_copy) {
		th->no_copy = true;
		r->stats->threads_copy_short++;
		r->clocks_dirty = true;
	}
}

/* Take the copies of the clocks of threads gone (capture/clock.h), then
 * close those clocks.  */
static void retired_take(struct cp_sampler *r)
{
	size_t n;
	struct cp_thread *gone = cp_target_retired_clocks(r->target, &n);
	if (!n)
		return;
	for (size_t i = 0; i < n; i++)
		if (gone[i].clock_owner == r->serial && gone[i].clock_copy)
			clock_copies(r, &gone[i]);
	cp_target_retired_clocks_close(r->target);
}

/* Take every clock's copies now (a drain tick, the step's end, an
 * exec), those of threads gone included.  */
static void clocks_drain(struct cp_sampler *r)
{
	if (r->ep_fd < 0)
		return;
	size_t n;
	struct cp_thread *threads = cp_target_threads(r->target, &n);
	for (size_t i = 0; i < n; i++)
		if (clocked(r, &threads[i]) && threads[i].clock_copy)
			clock_copies(r, &threads[i]);
	retired_take(r);
}

static void clock_due(struct cp_sampler *r, pid_t tid, size_t *count)
{
	struct cp_thread *th = cp_target_thread(r->target, tid);
	if (!th || !clocked(r, th))
		return;
	if (th->clock_copy) {
		clock_copies(r, th);
		return;
	}
	uint64_t periods = cp_thread_clock_take(th);
	struct acct *a = periods ? acct_of(r, tid, true) : NULL;
	if (!a)
		return;
	r->stats->ticks_scheduled += periods;
	uint64_t owed = (uint64_t)a->owed + periods;
	bool stop = !th->interrupting && !th->group_stopped && !th->stopped;
	if (stop) {
		owed--;
		r->stats->ticks_missed += periods - 1;
		if (periods > 1 && r->o->on_late && !r->late_told) {
			r->late_told = true;
			r->o->on_late(r->o->on_late_arg);
		}
		r->tids[(*count)++] = tid;
	}
	a->owed = owed > UINT32_MAX ? UINT32_MAX : (uint32_t)owed;
}

static void fill_live_stats(struct cp_sampler *r, uint64_t start)
{
	size_t n;
	cp_target_threads(r->target, &n);
	r->stats->threads_now = n;
	r->stats->threads_seen = cp_target_threads_seen(r->target);
	r->stats->elapsed = (double)(now_ns() - start) / 1e9;
}

/* ------------------------------------------------------------ public */

/* The signals a step blocks while it works (unblocked only inside its
 * wait): SIGCHLD (a tracee stopped; read from the signalfd) and those a
 * caller's handler uses to set a stop flag.  */
static void work_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGCHLD);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
}

int cp_sampler_new(struct cp_target *target, struct cp_unwinder *unwinder,
		   struct cp_symbols *symbols, struct cp_profile *profile,
		   const struct cp_sampler_options *o, struct cp_sampler **out)
{
	struct cp_sampler *r = calloc(1, sizeof(*r));
	if (!r)
		return -CP_E_NOMEM;
	r->target = target;
	r->unwinder = unwinder;
	r->symbols = symbols;
	r->profile = profile;
	r->options = *o;
	r->o = &r->options;
	r->stats = &r->own_stats;
	r->truncated_loc = UINT32_MAX;
	r->sig_fd = -1;
	r->ep_fd = -1;
	r->stats->duration = o->duration;
	int rc = -CP_E_NOMEM;
	size_t depth = o->max_depth ? o->max_depth : 1;
	r->pcs = malloc(depth * sizeof(*r->pcs));
	/* One more: a stack cut short ends with "[truncated]".  */
	r->locs = malloc((depth + 1) * sizeof(*r->locs));
	if (!r->pcs || !r->locs ||
	    cp_capture_new(target, unwinder, o->unwind_mode, depth,
			   &r->capture) < 0)
		goto fail;
	if (o->wall &&
	    !(r->blocked = cp_blocked_new(cp_unwinder_addrspace(unwinder))))
		goto fail;
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	r->sig_fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	rc = -CP_E_SYS;
	if (r->sig_fd < 0)
		goto fail;
	/* CPU mode: each thread's own CPU clock tells when it is due
	 * (capture/clock.h), unless the gate keeps a clock of its own or
	 * CPROF_NO_CLOCKS asks for the ticks alone (how cprof sampled
	 * before; also where perf_event_open is refused).  */
	const char *no_clocks = getenv("CPROF_NO_CLOCKS");
	if (!o->wall && !o->gate && !(no_clocks && *no_clocks))
		r->ep_fd = epoll_create1(EPOLL_CLOEXEC);
	/* The clocks copy the stacks (no stop), for the unwinding method
	 * that works on copies, unless CPROF_CLOCK_STOPS asks for stops
	 * (how cprof sampled before; also where the copies are
	 * refused).  */
	const char *stops = getenv("CPROF_CLOCK_STOPS");
	if (o->unwind_mode == CP_UNWIND_SNAPSHOT && !(stops && *stops))
		r->copy = CLOCK_COPY_FIRST;
	if (r->ep_fd >= 0) {
		static uint32_t serials;
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
		struct timespec zero = {0, 0};
		/* A kernel older than 5.11 has no epoll_pwait2.  */
		if (epoll_ctl(r->ep_fd, EPOLL_CTL_ADD, r->sig_fd, &ev) < 0 ||
		    epoll_pwait2(r->ep_fd, &ev, 1, &zero, NULL) < 0) {
			close(r->ep_fd);
			r->ep_fd = -1;
		}
		do
			r->serial = __atomic_add_fetch(&serials, 1,
						       __ATOMIC_RELAXED);
		while (r->serial == 0);
	}
	/* The symbolizer thread must not take the signals a step waits
	 * for: started with them blocked, it never unblocks them.  */
	sigset_t block, saved;
	work_signals(&block);
	pthread_sigmask(SIG_BLOCK, &block, &saved);
	rc = cp_resolver_start(symbols, profile, &r->resolver);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	if (rc < 0)
		goto fail;

	/* Deadlines at fixed multiples of the period from the start (no
	 * drift), kept by us rather than by a timerfd, whose expirations
	 * would cost a read per tick: the step's wait ends at the next one,
	 * and the clock read on waking tells how many passed since we last
	 * looked — all but one of those are missed ticks, skipped rather
	 * than made up in a burst.  */
	r->period = 1000000000ull / (o->frequency ? o->frequency : 1);
	r->drain_ns = 4 * r->period;
	if (r->drain_ns < DRAIN_MIN_NS)
		r->drain_ns = DRAIN_MIN_NS;
	if (r->drain_ns > DRAIN_MAX_NS)
		r->drain_ns = DRAIN_MAX_NS;
	cpu_set_t allowed;
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	r->cpus = online > 0 ? (size_t)online : 1;
	if (sched_getaffinity(cp_target_pid(target), sizeof(allowed),
			      &allowed) == 0 && CPU_COUNT(&allowed) > 0 &&
	    (size_t)CPU_COUNT(&allowed) < r->cpus)
		r->cpus = (size_t)CPU_COUNT(&allowed);
	r->start = now_ns();
	r->next_tick = r->start + r->period;
	r->end = o->duration > 0 ? r->start + (uint64_t)(o->duration * 1e9) : 0;
	r->next_progress = r->start + 250000000ull;
	r->events = true; /* a tracee may have reported something */
	*out = r;
	return 0;
fail:
	cp_sampler_free(r);
	return rc;
}

int cp_sampler_step(struct cp_sampler *r, uint64_t until_ns,
		    volatile sig_atomic_t *stop, enum cp_sampler_end *end_out)
{
	const struct cp_sampler_options *o = r->o;
	struct cp_sampler_stats *stats = r->stats;
	enum cp_sampler_end why = CP_SAMPLER_DEADLINE;
	int rc = 0;
	if (r->finished)
		return -CP_E_INVAL;
	/* Signals that end the run or announce target events are blocked
	 * while we work and unblocked only inside ppoll, atomically, so none
	 * can slip in between a check and the wait.  */
	sigset_t block, saved, wait_mask;
	work_signals(&block);
	pthread_sigmask(SIG_BLOCK, &block, &saved);
	wait_mask = saved;
	sigaddset(&wait_mask, SIGCHLD);
	uint64_t deadline = r->end;
	if (until_ns && (!deadline || until_ns < deadline))
		deadline = until_ns;
	clocks_sync(r, true);
	clocks_switch(r, true);
	r->next_drain = now_ns() + r->drain_ns;
	for (;;) {
		if ((stop && *stop) || (o->stop && *o->stop)) {
			stats->interrupted = true;
			why = CP_SAMPLER_STOPPED;
			break;
		}
		if (r->events) {
			rc = serve(r, true, 0, SIZE_MAX);
			if (rc < 0)
				break;
			/* Threads gone: the copies they left.  */
			retired_take(r);
			if (cp_target_take_exec(r->target)) {
				/* The copies still in the rings are of the
				 * old image: unwound before it is dropped.  */
				clocks_drain(r);
				/* An epoch change, told once to the address
				 * space: the unwinder, the resolver and the
				 * blocked table each drop what they cached of
				 * the old image when they next look, and the
				 * symbolizer re-reads the modules on its own
				 * thread once it has finished (or dropped) the
				 * addresses of the old image.  */
				struct cp_addrspace *space =
					cp_unwinder_addrspace(r->unwinder);
				cp_addrspace_exec(space);
				/* A symbolizer made apart (cp_symbols_new) has
				 * an address space of its own.  */
				if (cp_symbols_addrspace(r->symbols) != space)
					cp_addrspace_exec(
						cp_symbols_addrspace(r->symbols));
				/* The exec'ing thread lost its clock if it
				 * took the leader's TID.  */
				clocks_sync(r, true);
			}
		}
		if (cp_target_exited(r->target)) {
			stats->target_exited = true;
			why = CP_SAMPLER_EXITED;
			break;
		}
		/* Threads born (or gone) get (or lose) their clocks.  */
		clocks_sync(r, false);
		uint64_t now = now_ns();
		if (deadline && now >= deadline)
			break;
		if (o->progress && now >= r->next_progress) {
			fill_live_stats(r, r->start);
			o->progress(o->progress_arg, stats);
			r->next_progress = now + 250000000ull;
		}
		/* Wait for the next tick (when a thread has no clock), a
		 * thread's clock, a tracee event, the end, or the next
		 * progress update; SIGINT/SIGTERM/SIGHUP are unblocked only
		 * here, atomically.  */
		bool ticking = r->ep_fd < 0 || r->tick_threads > 0;
		uint64_t wake = ticking ? r->next_tick : UINT64_MAX;
		if (deadline && deadline < wake)
			wake = deadline;
		if (o->progress && r->next_progress < wake)
			wake = r->next_progress;
		bool draining = r->ep_fd >= 0 && r->copy_clocks > 0;
		if (draining && r->next_drain < wake)
			wake = r->next_drain;
		struct timespec timeout = {0, 0};
		if (wake > now) {
			uint64_t rel = wake - now;
			timeout.tv_sec = (time_t)(rel / 1000000000u);
			timeout.tv_nsec = (long)(rel % 1000000000u);
		}
		/* Also when a deadline has passed already (a zero timeout):
		 * the signals that end the run get in only here.  */
		bool chld = false;
		size_t ndue = 0;
		uint64_t copied = r->stats->samples_copied;
		if (r->ep_fd >= 0) {
			struct epoll_event evs[64];
			int ready = epoll_pwait2(
				r->ep_fd, evs, 64,
				wake == UINT64_MAX ? NULL : &timeout, &wait_mask);
			if (ready > 0 && tids_room(r, (size_t)ready) < 0) {
				rc = -CP_E_NOMEM;
				break;
			}
			for (int i = 0; i < ready; i++) {
				if (evs[i].data.u64 == 0)
					chld = true;
				else
					clock_due(r, (pid_t)evs[i].data.u64,
						  &ndue);
			}
		} else {
			struct pollfd fds[1] = {{r->sig_fd, POLLIN, 0}};
			int ready = ppoll(fds, 1, &timeout, &wait_mask);
			chld = ready > 0 && (fds[0].revents & POLLIN);
		}
		r->events = false;
		if (chld) {
			/* SIGCHLD is the only signal of the descriptor and
			 * is never queued twice: one read takes it.  */
			struct signalfd_siginfo info[8];
			ssize_t got = read(r->sig_fd, info, sizeof(info));
			(void)got;
			r->events = true;
		}
		uint64_t woke = now_ns();
		if (draining && woke >= r->next_drain) {
			clocks_drain(r);
			r->next_drain = woke + r->drain_ns;
		}
		if (r->error) {
			rc = r->error; /* a copy's sample not recorded */
			break;
		}
		if (ndue || r->stats->samples_copied != copied) {
			/* Copies were recorded: their addresses go to the
			 * symbolizer, their samples to on_sample.  */
			rc = stop_and_serve(r, ndue);
			cp_hist_add(&stats->tick_work, now_ns() - woke);
			if (rc < 0)
				break;
		}
		if (!ticking) {
			/* No tick is due while every thread has a clock.  */
			if (woke >= r->next_tick)
				r->next_tick += (1 + (woke - r->next_tick) /
						 r->period) * r->period;
			continue;
		}
		/* A wake-up a period or more after the time asked for: a
		 * tick missed for want of a CPU (the scheduler's), not for
		 * work of ours that ran past its deadline.  Told once.  */
		if (wake > now && woke >= wake + r->period && o->on_late &&
		    !r->late_told) {
			r->late_told = true;
			o->on_late(o->on_late_arg);
		}
		if (woke >= r->next_tick) {
			uint64_t expirations =
				1 + (woke - r->next_tick) / r->period;
			uint64_t due = r->next_tick +
				       (expirations - 1) * r->period;
			r->next_tick += expirations * r->period;
			stats->ticks_scheduled += expirations;
			stats->ticks_missed += expirations - 1;
			cp_hist_add(&stats->tick_late, woke - due);
			rc = tick(r);
			cp_hist_add(&stats->tick_work, now_ns() - woke);
			if (rc < 0)
				break;
		}
	}
	if (rc == 0 && why == CP_SAMPLER_DEADLINE && r->end &&
	    (!until_ns || r->end <= until_ns))
		why = CP_SAMPLER_DURATION;
	/* Threads may have renamed themselves since we first saw them.  */
	if (!cp_target_exited(r->target)) {
		size_t n;
		struct cp_thread *threads = cp_target_threads(r->target, &n);
		for (size_t i = 0; i < n; i++)
			if (cp_profile_thread_name(r->profile, threads[i].tid))
				name_thread(r, threads[i].tid);
	}
	clocks_switch(r, false);
	/* The copies still in the rings: a step's samples are all in when
	 * it returns.  */
	clocks_drain(r);
	if (rc == 0 && r->ep_fd >= 0)
		rc = serve(r, false, 0, 1);
	fill_live_stats(r, r->start);
	/* Drop a SIGCHLD still pending from the tracees, so restoring the
	 * mask does not deliver it to a caller that does not expect it (the
	 * next step serves whatever the tracees reported meanwhile).  */
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	struct timespec zero = {0, 0};
	while (sigtimedwait(&chld, NULL, &zero) > 0)
		;
	r->events = true;
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	if (end_out)
		*end_out = why;
	return rc;
}

const struct cp_sampler_stats *cp_sampler_stats(const struct cp_sampler *r)
{
	return r->stats;
}

struct cp_profile *cp_sampler_profile(struct cp_sampler *r)
{
	return r->profile;
}

int cp_sampler_swap(struct cp_sampler *r, struct cp_profile *fresh)
{
	/* The stack ids streamed samples and --wall's unchanged threads
	 * hold are of the old profile.  */
	if (r->o->on_sample || r->finished)
		return -CP_E_INVAL;
	int rc = cp_resolver_rebind(r->resolver, fresh);
	if (rc < 0)
		return rc;
	r->profile = fresh;
	r->truncated_loc = UINT32_MAX;
	if (r->blocked)
		cp_blocked_forget_stacks(r->blocked);
	return 0;
}

struct cp_profile *cp_sampler_retired(struct cp_sampler *r, bool wait)
{
	return r->resolver ? cp_resolver_retired(r->resolver, wait) : NULL;
}

/* How long cp_sampler_settle waits for the stops still on their way: a
 * thread that must first get a CPU takes milliseconds; one that has not
 * stopped by then is collected by whatever waits next.  */
#define SETTLE_US 200000

void cp_sampler_settle(struct cp_sampler *r)
{
	if (cp_target_interrupts_outstanding(r->target) == 0)
		return;
	/* cp_target_serve's precondition: SIGCHLD blocked while it
	 * sleeps.  */
	sigset_t chld, saved;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, &saved);
	/* The step dropped the SIGCHLD of reports it left for the next
	 * step (R->events): collect those first, without sleeping, since
	 * their signal is gone; a stop that comes later raises its own.  */
	if (r->events)
		cp_target_serve(r->target, 0, NULL, NULL);
	if (cp_target_interrupts_outstanding(r->target))
		cp_target_serve(r->target, SETTLE_US, NULL, NULL);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

struct cp_profile *cp_sampler_finish(struct cp_sampler *r)
{
	if (r->finished)
		return NULL;
	r->finished = true;
	/* A profile still retiring is named with the rest.  */
	struct cp_profile *retired = cp_sampler_retired(r, true);
	cp_resolver_finish(r->resolver);
	r->resolver = NULL;
	if (r->o->on_sample)
		flush_stream(r, true);
	return retired;
}

void cp_sampler_free(struct cp_sampler *r)
{
	if (!r)
		return;
	if (!r->finished)
		cp_profile_free(cp_sampler_finish(r));
	if (r->ep_fd >= 0)
		close(r->ep_fd);
	if (r->sig_fd >= 0)
		close(r->sig_fd);
	free(r->stream);
	free(r->snap_times);
	free(r->copy_scratch);
	for (size_t i = 0; i < r->snaps_cap; i++)
		cp_capture_slot_free(&r->snaps[i]);
	free(r->snaps);
	cp_capture_free(r->capture);
	for (size_t i = 0; i < r->unstopped_cap; i++)
		cp_blocked_read_free(&r->unstopped[i].read);
	free(r->unstopped);
	cp_blocked_free(r->blocked);
	free(r->pcs);
	free(r->locs);
	free(r->tids);
	free(r->accts);
	cp_hashidx_free(&r->acct_index);
	free(r);
}

int cp_sampler_run(struct cp_target *target, struct cp_unwinder *unwinder,
		   struct cp_symbols *symbols, struct cp_profile *profile,
		   const struct cp_sampler_options *o,
		   struct cp_sampler_stats *stats)
{
	struct cp_sampler *r = NULL;
	int rc = cp_sampler_new(target, unwinder, symbols, profile, o, &r);
	if (rc == 0)
		rc = cp_sampler_step(r, 0, NULL, NULL);
	/* Sampling is over: the caller lets the target go now, before we
	 * wait for names (a debug file or a debuginfod download can take
	 * long, and a signal that reaches a traced thread meanwhile would
	 * wait for us).  */
	if (o->at_end)
		o->at_end(o->at_end_arg);
	if (r) {
		cp_sampler_finish(r);
		*stats = *r->stats;
	} else {
		memset(stats, 0, sizeof(*stats));
		stats->duration = o->duration;
	}
	cp_sampler_free(r);
	return rc;
}
