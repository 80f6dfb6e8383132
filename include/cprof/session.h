/* The session: one attachment to one target, driven step by step.
 *
 * A session owns the attachment (attach to a running process or launch a
 * command), the target's address space as the unwinder and the
 * symbolizer see it, and the capture engine.  On one attachment a caller
 * (a CLI, a script interpreter, a continuous-profiling loop, a program
 * embedding libcprof) samples for a window, takes the profile, samples
 * again with other settings, dumps the stacks, switches heap tracing on
 * and off, and detaches — in any order, any number of times, without
 * attaching again.  Nothing here owns the process's control flow: every
 * call returns when its deadline passes, the caller's stop flag is set,
 * or the target exits; nothing installs a signal handler.  The library
 * never prints: problems on the way reach the warn callback.
 *
 *   cp_session_new -> cp_session_attach | cp_session_launch
 *     -> (cp_session_sample_start, cp_session_sample_run ...,
 *         cp_session_take_profile ..., cp_session_sample_stop
 *        | cp_session_dump
 *        | cp_session_heap_start, cp_session_heap_run ...,
 *          cp_session_heap_stop) ...
 *     -> cp_session_detach -> cp_session_free
 *
 * Every way out — cp_session_detach, cp_session_free, an error — leaves
 * the target running, detached, every byte written into it restored.  */
#ifndef CPROF_SESSION_H
#define CPROF_SESSION_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "cprof/dump.h"
#include "cprof/heap.h"
#include "cprof/profile.h"
#include "cprof/sampler.h"

struct cp_session;

struct cp_session_config {
	/* Separate debug files: searched first (cp_symbols_options).  */
	const char *const *debuginfo_dirs;
	size_t n_debuginfo_dirs;
	bool no_demangle;       /* keep mangled names */
	bool no_dwarf;          /* symbol tables only: no inlined frames,
				 * no source positions */
	/* Follow fork children from the attach or launch on (heap tracing
	 * of a launched command, which starts before the command runs);
	 * otherwise only while heap tracing is on.  */
	bool follow_forks;
	/* How a stopped thread is unwound, chosen once for the session.  */
	enum cp_unwind_mode unwind_mode;
	int verbose;
	/* The nice value the calling thread takes while it samples or
	 * traces the heap, when allowed (root, CAP_SYS_NICE): ticks must
	 * not queue behind the target's busy threads, and a thread we hold
	 * stopped must not wait for us to get a CPU back.  With it, a
	 * scheduler slice of 100 us is asked for (sched_setattr), so that a
	 * tick's wake-up is not left waiting behind a busy thread until
	 * the scheduler's next tick.  0: unchanged.  cprof-attach uses
	 * -10.  */
	int nice;
	/* With a nice value: when the calling thread, sampling at 1000 Hz
	 * or less, takes the SCHED_DEADLINE class instead, with a quarter
	 * of a CPU reserved (cp_session_deadline), if the kernel allows it.
	 * 0: from the start when the machine has more runnable threads
	 * than CPUs already (/proc/loadavg), else once a tick is missed for
	 * want of a CPU (cp_sampler_options.on_late); 1: from the start of
	 * sampling; -1: never.  */
	int sched_deadline;
	/* One line of text for each problem met (a corrupt debug file, a
	 * build-id mismatch); may be NULL.  */
	void (*warn)(void *arg, const char *message);
	void *warn_arg;
	/* Set (by a second Ctrl-C, say) to give up every wait at once:
	 * ptrace waits end, and only what must be restored is restored.
	 * May be NULL.  */
	volatile sig_atomic_t *cancel;
};

/* A session with nothing attached, into *OUT.  CONFIG is copied (the
 * strings it points to are borrowed until cp_session_free).  Returns 0 or
 * -CP_E_NOMEM.  */
int cp_session_new(const struct cp_session_config *config,
		   struct cp_session **out);

