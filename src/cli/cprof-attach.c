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
#include "cprof/heap.h"
#include "cprof/output.h"
#include "cprof/procfs.h"
#include "cprof/profile.h"
#include "cprof/sampler.h"
#include "cprof/symbols.h"
#include "cprof/target.h"
#include "cprof/timeline.h"
#include "cprof/unwinder.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };
/* Launch mode: cprof-attach exits with the command's status, so its own
 * failures have codes of their own, those of env(1), nohup(1) and
 * timeout(1): 125 for a failure of ours once the command ran, 126 for a
 * COMMAND that cannot be run, 127 for one not found.  */
enum { EXIT_LAUNCH_FAILED = 125, EXIT_CANNOT_RUN = 126, EXIT_NOT_FOUND = 127 };

/* The only globals: what the signal handlers need.  */
static volatile sig_atomic_t stop_requested;  /* first SIGINT/TERM/HUP */
static volatile sig_atomic_t force_requested; /* a second one: stop now */
static volatile sig_atomic_t target_written;  /* bytes of ours are in the
					       * target (heap mode) */
static volatile uint64_t first_stop_ns;       /* when the first came */
static volatile sig_atomic_t first_stop_sig;  /* which signal it was */
static volatile pid_t first_stop_sender;      /* who sent it (0: the
					       * kernel, e.g. the terminal) */
static volatile sig_atomic_t first_direct;    /* copies of it sent to us */
static volatile sig_atomic_t first_passed_on; /* copies the visible
					       * process passed on */
static volatile pid_t launched_child;
static int launched_status = -1;              /* its wait status, once
					       * collected by the target */
static volatile sig_atomic_t own_failure = 1; /* our failure's exit code:
					       * EXIT_RUNTIME, or
					       * EXIT_LAUNCH_FAILED */
static volatile pid_t holder_pid;             /* in the visible process */
static pid_t visible_pid;                     /* the process the user sees */
/* Stop signals ignored when we started (a script's background job has
 * SIGINT and SIGQUIT ignored; nohup ignores SIGHUP): they stay ignored.
 * SIGTERM always works.  */
static bool ignored_at_start[NSIG];

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

static const char usage_text[] =
	"Usage: cprof-attach [OPTIONS] PID [OPTIONS]\n"
	"       cprof-attach [OPTIONS] -- COMMAND [ARG...]\n"
	"       cprof-attach --heap [OPTIONS] PID | -- COMMAND [ARG...]\n"
	"Sample the CPU stacks of a running program from outside, with ptrace;\n"
	"with --heap, trace its allocations instead.\n"
	"\n"
	"  -p, --pid PID            the process to profile (or give PID as an operand)\n"
	"  -d, --duration SECONDS   stop after SECONDS (decimals allowed); default:\n"
	"                           until Ctrl-C or the target exits\n"
	"  -F, --frequency HZ       samples per second per thread, 1..10000 (default 99)\n"
	"  -o, --output FILE        where to write the profile (default: standard output)\n"
	"      --format FORMAT      folded (default), raw (every sample, timestamped, as\n"
	"                           taken), trace (Chrome trace events of function\n"
	"                           start/end, for Perfetto), svg, pprof or speedscope;\n"
	"                           left out,\n"
	"                           taken from -o: .folded .svg .pb.gz .speedscope.json;\n"
	"                           with --dump: text (default) or json\n"
	"      --wall               also sample threads that are sleeping or blocked\n"
	"                           (wall-clock profile); default: only running threads\n"
	"  -t, --tid TID            sample only this thread (repeatable)\n"
	"      --threads            begin each stack with a frame naming its thread: \"TID name\"\n"
	"      --max-depth N        frames kept per stack, innermost first (default 512)\n"
	"      --unwind MODE        snapshot (default): copy the stack, resume, unwind the\n"
	"                           copy; ptrace: unwind while the thread is stopped\n"
	"      --dump               print every thread's stack once and detach\n"
	"                           (--format text, the default, or json)\n"
	"      --debuginfo-dir DIR  look for separate debug files in DIR first, by\n"
	"                           .gnu_debuglink name and in DIR/.build-id/ (repeatable)\n"
	"      --no-debuginfod      do not ask debuginfod servers (DEBUGINFOD_URLS)\n"
	"      --no-demangle        keep C++ and Rust names mangled\n"
	"      --no-inline          fold inlined functions into their caller\n"
	"      --lines              add the source position to each frame: func (file.c:123)\n"
	"      --min-samples N      --format trace: a frame starts only once it was in N\n"
	"                           consecutive samples of its thread (default 1)\n"
	"      --heap               trace malloc, calloc, realloc, reallocarray, free,\n"
	"                           posix_memalign, aligned_alloc, memalign, valloc and\n"
	"                           pvalloc with breakpoints in the target (nothing\n"
	"                           injected); formats: report (default), folded, svg,\n"
	"                           pprof\n"
	"      --heap-metric METRIC live-bytes (default), alloc-bytes, live-count or\n"
	"                           alloc-count: the weight of a stack in folded and svg\n"
	"      --top N              sites listed per table of the heap report (default 10)\n"
	"  -q, --quiet              no progress line and no summary\n"
	"  -v, --verbose            more detail on stderr\n"
	"  -h, --help               show this help\n"
	"  -V, --version            show the version\n"
	"\n"
	"Exit status: 0 profile written, 1 runtime failure, 2 usage error or bad input.\n";

