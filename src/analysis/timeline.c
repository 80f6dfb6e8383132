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
 * The writers share one shape: the part of an event line that depends only
 * on the sample (timestamp, thread) is formatted once per sample, when the
 * sample emits its first event; each event adds its kind and name, and
 * the events of a sample go out in one write.  The stream is written with
 * the unlocked stdio calls: a timeline is used from one thread.  */
#include "cprof/timeline.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cprof/dump.h"
#include "cprof/error.h"
#include "cprof/rawread.h"
#include "util/grow.h"
#include "util/hashidx.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#ifndef CP_VERSION
#define CP_VERSION "unknown"
#endif

/* Timestamps beyond this many seconds cannot be written in nanoseconds
 * as a 64-bit integer (about 285 years).  */
#define MAX_SECONDS 9.0e9

struct frame {
	size_t name_off;   /* of the name in the thread's NAMES */
	size_t name_len;
	uint64_t born;     /* the thread's sample number (from 1) it appeared in */
	uint32_t shared;   /* speedscope: its index in shared.frames, once
			    * started */
};

struct thread {
	pid_t tid;
	char *name;            /* from cp_timeline_thread_name(); NULL: none */
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
	FILE *spool;           /* speedscope: the thread's events so far */
	uint64_t spooled;      /* events in SPOOL (for the commas) */
};

struct cp_timeline {
	enum cp_timeline_format format;
	unsigned min_samples;
	FILE *out;
	pid_t pid;             /* 0: unknown */
	char *process_name;
	char *doc_name;        /* speedscope */
	bool begun;            /* trace: the head of the document is out */
	/* What a unit of weight stands for: TICK seconds (the sampling
	 * period) or a nanosecond; unknown when TICK is 0 or the raw header
	 * named another unit.  */
	double tick;
	bool tick_fixed;       /* given by the options: headers keep it */
	enum { WEIGHT_TICKS, WEIGHT_NS, WEIGHT_UNKNOWN } weight_unit;
	double min_gap;        /* smallest interval between two samples of
				* one thread; 0: none yet */
	uint64_t written;      /* trace: events written (for the commas) */

	struct thread **threads;  /* in order of first appearance */
	size_t nthreads, threads_cap;
	struct cp_hashidx thread_index;  /* tid -> index in THREADS */
	struct thread *recent;            /* the last thread looked up */

	/* speedscope: shared.frames, names back to back, NUL-terminated */
	char *shared_names;
	size_t shared_len, shared_cap;
	size_t *shared_off;
	uint32_t nshared;
	size_t shared_off_cap;
	struct cp_hashidx shared_index;

	/* The events of the sample at hand, written out in one piece at
	 * its end (events and trace; speedscope spools per thread).  */
	char *batch;
	size_t batch_len, batch_cap;

	/* The per-sample part of an event, formatted on first use.  */
	char *middle;
	size_t middle_len, middle_cap;
	bool middle_ready;

	size_t *lens;          /* cp_timeline_sample(): lengths of the frames */
	size_t lens_cap;
	char spool_dir[128];   /* where a spool could not be created, or "" */
};

/* ------------------------------------------------------------ helpers */

static void put(FILE *f, const char *s)
{
	fputs_unlocked(s, f);
}

static void put_n(FILE *f, const char *s, size_t n)
{
	fwrite_unlocked(s, 1, n, f);
}

/* V in decimal into BUF (at least 24 bytes); returns the length.  */
static size_t format_i64(char *buf, int64_t v)
{
	char tmp[24];
	char *end = tmp + sizeof(tmp), *at = end;
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	do {
		*--at = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--at = '-';
	size_t n = (size_t)(end - at);
	memcpy(buf, at, n);
	return n;
}

static void put_i64(FILE *f, int64_t v)
{
	char buf[24];
	put_n(f, buf, format_i64(buf, v));
}

/* TS seconds as microseconds, with three decimals (nanoseconds) only
 * when they are not all zero: "12004187", "1000001.500".  Returns the
 * length.  */
static size_t format_us(char *buf, double ts)
{
	/* Rounded half away from zero, as llround() would (no libm).  */
	double scaled = ts * 1e9;
	int64_t ns = (int64_t)(scaled < 0 ? scaled - 0.5 : scaled + 0.5);
	uint64_t mag = ns < 0 ? -(uint64_t)ns : (uint64_t)ns;
	size_t n = 0;
	if (ns < 0)
		buf[n++] = '-';
	n += format_i64(buf + n, (int64_t)(mag / 1000));
	unsigned frac = (unsigned)(mag % 1000);
	if (frac) {
		buf[n++] = '.';
		buf[n++] = (char)('0' + frac / 100);
		buf[n++] = (char)('0' + frac / 10 % 10);
		buf[n++] = (char)('0' + frac % 10);
	}
	return n;
}

/* Can NAME (LEN bytes) go into a JSON string as it is?  */
static bool plain_json(const char *name, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c < 0x20 || c == '"' || c == '\\')
			return false;
	}
	return true;
}

