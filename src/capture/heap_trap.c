/* Heap mode, the trap side: allocator breakpoints, displaced-instruction
 * emulation, return hijacking, fork and exec, and the allocation events
 * they make, handed to the heap table (profile/heap_table.c).  See
 * include/cprof/heap.h for the method.  */
#include "capture/heap_trap.h"

#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "arch/x86_64/regs.h"
#include "capture/heap_alloc.h"
#include "capture/heap_uprobe.h"
#include "cprof/addrspace.h"
#include "cprof/error.h"
#include "cprof/procfs.h"
#include "symbolize/resolver.h"
#include "util/grow.h"

/* A zeroed array grown by doubling from 16 elements.  */
static bool grow(void **items, size_t size, size_t need, size_t *cap)
{
	return cp_grow_zeroed(items, cap, need, size, 16);
}

static struct tstate *tstate(struct heap_lane *l, pid_t tid, bool create)
{
	for (size_t i = 0; i < l->nthreads; i++)
		if (l->threads[i].tid == tid)
			return &l->threads[i];
	if (!create ||
	    !grow((void **)&l->threads, sizeof(*l->threads), l->nthreads + 1,
		  &l->threads_cap))
		return NULL;
	struct tstate *ts = &l->threads[l->nthreads++];
	memset(ts, 0, sizeof(*ts));
	ts->tid = tid;
	return ts;
}

/* ------------------------------------------------------ events */

/* Hand EVENT to the heap table, FREE_SP the stack pointer of a free
 * (see free_caller).  Before the thread resumes: with several tracer
 * threads, what an event says (a block freed) has not happened yet for
 * the others, so the table gets the events in the order they happen.  */
static void emit(struct cp_heap *h, const struct cp_heap_event *event,
		 uint64_t free_sp)
{
	pthread_mutex_lock(&h->lock);
	h->free_sp = free_sp;
	int rc = cp_heaptable_add(h->table, event);
	if (rc < 0)
		cp_heap_fail(h, rc);
	if (h->o.on_event)
		h->o.on_event(h->o.on_event_arg, event);
	pthread_mutex_unlock(&h->lock);
}

/* The table asks where a free of a block it does not know came from:
 * the return address on the stack of the free being handled.  Read only
 * then, so a free of a live block costs no read.  */
static uint64_t free_caller(void *arg, const struct cp_heap_event *event)
{
	struct cp_heap *h = arg;
	uint64_t caller = 0;
	(void)event;
	if (h->uprobes) /* the record's copy: the thread went on */
		return cp_heap_uprobes_free_caller(h);
	if (!cp_heap_read_u64(h->pid, h->free_sp, &caller))
		caller = 0;
	return caller;
}

/* The outermost call of TS returned RESULT: its event.  */
static void on_return(struct cp_heap *h, struct tstate *ts, uint64_t result)
{
	const struct cp_heap_entry *e = &h->entries[ts->entry];
	struct cp_heap_event ev = cp_heap_return_event(
		h, ts->entry, ts->args, ts->stack, ts->tid, cp_heap_now_ns());
	if (e->result == CP_HEAP_RESULT_STORED) {
		/* It returns 0 and stores the block's address.  */
		uint64_t ptr = 0;
		if (result == 0 &&
		    !cp_heap_read_u64(h->pid,
				      cp_heap_call_arg(ts->args, e->out_arg),
				      &ptr))
			ptr = 0;
		ev.addr = result == 0 ? ptr : 0;
	} else {
		ev.addr = result;
	}
	emit(h, &ev, 0);
}

/* ------------------------------------------------------ breakpoints */

static struct cp_int3 *find_bp(struct cp_heap *h, uint64_t addr)
{
	for (size_t i = 0; i < h->nbps; i++)
		if (h->bps[i].addr == addr && h->bps[i].inserted)
			return &h->bps[i];
	return NULL;
}

static int insert_bp(struct cp_heap *h, struct cp_int3 *bp)
{
	return cp_int3_insert(h->pid, bp);
}

/* Run BP's displaced instruction at PC on REGS.  Returns 0 or -1.  */
static int emulate(struct cp_heap *h, const struct cp_int3 *bp,
		   uint64_t pc, struct user_regs_struct *regs)
{
	return cp_int3_emulate(h->pid, bp, pc, regs);
}

