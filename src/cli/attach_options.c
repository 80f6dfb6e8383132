/* cprof-attach's command line: the usage text and the options parser.  */
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

static const char exit_text[] =
	"\n"
	"Exit status: 0 profile written, 1 runtime failure, 2 usage error or bad input.\n";

static const char usage_text[] =
	"Usage: cprof-attach [OPTIONS] PID [OPTIONS]\n"
	"       cprof-attach [OPTIONS] -- COMMAND [ARG...]\n"
	"       cprof-attach --heap [OPTIONS] PID | -- COMMAND [ARG...]\n"
	"       cprof-attach --top [OPTIONS] PID\n"
	"       cprof-attach [-p PID] [-x FILE]... [-ex COMMAND]... [--batch] [--json]\n"
	"Sample the CPU stacks of a running program from outside, with ptrace;\n"
	"with --heap, trace its allocations instead.\n"
	"\n"
	"  -p, --pid PID            the process to profile (or give PID as an operand)\n"
	"  -d, --duration DURATION  stop after DURATION: seconds (decimals allowed) or\n"
	"                           with a unit, 500ms, 30s, 2m; default:\n"
	"                           until Ctrl-C or the target exits\n"
	"  -F, --frequency HZ       samples per second per thread, 1..10000 (default 99)\n"
	"  -o, --output FILE        where to write the profile (default: standard output)\n"
	"      --format FORMAT      the output format (listed below); left out, the one\n"
	"                           the suffix of -o names, else the mode's default\n"
	"      --wall               also sample threads that are sleeping or blocked\n"
	"                           (wall-clock profile); default: only running threads\n"
	"  -t, --tid TID            sample only this thread (repeatable)\n"
	"      --threads            begin each stack with a frame naming its thread: \"TID name\"\n"
	"      --max-depth N        frames kept per stack, innermost first (default 512)\n"
	"      --unwind MODE        snapshot (default): copy the stack, resume, unwind the\n"
	"                           copy; ptrace: unwind while the thread is stopped\n"
	"      --dump               print every thread's stack once and detach\n"
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
	"                           injected)\n"
	"      --heap-metric METRIC live-bytes (default), alloc-bytes, live-count or\n"
	"                           alloc-count: the weight of a stack in folded and svg\n"
	"      --heap-tracers N     tracer threads, ours, that serve the traps (1 to 9;\n"
	"                           default: one per CPU, up to 4, beside the main one)\n"
	"      --heap-method METHOD uprobes (default: the kernel's int3s, records with\n"
	"                           stack copies, no stop; about 0.35 s to close at the\n"
	"                           end) or traps (int3s of ours, a stop per call)\n"
	"      --top N              sites listed per table of the heap report (default 10)\n"
	"      --top                without --heap: a live full-screen view of the hottest\n"
	"                           functions, redrawn every second (? for its keys)\n"
	"  -x FILE                  run the commands in FILE (repeatable; see SCRIPTING\n"
	"                           in cprof-attach(1))\n"
	"  -ex, --eval-command CMD  run the command CMD (repeatable; with -x, in the\n"
	"                           order given)\n"
	"      --batch              exit after the commands (status: the last one's,\n"
	"                           1 at the first error); without it, the console\n"
	"      --json               each command's result as one JSON line on stdout\n"
	"  -q, --quiet              no progress line and no summary\n"
	"  -v, --verbose            more detail on stderr\n"
	"  -h, --help               show this help\n"
	"  -V, --version            show the version\n";


/* The formats of the registry, for the help: all of them, then which
 * --heap and --dump take.  */
static void print_formats(void)
{
	char names[256];
	printf("\nFormats (--format):\n");
	cp_format_help(CP_FORMAT_SAMPLED | CP_FORMAT_HEAP | CP_FORMAT_DUMP, 2,
		       11, stdout);
	printf("Sampling: %s (default %s).\n",
	       cp_format_names(CP_FORMAT_SAMPLED, names, sizeof(names)),
	       cp_format_default(CP_FORMAT_SAMPLED)->name);
	printf("--heap: %s (default %s).\n",
	       cp_format_names(CP_FORMAT_HEAP, names, sizeof(names)),
	       cp_format_default(CP_FORMAT_HEAP)->name);
	printf("--dump: %s (default %s).\n",
	       cp_format_names(CP_FORMAT_DUMP, names, sizeof(names)),
	       cp_format_default(CP_FORMAT_DUMP)->name);
}

