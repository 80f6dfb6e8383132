/* One-shot stack dump ("where is it stuck right now?"): stop every thread
 * once, copy registers and stacks, let them go, then unwind and name the
 * frames.  The data is plain; the writers print it as text (like eu-stack)
 * or JSON.  */
#ifndef CPROF_DUMP_H
#define CPROF_DUMP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "cprof/capture.h"
#include "cprof/symbols.h"
#include "cprof/target.h"
#include "cprof/unwinder.h"

struct cp_dump_frame {
	uint64_t address;       /* the pc (innermost) or the return address */
	const struct cp_frame *frame; /* borrowed from the symbolizer */
	const char *module;     /* basename, or NULL */
};

struct cp_dump_thread {
	pid_t tid;
	char name[64];
	char state;             /* from /proc before the thread was stopped */
	long syscall;           /* the system call it was blocked in, or -1 */
	size_t nframes;
	struct cp_dump_frame *frames; /* innermost first, inlined expanded */
};

struct cp_dump {
	pid_t pid;
	size_t nthreads;
	struct cp_dump_thread *threads;
};

/* Stop the threads of TARGET (attached, not yet sampled) once, copy them,
 * let them go, and unwind and symbolize the copies into a new dump.  Does
 * not detach.  Returns 0 or a -CP_E_* code.  Free with cp_dump_free().  */
int cp_dump_collect(struct cp_target *target, struct cp_unwinder *unwinder,
		    struct cp_symbols *symbols, size_t max_depth,
		    struct cp_dump **out);

/* The same through CAPTURE (a session's capture engine: its unwinding
 * method); cp_dump_collect uses a snapshot capture of its own.  */
int cp_dump_capture(struct cp_target *target, struct cp_capture *capture,
		    struct cp_symbols *symbols, size_t max_depth,
		    struct cp_dump **out);

void cp_dump_free(struct cp_dump *dump);

/* The name of x86-64 system call NR ("nanosleep"), or NULL.  */
const char *cp_syscall_name(long nr);

/* Print DUMP as text, one block per thread:
 *   Thread 4242 "worker-1" (sleeping in nanosleep)
 *     #0  0x00007f3a1c2b5e10 in compress_block (lz.c:214) [libz.so.1]
 * The source position only when LINES.  Returns 0 or -CP_E_SYS.  */
int cp_write_dump_text(const struct cp_dump *dump, bool lines, FILE *stream);

/* Print DUMP as one JSON document.  Returns 0 or -CP_E_SYS.  */
int cp_write_dump_json(const struct cp_dump *dump, FILE *stream);

#endif
