/* cprof: offline work on folded stacks — flame graphs, differences,
 * conversions and reports — and timelines from raw samples.  A thin layer
 * over libcprof: this file holds the command table, the options, the help
 * and the glue the commands share; the commands are in cprof_commands.c,
 * the help texts in cprof_usage.c.  */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/format.h"
#include "cprof/output.h"
#include "cprof/profile.h"
#include "cli/common.h"
#include "cli/cprof.h"

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
const char *choice_names(const struct choice *choices, size_t n,
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
const char *input_name(const char *path)
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
int load(const char *path, struct cp_profile **profile)
{
	/* The reader the name asks for (a .raw file: raw samples), else
	 * the first (folded stacks).  */
	const struct cp_format_reader *reader = cp_format_reader_for_path(path);
	if (!reader)
		reader = cp_format_readers(&(size_t){0});
	FILE *stream = stdin;
	if (strcmp(path, "-") != 0) {
		stream = fopen(path, "re");
		if (!stream) {
			message("cannot open %s: %s", path, strerror(errno));
			return EXIT_USAGE;
		}
		struct stat st;
		if (fstat(fileno(stream), &st) == 0 && S_ISDIR(st.st_mode)) {
			message("%s is a directory, not a file of %s stacks",
				path, reader->name);
			fclose(stream);
			return EXIT_USAGE;
		}
	}
	char error[512] = "";
	int rc = reader->read(stream, input_name(path), profile, error,
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
int open_output(const struct options *o, struct cp_output **out)
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
int finish_output(struct cp_output *out, int rc,
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

struct cp_svg_options svg_options(const struct options *o)
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
