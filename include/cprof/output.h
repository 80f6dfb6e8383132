/* Writers: profile -> bytes.  Writers never call ptrace.
 *
 * Output files are written to a temporary file beside the destination and
 * renamed into place only when complete, so a failure never leaves a
 * half-written file.  */
#ifndef CPROF_OUTPUT_H
#define CPROF_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>

#include "cprof/profile.h"

struct cp_output;

/* Open PATH for writing ("-" or NULL: standard output).  The file is
 * created as a temporary now, so an unwritable destination is reported
 * before any work is done.  Returns 0 or -CP_E_SYS (errno set).  */
int cp_output_open(const char *path, struct cp_output **out);

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

#endif