/* The breakpoint of ours at ADDR, the loader's included.  */
struct cp_int3 *cp_heap_trap_find(struct cp_heap *h, uint64_t addr)
{
	if (h->loader.inserted && h->loader.addr == addr)
		return &h->loader;
	return find_bp(h, addr);
}

/* Set the breakpoint on the dynamic linker's r_brk at ADDR: the function
 * it calls, empty, after every change of the link map, for debuggers to
 * break on (glibc's _dl_debug_state is a bare ret, emulated here).  Not
 * having it costs only the news of dlopen and dlclose.  */
static void set_loader_bp(struct cp_heap *h, uint64_t addr)
{
	struct cp_int3 *bp = &h->loader;
	bp->tag = NO_ENTRY;
	if (cp_int3_prepare(h->pid, bp, addr, h->o.force_step) < 0)
		return;
	if (insert_bp(h, bp) < 0)
		cp_heap_trap_restore(h->pid, bp);
}

/* The target's mappings changed (tracing began; a dlopen or dlclose is
 * complete): the unwinder forgets what it cached of them, and the
 * symbolizer records them and opens the modules' files now, while the
 * target lives.  The names are looked up on another thread, and after the
 * detach: a short-lived target is gone by then, its /proc/PID/maps and
 * map_files with it.  */
static void mappings_changed(struct cp_heap *h)
{
	pthread_mutex_lock(&h->lock);
	cp_heap_memo_forget(h);
	cp_unwinder_invalidate(h->unwinder);
	cp_symbols_capture(h->symbols);
	pthread_mutex_unlock(&h->lock);
}

bool cp_heap_trap_emulable(struct cp_heap *h)
{
	struct cp_heap_found found[CP_HEAP_MAX_ENTRIES];
	struct cp_addrspace *space = cp_unwinder_addrspace(h->unwinder);
	uint64_t r_debug = h->r_debug;
	if (h->o.force_step ||
	    cp_heap_alloc_find(space, h->r_debug, found, &r_debug) < 0)
		return false;
	for (size_t f = 0; f < h->nentries; f++) {
		struct cp_int3 bp = { 0 };
		if (found[f].addr &&
		    cp_int3_prepare(h->pid, &bp, found[f].addr, false) == 0 &&
		    !bp.emulate)
			return false;
	}
	return true;
}

