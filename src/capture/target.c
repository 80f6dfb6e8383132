/* The target process and every ptrace call cprof makes on it.
 *
 * A thread is in one of three states as far as we are concerned: running
 * (we hold nothing), stopped (in a ptrace-stop we asked for with
 * PTRACE_INTERRUPT and have not yet resumed), or listening (in a group-stop
 * of the target's own, e.g. SIGSTOP, which we keep with PTRACE_LISTEN).
 * Every other stop is the target's business and is resumed at once with
 * the signal it carried.  */
#include "cprof/target.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capture/clock.h"
#include "util/grow.h"
#include "cprof/error.h"
#include "cprof/procfs.h"
#include "arch/x86_64/regs.h"
#include "arch/x86_64/waits.h"

/* How long we poll for an interrupted thread's stop before we sleep.  */
#define SPIN_WAIT_US 200

/* A wait for stops that makes no progress for this long looks at the
 * threads it waits for: some can never report (see check_stuck).  */
#define STUCK_MS 50

struct cp_target {
	pid_t pid;
	bool launched;
	bool follow_clones;
	bool detaching;          /* cp_target_detach is in progress */
	bool exec_seen;
	bool follow_forks;
	bool exit_stops;          /* PTRACE_O_TRACEEXIT: the on_exit hook */
	bool forks_followed;  /* FOLLOW_FORKS was on at some time */
	bool holding;            /* cp_target_hold_all: keep every thread */
	/* Our threads share the target: each waits only for its own
	 * tracees (__WNOTHREAD), or it would collect another tracer
	 * thread's reports (cp_target_lane).  */
	bool own_waits;
	bool lane;               /* cp_target_lane: shares the process */
	uint64_t images;         /* execve calls seen (cp_target_images) */
	struct cp_target_hooks hooks;
	/* Fork children we know of and have not let go yet: reported by
	 * their parent's event (RESTORED: on_fork ran), by their own first
	 * stop (PARKED: held until the parent's event comes), or both.  */
	struct fork_child { pid_t pid; bool restored, parked; } *forks;
	size_t nforks, forks_cap;
	struct cp_thread *threads;
	size_t nthreads, cap;
	size_t threads_seen;
	int exit_status;
	struct cp_maps *maps;    /* for stack bounds; refreshed on a miss */
	/* Per-thread stack mapping bounds, parallel to THREADS.  */
	struct stack_bounds { uint64_t lo, hi; } *bounds;
	/* Set by the caller (a signal handler): every wait gives up.  */
	const volatile sig_atomic_t *cancel;
	/* Threads let go by cp_target_detach, so that a clone event that
	 * names one of them late does not make us wait for it.  */
	pid_t *released;
	size_t nreleased, released_cap;
	/* Clocks of threads gone with records still to take (clock.h).  */
	struct cp_thread *retired;
	size_t nretired, retired_cap;
};

static unsigned long ptrace_options(const struct cp_target *t)
{
	/* Never PTRACE_O_EXITKILL: the target must outlive us.  */
	unsigned long o = PTRACE_O_TRACEEXEC;
	if (t->follow_clones)
		o |= PTRACE_O_TRACECLONE;
	if (t->follow_forks)
		o |= PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK;
	if (t->exit_stops)
		o |= PTRACE_O_TRACEEXIT;
	return o;
}

/* The flags of every waitpid for T's threads.  */
static int wait_flags(const struct cp_target *t)
{
	return __WALL | (t->own_waits ? __WNOTHREAD : 0);
}

static struct cp_thread *find_thread(struct cp_target *t, pid_t tid)
{
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].tid == tid)
			return &t->threads[i];
	return NULL;
}

static struct cp_thread *add_thread(struct cp_target *t, pid_t tid,
				    bool selected)
{
	struct cp_thread *th = find_thread(t, tid);
	if (th)
		return th;
	if (t->nthreads == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct cp_thread *grown =
			realloc(t->threads, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		t->threads = grown;
		struct stack_bounds *b = realloc(t->bounds, cap * sizeof(*b));
		if (!b)
			return NULL;
		t->bounds = b;
		t->cap = cap;
	}
	th = &t->threads[t->nthreads];
	memset(th, 0, sizeof(*th));
	t->bounds[t->nthreads].lo = t->bounds[t->nthreads].hi = 0;
	t->nthreads++;
	t->threads_seen++;
	th->tid = tid;
	th->selected = selected;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)t->pid,
		 (int)tid);
	th->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
	th->run_fd = -1;
	th->clock_fd = -1;
	cp_procfs_comm(t->pid, tid, th->name, sizeof(th->name));
	return th;
}

/* TH's clock goes: closed, or kept for its owner with the records it
 * has not taken (cp_target_retired_clocks).  */
static void retire_clock(struct cp_target *t, struct cp_thread *th)
{
	if (th->clock_owner && th->clock_copy && cp_thread_clock_unread(th) &&
	    cp_grow((void **)&t->retired, &t->retired_cap, t->nretired + 1,
		    sizeof(*t->retired), 8)) {
		struct cp_thread *kept = &t->retired[t->nretired++];
		*kept = *th;
		kept->stat_fd = kept->run_fd = -1;
		th->clock_fd = -1;
		th->clock_ring = NULL;
		th->clock_owner = 0;
		th->clock_copy = 0;
		return;
	}
	cp_thread_clock_close(th);
}

struct cp_thread *cp_target_retired_clocks(struct cp_target *target,
					   size_t *count)
{
	*count = target->nretired;
	return target->retired;
}

void cp_target_retired_clocks_close(struct cp_target *target)
{
	for (size_t i = 0; i < target->nretired; i++)
		cp_thread_clock_close(&target->retired[i]);
	target->nretired = 0;
}

static void remove_thread(struct cp_target *t, struct cp_thread *th)
{
	size_t i = (size_t)(th - t->threads);
	if (th->stat_fd >= 0)
		close(th->stat_fd);
	if (th->run_fd >= 0)
		close(th->run_fd);
	retire_clock(t, th);
	t->threads[i] = t->threads[t->nthreads - 1];
	t->bounds[i] = t->bounds[t->nthreads - 1];
	t->nthreads--;
}

static void mem_file_open(pid_t pid);
static void mem_file_close(pid_t pid);

static void free_target(struct cp_target *t)
{
	if (!t)
		return;
	if (!t->lane)
		mem_file_close(t->pid);
	for (size_t i = 0; i < t->nthreads; i++) {
		if (t->threads[i].stat_fd >= 0)
			close(t->threads[i].stat_fd);
		if (t->threads[i].run_fd >= 0)
			close(t->threads[i].run_fd);
		cp_thread_clock_close(&t->threads[i]);
	}
	cp_target_retired_clocks_close(t);
	free(t->retired);
	free(t->threads);
	free(t->bounds);
	free(t->forks);
	free(t->released);
	cp_maps_free(t->maps);
	free(t);
}

static int resume(struct cp_thread *th)
{
	long rc;
	th->stopped = false;
	if (th->group_stopped) {
		/* A group-stop is the target's own: keep the thread stopped
		 * but let the kernel tell us when SIGCONT arrives.  */
		rc = ptrace(PTRACE_LISTEN, th->tid, 0, 0);
	} else {
		int sig = th->pending_signal;
		th->pending_signal = 0;
		rc = ptrace(PTRACE_CONT, th->tid, 0, (void *)(long)sig);
	}
	/* Any ptrace-stop clears a PTRACE_INTERRUPT still pending (the
	 * kernel's ptrace_stop: "any trap clears pending STOP trap"): a
	 * thread asked to stop that stopped for something else first (a
	 * clone event, a signal, an int3) would never report the stop we
	 * asked for, and was never sampled again.  Ask again.  */
	if (rc == 0 && th->interrupting)
		ptrace(PTRACE_INTERRUPT, th->tid, 0, 0);
	return rc < 0 ? -CP_E_GONE : 0;
}

static bool is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN ||
	       sig == SIGTTOU;
}

/* While detaching, a thread in any ptrace-stop is let go at once,
 * carrying the signal it stopped with, if any.  */
/* The stop a detach or a hold-all needs breaks the waits the kernel does
 * not restart (epoll_wait, sigtimedwait, a socket with a timeout): mend
 * the call's EINTR into a restart before letting the thread go.  */
static void mend_wait(pid_t tid)
{
	struct user_regs_struct regs;
	if (ptrace(PTRACE_GETREGS, tid, 0, &regs) == 0 &&
	    cp_waits_undo_eintr(&regs))
		ptrace(PTRACE_SETREGS, tid, 0, &regs);
}

/* TID was let go: a clone event that names it late is not a new
 * thread of ours.  */
