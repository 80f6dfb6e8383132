/* cprof: offline work on folded stacks — flame graphs, differences,
 * conversions and reports — and timelines from raw samples.  A thin layer
 * over libcprof: options, messages, exit codes.  Every folded input goes
 * through cp_read_folded(), raw samples through cp_timeline_read_raw(),
 * and every output through cp_output_open (a temporary renamed into
 * place for a file; a device or FIFO written in place, never replaced),
 * so a malformed input never leaves a file behind.  */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cprof/diff.h"
#include "cprof/error.h"
#include "cprof/format.h"
#include "cprof/output.h"
#include "cprof/profile.h"
#include "cprof/report.h"
#include "cprof/timeline.h"
#include "cli/common.h"

static const char main_usage[] =
	"Usage: cprof COMMAND [OPTIONS] ARGS...\n"
	"Flame graphs, differences, conversions and reports from folded stacks (what\n"
	"cprof-attach and FlameGraph's stackcollapse scripts write), and timelines\n"
	"from raw timestamped samples (cprof-attach --format raw).\n"
	"\n"
	"Commands:\n"
	"  flamegraph   draw an interactive SVG flame graph\n"
	"  diff         compare two profiles: a differential flame graph or counts\n"
	"  convert      write a profile in another format\n"
	"  report       print the top functions by self and by total samples\n"
	"  timeline     turn raw samples into start/end events or a trace\n"
	"\n"
	"  -h, --help           show this help; cprof COMMAND --help: one command's\n"
	"  -V, --version        show the version\n"
	"\n";

static const char flamegraph_usage[] =
	"Usage: cprof flamegraph [OPTIONS] IN [-o OUT.svg]\n"
	"Draw an interactive SVG flame graph of the folded stacks in IN.\n"
	"\n"
	"      --title TEXT         title (default \"Flame Graph\"; \"Icicle Graph\" with\n"
	"                           --inverted)\n"
	"      --width PIXELS       image width (default 1200)\n"
	"      --minwidth PIXELS    leave out frames narrower than this (decimals\n"
	"                           allowed; default 0.1)\n"
	"      --inverted           icicle graph: the root at the top\n"
	"      --colors PALETTE     default (by kind of frame), hot, mem, io, red, green,\n"
	"                           blue, yellow, purple, aqua, orange or gray\n"
	"  -o, --output FILE        where to write the SVG (default: standard output)\n"
	"  -h, --help               show this help\n";

static const char diff_usage[] =
	"Usage: cprof diff [OPTIONS] BEFORE AFTER [-o OUT]\n"
	"Compare two profiles.  svg: a differential flame graph, widths from AFTER,\n"
	"a frame red where it grew and blue where it shrank.  folded: one line\n"
	"\"stack BEFORE AFTER\" for every stack of either profile, sorted by stack.\n"
	"\n"
	"      --format FORMAT      one of the formats below (default: the one OUT's\n"
	"                           suffix names, else the first)\n"
	"      --normalize          scale BEFORE to AFTER's total first (rounded to\n"
	"                           whole samples)\n"
	"      --title TEXT         title (default \"Differential Flame Graph\")\n"
	"      --width PIXELS       image width (default 1200)\n"
	"      --minwidth PIXELS    leave out frames narrower than this (default 0.1)\n"
	"      --inverted           icicle graph: the root at the top\n"
	"  -o, --output FILE        where to write (default: standard output)\n"
	"  -h, --help               show this help\n";

static const char convert_usage[] =
	"Usage: cprof convert IN --format FORMAT [-o OUT]\n"
	"Write the folded stacks in IN in another format.\n"
	"\n"
	"      --format FORMAT      one of the formats below; may be left out when\n"
	"                           OUT's suffix names one\n"
	"  -F, --frequency HZ       the counts are samples taken HZ times a second per\n"
	"                           thread (cprof-attach -F, default 99): pprof and\n"
	"                           speedscope give times (count / HZ) in nanoseconds;\n"
	"                           without it, counts\n"
	"  -o, --output FILE        where to write (default: standard output)\n"
	"  -h, --help               show this help\n";

