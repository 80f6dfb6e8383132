/* The difference of two profiles (include/cprof/diff.h).  Stacks are
 * compared by their folded text, as cp_write_folded() renders them: two
 * stacks are the same when their names are, whatever their locations and
 * threads.  */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cprof/diff.h"
#include "cprof/error.h"
#include "cprof/output.h"
#include "cprof/profile.h"
#include "util/grow.h"

struct cp_diff {
	struct cp_profile *texts;    /* the stacks' text, interned */
	struct cp_diff_stack *stacks;
	size_t nstacks, cap;
};

/* Add the weight of every sample of PROFILE to the stack of its text in
 * D (BEFORE or AFTER, by SIDE).  */
static int add_profile(struct cp_diff *d, const struct cp_profile *profile,
		       int side)
{
	char *buf = NULL;
	size_t buf_cap = 0;
	size_t nsamples;
	const struct cp_sample *samples = cp_profile_samples(profile, &nsamples);
	int rc = 0;
	for (size_t i = 0; i < nsamples && rc == 0; i++) {
		if (samples[i].count == 0)
			continue;
		ssize_t len = cp_render_stack(profile, samples[i].stack, NULL,
					      &buf, &buf_cap);
		if (len < 0) {
			rc = (int)len;
			break;
		}
		uint32_t id = cp_profile_intern(d->texts, buf, (size_t)len);
		if (id == UINT32_MAX) {
			rc = -CP_E_NOMEM;
			break;
		}
		/* Ids are dense and grow by one for each new text.  */
		if (!cp_grow((void **)&d->stacks, &d->cap, (size_t)id + 1,
			     sizeof(*d->stacks), 256)) {
			rc = -CP_E_NOMEM;
			break;
		}
		while (d->nstacks <= id)
			d->stacks[d->nstacks++] = (struct cp_diff_stack){0};
		if (side == 0)
			d->stacks[id].before += samples[i].count;
		else
			d->stacks[id].after += samples[i].count;
	}
	free(buf);
	return rc;
}

static int by_text(const void *a, const void *b)
{
	const struct cp_diff_stack *x = a, *y = b;
	return strcmp(x->stack, y->stack);
}

int cp_diff_new(const struct cp_profile *before,
		const struct cp_profile *after, bool normalize,
		struct cp_diff **out)
{
	*out = NULL;
	struct cp_diff *d = calloc(1, sizeof(*d));
	if (!d)
		return -CP_E_NOMEM;
	d->texts = cp_profile_new();
	int rc = d->texts ? 0 : -CP_E_NOMEM;
	if (rc == 0)
		rc = add_profile(d, before, 0);
	if (rc == 0)
		rc = add_profile(d, after, 1);
	if (rc < 0) {
		cp_diff_free(d);
		return rc;
	}
	/* The texts are where they stay once all are interned.  The empty
	 * text has id 0 whether or not a stack was empty: keep only the
	 * stacks that were seen.  */
	size_t kept = 0;
	for (size_t i = 0; i < d->nstacks; i++)
		d->stacks[i].stack = cp_profile_string(d->texts, (uint32_t)i);
	for (size_t i = 0; i < d->nstacks; i++)
		if (d->stacks[i].before || d->stacks[i].after)
			d->stacks[kept++] = d->stacks[i];
	d->nstacks = kept;
	if (kept)
		qsort(d->stacks, kept, sizeof(*d->stacks), by_text);
	uint64_t total_before = cp_profile_total(before);
	uint64_t total_after = cp_profile_total(after);
	for (size_t i = 0; normalize && total_before > 0 && i < kept; i++) {
		unsigned __int128 scaled =
			((unsigned __int128)d->stacks[i].before * total_after *
				 2 +
			 total_before) /
			((unsigned __int128)total_before * 2);
		d->stacks[i].before =
			scaled > UINT64_MAX ? UINT64_MAX : (uint64_t)scaled;
	}
	*out = d;
	return 0;
}

const struct cp_diff_stack *cp_diff_stacks(const struct cp_diff *d, size_t *n)
{
	*n = d->nstacks;
	return d->stacks;
}

int cp_diff_write_folded(const struct cp_diff *d, FILE *stream)
{
	for (size_t i = 0; i < d->nstacks; i++)
		if (fprintf(stream, "%s %" PRIu64 " %" PRIu64 "\n",
			    d->stacks[i].stack, d->stacks[i].before,
			    d->stacks[i].after) < 0)
			return -CP_E_SYS;
	return 0;
}

void cp_diff_free(struct cp_diff *d)
{
	if (!d)
		return;
	cp_profile_free(d->texts);
	free(d->stacks);
	free(d);
}

/* ------------------------------------------------------ diff formats */

static int write_svg(const struct cp_profile *before,
		     const struct cp_profile *after,
		     const struct cp_diff_options *o, FILE *out)
{
	struct cp_svg_options so = o->svg;
	if (!so.title)
		so.title = so.inverted ? "Differential Icicle Graph"
				       : "Differential Flame Graph";
	so.before = before;
	so.normalize = o->normalize;
	return cp_write_svg(after, &so, out);
}

static int write_folded(const struct cp_profile *before,
			const struct cp_profile *after,
			const struct cp_diff_options *o, FILE *out)
{
	struct cp_diff *d;
	int rc = cp_diff_new(before, after, o->normalize, &d);
	if (rc == 0)
		rc = cp_diff_write_folded(d, out);
	cp_diff_free(d);
	return rc;
}

static const struct cp_diff_format diff_formats[] = {
	{"svg", {".svg", NULL},
	 "a differential flame graph: widths from AFTER, red where a frame grew, blue where it shrank",
	 write_svg},
	{"folded", {".folded", NULL},
	 "one line \"stack BEFORE AFTER\" per stack of either profile (difffolded.pl)",
	 write_folded},
};

#define NDIFF_FORMATS (sizeof(diff_formats) / sizeof(diff_formats[0]))

const struct cp_diff_format *cp_diff_formats(size_t *n)
{
	*n = NDIFF_FORMATS;
	return diff_formats;
}

const struct cp_diff_format *cp_diff_format_find(const char *name)
{
	for (size_t i = 0; name && i < NDIFF_FORMATS; i++)
		if (strcmp(diff_formats[i].name, name) == 0)
			return &diff_formats[i];
	return NULL;
}

const struct cp_diff_format *cp_diff_format_for_path(const char *path)
{
	size_t n = path ? strlen(path) : 0;
	for (size_t i = 0; n && i < NDIFF_FORMATS; i++)
		for (const char *const *suffix = diff_formats[i].suffixes;
		     *suffix; suffix++) {
			size_t m = strlen(*suffix);
			if (n > m && strcasecmp(path + n - m, *suffix) == 0)
				return &diff_formats[i];
		}
	return NULL;
}