static void remember_released(struct cp_target *t, pid_t tid)
{
	if (t->nreleased == t->released_cap) {
		size_t cap = t->released_cap ? 2 * t->released_cap : 16;
		pid_t *grown = realloc(t->released, cap * sizeof(*grown));
		if (grown) {
			t->released = grown;
			t->released_cap = cap;
		}
	}
	if (t->nreleased < t->released_cap)
		t->released[t->nreleased++] = tid;
}

static void forget_released(struct cp_target *t, pid_t tid)
{
	for (size_t i = 0; i < t->nreleased; i++)
		if (t->released[i] == tid)
			t->released[i--] = t->released[--t->nreleased];
}

static void detach_now(struct cp_target *t, struct cp_thread *th, int sig)
{
	mend_wait(th->tid);
	ptrace(PTRACE_DETACH, th->tid, 0, (void *)(long)sig);
	remember_released(t, th->tid);
	remove_thread(t, th);
}

static bool was_released(const struct cp_target *t, pid_t tid)
{
	for (size_t i = 0; i < t->nreleased; i++)
		if (t->released[i] == tid)
			return true;
	return false;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool cancelled(const struct cp_target *t)
{
	return t->cancel && *t->cancel;
}

/* Collect the next report of WHO (a TID, or -1 for any tracee) into
 * *TID and *STATUS: at once when one is pending, else after sleeping up
 * to TIMEOUT_MS (-1: no limit) for the SIGCHLD that announces one.  A
 * signal handler of the caller ends the sleep early.  Returns 1 with a
 * report, 0 without (timeout or signal), -1 when WHO is no tracee of ours
 * any more (ECHILD).  */
static int next_report(pid_t who, int flags, int timeout_ms, pid_t *tid,
		       int *status)
{
	if (timeout_ms <= 0) {
		/* No limit, or none at all: one waitpid, the cheapest (heap
		 * mode waits here for every trap).  A signal handler of the
		 * caller ends a blocking one early (EINTR).  */
		pid_t got = waitpid(who, status,
				    flags | (timeout_ms == 0 ? WNOHANG : 0));
		if (got > 0) {
			*tid = got;
			return 1;
		}
		return got < 0 && errno == ECHILD ? -1 : 0;
	}
	/* SIGCHLD is blocked before the non-blocking check, so one that
	 * comes between the check and the sleep stays pending and ends
	 * the sleep: no report can be missed.  A SIGCHLD taken by some
	 * other wait costs at most TIMEOUT_MS.  */
	sigset_t chld, old;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, &old);
	pid_t got = waitpid(who, status, flags | WNOHANG);
	if (got == 0) {
		struct timespec limit = {timeout_ms / 1000,
					 (timeout_ms % 1000) * 1000000L};
		sigtimedwait(&chld, NULL, &limit);
		got = waitpid(who, status, flags | WNOHANG);
	}
	int saved = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (got > 0) {
		*tid = got;
		return 1;
	}
	if (got < 0 && saved == ECHILD)
		return -1;
	return 0;
}

enum disposition { EV_OURS, EV_HANDLED, EV_GONE };

static struct fork_child *find_fork(struct cp_target *t, pid_t pid)
{
	for (size_t i = 0; i < t->nforks; i++)
		if (t->forks[i].pid == pid)
			return &t->forks[i];
	return NULL;
}

static struct fork_child *add_fork(struct cp_target *t, pid_t pid)
{
	if (t->nforks == t->forks_cap) {
		size_t cap = t->forks_cap ? t->forks_cap * 2 : 4;
		struct fork_child *grown =
			realloc(t->forks, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		t->forks = grown;
		t->forks_cap = cap;
	}
	struct fork_child *fc = &t->forks[t->nforks++];
	memset(fc, 0, sizeof(*fc));
	fc->pid = pid;
	return fc;
}

static void drop_fork(struct cp_target *t, struct fork_child *fc)
{
	mem_file_close(fc->pid);
	*fc = t->forks[--t->nforks];
}

/* A fork child that is restored and in its first stop: let it go.  It
 * has run nothing yet, so it starts as if never traced.  */
static void release_fork(struct cp_target *t, struct fork_child *fc)
{
	ptrace(PTRACE_DETACH, fc->pid, 0, 0);
	drop_fork(t, fc);
}

static void restore_fork(struct cp_target *t, pid_t parent, pid_t child)
{
	if (t->hooks.on_fork)
		t->hooks.on_fork(t->hooks.arg, parent, child, false);
}

/* The parent TID reported a fork or vfork of CHILD.  */
static void fork_event(struct cp_target *t, pid_t tid, pid_t child,
		       bool vfork)
{
	struct fork_child *fc = find_fork(t, child);
	if (vfork) {
		/* The child shares the parent's memory, breakpoints and all:
		 * keep tracing it until it execs or exits.  */
		if (t->hooks.on_fork)
			t->hooks.on_fork(t->hooks.arg, tid, child, true);
		struct cp_thread *c = add_thread(t, child, false);
		if (!c) {
			if (fc)
				drop_fork(t, fc);
			return;
		}
		c->vfork_child = true;
		if (fc && fc->parked) {
			/* Its first stop came already and was held.  */
			drop_fork(t, fc);
			c->stopped = true;
			if (!t->holding && !t->detaching)
				resume(c);
		} else if (fc) {
			drop_fork(t, fc);
		} else if (t->holding || t->detaching) {
			c->interrupting = true;
		}
		return;
	}
	restore_fork(t, tid, child);
	if (fc && fc->parked) {
		release_fork(t, fc);
		return;
	}
	if (!fc)
		fc = add_fork(t, child);
	if (fc)
		fc->restored = true;
}

/* First stop of TID, a process of another thread group (a fork child
 * whose parent's event is still to come, or has come).  */
static void fork_child_stop(struct cp_target *t, pid_t tid)
{
	struct fork_child *fc = find_fork(t, tid);
	if (fc && fc->restored) {
		release_fork(t, fc);
		return;
	}
	if (!fc)
		fc = add_fork(t, tid);
	if (fc)
		fc->parked = true;
	else
		ptrace(PTRACE_DETACH, tid, 0, 0);
}

static bool interrupt_outstanding(const struct cp_target *t, pid_t tid);
static long elapsed_us(const struct timespec *since);

/* Handle one waitpid STATUS of TID.  Returns EV_OURS when it is the
 * interrupt-stop we were waiting for (the thread is then held stopped).  */
static enum disposition dispatch(struct cp_target *t, pid_t tid, int status)
{
	struct cp_thread *th = find_thread(t, tid);
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		if (tid == t->pid)
			t->exit_status = status;
		if (th)
			remove_thread(t, th);
		return EV_GONE;
	}
	if (!WIFSTOPPED(status))
		return EV_HANDLED;
	if (!th) {
		/* (Also once forks are no longer followed: a child
		 * auto-attached before the options changed.)  */
		if (t->follow_forks || t->forks_followed) {
			pid_t tgid = cp_procfs_tgid(tid);
			if (tgid > 0 && tgid != t->pid) {
				fork_child_stop(t, tid);
				return EV_HANDLED;
			}
		}
		/* A thread auto-attached by PTRACE_O_TRACECLONE can report its
		 * first stop before its parent reports the clone event.  */
		th = add_thread(t, tid, true);
		if (!th) {
			ptrace(PTRACE_DETACH, tid, 0, 0);
			return EV_HANDLED;
		}
		th->interrupting = t->holding;
		th->newborn = true;
	}
	int sig = WSTOPSIG(status);
	int event = (int)((unsigned)status >> 16);
	switch (event) {
	case PTRACE_EVENT_CLONE: {
		unsigned long new_tid = 0;
		if (ptrace(PTRACE_GETEVENTMSG, tid, 0, &new_tid) == 0 &&
		    new_tid > 0 && !find_thread(t, (pid_t)new_tid) &&
		    !was_released(t, (pid_t)new_tid)) {
			struct cp_thread *child =
				add_thread(t, (pid_t)new_tid, true);
			th = find_thread(t, tid); /* add_thread may move it */
			if (!child)
				ptrace(PTRACE_DETACH, (pid_t)new_tid, 0, 0);
			else
				child->newborn = true;
			if (child && (t->detaching || t->holding))
				/* Its first stop is still to come: wait for it
				 * like for an interrupt.  */
				child->interrupting = true;
		}
		if (t->detaching) {
			detach_now(t, th, 0);
			return EV_GONE;
		}
		resume(th);
		return EV_HANDLED;
	}
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK: {
		unsigned long child = 0;
		if (ptrace(PTRACE_GETEVENTMSG, tid, 0, &child) == 0 &&
		    child > 0)
			fork_event(t, tid, (pid_t)child,
				   event == PTRACE_EVENT_VFORK);
		th = find_thread(t, tid); /* add_thread may move it */
		if (!th)
			return EV_GONE;
		if (t->detaching) {
			detach_now(t, th, 0);
			return EV_GONE;
		}
		resume(th);
		return EV_HANDLED;
	}
	case PTRACE_EVENT_EXIT:
		/* The thread's last stop, its memory still there.  */
		if (t->hooks.on_exit && !t->detaching) {
			th->stopped = true;
			t->hooks.on_exit(t->hooks.arg, tid);
			th = find_thread(t, tid);
			if (!th)
				return EV_GONE;
			th->stopped = false;
		}
		if (t->detaching) {
			detach_now(t, th, 0);
			return EV_GONE;
		}
		resume(th);
		return EV_HANDLED;
	case PTRACE_EVENT_EXEC: {
		/* A thread other than the leader that calls execve takes the
		 * leader's TID and its own TID vanishes without a report:
		 * forget it, or we would wait for it for ever.  */
		unsigned long former = 0;
		if (ptrace(PTRACE_GETEVENTMSG, tid, 0, &former) == 0 &&
		    former > 0 && (pid_t)former != tid) {
			struct cp_thread *gone = find_thread(t, (pid_t)former);
			if (gone && gone != th) {
				remove_thread(t, gone);
				th = find_thread(t, tid);
				if (!th)
					return EV_GONE;
			}
			/* The leader's entry is the exec'ing thread's now:
			 * the CPU clock it has counts the old leader, gone
			 * (the sampler opens one for the thread).  */
			retire_clock(t, th);
		}
		if (th->vfork_child) {
			/* It has its own memory now, without our bytes.  */
			mem_file_close(tid);
			detach_now(t, th, 0);
			return EV_GONE;
		}
		/* execve replaced the image: all other threads are gone and
		 * every mapping is new.  */
		t->exec_seen = true;
		t->images++;
		mem_file_open(t->pid);
		/* A thread kept for the caller is gone with the old image;
		 * its TID may be the exec'ing thread's now (the leader's). */
		for (size_t i = 0; i < t->nthreads; i++)
			t->threads[i].kept = false;
		if (t->hooks.on_exec)
			t->hooks.on_exec(t->hooks.arg);
		for (size_t i = 0; i < t->nthreads; i++)
			t->bounds[i].lo = t->bounds[i].hi = 0;
		if (t->detaching) {
			detach_now(t, th, 0);
			return EV_GONE;
		}
		if (th->interrupting) {
			/* The execve may swallow the PTRACE_INTERRUPT we sent
			 * (its stop never came, and the thread was never
			 * sampled again): this stop is the one we asked for.
			 * Should the interrupt's own stop still come, it is
			 * resumed like any stop we did not ask for.  */
			th->interrupting = false;
			th->stopped = true;
			return EV_OURS;
		}
		resume(th);
		return EV_HANDLED;
	}
	case PTRACE_EVENT_STOP:
		/* Either our PTRACE_INTERRUPT (SIGTRAP), the first stop of a
		 * new thread (SIGTRAP), a group-stop (a stop signal), or the
		 * wake-up of a listening thread on SIGCONT (SIGTRAP).  */
		th->group_stopped = is_stop_signal(sig);
		if (t->detaching) {
			/* The kernel puts a group-stopped thread back into the
			 * group-stop on detach.  */
			detach_now(t, th, 0);
			return EV_GONE;
		}
		if (th->interrupting) {
			th->newborn = false;
			th->interrupting = false;
			th->stopped = true;
			return EV_OURS;
		}
		if (th->newborn && !th->group_stopped) {
			/* A new thread's first stop: it has run nothing yet.
			 * The hook may hand it to another tracer thread.  */
			th->newborn = false;
			if (t->hooks.on_birth) {
				th->stopped = true;
				bool taken = t->hooks.on_birth(t->hooks.arg,
							       tid);
				th = find_thread(t, tid);
				if (taken || !th)
					return EV_GONE;
				th->stopped = false;
			}
		}
		resume(th);
		return EV_HANDLED;
	default:
		break;
	}
	if (event != 0) {
		/* An event we did not ask for: let it go.  */
		if (t->detaching) {
			detach_now(t, th, 0);
			return EV_GONE;
		}
		resume(th);
		return EV_HANDLED;
	}
	/* Signal-delivery-stop: the signal is the target's; hand it back
	 * unchanged.  It took a PTRACE_INTERRUPT of ours still pending, which
	 * resume() sends again.  */
	th->group_stopped = false;
	if (sig == SIGTRAP && t->hooks.on_trap) {
		/* Maybe an int3 of ours.  */
		bool hold = t->holding || t->detaching;
		th->stopped = true;
		enum cp_target_trap r = t->hooks.on_trap(t->hooks.arg, tid,
							 hold);
		th = find_thread(t, tid);
		if (!th)
			return EV_GONE;
		if (r == CP_TRAP_HANDLED) {
			if (t->detaching) {
				th->stopped = false;
				detach_now(t, th, 0);
				return EV_GONE;
			}
			if (hold && th->stopped) {
				th->interrupting = false;
				return EV_OURS;
			}
			return EV_HANDLED;
		}
		th->stopped = false;
	}
	if (t->detaching) {
		detach_now(t, th, sig);
		return EV_GONE;
	}
	th->pending_signal = sig;
	resume(th);
	return EV_HANDLED;
}