static const char report_usage[] =
	"Usage: cprof report [OPTIONS] IN\n"
	"Print the top functions by self samples (the function was running) and by\n"
	"total samples (it was on the stack; counted once per stack, even when it\n"
	"recurses), with percentages of all samples.\n"
	"\n"
	"      --top N              functions in each table (default 10; 0: all)\n"
	"  -o, --output FILE        where to write (default: standard output)\n"
	"  -h, --help               show this help\n";

static const char timeline_usage[] =
	"Usage: cprof timeline [OPTIONS] RAW [-o OUT]\n"
	"Turn the raw samples in RAW into function start/end events.  For each thread\n"
	"separately, where two consecutive stacks differ (compared frame by frame from\n"
	"the root), the frames of the previous stack end, deepest first, and those of\n"
	"the new one start, outermost first, at the new sample's timestamp.\n"
	"\n"
	"      --format FORMAT      one of the formats below (default: the one OUT's\n"
	"                           suffix names, else the first)\n"
	"      --min-samples N      a frame starts only once it has been on its\n"
	"                           thread's stack in N consecutive samples; it starts\n"
	"                           at the Nth (default 1)\n"
	"  -o, --output FILE        where to write (default: standard output)\n"
	"  -h, --help               show this help\n";

static const char timeline_epilog[] =
	"\n"
	"RAW is a file of raw samples (cprof-attach --format raw), or - for standard\n"
	"input: lines \"TIMESTAMP TID WEIGHT FRAME;FRAME;...\" in time order, the\n"
	"timestamp in seconds, the weight in periods, frames root first, the stack\n"
	"possibly empty (no WEIGHT without a \"# fields SECONDS TID WEIGHT STACK\"\n"
	"header, as in files from before weights); lines beginning with # are headers\n"
	"(\"# thread TID NAME\", \"# target PID NAME\", \"# frequency HZ\") or comments.\n"
	"In events output TIMESTAMP is written as in RAW and frames still open after\n"
	"the last sample stay open; trace and speedscope close them once their\n"
	"thread's last sample has lasted its weight in periods.  Nothing is written\n"
	"until the whole input is read.\n"
	"\n"
	"Exit status: 0 success, 1 runtime failure, 2 usage error or bad input\n"
	"(a malformed line, an input without samples or that cannot be opened).\n";

static const char common_usage[] =
	"\n"
	"IN is a file of folded stacks, or - for standard input: lines\n"
	"\"frame;frame;...;frame COUNT\", root first, the count after the last run of\n"
	"spaces or tabs (decimals are rounded half up); blank lines and lines\n"
	"beginning with # are skipped.  Output files are written to a temporary file\n"
	"and renamed into place when complete.\n"
	"\n"
	"Exit status: 0 success, 1 runtime failure, 2 usage error or bad input\n"
	"(malformed or empty input, an input that cannot be opened).\n";

/* What every command's options fill in.  */
struct options {
	const char *command;     /* "flamegraph", ...; NULL before one */
	const char *output;      /* NULL: standard output */
	const char *format;      /* NULL: not given */
	const char *title;
	unsigned width;          /* 0: the writer's default */
	double minwidth;         /* < 0: the writer's default */
	bool inverted;
	const char *colors;
	bool normalize;
	long top;
	unsigned min_samples;    /* timeline: 0 when not given */
	unsigned frequency;      /* convert: samples per second; 0: unknown */
	const char *inputs[2];
	size_t ninputs;
	char comment[1024];      /* the command line, for the SVG header */
};

enum {
	OPT_TITLE = 256, OPT_WIDTH, OPT_MINWIDTH, OPT_INVERTED, OPT_COLORS,
	OPT_FORMAT, OPT_NORMALIZE, OPT_TOP, OPT_MIN_SAMPLES,
};

