/* Heap mode with several tracer threads ("lanes").
 *
 * ptrace is per thread of the tracer: a thread of the target answers to
 * the one thread of ours that seized it, and its traps wait for that
 * thread.  With one tracer thread, threads that allocate at once queue
 * for it.  Here each lane is a thread of ours with a target of its own
 * (cp_target_lane) over a share of the target's threads; the caller's
 * thread is lane 0, on the caller's target.  What the lanes share (the
 * heap table, the profile, the resolver, the unwinder) is behind the
 * heap's lock; what a trap needs otherwise (the thread states, the stack
 * copy, the unwinds kept for reuse) is the lane's own.
 *
 * Threads are shared out when the lanes start (attach: the threads
 * present, before any int3 of ours is in), and at birth afterwards: a new
 * thread, at its first stop, has run nothing of its own, so the lane that
 * got it (its creator's tracer) parks it in a pause(2) with every signal
 * blocked, lets it go, and the lane with the fewest threads seizes it and
 * puts its registers and mask back (cp_target_park, cp_target_unpark).
 * Lane 0 never receives a thread: it is served only while the caller
 * runs the heap (cp_heap_run_until).
 *
 * A lane waits for its threads' traps in a blocking waitpid.  A SIGALRM
 * (our no-op handler, installed from the lanes' start to their end, a
 * timer per lane every 50 ms, and tgkill when a thread is handed to it or
 * the end comes) ends the wait to look at its inbox and the stop flag.
 *
 * The end (cp_heap_finish): the stop flag; each lane takes what is in its
 * inbox, holds its threads and says so; the caller holds its own and
 * puts our bytes back; each lane puts back its threads' return addresses
 * and lets them go; the caller's target seizes every thread no thread of
 * ours traces (cp_target_adopt).  Between the two the threads run
 * untraced with nothing of ours left in them.  */
#include "capture/heap_trap.h"
#include "capture/heap_uprobe.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arch/x86_64/regs.h"
#include "capture/session_hooks.h"
#include "cprof/error.h"
#include "symbolize/resolver.h"
#include "util/grow.h"

enum lane_state { LANE_STARTING, LANE_SERVING, LANE_HELD, LANE_DONE };

/* The most lanes beside the caller's when the options leave it to us.  */
#define AUTO_LANES_MAX 4

/* A lane's timer: how often it looks at its inbox and the stop flag
 * when no trap wakes it.  */
#define LANE_TICK_NS 50000000L

/* ------------------------------------------------------ one lane */

int cp_heap_lane_init(struct cp_heap *h, struct heap_lane *l,
		      struct cp_target *target)
{
	l->heap = h;
	l->target = target;
	l->memo_gen = __atomic_load_n(&h->memo_gen, __ATOMIC_RELAXED);
	l->pcs = calloc(h->o.max_depth + 1, sizeof(*l->pcs));
	l->locs = calloc(h->o.max_depth + 1, sizeof(*l->locs));
	if (!l->pcs || !l->locs)
		return -CP_E_NOMEM;
	return cp_capture_new(target, h->unwinder, h->o.unwind,
			      h->o.max_depth + 1, &l->capture);
}

void cp_heap_lane_free(struct heap_lane *l)
{
	free(l->threads);
	cp_capture_slot_free(&l->slot);
	for (size_t i = 0; i < UNWIND_MEMO_SLOTS; i++)
		free(l->memo[i].bytes);
	cp_capture_free(l->capture);
	free(l->pcs);
	free(l->locs);
	free(l->inbox);
	memset(l, 0, sizeof(*l));
}

void cp_heap_lane_rewind(struct heap_lane *l)
{
	struct cp_heap *h = l->heap;
	size_t n;
	struct cp_thread *threads = cp_target_threads(l->target, &n);
	for (size_t i = 0; i < n; i++) {
		pid_t tid = threads[i].tid;
		for (int tries = 0; tries < 4; tries++) {
			struct user_regs_struct regs;
			if (cp_target_get_regs(l->target, tid, &regs) < 0)
				break;
			uint64_t pc = cp_regs_pc(&regs) - 1;
			bool ours = cp_heap_trap_find(h, pc) ||
				    (h->entry.inserted && pc == h->entry.addr);
			if (!ours || !cp_target_trap_pending(l->target, tid))
				break;
			cp_target_deliver_pending(l->target, tid);
			threads = cp_target_threads(l->target, &n);
		}
	}
}