/* Attach to process PID: every thread, or only TIDS (NTIDS > 0).  New
 * threads are followed (unless DUMP_ONLY: a one-shot dump stops the
 * threads there are now).  On -CP_E_PERM/-CP_E_TRACED *TRACER (may be
 * NULL) is set to another tracer's pid when there is one.  Returns 0 or
 * a -CP_E_* code (the session stays empty then).  */
int cp_session_attach(struct cp_session *session, pid_t pid,
		      const pid_t *tids, size_t ntids, bool dump_only,
		      pid_t *tracer);

/* Start ARGV (searched in PATH) as our child, seized before it runs its
 * first instruction.  Returns 0, -CP_E_EXEC (errno: ENOENT not found,
 * EACCES/ENOEXEC not executable) or another -CP_E_* code.  */
int cp_session_launch(struct cp_session *session, char *const argv[]);

/* Is a target attached?  */
bool cp_session_attached(const struct cp_session *session);

/* The target's pid, 0 when nothing is attached.  */
pid_t cp_session_pid(const struct cp_session *session);

/* Has every thread of the target exited?  */
bool cp_session_target_exited(const struct cp_session *session);

/* Did the calling thread take the configured nice value?  */
bool cp_session_niced(const struct cp_session *session);

/* Did the calling thread sample under SCHED_DEADLINE in the current or
 * last sampling run (see cp_session_config.sched_deadline)?  Then its
 * reservation: *RUNTIME_NS of CPU per *PERIOD_NS (16 ms, or the tick
 * if longer), taken *AFTER_NS after the run began (0: from its start).  */
bool cp_session_deadline(const struct cp_session *session,
			 uint64_t *runtime_ns, uint64_t *period_ns,
			 uint64_t *after_ns);

/* The attached target (for what the session does not wrap: its thread
 * list, cp_target_set_cancel).  Borrowed; NULL when nothing is
 * attached.  */
struct cp_target *cp_session_target(struct cp_session *session);

/* ------------------------------------------------------------ sampling */

/* Start sampling with OPTIONS (frequency, --wall, depth, on_sample; its
 * duration and stop flag are ignored: cp_session_sample_run takes them)
 * into the session's profile, created empty when there is none.  Samples
 * add to what the profile holds already (cp_session_reset empties it).
 * The first tick comes one period from now.  Returns 0, -CP_E_BUSY when
 * sampling or heap tracing is on, -CP_E_GONE when nothing is attached or
 * the target exited, or another -CP_E_* code.  */
int cp_session_sample_start(struct cp_session *session,
			    const struct cp_sampler_options *options);

/* Why a run returned.  */
enum cp_session_end {
	CP_SESSION_DEADLINE,  /* UNTIL_NS came */
	CP_SESSION_STOPPED,   /* *STOP was set */
	CP_SESSION_EXITED,    /* every thread of the target exited */
	CP_SESSION_EXEC,      /* heap tracing: the target called execve */
	CP_SESSION_BREAK,     /* cp_session_wait: a breakpoint was hit */
};

/* Sample until UNTIL_NS (CLOCK_MONOTONIC ns; 0: no deadline), *STOP is
 * set (STOP may be NULL) or the target exits; *END (may be NULL) says
 * which.  Signals SIGINT, SIGTERM, SIGHUP and SIGCHLD are blocked while
 * it works and unblocked only while it waits, so a handler setting *STOP
 * is never missed.  Returns 0 or a -CP_E_* code for a failure of ours
 * (the samples taken are kept).  */
int cp_session_sample_run(struct cp_session *session, uint64_t until_ns,
			  volatile sig_atomic_t *stop,
			  enum cp_session_end *end);

/* Take the profile filled so far and go on into a fresh one, without
 * missing a tick: the sampler switches profiles between two ticks, and
 * the frames of the old one are named while sampling goes on.  Returns
 * the old profile, every frame named (the caller frees it), or NULL when
 * out of memory.  May be called while sampling is on or off.  */
