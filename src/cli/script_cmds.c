/* The commands of the command language: one function each, in one table
 * (name, alias, usage, help), each a front end of a session operation
 * (cprof/session.h).  gdb's names wherever gdb has one.  */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attach.h"
#include "common.h"
#include "cprof/addrspace.h"
#include "cprof/error.h"
#include "cprof/format.h"
#include "cprof/output.h"
#include "cprof/profile.h"
#include "cprof/session.h"
#include "cprof/target.h"
#include "script_int.h"
#if __has_include("top.h")
#include "top.h"
#define HAVE_TOP 1
#endif

static const struct options *opts(struct script *s)
{
	return s->cfg.options;
}

/* Words of ARGS (split in place at blanks; "quoted" words unquoted).  */
static int words(char *args, char **argv, int max)
{
	return split_words(args, argv, max, false);
}

static int duration_arg(struct script *s, const char *text, double *seconds)
{
	if (!text)
		return script_error(s, "a duration is missing (seconds, or "
				    "with a unit: 500ms, 2s, 1m)");
	if (!parse_duration_text(text, seconds))
		return script_error(s, "invalid duration '%s': expected "
				    "seconds, or a number with ms, s or m",
				    text);
	return 0;
}

static int number_arg(struct script *s, const char *text, const char *what,
		      long lo, long hi, long *v)
{
	char *end;
	errno = 0;
	long x = text ? strtol(text, &end, 10) : 0;
	if (!text || end == text || *end || errno || x < lo || x > hi)
		return script_error(s, "invalid %s '%s': expected a whole "
				    "number from %ld to %ld", what,
				    text ? text : "", lo, hi);
	*v = x;
	return 0;
}

static int need_target(struct script *s)
{
	if (!cp_session_attached(s->session))
		return script_error(s, "no process: attach PID or run a "
				    "program first");
	if (cp_session_target_exited(s->session))
		return script_error(s, "process %d has exited",
				    (int)cp_session_pid(s->session));
	return 0;
}

static int session_error(struct script *s, int rc, const char *what)
{
	if (rc == -CP_E_SYS)
		return script_error(s, "%s: %s", what, strerror(errno));
	return script_error(s, "%s: %s", what, cp_strerror(rc));
}

/* ------------------------------------------------------------ session */

static int cmd_attach(struct script *s, char *args, struct script_reader *r)
{
	char *argv[4];
	int n = words(args, argv, 4);
	long pid;
	if (n != 1)
		return script_error(s, "usage: attach PID");
	if (number_arg(s, argv[0], "PID", 1, INT_MAX, &pid) < 0)
		return -1;
	if (cp_session_attached(s->session))
		return script_error(s, "already attached to process %d: "
				    "detach first",
				    (int)cp_session_pid(s->session));
	if (pid == visible_pid || pid == getpid())
		return script_error(s, "cannot attach to cprof-attach itself");
	pid_t tracer = 0;
	const struct options *o = opts(s);
	int rc = cp_session_attach(s->session, (pid_t)pid, o->tids, o->ntids,
				   false, &tracer);
	if (rc == -CP_E_NOPROC)
		return script_error(s, "no process %ld", pid);
	if (rc == -CP_E_TRACED && tracer > 0)
		return script_error(s, "process %ld is traced by process %d "
				    "already (a debugger?)", pid, (int)tracer);
	if (rc < 0)
		return session_error(s, rc, "cannot attach");
	size_t nthreads = 0;
	cp_target_threads(cp_session_target(s->session), &nthreads);
	s->exitcode = INT64_MIN;
	s->exitsignal = 0;
	out_text(s, "Attached to process %ld (%zu thread%s).\n", pid,
		 nthreads, nthreads == 1 ? "" : "s");
	out_int(s, "pid", pid);
	out_int(s, "threads", (int64_t)nthreads);
	return 0;
}

/* The launched command's status, once it ended.  */
static void note_exit(struct script *s, int status)
{
	if (status < 0)
		return;
	/* gdb's: $_exitcode when it exited, $_exitsignal when a signal
	 * killed it */
	s->exitcode = INT64_MIN;
	s->exitsignal = 0;
	if (WIFSIGNALED(status))
		s->exitsignal = WTERMSIG(status);
	else
		s->exitcode = WEXITSTATUS(status);
}

static int do_detach(struct script *s)
{
	pid_t pid = cp_session_pid(s->session);
	bool launched = launched_child > 0 && launched_child == pid;
	int status = cp_session_detach(s->session);
	if (launched && status != -1)
		launched_status = status;
	note_exit(s, status);
	s->heap_on = false;
	return (int)pid;
}

static int cmd_detach(struct script *s, char *args, struct script_reader *r)
{
	if (!cp_session_attached(s->session))
		return script_error(s, "not attached to a process");
	int pid = do_detach(s);
	out_text(s, "Detached from process %d.\n", pid);
	out_int(s, "pid", pid);
	return 0;
}

static int cmd_file(struct script *s, char *args, struct script_reader *r)
{
	char *argv[2];
	if (words(args, argv, 2) != 1)
		return script_error(s, "usage: file PROGRAM");
	free(s->program);
	s->program = strdup(argv[0]);
	if (!s->program)
		return script_error(s, "out of memory");
	out_str(s, "program", s->program);
	return 0;
}

static int cmd_run(struct script *s, char *args, struct script_reader *r)
{
	char *argv[64];
	int n = words(args, argv + 1, 62);
	if (cp_session_attached(s->session))
		return script_error(s, "already attached to process %d: "
				    "detach first",
				    (int)cp_session_pid(s->session));
	if (!s->program)
		return script_error(s, "no program: file PROGRAM first");
	argv[0] = s->program;
	argv[n + 1] = NULL;
	int rc = cp_session_launch(s->session, argv);
	if (rc == -CP_E_EXEC)
		return script_error(s, "cannot run '%s': %s", s->program,
				    strerror(errno));
	if (rc < 0)
		return session_error(s, rc, "cannot start the program");
	launched_child = cp_session_pid(s->session);
	s->exitcode = INT64_MIN;
	s->exitsignal = 0;
	out_text(s, "Started process %d: %s\n",
		 (int)cp_session_pid(s->session), s->program);
	out_int(s, "pid", cp_session_pid(s->session));
	return 0;
}

static int cmd_quit(struct script *s, char *args, struct script_reader *r)
{
	long status = 0;
	char *argv[2];
	int n = words(args, argv, 2);
	if (n > 1 ||
	    (n == 1 && number_arg(s, argv[0], "exit status", 0, 255,
				  &status) < 0))
		return n > 1 ? script_error(s, "usage: quit [STATUS]") : -1;
	if (cp_session_attached(s->session))
		do_detach(s);
	s->done = true;
	s->quit_status = (int)status;
	out_int(s, "status", status);
	return 0;
}

/* ------------------------------------------------------------ info */

static int info_threads(struct script *s)
{
	if (need_target(s) < 0)
		return -1;
	struct cp_target *t = cp_session_target(s->session);
	size_t n = 0;
	struct cp_thread *th = cp_target_threads(t, &n);
	const struct cp_session_hit *held = cp_session_held(s->session);
	out_text(s, "  %-8s %-16s %s\n", "TID", "NAME", "STATE");
	out_open(s, "threads", '[');
	for (size_t i = 0; i < n; i++) {
		char state = th[i].stopped ? 't'
					   : cp_target_thread_state(t, &th[i]);
		bool at_bp = held && held->tid == th[i].tid;
		out_text(s, "%c %-8d %-16s %c%s\n", at_bp ? '*' : ' ',
			 (int)th[i].tid, th[i].name, state,
			 at_bp ? " (at a breakpoint)" : "");
		out_open(s, NULL, '{');
		out_int(s, "tid", th[i].tid);
		out_str(s, "name", th[i].name);
		char st[2] = {state, 0};
		out_str(s, "state", st);
		out_bool(s, "held", at_bp);
		out_close(s, '}');
	}
	out_close(s, ']');
	return 0;
}

static int info_sharedlibrary(struct script *s)
{
	if (need_target(s) < 0)
		return -1;
	struct cp_addrspace *as = cp_session_addrspace(s->session);
	if (!as)
		return script_error(s, "no address space");
	const struct cp_addrspace_view *v = cp_addrspace_view(as);
	if (!v)
		return script_error(s, "out of memory");
	out_text(s, "%-18s %-18s %s\n", "From", "To", "Library");
	out_open(s, "libraries", '[');
	for (size_t i = 0; i < v->nmodules; i++) {
		const struct cp_addrspace_module *m = v->modules[i];
		out_text(s, "0x%016" PRIx64 " 0x%016" PRIx64 " %s\n",
			 m->start, m->end, m->path);
		out_open(s, NULL, '{');
		out_str(s, "path", m->path);
		out_int(s, "start", (int64_t)m->start);
		out_int(s, "end", (int64_t)m->end);
		out_close(s, '}');
	}
	out_close(s, ']');
	cp_addrspace_view_release(v);
	return 0;
}

