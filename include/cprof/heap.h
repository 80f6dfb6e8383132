/* Heap mode: int3 breakpoints on the allocator's entry points in the
 * unmodified target, allocation events, and the heap table they build.
 *
 *   breakpoints (int3 at malloc, free, ...) -> allocation events
 *     -> heap table (live blocks, sites, timeline) -> profile and writers
 *
 * An entry breakpoint's displaced instruction is emulated (insn.h), so
 * the int3 byte stays in place for the whole run and no thread can pass
 * an entry unseen.  The result of a call is caught by pointing the return
 * address on the thread's stack at the entry breakpoint itself: the
 * thread "returns" into our int3 with its stack pointer one slot above
 * the call's, which tells a return from a new call.  free needs no
 * return, so a malloc+free pair costs three traps.
 *
 * Every byte written (the int3s, the hijacked return addresses) is put
 * back by cp_heap_finish, which holds every thread first and rewinds any
 * thread that has just hit a trap.  */
#ifndef CPROF_HEAP_H
#define CPROF_HEAP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cprof/profile.h"
#include "cprof/symbols.h"
#include "cprof/target.h"
#include "cprof/unwinder.h"

/* The traced entry points.  */
enum cp_heap_fn {
	CP_HEAP_MALLOC,
	CP_HEAP_CALLOC,
	CP_HEAP_REALLOC,
	CP_HEAP_REALLOCARRAY,
	CP_HEAP_FREE,
	CP_HEAP_POSIX_MEMALIGN,
	CP_HEAP_ALIGNED_ALLOC,
	CP_HEAP_MEMALIGN,
	CP_HEAP_VALLOC,
	CP_HEAP_PVALLOC,
	CP_HEAP_NFN
};

/* "malloc", ...; static.  */
const char *cp_heap_fn_name(enum cp_heap_fn fn);

/* The weight of a stack in folded and SVG output.  */
enum cp_heap_metric {
	CP_HEAP_LIVE_BYTES,
	CP_HEAP_ALLOC_BYTES,
	CP_HEAP_LIVE_COUNT,
	CP_HEAP_ALLOC_COUNT,
};

/* Parse "live-bytes" etc.; -1 when unknown.  */
int cp_heap_metric_parse(const char *name);

struct cp_heap_options {
	size_t max_depth;     /* frames kept per stack (>= 1) */
	double duration;      /* seconds; <= 0: until stopped or exit */
	volatile sig_atomic_t *stop; /* set by the caller's signal handler */
	bool force_step;      /* never emulate: step with all threads held
			       * (tests the fallback) */
};

/* One allocation site: a stack and its totals.  */
struct cp_heap_site {
	uint32_t stack;          /* stack id in the profile */
	uint64_t alloc_count, alloc_bytes;
	uint64_t live_count, live_bytes;
};

/* One span of the timeline: the highest live bytes in it.  */
struct cp_heap_point {
	double t;                /* its start, seconds since tracing began */
	uint64_t live_bytes;     /* the highest live bytes in the span */
	uint64_t live_count;     /* live blocks at that moment */
};

#define CP_HEAP_SIZE_BUCKETS 65 /* [0], [1,2), [2,4), ... [2^63, 2^64) */

/* What a run found; plain data, read by the writers.  */
struct cp_heap_summary {
	double duration;          /* seconds traced */
	uint64_t calls[CP_HEAP_NFN]; /* outermost calls per entry point */
	bool traced[CP_HEAP_NFN]; /* a breakpoint was set on it */
	char module[CP_HEAP_NFN][128]; /* where each definition was found */
	uint64_t allocations, alloc_bytes; /* successful allocations */
	uint64_t failed;          /* allocation calls that returned NULL */
	uint64_t frees;           /* tracked frees (blocks we saw born) */
	uint64_t untracked_frees; /* frees of blocks born before attach */
	uint64_t null_frees;      /* free(NULL) */
	uint64_t repeat_frees;    /* frees of blocks already freed (double
				   * frees) by the program */
	uint64_t internal_frees;  /* frees by the allocator's own code of
				   * blocks not live (glibc flushes each
				   * thread's tcache at thread exit) */
	uint64_t reallocs;        /* realloc/reallocarray calls */
	uint64_t realloc_releases; /* tracked blocks realloc moved or freed:
				    * allocations = frees + these + live */
	uint64_t temporary;       /* released (free, realloc) by the thread
				   * that allocated them, its next
				   * allocator event after the allocation
				   * (heaptrack's definition, per thread) */
	uint64_t live_count, live_bytes; /* at the end */
	uint64_t peak_bytes;      /* highest live bytes */
	double peak_t;            /* when (seconds since tracing began) */
	uint64_t sizes[CP_HEAP_SIZE_BUCKETS]; /* allocations by size */
	uint64_t lost_returns;    /* calls whose return we never saw */
	uint64_t stepped;         /* traps handled by single-stepping */
	uint64_t vfork_children, fork_children;
	bool target_exited, target_exec, interrupted;
	const struct cp_heap_site *sites; /* by stack id; may have gaps */
	size_t nsites;
	/* Live bytes recorded at every change, as the highest of each span
	 * of TIMELINE_SPAN seconds from the start (a few hundred to a
	 * thousand spans, whatever the duration): the highest point is the
	 * peak, exactly.  */
	const struct cp_heap_point *timeline;
	size_t npoints;
	double timeline_span;
};