struct cp_profile *cp_session_take_profile(struct cp_session *session);

/* Stop sampling: no more ticks, every frame named.  The profile stays in
 * the session (cp_session_profile) for writing.  Returns 0 or the first
 * -CP_E_* error the sampler met.  */
int cp_session_sample_stop(struct cp_session *session);

/* Counters of the current (or last) sampling run; zero before the
 * first.  Borrowed.  */
const struct cp_sampler_stats *cp_session_sample_stats(
	const struct cp_session *session);

/* The session's profile (samples of every window since the last reset
 * or take); borrowed, NULL before the first sampling.  Its frames are
 * all named only when sampling is off.  */
struct cp_profile *cp_session_profile(struct cp_session *session);

/* The profile the next sampling fills, created empty now when there is
 * none (for a writer that must know it before the first sample: a
 * streaming format's recorder); borrowed; NULL when out of memory.  */
struct cp_profile *cp_session_prepare_profile(struct cp_session *session);

/* The symbolizer (for its counters, cp_symbols_stats); borrowed, NULL
 * when nothing was attached.  Not to be used while sampling or heap
 * tracing is on: its thread owns it then.  */
struct cp_symbols *cp_session_symbols(struct cp_session *session);

/* Drop the samples collected so far (a new, empty profile).  Returns 0
 * or -CP_E_NOMEM.  */
int cp_session_reset(struct cp_session *session);

/* ---------------------------------------------------------------- dump */

/* Stop every thread once, copy registers and stacks, resume them, and
 * unwind and name the copies into *OUT (free with cp_dump_free).  Up to
 * MAX_DEPTH frames a thread.  Returns 0, -CP_E_BUSY while sampling or
 * heap tracing is on, or a -CP_E_* code.  */
int cp_session_dump(struct cp_session *session, size_t max_depth,
		    struct cp_dump **out);

/* ---------------------------------------------------------------- heap */

/* Set the allocator breakpoints (OPTIONS: depth, force_step; its
 * duration and stop flag are ignored) and start heap tracing into a new
 * heap table.  A launched target is traced from before its first
 * library constructor.  Returns 0, -CP_E_NOALLOC, -CP_E_BUSY, -CP_E_GONE
 * or another -CP_E_* code (nothing is left written then).  */
int cp_session_heap_start(struct cp_session *session,
			  const struct cp_heap_options *options);

/* Trace until UNTIL_NS (0: no deadline), *STOP, the target's exit or
 * exec; *END says which.  Returns 0 or a -CP_E_* code.  */
int cp_session_heap_run(struct cp_session *session, uint64_t until_ns,
			volatile sig_atomic_t *stop, enum cp_session_end *end);

/* Stop heap tracing: every byte written is restored (and read back), the
 * target stays attached.  The trace is kept for cp_session_heap (its
 * frames named once the target is detached or at the next
 * cp_session_heap_resolve).  Returns 0 or -CP_E_SYS when a byte could
 * not be restored (said through warn).  */
int cp_session_heap_stop(struct cp_session *session);

/* Name the frames of the last heap trace (slow: debug information).
 * Call after cp_session_heap_stop, best after detaching.  */
void cp_session_heap_resolve(struct cp_session *session);

/* The last heap trace, or NULL; borrowed until the next
 * cp_session_heap_start or cp_session_free.  Its stacks are in
 * cp_session_heap_profile.  */
struct cp_heap *cp_session_heap(struct cp_session *session);
struct cp_profile *cp_session_heap_profile(struct cp_session *session);

