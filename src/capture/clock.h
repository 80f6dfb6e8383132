/* A thread's CPU clock: a perf task-clock event on one thread of the
 * target, counting only the time the thread runs on a CPU and writing a
 * record to a small ring every PERIOD of it.  Its descriptor turns
 * readable (poll, epoll) at each record (a clock with copies: at half
 * its ring), so the sampler learns that a
 * thread is due for a sample when it is, without reading anything at a
 * tick: a thread waiting for a CPU or asleep costs nothing, and a thread
 * that ran K periods since its last sample says K.  The events are the
 * kernel's software clock (no hardware counter); perf_event_open may
 * still be refused (perf_event_paranoid for an unprivileged user, a
 * seccomp filter), and then the sampler reads run times at its ticks as
 * before.  Internal to libcprof: the target closes a thread's clock when
 * the thread goes.  */
#ifndef CPROF_CLOCK_H
#define CPROF_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "capture/perf_ring.h"
#include "cprof/target.h"

/* Open TH's clock for PERIOD_NS of CPU time per record, disabled (see
 * cp_thread_clock_enable).  COPY not 0: each record also carries the
 * thread's registers and COPY bytes of its stack from the stack pointer
 * up, copied by the kernel at the period's end (as perf record
 * --call-graph dwarf takes them), so that the sample needs no stop; the
 * ring then holds a few dozen such records, and is readable once half
 * full.  Returns its descriptor, or
 * -CP_E_SYS (errno kept) with TH->no_clock set so that it is not asked
 * again.  A clock with copies refused is opened bare (TH->clock_copy
 * 0).  */
int cp_thread_clock_open(struct cp_thread *th, uint64_t period_ns,
			 uint32_t copy);

/* Start (ON) or stop TH's clock counting.  Records left from before are
 * dropped on starting.  Returns 0 or -CP_E_SYS.  */
int cp_thread_clock_enable(struct cp_thread *th, bool on);

/* The periods TH ran since the last call (its records, lost ones
 * included), consumed.  Reads the shared ring only: no system call.  */
uint64_t cp_thread_clock_take(struct cp_thread *th);

/* Take TH's records as cp_thread_clock_take does, giving FN each sample
 * with its copy, in order; a record that wraps around the ring's end is
 * put together in *SCRATCH (grown; *SCRATCH_CAP its size).  A sample
 * (capture/perf_ring.h) has the thread's registers (perf's order,
 * CP_REGS_PERF_MASK; NULL when the period ended in a kernel thread's
 * context) and its stack from their stack pointer, taken at TIME_NS
 * (CLOCK_MONOTONIC); its ID is 0; valid during the callback only.
 * Returns the periods, the lost ones included (they have no sample).  */
uint64_t cp_thread_clock_take_samples(
	struct cp_thread *th, unsigned char **scratch, size_t *scratch_cap,
	void (*fn)(void *arg, const struct cp_perf_sample *sample),
	void *arg);

/* Whether TH's clock has records not taken yet.  No system call.  */
bool cp_thread_clock_unread(const struct cp_thread *th);

/* Close TH's clock, if it has one (a thread that goes, a detach).  */
void cp_thread_clock_close(struct cp_thread *th);

/* A thread that goes takes its clock with it, but records of a clock
 * with copies wait in its ring for the sampler's next take (half a ring
 * of them, or a drain tick's worth): the target keeps such a clock,
 * records and all, instead of closing it.  These are the clocks kept
 * (*COUNT of them), as the threads' entries were when they went (only
 * their TID and clock fields hold), for their owner to take; then
 * cp_target_retired_clocks_close closes them all.  Implemented by the
 * target (capture/target.c).  */
struct cp_thread *cp_target_retired_clocks(struct cp_target *target,
					   size_t *count);
void cp_target_retired_clocks_close(struct cp_target *target);

#endif
