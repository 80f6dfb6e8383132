/* Heap mode's state, shared by the public side (heap.c: start, run,
 * finish, results) and the trap side (heap_trap.c: breakpoints,
 * displaced-instruction emulation, return hijacking, fork and exec, the
 * allocation events).  Internal to libcprof.  */
#ifndef CPROF_HEAP_TRAP_H
#define CPROF_HEAP_TRAP_H

#include <stdbool.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "arch/x86_64/abi.h"
#include "capture/int3.h"
#include "cprof/capture.h"
#include "cprof/heap.h"
#include "cprof/heaptable.h"
#include "cprof/insn.h"
#include "cprof/session.h"
#include "cprof/target.h"

/* The int3s of heap tracing are struct cp_int3 (capture/int3.h), their
 * TAG the row of cp_heap_entries they trace, or NO_ENTRY: the loader's
 * or the entry point's.  */
#define NO_ENTRY UINT32_MAX

/* What we know of one thread.  */
struct tstate {
	pid_t tid;
	bool in_call;         /* an outermost call whose return we await */
	uint32_t entry;       /* its row */
	uint64_t slot;        /* stack address of its return address */
	uint64_t ret;         /* the real return address */
	uint64_t fake;        /* what we wrote there: the entry address */
	uint64_t args[CP_ABI_REG_ARGS];
	uint32_t stack;       /* the call's stack id */
};

enum phase { WAIT_EXEC, WAIT_ENTRY, TRACING, DONE };

/* An unwind kept for reuse: the registers an unwind can start from and
 * the stack bytes it could read, and the stack id it gave.  An allocation in a
 * loop traps with the same registers and the same stack bytes every
 * time: the same frames, without unwinding again.  */
#define UNWIND_MEMO_SLOTS 32
#define UNWIND_MEMO_WAYS 4   /* slots per set: twin callers of one
			      * allocating function trap with the same
			      * pc, stack pointer and return address */
#define UNWIND_MEMO_REGS 3 /* see memo_regs */
#define UNWIND_MEMO_MAX_BYTES (16 * 1024) /* larger copies are not kept:
					    * at most 512 KB in all */

struct unwind_memo {
	bool valid;
	uint64_t regs[UNWIND_MEMO_REGS]; /* see memo_regs */
	size_t stack_len;         /* bytes of the copy from the stack
				   * pointer up */
	unsigned char *bytes;     /* those bytes */
	size_t cap;
	uint32_t stack;           /* the stack id it was unwound into */
	bool ended;               /* that unwind reached the outermost frame */
	uint64_t used;            /* the memo's clock at its last use */
};

/* One tracer thread's share of heap tracing: the threads it traces (a
 * target of its own, cp_target_lane, or the caller's target for lane 0)
 * and everything a trap needs that no other tracer thread touches.  */
struct heap_lane {
	struct cp_heap *heap;
	struct cp_target *target;
	struct cp_capture *capture; /* the capture path (cprof/capture.h) */
	struct cp_capture_slot slot; /* what the last entry took */
	uint64_t *pcs;
	uint32_t *locs;
	struct tstate *threads;
	size_t nthreads, threads_cap;
	/* Unwinds kept for reuse, by a hash of pc, stack pointer and return
	 * address; forgotten when the mappings change (MEMO_GEN behind the
	 * heap's).  */
	struct unwind_memo memo[UNWIND_MEMO_SLOTS];
	uint64_t memo_clock;
	unsigned memo_gen;
	struct cp_heap_summary s; /* this lane's counts: calls, reallocs,
				   * lost returns, unwinds reused, forks */
	/* The other tracer threads' (heap_lanes.c).  */
	pthread_t thread;
	pid_t tid;               /* the tracer thread's, for tgkill */
	bool started;
	int state;               /* enum lane_state, under lanes_lock */
	size_t owned;            /* threads it traces, under lanes_lock */
	struct cp_park *inbox;   /* threads handed to it, under lanes_lock */
	size_t ninbox, inbox_cap;
};

/* The most tracer threads.  */
#define HEAP_MAX_LANES 9

