/* Timelines: sampled stacks -> start/end events (the rules are in
 * timeline.h).
 *
 * Each thread keeps its current stack: for each frame the name (in an
 * arena of the thread, back to back) and the thread's sample number in
 * which the frame appeared.  A frame's streak is the number of samples
 * since then, so streaks never need counting up one by one: the frames
 * whose streak has reached MIN_SAMPLES are a prefix of the stack (a frame
 * is never older than its caller), and STARTED is its length.  A sample
 * compares names by position up to the first difference, ends the started
 * frames beyond it, replaces the rest of the stack, and starts frames from
 * STARTED on while they are old enough: work in proportion to the depth,
 * memory in proportion to the depth and the number of threads.
 *
 * Raw text comes from cp_raw_read() (src/formats/raw_read.c), and its
 * callback finds the shared prefix on the text itself: a thread's names
 * are kept joined by ';' as the line joins them, so one comparison of
 * bytes (16 at a time) finds where the stacks part, and only the rest of
 * the line is split and checked (cp_raw_frames).
 *
 * The output formats are writers (src/analysis/timeline_writer.h, one
 * file each in src/formats/timeline_*.c): the engine hands them each
 * start and end, and says when a sample's events are all in.  */
#include "cprof/timeline.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "analysis/timeline_writer.h"
#include "cprof/error.h"
#include "cprof/rawread.h"
#include "util/grow.h"
#include "util/hashidx.h"
#include "util/spool.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Timestamps beyond this many seconds cannot be written in nanoseconds
 * as a 64-bit integer (about 285 years).  */
#define MAX_SECONDS 9.0e9

struct frame {
	size_t name_off;   /* of the name in the thread's NAMES */
	size_t name_len;
	uint64_t born;     /* the thread's sample number (from 1) it appeared in */
	uint32_t slot;     /* the writer's (speedscope: its shared frame) */
};

struct thread {
	struct cp_timeline_thread_info info; /* tid, name (from
				* cp_timeline_thread_name(); NULL: none), the
				* writer's data */
	struct frame *stack;   /* root first */
	size_t depth, stack_cap;
	char *names;           /* the stack's names, each followed by ';' (as
				* the raw text joins them) */
	size_t names_len, names_cap;
	size_t started;        /* stack[0, started) have had their start */
	uint64_t samples;      /* samples seen */
	uint64_t last_weight;  /* of the last sample */
	double first_ts, last_ts;
	double emitted_ts;     /* of its latest event (trace: may be after
				* LAST_TS, see apply_events) */
	char last_text[32];    /* LAST_TS as written (cut), for messages */
};

struct cp_timeline {
	const struct cp_timeline_writer *w;
	void *ws;              /* the writer's state */
	unsigned min_samples;
	FILE *out;
	pid_t pid;             /* 0: unknown */
	char *process_name;
	bool begun;            /* the writer's begin has been called */
	/* What a unit of weight stands for: TICK seconds (the sampling
	 * period) or a nanosecond; unknown when TICK is 0 or the raw header
	 * named another unit.  */
	double tick;
	bool tick_fixed;       /* given by the options: headers keep it */
	enum { WEIGHT_TICKS, WEIGHT_NS, WEIGHT_UNKNOWN } weight_unit;
	double min_gap;        /* smallest interval between two samples of
				* one thread; 0: none yet */

	struct thread **threads;  /* in order of first appearance */
	struct cp_timeline_thread_info **infos; /* their infos, for writers */
	size_t nthreads, threads_cap, infos_cap;
	struct cp_hashidx thread_index;  /* tid -> index in THREADS */
	struct thread *recent;            /* the last thread looked up */

	/* The writer's per-sample part is to be formatted again: the next
	 * event is at a new thread or time.  */
	bool middle_ready;

	size_t *lens;          /* cp_timeline_sample(): lengths of the frames */
	size_t lens_cap;
};