/* The run state letter of TID from /proc, or 0.  */
static char read_state(pid_t pid, pid_t tid)
{
	struct cp_task_stat st;
	return cp_task_stat_read(pid, tid, &st) == 0 ? st.state : 0;
}

static int seize(struct cp_target *t, pid_t tid)
{
	if (ptrace(PTRACE_SEIZE, tid, 0, (void *)ptrace_options(t)) == 0)
		return 0;
	if (errno == ESRCH)
		return -CP_E_GONE;
	if (errno == EPERM) {
		/* Already ours?  A thread auto-attached through a clone event
		 * we have not collected yet.  */
		if (cp_procfs_tracer_pid(tid) == getpid())
			return 0;
		/* A thread that is exiting cannot be seized either
		 * (exit_state is set): in a program whose threads come and
		 * go, that is a thread gone, not a permission problem.  */
		struct cp_task_stat st;
		if (tid != t->pid &&
		    (cp_task_stat_read(t->pid, tid, &st) < 0 ||
		     st.state == 'Z' || st.state == 'X'))
			return -CP_E_GONE;
		errno = EPERM;
		return -CP_E_PERM;
	}
	return -CP_E_SYS;
}

/* The TIDs in /proc/PID/task.  */
static int list_tasks(pid_t pid, pid_t **out, size_t *n)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *dir = opendir(path);
	if (!dir)
		return -CP_E_NOPROC;
	size_t cap = 16, count = 0;
	pid_t *tids = malloc(cap * sizeof(*tids));
	struct dirent *de;
	while (tids && (de = readdir(dir))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		if (count == cap) {
			pid_t *grown = realloc(tids, 2 * cap * sizeof(*tids));
			if (!grown) {
				free(tids);
				tids = NULL;
				break;
			}
			tids = grown;
			cap *= 2;
		}
		tids[count++] = (pid_t)atoi(de->d_name);
	}
	closedir(dir);
	if (!tids)
		return -CP_E_NOMEM;
	*out = tids;
	*n = count;
	return 0;
}

static int check_process(pid_t pid, pid_t *tracer)
{
	if (pid == getpid())
		return -CP_E_SELF;
	struct cp_task_stat st;
	int rc = cp_task_stat_read(pid, 0, &st);
	if (rc < 0)
		return -CP_E_NOPROC;
	if (st.flags & CP_PF_KTHREAD)
		return -CP_E_KTHREAD;
	if (st.state == 'Z' || st.state == 'X')
		return -CP_E_ZOMBIE;
	/* /proc/TID exists for every thread, so a thread id looks like a
	 * process: profiling "it" would silently profile its whole process. */
	if (cp_procfs_tgid(pid) > 0 && cp_procfs_tgid(pid) != pid)
		return -CP_E_NOTLEADER;
	pid_t tp = cp_procfs_tracer_pid(pid);
	if (tp > 0) {
		if (tracer)
			*tracer = tp;
		return -CP_E_TRACED;
	}
	return 0;
}

