/* cprof-attach's signals: the process the user started forks the
 * tracing process (the holder) and passes stop signals on to it; the
 * tracing process turns the first into a stop request and a second into
 * "stop now".  */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cprof/dump.h"
#include "cprof/error.h"
#include "cprof/heap.h"
#include "cprof/output.h"
#include "cprof/procfs.h"
#include "cprof/profile.h"
#include "cprof/sampler.h"
#include "cprof/symbols.h"
#include "cprof/target.h"
#include "cprof/timeline.h"
#include "cprof/unwinder.h"


#include "attach.h"
#include "top.h"

/* The only globals: what the signal handlers need.  */
volatile sig_atomic_t stop_requested;  /* first SIGINT/TERM/HUP */
volatile sig_atomic_t force_requested; /* a second one: stop now */
volatile sig_atomic_t target_written;  /* bytes of ours are in the
					       * target (heap mode) */
volatile uint64_t first_stop_ns;       /* when the first came */
volatile sig_atomic_t first_stop_sig;  /* which signal it was */
volatile pid_t first_stop_sender;      /* who sent it (0: the
					       * kernel, e.g. the terminal) */
volatile sig_atomic_t first_direct;    /* copies of it sent to us */
volatile sig_atomic_t first_passed_on; /* copies the visible
					       * process passed on */
volatile pid_t launched_child;
int launched_status = -1;              /* its wait status, once
					       * collected by the target */
volatile sig_atomic_t own_failure = 1; /* our failure's exit code:
					       * EXIT_RUNTIME, or
					       * EXIT_LAUNCH_FAILED */
volatile pid_t holder_pid;             /* in the visible process */
pid_t visible_pid;                     /* the process the user sees */
/* Stop signals ignored when we started (a script's background job has
 * SIGINT and SIGQUIT ignored; nohup ignores SIGHUP): they stay ignored.
 * SIGTERM always works.  */
bool ignored_at_start[NSIG];

/* Copies of one signal that reach us within this time are one request: a
 * kill of our process group comes to the visible process (which passes it
 * on) and to the tracing process directly; timeout(1) signals its child
 * and then the child's group.  */
#define SAME_REQUEST_NS 200000000ull
/* Copies of one signal from one sender are one request for longer when
 * they came by both roads: the visible process passes on what it gets
 * (with the original sender), and on a loaded host its copy of a kill of
 * the whole group can come well after the tracing process's own.  Two
 * kills of the visible process alone, or two of the group, are two
 * requests (at most one direct copy, two passed on: timeout(1)).  */
#define SAME_SENDER_NS 2000000000ull


static void say_now(const char *text)
{
	/* From a signal handler: write(2) only.  */
	size_t len = strlen(text);
	while (len > 0) {
		ssize_t n = write(STDERR_FILENO, text, len);
		if (n <= 0)
			break;
		text += n;
		len -= (size_t)n;
	}
}

/* The tracing process's handler of SIGINT, SIGTERM and SIGHUP.  The first
 * asks for a normal end: stop, restore, detach, write the profile.  A
 * second one, later, ends cprof-attach at once: when nothing of ours is
 * in the target, by exiting here (the kernel lets every thread we trace
 * go, as running as it was; a temporary output file left behind is
 * removed by the next run that writes there); otherwise every wait of the
 * restore-and-detach path gives up as soon as it would block, and the
 * profile is not written.  */