int cp_heap_lane_returns(struct heap_lane *l)
{
	struct cp_heap *h = l->heap;
	int rc = 0;
	for (size_t i = 0; i < l->nthreads; i++) {
		struct tstate *ts = &l->threads[i];
		uint64_t slot = 0;
		if (!ts->in_call || !cp_target_thread(l->target, ts->tid))
			continue;
		if (cp_heap_read_u64(h->pid, ts->slot, &slot) &&
		    slot == ts->fake &&
		    cp_target_write(h->pid, ts->slot, &ts->ret, 8) < 0)
			rc = -CP_E_SYS;
		ts->in_call = false;
		l->s.lost_returns++;
	}
	return rc;
}

/* ------------------------------------------------------ lane threads */

static void on_alarm(int sig)
{
	(void)sig;
}

static void wake(const struct heap_lane *l)
{
	if (l->tid > 0)
		syscall(SYS_tgkill, getpid(), l->tid, SIGALRM);
}

static size_t target_threads(struct cp_target *t)
{
	size_t n = 0;
	if (t)
		cp_target_threads(t, &n);
	return n;
}

/* The start of a lane: its threads in INBOX's place (tids only).  */
struct lane_start {
	struct heap_lane *lane;
	pid_t *tids;
	size_t ntids, cap;
};

static void set_state(struct heap_lane *l, enum lane_state state)
{
	struct cp_heap *h = l->heap;
	pthread_mutex_lock(&h->lanes_lock);
	l->state = state;
	l->owned = target_threads(l->target);
	pthread_cond_broadcast(&h->lanes_cond);
	pthread_mutex_unlock(&h->lanes_lock);
}

/* Keep PARK for the caller's target to put right at the end.  */
static void orphan(struct cp_heap *h, const struct cp_park *park)
{
	pthread_mutex_lock(&h->lanes_lock);
	if (cp_grow_zeroed((void **)&h->orphans, &h->orphans_cap,
			   h->norphans + 1, sizeof(*h->orphans), 4))
		h->orphans[h->norphans++] = *park;
	pthread_mutex_unlock(&h->lanes_lock);
}

/* Park every thread of L, held, on the syscall instruction at AT and
 * let it go, for lane 0 to take (the orphans), with its call state.
 * Lane 0 does nothing meanwhile: its caller waits in
 * cp_heap_lanes_collapse.  */
static void park_all(struct heap_lane *l, uint64_t at)
{
	struct cp_heap *h = l->heap;
	struct heap_lane *to = &h->lane0;
	size_t n;
	cp_target_threads(l->target, &n);
	while (n > 0) {
		struct cp_thread *threads = cp_target_threads(l->target, &n);
		size_t i = 0;
		while (i < n && (!threads[i].stopped || threads[i].kept))
			i++;
		if (i == n)
			break;
		pid_t tid = threads[i].tid;
		struct cp_park park;
		if (cp_target_park(l->target, tid, at, &park) < 0) {
			/* It cannot be parked: it stays ours, and is let go
			 * by the detach (our bytes stay in).  */
			cp_target_keep(l->target, tid);
			continue;
		}
		orphan(h, &park);
		for (size_t t = 0; t < l->nthreads; t++) {
			if (l->threads[t].tid != tid || !l->threads[t].in_call)
				continue;
			pthread_mutex_lock(&h->lanes_lock);
			if (cp_grow_zeroed((void **)&to->threads,
					   &to->threads_cap, to->nthreads + 1,
					   sizeof(*to->threads), 16))
				to->threads[to->nthreads++] = l->threads[t];
			pthread_mutex_unlock(&h->lanes_lock);
		}
		cp_target_threads(l->target, &n);
	}
	l->nthreads = 0;
}

