/* The sampler: the timer loop.  At each tick it stops the threads that
 * matter, snapshots them, resumes them, and only then unwinds the copies and
 * adds the stacks to the profile (symbolizing each new address once).  */
#ifndef CPROF_SAMPLER_H
#define CPROF_SAMPLER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cprof/capture.h"
#include "cprof/profile.h"
#include "cprof/symbols.h"
#include "cprof/target.h"
#include "cprof/unwinder.h"

struct cp_sampler_stats;

struct cp_sampler_options {
	unsigned frequency;      /* ticks per second, 1..10000 */
	double duration;         /* seconds; <= 0: until stopped or exit */
	bool wall;               /* sample sleeping threads too; those off
				  * the CPU are read without stopping them
				  * (the stacks of threads that did not run
				  * are repeated) */
	size_t max_depth;        /* frames kept per stack */
	enum cp_unwind_mode unwind_mode;
	/* Set (by a signal handler of the caller) to end the run.  The
	 * sampler blocks SIGINT, SIGTERM, SIGHUP and SIGCHLD while it works and
	 * unblocks them only while waiting, so a signal is never missed.  */
	volatile sig_atomic_t *stop;
	/* Called about four times a second, for a progress line.  */
	void (*progress)(void *arg, const struct cp_sampler_stats *stats);
	void *progress_arg;
	/* Called for every sample in time order, once the frames of its
	 * stack are named (symbolization runs on its own thread, so a sample
	 * waits a little), for streaming writers (--format raw, trace).
	 * T_NS: when the thread was stopped, in ns since the first tick.
	 * WEIGHT: the ticks the sample stands for (the count it adds to the
	 * profile: more than 1 when ticks found the thread on its way to a
	 * stop asked for earlier).  */
	void (*on_sample)(void *arg, uint64_t t_ns, pid_t tid, uint32_t stack,
			  uint64_t weight);
	void *on_sample_arg;
	/* Called once the last sample is taken, before the sampler waits for
	 * the names of the frames: the caller detaches the target here (the
	 * sampler touches it no more).  May be NULL.  */
	void (*at_end)(void *arg);
	void *at_end_arg;
	/* Sample a thread only while GATE admits it (profiling a function:
	 * while it is inside the function; may be NULL: every selected
	 * thread).  Asked at a tick with HELD and CPU_NS NULL (is TID
	 * inside?); in CPU mode with *CPU_NS the thread's CPU time
	 * (schedstat), which GATE replaces by the part of it to count (the
	 * CPU time run inside, a clock that starts at 0 and runs only
	 * while the thread is inside), so a sample weighs only time inside;
	 * and once the thread is held in the stop, or read without one
	 * (--wall), with HELD its copy: a thread that left meanwhile (or
	 * stands on a boundary, a trap of GATE's own not yet taken) is not
	 * sampled (the time it was credited with goes to its next sample),
	 * and GATE may mend the stack copy (a return address of its own put
	 * back to the real one) before it is unwound.  */
	bool (*gate)(void *arg, pid_t tid, struct cp_snapshot *held,
		     uint64_t *cpu_ns);
	void *gate_arg;
	/* Called, from the sampling thread, the first time a tick is
	 * missed for want of a CPU (the thread woke a period or more after
	 * the time it asked for; not a tick missed because work of ours ran
	 * past it): the caller may give the thread a better scheduling
	 * class.  May be NULL.  */
	void (*on_late)(void *arg);
	void *on_late_arg;
};

/* A log-linear histogram of durations in nanoseconds (about 3 %
 * resolution).  */
#define CP_HIST_SUB 32
#define CP_HIST_EXP 40
struct cp_hist {
	uint64_t buckets[CP_HIST_EXP * CP_HIST_SUB];
	uint64_t count;
	uint64_t sum_ns;
	uint64_t max_ns;
};

void cp_hist_add(struct cp_hist *hist, uint64_t ns);
/* The value at quantile Q (0..1), in nanoseconds; 0 when empty.  */
uint64_t cp_hist_quantile(const struct cp_hist *hist, double q);

