/* The live view's data: functions, threads and the tables of their
 * samples, folded from the profile of each interval (top_int.h).  No
 * screen here: the unit tests drive it with profiles made by hand.  */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/profile.h"
#include "util/hashidx.h"

#include "top_int.h"

/* ------------------------------------------------------------- tables */

struct cell_key {
	const struct table *table;
	pid_t tid;
	uint32_t function;
};

static bool cell_eq(const void *ctx, uint32_t id)
{
	const struct cell_key *k = ctx;
	const struct cell *c = &k->table->cells[id];
	return c->tid == k->tid && c->function == k->function;
}

static uint64_t cell_hash(pid_t tid, uint32_t function)
{
	return cp_hash_u64(((uint64_t)(uint32_t)tid << 32) | function);
}

static int table_add(struct table *t, pid_t tid, uint32_t function,
		     uint64_t self, uint64_t total)
{
	struct cell_key key = {t, tid, function};
	uint64_t hash = cell_hash(tid, function);
	uint32_t id = cp_hashidx_find(&t->index, hash, cell_eq, &key);
	if (id == UINT32_MAX) {
		if (t->n == t->cap) {
			size_t cap = t->cap ? 2 * t->cap : 256;
			struct cell *grown =
				realloc(t->cells, cap * sizeof(*grown));
			if (!grown)
				return -CP_E_NOMEM;
			t->cells = grown;
			t->cap = cap;
		}
		id = (uint32_t)t->n;
		if (!cp_hashidx_insert(&t->index, hash, id))
			return -CP_E_NOMEM;
		t->cells[t->n++] = (struct cell){tid, function, 0, 0};
	}
	t->cells[id].self += self;
	t->cells[id].total += total;
	return 0;
}

static uint64_t table_thread_samples(const struct table *t, pid_t tid)
{
	struct cell_key key = {t, tid, THREAD_TOTAL};
	uint32_t id = cp_hashidx_find(&t->index, cell_hash(tid, THREAD_TOTAL),
				      cell_eq, &key);
	return id == UINT32_MAX ? 0 : t->cells[id].self;
}

static void table_clear(struct table *t)
{
	cp_hashidx_free(&t->index);
	t->n = 0;
	t->samples = 0;
}

static void table_free(struct table *t)
{
	table_clear(t);
	free(t->cells);
	t->cells = NULL;
	t->cap = 0;
}

/* Add every count of FROM to INTO.  */
static int table_merge(struct table *into, const struct table *from)
{
	for (size_t i = 0; i < from->n; i++) {
		const struct cell *c = &from->cells[i];
		int rc = table_add(into, c->tid, c->function, c->self,
				   c->total);
		if (rc < 0)
			return rc;
	}
	into->samples += from->samples;
	return 0;
}

/* INTO becomes a copy of FROM.  */
static int table_copy(struct table *into, const struct table *from)
{
	table_clear(into);
	return table_merge(into, from);
}

/* ---------------------------------------------------------- functions */

struct function_key {
	const struct top *top;
	const char *name, *module;
};

static bool function_eq(const void *ctx, uint32_t id)
{
	const struct function_key *k = ctx;
	const struct function *f = &k->top->functions[id];
	return strcmp(f->name, k->name) == 0 &&
	       strcmp(f->module, k->module) == 0;
}

/* The id of function NAME of MODULE, added when new; UINT32_MAX when
 * out of memory.  */
static uint32_t function_id(struct top *top, const char *name,
			    const char *module)
{
	struct function_key key = {top, name, module};
	uint64_t hash = cp_hash_bytes(name, strlen(name),
				      cp_hash_bytes(module, strlen(module), 0));
	uint32_t id = cp_hashidx_find(&top->function_index, hash, function_eq,
				      &key);
	if (id != UINT32_MAX)
		return id;
	if (top->nfunctions == top->functions_cap) {
		size_t cap = top->functions_cap ? 2 * top->functions_cap : 256;
		struct function *grown =
			realloc(top->functions, cap * sizeof(*grown));
		if (!grown)
			return UINT32_MAX;
		top->functions = grown;
		top->functions_cap = cap;
	}
	struct function f = {strdup(name), strdup(module)};
	if (!f.name || !f.module) {
		free(f.name);
		free(f.module);
		return UINT32_MAX;
	}
	id = (uint32_t)top->nfunctions;
	if (!cp_hashidx_insert(&top->function_index, hash, id)) {
		free(f.name);
		free(f.module);
		return UINT32_MAX;
	}
	top->functions[top->nfunctions++] = f;
	return id;
}