/* Find the entry points and set the breakpoints.  */
int cp_heap_trap_arm(struct cp_heap *h)
{
	struct cp_heap_found found[CP_HEAP_MAX_ENTRIES];
	struct cp_addrspace *space = cp_unwinder_addrspace(h->unwinder);
	int rc = cp_heap_alloc_find(space, h->r_debug, found, &h->r_debug);
	if (rc < 0)
		return rc;
	h->nbps = 0;
	h->where[0] = '\0';
	/* The kernel's probes when it has them (heap_uprobe.h); our traps
	 * when it refuses them.  */
	bool probed = h->uprobes && cp_heap_uprobes_arm(h, found) == 0;
	/* A thread's records are taken at its exit stop, while the
	 * process's memory is there to unwind them with (a short program
	 * is gone before the next pass).  Set now: in launch mode the
	 * program runs on from this trap.  */
	if (probed)
		cp_target_set_exit_stops(h->target, true);
	if (h->uprobes && !probed) {
		cp_heap_uprobes_free(h->uprobes);
		h->uprobes = NULL;
		if (h->o.method == CP_HEAP_METHOD_UPROBES)
			return -CP_E_SYS;
	}
	for (size_t f = 0; f < h->nentries; f++) {
		if (!found[f].addr)
			continue;
		snprintf(h->s.module[f], sizeof(h->s.module[f]), "%s",
			 found[f].module);
		h->s.traced[f] = true;
		/* An alias (glibc's memalign is aligned_alloc): one
		 * breakpoint or probe, counted under the first name.  */
		size_t first = 0;
		while (first < f && !(found[first].addr == found[f].addr &&
				      h->s.traced[first]))
			first++;
		if (first < f) {
			snprintf(h->s.module[f], sizeof(h->s.module[f]),
				 "alias of %s", h->entries[first].name);
			continue;
		}
		if (probed) {
			h->nprobed++;
		} else {
			struct cp_int3 *bp = &h->bps[h->nbps];
			bp->tag = (uint32_t)f;
			rc = cp_int3_prepare(h->pid, bp, found[f].addr,
					     h->o.force_step);
			if (rc == -CP_E_INVAL) {
				/* Someone else's breakpoint (a debugger was
				 * here and died): leave this entry point
				 * alone.  */
				h->s.traced[f] = false;
				rc = 0;
				continue;
			}
			if (rc < 0)
				goto out;
			rc = insert_bp(h, bp);
			if (rc < 0)
				goto out;
			h->nbps++;
		}
		if (!strstr(h->where, found[f].module)) {
			size_t len = strlen(h->where);
			snprintf(h->where + len, sizeof(h->where) - len, "%s%s",
				 len ? ", " : "", found[f].module);
		}
	}
	rc = h->nbps || probed ? 0 : -CP_E_NOALLOC;
	for (size_t f = 0; f < h->nentries; f++)
		if (h->entries[f].required && !h->s.traced[f])
			rc = -CP_E_NOALLOC;
	/* Frees of blocks not live from the allocator's own code are its
	 * business (internal_frees): the file mapping free() is in.  */
	int free_row = cp_heap_entry_find("free");
	struct cp_maps *maps = NULL;
	if (rc == 0 && free_row >= 0 && found[free_row].addr &&
	    cp_maps_read(h->pid, &maps) == 0) {
		const struct cp_map *m = cp_maps_find(maps, found[free_row].addr);
		if (m)
			cp_heaptable_set_allocator(h->table, m->start, m->end,
						   free_caller, h);
		cp_maps_free(maps);
	}
	if (rc == 0) {
		cp_heap_set_phase(h, TRACING);
		h->t0_ns = cp_heap_now_ns();
		cp_heaptable_begin(h->table, h->t0_ns);
		/* Attached: the loader's notifications tell us of dlopen and
		 * dlclose from now on.  */
		uint64_t brk = 0;
		if (!h->loader.inserted && h->r_debug &&
		    cp_heap_read_u64(h->pid, h->r_debug + offsetof(struct r_debug, r_brk),
			     &brk) && brk)
			set_loader_bp(h, brk);
		mappings_changed(h);
	}
out:
	if (rc < 0) {
		for (size_t i = 0; i < h->nbps + 1 && i < h->nentries; i++)
			if (h->bps[i].inserted) {
				cp_heap_trap_restore(h->pid, &h->bps[i]);
				h->bps[i].inserted = false;
			}
		h->nbps = 0;
	}
	return rc;
}

/* ------------------------------------------------------ traps */

/* The registers of a memo's key: the pc, the stack and frame pointers.
 * An unwind whose rules need no other register (the unwinder says so:
 * cp_unwinder_unwind_partial) gives frames that depend on these, the
 * stack bytes and the code alone; the callee-saved registers, which
 * change with every iteration of an allocating loop, are left out.  */
static void memo_regs(const struct user_regs_struct *r, uint64_t *out)
{
	out[0] = r->rip;
	out[1] = r->rsp;
	out[2] = r->rbp;
}

/* The memo set (UNWIND_MEMO_WAYS slots) for the copy in SNAP whose
 * registers are REGS.  */
static struct unwind_memo *memo_set(struct heap_lane *l, const uint64_t *regs,
				    const struct cp_snapshot *snap)
{
	uint64_t ret = 0;
	uint64_t sp = regs[1];
	if (sp >= snap->stack_addr && snap->stack_len >= 8 &&
	    sp - snap->stack_addr <= snap->stack_len - 8)
		memcpy(&ret, snap->stack + (sp - snap->stack_addr), 8);
	uint64_t key = (regs[0] * 0x9e3779b97f4a7c15ull) ^ (sp >> 4) ^
		       (ret * 0xc2b2ae3d27d4eb4full);
	key ^= key >> 29;
	size_t sets = UNWIND_MEMO_SLOTS / UNWIND_MEMO_WAYS;
	return &l->memo[key % sets * UNWIND_MEMO_WAYS];
}

/* The part of SNAP an unwind from an allocator's entry reads: from the
 * stack pointer REGS[1] up (the copy begins below it, at the red zone,
 * which holds what earlier calls left there: the innermost frame is at
 * its first instruction and has nothing there, and every outer frame is
 * above it).  False when the stack pointer is not in the copy.  */
static bool memo_bytes(const uint64_t *regs, const struct cp_snapshot *snap,
		       const unsigned char **bytes, size_t *len)
{
	uint64_t sp = regs[1];
	if (sp < snap->stack_addr || sp - snap->stack_addr >= snap->stack_len)
		return false;
	*bytes = snap->stack + (sp - snap->stack_addr);
	*len = snap->stack_len - (size_t)(sp - snap->stack_addr);
	return true;
}