int cp_target_attach(pid_t pid, const pid_t *tids, size_t ntids,
		     unsigned flags, struct cp_target **out, pid_t *tracer)
{
	int rc = check_process(pid, tracer);
	if (rc < 0)
		return rc;
	struct cp_target *t = calloc(1, sizeof(*t));
	if (!t)
		return -CP_E_NOMEM;
	t->pid = pid;
	t->exit_status = -1;
	t->follow_clones = ntids == 0 && (flags & CP_TARGET_FOLLOW_CLONES);
	t->follow_forks = flags & CP_TARGET_FOLLOW_FORKS;
	t->forks_followed = t->follow_forks;

	pid_t *present = NULL;
	size_t npresent = 0;
	rc = list_tasks(pid, &present, &npresent);
	if (rc < 0)
		goto fail;
	if (ntids > 0) {
		for (size_t i = 0; i < ntids; i++) {
			bool found = false;
			for (size_t j = 0; j < npresent; j++)
				found |= present[j] == tids[i];
			if (!found) {
				rc = -CP_E_INVAL;
				errno = ESRCH;
				goto fail;
			}
		}
		for (size_t i = 0; i < ntids; i++) {
			char state = read_state(pid, tids[i]);
			rc = seize(t, tids[i]);
			if (rc == -CP_E_GONE)
				continue;
			if (rc < 0)
				goto fail;
			struct cp_thread *th = add_thread(t, tids[i], true);
			if (!th) {
				rc = -CP_E_NOMEM;
				goto fail;
			}
			th->attach_state = state;
		}
	} else {
		/* Threads may be born while we attach: list again until a
		 * pass finds nothing new.  Threads born from seized threads
		 * are auto-attached by PTRACE_O_TRACECLONE.  */
		bool grew = true;
		while (grew) {
			grew = false;
			for (size_t j = 0; j < npresent; j++) {
				if (find_thread(t, present[j]))
					continue;
				/* Read before seizing: a stopped thread reads
				 * as "tracing stop" once it is ours.  */
				char state = read_state(pid, present[j]);
				rc = seize(t, present[j]);
				if (rc == -CP_E_GONE)
					continue;
				if (rc < 0)
					goto fail;
				struct cp_thread *th =
					add_thread(t, present[j], true);
				if (!th) {
					rc = -CP_E_NOMEM;
					goto fail;
				}
				th->attach_state = state;
				grew = true;
			}
			free(present);
			present = NULL;
			if (!grew)
				break;
			rc = list_tasks(pid, &present, &npresent);
			if (rc < 0)
				goto fail;
		}
	}
	free(present);
	present = NULL;
	if (t->nthreads == 0) {
		rc = -CP_E_NOPROC;
		goto fail;
	}
	cp_maps_read(pid, &t->maps);
	mem_file_open(pid);
	*out = t;
	return 0;
fail: {
	int saved = errno;
	free(present);
	if (rc == -CP_E_PERM && tracer) {
		pid_t tp = cp_procfs_tracer_pid(pid);
		if (tp > 0 && tp != getpid()) {
			*tracer = tp;
			rc = -CP_E_TRACED;
		}
	}
	cp_target_detach(t);
	errno = saved;
	return rc;
}
}

