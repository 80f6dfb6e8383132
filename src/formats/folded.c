/* The folded-stacks writer (Brendan Gregg's FlameGraph input format).  */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/output.h"
#include "formats/entries.h"

struct text {
	char *data;
	size_t len, cap;
};

static bool text_put(struct text *t, const char *s, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 256;
		while (cap < t->len + n + 1)
			cap *= 2;
		char *grown = realloc(t->data, cap);
		if (!grown)
			return false;
		t->data = grown;
		t->cap = cap;
	}
	memcpy(t->data + t->len, s, n);
	t->len += n;
	t->data[t->len] = '\0';
	return true;
}

static bool text_frame(struct text *t, const char *s)
{
	/* ';' separates frames and the last space separates the count, so a
	 * ';' inside a name would split it: FlameGraph's convention is ':'. */
	if (t->len > 0 && !text_put(t, ";", 1))
		return false;
	size_t start = t->len;
	if (!text_put(t, s, strlen(s)))
		return false;
	for (size_t i = start; i < t->len; i++)
		if (t->data[i] == ';' || t->data[i] == '\n')
			t->data[i] = ':';
	return true;
}

/* Render the stack of SAMPLE, root first, into T.  */
static bool render(const struct cp_profile *p, const struct cp_sample *sample,
		   const struct cp_folded_options *o, struct text *t)
{
	char buf[512];
	t->len = 0;
	if (o->threads) {
		const char *name = cp_profile_thread_name(p, sample->tid);
		snprintf(buf, sizeof(buf), "%d %s", (int)sample->tid,
			 name ? name : "");
		if (!text_frame(t, buf))
			return false;
	}
	size_t n;
	const uint32_t *locs = cp_profile_stack(p, sample->stack, &n);
	/* --max-depth keeps the innermost frames as printed (inlined calls
	 * count): skip the outermost ones beyond it.  */
	size_t skip = 0;
	if (o->max_depth) {
		size_t shown = 0;
		for (size_t i = 0; i < n; i++) {
			const struct cp_location *loc =
				cp_profile_location(p, locs[i]);
			for (uint32_t j = 0; loc && j < loc->nlines; j++)
				shown += !(loc->lines[j].inlined && o->no_inline);
		}
		skip = shown > o->max_depth ? shown - o->max_depth : 0;
	}
	for (size_t i = n; i-- > 0;) {
		const struct cp_location *loc = cp_profile_location(p, locs[i]);
		if (!loc)
			continue;
		for (uint32_t j = loc->nlines; j-- > 0;) {
			const struct cp_line *line = &loc->lines[j];
			if (line->inlined && o->no_inline)
				continue;
			if (skip > 0) {
				skip--;
				continue;
			}
			const char *fn = cp_profile_string(p, line->function);
			const char *file = cp_profile_string(p, line->file);
			int len;
			if (o->lines && *file && line->line > 0) {
				const char *base = strrchr(file, '/');
				len = snprintf(buf, sizeof(buf), "%s (%s:%d)%s",
					       fn, base ? base + 1 : file,
					       line->line,
					       line->inlined ? "_[i]" : "");
			} else {
				len = snprintf(buf, sizeof(buf), "%s%s", fn,
					       line->inlined ? "_[i]" : "");
			}
			if (len >= (int)sizeof(buf)) {
				/* A very long (C++) name: write it whole. */
				if (!text_frame(t, fn))
					return false;
				if (line->inlined && !text_put(t, "_[i]", 4))
					return false;
				continue;
			}
			if (!text_frame(t, buf))
				return false;
		}
	}
	return true;
}

ssize_t cp_render_stack(const struct cp_profile *p, uint32_t stack,
			const struct cp_folded_options *options, char **buf,
			size_t *cap)
{
	static const struct cp_folded_options defaults;
	struct cp_folded_options o = options ? *options : defaults;
	o.threads = false;
	struct cp_sample sample = {.tid = 0, .stack = stack, .count = 1};
	struct text t = {*buf, 0, *cap};
	bool ok = render(p, &sample, &o, &t);
	*buf = t.data;
	*cap = t.cap;
	if (!ok)
		return -CP_E_NOMEM;
	if (!t.data && !text_put(&t, "", 0))
		return -CP_E_NOMEM;
	*buf = t.data;
	*cap = t.cap;
	return (ssize_t)t.len;
}