static int info_inferior(struct script *s)
{
	bool attached = cp_session_attached(s->session);
	bool exited = attached && cp_session_target_exited(s->session);
	const char *state = !attached ? "none" : exited ? "exited" : "running";
	uint64_t at = cp_session_attached_ns(s->session);
	uint64_t since = at && attached ? cli_now_ns() - at : 0;
	double secs = (double)since / 1e9;
	const struct cp_profile *p = cp_session_profile(s->session);
	uint64_t samples = p ? cp_profile_total(p) : 0;
	uint64_t cpu = cp_session_cpu_ns(s->session);
	double overhead = since ? 100.0 * (double)cpu / (double)since : 0;
	if (attached)
		out_text(s, "process %d: %s, attached %.1f s, %" PRIu64
			 " samples in the session's profile; cprof used %.3f "
			 "s of CPU (%.2f %% of one CPU)\n",
			 (int)cp_session_pid(s->session), state, secs, samples,
			 (double)cpu / 1e9, overhead);
	else
		out_text(s, "no process attached\n");
	out_int(s, "pid", attached ? cp_session_pid(s->session) : 0);
	out_str(s, "state", state);
	out_num(s, "attached_seconds", secs);
	out_int(s, "samples", (int64_t)samples);
	out_num(s, "cpu_seconds", (double)cpu / 1e9);
	out_num(s, "overhead_percent", overhead);
	if (s->exitcode != INT64_MIN)
		out_int(s, "exitcode", s->exitcode);
	if (s->exitsignal)
		out_int(s, "exitsignal", s->exitsignal);
	return 0;
}

static int info_breakpoints(struct script *s)
{
	size_t n = 0;
	const struct cp_session_break *b = cp_session_breaks(s->session, &n);
	if (n == 0)
		out_text(s, "No breakpoints.\n");
	else
		out_text(s, "Num     Type           Enb Address            "
			 "Hits What\n");
	out_open(s, "breakpoints", '[');
	for (size_t i = 0; i < n; i++) {
		struct bp_extra *e = bp_extra(s, b[i].id, false);
		char what[600];
		if (b[i].file[0])
			snprintf(what, sizeof(what), "in %s at %s:%u",
				 b[i].function, b[i].file, b[i].line);
		else
			snprintf(what, sizeof(what), "in %s", b[i].function);
		out_text(s, "%-7d %-14s %-3s 0x%016" PRIx64 " %4" PRIu64
			 " %s\n", b[i].id,
			 b[i].temporary ? "tbreakpoint" : "breakpoint",
			 b[i].enabled ? "y" : "n", b[i].addr,
			 e ? e->hits : 0, what);
		if (e && e->condition)
			out_text(s, "\tstop only if %s\n", e->condition);
		if (e && e->ignore)
			out_text(s, "\tWill ignore next %" PRIu64 " crossings "
				 "of breakpoint.\n", e->ignore);
		if (b[i].hits)
			out_text(s, "\treached %" PRIu64 " time%s (%" PRIu64
				 " while nobody waited)\n", b[i].hits,
				 b[i].hits == 1 ? "" : "s", b[i].passed);
		if (e && e->has_commands)
			for (size_t k = 0; k < e->commands.n; k++)
				out_text(s, "        %s\n", e->commands.lines[k]);
		out_open(s, NULL, '{');
		out_int(s, "id", b[i].id);
		out_str(s, "location", b[i].location);
		out_str(s, "function", b[i].function);
		out_str(s, "file", b[i].file);
		out_int(s, "line", b[i].line);
		out_int(s, "address", (int64_t)b[i].addr);
		out_bool(s, "enabled", b[i].enabled);
		out_bool(s, "temporary", b[i].temporary);
		out_int(s, "hits", e ? (int64_t)e->hits : 0);
		out_int(s, "reached", (int64_t)b[i].hits);
		if (e && e->condition)
			out_str(s, "condition", e->condition);
		out_int(s, "ignore", e ? (int64_t)e->ignore : 0);
		out_close(s, '}');
	}
	out_close(s, ']');
	return 0;
}

static const char *const info_subs[] = {"threads", "sharedlibrary",
					"inferior", "breakpoints", NULL};

static int cmd_info(struct script *s, char *args, struct script_reader *r)
{
	char *argv[2];
	int n = words(args, argv, 2);
	if (n < 1)
		return script_error(s, "usage: info threads | sharedlibrary | "
				    "inferior | breakpoints");
	size_t len = strlen(argv[0]);
	out_str(s, "what", argv[0]);
	if (strncmp(argv[0], "threads", len) == 0)
		return info_threads(s);
	if (strncmp(argv[0], "sharedlibrary", len) == 0 ||
	    strcmp(argv[0], "dll") == 0)
		return info_sharedlibrary(s);
	if (strncmp(argv[0], "inferior", len) == 0 ||
	    strcmp(argv[0], "inferiors") == 0)
		return info_inferior(s);
	if (strncmp(argv[0], "breakpoints", len) == 0)
		return info_breakpoints(s);
	return script_error(s, "unknown info '%s': threads, sharedlibrary, "
			    "inferior or breakpoints", argv[0]);
}

/* ------------------------------------------------------------ sampling */

struct sample_args {
	struct cp_sampler_options so;
	double duration;  /* "for DURATION"; < 0: none */
	const char *sub;  /* "start", "stop" or NULL */
	const char *function; /* profile FUNC */
	pid_t tids[64];       /* -t TID... */
	size_t ntids;
};

/* [-F HZ] [--wall] [-t TID] [--max-depth N] [start|stop|for DURATION] */
static int sample_args(struct script *s, char *args, struct sample_args *a,
		       bool function)
{
	char *argv[32];
	int n = words(args, argv, 32);
	const struct options *o = opts(s);
	memset(a, 0, sizeof(*a));
	a->so.frequency = o->frequency ? o->frequency : 99;
	a->so.wall = o->wall;
	a->so.max_depth = o->max_depth ? o->max_depth : 512;
	a->so.unwind_mode = o->unwind_mode;
	a->duration = -1;
	for (int i = 0; i < n; i++) {
		const char *w = argv[i];
		long v;
		if (strcmp(w, "-F") == 0 || strcmp(w, "--frequency") == 0) {
			if (number_arg(s, i + 1 < n ? argv[++i] : NULL,
				       "frequency", 1, 10000, &v) < 0)
				return -1;
			a->so.frequency = (unsigned)v;
		} else if (strcmp(w, "--wall") == 0) {
			a->so.wall = true;
		} else if (strcmp(w, "--cpu") == 0) {
			a->so.wall = false;
		} else if (strcmp(w, "--max-depth") == 0) {
			if (number_arg(s, i + 1 < n ? argv[++i] : NULL,
				       "depth", 1, 65536, &v) < 0)
				return -1;
			a->so.max_depth = (size_t)v;
		} else if (strcmp(w, "-t") == 0 || strcmp(w, "--tid") == 0) {
			if (function)
				return script_error(s, "-t: profile samples "
						    "every thread inside FUNC");
			if (number_arg(s, i + 1 < n ? argv[++i] : NULL,
				       "thread id", 1, INT_MAX, &v) < 0)
				return -1;
			if (a->ntids == sizeof(a->tids) / sizeof(*a->tids))
				return script_error(s, "at most %zu threads "
						    "with -t",
						    sizeof(a->tids) /
							    sizeof(*a->tids));
			a->tids[a->ntids++] = (pid_t)v;
		} else if (strcmp(w, "for") == 0) {
			if (duration_arg(s, i + 1 < n ? argv[++i] : NULL,
					 &a->duration) < 0)
				return -1;
		} else if (!function && !a->sub &&
			   (strcmp(w, "start") == 0 || strcmp(w, "stop") == 0)) {
			a->sub = w;
		} else if (function && !a->function && w[0] != '-') {
			a->function = w;
		} else {
			return script_error(s, "unexpected '%s'; usage: %s", w,
					    function ? "profile FUNC [-F HZ] "
					    "[--wall] [--max-depth N] [for "
					    "DURATION]"
						     : "sample [-F HZ] [--wall] "
					    "[-t TID]... [--max-depth N] for "
					    "DURATION | start | stop");
		}
	}
	return 0;
}

static bool sampling_on(struct script *s)
{
	return s->sampling;
}

/* Sampling or heap tracing ended: say what the window held.  */
static void say_window(struct script *s, const struct cp_sampler_stats *st)
{
	const struct cp_profile *p = cp_session_profile(s->session);
	uint64_t total = p ? cp_profile_total(p) : 0;
	double taken = st->ticks_scheduled
			       ? 100.0 * (double)(st->ticks_scheduled -
						  st->ticks_missed) /
					 (double)st->ticks_scheduled
			       : 100.0;
	out_text(s, "%" PRIu64 " samples in %.2f s (%.1f %% of ticks "
		 "taken); %" PRIu64 " in the session's profile\n",
		 st->samples, st->elapsed, taken, total);
	out_int(s, "samples", (int64_t)st->samples);
	out_num(s, "seconds", st->elapsed);
	out_num(s, "ticks_taken_percent", taken);
	out_int(s, "profile_samples", (int64_t)total);
}

static int stop_sampling(struct script *s)
{
	int rc = cp_session_sample_stop(s->session);
	s->sampling = false;
	s->last = LAST_SAMPLES;
	struct cp_sampler_stats st = *cp_session_sample_stats(s->session);
	if (rc < 0)
		return session_error(s, rc, "sampling failed");
	say_window(s, &st);
	return 0;
}