/* NAME (LEN bytes) as a JSON string.  */
static void put_json(FILE *f, const char *name, size_t len)
{
	if (!plain_json(name, len)) {
		char *copy = strndup(name, len);
		cp_json_string(f, copy ? copy : "?");
		free(copy);
		return;
	}
	putc_unlocked('"', f);
	put_n(f, name, len);
	putc_unlocked('"', f);
}

static bool middle_append(struct cp_timeline *tl, const char *s, size_t n)
{
	if (!cp_grow((void **)&tl->middle, &tl->middle_cap,
		     tl->middle_len + n + 1, 1, 16))
		return false;
	memcpy(tl->middle + tl->middle_len, s, n);
	tl->middle_len += n;
	tl->middle[tl->middle_len] = '\0';
	return true;
}

/* --------------------------------------------------------------- threads */

struct thread_key {
	const struct cp_timeline *tl;
	pid_t tid;
};

static bool thread_key_eq(const void *ctx, uint32_t id)
{
	const struct thread_key *k = ctx;
	return k->tl->threads[id]->tid == k->tid;
}

/* The state of thread TID, created on first sight.  NULL when out of
 * memory.  */
static struct thread *thread_get(struct cp_timeline *tl, pid_t tid)
{
	if (tl->recent && tl->recent->tid == tid)
		return tl->recent;
	uint64_t hash = cp_hash_u64((uint64_t)(uint32_t)tid);
	struct thread_key key = {tl, tid};
	uint32_t id = cp_hashidx_find(&tl->thread_index, hash, thread_key_eq,
				      &key);
	if (id != UINT32_MAX)
		return tl->recent = tl->threads[id];
	if (tl->nthreads >= UINT32_MAX - 1 ||
	    !cp_grow((void **)&tl->threads, &tl->threads_cap, tl->nthreads + 1,
		     sizeof(*tl->threads), 16))
		return NULL;
	struct thread *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->tid = tid;
	if (!cp_hashidx_insert(&tl->thread_index, hash,
			       (uint32_t)tl->nthreads)) {
		free(t);
		return NULL;
	}
	tl->threads[tl->nthreads++] = t;
	return tl->recent = t;
}

static void thread_free(struct thread *t)
{
	if (!t)
		return;
	if (t->spool)
		fclose(t->spool);
	free(t->name);
	free(t->stack);
	free(t->names);
	free(t);
}

/* --------------------------------------------------- speedscope frames */

struct shared_key {
	const struct cp_timeline *tl;
	const char *name;
	size_t len;
};

static bool shared_eq(const void *ctx, uint32_t id)
{
	const struct shared_key *k = ctx;
	const char *s = k->tl->shared_names + k->tl->shared_off[id];
	return strncmp(s, k->name, k->len) == 0 && s[k->len] == '\0';
}

/* The index in shared.frames of NAME (LEN bytes), added on first sight;
 * UINT32_MAX when out of memory.  */
static uint32_t shared_frame(struct cp_timeline *tl, const char *name,
			     size_t len)
{
	uint64_t hash = cp_hash_bytes(name, len, 0);
	struct shared_key key = {tl, name, len};
	uint32_t id = cp_hashidx_find(&tl->shared_index, hash, shared_eq, &key);
	if (id != UINT32_MAX)
		return id;
	if (tl->nshared >= UINT32_MAX - 1 ||
	    !cp_grow((void **)&tl->shared_off, &tl->shared_off_cap,
		     (size_t)tl->nshared + 1, sizeof(*tl->shared_off), 16) ||
	    !cp_grow((void **)&tl->shared_names, &tl->shared_cap,
		     tl->shared_len + len + 1, 1, 16))
		return UINT32_MAX;
	memcpy(tl->shared_names + tl->shared_len, name, len);
	tl->shared_names[tl->shared_len + len] = '\0';
	tl->shared_off[tl->nshared] = tl->shared_len;
	if (!cp_hashidx_insert(&tl->shared_index, hash, tl->nshared))
		return UINT32_MAX;
	tl->shared_len += len + 1;
	return tl->nshared++;
}