/* --------------------------------------------------------------- threads */

struct thread_key {
	const struct cp_timeline *tl;
	pid_t tid;
};

static bool thread_key_eq(const void *ctx, uint32_t id)
{
	const struct thread_key *k = ctx;
	return k->tl->threads[id]->info.tid == k->tid;
}

/* The state of thread TID, created on first sight.  NULL when out of
 * memory.  */
static struct thread *thread_get(struct cp_timeline *tl, pid_t tid)
{
	if (tl->recent && tl->recent->info.tid == tid)
		return tl->recent;
	uint64_t hash = cp_hash_u64((uint64_t)(uint32_t)tid);
	struct thread_key key = {tl, tid};
	uint32_t id = cp_hashidx_find(&tl->thread_index, hash, thread_key_eq,
				      &key);
	if (id != UINT32_MAX)
		return tl->recent = tl->threads[id];
	if (tl->nthreads >= UINT32_MAX - 1 ||
	    !cp_grow((void **)&tl->threads, &tl->threads_cap, tl->nthreads + 1,
		     sizeof(*tl->threads), 16) ||
	    !cp_grow((void **)&tl->infos, &tl->infos_cap, tl->nthreads + 1,
		     sizeof(*tl->infos), 16))
		return NULL;
	struct thread *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->info.tid = tid;
	if (!cp_hashidx_insert(&tl->thread_index, hash,
			       (uint32_t)tl->nthreads)) {
		free(t);
		return NULL;
	}
	tl->infos[tl->nthreads] = &t->info;
	tl->threads[tl->nthreads++] = t;
	return tl->recent = t;
}

static void thread_free(struct cp_timeline *tl, struct thread *t)
{
	if (!t)
		return;
	if (tl->w->thread_free && tl->ws)
		tl->w->thread_free(tl->ws, &t->info);
	free((char *)t->info.name);
	free(t->stack);
	free(t->names);
	free(t);
}

/* Hand frame F of thread T to the writer: its start (START) or end at TS
 * (TS_TEXT as written).  Returns 0 or a -CP_E_* code.  */
static int emit(struct cp_timeline *tl, struct thread *t, bool start,
		struct frame *f, const char *ts_text, double ts)
{
	int rc = tl->w->event(tl->ws, &t->info, start, t->names + f->name_off,
			      f->name_len, &f->slot, ts_text, ts,
			      !tl->middle_ready);
	tl->middle_ready = true;
	return rc;
}

/* The writer's head, once, before the first sample: the pid is settled
 * from here on.  */
static void begin(struct cp_timeline *tl)
{
	if (tl->begun || !tl->w->begin)
		return;
	tl->begun = true;
	if (!tl->pid && tl->nthreads)
		tl->pid = tl->threads[0]->info.tid;
	tl->w->begin(tl->ws, tl->pid, tl->process_name, tl->infos,
		     tl->nthreads);
}

static int stream_status(const struct cp_timeline *tl, const struct thread *t)
{
	if (ferror(tl->out) ||
	    (tl->w->failed && tl->w->failed(tl->ws, t ? &t->info : NULL))) {
		if (!errno)
			errno = EIO;
		return -CP_E_SYS;
	}
	return 0;
}

/* ------------------------------------------------------------- formats */

static const struct cp_timeline_format_info timeline_formats[] = {
	/* The writer of each is writers[format], below.  */
	{"events", {NULL},
	 "lines \"start|end TIMESTAMP TID NAME\"", CP_TIMELINE_EVENTS},
	{"trace", {".json", NULL},
	 "Chrome Trace Event JSON, for Perfetto and chrome://tracing",
	 CP_TIMELINE_TRACE},
	{"speedscope", {".speedscope.json", NULL},
	 "speedscope's JSON, one evented profile per thread",
	 CP_TIMELINE_SPEEDSCOPE},
};

#define NTIMELINE_FORMATS (sizeof(timeline_formats) / sizeof(timeline_formats[0]))

