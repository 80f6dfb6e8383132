/* The session: one attachment, driven step by step (cprof/session.h).
 *
 * The session holds the parts of the pipeline that live as long as the
 * attachment — the target, the unwinder and the symbolizer (the target's
 * address space as they see it) — and the capture engine of the moment:
 * a sampler, or heap tracing, never both.  The symbolizer is used by one
 * thread at a time: a sampler's or a heap trace's symbolizer thread while
 * it runs, the caller's thread for a dump; the session finishes one user
 * before it hands the symbolizer to the next.  */
#include "cprof/session.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cprof/addrspace.h"
#include "cprof/error.h"
#include "cprof/procfs.h"
#include "cprof/symbols.h"
#include "cprof/target.h"
#include "cprof/unwinder.h"
#include "arch/x86_64/waits.h"
#include "capture/breaks.h"
#include "capture/funcprof.h"
#include "capture/heap_trap.h"
#include "capture/heap_uprobe.h"
#include "capture/session_hooks.h"
#include "symbolize/lookup.h"

struct cp_session {
	struct cp_session_config config;
	struct cp_target *target;
	pid_t pid;
	struct cp_addrspace *space;    /* the target's, shared by the two: */
	struct cp_unwinder *unwinder;
	struct cp_symbols *symbols;
	int exit_status;              /* of a launched command, -1 unknown */
	bool niced;                   /* config.nice was taken */
	bool sliced;                  /* a short slice was asked for */
	uint64_t dl_period_ns;        /* SCHED_DEADLINE taken: the tick
					 period it was taken for */
	uint64_t dl_after_ns;         /* ... this long after sampling began
					 (the last time sampling took it) */
	uint64_t dl_last_period_ns;   /* ... that tick period; 0: not
					 taken */
	/* sampling */
	struct cp_sampler *sampler;   /* while sampling is on */
	struct cp_sampler_options sample_options;
	struct cp_profile *profile;   /* the windows since the last take */
	struct cp_sampler_stats stats;/* of the current or last run */
	uint64_t window_start_ns;     /* CLOCK_MONOTONIC, of PROFILE */
	uint64_t sampled_ns;          /* PROFILE's time sampled, finished runs */
	uint64_t run_start_ns;        /* of the current sampler */
	/* heap */
	struct cp_heap *heap;         /* the last heap trace */
	struct cp_profile *heap_profile;
	struct cp_heap_options heap_options;
	bool heap_on;                 /* breakpoints in */
	bool heap_resolved;           /* its symbolizer thread is done */
	/* hook dispatch (capture/session_hooks.h) */
	struct cp_target_hooks clients[CP_SESSION_HOOKS_MAX];
	/* A client that cannot share: called before another is added.  */
	int (*exclusive_end)(void *arg);
	void *exclusive_arg;
	size_t nclients;
	unsigned forks_needed;        /* users of fork following */
	/* the caller's thread's symbolizer (lookups, backtraces) */
	struct cp_symbols *lookup;
	/* breakpoints (capture/breaks.c), made at the first insertion */
	struct cp_breaks *breaks;
	bool breaks_forks;            /* they count in forks_needed */
	bool before_exec;             /* launched, its command not exec'ed
				       * yet: what is mapped is not it */
	/* profiling a function (capture/funcprof.c): while its sampler
	 * runs; the counters of the last one once it stopped */
	struct cp_funcprof *funcprof;
	struct cp_session_in_stats in_stats;
	/* inspection */
	uint64_t attached_ns;         /* CLOCK_MONOTONIC of the attach, 0 */
	uint64_t cpu_at_attach_ns;    /* our CPU time then */
	uint64_t cpu_attached_ns;     /* accumulated by finished attachments */
};

static uint64_t monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The CPU time of the whole calling process (every thread).  */
static uint64_t process_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int cp_session_new(const struct cp_session_config *config,
		   struct cp_session **out)
{
	struct cp_session *s = calloc(1, sizeof(*s));
	if (!s)
		return -CP_E_NOMEM;
	if (config)
		s->config = *config;
	s->exit_status = -1;
	*out = s;
	return 0;
}

/* ------------------------------------------------------ hook dispatch */

/* The target's one hook set: every client in turn.  A client may take
 * itself out while it handles a trap (it is called from a copy).  */
static enum cp_target_trap dispatch_trap(void *arg, pid_t tid, bool hold)
{
	struct cp_session *s = arg;
	for (size_t i = 0; i < s->nclients; i++) {
		struct cp_target_hooks c = s->clients[i];
		if (c.on_trap && c.on_trap(c.arg, tid, hold) == CP_TRAP_HANDLED)
			return CP_TRAP_HANDLED;
	}
	return CP_TRAP_NOT_OURS;
}

static void dispatch_fork(void *arg, pid_t parent, pid_t child, bool vfork)
{
	struct cp_session *s = arg;
	for (size_t i = 0; i < s->nclients; i++) {
		struct cp_target_hooks c = s->clients[i];
		if (c.on_fork)
			c.on_fork(c.arg, parent, child, vfork);
	}
}

static void dispatch_exec(void *arg)
{
	struct cp_session *s = arg;
	s->before_exec = false;
	for (size_t i = 0; i < s->nclients; i++) {
		struct cp_target_hooks c = s->clients[i];
		if (c.on_exec)
			c.on_exec(c.arg);
	}
}

/* A new thread is offered to each client in turn until one takes it
 * (heap tracing's other tracer threads); one no client takes gets its
 * sampling clock before it runs.  */
static bool dispatch_birth(void *arg, pid_t tid)
{
	struct cp_session *s = arg;
	for (size_t i = 0; i < s->nclients; i++) {
		struct cp_target_hooks c = s->clients[i];
		if (c.on_birth && c.on_birth(c.arg, tid))
			return true;
	}
	if (s->sampler)
		cp_sampler_born(s->sampler, tid);
	return false;
}

static void dispatch_exit(void *arg, pid_t tid)
{
	struct cp_session *s = arg;
	for (size_t i = 0; i < s->nclients; i++) {
		struct cp_target_hooks c = s->clients[i];
		if (c.on_exit)
			c.on_exit(c.arg, tid);
	}
}

size_t cp_session_hooks_count(const struct cp_session *s)
{
	return s->nclients;
}

