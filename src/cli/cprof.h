/* cprof's parts: the program (cprof.c: the command table, options,
 * help, and the glue every command uses: inputs, outputs, messages), its
 * commands (cprof_commands.c: each turns its options into library calls)
 * and its help texts (cprof_usage.c).  */
#ifndef CPROF_CLI_CPROF_H
#define CPROF_CLI_CPROF_H

#include <stdbool.h>
#include <stddef.h>

#include "cprof/output.h"
#include "cprof/profile.h"

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

/* A format a command can write, from one of the library's tables.  */
struct choice {
	const char *name;
	const char *const *suffixes; /* NULL-terminated */
	const char *description;
};

#define MAX_CHOICES 32

/* The help texts (cprof_usage.c).  */
extern const char main_usage[], flamegraph_usage[], diff_usage[],
	convert_usage[], report_usage[], timeline_usage[], timeline_epilog[],
	common_usage[];

/* "a, b or c": the names of CHOICES (N) for a message, into BUF.  */
const char *choice_names(const struct choice *choices, size_t n, char *buf,
			 size_t size);

/* The name used in messages for input PATH ("-": "<stdin>").  */
const char *input_name(const char *path);

/* Read the profile in PATH ("-": standard input) into *PROFILE, with
 * the reader its name asks for (cprof-attach's raw samples for .raw),
 * else as folded stacks.  Returns an exit code (the message is
 * printed).  */
int load(const char *path, struct cp_profile **profile);

/* Open O's output, or print why not.  Returns an exit code.  */
int open_output(const struct options *o, struct cp_output **out);

/* Commit OUT after a writer returned RC.  Returns the exit code.  */
int finish_output(struct cp_output *out, int rc, const struct options *o);

/* The flame graph options O's command line gave.  */
struct cp_svg_options svg_options(const struct options *o);

/* The commands (cprof_commands.c): each returns the exit code.  */
int run_flamegraph(struct options *o);
int run_diff(struct options *o);
int run_convert(struct options *o);
int run_report(struct options *o);
int run_timeline(struct options *o);

/* The formats of diff, convert and timeline into OUT (MAX_CHOICES at
 * most); returns their number.  */
size_t diff_choices(struct choice *out);
size_t convert_choices(struct choice *out);
size_t timeline_choices(struct choice *out);

#endif
