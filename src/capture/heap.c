/* Heap mode, the public side: start, run, finish, the results.  The
 * traps are heap_trap.c's.  See include/cprof/heap.h for the method.  */
#include "cprof/heap.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arch/x86_64/regs.h"
#include "capture/heap_trap.h"
#include "capture/heap_uprobe.h"
#include "capture/session_hooks.h"
#include "cprof/error.h"
#include "symbolize/resolver.h"

/* ------------------------------------------------------ public */

static volatile sig_atomic_t alarm_seen;

static void on_alarm(int sig)
{
	(void)sig;
	alarm_seen = 1;
}

/* Our hooks in: the target's own, or a client of the session's.  */
static int hooks_in(struct cp_heap *h)
{
	struct cp_target_hooks hooks = { cp_heap_trap_on_trap,
					 cp_heap_trap_on_fork,
					 cp_heap_trap_on_exec, &h->lane0,
					 cp_heap_lanes_on_birth,
					 cp_heap_uprobes_on_exit };
	if (h->session)
		return cp_session_hooks_add(h->session, &hooks);
	cp_target_set_hooks(h->target, &hooks);
	return 0;
}

/* And out: nothing of ours is left for a thread to trap on.  */
static void hooks_out(struct cp_heap *h)
{
	if (h->session)
		cp_session_hooks_remove(h->session, &h->lane0);
	else
		cp_target_set_hooks(h->target, NULL);
}

int cp_heap_start(struct cp_target *target, struct cp_unwinder *unwinder,
		  struct cp_symbols *symbols, struct cp_profile *profile,
		  const struct cp_heap_options *options, struct cp_heap **out)
{
	return cp_heap_start_in(NULL, target, unwinder, symbols, profile,
				options, out);
}

int cp_heap_start_in(struct cp_session *session, struct cp_target *target,
		     struct cp_unwinder *unwinder, struct cp_symbols *symbols,
		     struct cp_profile *profile,
		     const struct cp_heap_options *options,
		     struct cp_heap **out)
{
	struct cp_heap *h = calloc(1, sizeof(*h));
	if (!h)
		return -CP_E_NOMEM;
	h->target = target;
	h->session = session;
	h->pid = cp_target_pid(target);
	h->unwinder = unwinder;
	h->profile = profile;
	h->symbols = symbols;
	h->o = *options;
	if (h->o.max_depth < 1)
		h->o.max_depth = 1;
	pthread_mutex_init(&h->lock, NULL);
	pthread_mutex_init(&h->lanes_lock, NULL);
	pthread_cond_init(&h->lanes_cond, NULL);
	h->entries = cp_heap_entries(&h->nentries);
	h->s.nentries = h->nentries;
	h->table = cp_heaptable_new();
	int rc = -CP_E_NOMEM;
	if (!h->table)
		goto fail;
	rc = cp_heap_lane_init(h, &h->lane0, target);
	if (rc < 0)
		goto fail;
	/* The method: the kernel's probes, unless asked for traps or for
	 * what only traps do (a step, ptrace unwinding, tracer threads);
	 * the library's choice falls back to traps where the kernel has no
	 * probes for us, and takes them beside a session's breakpoints (the
	 * kernel's int3 at an entry point would hide one of theirs).  */
	bool traps_only = h->o.force_step || h->o.unwind == CP_UNWIND_PTRACE ||
			  h->o.tracers > 1;
	if (h->o.method == CP_HEAP_METHOD_AUTO && h->session &&
	    cp_session_hooks_count(h->session) > 0)
		traps_only = true;
	if (h->o.method == CP_HEAP_METHOD_UPROBES) {
		rc = -CP_E_INVAL;
		if (traps_only)
			goto fail;
		rc = cp_heap_uprobes_new(h, &h->uprobes);
		if (rc < 0)
			goto fail;
	} else if (h->o.method == CP_HEAP_METHOD_AUTO && !traps_only) {
		if (cp_heap_uprobes_new(h, &h->uprobes) < 0)
			h->uprobes = NULL;
	}
	/* The symbolizer thread must not take our signals: they are what
	 * interrupts the wait for the next trap.  */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = cp_resolver_start(symbols, profile, &h->resolver);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0)
		goto fail;
	rc = hooks_in(h);
	if (rc < 0)
		goto fail;
	if (cp_target_launched(target)) {
		/* Wait for the image, then for its entry point.  */
		cp_heap_set_phase(h, WAIT_EXEC);
		while (cp_heap_phase(h) == WAIT_EXEC ||
		       cp_heap_phase(h) == WAIT_ENTRY) {
			if (h->o.stop && *h->o.stop) {
				rc = -CP_E_GONE;
				goto fail;
			}
			if (cp_target_wait_event(target) < 0) {
				rc = -CP_E_GONE;
				goto fail;
			}
			cp_heap_trap_run_steps(h);
			if (h->error) {
				rc = h->error;
				goto fail;
			}
		}
		if (cp_heap_phase(h) != TRACING) {
			rc = h->error ? h->error : -CP_E_NOALLOC;
			goto fail;
		}
		/* Only the program's first thread, as a rule: the others
		 * are shared out at birth.  */
		if (!cp_heap_uprobes_armed(h))
			cp_heap_lanes_start(h, false);
	} else {
		/* The threads present are shared out before any byte of
		 * ours is in.  */
		if (!h->uprobes && cp_heap_trap_emulable(h))
			cp_heap_lanes_start(h, true);
		/* The threads run meanwhile: writing one byte is atomic for
		 * them, and a thread reaching an int3 already set is
		 * handled by the hooks.  */
		rc = cp_heap_trap_arm(h);
		if (rc < 0)
			goto fail;
	}
	if (h->nlanes > 1 && h->loader.inserted && !h->loader.emulate) {
		/* Its step would need every lane's threads held: without
		 * it, dlopen and dlclose go unnoticed (the unwinder still
		 * finds new modules on a miss).  */
		cp_heap_trap_restore(h->pid, &h->loader);
		h->loader.inserted = false;
	}
	cp_heap_lanes_armed(h);
	*out = h;
	return 0;
