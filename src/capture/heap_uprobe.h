/* Heap mode by the kernel's uprobes: the allocator's entries and
 * returns are probed by perf uprobe events on each thread of the target
 * (the kernel's own int3 at the same entry points, put in and taken out
 * by the kernel, in the target's memory only), each record carrying the
 * thread's registers and, at an allocating entry, a copy of its stack.
 * The thread goes on at once: no ptrace stop, no context switch to us
 * per call.  The records come through one ring per thread and are turned
 * into the same allocation events as the traps' (heap_trap.c), in the
 * order of their times across threads.  A thread whose ring fills faster
 * than we take it is stopped until it is taken (nothing written over);
 * a record the kernel could not write anyway is counted as lost.
 *
 * Chosen when the kernel has the uprobe PMU and lets us open its events
 * (cp_heap_options.method); else the traps of heap_trap.c.  Internal to
 * libcprof.  */
#ifndef CPROF_HEAP_UPROBE_H
#define CPROF_HEAP_UPROBE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct cp_heap;
struct cp_heap_found;
struct cp_heap_uprobes;

/* The uprobe method for H, when this kernel has it: 0 and *OUT, or
 * -CP_E_SYS (no uprobe PMU: the traps are used).  */
int cp_heap_uprobes_new(struct cp_heap *h, struct cp_heap_uprobes **out);

/* Probe the entry points FOUND (cp_heap_alloc_find) on every thread of
 * the target.  Returns 0, or a -CP_E_* code with nothing left open (the
 * caller falls back to the traps).  */
int cp_heap_uprobes_arm(struct cp_heap *h, const struct cp_heap_found *found);

/* True once armed: the allocator is probed by the kernel.  */
bool cp_heap_uprobes_armed(const struct cp_heap *h);

/* Is ADDR an entry point the kernel's probes of H are at?  */
bool cp_heap_uprobes_at(const struct cp_heap *h, uint64_t addr);

/* A new thread TID, held at its first stop: probe it before it runs.  */
void cp_heap_uprobes_birth(struct cp_heap *h, pid_t tid);

/* Hook of the target (cp_target_hooks.on_exit; ARG the heap's lane 0):
 * thread TID is at its exit stop, the process's memory still there:
 * every ring is taken now, the stacks unwound while they can be.  */
void cp_heap_uprobes_on_exit(void *arg, pid_t tid);

/* Take the records until DEADLINE (CLOCK_MONOTONIC ns, 0: none), a stop
 * (*STOP or the options'), the target's exit or exec.  Returns 0 or the
 * first internal failure; *STOPPED says whether a stop ended it.  */
int cp_heap_uprobes_run(struct cp_heap *h, uint64_t deadline,
			volatile sig_atomic_t *stop, bool *stopped);

/* Take every record left and disable the events (tracing ends: finish,
 * exec).  The threads are held or gone, so no record is still being
 * written.  */
void cp_heap_uprobes_end(struct cp_heap *h);

/* Close the events and wait until they are closed: the kernel has taken
 * its int3s out when this returns.  A close waits for the kernel's
 * grace periods (about 85 ms, for each event defined in tracefs, 4 as a
 * rule, or each event of the uprobe PMU), so it is done with the threads
 * running.  */
void cp_heap_uprobes_close(struct cp_heap *h);

void cp_heap_uprobes_free(struct cp_heap_uprobes *u);

#endif