/* True when M was unwound from exactly these registers and stack bytes:
 * the unwind would read the same and give the same frames (the code and
 * unwind tables it reads do not change while the mappings do not).  */
static bool memo_matches(const struct unwind_memo *m, const uint64_t *regs,
			 const unsigned char *bytes, size_t len)
{
	return m->valid && memcmp(m->regs, regs, sizeof(m->regs)) == 0 &&
	       m->stack_len == len && memcmp(m->bytes, bytes, len) == 0;
}

static void memo_keep(struct unwind_memo *m, const uint64_t *regs,
		      const unsigned char *bytes, size_t len, uint32_t stack,
		      uint64_t now)
{
	m->valid = false;
	if (len > UNWIND_MEMO_MAX_BYTES)
		return;
	if (m->cap < len) {
		unsigned char *grown = realloc(m->bytes, len);
		if (!grown)
			return;
		m->bytes = grown;
		m->cap = len;
	}
	memcpy(m->regs, regs, sizeof(m->regs));
	m->stack_len = len;
	memcpy(m->bytes, bytes, len);
	m->stack = stack;
	m->valid = true;
	m->used = now;
}

/* True when every frame of PCS (N of them) is in code mapped from a
 * file and not writable: code that does not change while the mappings
 * do not.  A frame in JIT code (anonymous or writable memory, which the
 * unwinder reads from the target, not from the stack copy) can be
 * replaced at the same address: its unwind is not kept.  */
static bool frames_in_files(struct cp_heap *h, const uint64_t *pcs, size_t n)
{
	struct cp_addrspace *space = cp_unwinder_addrspace(h->unwinder);
	const struct cp_addrspace_view *view = cp_addrspace_view(space);
	bool ok = true;
	for (size_t i = 0; i < n && ok; i++) {
		uint64_t pc = cp_unwind_address(pcs[i]) - (i ? 1 : 0);
		const struct cp_map *m = cp_maps_find(view->maps, pc);
		ok = m && !m->writable &&
		     (m->path[0] == '/' || strcmp(m->path, "[vdso]") == 0);
	}
	cp_addrspace_view_release(view);
	return ok;
}

/* Unwind the copy taken at an outermost entry into a stack id: the
 * allocator's own frame is left out, the caller comes first.  The same
 * registers and stack bytes as an unwind kept give its stack id.  */
