/* The top-functions report: which functions a profile's samples were in
 * (self: the function was running, the leaf of the stack; total: it was
 * anywhere on the stack, counted once per stack even when it recurses),
 * as data and as the text `cprof report` prints.  Functions are the
 * names of the profile's lines: every line of a location counts, so an
 * inlined function is a function of its own.  The weight of a sample is
 * its count, in what the profile's meta says its counts weigh
 * (count_type: samples, bytes, allocations, ...).  */
#ifndef CPROF_REPORT_H
#define CPROF_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct cp_profile;

/* One function of a report.  */
struct cp_report_function {
	uint32_t function; /* string id of its name in the profile */
	const char *name;  /* borrowed from the profile */
	uint64_t self;     /* weight of the samples with it as the leaf */
	uint64_t total;    /* weight of the samples with it on the stack */
};

/* The functions of PROFILE with a total above 0, sorted by self weight
 * (then total, then name; the order the first table prints), into
 * *FUNCTIONS (the caller frees it; NULL when there are none) and their
 * number into *N.  Returns 0 or -CP_E_NOMEM.  */
int cp_report_functions(const struct cp_profile *profile,
			struct cp_report_function **functions, size_t *n);

struct cp_report_options {
	size_t top;       /* functions in each table; 0: all */
	const char *name; /* the profile's name on the first line; NULL:
			   * "profile" */
};

/* Write the report of PROFILE to OUT: a line
 * "NAME: TOTAL UNIT, STACKS stacks, FUNCTIONS functions", then the top
 * functions by self weight and by total weight, each with its share of
 * the profile's total.  OPTIONS may be NULL (all functions).  Returns 0,
 * -CP_E_NOMEM or -CP_E_SYS (writing failed, errno set).  */
int cp_report_write(const struct cp_profile *profile,
		    const struct cp_report_options *options, FILE *out);

#endif