struct options {
	double duration;
	unsigned frequency;
	const char *output;
	bool wall;
	pid_t *tids;
	size_t ntids;
	bool threads;
	size_t max_depth;
	enum cp_unwind_mode unwind_mode;
	bool quiet;
	int verbose;
	bool dump;
	const char *format;
	const char **debuginfo_dirs;
	size_t n_debuginfo_dirs;
	bool no_debuginfod, no_demangle, no_inline, lines;
	unsigned min_samples;
	bool heap;
	int heap_metric;
	size_t top;
	pid_t pid;
	char **command;
};

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("cprof-attach: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs(" (see cprof-attach --help)\n", stderr);
	va_end(ap);
	exit(EXIT_USAGE);
}

static void message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void message(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("cprof-attach: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static long parse_long(const char *text, const char *what, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno || end == text || *end || v < lo || v > hi)
		die_usage("invalid %s '%s': expected a whole number from %ld to %ld",
			  what, text, lo, hi);
	return v;
}

static void parse_options(int argc, char **argv, struct options *o)
{
	enum { OPT_FORMAT = 256, OPT_WALL, OPT_THREADS, OPT_MAX_DEPTH,
	       OPT_UNWIND, OPT_DUMP, OPT_DEBUGINFO_DIR, OPT_NO_DEBUGINFOD,
	       OPT_NO_DEMANGLE, OPT_NO_INLINE, OPT_LINES, OPT_MIN_SAMPLES,
	       OPT_HEAP, OPT_HEAP_METRIC, OPT_TOP };
	static const struct option longopts[] = {
		{"pid", required_argument, NULL, 'p'},
		{"duration", required_argument, NULL, 'd'},
		{"frequency", required_argument, NULL, 'F'},
		{"output", required_argument, NULL, 'o'},
		{"format", required_argument, NULL, OPT_FORMAT},
		{"wall", no_argument, NULL, OPT_WALL},
		{"tid", required_argument, NULL, 't'},
		{"threads", no_argument, NULL, OPT_THREADS},
		{"max-depth", required_argument, NULL, OPT_MAX_DEPTH},
		{"unwind", required_argument, NULL, OPT_UNWIND},
		{"dump", no_argument, NULL, OPT_DUMP},
		{"debuginfo-dir", required_argument, NULL, OPT_DEBUGINFO_DIR},
		{"no-debuginfod", no_argument, NULL, OPT_NO_DEBUGINFOD},
		{"no-demangle", no_argument, NULL, OPT_NO_DEMANGLE},
		{"no-inline", no_argument, NULL, OPT_NO_INLINE},
		{"lines", no_argument, NULL, OPT_LINES},
		{"min-samples", required_argument, NULL, OPT_MIN_SAMPLES},
		{"heap", no_argument, NULL, OPT_HEAP},
		{"heap-metric", required_argument, NULL, OPT_HEAP_METRIC},
		{"top", required_argument, NULL, OPT_TOP},
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	o->frequency = 99;
	o->max_depth = 512;
	o->top = 10;
	bool metric_given = false, top_given = false, frequency_given = false;
	o->unwind_mode = CP_UNWIND_SNAPSHOT;
	opterr = 0;
	int c;
	/* '-' first: operands come back in order as code 1, so options may
	 * follow the PID (perf, py-spy, eu-stack); only "--" ends the
	 * options, and what follows it is the COMMAND, untouched.  */
	const char *pid_text = NULL;
	while ((c = getopt_long(argc, argv, "-:d:F:o:p:t:qvhV", longopts,
				NULL)) != -1) {
		switch (c) {
		case 1:
		case 'p':
			if (pid_text)
				die_usage("unexpected argument '%s': one PID only (to run a command: -- COMMAND)",
					  optarg);
			pid_text = optarg;
			break;
		case 'd': {
			char *end;
			errno = 0;
			double d = strtod(optarg, &end);
			if (errno || end == optarg || *end || !isfinite(d) ||
			    d <= 0)
				die_usage("invalid duration '%s': expected a positive number of seconds",
					  optarg);
			o->duration = d;
			break;
		}
		case 'F':
			frequency_given = true;
			o->frequency = (unsigned)parse_long(optarg, "frequency",
							    1, 10000);
			break;
		case 'o':
			o->output = optarg;
			break;
		case OPT_FORMAT:
			o->format = optarg;
			break;
		case OPT_DUMP:
			o->dump = true;
			break;
		case OPT_DEBUGINFO_DIR: {
			const char **grown = realloc(
				o->debuginfo_dirs,
				(o->n_debuginfo_dirs + 1) * sizeof(*grown));
			if (!grown) {
				message("out of memory");
				exit(EXIT_RUNTIME);
			}
			o->debuginfo_dirs = grown;
			o->debuginfo_dirs[o->n_debuginfo_dirs++] = optarg;
			break;
		}
		case OPT_NO_DEBUGINFOD:
			o->no_debuginfod = true;
			break;
		case OPT_NO_DEMANGLE:
			o->no_demangle = true;
			break;
		case OPT_NO_INLINE:
			o->no_inline = true;
			break;
		case OPT_LINES:
			o->lines = true;
			break;
		case OPT_MIN_SAMPLES:
			o->min_samples = (unsigned)parse_long(
				optarg, "minimum samples", 1, 1000000);
			break;
		case OPT_WALL:
			o->wall = true;
			break;
		case OPT_HEAP:
			o->heap = true;
			break;
		case OPT_HEAP_METRIC:
			o->heap_metric = cp_heap_metric_parse(optarg);
			if (o->heap_metric < 0)
				die_usage("unknown heap metric '%s': live-bytes, alloc-bytes, live-count or alloc-count",
					  optarg);
			metric_given = true;
			break;
		case OPT_TOP:
			o->top = (size_t)parse_long(optarg, "number of sites",
						    1, 1000000);
			top_given = true;
			break;
		case 't': {
			pid_t *grown = realloc(o->tids,
					       (o->ntids + 1) * sizeof(*grown));
			if (!grown) {
				message("out of memory");
				exit(EXIT_RUNTIME);
			}
			o->tids = grown;
			o->tids[o->ntids++] =
				(pid_t)parse_long(optarg, "thread id", 1, INT_MAX);
			break;
		}
		case OPT_THREADS:
			o->threads = true;
			break;
		case OPT_MAX_DEPTH:
			o->max_depth = (size_t)parse_long(optarg, "max depth",
							  1, 65536);
			break;
		case OPT_UNWIND:
			if (strcmp(optarg, "snapshot") == 0)
				o->unwind_mode = CP_UNWIND_SNAPSHOT;
			else if (strcmp(optarg, "ptrace") == 0)
				o->unwind_mode = CP_UNWIND_PTRACE;
			else
				die_usage("unknown unwind mode '%s': snapshot or ptrace",
					  optarg);
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'v':
			o->verbose++;
			break;
		case 'h':
			fputs(usage_text, stdout);
			exit(EXIT_OK);
		case 'V':
			printf("cprof-attach %s\n", CP_VERSION);
			exit(EXIT_OK);
		case ':':
			die_usage("option '%s' needs a value", argv[optind - 1]);
		default:
			die_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (!o->heap && (metric_given || top_given))
		die_usage("--heap-metric and --top apply to --heap");
	if (o->heap) {
		if (o->dump || o->wall || o->ntids || frequency_given ||
		    o->min_samples)
			die_usage("--heap traces every allocation of every thread: --dump, --wall, --tid, --frequency and --min-samples do not apply");
		if (!o->format)
			o->format = cp_output_format_for_path(o->output);
		if (!o->format)
			o->format = "report";
		if (strcmp(o->format, "report") != 0 &&
		    strcmp(o->format, "folded") != 0 &&
		    strcmp(o->format, "svg") != 0 &&
		    strcmp(o->format, "pprof") != 0)
			die_usage("unknown format '%s' for --heap: report, folded, svg or pprof",
				  o->format);
		if (strcmp(o->format, "pprof") == 0 && !o->output &&
		    isatty(STDOUT_FILENO))
			die_usage("pprof output is binary: give -o FILE.pb.gz");
	} else if (o->dump) {
		if (!o->format)
			o->format = "text";
		if (strcmp(o->format, "text") != 0 &&
		    strcmp(o->format, "json") != 0)
			die_usage("unknown format '%s' for --dump: text or json",
				  o->format);
	} else {
		if (!o->format)
			o->format = cp_output_format_for_path(o->output);
		if (!o->format)
			o->format = "folded";
		if (strcmp(o->format, "folded") != 0 &&
		    strcmp(o->format, "raw") != 0 &&
		    strcmp(o->format, "trace") != 0 &&
		    strcmp(o->format, "svg") != 0 &&
		    strcmp(o->format, "pprof") != 0 &&
		    strcmp(o->format, "speedscope") != 0)
			die_usage("unknown format '%s': folded, raw, trace, svg, pprof or speedscope",
				  o->format);
		if (o->min_samples > 1 && strcmp(o->format, "trace") != 0)
			die_usage("--min-samples applies to --format trace");
		if (strcmp(o->format, "pprof") == 0 && !o->output &&
		    isatty(STDOUT_FILENO))
			die_usage("pprof output is binary: give -o FILE.pb.gz");
	}
	/* Scanning stopped at "--" (or the end): the rest is the COMMAND.  */
	bool dashdash = optind > 0 && optind <= argc &&
			strcmp(argv[optind - 1], "--") == 0;
	if (dashdash && optind < argc) {
		if (pid_text)
			die_usage("give a PID or -- COMMAND, not both");
		if (o->dump)
			die_usage("--dump needs the PID of a running process");
		o->command = &argv[optind];
		if (o->ntids)
			die_usage("--tid cannot be used with a launched COMMAND");
		return;
	}
	if (dashdash && !pid_text)
		die_usage("missing COMMAND after --");
	if (!pid_text)
		die_usage("missing PID or -- COMMAND");
	o->pid = (pid_t)parse_long(pid_text, "PID", 1, INT_MAX);
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* async-signal-safe */
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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
static void on_stop_signal(int sig, siginfo_t *info, void *context)
{
	(void)context;
	int saved_errno = errno;
	uint64_t now = monotonic_ns();
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

static void stop_signal_set(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
}

static void install_handlers(void (*handler)(int, siginfo_t *, void *))
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
static void start_holder(void)
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
		first_stop_ns = monotonic_ns();
		stop_requested = 1;
	}
}

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

/* Describe the run in the profile (headers, pprof fields), then write it
 * in the format asked for.  */
static int write_profile(const struct options *o, struct cp_profile *profile,
			 int argc, char **argv, FILE *stream)
{
	struct cp_profile_meta *meta = cp_profile_meta(profile);
	set_command(meta, argc, argv);
	if (strcmp(o->format, "folded") == 0) {
		struct cp_folded_options fo = {
			.threads = o->threads,
			.lines = o->lines,
			.no_inline = o->no_inline,
			.max_depth = o->max_depth,
		};
		return cp_write_folded(profile, &fo, stream);
	}
	if (strcmp(o->format, "pprof") == 0)
		return cp_write_pprof(profile, stream);
	if (strcmp(o->format, "speedscope") == 0)
		return cp_write_speedscope(profile, meta->target, stream);
	/* The SVG header names the command, target and samples from META. */
	struct cp_svg_options so = {.minwidth = -1};
	return cp_write_svg(profile, &so, stream);
}

/* --format raw: every sample as "SECONDS TID WEIGHT FRAME;FRAME;..." in
 * time order, written as it is taken.  */
struct raw_writer {
	FILE *stream;
	const struct cp_profile *profile;
	struct cp_folded_options folded;
	char *text;
	size_t text_cap;
	pid_t *named;          /* threads whose "# thread" line is out */
	size_t nnamed;
	int error;             /* first write error */
	/* --format trace: samples go through the timeline engine instead */
	struct cp_timeline *timeline;
	const char **frames;
	size_t frames_cap;
	/* --format speedscope: the samples in time order (made at the first
	 * sample), written with the profile's names at the end */
	bool speedscope;
	struct cp_speedscope_log *log;
};

/* Free what W holds (not its stream, nor its timeline).  */
static void raw_writer_free(struct raw_writer *w)
{
	free(w->text);
	free(w->named);
	free(w->frames);
	cp_speedscope_log_free(w->log);
	w->text = NULL;
	w->named = NULL;
	w->frames = NULL;
	w->log = NULL;
}

/* Feed one rendered stack (frames joined by ';', split in place) to the
 * timeline.  */
static int timeline_sample(struct raw_writer *w, uint64_t t_ns, pid_t tid,
			   uint64_t weight)
{
	size_t n = 0;
	for (char *p = w->text; *w->text;) {
		if (n == w->frames_cap) {
			size_t cap = w->frames_cap ? 2 * w->frames_cap : 64;
			const char **grown =
				realloc(w->frames, cap * sizeof(*grown));
			if (!grown)
				return -CP_E_NOMEM;
			w->frames = grown;
			w->frames_cap = cap;
		}
		w->frames[n++] = p;
		char *semi = strchr(p, ';');
		if (!semi)
			break;
		*semi = '\0';
		p = semi + 1;
	}
	return cp_timeline_sample_weighted(w->timeline, NULL,
					   (double)t_ns / 1e9, tid, weight,
					   w->frames, n);
}

static void raw_sample(void *arg, uint64_t t_ns, pid_t tid, uint32_t stack,
		       uint64_t weight)
{
	struct raw_writer *w = arg;
	if (w->speedscope) {
		int rc = w->log ? 0 : cp_speedscope_log_new(&w->log);
		if (rc == 0)
			rc = cp_speedscope_log_add(w->log, tid, stack, weight);
		if (rc < 0 && !w->error)
			w->error = ENOMEM;
		return;
	}
	bool named = false;
	for (size_t i = 0; i < w->nnamed && !named; i++)
		named = w->named[i] == tid;
	if (!named) {
		pid_t *grown = realloc(w->named, (w->nnamed + 1) * sizeof(*grown));
		if (grown) {
			w->named = grown;
			w->named[w->nnamed++] = tid;
		}
		const char *name = cp_profile_thread_name(w->profile, tid);
		if (w->timeline)
			cp_timeline_thread_name(w->timeline, tid,
						name ? name : "");
		else
			fprintf(w->stream, "# thread %d %s\n", (int)tid,
				name ? name : "");
	}
	ssize_t len = cp_render_stack(w->profile, stack, &w->folded, &w->text,
				      &w->text_cap);
	if (w->timeline) {
		int rc = len < 0 ? (int)len
				 : timeline_sample(w, t_ns, tid, weight);
		if (rc < 0 && !w->error)
			w->error = rc == -CP_E_SYS && errno ? errno : EIO;
		return;
	}
	if (len < 0 ||
	    fprintf(w->stream, "%" PRIu64 ".%06" PRIu64 " %d %" PRIu64 " %s\n",
		    t_ns / 1000000000u, t_ns / 1000u % 1000000u, (int)tid,
		    weight, w->text) < 0)
		w->error = w->error ? w->error : errno ? errno : EIO;
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
	if (strcmp(o->format, "json") == 0)
		rc = cp_write_dump_json(dump, cp_output_stream(out));
	else
		rc = cp_write_dump_text(dump, o->lines, cp_output_stream(out));
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
	FILE *stream = cp_output_stream(out);
	if (strcmp(o->format, "report") == 0) {
		rc = cp_heap_write_report(s, profile, o->top, stream);
	} else if (strcmp(o->format, "pprof") == 0) {
		snprintf(meta->unit, sizeof(meta->unit), "heap");
		rc = cp_heap_fill_profile(heap, profile, CP_HEAP_ALLOC_COUNT);
		if (rc == 0)
			rc = cp_write_pprof(profile, stream);
	} else {
		bool bytes = o->heap_metric == CP_HEAP_LIVE_BYTES ||
			     o->heap_metric == CP_HEAP_ALLOC_BYTES;
		snprintf(meta->unit, sizeof(meta->unit), "%s",
			 bytes ? "bytes" : "allocations");
		rc = cp_heap_fill_profile(heap, profile,
					  (enum cp_heap_metric)o->heap_metric);
		if (rc == 0 && strcmp(o->format, "folded") == 0) {
			struct cp_folded_options fo = {
				.lines = o->lines,
				.no_inline = o->no_inline,
				.max_depth = o->max_depth,
			};
			rc = cp_write_folded(profile, &fo, stream);
		} else if (rc == 0) {
			struct cp_svg_options svo = {.minwidth = -1};
			rc = cp_write_svg(profile, &svo, stream);
		}
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
	struct raw_writer raw = {
		.stream = cp_output_stream(out),
		.profile = profile,
		.folded = {.lines = o.lines, .no_inline = o.no_inline,
			   .max_depth = o.max_depth},
	};
	if (strcmp(o.format, "trace") == 0) {
		struct cp_timeline_options to = {
			.format = CP_TIMELINE_TRACE,
			.min_samples = o.min_samples,
			.pid = pid,
			.process_name = meta->target,
			/* a unit of weight is a tick */
			.period = 1.0 / o.frequency,
		};
		if (cp_timeline_new(&to, raw.stream, &raw.timeline) < 0) {
			message("out of memory");
			goto out;
		}
		so.on_sample = raw_sample;
		so.on_sample_arg = &raw;
	} else if (strcmp(o.format, "raw") == 0) {
		so.on_sample = raw_sample;
		so.on_sample_arg = &raw;
		/* "# fields" tells readers the lines have a WEIGHT (files
		 * from before weights have none); "# weight-unit" what it
		 * counts: ticks of 1/frequency s, the profile's unit.  */
		fprintf(raw.stream,
			"# cprof-attach raw samples: SECONDS TID WEIGHT FRAME;FRAME;... (root first)\n"
			"# fields SECONDS TID WEIGHT STACK\n"
			"# target %d %s\n# frequency %u\n# weight-unit %s\n",
			(int)pid, meta->target, o.frequency,
			meta->unit[0] ? meta->unit : "samples");
	} else if (strcmp(o.format, "speedscope") == 0) {
		/* Fed by the samples, so each thread's stay in time order. */
		raw.speedscope = true;
		so.on_sample = raw_sample;
		so.on_sample_arg = &raw;
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
	if (force_requested) {
		raw_writer_free(&raw);
		goto out; /* interrupted twice: no profile */
	}

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
		raw_writer_free(&raw);
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

	if (raw.timeline) {
		/* Close the frames still open and end the document.  */
		if (cp_timeline_finish(raw.timeline) < 0 && !raw.error)
			raw.error = errno ? errno : EIO;
		raw.timeline = NULL;
	}
	if (strcmp(o.format, "raw") == 0 || strcmp(o.format, "trace") == 0) {
		/* Written as taken; only the outcome is left to check.  */
		errno = raw.error;
		rc = raw.error ? -CP_E_SYS : 0;
	} else if (raw.speedscope && raw.log && !raw.error) {
		rc = cp_write_speedscope_log(profile, meta->target, raw.log,
					     cp_output_stream(out));
	} else {
		if (raw.speedscope && raw.error)
			message("warning: out of memory for the samples in time order: the speedscope file has each thread's stacks aggregated");
		rc = write_profile(&o, profile, argc, argv,
				   cp_output_stream(out));
	}
	raw_writer_free(&raw);
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
	cp_output_abort(out);
	cp_profile_free(profile);
	cp_symbols_free(symbols);
	cp_unwinder_free(unwinder);
	free(o.tids);
	free(o.debuginfo_dirs);
	return finish_launch(&o, exit_code);
}
