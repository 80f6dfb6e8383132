/* The target: a running process, its threads, and every ptrace call cprof
 * makes on it.  Nothing else in cprof calls ptrace.
 *
 * Discipline (see STYLE.md): PTRACE_SEIZE, never PTRACE_ATTACH or
 * PTRACE_O_EXITKILL; PTRACE_INTERRUPT to stop a thread; every stop we did not
 * ask for belongs to the target and is passed back unchanged (signals are
 * re-injected, group-stops are kept with PTRACE_LISTEN).  */
#ifndef CPROF_TARGET_H
#define CPROF_TARGET_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

struct cp_target;

/* One thread of the target.  Fields are read-only for callers.  */
struct cp_thread {
	pid_t tid;
	int stat_fd;          /* /proc/PID/task/TID/stat, kept open for pread */
	int run_fd;           /* /proc/PID/task/TID/sched, else schedstat,
			       * opened on first use (cp_target_thread_run),
			       * -1 before */
	bool run_sched;       /* RUN_FD is the sched file */
	bool no_run;          /* neither could be opened: not asked again */
	int clock_fd;         /* its CPU clock (capture/clock.h), -1: none */
	bool no_clock;        /* the clock was refused: not asked again */
	void *clock_ring;     /* the clock's ring, mapped */
	uint64_t clock_period;/* ns of CPU time per record */
	uint32_t clock_owner; /* the sampler whose epoll has it, 0: none */
	uint32_t clock_copy;  /* bytes of stack each record copies (with the
			       * registers), 0: a bare record */
	size_t clock_ring_bytes; /* the ring's mapped size */
	bool no_copy;         /* copies fell short of its stack: its
			       * clock stays bare (samples by stops) */
	uint32_t copy_want;   /* bytes of stack its clock's records should
			       * copy, as learned from its stack (0: not
			       * learned, the sampler's first size) */
	bool selected;        /* sampled (all threads unless -t was given) */
	bool group_stopped;   /* in a group-stop (SIGSTOP): resumed with LISTEN */
	bool interrupting;    /* a PTRACE_INTERRUPT of ours is outstanding */
	uint64_t interrupt_ns;/* CLOCK_MONOTONIC time it was sent */
	bool stopped;         /* in a ptrace-stop that we are holding */
	bool kept;            /* held for the caller (at a breakpoint):
			       * stays stopped until cp_target_unkeep */
	bool newborn;         /* auto-attached, its first stop still to come */
	bool vfork_child;     /* a vfork child sharing the target's memory,
			       * traced only until it execs or exits */
	bool zombie_leader;   /* the group leader exited while other
			       * threads live: it reports nothing more until
			       * the group ends */
	int pending_signal;   /* signal to hand back when resuming, 0 for none */
	uint64_t samples;     /* samples taken from this thread */
	char attach_state;    /* run state just before we seized it, or 0 */
	char name[16];        /* comm, read when first seen */
};

/* Raw data of one stopped thread, taken as fast as possible and handed to
 * the unwinder.  The stack copy starts a little below the stack pointer
 * (the x86-64 red zone) and ends at the end of the stack mapping or after
 * CP_TARGET_STACK_MAX bytes, whichever comes first.  */
struct cp_snapshot {
	pid_t tid;
	struct user_regs_struct regs;
	uint64_t stack_addr;       /* target address of stack[0] */
	size_t stack_len;          /* bytes valid in stack[] */
	size_t stack_cap;          /* size of the buffer */
	unsigned char *stack;      /* owned by whoever filled it; reused */
	bool copied_running;       /* taken by the kernel as the thread ran
				    * on: nothing beyond the copy may be
				    * read from the live target */
};

#define CP_TARGET_STACK_MAX (256 * 1024)

/* Flags for cp_target_attach.  */
enum {
	CP_TARGET_FOLLOW_CLONES = 1 << 0, /* seize new threads at birth */
	/* Report fork and vfork children to the on_fork hook before they
	 * run, then let them go (a vfork child, which shares our memory, is
	 * kept until it execs or exits).  */
	CP_TARGET_FOLLOW_FORKS = 1 << 1,
};

/* What a trap handler says of a SIGTRAP stop.  */
enum cp_target_trap {
	CP_TRAP_NOT_OURS, /* the target's own SIGTRAP: deliver it */
	CP_TRAP_HANDLED,  /* ours; the handler resumed the thread or, when
			   * HOLD was set, left it held */
};