int cp_session_hooks_add(struct cp_session *s,
			 const struct cp_target_hooks *hooks)
{
	if (!s->target)
		return -CP_E_GONE;
	if (s->nclients == CP_SESSION_HOOKS_MAX)
		return -CP_E_BUSY;
	if (s->exclusive_end) {
		int (*end)(void *) = s->exclusive_end;
		s->exclusive_end = NULL;
		int rc = end(s->exclusive_arg);
		if (rc < 0)
			return rc;
	}
	s->clients[s->nclients++] = *hooks;
	return 0;
}

void cp_session_hooks_exclusive(struct cp_session *s, int (*end)(void *arg),
				void *arg)
{
	s->exclusive_end = end;
	s->exclusive_arg = arg;
}

void cp_session_hooks_remove(struct cp_session *s, void *arg)
{
	for (size_t i = 0; i < s->nclients; i++)
		if (s->clients[i].arg == arg) {
			memmove(&s->clients[i], &s->clients[i + 1],
				(s->nclients - i - 1) * sizeof(*s->clients));
			s->nclients--;
			return;
		}
}

int cp_session_forks_need(struct cp_session *s, bool need)
{
	if (need)
		s->forks_needed++;
	else if (s->forks_needed)
		s->forks_needed--;
	if (!s->target || cp_target_exited(s->target))
		return need ? -CP_E_GONE : 0;
	return cp_target_set_follow_forks(s->target, s->config.follow_forks ||
							     s->forks_needed);
}

struct cp_symbols *cp_session_lookup_symbols(struct cp_session *s)
{
	if (!s->lookup && s->space) {
		struct cp_symbols_options so = {
			.debuginfo_dirs = s->config.debuginfo_dirs,
			.n_debuginfo_dirs = s->config.n_debuginfo_dirs,
			.no_demangle = s->config.no_demangle,
			.no_dwarf = s->config.no_dwarf,
			.warn = s->config.warn,
			.warn_arg = s->config.warn_arg,
		};
		if (cp_symbols_new_in(s->space, &so, &s->lookup) < 0)
			s->lookup = NULL;
	}
	return s->lookup;
}

struct cp_unwinder *cp_session_unwinder(struct cp_session *s)
{
	return s->unwinder;
}

/* ------------------------------------------------------------ attach */

/* The unwinder and the symbolizer of the attached target.  */
static int set_up(struct cp_session *s)
{
	s->pid = cp_target_pid(s->target);
	if (s->config.cancel)
		cp_target_set_cancel(s->target, s->config.cancel);
	/* Installed once: heap tracing, breakpoints and profiling a
	 * function add themselves to the list.  */
	struct cp_target_hooks dispatcher = { dispatch_trap, dispatch_fork,
					      dispatch_exec, s,
					      dispatch_birth, dispatch_exit };
	s->nclients = 0;
	s->forks_needed = 0;
	s->before_exec = false;
	cp_target_set_hooks(s->target, &dispatcher);
	s->attached_ns = monotonic_ns();
	s->cpu_at_attach_ns = process_cpu_ns();
	s->cpu_attached_ns = 0;
	int rc = cp_addrspace_new(s->pid, &s->space);
	if (rc < 0)
		return rc;
	rc = cp_unwinder_new_in(s->space, &s->unwinder);
	if (rc < 0)
		return rc;
	struct cp_symbols_options so = {
		.debuginfo_dirs = s->config.debuginfo_dirs,
		.n_debuginfo_dirs = s->config.n_debuginfo_dirs,
		.no_demangle = s->config.no_demangle,
		.no_dwarf = s->config.no_dwarf,
		.verbose = s->config.verbose,
		.warn = s->config.warn,
		.warn_arg = s->config.warn_arg,
	};
	return cp_symbols_new_in(s->space, &so, &s->symbols);
}

/* The calling thread's priority (Linux applies these to the calling
 * thread only; the symbolizer threads lower their own).
 *
 * Sampling, once a tick is missed for want of a CPU (the sampler's
 * on_late; cp_session_config.sched_deadline):
 * SCHED_DEADLINE, a reservation of a quarter of a CPU (runtime = period /
 * DL_SHARE, deadline = period: 16 ms or the tick's, dl_period).  Not
 * from the start unless the machine is crowded already (crowded): a
 * thread of this class wakes on the CPU it last ran on and takes it from
 * the target's thread there rather than going to an idle CPU, which cost
 * 20-40 % more CPU per sample on a quiet machine (bench/cost.sh goal 1:
 * 107.9 against 77.9 us, 1 busy thread).
 * A woken thread of this class runs at once, ahead of every thread of the
 * target, and the kernel itself caps what it can take: past its runtime
 * it waits for the next period, so a tick's work that grows (thousands of
 * threads, a bug of ours) costs ticks, never more than a quarter of a CPU.
 * With 8 busy threads on 2 CPUs at 999 Hz: 0.1-0.4 % of the ticks missed
 * in 3 s runs (0.0-0.2 % in this class from the start), against 1.1-1.6 %
 * at nice -10 with a 100 us slice (below), where the
 * woken thread waited 2-8 ms for a CPU (perf sched timehist) about four
 * times a second.  Threads created by a thread of this class are of the
 * normal one (reset on fork).  Not taken above 1000 Hz (the reservation
 * would have to be more than a quarter of a CPU to cover a tick's work),
 * when the kernel refuses (no CAP_SYS_NICE, a cpuset narrower than its
 * root domain, the machine's deadline bandwidth taken), or for heap
 * tracing, whose work is the target's traps, not ticks: then nice.
 *
 * The slice asked for with the nice value: under EEVDF (Linux 6.6 and
 * later; a slice request from 6.12) a waking thread preempts the one on
 * the CPU only if its virtual deadline comes first, and a deadline is a
 * slice away: with the default slice, the sampling thread woken for its
 * tick could wait for the scheduler's next tick (4 ms at HZ=250) behind a
 * busy thread of the target, whatever its nice value (seen with perf
 * sched timehist: 3.9 ms runnable, not run).  With 8 busy threads on 2
 * CPUs at 999 Hz that missed 1.7-2.2 % of the ticks; with a 100 us slice
 * 0.9-1.1 %.  A kernel without slice requests ignores it for SCHED_OTHER;
 * a failure changes nothing.  */
