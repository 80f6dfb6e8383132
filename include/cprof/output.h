/* Writers: profile -> bytes.  Writers never call ptrace.
 *
 * Output destinations (cp_output_*): every program and subcommand that
 * writes a file opens it here, so one set of rules decides what an output
 * path may do to the machine:
 *
 *  - a regular file, or a name that does not exist yet, is written to a
 *    temporary in the same directory and renamed into place at commit: a
 *    failure leaves the old file as it was (a replaced file keeps its
 *    permission bits, and its owner when we may give it);
 *  - a character device, FIFO or socket is written directly, never
 *    replaced (opened like the shell's '>': without O_CREAT, a FIFO
 *    waits for its reader; a socket is connected to);
 *  - a symbolic link, at the end of the path or on the way to it, is
 *    followed only when we or root own it (the rule above then applies
 *    to its final target, so the link stays a link); a dangling link, a
 *    loop, a link owned by another user or one to a directory is
 *    refused, never replaced.  A link into /proc (/dev/stdout,
 *    /dev/fd/N) is written through to the open file it stands for;
 *  - a directory, a block device or anything else is refused.
 *
 * Temporaries are named ".NAME.cprof-tmp.PID.RANDOM" beside NAME.  One
 * left behind by a writer that died (its PID no longer alive; a regular
 * file owned by our effective uid) is removed the next time NAME is
 * written.  */
#ifndef CPROF_OUTPUT_H
#define CPROF_OUTPUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "cprof/profile.h"

struct cp_output;

/* How an output reaches its destination.  */
enum cp_output_kind {
	CP_OUTPUT_STDOUT,  /* standard output, as it is */
	CP_OUTPUT_REPLACE, /* a temporary renamed into place at commit */
	CP_OUTPUT_DIRECT,  /* written in place: what is written is gone */
};

/* Open PATH for writing ("-" or NULL: standard output), following the
 * rules above.  A temporary is created (or the device, FIFO or socket
 * opened) now, so an unwritable destination is reported before any work
 * is done.  Returns 0; -CP_E_INVAL when PATH is refused (a directory, a
 * block device, a link that is not followed: bad input); -CP_E_SYS when
 * the system failed (errno set); -CP_E_NOMEM.  On failure ERROR (ERROR_SIZE
 * bytes; may be 0) holds one line saying what happened and what to do,
 * naming PATH, without a trailing newline.  */
int cp_output_open(const char *path, struct cp_output **out, char *error,
		   size_t error_size);

/* The stream to write to; borrowed.  */
FILE *cp_output_stream(struct cp_output *out);

/* The destination as given ("-" for standard output).  Borrowed, valid
 * until OUT is committed or aborted.  */
const char *cp_output_path(const struct cp_output *out);

/* How OUT is written: a caller that may still fail after writing (and
 * wants nothing to reach the reader then) spools when it is not
 * CP_OUTPUT_REPLACE.  */
enum cp_output_kind cp_output_kind(const struct cp_output *out);

/* Finish OUT: flush; for CP_OUTPUT_REPLACE also sync and rename the
 * temporary into place (refused when the destination has meanwhile become
 * something other than a regular file: errno EEXIST); for
 * CP_OUTPUT_DIRECT close.  Frees OUT.  Returns 0 or -CP_E_SYS with errno
 * saying why (ENOSPC, EPIPE, ...); the temporary is removed then.  */
int cp_output_commit(struct cp_output *out);

/* Give up OUT: remove the temporary (bytes already written to a device,
 * FIFO or standard output stay written).  Frees OUT.  NULL is fine.  */
void cp_output_abort(struct cp_output *out);

struct cp_folded_options {
	bool threads;   /* begin each stack with a "TID name" frame */
	bool lines;     /* append " (file:line)" to frames with a position */
	bool no_inline; /* leave inlined frames out (fold into the caller) */
	size_t max_depth; /* frames kept per stack, innermost first; 0: all */
};

/* The first line of folded output whose counts are not samples: the tag,
 * then the sample type and unit ("# cprof sample_type: inuse_space
 * bytes").  FlameGraph's flamegraph.pl skips it (a line without a count;
 * it says "Ignored 1 lines with invalid format"), speedscope's importer
 * skips it; cp_read_folded reads it back.  */