/* Folded text says nothing of a sampling frequency: cprof convert takes
 * it from -F as cprof-attach does, 1 to this.  */
#define MAX_FREQUENCY 1000000

#define OPTION_OUTPUT {"output", required_argument, NULL, 'o'}
#define OPTION_HELP {"help", no_argument, NULL, 'h'}
#define OPTION_FORMAT {"format", required_argument, NULL, OPT_FORMAT}
#define OPTIONS_SVG                                                        \
	{"title", required_argument, NULL, OPT_TITLE},                     \
	{"width", required_argument, NULL, OPT_WIDTH},                     \
	{"minwidth", required_argument, NULL, OPT_MINWIDTH},               \
	{"inverted", no_argument, NULL, OPT_INVERTED}

static const struct option flamegraph_options[] = {
	OPTIONS_SVG,
	{"colors", required_argument, NULL, OPT_COLORS},
	OPTION_OUTPUT, OPTION_HELP, {NULL, 0, NULL, 0},
};
static const struct option diff_options[] = {
	OPTIONS_SVG, OPTION_FORMAT,
	{"normalize", no_argument, NULL, OPT_NORMALIZE},
	OPTION_OUTPUT, OPTION_HELP, {NULL, 0, NULL, 0},
};
static const struct option convert_options[] = {
	OPTION_FORMAT,
	{"frequency", required_argument, NULL, 'F'},
	OPTION_OUTPUT, OPTION_HELP, {NULL, 0, NULL, 0},
};
static const struct option report_options[] = {
	{"top", required_argument, NULL, OPT_TOP},
	OPTION_OUTPUT, OPTION_HELP, {NULL, 0, NULL, 0},
};
static const struct option timeline_options[] = {
	OPTION_FORMAT,
	{"min-samples", required_argument, NULL, OPT_MIN_SAMPLES},
	OPTION_OUTPUT, OPTION_HELP, {NULL, 0, NULL, 0},
};

/* A format a command can write, from one of the library's tables.  */
struct choice {
	const char *name;
	const char *const *suffixes; /* NULL-terminated */
	const char *description;
};

#define MAX_CHOICES 32

struct command {
	const char *name;
	const char *usage;
	const struct option *options;
	size_t ninputs;          /* positional arguments it takes */
	const char *inputs_name; /* for "missing ..." */
	int (*run)(struct options *o);
	const char *epilog;      /* after the usage; NULL: common_usage */
	/* The formats it writes, from the library's tables; NULL: one.  */
	size_t (*formats)(struct choice *out);
};

/* "a, b or c": the names of CHOICES (N) for a message, into BUF.  */
static const char *choice_names(const struct choice *choices, size_t n,
				char *buf, size_t size)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n && used < size; i++) {
		int w = snprintf(buf + used, size - used, "%s%s",
				 i == 0 ? "" : i + 1 == n ? " or " : ", ",
				 choices[i].name);
		if (w < 0)
			break;
		used += (size_t)w;
	}
	return buf;
}

static void print_help(const struct command *cmd)
{
	fputs(cmd->usage, stdout);
	struct choice choices[MAX_CHOICES];
	size_t n = cmd->formats ? cmd->formats(choices) : 0;
	if (n)
		fputs("\nFormats:\n", stdout);
	for (size_t i = 0; i < n; i++) {
		printf("  %-12s %s\n", choices[i].name, choices[i].description);
		for (size_t k = 0; choices[i].suffixes[k]; k++)
			printf("%s%s", k ? ", " : "               (OUT ending in ",
			       choices[i].suffixes[k]);
		if (choices[i].suffixes[0])
			fputs(")\n", stdout);
	}
	fputs(cmd->epilog ? cmd->epilog : common_usage, stdout);
	exit(EXIT_OK);
}