#define TICK_SLICE_NS 100000u
#define DL_SHARE 4
#define DL_PERIOD_NS 16000000u
#define DL_MIN_PERIOD_NS 1000000u
#define SCHED_DEADLINE_POLICY 6 /* SCHED_DEADLINE */
#define SCHED_FLAG_RESET_ON_FORK_BIT 0x01

/* struct sched_attr, its first version (glibc 2.36 has no declaration
 * of its own, and the kernel's header clashes with <sched.h>).  */
struct slice_attr {
	uint32_t size, sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime, sched_deadline, sched_period;
};

/* The calling thread in class POLICY: for SCHED_OTHER at NICE, with
 * RUNTIME as its slice; for SCHED_DEADLINE RUNTIME every PERIOD.  */
static bool set_class(uint32_t policy, uint64_t flags, int nice,
		      uint64_t runtime, uint64_t period)
{
	struct slice_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.sched_policy = policy;
	attr.sched_flags = flags;
	attr.sched_nice = nice;
	attr.sched_runtime = runtime;
	attr.sched_deadline = period;
	attr.sched_period = period;
	return syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
}

static bool set_normal(int nice)
{
	return set_class(SCHED_OTHER, 0, nice, TICK_SLICE_NS, 0);
}

/* The reservation's period for ticks of TICK_NS: 16 ms, or the tick if
 * longer.  Over several ticks, the work of one can take more than a
 * quarter of its own period without missing the next: a tick that finds
 * several stops (8 busy threads: up to 1.9 ms of work, p99 0.33 ms) or
 * unwinds a new module's code.  8 busy threads on 2 CPUs at 999 Hz, the
 * class taken from the start, ticks missed in 3 s runs: 11 and 14 with
 * the tick's own period (250 us per 1 ms), 0-12 with 4 ticks, 0 in 11
 * runs of 13 with 16 ms (10 in the other two, in their first 15 ms).  */
static uint64_t dl_period(uint64_t tick_ns)
{
	return tick_ns < DL_PERIOD_NS ? DL_PERIOD_NS : tick_ns;
}

/* TICK_NS: the sampling tick's period, 0 for anything else.  */
static void take_priority(struct cp_session *s, uint64_t tick_ns)
{
	if (!s->config.nice)
		return;
	if (tick_ns >= DL_MIN_PERIOD_NS && tick_ns <= 1000000000u) {
		if (s->dl_period_ns == tick_ns)
			return;
		uint64_t period = dl_period(tick_ns);
		if (set_class(SCHED_DEADLINE_POLICY,
			      SCHED_FLAG_RESET_ON_FORK_BIT, 0,
			      period / DL_SHARE, period)) {
			s->dl_period_ns = tick_ns;
			s->dl_last_period_ns = tick_ns;
			s->dl_after_ns = monotonic_ns() - s->run_start_ns;
			return;
		}
	}
	if (s->dl_period_ns) {
		/* Back to the normal class, at the nice value and slice.  */
		s->dl_period_ns = 0;
		s->niced = s->sliced = false;
		if (set_normal(s->config.nice))
			s->niced = s->sliced = true;
	}
	if (!s->niced && setpriority(PRIO_PROCESS, 0, s->config.nice) == 0)
		s->niced = true;
	if (s->niced && !s->sliced && set_normal(s->config.nice))
		s->sliced = true;
}

/* The sampling tick's period.  */
static uint64_t tick_ns(const struct cp_session *s)
{
	unsigned hz = s->sample_options.frequency;
	return 1000000000ull / (hz ? hz : 1);
}

/* Are there already more runnable threads than CPUs we may run on (one
 * at least waiting for a CPU)?  Then the sampling thread takes
 * SCHED_DEADLINE from the start rather than at its first missed tick
 * (cp_session_config.sched_deadline 0):
 * on a crowded machine a tick is missed within a second (0.09-1.41 s in
 * 3 s runs with 8 busy threads on 2 CPUs), and the class costs no CPU
 * there that a free CPU would have spared.  */
static bool crowded(void)
{
	cpu_set_t allowed;
	int cpus = sched_getaffinity(0, sizeof(allowed), &allowed) == 0
			   ? CPU_COUNT(&allowed)
			   : (int)sysconf(_SC_NPROCESSORS_ONLN);
	/* Runnable threads of the machine, less ours (this one, and a
	 * symbolizer thread reading debug information at start-up): the
	 * least of three looks, past a passing kernel worker or shell.  */
	int others = INT32_MAX;
	for (int i = 0; i < 3; i++) {
		int runnable = cp_procfs_runnable();
		int ours = cp_procfs_runnable_tasks(getpid());
		if (runnable < 0 || ours < 0)
			return false;
		if (runnable - ours < others)
			others = runnable - ours;
	}
	return cpus > 0 && others > cpus;
}

/* cp_sampler_options.on_late: ticks are being missed.  */
static void sampling_late(void *arg)
{
	struct cp_session *s = arg;
	if (s->config.sched_deadline == 0)
		take_priority(s, tick_ns(s));
}

bool cp_session_deadline(const struct cp_session *s, uint64_t *runtime_ns,
			 uint64_t *period_ns, uint64_t *after_ns)
{
	if (!s->dl_last_period_ns)
		return false;
	*period_ns = dl_period(s->dl_last_period_ns);
	*runtime_ns = *period_ns / DL_SHARE;
	*after_ns = s->dl_after_ns;
	return true;
}

bool cp_session_niced(const struct cp_session *s)
{
	return s->niced;
}

static void tear_down(struct cp_session *s)
{
	cp_symbols_free(s->lookup);
	s->lookup = NULL;
	cp_symbols_free(s->symbols);
	cp_unwinder_free(s->unwinder);
	cp_addrspace_free(s->space);
	s->symbols = NULL;
	s->unwinder = NULL;
	s->space = NULL;
}

int cp_session_attach(struct cp_session *s, pid_t pid, const pid_t *tids,
		      size_t ntids, bool dump_only, pid_t *tracer)
{
	if (s->target)
		return -CP_E_BUSY;
	tear_down(s);
	pid_t other = 0;
	int rc = cp_target_attach(pid, tids, ntids,
				  dump_only ? 0
					    : CP_TARGET_FOLLOW_CLONES |
						      (s->config.follow_forks
							       ? CP_TARGET_FOLLOW_FORKS
							       : 0),
				  &s->target, &other);
	if (tracer)
		*tracer = other;
	if (rc < 0)
		return rc;
	rc = set_up(s);
	if (rc < 0)
		cp_session_detach(s);
	return rc;
}

