/* cprof-attach: sample a running program's stacks from outside.  A thin
 * layer over libcprof: options, messages, exit codes.  */
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
#include "cprof/format.h"
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

/* The command line of PID, arguments joined by spaces; its comm when
 * that is unreadable.  */
static void proc_cmdline(pid_t pid, char *buf, size_t size)
{
	char path[64], *text;
	size_t len;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	buf[0] = '\0';
	if (cp_procfs_slurp(path, &text, &len) == 0) {
		for (size_t i = 0; i + 1 < len; i++)
			if (text[i] == '\0')
				text[i] = ' ';
		snprintf(buf, size, "%s", text);
		free(text);
	}
	if (!buf[0])
		cp_procfs_comm(pid, 0, buf, size);
}

static void proc_comm(pid_t pid, char *buf, size_t size)
{
	cp_procfs_comm(pid, 0, buf, size);
	if (!buf[0])
		snprintf(buf, size, "?");
}

/* Explain an attach failure; returns the exit code.  */
static int explain_attach_error(int rc, pid_t pid, pid_t tracer,
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
		proc_comm(pid, comm, sizeof(comm));
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
		proc_comm(tracer, comm, sizeof(comm));
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

static void progress(void *arg, const struct cp_sampler_stats *s)
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

static void summary(const struct options *o, const struct cp_sampler_stats *s,
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

/* Our own command line, for the output's header.  */
static void set_command(struct cp_profile_meta *meta, int argc, char **argv)
{
	size_t used = 0;
	for (int i = 0; i < argc && used < sizeof(meta->command) - 1; i++)
		used += (size_t)snprintf(meta->command + used,
					 sizeof(meta->command) - used, "%s%s",
					 i ? " " : "", argv[i]);
}

static void warning(void *arg, const char *text);

/* What the options ask of the writers.  */
static struct cp_format_options format_options(const struct options *o)
{
	struct cp_format_options fo = CP_FORMAT_OPTIONS_INIT;
	fo.folded = (struct cp_folded_options){
		.threads = o->threads,
		.lines = o->lines,
		.no_inline = o->no_inline,
		.max_depth = o->max_depth,
	};
	fo.top = o->top;
	fo.min_samples = o->min_samples;
	fo.warn = warning;
	return fo;
}

/* Let TARGET go (NULL: nothing to do); a launched command's exit status,
 * if the target collected it, is kept for finish_launch.  */
static void detach_target(struct cp_target *target)
{
	int status = cp_target_detach_status(target);
	if (status != -1 && launched_child > 0)
		launched_status = status;
}

static void warning(void *arg, const char *text)
{
	(void)arg;
	message("warning: %s", text);
}

/* The sampler's at_end: detach *ARG (a struct cp_target **) before the
 * slow part.  */
static void detach_early(void *arg)
{
	struct cp_target **target = arg;
	detach_target(*target);
	*target = NULL;
}

/* --dump: stop once, copy, detach, then name and print.  Detaches TARGET
 * and commits or aborts OUT.  Returns the exit code.  */
static int run_dump(const struct options *o, struct cp_target *target,
		    struct cp_unwinder *unwinder, struct cp_symbols *symbols,
		    struct cp_output *out)
{
	struct cp_dump *dump = NULL;
	int rc = cp_dump_collect(target, unwinder, symbols, o->max_depth, &dump);
	/* The threads run again already; let them go before the slow part. */
	detach_target(target);
	if (rc < 0) {
		message("cannot dump the stacks of %d: %s", (int)o->pid,
			cp_strerror(rc));
		cp_output_abort(out);
		return EXIT_RUNTIME;
	}
	struct cp_format_input in = {.kind = CP_FORMAT_DUMP, .dump = dump};
	struct cp_format_options fo = format_options(o);
	rc = cp_format_write(cp_format_find(o->format), &in, &fo,
			     cp_output_stream(out));
	cp_dump_free(dump);
	if (rc == 0)
		rc = cp_output_commit(out);
	else
		cp_output_abort(out);
	if (rc < 0) {
		message("cannot write the dump to %s: %s",
			o->output ? o->output : "standard output",
			strerror(errno));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

/* Heap mode: breakpoints in, trace, every byte back, detach, write.  */
static int run_heap(const struct options *o, struct cp_target *target,
		    struct cp_unwinder *unwinder, struct cp_symbols *symbols,
		    struct cp_profile *profile, struct cp_output *out,
		    int argc, char **argv)
{
	int exit_code = EXIT_RUNTIME;
	pid_t pid = cp_target_pid(target);
	struct cp_profile_meta *meta = cp_profile_meta(profile);
	meta->pid = pid;
	struct cp_heap_options ho = {
		.max_depth = o->max_depth,
		.duration = o->duration,
		.stop = &stop_requested,
		/* For the tests: exercise the step-with-all-threads-held
		 * fallback on every entry point.  */
		.force_step = getenv("CPROF_HEAP_FORCE_STEP") != NULL,
	};
	if (setpriority(PRIO_PROCESS, 0, -10) == 0 && o->verbose)
		message("tracing thread at nice -10");
	struct timespec started;
	clock_gettime(CLOCK_REALTIME, &started);
	meta->time_nanos = (uint64_t)started.tv_sec * 1000000000u +
			   (uint64_t)started.tv_nsec;
	struct cp_heap *heap = NULL;
	/* From here until the detach, a second stop signal cannot simply
	 * end us: our breakpoints may be in the target.  */
	target_written = 1;
	int rc = cp_heap_start(target, unwinder, symbols, profile, &ho, &heap);
	proc_cmdline(pid, meta->target, sizeof(meta->target));
	if (rc < 0) {
		if (rc == -CP_E_NOALLOC)
			message("no allocator entry points found in process %d: "
				"malloc is not exported by any of its modules "
				"(a static binary without symbols?)", (int)pid);
		else if (rc == -CP_E_GONE || cp_target_exited(target))
			message("process %d exited before heap tracing began",
				(int)pid);
		else
			message("cannot set breakpoints in process %d: %s: %s",
				(int)pid, cp_strerror(rc), strerror(errno));
		detach_target(target);
		target_written = 0;
		cp_output_abort(out);
		return rc == -CP_E_NOALLOC ? EXIT_USAGE : EXIT_RUNTIME;
	}
	const char *where = "";
	size_t nbps = cp_heap_breakpoints(heap, &where);
	if (!o->quiet)
		message("tracing the heap of %d (%s): %zu breakpoints in %s",
			(int)pid, meta->target, nbps, where);
	int run_rc = cp_heap_run(heap);
	int finish_rc = cp_heap_finish(heap);
	/* Let the target go before naming and writing anything.  */
	detach_target(target);
	target_written = 0;
	if (force_requested) {
		cp_output_abort(out);
		cp_heap_free(heap);
		return own_failure;
	}
	cp_heap_resolve(heap);
	const struct cp_heap_summary *s = cp_heap_summary(heap);
	meta->duration_nanos = (uint64_t)(s->duration * 1e9);
	if (run_rc < 0)
		message("heap tracing failed: %s; every byte was restored and "
			"the target detached", cp_strerror(run_rc));
	if (finish_rc < 0)
		message("WARNING: not every byte written into process %d could "
			"be restored (see above)", (int)pid);
	if (s->target_exec)
		message("process %d called execve: heap tracing stopped there",
			(int)pid);

	set_command(meta, argc, argv);
	/* Every site that allocated, each with its four values (pprof
	 * writes them all); the count weighs the value of the metric.  */
	static const size_t metric_value[] = {
		[CP_HEAP_LIVE_BYTES] = 3, [CP_HEAP_ALLOC_BYTES] = 1,
		[CP_HEAP_LIVE_COUNT] = 2, [CP_HEAP_ALLOC_COUNT] = 0,
	};
	rc = cp_heap_fill_profile(heap, profile, CP_HEAP_ALLOC_COUNT);
	if (rc == 0) {
		cp_profile_set_heap_types(profile,
					  metric_value[o->heap_metric]);
		struct cp_format_input in = {
			.kind = CP_FORMAT_HEAP, .profile = profile, .heap = s,
		};
		struct cp_format_options fo = format_options(o);
		rc = cp_format_write(cp_format_find(o->format), &in, &fo,
				     cp_output_stream(out));
	}
	const char *path = o->output ? o->output : "-";
	if (rc < 0) {
		message("cannot write the heap profile to %s: %s", path,
			strerror(errno));
		cp_output_abort(out);
		goto done;
	}
	rc = cp_output_commit(out);
	if (rc < 0) {
		message("cannot write the heap profile to %s: %s", path,
			strerror(errno));
		goto done;
	}
	if (!o->quiet)
		message("%llu allocations (%llu bytes), %llu frees; %llu "
			"allocations (%llu bytes) live at the end; %s written "
			"to %s",
			(unsigned long long)s->allocations,
			(unsigned long long)s->alloc_bytes,
			(unsigned long long)s->frees,
			(unsigned long long)s->live_count,
			(unsigned long long)s->live_bytes, o->format, path);
	exit_code = run_rc < 0 || finish_rc < 0 ? EXIT_RUNTIME : EXIT_OK;
done:
	cp_heap_free(heap);
	return exit_code;
}

/* Launch mode, at the very end: the profile is written (or could not
 * be) and the command let go; wait for it to end, as time(1) and
 * valgrind do, and exit with its status: its code, or 128 + the signal
 * that killed it.  When we failed (EXIT_CODE is not 0), exit 125, and
 * say how the command ended if it failed too.  A second stop request
 * ends the wait at once (the handler exits 125).  */
static int finish_launch(const struct options *o, int exit_code)
{
	if (launched_child <= 0)
		return exit_code;
	int status = launched_status;
	if (status == -1) {
		if (!o->quiet)
			message("waiting for %s (pid %d) to exit",
				o->command[0], (int)launched_child);
		while (waitpid(launched_child, &status, 0) < 0) {
			if (errno == EINTR)
				continue;
			message("cannot wait for %s (pid %d): %s",
				o->command[0], (int)launched_child,
				strerror(errno));
			return EXIT_LAUNCH_FAILED;
		}
	}
	int command_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status)
					       : WEXITSTATUS(status);
	if (exit_code == EXIT_OK)
		return command_code;
	/* Our failure was said in its one line; how the command ended is
	 * worth a second only when it failed too (125 hides its code).  */
	if (command_code == 0)
		return EXIT_LAUNCH_FAILED;
	if (WIFSIGNALED(status))
		message("%s was killed by signal %d (%s); exit status %d: "
			"cprof-attach failed (see above)",
			o->command[0], WTERMSIG(status),
			strsignal(WTERMSIG(status)), EXIT_LAUNCH_FAILED);
	else
		message("%s exited with status %d; exit status %d: "
			"cprof-attach failed (see above)",
			o->command[0], command_code, EXIT_LAUNCH_FAILED);
	return EXIT_LAUNCH_FAILED;
}

int main(int argc, char **argv)
{
	/* A stop signal that comes before the handlers are in must not end
	 * us without restoring what we wrote (or leave no report): block
	 * them from the first line, honour them once the handlers are in.  */
	sigset_t stop_set;
	stop_signal_set(&stop_set);
	sigprocmask(SIG_BLOCK, &stop_set, NULL);
	struct sigaction current;
	if (sigaction(SIGINT, NULL, &current) == 0 &&
	    current.sa_handler == SIG_IGN)
		ignored_at_start[SIGINT] = true;
	if (sigaction(SIGHUP, NULL, &current) == 0 &&
	    current.sa_handler == SIG_IGN)
		ignored_at_start[SIGHUP] = true;
	/* Launched commands are our children: we reap them for their exit
	 * status, which an inherited SIG_IGN would throw away.  */
	signal(SIGCHLD, SIG_DFL);

	struct options o = {0};
	parse_options(argc, argv, &o);
	start_holder();
	install_handlers(on_stop_signal);
	sigprocmask(SIG_UNBLOCK, &stop_set, NULL);

	int exit_code = EXIT_RUNTIME;
	struct cp_output *out = NULL;
	struct cp_target *target = NULL;
	struct cp_unwinder *unwinder = NULL;
	struct cp_symbols *symbols = NULL;
	struct cp_profile *profile = NULL;
	struct cp_format_recorder *recorder = NULL;
	int rc;

	/* Create the output first: an unwritable destination is reported
	 * before the target is touched.  */
	char output_error[PATH_MAX + 256];
	rc = cp_output_open(o.output, &out, output_error,
			    sizeof(output_error));
	if (rc < 0) {
		message("%s", output_error);
		/* A directory or a link not followed is bad input.  */
		exit_code = rc == -CP_E_INVAL ? EXIT_USAGE : EXIT_RUNTIME;
		goto out;
	}

	/* A stop signal that came while we were starting: nothing is
	 * attached yet, so nothing is done.  */
	if (stop_requested) {
		message("interrupted before %s: nothing was profiled",
			o.command ? "starting the command" : "attaching");
		goto out;
	}
	if (o.command) {
		rc = cp_target_launch(o.command,
				      CP_TARGET_FOLLOW_CLONES |
					      (o.heap ? CP_TARGET_FOLLOW_FORKS : 0),
				      &target);
		if (rc == -CP_E_EXEC) {
			/* The shell's codes, as env(1) and timeout(1) give. */
			exit_code = errno == ENOENT ? EXIT_NOT_FOUND
						    : EXIT_CANNOT_RUN;
			message("cannot run '%s': %s", o.command[0],
				strerror(errno));
			goto out;
		}
		if (rc < 0) {
			message("cannot start '%s': %s: %s", o.command[0],
				cp_strerror(rc), strerror(errno));
			goto out;
		}
		launched_child = cp_target_pid(target);
		own_failure = EXIT_LAUNCH_FAILED;
	} else {
		pid_t tracer = 0;
		/* A dump stops the threads there are now; no need to follow
		 * new ones.  We trace from a child of the process the user
		 * started: that one is cprof-attach too.  */
		rc = o.pid == visible_pid ? -CP_E_SELF :
		     cp_target_attach(o.pid, o.tids, o.ntids,
				      o.dump ? 0
					     : CP_TARGET_FOLLOW_CLONES |
						       (o.heap ? CP_TARGET_FOLLOW_FORKS
							       : 0),
				      &target, &tracer);
		if (rc < 0) {
			exit_code = explain_attach_error(rc, o.pid, tracer, &o);
			goto out;
		}
	}
	pid_t pid = cp_target_pid(target);
	cp_target_set_cancel(target, &force_requested);
	if (o.verbose) {
		size_t n;
		cp_target_threads(target, &n);
		message("attached to %d (%zu threads), %u Hz", (int)pid, n,
			o.frequency);
	}

	if (o.no_debuginfod)
		unsetenv("DEBUGINFOD_URLS");
	rc = cp_unwinder_new(pid, &unwinder);
	if (rc == 0) {
		struct cp_symbols_options so = {
			.debuginfo_dirs = o.debuginfo_dirs,
			.n_debuginfo_dirs = o.n_debuginfo_dirs,
			.no_demangle = o.no_demangle,
			/* DWARF is read only for what needs it: inlined
			 * frames and source positions.  */
			.no_dwarf = o.no_inline && !o.lines,
			.verbose = o.verbose,
			.warn = warning,
		};
		rc = cp_symbols_new(pid, &so, &symbols);
	}
	profile = cp_profile_new();
	if (rc < 0 || !profile) {
		if (rc == -CP_E_NOPROC)
			message("process %d exited before any sample", (int)pid);
		else
			message("cannot set up profiling of %d: %s", (int)pid,
				cp_strerror(rc ? rc : -CP_E_NOMEM));
		goto out;
	}

	if (o.heap) {
		exit_code = run_heap(&o, target, unwinder, symbols, profile,
				     out, argc, argv);
		target = NULL; /* detached by run_heap */
		out = NULL;
		goto out;
	}
	if (o.dump) {
		exit_code = run_dump(&o, target, unwinder, symbols, out);
		target = NULL; /* detached by run_dump */
		out = NULL;
		goto out;
	}

	struct cp_sampler_options so = {
		.frequency = o.frequency,
		.duration = o.duration,
		.wall = o.wall,
		.max_depth = o.max_depth,
		.unwind_mode = o.unwind_mode,
		.stop = &stop_requested,
		.progress = !o.quiet && isatty(STDERR_FILENO) ? progress : NULL,
	};
	/* Ticks must not queue behind the target's busy threads, and a thread
	 * we hold stopped must not wait for us to get a CPU back: when
	 * allowed (root, CAP_SYS_NICE), the sampling thread runs at nice -10.
	 * (Linux applies this to the calling thread; the symbolizer thread
	 * lowers its own.)  */
	if (setpriority(PRIO_PROCESS, 0, -10) == 0 && o.verbose)
		message("sampling thread at nice -10");
	struct cp_profile_meta *meta = cp_profile_meta(profile);
	meta->frequency = o.frequency;
	meta->pid = pid;
	proc_cmdline(pid, meta->target, sizeof(meta->target));
	if (o.wall)
		snprintf(meta->time_type, sizeof(meta->time_type), "wall");
	/* The writer of the format asked for; one that streams (raw, trace,
	 * speedscope in time order) is fed every sample as it is taken.  */
	struct cp_format_input in = {.kind = CP_FORMAT_SAMPLED,
				     .profile = profile};
	struct cp_format_options fo = format_options(&o);
	rc = cp_format_recorder_new(cp_format_find(o.format), &in, &fo,
				    cp_output_stream(out), &recorder);
	if (rc < 0) {
		message("cannot write the profile to %s: %s",
			cp_output_path(out),
			rc == -CP_E_SYS ? strerror(errno) : cp_strerror(rc));
		goto out;
	}
	if (cp_format_recorder_streams(recorder)) {
		so.on_sample = cp_format_record;
		so.on_sample_arg = recorder;
	}
	struct timespec started;
	clock_gettime(CLOCK_REALTIME, &started);
	meta->time_nanos = (uint64_t)started.tv_sec * 1000000000u +
			   (uint64_t)started.tv_nsec;
	struct cp_sampler_stats stats;
	so.at_end = detach_early;
	so.at_end_arg = &target;
	rc = cp_sampler_run(target, unwinder, symbols, profile, &so, &stats);
	meta->duration_nanos = (uint64_t)(stats.elapsed * 1e9);
	if (so.progress)
		fputs("\r\033[K", stderr);

	/* The target was let go before its names were looked up (at_end);
	 * it runs on while we format.  */
	bool exited = stats.target_exited;
	detach_target(target);
	target = NULL;
	if (force_requested)
		goto out; /* interrupted twice: no profile */

	if (rc < 0) {
		message("sampling failed: %s; the target was detached",
			cp_strerror(rc));
		/* Keep what was collected.  */
	}
	if (stats.samples == 0 && exited) {
		if (o.verbose)
			message("%.3f s, %" PRIu64 " ticks, %" PRIu64
				" snapshots that could not be unwound",
				stats.elapsed, stats.ticks_scheduled,
				stats.unwind_errors);
		if (o.ntids)
			message("the selected thread%s of process %d exited before any sample was taken",
				o.ntids > 1 ? "s" : "", (int)pid);
		else
			message("process %d exited before any sample was taken",
				(int)pid);
		exit_code = EXIT_RUNTIME;
		goto out;
	}
	if (o.verbose) {
		uint64_t lookups, hits, rereads;
		cp_symbols_stats(symbols, &lookups, &hits, &rereads);
		message("symbolized %" PRIu64 " distinct addresses, %" PRIu64
			" cache hits, %" PRIu64 " mapping re-reads",
			lookups, hits, rereads);
	}

	/* Describe the run in the profile (headers, pprof fields), then
	 * write what the recorder has not written yet.  */
	set_command(meta, argc, argv);
	rc = cp_format_recorder_finish(recorder);
	recorder = NULL;
	if (rc < 0) {
		message("cannot write the profile to %s: %s",
			cp_output_path(out), strerror(errno));
		goto out;
	}
	const char *path = o.output ? o.output : "-";
	rc = cp_output_commit(out);
	out = NULL;
	if (rc < 0) {
		message("cannot write the profile to %s: %s", path,
			strerror(errno));
		goto out;
	}
	if (!o.quiet)
		summary(&o, &stats, profile, path);
	exit_code = rc < 0 ? EXIT_RUNTIME : EXIT_OK;
out:
	detach_target(target);
	cp_format_recorder_free(recorder);
	cp_output_abort(out);
	cp_profile_free(profile);
	cp_symbols_free(symbols);
	cp_unwinder_free(unwinder);
	free(o.tids);
	free(o.debuginfo_dirs);
	return finish_launch(&o, exit_code);
}