void cp_heap_record_stack(struct heap_lane *l, const struct cp_snapshot *snap,
			  uint32_t *stack_out, bool *ended_out)
{
	bool ended = true;
	struct cp_heap *h = l->heap;
	uint64_t regs[UNWIND_MEMO_REGS];
	struct unwind_memo *memo = NULL;
	const unsigned char *bytes = NULL;
	size_t len = 0;
	memo_regs(&snap->regs, regs);
	unsigned gen = __atomic_load_n(&h->memo_gen, __ATOMIC_RELAXED);
	if (l->memo_gen != gen) {
		for (size_t i = 0; i < UNWIND_MEMO_SLOTS; i++)
			l->memo[i].valid = false;
		l->memo_gen = gen;
	}
	if (!h->o.no_unwind_reuse && h->o.unwind == CP_UNWIND_SNAPSHOT &&
	    memo_bytes(regs, snap, &bytes, &len)) {
		/* A copy by the kernel is of a fixed size: what lies beyond
		 * the stack's end in it (a thread's TLS) is no part of the
		 * unwind's input.  */
		uint64_t hi = snap->copied_running
				      ? cp_target_stack_end(l->target, snap->tid)
				      : 0;
		if (hi > regs[1] && hi - regs[1] < len)
			len = (size_t)(hi - regs[1]);
		struct unwind_memo *set = memo_set(l, regs, snap);
		l->memo_clock++;
		for (size_t w = 0; w < UNWIND_MEMO_WAYS; w++) {
			if (memo_matches(&set[w], regs, bytes, len)) {
				set[w].used = l->memo_clock;
				*stack_out = set[w].stack;
				if (ended_out)
					*ended_out = set[w].ended;
				l->s.unwinds_reused++;
				return;
			}
			/* The slot to fill after this unwind: an empty one,
			 * else the least recently used.  */
			if (!memo || (memo->valid &&
				      (!set[w].valid ||
				       set[w].used < memo->used)))
				memo = &set[w];
		}
	}
	size_t n = 0;
	/* The unwinder, the symbolizer and the profile are shared by the
	 * tracer threads.  */
	pthread_mutex_lock(&h->lock);
	if (memo) {
		/* Unwound knowing only the registers of the key: when no
		 * frame's rule needs another one, the frames are a full
		 * unwind's and depend on nothing else; else it is unwound
		 * again in full, and not kept.  */
		struct cp_unwind_partial partial = {
			.known = CP_UNWIND_REG(CP_REG_RIP) |
				 CP_UNWIND_REG(CP_REG_RSP) |
				 CP_UNWIND_REG(CP_REG_RBP),
		};
		cp_target_learn_stack(l->target, snap->tid, regs[1]);
		n = cp_unwinder_unwind_partial(h->unwinder, snap, &partial,
					       l->pcs, h->o.max_depth + 1);
		if (partial.needed || partial.rbp_scanned ||
		    !frames_in_files(h, l->pcs, n))
			memo = NULL;
		else
			ended = partial.ended;
	}
	if (!memo && snap->copied_running)
		n = cp_unwinder_unwind_ended(h->unwinder, snap, l->pcs,
					     h->o.max_depth + 1, &ended);
	else if (!memo)
		n = cp_capture_unwind(l->capture, &l->slot, l->pcs,
				      h->o.max_depth + 1);
	size_t first = n > 1 ? 1 : 0;
	size_t depth = 0;
	uint32_t stack = UINT32_MAX;
	for (size_t i = first; i < n; i++) {
		uint32_t loc = cp_resolver_location(h->resolver, l->pcs[i]);
		if (loc == UINT32_MAX)
			goto out;
		l->locs[depth++] = loc;
	}
	stack = cp_profile_intern_stack(h->profile, l->locs, depth);
out:
	pthread_mutex_unlock(&h->lock);
	if (stack == UINT32_MAX) {
		cp_heap_fail(h, -CP_E_NOMEM);
		return;
	}
	*stack_out = stack;
	if (ended_out)
		*ended_out = ended;
	if (memo) {
		memo_keep(memo, regs, bytes, len, stack, l->memo_clock);
		memo->ended = ended;
	}
}

static enum cp_target_trap entry_trap(struct heap_lane *l, pid_t tid,
				      struct user_regs_struct *regs,
				      bool hold)
{
	struct cp_heap *h = l->heap;
	/* Launch mode: the program reached its entry point; every library
	 * it links is mapped, and main has not run.  */
	uint64_t pc = cp_regs_pc(regs) - 1;
	if (cp_heap_trap_restore(h->pid, &h->entry) < 0) {
		cp_heap_fail(h, -CP_E_SYS);
		return CP_TRAP_HANDLED;
	}
	h->entry.inserted = false;
	cp_abi_set_pc(regs, pc);
	cp_target_set_regs(l->target, tid, regs);
	int rc = cp_heap_trap_arm(h);
	if (rc < 0)
		cp_heap_fail(h, rc);
	cp_resolver_reset(h->resolver);
	cp_unwinder_invalidate(h->unwinder);
	if (!hold)
		cp_target_resume(l->target, tid);
	return CP_TRAP_HANDLED;
}

/* Let thread TID, stopped at BP's int3 with REGS, go on past the
 * displaced instruction: emulated, or queued for a step with every
 * thread held (run_steps).  */
static void pass_bp(struct heap_lane *l, pid_t tid, struct cp_int3 *bp,
		    uint64_t pc, struct user_regs_struct *regs)
{
	struct cp_heap *h = l->heap;
	if (!bp->emulate) {
		cp_abi_set_pc(regs, pc);
		cp_target_set_regs(l->target, tid, regs);
		if (cp_int3_queue(&h->steps, tid) < 0)
			cp_heap_fail(h, -CP_E_NOMEM);
		return;
	}
	if (emulate(h, bp, pc, regs) < 0) {
		cp_abi_set_pc(regs, pc);
		if (cp_target_set_regs(l->target, tid, regs) == 0)
			cp_heap_fail(h, -CP_E_SYS);
		return;
	}
	if (cp_target_set_regs(l->target, tid, regs) == 0)
		cp_target_resume(l->target, tid);
}

/* The dynamic linker's notification: the link map changed.  Launch mode,
 * before tracing: once it is consistent with the program's libraries
 * mapped (and none of their constructors run yet), the allocator is
 * there to be found.  */
