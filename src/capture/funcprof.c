/* Profiling a function: the entry int3, the return caught per thread,
 * in/out and the CPU time inside (capture/funcprof.h).
 *
 * Everything here runs on the session's thread: inside the trap hook
 * (called while the sampler serves its tracees), in the sampler's gate,
 * or at the stop.  A thread's state changes only in a trap of ours, and
 * the sampler asks the gate again once the thread is held in its stop,
 * so a sample is never taken outside the function: a thread that
 * returned between the tick and its stop took the return's trap first
 * (handled before the stop is served), and one whose trap is still
 * queued stands on the int3, turned away by the gate.  */
#include "capture/funcprof.h"

#include <stdlib.h>
#include <string.h>

#include "arch/x86_64/abi.h"
#include "arch/x86_64/regs.h"
#include "capture/int3.h"
#include "capture/session_hooks.h"
#include "cprof/error.h"
#include "util/grow.h"
#include "util/hashidx.h"

/* What we know of one thread.  */
struct inside {
	pid_t tid;
	bool in;              /* inside: the outermost call's return is ours */
	uint64_t slot;        /* stack address of its return address */
	uint64_t ret;         /* the real return address */
	uint64_t entered_ns;  /* its CPU time (schedstat) at the entry */
	uint64_t inside_ns;   /* CPU time inside, calls left: the gate's
			       * clock, which never goes back */
};

struct cp_funcprof {
	struct cp_session *session;
	struct cp_target *target;
	pid_t pid;
	struct cp_int3 bp;            /* at the entry; its address is also
				       * the fake return address */
	struct inside *threads;
	size_t nthreads, threads_cap;
	struct cp_hashidx index;      /* tid -> index in threads */
	bool hooked;                  /* in the session's hook list */
	bool stopped;
	int stop_rc;
	struct cp_session_in_stats stats;
	uint64_t lost;
	int error;
};

static void fail(struct cp_funcprof *f, int rc)
{
	if (!f->error)
		f->error = rc;
}

struct tid_key {
	const struct cp_funcprof *f;
	pid_t tid;
};

static bool tid_eq(const void *ctx, uint32_t id)
{
	const struct tid_key *k = ctx;
	return k->f->threads[id].tid == k->tid;
}

/* TID's state; created when CREATE, else NULL if none.  Borrowed until
 * the next creation.  */
