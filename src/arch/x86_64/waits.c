/* Which waits a ptrace stop breaks, and how to undo it.  See waits.h.  */
#include "arch/x86_64/waits.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel's "restart unless a handler runs" code
 * (include/linux/errno.h; not exported to user space).  */
#define ERESTARTNOHAND_ 514

/* Is descriptor FD of PID one whose blocking reads and writes return
 * -ERESTARTSYS when a stop comes (pipes, eventfd, signalfd, inotify,
 * timerfd, ttys and other devices), rather than EINTR (sockets with a
 * timeout) or an interrupt sent elsewhere (FUSE files)?  */
static bool fd_restarts(pid_t pid, uint64_t fd)
{
	if (fd > 0x7fffffff)
		return false;
	char path[64], target[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, (int)fd);
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = '\0';
	if (strncmp(target, "pipe:", 5) == 0 ||
	    strncmp(target, "anon_inode:", 11) == 0)
		return true;
	/* Named FIFOs are not told apart from files here: a stat through
	 * the link could wait on a FUSE daemon.  */
	return strncmp(target, "/dev/", 5) == 0;
}

bool cp_waits_stop_is_harmless(pid_t pid, const struct cp_task_syscall *sc)
{
	if (sc->state == CP_TASK_BLOCKED)
		return true;   /* off the CPU, but in no system call */
	if (sc->state != CP_TASK_IN_SYSCALL)
		return false;
	switch (sc->nr) {
	case SYS_nanosleep:
	case SYS_clock_nanosleep:
	case SYS_poll:
	case SYS_ppoll:
	case SYS_select:
	case SYS_pselect6:
	case SYS_futex:
#ifdef SYS_futex_waitv
	case SYS_futex_waitv:
#endif
	case SYS_wait4:
	case SYS_waitid:
	case SYS_pause:
	case SYS_rt_sigsuspend:
	case SYS_restart_syscall:
	case SYS_flock:
	case SYS_fcntl:
		return true;
	case SYS_read:
	case SYS_readv:
	case SYS_pread64:
	case SYS_preadv:
	case SYS_preadv2:
	case SYS_write:
	case SYS_writev:
	case SYS_pwrite64:
	case SYS_pwritev:
	case SYS_pwritev2:
		return fd_restarts(pid, sc->args[0]);
	default:
		return false;
	}
}

bool cp_waits_eintr_on_stop(long nr)
{
	switch (nr) {
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
#endif
	case SYS_rt_sigtimedwait:
	case SYS_semop:
	case SYS_semtimedop:
	case SYS_io_getevents:
#ifdef SYS_io_pgetevents
	case SYS_io_pgetevents:
#endif
	case SYS_accept:
	case SYS_accept4:
	case SYS_recvfrom:
	case SYS_recvmsg:
	case SYS_recvmmsg:
	case SYS_sendto:
	case SYS_sendmsg:
	case SYS_sendmmsg:
	case SYS_read:
	case SYS_readv:
	case SYS_write:
	case SYS_writev:
		return true;
	default:
		return false;
	}
}

bool cp_waits_undo_eintr(struct user_regs_struct *regs)
{
	/* orig_rax is negative when the thread entered the kernel other
	 * than by a system call (an interrupt, a fault): no call to mend.  */
	long nr = (long)regs->orig_rax;
	if (nr < 0 || (long long)regs->rax != -EINTR ||
	    !cp_waits_eintr_on_stop(nr))
		return false;
	regs->rax = (unsigned long long)-ERESTARTNOHAND_;
	return true;
}