static const struct cp_timeline_writer *const writers[] = {
	[CP_TIMELINE_EVENTS] = &cp_timeline_writer_events,
	[CP_TIMELINE_TRACE] = &cp_timeline_writer_trace,
	[CP_TIMELINE_SPEEDSCOPE] = &cp_timeline_writer_speedscope,
};

const struct cp_timeline_format_info *cp_timeline_formats(size_t *n)
{
	*n = NTIMELINE_FORMATS;
	return timeline_formats;
}

const struct cp_timeline_format_info *cp_timeline_format_find(const char *name)
{
	for (size_t i = 0; name && i < NTIMELINE_FORMATS; i++)
		if (strcmp(timeline_formats[i].name, name) == 0)
			return &timeline_formats[i];
	return NULL;
}

const struct cp_timeline_format_info *
cp_timeline_format_for_path(const char *path)
{
	const struct cp_timeline_format_info *found = NULL;
	size_t n = path ? strlen(path) : 0, longest = 0;
	for (size_t i = 0; n && i < NTIMELINE_FORMATS; i++)
		for (const char *const *suffix = timeline_formats[i].suffixes;
		     *suffix; suffix++) {
			size_t m = strlen(*suffix);
			if (n > m && m > longest &&
			    strcasecmp(path + n - m, *suffix) == 0) {
				found = &timeline_formats[i];
				longest = m;
			}
		}
	return found;
}

/* -------------------------------------------------------------- engine */

int cp_timeline_new(const struct cp_timeline_options *o, FILE *out,
		    struct cp_timeline **timeline)
{
	*timeline = NULL;
	if (!o || !out || (unsigned)o->format >= sizeof(writers) / sizeof(*writers) ||
	    !writers[o->format])
		return -CP_E_INVAL;
	struct cp_timeline *tl = calloc(1, sizeof(*tl));
	if (!tl)
		return -CP_E_NOMEM;
	tl->w = writers[o->format];
	tl->min_samples = o->min_samples ? o->min_samples : 1;
	tl->out = out;
	tl->pid = o->pid;
	if (o->period > 0 && o->period <= MAX_SECONDS) {
		tl->tick = o->period;
		tl->tick_fixed = true;
	}
	if ((o->process_name && !(tl->process_name = strdup(o->process_name))) ||
	    tl->w->open(o, out, &tl->ws) < 0) {
		cp_timeline_free(tl);
		return -CP_E_NOMEM;
	}
	*timeline = tl;
	return 0;
}

int cp_timeline_process(struct cp_timeline *tl, pid_t pid, const char *name)
{
	bool sampled = false;
	for (size_t i = 0; i < tl->nthreads && !sampled; i++)
		sampled = tl->threads[i]->samples > 0;
	if (tl->begun || sampled)
		return -CP_E_INVAL;
	if (name) {
		char *copy = strdup(name);
		if (!copy)
			return -CP_E_NOMEM;
		free(tl->process_name);
		tl->process_name = copy;
	}
	if (pid)
		tl->pid = pid;
	return 0;
}

int cp_timeline_thread_name(struct cp_timeline *tl, pid_t tid,
			    const char *name)
{
	struct thread *t = thread_get(tl, tid);
	char *copy = strdup(name ? name : "");
	if (!t || !copy) {
		free(copy);
		return -CP_E_NOMEM;
	}
	free((char *)t->info.name);
	t->info.name = copy;
	if (tl->begun && tl->w->thread_named) {
		tl->w->thread_named(tl->ws, &t->info);
		return stream_status(tl, NULL);
	}
	return 0;
}

/* The first half of a sample of thread TID at TS: checks, and the thread
 * into *THREAD.  Returns 0 or a -CP_E_* code (nothing written).  */