struct cp_sampler_stats {
	double elapsed;           /* seconds since the first tick */
	double duration;          /* requested, <= 0 when open-ended */
	uint64_t samples;         /* stacks recorded */
	/* Deadlines that came due, and those skipped because we were late.
	 * In CPU mode a thread with a clock (threads_clocked) has no
	 * deadline of its own: each period it ran counts, and the periods
	 * beyond one that a wake-up of ours found are missed.  */
	uint64_t ticks_scheduled;
	uint64_t ticks_missed;
	/* CPU mode: the most threads whose own CPU clock (a perf task-clock
	 * event) told when they were due, instead of a look at each tick.  */
	uint64_t threads_clocked;
	/* CPU mode: samples taken without a stop, from the registers and
	 * stack the kernel copied into a thread's clock record at the
	 * period's end; threads whose copies fell short of their frames
	 * (a deeper stack than the copy), sampled by stops after.  */
	uint64_t samples_copied;
	uint64_t threads_copy_short;
	/* Copies that fell short of their thread's stack: not recorded,
	 * their ticks go to the thread's next sample (of a larger copy, or
	 * a stop's).  */
	uint64_t copies_short;
	uint64_t threads_seen;
	size_t threads_now;
	uint64_t unwind_errors;   /* snapshots whose pc could not be read */
	/* CPU mode: ticks that found a thread runnable that had run less
	 * than half a tick's CPU time since its last sample (it was waiting
	 * for a CPU): not stopped, not counted.  */
	uint64_t ticks_waiting;
	/* --wall, threads off the CPU, sampled without a ptrace stop (see
	 * "Blocked threads" in cprof-attach(1)); each counts ticks.  */
	uint64_t samples_unchanged; /* had not run: its last stack again */
	uint64_t samples_unstopped; /* read from /proc and a stack copy */
	uint64_t rbp_recovered;     /* of those, rbp found on the stack */
	uint64_t samples_truncated; /* of those, frames ending where a
				     * register was needed (a stop would
				     * have broken the thread's wait) */
	uint64_t blocked_stops;     /* blocked threads stopped after all:
				     * unwinding needed their registers
				     * and their wait survives a stop */
	uint64_t torn_reads;        /* the thread ran while its stack was
				     * copied: the tick goes to its next
				     * sample */
	/* Stops of ours that made a wait the kernel does not restart fail
	 * with EINTR (a thread that entered it as it was being stopped):
	 * its result was turned back into a restart.  */
	uint64_t eintr_undone;
	/* Per sample, how long the thread was held stopped: from its stop
	 * being reported to its resumption.  */
	struct cp_hist stopped;
	/* Per sample, from asking the thread to stop to its stop being
	 * reported (the thread runs on meanwhile, or waits for a CPU).  */
	struct cp_hist stop_latency;
	/* Per tick: from its deadline to the timer read (our wake-up
	 * latency), and the tick's own work (stops, copies, unwinds).  */
	struct cp_hist tick_late;
	struct cp_hist tick_work;
	bool target_exited;
	bool interrupted;         /* ended by *stop */
};

/* A sampler, stepped by its caller: cp_sampler_new starts the clock,
 * each cp_sampler_step takes the ticks that come due until a deadline,
 * a stop request or the target's exit, and returns; between steps the
 * target runs untouched (ticks due meanwhile count as missed).  The
 * profile being filled can be swapped for a fresh one between two steps
 * (cp_sampler_swap), its frames named while sampling goes on.  */
struct cp_sampler;

/* Why a step returned.  */
enum cp_sampler_end {
	CP_SAMPLER_DEADLINE, /* the step's UNTIL_NS came */
	CP_SAMPLER_DURATION, /* OPTIONS->duration is over */
	CP_SAMPLER_STOPPED,  /* a stop flag was set */
	CP_SAMPLER_EXITED,   /* every thread of the target exited */
};

