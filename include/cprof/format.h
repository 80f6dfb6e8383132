/* The format registry: every output format and every input format cprof
 * knows, in one table each (src/formats/registry.c).  A format is {name,
 * file suffixes, a one-line description, the kinds of data it can
 * represent, one write function}; a format written while samples arrive
 * (raw, trace, speedscope in time order) also has begin/sample/end
 * functions (py-spy's Recorder: one recorder per format, fed sample by
 * sample, written at the end).  Adding a format is one new file in
 * src/formats/ and one line of the table.
 *
 * The front ends name no format: they look a name or a file's suffix up
 * here, list the names and descriptions for their help from here, and
 * write through cp_format_write() or a recorder.  */
#ifndef CPROF_FORMAT_H
#define CPROF_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "cprof/output.h"
#include "cprof/profile.h"

struct cp_heap_summary;
struct cp_dump;

/* The kinds of data a format can represent (bits of cp_format.kinds).  */
enum cp_format_kind {
	CP_FORMAT_SAMPLED = 1u << 0, /* a sampled (CPU, wall) profile, or
				      * any profile read from a file */
	CP_FORMAT_HEAP = 1u << 1,    /* a heap profile and its summary */
	CP_FORMAT_DUMP = 1u << 2,    /* a stack dump (one stack a thread) */
};

/* What a write function gets: the data of one kind.  */
struct cp_format_input {
	enum cp_format_kind kind;
	/* The profile, its sample types in its meta (profile.h).  For
	 * CP_FORMAT_DUMP it may be NULL: cp_format_write() then makes one
	 * from DUMP (one sample per thread, its stack) for the formats that
	 * write profiles.  */
	struct cp_profile *profile;
	/* CP_FORMAT_HEAP: the heap's summary (the report's figures and
	 * sites); borrowed.  */
	const struct cp_heap_summary *heap;
	/* CP_FORMAT_DUMP: the dump; borrowed.  */
	const struct cp_dump *dump;
};

/* Everything the front ends pass to writers today; a writer reads the
 * fields it knows.  Zero-initialised is the default of every writer
 * except svg.minwidth (< 0 for its default): use CP_FORMAT_OPTIONS_INIT.  */
struct cp_format_options {
	struct cp_folded_options folded; /* folded, raw, trace frames; dump
					  * text: folded.lines */
	struct cp_svg_options svg;
	size_t top;          /* report: entries per table; 0: all (the heap
			      * report: 10) */
	const char *name;    /* the profile's name (speedscope, the report's
			      * first line); NULL: the meta's target */
	size_t min_samples;  /* trace: a frame starts once it was in this
			      * many consecutive samples (0, 1: at once) */
	/* Warnings (a recorder falling back to aggregated output, ...): one
	 * line without newline.  NULL: none are reported.  */
	void (*warn)(void *arg, const char *text);
	void *warn_arg;
};

#define CP_FORMAT_OPTIONS_INIT { .svg = { .minwidth = -1 } }

/* One output format.  */
struct cp_format {
	const char *name;           /* "folded", "svg", ... */
	const char *suffixes[4];    /* file suffixes it is picked by, longest
				     * match wins (".speedscope.json");
				     * NULL-terminated */
	const char *description;    /* one line for --help */
	unsigned kinds;             /* enum cp_format_kind bits */
	bool binary;                /* not for a terminal (pprof) */
	bool dump_as_profile;       /* writes a dump as its profile
				     * (cp_format_dump_profile) */
	/* Write IN (one of KINDS) to STREAM.  Returns 0 or a -CP_E_* code
	 * (-CP_E_SYS with errno).  NULL for a format written only as
	 * samples arrive (raw, trace).  */
	int (*write)(const struct cp_format_input *in,
		     const struct cp_format_options *options, FILE *stream);
	/* Streaming, optional (all three or none): BEGIN makes the
	 * recorder's state (*STATE; IN and OPTIONS are the recorder's, valid
	 * until END) and may write a header; SAMPLE takes one sample of IN's
	 * profile as it is taken (a stack id of that profile, its names
	 * known); END, with WRITE, writes what is left (IN's profile
	 * complete by then), and frees the state.  Each returns 0 or a
	 * -CP_E_* code (-CP_E_SYS with errno).  */
	int (*begin)(const struct cp_format_input *in,
		     const struct cp_format_options *options, FILE *stream,
		     void **state);
	int (*sample)(void *state, uint64_t t_ns, pid_t tid, uint32_t stack,
		      uint64_t weight);
	int (*end)(void *state, bool write);
};

