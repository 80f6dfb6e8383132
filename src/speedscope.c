/* The speedscope writer (https://www.speedscope.app/file-format-schema.json):
 * shared frames, then one "sampled" profile per thread.
 *
 * Frames are interned by (function, file, line) the way other profilers'
 * exporters do (py-spy, rbspy): a frame is a source position, and
 * speedscope merges equal frames.  Every stack is expanded once into frame
 * indexes, root first; the stacks of a thread are sorted so that those
 * sharing a prefix sit together in speedscope's time-order view (there is
 * no time order to keep: samples are aggregated).  The JSON is written as
 * it goes, never held whole.  */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/dump.h"
#include "cprof/error.h"
#include "cprof/output.h"
#include "hashidx.h"

#ifndef CP_VERSION
#define CP_VERSION "unknown"
#endif

struct frame {
	uint32_t function; /* string ids of the profile */
	uint32_t file;
	int line;
};

/* One aggregated sample, expanded.  */
struct entry {
	pid_t tid;
	uint32_t len;     /* frames in the stack */
	size_t offset;    /* of the stack in the pool, root first */
	uint64_t count;
};

struct writer {
	const struct cp_profile *p;

	struct frame *frames;
	uint32_t nframes, frames_cap;
	struct cp_hashidx frame_index;

	/* The frames of each location, root (outermost line) first:
	 * loc_offset[id] is 1 + the offset in loc_pool, 0 until expanded. */
	size_t *loc_offset;
	uint32_t *loc_pool;
	size_t loc_pool_len, loc_pool_cap;

	uint32_t *pool;   /* expanded stacks */
	size_t pool_len, pool_cap;

	struct entry *entries;
	size_t nentries;
};

static bool grow_u32(uint32_t **array, size_t need, size_t *cap)
{
	if (need <= *cap)
		return true;
	size_t n = *cap ? *cap : 1024;
	while (n < need)
		n *= 2;
	uint32_t *grown = realloc(*array, n * sizeof(*grown));
	if (!grown)
		return false;
	*array = grown;
	*cap = n;
	return true;
}

struct frame_ctx {
	const struct writer *w;
	const struct frame *frame;
};

static bool frame_eq(const void *ctx, uint32_t id)
{
	const struct frame_ctx *k = ctx;
	const struct frame *f = &k->w->frames[id];
	return f->function == k->frame->function &&
	       f->file == k->frame->file && f->line == k->frame->line;
}

/* The index of frame FRAME in shared.frames, or UINT32_MAX.  */
static uint32_t frame_index(struct writer *w, const struct cp_line *line)
{
	struct frame f = {
		.function = line->function,
		.file = line->file,
		.line = line->line > 0 ? line->line : 0,
	};
	struct frame_ctx ctx = { w, &f };
	uint64_t hash = cp_hash_u64(((uint64_t)f.function << 32 | f.file) ^
				    cp_hash_u64((uint64_t)(uint32_t)f.line));
	uint32_t id = cp_hashidx_find(&w->frame_index, hash, frame_eq, &ctx);
	if (id != UINT32_MAX)
		return id;
	if (w->nframes == w->frames_cap) {
		uint32_t cap = w->frames_cap ? 2 * w->frames_cap : 1024;
		struct frame *grown = realloc(w->frames, cap * sizeof(*grown));
		if (!grown)
			return UINT32_MAX;
		w->frames = grown;
		w->frames_cap = cap;
	}
	id = w->nframes;
	w->frames[id] = f;
	if (!cp_hashidx_insert(&w->frame_index, hash, id))
		return UINT32_MAX;
	w->nframes++;
	return id;
}

/* Expand location ID into frames (root first) once; *OFFSET and *LEN give
 * them in loc_pool.  False when out of memory.  */