/* Remember thread TID's NAME (threads sorted by tid).  */
static int thread_seen(struct top *top, pid_t tid, const char *name)
{
	size_t i = 0;
	while (i < top->nthreads && top->threads[i].tid < tid)
		i++;
	if (i == top->nthreads || top->threads[i].tid != tid) {
		struct thread *grown = realloc(
			top->threads, (top->nthreads + 1) * sizeof(*grown));
		if (!grown)
			return -CP_E_NOMEM;
		top->threads = grown;
		memmove(&grown[i + 1], &grown[i],
			(top->nthreads - i) * sizeof(*grown));
		top->nthreads++;
		grown[i].tid = tid;
		grown[i].name[0] = '\0';
	}
	if (name)
		snprintf(top->threads[i].name, sizeof(top->threads[i].name),
			 "%s", name);
	return 0;
}

/* Fold the samples of PROFILE (one interval) into INTO: per thread, the
 * leaf function's self count, and once per stack the total count of
 * every function on it (every line of a location: an inlined function
 * is a function of its own, as in cprof report).  */
static int fold_window(struct top *top, const struct cp_profile *profile,
		       struct table *into)
{
	int rc = -CP_E_NOMEM;
	uint32_t nlocs = cp_profile_location_count(profile);
	/* The functions of each location's lines, innermost first.  */
	size_t *first = calloc((size_t)nlocs + 1, sizeof(*first));
	uint32_t *ids = NULL;
	size_t nids = 0, ids_cap = 0;
	if (!first)
		goto out;
	for (uint32_t i = 0; i < nlocs; i++) {
		const struct cp_location *loc = cp_profile_location(profile, i);
		first[i] = nids;
		const char *module =
			loc ? cp_profile_string(profile, loc->module) : "";
		for (uint32_t j = 0; loc && j < loc->nlines; j++) {
			if (nids == ids_cap) {
				ids_cap = ids_cap ? 2 * ids_cap : 256;
				uint32_t *grown =
					realloc(ids, ids_cap * sizeof(*grown));
				if (!grown)
					goto out;
				ids = grown;
			}
			const char *name = cp_profile_string(
				profile, loc->lines[j].function);
			uint32_t id = function_id(top, name ? name : "",
						  module ? module : "");
			if (id == UINT32_MAX)
				goto out;
			ids[nids++] = id;
		}
	}
	first[nlocs] = nids;
	if (top->counted_cap < top->nfunctions) {
		uint64_t *grown = realloc(top->counted, top->nfunctions *
							       sizeof(*grown));
		if (!grown)
			goto out;
		memset(grown + top->counted_cap, 0,
		       (top->nfunctions - top->counted_cap) * sizeof(*grown));
		top->counted = grown;
		top->counted_cap = top->nfunctions;
	}
	size_t nsamples;
	const struct cp_sample *samples = cp_profile_samples(profile, &nsamples);
	for (size_t i = 0; i < nsamples; i++) {
		const struct cp_sample *s = &samples[i];
		size_t depth;
		const uint32_t *locs = cp_profile_stack(profile, s->stack, &depth);
		uint64_t serial = ++top->sample_serial;
		bool leaf = true;
		for (size_t k = 0; k < depth; k++) {
			if (locs[k] >= nlocs)
				continue;
			for (size_t j = first[locs[k]]; j < first[locs[k] + 1];
			     j++) {
				uint32_t fn = ids[j];
				uint64_t self = leaf ? s->count : 0;
				leaf = false;
				if (top->counted[fn] == serial && !self)
					continue;
				bool once = top->counted[fn] != serial;
				top->counted[fn] = serial;
				if (table_add(into, s->tid, fn, self,
					      once ? s->count : 0) < 0)
					goto out;
			}
		}
		if (table_add(into, s->tid, THREAD_TOTAL, s->count, 0) < 0 ||
		    thread_seen(top, s->tid, NULL) < 0)
			goto out;
		into->samples += s->count;
	}
	size_t nthreads;
	const pid_t *tids = cp_profile_threads(profile, &nthreads);
	for (size_t i = 0; i < nthreads; i++)
		if (thread_seen(top, tids[i],
				cp_profile_thread_name(profile, tids[i])) < 0)
			goto out;
	rc = 0;
out:
	free(first);
	free(ids);
	return rc;
}