static int sample_begin(struct cp_timeline *tl, double ts, pid_t tid,
			struct thread **thread)
{
	if (!(ts >= -MAX_SECONDS && ts <= MAX_SECONDS))
		return -CP_E_INVAL;
	struct thread *t = thread_get(tl, tid);
	if (!t)
		return -CP_E_NOMEM;
	if (t->samples && ts < t->last_ts)
		return -CP_E_PARSE;
	begin(tl);
	*thread = t;
	return 0;
}

/* The second half: thread T's stack is its first KEEP frames (the prefix
 * it shares with the sample) followed by the NEW frames NAMES (LENS[i]
 * bytes each).  Batches the events (sample_apply writes them).  */
static int apply_events(struct cp_timeline *tl, struct thread *t,
			const char *ts_text, double ts, uint64_t weight,
			size_t keep, const char *const *names,
			const size_t *lens, size_t nnew)
{
	char text[40];
	if (!ts_text) {
		snprintf(text, sizeof(text), "%.6f", ts);
		ts_text = text;
	}
	tl->middle_ready = false;

	/* End what started beyond the common prefix, deepest first.  Never
	 * before an event of the thread already written (below).  */
	int rc;
	double end_ts = t->samples && t->emitted_ts > ts ? t->emitted_ts : ts;
	bool ended = false;
	while (t->started > keep) {
		t->started--;
		rc = emit(tl, t, false, &t->stack[t->started], ts_text, end_ts);
		if (rc)
			return rc;
		ended = true;
	}
	/* Trace: starts that follow ends go 1 ns after them.  Speedscope's
	 * trace importer takes a B and an E of one name at one timestamp for
	 * a frame that begins and ends there (it opens it first), which
	 * breaks the nesting whenever a function is both among the frames
	 * that end and among those that start (an interpreter's eval loop
	 * at several depths: python3 gave over a hundred warnings a run).
	 * A nanosecond is far below any sampling period, and Perfetto and
	 * chrome://tracing read the events as before.  */
	double start_ts = end_ts;
	if (ended && tl->w->starts_after_ends) {
		start_ts = end_ts + 1e-9;
		tl->middle_ready = false;
	}

	/* The rest of the stack is new: its streak begins here.  */
	uint64_t now = t->samples + 1;
	if (keep < t->depth)
		t->names_len = t->stack[keep].name_off;
	t->depth = keep;
	if (!cp_grow((void **)&t->stack, &t->stack_cap, keep + nnew,
		     sizeof(*t->stack), 16))
		return -CP_E_NOMEM;
	for (size_t i = 0; i < nnew; i++) {
		if (!cp_grow((void **)&t->names, &t->names_cap,
			     t->names_len + lens[i] + 1, 1, 16))
			return -CP_E_NOMEM;
		memcpy(t->names + t->names_len, names[i], lens[i]);
		t->names[t->names_len + lens[i]] = ';';
		t->stack[t->depth++] = (struct frame){
			.name_off = t->names_len,
			.name_len = lens[i],
			.born = now,
		};
		t->names_len += lens[i] + 1;
	}

	/* Start the frames whose streak has reached MIN_SAMPLES, outermost
	 * first.  */
	bool started = false;
	while (t->started < t->depth &&
	       now - t->stack[t->started].born + 1 >= tl->min_samples) {
		rc = emit(tl, t, true, &t->stack[t->started], ts_text,
			  start_ts);
		if (rc)
			return rc;
		t->started++;
		started = true;
	}
	t->emitted_ts = started ? start_ts : end_ts;

	if (!t->samples)
		t->first_ts = ts;
	else if (ts > t->last_ts &&
		 (tl->min_gap == 0 || ts - t->last_ts < tl->min_gap))
		tl->min_gap = ts - t->last_ts;
	t->samples = now;
	t->last_ts = ts;
	t->last_weight = weight;
	size_t len = strlen(ts_text);
	if (len >= sizeof(t->last_text))
		snprintf(t->last_text, sizeof(t->last_text), "%.28s...",
			 ts_text);
	else
		memcpy(t->last_text, ts_text, len + 1);
	return 0;
}

