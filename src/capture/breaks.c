/* The session's breakpoints (capture/breaks.h).
 *
 * One struct cp_int3 per breakpoint; breakpoints at the same address
 * share the byte (written while one of them is in, restored when the
 * last one goes).  A thread that reaches an int3 of ours while the caller
 * waits (cp_session_wait) is rewound to the breakpoint's address and kept
 * stopped (cp_target_keep) until cp_breaks_continue; at any other time
 * the hit is counted and the thread goes on at once: the displaced
 * instruction emulated, or stepped with the original byte back for that
 * one instruction (another thread passing the address during that step
 * is not counted: the price of not stopping every thread from inside a
 * trap hook).  */
#include "capture/breaks.h"

#include <stdlib.h>
#include <string.h>

#include "arch/x86_64/abi.h"
#include "arch/x86_64/regs.h"
#include "capture/int3.h"
#include "capture/session_hooks.h"
#include "cprof/error.h"
#include "util/grow.h"

struct cp_breaks {
	struct cp_session *session;
	struct cp_target *target;
	pid_t pid;
	struct cp_session_break *pub; /* what cp_session_breaks shows */
	struct cp_int3 *int3;         /* by the same index */
	size_t n, cap, int3_cap;
	int next_id;
	bool waiting;                 /* hits are held for the caller */
	bool held;                    /* a thread is kept at HIT */
	bool reported;                /* and the caller was told */
	struct cp_session_hit hit;
	/* Addresses whose int3 we took out in this image: a trap queued
	 * before the byte went back is still ours (rewound), not the
	 * target's.  */
	uint64_t *removed;
	size_t nremoved, removed_cap;
	int error;                    /* first failure passing a hit */
	/* Finds a location in the image there is now (after an exec).  */
	int (*locate)(void *arg, const char *location, struct cp_place *out);
	void *locate_arg;
};

/* ------------------------------------------------------------ lookup */

static ssize_t find_id(const struct cp_breaks *b, int id)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->pub[i].id == id)
			return (ssize_t)i;
	return -1;
}

/* The first breakpoint whose int3 is in at ADDR, or -1.  */
static ssize_t find_addr(const struct cp_breaks *b, uint64_t addr)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->int3[i].inserted && b->int3[i].addr == addr)
			return (ssize_t)i;
	return -1;
}

static bool was_removed(const struct cp_breaks *b, uint64_t addr)
{
	for (size_t i = 0; i < b->nremoved; i++)
		if (b->removed[i] == addr)
			return true;
	return false;
}

static void fail(struct cp_breaks *b, int rc)
{
	if (!b->error)
		b->error = rc;
}

/* ------------------------------------------------------------ bytes */

/* Is CODE a system call instruction (syscall, sysenter, int $0x80)?  */
static bool is_syscall(const uint8_t *code)
{
	return (code[0] == 0x0f && (code[1] == 0x05 || code[1] == 0x34)) ||
	       (code[0] == 0xcd && code[1] == 0x80);
}

/* Put the int3 of breakpoint I in (sharing the byte of another at the
 * same address).  */
static int put_in(struct cp_breaks *b, size_t i)
{
	ssize_t other = find_addr(b, b->int3[i].addr);
	if (other >= 0) {
		uint32_t tag = b->int3[i].tag;
		b->int3[i] = b->int3[other];
		b->int3[i].tag = tag;
		return 0;
	}
	return cp_int3_insert(b->pid, &b->int3[i]);
}

/* Take the int3 of breakpoint I out (the byte restored when no other
 * breakpoint shares it).  Threads are held (hold).  */
static int take_out(struct cp_breaks *b, size_t i)
{
	if (!b->int3[i].inserted)
		return 0;
	b->int3[i].inserted = false;
	uint64_t addr = b->int3[i].addr;
	if (find_addr(b, addr) >= 0)
		return 0;
	if (!was_removed(b, addr) &&
	    cp_grow_zeroed((void **)&b->removed, &b->removed_cap,
			   b->nremoved + 1, sizeof(*b->removed), 8))
		b->removed[b->nremoved++] = addr;
	if (cp_target_exited(b->target))
		return 0;
	return cp_int3_restore(b->pid, &b->int3[i]);
}

/* Hold every thread, and let each one stopped for our interrupt with the
 * SIGTRAP of one of our int3s still queued take it first (the hook
 * rewinds it): once the byte is gone, that trap would be the target's,
 * in the middle of an instruction.  False when there is nothing to
 * hold.  */
