/* cprof-attach: sample a running program's stacks from outside.  A thin
 * layer over libcprof's session (cprof/session.h): options in, one
 * session configured and driven (attach or launch, then sample, dump or
 * trace the heap, detach), the format registry's writer out; messages
 * and exit codes.  Its parts: attach_options.c (the command line),
 * attach_signals.c (the visible and the tracing process), attach_say.c
 * (what it says).  */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/format.h"
#include "cprof/output.h"
#include "cprof/session.h"
#include "cprof/symbols.h"

#include "attach.h"
#include "top.h"

/* The end of a run of O->duration from now, 0 when open-ended.  */
static uint64_t deadline(const struct options *o)
{
	return o->duration > 0 ? cli_now_ns() + (uint64_t)(o->duration * 1e9)
			       : 0;
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

/* What the options ask of the writers, and warnings said here.  */
static struct cp_format_options format_options(const struct options *o)
{
	struct cp_format_options fo = attach_format_options(o);
	fo.warn = warning;
	return fo;
}

/* Let the session's target go (nothing attached: nothing to do); a
 * launched command's exit status, if seen, is kept for finish_launch.  */
static void detach(struct cp_session *session)
{
	int status = cp_session_detach(session);
	if (status != -1 && launched_child > 0)
		launched_status = status;
}

static void warning(void *arg, const char *text)
{
	(void)arg;
	message("warning: %s", text);
}

/* Write IN with the format asked for and commit OUT, or abort it.
 * Returns 0 or the exit code.  */
static int write_out(const struct options *o, const struct cp_format_input *in,
		     struct cp_output *out, const char *what)
{
	struct cp_format_options fo = format_options(o);
	int rc = cp_format_write(cp_format_find(o->format), in, &fo,
				 cp_output_stream(out));
	const char *path = o->output ? o->output : "standard output";
	if (rc < 0) {
		message("cannot write %s to %s: %s", what, path,
			rc == -CP_E_SYS ? strerror(errno) : cp_strerror(rc));
		cp_output_abort(out);
		return EXIT_RUNTIME;
	}
	if (cp_output_commit(out) < 0) {
		message("cannot write %s to %s: %s", what, path,
			strerror(errno));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

/* --dump: stop once, copy, resume, detach, then name and print.  Commits
 * or aborts OUT.  Returns the exit code.  */
static int run_dump(const struct options *o, struct cp_session *session,
		    struct cp_output *out)
{
	struct cp_dump *dump = NULL;
	int rc = cp_session_dump(session, o->max_depth, &dump);
	detach(session);
	if (rc < 0) {
		message("cannot dump the stacks of %d: %s", (int)o->pid,
			cp_strerror(rc));
		cp_output_abort(out);
		return EXIT_RUNTIME;
	}
	struct cp_format_input in = {.kind = CP_FORMAT_DUMP, .dump = dump};
	int exit_code = write_out(o, &in, out, "the dump");
	cp_dump_free(dump);
	return exit_code;
}

/* Heap mode: breakpoints in, trace, every byte back, detach, write.
 * Commits or aborts OUT.  Returns the exit code.  */
static int run_heap(const struct options *o, struct cp_session *session,
		    struct cp_output *out, int argc, char **argv)
{
	pid_t pid = cp_session_pid(session);
	struct cp_heap_options ho = {
		.max_depth = o->max_depth,
		/* For the tests: exercise the step-with-all-threads-held
		 * fallback on every entry point.  */
		.force_step = getenv("CPROF_HEAP_FORCE_STEP") != NULL,
		.tracers = o->heap_tracers,
		.method = (enum cp_heap_method)o->heap_method,
	};
	/* From here until the detach, a second stop signal cannot simply
	 * end us: our breakpoints may be in the target.  */
	target_written = 1;
	int rc = cp_session_heap_start(session, &ho);
	if (rc == 0 && o->verbose && cp_session_niced(session))
		message("tracing thread at nice -10");
	if (rc < 0) {
		if (rc == -CP_E_NOALLOC)
			message("no allocator entry points found in process %d: "
				"malloc is not exported by any of its modules "
				"(a static binary without symbols?)", (int)pid);
		else if (rc == -CP_E_GONE || cp_session_target_exited(session))
			message("process %d exited before heap tracing began",
				(int)pid);
		else
			message("cannot set breakpoints in process %d: %s: %s",
				(int)pid, cp_strerror(rc), strerror(errno));
		detach(session);
		target_written = 0;
		cp_output_abort(out);
		return rc == -CP_E_NOALLOC ? EXIT_USAGE : EXIT_RUNTIME;
	}
	struct cp_heap *heap = cp_session_heap(session);
	struct cp_profile *profile = cp_session_heap_profile(session);
	struct cp_profile_meta *meta = cp_profile_meta(profile);
	const char *where = "";
	size_t nbps = cp_heap_breakpoints(heap, &where);
	if (!o->quiet)
		message("tracing the heap of %d (%s): %zu breakpoints in %s",
			(int)pid, meta->target, nbps, where);
	int run_rc = cp_session_heap_run(session, deadline(o), &stop_requested,
					 NULL);
	int finish_rc = cp_session_heap_stop(session);
	/* Let the target go before naming and writing anything.  */
	detach(session);
	target_written = 0;
	if (force_requested) {
		cp_output_abort(out);
		return own_failure;
	}
	cp_session_heap_resolve(session);
	const struct cp_heap_summary *s = cp_heap_summary(heap);
	if (run_rc < 0)
		message("heap tracing failed: %s; every byte was restored and "
			"the target detached", cp_strerror(run_rc));
	if (finish_rc < 0)
		message("WARNING: not every byte written into process %d could "
			"be restored (see above)", (int)pid);
	if (s->target_exec)
		message("process %d called execve: heap tracing stopped there",
			(int)pid);
	if (o->verbose && s->uprobes)
		message("the kernel's uprobes: %llu of %llu stacks were an "
			"earlier unwind's; %llu stop%s of a thread that "
			"outran the tracer; %llu record%s lost; %llu stack%s "
			"cut where the copy ended; %llu thread%s not probed",
			(unsigned long long)s->unwinds_reused,
			(unsigned long long)s->allocations,
			(unsigned long long)s->threads_throttled,
			s->threads_throttled == 1 ? "" : "s",
			(unsigned long long)s->events_lost,
			s->events_lost == 1 ? "" : "s",
			(unsigned long long)s->stacks_cut,
			s->stacks_cut == 1 ? "" : "s",
			(unsigned long long)s->threads_untraced,
			s->threads_untraced == 1 ? "" : "s");
	if (o->verbose)
		message("%u tracer thread%s; %llu new thread%s handed to another "
			"at birth; %llu of %llu stacks were an earlier unwind's",
			s->tracers, s->tracers == 1 ? "" : "s",
			(unsigned long long)s->threads_moved,
			s->threads_moved == 1 ? "" : "s",
			(unsigned long long)s->unwinds_reused,
			(unsigned long long)s->allocations);
	set_command(meta, argc, argv);
	rc = attach_heap_profile(o, heap, profile);
	if (rc < 0) {
		message("cannot write the heap profile: %s", cp_strerror(rc));
		cp_output_abort(out);
		return EXIT_RUNTIME;
	}
	struct cp_format_input in = {
		.kind = CP_FORMAT_HEAP, .profile = profile, .heap = s,
	};
	int exit_code = write_out(o, &in, out, "the heap profile");
	if (exit_code != EXIT_OK)
		return exit_code;
	if (!o->quiet)
		message("%llu allocations (%llu bytes), %llu frees; %llu "
			"allocations (%llu bytes) live at the end; %s written "
			"to %s",
			(unsigned long long)s->allocations,
			(unsigned long long)s->alloc_bytes,
			(unsigned long long)s->frees,
			(unsigned long long)s->live_count,
			(unsigned long long)s->live_bytes, o->format,
			o->output ? o->output : "-");
	return run_rc < 0 || finish_rc < 0 ? EXIT_RUNTIME : EXIT_OK;
}

/* CPU or wall sampling until the duration ends, Ctrl-C or the target's
 * exit; detach; write.  Commits or aborts OUT.  Returns the exit code.  */
static int run_sampling(const struct options *o, struct cp_session *session,
			struct cp_output *out, int argc, char **argv)
{
	pid_t pid = cp_session_pid(session);
	struct cp_profile *profile = cp_session_prepare_profile(session);
	if (!profile) {
		message("out of memory");
		cp_output_abort(out);
		return EXIT_RUNTIME;
	}
	struct cp_profile_meta *meta = cp_profile_meta(profile);
	meta->frequency = o->frequency;
	if (o->wall)
		snprintf(meta->time_type, sizeof(meta->time_type), "wall");
	struct cp_sampler_options so = {
		.frequency = o->frequency,
		.duration = o->duration,
		.wall = o->wall,
		.max_depth = o->max_depth,
		.progress = !o->quiet && isatty(STDERR_FILENO) ? progress : NULL,
	};
	/* The writer of the format asked for; one that streams (raw, trace,
	 * speedscope in time order) is fed every sample as it is taken.  */
	struct cp_format_input in = {.kind = CP_FORMAT_SAMPLED,
				     .profile = profile};
	struct cp_format_options fo = format_options(o);
	struct cp_format_recorder *recorder = NULL;
	int rc = cp_format_recorder_new(cp_format_find(o->format), &in, &fo,
					cp_output_stream(out), &recorder);
	if (rc < 0) {
		message("cannot write the profile to %s: %s",
			cp_output_path(out),
			rc == -CP_E_SYS ? strerror(errno) : cp_strerror(rc));
		cp_output_abort(out);
		detach(session);
		return EXIT_RUNTIME;
	}
	if (cp_format_recorder_streams(recorder)) {
		so.on_sample = cp_format_record;
		so.on_sample_arg = recorder;
	}
	rc = cp_session_sample_start(session, &so);
	if (rc == 0 && o->verbose && cp_session_niced(session))
		message("sampling thread at nice -10");
	if (rc == 0 && o->verbose)
		count_syscalls_start();
	if (rc == 0)
		rc = cp_session_sample_run(session, deadline(o),
					   &stop_requested, NULL);
	count_syscalls_stop();
	struct cp_sampler_stats stats = *cp_session_sample_stats(session);
	uint64_t dl_runtime, dl_period, dl_after;
	if (o->verbose && cp_session_deadline(session, &dl_runtime, &dl_period,
					      &dl_after))
		message("%s: the sampling thread took SCHED_DEADLINE %s%.2f s, "
			"at most %.0f us of CPU per %.0f us",
			dl_after ? "ticks were missed"
				 : "more threads than CPUs were runnable",
			dl_after ? "after " : "at ", (double)dl_after / 1e9,
			(double)dl_runtime / 1e3, (double)dl_period / 1e3);
	if (so.progress)
		fputs("\r\033[K", stderr);
	/* Let the target go before its names are looked up; it runs on
	 * while we name and format.  */
	detach(session);
	int exit_code = EXIT_RUNTIME;
	if (force_requested)
		goto out; /* interrupted twice: no profile */
	if (rc < 0)
		message("sampling failed: %s; the target was detached",
			cp_strerror(rc));
	if (stats.samples == 0 && stats.target_exited) {
		if (o->verbose)
			message("%.3f s, %" PRIu64 " ticks, %" PRIu64
				" snapshots that could not be unwound",
				stats.elapsed, stats.ticks_scheduled,
				stats.unwind_errors);
		if (o->ntids)
			message("the selected thread%s of process %d exited before any sample was taken",
				o->ntids > 1 ? "s" : "", (int)pid);
		else
			message("process %d exited before any sample was taken",
				(int)pid);
		goto out;
	}
	if (o->verbose) {
		uint64_t lookups, hits, rereads;
		cp_symbols_stats(cp_session_symbols(session), &lookups, &hits,
				 &rereads);
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
	const char *path = o->output ? o->output : "-";
	rc = cp_output_commit(out);
	out = NULL;
	if (rc < 0) {
		message("cannot write the profile to %s: %s", path,
			strerror(errno));
		goto out;
	}
	if (!o->quiet)
		summary(o, &stats, profile, path);
	exit_code = EXIT_OK;
out:
	cp_format_recorder_free(recorder);
	cp_output_abort(out);
	return exit_code;
}

/* --top: the live view until q, Ctrl-C, -d or the target's exit;
 * detach.  Returns the exit code.  */
static int run_top(const struct options *o, struct cp_session *session)
{
	struct top_config tc = {
		.frequency = o->frequency,
		.wall = o->wall,
		.max_depth = o->max_depth,
		.duration = o->duration,
		.stop = &stop_requested,
		.force = &force_requested,
	};
	int exit_code = top_run(session, &tc);
	detach(session);
	return exit_code;
}

int main(int argc, char **argv)
{
	cli_program = "cprof-attach";
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
	struct cp_session *session = NULL;

	/* Create the output first: an unwritable destination is reported
	 * before the target is touched.  A script writes where its write
	 * commands say.  */
	char output_error[PATH_MAX + 256];
	int rc = o.script || o.top_view ? 0
			  : cp_output_open(o.output, &out, output_error,
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
	if (o.no_debuginfod)
		unsetenv("DEBUGINFOD_URLS");
	struct cp_session_config config = {
		.debuginfo_dirs = o.debuginfo_dirs,
		.n_debuginfo_dirs = o.n_debuginfo_dirs,
		.no_demangle = o.no_demangle,
		/* DWARF is read only for what needs it: inlined frames and
		 * source positions.  */
		.no_dwarf = o.no_inline && !o.lines,
		.follow_forks = o.heap,
		.unwind_mode = o.unwind_mode,
		.verbose = o.verbose,
		.nice = -10,
		.warn = warning,
		.cancel = &force_requested,
	};
	if (cp_session_new(&config, &session) < 0) {
		message("out of memory");
		goto out;
	}
	if (o.script) {
		exit_code = run_script(&o, session);
		goto out;
	}
	if (o.top_view && !top_has_terminal()) {
		message("--top needs a terminal: standard input and output "
			"are not one");
		exit_code = EXIT_USAGE;
		goto out;
	}
	rc = start(&o, session);
	if (rc != 0) {
		exit_code = rc;
		goto out;
	}
	if (o.verbose) {
		size_t n;
		cp_target_threads(cp_session_target(session), &n);
		message("attached to %d (%zu threads), %u Hz",
			(int)cp_session_pid(session), n, o.frequency);
	}
	if (o.top_view)
		exit_code = run_top(&o, session);
	else if (o.heap)
		exit_code = run_heap(&o, session, out, argc, argv);
	else if (o.dump)
		exit_code = run_dump(&o, session, out);
	else
		exit_code = run_sampling(&o, session, out, argc, argv);
	out = NULL; /* committed or aborted by the run */
out:
	if (session)
		detach(session);
	cp_session_free(session);
	cp_output_abort(out);
	free(o.tids);
	free(o.debuginfo_dirs);
	free(o.script_items);
	/* A script's status is its commands'; a program it ran is left
	 * running.  */
	return o.script ? exit_code : finish_launch(&o, exit_code);
}
