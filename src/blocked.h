/* Blocked threads in --wall mode, sampled without stopping them.
 * Internal to libcprof; used by the sampler.
 *
 * A ptrace stop of a thread asleep in a wait the kernel does not restart
 * after a stop (epoll_wait, sigtimedwait, semop, a socket with a timeout,
 * ...: signal(7)) makes that wait fail with EINTR in the target.  So the
 * sampler stops only threads that run, and for the others keeps, per
 * thread and between ticks, what this table holds:
 *
 *   - descriptors of /proc/PID/task/TID/schedstat and .../syscall, kept
 *     open so that each look is one pread;
 *   - the thread's last stack and the scheduler counters it was taken
 *     at: while they do not move, the thread has not run, and its last
 *     stack stands for the tick (one pread, no ptrace call);
 *   - after a stop of ours (which makes the thread run a little: it
 *     handles the trap and re-enters its wait), where the stop found it,
 *     so that the counters are taken again once it is back there.
 *
 * Entries are keyed by TID and dropped when the target's thread list no
 * longer has the TID (cp_blocked_prune).  */
#ifndef CPROF_BLOCKED_H
#define CPROF_BLOCKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cprof/procfs.h"

struct cp_blocked;

/* What the table remembers of one thread.  */
struct cp_blocked_thread {
	pid_t tid;
	int schedstat_fd;     /* /proc/PID/task/TID/schedstat, or -1 */
	int syscall_fd;       /* /proc/PID/task/TID/syscall, or -1 */
	uint64_t tick;        /* last tick the thread was listed (pruning) */
	uint32_t stack;       /* profile stack id of its last sample, or
			       * UINT32_MAX when there is none to repeat */
	bool has_baseline;    /* BASELINE holds the counters STACK is valid
			       * for: unchanged counters, unchanged stack */
	bool settling;        /* STACK comes from a stop of ours: take the
			       * baseline once the thread is back at SP, PC */
	struct cp_task_schedstat baseline;
	uint64_t sp, pc;      /* where the stop of STACK found the thread */
};

/* A new, empty table for process PID.  Returns NULL when out of memory. */
struct cp_blocked *cp_blocked_new(pid_t pid);

/* Close every kept descriptor and free TABLE.  NULL is fine.  */
void cp_blocked_free(struct cp_blocked *table);

/* Start tick number TICK (increasing): threads looked up from now on are
 * marked as listed in it.  */
void cp_blocked_begin_tick(struct cp_blocked *table, uint64_t tick);

/* The entry of TID, created on first sight (descriptors not yet open)
 * and marked as listed in the current tick.  Borrowed: valid until the
 * next call of cp_blocked_thread or cp_blocked_prune.  NULL when out of
 * memory.  */
struct cp_blocked_thread *cp_blocked_thread(struct cp_blocked *table,
					     pid_t tid);

/* The entry of TID, or NULL; not marked.  Borrowed like the above.  */
struct cp_blocked_thread *cp_blocked_find(struct cp_blocked *table,
					   pid_t tid);

/* Drop the entries of threads not listed in the current tick (exited).  */
void cp_blocked_prune(struct cp_blocked *table);

/* Forget every thread's stack and baseline (the target exec'ed), keeping
 * the descriptors.  */
void cp_blocked_forget_stacks(struct cp_blocked *table);

/* Read THREAD's scheduler counters: one pread.  Returns 0, -CP_E_GONE
 * (the thread exited) or -CP_E_PARSE; also -CP_E_INVAL when the kernel
 * keeps no such counters (it writes "0 0 0"), which must not be taken
 * for "did not run".  */
int cp_blocked_read_schedstat(struct cp_blocked *table,
			      struct cp_blocked_thread *thread,
			      struct cp_task_schedstat *out);

/* Read what THREAD is blocked in: one pread.  Returns 0, -CP_E_GONE or
 * -CP_E_PARSE.  */
int cp_blocked_read_syscall(struct cp_blocked *table,
			    struct cp_blocked_thread *thread,
			    struct cp_task_syscall *out);

/* True when both reads give the same counters.  */
bool cp_blocked_same_schedstat(const struct cp_task_schedstat *a,
			       const struct cp_task_schedstat *b);

#endif
