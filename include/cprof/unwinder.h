/* The unwinder: program counters from a stack snapshot, with libunwind's
 * DWARF CFI unwinder (no frame pointers needed), and without it where no
 * CFI covers a pc (see CP_UNWIND_GUESSED).
 *
 * The stack bytes come from the snapshot taken while the thread was
 * stopped; the unwinding itself runs after the thread was resumed.  The
 * unwind tables (.eh_frame, located through .eh_frame_hdr in the
 * target's memory or through the file's section headers, and
 * .debug_frame) are checked and indexed once per module before libunwind
 * reads any of them (cprof/ehframe.h): nothing a target's files or
 * memory contain can crash the unwinder.  Read-only target pages it asks
 * for are cached.  */
#ifndef CPROF_UNWINDER_H
#define CPROF_UNWINDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cprof/target.h"

struct cp_unwinder;

/* Where no unwind table covers a frame's pc (musl's libc, code built with
 * -fno-asynchronous-unwind-tables, JIT code), its caller is found without
 * one: the return address at the stack pointer (a function that keeps no
 * frame, or at its entry), else the frame-pointer chain, else the first
 * return address above the stack pointer (kept only when the frames after
 * it check out); each only when it is plausible (inside the thread's
 * stack, above the frame, the address right after a call instruction in
 * executable code, a direct call's target the function of the frame or a
 * PLT stub).  What it reads is the stack copy and the cached pages of
 * the modules' code (only JIT code is read from the target).  The pc of
 * a caller found so carries this bit (user addresses are below 2^56):
 * the symbolizer's side strips it (cp_unwind_address) and marks the
 * frame.  */
#define CP_UNWIND_GUESSED (1ull << 62)

/* The address of a pc from the unwinder, without the bit above.  */
static inline uint64_t cp_unwind_address(uint64_t pc)
{
	return pc & ~CP_UNWIND_GUESSED;
}

struct cp_addrspace;

/* A new unwinder for the target whose address space is SPACE (borrowed:
 * it must outlive the unwinder).  What the unwinder caches of a module
 * (its checked unwind tables, its code pages) is dropped when SPACE says
 * the module is gone, and everything when SPACE's epoch changes
 * (cp_addrspace_exec); a pc in no known mapping refreshes SPACE, at most
 * once per unwind.  Returns 0 or -CP_E_NOMEM.  */
int cp_unwinder_new_in(struct cp_addrspace *space, struct cp_unwinder **out);

/* The same with an address space of its own for process PID, read now
 * (freed with the unwinder).  Returns 0 or -CP_E_NOMEM/-CP_E_NOPROC.  */
int cp_unwinder_new(pid_t pid, struct cp_unwinder **out);

void cp_unwinder_free(struct cp_unwinder *uw);

/* The address space UW reads (borrowed).  */
struct cp_addrspace *cp_unwinder_addrspace(const struct cp_unwinder *uw);

/* Unwind SNAP into PCS (at most MAX), innermost first.  PCS[0] is the
 * thread's pc; every later entry is a return address minus one, so that it
 * falls inside the call instruction and names the call's line (eu-stack),
 * with CP_UNWIND_GUESSED when no unwind table found it.  Returns the
 * number of frames: at least 1 (the pc from the registers) when MAX is
 * not 0, however little can be unwound.  */
size_t cp_unwinder_unwind(struct cp_unwinder *uw,
			  const struct cp_snapshot *snap, uint64_t *pcs,
			  size_t max);

/* The same, and in *ENDED whether the last frame is the outermost (its
 * return address undefined: _start, clone): a stack copy that falls
 * short of the thread's frames ends the unwind before.  */
size_t cp_unwinder_unwind_ended(struct cp_unwinder *uw,
				const struct cp_snapshot *snap, uint64_t *pcs,
				size_t max, bool *ended);

/* The stack pointer of the last frame the last unwind reached (0: none):
 * with *ENDED, how far up the stack its frames go.  */
uint64_t cp_unwinder_outer_sp(const struct cp_unwinder *uw);

/* The same, but straight through libunwind-ptrace on thread TID, which
 * must be stopped: every memory read is a ptrace call.  Kept to measure
 * the snapshot method against (make bench).  */
size_t cp_unwinder_unwind_ptrace(struct cp_unwinder *uw, pid_t tid,
				 uint64_t *pcs, size_t max);

/* Forget everything cached of the target and refresh the address space
 * now.  Not needed for an exec (cp_addrspace_exec) or a dlopen or
 * dlclose (cp_addrspace_refresh), which the unwinder notices itself.  */
void cp_unwinder_invalidate(struct cp_unwinder *uw);

/* Registers of a snapshot, numbered as DWARF numbers them on x86-64, for
 * the masks of a partial unwind: CP_UNWIND_REG(CP_REG_RSP).  */
enum {
	CP_REG_RAX, CP_REG_RDX, CP_REG_RCX, CP_REG_RBX, CP_REG_RSI,
	CP_REG_RDI, CP_REG_RBP, CP_REG_RSP, CP_REG_R8, CP_REG_R9,
	CP_REG_R10, CP_REG_R11, CP_REG_R12, CP_REG_R13, CP_REG_R14,
	CP_REG_R15, CP_REG_RIP,
};
#define CP_UNWIND_REG(reg) (1u << (reg))

/* A partial unwind: what is known going in, what it took coming out.  */
struct cp_unwind_partial {
	uint32_t known;      /* in: the registers of SNAP->regs that hold the
			      * thread's values; the others are not read */
	uint32_t needed;     /* out: unknown registers the unwind needed (it
			      * stopped at the first); 0 when the frames are
			      * those a full snapshot gives */
	bool rbp_scanned;    /* out: rbp was unknown and needed, and was
			      * recovered from the stack (a frame-pointer
			      * scan checked against the code, see
			      * unwinder.c); NEEDED is then 0 */
	bool ended;          /* out: the last frame is the outermost (its
			      * return address is undefined: _start, clone) */
};

/* Unwind SNAP like cp_unwinder_unwind, when only some of its registers
 * are known: a thread read without stopping it, from
 * /proc/PID/task/TID/syscall (pc, sp and the system call's argument
 * registers) and a copy of its stack.  The frames are as good as a full
 * snapshot's when PARTIAL->needed is 0 on return; otherwise they end
 * where a frame's rule needed a register that is not known (e.g. rbp as
 * the frame base of a frame-pointer function, when no inner frame saved
 * it) and could not be recovered.  Returns the number of frames.  */
size_t cp_unwinder_unwind_partial(struct cp_unwinder *uw,
				  const struct cp_snapshot *snap,
				  struct cp_unwind_partial *partial,
				  uint64_t *pcs, size_t max);

#endif