static bool hold(struct cp_breaks *b)
{
	if (cp_target_exited(b->target) || cp_target_hold_all(b->target) < 0)
		return false;
	size_t n;
	struct cp_thread *threads = cp_target_threads(b->target, &n);
	for (size_t i = 0; i < n; i++) {
		pid_t tid = threads[i].tid;
		for (int tries = 0; tries < 4; tries++) {
			struct user_regs_struct regs;
			if (cp_target_get_regs(b->target, tid, &regs) < 0)
				break;
			if (find_addr(b, cp_regs_pc(&regs) - 1) < 0 ||
			    !cp_target_trap_pending(b->target, tid))
				break;
			cp_target_deliver_pending(b->target, tid);
			threads = cp_target_threads(b->target, &n);
		}
	}
	return true;
}

static void release(struct cp_breaks *b, bool held)
{
	if (held)
		cp_target_release_all(b->target);
}

/* ------------------------------------------------------------ hooks */

/* Let thread TID, stopped at breakpoint I's int3 with REGS (pc past the
 * int3), go on past the displaced instruction.  */
static void pass(struct cp_breaks *b, pid_t tid, size_t i, uint64_t pc,
		 struct user_regs_struct *regs)
{
	struct cp_int3 *bp = &b->int3[i];
	if (bp->emulate && cp_int3_emulate(b->pid, bp, pc, regs) == 0) {
		/* A thread killed meanwhile takes no registers: gone.  */
		if (cp_target_set_regs(b->target, tid, regs) == 0)
			cp_target_resume(b->target, tid);
		return;
	}
	cp_abi_set_pc(regs, pc);
	if (cp_target_set_regs(b->target, tid, regs) < 0)
		return;
	int rc = cp_int3_step(b->target, tid, bp);
	if (rc == -CP_E_GONE)
		return;
	if (rc < 0)
		fail(b, rc);
	cp_target_resume(b->target, tid);
}

static enum cp_target_trap on_trap(void *arg, pid_t tid, bool hold_it)
{
	struct cp_breaks *b = arg;
	struct user_regs_struct regs;
	if (cp_target_get_regs(b->target, tid, &regs) < 0)
		return CP_TRAP_NOT_OURS;
	uint64_t pc = cp_regs_pc(&regs) - 1;
	ssize_t found = find_addr(b, pc);
	struct cp_thread *th = cp_target_thread(b->target, tid);
	bool interrupting = th && th->interrupting;
	if (found < 0) {
		/* An int3 we took out, its trap reported only now: the
		 * instruction is whole again; run it.  */
		uint8_t byte = 0;
		if (!was_removed(b, pc) ||
		    cp_target_read_mem(b->pid, pc, &byte, 1) < 0 ||
		    byte == CP_INT3_BYTE)
			return CP_TRAP_NOT_OURS;
		hold_it |= interrupting;
	}
	if (found < 0 || hold_it || interrupting) {
		/* Everything is being stopped (or a stop of ours is on its
		 * way to this thread, for the sampler): undo the trap, the
		 * thread reaches the int3 again once it runs, and only then
		 * is the hit counted.  */
		cp_abi_set_pc(&regs, pc);
		if (cp_target_set_regs(b->target, tid, &regs) == 0 &&
		    !hold_it)
			cp_target_resume(b->target, tid);
		return CP_TRAP_HANDLED;
	}
	size_t i = (size_t)found;
	for (size_t k = 0; k < b->n; k++)
		if (b->int3[k].inserted && b->int3[k].addr == pc)
			b->pub[k].hits++;
	if (b->waiting && !b->held && th && !th->vfork_child) {
		/* Held for the caller where the breakpoint is: its pc on
		 * the int3's address, as a debugger shows it.  */
		cp_abi_set_pc(&regs, pc);
		if (cp_target_set_regs(b->target, tid, &regs) < 0)
			return CP_TRAP_HANDLED;
		cp_target_keep(b->target, tid);
		b->held = true;
		b->reported = false;
		b->hit = (struct cp_session_hit){
			.id = b->pub[i].id,
			.tid = tid,
			.pc = pc,
		};
		return CP_TRAP_HANDLED;
	}
	for (size_t k = 0; k < b->n; k++)
		if (b->int3[k].inserted && b->int3[k].addr == pc)
			b->pub[k].passed++;
	pass(b, tid, i, pc, &regs);
	return CP_TRAP_HANDLED;
}

static void on_fork(void *arg, pid_t parent, pid_t child, bool vfork)
{
	struct cp_breaks *b = arg;
	(void)parent;
	if (vfork)
		return; /* our memory: the int3s stay, and are handled */
	/* The child's memory is a copy of the parent's, int3s included.  */
	for (size_t i = 0; i < b->n; i++)
		if (b->int3[i].inserted &&
		    cp_int3_restore(child, &b->int3[i]) < 0)
			fail(b, -CP_E_SYS);
}

