/* The top-functions report (include/cprof/report.h).  */
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/profile.h"
#include "cprof/report.h"

static int by_self(const void *a, const void *b)
{
	const struct cp_report_function *x = a, *y = b;
	if (x->self != y->self)
		return x->self < y->self ? 1 : -1;
	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	return strcmp(x->name, y->name);
}

static int by_total(const void *a, const void *b)
{
	const struct cp_report_function *x = a, *y = b;
	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	if (x->self != y->self)
		return x->self < y->self ? 1 : -1;
	return strcmp(x->name, y->name);
}

int cp_report_functions(const struct cp_profile *profile,
			struct cp_report_function **functions, size_t *n)
{
	*functions = NULL;
	*n = 0;
	/* Function string ids are below the largest one any line uses.  */
	uint32_t nlocs = cp_profile_location_count(profile);
	uint32_t max_fn = 0;
	for (uint32_t i = 0; i < nlocs; i++) {
		const struct cp_location *loc = cp_profile_location(profile, i);
		for (uint32_t j = 0; loc && j < loc->nlines; j++)
			if (loc->lines[j].function > max_fn)
				max_fn = loc->lines[j].function;
	}
	size_t nfn = (size_t)max_fn + 1;
	struct cp_report_function *by_id = calloc(nfn, sizeof(*by_id));
	/* The last sample that counted each function in its total, + 1: a
	 * recursive function counts once per stack.  */
	size_t *counted = calloc(nfn, sizeof(*counted));
	struct cp_report_function *stats = NULL;
	int rc = -CP_E_NOMEM;
	if (!by_id || !counted)
		goto out;

	size_t nsamples;
	const struct cp_sample *samples = cp_profile_samples(profile, &nsamples);
	for (size_t i = 0; i < nsamples; i++) {
		size_t depth;
		const uint32_t *locs =
			cp_profile_stack(profile, samples[i].stack, &depth);
		bool leaf = true;
		for (size_t k = 0; k < depth; k++) {
			const struct cp_location *loc =
				cp_profile_location(profile, locs[k]);
			for (uint32_t j = 0; loc && j < loc->nlines; j++) {
				uint32_t fn = loc->lines[j].function;
				if (leaf)
					by_id[fn].self += samples[i].count;
				leaf = false;
				if (counted[fn] != i + 1) {
					counted[fn] = i + 1;
					by_id[fn].total += samples[i].count;
				}
			}
		}
	}
	size_t nfunctions = 0;
	for (size_t fn = 0; fn < nfn; fn++)
		nfunctions += by_id[fn].total > 0;
	rc = 0;
	if (nfunctions == 0)
		goto out;
	stats = malloc(nfunctions * sizeof(*stats));
	if (!stats) {
		rc = -CP_E_NOMEM;
		goto out;
	}
	nfunctions = 0;
	for (size_t fn = 0; fn < nfn; fn++) {
		if (by_id[fn].total == 0)
			continue;
		stats[nfunctions] = by_id[fn];
		stats[nfunctions].function = (uint32_t)fn;
		stats[nfunctions].name =
			cp_profile_string(profile, (uint32_t)fn);
		nfunctions++;
	}
	qsort(stats, nfunctions, sizeof(*stats), by_self);
	*functions = stats;
	*n = nfunctions;
out:
	free(by_id);
	free(counted);
	return rc;
}

static int digits(uint64_t v)
{
	int n = 1;
	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

static void print_table(FILE *stream, const struct cp_report_function *stats,
			size_t shown, size_t nfunctions, bool self_first,
			uint64_t total, const char *unit)
{
	int w = digits(total);
	if (w < 5)
		w = 5;
	fprintf(stream, "Top %zu of %zu functions by %s %s:\n", shown,
		nfunctions, self_first ? "self" : "total", unit);
	fprintf(stream, "%*s %7s  %*s %7s  %s\n", w,
		self_first ? "self" : "total", self_first ? "self%" : "total%",
		w, self_first ? "total" : "self", self_first ? "total%" : "self%",
		"function");
	for (size_t i = 0; i < shown; i++) {
		const struct cp_report_function *s = &stats[i];
		uint64_t first = self_first ? s->self : s->total;
		uint64_t second = self_first ? s->total : s->self;
		fprintf(stream, "%*" PRIu64 " %6.2f%%  %*" PRIu64 " %6.2f%%  %s\n",
			w, first, 100.0 * (double)first / (double)total, w,
			second, 100.0 * (double)second / (double)total,
			s->name);
	}
}

/* The word for what PROFILE's counts weigh: samples, bytes,
 * allocations, ...  */
static const char *unit_of(const struct cp_profile *profile)
{
	return cp_sample_type_word(&cp_profile_meta_const(profile)->count_type);
}

int cp_report_write(const struct cp_profile *profile,
		    const struct cp_report_options *options, FILE *stream)
{
	struct cp_report_function *stats;
	size_t nfunctions;
	int rc = cp_report_functions(profile, &stats, &nfunctions);
	if (rc < 0)
		return rc;
	size_t top = options ? options->top : 0;
	const char *name = options && options->name ? options->name
						    : "profile";
	size_t nsamples;
	cp_profile_samples(profile, &nsamples);
	uint64_t total = cp_profile_total(profile);
	const char *unit = unit_of(profile);
	size_t shown = top == 0 || top > nfunctions ? nfunctions : top;
	fprintf(stream, "%s: %" PRIu64 " %s, %zu stacks, %zu functions\n\n",
		name, total, unit, nsamples, nfunctions);
	print_table(stream, stats, shown, nfunctions, true, total, unit);
	fputc('\n', stream);
	if (nfunctions > 0)
		qsort(stats, nfunctions, sizeof(*stats), by_total);
	print_table(stream, stats, shown, nfunctions, false, total, unit);
	free(stats);
	return ferror(stream) ? -CP_E_SYS : 0;
}