static int sample_apply(struct cp_timeline *tl, struct thread *t,
			const char *ts_text, double ts, uint64_t weight,
			size_t keep, const char *const *names,
			const size_t *lens, size_t nnew)
{
	int rc = apply_events(tl, t, ts_text, ts, weight, keep, names, lens,
			      nnew);
	tl->w->flush(tl->ws);
	return rc ? rc : stream_status(tl, t);
}

int cp_timeline_sample(struct cp_timeline *tl, const char *ts_text,
		       double ts, pid_t tid, const char *const *frames,
		       size_t nframes)
{
	return cp_timeline_sample_weighted(tl, ts_text, ts, tid, 1, frames,
					   nframes);
}

int cp_timeline_sample_weighted(struct cp_timeline *tl, const char *ts_text,
				double ts, pid_t tid, uint64_t weight,
				const char *const *frames, size_t nframes)
{
	if (weight == 0)
		return -CP_E_INVAL;
	struct thread *t;
	int rc = sample_begin(tl, ts, tid, &t);
	if (rc)
		return rc;
	if (!cp_grow((void **)&tl->lens, &tl->lens_cap, nframes,
		     sizeof(*tl->lens), 16))
		return -CP_E_NOMEM;
	for (size_t i = 0; i < nframes; i++)
		tl->lens[i] = strlen(frames[i]);
	/* The longest common prefix, by position.  */
	size_t keep = 0, both = t->depth < nframes ? t->depth : nframes;
	while (keep < both && t->stack[keep].name_len == tl->lens[keep] &&
	       memcmp(t->names + t->stack[keep].name_off, frames[keep],
		      tl->lens[keep]) == 0)
		keep++;
	/* No pointer arithmetic when nothing is new: FRAMES may be NULL
	 * with NFRAMES 0, and LENS is NULL until a sample has frames.  */
	bool more = keep < nframes;
	return sample_apply(tl, t, ts_text, ts, weight, keep,
			    more ? frames + keep : NULL,
			    more ? tl->lens + keep : NULL, nframes - keep);
}

/* When thread T's last sample ends: once it has lasted the time its
 * weight stands for (see timeline.h).  Frames that began at the last
 * sample would otherwise end where they begin, and a viewer would draw
 * nothing (speedscope's importer warns about such pairs).  */
static double thread_end(const struct cp_timeline *tl, const struct thread *t)
{
	double hold;
	if (tl->weight_unit == WEIGHT_NS)
		hold = (double)t->last_weight * 1e-9;
	else if (tl->weight_unit == WEIGHT_TICKS && tl->tick > 0)
		hold = (double)t->last_weight * tl->tick;
	else if (tl->min_gap > 0)
		hold = tl->min_gap;
	else
		hold = 1e-6;
	double end = t->last_ts + hold;
	if (end <= t->emitted_ts) /* after a start moved 1 ns later */
		end = t->emitted_ts + 1e-9;
	return end <= MAX_SECONDS ? end : MAX_SECONDS;
}

/* Close the started frames of every thread at its end (thread_end).  */
static int close_open_frames(struct cp_timeline *tl)
{
	for (size_t i = 0; i < tl->nthreads; i++) {
		struct thread *t = tl->threads[i];
		double end = thread_end(tl, t);
		char end_text[40];
		snprintf(end_text, sizeof(end_text), "%.9f", end);
		tl->middle_ready = false;
		while (t->started > 0) {
			t->started--;
			int rc = emit(tl, t, false, &t->stack[t->started],
				      end_text, end);
			if (rc) {
				tl->w->flush(tl->ws);
				return rc;
			}
		}
		tl->w->flush(tl->ws);
	}
	return 0;
}