int cp_session_launch(struct cp_session *s, char *const argv[])
{
	if (s->target)
		return -CP_E_BUSY;
	tear_down(s);
	int rc = cp_target_launch(argv,
				  CP_TARGET_FOLLOW_CLONES |
					  (s->config.follow_forks
						   ? CP_TARGET_FOLLOW_FORKS
						   : 0),
				  &s->target);
	if (rc < 0)
		return rc;
	rc = set_up(s);
	s->before_exec = true;
	if (rc < 0)
		cp_session_detach(s);
	return rc;
}

bool cp_session_attached(const struct cp_session *s)
{
	return s->target != NULL;
}

pid_t cp_session_pid(const struct cp_session *s)
{
	return s->target ? s->pid : 0;
}

bool cp_session_target_exited(const struct cp_session *s)
{
	return !s->target || cp_target_exited(s->target);
}

struct cp_target *cp_session_target(struct cp_session *s)
{
	return s->target;
}

/* ------------------------------------------------------------ sampling */

/* Describe PROFILE: the target, the sampling rate, when it began.  */
static void describe(struct cp_session *s, struct cp_profile *profile)
{
	struct cp_profile_meta *meta = cp_profile_meta(profile);
	meta->pid = s->pid;
	if (s->sample_options.frequency)
		meta->frequency = s->sample_options.frequency;
	if (!meta->target[0] && s->target)
		cp_procfs_cmdline(s->pid, meta->target, sizeof(meta->target));
	if (!meta->time_nanos)
		meta->time_nanos = realtime_ns();
}

static struct cp_profile *open_window(struct cp_session *s);

/* The heap trace's symbolizer thread ends here: the symbolizer is
 * someone else's next.  */
static void heap_settle(struct cp_session *s)
{
	if (s->heap && !s->heap_resolved) {
		cp_heap_resolve(s->heap);
		s->heap_resolved = true;
	}
}

int cp_session_sample_start(struct cp_session *s,
			    const struct cp_sampler_options *options)
{
	if (s->sampler || s->heap_on)
		return -CP_E_BUSY;
	if (!s->target || cp_target_exited(s->target))
		return -CP_E_GONE;
	heap_settle(s);
	if (!open_window(s))
		return -CP_E_NOMEM;
	s->sample_options = *options;
	s->sample_options.duration = 0;
	s->sample_options.stop = NULL;
	s->sample_options.at_end = NULL;
	s->sample_options.unwind_mode = s->config.unwind_mode;
	describe(s, s->profile);
	s->dl_last_period_ns = 0;
	s->run_start_ns = monotonic_ns();
	bool dl = s->config.sched_deadline > 0 ||
		  (s->config.sched_deadline == 0 && s->config.nice &&
		   crowded());
	take_priority(s, dl ? tick_ns(s) : 0);
	s->dl_after_ns = 0; /* from the start */
	if (s->config.sched_deadline == 0 && !s->sample_options.on_late) {
		s->sample_options.on_late = sampling_late;
		s->sample_options.on_late_arg = s;
	}
	int rc = cp_sampler_new(s->target, s->unwinder, s->symbols, s->profile,
				&s->sample_options, &s->sampler);
	if (rc < 0)
		return rc;
	s->run_start_ns = monotonic_ns();
	memset(&s->stats, 0, sizeof(s->stats));
	return 0;
}

int cp_session_sample_run(struct cp_session *s, uint64_t until_ns,
			  volatile sig_atomic_t *stop,
			  enum cp_session_end *end)
{
	if (!s->sampler)
		return -CP_E_INVAL;
	enum cp_sampler_end why = CP_SAMPLER_DEADLINE;
	int rc = cp_sampler_step(s->sampler, until_ns, stop, &why);
	s->stats = *cp_sampler_stats(s->sampler);
	if (end)
		*end = why == CP_SAMPLER_STOPPED ? CP_SESSION_STOPPED
		       : why == CP_SAMPLER_EXITED ? CP_SESSION_EXITED
						  : CP_SESSION_DEADLINE;
	return rc;
}

/* PROFILE's time sampled until NOW.  */
static void close_window(struct cp_session *s, struct cp_profile *profile,
			 uint64_t now)
{
	uint64_t ran = s->sampler ? now - s->run_start_ns : 0;
	cp_profile_meta(profile)->duration_nanos = s->sampled_ns + ran;
}

struct cp_profile *cp_session_take_profile(struct cp_session *s)
{
	struct cp_profile *fresh = cp_profile_new();
	if (!fresh)
		return NULL;
	uint64_t now = monotonic_ns();
	if (!s->profile) {
		/* Nothing sampled since the last take: an empty window.  */
		describe(s, fresh);
		return fresh;
	}
	struct cp_profile *old = s->profile;
	close_window(s, old, now);
	if (!s->sampler) {
		s->profile = NULL;
		cp_profile_free(fresh);
		return old;
	}
	if (cp_sampler_swap(s->sampler, fresh) < 0) {
		/* Streamed samples name stacks of one profile: the window
		 * ends with a finished sampler instead (a tick may be
		 * missed while the names come in).  */
		cp_profile_free(fresh);
		return NULL;
	}
	s->profile = fresh;
	s->sampled_ns = 0;
	s->run_start_ns = now;
	s->window_start_ns = now;
	describe(s, fresh);
	/* The old profile's frames are named by the symbolizer thread; the
	 * ticks go on meanwhile, each step short.  */
	struct cp_profile *done;
	while (!(done = cp_sampler_retired(s->sampler, false))) {
		if (cp_target_exited(s->target) ||
		    (s->config.cancel && *s->config.cancel)) {
			done = cp_sampler_retired(s->sampler, true);
			break;
		}
		cp_sampler_step(s->sampler, monotonic_ns() + tick_ns(s), NULL,
				NULL);
	}
	s->stats = *cp_sampler_stats(s->sampler);
	return done;
}

static int funcprof_end(struct cp_session *s);