/* Callbacks for programs that write into the target (heap mode).  */
struct cp_target_hooks {
	/* Thread TID stopped with SIGTRAP (int3).  It is held; with HOLD
	 * false the handler resumes it (cp_target_resume) when done, with
	 * HOLD true (every thread is being stopped) it rewinds it and leaves
	 * it held.  */
	enum cp_target_trap (*on_trap)(void *arg, pid_t tid, bool hold);
	/* A fork or vfork child CHILD of thread PARENT exists and has not
	 * run yet: undo in its memory what was written into the parent's
	 * (for a vfork child the memory is shared: leave it).  */
	void (*on_fork)(void *arg, pid_t parent, pid_t child, bool vfork);
	/* The target replaced its image (execve): what was written is
	 * gone.  */
	void (*on_exec)(void *arg);
	void *arg;
	/* A new thread TID is at its first stop, held, having run nothing
	 * of its own.  True when the hook handed it to another tracer
	 * thread (cp_target_park): it is no thread of this target any
	 * more.  May be NULL.  */
	bool (*on_birth)(void *arg, pid_t tid);
	/* Thread TID is at its exit stop (cp_target_set_exit_stops): it
	 * has run its last instruction, and the process's memory is still
	 * there (for the last thread too).  It is held, and resumed (to its
	 * end) after the hook.  May be NULL.  */
	void (*on_exit)(void *arg, pid_t tid);
};

/* Follow fork and vfork children from now on (ON), or no longer: the
 * CP_TARGET_FOLLOW_FORKS of cp_target_attach switched on an attached
 * target (heap tracing switched on and off in one session).  Every thread
 * is held for a moment to change its ptrace options.  Returns 0 or
 * -CP_E_GONE.  */
int cp_target_set_follow_forks(struct cp_target *target, bool on);

/* Seize the threads of PID.  TIDS/NTIDS, when NTIDS > 0, limits the
 * threads seized to those (each must belong to PID).  The target is not
 * stopped.  Returns 0 and a new target in *OUT, or a -CP_E_* code:
 * NOPROC, ZOMBIE, KTHREAD, SELF, PERM (errno EPERM), TRACED (the tracer in
 * *TRACER when not NULL), INVAL (a TID not in PID).  A failure half-way
 * detaches what was attached.  */
int cp_target_attach(pid_t pid, const pid_t *tids, size_t ntids,
		     unsigned flags, struct cp_target **out, pid_t *tracer);

/* Several tracer threads.  ptrace is per thread of the tracer: a
 * thread seized by one of our threads answers to that thread only, and
 * the threads it creates are born traced by it.  A lane is a target of
 * the same process whose threads another thread of ours traces, each
 * thread of the process in at most one target; every target then
 * waits for its own threads only (__WNOTHREAD), the first one too
 * (cp_target_set_own_waits).  */

/* A target of PARENT's process for the calling thread, seizing TIDS
 * (NTIDS may be 0: the lane gets threads later through cp_target_unpark)
 * with PARENT's options (new threads, fork children), its cancel flag,
 * and waits of its own.  Threads gone meanwhile are skipped.  Returns 0
 * and the lane in *OUT, or a -CP_E_* code.  */
int cp_target_lane(const struct cp_target *parent, const pid_t *tids,
		   size_t ntids, struct cp_target **out);

/* Wait only for the calling thread's own tracees (ON), or for every
 * thread's.  */
void cp_target_set_own_waits(struct cp_target *target, bool on);

/* Let thread TID, held, go: it runs on untraced, to be seized by
 * another thread of ours (nothing of ours may be in the target's memory:
 * an int3 of ours would kill it meanwhile).  Returns 0 or -CP_E_GONE.  */
int cp_target_hand_over(struct cp_target *target, pid_t tid);

/* A thread handed over while bytes of ours are in the target: parked in
 * a pause(2) with every signal blocked, so it runs nothing of its own
 * until its new tracer puts back what it had (cp_target_unpark).  */
struct cp_park {
	pid_t tid;
	struct user_regs_struct regs; /* its registers at the stop */
	uint64_t sigmask;             /* its blocked signals */
	int pending_signal;           /* a signal to deliver on resume */
};

