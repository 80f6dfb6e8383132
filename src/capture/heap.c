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
					 cp_heap_trap_on_exec, h };
	if (h->session)
		return cp_session_hooks_add(h->session, &hooks);
	cp_target_set_hooks(h->target, &hooks);
	return 0;
}

/* And out: nothing of ours is left for a thread to trap on.  */
static void hooks_out(struct cp_heap *h)
{
	if (h->session)
		cp_session_hooks_remove(h->session, h);
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
	h->pcs = calloc(h->o.max_depth + 1, sizeof(*h->pcs));
	h->locs = calloc(h->o.max_depth + 1, sizeof(*h->locs));
	h->entries = cp_heap_entries(&h->nentries);
	h->s.nentries = h->nentries;
	h->table = cp_heaptable_new();
	int rc = -CP_E_NOMEM;
	if (!h->pcs || !h->locs || !h->table)
		goto fail;
	rc = cp_capture_new(target, unwinder, h->o.unwind, h->o.max_depth + 1,
			    &h->capture);
	if (rc < 0)
		goto fail;
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
		h->phase = WAIT_EXEC;
		while (h->phase == WAIT_EXEC || h->phase == WAIT_ENTRY) {
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
		if (h->phase != TRACING) {
			rc = h->error ? h->error : -CP_E_NOALLOC;
			goto fail;
		}
	} else {
		/* The threads run meanwhile: writing one byte is atomic for
		 * them, and a thread reaching an int3 already set is
		 * handled by the hooks.  */
		rc = cp_heap_trap_arm(h);
		if (rc < 0)
			goto fail;
	}
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
	return h->nbps;
}

int cp_heap_run(struct cp_heap *h)
{
	return cp_heap_run_until(h, 0, NULL, NULL);
}

int cp_heap_run_until(struct cp_heap *h, uint64_t until_ns,
		      volatile sig_atomic_t *stop, enum cp_heap_end *end)
{
	enum cp_heap_end why = CP_HEAP_DEADLINE;
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
	uint64_t deadline = h->o.duration > 0
				    ? h->t0_ns + (uint64_t)(h->o.duration * 1e9)
				    : 0;
	if (until_ns && (!deadline || until_ns < deadline))
		deadline = until_ns;
	int rc = 0;
	while (h->phase == TRACING) {
		if ((h->o.stop && *h->o.stop) || (stop && *stop)) {
			h->s.interrupted = true;
			why = CP_HEAP_STOPPED;
			break;
		}
		uint64_t now = cp_heap_now_ns();
		if (deadline && now >= deadline)
			break;
		if (cp_target_exited(h->target))
			break;
		int got = cp_target_wait_event(h->target);
		if (got == -CP_E_GONE)
			break;
		cp_heap_trap_run_steps(h);
		cp_resolver_collect(h->resolver);
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
	h->s.target_exited = cp_target_exited(h->target);
	if (h->s.target_exec)
		why = CP_HEAP_EXEC;
	else if (h->s.target_exited)
		why = CP_HEAP_EXITED;
	if (end)
		*end = why;
	return rc;
}

int cp_heap_finish(struct cp_heap *h)
{
	if (!h)
		return 0;
	int rc = 0;
	uint64_t end = cp_heap_now_ns();
	if (h->t0_ns && h->phase == TRACING)
		cp_heaptable_end(h->table, end);
	h->phase = DONE;
	bool any = h->entry.inserted || h->loader.inserted;
	for (size_t i = 0; i < h->nbps; i++)
		any |= h->bps[i].inserted;
	if (any && !cp_target_exited(h->target) &&
	    cp_target_hold_all(h->target) == 0) {
		/* A thread may have stopped for our interrupt with the
		 * SIGTRAP of an int3 still queued: let it take the signal
		 * (the hook rewinds it) before the byte goes away.  */
		size_t n;
		struct cp_thread *threads = cp_target_threads(h->target, &n);
		for (size_t i = 0; i < n; i++) {
			pid_t tid = threads[i].tid;
			for (int tries = 0; tries < 4; tries++) {
				struct user_regs_struct regs;
				if (cp_target_get_regs(h->target, tid,
						       &regs) < 0)
					break;
				uint64_t pc = cp_regs_pc(&regs) - 1;
				bool ours = cp_heap_trap_find(h, pc) ||
					    (h->entry.inserted &&
					     pc == h->entry.addr);
				if (!ours ||
				    !cp_target_trap_pending(h->target, tid))
					break;
				cp_target_deliver_pending(h->target, tid);
				threads = cp_target_threads(h->target, &n);
			}
		}
		for (size_t i = 0; i < h->nbps; i++) {
			if (!h->bps[i].inserted)
				continue;
			if (cp_heap_trap_restore(h->pid, &h->bps[i]) < 0) {
				if (h->o.warn) {
					char text[256];
					snprintf(text, sizeof(text),
						 "cannot restore the byte at "
						 "%#llx (%s) in %d: %s",
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
		/* Return addresses still pointing at our int3s.  */
		for (size_t i = 0; i < h->nthreads; i++) {
			struct tstate *ts = &h->threads[i];
			uint64_t slot = 0;
			if (!ts->in_call ||
			    !cp_target_thread(h->target, ts->tid))
				continue;
			if (cp_heap_read_u64(h->pid, ts->slot, &slot) &&
			    slot == ts->fake &&
			    cp_target_write(h->pid, ts->slot, &ts->ret, 8) < 0)
				rc = -CP_E_SYS;
			ts->in_call = false;
			h->s.lost_returns++;
		}
		/* Our hooks go before the threads run again: nothing of
		 * ours is left for them to trap on, and a trap now is the
		 * target's own.  The target stays attached, usable for
		 * sampling, a dump, or heap tracing again.  */
		hooks_out(h);
		cp_target_release_all(h->target);
	}
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
	memcpy(s->calls, h->s.calls, sizeof(s->calls));
	memcpy(s->traced, h->s.traced, sizeof(s->traced));
	memcpy(s->module, h->s.module, sizeof(s->module));
	s->reallocs = h->s.reallocs;
	s->lost_returns = h->s.lost_returns;
	s->stepped = h->s.stepped;
	s->unwinds_reused = h->s.unwinds_reused;
	s->vfork_children = h->s.vfork_children;
	s->fork_children = h->s.fork_children;
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
	free(h->threads);
	cp_heaptable_free(h->table);
	cp_int3_steps_free(&h->steps);
	cp_capture_slot_free(&h->slot);
	for (size_t i = 0; i < UNWIND_MEMO_SLOTS; i++)
		free(h->memo[i].bytes);
	cp_capture_free(h->capture);
	free(h->pcs);
	free(h->locs);
	free(h);
}