static enum cp_target_trap loader_trap(struct heap_lane *l, pid_t tid,
				       struct user_regs_struct *regs,
				       bool hold)
{
	struct cp_heap *h = l->heap;
	uint64_t pc = cp_regs_pc(regs) - 1;
	if (hold) {
		cp_abi_set_pc(regs, pc);
		cp_target_set_regs(l->target, tid, regs);
		return CP_TRAP_HANDLED;
	}
	int32_t state = -1;
	if (h->r_debug &&
	    cp_target_read(h->pid, h->r_debug + offsetof(struct r_debug, r_state),
			   &state, sizeof(state)) != (ssize_t)sizeof(state))
		state = -1;
	if (state == RT_CONSISTENT && cp_heap_phase(h) == WAIT_ENTRY) {
		int rc = cp_heap_trap_arm(h);
		if (rc == 0 && h->entry.inserted) {
			if (cp_heap_trap_restore(h->pid, &h->entry) < 0)
				cp_heap_fail(h, -CP_E_SYS);
			h->entry.inserted = false;
		} else if (rc < 0 && rc != -CP_E_NOALLOC) {
			cp_heap_fail(h, rc); /* else: the entry point may do */
		}
	} else if (state == RT_CONSISTENT && cp_heap_phase(h) == TRACING) {
		mappings_changed(h);
	}
	pass_bp(l, tid, &h->loader, pc, regs);
	return CP_TRAP_HANDLED;
}