/* Park thread TID, held, and let it go: it runs the syscall instruction
 * at SYSCALL_AT (cp_target_syscall_insn) as pause(2); 0: the one it has
 * just returned from (a new thread at its first stop, back from clone).
 * Fills *PARK, with a wait our stop broke mended to be called again.
 * Returns 0, or -CP_E_INVAL when it cannot be parked (it stays held,
 * ours), or -CP_E_GONE.  */
int cp_target_park(struct cp_target *target, pid_t tid, uint64_t syscall_at,
		   struct cp_park *park);

/* The address of a syscall instruction in process PID's code (the vDSO's
 * first, else a module's), or 0.  */
uint64_t cp_target_syscall_insn(pid_t pid);

/* Seize a thread parked by another of our threads, stop it and put back
 * its registers and signal mask, and let it run, ours.  Returns 0 or
 * -CP_E_GONE (it died meanwhile), or -CP_E_SYS.  */
int cp_target_unpark(struct cp_target *target, const struct cp_park *park);

/* Seize every thread of the process no thread of ours traces (those let
 * go by lanes, and their children), until a pass finds none; a thread
 * among PARKS (N of them), parked and never taken, gets its registers
 * and signal mask back.  For a thread listed already (its TID is that
 * of a thread that called execve), the entry is renewed.  Returns the
 * number of threads seized.  */
size_t cp_target_adopt(struct cp_target *target, const struct cp_park *parks,
		       size_t n);

/* Start ARGV (searched in PATH) as a child, seize it before it executes
 * anything of its own, and return the target with the child's PID.  The
 * child's standard streams are ours.  -CP_E_EXEC with errno set when the
 * command cannot be executed.  */
int cp_target_launch(char *const argv[], unsigned flags,
		     struct cp_target **out);

pid_t cp_target_pid(const struct cp_target *target);

/* True when the target was started by cp_target_launch.  */
bool cp_target_launched(const struct cp_target *target);

/* Threads currently known; borrowed, valid until the next call that can
 * change the thread list (any call below taking the target).  */
struct cp_thread *cp_target_threads(struct cp_target *target, size_t *count);

/* The thread TID, or NULL; borrowed like cp_target_threads.  */
struct cp_thread *cp_target_thread(struct cp_target *target, pid_t tid);

/* Threads seen since attach, including those that exited.  */
size_t cp_target_threads_seen(const struct cp_target *target);

/* True once every thread of the target has exited.  */
bool cp_target_exited(const struct cp_target *target);

/* Set when the target replaced its image with execve since the last call
 * to this function (its mappings are new).  */
bool cp_target_take_exec(struct cp_target *target);

/* How many execve calls of the target were seen since attach: a byte
 * written into one image must not be put back once this has changed.  */
uint64_t cp_target_images(const struct cp_target *target);

/* Collect and handle every pending ptrace event without blocking: new
 * threads, exits, signals (passed back), group-stops.  A thread that
 * reports the stop we asked for is resumed at once.  Returns the number
 * of events handled.  */
int cp_target_poll(struct cp_target *target);

/* Called by cp_target_serve for a thread held in the stop we asked for;
 * it must resume the thread (cp_target_resume) before returning.  */
typedef void (*cp_target_on_stop)(void *arg, pid_t tid);

/* Like cp_target_poll, but hand each thread that reports our stop to
 * ON_STOP, and keep waiting for up to SPIN_US microseconds while
 * interrupts of ours are outstanding: asleep in sigtimedwait for the
 * SIGCHLD a stop raises, so with SPIN_US > 0 the calling thread must
 * have SIGCHLD blocked (else each wait lasts the whole budget).  */
int cp_target_serve(struct cp_target *target, unsigned spin_us,
		    cp_target_on_stop on_stop, void *arg);

/* cp_target_serve, but waiting only until WANT of our stops were handed
 * to ON_STOP (what came meanwhile is collected all the same): a caller
 * that interrupted more threads than there are CPUs knows the others
 * must first get a CPU, and serves them when their SIGCHLD comes.  */
int cp_target_serve_some(struct cp_target *target, unsigned spin_us,
			 size_t want, cp_target_on_stop on_stop, void *arg);

/* Threads asked to stop that have not reported it yet.  */
size_t cp_target_interrupts_outstanding(const struct cp_target *target);