int cp_target_launch(char *const argv[], unsigned flags,
		     struct cp_target **out)
{
	int go[2] = {-1, -1}, err[2] = {-1, -1};
	int rc;
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		rc = -CP_E_SYS;
		goto fail_pipes;
	}
	pid_t pid = fork();
	if (pid < 0) {
		rc = -CP_E_SYS;
		goto fail_pipes;
	}
	if (pid == 0) {
		/* The child: wait until the parent has seized us, then
		 * become COMMAND with default signal handling.  */
		char c;
		close(go[1]);
		close(err[0]);
		while (read(go[0], &c, 1) < 0 && errno == EINTR)
			;
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		for (int s = 1; s < NSIG; s++)
			if (s != SIGKILL && s != SIGSTOP)
				signal(s, SIG_DFL);
		execvp(argv[0], argv);
		int e = errno;
		if (write(err[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(err[1]);
	go[0] = err[1] = -1;
	struct cp_target *t = calloc(1, sizeof(*t));
	if (!t) {
		rc = -CP_E_NOMEM;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		goto fail_pipes;
	}
	t->pid = pid;
	t->launched = true;
	t->exit_status = -1;
	t->follow_clones = flags & CP_TARGET_FOLLOW_CLONES;
	t->follow_forks = flags & CP_TARGET_FOLLOW_FORKS;
	t->forks_followed = t->follow_forks;
	if (ptrace(PTRACE_SEIZE, pid, 0, (void *)ptrace_options(t)) < 0 ||
	    !add_thread(t, pid, true)) {
		rc = -CP_E_SYS;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, __WALL);
		free_target(t);
		goto fail_pipes;
	}
	if (write(go[1], "g", 1) < 0) {
		/* The child is gone; the read below tells.  */
	}
	close(go[1]);
	go[1] = -1;
	/* The close-on-exec end closes when execve succeeds, before the exec
	 * event stop, so this read cannot deadlock on our own tracee.  */
	int child_errno = 0;
	ssize_t n;
	while ((n = read(err[0], &child_errno, sizeof(child_errno))) < 0 &&
	       errno == EINTR)
		;
	close(err[0]);
	err[0] = -1;
	if (n == (ssize_t)sizeof(child_errno)) {
		int status;
		while (waitpid(pid, &status, __WALL) < 0 && errno == EINTR)
			;
		free_target(t);
		errno = child_errno;
		return -CP_E_EXEC;
	}
	/* The image COMMAND is now (the exec stop is still to collect).  */
	mem_file_open(pid);
	*out = t;
	return 0;
fail_pipes: {
	int saved = errno;
	for (int i = 0; i < 2; i++) {
		if (go[i] >= 0)
			close(go[i]);
		if (err[i] >= 0)
			close(err[i]);
	}
	errno = saved;
	return rc;
}
}

pid_t cp_target_pid(const struct cp_target *target)
{
	return target->pid;
}

bool cp_target_launched(const struct cp_target *target)
{
	return target->launched;
}

struct cp_thread *cp_target_threads(struct cp_target *target, size_t *count)
{
	*count = target->nthreads;
	return target->threads;
}

struct cp_thread *cp_target_thread(struct cp_target *target, pid_t tid)
{
	return find_thread(target, tid);
}

size_t cp_target_threads_seen(const struct cp_target *target)
{
	return target->threads_seen;
}

bool cp_target_exited(const struct cp_target *target)
{
	return target->nthreads == 0;
}

uint64_t cp_target_images(const struct cp_target *target)
{
	return target->images;
}

bool cp_target_take_exec(struct cp_target *target)
{
	bool seen = target->exec_seen;
	target->exec_seen = false;
	return seen;
}

int cp_target_serve(struct cp_target *target, unsigned spin_us,
		    cp_target_on_stop on_stop, void *arg)
{
	return cp_target_serve_some(target, spin_us, SIZE_MAX, on_stop, arg);
}

int cp_target_serve_some(struct cp_target *target, unsigned spin_us,
			 size_t want, cp_target_on_stop on_stop, void *arg)
{
	int handled = 0, status;
	size_t ours = 0;
	struct timespec wait_start;
	clock_gettime(CLOCK_MONOTONIC, &wait_start);
	/* SIGCHLD is blocked by the caller (cprof/target.h; the sampler
	 * blocks it while it works), so the one a stop raises stays pending: sleep in
	 * sigtimedwait until it comes instead of polling waitpid.  Polling
	 * cost a wait4 every fraction of a microsecond of the stop latency
	 * (about a thousand per stop on a loaded host) for a wake-up
	 * latency saved that only counts while nothing else wants the CPU.
	 * A SIGCHLD taken here is not seen by the caller's signalfd: every
	 * report it announced is collected by the waitpid calls that follow
	 * it, until one finds nothing.  */
	/* Called right after interrupts were sent, the first waitpid would
	 * almost always find nothing: sleep first.  Every report that came
	 * before has its SIGCHLD pending, unless a waitpid loop that ran to
	 * an empty answer after taking it collected the report already.  */
	bool sleep = spin_us > 0 && interrupt_outstanding(target, -1);
	for (;;) {
		if (sleep) {
			long left = (long)spin_us - elapsed_us(&wait_start);
			if (left <= 0)
				break;
			sigset_t chld;
			sigemptyset(&chld);
			sigaddset(&chld, SIGCHLD);
			struct timespec limit = {left / 1000000L,
						 (left % 1000000L) * 1000L};
			if (sigtimedwait(&chld, NULL, &limit) < 0 &&
			    errno == EAGAIN)
				/* No SIGCHLD all along: nothing was reported
				 * (each report not collected yet has its
				 * SIGCHLD pending, above), so a waitpid would
				 * find nothing.  */
				break;
			sleep = false;
		}
		pid_t tid = waitpid(-1, &status, wait_flags(target) | WNOHANG);
		if (tid < 0 && errno == EINTR)
			continue;
		if (tid <= 0) {
			/* Nothing reported yet: keep waiting only while an
			 * interrupt of ours is on its way and the budget
			 * lasts.  */
			if (spin_us == 0 || ours >= want ||
			    !interrupt_outstanding(target, -1))
				break;
			sleep = true;
			continue;
		}
		handled++;
		if (dispatch(target, tid, status) != EV_OURS)
			continue;
		ours++;
		if (on_stop)
			on_stop(arg, tid);
		else
			cp_target_resume(target, tid);
	}
	return handled;
}

int cp_target_poll(struct cp_target *target)
{
	return cp_target_serve(target, 0, NULL, NULL);
}

size_t cp_target_interrupts_outstanding(const struct cp_target *target)
{
	size_t n = 0;
	for (size_t i = 0; i < target->nthreads; i++)
		n += target->threads[i].interrupting;
	return n;
}

char cp_target_thread_state(struct cp_target *target, struct cp_thread *th)
{
	(void)target;
	char buf[512];
	if (th->stat_fd < 0)
		return '?';
	/* /proc stat files are regenerated on every read from offset 0, so
	 * one pread on a kept descriptor is the whole cost.  */
	ssize_t n = pread(th->stat_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return '?';
	buf[n] = '\0';
	char *close = strrchr(buf, ')');
	if (!close || close[1] != ' ' || !close[2])
		return '?';
	return close[2];
}

int cp_target_thread_run(struct cp_target *target, struct cp_thread *th,
			 uint64_t *ns, uint64_t *voluntary)
{
	if (th->run_fd < 0) {
		if (th->no_run)
			return -CP_E_SYS;
		/* The sched file first (it has the voluntary switches). */
		static const char *const names[] = {"sched", "schedstat"};
		for (size_t i = 0; i < 2 && th->run_fd < 0; i++) {
			char path[64];
			snprintf(path, sizeof(path), "/proc/%d/task/%d/%s",
				 (int)target->pid, (int)th->tid, names[i]);
			th->run_fd = open(path, O_RDONLY | O_CLOEXEC);
			th->run_sched = i == 0;
		}
		if (th->run_fd < 0) {
			th->no_run = true;
			return -CP_E_SYS;
		}
	}
	/* Regenerated on every read from offset 0.  */
	char buf[4096];
	ssize_t n = pread(th->run_fd, buf, th->run_sched ? sizeof(buf) : 96,
			  0);
	if (n <= 0)
		return -CP_E_SYS;
	if (th->run_sched) {
		struct cp_task_sched st;
		if (cp_task_sched_parse(buf, (size_t)n, &st) < 0)
			return -CP_E_SYS;
		*ns = st.run_ns;
		*voluntary = st.voluntary;
		return 0;
	}
	struct cp_task_schedstat st;
	if (cp_task_schedstat_parse(buf, (size_t)n, &st) < 0)
		return -CP_E_SYS;
	/* A kernel without scheduler statistics says "0 0 0" for ever.  */
	if (st.run_ns == 0 && st.slices == 0)
		return -CP_E_SYS;
	*ns = st.run_ns;
	*voluntary = UINT64_MAX;
	return 0;
}

int cp_target_thread_cpu_ns(struct cp_target *target, struct cp_thread *th,
			    uint64_t *ns)
{
	uint64_t voluntary;
	return cp_target_thread_run(target, th, ns, &voluntary);
}

int cp_target_interrupt(struct cp_target *target, pid_t tid)
{
	struct cp_thread *th = find_thread(target, tid);
	if (!th)
		return -CP_E_GONE;
	if (th->stopped || th->interrupting)
		return 0;
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0) {
		/* ESRCH: the thread died and waits to be reaped.  */
		int status;
		if (waitpid(tid, &status, wait_flags(target) | WNOHANG) > 0)
			dispatch(target, tid, status);
		return -CP_E_GONE;
	}
	th->interrupting = true;
	th->interrupt_ns = now_ns();
	return 0;
}

/* Ask every thread that is neither held nor asked already to stop.  A
 * thread that cannot be asked (ESRCH: it is exiting) is waited for all
 * the same: its exit report is on its way, and if none ever comes,
 * check_stuck finds out why.  */
static void interrupt_all(struct cp_target *t)
{
	uint64_t now = now_ns();
	for (size_t i = 0; i < t->nthreads; i++) {
		struct cp_thread *th = &t->threads[i];
		if (th->stopped || th->interrupting || th->zombie_leader)
			continue;
		ptrace(PTRACE_INTERRUPT, th->tid, 0, 0);
		th->interrupting = true;
		th->interrupt_ns = now;
	}
}

/* A wait for stops made no progress for STUCK_MS: look at the threads
 * still asked to stop, for those that can never report it.
 * - The thread group leader, once it has exited while other threads run
 *   on, is a zombie whose exit is reported only after the last thread's:
 *   no stop will come from it (a PTRACE_INTERRUPT of it even succeeds).
 * - A thread that no longer exists, or is no tracee of ours any more,
 *   without having reported its end: a thread other than the leader that
 *   called execve took the leader's TID (normally learned from the exec
 *   event; not when that thread was detached already), or it was reaped
 *   by a wait that was not ours.
 * A non-leader zombie needs nothing: its exit report is pending.  */
static void check_stuck(struct cp_target *t)
{
	uint64_t now = now_ns();
	for (size_t i = 0; i < t->nthreads;) {
		struct cp_thread *th = &t->threads[i];
		if (!th->interrupting ||
		    now - th->interrupt_ns < STUCK_MS * 1000000ull) {
			i++;
			continue;
		}
		if (syscall(SYS_tgkill, th->vfork_child ? th->tid : t->pid,
			    th->tid, 0) < 0 && errno == ESRCH) {
			remove_thread(t, th);
			continue;
		}
		/* Asking again is harmless, and ESRCH says it is no tracee
		 * of ours any more: an old leader released by another
		 * thread's execve (that thread, untraced, now has its TID)
		 * vanishes without a report.  */
		if (ptrace(PTRACE_INTERRUPT, th->tid, 0, 0) < 0 &&
		    errno == ESRCH) {
			remove_thread(t, th);
			continue;
		}
		char state = cp_target_thread_state(t, th);
		if ((state == 'Z' || state == 'X') && th->tid == t->pid) {
			th->interrupting = false;
			th->zombie_leader = true;
		}
		i++;
	}
}

static bool interrupt_outstanding(const struct cp_target *t, pid_t tid)
{
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].interrupting &&
		    (tid <= 0 || t->threads[i].tid == tid))
			return true;
	return false;
}

static long elapsed_us(const struct timespec *since)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - since->tv_sec) * 1000000L +
	       (now.tv_nsec - since->tv_nsec) / 1000;
}

/* Wait until WHO (a TID, or -1 for any thread with an interrupt of ours
 * outstanding) is held in our stop; handle everything else meanwhile.
 * Gives up when the caller's cancel flag is set.  */
static int wait_stop(struct cp_target *target, pid_t who, pid_t *stopped_tid)
{
	/* A thread needs some microseconds to reach its stop.  Sleeping
	 * would add our own wake-up latency to the time the target is
	 * held, so poll briefly before sleeping.  */
	struct timespec spin_start;
	clock_gettime(CLOCK_MONOTONIC, &spin_start);
	bool spinning = true;
	while (interrupt_outstanding(target, who)) {
		int status;
		pid_t got;
		int r = next_report(who, wait_flags(target),
				    spinning ? 0 : STUCK_MS, &got, &status);
		if (r == 0) {
			if (cancelled(target))
				break;
			if (spinning)
				spinning = elapsed_us(&spin_start) < SPIN_WAIT_US;
			else
				check_stuck(target);
			continue;
		}
		if (r < 0) {
			/* ECHILD: whatever we waited for is gone.  */
			for (size_t i = 0; i < target->nthreads;)
				if (target->threads[i].interrupting &&
				    (who <= 0 || target->threads[i].tid == who))
					remove_thread(target, &target->threads[i]);
				else
					i++;
			break;
		}
		if (dispatch(target, got, status) == EV_OURS) {
			*stopped_tid = got;
			return 0;
		}
	}
	return -CP_E_GONE;
}

int cp_target_wait_any(struct cp_target *target, pid_t *tid)
{
	return wait_stop(target, -1, tid);
}

int cp_target_stop(struct cp_target *target, pid_t tid)
{
	struct cp_thread *th = find_thread(target, tid);
	if (!th)
		return -CP_E_GONE;
	if (th->stopped)
		return 0;
	int rc = cp_target_interrupt(target, tid);
	if (rc < 0)
		return rc;
	pid_t got;
	return wait_stop(target, tid, &got);
}

/* Where the stack mapping of THREAD ends, from the kept maps, re-read once
 * when SP lies in no known mapping (a new thread's stack).  Called only
 * when the bounds are unknown.  */
