/* The heap table: what allocation events add up to.  It knows nothing of
 * ptrace or of how the events were caught (heaptrack's track -> interpret
 * -> analyze): the heap tracer (cprof/heap.h) turns allocator traps into
 * events; this table keeps the live blocks, the allocation sites (by stack
 * id), the totals, the exact-peak timeline, the temporary allocations,
 * the untracked, repeated and internal frees and the size buckets, and is
 * tested with event sequences alone.
 *
 *   breakpoints -> allocation events -> heap table -> profile, writers  */
#ifndef CPROF_HEAPTABLE_H
#define CPROF_HEAPTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "cprof/profile.h"

/* ------------------------------------------------ allocator entry points */

/* What an allocator entry point does with blocks.  */
enum cp_heap_kind {
	CP_HEAP_KIND_ALLOC,   /* makes a new block */
	CP_HEAP_KIND_FREE,    /* releases one */
	CP_HEAP_KIND_REALLOC, /* releases one and makes one (either may be
			       * none: realloc(NULL, n), realloc(p, 0)) */
};

/* Where the new block's address is once the call returned.  */
enum cp_heap_result {
	CP_HEAP_RESULT_NONE,   /* nothing to wait for (free) */
	CP_HEAP_RESULT_PTR,    /* the return value; NULL: the call failed */
	CP_HEAP_RESULT_STORED, /* the call returns 0 and stores the address
				* at its argument OUT_ARG (posix_memalign) */
};

#define CP_HEAP_NO_ARG (-1)

/* One allocator entry point, a row of the descriptor table: which of its
 * arguments say what.  An argument is a 0-based position in the calling
 * convention (src/arch/ reads it), or CP_HEAP_NO_ARG.  Adding an entry
 * point (a jemalloc mallocx) is one row of the table.  The return is
 * caught when RESULT is not CP_HEAP_RESULT_NONE.  */
struct cp_heap_entry {
	const char *name;        /* the symbol looked up */
	enum cp_heap_kind kind;
	enum cp_heap_result result;
	int8_t size_arg;         /* the size in bytes */
	int8_t count_arg;        /* a count the size is multiplied by
				  * (calloc, reallocarray) */
	int8_t align_arg;        /* the alignment asked for */
	int8_t ptr_arg;          /* the block freed or resized */
	int8_t out_arg;          /* CP_HEAP_RESULT_STORED: where the new
				  * block's address is stored */
	uint32_t round_to;       /* the size is rounded up to a multiple of
				  * this (pvalloc: a page); 0: as asked */
	bool required;           /* no tracing without it (malloc) */
};

/* Rows of the descriptor table at most: the size of the per-entry arrays
 * of struct cp_heap_summary.  */
#define CP_HEAP_MAX_ENTRIES 16

/* The descriptor table (static); *N gets its number of rows.  The rows
 * are in the order the report lists them.  */
const struct cp_heap_entry *cp_heap_entries(size_t *n);

/* The row named NAME, or -1.  */
int cp_heap_entry_find(const char *name);

/* ------------------------------------------------------------- events */

enum cp_heap_event_kind {
	CP_HEAP_EV_ALLOC,   /* ADDR (0: failed) of SIZE bytes was made */
	CP_HEAP_EV_FREE,    /* ADDR was freed (0: free(NULL)) */
	CP_HEAP_EV_REALLOC, /* OLD_ADDR (0: none) was resized into ADDR
			     * (0: none made) of SIZE bytes */
	CP_HEAP_EV_REALLOC_BEGIN, /* TID's realloc of OLD_ADDR began: the
				   * block is released now, before another
				   * thread can be given it (the call frees it
				   * inside); its CP_HEAP_EV_REALLOC gives it
				   * back if the call fails */
};

/* One allocator call, as the tracer saw it complete.  Plain data.  */
struct cp_heap_event {
	enum cp_heap_event_kind kind;
	uint32_t entry;     /* its row in the descriptor table */
	uint64_t addr;      /* the block made, or freed (FREE) */
	uint64_t size;      /* bytes asked for (ALLOC, REALLOC) */
	uint64_t old_addr;  /* REALLOC: the block resized */
	uint32_t stack;     /* ALLOC, REALLOC: the call's stack id in the
			     * profile */
	pid_t tid;          /* the thread that called */
	uint64_t t_ns;      /* when (CLOCK_MONOTONIC) */
	uint64_t caller;    /* FREE: its return address when known, else 0
			     * (the table asks cp_heaptable_set_allocator's
			     * CALLER function when it needs it) */
};

/* ------------------------------------------------------------ results */

