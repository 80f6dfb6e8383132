/* The capture path, one for every consumer: a thread held stopped ->
 * what unwinding needs, taken as fast as possible -> the thread resumed
 * -> its frames, unwound from the copy.  Sampling ticks, stack dumps and
 * heap traps all go through it.
 *
 * How a stack is unwound is a method behind one ops table, chosen once
 * (perf's unwind backends): "snapshot" copies the registers and the used
 * stack while the thread is held and unwinds the copy after it runs
 * again; "ptrace" unwinds through libunwind-ptrace while the thread is
 * held (every memory read a ptrace call: kept to measure the snapshot
 * method against).  */
#ifndef CPROF_CAPTURE_H
#define CPROF_CAPTURE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cprof/target.h"
#include "cprof/unwinder.h"

/* How a stopped thread is unwound.  */
enum cp_unwind_mode {
	CP_UNWIND_SNAPSHOT, /* copy regs + stack, resume, unwind the copy */
	CP_UNWIND_PTRACE,   /* unwind through libunwind-ptrace while stopped */
};

/* What was taken from one held thread.  Reused from one capture to the
 * next (its buffers grow once).  */
struct cp_capture_slot {
	struct cp_snapshot snap;  /* registers (always) and, for the
				   * snapshot method, the stack copy */
	uint64_t *pcs;            /* the ptrace method: the frames, taken
				   * while held */
	size_t npcs, pcs_cap;
};

struct cp_capture;

/* One unwinding method.  */
struct cp_unwind_ops {
	const char *name;
	/* Thread TID is held stopped: take into SLOT what unwind needs.
	 * Returns 0 or -CP_E_GONE/-CP_E_NOMEM.  */
	int (*take)(struct cp_capture *capture, pid_t tid,
		    struct cp_capture_slot *slot);
	/* The thread runs again: SLOT's frames into PCS (at most MAX),
	 * innermost first, as cp_unwinder_unwind gives them.  */
	size_t (*unwind)(struct cp_capture *capture,
			 const struct cp_capture_slot *slot, uint64_t *pcs,
			 size_t max);
};

/* The method MODE stands for; static.  */
const struct cp_unwind_ops *cp_unwind_ops_of(enum cp_unwind_mode mode);

/* The method named NAME ("snapshot", "ptrace") into *MODE.  Returns 0 or
 * -CP_E_INVAL.  */
int cp_unwind_mode_parse(const char *name, enum cp_unwind_mode *mode);

/* A capture engine for TARGET with UNWINDER (both borrowed until
 * cp_capture_free), unwinding with MODE, at most MAX_DEPTH frames.
 * Returns 0 or -CP_E_NOMEM.  */
int cp_capture_new(struct cp_target *target, struct cp_unwinder *unwinder,
		   enum cp_unwind_mode mode, size_t max_depth,
		   struct cp_capture **out);

void cp_capture_free(struct cp_capture *capture);

/* Take what thread TID (held in a stop of ours) needs to be unwound
 * later into SLOT.  Returns 0 or a -CP_E_* code.  */
int cp_capture_take(struct cp_capture *capture, pid_t tid,
		    struct cp_capture_slot *slot);

/* cp_capture_take for a thread held at a trap whose registers the caller
 * has read and changed: REGS are what to unwind from (heap mode: the pc
 * rewound to its breakpoint, not yet written back).  The snapshot method
 * copies only the stack (no second read of the registers); the ptrace
 * method writes REGS to the thread first.  Returns 0 or a -CP_E_* code.  */
int cp_capture_take_regs(struct cp_capture *capture, pid_t tid,
			 const struct user_regs_struct *regs,
			 struct cp_capture_slot *slot);

/* The frames of SLOT into PCS (at most MAX, 0: the engine's depth),
 * innermost first; the number.  Also tells the target where the
 * thread's stack is (for the next copy's length).  */
size_t cp_capture_unwind(struct cp_capture *capture,
			 const struct cp_capture_slot *slot, uint64_t *pcs,
			 size_t max);

/* The method's name ("snapshot", "ptrace").  */
const char *cp_capture_method(const struct cp_capture *capture);

/* Free SLOT's buffers (not SLOT).  */
void cp_capture_slot_free(struct cp_capture_slot *slot);

#endif