/* ------------------------------------------------------------- writers */

/* An anonymous temporary file (already unlinked) in $TMPDIR or /tmp:
 * unlike tmpfile(), which always uses /tmp, it goes where the user said
 * there is room.  NULL with errno set on failure, and the directory in
 * TL's SPOOL_DIR for the message.  */
static FILE *spool_file(struct cp_timeline *tl)
{
	const char *dir = getenv("TMPDIR");
	char *path;
	if (!dir || !*dir)
		dir = "/tmp";
	if (asprintf(&path, "%s/cprof-timeline-XXXXXX", dir) < 0)
		return NULL;
	int fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0) {
		int saved = errno;
		snprintf(tl->spool_dir, sizeof(tl->spool_dir), "%s", dir);
		free(path);
		errno = saved;
		return NULL;
	}
	unlink(path);
	free(path);
	FILE *f = fdopen(fd, "w+");
	if (!f) {
		int saved = errno;
		close(fd);
		errno = saved;
	}
	return f;
}

/* Trace: an event object, with the comma that separates it.  */
static void trace_open_event(struct cp_timeline *tl)
{
	put(tl->out, tl->written++ ? ",\n{" : "\n{");
}

static void trace_thread_name(struct cp_timeline *tl, const struct thread *t)
{
	trace_open_event(tl);
	put(tl->out, "\"ph\":\"M\",\"pid\":");
	put_i64(tl->out, tl->pid);
	put(tl->out, ",\"tid\":");
	put_i64(tl->out, t->tid);
	put(tl->out, ",\"name\":\"thread_name\",\"args\":{\"name\":");
	put_json(tl->out, t->name, strlen(t->name));
	put(tl->out, "}}");
}

/* Trace: the head of the document and the names known so far.  The pid
 * is settled from here on.  */
static void trace_begin(struct cp_timeline *tl)
{
	if (tl->begun)
		return;
	tl->begun = true;
	if (!tl->pid && tl->nthreads)
		tl->pid = tl->threads[0]->tid;
	put(tl->out, "{\"traceEvents\":[");
	if (tl->process_name && tl->pid) {
		trace_open_event(tl);
		put(tl->out, "\"ph\":\"M\",\"pid\":");
		put_i64(tl->out, tl->pid);
		put(tl->out, ",\"tid\":");
		put_i64(tl->out, tl->pid);
		put(tl->out, ",\"name\":\"process_name\",\"args\":{\"name\":");
		put_json(tl->out, tl->process_name, strlen(tl->process_name));
		put(tl->out, "}}");
	}
	for (size_t i = 0; i < tl->nthreads; i++)
		if (tl->threads[i]->name)
			trace_thread_name(tl, tl->threads[i]);
}

/* Format the per-sample part of the events of thread T at TS (TS_TEXT as
 * written).  Returns false when out of memory.  */
static bool make_middle(struct cp_timeline *tl, const struct thread *t,
			const char *ts_text, double ts)
{
	char buf[64];
	size_t n;
	tl->middle_len = 0;
	switch (tl->format) {
	case CP_TIMELINE_EVENTS:
		/* "start" + " TS TID " + name */
		if (!middle_append(tl, " ", 1) ||
		    !middle_append(tl, ts_text, strlen(ts_text)))
			return false;
		buf[0] = ' ';
		n = 1 + format_i64(buf + 1, t->tid);
		buf[n++] = ' ';
		return middle_append(tl, buf, n);
	case CP_TIMELINE_TRACE:
		/* "ph":"B" + ","pid":P,"tid":T,"ts":X,"name":" + name + } */
		if (!middle_append(tl, "\",\"pid\":", 8))
			return false;
		n = format_i64(buf, tl->pid);
		memcpy(buf + n, ",\"tid\":", 7);
		n += 7;
		n += format_i64(buf + n, t->tid);
		memcpy(buf + n, ",\"ts\":", 6);
		n += 6;
		n += format_us(buf + n, ts);
		memcpy(buf + n, ",\"name\":", 8);
		n += 8;
		return middle_append(tl, buf, n);
	case CP_TIMELINE_SPEEDSCOPE:
		/* "frame":F + ,"at":X} */
		memcpy(buf, ",\"at\":", 6);
		n = 6 + format_us(buf + 6, ts);
		buf[n++] = '}';
		return middle_append(tl, buf, n);
	}
	return false;
}