enum cp_target_trap cp_heap_trap_on_trap(void *arg, pid_t tid, bool hold)
{
	struct heap_lane *l = arg;
	struct cp_heap *h = l->heap;
	struct cp_target *target = l->target;
	struct user_regs_struct regs;
	if (cp_target_get_regs(target, tid, &regs) < 0)
		return CP_TRAP_NOT_OURS;
	uint64_t pc = cp_regs_pc(&regs) - 1;
	if (h->entry.inserted && pc == h->entry.addr)
		return entry_trap(l, tid, &regs, hold);
	if (h->loader.inserted && pc == h->loader.addr)
		return loader_trap(l, tid, &regs, hold);
	struct cp_int3 *bp = find_bp(h, pc);
	if (!bp)
		return CP_TRAP_NOT_OURS;
	struct tstate *ts = tstate(l, tid, true);
	if (!ts) {
		cp_heap_fail(h, -CP_E_NOMEM);
		return CP_TRAP_NOT_OURS;
	}
	uint64_t sp = cp_regs_sp(&regs);
	if (ts->in_call && ts->fake == pc && sp == ts->slot + CP_ABI_RET_SLOT) {
		/* The return of the outermost call, into our int3.  */
		cp_abi_set_pc(&regs, ts->ret);
		ts->in_call = false;
		if (cp_target_set_regs(target, tid, &regs) < 0)
			return CP_TRAP_HANDLED;
		if (!hold)
			cp_target_resume(target, tid);
		on_return(h, ts, cp_abi_retval(&regs));
		return CP_TRAP_HANDLED;
	}
	if (hold) {
		/* Everything is being stopped: undo the trap; the call
		 * starts again after the original byte is back.  */
		cp_abi_set_pc(&regs, pc);
		cp_target_set_regs(target, tid, &regs);
		return CP_TRAP_HANDLED;
	}
	struct cp_thread *th = cp_target_thread(target, tid);
	bool vfork_child = th && th->vfork_child;
	if (ts->in_call && sp > ts->slot) {
		/* Above the outstanding call's frame: that call is gone
		 * without returning through us (longjmp, a lost thread).
		 * At the same stack pointer it is a tail call of the
		 * outstanding call (glibc's realloc(NULL, n) jumps to
		 * malloc): part of it, and it returns through our slot.  */
		ts->in_call = false;
		l->s.lost_returns++;
	}
	bool outer = !ts->in_call && !vfork_child;
	const struct user_regs_struct at_args = regs;
	/* The return address to hijack (0: none): read from the stack copy
	 * the unwinder gets.  */
	uint64_t ret = 0;
	if (outer) {
		const struct cp_heap_entry *e = &h->entries[bp->tag];
		l->s.calls[bp->tag]++;
		if (e->kind == CP_HEAP_KIND_REALLOC)
			l->s.reallocs++;
		/* A free's event, or a realloc's release of its block:
		 * now.  */
		struct cp_heap_event ev;
		if (cp_heap_entry_event(h, bp->tag, &regs, tid,
					cp_heap_now_ns(), &ev))
			emit(h, &ev, ev.kind == CP_HEAP_EV_FREE ? sp : 0);
		if (e->result != CP_HEAP_RESULT_NONE) {
			/* Copy the stack for the unwinder.  */
			struct user_regs_struct at_entry = regs;
			cp_abi_set_pc(&at_entry, pc);
			const struct cp_snapshot *snap = &l->slot.snap;
			if (cp_capture_take_regs(l->capture, tid, &at_entry,
						 &l->slot) == 0 &&
			    sp >= snap->stack_addr && snap->stack_len >= 8 &&
			    sp - snap->stack_addr <= snap->stack_len - 8)
				memcpy(&ret,
				       snap->stack + (sp - snap->stack_addr),
				       8);
			else
				cp_heap_read_u64(h->pid, sp, &ret);
			if (!ret)
				l->s.lost_returns++;
		}
	}
	/* Send the return to our int3: the entry address written over
	 * the return address.  */
	uint64_t fake = pc;
	bool want_stack = false;
	if (!bp->emulate) {
		if (ret && cp_target_write(h->pid, sp, &fake, 8) == 0)
			want_stack = true;
		else if (ret)
			l->s.lost_returns++;
		/* Step the original instruction with every thread held,
		 * from the main loop (not from inside this callback).  */
		cp_abi_set_pc(&regs, pc);
		cp_target_set_regs(target, tid, &regs);
		if (cp_int3_queue(&h->steps, tid) < 0)
			cp_heap_fail(h, -CP_E_NOMEM);
	} else {
		/* The displaced instruction's writes (malloc's first
		 * instruction is a push, into the slot below the return
		 * address) and the hijack go out in one system call.  */
		struct user_regs_struct at_trap = regs;
		struct cp_int3_writes writes;
		int emulated = cp_int3_emulate_gather(h->pid, bp, pc, &regs,
						      &writes);
		if (emulated < 0) {
			/* Writes that do not gather (more than the buffer, or
			 * apart) are made directly, as before.  REGS are
			 * unchanged by the failed try.  */
			writes.len = 0;
			emulated = emulate(h, bp, pc, &regs);
		}
		if (emulated < 0) {
			/* Cannot continue it correctly: rewind so it runs the
			 * real instruction once we restore the byte.  */
			cp_abi_set_pc(&regs, pc);
			if (cp_target_set_regs(target, tid, &regs) == 0)
				cp_heap_fail(h, -CP_E_SYS);
			return CP_TRAP_HANDLED;
		}
		bool merged = ret && cp_int3_writes_add(&writes, sp, &fake, 8);
		if (cp_int3_writes_flush(h->pid, &writes) < 0) {
			/* The instruction did not happen: rewind it.  */
			cp_abi_set_pc(&at_trap, pc);
			if (cp_target_set_regs(target, tid, &at_trap) == 0)
				cp_heap_fail(h, -CP_E_SYS);
			return CP_TRAP_HANDLED;
		}
		if (merged ||
		    (ret && cp_target_write(h->pid, sp, &fake, 8) == 0))
			want_stack = true;
		else if (ret)
			l->s.lost_returns++;
	}
	if (want_stack) {
		ts->in_call = true;
		ts->entry = bp->tag;
		ts->slot = sp;
		ts->ret = ret;
		ts->fake = fake;
		for (unsigned a = 0; a < CP_ABI_REG_ARGS; a++)
			ts->args[a] = cp_abi_arg(&at_args, a);
	}
	if (bp->emulate) {
		/* A thread killed meanwhile (another thread's execve or
		 * exit_group) takes no registers: it is gone, nothing to
		 * continue, nothing failed.  */
		if (cp_target_set_regs(target, tid, &regs) < 0)
			return CP_TRAP_HANDLED;
		cp_target_resume(target, tid);
	}
	if (want_stack) {
		/* After the resume: the copy's frames (the capture path also
		 * learns, once per thread, where its stack ends, so the next
		 * copies take exactly the used part).  */
		cp_heap_record_stack(l, &l->slot.snap, &ts->stack, NULL);
	}
	return CP_TRAP_HANDLED;
}

/* Run the queued fallback steps: every thread held, the original byte
 * back for one instruction, the int3 again.  */