/* A sampler of TARGET into PROFILE with OPTIONS (copied; its duration
 * counts from now, its stop flag is checked as well as each step's).
 * TARGET, UNWINDER, SYMBOLS and PROFILE are borrowed until
 * cp_sampler_free; SYMBOLS is used only by the sampler's symbolizer
 * thread until cp_sampler_finish returns.  Returns 0 or a -CP_E_* code.  */
int cp_sampler_new(struct cp_target *target, struct cp_unwinder *unwinder,
		   struct cp_symbols *symbols, struct cp_profile *profile,
		   const struct cp_sampler_options *options,
		   struct cp_sampler **out);

/* Take ticks until UNTIL_NS (CLOCK_MONOTONIC ns; 0: none), the duration
 * ends, *STOP (may be NULL) or the options' stop flag is set, or the
 * target exits; *END (may be NULL) says which.  SIGINT, SIGTERM, SIGHUP
 * and SIGCHLD are blocked while it works and unblocked only while it
 * waits, so a handler setting *STOP is never missed.  Returns 0 or a
 * -CP_E_* code for a failure of ours (the samples taken are kept).  */
int cp_sampler_step(struct cp_sampler *sampler, uint64_t until_ns,
		    volatile sig_atomic_t *stop, enum cp_sampler_end *end);

/* Thread TID of the target is at its first stop, having run nothing
 * (the target's on_birth hook): give it its clock now, so that its CPU
 * time counts from its first instruction.  */
void cp_sampler_born(struct cp_sampler *sampler, pid_t tid);

/* The counters so far; borrowed.  */
const struct cp_sampler_stats *cp_sampler_stats(const struct cp_sampler *s);

/* The profile being filled; borrowed.  */
struct cp_profile *cp_sampler_profile(struct cp_sampler *sampler);

/* Fill FRESH from the next tick on; the profile filled so far retires:
 * its frames are named while sampling goes on, and cp_sampler_retired
 * hands it back.  Returns 0, -CP_E_BUSY while an earlier one has not been
 * handed back, or -CP_E_INVAL when samples are streamed (on_sample: its
 * stack ids are of one profile) or the sampler is finished.  */
int cp_sampler_swap(struct cp_sampler *sampler, struct cp_profile *fresh);

/* The retired profile once its frames are named (the caller owns it
 * again), else NULL; with WAIT, wait for the names (slow: debug
 * information; sampling does not go on meanwhile).  */
struct cp_profile *cp_sampler_retired(struct cp_sampler *sampler, bool wait);

/* No more ticks: take the stops asked for at the last tick that have
 * not come yet and let those threads go now, so that none waits in a
 * stop of ours while the target is kept attached and idle (a console
 * after "sample stop").  Call it while TARGET is still attached, before
 * cp_sampler_finish; not needed before a detach, which takes those
 * stops itself.  */
void cp_sampler_settle(struct cp_sampler *sampler);

/* No more ticks: wait until every frame is named, then hand the
 * streamed samples still held to on_sample.  The target is not touched
 * (detach it first: names can take long).  Returns a profile still
 * retiring, named now (the caller owns it), else NULL.  */
struct cp_profile *cp_sampler_finish(struct cp_sampler *sampler);

/* Free SAMPLER (finishing it first if needed; a profile still retiring
 * is freed).  NULL is fine.  */
void cp_sampler_free(struct cp_sampler *sampler);

/* All of the above in one call: new, one step until the duration ends,
 * *STOP is set or the target exits, at_end, finish.  Sample TARGET into PROFILE until the duration ends, *STOP is set or the
 * target exits.  STATS is filled in (also while running, for progress).
 * Returns 0 or a -CP_E_* code for a failure of ours; the target is never
 * detached here.  */
int cp_sampler_run(struct cp_target *target, struct cp_unwinder *unwinder,
		   struct cp_symbols *symbols, struct cp_profile *profile,
		   const struct cp_sampler_options *options,
		   struct cp_sampler_stats *stats);

#endif