fail:
	cp_heap_finish(h);
	cp_heap_free(h);
	return rc;
}

size_t cp_heap_breakpoints(const struct cp_heap *h, const char **module)
{
	if (module)
		*module = h->where;
	return h->nbps ? h->nbps : h->nprobed;
}

bool cp_heap_entry_event(const struct cp_heap *h, uint32_t row,
			 const struct user_regs_struct *regs, pid_t tid,
			 uint64_t t_ns, struct cp_heap_event *ev)
{
	const struct cp_heap_entry *e = &h->entries[row];
	uint64_t ptr = e->ptr_arg == CP_HEAP_NO_ARG
			       ? 0
			       : cp_abi_arg(regs, (unsigned)e->ptr_arg);
	*ev = (struct cp_heap_event){ .entry = row, .tid = tid, .t_ns = t_ns };
	if (e->result == CP_HEAP_RESULT_NONE) {
		ev->kind = CP_HEAP_EV_FREE;
		ev->addr = ptr;
		return true;
	}
	if (e->kind == CP_HEAP_KIND_REALLOC && ptr) {
		ev->kind = CP_HEAP_EV_REALLOC_BEGIN;
		ev->old_addr = ptr;
		return true;
	}
	return false;
}

struct cp_heap_event cp_heap_return_event(const struct cp_heap *h,
					  uint32_t row, const uint64_t *args,
					  uint32_t stack, pid_t tid,
					  uint64_t t_ns)
{
	const struct cp_heap_entry *e = &h->entries[row];
	uint64_t size = cp_heap_call_arg(args, e->size_arg);
	if (e->count_arg != CP_HEAP_NO_ARG)
		size *= cp_heap_call_arg(args, e->count_arg);
	if (e->round_to)
		size = (size + e->round_to - 1) / e->round_to * e->round_to;
	bool realloc = e->kind == CP_HEAP_KIND_REALLOC;
	return (struct cp_heap_event){
		.kind = realloc ? CP_HEAP_EV_REALLOC : CP_HEAP_EV_ALLOC,
		.entry = row,
		.size = size,
		.old_addr = realloc ? cp_heap_call_arg(args, e->ptr_arg) : 0,
		.stack = stack,
		.tid = tid,
		.t_ns = t_ns,
	};
}

int cp_heap_run(struct cp_heap *h)
{
	return cp_heap_run_until(h, 0, NULL, NULL);
}

/* Why a run ended, into *END: the target exited or exec'd, a stop
 * (STOPPED), else the deadline.  */
static void run_ended(struct cp_heap *h, bool stopped, enum cp_heap_end *end)
{
	enum cp_heap_end why = CP_HEAP_DEADLINE;
	if (stopped) {
		h->s.interrupted = true;
		why = CP_HEAP_STOPPED;
	}
	h->s.target_exited = cp_target_exited(h->target);
	if (h->s.target_exec)
		why = CP_HEAP_EXEC;
	else if (h->s.target_exited)
		why = CP_HEAP_EXITED;
	if (end)
		*end = why;
}