static void *lane_main(void *arg)
{
	struct lane_start *start = arg;
	struct heap_lane *l = start->lane;
	struct cp_heap *h = l->heap;
	l->tid = (pid_t)syscall(SYS_gettid);
	timer_t timer;
	struct sigevent sev;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGALRM;
	sev._sigev_un._tid = l->tid;
	bool have_timer = timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0;
	if (have_timer) {
		struct itimerspec its = { { 0, LANE_TICK_NS },
					  { 0, LANE_TICK_NS } };
		timer_settime(timer, 0, &its, NULL);
	}
	sigset_t alrm;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);

	struct cp_target *target = NULL;
	int rc = cp_target_lane(h->target, start->tids, start->ntids, &target);
	free(start->tids);
	free(start);
	if (rc == 0 && cp_heap_lane_init(h, l, target) < 0) {
		cp_target_detach(target);
		target = NULL;
		rc = -CP_E_NOMEM;
	}
	if (rc < 0) {
		/* Its threads run on untraced: the caller's target takes
		 * them (cp_target_adopt).  */
		l->target = NULL;
		if (have_timer)
			timer_delete(timer);
		set_state(l, LANE_DONE);
		return NULL;
	}
	struct cp_target_hooks hooks = { cp_heap_trap_on_trap,
					 cp_heap_trap_on_fork,
					 cp_heap_trap_on_exec, l,
					 cp_heap_lanes_on_birth, NULL };
	cp_target_set_hooks(target, &hooks);
	set_state(l, LANE_SERVING);
	/* A trap on a breakpoint being set is not known for ours until
	 * the breakpoint's entry is complete: none is taken before.  */
	pthread_mutex_lock(&h->lanes_lock);
	while (!h->armed && !h->lanes_stop)
		pthread_cond_wait(&h->lanes_cond, &h->lanes_lock);
	pthread_mutex_unlock(&h->lanes_lock);

	struct cp_park *taken = NULL;
	size_t ntaken = 0;
	for (;;) {
		pthread_mutex_lock(&h->lanes_lock);
		bool stop = h->lanes_stop;
		free(taken);
		taken = l->inbox;
		ntaken = l->ninbox;
		l->inbox = NULL;
		l->ninbox = l->inbox_cap = 0;
		pthread_mutex_unlock(&h->lanes_lock);
		for (size_t i = 0; i < ntaken; i++) {
			rc = cp_target_unpark(target, &taken[i]);
			if (rc < 0 && rc != -CP_E_GONE)
				orphan(h, &taken[i]);
		}
		if (ntaken) {
			pthread_mutex_lock(&h->lanes_lock);
			l->owned = target_threads(target);
			pthread_mutex_unlock(&h->lanes_lock);
		}
		if (stop)
			break;
		if (cp_target_exited(target)) {
			/* Nothing to wait for: sleep until a thread is
			 * handed to us or the end (a signal ends it).  */
			struct timespec ts = { 0, LANE_TICK_NS };
			nanosleep(&ts, NULL);
			continue;
		}
		cp_target_wait_event(target);
	}
	free(taken);

	pthread_mutex_lock(&h->lanes_lock);
	uint64_t collapse_at = h->collapse_at;
	pthread_mutex_unlock(&h->lanes_lock);
	/* Every thread held, one that had just trapped rewound.  */
	if (!cp_target_exited(target) && cp_target_hold_all(target) == 0)
		cp_heap_lane_rewind(l);
	if (collapse_at) {
		/* Tracing goes on in lane 0: our threads, parked, go to it
		 * with what we know of their calls.  */
		park_all(l, collapse_at);
	} else {
		/* The end: once the caller has put our bytes back, give the
		 * threads back their return addresses and let them go.  */
		set_state(l, LANE_HELD);
		pthread_mutex_lock(&h->lanes_lock);
		while (!h->bytes_out)
			pthread_cond_wait(&h->lanes_cond, &h->lanes_lock);
		pthread_mutex_unlock(&h->lanes_lock);
		if (cp_heap_lane_returns(l) < 0)
			cp_heap_fail(h, -CP_E_SYS);
	}
	cp_target_set_hooks(target, NULL);
	cp_capture_free(l->capture);
	l->capture = NULL;
	cp_target_detach(target);
	if (have_timer)
		timer_delete(timer);
	pthread_mutex_lock(&h->lanes_lock);
	l->target = NULL;
	l->state = LANE_DONE;
	pthread_cond_broadcast(&h->lanes_cond);
	pthread_mutex_unlock(&h->lanes_lock);
	return NULL;
}

/* ------------------------------------------------------ births */