void cp_heap_trap_run_steps(struct cp_heap *h)
{
	if (!h->steps.n)
		return;
	cp_target_hold_all(h->target);
	/* An execve while the threads were stopped replaced the image our
	 * breakpoints were in (phase DONE): the same addresses are other code
	 * now, and must not get our bytes.  Before tracing, in launch mode,
	 * the loader's breakpoint is stepped too.  */
	for (size_t i = 0; i < h->steps.n &&
			   (cp_heap_phase(h) == TRACING ||
			    cp_heap_phase(h) == WAIT_ENTRY);
	     i++) {
		pid_t tid = h->steps.tids[i];
		struct user_regs_struct regs;
		if (cp_target_get_regs(h->target, tid, &regs) < 0)
			continue;
		struct cp_int3 *bp = cp_heap_trap_find(h, cp_regs_pc(&regs));
		if (!bp)
			continue;
		/* (An execve meanwhile: no byte put back, and the exec hook
		 * ended the steps with the phase.)  */
		if (cp_int3_step(h->target, tid, bp) == -CP_E_SYS)
			cp_heap_fail(h, -CP_E_SYS);
		h->s.stepped++;
	}
	h->steps.n = 0;
	cp_target_release_all(h->target);
}

void cp_heap_trap_on_fork(void *arg, pid_t parent, pid_t child, bool vfork)
{
	struct heap_lane *l = arg;
	struct cp_heap *h = l->heap;
	if (vfork) {
		l->s.vfork_children++;
		return;
	}
	l->s.fork_children++;
	/* The child's memory is a copy of the parent's, int3s included.  */
	for (size_t i = 0; i < h->nbps; i++)
		if (h->bps[i].inserted && cp_heap_trap_restore(child, &h->bps[i]) < 0)
			cp_heap_fail(h, -CP_E_SYS);
	if (h->entry.inserted && cp_heap_trap_restore(child, &h->entry) < 0)
		cp_heap_fail(h, -CP_E_SYS);
	if (h->loader.inserted && cp_heap_trap_restore(child, &h->loader) < 0)
		cp_heap_fail(h, -CP_E_SYS);
	/* Only the forking thread lives on in the child.  */
	struct tstate *ts = tstate(l, parent, false);
	uint64_t slot = 0;
	if (ts && ts->in_call && cp_heap_read_u64(child, ts->slot, &slot) &&
	    slot == ts->fake)
		cp_target_write(child, ts->slot, &ts->ret, 8);
}

void cp_heap_trap_on_exec(void *arg)
{
	struct heap_lane *l = arg;
	struct cp_heap *h = l->heap;
	if (cp_heap_phase(h) == WAIT_EXEC) {
		/* Launch mode: the command's image is loaded; its
		 * libraries are not yet.  Stop it at its entry point.  */
		h->entry.addr = cp_procfs_auxv(h->pid, AT_ENTRY);
		if (!h->entry.addr ||
		    cp_target_read_mem(h->pid, h->entry.addr, h->entry.orig,
				       sizeof(h->entry.orig)) < 0 ||
		    insert_bp(h, &h->entry) < 0) {
			cp_heap_fail(h, -CP_E_SYS);
			cp_heap_set_phase(h, DONE);
			return;
		}
		/* Dynamically linked: the loader's notifications come
		 * sooner, once the libraries are mapped and before their
		 * constructors run (which may allocate: libstdc++'s
		 * emergency pool).  The entry point stays the fallback.  */
		uint64_t base = cp_procfs_auxv(h->pid, AT_BASE), brk = 0;
		struct cp_addrspace *space = cp_unwinder_addrspace(h->unwinder);
		if (base && cp_heap_alloc_loader(space, base, &brk,
						 &h->r_debug) == 0)
			set_loader_bp(h, brk);
		cp_heap_set_phase(h, WAIT_ENTRY);
		return;
	}
	/* The kernel's probes would follow the thread into the new image
	 * (they are the thread's): the records of the old one are taken,
	 * and the probes disabled before it runs (closed at the end).  */
	cp_heap_uprobes_end(h);
	/* The old image, our bytes with it, is gone; so are the steps
	 * queued for it.  */
	for (size_t i = 0; i < h->nbps; i++)
		h->bps[i].inserted = false;
	h->steps.n = 0;
	h->entry.inserted = false;
	h->loader.inserted = false;
	l->nthreads = 0;
	cp_heap_memo_forget(h);
	h->s.target_exec = true;
	cp_heap_set_phase(h, DONE);
}

