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
	 * stopped must not wait for us to get a CPU back.  0: unchanged.
	 * cprof-attach uses -10.  */
	int nice;
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