/* Room for N more bytes at the end of the batch; NULL when out of
 * memory.  */
static char *batch_room(struct cp_timeline *tl, size_t n)
{
	if (!cp_grow((void **)&tl->batch, &tl->batch_cap, tl->batch_len + n, 1,
		     16))
		return NULL;
	return tl->batch + tl->batch_len;
}

static void batch_flush(struct cp_timeline *tl)
{
	if (tl->batch_len)
		put_n(tl->out, tl->batch, tl->batch_len);
	tl->batch_len = 0;
}

/* Write the start (START) or end of frame F of thread T.  Returns 0 or
 * -CP_E_NOMEM.  */
static int emit(struct cp_timeline *tl, struct thread *t, bool start,
		struct frame *f, const char *ts_text, double ts)
{
	if (!tl->middle_ready) {
		if (!make_middle(tl, t, ts_text, ts))
			return -CP_E_NOMEM;
		tl->middle_ready = true;
	}
	FILE *out = tl->out;
	const char *name = t->names + f->name_off;
	char *at;
	switch (tl->format) {
	case CP_TIMELINE_EVENTS:
		at = batch_room(tl, 6 + tl->middle_len + f->name_len);
		if (!at)
			return -CP_E_NOMEM;
		memcpy(at, start ? "start" : "end", start ? 5 : 3);
		at += start ? 5 : 3;
		memcpy(at, tl->middle, tl->middle_len);
		at += tl->middle_len;
		memcpy(at, name, f->name_len);
		at += f->name_len;
		*at++ = '\n';
		tl->batch_len = (size_t)(at - tl->batch);
		break;
	case CP_TIMELINE_TRACE:
		if (plain_json(name, f->name_len)) {
			at = batch_room(tl, 16 + tl->middle_len + f->name_len);
			if (!at)
				return -CP_E_NOMEM;
			if (tl->written++)
				*at++ = ',';
			memcpy(at, "\n{\"ph\":\"", 8);
			at += 8;
			*at++ = start ? 'B' : 'E';
			memcpy(at, tl->middle, tl->middle_len);
			at += tl->middle_len;
			*at++ = '"';
			memcpy(at, name, f->name_len);
			at += f->name_len;
			*at++ = '"';
			*at++ = '}';
			tl->batch_len = (size_t)(at - tl->batch);
			break;
		}
		batch_flush(tl);
		trace_open_event(tl);
		put(out, start ? "\"ph\":\"B" : "\"ph\":\"E");
		put_n(out, tl->middle, tl->middle_len);
		put_json(out, name, f->name_len);
		putc_unlocked('}', out);
		break;
	case CP_TIMELINE_SPEEDSCOPE:
		if (start) {
			f->shared = shared_frame(tl, name, f->name_len);
			if (f->shared == UINT32_MAX)
				return -CP_E_NOMEM;
		}
		if (!t->spool) {
			t->spool = spool_file(tl);
			if (!t->spool)
				return -CP_E_SYS;
		}
		put(t->spool, t->spooled++ ? ",\n{\"type\":\"" : "\n{\"type\":\"");
		put(t->spool, start ? "O\",\"frame\":" : "C\",\"frame\":");
		put_i64(t->spool, f->shared);
		put_n(t->spool, tl->middle, tl->middle_len);
		break;
	}
	return 0;
}

static int stream_status(const struct cp_timeline *tl, const struct thread *t)
{
	if (ferror(tl->out) || (t && t->spool && ferror(t->spool))) {
		if (!errno)
			errno = EIO;
		return -CP_E_SYS;
	}
	return 0;
}

/* ------------------------------------------------------------- formats */

static const struct cp_timeline_format_info timeline_formats[] = {
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
	if (!o || !out ||
	    (o->format != CP_TIMELINE_EVENTS && o->format != CP_TIMELINE_TRACE &&
	     o->format != CP_TIMELINE_SPEEDSCOPE))
		return -CP_E_INVAL;
	struct cp_timeline *tl = calloc(1, sizeof(*tl));
	if (!tl)
		return -CP_E_NOMEM;
	tl->format = o->format;
	tl->min_samples = o->min_samples ? o->min_samples : 1;
	tl->out = out;
	tl->pid = o->pid;
	if (o->period > 0 && o->period <= MAX_SECONDS) {
		tl->tick = o->period;
		tl->tick_fixed = true;
	}
	if ((o->process_name && !(tl->process_name = strdup(o->process_name))) ||
	    (o->name && !(tl->doc_name = strdup(o->name)))) {
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
	free(t->name);
	t->name = copy;
	if (tl->format == CP_TIMELINE_TRACE && tl->begun) {
		trace_thread_name(tl, t);
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
	if (tl->format == CP_TIMELINE_TRACE && !tl->begun)
		trace_begin(tl);
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
	if (ended && tl->format == CP_TIMELINE_TRACE) {
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
	batch_flush(tl);
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
				batch_flush(tl);
				return rc;
			}
		}
		batch_flush(tl);
	}
	return 0;
}