static void learn_stack_bounds(struct cp_target *t, size_t index, uint64_t sp)
{
	const struct cp_map *m = cp_maps_find(t->maps, sp);
	if (!m) {
		struct cp_maps *fresh;
		if (cp_maps_read(t->pid, &fresh) == 0) {
			cp_maps_free(t->maps);
			t->maps = fresh;
			m = cp_maps_find(t->maps, sp);
		}
	}
	if (m) {
		t->bounds[index].lo = m->start;
		t->bounds[index].hi = m->end;
	}
}

int cp_target_snapshot(struct cp_target *target, pid_t tid,
		       struct cp_snapshot *snap)
{
	struct cp_thread *th = find_thread(target, tid);
	if (!th || !th->stopped)
		return -CP_E_GONE;
	if (ptrace(PTRACE_GETREGS, tid, 0, &snap->regs) < 0)
		return -CP_E_GONE;
	return cp_target_snapshot_stack(target, tid, snap);
}

int cp_target_snapshot_stack(struct cp_target *target, pid_t tid,
			     struct cp_snapshot *snap)
{
	struct cp_thread *th = find_thread(target, tid);
	if (!th)
		return -CP_E_GONE;
	snap->tid = tid;
	snap->stack_len = 0;
	snap->copied_running = false; /* the thread is held */
	/* Start below the stack pointer: leaf code may keep data in the
	 * 128-byte red zone.  */
	uint64_t sp = snap->regs.rsp;
	uint64_t from = sp > 128 ? sp - 128 : 0;
	size_t index = (size_t)(th - target->threads);
	struct stack_bounds *b = &target->bounds[index];
	size_t len;
	if (b->hi && sp >= b->lo && sp < b->hi) {
		if (from < b->lo)
			from = b->lo;
		uint64_t avail = b->hi - from;
		len = avail < CP_TARGET_STACK_MAX ? (size_t)avail
						  : CP_TARGET_STACK_MAX;
	} else {
		/* Bounds unknown: copy a first guess now; the read stops by
		 * itself at an unmapped or protected page.  The bounds are
		 * learned after the thread runs again.  */
		len = 64 * 1024;
		b->lo = b->hi = 0;
	}
	if (snap->stack_cap < len) {
		unsigned char *grown = realloc(snap->stack, len);
		if (!grown)
			return -CP_E_NOMEM;
		snap->stack = grown;
		snap->stack_cap = len;
	}
	struct iovec local = {snap->stack, len};
	struct iovec remote = {(void *)(uintptr_t)from, len};
	ssize_t n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
	if (n < 0 && from != sp) {
		/* The red zone may sit across a guard page: retry from SP.  */
		from = sp;
		remote.iov_base = (void *)(uintptr_t)from;
		n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
	}
	snap->stack_addr = from;
	snap->stack_len = n > 0 ? (size_t)n : 0;
	return 0;
}

int cp_target_resume(struct cp_target *target, pid_t tid)
{
	struct cp_thread *th = find_thread(target, tid);
	if (!th || !th->stopped)
		return -CP_E_GONE;
	if (th->kept)
		return 0;
	th->samples++;
	return resume(th);
}

int cp_target_keep(struct cp_target *target, pid_t tid)
{
	struct cp_thread *th = find_thread(target, tid);
	if (!th || !th->stopped)
		return -CP_E_GONE;
	th->kept = true;
	return 0;
}

int cp_target_unkeep(struct cp_target *target, pid_t tid)
{
	struct cp_thread *th = find_thread(target, tid);
	if (!th || !th->kept)
		return -CP_E_GONE;
	th->kept = false;
	return th->stopped && !target->holding ? resume(th) : 0;
}

void cp_target_learn_stack(struct cp_target *target, pid_t tid, uint64_t sp)
{
	struct cp_thread *th = find_thread(target, tid);
	if (!th)
		return;
	size_t index = (size_t)(th - target->threads);
	if (!target->bounds[index].hi)
		learn_stack_bounds(target, index, sp);
}

uint64_t cp_target_stack_end(struct cp_target *target, pid_t tid)
{
	struct cp_thread *th = find_thread(target, tid);
	return th ? target->bounds[th - target->threads].hi : 0;
}

void cp_target_detach(struct cp_target *t)
{
	cp_target_detach_status(t);
}

int cp_target_detach_status(struct cp_target *t)
{
	if (!t)
		return -1;
	t->detaching = true;
	/* Ask every thread to stop at once, then let each go from whatever
	 * stop it reports, in whatever order they come: threads are born
	 * (their first stop), exit (their exit is collected, so no traced
	 * zombie is left for the target's parent) and report signals and
	 * events meanwhile.  Every report is taken from any thread
	 * (waitpid -1): waiting for one thread while another sits in a stop
	 * nobody collects can deadlock the target on itself (a thread
	 * joining the new thread we hold).  */
	interrupt_all(t);
	for (;;) {
		for (size_t i = 0; i < t->nthreads;) {
			struct cp_thread *th = &t->threads[i];
			if (th->stopped) {
				th->stopped = false;
				detach_now(t, th, th->pending_signal);
				continue;
			}
			i++;
		}
		bool waiting = false;
		for (size_t i = 0; i < t->nthreads && !waiting; i++)
			waiting = !t->threads[i].zombie_leader;
		if (!waiting || cancelled(t))
			break;
		int status;
		pid_t got;
		int r = next_report(-1, wait_flags(t), STUCK_MS, &got, &status);
		if (r > 0) {
			dispatch(t, got, status);
			continue;
		}
		if (r < 0) {
			/* ECHILD: nothing of ours is left to detach.  */
			while (t->nthreads > 0)
				remove_thread(t, &t->threads[0]);
			break;
		}
		check_stuck(t);
		/* A thread that reported something else (an event we
		 * resumed it from) is asked again.  */
		interrupt_all(t);
	}
	/* The exited leader of a group whose other threads run on is ours
	 * until its group ends; if that has happened by now, collect it so
	 * its parent can.  Otherwise it is released when we exit.  */
	for (size_t i = 0; i < t->nthreads; i++) {
		int status;
		if (t->threads[i].zombie_leader &&
		    waitpid(t->threads[i].tid, &status,
			    wait_flags(t) | WNOHANG) > 0 &&
		    t->threads[i].tid == t->pid)
			t->exit_status = status;
	}
	/* Fork children not let go yet: a parked one still carries our
	 * bytes; a restored one is let go at its first stop.  */
	while (t->nforks > 0 && !cancelled(t)) {
		struct fork_child *fc = &t->forks[0];
		if (fc->parked) {
			if (!fc->restored)
				restore_fork(t, t->pid, fc->pid);
			release_fork(t, fc);
			continue;
		}
		int status;
		pid_t got;
		int r = next_report(fc->pid, wait_flags(t), STUCK_MS, &got,
				    &status);
		if (r == 0) {
			if (syscall(SYS_tgkill, fc->pid, fc->pid, 0) < 0 &&
			    errno == ESRCH)
				drop_fork(t, fc);
			continue;
		}
		if (r > 0 && WIFSTOPPED(status))
			release_fork(t, fc);
		else
			drop_fork(t, fc);
	}
	int exit_status = t->exit_status;
	free_target(t);
	return exit_status;
}

void cp_target_set_cancel(struct cp_target *t,
			  const volatile sig_atomic_t *cancel)
{
	t->cancel = cancel;
}

void cp_target_set_hooks(struct cp_target *t,
			 const struct cp_target_hooks *hooks)
{
	if (hooks)
		t->hooks = *hooks;
	else
		memset(&t->hooks, 0, sizeof(t->hooks));
}

int cp_target_wait_event(struct cp_target *t)
{
	if (t->nthreads == 0)
		return -CP_E_GONE;
	int status;
	pid_t tid;
	int r = next_report(-1, wait_flags(t), -1, &tid, &status);
	if (r == 0)
		return 0; /* a signal of the caller's */
	if (r < 0) {
		/* ECHILD: nothing of ours is left.  */
		while (t->nthreads > 0)
			remove_thread(t, &t->threads[0]);
		return -CP_E_GONE;
	}
	if (dispatch(t, tid, status) == EV_OURS)
		resume(find_thread(t, tid));
	/* No poll for more: the caller's next wait collects a report
	 * already pending at once, and a poll that finds nothing (the
	 * usual case in heap mode, one trap at a time) is a wait4 per
	 * trap for nothing.  */
	return 1;
}

/* Give every stopped thread the options (PTRACE_SETOPTIONS needs the
 * thread in a ptrace-stop; threads born later inherit the options of
 * the thread that cloned them).  */
static void put_options(struct cp_target *t)
{
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].stopped)
			ptrace(PTRACE_SETOPTIONS, t->threads[i].tid, 0,
			       (void *)ptrace_options(t));
}

