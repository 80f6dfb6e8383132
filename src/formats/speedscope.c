/* The speedscope writer (https://www.speedscope.app/file-format-schema.json):
 * shared frames, then one "sampled" profile per thread.
 *
 * Frames are interned by (function, file, line) the way other profilers'
 * exporters do (py-spy, rbspy): a frame is a source position, and
 * speedscope merges equal frames.  Every stack is expanded once into frame
 * indexes, root first.
 *
 * Two sources of samples:
 *   - the aggregated profile (cp_write_speedscope): there is no time order
 *     to keep, so the stacks of a thread are sorted so that those sharing
 *     a prefix sit together in speedscope's time-order view;
 *   - a log of the samples as they were taken (cp_write_speedscope_log,
 *     fed by cprof-attach's on_sample): each thread's samples in time
 *     order, as py-spy writes them, so the time-order view shows what the
 *     thread did when.
 * Weights carry their unit: a CPU or wall profile's counts become
 * nanoseconds (count * the sampling period, rounded as pprof's writer
 * does), bytes stay bytes, other counts are speedscope's "none".  The JSON
 * is written as it goes, never held whole.  */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/json.h"
#include "cprof/error.h"
#include "cprof/output.h"
#include "formats/entries.h"
#include "util/grow.h"
#include "util/hashidx.h"

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
	size_t seq;       /* log: its place in time order */
};