#define CP_FOLDED_SAMPLE_TYPE_TAG "# cprof sample_type:"

/* Write PROFILE as folded stacks: one line per distinct stack, root
 * first, frames joined by ';', a space and the count; sorted by stack text.
 * Inlined frames carry the FlameGraph suffix "_[i]".  When the counts are
 * not samples/count, a first line CP_FOLDED_SAMPLE_TYPE_TAG " TYPE UNIT"
 * says what they weigh.  Returns 0, -CP_E_NOMEM or -CP_E_SYS.  */
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
	const char *unit;       /* the word for the counts; NULL: the
				 * profile's (cp_sample_type_word) */
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
 * (profile.proto).  The sample types come from the meta: samples/count
 * with a frequency give samples/count and cpu/nanoseconds (wall with a
 * time_type "wall"; the count times 1e9 / frequency), period_type the
 * latter; a profile with value types (heap) one value per type, the
 * last the default; any other its count type alone.  Locations are leaf
 * first, inlined frames as extra lines (caller last); each sample carries
 * thread_id and thread_name labels.  Returns 0 or a -CP_E_* code.  */
int cp_write_pprof(const struct cp_profile *profile, FILE *stream);

/* ------------------------------------------------------ speedscope */

/* Write PROFILE in speedscope's file format
 * (https://www.speedscope.app/file-format-schema.json): one "sampled"
 * profile per thread, shared frames, each thread's stacks sorted (an
 * aggregated profile has no time order).  Values carry their unit:
 * samples/count with a frequency in nanoseconds, the count times the
 * sampling period rounded to whole nanoseconds (as cp_write_pprof); a
 * count type in bytes (or nanoseconds) as it is; other counts "none".
 * NAME names the file.  Returns 0 or a -CP_E_* code.  */
int cp_write_speedscope(const struct cp_profile *profile, const char *name,
			FILE *stream);

/* The samples of a run in the order they were taken, for a speedscope
 * file that keeps it (what py-spy writes: the "time order" view then
 * shows what each thread did when).  A sample repeating its thread's
 * previous stack is added to it (speedscope draws the two as one):
 * memory grows with the changes of stack, not with the samples.  */
struct cp_speedscope_log;

/* A new empty log into *LOG.  Returns 0 or -CP_E_NOMEM.  */
int cp_speedscope_log_new(struct cp_speedscope_log **log);

/* Append a sample of thread TID with stack STACK (a stack id of the
 * profile the log will be written with) that counts WEIGHT in it (0: it
 * is left out).  Returns 0 or -CP_E_NOMEM (the sample is lost).  */
int cp_speedscope_log_add(struct cp_speedscope_log *log, pid_t tid,
			  uint32_t stack, uint64_t weight);

/* NULL is fine.  */
void cp_speedscope_log_free(struct cp_speedscope_log *log);

/* Write LOG's samples in speedscope's format, as cp_write_speedscope()
 * does PROFILE's, but each thread's "sampled" profile in time order.
 * PROFILE gives the frames, the unit and the thread names.  Returns 0 or
 * a -CP_E_* code.  */
int cp_write_speedscope_log(const struct cp_profile *profile,
			    const char *name,
			    const struct cp_speedscope_log *log, FILE *stream);

/* ---------------------------------------------------- folded input */

/* Read folded stacks (FlameGraph's format: frames joined by ';', then the
 * count after the last run of whitespace; decimal counts allowed and
 * rounded) from STREAM into a new profile; a first line
 * CP_FOLDED_SAMPLE_TYPE_TAG " TYPE UNIT" sets what the counts weigh
 * (without it they are samples/count); other lines beginning with '#'
 * are skipped.  NAME is used in messages.  On
 * malformed input returns -CP_E_PARSE with "NAME:LINE: what" in ERROR;
 * empty input is -CP_E_PARSE too ("NAME: no samples").  A leading frame
 * "TID name" written by --threads is kept as an ordinary frame.  */
int cp_read_folded(FILE *stream, const char *name, struct cp_profile **out,
		   char *error, size_t error_size);

#endif
