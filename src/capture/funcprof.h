/* Profiling a function (cprof/session.h, cp_session_sample_start_in):
 * which threads are inside FUNC right now, and for how much CPU time
 * they have been, so the sampler samples a thread only while it is
 * inside and weighs its samples by that time alone.
 *
 * An int3 at the function's first instruction marks a thread in: for
 * its outermost call the return address on the stack is replaced by the
 * entry address itself (as heap tracing catches returns), so the return
 * traps on the same int3, recognised by the stack pointer, and marks it
 * out.  Nested and recursive calls find the thread in already and are
 * not followed: each sample counts once however many times the function
 * is on its stack.  The thread's CPU time (schedstat) is read at both
 * traps, while it is held.  A client of the session's hook list
 * (capture/session_hooks.h).  Internal to libcprof.  */
#ifndef CPROF_FUNCPROF_H
#define CPROF_FUNCPROF_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cprof/session.h"
#include "cprof/target.h"

struct cp_funcprof;

/* Follow calls of the function whose first instruction is at ENTRY in
 * TARGET, the target SESSION attached: our hooks into the session's list,
 * then the int3 in.  The caller has asked the session to follow fork
 * children (cp_session_forks_need).  Returns 0, -CP_E_INVAL (an int3 of
 * someone else's is there already), -CP_E_BUSY (the hook list is full),
 * -CP_E_NOMEM or -CP_E_SYS.  */
int cp_funcprof_new(struct cp_session *session, struct cp_target *target,
		    uint64_t entry, struct cp_funcprof **out);

/* The sampler's gate (cp_sampler_options.gate; ARG the struct
 * cp_funcprof): is TID inside, and its CPU time inside.  With HELD, a
 * thread standing on the int3 (rewound there, stopped between the return
 * and the trap, or with the trap queued) is not admitted, and the copy of
 * an admitted one gets its real return address back where the outermost
 * call's is on the stack (the snapshot method; the ptrace method unwinds
 * before the gate is asked, and its frames beyond the outermost call are
 * not mended).  */
bool cp_funcprof_gate(void *arg, pid_t tid, struct cp_snapshot *held,
		      uint64_t *cpu_ns);

/* Mend SNAP, a stack copy of thread TID taken while profiling (a
 * backtrace): the real return address back where the outermost call's
 * is, when TID is inside.  */
void cp_funcprof_mend(const struct cp_funcprof *fp, pid_t tid,
		      struct cp_snapshot *snap);

/* Stop: every thread held a moment, traps of ours still queued taken,
 * the byte restored (and read back), every return address of ours on
 * the threads' stacks given back, the hooks out.  Counters stay.  Safe
 * to call twice and after the target exited.  Returns 0, or -CP_E_SYS
 * when a byte could not be restored.  */
int cp_funcprof_stop(struct cp_funcprof *fp);

/* The counters so far.  */
void cp_funcprof_stats(const struct cp_funcprof *fp,
		       struct cp_session_in_stats *stats);

/* Calls found gone without returning through us (longjmp past the
 * function, a return address we could not replace).  */
uint64_t cp_funcprof_lost(const struct cp_funcprof *fp);

/* The first failure met inside a trap (a byte not written back, out of
 * memory), 0 when none.  */
int cp_funcprof_error(const struct cp_funcprof *fp);

/* Stop (cp_funcprof_stop) and free.  NULL is fine.  */
void cp_funcprof_free(struct cp_funcprof *fp);

#endif