/* Put breakpoint I at PLACE in the image there is now: the int3 in when
 * it is enabled, its fields from PLACE.  */
static int arm(struct cp_breaks *b, size_t i, const struct cp_place *place)
{
	struct cp_int3 *bp = &b->int3[i];
	memset(bp, 0, sizeof(*bp));
	int rc;
	ssize_t same = find_addr(b, place->addr);
	if (same >= 0) {
		*bp = b->int3[same];
		bp->inserted = false;
		rc = 0;
	} else {
		rc = cp_int3_prepare(b->pid, bp, place->addr, false);
		/* A system call cannot be stepped from inside a trap hook:
		 * it may block for as long as it likes, and us with it.  */
		if (rc == 0 && !bp->emulate && is_syscall(bp->orig))
			rc = -CP_E_INVAL;
	}
	if (rc == 0 && b->pub[i].enabled)
		rc = put_in(b, i);
	if (rc < 0) {
		memset(bp, 0, sizeof(*bp));
		return rc;
	}
	struct cp_session_break *p = &b->pub[i];
	snprintf(p->function, sizeof(p->function), "%s", place->function);
	snprintf(p->file, sizeof(p->file), "%s", place->file);
	p->line = place->line;
	snprintf(p->module, sizeof(p->module), "%s", place->module);
	p->addr = place->addr;
	return 0;
}

static void on_exec(void *arg)
{
	struct cp_breaks *b = arg;
	/* The image the breakpoints were in is gone, our bytes with it:
	 * pending now.  */
	for (size_t i = 0; i < b->n; i++) {
		b->int3[i].inserted = false;
		b->pub[i].addr = 0;
	}
	b->nremoved = 0;
	b->held = false;
	/* Put into the new image where their locations are in it (a
	 * launched command's breakpoints, set before it ran), while the
	 * thread that exec'ed is stopped here, before its first
	 * instruction.  Only the program and the dynamic linker are mapped
	 * yet: a library's function stays pending.  */
	for (size_t i = 0; b->locate && i < b->n; i++) {
		struct cp_place place;
		if (b->locate(b->locate_arg, b->pub[i].location, &place) == 0)
			arm(b, i, &place);
	}
}

/* ------------------------------------------------------------ public */

int cp_breaks_new(struct cp_session *session, struct cp_target *target,
		  int (*locate)(void *arg, const char *location,
				struct cp_place *out),
		  void *locate_arg, struct cp_breaks **out)
{
	struct cp_breaks *b = calloc(1, sizeof(*b));
	if (!b)
		return -CP_E_NOMEM;
	b->locate = locate;
	b->locate_arg = locate_arg;
	b->session = session;
	b->target = target;
	b->pid = cp_target_pid(target);
	b->next_id = 1;
	struct cp_target_hooks hooks = {on_trap, on_fork, on_exec, b, NULL, NULL};
	int rc = cp_session_hooks_add(session, &hooks);
	if (rc < 0) {
		free(b);
		return rc;
	}
	*out = b;
	return 0;
}

void cp_breaks_free(struct cp_breaks *b)
{
	if (!b)
		return;
	cp_breaks_remove_all(b);
	cp_session_hooks_remove(b->session, b);
	free(b->pub);
	free(b->int3);
	free(b->removed);
	free(b);
}

int cp_breaks_insert(struct cp_breaks *b, const struct cp_place *place,
		     const char *location, bool temporary, int *id)
{
	if (!cp_grow_zeroed((void **)&b->pub, &b->cap, b->n + 1,
			    sizeof(*b->pub), 8) ||
	    !cp_grow_zeroed((void **)&b->int3, &b->int3_cap, b->n + 1,
			    sizeof(*b->int3), 8))
		return -CP_E_NOMEM;
	size_t i = b->n;
	struct cp_session_break *p = &b->pub[i];
	memset(p, 0, sizeof(*p));
	memset(&b->int3[i], 0, sizeof(b->int3[i]));
	snprintf(p->location, sizeof(p->location), "%s", location);
	p->temporary = temporary;
	p->enabled = true;
	if (place) {
		int rc = arm(b, i, place);
		if (rc < 0)
			return rc;
	}
	p->id = b->next_id++;
	b->n++;
	if (id)
		*id = p->id;
	return 0;
}