struct cp_heap;

/* Prepare heap tracing of TARGET: find the allocator's entry points (the
 * first module in link-map order that defines each) and set the
 * breakpoints.  A target started by cp_target_launch is set up when the
 * dynamic linker reports its libraries mapped (r_brk, RT_CONSISTENT),
 * before any of their constructors runs; a static one at its entry
 * point.  SYMBOLS is told (cp_symbols_capture) whenever the mappings
 * changed.  UNWINDER, SYMBOLS and PROFILE are borrowed until
 * cp_heap_free.  Returns 0, -CP_E_NOALLOC (no allocator
 * found), -CP_E_GONE, or another -CP_E_* code.  */
int cp_heap_start(struct cp_target *target, struct cp_unwinder *unwinder,
		  struct cp_symbols *symbols, struct cp_profile *profile,
		  const struct cp_heap_options *options, struct cp_heap **out);

/* Number of breakpoints set, and a static description of where ("libc.so.6"). */
size_t cp_heap_breakpoints(const struct cp_heap *heap, const char **module);

/* Trace until the duration ends, *STOP is set, the target exits or
 * execs.  Returns 0 or a -CP_E_* code for a failure of ours.  */
int cp_heap_run(struct cp_heap *heap);

/* Why a run returned.  */
enum cp_heap_end {
	CP_HEAP_DEADLINE, /* UNTIL_NS came, or the duration ended */
	CP_HEAP_STOPPED,  /* a stop flag was set */
	CP_HEAP_EXITED,   /* the target exited */
	CP_HEAP_EXEC,     /* the target called execve */
};

/* cp_heap_run, returning also when UNTIL_NS (CLOCK_MONOTONIC ns; 0:
 * none) comes or *STOP (may be NULL) is set; *END (may be NULL) says
 * why.  Called again, it goes on tracing (a session's steps).  */
int cp_heap_run_until(struct cp_heap *heap, uint64_t until_ns,
		      volatile sig_atomic_t *stop, enum cp_heap_end *end);

/* Hold every thread, rewind the ones that just trapped, put back every
 * byte written and check it by reading it back.  The caller then
 * detaches the target.  Returns 0, or -CP_E_SYS when a byte could not
 * be restored (an error message was printed).  */
int cp_heap_finish(struct cp_heap *heap);

/* Wait until every stack recorded is symbolized (after the detach: the
 * target does not wait for us to read debug information).  Call before
 * cp_heap_summary's sites are written.  */
void cp_heap_resolve(struct cp_heap *heap);

/* The results; borrowed, valid until cp_heap_free.  */
const struct cp_heap_summary *cp_heap_summary(const struct cp_heap *heap);

/* Fill PROFILE's samples with one per site: the count weighted by
 * METRIC, and the four values alloc_count, alloc_bytes, live_count,
 * live_bytes (the pprof heap profile).  Sites weighing 0 are left out.
 * Returns 0 or -CP_E_NOMEM.  */
int cp_heap_fill_profile(const struct cp_heap *heap, struct cp_profile *profile,
			 enum cp_heap_metric metric);

void cp_heap_free(struct cp_heap *heap);

/* Writer: the text report (--format report), TOP sites per list.  Never
 * calls ptrace.  Returns 0 or -CP_E_SYS.  */
int cp_heap_write_report(const struct cp_heap_summary *summary,
			 const struct cp_profile *profile, size_t top,
			 FILE *stream);

#endif