/* The run state letter of THREAD from /proc (pread on the kept fd), '?'
 * when unreadable.  Read this before interrupting: after, it is 't'.  */
char cp_target_thread_state(struct cp_target *target, struct cp_thread *thread);

/* The CPU time THREAD has run, in ns, into *NS (the first field of
 * /proc/PID/task/TID/schedstat: time on a CPU, not time waiting for one;
 * one pread on a descriptor kept open after the first call).  Returns 0,
 * or -CP_E_SYS when the kernel does not give it (no CONFIG_SCHED_INFO,
 * the thread gone, out of descriptors).  */
int cp_target_thread_cpu_ns(struct cp_target *target,
			    struct cp_thread *thread, uint64_t *ns);

/* The same, and into *VOLUNTARY how many times THREAD left a CPU of its
 * own accord so far (to sleep, or for a stop: one per stop of ours too),
 * from /proc/PID/task/TID/sched; UINT64_MAX when the kernel does not
 * give it (no CONFIG_SCHED_DEBUG: schedstat is read instead).  While it
 * does not change, a thread found runnable has not slept since.  */
int cp_target_thread_run(struct cp_target *target, struct cp_thread *thread,
			 uint64_t *ns, uint64_t *voluntary);

/* Ask thread TID to stop (PTRACE_INTERRUPT) without waiting; collect
 * the stop with cp_target_wait_any.  Interrupting every thread first and
 * then serving them in the order they stop keeps each one held only for
 * its own snapshot.  Returns 0 or -CP_E_GONE.  */
int cp_target_interrupt(struct cp_target *target, pid_t tid);

/* Wait until one of the interrupted threads is held in our stop and put
 * its TID in *TID.  Returns 0, or -CP_E_GONE when no interrupt is
 * outstanding any more (the threads exited).  */
int cp_target_wait_any(struct cp_target *target, pid_t *tid);

/* Stop THREAD and wait until it is in a ptrace-stop we hold, handling
 * whatever else it reports meanwhile.  Returns 0 or -CP_E_GONE.  May add
 * threads (clone events), so THREAD pointers obtained earlier from
 * cp_target_threads are refreshed by the caller through the TID.  */
int cp_target_stop(struct cp_target *target, pid_t tid);

/* Copy the registers and the stack of a stopped thread into SNAP (its
 * stack buffer is grown as needed).  Returns 0, -CP_E_GONE or -CP_E_SYS.  */
int cp_target_snapshot(struct cp_target *target, pid_t tid,
		       struct cp_snapshot *snap);

/* Like cp_target_snapshot, with the registers already in SNAP->regs (a
 * thread held at a trap whose registers were read): copies the stack.  */
int cp_target_snapshot_stack(struct cp_target *target, pid_t tid,
			     struct cp_snapshot *snap);

/* Let a thread stopped by cp_target_stop run again (PTRACE_CONT, or
 * PTRACE_LISTEN when it is in a group-stop).  */
int cp_target_resume(struct cp_target *target, pid_t tid);

/* Keep the stopped thread TID held for the caller (a thread at a
 * breakpoint, reported and waiting for "continue"): cp_target_resume and
 * cp_target_release_all leave it stopped.  Returns 0 or -CP_E_GONE (no
 * such thread, or it is not stopped).  */
int cp_target_keep(struct cp_target *target, pid_t tid);

/* Let the kept thread TID run again.  Returns 0 or -CP_E_GONE.  */
int cp_target_unkeep(struct cp_target *target, pid_t tid);

/* Learn where the stack of TID ends from its stack pointer SP, so later
 * snapshots copy exactly the used stack.  Reads /proc/PID/maps when needed,
 * so call it after cp_target_resume, never while the thread is held.  */
void cp_target_learn_stack(struct cp_target *target, pid_t tid, uint64_t sp);

/* Where the stack of TID ends (the end of the mapping its stack
 * pointer was learned in), 0 when not learned yet.  */
uint64_t cp_target_stack_end(struct cp_target *target, pid_t tid);

/* Stop each thread at its exit (PTRACE_O_TRACEEXIT) for the on_exit
 * hook (ON), or no longer: what a thread left for us is taken while the
 * process's memory is still there.  Every thread is held for a moment
 * to change its ptrace options.  Returns 0 or -CP_E_GONE.  */