/* The same with every thread held for it.  */
static int set_options(struct cp_target *t)
{
	int rc = cp_target_hold_all(t);
	put_options(t);
	cp_target_release_all(t);
	return rc;
}

bool cp_target_all_stopped(const struct cp_target *t)
{
	for (size_t i = 0; i < t->nthreads; i++)
		if (!t->threads[i].stopped)
			return false;
	return t->nthreads > 0;
}

int cp_target_set_exit_stops(struct cp_target *t, bool on)
{
	if (t->exit_stops == on)
		return 0;
	t->exit_stops = on;
	/* Called from a hook with the only thread held at a trap (launch
	 * mode, the libraries just mapped): no other stop needed, and none
	 * to let go.  */
	if (cp_target_all_stopped(t)) {
		put_options(t);
		return 0;
	}
	return set_options(t);
}

int cp_target_set_follow_forks(struct cp_target *t, bool on)
{
	if (t->follow_forks == on)
		return 0;
	t->follow_forks = on;
	t->forks_followed |= on;
	return set_options(t);
}

int cp_target_hold_all(struct cp_target *t)
{
	t->holding = true;
	interrupt_all(t);
	while (interrupt_outstanding(t, -1)) {
		pid_t got;
		if (wait_stop(t, -1, &got) < 0)
			break;
	}
	return t->nthreads > 0 ? 0 : -CP_E_GONE;
}

void cp_target_release_all(struct cp_target *t)
{
	t->holding = false;
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].stopped && !t->threads[i].kept) {
			mend_wait(t->threads[i].tid);
			resume(&t->threads[i]);
		}
}

bool cp_target_trap_pending(struct cp_target *t, pid_t tid)
{
	/* SigPnd: signals queued for this thread; an int3's SIGTRAP is
	 * always thread-directed.  */
	struct cp_task_status st;
	return cp_task_status_read(t->pid, tid, &st) == 0 &&
	       (st.sig_pending & (1ULL << (SIGTRAP - 1)));
}

int cp_target_deliver_pending(struct cp_target *t, pid_t tid)
{
	struct cp_thread *th = find_thread(t, tid);
	if (!th || !th->stopped)
		return -CP_E_GONE;
	/* The queued signal is dequeued before the thread returns to user
	 * mode, so the signal-delivery-stop comes before it runs anything;
	 * the trap hook then holds it (HOLD is set).  No PTRACE_INTERRUPT:
	 * its stop could come first and leave the signal queued.  */
	th->stopped = false;
	th->interrupting = true;
	if (ptrace(PTRACE_CONT, tid, 0, 0) < 0) {
		th->interrupting = false;
		return -CP_E_GONE;
	}
	pid_t got;
	return wait_stop(t, tid, &got);
}

int cp_target_step(struct cp_target *t, pid_t tid)
{
	struct cp_thread *th = find_thread(t, tid);
	if (!th || !th->stopped)
		return -CP_E_GONE;
	for (;;) {
		if (ptrace(PTRACE_SINGLESTEP, tid, 0, 0) < 0)
			return -CP_E_GONE;
		int status;
		pid_t got;
		while ((got = waitpid(tid, &status, wait_flags(t))) < 0 &&
		       errno == EINTR)
			;
		if (got < 0 || WIFEXITED(status) || WIFSIGNALED(status)) {
			if (got > 0 && tid == t->pid)
				t->exit_status = status;
			th = find_thread(t, tid);
			if (th)
				remove_thread(t, th);
			return -CP_E_GONE;
		}
		if ((status >> 16) == PTRACE_EVENT_EXEC) {
			/* Another thread's execve killed the one we stepped
			 * (the leader, whose TID the exec'ing thread took):
			 * this is the new image's first stop.  */
			if (dispatch(t, tid, status) == EV_OURS) {
				/* (held for an interrupt of ours: nobody
				 * here serves it) */
				th = find_thread(t, tid);
				if (th)
					resume(th);
			}
			return -CP_E_GONE;
		}
		int sig = WSTOPSIG(status);
		if (sig == SIGTRAP && (status >> 16) == 0)
			return 0; /* stepped */
		if ((status >> 16) == 0 &&
		    (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL ||
		     sig == SIGFPE)) {
			/* The instruction faulted: stepping it again faults
			 * again, for ever.  It did not complete; the fault
			 * is the target's, delivered at the next resume.  */
			th->pending_signal = sig;
			return 0;
		}
		/* A signal of the target's arrived first: keep it for the
		 * next resume and step again.  Anything else (an interrupt
		 * stop of ours) is simply stepped past.  */
		if ((status >> 16) == 0 && !th->pending_signal)
			th->pending_signal = sig;
	}
}

int cp_target_get_regs(struct cp_target *t, pid_t tid,
		       struct user_regs_struct *regs)
{
	(void)t;
	return ptrace(PTRACE_GETREGS, tid, 0, regs) < 0 ? -CP_E_GONE : 0;
}

int cp_target_set_regs(struct cp_target *t, pid_t tid,
		       const struct user_regs_struct *regs)
{
	(void)t;
	return ptrace(PTRACE_SETREGS, tid, 0, regs) < 0 ? -CP_E_GONE : 0;
}

/* The /proc/PID/mem file of each process we write code into, opened
 * once, at attach, and again at each exec event.  The kernel ties such a
 * file to the address space it was opened on: a write through it reaches
 * the image we know of, or nothing at all once an execve we have not
 * seen yet replaced it.  A file opened for each write would reach the
 * new image instead, at an address that means nothing there (an int3
 * put back after a step that another thread's execve cut short).  */
#define MEM_FILES 16
static struct mem_file {
	pid_t pid; /* 0: a free slot */
	int fd;
} mem_files[MEM_FILES];
static pthread_mutex_t mem_files_lock = PTHREAD_MUTEX_INITIALIZER;

/* Called with mem_files_lock held.  */
static struct mem_file *mem_file_slot(pid_t pid, bool add)
{
	struct mem_file *free_slot = NULL;
	for (size_t i = 0; i < MEM_FILES; i++) {
		if (mem_files[i].pid == pid)
			return &mem_files[i];
		if (!free_slot && mem_files[i].pid == 0)
			free_slot = &mem_files[i];
	}
	if (!add || !free_slot)
		return NULL;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	free_slot->pid = pid;
	free_slot->fd = fd;
	return free_slot;
}

/* Close PID's file, if open; the lock held.  */
static void mem_file_drop(pid_t pid)
{
	struct mem_file *m = mem_file_slot(pid, false);
	if (m) {
		close(m->fd);
		m->pid = 0;
	}
}

static void mem_file_close(pid_t pid)
{
	pthread_mutex_lock(&mem_files_lock);
	mem_file_drop(pid);
	pthread_mutex_unlock(&mem_files_lock);
}

/* PID's address space is (now) the one to write into: its file opened
 * again, in one step, so no write comes between the close and the open
 * (a write then would open its own, on whichever image is there).  */
static void mem_file_open(pid_t pid)
{
	pthread_mutex_lock(&mem_files_lock);
	mem_file_drop(pid);
	mem_file_slot(pid, true);
	pthread_mutex_unlock(&mem_files_lock);
}

static ssize_t mem_rw(int fd, uint64_t addr, void *buf, size_t len,
		      bool write_it)
{
	return write_it ? pwrite(fd, buf, len, (off_t)addr)
			: pread(fd, buf, len, (off_t)addr);
}

static int mem_io(pid_t pid, uint64_t addr, void *buf, size_t len,
		  bool write_it)
{
	ssize_t n = -1;
	int saved = 0;
	pthread_mutex_lock(&mem_files_lock);
	struct mem_file *m = mem_file_slot(pid, true);
	if (m) {
		n = mem_rw(m->fd, addr, buf, len, write_it);
		saved = errno;
	}
	pthread_mutex_unlock(&mem_files_lock);
	if (!m) {
		/* Every slot taken (or no /proc): a file for this call.  */
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
		int fd = open(path, (write_it ? O_RDWR : O_RDONLY) | O_CLOEXEC);
		if (fd < 0)
			return -CP_E_SYS;
		n = mem_rw(fd, addr, buf, len, write_it);
		saved = errno;
		close(fd);
	}
	errno = saved;
	return n == (ssize_t)len ? 0 : -CP_E_SYS;
}

int cp_target_write_mem(pid_t pid, uint64_t addr, const void *buf,
			size_t len)
{
	return mem_io(pid, addr, (void *)buf, len, true);
}

int cp_target_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	return mem_io(pid, addr, buf, len, false);
}

int cp_target_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = {(void *)buf, len};
	struct iovec remote = {(void *)(uintptr_t)addr, len};
	return process_vm_writev(pid, &local, 1, &remote, 1, 0) ==
			       (ssize_t)len
		       ? 0
		       : -CP_E_SYS;
}