int cp_session_sample_stop(struct cp_session *s)
{
	if (!s->sampler)
		return 0;
	if (s->dl_period_ns)
		take_priority(s, 0);
	uint64_t now = monotonic_ns();
	s->stats = *cp_sampler_stats(s->sampler);
	close_window(s, s->profile, now);
	s->sampled_ns += now - s->run_start_ns;
	/* Profiling a function: its byte and return addresses back first,
	 * while the threads are ours.  */
	int rc = funcprof_end(s);
	cp_sampler_settle(s->sampler);
	cp_profile_free(cp_sampler_finish(s->sampler));
	cp_sampler_free(s->sampler);
	s->sampler = NULL;
	return rc;
}

const struct cp_sampler_stats *cp_session_sample_stats(
	const struct cp_session *s)
{
	return &s->stats;
}

struct cp_profile *cp_session_profile(struct cp_session *s)
{
	return s->profile;
}

/* An empty profile for the windows to come.  */
static struct cp_profile *open_window(struct cp_session *s)
{
	if (!s->profile) {
		s->profile = cp_profile_new();
		if (!s->profile)
			return NULL;
		s->sampled_ns = 0;
		s->window_start_ns = monotonic_ns();
	}
	return s->profile;
}

struct cp_profile *cp_session_prepare_profile(struct cp_session *s)
{
	struct cp_profile *profile = open_window(s);
	if (profile)
		describe(s, profile);
	return profile;
}

struct cp_symbols *cp_session_symbols(struct cp_session *s)
{
	return s->symbols;
}

int cp_session_reset(struct cp_session *s)
{
	struct cp_profile *fresh = cp_profile_new();
	if (!fresh)
		return -CP_E_NOMEM;
	if (s->sampler) {
		if (cp_sampler_swap(s->sampler, fresh) < 0) {
			cp_profile_free(fresh);
			return -CP_E_BUSY;
		}
		s->profile = fresh;
		describe(s, fresh);
		s->run_start_ns = monotonic_ns();
		s->sampled_ns = 0;
		/* The old profile is dropped, but only once the symbolizer
		 * thread is done with it (it names into it until then).  */
		cp_profile_free(cp_sampler_retired(s->sampler, true));
		return 0;
	}
	cp_profile_free(s->profile);
	cp_profile_free(fresh);
	s->profile = NULL;
	return 0;
}

/* ---------------------------------------------------------------- dump */

static void dump_held(struct cp_session *s, struct cp_capture *capture,
		      size_t max_depth, struct cp_dump *dump);

int cp_session_dump(struct cp_session *s, size_t max_depth,
		    struct cp_dump **out)
{
	if (s->sampler || s->heap_on)
		return -CP_E_BUSY;
	if (!s->target || cp_target_exited(s->target))
		return -CP_E_GONE;
	heap_settle(s);
	struct cp_capture *capture = NULL;
	int rc = cp_capture_new(s->target, s->unwinder, s->config.unwind_mode,
				max_depth, &capture);
	if (rc == 0)
		rc = cp_dump_capture(s->target, capture, s->symbols, max_depth,
				     out);
	if (rc == 0)
		dump_held(s, capture, max_depth, *out);
	cp_capture_free(capture);
	return rc;
}

/* ---------------------------------------------------------------- heap */

int cp_session_heap_start(struct cp_session *s,
			  const struct cp_heap_options *options)
{
	if (s->sampler || s->heap_on)
		return -CP_E_BUSY;
	if (!s->target || cp_target_exited(s->target))
		return -CP_E_GONE;
	heap_settle(s);
	cp_heap_free(s->heap);
	s->heap = NULL;
	cp_profile_free(s->heap_profile);
	s->heap_profile = cp_profile_new();
	if (!s->heap_profile)
		return -CP_E_NOMEM;
	struct cp_profile_meta *meta = cp_profile_meta(s->heap_profile);
	meta->pid = s->pid;
	meta->time_nanos = realtime_ns();
	take_priority(s, 0);
	/* The children of a fork must lose our breakpoints before they
	 * run.  */
	int rc = cp_session_forks_need(s, true);
	s->heap_options = *options;
	s->heap_options.duration = 0;
	s->heap_options.stop = s->config.cancel;
	if (!s->heap_options.warn) {
		s->heap_options.warn = s->config.warn;
		s->heap_options.warn_arg = s->config.warn_arg;
	}
	if (rc == 0)
		rc = cp_heap_start_in(s, s->target, s->unwinder, s->symbols,
				      s->heap_profile, &s->heap_options,
				      &s->heap);
	cp_procfs_cmdline(s->pid, meta->target, sizeof(meta->target));
	if (rc < 0) {
		cp_session_forks_need(s, false);
		s->heap = NULL;
		return rc;
	}
	s->heap_on = true;
	s->heap_resolved = false;
	return 0;
}

int cp_session_heap_run(struct cp_session *s, uint64_t until_ns,
			volatile sig_atomic_t *stop, enum cp_session_end *end)
{
	if (!s->heap_on)
		return -CP_E_INVAL;
	enum cp_heap_end why = CP_HEAP_DEADLINE;
	int rc = cp_heap_run_until(s->heap, until_ns, stop, &why);
	if (end)
		*end = why == CP_HEAP_STOPPED ? CP_SESSION_STOPPED
		       : why == CP_HEAP_EXITED ? CP_SESSION_EXITED
		       : why == CP_HEAP_EXEC   ? CP_SESSION_EXEC
					       : CP_SESSION_DEADLINE;
	return rc;
}

int cp_session_heap_stop(struct cp_session *s)
{
	if (!s->heap_on)
		return 0;
	s->heap_on = false;
	int rc = cp_heap_finish(s->heap);
	cp_session_forks_need(s, false);
	const struct cp_heap_summary *sum = cp_heap_summary(s->heap);
	cp_profile_meta(s->heap_profile)->duration_nanos =
		(uint64_t)(sum->duration * 1e9);
	return rc;
}

void cp_session_heap_resolve(struct cp_session *s)
{
	if (!s->heap_on)
		heap_settle(s);
}

struct cp_heap *cp_session_heap(struct cp_session *s)
{
	return s->heap;
}

struct cp_profile *cp_session_heap_profile(struct cp_session *s)
{
	return s->heap_profile;
}

/* --------------------------------------------------------- breakpoints */