int cp_heap_run_until(struct cp_heap *h, uint64_t until_ns,
		      volatile sig_atomic_t *stop, enum cp_heap_end *end)
{
	uint64_t deadline = h->o.duration > 0
				    ? h->t0_ns + (uint64_t)(h->o.duration * 1e9)
				    : 0;
	if (until_ns && (!deadline || until_ns < deadline))
		deadline = until_ns;
	bool stopped = false;
	if (cp_heap_uprobes_armed(h)) {
		/* The kernel's probes: no trap to wait for, records to
		 * take.  */
		int rc = cp_heap_uprobes_run(h, deadline, stop, &stopped);
		run_ended(h, stopped, end);
		return rc;
	}
	/* A timer signal to the tracing thread wakes the blocking wait
	 * every 100 ms (the duration, *stop).  The wait for a trap is one
	 * blocking waitpid, the cheapest there is (a bounded wait costs
	 * four more system calls per trap); a signal is what ends it early.
	 * Installed here and put back before returning, as heap.h says:
	 * SIGALRM's action, the timer, SIGALRM unblocked in this thread.  */
	struct sigaction sa, old_sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART: waitpid returns EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, &old_sa);
	sigset_t alrm, old_mask;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_UNBLOCK, &alrm, &old_mask);
	timer_t timer;
	struct sigevent sev;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGALRM;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	bool have_timer = timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0;
	if (have_timer) {
		struct itimerspec its = { { 0, 100000000 }, { 0, 100000000 } };
		timer_settime(timer, 0, &its, NULL);
	}
	int rc = 0;
	while (cp_heap_phase(h) == TRACING) {
		if (cp_heap_run_over(h, stop, deadline, &stopped))
			break;
		int got = cp_target_wait_event(h->target);
		if (got == -CP_E_GONE)
			break;
		cp_heap_trap_run_steps(h);
		pthread_mutex_lock(&h->lock);
		cp_resolver_collect(h->resolver);
		pthread_mutex_unlock(&h->lock);
		if (h->error) {
			rc = h->error;
			break;
		}
	}
	if (have_timer)
		timer_delete(timer);
	/* A tick that came after the last wait stays pending only while
	 * SIGALRM is blocked: restore the mask after the action, so a
	 * pending one is taken by our handler, not the caller's.  */
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
	sigaction(SIGALRM, &old_sa, NULL);
	run_ended(h, stopped, end);
	return rc;
}

/* Put back every byte of ours in the memory of the process.  Returns 0
 * or -CP_E_SYS.  */
static int restore_bytes(struct cp_heap *h)
{
	int rc = 0;
	for (size_t i = 0; i < h->nbps; i++) {
		if (!h->bps[i].inserted)
			continue;
		if (cp_heap_trap_restore(h->pid, &h->bps[i]) < 0) {
			if (h->o.warn) {
				char text[256];
				snprintf(text, sizeof(text),
					 "cannot restore the byte at %#llx (%s) "
					 "in %d: %s",
					 (unsigned long long)h->bps[i].addr,
					 h->entries[h->bps[i].tag].name,
					 (int)h->pid, strerror(errno));
				h->o.warn(h->o.warn_arg, text);
			}
			rc = -CP_E_SYS;
		}
		h->bps[i].inserted = false;
	}
	if (h->entry.inserted) {
		if (cp_heap_trap_restore(h->pid, &h->entry) < 0)
			rc = -CP_E_SYS;
		h->entry.inserted = false;
	}
	if (h->loader.inserted) {
		if (cp_heap_trap_restore(h->pid, &h->loader) < 0)
			rc = -CP_E_SYS;
		h->loader.inserted = false;
	}
	return rc;
}