bool cp_heap_lanes_on_birth(void *arg, pid_t tid)
{
	struct heap_lane *l = arg;
	struct cp_heap *h = l->heap;
	if (cp_heap_uprobes_armed(h) && cp_heap_phase(h) == TRACING) {
		cp_heap_uprobes_birth(h, tid);
		return false;
	}
	if (h->nlanes < 2 || cp_heap_phase(h) != TRACING)
		return false;
	pthread_mutex_lock(&h->lanes_lock);
	struct heap_lane *best = NULL;
	for (size_t i = 1; i < h->nlanes && !h->lanes_stop; i++) {
		struct heap_lane *c = h->lanes[i];
		if (c->state == LANE_SERVING &&
		    (!best || c->owned < best->owned))
			best = c;
	}
	/* A lane keeps its new thread unless another has fewer (not
	 * counting the new one).  */
	if (best && l != &h->lane0 && target_threads(l->target) <= best->owned + 1)
		best = NULL;
	struct cp_park park;
	bool moved = best && best != l &&
		     cp_grow_zeroed((void **)&best->inbox, &best->inbox_cap,
				    best->ninbox + 1, sizeof(*best->inbox), 4) &&
		     cp_target_park(l->target, tid, 0, &park) == 0;
	if (moved) {
		best->inbox[best->ninbox++] = park;
		best->owned++;
		l->s.threads_moved++;
		if (l != &h->lane0)
			l->owned = target_threads(l->target);
		wake(best);
	}
	pthread_mutex_unlock(&h->lanes_lock);
	return moved;
}

/* ------------------------------------------------------ start, end */

/* How many lanes beside the caller's.  */
static size_t lanes_wanted(const struct cp_heap *h)
{
	if (h->o.tracers == 1 || h->o.force_step ||
	    h->o.unwind != CP_UNWIND_SNAPSHOT)
		return 0;
	if (h->o.tracers > 1)
		return h->o.tracers - 1 < HEAP_MAX_LANES - 1
			       ? h->o.tracers - 1
			       : HEAP_MAX_LANES - 1;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus < 2)
		return 0;
	return cpus < AUTO_LANES_MAX ? (size_t)cpus : AUTO_LANES_MAX;
}

/* A breakpoint whose instruction is stepped, not emulated, needs every
 * thread held for the step: one tracer thread only.  */
static bool all_emulated(const struct cp_heap *h)
{
	for (size_t i = 0; i < h->nbps; i++)
		if (h->bps[i].inserted && !h->bps[i].emulate)
			return false;
	return true;
}

size_t cp_heap_lanes_start(struct cp_heap *h, bool attached)
{
	size_t workers = lanes_wanted(h);
	if (workers == 0 || (!attached && !all_emulated(h)) ||
	    (h->session && cp_session_hooks_count(h->session) != 1))
		return h->nlanes = 1;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART: waitpid returns EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, &h->old_alarm);

	/* Attached: the threads present, shared out round the lanes, the
	 * caller's keeping the leader.  */
	struct lane_start *starts[HEAP_MAX_LANES] = { 0 };
	size_t nlanes = 1;
	for (size_t i = 0; i < workers; i++) {
		struct heap_lane *l = calloc(1, sizeof(*l));
		struct lane_start *st = calloc(1, sizeof(*st));
		if (!l || !st) {
			free(l);
			free(st);
			break;
		}
		l->heap = h;
		st->lane = l;
		starts[nlanes] = st;
		h->lanes[nlanes++] = l;
	}
	if (nlanes == 1) {
		sigaction(SIGALRM, &h->old_alarm, NULL);
		return h->nlanes = 1;
	}
	if (attached && cp_target_hold_all(h->target) == 0) {
		size_t n;
		struct cp_thread *threads = cp_target_threads(h->target, &n);
		pid_t *tids = malloc((n ? n : 1) * sizeof(*tids));
		size_t ntids = 0;
		for (size_t i = 0; tids && i < n; i++)
			if (threads[i].tid != h->pid && !threads[i].kept &&
			    !threads[i].vfork_child && threads[i].stopped)
				tids[ntids++] = threads[i].tid;
		for (size_t i = 0; tids && i < ntids; i++) {
			size_t to = (i + 1) % nlanes;
			struct lane_start *st = starts[to];
			if (to == 0 ||
			    !cp_grow_zeroed((void **)&st->tids, &st->cap,
					    st->ntids + 1, sizeof(*st->tids), 4))
				continue;
			if (cp_target_hand_over(h->target, tids[i]) == 0)
				st->tids[st->ntids++] = tids[i];
		}
		free(tids);
	}
	cp_target_set_own_waits(h->target, true);
	/* The lanes take no signal but our SIGALRM.  */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	size_t started = 1;
	for (size_t i = 1; i < nlanes; i++) {
		struct heap_lane *l = h->lanes[i];
		if (pthread_create(&l->thread, NULL, lane_main, starts[i]) == 0) {
			l->started = true;
			started++;
		} else {
			free(starts[i]->tids);
			free(starts[i]);
			l->state = LANE_DONE;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	h->nlanes = nlanes;
	pthread_mutex_lock(&h->lanes_lock);
	for (;;) {
		bool waiting = false;
		for (size_t i = 1; i < nlanes; i++)
			waiting |= h->lanes[i]->state == LANE_STARTING;
		if (!waiting)
			break;
		pthread_cond_wait(&h->lanes_cond, &h->lanes_lock);
	}
	pthread_mutex_unlock(&h->lanes_lock);
	if (attached) {
		/* Threads born while theirs were between two tracers, and
		 * those of a lane that could not start.  */
		cp_target_adopt(h->target, NULL, 0);
		cp_target_release_all(h->target);
	}
	if (h->session)
		cp_session_hooks_exclusive(h->session, cp_heap_lanes_collapse,
					   h);
	h->tracers = (unsigned)started;
	return started;
}

void cp_heap_lanes_armed(struct cp_heap *h)
{
	pthread_mutex_lock(&h->lanes_lock);
	h->armed = true;
	pthread_cond_broadcast(&h->lanes_cond);
	pthread_mutex_unlock(&h->lanes_lock);
}

void cp_heap_lanes_hold(struct cp_heap *h)
{
	pthread_mutex_lock(&h->lanes_lock);
	h->lanes_stop = true;
	pthread_cond_broadcast(&h->lanes_cond);
	for (;;) {
		bool waiting = false;
		for (size_t i = 1; i < h->nlanes; i++) {
			struct heap_lane *l = h->lanes[i];
			if (l->state == LANE_SERVING) {
				waiting = true;
				wake(l);
			}
		}
		if (!waiting)
			break;
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 20000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&h->lanes_cond, &h->lanes_lock, &until);
	}
	pthread_mutex_unlock(&h->lanes_lock);
}