int cp_breaks_delete(struct cp_breaks *b, int id)
{
	ssize_t i = find_id(b, id);
	if (i < 0)
		return -CP_E_INVAL;
	int rc = 0;
	if (b->int3[i].inserted) {
		bool held = hold(b);
		rc = take_out(b, (size_t)i);
		release(b, held);
	}
	size_t rest = b->n - (size_t)i - 1;
	memmove(&b->pub[i], &b->pub[i + 1], rest * sizeof(*b->pub));
	memmove(&b->int3[i], &b->int3[i + 1], rest * sizeof(*b->int3));
	b->n--;
	return rc < 0 ? rc : 0;
}

int cp_breaks_enable(struct cp_breaks *b, int id, bool enabled)
{
	ssize_t i = find_id(b, id);
	if (i < 0)
		return -CP_E_INVAL;
	struct cp_session_break *p = &b->pub[i];
	if (p->enabled == enabled)
		return 0;
	p->enabled = enabled;
	if (!p->addr)
		return 0; /* pending: nothing in the code */
	if (!enabled) {
		bool held = hold(b);
		int rc = take_out(b, (size_t)i);
		release(b, held);
		return rc;
	}
	/* The code bytes kept from the insertion are still the code's (an
	 * exec would have made the breakpoint pending).  */
	if (find_addr(b, b->int3[i].addr) < 0) {
		uint8_t now = 0;
		if (cp_target_read_mem(b->pid, b->int3[i].addr, &now, 1) < 0)
			return -CP_E_SYS;
		if (now == CP_INT3_BYTE) {
			p->enabled = false;
			return -CP_E_INVAL; /* someone else's since */
		}
	}
	return put_in(b, (size_t)i);
}

const struct cp_session_break *cp_breaks_list(const struct cp_breaks *b,
					      size_t *count)
{
	*count = b ? b->n : 0;
	return b ? b->pub : NULL;
}

size_t cp_breaks_count(const struct cp_breaks *b)
{
	return b ? b->n : 0;
}

void cp_breaks_set_waiting(struct cp_breaks *b, bool on)
{
	b->waiting = on;
}

bool cp_breaks_take_hit(struct cp_breaks *b, struct cp_session_hit *hit)
{
	if (!b->held || b->reported)
		return false;
	if (!cp_target_thread(b->target, b->hit.tid)) {
		b->held = false; /* gone (killed with its process) */
		return false;
	}
	b->reported = true;
	*hit = b->hit;
	ssize_t i = find_id(b, b->hit.id);
	if (i >= 0 && b->pub[i].temporary)
		cp_breaks_delete(b, b->hit.id);
	return true;
}

bool cp_breaks_has_hit(const struct cp_breaks *b)
{
	return b->held && !b->reported;
}

const struct cp_session_hit *cp_breaks_held(const struct cp_breaks *b)
{
	return b && b->held && b->reported ? &b->hit : NULL;
}

int cp_breaks_continue(struct cp_breaks *b)
{
	if (!b || !b->held)
		return -CP_E_NOTHELD;
	b->held = false;
	pid_t tid = b->hit.tid;
	if (!cp_target_thread(b->target, tid))
		return 0;
	ssize_t i = find_addr(b, b->hit.pc);
	if (i >= 0) {
		struct user_regs_struct regs;
		struct cp_int3 *bp = &b->int3[i];
		if (cp_target_get_regs(b->target, tid, &regs) == 0 &&
		    cp_regs_pc(&regs) == bp->addr) {
			if (bp->emulate &&
			    cp_int3_emulate(b->pid, bp, bp->addr, &regs) == 0) {
				cp_target_set_regs(b->target, tid, &regs);
			} else {
				int rc = cp_int3_step(b->target, tid, bp);
				if (rc < 0 && rc != -CP_E_GONE)
					fail(b, rc);
			}
		}
	}
	cp_target_unkeep(b->target, tid);
	return 0;
}

int cp_breaks_remove_all(struct cp_breaks *b)
{
	int rc = 0;
	bool any = false;
	for (size_t i = 0; i < b->n; i++)
		any |= b->int3[i].inserted;
	bool held = any && hold(b);
	for (size_t i = 0; i < b->n; i++) {
		if (take_out(b, i) < 0)
			rc = -CP_E_SYS;
		b->pub[i].addr = 0;
	}
	if (b->held) {
		/* At the breakpoint's address, the original byte back: it
		 * runs the real instruction.  */
		b->held = false;
		if (cp_target_thread(b->target, b->hit.tid))
			cp_target_unkeep(b->target, b->hit.tid);
	}
	release(b, held);
	return rc;
}

int cp_breaks_take_error(struct cp_breaks *b)
{
	int rc = b->error;
	b->error = 0;
	return rc;
}