/* The breakpoints' share of fork following: while there are any.  */
static void breaks_forks(struct cp_session *s)
{
	bool need = cp_breaks_count(s->breaks) > 0;
	if (need != s->breaks_forks) {
		s->breaks_forks = need;
		cp_session_forks_need(s, need);
	}
}

/* Where LOCATION is in the target's image now (for breaks.c).  */
static int locate(void *arg, const char *location, struct cp_place *out)
{
	struct cp_session *s = arg;
	struct cp_symbols *lookup = cp_session_lookup_symbols(s);
	if (!lookup)
		return -CP_E_NOMEM;
	return cp_symbols_locate(lookup, location, 0, out);
}

int cp_session_break_insert(struct cp_session *s, const char *location,
			    bool temporary, int *id)
{
	if (!s->target || cp_target_exited(s->target))
		return -CP_E_GONE;
	int rc;
	if (!s->breaks) {
		rc = cp_breaks_new(s, s->target, locate, s, &s->breaks);
		if (rc < 0)
			return rc;
	}
	/* Fork children followed before the int3 is in: none may copy it
	 * unseen.  (Holding the threads for that may take the exec of a
	 * command just launched.)  */
	if (!s->breaks_forks) {
		s->breaks_forks = true;
		cp_session_forks_need(s, true);
	}
	/* A launched command whose exec was not taken yet: the breakpoint
	 * waits for its image, and is set at the exec, before its first
	 * instruction runs.  */
	bool pending = s->before_exec;
	struct cp_place place;
	rc = pending ? 0 : locate(s, location, &place);
	/* The kernel's int3 at an allocator's entry point takes its traps
	 * first: a breakpoint of ours there would never fire.  */
	if (rc == 0 && !pending && s->heap_on &&
	    cp_heap_uprobes_at(s->heap, place.addr))
		rc = -CP_E_BUSY;
	if (rc == 0)
		rc = cp_breaks_insert(s->breaks, pending ? NULL : &place,
				      location, temporary, id);
	breaks_forks(s);
	return rc;
}

int cp_session_break_delete(struct cp_session *s, int id)
{
	if (!s->breaks)
		return -CP_E_INVAL;
	int rc = cp_breaks_delete(s->breaks, id);
	breaks_forks(s);
	return rc;
}

int cp_session_break_enable(struct cp_session *s, int id, bool enabled)
{
	if (!s->breaks)
		return -CP_E_INVAL;
	return cp_breaks_enable(s->breaks, id, enabled);
}

const struct cp_session_break *cp_session_breaks(const struct cp_session *s,
						 size_t *count)
{
	return cp_breaks_list(s->breaks, count);
}

/* A hit held for the caller and not told yet (a temporary breakpoint
 * deleted now), into *HIT.  */
static bool take_hit(struct cp_session *s, struct cp_session_hit *hit)
{
	if (!s->breaks || !cp_breaks_take_hit(s->breaks, hit))
		return false;
	breaks_forks(s);
	return true;
}

static bool stop_set(const struct cp_session *s, volatile sig_atomic_t *stop)
{
	return (stop && *stop) || (s->config.cancel && *s->config.cancel);
}

/* Neither sampling nor heap tracing is on: serve the target's events
 * (the traps among them) until a hit is held, UNTIL_NS, *STOP or the
 * target's exit.  The sampler's way of waiting: the signals that end a
 * wait are blocked while we work and unblocked only inside ppoll, so a
 * handler setting *STOP is never missed; SIGCHLD (a tracee reported)
 * comes through a signalfd.  */
static int idle_wait(struct cp_session *s, uint64_t until_ns,
		     volatile sig_atomic_t *stop)
{
	sigset_t block, saved, wait_mask, chld;
	sigemptyset(&block);
	sigaddset(&block, SIGCHLD);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &block, &saved);
	wait_mask = saved;
	sigaddset(&wait_mask, SIGCHLD);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	int fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	int rc = fd < 0 ? -CP_E_SYS : 0;
	while (rc == 0) {
		cp_target_poll(s->target);
		if (stop_set(s, stop) || cp_target_exited(s->target) ||
		    (s->breaks && cp_breaks_has_hit(s->breaks)))
			break;
		uint64_t now = monotonic_ns();
		if (until_ns && now >= until_ns)
			break;
		/* At most 100 ms at a time: a stop flag set by a thread
		 * rather than a signal is seen too.  */
		uint64_t rel = until_ns ? until_ns - now : 100000000u;
		if (rel > 100000000u)
			rel = 100000000u;
		struct timespec timeout = {(time_t)(rel / 1000000000u),
					   (long)(rel % 1000000000u)};
		struct pollfd pfd = {fd, POLLIN, 0};
		if (ppoll(&pfd, 1, &timeout, &wait_mask) > 0) {
			struct signalfd_siginfo info[8];
			while (read(fd, info, sizeof(info)) > 0)
				;
		}
	}
	if (fd >= 0)
		close(fd);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	return rc;
}

/* One slice of waiting with a capture engine on: short, so a hit is
 * told soon after it is held.  */
#define WAIT_SLICE_NS 20000000u

int cp_session_wait(struct cp_session *s, uint64_t until_ns,
		    volatile sig_atomic_t *stop, enum cp_session_end *end,
		    struct cp_session_hit *hit)
{
	if (!s->target)
		return -CP_E_GONE;
	enum cp_session_end why = CP_SESSION_DEADLINE;
	struct cp_session_hit got = {0};
	const struct cp_session_hit *held = cp_session_held(s);
	int rc = 0;
	if (held) {
		/* Still held from the last wait: that is the hit.  */
		got = *held;
		why = CP_SESSION_BREAK;
		goto out;
	}
	if (s->breaks)
		cp_breaks_set_waiting(s->breaks, true);
	for (;;) {
		if (take_hit(s, &got)) {
			why = CP_SESSION_BREAK;
			break;
		}
		if (stop_set(s, stop)) {
			why = CP_SESSION_STOPPED;
			break;
		}
		if (cp_target_exited(s->target)) {
			why = CP_SESSION_EXITED;
			break;
		}
		uint64_t now = monotonic_ns();
		if (until_ns && now >= until_ns)
			break;
		uint64_t slice = now + WAIT_SLICE_NS;
		if (until_ns && until_ns < slice)
			slice = until_ns;
		if (s->sampler) {
			rc = cp_sampler_step(s->sampler, slice, stop, NULL);
			s->stats = *cp_sampler_stats(s->sampler);
		} else if (s->heap_on) {
			enum cp_heap_end he = CP_HEAP_DEADLINE;
			rc = cp_heap_run_until(s->heap, slice, stop, &he);
			if (rc == 0 && he == CP_HEAP_EXEC) {
				why = CP_SESSION_EXEC;
				break;
			}
		} else {
			rc = idle_wait(s, until_ns, stop);
		}
		if (rc < 0)
			break;
	}
	if (s->breaks)
		cp_breaks_set_waiting(s->breaks, false);
out:
	if (s->breaks) {
		int failed = cp_breaks_take_error(s->breaks);
		if (failed && s->config.warn) {
			char text[160];
			snprintf(text, sizeof(text),
				 "a breakpoint's byte could not be written "
				 "back in %d: %s", (int)s->pid,
				 cp_strerror(failed));
			s->config.warn(s->config.warn_arg, text);
		}
	}
	if (end)
		*end = why;
	if (hit && why == CP_SESSION_BREAK)
		*hit = got;
	return rc;
}