int cp_timeline_finish(struct cp_timeline *tl)
{
	int rc = 0;
	begin(tl);
	if (tl->w->closes_frames)
		rc = close_open_frames(tl);
	for (size_t i = 0; rc == 0 && i < tl->nthreads; i++)
		rc = stream_status(tl, tl->threads[i]);
	if (rc == 0 && tl->w->finish) {
		for (size_t i = 0; i < tl->nthreads; i++) {
			struct thread *t = tl->threads[i];
			t->info.samples = t->samples;
			t->info.first_ts = t->first_ts;
			t->info.end_ts = thread_end(tl, t);
		}
		rc = tl->w->finish(tl->ws, tl->infos, tl->nthreads);
	}
	if (fflush(tl->out) != 0 && rc == 0)
		rc = -CP_E_SYS;
	if (rc == 0)
		rc = stream_status(tl, NULL);
	int saved = errno;
	cp_timeline_free(tl);
	errno = saved;
	return rc;
}

void cp_timeline_free(struct cp_timeline *tl)
{
	if (!tl)
		return;
	for (size_t i = 0; i < tl->nthreads; i++)
		thread_free(tl, tl->threads[i]);
	free(tl->threads);
	free(tl->infos);
	cp_hashidx_free(&tl->thread_index);
	if (tl->ws)
		tl->w->close(tl->ws);
	free(tl->process_name);
	free(tl->lens);
	free(tl);
}

/* ------------------------------------------------------------ raw text */

/* How many bytes A and B (N each) have in common from the start.  */
static size_t common_prefix(const char *a, const char *b, size_t n)
{
	size_t i = 0;
#if defined(__SSE2__)
	/* Sixteen bytes at a time; the lowest differing byte is the first. */
	for (; i + 16 <= n; i += 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)(a + i));
		__m128i y = _mm_loadu_si128((const __m128i *)(const void *)(b + i));
		unsigned same = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, y));
		if (same != 0xffff)
			return i + (size_t)__builtin_ctz(~same);
	}
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* Eight bytes at a time; the lowest differing byte is the first.  */
	for (; i + 8 <= n; i += 8) {
		uint64_t x, y;
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		if (x != y)
			return i + (size_t)(__builtin_ctzll(x ^ y) >> 3);
	}
#endif
	while (i < n && a[i] == b[i])
		i++;
	return i;
}

/* A raw sample line (cp_raw_read's callback).  */
static int raw_sample(void *arg, const struct cp_raw_sample *s)
{
	struct cp_timeline *tl = arg;
	struct thread *t;
	int rc = sample_begin(tl, s->seconds, s->tid, &t);
	if (rc == -CP_E_PARSE) {
		cp_raw_fail(s->reader, "time goes backwards in thread %d: %s after %s",
			    (int)s->tid, s->seconds_text, tl->recent->last_text);
		return rc;
	}
	if (rc < 0)
		return rc;

	/* The frames the stack shares with the thread's previous one, found
	 * on the text: the thread keeps its names joined by ';' as the line
	 * does, so one comparison of bytes finds them, and only the rest of
	 * the line needs splitting and checking.  */
	size_t stack_len = s->stack_len;
	size_t common = common_prefix(s->stack, t->names,
				      stack_len < t->names_len ? stack_len
							       : t->names_len);
	/* Kept: the frames whose ';' matched too (the ends of the frames
	 * grow with depth: a binary search), and the next one if the line
	 * ends right after it.  */
	size_t keep = 0, hi = t->depth;
	while (keep < hi) {
		size_t mid = keep + (hi - keep) / 2;
		if (t->stack[mid].name_off + t->stack[mid].name_len < common)
			keep = mid + 1;
		else
			hi = mid;
	}
	if (keep < t->depth && common == stack_len &&
	    t->stack[keep].name_off + t->stack[keep].name_len == stack_len)
		keep++;
	size_t at = keep ? t->stack[keep - 1].name_off +
				   t->stack[keep - 1].name_len
			 : 0;
	const char *const *frames;
	const size_t *lens;
	size_t nnew;
	rc = cp_raw_frames(s, keep, at, &frames, &lens, &nnew);
	if (rc < 0)
		return rc;
	rc = sample_apply(tl, t, s->seconds_text, s->seconds, s->weight, keep,
			  frames, lens, nnew);
	if (rc == -CP_E_SYS) {
		const char *dir = tl->w->spool_dir ? tl->w->spool_dir(tl->ws)
						   : "";
		if (dir[0])
			cp_raw_fail(s->reader, "cannot create a temporary file in %s: %s (set TMPDIR to a writable directory)",
				    dir, strerror(errno));
		else
			cp_raw_fail(s->reader, "cannot write: %s",
				    strerror(errno));
	} else if (rc == -CP_E_NOMEM) {
		cp_raw_fail(s->reader, "out of memory");
	}
	return rc;
}

