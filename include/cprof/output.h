/* Writers: profile -> bytes.  Writers never call ptrace.
 *
 * Output files are written to a temporary file beside the destination and
 * renamed into place only when complete, so a failure never leaves a
 * half-written file.  */
#ifndef CPROF_OUTPUT_H
#define CPROF_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "cprof/profile.h"

struct cp_output;

/* Open PATH for writing ("-" or NULL: standard output).  The file is
 * created as a temporary now, so an unwritable destination is reported
 * before any work is done.  Returns 0 or -CP_E_SYS (errno set).  */
int cp_output_open(const char *path, struct cp_output **out);

/* The profile format an output file's name asks for: "svg" (.svg),
 * "folded" (.folded), "pprof" (.pb.gz), "speedscope" (.speedscope.json),
 * any case; NULL when PATH is NULL or says nothing.  Static strings.  */
const char *cp_output_format_for_path(const char *path);

/* The stream to write to; borrowed.  */
FILE *cp_output_stream(struct cp_output *out);

/* The destination as given ("-" for standard output).  */
const char *cp_output_path(const struct cp_output *out);

/* Flush, sync and rename the temporary file into place.  Frees OUT.
 * Returns 0 or -CP_E_SYS (the temporary file is removed).  */
int cp_output_commit(struct cp_output *out);

/* Remove the temporary file.  Frees OUT.  NULL is fine.  */
void cp_output_abort(struct cp_output *out);

struct cp_folded_options {
	bool threads;   /* begin each stack with a "TID name" frame */
	bool lines;     /* append " (file:line)" to frames with a position */
	bool no_inline; /* leave inlined frames out (fold into the caller) */
	size_t max_depth; /* frames kept per stack, innermost first; 0: all */
};

/* Write PROFILE as folded stacks: one line per distinct stack, root
 * first, frames joined by ';', a space and the count; sorted by stack text.
 * Inlined frames carry the FlameGraph suffix "_[i]".  Returns 0,
 * -CP_E_NOMEM or -CP_E_SYS.  */
int cp_write_folded(const struct cp_profile *profile,
		    const struct cp_folded_options *options, FILE *stream);

/* Render stack STACK of PROFILE as folded text (root first, frames
 * joined by ';', as cp_write_folded writes them, without the thread
 * frame) into *BUF, which is grown with realloc (*CAP its size; both may
 * start NULL/0).  Returns the length, or -CP_E_NOMEM.  */
ssize_t cp_render_stack(const struct cp_profile *profile, uint32_t stack,
			const struct cp_folded_options *options, char **buf,
			size_t *cap);

/* ------------------------------------------------------------- svg */

struct cp_svg_options {
	const char *title;      /* NULL: "Flame Graph" ("Icicle Graph") */
	unsigned width;         /* pixels; 0: 1200 */
	double minwidth;        /* pixels; frames narrower are left out;
				 * < 0: default 0.1 */
	bool inverted;          /* icicle: root at the top */
	const char *colors;     /* palette: NULL or "default", "hot", "mem",
				 * "io", "blue", "green", "aqua", ... */
	const char *unit;       /* "samples" (default) or "bytes", ... */
	const char *comment;    /* put in the header comment (command line,
				 * target, date); may be NULL */
	/* Differential flame graph: widths from the profile written, colours
	 * from the change against BEFORE (red grew, blue shrank, saturation
	 * relative to the largest change); NULL for a normal graph.  */
	const struct cp_profile *before;
	bool normalize;         /* scale BEFORE to the profile's total first */
};

/* Write PROFILE as a self-contained interactive SVG flame graph (x: share
 * of samples, frames sorted by name within their parent; y: depth).
 * Returns 0, -CP_E_NOMEM, -CP_E_SYS, or -CP_E_INVAL for an unknown
 * palette.  */
int cp_write_svg(const struct cp_profile *profile,
		 const struct cp_svg_options *options, FILE *stream);

/* ---------------------------------------------------------- pprof */

/* Write PROFILE as a gzip-compressed perftools.profiles.Profile
 * (profile.proto).  CPU profiles get sample types samples/count and
 * cpu/nanoseconds (the count times 1e9 / frequency), period_type
 * cpu/nanoseconds; a "bytes" unit gives space/bytes.  Locations are leaf
 * first, inlined frames as extra lines (caller last); each sample carries
 * thread_id and thread_name labels.  Returns 0 or a -CP_E_* code.  */
int cp_write_pprof(const struct cp_profile *profile, FILE *stream);

/* ------------------------------------------------------ speedscope */

/* Write PROFILE in speedscope's file format
 * (https://www.speedscope.app/file-format-schema.json): one "sampled"
 * profile per thread, shared frames.  NAME names the file.  Returns 0 or a
 * -CP_E_* code.  */
int cp_write_speedscope(const struct cp_profile *profile, const char *name,
			FILE *stream);

/* ---------------------------------------------------- folded input */

/* Read folded stacks (FlameGraph's format: frames joined by ';', then the
 * count after the last run of whitespace; decimal counts allowed and
 * rounded) from STREAM into a new profile.  NAME is used in messages.  On
 * malformed input returns -CP_E_PARSE with "NAME:LINE: what" in ERROR;
 * empty input is -CP_E_PARSE too ("NAME: no samples").  A leading frame
 * "TID name" written by --threads is kept as an ordinary frame.  */
int cp_read_folded(FILE *stream, const char *name, struct cp_profile **out,
		   char *error, size_t error_size);

#endif