const struct cp_session_hit *cp_session_held(const struct cp_session *s)
{
	return s->target ? cp_breaks_held(s->breaks) : NULL;
}

int cp_session_held_regs(struct cp_session *s, struct user_regs_struct *regs)
{
	const struct cp_session_hit *held = cp_session_held(s);
	if (!held)
		return -CP_E_NOTHELD;
	return cp_target_get_regs(s->target, held->tid, regs);
}

int cp_session_continue(struct cp_session *s)
{
	if (!cp_session_held(s))
		return -CP_E_NOTHELD;
	return cp_breaks_continue(s->breaks);
}

/* The stop of a thread we are about to take for a backtrace must not be
 * collected in place of the sampler's: let the sampler serve the
 * interrupts it has outstanding first (a few short steps).  */
static void sampler_settle(struct cp_session *s)
{
	for (int tries = 0; s->sampler && tries < 50 &&
			    cp_target_interrupts_outstanding(s->target);
	     tries++)
		cp_sampler_step(s->sampler, monotonic_ns() + 1000000u, NULL,
				NULL);
}

/* The frames of SLOT into THREAD, named by SYMBOLS (as cp_dump_capture
 * does).  */
static int name_frames(struct cp_capture *capture,
		       const struct cp_capture_slot *slot,
		       struct cp_symbols *symbols, size_t max_depth,
		       struct cp_dump_thread *thread)
{
	uint64_t *pcs = malloc(max_depth * sizeof(*pcs));
	if (!pcs)
		return -CP_E_NOMEM;
	size_t npcs = cp_capture_unwind(capture, slot, pcs, max_depth);
	size_t cap = 0;
	int rc = 0;
	cp_symbols_new_epoch(symbols);
	for (size_t j = 0; j < npcs && rc == 0; j++) {
		uint64_t pc = cp_unwind_address(pcs[j]);
		const struct cp_symbol *sym = cp_symbols_lookup(symbols, pc);
		for (size_t k = 0; k < sym->nframes; k++) {
			if (thread->nframes == cap) {
				cap = cap ? cap * 2 : 32;
				struct cp_dump_frame *grown = realloc(
					thread->frames, cap * sizeof(*grown));
				if (!grown) {
					rc = -CP_E_NOMEM;
					break;
				}
				thread->frames = grown;
			}
			thread->frames[thread->nframes++] =
				(struct cp_dump_frame){
					/* Return addresses as they are on
					 * the stack.  */
					.address = j == 0 ? pc : pc + 1,
					.frame = &sym->frames[k],
					.module = sym->module,
				};
		}
	}
	free(pcs);
	return rc;
}

/* The dump stops every thread, but the one held at a breakpoint is
 * stopped already and was not copied: its stack, where it stands.  */
static void dump_held(struct cp_session *s, struct cp_capture *capture,
		      size_t max_depth, struct cp_dump *dump)
{
	const struct cp_session_hit *held = cp_session_held(s);
	for (size_t i = 0; held && i < dump->nthreads; i++) {
		struct cp_dump_thread *t = &dump->threads[i];
		if (t->tid != held->tid || t->nframes)
			continue;
		struct cp_capture_slot slot;
		memset(&slot, 0, sizeof(slot));
		if (cp_capture_take(capture, t->tid, &slot) == 0)
			name_frames(capture, &slot, s->symbols,
				    max_depth ? max_depth : 1, t);
		cp_capture_slot_free(&slot);
	}
}

int cp_session_backtrace(struct cp_session *s, pid_t tid, size_t max_depth,
			 struct cp_dump **out)
{
	if (!s->target || cp_target_exited(s->target))
		return -CP_E_GONE;
	const struct cp_session_hit *held = cp_session_held(s);
	if (tid == 0) {
		if (!held)
			return -CP_E_NOTHELD;
		tid = held->tid;
	}
	struct cp_thread *th = cp_target_thread(s->target, tid);
	if (!th)
		return -CP_E_INVAL;
	if (max_depth < 1)
		max_depth = 1;
	/* Named by the caller's own symbolizer: a sampler's or a heap
	 * trace's symbolizer thread may own the session's.  */
	struct cp_symbols *symbols = cp_session_lookup_symbols(s);
	struct cp_dump *dump = calloc(1, sizeof(*dump));
	struct cp_capture *capture = NULL;
	struct cp_capture_slot slot;
	memset(&slot, 0, sizeof(slot));
	int rc = -CP_E_NOMEM;
	if (!symbols || !dump ||
	    !(dump->threads = calloc(1, sizeof(*dump->threads))))
		goto out;
	dump->pid = s->pid;
	struct cp_dump_thread *t = &dump->threads[0];
	t->tid = tid;
	t->syscall = -1;
	/* The state before our stop (after it, "tracing stop").  */
	t->state = th->stopped ? 't' : cp_target_thread_state(s->target, th);
	cp_procfs_comm(s->pid, tid, t->name, sizeof(t->name));
	rc = cp_capture_new(s->target, s->unwinder, s->config.unwind_mode,
			    max_depth, &capture);
	if (rc < 0)
		goto out;
	if (th->stopped) {
		/* Held (at a breakpoint): where it stands.  */
		rc = cp_capture_take(capture, tid, &slot);
	} else {
		sampler_settle(s);
		rc = cp_target_stop(s->target, tid);
		if (rc == 0) {
			rc = cp_capture_take(capture, tid, &slot);
			/* Our stop broke a wait the kernel does not restart:
			 * make it a restart (as the dump does).  */
			struct user_regs_struct regs = slot.snap.regs;
			if (rc == 0 && cp_waits_undo_eintr(&regs))
				cp_target_set_regs(s->target, tid, &regs);
			cp_target_resume(s->target, tid);
		}
	}
	if (rc < 0)
		goto out;
	/* Inside a function being profiled: its real return address.  */
	if (s->funcprof)
		cp_funcprof_mend(s->funcprof, tid, &slot.snap);
	dump->nthreads = 1;
	rc = name_frames(capture, &slot, symbols, max_depth, t);
out:
	cp_capture_slot_free(&slot);
	cp_capture_free(capture);
	if (rc < 0) {
		cp_dump_free(dump);
		return rc == -CP_E_GONE ? -CP_E_INVAL : rc;
	}
	*out = dump;
	return 0;
}