/* Run the session until UNTIL_NS: breakpoints' commands run as they are
 * hit.  Returns 0 or -1; an interruption is an error.  */
static int drive(struct script *s, uint64_t until_ns)
{
	while (!s->done) {
		if (cli_now_ns() >= until_ns)
			return 0;
		if (s->cfg.interrupt && *s->cfg.interrupt)
			return script_error(s, "interrupted");
		if (!cp_session_attached(s->session) ||
		    cp_session_target_exited(s->session)) {
			/* nothing to serve: just the time */
			uint64_t left = until_ns - cli_now_ns();
			struct timespec ts = {(time_t)(left / 1000000000u),
					      (long)(left % 1000000000u)};
			if (nanosleep(&ts, NULL) < 0 && errno == EINTR)
				continue;
			return 0;
		}
		if (script_wait(s, until_ns, NULL) < 0)
			return -1;
		if (cp_session_target_exited(s->session))
			return 0;
	}
	return 0;
}

static int run_window(struct script *s, double seconds)
{
	uint64_t until = cli_now_ns() + (uint64_t)(seconds * 1e9);
	int rc = drive(s, until);
	/* (the target's exit stopped it already) */
	int rc2 = sampling_on(s) ? stop_sampling(s) : 0;
	return rc < 0 ? rc : rc2;
}

/* Can sampling start (a target, sampling and heap tracing off)?  The
 * profile it fills is told the rate and the clock.  */
static int ready_to_sample(struct script *s,
			   const struct cp_sampler_options *so)
{
	if (need_target(s) < 0)
		return -1;
	if (sampling_on(s))
		return script_error(s, "sampling is on already: sample stop "
				    "first");
	if (s->heap_on)
		return script_error(s, "heap tracing is on: heap stop first");
	struct cp_profile *p = cp_session_prepare_profile(s->session);
	if (!p)
		return script_error(s, "out of memory");
	struct cp_profile_meta *meta = cp_profile_meta(p);
	meta->frequency = so->frequency;
	snprintf(meta->time_type, sizeof(meta->time_type), "%s",
		 so->wall ? "wall" : "cpu");
	return 0;
}

/* sample -t TID: the gate admits the threads named.  */
static bool tid_gate(void *arg, pid_t tid, struct cp_snapshot *held,
		     uint64_t *cpu_ns)
{
	struct script *s = arg;
	(void)held;
	(void)cpu_ns;
	for (size_t i = 0; i < s->nsample_tids; i++)
		if (s->sample_tids[i] == tid)
			return true;
	return false;
}

static int cmd_sample(struct script *s, char *args, struct script_reader *r)
{
	struct sample_args a;
	if (sample_args(s, args, &a, false) < 0)
		return -1;
	if (a.sub && strcmp(a.sub, "stop") == 0) {
		if (!sampling_on(s))
			return script_error(s, "sampling is not on");
		return stop_sampling(s);
	}
	if (!a.sub && a.duration < 0)
		return script_error(s, "usage: sample [-F HZ] [--wall] "
				    "[--max-depth N] for DURATION | start | "
				    "stop");
	if (ready_to_sample(s, &a.so) < 0)
		return -1;
	if (a.ntids) {
		struct cp_target *t = cp_session_target(s->session);
		for (size_t i = 0; i < a.ntids; i++)
			if (!cp_target_thread(t, a.tids[i]))
				return script_error(s, "no thread %d in process "
						    "%d", (int)a.tids[i],
						    (int)cp_session_pid(s->session));
		memcpy(s->sample_tids, a.tids, a.ntids * sizeof(*a.tids));
		s->nsample_tids = a.ntids;
		a.so.gate = tid_gate;
		a.so.gate_arg = s;
	}
	int rc = cp_session_sample_start(s->session, &a.so);
	if (rc < 0)
		return session_error(s, rc, "cannot start sampling");
	s->sampling = true;
	out_int(s, "frequency", a.so.frequency);
	out_bool(s, "wall", a.so.wall);
	if (a.sub) {
		out_text(s, "Sampling process %d at %u Hz (%s).\n",
			 (int)cp_session_pid(s->session), a.so.frequency,
			 a.so.wall ? "wall" : "cpu");
		return 0;
	}
	return run_window(s, a.duration);
}

static int cmd_profile(struct script *s, char *args, struct script_reader *r)
{
	struct sample_args a;
	if (sample_args(s, args, &a, true) < 0)
		return -1;
	if (!a.function)
		return script_error(s, "usage: profile FUNC [-F HZ] [--wall] "
				    "[--max-depth N] [for DURATION]");
	if (ready_to_sample(s, &a.so) < 0)
		return -1;
	int rc = cp_session_sample_start_in(s->session, a.function, &a.so);
	if (rc == -CP_E_NOSYM)
		return script_error(s, "no function '%s' in process %d",
				    a.function, (int)cp_session_pid(s->session));
	if (rc < 0)
		return session_error(s, rc, "cannot profile the function");
	s->sampling = true;
	out_str(s, "function", a.function);
	out_int(s, "frequency", a.so.frequency);
	if (a.duration < 0) {
		out_text(s, "Sampling process %d inside %s at %u Hz.\n",
			 (int)cp_session_pid(s->session), a.function,
			 a.so.frequency);
		return 0;
	}
	rc = run_window(s, a.duration);
	struct cp_session_in_stats in;
	cp_session_in_stats(s->session, &in);
	out_text(s, "%s: %" PRIu64 " calls entered, %" PRIu64 " returned\n",
		 a.function, in.entries, in.returns);
	out_int(s, "calls", (int64_t)in.entries);
	out_int(s, "returns", (int64_t)in.returns);
	return rc;
}

static int cmd_reset(struct script *s, char *args, struct script_reader *r)
{
	int rc = cp_session_reset(s->session);
	if (rc < 0)
		return session_error(s, rc, "cannot reset");
	out_text(s, "The session's profile is empty.\n");
	return 0;
}

/* ------------------------------------------------------------ write */

static struct cp_format_options format_options(struct script *s)
{
	return attach_format_options(opts(s));
}

static const struct cp_format *pick_format(struct script *s,
					   const char *name, const char *path,
					   enum cp_format_kind kind)
{
	const struct cp_format *f = NULL;
	if (name) {
		f = cp_format_find(name);
	} else {
		f = cp_format_for_path(path);
		if (!cp_format_supports(f, kind))
			f = cp_format_default(kind);
	}
	if (!cp_format_supports(f, kind)) {
		char names[256];
		script_error(s, "unknown format '%s' for %s: %s",
			     name ? name : "", kind == CP_FORMAT_HEAP ? "the heap"
								       : "samples",
			     cp_format_names(kind, names, sizeof(names)));
		return NULL;
	}
	if (f->binary && (!path || strcmp(path, "-") == 0) &&
	    isatty(STDOUT_FILENO)) {
		script_error(s, "%s output is binary: give a file", f->name);
		return NULL;
	}
	return f;
}

/* Write IN to PATH with FORMAT; the output's rules (cprof/output.h).  */
static int write_to(struct script *s, const char *path,
		    const struct cp_format *format,
		    const struct cp_format_input *in)
{
	struct cp_output *out = NULL;
	char error[PATH_MAX + 256];
	int rc = cp_output_open(path, &out, error, sizeof(error));
	if (rc < 0)
		return script_error(s, "%s", error);
	struct cp_format_options fo = format_options(s);
	rc = cp_format_write(format, in, &fo, cp_output_stream(out));
	if (rc < 0) {
		int e = errno;
		cp_output_abort(out);
		return script_error(s, "cannot write %s: %s", path,
				    rc == -CP_E_SYS ? strerror(e)
						    : cp_strerror(rc));
	}
	if (cp_output_commit(out) < 0)
		return script_error(s, "cannot write %s: %s", path,
				    strerror(errno));
	return 0;
}

/* The heap profile of the last trace, filled once.  */
static struct cp_profile *heap_profile(struct script *s)
{
	struct cp_heap *heap = cp_session_heap(s->session);
	struct cp_profile *profile = cp_session_heap_profile(s->session);
	if (!heap || !profile)
		return NULL;
	if (!s->heap_filled) {
		cp_session_heap_resolve(s->session);
		if (attach_heap_profile(opts(s), heap, profile) < 0)
			return NULL;
		s->heap_filled = true;
	}
	return profile;
}