static struct inside *thread_of(struct cp_funcprof *f, pid_t tid,
				bool create)
{
	uint64_t hash = cp_hash_u64((uint64_t)tid);
	struct tid_key key = {f, tid};
	uint32_t id = cp_hashidx_find(&f->index, hash, tid_eq, &key);
	if (id != UINT32_MAX)
		return &f->threads[id];
	if (!create ||
	    !cp_grow_zeroed((void **)&f->threads, &f->threads_cap,
			    f->nthreads + 1, sizeof(*f->threads), 16) ||
	    !cp_hashidx_insert(&f->index, hash, (uint32_t)f->nthreads))
		return NULL;
	struct inside *t = &f->threads[f->nthreads++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	return t;
}

/* The CPU time thread TID has run (it is held), 0 when unknown.  */
static uint64_t cpu_now(struct cp_funcprof *f, pid_t tid)
{
	struct cp_thread *th = cp_target_thread(f->target, tid);
	uint64_t ns = 0;
	if (!th || cp_target_thread_cpu_ns(f->target, th, &ns) < 0)
		return 0;
	return ns;
}

/* T is out of the function: the time since its entry is inside.  RETURNED:
 * through our trap (counted), else found gone (lost).  */
static void leave(struct cp_funcprof *f, struct inside *t, bool returned)
{
	uint64_t now = cpu_now(f, t->tid);
	uint64_t ran = now > t->entered_ns ? now - t->entered_ns : 0;
	t->inside_ns += ran;
	t->in = false;
	if (returned) {
		f->stats.returns++;
		f->stats.inside_ns += ran;
	} else {
		f->lost++;
	}
}

/* The outermost call of T begins, its return address at SP: send the
 * return to our int3.  */
static void enter(struct cp_funcprof *f, struct inside *t, uint64_t sp)
{
	uint64_t ret = 0, fake = f->bp.addr;
	if (cp_target_read(f->pid, sp, &ret, sizeof(ret)) !=
		    (ssize_t)sizeof(ret) ||
	    !ret || cp_target_write(f->pid, sp, &fake, sizeof(fake)) < 0) {
		f->lost++; /* not followed: its time is not counted */
		return;
	}
	t->in = true;
	t->slot = sp;
	t->ret = ret;
	t->entered_ns = cpu_now(f, t->tid);
	f->stats.entries++;
}

/* ------------------------------------------------------------ hooks */

/* Rewind thread TID to the int3 (REGS, PC its address): it takes it
 * again once it runs, or runs the real instruction once the byte is
 * back.  Resumed unless HOLD.  */
static void rewind_to(struct cp_funcprof *f, pid_t tid,
		      struct user_regs_struct *regs, uint64_t pc, bool hold)
{
	cp_abi_set_pc(regs, pc);
	if (cp_target_set_regs(f->target, tid, regs) == 0 && !hold)
		cp_target_resume(f->target, tid);
}

static enum cp_target_trap on_trap(void *arg, pid_t tid, bool hold)
{
	struct cp_funcprof *f = arg;
	struct user_regs_struct regs;
	if (!f->bp.inserted || cp_target_get_regs(f->target, tid, &regs) < 0)
		return CP_TRAP_NOT_OURS;
	uint64_t pc = cp_regs_pc(&regs) - 1;
	if (pc != f->bp.addr)
		return CP_TRAP_NOT_OURS;
	uint64_t sp = cp_regs_sp(&regs);
	struct inside *t = thread_of(f, tid, true);
	if (!t)
		fail(f, -CP_E_NOMEM);
	if (t && t->in && sp == t->slot + CP_ABI_RET_SLOT) {
		/* The outermost call returned, into our int3: on to the real
		 * return address.  Handled even in a hold (nothing to step):
		 * the thread is out.  */
		cp_abi_set_pc(&regs, t->ret);
		if (cp_target_set_regs(f->target, tid, &regs) < 0)
			return CP_TRAP_HANDLED; /* gone */
		leave(f, t, true);
		if (!hold)
			cp_target_resume(f->target, tid);
		return CP_TRAP_HANDLED;
	}
	struct cp_thread *th = cp_target_thread(f->target, tid);
	bool interrupting = th && th->interrupting;
	if (hold || (!f->bp.emulate && interrupting)) {
		/* Everything is being stopped, or a stop of the sampler's is
		 * on its way (a step would swallow it): the call is entered
		 * when the thread reaches the int3 again.  */
		rewind_to(f, tid, &regs, pc, hold);
		return CP_TRAP_HANDLED;
	}
	if (t && t->in && sp > t->slot) {
		/* Above the outermost call's frame: that call is gone without
		 * returning through us (longjmp).  */
		leave(f, t, false);
	}
	if (t && !t->in && !(th && th->vfork_child))
		enter(f, t, sp);
	/* On past the displaced instruction.  */
	if (f->bp.emulate && cp_int3_emulate(f->pid, &f->bp, pc, &regs) == 0) {
		/* A thread killed meanwhile takes no registers: gone.  */
		if (cp_target_set_regs(f->target, tid, &regs) == 0)
			cp_target_resume(f->target, tid);
		return CP_TRAP_HANDLED;
	}
	if (interrupting) {
		rewind_to(f, tid, &regs, pc, false);
		return CP_TRAP_HANDLED;
	}
	/* Stepped with the byte back for one instruction: another thread
	 * entering meanwhile is not seen (its call is not counted), the
	 * price of not stopping every thread from inside a trap hook.  */
	cp_abi_set_pc(&regs, pc);
	if (cp_target_set_regs(f->target, tid, &regs) < 0)
		return CP_TRAP_HANDLED;
	int rc = cp_int3_step(f->target, tid, &f->bp);
	if (rc == -CP_E_GONE)
		return CP_TRAP_HANDLED;
	if (rc < 0)
		fail(f, rc);
	cp_target_resume(f->target, tid);
	return CP_TRAP_HANDLED;
}

static void on_fork(void *arg, pid_t parent, pid_t child, bool vfork)
{
	struct cp_funcprof *f = arg;
	if (vfork)
		return; /* our memory: the int3 stays, and is handled */
	/* The child's memory is a copy of the parent's, our int3 and the
	 * forking thread's return address included.  */
	if (f->bp.inserted && cp_int3_restore(child, &f->bp) < 0)
		fail(f, -CP_E_SYS);
	struct inside *t = thread_of(f, parent, false);
	uint64_t slot = 0;
	if (t && t->in &&
	    cp_target_read(child, t->slot, &slot, sizeof(slot)) ==
		    (ssize_t)sizeof(slot) &&
	    slot == f->bp.addr &&
	    cp_target_write(child, t->slot, &t->ret, sizeof(t->ret)) < 0)
		fail(f, -CP_E_SYS);
}

static void on_exec(void *arg)
{
	struct cp_funcprof *f = arg;
	/* The image and the stacks are gone, our bytes with them.  */
	f->bp.inserted = false;
	for (size_t i = 0; i < f->nthreads; i++)
		if (f->threads[i].in)
			leave(f, &f->threads[i], false);
}

/* ------------------------------------------------------------ gate */

/* The stack copy SNAP with T's outermost return address mended.  */
static void mend(const struct cp_funcprof *f, const struct inside *t,
		 struct cp_snapshot *snap)
{
	if (!snap->stack || t->slot < snap->stack_addr ||
	    snap->stack_len < sizeof(uint64_t) ||
	    t->slot - snap->stack_addr > snap->stack_len - sizeof(uint64_t))
		return;
	unsigned char *at = snap->stack + (t->slot - snap->stack_addr);
	uint64_t word;
	memcpy(&word, at, sizeof(word));
	if (word == f->bp.addr)
		memcpy(at, &t->ret, sizeof(t->ret));
}

bool cp_funcprof_gate(void *arg, pid_t tid, struct cp_snapshot *held,
		      uint64_t *cpu_ns)
{
	struct cp_funcprof *f = arg;
	struct inside *t = thread_of(f, tid, false);
	if (cpu_ns) {
		uint64_t now = *cpu_ns;
		*cpu_ns = !t ? 0
			  : t->inside_ns + (t->in && now > t->entered_ns
						    ? now - t->entered_ns
						    : 0);
	}
	if (!t || !t->in)
		return false;
	if (held) {
		uint64_t pc = cp_regs_pc(&held->regs);
		/* On the int3: rewound to it, stopped between the return and
		 * its trap, or at a nested call's first instruction.  */
		if (pc == f->bp.addr)
			return false;
		/* Past it with its trap queued, not yet taken.  */
		if (pc - 1 == f->bp.addr &&
		    cp_target_trap_pending(f->target, tid))
			return false;
		mend(f, t, held);
	}
	return true;
}

void cp_funcprof_mend(const struct cp_funcprof *f, pid_t tid,
		      struct cp_snapshot *snap)
{
	const struct inside *t = thread_of((struct cp_funcprof *)f, tid, false);
	if (t && t->in)
		mend(f, t, snap);
}

/* ------------------------------------------------------------ public */

int cp_funcprof_new(struct cp_session *session, struct cp_target *target,
		    uint64_t entry, struct cp_funcprof **out)
{
	struct cp_funcprof *f = calloc(1, sizeof(*f));
	if (!f)
		return -CP_E_NOMEM;
	f->session = session;
	f->target = target;
	f->pid = cp_target_pid(target);
	int rc = cp_int3_prepare(f->pid, &f->bp, entry, false);
	if (rc < 0)
		goto fail;
	/* The hooks before the byte: a thread may reach it at once.  */
	struct cp_target_hooks hooks = {on_trap, on_fork, on_exec, f, NULL, NULL};
	rc = cp_session_hooks_add(session, &hooks);
	if (rc < 0)
		goto fail;
	f->hooked = true;
	rc = cp_int3_insert(f->pid, &f->bp);
	if (rc < 0) {
		/* The byte may be in even so (the read-back failed).  */
		cp_int3_restore(f->pid, &f->bp);
		goto fail;
	}
	*out = f;
	return 0;
fail:
	if (f->hooked)
		cp_session_hooks_remove(session, f);
	free(f);
	return rc;
}

/* Hold every thread and let each one stopped for our interrupt with the
 * SIGTRAP of our int3 still queued take it (the hook handles a return,
 * rewinds an entry): once the byte is gone, that trap would be the
 * target's, in the middle of an instruction.  */
static bool hold(struct cp_funcprof *f)
{
	if (cp_target_exited(f->target) || cp_target_hold_all(f->target) < 0)
		return false;
	size_t n;
	struct cp_thread *threads = cp_target_threads(f->target, &n);
	for (size_t i = 0; i < n; i++) {
		pid_t tid = threads[i].tid;
		for (int tries = 0; tries < 4; tries++) {
			struct user_regs_struct regs;
			if (cp_target_get_regs(f->target, tid, &regs) < 0 ||
			    cp_regs_pc(&regs) - 1 != f->bp.addr ||
			    !cp_target_trap_pending(f->target, tid))
				break;
			cp_target_deliver_pending(f->target, tid);
			threads = cp_target_threads(f->target, &n);
		}
	}
	return true;
}

int cp_funcprof_stop(struct cp_funcprof *f)
{
	if (!f || f->stopped)
		return f ? f->stop_rc : 0;
	f->stopped = true;
	int rc = 0;
	bool any = f->bp.inserted;
	for (size_t i = 0; i < f->nthreads && !any; i++)
		any = f->threads[i].in;
	/* Without every thread held (given up: the cancel flag), the
	 * bytes go back all the same, while the threads run: left in, they
	 * would kill the target at its next call or return for sure.  */
	bool held = any && hold(f);
	if (any && !cp_target_exited(f->target)) {
		/* A thread stopped after the return of its outermost call
		 * and before its int3: at the entry address, the return
		 * address popped.  It goes on where the call returns to, or
		 * it would run the function again from its first
		 * instruction, once the byte is back.  */
		for (size_t i = 0; i < f->nthreads && held; i++) {
			struct inside *t = &f->threads[i];
			struct user_regs_struct regs;
			if (!t->in ||
			    cp_target_get_regs(f->target, t->tid, &regs) < 0 ||
			    cp_regs_pc(&regs) != f->bp.addr ||
			    cp_regs_sp(&regs) != t->slot + CP_ABI_RET_SLOT)
				continue;
			cp_abi_set_pc(&regs, t->ret);
			if (cp_target_set_regs(f->target, t->tid, &regs) == 0)
				leave(f, t, true);
		}
		if (f->bp.inserted && cp_int3_restore(f->pid, &f->bp) < 0)
			rc = -CP_E_SYS;
		f->bp.inserted = false;
		/* Return addresses still pointing at the entry: the real
		 * ones back, before any thread runs.  */
		for (size_t i = 0; i < f->nthreads; i++) {
			struct inside *t = &f->threads[i];
			uint64_t slot = 0;
			if (!t->in)
				continue;
			if (cp_target_thread(f->target, t->tid) &&
			    cp_target_read(f->pid, t->slot, &slot,
					   sizeof(slot)) ==
				    (ssize_t)sizeof(slot) &&
			    slot == f->bp.addr &&
			    cp_target_write(f->pid, t->slot, &t->ret,
					    sizeof(t->ret)) < 0)
				rc = -CP_E_SYS;
			/* A call not returned yet: its time so far is
			 * not in the counters of returned calls.  */
			t->in = false;
		}
	}
	/* Our hooks go before the threads run again: a trap now is the
	 * target's own.  */
	if (f->hooked)
		cp_session_hooks_remove(f->session, f);
	f->hooked = false;
	if (held)
		cp_target_release_all(f->target);
	f->bp.inserted = false;
	f->stop_rc = rc;
	return rc;
}

void cp_funcprof_stats(const struct cp_funcprof *f,
		       struct cp_session_in_stats *stats)
{
	*stats = f->stats;
}

uint64_t cp_funcprof_lost(const struct cp_funcprof *f)
{
	return f->lost;
}

int cp_funcprof_error(const struct cp_funcprof *f)
{
	return f->error;
}

void cp_funcprof_free(struct cp_funcprof *f)
{
	if (!f)
		return;
	cp_funcprof_stop(f);
	free(f->threads);
	cp_hashidx_free(&f->index);
	free(f);
}