/* ---------------------------------------------------------- inspection */

long cp_session_functions(struct cp_session *s, const char *prefix,
			  bool (*fn)(void *arg, const char *name), void *arg)
{
	struct cp_symbols *lookup = cp_session_lookup_symbols(s);
	if (!lookup)
		return s->space ? -CP_E_NOMEM : -CP_E_GONE;
	return cp_symbols_functions(lookup, prefix, fn, arg);
}

struct cp_addrspace *cp_session_addrspace(struct cp_session *s)
{
	return s->target ? s->space : NULL;
}

uint64_t cp_session_attached_ns(const struct cp_session *s)
{
	return s->target ? s->attached_ns : 0;
}

uint64_t cp_session_cpu_ns(const struct cp_session *s)
{
	uint64_t ns = s->cpu_attached_ns;
	if (s->target)
		ns += process_cpu_ns() - s->cpu_at_attach_ns;
	return ns;
}

/* -------------------------------------------------------------- detach */

int cp_session_detach(struct cp_session *s)
{
	if (!s->target)
		return -1;
	/* Stop the ticks (names come later), restore every byte.  */
	if (s->sampler) {
		uint64_t now = monotonic_ns();
		s->stats = *cp_sampler_stats(s->sampler);
		close_window(s, s->profile, now);
		s->sampled_ns += now - s->run_start_ns;
	}
	if (s->heap_on) {
		s->heap_on = false;
		cp_heap_finish(s->heap);
	}
	funcprof_end(s);
	/* Every int3 out, a held thread let go (at its breakpoint's
	 * address, the real instruction back).  */
	cp_breaks_free(s->breaks);
	s->breaks = NULL;
	s->breaks_forks = false;
	int status = cp_target_detach_status(s->target);
	s->target = NULL;
	s->cpu_attached_ns += process_cpu_ns() - s->cpu_at_attach_ns;
	/* The target runs free: now the slow part, the names.  */
	if (s->dl_period_ns)
		take_priority(s, 0);
	if (s->sampler) {
		cp_profile_free(cp_sampler_finish(s->sampler));
		cp_sampler_free(s->sampler);
		s->sampler = NULL;
	}
	if (status != -1)
		s->exit_status = status;
	return status;
}

void cp_session_free(struct cp_session *s)
{
	if (!s)
		return;
	cp_session_detach(s);
	heap_settle(s);
	cp_heap_free(s->heap);
	cp_profile_free(s->heap_profile);
	cp_profile_free(s->profile);
	tear_down(s);
	free(s);
}

/* ------------------------------------------------- profile a function */

int cp_session_sample_start_in(struct cp_session *s, const char *function,
			       const struct cp_sampler_options *options)
{
	if (s->sampler || s->heap_on)
		return -CP_E_BUSY;
	if (!s->target || cp_target_exited(s->target))
		return -CP_E_GONE;
	struct cp_symbols *lookup = cp_session_lookup_symbols(s);
	if (!lookup)
		return -CP_E_NOMEM;
	/* Its first instruction, not the end of its prologue: the return
	 * address is at the stack pointer there.  */
	struct cp_place place;
	int rc = cp_symbols_locate(lookup, function, CP_LOCATE_ENTRY, &place);
	if (rc < 0)
		return rc;
	uint64_t entry = place.entry ? place.entry : place.addr;
	/* A fork child must lose the int3, and the forking thread's return
	 * address of ours, before it runs.  */
	rc = cp_session_forks_need(s, true);
	if (rc < 0) {
		cp_session_forks_need(s, false);
		return rc;
	}
	rc = cp_funcprof_new(s, s->target, entry, &s->funcprof);
	if (rc < 0) {
		s->funcprof = NULL;
		cp_session_forks_need(s, false);
		return rc;
	}
	memset(&s->in_stats, 0, sizeof(s->in_stats));
	struct cp_sampler_options gated = *options;
	gated.gate = cp_funcprof_gate;
	gated.gate_arg = s->funcprof;
	rc = cp_session_sample_start(s, &gated);
	if (rc < 0)
		funcprof_end(s);
	return rc;
}

/* Profiling a function ends (the sampler stops, or the target goes): the
 * byte and every return address back, the counters kept.  Returns 0 or
 * -CP_E_SYS.  */
static int funcprof_end(struct cp_session *s)
{
	if (!s->funcprof)
		return 0;
	int rc = cp_funcprof_stop(s->funcprof);
	if (rc < 0 && s->config.warn)
		s->config.warn(s->config.warn_arg,
			       "profiling a function: cannot restore its first "
			       "instruction or a return address in the target");
	cp_funcprof_stats(s->funcprof, &s->in_stats);
	cp_funcprof_free(s->funcprof);
	s->funcprof = NULL;
	/* No pointer to it left in the options the session keeps.  */
	s->sample_options.gate = NULL;
	s->sample_options.gate_arg = NULL;
	cp_session_forks_need(s, false);
	return rc;
}

void cp_session_in_stats(const struct cp_session *s,
			 struct cp_session_in_stats *stats)
{
	if (s->funcprof)
		cp_funcprof_stats(s->funcprof, stats);
	else
		*stats = s->in_stats;
}
