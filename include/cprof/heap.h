/* Heap mode: int3 breakpoints on the allocator's entry points in the
 * unmodified target, allocation events, and the heap table they build.
 *
 *   breakpoints (int3 at malloc, free, ...) -> allocation events
 *     -> heap table (live blocks, sites, timeline) -> profile and writers
 *
 * Two methods put the int3s there (enum cp_heap_method).  By default the
 * kernel's: a perf uprobe event per entry point and per return on each
 * thread, whose records (the registers; at an allocating entry, a copy of
 * the stack) the tracer turns into the same events, in the order of
 * their times; the thread never stops for us (one that outruns the
 * tracer is stopped until its records are taken).  Closing the events
 * takes the kernel's bytes out, whatever ends cprof-attach.  The other
 * method is ours, below.
 *
 * This is the ptrace side: it interprets each trap with the descriptor
 * table of the allocator's entry points (cp_heap_entries) and hands the
 * heap table (cprof/heaptable.h) one plain event per completed call.
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

#include "cprof/capture.h"
#include "cprof/heaptable.h"
#include "cprof/profile.h"
#include "cprof/symbols.h"
#include "cprof/target.h"
#include "cprof/unwinder.h"

/* How the allocator's calls are caught.  */
enum cp_heap_method {
	/* The library's choice: the kernel's uprobes, or traps where
	 * those are refused, where only traps will do (force_step,
	 * CP_UNWIND_PTRACE, tracers > 1), and in a session that has other
	 * clients (breakpoints) when heap tracing starts.  */
	CP_HEAP_METHOD_AUTO,
	/* The kernel's uprobes (perf events on each thread): its own int3
	 * at the entry points, the thread's registers and a copy of its
	 * stack written to a ring, the thread going on at once.  Refused
	 * (-CP_E_SYS) when the kernel does not have them or refuses them,
	 * -CP_E_INVAL with force_step or CP_UNWIND_PTRACE; one tracer
	 * thread.  Closing the events waits for the kernel's grace
	 * periods (about 85 ms for each event defined in tracefs, 4 as a
	 * rule, or for each event of the uprobe PMU without it): a thread
	 * of ours closes them, and cp_heap_free waits for it.  A record
	 * the kernel could not write is counted
	 * (cp_heap_summary.events_lost).  A realloc's block is released when the call begins (it is freed
	 * inside, and another thread may get it before the call returns):
	 * CP_HEAP_EV_REALLOC_BEGIN.  */
	CP_HEAP_METHOD_UPROBES,
	/* Our int3s, written with ptrace, a stop of the thread per call and
	 * per return.  */
	CP_HEAP_METHOD_TRAPS,
};

struct cp_heap_options {
	enum cp_heap_method method;
	size_t max_depth;     /* frames kept per stack (>= 1) */
	double duration;      /* seconds; <= 0: until stopped or exit */
	volatile sig_atomic_t *stop; /* set by the caller's signal handler */
	bool force_step;      /* never emulate: step with all threads held
			       * (tests the fallback) */
	enum cp_unwind_mode unwind; /* how an allocation's stack is taken
				     * (cprof/capture.h); 0: snapshot */
	/* Unwind every allocation's stack, even when its registers and
	 * stack bytes are those of an allocation unwound before (whose
	 * frames are reused otherwise: the same input, the same frames).  */
	bool no_unwind_reuse;
	/* Tracer threads, the caller's included: 1 for the caller's only;
	 * 0 for one per CPU (up to 4) beside it, when there are two CPUs or
	 * more.  More than one needs every breakpoint's instruction
	 * emulated, snapshot unwinding, and no other user of the session's
	 * hooks.  While there are several, SIGALRM's action is a handler
	 * of ours (restored by cp_heap_finish).  */
	unsigned tracers;
	/* Problems the caller may want to show (a byte that could not be
	 * restored); may be NULL.  The library never prints.  */
	void (*warn)(void *arg, const char *message);
	void *warn_arg;
	/* Called with every allocation event once the heap table has it
	 * (a second consumer: a recorder, a stream); may be NULL.  It runs
	 * on the tracing thread, the allocating thread resumed or about to
	 * be: keep it short, and never call back into HEAP.  */
	void (*on_event)(void *arg, const struct cp_heap_event *event);
	void *on_event_arg;
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
 * why.  Called again, it goes on tracing (a session's steps).
 *
 * What it installs while it runs, and puts back before it returns: the
 * wait for the next trap is a blocking waitpid, which only a signal ends
 * early, so a POSIX timer (CLOCK_MONOTONIC) sends SIGALRM to the calling
 * thread every 100 ms, SIGALRM's action is a handler of ours without
 * SA_RESTART, and SIGALRM is unblocked in the calling thread.  The
 * previous action and mask are restored and the timer deleted on
 * return.  A program that uses SIGALRM itself must not run this
 * meanwhile; *STOP and UNTIL_NS are seen within 100 ms.  */
int cp_heap_run_until(struct cp_heap *heap, uint64_t until_ns,
		      volatile sig_atomic_t *stop, enum cp_heap_end *end);

/* Hold every thread, rewind the ones that just trapped, put back every
 * byte written and check it by reading it back, take our hooks off the
 * target (cp_target_set_hooks) and let its threads run again.  The
 * target stays attached: the caller may sample it, dump it, start heap
 * tracing again with a new cp_heap_start, or detach it.  Returns 0, or
 * -CP_E_SYS when a byte could not be restored (said through the
 * options' warn).  */
int cp_heap_finish(struct cp_heap *heap);

/* Wait until every stack recorded is symbolized (after the detach: the
 * target does not wait for us to read debug information).  Call before
 * cp_heap_summary's sites are written.  */
void cp_heap_resolve(struct cp_heap *heap);

/* The results: the heap table's summary with the tracer's fields
 * (calls, traced, module, reallocs, lost returns, steps, forks, how the
 * run ended) beside it.  Borrowed, valid until cp_heap_free; it holds
 * what was known at this call (tracing on changes the table: call
 * again).  */
const struct cp_heap_summary *cp_heap_summary(const struct cp_heap *heap);

/* The heap table the events went to; borrowed, valid until
 * cp_heap_free.  */
const struct cp_heaptable *cp_heap_table(const struct cp_heap *heap);

/* Fill PROFILE's samples with one per site: the count weighted by
 * METRIC, and the four values alloc_count, alloc_bytes, live_count,
 * live_bytes (the pprof heap profile).  Sites weighing 0 are left out.
 * Returns 0 or -CP_E_NOMEM.  */
int cp_heap_fill_profile(const struct cp_heap *heap, struct cp_profile *profile,
			 enum cp_heap_metric metric);

void cp_heap_free(struct cp_heap *heap);

#endif
