/* What cprof-attach says: an attach failure explained, the progress
 * line, the summary after a run.  */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/procfs.h"
#include "cprof/profile.h"
#include "cprof/sampler.h"

#include "attach.h"

/* The comm of PID, "?" when unreadable.  */
static void comm_of(pid_t pid, char *buf, size_t size)
{
	cp_procfs_comm(pid, 0, buf, size);
	if (!buf[0])
		snprintf(buf, size, "?");
}

/* Explain an attach failure; returns the exit code.  */
int explain_attach_error(int rc, pid_t pid, pid_t tracer,
				const struct options *o)
{
	char comm[64];
	switch (-rc) {
	case CP_E_NOPROC:
		message("no process with PID %d (is it still running? check with: ps -p %d)",
			(int)pid, (int)pid);
		return EXIT_USAGE;
	case CP_E_ZOMBIE:
		message("process %d is a zombie: it has exited and waits for its parent to reap it; there is nothing to profile",
			(int)pid);
		return EXIT_USAGE;
	case CP_E_KTHREAD:
		comm_of(pid, comm, sizeof(comm));
		message("process %d (%s) is a kernel thread; cprof-attach profiles user-space programs (for the kernel use perf)",
			(int)pid, comm);
		return EXIT_USAGE;
	case CP_E_NOTLEADER:
		message("%d is a thread of process %d, not a process; to sample only that thread: cprof-attach -t %d %d",
			(int)pid, (int)cp_procfs_tgid(pid), (int)pid,
			(int)cp_procfs_tgid(pid));
		return EXIT_USAGE;
	case CP_E_SELF:
		message("PID %d is cprof-attach itself; give the PID of the program to profile",
			(int)pid);
		return EXIT_USAGE;
	case CP_E_TRACED:
		comm_of(tracer, comm, sizeof(comm));
		message("cannot attach to %d: already traced by %d (%s); a process can have only one tracer: detach it first (gdb: detach; strace: Ctrl-C)",
			(int)pid, (int)tracer, comm);
		return EXIT_RUNTIME;
	case CP_E_INVAL: {
		/* Name the first TID that is not a thread of PID.  */
		pid_t bad = o->ntids ? o->tids[0] : 0;
		for (size_t i = 0; i < o->ntids; i++) {
			char path[64];
			snprintf(path, sizeof(path), "/proc/%d/task/%d",
				 (int)pid, (int)o->tids[i]);
			if (access(path, F_OK) != 0) {
				bad = o->tids[i];
				break;
			}
		}
		message("thread %d is not a thread of process %d (see /proc/%d/task)",
			(int)bad, (int)pid, (int)pid);
		return EXIT_USAGE;
	}
	case CP_E_PERM: {
		char *text;
		size_t len;
		int scope = -1;
		if (cp_procfs_slurp("/proc/sys/kernel/yama/ptrace_scope",
				    &text, &len) == 0) {
			scope = atoi(text);
			free(text);
		}
		if (scope >= 1)
			message("cannot attach to %d: not permitted: kernel.yama.ptrace_scope is %d, which allows tracing only descendants; run as root (or with CAP_SYS_PTRACE), or set it to 0: sysctl kernel.yama.ptrace_scope=0",
				(int)pid, scope);
		else
			message("cannot attach to %d: not permitted: it belongs to another user or is privileged; run as the same user or with CAP_SYS_PTRACE (e.g. sudo)",
				(int)pid);
		return EXIT_RUNTIME;
	}
	default:
		message("cannot attach to %d: %s%s%s", (int)pid,
			cp_strerror(rc), rc == -CP_E_SYS ? ": " : "",
			rc == -CP_E_SYS ? strerror(errno) : "");
		return EXIT_RUNTIME;
	}
}

void progress(void *arg, const struct cp_sampler_stats *s)
{
	(void)arg;
	if (s->duration > 0)
		fprintf(stderr, "\rcprof-attach: %.1f s / %.1f s, %" PRIu64
				" samples, %zu threads\033[K",
			s->elapsed, s->duration, s->samples, s->threads_now);
	else
		fprintf(stderr, "\rcprof-attach: %.1f s, %" PRIu64
				" samples, %zu threads (Ctrl-C to stop)\033[K",
			s->elapsed, s->samples, s->threads_now);
	fflush(stderr);
}

/* -v: the system calls of the sampling thread (this one), counted by the
 * kernel (the raw_syscalls:sys_enter tracepoint, counting only: no
 * sample is written), so that the summary can say how many a stop costs.
 * No count when tracefs or perf events are not available.  */
static int syscall_counter = -1;

void count_syscalls_start(void)
{
	int fd = open("/sys/kernel/tracing/events/raw_syscalls/sys_enter/id",
		      O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char buf[32];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	struct perf_event_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_TRACEPOINT;
	attr.config = strtoull(buf, NULL, 10);
	syscall_counter = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1,
				       PERF_FLAG_FD_CLOEXEC);
}

void count_syscalls_stop(void)
{
	if (syscall_counter < 0)
		return;
	ioctl(syscall_counter, PERF_EVENT_IOC_DISABLE, 0);
}

/* The user and system CPU time of RU, in microseconds.  */
static double cpu_us(const struct rusage *ru)
{
	return (double)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1e6 +
	       (double)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec);
}