static int cmd_write(struct script *s, char *args, struct script_reader *r)
{
	char *argv[8];
	int n = words(args, argv, 8);
	const char *path = NULL, *format = NULL;
	enum last_data what = s->last;
	for (int i = 0; i < n; i++) {
		if (strcmp(argv[i], "--format") == 0 && i + 1 < n)
			format = argv[++i];
		else if (strncmp(argv[i], "--format=", 9) == 0)
			format = argv[i] + 9;
		else if (strcmp(argv[i], "--heap") == 0)
			what = LAST_HEAP;
		else if (strcmp(argv[i], "--samples") == 0)
			what = LAST_SAMPLES;
		else if (!path && (argv[i][0] != '-' || !argv[i][1]))
			path = argv[i];
		else
			return script_error(s, "usage: write FILE [--format "
					    "FORMAT] [--samples | --heap]");
	}
	if (!path)
		return script_error(s, "usage: write FILE [--format FORMAT] "
				    "[--samples | --heap]");
	if (what == LAST_NONE)
		return script_error(s, "nothing to write yet: sample, profile "
				    "or heap start/stop first");
	if (what == LAST_HEAP) {
		if (s->heap_on)
			return script_error(s, "heap tracing is on: heap stop "
					    "first");
		const struct cp_format *f =
			pick_format(s, format, path, CP_FORMAT_HEAP);
		if (!f)
			return -1;
		struct cp_profile *profile = heap_profile(s);
		if (!profile)
			return script_error(s, "no heap trace to write");
		struct cp_format_input in = {
			.kind = CP_FORMAT_HEAP, .profile = profile,
			.heap = cp_heap_summary(cp_session_heap(s->session)),
		};
		if (write_to(s, path, f, &in) < 0)
			return -1;
		out_text(s, "Heap profile written to %s (%s).\n", path, f->name);
		out_str(s, "path", path);
		out_str(s, "format", f->name);
		out_str(s, "kind", "heap");
		return 0;
	}
	const struct cp_format *f = pick_format(s, format, path,
						CP_FORMAT_SAMPLED);
	if (!f)
		return -1;
	if (!f->write)
		return script_error(s, "%s is written only while sampling, "
				    "from the command line (-o FILE --format "
				    "%s)", f->name, f->name);
	struct cp_profile *p = cp_session_profile(s->session);
	if (!p || cp_profile_total(p) == 0)
		return script_error(s, "no samples to write: sample first");
	struct cp_profile *taken = cp_session_take_profile(s->session);
	if (!taken)
		return script_error(s, "out of memory");
	struct cp_profile_meta *meta = cp_profile_meta(taken);
	snprintf(meta->command, sizeof(meta->command), "cprof-attach script");
	uint64_t total = cp_profile_total(taken);
	struct cp_format_input in = {.kind = CP_FORMAT_SAMPLED,
				     .profile = taken};
	int rc = write_to(s, path, f, &in);
	cp_profile_free(taken);
	if (rc < 0)
		return -1;
	out_text(s, "%" PRIu64 " samples written to %s (%s).\n", total, path,
		 f->name);
	out_str(s, "path", path);
	out_str(s, "format", f->name);
	out_str(s, "kind", "samples");
	out_int(s, "samples", (int64_t)total);
	return 0;
}

/* ------------------------------------------------------------ stacks */

static void print_thread(struct script *s, const struct cp_dump_thread *t)
{
	out_open(s, NULL, '{');
	out_int(s, "tid", t->tid);
	out_str(s, "name", t->name);
	out_open(s, "frames", '[');
	for (size_t i = 0; i < t->nframes; i++) {
		const struct cp_dump_frame *f = &t->frames[i];
		const char *fn = f->frame && f->frame->function
					 ? f->frame->function
					 : "??";
		if (f->frame && f->frame->file && f->frame->line)
			out_text(s, "#%-3zu 0x%016" PRIx64 " in %s (%s:%d)%s%s%s\n",
				 i, f->address, fn, f->frame->file,
				 f->frame->line, f->module ? " [" : "",
				 f->module ? f->module : "",
				 f->module ? "]" : "");
		else
			out_text(s, "#%-3zu 0x%016" PRIx64 " in %s%s%s%s\n", i,
				 f->address, fn, f->module ? " [" : "",
				 f->module ? f->module : "",
				 f->module ? "]" : "");
		out_open(s, NULL, '{');
		out_int(s, "address", (int64_t)f->address);
		out_str(s, "function", fn);
		if (f->frame && f->frame->file) {
			out_str(s, "file", f->frame->file);
			out_int(s, "line", f->frame->line);
		}
		if (f->module)
			out_str(s, "module", f->module);
		if (f->frame && f->frame->inlined)
			out_bool(s, "inlined", true);
		out_close(s, '}');
	}
	out_close(s, ']');
	out_close(s, '}');
}

static int cmd_bt(struct script *s, char *args, struct script_reader *r)
{
	char *argv[4];
	int n = words(args, argv, 4);
	if (need_target(s) < 0)
		return -1;
	long tid = 0;
	if (n > 1 || (n == 1 && number_arg(s, argv[0], "thread id", 1,
					   INT_MAX, &tid) < 0))
		return n > 1 ? script_error(s, "usage: bt [TID]") : -1;
	if (!tid && !cp_session_held(s->session))
		tid = cp_session_pid(s->session);
	struct cp_dump *dump = NULL;
	int rc = cp_session_backtrace(s->session, (pid_t)tid,
				      opts(s)->max_depth ? opts(s)->max_depth
							 : 512,
				      &dump);
	if (rc == -CP_E_INVAL)
		return script_error(s, "no thread %ld in process %d", tid,
				    (int)cp_session_pid(s->session));
	if (rc < 0)
		return session_error(s, rc, "cannot unwind");
	out_open(s, "threads", '[');
	for (size_t i = 0; i < dump->nthreads; i++) {
		if (dump->nthreads > 1 || tid)
			out_text(s, "Thread %d \"%s\":\n",
				 (int)dump->threads[i].tid, dump->threads[i].name);
		print_thread(s, &dump->threads[i]);
	}
	out_close(s, ']');
	cp_dump_free(dump);
	return 0;
}

static int cmd_dump(struct script *s, char *args, struct script_reader *r)
{
	if (need_target(s) < 0)
		return -1;
	struct cp_dump *dump = NULL;
	int rc = cp_session_dump(s->session,
				 opts(s)->max_depth ? opts(s)->max_depth : 512,
				 &dump);
	if (rc == -CP_E_BUSY)
		return script_error(s, "sampling or heap tracing is on: bt "
				    "TID shows one thread meanwhile");
	if (rc < 0)
		return session_error(s, rc, "cannot dump the stacks");
	out_int(s, "pid", dump->pid);
	out_open(s, "threads", '[');
	for (size_t i = 0; i < dump->nthreads; i++) {
		out_text(s, "%sThread %d \"%s\":\n", i ? "\n" : "",
			 (int)dump->threads[i].tid, dump->threads[i].name);
		print_thread(s, &dump->threads[i]);
	}
	out_close(s, ']');
	cp_dump_free(dump);
	return 0;
}

static int cmd_thread(struct script *s, char *args, struct script_reader *r)
{
	char *argv[5];
	int n = words(args, argv, 5);
	if (n == 3 && strcmp(argv[0], "apply") == 0 &&
	    strcmp(argv[1], "all") == 0 &&
	    (strcmp(argv[2], "bt") == 0 || strcmp(argv[2], "backtrace") == 0))
		return cmd_dump(s, (char[]){""}, r);
	return script_error(s, "usage: thread apply all bt");
}

/* ------------------------------------------------------------ heap */

static void say_heap(struct script *s, const struct cp_heap_summary *h)
{
	out_text(s, "%llu allocations (%llu bytes), %llu frees; %llu "
		 "allocations (%llu bytes) live\n",
		 (unsigned long long)h->allocations,
		 (unsigned long long)h->alloc_bytes,
		 (unsigned long long)h->frees,
		 (unsigned long long)h->live_count,
		 (unsigned long long)h->live_bytes);
	out_int(s, "allocations", (int64_t)h->allocations);
	out_int(s, "alloc_bytes", (int64_t)h->alloc_bytes);
	out_int(s, "frees", (int64_t)h->frees);
	out_int(s, "live_count", (int64_t)h->live_count);
	out_int(s, "live_bytes", (int64_t)h->live_bytes);
}

static int cmd_heap(struct script *s, char *args, struct script_reader *r)
{
	char *argv[4];
	int n = words(args, argv, 4);
	if (n >= 1 && strcmp(argv[0], "start") == 0 && n == 1) {
		if (need_target(s) < 0)
			return -1;
		if (s->heap_on)
			return script_error(s, "heap tracing is on already");
		if (sampling_on(s))
			return script_error(s, "sampling is on: sample stop "
					    "first");
		struct cp_heap_options ho = {
			.max_depth = opts(s)->max_depth ? opts(s)->max_depth
							: 512,
			.force_step = getenv("CPROF_HEAP_FORCE_STEP") != NULL,
		};
		target_written = 1;
		int rc = cp_session_heap_start(s->session, &ho);
		if (rc == -CP_E_NOALLOC)
			return script_error(s, "no allocator entry points found "
					    "in process %d",
					    (int)cp_session_pid(s->session));
		if (rc < 0)
			return session_error(s, rc, "cannot start heap tracing");
		s->heap_on = true;
		s->heap_filled = false;
		const char *where = "";
		size_t nbps = cp_heap_breakpoints(cp_session_heap(s->session),
						  &where);
		out_text(s, "Tracing the heap of process %d: %zu breakpoints "
			 "in %s.\n", (int)cp_session_pid(s->session), nbps,
			 where);
		out_int(s, "breakpoints", (int64_t)nbps);
		return 0;
	}
	if (n == 1 && strcmp(argv[0], "stop") == 0) {
		if (!s->heap_on)
			return script_error(s, "heap tracing is not on");
		int rc = cp_session_heap_stop(s->session);
		s->heap_on = false;
		s->last = LAST_HEAP;
		if (rc < 0)
			return script_error(s, "not every byte written into "
					    "the target could be restored");
		say_heap(s, cp_heap_summary(cp_session_heap(s->session)));
		return 0;
	}
	if (n >= 1 && strcmp(argv[0], "report") == 0) {
		long top = 10;
		if (n == 3 && strcmp(argv[1], "--top") == 0) {
			if (number_arg(s, argv[2], "--top", 1, 1000000, &top) < 0)
				return -1;
		} else if (n != 1) {
			return script_error(s, "usage: heap report [--top N]");
		}
		if (s->heap_on)
			return script_error(s, "heap tracing is on: heap stop "
					    "first");
		struct cp_profile *profile = heap_profile(s);
		if (!profile)
			return script_error(s, "no heap trace yet: heap start, "
					    "then heap stop");
		const struct cp_heap_summary *h =
			cp_heap_summary(cp_session_heap(s->session));
		say_heap(s, h);
		if (!s->json) {
			struct cp_format_input in = {.kind = CP_FORMAT_HEAP,
						     .profile = profile,
						     .heap = h};
			struct cp_format_options fo = format_options(s);
			fo.top = (size_t)top;
			cp_format_write(cp_format_find("report"), &in, &fo,
					stdout);
		}
		return 0;
	}
	return script_error(s, "usage: heap start | stop | report [--top N]");
}