struct cp_heap {
	struct cp_target *target;
	struct cp_session *session; /* whose hook list ours are in, or NULL:
				     * the target's hooks are ours */
	pid_t pid;
	struct cp_unwinder *unwinder;
	struct cp_profile *profile;
	struct cp_resolver *resolver;
	struct cp_heap_options o;
	enum phase phase;
	const struct cp_heap_entry *entries; /* the descriptor table */
	size_t nentries;
	struct cp_int3 bps[CP_HEAP_MAX_ENTRIES];
	size_t nbps;
	size_t nprobed;           /* entry points the kernel probes */
	struct cp_int3 entry;  /* launch mode: at the program's entry */
	struct cp_int3 loader; /* at the dynamic linker's r_brk */
	uint64_t r_debug;         /* its struct r_debug, 0 when unknown */
	struct cp_symbols *symbols;
	char where[256];          /* modules the breakpoints are in */
	uint64_t free_sp;         /* stack pointer at the free being handled
				   * (under LOCK) */
	struct cp_heaptable *table; /* what the events add up to */
	/* The kernel's uprobes instead of our traps (heap_uprobe.h), NULL:
	 * traps; armed or not (a fallback to traps) by cp_heap_trap_arm.  */
	struct cp_heap_uprobes *uprobes;
	uint64_t t0_ns;           /* tracing began (0: not yet) */
	struct cp_int3_steps steps; /* threads held for a fallback step
				     * (lane 0 only: no other lanes then) */
	unsigned memo_gen;        /* bumped when the mappings change */
	int error;                /* first internal failure */
	/* The tracer threads: lane 0 is the caller's, on the caller's
	 * target; LANES[1..NLANES-1] are threads of ours (heap_lanes.c).
	 * LOCK serializes what they share: the table, the profile, the
	 * resolver, the unwinder.  */
	struct heap_lane lane0;
	struct heap_lane *lanes[HEAP_MAX_LANES];
	size_t nlanes;
	pthread_mutex_t lock;
	pthread_mutex_t lanes_lock;
	pthread_cond_t lanes_cond;
	bool lanes_stop;          /* under lanes_lock: finish has begun */
	bool bytes_out;           /* under lanes_lock: our bytes are gone */
	bool lanes_done;          /* the lanes ended (cp_heap_finish, or
				   * cp_heap_lanes_collapse) */
	uint64_t collapse_at;     /* under lanes_lock: not 0, the lanes end
				   * with our bytes in, their threads parked
				   * on the syscall instruction there */
	unsigned tracers;         /* the most tracer threads there were */
	bool armed;               /* under lanes_lock: the breakpoints are
				   * set (or failed to be); until then the
				   * lanes take no trap, which they would
				   * not know for ours */
	struct cp_park *orphans;  /* parked, handed to a lane that never
				   * took them (under lanes_lock) */
	size_t norphans, orphans_cap;
	struct sigaction old_alarm; /* SIGALRM's action before the lanes */
	struct cp_heap_summary s; /* the tracer's fields (traced, module,
				   * steps, how it ended) */
	struct cp_heap_summary merged; /* those, the lanes' and the
					* table's, for cp_heap_summary */
};

static inline bool cp_heap_read_u64(pid_t pid, uint64_t addr, uint64_t *v)
{
	return cp_target_read(pid, addr, v, sizeof(*v)) == (ssize_t)sizeof(*v);
}

