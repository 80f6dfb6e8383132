/* The live view's data (top_data.c), apart from its screen (top.c): the
 * functions and threads seen, and per thread and function the samples of
 * the intervals taken, folded from the session's profile windows into
 * tables the screen reads.  Internal to cprof-attach.  */
#ifndef CPROF_CLI_TOP_INT_H
#define CPROF_CLI_TOP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cprof/profile.h"
#include "cprof/sampler.h"
#include "util/hashidx.h"

#include "top.h"

/* The cell of a thread that holds its sample count (in SELF).  */
#define THREAD_TOTAL UINT32_MAX


/* A function: its name and the basename of its module.  */
struct function {
	char *name;
	char *module;
};

/* Samples of one function on one thread: SELF with it as the leaf,
 * TOTAL with it anywhere on the stack (once per stack).  */
struct cell {
	pid_t tid;
	uint32_t function;
	uint64_t self, total;
};

/* Cells by (thread, function), and the samples they came from.  */
struct table {
	struct cell *cells;
	size_t n, cap;
	struct cp_hashidx index;
	uint64_t samples;
};

struct thread {
	pid_t tid;
	char name[16];
};

/* One line of the table on screen.  */
struct row {
	uint32_t function;
	uint64_t self, total;
};

enum sort_key { SORT_SELF, SORT_TOTAL, SORT_NAME };

struct top {
	struct cp_session *session;
	const struct top_config *config;
	pid_t pid;
	char target[256];          /* the program: its command's basename */
	/* Every function seen, by (name, module).  */
	struct function *functions;
	size_t nfunctions, functions_cap;
	struct cp_hashidx function_index;
	/* Per function, the last sample that counted it in a total + 1 (a
	 * recursive function counts once per stack).  */
	uint64_t *counted;
	size_t counted_cap;
	uint64_t sample_serial;
	struct table since_start;  /* what the display shows as accumulated */
	struct table last;         /* the last interval shown */
	struct table held;         /* intervals taken while paused */
	struct table newest;       /* the last interval taken */
	double newest_seconds;     /* its length */
	struct thread *threads;    /* sorted by tid */
	size_t nthreads;
	pid_t shown_tid;           /* the thread filter; 0: all threads */
	enum sort_key sort;
	bool accumulated;          /* since the start, or the last interval */
	bool paused;
	bool help;
	bool typing;               /* a thread id is being typed (T) */
	char tid_text[12];
	bool exited;               /* the target is gone */
	size_t scroll;             /* first row shown */
	struct row *rows;
	size_t nrows, rows_cap;
	uint64_t start_ns, window_start_ns; /* CLOCK_MONOTONIC ns */
	struct cp_sampler_options sample_options; /* for each start */
	struct cp_sampler_stats stats;  /* of the sampling run, at the last take */
};

/* Fold WINDOW (the profile of one interval, SECONDS long) in: into the
 * tables shown, or, while the display is paused, into those held for
 * later.  Returns 0 or -CP_E_NOMEM.  */
int top_add_window(struct top *top, const struct cp_profile *window,
		   double seconds);

/* The display goes on (not paused): what was held joins the totals, and
 * the last interval shown is the newest.  Returns 0 or -CP_E_NOMEM.  */
int top_resume(struct top *top);

/* TOP->rows: the functions of the table shown (since the start or the
 * last interval) for the thread filter, in the sort order; *SAMPLES
 * gets what their shares are of.  Returns 0 or -CP_E_NOMEM.  */
int top_make_rows(struct top *top, uint64_t *samples);

/* The name of thread TID ("" when unknown); borrowed.  */
const char *top_thread_name(const struct top *top, pid_t tid);

/* Step the thread filter by DIR (+1 next, -1 previous) through all
 * threads, then each thread by tid.  */
void top_cycle_thread(struct top *top, int dir);

/* Free what TOP holds (not TOP).  */
void top_free(struct top *top);

#endif