/* The name used in messages for input PATH.  */
static const char *input_name(const char *path)
{
	return strcmp(path, "-") == 0 ? "<stdin>" : path;
}

static void parse_command_options(int argc, char **argv,
				  const struct command *cmd, struct options *o)
{
	o->minwidth = -1;
	o->top = 10;
	opterr = 0;
	optind = 1;
	int c;
	/* Options may come after the arguments (GNU permutation); "-" is an
	 * argument (standard input), "--" ends the options.  */
	/* -F only where --frequency is an option (convert).  */
	const char *shorts = cmd->options == convert_options ? ":o:hF:" : ":o:h";
	while ((c = getopt_long(argc, argv, shorts, cmd->options, NULL)) != -1) {
		switch (c) {
		case 'o':
			o->output = optarg;
			break;
		case 'h':
			print_help(cmd);
			break;
		case OPT_TITLE:
			o->title = optarg;
			break;
		case OPT_WIDTH:
			o->width = (unsigned)parse_long(optarg, "width", 10,
							1000000);
			break;
		case OPT_MINWIDTH: {
			char *end;
			errno = 0;
			double d = strtod(optarg, &end);
			if (errno || end == optarg || *end || !isfinite(d) ||
			    d < 0)
				die_usage("invalid minimum width '%s': expected a number of pixels, 0 or more",
					  optarg);
			o->minwidth = d;
			break;
		}
		case OPT_INVERTED:
			o->inverted = true;
			break;
		case OPT_COLORS:
			o->colors = optarg;
			break;
		case OPT_FORMAT:
			o->format = optarg;
			break;
		case OPT_NORMALIZE:
			o->normalize = true;
			break;
		case OPT_TOP:
			o->top = parse_long(optarg, "--top", 0, INT_MAX);
			break;
		case OPT_MIN_SAMPLES:
			o->min_samples = (unsigned)parse_long(
				optarg, "--min-samples", 1, INT_MAX);
			break;
		case 'F':
			o->frequency = (unsigned)parse_long(
				optarg, "--frequency", 1, MAX_FREQUENCY);
			break;
		case ':':
			die_usage("option '%s' needs a value", argv[optind - 1]);
		default:
			if (optopt > 0 && optopt < 256)
				die_usage("unknown option '-%c' for cprof %s",
					  optopt, cmd->name);
			die_usage("unknown option '%s' for cprof %s",
				  argv[optind - 1], cmd->name);
		}
	}
	for (int i = optind; i < argc; i++) {
		if ((size_t)(i - optind) >= cmd->ninputs)
			die_usage("unexpected argument '%s'", argv[i]);
		o->inputs[o->ninputs++] = argv[i];
	}
	if (o->ninputs < cmd->ninputs)
		die_usage("missing %s", cmd->inputs_name);
	if (o->ninputs == 2 && strcmp(o->inputs[0], "-") == 0 &&
	    strcmp(o->inputs[1], "-") == 0)
		die_usage("only one input can be standard input (-)");
}

/* Read IN into *PROFILE.  Returns an exit code (the message is printed). */
static int load(const char *path, struct cp_profile **profile)
{
	FILE *stream = stdin;
	if (strcmp(path, "-") != 0) {
		stream = fopen(path, "re");
		if (!stream) {
			message("cannot open %s: %s", path, strerror(errno));
			return EXIT_USAGE;
		}
		struct stat st;
		if (fstat(fileno(stream), &st) == 0 && S_ISDIR(st.st_mode)) {
			message("%s is a directory, not a file of folded stacks",
				path);
			fclose(stream);
			return EXIT_USAGE;
		}
	}
	char error[512];
	int rc = cp_read_folded(stream, input_name(path), profile, error,
				sizeof(error));
	if (stream != stdin)
		fclose(stream);
	if (rc == 0)
		return EXIT_OK;
	message("%s", error[0] ? error : cp_strerror(rc));
	return rc == -CP_E_PARSE ? EXIT_USAGE : EXIT_RUNTIME;
}