static inline uint64_t cp_heap_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Whether a run of heap tracing is over: a stop asked for (the
 * options' or STOP: *STOPPED set), DEADLINE passed (0: none), the
 * target gone.  */
static inline bool cp_heap_run_over(const struct cp_heap *h,
				    volatile sig_atomic_t *stop,
				    uint64_t deadline, bool *stopped)
{
	if ((h->o.stop && *h->o.stop) || (stop && *stop)) {
		*stopped = true;
		return true;
	}
	return (deadline && cp_heap_now_ns() >= deadline) ||
	       cp_target_exited(h->target);
}

/* Argument N of a call whose argument registers were ARGS
 * (CP_ABI_REG_ARGS of them); 0 for CP_HEAP_NO_ARG.  */
static inline uint64_t cp_heap_call_arg(const uint64_t *args, int n)
{
	return n >= 0 && n < CP_ABI_REG_ARGS ? args[n] : 0;
}

/* The event the outermost call of row ROW makes at its entry, its
 * registers there REGS, in thread TID at T_NS, into *EV: a free's
 * (CP_HEAP_EV_FREE), or a realloc's of a block (CP_HEAP_EV_REALLOC_BEGIN:
 * the block is released inside the call, and another thread may be given
 * it before the call returns).  False when it makes none (its event
 * comes at its return).  */
bool cp_heap_entry_event(const struct cp_heap *h, uint32_t row,
			 const struct user_regs_struct *regs, pid_t tid,
			 uint64_t t_ns, struct cp_heap_event *ev);

/* The event of the outermost call of row ROW that returned, its
 * argument registers at entry ARGS, its stack id STACK, in thread TID at
 * T_NS: all but ADDR, the block made (returned, or stored where the
 * call's out argument points: the caller reads it).  */
struct cp_heap_event cp_heap_return_event(const struct cp_heap *h,
					  uint32_t row, const uint64_t *args,
					  uint32_t stack, pid_t tid,
					  uint64_t t_ns);

/* Forget every unwind kept for reuse, in every lane (the mappings
 * changed: the same stack bytes may unwind or symbolize differently).  */
static inline void cp_heap_memo_forget(struct cp_heap *h)
{
	__atomic_add_fetch(&h->memo_gen, 1, __ATOMIC_RELAXED);
}

/* The first internal failure is kept.  */
static inline void cp_heap_fail(struct cp_heap *h, int rc)
{
	int none = 0;
	__atomic_compare_exchange_n(&h->error, &none, rc, false,
				    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

static inline enum phase cp_heap_phase(const struct cp_heap *h)
{
	return __atomic_load_n(&h->phase, __ATOMIC_ACQUIRE);
}

static inline void cp_heap_set_phase(struct cp_heap *h, enum phase phase)
{
	__atomic_store_n(&h->phase, phase, __ATOMIC_RELEASE);
}

/* Unwind SNAP, a copy taken at an allocator's entry (by a trap of
 * ours, or by the kernel: SNAP->copied_running), into *STACK, a stack
 * id of the heap's profile: the allocator's own frame left out, an
 * earlier unwind of the same registers and stack bytes reused.  *ENDED
 * (may be NULL) says whether the unwind reached the outermost frame
 * (always true for an unwind through ptrace).  */
void cp_heap_record_stack(struct heap_lane *l, const struct cp_snapshot *snap,
			  uint32_t *stack, bool *ended);

/* The return address of the free being handed to the table by the
 * uprobe method (its record's copy), 0 for the traps.  */
uint64_t cp_heap_uprobes_free_caller(const struct cp_heap *h);

/* cp_heap_start for a session: our hooks go into SESSION's list
 * (capture/session_hooks.h) instead of being the target's.  */
int cp_heap_start_in(struct cp_session *session, struct cp_target *target,
		     struct cp_unwinder *unwinder, struct cp_symbols *symbols,
		     struct cp_profile *profile,
		     const struct cp_heap_options *options,
		     struct cp_heap **out);

/* Find the entry points and set the breakpoints; tracing begins.
 * Returns 0, -CP_E_NOALLOC or another -CP_E_* code.  */
int cp_heap_trap_arm(struct cp_heap *heap);

/* True when every breakpoint tracing would set has its instruction
 * emulated (none stepped with every thread held): the condition for
 * several tracer threads.  Sets nothing.  */
bool cp_heap_trap_emulable(struct cp_heap *heap);

/* The target hooks (struct cp_target_hooks) of heap tracing; ARG is the
 * struct heap_lane of the tracer thread whose target it is.  */
enum cp_target_trap cp_heap_trap_on_trap(void *arg, pid_t tid, bool hold);
void cp_heap_trap_on_fork(void *arg, pid_t parent, pid_t child, bool vfork);
void cp_heap_trap_on_exec(void *arg);
bool cp_heap_lanes_on_birth(void *arg, pid_t tid);

/* Set LANE up for HEAP on TARGET (its capture path, its buffers).
 * Returns 0 or -CP_E_NOMEM.  */
int cp_heap_lane_init(struct cp_heap *heap, struct heap_lane *lane,
		      struct cp_target *target);
void cp_heap_lane_free(struct heap_lane *lane);

/* The other tracer threads (heap_lanes.c).  Started once tracing is on
 * with the breakpoints not yet in (the threads present are shared out,
 * ATTACHED) or before any other thread exists (launch mode): returns
 * the number of lanes in all, 1 when there are no others.  */
size_t cp_heap_lanes_start(struct cp_heap *heap, bool attached);

/* Finish's share: every lane holds its threads (STOP_HELD), then, once
 * the caller put our bytes back (cp_heap_lanes_release), each puts back
 * its threads' return addresses and lets them go, and the caller's
 * target takes them (cp_target_adopt).  */
void cp_heap_lanes_hold(struct cp_heap *heap);

/* The breakpoints are in (or will not be): the lanes may take traps.  */
void cp_heap_lanes_armed(struct cp_heap *heap);
void cp_heap_lanes_release(struct cp_heap *heap);

/* Every thread of the other lanes back to lane 0 while tracing goes on:
 * each lane holds its threads, parks them (cp_target_park, on a syscall
 * instruction of the target's) and lets them go, and the caller's target
 * seizes them and gives back their registers and masks.  For a session
 * client that must see every trap (a breakpoint set while heap tracing
 * runs).  Returns 0 or -CP_E_SYS (no syscall instruction found: the
 * lanes go on).  */
int cp_heap_lanes_collapse(void *heap);

/* The lanes' counts added to SUM.  */
void cp_heap_lanes_sum(const struct cp_heap *heap,
		       struct cp_heap_summary *sum);

/* Every thread stops and is held with the SIGTRAP of an int3 still
 * queued let take it (the hook rewinds it) before the bytes go away.  */
void cp_heap_lane_rewind(struct heap_lane *lane);

/* Put back the return addresses of LANE's threads still pointing at our
 * int3s.  Returns 0 or -CP_E_SYS.  */
int cp_heap_lane_returns(struct heap_lane *lane);

/* Run the queued fallback steps: every thread held, the original byte
 * back for one instruction, the int3 again.  */
void cp_heap_trap_run_steps(struct cp_heap *heap);

/* The breakpoint of ours at ADDR (the loader's included), or NULL.  */
struct cp_int3 *cp_heap_trap_find(struct cp_heap *heap, uint64_t addr);

/* Put back the original byte of BP in process PID and check it.
 * Returns 0 or -CP_E_SYS.  */
static inline int cp_heap_trap_restore(pid_t pid, const struct cp_int3 *bp)
{
	return cp_int3_restore(pid, bp);
}

#endif