/* Settle O->format for the mode: the one asked for, else the one the
 * suffix of -o names, else the mode's default; refuse one the mode
 * cannot write.  */
static void choose_format(struct options *o)
{
	enum cp_format_kind kind = o->heap ? CP_FORMAT_HEAP
				   : o->dump ? CP_FORMAT_DUMP
					     : CP_FORMAT_SAMPLED;
	const char *mode = o->heap ? " for --heap" : o->dump ? " for --dump"
							     : "";
	const struct cp_format *format = NULL;
	if (o->format) {
		format = cp_format_find(o->format);
	} else {
		format = cp_format_for_path(o->output);
		/* a suffix the mode cannot write: its default, as before */
		if (!cp_format_supports(format, kind))
			format = NULL;
	}
	if (!o->format && !format)
		format = cp_format_default(kind);
	if (!cp_format_supports(format, kind)) {
		char names[256];
		die_usage("unknown format '%s'%s: %s", o->format, mode,
			  cp_format_names(kind, names, sizeof(names)));
	}
	o->format = format->name;
	if (format->binary && !o->output && isatty(STDOUT_FILENO))
		die_usage("%s output is binary: give -o FILE%s", format->name,
			  format->suffixes[0] ? format->suffixes[0] : "");
	/* debouncing is the timeline engine's */
	if (kind == CP_FORMAT_SAMPLED && o->min_samples > 1 &&
	    format != cp_format_find("trace"))
		die_usage("--min-samples applies to --format trace");
}

struct cp_format_options attach_format_options(const struct options *o)
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
	return fo;
}

int attach_heap_profile(const struct options *o, const struct cp_heap *heap,
			struct cp_profile *profile)
{
	/* the index of each metric's value among the four */
	static const size_t metric_value[] = {
		[CP_HEAP_LIVE_BYTES] = 3, [CP_HEAP_ALLOC_BYTES] = 1,
		[CP_HEAP_LIVE_COUNT] = 2, [CP_HEAP_ALLOC_COUNT] = 0,
	};
	int rc = cp_heap_fill_profile(heap, profile, CP_HEAP_ALLOC_COUNT);
	if (rc == 0)
		cp_profile_set_heap_types(profile,
					  metric_value[o->heap_metric]);
	return rc;
}

