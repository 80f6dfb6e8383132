/* Frames no unwind table covers: their callers found from the stack copy
 * and the code, for the unwinder.  Internal to libcprof.
 *
 * A word of the stack is taken for a return address only if the bytes
 * before it in executable code are a call instruction; a direct call's
 * target must also be the function the frame is in (at or below its pc,
 * and near) or a PLT stub (whose GOT slot is not read: no system call).
 * Stack words come from the copy only, code through the reader given.  */
#ifndef CPROF_NOCFI_H
#define CPROF_NOCFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cprof/target.h"

/* Reads LEN bytes of target code at ADDR into BUF; false unless they all
 * lie in one executable mapping.  */
typedef bool cp_nocfi_read_code_fn(void *ctx, uint64_t addr, void *buf,
				   size_t len);

struct cp_nocfi_code {
	cp_nocfi_read_code_fn *read;
	void *ctx;
};

/* How a caller was found.  */
enum cp_nocfi_how {
	CP_NOCFI_AT_SP,          /* the return address at the stack pointer:
				  * a function that keeps no frame (a leaf
				  * in assembly, a PLT stub), or at its
				  * entry or its ret */
	CP_NOCFI_FRAME_POINTER,  /* [rbp + 8], the caller's rbp at [rbp] */
	CP_NOCFI_SCANNED,        /* the first return address above the
				  * stack pointer */
};

/* The caller of a frame without CFI, as found.  */
struct cp_nocfi_caller {
	enum cp_nocfi_how how;
	uint64_t ret;            /* the return address into it */
	uint64_t sp;             /* its stack pointer (just above RET) */
	uint64_t rbp;            /* its rbp, when RBP_KNOWN */
	bool rbp_known;
	bool regs_kept;          /* nothing was saved below RET: the other
				  * callee-saved registers still hold the
				  * caller's values */
};

/* The return addresses of the frames below the one at hand that are
 * looked at (the nearest).  */
#define CP_NOCFI_BELOW 16

/* The caller of the frame at PC with stack pointer SP and rbp *RBP (NULL
 * when not known), in the stack copy STACK; ENTRY is the executable's
 * entry point (0 if unknown), which a scan never takes for a return
 * address (the auxiliary vector holds it); BELOW (NBELOW of
 * them, nearest first) the return addresses of the frames below, whose
 * calls name functions this frame's is not.  INNERMOST: the frame was
 * interrupted (the thread's own frame, or one a signal interrupted), so
 * it may be in its prologue or epilogue or keep no frame; otherwise PC is
 * a call site inside it.  Returns 1 with *OUT filled, 0 when the frame is
 * the outermost (its rbp is 0, as _start and clone leave it), -1 when
 * nothing plausible was found.  A caller found by CP_NOCFI_SCANNED is the
 * least certain: the unwinder keeps it only when the walk goes on from
 * it through a frame with CFI to a return address (cp_nocfi_after_call),
 * or to the outermost frame.  */
int cp_nocfi_caller(const struct cp_nocfi_code *code,
		    const struct cp_snapshot *stack, uint64_t pc, uint64_t sp,
		    const uint64_t *rbp, bool innermost, uint64_t entry,
		    const uint64_t *below, size_t nbelow,
		    struct cp_nocfi_caller *out);

/* Does a call instruction end at ADDR (is it a return address)?  */
bool cp_nocfi_after_call(const struct cp_nocfi_code *code, uint64_t addr);

/* Recover the value rbp has in the frame whose stack pointer is FRAME_SP,
 * in the function starting at START (0 when unknown), whose unwind rule
 * needs it (the frame base of a frame-pointer function) when no inner
 * frame saved it: see nocfi.c.  *STRONG is false when only the weakest
 * evidence was found (the caller checks the result further).  */
bool cp_nocfi_recover_rbp(const struct cp_nocfi_code *code,
			  const struct cp_snapshot *stack, uint64_t frame_sp,
			  uint64_t start, uint64_t *rbp, bool *strong);

#endif