/* --------------------------------------------------------- breakpoints
 *
 * Breakpoints are triggers for the caller: an int3 at a function's first
 * instruction (after its prologue when DWARF says where the body begins,
 * as a debugger does) or at the first address of a source line, passed
 * with the displaced-instruction machinery heap tracing uses (emulated,
 * else stepped with the original byte back for that one instruction: a
 * thread passing the address during that step is not counted).  A thread that reaches an enabled
 * breakpoint while the caller waits in cp_session_wait is held there and
 * reported; reached at any other time (during cp_session_sample_run,
 * heap_run, or between calls) the hit is counted and the thread goes on
 * at once.  Breakpoints live on through sampling and heap tracing (both
 * may be on), are taken out of fork children, are moved at an exec (the
 * image they were in is gone; cp_session_breaks shows those not found in
 * the new one pending), and
 * every byte is restored at cp_session_break_delete, detach and free.
 * They belong to the attachment: after cp_session_detach the list is
 * empty.  Breakpoints at one address share its byte.  At an exec each
 * is put into the new image where its location is found there, before
 * the first instruction runs (the program's own functions: its
 * libraries are not mapped yet; those stay pending).  A breakpoint set
 * on a command launched but not exec'ed yet is pending until then.  */

struct cp_session_break {
	int id;                /* 1, 2, ... in order of insertion, never
				* reused */
	char location[256];    /* as given: "FUNC" or "FILE:LINE" */
	char function[256];    /* the function it is in */
	char file[256];        /* its source file ("" when unknown) */
	unsigned line;         /* its source line (0 when unknown) */
	char module[256];      /* the file of the module it is in */
	uint64_t addr;         /* where the int3 is; 0: pending (exec) */
	bool temporary;        /* deleted after its first reported hit */
	bool enabled;
	uint64_t hits;         /* times a thread reached it while enabled */
	uint64_t passed;       /* of those, hits nobody waited for */
};

/* Set a breakpoint at LOCATION: a function name ("handle_request", a
 * C++ or Rust name as cprof prints it, with or without its parameter
 * list, or a mangled one; the executable's first, then the libraries'),
 * or "FILE:LINE" (FILE matched against the end of the source file names
 * of the debug information, at a '/'; the first line at or after LINE
 * that has code).  *ID (may be NULL) gets its number.  Returns
 * 0, -CP_E_NOSYM (nothing there), -CP_E_GONE (nothing attached),
 * -CP_E_INVAL (a breakpoint of someone else is there already: an int3 in
 * the code; or the instruction there is a system call, which cannot be
 * stepped past), or -CP_E_SYS.  */
int cp_session_break_insert(struct cp_session *session,
			    const char *location, bool temporary, int *id);

/* Take breakpoint ID out (its byte restored).  Returns 0 or -CP_E_INVAL
 * (no such breakpoint).  */
int cp_session_break_delete(struct cp_session *session, int id);

/* Disable (the byte restored; hits no longer counted) or enable
 * breakpoint ID.  Returns 0 or -CP_E_INVAL.  */
int cp_session_break_enable(struct cp_session *session, int id,
			    bool enabled);

/* The breakpoints, in order of ID; borrowed until the next breakpoint
 * call.  */
const struct cp_session_break *cp_session_breaks(
	const struct cp_session *session, size_t *count);

/* A thread held at a breakpoint.  */
struct cp_session_hit {
	int id;                /* the breakpoint */
	pid_t tid;             /* the thread held there */
	uint64_t pc;           /* the breakpoint's address */
};

/* Wait until a thread reaches an enabled breakpoint (*END is
 * CP_SESSION_BREAK, *HIT says which, the thread is held until
 * cp_session_continue), UNTIL_NS comes (0: no deadline), *STOP is set, or
 * the target exits.  Sampling and heap tracing, when on, go on while it
 * waits.  A temporary breakpoint is deleted when its hit is reported.
 * While a thread is held (reported, not yet continued) it returns that
 * hit again at once.
 * Returns 0, -CP_E_GONE (nothing attached) or another -CP_E_* code.  */
int cp_session_wait(struct cp_session *session, uint64_t until_ns,
		    volatile sig_atomic_t *stop, enum cp_session_end *end,
		    struct cp_session_hit *hit);

/* The held thread (the last hit reported by cp_session_wait, until
 * cp_session_continue), or NULL.  */
