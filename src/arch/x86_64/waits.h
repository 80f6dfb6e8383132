/* Which waits in the kernel a ptrace stop breaks, and how to undo it.
 * Internal to libcprof: the sampler decides with it whether a blocked
 * thread may be stopped, and mends a wait its stop broke; every stop of
 * ours (the target module's detach and hold_all included) can use the
 * same mending.
 *
 * A thread stopped by PTRACE_INTERRUPT while it waits in a system call
 * goes through the kernel's signal path.  Most waits then return a
 * restart code (-ERESTARTSYS, -ERESTARTNOHAND, -ERESTART_RESTARTBLOCK)
 * and, as no handler runs, the kernel calls them again: the program sees
 * nothing.  A few return -EINTR instead (signal(7), "Interruption of
 * system calls and library functions by stop signals"): epoll_wait,
 * sigtimedwait, semop, io_getevents, and socket calls when a timeout is
 * set with SO_RCVTIMEO or SO_SNDTIMEO.  The program then sees EINTR
 * although no signal came: our stop is the cause.  x86-64 only.  */
#ifndef CPROF_WAITS_H
#define CPROF_WAITS_H

#include <stdbool.h>
#include <sys/types.h>
#include <sys/user.h>

#include "cprof/procfs.h"

/* Would a ptrace stop of a thread found in SC (read from
 * /proc/PID/task/TID/syscall) go unnoticed by it?  True only for waits
 * known to be restarted after a stop: nanosleep, clock_nanosleep, poll,
 * ppoll, select, pselect6, futex, futex_waitv, wait4, waitid, pause,
 * rt_sigsuspend, restart_syscall, flock, fcntl; read and write and their
 * variants only on a pipe, an anonymous-inode descriptor (eventfd,
 * signalfd, inotify, timerfd) or a device of /dev (found through
 * /proc/PID/fd/FD: a socket with a timeout fails with EINTR, a FUSE file
 * may send its daemon an interrupt); and a thread off the CPU outside a
 * system call.  Every other call, known or not (epoll_wait, sigtimedwait,
 * semop, msgrcv, io_getevents, io_uring_enter, accept, recv, connect,
 * ...), is taken as one that a stop would break.  */
bool cp_waits_stop_is_harmless(pid_t pid, const struct cp_task_syscall *sc);

/* Does system call NR fail with EINTR, rather than a restart code, when
 * a ptrace stop interrupts it and no handler runs, having done nothing,
 * so that calling it again with the same arguments is what it would have
 * done without the stop?  epoll_wait, epoll_pwait, epoll_pwait2,
 * rt_sigtimedwait, semop, semtimedop, io_getevents, io_pgetevents, and
 * the socket calls that fail so when a timeout is set (accept, accept4,
 * recvfrom, recvmsg, recvmmsg, sendto, sendmsg, sendmmsg, and read,
 * readv, write, writev on a socket).  Not connect (a second call fails
 * with EALREADY).  */
bool cp_waits_eintr_on_stop(long nr);

/* REGS are those of a thread held in a stop of ours (PTRACE_INTERRUPT).
 * If the stop made one of the waits above fail with EINTR (orig_rax is
 * the call, rax is -EINTR: the thread is on its way out of the call),
 * set rax to -ERESTARTNOHAND and return true: written back with
 * PTRACE_SETREGS before the thread is resumed or detached, it makes the
 * kernel treat the call as it treats select or ppoll — made again when
 * no handler is to run, failing with EINTR when one is (a signal of the
 * target's own that came meanwhile), exactly as without our stop.  A
 * timeout given to the call starts again.  Returns false, REGS
 * untouched, otherwise.  */
bool cp_waits_undo_eintr(struct user_regs_struct *regs);

#endif