/* Speedscope: the document, with each thread's spooled events.  */
static int speedscope_write(struct cp_timeline *tl)
{
	FILE *out = tl->out;
	put(out, "{\"$schema\":\"https://www.speedscope.app/"
		 "file-format-schema.json\",\n\"exporter\":\"cprof@" CP_VERSION
		 "\",\"name\":");
	const char *name = tl->doc_name ? tl->doc_name : "cprof timeline";
	put_json(out, name, strlen(name));
	put(out, ",\"activeProfileIndex\":0,\n\"shared\":{\"frames\":[");
	for (uint32_t i = 0; i < tl->nshared; i++) {
		const char *s = tl->shared_names + tl->shared_off[i];
		put(out, i ? ",\n{\"name\":" : "\n{\"name\":");
		put_json(out, s, strlen(s));
		putc_unlocked('}', out);
	}
	put(out, "\n]},\n\"profiles\":[");
	size_t written = 0;
	for (size_t i = 0; i < tl->nthreads; i++) {
		struct thread *t = tl->threads[i];
		if (!t->samples)
			continue;
		char label[64];
		snprintf(label, sizeof(label), "%d", (int)t->tid);
		put(out, written++ ? ",\n{\"type\":\"evented\",\"name\":"
				   : "\n{\"type\":\"evented\",\"name\":");
		if (t->name) {
			char *full;
			if (asprintf(&full, "%s %s", label, t->name) < 0)
				return -CP_E_NOMEM;
			put_json(out, full, strlen(full));
			free(full);
		} else {
			put_json(out, label, strlen(label));
		}
		char buf[32];
		put(out, ",\"unit\":\"microseconds\",\"startValue\":");
		put_n(out, buf, format_us(buf, t->first_ts));
		put(out, ",\"endValue\":");
		put_n(out, buf, format_us(buf, thread_end(tl, t)));
		put(out, ",\"events\":[");
		if (t->spool) {
			if (fflush(t->spool) != 0 || fseek(t->spool, 0, SEEK_SET))
				return -CP_E_SYS;
			char chunk[65536];
			size_t got;
			while ((got = fread_unlocked(chunk, 1, sizeof(chunk),
						     t->spool)) > 0)
				put_n(out, chunk, got);
			if (ferror(t->spool)) {
				if (!errno)
					errno = EIO;
				return -CP_E_SYS;
			}
			fclose(t->spool);
			t->spool = NULL;
		}
		put(out, "\n]}");
	}
	put(out, "\n]}\n");
	return 0;
}

int cp_timeline_finish(struct cp_timeline *tl)
{
	int rc = 0;
	switch (tl->format) {
	case CP_TIMELINE_EVENTS:
		break;
	case CP_TIMELINE_TRACE:
		trace_begin(tl);
		rc = close_open_frames(tl);
		if (rc == 0)
			put(tl->out, "\n],\"displayTimeUnit\":\"ms\","
				     "\"otherData\":{\"exporter\":\"cprof@"
				     CP_VERSION "\"}}\n");
		break;
	case CP_TIMELINE_SPEEDSCOPE:
		rc = close_open_frames(tl);
		for (size_t i = 0; rc == 0 && i < tl->nthreads; i++)
			rc = stream_status(tl, tl->threads[i]);
		if (rc == 0)
			rc = speedscope_write(tl);
		break;
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
		thread_free(tl->threads[i]);
	free(tl->threads);
	cp_hashidx_free(&tl->thread_index);
	free(tl->shared_names);
	free(tl->shared_off);
	cp_hashidx_free(&tl->shared_index);
	free(tl->process_name);
	free(tl->doc_name);
	free(tl->middle);
	free(tl->batch);
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
		if (tl->spool_dir[0])
			cp_raw_fail(s->reader, "cannot create a temporary file in %s: %s (set TMPDIR to a writable directory)",
				    tl->spool_dir, strerror(errno));
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