int cp_heap_finish(struct cp_heap *h)
{
	if (!h)
		return 0;
	int rc = 0;
	if (cp_heap_uprobes_armed(h)) {
		/* Every record written: the threads held (or gone), so no
		 * call is half-way through its probe.  */
		bool held = !cp_target_exited(h->target) &&
			    cp_target_hold_all(h->target) == 0;
		cp_heap_uprobes_end(h);
		if (held)
			cp_target_release_all(h->target);
		cp_heap_uprobes_close(h);
	}
	if (h->uprobes && !cp_target_exited(h->target))
		cp_target_set_exit_stops(h->target, false);
	uint64_t end = cp_heap_now_ns();
	if (h->t0_ns && cp_heap_phase(h) == TRACING)
		cp_heaptable_end(h->table, end);
	cp_heap_set_phase(h, DONE);
	bool lanes = h->nlanes > 1 && !h->lanes_done;
	h->lanes_done = true;
	/* The other tracer threads hold theirs first.  */
	if (lanes)
		cp_heap_lanes_hold(h);
	bool any = h->entry.inserted || h->loader.inserted;
	for (size_t i = 0; i < h->nbps; i++)
		any |= h->bps[i].inserted;
	if (any && !cp_target_exited(h->target) &&
	    cp_target_hold_all(h->target) == 0) {
		/* A thread may have stopped for our interrupt with the
		 * SIGTRAP of an int3 still queued: let it take the signal
		 * (the hook rewinds it) before the byte goes away.  */
		cp_heap_lane_rewind(&h->lane0);
		rc = restore_bytes(h);
		/* Return addresses still pointing at our int3s.  */
		if (cp_heap_lane_returns(&h->lane0) < 0)
			rc = -CP_E_SYS;
		if (lanes)
			cp_heap_lanes_release(h);
		/* Our hooks go before the threads run again: nothing of
		 * ours is left for them to trap on, and a trap now is the
		 * target's own.  The target stays attached, usable for
		 * sampling, a dump, or heap tracing again.  */
		hooks_out(h);
		cp_target_release_all(h->target);
	} else if (lanes) {
		/* The caller's target has the leader: when it is gone, so
		 * is the process.  */
		if (any && !cp_target_exited(h->target) && restore_bytes(h) < 0)
			rc = -CP_E_SYS;
		cp_heap_lanes_release(h);
	}
	if (lanes && h->error == -CP_E_SYS)
		rc = -CP_E_SYS;
	hooks_out(h);
	return rc;
}

void cp_heap_resolve(struct cp_heap *h)
{
	cp_resolver_finish(h->resolver);
	h->resolver = NULL;
}

const struct cp_heap_summary *cp_heap_summary(const struct cp_heap *h)
{
	/* The table's fields about allocations, the tracer's own beside
	 * them.  */
	struct cp_heap_summary *s = (struct cp_heap_summary *)&h->merged;
	*s = *cp_heaptable_summary(h->table);
	s->nentries = h->s.nentries;
	memset(s->calls, 0, sizeof(s->calls));
	memcpy(s->traced, h->s.traced, sizeof(s->traced));
	memcpy(s->module, h->s.module, sizeof(s->module));
	s->reallocs = 0;
	s->lost_returns = 0;
	s->stepped = h->s.stepped;
	s->unwinds_reused = 0;
	s->vfork_children = 0;
	s->fork_children = 0;
	s->threads_moved = 0;
	cp_heap_lanes_sum(h, s);
	s->tracers = h->tracers ? h->tracers : 1;
	s->uprobes = h->nprobed > 0;
	s->events_lost = h->s.events_lost;
	s->threads_throttled = h->s.threads_throttled;
	s->threads_untraced = h->s.threads_untraced;
	s->stacks_cut = h->s.stacks_cut;
	s->target_exited = h->s.target_exited;
	s->target_exec = h->s.target_exec;
	s->interrupted = h->s.interrupted;
	return s;
}

const struct cp_heaptable *cp_heap_table(const struct cp_heap *h)
{
	return h->table;
}

int cp_heap_fill_profile(const struct cp_heap *h, struct cp_profile *profile,
			 enum cp_heap_metric metric)
{
	return cp_heaptable_fill_profile(h->table, profile, metric);
}

void cp_heap_free(struct cp_heap *h)
{
	if (!h)
		return;
	cp_resolver_finish(h->resolver);
	cp_heaptable_free(h->table);
	cp_heap_uprobes_free(h->uprobes);
	cp_int3_steps_free(&h->steps);
	cp_heap_lane_free(&h->lane0);
	for (size_t i = 1; i < HEAP_MAX_LANES; i++)
		if (h->lanes[i]) {
			cp_heap_lane_free(h->lanes[i]);
			free(h->lanes[i]);
		}
	free(h->orphans);
	pthread_mutex_destroy(&h->lock);
	pthread_mutex_destroy(&h->lanes_lock);
	pthread_cond_destroy(&h->lanes_cond);
	free(h);
}