/* The formats, in the order of their table (the order help lists them
 * in); *N set to their number.  Static.  */
const struct cp_format *const *cp_formats(size_t *n);

/* The format named NAME (exact, lower case), or NULL.  */
const struct cp_format *cp_format_find(const char *name);

/* The format the suffix of PATH asks for (any case; the longest suffix
 * that matches), or NULL when PATH is NULL or says nothing.  */
const struct cp_format *cp_format_for_path(const char *path);

/* True when FORMAT can represent data of KIND.  */
bool cp_format_supports(const struct cp_format *format,
			enum cp_format_kind kind);

/* The format written when none is asked for: folded for a sampled
 * profile, report for a heap profile, text for a dump.  */
const struct cp_format *cp_format_default(enum cp_format_kind kind);

/* The names of the formats for KIND as a list for a message: "folded,
 * raw, trace, svg, pprof or speedscope" into BUF (SIZE bytes, truncated).
 * Returns BUF.  */
const char *cp_format_names(enum cp_format_kind kind, char *buf,
			    size_t size);

/* Write the formats for KIND for a help text, one per line: INDENT
 * spaces, the name padded to WIDTH, the description.  Returns 0 or
 * -CP_E_SYS.  */
int cp_format_help(enum cp_format_kind kind, int indent, int width,
		   FILE *stream);

/* Write IN with FORMAT.  A dump without a profile is made into one first
 * (cp_format_dump_profile) when FORMAT writes profiles.  Returns 0;
 * -CP_E_INVAL when FORMAT cannot represent IN's kind or is written only as
 * samples arrive; or the writer's -CP_E_* code (-CP_E_SYS with errno).  */
int cp_format_write(const struct cp_format *format,
		    const struct cp_format_input *in,
		    const struct cp_format_options *options, FILE *stream);

/* A dump as a profile: one sample of count 1 per thread, its stack (the
 * thread named), into a new *OUT (the caller frees it).  The count type
 * is threads/count.  Returns 0 or -CP_E_NOMEM.  */
int cp_format_dump_profile(const struct cp_dump *dump,
			   struct cp_profile **out);

/* ------------------------------------------------------------ recorders */

/* One run's writer of one format, fed the samples as they are taken (a
 * format without streaming functions writes the profile at the end).  */
struct cp_format_recorder;

/* A recorder writing IN's data (its profile: the one being filled; IN is
 * copied, its pointers borrowed until the recorder is freed) with FORMAT
 * to STREAM.  OPTIONS are copied (their strings borrowed).  A streaming
 * format may write its header now.  Returns 0, -CP_E_INVAL (FORMAT cannot
 * represent IN's kind), -CP_E_NOMEM or -CP_E_SYS.  */
int cp_format_recorder_new(const struct cp_format *format,
			   const struct cp_format_input *in,
			   const struct cp_format_options *options,
			   FILE *stream, struct cp_format_recorder **out);

/* True when RECORDER wants the samples (cp_format_record): pass it to the
 * sampler's on_sample then.  */
bool cp_format_recorder_streams(const struct cp_format_recorder *recorder);

/* The sampler's on_sample (sampler.h): ARG is the recorder.  A failure is
 * kept and returned by cp_format_recorder_finish.  */
void cp_format_record(void *arg, uint64_t t_ns, pid_t tid, uint32_t stack,
		      uint64_t weight);

/* The run is over and the profile named: write what is left.  Returns 0
 * or the first -CP_E_* code of the recording or the writing (-CP_E_SYS
 * with errno).  Frees RECORDER.  */
int cp_format_recorder_finish(struct cp_format_recorder *recorder);

/* Give up RECORDER without writing more.  NULL is fine.  */
void cp_format_recorder_free(struct cp_format_recorder *recorder);

/* ------------------------------------------------------------- readers */

/* One input format: a file read into a profile.  */
struct cp_format_reader {
	const char *name;
	const char *suffixes[4];   /* NULL-terminated */
	const char *description;
	/* Read STREAM (named NAME in messages) into a new *OUT.  On bad
	 * input -CP_E_PARSE with "NAME:LINE: what" in ERROR.  */
	int (*read)(FILE *stream, const char *name, struct cp_profile **out,
		    char *error, size_t error_size);
};

/* The readers, in table order; *N set.  Static.  */
const struct cp_format_reader *cp_format_readers(size_t *n);

/* The reader named NAME, or NULL.  */
const struct cp_format_reader *cp_format_reader_find(const char *name);

/* The reader the suffix of PATH asks for, or NULL.  */
const struct cp_format_reader *cp_format_reader_for_path(const char *path);

#endif
