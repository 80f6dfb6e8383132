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
 *     so that the counters are taken again once it is back there;
 *   - and for a thread that blocked somewhere new, the read: pc, stack
 *     pointer and argument registers from /proc/PID/task/TID/syscall,
 *     and a copy of its stack (process_vm_readv needs no stop).
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
#include "cprof/target.h"

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

struct cp_addrspace;

/* A new, empty table for the process whose address space is SPACE
 * (borrowed; its exec epoch is watched: the stacks kept are forgotten at
 * the first tick after an exec).  Returns NULL when out of memory.  */
struct cp_blocked *cp_blocked_new(const struct cp_addrspace *space);

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

/* Forget every thread's stack and baseline (the target exec'ed, which
 * cp_blocked_begin_tick notices itself; the profile was swapped), keeping
 * the descriptors.  */
void cp_blocked_forget_stacks(struct cp_blocked *table);

/* What a look at a thread found (cp_blocked_look).  */
enum cp_blocked_look {
	CP_BLOCKED_STOP,    /* on a CPU, in a group-stop, or unreadable:
			     * stop it as before */
	CP_BLOCKED_REPEAT,  /* off the CPU since THREAD->stack was taken:
			     * that stack again */
	CP_BLOCKED_READ,    /* blocked somewhere new: READ holds its pc,
			     * stack pointer and stack, to unwind */
	CP_BLOCKED_NONE,    /* no sample this tick: it ran while its stack
			     * was copied (the copy may be torn), or it
			     * is gone */
};

/* A thread read without a stop.  */
struct cp_blocked_read {
	struct cp_snapshot snap;         /* registers in KNOWN, the stack;
					  * its buffer is reused, freed by
					  * cp_blocked_read_free */
	uint32_t known;                  /* CP_UNWIND_REG bits of the real
					  * registers of SNAP */
	struct cp_task_syscall syscall;  /* what /proc said of it */
	struct cp_task_schedstat stat;   /* its counters, unchanged across
					  * the copy */
	bool has_stat;                   /* STAT is valid */
};

/* Look at THREAD, listed in the target as LISTED, at a tick, without
 * stopping it.  One pread of its counters when it has not run since its
 * last sample (REPEAT); when it has, one of /proc/PID/task/TID/syscall,
 * and if it is blocked, a copy of its stack with process_vm_readv and the
 * counters again, to check it did not run meanwhile (READ).  After a
 * stop of ours (cp_blocked_stopped) the thread's baseline is taken once
 * it is back where the stop found it: the stop made it run.  Returns the
 * verdict, or -CP_E_NOMEM.  */
int cp_blocked_look(struct cp_blocked *table, struct cp_target *target,
		    const struct cp_thread *listed,
		    struct cp_blocked_thread *thread,
		    struct cp_blocked_read *read);

/* THREAD was sampled from READ into profile stack STACK: repeat it while
 * its counters stay as READ found them.  */
void cp_blocked_read_done(struct cp_blocked_thread *thread, uint32_t stack,
			  const struct cp_blocked_read *read);

/* THREAD was sampled in a stop of ours that found it at SP, PC, into
 * profile stack STACK.  */
void cp_blocked_stopped(struct cp_blocked_thread *thread, uint32_t stack,
			uint64_t sp, uint64_t pc);

/* Is THREAD still where READ found it (its counters unchanged)?  One
 * pread; false when unknown.  */
bool cp_blocked_unmoved(struct cp_blocked *table,
			struct cp_blocked_thread *thread,
			const struct cp_blocked_read *read);

/* Free the stack buffer of READ.  */
void cp_blocked_read_free(struct cp_blocked_read *read);

#endif