static int raw_thread(void *arg, pid_t tid, const char *name)
{
	return cp_timeline_thread_name(arg, tid, name);
}

static int raw_target(void *arg, pid_t pid, const char *name)
{
	int rc = cp_timeline_process(arg, pid, name);
	return rc == -CP_E_INVAL ? 0 : rc; /* too late: samples came first */
}

static int raw_frequency(void *arg, double hz)
{
	struct cp_timeline *tl = arg;
	if (!tl->tick_fixed)
		tl->tick = 1 / hz;
	return 0;
}

static int raw_weight_unit(void *arg, enum cp_raw_weight_unit unit)
{
	struct cp_timeline *tl = arg;
	tl->weight_unit = unit == CP_RAW_WEIGHT_SAMPLES	      ? WEIGHT_TICKS
			  : unit == CP_RAW_WEIGHT_NANOSECONDS ? WEIGHT_NS
							      : WEIGHT_UNKNOWN;
	return 0;
}

int cp_timeline_read_raw(struct cp_timeline *tl, FILE *in, const char *name,
			 char *error, size_t error_size)
{
	static const struct cp_raw_callbacks callbacks = {
		.sample = raw_sample,
		.thread = raw_thread,
		.target = raw_target,
		.frequency = raw_frequency,
		.weight_unit = raw_weight_unit,
	};
	return cp_raw_read(in, name, &callbacks, tl, error, error_size);
}

int cp_timeline_convert(const struct cp_timeline_options *options, FILE *in,
			const char *name, FILE *out, bool spool,
			const char **spool_dir, char *error, size_t error_size)
{
	if (error && error_size)
		error[0] = '\0';
	if (spool_dir)
		*spool_dir = NULL;
	FILE *dest = out, *sp = NULL;
	char *buffer = NULL;
	if (spool) {
		const char *dir;
		sp = cp_spool_new("cprof", &dir);
		if (!sp) {
			if (spool_dir)
				*spool_dir = dir;
			return -CP_E_SYS;
		}
		/* A large buffer saves system calls on big outputs (glibc
		 * takes the size only with a buffer given); it outlives the
		 * spool.  */
		buffer = malloc(1 << 20);
		if (buffer)
			setvbuf(sp, buffer, _IOFBF, 1 << 20);
		dest = sp;
	}
	struct cp_timeline *tl;
	int rc = cp_timeline_new(options, dest, &tl);
	if (rc < 0 && error && error_size)
		snprintf(error, error_size, "%s", cp_strerror(rc));
	if (rc == 0)
		rc = cp_timeline_read_raw(tl, in, name, error, error_size);
	if (rc < 0) {
		cp_timeline_free(tl);
	} else {
		rc = cp_timeline_finish(tl);
		if (rc == 0 && sp)
			rc = cp_spool_copy(sp, out);
		if (rc == 0 && fflush(out) != 0)
			rc = -CP_E_SYS;
	}
	int saved = errno;
	if (sp)
		fclose(sp);
	free(buffer);
	errno = saved;
	return rc;
}
