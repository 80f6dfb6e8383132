/* One int3 breakpoint in the target, and how a thread that hit it goes
 * on past the displaced instruction: emulated on the thread's registers
 * when it is one of the forms cprof/insn.h knows (or a bare `ret`), else
 * stepped with the original byte back.  Shared by heap tracing
 * (heap_trap.c), the session's breakpoints (breaks.c) and profiling a
 * function.  Internal to libcprof.  */
#ifndef CPROF_INT3_H
#define CPROF_INT3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "cprof/insn.h"
#include "cprof/target.h"

#define CP_INT3_BYTE 0xcc /* x86: the breakpoint instruction */
#define CP_INT3_RET 0xc3  /* x86: a near return */

/* One int3 of ours.  */
struct cp_int3 {
	uint64_t addr;
	uint8_t orig[CP_INSN_MAX]; /* the code bytes before we wrote */
	struct cp_insn insn;       /* the displaced instruction */
	bool emulate;              /* else: step it with the byte back */
	bool inserted;
	uint32_t tag;              /* the owner's (heap mode: its row of
				    * cp_heap_entries) */
};

/* Make BP an int3 at ADDR in process PID, not inserted yet: the code
 * bytes read (through /proc/PID/mem), the first instruction decoded
 * (emulated unless FORCE_STEP or not decodable).  TAG is kept.  Returns
 * 0, -CP_E_INVAL when an int3 is there already (someone else's), or
 * -CP_E_SYS.  */
int cp_int3_prepare(pid_t pid, struct cp_int3 *bp, uint64_t addr,
		    bool force_step);

/* Write the int3 of BP into PID and read it back.  Returns 0 or
 * -CP_E_SYS.  */
int cp_int3_insert(pid_t pid, struct cp_int3 *bp);

/* Put back the original byte of BP in process PID and check it (a few
 * tries).  Does not change BP->inserted.  Returns 0 or -CP_E_SYS.  */
int cp_int3_restore(pid_t pid, const struct cp_int3 *bp);

/* Run BP's displaced instruction, at PC, on REGS of a thread of PID
 * (a bare `ret` included).  Returns 0 or -1 (REGS unchanged).  */
int cp_int3_emulate(pid_t pid, const struct cp_int3 *bp, uint64_t pc,
		    struct user_regs_struct *regs);

/* Writes to the target's memory gathered for one system call: the
 * emulation of a displaced `push` (heap mode's entries) writes the slot
 * just below the return address the caller then hijacks, so both go out
 * in one process_vm_writev.  */
struct cp_int3_writes {
	uint64_t addr;      /* target address of buf[0] */
	size_t len;         /* bytes gathered, 0: none */
	uint8_t buf[64];
};

/* cp_int3_emulate, with the instruction's memory writes gathered into
 * WRITES (emptied first) instead of written: cp_int3_writes_flush writes
 * them.  An instruction whose writes do not fit WRITES, or are not
 * contiguous, fails like a failed write (-1, REGS unchanged).  */
int cp_int3_emulate_gather(pid_t pid, const struct cp_int3 *bp, uint64_t pc,
			   struct user_regs_struct *regs,
			   struct cp_int3_writes *writes);

/* Add LEN bytes at ADDR to WRITES when they extend it without a gap
 * (either side) and fit.  Returns true when added.  */
bool cp_int3_writes_add(struct cp_int3_writes *writes, uint64_t addr,
			const void *buf, size_t len);

/* Write what WRITES holds into PID and empty it.  Returns 0 or
 * -CP_E_SYS.  */
int cp_int3_writes_flush(pid_t pid, struct cp_int3_writes *writes);

/* Step thread TID, held at BP's address, over the displaced instruction:
 * the original byte back, one instruction, the int3 again.  The caller
 * holds every other thread when none may pass the address unseen (heap
 * mode) or accepts that one passing meanwhile is not seen.  Returns 0,
 * -CP_E_GONE (the thread is gone) or -CP_E_SYS (a byte not written).  */
int cp_int3_step(struct cp_target *target, pid_t tid, struct cp_int3 *bp);

/* Threads held at an int3 whose instruction is to be stepped later,
 * from a main loop, with every thread held (not from inside a trap
 * hook, where holding them all would nest event handling).  */
struct cp_int3_steps {
	pid_t *tids;
	size_t n, cap;
};

/* Queue TID.  Returns 0 or -CP_E_NOMEM.  */
int cp_int3_queue(struct cp_int3_steps *steps, pid_t tid);

void cp_int3_steps_free(struct cp_int3_steps *steps);

#endif