/* Report a writer's failure RC on OUT; returns the exit code.  */
static int write_failed(int rc, const char *path, const struct options *o)
{
	const char *where = strcmp(path, "-") == 0 ? "standard output" : path;
	if (rc == -CP_E_INVAL && o->colors) {
		message("unknown color palette '%s' (see cprof flamegraph --help)",
			o->colors);
		return EXIT_USAGE;
	}
	if (rc == -CP_E_SYS)
		message("cannot write %s: %s", where, strerror(errno));
	else
		message("cannot write %s: %s", where, cp_strerror(rc));
	return EXIT_RUNTIME;
}

/* Open the output, or print why not: a destination refused (a
 * directory, a link not followed) is bad input.  */
static int open_output(const struct options *o, struct cp_output **out)
{
	char error[PATH_MAX + 256];
	int rc = cp_output_open(o->output, out, error, sizeof(error));
	if (rc == 0)
		return EXIT_OK;
	*out = NULL;
	message("%s", error);
	return rc == -CP_E_INVAL ? EXIT_USAGE : EXIT_RUNTIME;
}

/* Commit OUT after a writer returned RC.  Returns the exit code.  */
static int finish_output(struct cp_output *out, int rc,
			 const struct options *o)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", cp_output_path(out));
	if (rc < 0) {
		cp_output_abort(out);
		return write_failed(rc, path, o);
	}
	rc = cp_output_commit(out);
	if (rc < 0)
		return write_failed(rc, path, o);
	return EXIT_OK;
}

static struct cp_svg_options svg_options(const struct options *o)
{
	return (struct cp_svg_options){
		.title = o->title,
		.width = o->width,
		.minwidth = o->minwidth,
		.inverted = o->inverted,
		.colors = o->colors,
		.comment = o->comment,
	};
}

/* ------------------------------------------------------------ flamegraph */

static int run_flamegraph(struct options *o)
{
	struct cp_output *out = NULL;
	struct cp_profile *profile = NULL;
	int code = open_output(o, &out);
	if (code == EXIT_OK)
		code = load(o->inputs[0], &profile);
	if (code != EXIT_OK) {
		cp_output_abort(out);
		return code;
	}
	struct cp_svg_options so = svg_options(o);
	int rc = cp_write_svg(profile, &so, cp_output_stream(out));
	code = finish_output(out, rc, o);
	cp_profile_free(profile);
	return code;
}

/* ------------------------------------------------------------------ diff */

static size_t diff_choices(struct choice *out)
{
	size_t n;
	const struct cp_diff_format *f = cp_diff_formats(&n);
	for (size_t i = 0; i < n && i < MAX_CHOICES; i++)
		out[i] = (struct choice){f[i].name, f[i].suffixes,
					 f[i].description};
	return n < MAX_CHOICES ? n : MAX_CHOICES;
}

static int run_diff(struct options *o)
{
	const struct cp_diff_format *f =
		o->format ? cp_diff_format_find(o->format)
			  : cp_diff_format_for_path(o->output);
	if (!f && !o->format)
		f = cp_diff_formats(&(size_t){0});
	if (!f) {
		struct choice choices[MAX_CHOICES];
		char names[256];
		die_usage("unknown format '%s' for diff: %s", o->format,
			  choice_names(choices, diff_choices(choices), names,
				       sizeof(names)));
	}
	struct cp_output *out = NULL;
	struct cp_profile *before = NULL, *after = NULL;
	int code = open_output(o, &out);
	if (code == EXIT_OK)
		code = load(o->inputs[0], &before);
	if (code == EXIT_OK)
		code = load(o->inputs[1], &after);
	if (code != EXIT_OK) {
		cp_output_abort(out);
		cp_profile_free(before);
		return code;
	}
	struct cp_diff_options dopt = {
		.normalize = o->normalize,
		.svg = svg_options(o),
	};
	int rc = f->write(before, after, &dopt, cp_output_stream(out));
	code = finish_output(out, rc, o);
	cp_profile_free(before);
	cp_profile_free(after);
	return code;
}