struct writer {
	const struct cp_profile *p;
	const char *unit;     /* speedscope's name of the values' unit */
	uint64_t scale;       /* a count is SCALE of UNIT */

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
	if (!cp_grow((void **)&w->loc_pool, &w->loc_pool_cap,
		     w->loc_pool_len + *len, sizeof(*w->loc_pool), 1024))
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

/* Append the frames of stack STACK (root first) to the pool: *OFFSET
 * and *LEN say where.  False when out of memory.  */
static bool stack_frames(struct writer *w, uint32_t stack, size_t *offset,
			 uint32_t *len)
{
	uint32_t nlocations = cp_profile_location_count(w->p);
	size_t depth;
	const uint32_t *locs = cp_profile_stack(w->p, stack, &depth);
	*offset = w->pool_len;
	for (size_t j = depth; j-- > 0;) {
		if (locs[j] >= nlocations)
			continue;
		size_t at;
		uint32_t n;
		if (!location_frames(w, locs[j], &at, &n) ||
		    !cp_grow((void **)&w->pool, &w->pool_cap, w->pool_len + n,
			     sizeof(*w->pool), 1024))
			return false;
		memcpy(w->pool + w->pool_len, w->loc_pool + at,
		       n * sizeof(*w->pool));
		w->pool_len += n;
	}
	*len = (uint32_t)(w->pool_len - *offset);
	return true;
}

static bool writer_init(struct writer *w, size_t nentries)
{
	uint32_t nlocations = cp_profile_location_count(w->p);
	w->loc_offset = calloc(nlocations + 1, sizeof(*w->loc_offset));
	w->entries = malloc((nentries + 1) * sizeof(*w->entries));
	return w->loc_offset && w->entries;
}

/* Expand every sample with a count into W->entries.  */
static int expand(struct writer *w)
{
	size_t nsamples;
	const struct cp_sample *samples = cp_profile_samples(w->p, &nsamples);
	if (!writer_init(w, nsamples))
		return -CP_E_NOMEM;
	for (size_t i = 0; i < nsamples; i++) {
		if (samples[i].count == 0)
			continue;
		struct entry *e = &w->entries[w->nentries++];
		e->tid = samples[i].tid;
		e->count = samples[i].count;
		e->seq = i;
		if (!stack_frames(w, samples[i].stack, &e->offset, &e->len))
			return -CP_E_NOMEM;
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

/* Entries of one thread together, threads by tid, each thread's in time
 * order.  */
static int compare_logged(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* ------------------------------------------------------------ units */

/* The unit of PROFILE's counts in speedscope's terms into W.  */
static void choose_unit(struct writer *w)
{
	const struct cp_profile_meta *meta = cp_profile_meta_const(w->p);
	const struct cp_sample_type *t = &meta->count_type;
	w->unit = "none";
	w->scale = 1;
	if (cp_sample_type_is(t, NULL, "bytes")) {
		w->unit = "bytes";
	} else if (cp_sample_type_is(t, NULL, "nanoseconds")) {
		w->unit = "nanoseconds";
	} else if (cp_sample_type_is(t, "samples", "count") &&
		   meta->frequency > 0) {
		/* The sampling period, rounded as cp_write_pprof does, so
		 * both files give a function the same time.  */
		w->unit = "nanoseconds";
		w->scale = (1000000000ULL + meta->frequency / 2) /
			   meta->frequency;
	}
}

/* COUNT in the unit chosen (saturating).  */
static uint64_t scaled(const struct writer *w, uint64_t count)
{
	if (w->scale > 1 && count > UINT64_MAX / w->scale)
		return UINT64_MAX;
	return count * w->scale;
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
	put(f, ",\"unit\":\"");
	put(f, w->unit);
	put(f, "\",\"startValue\":0,\"endValue\":");
	put_u64(f, scaled(w, total));
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
		put_u64(f, scaled(w, w->entries[i].count));
	}
	put(f, "]}");
}

static void writer_free(struct writer *w)
{
	free(w->entries);
	free(w->pool);
	free(w->loc_pool);
	free(w->loc_offset);
	cp_hashidx_free(&w->frame_index);
	free(w->frames);
}

/* The document, from W's entries (grouped by thread).  */
static int write_document(struct writer *w, const char *name, FILE *stream)
{
	size_t *starts = NULL;
	uint64_t *totals = NULL;
	int rc;

	/* Threads: runs of entries with one tid.  The busiest one is shown
	 * first when the file is opened.  */
	size_t nthreads = 0, busiest = 0;
	rc = -CP_E_NOMEM;
	starts = malloc((w->nentries + 1) * sizeof(*starts));
	totals = malloc((w->nentries + 1) * sizeof(*totals));
	if (!starts || !totals)
		goto out;
	for (size_t i = 0; i < w->nentries; i++) {
		if (i == 0 || w->entries[i].tid != w->entries[i - 1].tid) {
			starts[nthreads] = i;
			totals[nthreads++] = 0;
		}
		totals[nthreads - 1] += w->entries[i].count;
	}
	starts[nthreads] = w->nentries;
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
	write_frames(w, stream);
	put(stream, "\"profiles\":[");
	for (size_t t = 0; t < nthreads; t++) {
		put(stream, t ? ",\n" : "\n");
		write_thread(w, starts[t], starts[t + 1], totals[t], name,
			     stream);
	}
	put(stream, "\n]}\n");
	funlockfile(stream);
	rc = fflush(stream) != 0 || ferror(stream) ? -CP_E_SYS : 0;
out:
	free(starts);
	free(totals);
	return rc;
}

int cp_write_speedscope(const struct cp_profile *p, const char *name,
			FILE *stream)
{
	struct writer w = { .p = p };
	choose_unit(&w);
	int rc = expand(&w);
	if (rc == 0) {
		if (w.nentries > 1)
			qsort_r(w.entries, w.nentries, sizeof(*w.entries),
				compare_entries, w.pool);
		rc = write_document(&w, name, stream);
	}
	writer_free(&w);
	return rc;
}

/* ------------------------------------------------------------ the log */

struct logged {
	pid_t tid;
	uint32_t stack;
	uint64_t weight;
};

struct cp_speedscope_log {
	struct logged *samples;     /* in time order */
	size_t n, cap;
	/* Per thread, its latest sample (index in SAMPLES), to merge a
	 * repeat of its stack into it.  */
	struct log_thread { pid_t tid; size_t latest; } *threads;
	size_t nthreads, threads_cap;
	struct cp_hashidx thread_index;  /* tid -> index in THREADS */
	uint32_t max_stack;
};

int cp_speedscope_log_new(struct cp_speedscope_log **log)
{
	*log = calloc(1, sizeof(**log));
	return *log ? 0 : -CP_E_NOMEM;
}

void cp_speedscope_log_free(struct cp_speedscope_log *log)
{
	if (!log)
		return;
	free(log->samples);
	free(log->threads);
	cp_hashidx_free(&log->thread_index);
	free(log);
}

struct log_key {
	const struct cp_speedscope_log *log;
	pid_t tid;
};

static bool log_thread_eq(const void *ctx, uint32_t id)
{
	const struct log_key *k = ctx;
	return k->log->threads[id].tid == k->tid;
}

int cp_speedscope_log_add(struct cp_speedscope_log *log, pid_t tid,
			  uint32_t stack, uint64_t weight)
{
	if (weight == 0)
		return 0;
	uint64_t hash = cp_hash_u64((uint64_t)(uint32_t)tid);
	struct log_key key = { log, tid };
	uint32_t id = cp_hashidx_find(&log->thread_index, hash, log_thread_eq,
				      &key);
	if (id != UINT32_MAX) {
		struct logged *latest = &log->samples[log->threads[id].latest];
		if (latest->stack == stack) {
			/* Speedscope draws the two as one anyway.  */
			latest->weight = weight > UINT64_MAX - latest->weight
						 ? UINT64_MAX
						 : latest->weight + weight;
			return 0;
		}
	} else {
		if (log->nthreads >= UINT32_MAX - 1 ||
		    !cp_grow((void **)&log->threads, &log->threads_cap,
			     log->nthreads + 1, sizeof(*log->threads), 256) ||
		    !cp_hashidx_insert(&log->thread_index, hash,
				       (uint32_t)log->nthreads))
			return -CP_E_NOMEM;
		id = (uint32_t)log->nthreads++;
		log->threads[id].tid = tid;
	}
	if (!cp_grow((void **)&log->samples, &log->cap, log->n + 1,
		     sizeof(*log->samples), 256))
		return -CP_E_NOMEM;
	log->samples[log->n] = (struct logged){
		.tid = tid, .stack = stack, .weight = weight};
	log->threads[id].latest = log->n++;
	if (stack > log->max_stack)
		log->max_stack = stack;
	return 0;
}

int cp_write_speedscope_log(const struct cp_profile *p, const char *name,
			    const struct cp_speedscope_log *log, FILE *stream)
{
	struct writer w = { .p = p };
	choose_unit(&w);
	int rc = -CP_E_NOMEM;
	/* Each stack is expanded once: where its frames are in the pool. */
	size_t *stack_offset = NULL;
	uint32_t *stack_len = NULL;
	if (!writer_init(&w, log->n))
		goto out;
	if (log->n) {
		stack_offset = calloc((size_t)log->max_stack + 1,
				      sizeof(*stack_offset));
		stack_len = calloc((size_t)log->max_stack + 1,
				   sizeof(*stack_len));
		if (!stack_offset || !stack_len)
			goto out;
	}
	for (size_t i = 0; i < log->n; i++) {
		const struct logged *s = &log->samples[i];
		struct entry *e = &w.entries[w.nentries++];
		e->tid = s->tid;
		e->count = s->weight;
		e->seq = i;
		if (!stack_offset[s->stack]) {
			size_t offset;
			if (!stack_frames(&w, s->stack, &offset,
					  &stack_len[s->stack]))
				goto out;
			stack_offset[s->stack] = offset + 1;
		}
		e->offset = stack_offset[s->stack] - 1;
		e->len = stack_len[s->stack];
	}
	if (w.nentries > 1)
		qsort(w.entries, w.nentries, sizeof(*w.entries),
		      compare_logged);
	rc = write_document(&w, name, stream);
out:
	free(stack_offset);
	free(stack_len);
	writer_free(&w);
	return rc;
}

/* ---------------------------------------------------------- registry */

static int format_speedscope_write(const struct cp_format_input *in,
				   const struct cp_format_options *o,
				   FILE *stream)
{
	const struct cp_profile_meta *meta = cp_profile_meta_const(in->profile);
	return cp_write_speedscope(in->profile, o->name ? o->name : meta->target,
				   stream);
}

/* The recorder: the samples in time order (the log is made at the first
 * sample), written with the profile's names at the end.  */
struct speedscope_recorder {
	struct cp_format_input in;
	struct cp_format_options options;
	FILE *stream;
	struct cp_speedscope_log *log;
	bool lost;             /* a sample could not be logged */
};

static int format_speedscope_begin(const struct cp_format_input *in,
				   const struct cp_format_options *o,
				   FILE *stream, void **state)
{
	struct speedscope_recorder *r = calloc(1, sizeof(*r));
	if (!r)
		return -CP_E_NOMEM;
	r->in = *in;
	r->options = *o;
	r->stream = stream;
	*state = r;
	return 0;
}

static int format_speedscope_sample(void *state, uint64_t t_ns, pid_t tid,
				    uint32_t stack, uint64_t weight)
{
	(void)t_ns;
	struct speedscope_recorder *r = state;
	int rc = r->log ? 0 : cp_speedscope_log_new(&r->log);
	if (rc == 0)
		rc = cp_speedscope_log_add(r->log, tid, stack, weight);
	if (rc < 0)
		r->lost = true;
	/* Not an error of the run: the end falls back to the aggregated
	 * profile.  */
	return 0;
}

static int format_speedscope_end(void *state, bool write)
{
	struct speedscope_recorder *r = state;
	int rc = 0;
	if (write && r->log && !r->lost) {
		const struct cp_profile_meta *meta =
			cp_profile_meta_const(r->in.profile);
		rc = cp_write_speedscope_log(r->in.profile,
					     r->options.name ? r->options.name
							     : meta->target,
					     r->log, r->stream);
	} else if (write) {
		if (r->lost && r->options.warn)
			r->options.warn(r->options.warn_arg,
					"out of memory for the samples in time order: the speedscope file has each thread's stacks aggregated");
		rc = format_speedscope_write(&r->in, &r->options,
						r->stream);
	}
	cp_speedscope_log_free(r->log);
	free(r);
	return rc;
}

/* The format's entry in the registry (src/formats/registry.c).  */
const struct cp_format cp_format_speedscope = {
	.name = "speedscope",
	.suffixes = { ".speedscope.json", NULL },
	.description = "speedscope's JSON; samples in time order",
	.kinds = CP_FORMAT_SAMPLED | CP_FORMAT_HEAP | CP_FORMAT_DUMP,
	.binary = false,
	.dump_as_profile = true,
	.write = format_speedscope_write,
	.begin = format_speedscope_begin,
	.sample = format_speedscope_sample,
	.end = format_speedscope_end,
};
