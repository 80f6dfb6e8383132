/* The unwinder: program counters from a stack snapshot, with libunwind's
 * DWARF CFI unwinder (no frame pointers needed).
 *
 * The stack bytes come from the snapshot taken while the thread was
 * stopped; the unwinding itself runs after the thread was resumed.  The
 * unwind tables (.eh_frame_hdr, .eh_frame, .debug_frame) are found by
 * libunwind-ptrace's own find_proc_info, one handle per module so that
 * switching modules costs nothing, and read-only target pages it asks for
 * are cached.  */
#ifndef CPROF_UNWINDER_H
#define CPROF_UNWINDER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cprof/target.h"

struct cp_unwinder;

/* A new unwinder for process PID.  Returns 0 or -CP_E_NOMEM/-CP_E_NOPROC.  */
int cp_unwinder_new(pid_t pid, struct cp_unwinder **out);

void cp_unwinder_free(struct cp_unwinder *uw);

/* Unwind SNAP into PCS (at most MAX), innermost first.  PCS[0] is the
 * thread's pc; every later entry is a return address minus one, so that it
 * falls inside the call instruction and names the call's line (eu-stack).
 * Returns the number of frames (>= 1 when the pc is readable).  */
size_t cp_unwinder_unwind(struct cp_unwinder *uw,
			  const struct cp_snapshot *snap, uint64_t *pcs,
			  size_t max);

/* The same, but straight through libunwind-ptrace on thread TID, which
 * must be stopped: every memory read is a ptrace call.  Kept to measure
 * the snapshot method against (make bench).  */
size_t cp_unwinder_unwind_ptrace(struct cp_unwinder *uw, pid_t tid,
				 uint64_t *pcs, size_t max);

/* The target's mappings changed (exec, dlopen, dlclose): forget what was
 * cached about them.  */
void cp_unwinder_invalidate(struct cp_unwinder *uw);

#endif