/* ------------------------------------------------------------ breakpoints */

static int do_break(struct script *s, char *args, bool temporary)
{
	char *argv[2];
	if (words(args, argv, 2) != 1)
		return script_error(s, "usage: %s FUNCTION | FILE:LINE",
				    temporary ? "tbreak" : "break");
	if (need_target(s) < 0)
		return -1;
	int id = 0;
	int rc = cp_session_break_insert(s->session, argv[0], temporary, &id);
	if (rc == -CP_E_NOSYM)
		return script_error(s, "no function or source line \"%s\" in "
				    "process %d", argv[0],
				    (int)cp_session_pid(s->session));
	if (rc == -CP_E_BUSY && s->heap_on)
		return script_error(s, "the kernel's uprobes of heap tracing are "
				    "at %s: heap stop first, or set breakpoints "
				    "before heap start (it then uses traps)",
				    argv[0]);
	if (rc < 0)
		return session_error(s, rc, "cannot set the breakpoint");
	s->bpnum = id;
	size_t n = 0;
	const struct cp_session_break *b = cp_session_breaks(s->session, &n);
	for (size_t i = 0; i < n; i++) {
		if (b[i].id != id)
			continue;
		if (b[i].file[0])
			out_text(s, "%s %d at 0x%" PRIx64 ": file %s, line %u.\n",
				 temporary ? "Temporary breakpoint" : "Breakpoint",
				 id, b[i].addr, b[i].file, b[i].line);
		else
			out_text(s, "%s %d at 0x%" PRIx64 " (%s)\n",
				 temporary ? "Temporary breakpoint" : "Breakpoint",
				 id, b[i].addr, b[i].function);
		struct bp_extra *e = bp_extra(s, id, true);
		if (e) {
			snprintf(e->function, sizeof(e->function), "%s",
				 b[i].function);
			snprintf(e->file, sizeof(e->file), "%s", b[i].file);
			e->line = b[i].line;
			e->temporary = temporary;
		}
		out_int(s, "id", id);
		out_int(s, "address", (int64_t)b[i].addr);
		out_str(s, "function", b[i].function);
		out_str(s, "file", b[i].file);
		out_int(s, "line", b[i].line);
	}
	return 0;
}

static int cmd_break(struct script *s, char *args, struct script_reader *r)
{
	return do_break(s, args, false);
}

static int cmd_tbreak(struct script *s, char *args, struct script_reader *r)
{
	return do_break(s, args, true);
}

static bool bp_exists(struct script *s, int id)
{
	size_t n = 0;
	const struct cp_session_break *b = cp_session_breaks(s->session, &n);
	for (size_t i = 0; i < n; i++)
		if (b[i].id == id)
			return true;
	return false;
}

static int bp_number(struct script *s, const char *text, int *id)
{
	long v;
	if (number_arg(s, text, "breakpoint number", 1, INT_MAX, &v) < 0)
		return -1;
	if (!bp_exists(s, (int)v))
		return script_error(s, "no breakpoint number %ld", v);
	*id = (int)v;
	return 0;
}

static int cmd_condition(struct script *s, char *args, struct script_reader *r)
{
	char *p = args;
	while (isspace((unsigned char)*p))
		p++;
	char num[32];
	size_t k = 0;
	while (p[k] && !isspace((unsigned char)p[k]) && k < sizeof(num) - 1) {
		num[k] = p[k];
		k++;
	}
	num[k] = '\0';
	int id;
	if (!k)
		return script_error(s, "usage: condition N [EXPRESSION]");
	if (bp_number(s, num, &id) < 0)
		return -1;
	p += k;
	while (isspace((unsigned char)*p))
		p++;
	struct bp_extra *e = bp_extra(s, id, true);
	if (!e)
		return script_error(s, "out of memory");
	free(e->condition);
	e->condition = NULL;
	if (*p) {
		e->condition = strdup(p);
		if (!e->condition)
			return script_error(s, "out of memory");
		out_text(s, "Breakpoint %d stops only if %s.\n", id, p);
	} else {
		out_text(s, "Breakpoint %d now unconditional.\n", id);
	}
	out_int(s, "id", id);
	return 0;
}

static int cmd_ignore(struct script *s, char *args, struct script_reader *r)
{
	char *argv[3];
	int id;
	long count;
	if (words(args, argv, 3) != 2)
		return script_error(s, "usage: ignore N COUNT");
	if (bp_number(s, argv[0], &id) < 0 ||
	    number_arg(s, argv[1], "count", 0, LONG_MAX, &count) < 0)
		return -1;
	struct bp_extra *e = bp_extra(s, id, true);
	if (!e)
		return script_error(s, "out of memory");
	e->ignore = (uint64_t)count;
	out_text(s, "Will ignore next %ld crossings of breakpoint %d.\n",
		 count, id);
	out_int(s, "id", id);
	out_int(s, "ignore", count);
	return 0;
}

/* delete / disable / enable [N...]: every breakpoint when none given.  */
static int each_bp(struct script *s, char *args, int what)
{
	char *argv[64];
	int n = words(args, argv, 64);
	int ids[64];
	int nids = 0;
	if (n == 0) {
		size_t nb = 0;
		const struct cp_session_break *b =
			cp_session_breaks(s->session, &nb);
		for (size_t i = 0; i < nb && nids < 64; i++)
			ids[nids++] = b[i].id;
	}
	for (int i = 0; i < n; i++)
		if (bp_number(s, argv[i], &ids[nids++]) < 0)
			return -1;
	out_open(s, "ids", '[');
	for (int i = 0; i < nids; i++) {
		int rc = what == 0 ? cp_session_break_delete(s->session, ids[i])
				   : cp_session_break_enable(s->session, ids[i],
							     what == 2);
		if (rc < 0)
			return session_error(s, rc, "breakpoint");
		if (what == 0)
			bp_extra_drop(s, ids[i]);
		out_int(s, NULL, ids[i]);
	}
	out_close(s, ']');
	return 0;
}

static int cmd_delete(struct script *s, char *args, struct script_reader *r)
{
	char *p = args;
	while (isspace((unsigned char)*p))
		p++;
	if (strncmp(p, "breakpoints", 11) == 0)
		p += 11;
	return each_bp(s, p, 0);
}

static int cmd_disable(struct script *s, char *args, struct script_reader *r)
{
	return each_bp(s, args, 1);
}

static int cmd_enable(struct script *s, char *args, struct script_reader *r)
{
	return each_bp(s, args, 2);
}

/* ------------------------------------------------------------ waiting */

/* A hit of breakpoint HIT: its condition, ignore count and commands.
 * Returns 1 when the wait goes on (the condition false, ignored, or
 * `continue` in its commands), 0 when it ends, -1 on error.  */