ssize_t cp_target_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {buf, len};
	struct iovec remote = {(void *)(uintptr_t)addr, len};
	return process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

/* ---------------------------------------------------------- lanes */

int cp_target_lane(const struct cp_target *parent, const pid_t *tids,
		   size_t ntids, struct cp_target **out)
{
	struct cp_target *t = calloc(1, sizeof(*t));
	if (!t)
		return -CP_E_NOMEM;
	t->pid = parent->pid;
	t->exit_status = -1;
	t->follow_clones = parent->follow_clones;
	t->follow_forks = parent->follow_forks;
	t->forks_followed = parent->forks_followed;
	t->own_waits = true;
	t->lane = true;
	t->images = parent->images;
	t->cancel = parent->cancel;
	for (size_t i = 0; i < ntids; i++) {
		char state = read_state(t->pid, tids[i]);
		int rc = seize(t, tids[i]);
		if (rc == -CP_E_GONE)
			continue;
		struct cp_thread *th = rc < 0 ? NULL : add_thread(t, tids[i], true);
		if (!th) {
			cp_target_detach(t);
			return rc < 0 ? rc : -CP_E_NOMEM;
		}
		th->attach_state = state;
	}
	cp_maps_read(t->pid, &t->maps);
	*out = t;
	return 0;
}

void cp_target_set_own_waits(struct cp_target *t, bool on)
{
	t->own_waits = on;
}

int cp_target_hand_over(struct cp_target *t, pid_t tid)
{
	struct cp_thread *th = find_thread(t, tid);
	if (!th || !th->stopped)
		return -CP_E_GONE;
	th->stopped = false;
	detach_now(t, th, th->pending_signal);
	return 0;
}

int cp_target_park(struct cp_target *t, pid_t tid, uint64_t syscall_at,
		   struct cp_park *park)
{
	struct cp_thread *th = find_thread(t, tid);
	if (!th || !th->stopped || th->kept || th->vfork_child)
		return -CP_E_GONE;
	memset(park, 0, sizeof(*park));
	park->tid = tid;
	park->pending_signal = th->pending_signal;
	if (ptrace(PTRACE_GETREGS, tid, 0, &park->regs) < 0)
		return -CP_E_GONE;
	if (ptrace(PTRACE_GETSIGMASK, tid, sizeof(park->sigmask),
		   &park->sigmask) < 0)
		return -CP_E_INVAL;
	struct user_regs_struct parked = park->regs;
	if (!syscall_at) {
		/* Back from a system call: its instruction, still there, is
		 * run again.  */
		char insn[CP_REGS_SYSCALL_LEN];
		syscall_at = cp_regs_pc(&parked) - CP_REGS_SYSCALL_LEN;
		if ((long long)parked.orig_rax < 0 ||
		    cp_target_read(t->pid, syscall_at, insn, sizeof(insn)) !=
			    (ssize_t)sizeof(insn) ||
		    memcmp(insn, CP_REGS_SYSCALL_INSN, sizeof(insn)) != 0)
			return -CP_E_INVAL;
	}
	/* A wait our stop broke with EINTR is called again once the thread
	 * has its registers back (as on any release of ours).  */
	cp_waits_undo_eintr(&park->regs);
	cp_regs_park(&parked, syscall_at);
	uint64_t all = ~0ull;
	if (ptrace(PTRACE_SETSIGMASK, tid, sizeof(all), &all) < 0)
		return -CP_E_INVAL;
	if (ptrace(PTRACE_SETREGS, tid, 0, &parked) < 0) {
		ptrace(PTRACE_SETSIGMASK, tid, sizeof(park->sigmask),
		       &park->sigmask);
		return -CP_E_GONE;
	}
	if (ptrace(PTRACE_DETACH, tid, 0, 0) < 0) {
		ptrace(PTRACE_SETREGS, tid, 0, &park->regs);
		ptrace(PTRACE_SETSIGMASK, tid, sizeof(park->sigmask),
		       &park->sigmask);
		return -CP_E_GONE;
	}
	remember_released(t, tid);
	remove_thread(t, th);
	return 0;
}

uint64_t cp_target_syscall_insn(pid_t pid)
{
	struct cp_maps *maps = NULL;
	if (cp_maps_read(pid, &maps) < 0)
		return 0;
	uint64_t found = 0;
	unsigned char buf[4096];
	/* The vDSO first (small, always there), then the other code.  */
	for (int pass = 0; pass < 2 && !found; pass++) {
		for (size_t i = 0; i < maps->count && !found; i++) {
			const struct cp_map *m = &maps->maps[i];
			bool vdso = strcmp(m->path, "[vdso]") == 0;
			if (!m->executable || vdso != (pass == 0))
				continue;
			uint64_t end = m->end - m->start > 65536
					       ? m->start + 65536 : m->end;
			for (uint64_t at = m->start; at < end && !found;
			     at += sizeof(buf) - 1) {
				ssize_t n = cp_target_read(pid, at, buf,
							   sizeof(buf));
				for (ssize_t k = 0; k + 1 < n; k++)
					if (memcmp(buf + k, CP_REGS_SYSCALL_INSN,
						   CP_REGS_SYSCALL_LEN) == 0) {
						found = at + (uint64_t)k;
						break;
					}
				if (n <= 0)
					break;
			}
		}
	}
	cp_maps_free(maps);
	return found;
}

/* THREAD, ours and held, gets back what PARK saved.  */
static int put_back(struct cp_thread *th, const struct cp_park *park)
{
	if (ptrace(PTRACE_SETREGS, th->tid, 0, &park->regs) < 0 ||
	    ptrace(PTRACE_SETSIGMASK, th->tid, sizeof(park->sigmask),
		   &park->sigmask) < 0)
		return -CP_E_SYS;
	if (park->pending_signal)
		th->pending_signal = park->pending_signal;
	return 0;
}

/* Take the parked thread PARK->tid, seized already, and let it run.  */
static int unpark_seized(struct cp_target *t, const struct cp_park *park)
{
	struct cp_thread *th = find_thread(t, park->tid);
	if (!th)
		return -CP_E_GONE;
	th->newborn = false;
	/* Asleep in pause: our interrupt's stop comes at once.  */
	int rc = cp_target_stop(t, park->tid);
	th = find_thread(t, park->tid);
	if (rc < 0 || !th)
		return -CP_E_GONE;
	rc = put_back(th, park);
	if (!t->holding && !th->kept)
		resume(th);
	return rc;
}

int cp_target_unpark(struct cp_target *t, const struct cp_park *park)
{
	char state = read_state(t->pid, park->tid);
	int rc = seize(t, park->tid);
	if (rc < 0)
		return rc;
	forget_released(t, park->tid);
	struct cp_thread *th = add_thread(t, park->tid, true);
	if (!th) {
		/* Cannot keep it: give it back what it had and let it go.  */
		ptrace(PTRACE_INTERRUPT, park->tid, 0, 0);
		waitpid(park->tid, NULL, wait_flags(t));
		ptrace(PTRACE_SETREGS, park->tid, 0, &park->regs);
		ptrace(PTRACE_SETSIGMASK, park->tid, sizeof(park->sigmask),
		       &park->sigmask);
		ptrace(PTRACE_DETACH, park->tid, 0, 0);
		return -CP_E_NOMEM;
	}
	th->attach_state = state;
	return unpark_seized(t, park);
}

size_t cp_target_adopt(struct cp_target *t, const struct cp_park *parks,
		       size_t n)
{
	size_t adopted = 0;
	bool grew = true;
	while (grew) {
		grew = false;
		pid_t *tids = NULL;
		size_t ntids = 0;
		if (list_tasks(t->pid, &tids, &ntids) < 0)
			break;
		for (size_t i = 0; i < ntids; i++) {
			pid_t tid = tids[i];
			if (cp_procfs_tracer_pid(tid) != 0)
				continue;
			char state = read_state(t->pid, tid);
			if (ptrace(PTRACE_SEIZE, tid, 0,
				   (void *)ptrace_options(t)) < 0)
				continue;
			forget_released(t, tid);
			struct cp_thread *th = find_thread(t, tid);
			if (th) {
				/* The TID of a thread that called execve, or
				 * the leader's, taken over: a new thread.  */
				remove_thread(t, th);
			}
			th = add_thread(t, tid, true);
			if (!th) {
				ptrace(PTRACE_DETACH, tid, 0, 0);
				continue;
			}
			th->attach_state = state;
			adopted++;
			grew = true;
			for (size_t p = 0; p < n; p++)
				if (parks[p].tid == tid)
					unpark_seized(t, &parks[p]);
		}
		free(tids);
	}
	return adopted;
}