/* The weight of a stack in folded and SVG output.  */
enum cp_heap_metric {
	CP_HEAP_LIVE_BYTES,
	CP_HEAP_ALLOC_BYTES,
	CP_HEAP_LIVE_COUNT,
	CP_HEAP_ALLOC_COUNT,
};

/* Parse "live-bytes" etc.; -1 when unknown.  */
int cp_heap_metric_parse(const char *name);

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

/* What a run found; plain data, read by the writers.  The heap table
 * fills what is about allocations; the tracer (cprof/heap.h) the rest:
 * calls, traced, module, lost_returns, stepped, forks, how it ended.  */
struct cp_heap_summary {
	double duration;          /* seconds traced */
	size_t nentries;          /* rows of the descriptor table: the per-
				   * entry arrays are indexed by row */
	uint64_t calls[CP_HEAP_MAX_ENTRIES]; /* outermost calls per entry */
	bool traced[CP_HEAP_MAX_ENTRIES]; /* a breakpoint was set on it */
	char module[CP_HEAP_MAX_ENTRIES][128]; /* where it was found */
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
	uint64_t unwinds_reused;  /* allocations whose stack was an earlier
				   * unwind's: same registers, same stack
				   * bytes (cp_heap_options.no_unwind_reuse) */
	uint64_t vfork_children, fork_children;
	unsigned tracers;         /* tracer threads (cp_heap_options) */
	uint64_t threads_moved;   /* new threads handed to another tracer
				   * thread at birth */
	bool target_exited, target_exec, interrupted;
	/* The uprobe method (the kernel's probes, records in rings) and
	 * what only it has to say.  */
	bool uprobes;
	uint64_t events_lost;       /* records the kernel could not write */
	uint64_t threads_throttled; /* stops of a thread whose ring filled
				     * faster than it was taken */
	uint64_t threads_untraced;  /* threads whose probes were refused */
	uint64_t stacks_cut;        /* allocations whose stack was cut where
				     * the copy ended */
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

/* ------------------------------------------------------------- table */

struct cp_heaptable;

/* A new, empty table.  Returns NULL when out of memory.  */
struct cp_heaptable *cp_heaptable_new(void);

void cp_heaptable_free(struct cp_heaptable *table);

/* Tracing begins at T0_NS (CLOCK_MONOTONIC): the origin of the timeline
 * and of peak_t.  Events before it count, and are placed at 0.  */
void cp_heaptable_begin(struct cp_heaptable *table, uint64_t t0_ns);

/* Asked for the return address of the free EVENT (whose caller was 0)
 * when the table needs it: a free of a block not live, which is the
 * allocator's own when it comes from its code.  Returns it, or 0.  */
typedef uint64_t (*cp_heaptable_caller_fn)(void *arg,
					   const struct cp_heap_event *event);

/* The allocator's code lies in [LO, HI): a free of a block not live
 * called from there is the allocator's own (internal_frees).  CALLER
 * (may be NULL) and ARG find a free's return address when its event
 * has none.  */
void cp_heaptable_set_allocator(struct cp_heaptable *table, uint64_t lo,
				uint64_t hi, cp_heaptable_caller_fn caller,
				void *arg);

/* Account for EVENT.  Returns 0, or -CP_E_NOMEM (the event is then
 * partly counted; the table stays usable).  */
int cp_heaptable_add(struct cp_heaptable *table,
		     const struct cp_heap_event *event);

/* Tracing ended at END_NS: the timeline's last span and the duration.  */
void cp_heaptable_end(struct cp_heaptable *table, uint64_t end_ns);

/* The results; borrowed, valid until the next cp_heaptable_add or
 * cp_heaptable_free.  Only the fields about allocations are set (the
 * others are 0).  */
const struct cp_heap_summary *
cp_heaptable_summary(const struct cp_heaptable *table);

/* Fill PROFILE's samples with one per site: the count weighted by
 * METRIC, and the four values alloc_count, alloc_bytes, live_count,
 * live_bytes (the pprof heap profile).  Sites weighing 0 are left out.
 * Returns 0 or -CP_E_NOMEM.  */
int cp_heaptable_fill_profile(const struct cp_heaptable *table,
			      struct cp_profile *profile,
			      enum cp_heap_metric metric);

/* Writer: the text report (--format report), TOP sites per list.  Never
 * calls ptrace.  Returns 0 or -CP_E_SYS.  */
int cp_heap_write_report(const struct cp_heap_summary *summary,
			 const struct cp_profile *profile, size_t top,
			 FILE *stream);

#endif