void parse_options(int argc, char **argv, struct options *o)
{
	enum { OPT_FORMAT = 256, OPT_WALL, OPT_THREADS, OPT_MAX_DEPTH,
	       OPT_UNWIND, OPT_DUMP, OPT_DEBUGINFO_DIR, OPT_NO_DEBUGINFOD,
	       OPT_NO_DEMANGLE, OPT_NO_INLINE, OPT_LINES, OPT_MIN_SAMPLES,
	       OPT_HEAP, OPT_HEAP_METRIC, OPT_HEAP_TRACERS, OPT_HEAP_METHOD, OPT_TOP, OPT_EVAL, OPT_BATCH,
	       OPT_JSON };
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
		{"heap-tracers", required_argument, NULL, OPT_HEAP_TRACERS},
		{"heap-method", required_argument, NULL, OPT_HEAP_METHOD},
		/* --heap --top N, or --top alone: the live view.  */
		{"top", optional_argument, NULL, OPT_TOP},
		{"eval-command", required_argument, NULL, OPT_EVAL},
		{"batch", no_argument, NULL, OPT_BATCH},
		{"json", no_argument, NULL, OPT_JSON},
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
	/* gdb's single-dash long options: -ex, -batch (before "--": what
	 * follows is the COMMAND's).  */
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "-ex") == 0)
			argv[i] = "--eval-command";
		else if (strcmp(argv[i], "-batch") == 0)
			argv[i] = "--batch";
	}
	/* --top means two things: with --heap, the sites per table of the
	 * report (--top N); without, the live view (no value).  */
	bool heap_asked = false;
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		heap_asked |= strcmp(argv[i], "--heap") == 0;
	bool mode_given = false;
	while ((c = getopt_long(argc, argv, "-:d:F:o:p:t:x:qvhV", longopts,
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
			double d = 0;
			if (!parse_duration_text(optarg, &d) || !isfinite(d) ||
			    d <= 0)
				die_usage("invalid duration '%s': expected a positive number of seconds, or one with a unit: 500ms, 30s, 2m",
					  optarg);
			o->duration = d;
			break;
		}
		case 'x':
		case OPT_EVAL: {
			struct script_item *grown = realloc(
				o->script_items,
				(o->n_script_items + 1) * sizeof(*grown));
			if (!grown) {
				message("out of memory");
				exit(EXIT_RUNTIME);
			}
			o->script_items = grown;
			o->script_items[o->n_script_items++] =
				(struct script_item){c == 'x' ? 'x' : 'e',
						     optarg};
			break;
		}
		case OPT_BATCH:
			o->batch = true;
			break;
		case OPT_JSON:
			o->json = true;
			break;
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
			mode_given = true;
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
			mode_given = true;
			break;
		case OPT_HEAP_METRIC:
			o->heap_metric = cp_heap_metric_parse(optarg);
			if (o->heap_metric < 0)
				die_usage("unknown heap metric '%s': live-bytes, alloc-bytes, live-count or alloc-count",
					  optarg);
			metric_given = true;
			break;
		case OPT_HEAP_METHOD:
			if (strcmp(optarg, "traps") == 0)
				o->heap_method = CP_HEAP_METHOD_TRAPS;
			else if (strcmp(optarg, "uprobes") == 0)
				o->heap_method = CP_HEAP_METHOD_UPROBES;
			else
				die_usage("unknown heap method '%s': traps or uprobes",
					  optarg);
			metric_given = true;
			break;
		case OPT_HEAP_TRACERS:
			o->heap_tracers = (unsigned)parse_long(optarg, "heap tracers",
							       1, 9);
			metric_given = true;
			break;
		case OPT_TOP:
			if (!heap_asked) {
				if (optarg)
					die_usage("--top=%s: a number of sites is for --heap; without it, --top (no value) is the live view",
						  optarg);
				o->top_view = true;
				mode_given = true;
				break;
			}
			/* An optional argument is taken only as --top=N.  */
			if (!optarg && optind < argc)
				optarg = argv[optind++];
			if (!optarg)
				die_usage("option '--top' needs a value");
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
			if (cp_unwind_mode_parse(optarg, &o->unwind_mode) < 0)
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
			print_formats();
			fputs(exit_text, stdout);
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
	o->script = o->n_script_items > 0 || o->batch || o->json;
	if (o->top_view && (o->script || o->dump || o->output || o->format))
		die_usage("--top is a live view of its own: -x, -ex, --batch, --json, --dump, -o and --format do not apply (in a script: top)");
	if (o->script && mode_given)
		die_usage("--heap and --dump are for one run: in a script, use heap start/stop and dump");
	if (o->script && o->output)
		die_usage("-o is for one run: in a script, write FILE");
	if (!o->heap && (metric_given || top_given))
		die_usage("--heap-metric, --heap-tracers, --heap-method and --top apply to --heap");
	if (o->heap && o->heap_method == CP_HEAP_METHOD_UPROBES &&
	    o->unwind_mode == CP_UNWIND_PTRACE)
		die_usage("--heap-method uprobes unwinds the kernel's stack copies: --unwind ptrace does not apply");
	if (o->heap) {
		if (o->dump || o->wall || o->ntids || frequency_given ||
		    o->min_samples)
			die_usage("--heap traces every allocation of every thread: --dump, --wall, --tid, --frequency and --min-samples do not apply");
	}
	choose_format(o);
	/* Scanning stopped at "--" (or the end): the rest is the COMMAND.  */
	bool dashdash = optind > 0 && optind <= argc &&
			strcmp(argv[optind - 1], "--") == 0;
	if (dashdash && optind < argc) {
		if (pid_text)
			die_usage("give a PID or -- COMMAND, not both");
		if (o->dump)
			die_usage("--dump needs the PID of a running process");
		if (o->top_view)
			die_usage("--top needs the PID of a running process (a launched command would write over the view)");
		o->command = &argv[optind];
		if (o->ntids)
			die_usage("--tid cannot be used with a launched COMMAND");
		return;
	}
	if (dashdash && !pid_text)
		die_usage("missing COMMAND after --");
	if (!pid_text && (o->script || (!mode_given && !o->output &&
					!o->duration))) {
		/* Nothing to attach to and nothing asked: the console (or
		 * the commands on standard input), nothing attached.  */
		o->script = true;
		return;
	}
	if (!pid_text)
		die_usage("missing PID or -- COMMAND");
	o->pid = (pid_t)parse_long(pid_text, "PID", 1, INT_MAX);
}