/* --------------------------------------------------------------- convert */

/* The formats convert writes: those that write a whole sampled profile
 * (not those written only as samples arrive).  */
static size_t convert_choices(struct choice *out)
{
	size_t n, k = 0;
	const struct cp_format *f = cp_formats(&n);
	for (size_t i = 0; i < n && k < MAX_CHOICES; i++)
		if (f[i].write && cp_format_supports(&f[i], CP_FORMAT_SAMPLED))
			out[k++] = (struct choice){f[i].name, f[i].suffixes,
						   f[i].description};
	return k;
}

static int run_convert(struct options *o)
{
	struct choice choices[MAX_CHOICES];
	char names[256];
	choice_names(choices, convert_choices(choices), names, sizeof(names));
	const struct cp_format *f = o->format ? cp_format_find(o->format)
					      : cp_format_for_path(o->output);
	if (!f && !o->format && o->output)
		die_usage("cannot tell the output format from the name '%s': give --format %s",
			  o->output, names);
	if (!f && !o->format)
		die_usage("missing --format (%s)", names);
	if (!f || !f->write || !cp_format_supports(f, CP_FORMAT_SAMPLED))
		die_usage("unknown format '%s': %s",
			  o->format ? o->format : f->name, names);
	/* gzip does the same: compressed bytes on a terminal help nobody.  */
	if (f->binary && (!o->output || strcmp(o->output, "-") == 0) &&
	    isatty(STDOUT_FILENO))
		die_usage("will not write binary %s data to a terminal: give -o FILE%s or redirect standard output",
			  f->name, f->suffixes[0] ? f->suffixes[0] : "");

	struct cp_output *out = NULL;
	struct cp_profile *profile = NULL;
	int code = open_output(o, &out);
	if (code == EXIT_OK)
		code = load(o->inputs[0], &profile);
	if (code != EXIT_OK) {
		cp_output_abort(out);
		return code;
	}
	/* The counts are samples at this frequency: times in pprof and
	 * speedscope.  */
	cp_profile_meta(profile)->frequency = o->frequency;
	const char *in = o->inputs[0];
	const char *base = strrchr(in, '/');
	struct cp_format_options fo = CP_FORMAT_OPTIONS_INIT;
	fo.svg = svg_options(o);
	fo.name = strcmp(in, "-") == 0 ? "stdin" : base ? base + 1 : in;
	struct cp_format_input input = {
		.kind = CP_FORMAT_SAMPLED,
		.profile = profile,
	};
	int rc = cp_format_write(f, &input, &fo, cp_output_stream(out));
	code = finish_output(out, rc, o);
	cp_profile_free(profile);
	return code;
}

/* ---------------------------------------------------------------- report */

static int run_report(struct options *o)
{
	struct cp_output *out = NULL;
	struct cp_profile *profile = NULL;
	int code = open_output(o, &out);
	if (code == EXIT_OK)
		code = load(o->inputs[0], &profile);
	if (code != EXIT_OK) {
		cp_output_abort(out);
		return code;
	}
	struct cp_report_options ro = {
		.top = (size_t)o->top,
		.name = input_name(o->inputs[0]),
	};
	int rc = cp_report_write(profile, &ro, cp_output_stream(out));
	code = finish_output(out, rc, o);
	cp_profile_free(profile);
	return code;
}

/* -------------------------------------------------------------- timeline */

static size_t timeline_choices(struct choice *out)
{
	size_t n;
	const struct cp_timeline_format_info *f = cp_timeline_formats(&n);
	for (size_t i = 0; i < n && i < MAX_CHOICES; i++)
		out[i] = (struct choice){f[i].name, f[i].suffixes,
					 f[i].description};
	return n < MAX_CHOICES ? n : MAX_CHOICES;
}