static int on_hit(struct script *s, const struct cp_session_hit *hit)
{
	struct bp_extra *e = bp_extra(s, hit->id, true);
	if (!e)
		return script_error(s, "out of memory");
	if (e->condition) {
		struct value v = {0};
		int rc = expr_eval(s, e->condition, &v);
		bool go = value_true(&v);
		value_clear(&v);
		if (rc < 0) {
			char err[sizeof(s->error)];
			snprintf(err, sizeof(err), "%s", s->error);
			s->error_set = false;
			return script_error(s, "the condition of breakpoint "
					    "%d: %s", hit->id, err);
		}
		if (!go)
			return 1;
	}
	if (e->ignore) {
		e->ignore--;
		return 1;
	}
	e->hits++;
	s->last_hits = e->hits;
	const char *fn = e->function[0] ? e->function : "?", *file = e->file;
	unsigned line = e->line;
	size_t n = 0;
	const struct cp_session_break *b = cp_session_breaks(s->session, &n);
	bool temporary = e->temporary;
	for (size_t i = 0; i < n; i++)
		if (b[i].id == hit->id) {
			fn = b[i].function;
			file = b[i].file;
			line = b[i].line;
			temporary = b[i].temporary;
		}
	bool silent = e->has_commands && e->commands.n > 0 &&
		      strcmp(e->commands.lines[0], "silent") == 0;
	if (silent)
		; /* gdb's: the commands say what they want */
	else if (file[0])
		out_text(s, "\n%s %d, %s () at %s:%u (thread %d)\n",
			 temporary ? "Temporary breakpoint" : "Breakpoint",
			 hit->id, fn, file, line, (int)hit->tid);
	else
		out_text(s, "\n%s %d, %s () (thread %d)\n",
			 temporary ? "Temporary breakpoint" : "Breakpoint",
			 hit->id, fn, (int)hit->tid);
	out_event(s, "breakpoint");
	out_int(s, "id", hit->id);
	out_int(s, "tid", hit->tid);
	out_str(s, "function", fn);
	if (file[0]) {
		out_str(s, "file", file);
		out_int(s, "line", line);
	}
	out_int(s, "hits", (int64_t)e->hits);
	out_event_end(s);
	if (!e->has_commands)
		return 0;
	/* Its commands (a copy: they may replace themselves), with the
	 * thread held until one does not need it.  */
	struct body copy;
	int rc = body_copy(s, &copy, &e->commands);
	bool was_in = s->in_commands;
	s->in_commands = true;
	s->resume_wait = false;
	if (rc == 0)
		rc = run_body(s, &copy);
	s->in_commands = was_in;
	body_free(&copy);
	bool resume = s->resume_wait;
	s->resume_wait = false;
	if (rc < 0)
		return -1;
	return resume ? 1 : 0;
}

int script_wait(struct script *s, uint64_t until_ns, const char *why)
{
	for (;;) {
		if (s->done || !cp_session_attached(s->session))
			return 0;
		enum cp_session_end end = CP_SESSION_DEADLINE;
		struct cp_session_hit hit = {0};
		int rc = cp_session_wait(s->session, until_ns, s->cfg.interrupt,
					 &end, &hit);
		if (rc < 0)
			return session_error(s, rc, "waiting failed");
		switch (end) {
		case CP_SESSION_DEADLINE:
			return 0;
		case CP_SESSION_STOPPED:
			if (cp_session_held(s->session))
				cp_session_continue(s->session);
			return script_error(s, "interrupted");
		case CP_SESSION_EXITED:
		case CP_SESSION_EXEC: {
			pid_t pid = cp_session_pid(s->session);
			if (end == CP_SESSION_EXEC) {
				out_text(s, "process %d called execve\n",
					 (int)pid);
				return 0;
			}
			if (sampling_on(s))
				stop_sampling(s);
			if (s->heap_on) {
				cp_session_heap_stop(s->session);
				s->heap_on = false;
				s->last = LAST_HEAP;
			}
			do_detach(s);
			if (s->exitsignal)
				out_text(s, "[process %d killed by signal %d "
					 "(%s)]\n", (int)pid, s->exitsignal,
					 strsignal(s->exitsignal));
			else if (s->exitcode != INT64_MIN)
				out_text(s, "[process %d exited with code "
					 "%lld]\n", (int)pid,
					 (long long)s->exitcode);
			else
				out_text(s, "[process %d exited]\n", (int)pid);
			out_event(s, "exited");
			out_int(s, "pid", pid);
			if (s->exitcode != INT64_MIN)
				out_int(s, "exitcode", s->exitcode);
			if (s->exitsignal)
				out_int(s, "exitsignal", s->exitsignal);
			out_event_end(s);
			return 0;
		}
		case CP_SESSION_BREAK:
			break;
		}
		if (s->in_commands) {
			/* A breakpoint's commands are running (sample for,
			 * sleep): other hits pass, as while no one waits.  */
			cp_session_continue(s->session);
			continue;
		}
		rc = on_hit(s, &hit);
		if (cp_session_held(s->session))
			cp_session_continue(s->session);
		if (!bp_exists(s, hit.id)) /* a temporary one, deleted */
			bp_extra_drop(s, hit.id);
		if (rc <= 0)
			return rc;
	}
}

bool script_idle(struct script *s, unsigned ms)
{
	if (s->done || !cp_session_attached(s->session) ||
	    cp_session_target_exited(s->session))
		return false;
	size_t nbreaks = 0;
	cp_session_breaks(s->session, &nbreaks);
	if (!sampling_on(s) && !s->heap_on && nbreaks == 0)
		return false;
	const char *saved = s->file;
	unsigned saved_line = s->line;
	s->file = NULL;
	snprintf(s->command, sizeof(s->command), "(idle)");
	if (script_wait(s, cli_now_ns() + (uint64_t)ms * 1000000u, NULL) < 0 &&
	    s->error_set) {
		fflush(stdout);
		message("%s", s->error);
		s->error_set = false;
	}
	s->file = saved;
	s->line = saved_line;
	return true;
}

static int cmd_wait(struct script *s, char *args, struct script_reader *r)
{
	char *argv[3];
	int n = words(args, argv, 3);
	double secs = 0;
	if (n == 2 && strcmp(argv[0], "for") == 0) {
		if (duration_arg(s, argv[1], &secs) < 0)
			return -1;
	} else if (n != 0) {
		return script_error(s, "usage: wait [for DURATION]");
	}
	if (s->in_commands) {
		/* in a breakpoint's commands: the hit is handled; go on */
		return 0;
	}
	if (need_target(s) < 0)
		return -1;
	uint64_t until = secs > 0 ? cli_now_ns() + (uint64_t)(secs * 1e9) : 0;
	return script_wait(s, until, "wait");
}

static int cmd_continue(struct script *s, char *args, struct script_reader *r)
{
	if (s->in_commands) {
		s->resume_wait = true;
		if (cp_session_held(s->session))
			cp_session_continue(s->session);
		return 0;
	}
	return cmd_wait(s, args, r);
}

static int cmd_sleep(struct script *s, char *args, struct script_reader *r)
{
	char *argv[2];
	double secs;
	if (words(args, argv, 2) != 1)
		return script_error(s, "usage: sleep DURATION");
	if (duration_arg(s, argv[0], &secs) < 0)
		return -1;
	return drive(s, cli_now_ns() + (uint64_t)(secs * 1e9));
}

/* ------------------------------------------------------------ control */

static int cmd_set(struct script *s, char *args, struct script_reader *r)
{
	char *p = args;
	while (isspace((unsigned char)*p))
		p++;
	if (strncmp(p, "var ", 4) == 0 || strncmp(p, "variable ", 9) == 0) {
		p += p[3] == ' ' ? 4 : 9;
		while (isspace((unsigned char)*p))
			p++;
	}
	if (*p == '$') {
		size_t n = 1;
		while (isalnum((unsigned char)p[n]) || p[n] == '_')
			n++;
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int)(n - 1), p + 1);
		const char *q = p + n;
		while (isspace((unsigned char)*q))
			q++;
		if (n == 1 || *q != '=' || q[1] == '=')
			return script_error(s, "usage: set $NAME = EXPRESSION");
		if (name[0] == '_' || strcmp(name, "bpnum") == 0)
			return script_error(s, "$%s is cprof's: it cannot be "
					    "set", name);
		struct value v;
		if (expr_eval(s, q + 1, &v) < 0)
			return -1;
		int rc = var_set(s, name, &v);
		char buf[64];
		out_str(s, "variable", name);
		out_str(s, "value", value_text(&v, buf, sizeof(buf)));
		value_clear(&v);
		return rc;
	}
	char *argv[4];
	int n = words(p, argv, 4);
	if (n == 3 && strcmp(argv[0], "print") == 0 &&
	    strcmp(argv[1], "json") == 0) {
		if (strcmp(argv[2], "on") == 0)
			s->json = true;
		else if (strcmp(argv[2], "off") == 0)
			s->json = false;
		else
			return script_error(s, "usage: set print json on|off");
		return 0;
	}
	if (n == 2 && (strcmp(argv[0], "confirm") == 0 ||
		       strcmp(argv[0], "pagination") == 0))
		return 0; /* cprof never asks and never pages */
	return script_error(s, "usage: set $NAME = EXPRESSION | set print json "
			    "on|off");
}

static int cmd_print(struct script *s, char *args, struct script_reader *r)
{
	struct value v;
	if (expr_eval(s, args, &v) < 0)
		return -1;
	char buf[64];
	const char *text = value_text(&v, buf, sizeof(buf));
	if (v.kind == V_STR)
		out_text(s, "\"%s\"\n", text);
	else
		out_text(s, "%s\n", text);
	if (v.kind == V_INT)
		out_int(s, "value", v.i);
	else if (v.kind == V_DBL)
		out_num(s, "value", v.d);
	else if (v.kind == V_STR)
		out_str(s, "value", v.s);
	else
		out_null(s, "value");
	value_clear(&v);
	return 0;
}

static int cmd_echo(struct script *s, char *args, struct script_reader *r)
{
	/* gdb's echo: the text with C escapes; a trailing \ is a blank */
	char buf[4096];
	size_t n = 0;
	for (const char *p = args; *p && n + 1 < sizeof(buf); p++) {
		char c = *p;
		if (c == '\\' && p[1]) {
			c = *++p;
			c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'e' ? '\033'
				: c;
		}
		buf[n++] = c;
	}
	buf[n] = '\0';
	out_text(s, "%s", buf);
	out_str(s, "text", buf);
	return 0;
}

