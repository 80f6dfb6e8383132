/* The difference of two profiles, stack by stack: for every stack of
 * either profile (its frames' names joined by ';', root first, as folded
 * text writes it; threads merged), its weight before and after.  The
 * differential flame graph is cp_write_svg() with
 * cp_svg_options.before; this is the same comparison as data and as
 * folded text ("stack BEFORE AFTER", what FlameGraph's difffolded.pl
 * writes).  */
#ifndef CPROF_DIFF_H
#define CPROF_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cprof/output.h"

struct cp_profile;

/* One stack of a diff.  */
struct cp_diff_stack {
	const char *stack; /* frames joined by ';', root first; borrowed,
			    * valid until cp_diff_free() */
	uint64_t before;   /* its weight in BEFORE (scaled with NORMALIZE) */
	uint64_t after;    /* its weight in AFTER */
};

struct cp_diff;

/* Compare BEFORE with AFTER into *DIFF: one entry per stack of either,
 * sorted by stack text in byte order (0 where a profile lacks the
 * stack).  With NORMALIZE each BEFORE weight is scaled to AFTER's total
 * (before * total_after / total_before, rounded half up; unchanged when
 * BEFORE's total is 0).  Nothing of the profiles is kept.  Returns 0 or
 * -CP_E_NOMEM.  Free with cp_diff_free().  */
int cp_diff_new(const struct cp_profile *before,
		const struct cp_profile *after, bool normalize,
		struct cp_diff **diff);

/* The stacks of DIFF, *N set to their number; borrowed, valid until
 * cp_diff_free().  */
const struct cp_diff_stack *cp_diff_stacks(const struct cp_diff *diff,
					   size_t *n);

/* Write DIFF as folded text, one line "STACK BEFORE AFTER" per stack in
 * its order.  Returns 0 or -CP_E_SYS (errno set).  */
int cp_diff_write_folded(const struct cp_diff *diff, FILE *out);

void cp_diff_free(struct cp_diff *diff);

/* ------------------------------------------------------ diff formats */

struct cp_diff_options {
	bool normalize;              /* scale BEFORE to AFTER's total */
	/* svg: the graph's options (BEFORE and NORMALIZE are the diff's;
	 * a NULL title is "Differential Flame Graph", or "Differential
	 * Icicle Graph" inverted).  */
	struct cp_svg_options svg;
};

/* One way to write the difference of two profiles (cprof diff
 * --format).  */
struct cp_diff_format {
	const char *name;
	const char *suffixes[3];     /* picked by the output's name;
				      * NULL-terminated */
	const char *description;     /* one line for --help */
	/* Write the difference of BEFORE and AFTER to OUT.  Returns 0 or a
	 * -CP_E_* code (-CP_E_SYS with errno; svg: -CP_E_INVAL for an
	 * unknown palette).  */
	int (*write)(const struct cp_profile *before,
		     const struct cp_profile *after,
		     const struct cp_diff_options *options, FILE *out);
};

/* The diff formats, the default first; *N set.  Static.  */
const struct cp_diff_format *cp_diff_formats(size_t *n);

/* The diff format named NAME, or NULL.  */
const struct cp_diff_format *cp_diff_format_find(const char *name);

/* The diff format the suffix of PATH asks for (any case), or NULL when
 * PATH is NULL or says nothing.  */
const struct cp_diff_format *cp_diff_format_for_path(const char *path);

#endif