static bool location_frames(struct writer *w, uint32_t id, size_t *offset,
			    uint32_t *len)
{
	const struct cp_location *loc = cp_profile_location(w->p, id);
	*len = loc ? loc->nlines : 0;
	if (w->loc_offset[id]) {
		*offset = w->loc_offset[id] - 1;
		return true;
	}
	if (!grow_u32(&w->loc_pool, w->loc_pool_len + *len,
		      &w->loc_pool_cap))
		return false;
	*offset = w->loc_pool_len;
	/* Lines are innermost first: the caller comes first here.  */
	for (uint32_t j = *len; j-- > 0;) {
		uint32_t frame = frame_index(w, &loc->lines[j]);
		if (frame == UINT32_MAX)
			return false;
		w->loc_pool[w->loc_pool_len++] = frame;
	}
	w->loc_offset[id] = *offset + 1;
	return true;
}

/* Expand every sample with a count into W->entries.  */
static int expand(struct writer *w)
{
	size_t nsamples;
	const struct cp_sample *samples = cp_profile_samples(w->p, &nsamples);
	uint32_t nlocations = cp_profile_location_count(w->p);
	w->loc_offset = calloc(nlocations + 1, sizeof(*w->loc_offset));
	w->entries = malloc((nsamples + 1) * sizeof(*w->entries));
	if (!w->loc_offset || !w->entries)
		return -CP_E_NOMEM;
	for (size_t i = 0; i < nsamples; i++) {
		if (samples[i].count == 0)
			continue;
		struct entry *e = &w->entries[w->nentries++];
		e->tid = samples[i].tid;
		e->count = samples[i].count;
		e->offset = w->pool_len;
		size_t depth;
		const uint32_t *locs =
			cp_profile_stack(w->p, samples[i].stack, &depth);
		for (size_t j = depth; j-- > 0;) {
			if (locs[j] >= nlocations)
				continue;
			size_t offset;
			uint32_t len;
			if (!location_frames(w, locs[j], &offset, &len) ||
			    !grow_u32(&w->pool, w->pool_len + len,
				      &w->pool_cap))
				return -CP_E_NOMEM;
			memcpy(w->pool + w->pool_len, w->loc_pool + offset,
			       len * sizeof(*w->pool));
			w->pool_len += len;
		}
		e->len = (uint32_t)(w->pool_len - e->offset);
	}
	return 0;
}