static int cmd_printf(struct script *s, char *args, struct script_reader *r)
{
	char *text;
	if (script_format(s, args, &text) < 0)
		return -1;
	out_text(s, "%s", text);
	out_str(s, "text", text);
	free(text);
	return 0;
}

static int cmd_shell(struct script *s, char *args, struct script_reader *r)
{
	fflush(stdout);
	fflush(stderr);
	/* Not system(3): it ignores SIGINT while the command runs, and a
	 * Ctrl-C meant for us that came then would be lost.  */
	const char *shell = getenv("SHELL");
	const char *cmd = *args ? args : NULL;
	pid_t child = fork();
	if (child < 0)
		return script_error(s, "cannot run a shell: %s",
				    strerror(errno));
	if (child == 0) {
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (cmd)
			execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		else
			execl(shell && *shell ? shell : "/bin/sh", "sh",
			      (char *)NULL);
		_exit(127);
	}
	int status = 0;
	while (waitpid(child, &status, 0) < 0) {
		if (errno != EINTR) {
			status = -1;
			break;
		}
	}
	int code = status == -1 ? 127
		   : WIFEXITED(status) ? WEXITSTATUS(status)
				       : 128 + WTERMSIG(status);
	struct value v = {.kind = V_INT, .i = code};
	var_set(s, "_shell_exitcode", &v);
	out_int(s, "status", code);
	return 0;
}

/* Lines of a file, as a reader.  */
struct file_reader {
	struct script_reader r;
	FILE *f;
	char *line;
	size_t cap;
};

static char *file_next(void *arg, const char *prompt)
{
	struct file_reader *fr = arg;
	(void)prompt;
	ssize_t n = getline(&fr->line, &fr->cap, fr->f);
	if (n < 0)
		return NULL;
	if (n > 0 && fr->line[n - 1] == '\n')
		fr->line[n - 1] = '\0';
	fr->r.line++;
	return fr->line;
}

int script_source(struct script *s, const char *path)
{
	struct file_reader fr = {.r = {.next = file_next, .name = path}};
	fr.r.arg = &fr;
	fr.f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
	if (!fr.f)
		return script_error(s, "cannot read %s: %s", path,
				    strerror(errno));
	if (s->depth >= 64) {
		if (fr.f != stdin)
			fclose(fr.f);
		return script_error(s, "files sourced more than 64 deep");
	}
	s->depth++;
	int rc = 0;
	char *line;
	while (!s->done && (line = file_next(&fr, NULL)) != NULL) {
		rc = exec_line(s, line, &fr.r);
		if (rc < 0)
			break;
	}
	s->depth--;
	free(fr.line);
	if (fr.f != stdin)
		fclose(fr.f);
	return rc;
}

static int cmd_source(struct script *s, char *args, struct script_reader *r)
{
	char *argv[2];
	if (words(args, argv, 2) != 1)
		return script_error(s, "usage: source FILE");
	if (script_source(s, argv[0]) < 0) {
		if (!s->error_set)
			return script_error(s, "%s failed (see above)", argv[0]);
		return -1;
	}
	return 0;
}

static int cmd_top(struct script *s, char *args, struct script_reader *r)
{
#ifndef HAVE_TOP
	return script_error(s, "the live view is not built in");
#else
	if (need_target(s) < 0)
		return -1;
	if (sampling_on(s) || s->heap_on)
		return script_error(s, "sampling or heap tracing is on: stop "
				    "it first");
	const struct options *o = opts(s);
	struct top_config tc = {
		.frequency = o->frequency ? o->frequency : 99,
		.wall = o->wall,
		.max_depth = o->max_depth ? o->max_depth : 512,
		.stop = s->cfg.interrupt,
		.force = &force_requested,
	};
	if (!top_has_terminal())
		return script_error(s, "the live view needs a terminal");
	const struct cp_profile *p = cp_session_profile(s->session);
	if (p && cp_profile_total(p) > 0)
		return script_error(s, "the session's profile holds samples: "
				    "write or reset them first");
	int rc = top_run(s->session, &tc);
	if (r && r->interactive && s->cfg.interrupt)
		*s->cfg.interrupt = 0; /* Ctrl-C ended the view, as q does */
	return rc == 0 ? 0 : script_error(s, "the live view ended with "
					  "status %d", rc);
#endif
}

static int cmd_help(struct script *s, char *args, struct script_reader *r);

static int cmd_silent(struct script *s, char *args, struct script_reader *r)
{
	if (!s->in_commands)
		return script_error(s, "silent belongs first in a "
				    "breakpoint's commands");
	return 0;
}

/* ------------------------------------------------------------ the table */

const struct command script_commands[] = {
	{"attach", NULL, cmd_attach, false, false, "attach PID",
	 "attach to a running process",
	 "Seize every thread of process PID (cprof-attach's -t TIDs, if\n"
	 "given, limit it).  The process runs on; sample, bt, heap and\n"
	 "break act on it until detach."},
	{"detach", NULL, cmd_detach, false, false, "detach",
	 "let the process go", "Stop sampling and heap tracing (every byte "
	 "restored), take the\nbreakpoints out and let every thread run."},
	{"file", NULL, cmd_file, false, false, "file PROGRAM",
	 "the program run starts", "Name the program that run starts."},
	{"run", NULL, cmd_run, false, false, "run [ARG...]",
	 "start the program as a traced child",
	 "Start the program named by file with ARGs (no shell), traced\n"
	 "from its first instruction.  It runs at once."},
	{"quit", "q", cmd_quit, false, false, "quit [STATUS]",
	 "detach and exit", "Detach (every byte restored) and exit with "
	 "STATUS (default 0)."},
	{"info", "i", cmd_info, false, false,
	 "info threads | sharedlibrary | inferior | breakpoints",
	 "threads, libraries, the process, breakpoints",
	 "threads: every thread, its name and state.\n"
	 "sharedlibrary: the modules mapped, with their addresses.\n"
	 "inferior: state, time attached, samples so far, cprof's own CPU.\n"
	 "breakpoints: each breakpoint, its hits, condition and commands."},
	{"sample", NULL, cmd_sample, false, false,
	 "sample [-F HZ] [--wall] [-t TID]... [--max-depth N] for DURATION | start | stop",
	 "sample stacks for a while, or start/stop",
	 "Sample the threads' stacks at HZ per second (default: -F of the\n"
	 "command line, 99), only running threads unless --wall, only\n"
	 "the threads named with -t TID when given.  The\n"
	 "samples add to the session's profile until write or reset.\n"
	 "DURATION: seconds, or with a unit: 500ms, 2s, 1m.  While it\n"
	 "samples, breakpoints' commands run as they are hit."},
	{"profile", NULL, cmd_profile, false, false,
	 "profile FUNC [-F HZ] [--wall] [--max-depth N] [for DURATION]",
	 "sample threads only while they are inside FUNC",
	 "A breakpoint at FUNC's entry marks the thread in, its return\n"
	 "marks it out (recursion counted once); only threads inside are\n"
	 "sampled.  Without for DURATION it runs until sample stop."},
	{"write", NULL, cmd_write, false, false,
	 "write FILE [--format FORMAT] [--samples | --heap]",
	 "write the session's profile (or the heap trace)",
	 "Write the samples taken since the last write or reset (then the\n"
	 "session's profile starts empty), or with --heap (the default\n"
	 "after heap stop) the last heap trace.  FORMAT as cprof-attach\n"
	 "--format; left out, FILE's suffix chooses.  FILE - is standard\n"
	 "output."},
	{"reset", NULL, cmd_reset, false, false, "reset",
	 "drop the samples taken so far", "Empty the session's profile."},
	{"backtrace", "bt", cmd_bt, false, true, "bt [TID]",
	 "the stack of the thread at a breakpoint, or of TID",
	 "At a breakpoint (in its commands): the thread held there.\n"
	 "Otherwise thread TID (default: the main thread), stopped for the\n"
	 "moment of its copy."},
	{"where", NULL, cmd_bt, false, true, "where [TID]", "same as bt",
	 "Same as bt."},
	{"thread", NULL, cmd_thread, false, false, "thread apply all bt",
	 "every thread's stack (as dump)", "Same as dump."},
	{"dump", NULL, cmd_dump, false, false, "dump",
	 "every thread's stack now (as --dump)",
	 "Stop every thread once, copy its stack, let it go, and print the\n"
	 "stacks."},
	{"heap", NULL, cmd_heap, false, false,
	 "heap start | stop | report [--top N]",
	 "trace allocations between start and stop",
	 "start: breakpoints on the allocator (as --heap).  stop: every\n"
	 "byte restored; the trace is kept.  report: allocation sites,\n"
	 "peak and leaks of the last trace; write --heap FILE writes it."},
	{"break", "b", cmd_break, false, false, "break FUNCTION | FILE:LINE",
	 "a breakpoint: a trigger for commands",
	 "Set a breakpoint.  wait (or sleep, sample for) runs its commands\n"
	 "(commands N ... end) when a thread reaches it; the thread is held\n"
	 "only while commands that need it (bt, printf of $registers) run."},
	{"tbreak", NULL, cmd_tbreak, false, false, "tbreak FUNCTION | FILE:LINE",
	 "a breakpoint deleted after its first hit", "As break, once."},
	{"condition", NULL, cmd_condition, true, false,
	 "condition N [EXPRESSION]", "stop at N only when EXPRESSION is true",
	 "EXPRESSION is evaluated at each hit with the thread held: $pc,\n"
	 "$sp, $rdi (the first argument), ... and $variables.  Without\n"
	 "EXPRESSION: unconditional."},
	{"silent", NULL, cmd_silent, false, true, "silent",
	 "first in commands: no message at the hit",
	 "As in gdb: the hit's \"Breakpoint N, ...\" line is left out."},
	{"ignore", NULL, cmd_ignore, false, false, "ignore N COUNT",
	 "ignore the next COUNT hits of N", "The next COUNT hits of "
	 "breakpoint N do not count."},
	{"delete", "d", cmd_delete, false, false, "delete [N...]",
	 "delete breakpoints (all when none given)", "Every byte restored."},
	{"disable", NULL, cmd_disable, false, false, "disable [N...]",
	 "disable breakpoints", "The byte restored; enable puts it back."},
	{"enable", NULL, cmd_enable, false, false, "enable [N...]",
	 "enable breakpoints", "Enable breakpoints disabled."},
	{"wait", NULL, cmd_wait, false, false, "wait [for DURATION]",
	 "until a breakpoint is hit or the process exits",
	 "Serve the process (sampling, heap tracing go on) until a\n"
	 "breakpoint is hit and its commands ran, the process exits, or\n"
	 "DURATION passes.  A breakpoint whose commands end with continue\n"
	 "does not end the wait."},
	{"continue", "c", cmd_continue, false, true, "continue",
	 "in commands: go on waiting; elsewhere: wait",
	 "In a breakpoint's commands: let the thread go and keep waiting."},
	{"sleep", NULL, cmd_sleep, false, false, "sleep DURATION",
	 "serve the process for DURATION",
	 "Let DURATION pass while sampling, heap tracing and breakpoints\n"
	 "work (their commands run)."},
	{"set", NULL, cmd_set, true, false,
	 "set $NAME = EXPRESSION | set var $NAME = EXPRESSION | set print json on|off",
	 "set a variable or a setting", "Variables hold integers, decimals "
	 "and strings."},
	{"print", "p", cmd_print, true, true, "print EXPRESSION",
	 "the value of an expression",
	 "Operators: || && ! == != < <= > >= + - * / % ( ).  Convenience\n"
	 "variables: $_hits $_samples $_exitcode $_exitsignal $_overhead\n"
	 "$bpnum "
	 "$_thread $_pid; registers of the held thread: $pc $sp $rdi ..."},
	{"echo", NULL, cmd_echo, true, false, "echo TEXT",
	 "print TEXT (\\n for a newline)", "C escapes: \\n \\t \\e \\\\."},
	{"printf", NULL, cmd_printf, true, true, "printf \"FORMAT\", ARG...",
	 "formatted output", "Conversions: %d %i %u %x %o %c %s %f %g %e %p "
	 "%%."},
	{"shell", "!", cmd_shell, true, false, "shell COMMAND",
	 "run a shell command", "Its status goes to $_shell_exitcode."},
	{"source", NULL, cmd_source, false, false, "source FILE",
	 "run the commands of FILE", "As -x FILE."},
	{"top", NULL, cmd_top, false, false, "top",
	 "the live view of the hottest functions",
	 "Full screen, updated once a second; q returns to the prompt."},
	{"help", "h", cmd_help, false, false, "help [COMMAND]",
	 "the commands, or one command's help", ""},
	{NULL, NULL, NULL, false, false, NULL, NULL, NULL},
};