int cp_target_set_exit_stops(struct cp_target *target, bool on);

/* Install HOOKS (copied); NULL removes them.  */
void cp_target_set_hooks(struct cp_target *target,
			 const struct cp_target_hooks *hooks);

/* Block until the next ptrace event of the target (or a signal
 * interrupts the wait) and handle it.  Returns the number of events
 * handled (1, or 0 after a signal), or -CP_E_GONE when nothing is left
 * to wait for.  */
int cp_target_wait_event(struct cp_target *target);

/* Stop every thread and hold it (new threads born meanwhile are held
 * too); traps reported meanwhile go to the on_trap hook with HOLD set.
 * Returns 0 or -CP_E_GONE when no thread is left.  */
int cp_target_hold_all(struct cp_target *target);

/* Resume every thread held by cp_target_hold_all.  */
void cp_target_release_all(struct cp_target *target);

/* True when the target has threads and every one is in a ptrace-stop
 * (held by the caller, or at a trap being handled).  */
bool cp_target_all_stopped(const struct cp_target *target);

/* True when the held thread TID has a SIGTRAP queued but not yet
 * reported (it stopped for our interrupt first).  Reads /proc.  */
bool cp_target_trap_pending(struct cp_target *target, pid_t tid);

/* Let the held thread TID take its queued signals (cp_target_trap_pending)
 * and hold it again: the trap reaches on_trap with HOLD set.  Returns 0
 * or -CP_E_GONE.  */
int cp_target_deliver_pending(struct cp_target *target, pid_t tid);

/* Execute one instruction of the held thread TID (PTRACE_SINGLESTEP) and
 * hold it again.  An instruction that faults (SIGSEGV, SIGBUS, SIGILL,
 * SIGFPE) does not complete: the thread is held before it, the fault
 * kept for its next resume.  Returns 0 or -CP_E_GONE (also when another
 * thread's execve killed TID meanwhile: cp_target_images then tells, and
 * no byte of the old image may be written).  */
int cp_target_step(struct cp_target *target, pid_t tid);

/* Registers of the held thread TID.  Return 0 or -CP_E_GONE.  */
int cp_target_get_regs(struct cp_target *target, pid_t tid,
		       struct user_regs_struct *regs);
int cp_target_set_regs(struct cp_target *target, pid_t tid,
		       const struct user_regs_struct *regs);

/* Write LEN bytes at ADDR into process PID through /proc/PID/mem, which
 * also writes read-only code pages (copy-on-write, like a debugger).  The
 * file is the one opened at attach or at the last exec event seen: once
 * an execve not yet seen has replaced the image, the write fails instead
 * of reaching the new one.  Returns 0 or -CP_E_SYS.  */
int cp_target_write_mem(pid_t pid, uint64_t addr, const void *buf,
			size_t len);

/* Read through /proc/PID/mem (sees what cp_target_write_mem wrote, and
 * pages process_vm_readv refuses).  Returns 0 or -CP_E_SYS.  */
int cp_target_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len);

/* Write to writable memory of PID (process_vm_writev: the stack).
 * Returns 0 or -CP_E_SYS.  */
int cp_target_write(pid_t pid, uint64_t addr, const void *buf, size_t len);

/* Make every wait of TARGET give up once *CANCEL is nonzero (set by the
 * caller's signal handler: "stop now").  A detach that gives up leaves the
 * threads it could not let go to the kernel, which releases them when
 * cprof exits.  */
void cp_target_set_cancel(struct cp_target *target,
			  const volatile sig_atomic_t *cancel);

/* Stop every thread, hand back pending signals and detach; the target runs
 * exactly as before (a group-stopped target stays stopped).  Safe to call
 * on an exited target.  Frees TARGET.  NULL is fine.  */
void cp_target_detach(struct cp_target *target);

/* cp_target_detach, and return the exit status of the target's leader
 * as waitpid reported it, if it was collected before or while detaching
 * (a launched command that ended is not our child to wait for any
 * more), else -1.  */
int cp_target_detach_status(struct cp_target *target);

/* Read target memory (process_vm_readv, no stop needed).  Returns the
 * number of bytes read (may be short) or -1 with errno.  */
ssize_t cp_target_read(pid_t pid, uint64_t addr, void *buf, size_t len);

#endif