void on_stop_signal(int sig, siginfo_t *info, void *context)
{
	(void)context;
	int saved_errno = errno;
	uint64_t now = cli_now_ns();
	/* A copy passed on by the visible process names the sender it had. */
	pid_t sender = info && info->si_code <= 0 ? info->si_pid : 0;
	bool passed_on = info && info->si_code == SI_QUEUE &&
			 sender == visible_pid;
	if (passed_on)
		sender = (pid_t)info->si_value.sival_int;
	if (stop_requested) {
		bool other_road = passed_on ? first_direct > 0 &&
						      first_passed_on < 2
					    : first_direct == 0;
		bool copy = now - first_stop_ns < SAME_REQUEST_NS ||
			    (sig == first_stop_sig && sender != 0 &&
			     sender == first_stop_sender && other_road &&
			     now - first_stop_ns < SAME_SENDER_NS);
		if (copy) {
			if (passed_on)
				first_passed_on++;
			else
				first_direct++;
		}
		if (!copy && !force_requested) {
			force_requested = 1;
			if (!target_written) {
				/* The live view's terminal, as it was.  */
				top_terminal_restore();
				say_now("cprof-attach: interrupted again: exiting "
					"at once, without a profile\n");
				_exit(own_failure);
			}
			say_now("cprof-attach: interrupted again: restoring "
				"the target's code and detaching, without a "
				"profile\n");
		}
		errno = saved_errno;
		return;
	}
	first_stop_ns = now;
	first_stop_sig = sig;
	first_stop_sender = sender;
	first_direct = !passed_on;
	first_passed_on = passed_on;
	stop_requested = 1;
	/* Ctrl-C from the terminal reaches the whole foreground process group,
	 * the launched command included; a stop signal sent to us alone (kill,
	 * timeout(1), a service manager) is passed on, so the command is
	 * asked to end as it would be without us, and we report its status
	 * (finish_launch).  Not the SIGTERM the kernel sends when the visible
	 * process was killed (PR_SET_PDEATHSIG): that one is for us alone. */
	if (launched_child > 0 && info && info->si_code <= 0 &&
	    getppid() == visible_pid)
		kill(launched_child, sig);
	errno = saved_errno;
}

/* The visible process's handler: a stop signal sent to it (kill, or a
 * kill of the process group) is passed on to the tracing process; one
 * from the terminal reached the tracing process already (same process
 * group).  */
static void on_visible_signal(int sig, siginfo_t *info, void *context)
{
	(void)context;
	int saved_errno = errno;
	if (holder_pid > 0 && (!info || info->si_code <= 0)) {
		/* With the original sender, so that a copy of the same
		 * request that reaches the tracing process directly (a kill
		 * of the process group) is known for one (on_stop_signal). */
		union sigval from = {.sival_int = info ? (int)info->si_pid : 0};
		sigqueue(holder_pid, sig, from);
	}
	errno = saved_errno;
}

void stop_signal_set(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
}

void install_handlers(void (*handler)(int, siginfo_t *, void *))
{
	static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO; /* no SA_RESTART: waits end early */
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(stop_signals) / sizeof(*stop_signals); i++)
		if (!ignored_at_start[stop_signals[i]])
			sigaction(stop_signals[i], &sa, NULL);
	/* A closed output pipe is reported as a write error, not a death
	 * that would leave nothing written.  */
	signal(SIGPIPE, SIG_IGN);
}

/* The process the user started: it forks the tracing process (the
 * holder), passes stop signals on to it and exits with its status.
 * Only the holder traces.  If this process is killed with SIGKILL, the
 * holder gets SIGTERM from the kernel (PR_SET_PDEATHSIG) and ends
 * normally: every byte written into the target restored, every thread
 * detached.  */
static int supervise(pid_t holder)
{
	holder_pid = holder;
	install_handlers(on_visible_signal);
	sigset_t stop_set;
	stop_signal_set(&stop_set);
	sigprocmask(SIG_UNBLOCK, &stop_set, NULL);
	int status;
	while (waitpid(holder, &status, 0) < 0) {
		if (errno != EINTR) {
			message("cannot wait for the tracing process %d: %s",
				(int)holder, strerror(errno));
			return EXIT_RUNTIME;
		}
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	message("the tracing process %d was killed by signal %d (%s); "
		"threads it held are released by the kernel, but code it had "
		"changed (--heap) may not be restored",
		(int)holder, WTERMSIG(status), strsignal(WTERMSIG(status)));
	return EXIT_RUNTIME;
}

/* Become the tracing process: fork; the parent supervises and never
 * returns from here.  */
void start_holder(void)
{
	visible_pid = getpid();
	pid_t holder = fork();
	if (holder < 0) {
		message("cannot start the tracing process: %s", strerror(errno));
		exit(EXIT_RUNTIME);
	}
	if (holder > 0)
		exit(supervise(holder));
	/* A SIGKILL of the visible process must not leave the target with
	 * our breakpoints in it: the kernel tells us with SIGTERM.  It may
	 * have died before the request took effect: then stop at once.  */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != visible_pid) {
		first_stop_ns = cli_now_ns();
		stop_requested = 1;
	}
}