/* Open raw input PATH ("-": standard input) into *STREAM.  Returns an
 * exit code (the message is printed).  */
static int open_raw(const char *path, FILE **stream)
{
	*stream = stdin;
	if (strcmp(path, "-") == 0)
		return EXIT_OK;
	*stream = fopen(path, "re");
	if (!*stream) {
		message("cannot open %s: %s", path, strerror(errno));
		return EXIT_USAGE;
	}
	struct stat st;
	if (fstat(fileno(*stream), &st) == 0 && S_ISDIR(st.st_mode)) {
		message("%s is a directory, not a file of raw samples", path);
		fclose(*stream);
		*stream = NULL;
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* An anonymous temporary file (already unlinked) in $TMPDIR or /tmp
 * (tmpfile() ignores TMPDIR).  NULL with errno set; *DIR says where.  */
static FILE *spool_file(const char **dir)
{
	*dir = getenv("TMPDIR");
	if (!*dir || !**dir)
		*dir = "/tmp";
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/cprof-XXXXXX", *dir) >=
	    (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	int fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return NULL;
	unlink(path);
	FILE *f = fdopen(fd, "w+");
	if (!f) {
		int saved = errno;
		close(fd);
		errno = saved;
	}
	return f;
}

/* Copy SPOOL from its start to STREAM.  Returns 0 or -CP_E_SYS.  */
static int copy_spool(FILE *spool, FILE *stream)
{
	if (fflush(spool) != 0 || fseek(spool, 0, SEEK_SET) != 0)
		return -CP_E_SYS;
	char chunk[1 << 16];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), spool)) > 0)
		if (fwrite(chunk, 1, n, stream) != n)
			return -CP_E_SYS;
	return ferror(spool) ? -CP_E_SYS : 0;
}

static int run_timeline(struct options *o)
{
	const struct cp_timeline_format_info *f =
		o->format ? cp_timeline_format_find(o->format)
			  : cp_timeline_format_for_path(o->output);
	if (!f && !o->format)
		f = cp_timeline_formats(&(size_t){0});
	if (!f) {
		struct choice choices[MAX_CHOICES];
		char names[256];
		die_usage("unknown format '%s' for timeline: %s", o->format,
			  choice_names(choices, timeline_choices(choices),
				       names, sizeof(names)));
	}
	struct cp_timeline_options to = {
		.format = f->format,
		.min_samples = o->min_samples ? o->min_samples : 1,
	};
	const char *in_path = o->inputs[0];
	const char *base = strrchr(in_path, '/');
	to.name = strcmp(in_path, "-") == 0 ? "stdin" : base ? base + 1 : in_path;

	struct cp_output *out = NULL;
	FILE *in = NULL, *spool = NULL;
	struct cp_timeline *tl = NULL;
	char *buffer = NULL;
	int code = open_output(o, &out);
	if (code == EXIT_OK)
		code = open_raw(in_path, &in);
	if (code != EXIT_OK) {
		cp_output_abort(out);
		return code;
	}
	/* Standard output, a FIFO or a device cannot be taken back: write
	 * to a temporary file and copy it out once the whole input has been
	 * read.  */
	FILE *dest = cp_output_stream(out);
	if (cp_output_kind(out) != CP_OUTPUT_REPLACE) {
		const char *dir;
		spool = spool_file(&dir);
		if (!spool) {
			message("cannot create a temporary file in %s: %s (set TMPDIR to a writable directory, or give -o FILE)",
				dir, strerror(errno));
			code = EXIT_RUNTIME;
			goto out;
		}
		dest = spool;
	}
	/* Not used yet: a large buffer saves system calls on big outputs
	 * (glibc takes the size only with a buffer given).  It must outlive
	 * the stream: freed after the stream is closed, below.  */
	buffer = malloc(1 << 20);
	if (buffer)
		setvbuf(dest, buffer, _IOFBF, 1 << 20);

	int rc = cp_timeline_new(&to, dest, &tl);
	char error[1024] = "";
	if (rc == 0)
		rc = cp_timeline_read_raw(tl, in, input_name(in_path), error,
					  sizeof(error));
	if (rc < 0) {
		cp_timeline_free(tl);
		message("%s", error[0] ? error : cp_strerror(rc));
		code = rc == -CP_E_PARSE ? EXIT_USAGE : EXIT_RUNTIME;
		goto out;
	}
	rc = cp_timeline_finish(tl);
	if (rc == 0 && spool)
		rc = copy_spool(spool, cp_output_stream(out));
	code = finish_output(out, rc, o);
	out = NULL;
out:
	cp_output_abort(out);
	if (spool)
		fclose(spool);
	free(buffer);
	if (in && in != stdin)
		fclose(in);
	return code;
}