const struct cp_session_hit *cp_session_held(const struct cp_session *session);

/* Registers of the held thread as they are at the breakpoint (its pc is
 * the breakpoint's address).  Returns 0 or -CP_E_NOTHELD.  */
int cp_session_held_regs(struct cp_session *session,
			 struct user_regs_struct *regs);

/* The stack of thread TID (0: the held thread) into *OUT, one thread in
 * the dump's format (free with cp_dump_free): the held thread is
 * unwound where it is held; another thread is stopped for the moment of
 * its copy.  Up to MAX_DEPTH frames.  Works while sampling or heap
 * tracing is on.  The frames' names are borrowed from the session (valid
 * until the next attach or cp_session_free).  Returns 0, -CP_E_NOTHELD
 * (TID 0 and no thread held), -CP_E_INVAL (no such thread) or another
 * -CP_E_* code.  */
int cp_session_backtrace(struct cp_session *session, pid_t tid,
			 size_t max_depth, struct cp_dump **out);

/* Let the held thread go on past its breakpoint.  Returns 0 or
 * -CP_E_NOTHELD.  */
int cp_session_continue(struct cp_session *session);

/* ------------------------------------------------- profile a function */

/* Like cp_session_sample_start, but a thread is sampled only while it is
 * inside FUNCTION (named as for cp_session_break_insert): a breakpoint at
 * its entry marks the thread in, its return (caught as heap tracing
 * catches returns: the return address on the stack replaced for the
 * outermost call) marks it out; nested and recursive calls count once.
 * cp_session_sample_run and cp_session_sample_stop as for sampling; the
 * stop takes the breakpoint out and gives every thread inside its real
 * return address back.  Returns 0, -CP_E_NOSYM, -CP_E_BUSY or another
 * -CP_E_* code.  */
int cp_session_sample_start_in(struct cp_session *session,
			       const char *function,
			       const struct cp_sampler_options *options);

/* Counters of the function being profiled (zero otherwise).  */
struct cp_session_in_stats {
	uint64_t entries;      /* outermost calls entered */
	uint64_t returns;      /* and returned through us */
	uint64_t inside_ns;    /* CPU time of the calls returned, by the
				* threads' own clocks (schedstat) */
};
void cp_session_in_stats(const struct cp_session *session,
			 struct cp_session_in_stats *stats);

/* ---------------------------------------------------------- inspection */

/* Call FN for the name of every function symbol in the target's modules
 * that begins with PREFIX (tab completion of "break FU<TAB>"); names come
 * as cprof prints them (demangled unless no_demangle), each once.  FN
 * returns false to stop.  Returns how many names were passed, or a
 * -CP_E_* code.  */
long cp_session_functions(struct cp_session *session, const char *prefix,
			  bool (*fn)(void *arg, const char *name), void *arg);

/* The target's address space (modules for "info sharedlibrary"); NULL
 * when nothing is attached.  Borrowed.  */
struct cp_addrspace *cp_session_addrspace(struct cp_session *session);

/* When the session attached (CLOCK_MONOTONIC ns; 0: nothing attached),
 * and the CPU time cprof spent on this session's target since then: the
 * calling process's CPU time (every thread: sampling, symbolizing)
 * accumulated while attached, in ns.  */
uint64_t cp_session_attached_ns(const struct cp_session *session);
uint64_t cp_session_cpu_ns(const struct cp_session *session);

/* -------------------------------------------------------------- detach */

/* Let the target go: sampling and heap tracing are stopped first (bytes
 * restored), then every thread detached and left running.  Profiles and
 * the heap trace stay in the session.  Returns the exit status of a
 * launched command when its end was seen (a waitpid status), else -1.
 * Nothing attached: -1.  */
int cp_session_detach(struct cp_session *session);

/* Detach (if attached) and free everything.  NULL is fine.  */
void cp_session_free(struct cp_session *session);

#endif