static size_t sampled_threads(const struct cp_profile *profile)
{
	size_t n, count = 0;
	const struct cp_sample *samples = cp_profile_samples(profile, &n);
	/* Few threads: a quadratic scan over distinct tids is fine.  */
	pid_t seen[1024];
	for (size_t i = 0; i < n && count < 1024; i++) {
		bool known = false;
		for (size_t j = 0; j < count && !known; j++)
			known = seen[j] == samples[i].tid;
		if (!known)
			seen[count++] = samples[i].tid;
	}
	return count;
}

void summary(const struct options *o, const struct cp_sampler_stats *s,
		    const struct cp_profile *profile, const char *path)
{
	double missed_pct = s->ticks_scheduled
				    ? 100.0 * (double)s->ticks_missed /
					      (double)s->ticks_scheduled
				    : 0.0;
	message("%" PRIu64 " samples from %" PRIu64 " threads in %.2f s; %"
		PRIu64 " of %" PRIu64 " ticks missed (%.1f%%)",
		s->samples, s->threads_seen, s->elapsed, s->ticks_missed,
		s->ticks_scheduled, missed_pct);
	if (s->stopped.count) {
		size_t threads = sampled_threads(profile);
		double share = s->elapsed > 0 && threads
				       ? 100.0 * (double)s->stopped.sum_ns /
						 (s->elapsed * 1e9 * (double)threads)
				       : 0.0;
		message("target stopped per sample: median %.1f us, p99 %.1f us; %.3f%% of each sampled thread's wall time",
			(double)cp_hist_quantile(&s->stopped, 0.5) / 1000.0,
			(double)cp_hist_quantile(&s->stopped, 0.99) / 1000.0,
			share);
	}
	if (o->verbose && (s->stopped.count || s->samples_copied)) {
		/* Our own cost, start-up and symbolization included: what a
		 * user pays per stop, or per sample where samples were taken
		 * without one (issue 15's goal 1).  */
		bool by_stops = s->samples_copied == 0;
		uint64_t per = by_stops ? s->stopped.count : s->samples;
		const char *unit = by_stops ? "stop" : "sample";
		struct rusage ru, th;
		getrusage(RUSAGE_SELF, &ru);
		getrusage(RUSAGE_THREAD, &th);
		if (by_stops)
			message("%" PRIu64 " stops; our CPU %.1f us (%.1f us on the sampling thread) and %.2f context switches per stop",
				per, cpu_us(&ru) / (double)per,
				cpu_us(&th) / (double)per,
				(double)(ru.ru_nvcsw + ru.ru_nivcsw) / (double)per);
		else
			message("%" PRIu64 " samples, %" PRIu64 " of them by stops; our CPU %.1f us (%.1f us on the sampling thread) and %.2f context switches per sample",
				per, s->stopped.count, cpu_us(&ru) / (double)per,
				cpu_us(&th) / (double)per,
				(double)(ru.ru_nvcsw + ru.ru_nivcsw) / (double)per);
		uint64_t calls;
		if (syscall_counter >= 0 &&
		    read(syscall_counter, &calls, sizeof(calls)) ==
			    (ssize_t)sizeof(calls)) {
			if (by_stops)
				message("%.1f system calls per stop, %.1f per sample, on the sampling thread",
					(double)calls / (double)per,
					s->samples ? (double)calls / (double)s->samples
						   : 0.0);
			else
				message("%.1f system calls per %s, on the sampling thread",
					(double)calls / (double)per, unit);
		}
		message("tick: wake-up after its deadline median %.1f us, p99 %.1f us; work median %.1f us, p99 %.1f us, max %.1f us",
			(double)cp_hist_quantile(&s->tick_late, 0.5) / 1000.0,
			(double)cp_hist_quantile(&s->tick_late, 0.99) / 1000.0,
			(double)cp_hist_quantile(&s->tick_work, 0.5) / 1000.0,
			(double)cp_hist_quantile(&s->tick_work, 0.99) / 1000.0,
			(double)s->tick_work.max_ns / 1000.0);
		if (s->stopped.count)
			message("stop latency (interrupt to stop collected): median %.1f us, p99 %.1f us",
				(double)cp_hist_quantile(&s->stop_latency, 0.5) / 1000.0,
				(double)cp_hist_quantile(&s->stop_latency, 0.99) / 1000.0);
	}
	if (o->verbose && !o->wall && s->threads_clocked)
		message("on-CPU selection: the CPU clocks (perf task-clock) of %" PRIu64 " thread%s; a thread is sampled when it has run a period",
			s->threads_clocked, s->threads_clocked == 1 ? "" : "s");
	if (o->verbose && !o->wall && (s->samples_copied || s->threads_copy_short))
		message("%" PRIu64 " samples without a stop, from the registers and stack the kernel copied at the period's end; %" PRIu64 " cop%s short of the stack (%s ticks went to the thread's next sample, of a larger copy); %" PRIu64 " thread%s with a deeper stack than the copy sampled by stops",
			s->samples_copied, s->copies_short,
			s->copies_short == 1 ? "y" : "ies",
			s->copies_short == 1 ? "its" : "their",
			s->threads_copy_short,
			s->threads_copy_short == 1 ? "" : "s");
	if (o->verbose && !o->wall)
		message("%" PRIu64 " ticks found a thread runnable but not "
			"run since its last sample (waiting for a CPU): not "
			"counted", s->ticks_waiting);
	if (s->samples == 0 && !o->wall)
		message("no samples: no thread of the target was running on a CPU; for blocked or sleeping threads use --wall");
	if (strcmp(path, "-") == 0)
		message("profile written to standard output");
	else
		message("profile written to %s", path);
}