/* Wait for every lane thread's end, let the caller's target take every
 * thread the lanes let go (and their children), and put back what the
 * lanes' start changed.  */
static void lanes_join(struct cp_heap *h)
{
	for (size_t i = 1; i < h->nlanes; i++)
		if (h->lanes[i]->started) {
			pthread_join(h->lanes[i]->thread, NULL);
			h->lanes[i]->started = false;
		}
	cp_target_adopt(h->target, h->orphans, h->norphans);
	h->norphans = 0;
	cp_target_set_own_waits(h->target, false);
	if (h->session)
		cp_session_hooks_exclusive(h->session, NULL, NULL);
	sigaction(SIGALRM, &h->old_alarm, NULL);
}

void cp_heap_lanes_release(struct cp_heap *h)
{
	pthread_mutex_lock(&h->lanes_lock);
	h->bytes_out = true;
	pthread_cond_broadcast(&h->lanes_cond);
	pthread_mutex_unlock(&h->lanes_lock);
	lanes_join(h);
}

int cp_heap_lanes_collapse(void *arg)
{
	struct cp_heap *h = arg;
	if (h->nlanes < 2 || h->lanes_done)
		return 0;
	uint64_t at = cp_target_syscall_insn(h->pid);
	if (!at)
		return -CP_E_SYS;
	pthread_mutex_lock(&h->lanes_lock);
	h->collapse_at = at;
	pthread_mutex_unlock(&h->lanes_lock);
	cp_heap_lanes_hold(h); /* every lane is done, not held */
	lanes_join(h);
	h->lanes_done = true;
	h->nlanes = 1;
	return 0;
}

void cp_heap_lanes_sum(const struct cp_heap *h, struct cp_heap_summary *sum)
{
	for (size_t i = 0; i < HEAP_MAX_LANES; i++) {
		const struct heap_lane *l = i ? h->lanes[i] : &h->lane0;
		if (!l)
			continue;
		for (size_t e = 0; e < CP_HEAP_MAX_ENTRIES; e++)
			sum->calls[e] += l->s.calls[e];
		sum->reallocs += l->s.reallocs;
		sum->lost_returns += l->s.lost_returns;
		sum->unwinds_reused += l->s.unwinds_reused;
		sum->vfork_children += l->s.vfork_children;
		sum->fork_children += l->s.fork_children;
		sum->threads_moved += l->s.threads_moved;
	}
}
