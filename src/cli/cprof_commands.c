/* cprof's commands (cprof.h): each turns its options into library calls
 * and returns an exit code.  Folded input is read through load(), raw
 * samples through cp_timeline_read_raw(), and every output goes through
 * cp_output_open (a temporary renamed into place for a file; a device or
 * FIFO written in place, never replaced), so a malformed input never
 * leaves a file behind.  */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#include "cli/cprof.h"

/* ------------------------------------------------------------ flamegraph */

int run_flamegraph(struct options *o)
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

size_t diff_choices(struct choice *out)
{
	size_t n;
	const struct cp_diff_format *f = cp_diff_formats(&n);
	for (size_t i = 0; i < n && i < MAX_CHOICES; i++)
		out[i] = (struct choice){f[i].name, f[i].suffixes,
					 f[i].description};
	return n < MAX_CHOICES ? n : MAX_CHOICES;
}

int run_diff(struct options *o)
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
size_t convert_choices(struct choice *out)
{
	size_t n, k = 0;
	const struct cp_format *const *f = cp_formats(&n);
	for (size_t i = 0; i < n && k < MAX_CHOICES; i++)
		if (f[i]->write && cp_format_supports(f[i], CP_FORMAT_SAMPLED))
			out[k++] = (struct choice){f[i]->name, f[i]->suffixes,
						   f[i]->description};
	return k;
}

int run_convert(struct options *o)
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

int run_report(struct options *o)
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

size_t timeline_choices(struct choice *out)
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

int run_timeline(struct options *o)
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
	FILE *in = NULL;
	int code = open_output(o, &out);
	if (code == EXIT_OK)
		code = open_raw(in_path, &in);
	if (code != EXIT_OK) {
		cp_output_abort(out);
		return code;
	}
	/* A large buffer saves system calls on big outputs (glibc takes the
	 * size only with a buffer given).  It must outlive the stream: freed
	 * after the output is committed or given up, below.  */
	FILE *stream = cp_output_stream(out);
	char *buffer = malloc(1 << 20);
	if (buffer)
		setvbuf(stream, buffer, _IOFBF, 1 << 20);
	/* Standard output, a FIFO or a device cannot be taken back: the
	 * library spools until the whole input has been read.  */
	char error[1024];
	const char *spool_dir;
	int rc = cp_timeline_convert(&to, in, input_name(in_path), stream,
				     cp_output_kind(out) != CP_OUTPUT_REPLACE,
				     &spool_dir, error, sizeof(error));
	if (rc < 0 && (error[0] || spool_dir)) {
		if (error[0])
			message("%s", error);
		else
			message("cannot create a temporary file in %s: %s (set TMPDIR to a writable directory, or give -o FILE)",
				spool_dir, strerror(errno));
		code = rc == -CP_E_PARSE ? EXIT_USAGE : EXIT_RUNTIME;
		cp_output_abort(out);
	} else {
		code = finish_output(out, rc, o);
	}
	free(buffer);
	if (in != stdin)
		fclose(in);
	return code;
}