int top_add_window(struct top *top, const struct cp_profile *window,
		   double seconds)
{
	table_clear(&top->newest);
	int rc = fold_window(top, window, &top->newest);
	if (rc < 0)
		return rc;
	top->newest_seconds = seconds;
	if (top->paused)
		return table_merge(&top->held, &top->newest);
	rc = table_merge(&top->since_start, &top->newest);
	if (rc == 0)
		rc = table_copy(&top->last, &top->newest);
	return rc;
}

/* The display goes on: what was held joins the totals.  */
int top_resume(struct top *top)
{
	top->paused = false;
	int rc = table_merge(&top->since_start, &top->held);
	table_clear(&top->held);
	if (rc == 0)
		rc = table_copy(&top->last, &top->newest);
	return rc;
}

/* ---------------------------------------------------------------- rows */

static const struct top *sorting; /* qsort has no context argument */

static int row_order(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	const char *xn = sorting->functions[x->function].name;
	const char *yn = sorting->functions[y->function].name;
	int by_name = strcmp(xn, yn);
	switch (sorting->sort) {
	case SORT_NAME:
		if (by_name)
			return by_name;
		break;
	case SORT_TOTAL:
		if (x->total != y->total)
			return x->total < y->total ? 1 : -1;
		if (x->self != y->self)
			return x->self < y->self ? 1 : -1;
		break;
	case SORT_SELF:
		if (x->self != y->self)
			return x->self < y->self ? 1 : -1;
		if (x->total != y->total)
			return x->total < y->total ? 1 : -1;
		break;
	}
	if (by_name)
		return by_name;
	return x->function < y->function ? -1 : x->function > y->function;
}

/* The table shown now.  */
static const struct table *shown(const struct top *top)
{
	return top->accumulated ? &top->since_start : &top->last;
}

/* The rows of the shown table for the thread filter, sorted; *SAMPLES
 * gets what the percentages are of.  */
int top_make_rows(struct top *top, uint64_t *samples)
{
	const struct table *t = shown(top);
	*samples = top->shown_tid ? table_thread_samples(t, top->shown_tid)
				  : t->samples;
	/* Per function: its row + 1, 0 when it has none yet.  */
	size_t *row_of = calloc(top->nfunctions + 1, sizeof(*row_of));
	if (!row_of)
		return -CP_E_NOMEM;
	top->nrows = 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct cell *c = &t->cells[i];
		if (c->function == THREAD_TOTAL ||
		    (top->shown_tid && c->tid != top->shown_tid))
			continue;
		if (!row_of[c->function]) {
			if (top->nrows == top->rows_cap) {
				size_t cap = top->rows_cap ? 2 * top->rows_cap
							   : 256;
				struct row *grown =
					realloc(top->rows, cap * sizeof(*grown));
				if (!grown) {
					free(row_of);
					return -CP_E_NOMEM;
				}
				top->rows = grown;
				top->rows_cap = cap;
			}
			top->rows[top->nrows] =
				(struct row){c->function, 0, 0};
			row_of[c->function] = ++top->nrows;
		}
		struct row *r = &top->rows[row_of[c->function] - 1];
		r->self += c->self;
		r->total += c->total;
	}
	free(row_of);
	sorting = top;
	if (top->nrows > 1)
		qsort(top->rows, top->nrows, sizeof(*top->rows), row_order);
	return 0;
}

/* ------------------------------------------------------------ threads */

const char *top_thread_name(const struct top *top, pid_t tid)
{
	for (size_t i = 0; i < top->nthreads; i++)
		if (top->threads[i].tid == tid)
			return top->threads[i].name;
	return "";
}

/* Step the thread filter by DIR (+1 next, -1 previous) through all
 * threads, then each thread by tid.  */
void top_cycle_thread(struct top *top, int dir)
{
	size_t n = top->nthreads;
	if (n == 0)
		return;
	/* Positions 0 (all), 1..n (threads[0..n-1]).  */
	size_t pos = 0;
	for (size_t i = 0; i < n; i++)
		if (top->threads[i].tid == top->shown_tid)
			pos = i + 1;
	pos = (pos + (dir > 0 ? 1 : n)) % (n + 1);
	top->shown_tid = pos ? top->threads[pos - 1].tid : 0;
	top->scroll = 0;
}

void top_free(struct top *top)
{
	for (size_t i = 0; i < top->nfunctions; i++) {
		free(top->functions[i].name);
		free(top->functions[i].module);
	}
	free(top->functions);
	cp_hashidx_free(&top->function_index);
	free(top->counted);
	table_free(&top->since_start);
	table_free(&top->last);
	table_free(&top->held);
	table_free(&top->newest);
	free(top->threads);
	free(top->rows);
}