/* ------------------------------------------------------------------ main */

static const struct command commands[] = {
	{"flamegraph", flamegraph_usage, flamegraph_options, 1, "IN",
	 run_flamegraph, NULL, NULL},
	{"diff", diff_usage, diff_options, 2, "BEFORE or AFTER", run_diff, NULL,
	 diff_choices},
	{"convert", convert_usage, convert_options, 1, "IN", run_convert, NULL,
	 convert_choices},
	{"report", report_usage, report_options, 1, "IN", run_report, NULL,
	 NULL},
	{"timeline", timeline_usage, timeline_options, 1, "RAW", run_timeline,
	 timeline_epilog, timeline_choices},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void print_main_help(void)
{
	fputs(main_usage, stdout);
	for (size_t i = 0; i < NCOMMANDS; i++) {
		fputs(commands[i].usage, stdout);
		fputc('\n', stdout);
	}
	fputs(common_usage + 1, stdout);
	exit(EXIT_OK);
}

/* The command line, for the header of an SVG.  */
static void join_arguments(int argc, char **argv, char *buf, size_t size)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; i < argc && used + 1 < size; i++) {
		int n = snprintf(buf + used, size - used, "%s%s",
				 i ? " " : "", i ? argv[i] : "cprof");
		if (n < 0)
			break;
		used += (size_t)n;
	}
}

/* "a, b, c or d": the names of every command, from the one table, so no
 * message can leave one out.  */
static const char *command_list(void)
{
	static char list[256];
	size_t used = 0;
	for (size_t i = 0; i < NCOMMANDS && used < sizeof(list); i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used,
					 "%s%s",
					 i == 0 ? "" :
					 i + 1 == NCOMMANDS ? " or " : ", ",
					 commands[i].name);
	return list;
}

int main(int argc, char **argv)
{
	struct options o = {0};
	if (argc < 2)
		die_usage("missing command: %s", command_list());
	const char *name = argv[1];
	if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0)
		print_main_help();
	if (strcmp(name, "-V") == 0 || strcmp(name, "--version") == 0) {
		printf("cprof %s\n", CP_VERSION);
		return EXIT_OK;
	}
	if (name[0] == '-')
		die_usage("unknown option '%s': a command comes first (%s)",
			  name, command_list());
	const struct command *cmd = NULL;
	for (size_t i = 0; i < NCOMMANDS && !cmd; i++)
		if (strcmp(commands[i].name, name) == 0)
			cmd = &commands[i];
	if (!cmd)
		die_usage("unknown command '%s': %s", name, command_list());
	cli_help_command = cmd->name;
	o.command = cmd->name;
	join_arguments(argc, argv, o.comment, sizeof(o.comment));
	/* The command's own arguments start at argv[1] for getopt.  */
	parse_command_options(argc - 1, argv + 1, cmd, &o);
	return cmd->run(&o);
}