static const char *const block_words[] = {
	"if", "while", "define", "commands", "document", "end", "else",
	"loop_break", "loop_continue", NULL};

const struct command *command_find(const char *name)
{
	for (const struct command *c = script_commands; c->name; c++)
		if (strcmp(c->name, name) == 0 ||
		    (c->alias && strcmp(c->alias, name) == 0))
			return c;
	return NULL;
}

const char *const *command_subcommands(const char *name)
{
	static const char *const sample_subs[] = {"start", "stop", "for", NULL};
	static const char *const heap_subs[] = {"start", "stop", "report", NULL};
	static const char *const set_subs[] = {"var", "print", NULL};
	static const char *const thread_subs[] = {"apply", NULL};
	const struct command *c = command_find(name);
	if (!c)
		return NULL;
	if (strcmp(c->name, "info") == 0)
		return info_subs;
	if (strcmp(c->name, "sample") == 0)
		return sample_subs;
	if (strcmp(c->name, "heap") == 0)
		return heap_subs;
	if (strcmp(c->name, "set") == 0)
		return set_subs;
	if (strcmp(c->name, "thread") == 0)
		return thread_subs;
	return NULL;
}

static int cmd_help(struct script *s, char *args, struct script_reader *r)
{
	char *argv[2];
	int n = words(args, argv, 2);
	if (n == 0) {
		out_text(s, "Commands (help COMMAND for one):\n");
		out_open(s, "commands", '[');
		for (const struct command *c = script_commands; c->name; c++) {
			out_text(s, "  %-10s %s\n", c->name, c->summary);
			out_str(s, NULL, c->name);
		}
		out_close(s, ']');
		out_text(s, "Blocks: if EXPR ... [else ...] end, while EXPR ... "
			 "end (loop_break, loop_continue),\n"
			 "define NAME ... end ($argc, $arg0...), commands [N] "
			 "... end.\n");
		return 0;
	}
	const struct command *c = command_find(argv[0]);
	if (!c) {
		for (size_t i = 0; block_words[i]; i++)
			if (strcmp(block_words[i], argv[0]) == 0) {
				out_text(s, "%s: part of the blocks: if EXPR ... "
					 "[else ...] end, while EXPR ... end, "
					 "define NAME ... end, commands [N] "
					 "... end\n", argv[0]);
				return 0;
			}
		return script_error(s, "undefined command \"%s\"; try \"help\"",
				    argv[0]);
	}
	out_text(s, "Usage: %s\n%s.\n%s%s", c->usage, c->summary, c->help,
		 c->help[0] ? "\n" : "");
	out_str(s, "name", c->name);
	out_str(s, "usage", c->usage);
	out_str(s, "summary", c->summary);
	return 0;
}

/* ------------------------------------------------------------ completion */

struct prefix_filter {
	const char *text;
	size_t len;
	bool (*fn)(void *arg, const char *word);
	void *arg;
	bool stopped;
};

static bool offer(struct prefix_filter *pf, const char *word)
{
	if (pf->stopped || strncmp(word, pf->text, pf->len) != 0)
		return !pf->stopped;
	if (!pf->fn(pf->arg, word))
		pf->stopped = true;
	return !pf->stopped;
}

void script_complete(struct script *s, const char *line, size_t start,
		     const char *text, bool (*fn)(void *arg, const char *word),
		     void *arg)
{
	struct prefix_filter pf = {text, strlen(text), fn, arg, false};
	/* The words before the one being completed.  */
	char before[1024];
	snprintf(before, sizeof(before), "%.*s", (int)start, line);
	char *argv[8];
	int n = words(before, argv, 8);
	if (n == 0 || (n == 1 && strcmp(argv[0], "help") == 0)) {
		for (const struct command *c = script_commands; c->name; c++)
			if (!offer(&pf, c->name))
				return;
		for (size_t i = 0; block_words[i]; i++)
			if (!offer(&pf, block_words[i]))
				return;
		for (size_t i = 0; i < s->ndefs; i++)
			if (!offer(&pf, s->defs[i].name))
				return;
		return;
	}
	const struct command *c = command_find(argv[0]);
	if (!c)
		return;
	if (strcmp(c->name, "thread") == 0) {
		static const char *const seq[] = {"apply", "all", "bt"};
		if (n <= 3 && offer(&pf, seq[n - 1]))
			return;
		return;
	}
	const char *const *subs = command_subcommands(c->name);
	if (subs && n == 1) {
		for (size_t i = 0; subs[i]; i++)
			if (!offer(&pf, subs[i]))
				return;
		return;
	}
	bool functions = strcmp(c->name, "break") == 0 ||
			 strcmp(c->name, "tbreak") == 0 ||
			 (strcmp(c->name, "profile") == 0 && n == 1);
	if (functions && cp_session_attached(s->session) &&
	    !cp_session_target_exited(s->session)) {
		cp_session_functions(s->session, text, fn, arg);
		return;
	}
	if (strcmp(c->name, "backtrace") == 0 && n == 1 &&
	    cp_session_attached(s->session)) {
		size_t nt = 0;
		struct cp_thread *th =
			cp_target_threads(cp_session_target(s->session), &nt);
		for (size_t i = 0; i < nt; i++) {
			char tid[16];
			snprintf(tid, sizeof(tid), "%d", (int)th[i].tid);
			if (!offer(&pf, tid))
				return;
		}
	}
}