static int compare_entries(const void *a, const void *b, void *pool)
{
	const struct entry *x = a, *y = b;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	const uint32_t *fx = (const uint32_t *)pool + x->offset;
	const uint32_t *fy = (const uint32_t *)pool + y->offset;
	uint32_t n = x->len < y->len ? x->len : y->len;
	for (uint32_t i = 0; i < n; i++)
		if (fx[i] != fy[i])
			return fx[i] < fy[i] ? -1 : 1;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* ------------------------------------------------------------ output */

static void put_u64(FILE *f, uint64_t v)
{
	char buf[24];
	char *end = buf + sizeof(buf), *at = end;
	do {
		*--at = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	fwrite_unlocked(at, 1, (size_t)(end - at), f);
}

static void put(FILE *f, const char *s)
{
	fputs_unlocked(s, f);
}

static void write_frames(const struct writer *w, FILE *f)
{
	put(f, "\"shared\":{\"frames\":[");
	for (uint32_t i = 0; i < w->nframes; i++) {
		const struct frame *fr = &w->frames[i];
		put(f, i ? ",\n{\"name\":" : "\n{\"name\":");
		cp_json_string(f, cp_profile_string(w->p, fr->function));
		const char *file = cp_profile_string(w->p, fr->file);
		if (*file) {
			put(f, ",\"file\":");
			cp_json_string(f, file);
		}
		if (fr->line > 0) {
			put(f, ",\"line\":");
			put_u64(f, (uint64_t)fr->line);
		}
		putc_unlocked('}', f);
	}
	put(f, "\n]},\n");
}

/* Write the profile of the entries [FIRST, END), one thread's.  */
static void write_thread(const struct writer *w, size_t first, size_t end,
			 uint64_t total, const char *name, FILE *f)
{
	const struct cp_profile_meta *meta = cp_profile_meta_const(w->p);
	pid_t tid = w->entries[first].tid;
	put(f, "{\"type\":\"sampled\",\"name\":");
	if (tid != 0) {
		const char *comm = cp_profile_thread_name(w->p, tid);
		char label[128];
		snprintf(label, sizeof(label), "%d%s%s", (int)tid,
			 comm ? " " : "", comm ? comm : "");
		cp_json_string(f, label);
	} else {
		/* Thread unknown (folded input): the whole profile.  */
		cp_json_string(f, name ? name : "all threads");
	}
	put(f, ",\"unit\":");
	put(f, strcmp(meta->unit, "bytes") == 0 ? "\"bytes\"" : "\"none\"");
	put(f, ",\"startValue\":0,\"endValue\":");
	put_u64(f, total);
	put(f, ",\n\"samples\":[");
	for (size_t i = first; i < end; i++) {
		const struct entry *e = &w->entries[i];
		put(f, i > first ? ",\n[" : "\n[");
		for (uint32_t j = 0; j < e->len; j++) {
			if (j)
				putc_unlocked(',', f);
			put_u64(f, w->pool[e->offset + j]);
		}
		putc_unlocked(']', f);
	}
	put(f, "\n],\n\"weights\":[");
	for (size_t i = first; i < end; i++) {
		if (i > first)
			putc_unlocked(',', f);
		put_u64(f, w->entries[i].count);
	}
	put(f, "]}");
}

int cp_write_speedscope(const struct cp_profile *p, const char *name,
			FILE *stream)
{
	struct writer w = { .p = p };
	size_t *starts = NULL;
	uint64_t *totals = NULL;
	int rc = expand(&w);
	if (rc)
		goto out;
	if (w.nentries > 1)
		qsort_r(w.entries, w.nentries, sizeof(*w.entries),
			compare_entries, w.pool);

	/* Threads: runs of entries with one tid.  The busiest one is shown
	 * first when the file is opened.  */
	size_t nthreads = 0, busiest = 0;
	rc = -CP_E_NOMEM;
	starts = malloc((w.nentries + 1) * sizeof(*starts));
	totals = malloc((w.nentries + 1) * sizeof(*totals));
	if (!starts || !totals)
		goto out;
	for (size_t i = 0; i < w.nentries; i++) {
		if (i == 0 || w.entries[i].tid != w.entries[i - 1].tid) {
			starts[nthreads] = i;
			totals[nthreads++] = 0;
		}
		totals[nthreads - 1] += w.entries[i].count;
	}
	starts[nthreads] = w.nentries;
	for (size_t t = 1; t < nthreads; t++)
		if (totals[t] > totals[busiest])
			busiest = t;

	flockfile(stream);
	put(stream, "{\"$schema\":\"https://www.speedscope.app/"
		    "file-format-schema.json\",\n\"exporter\":\"cprof@"
		    CP_VERSION "\",");
	if (name) {
		put(stream, "\"name\":");
		cp_json_string(stream, name);
		putc_unlocked(',', stream);
	}
	put(stream, "\"activeProfileIndex\":");
	put_u64(stream, busiest);
	put(stream, ",\n");
	write_frames(&w, stream);
	put(stream, "\"profiles\":[");
	for (size_t t = 0; t < nthreads; t++) {
		put(stream, t ? ",\n" : "\n");
		write_thread(&w, starts[t], starts[t + 1], totals[t], name,
			     stream);
	}
	put(stream, "\n]}\n");
	funlockfile(stream);
	rc = fflush(stream) != 0 || ferror(stream) ? -CP_E_SYS : 0;
out:
	free(starts);
	free(totals);
	free(w.entries);
	free(w.pool);
	free(w.loc_pool);
	free(w.loc_offset);
	cp_hashidx_free(&w.frame_index);
	free(w.frames);
	return rc;
}