struct line_count {
	uint32_t text; /* string id in the scratch profile */
	uint64_t count;
};

static int compare_lines(const void *a, const void *b, void *texts)
{
	const struct line_count *x = a, *y = b;
	return strcmp(cp_profile_string(texts, x->text),
		      cp_profile_string(texts, y->text));
}

int cp_write_folded(const struct cp_profile *p,
		    const struct cp_folded_options *options, FILE *stream)
{
	static const struct cp_folded_options defaults;
	const struct cp_folded_options *o = options ? options : &defaults;
	int rc = -CP_E_NOMEM;
	struct text t = {0};
	/* Different addresses (and threads) can fold to the same text: merge
	 * them through a scratch string table.  */
	struct cp_profile *texts = cp_profile_new();
	struct line_count *lines = NULL;
	size_t nlines = 0, cap = 0;
	size_t nsamples;
	const struct cp_sample *samples = cp_profile_samples(p, &nsamples);
	if (!texts)
		goto out;
	for (size_t i = 0; i < nsamples; i++) {
		if (samples[i].count == 0)
			continue;
		if (!render(p, &samples[i], o, &t))
			goto out;
		uint32_t id = cp_profile_intern(texts, t.data ? t.data : "",
						t.len);
		if (id == UINT32_MAX)
			goto out;
		/* Ids are dense and grow by one for each new text.  */
		if (id >= nlines) {
			if (nlines == cap) {
				cap = cap ? 2 * cap : 256;
				struct line_count *grown =
					realloc(lines, cap * sizeof(*grown));
				if (!grown)
					goto out;
				lines = grown;
			}
			while (nlines <= id) {
				lines[nlines].text = (uint32_t)nlines;
				lines[nlines].count = 0;
				nlines++;
			}
		}
		lines[id].count += samples[i].count;
	}
	if (nlines > 0)
		qsort_r(lines, nlines, sizeof(*lines), compare_lines, texts);
	rc = 0;
	/* Counts that are not samples say what they are, so a conversion
	 * (heap -> folded -> report) keeps their unit.  */
	const struct cp_profile_meta *meta = cp_profile_meta_const(p);
	if (!cp_sample_type_is(&meta->count_type, "samples", "count") &&
	    fprintf(stream, CP_FOLDED_SAMPLE_TYPE_TAG " %s %s\n",
		    meta->count_type.type, meta->count_type.unit) < 0)
		rc = -CP_E_SYS;
	for (size_t i = 0; i < nlines && rc == 0; i++) {
		if (lines[i].count == 0)
			continue;
		if (fprintf(stream, "%s %llu\n",
			    cp_profile_string(texts, lines[i].text),
			    (unsigned long long)lines[i].count) < 0) {
			rc = -CP_E_SYS;
			break;
		}
	}
out:
	free(t.data);
	free(lines);
	cp_profile_free(texts);
	return rc;
}

static int format_folded_write(const struct cp_format_input *in,
			       const struct cp_format_options *o, FILE *stream)
{
	struct cp_folded_options fo = o->folded;
	/* A heap site is not a thread's.  */
	if (in->kind == CP_FORMAT_HEAP)
		fo.threads = false;
	return cp_write_folded(in->profile, &fo, stream);
}

/* The format's entry in the registry (src/formats/registry.c).  */
const struct cp_format cp_format_folded = {
	.name = "folded",
	.suffixes = { ".folded", NULL },
	.description = "folded stacks, one line per stack (FlameGraph, speedscope, inferno)",
	.kinds = CP_FORMAT_SAMPLED | CP_FORMAT_HEAP | CP_FORMAT_DUMP,
	.binary = false,
	.dump_as_profile = true,
	.write = format_folded_write,
	.begin = NULL,
	.sample = NULL,
	.end = NULL,
};
