/* The timeline's speedscope writer: speedscope's file format with one
 * "evented" profile per thread (balanced "O"/"C" events, microseconds).
 * The engine closes the frames still open at the end.  Each thread's
 * events are spooled to an anonymous temporary file (util/spool.h) and
 * copied out at the end, after the frame names every profile shares.  */
#include <errno.h>

#include "analysis/timeline_writer.h"
#include "cprof/error.h"
#include "formats/timeline_text.h"
#include "util/hashidx.h"
#include "util/spool.h"

#ifndef CP_VERSION
#define CP_VERSION "unknown"
#endif

struct speedscope {
	FILE *out;
	char *doc_name;        /* NULL: "cprof timeline" */
	/* shared.frames: names back to back, NUL-terminated */
	char *names;
	size_t names_len, names_cap;
	size_t *off;
	uint32_t nframes;
	size_t off_cap;
	struct cp_hashidx index;
	struct tt_text middle; /* ,"at":X} */
	char spool_dir[128];   /* where a spool could not be created, or "" */
};

/* A thread's events so far.  */
struct spool {
	FILE *file;
	uint64_t events;       /* for the commas */
};

static int speedscope_open(const struct cp_timeline_options *o, FILE *out,
			   void **state)
{
	struct speedscope *w = calloc(1, sizeof(*w));
	if (!w)
		return -CP_E_NOMEM;
	w->out = out;
	if (o->name && !(w->doc_name = strdup(o->name))) {
		free(w);
		return -CP_E_NOMEM;
	}
	*state = w;
	return 0;
}

static void speedscope_close(void *state)
{
	struct speedscope *w = state;
	free(w->doc_name);
	free(w->names);
	free(w->off);
	cp_hashidx_free(&w->index);
	free(w->middle.data);
	free(w);
}

static void speedscope_thread_free(void *state,
				   struct cp_timeline_thread_info *t)
{
	struct spool *s = t->data;
	if (s && s->file)
		fclose(s->file);
	free(s);
	t->data = NULL;
}

struct frame_key {
	const struct speedscope *w;
	const char *name;
	size_t len;
};

static bool frame_eq(const void *ctx, uint32_t id)
{
	const struct frame_key *k = ctx;
	const char *s = k->w->names + k->w->off[id];
	return strncmp(s, k->name, k->len) == 0 && s[k->len] == '\0';
}

/* The index in shared.frames of NAME (LEN bytes), added on first sight;
 * UINT32_MAX when out of memory.  */
static uint32_t shared_frame(struct speedscope *w, const char *name,
			     size_t len)
{
	uint64_t hash = cp_hash_bytes(name, len, 0);
	struct frame_key key = {w, name, len};
	uint32_t id = cp_hashidx_find(&w->index, hash, frame_eq, &key);
	if (id != UINT32_MAX)
		return id;
	if (w->nframes >= UINT32_MAX - 1 ||
	    !cp_grow((void **)&w->off, &w->off_cap, (size_t)w->nframes + 1,
		     sizeof(*w->off), 16) ||
	    !cp_grow((void **)&w->names, &w->names_cap,
		     w->names_len + len + 1, 1, 16))
		return UINT32_MAX;
	memcpy(w->names + w->names_len, name, len);
	w->names[w->names_len + len] = '\0';
	w->off[w->nframes] = w->names_len;
	if (!cp_hashidx_insert(&w->index, hash, w->nframes))
		return UINT32_MAX;
	w->names_len += len + 1;
	return w->nframes++;
}

static int speedscope_event(void *state, struct cp_timeline_thread_info *t,
			    bool start, const char *name, size_t len,
			    uint32_t *slot, const char *ts_text, double ts,
			    bool new_time)
{
	struct speedscope *w = state;
	if (new_time) {
		char buf[40];
		memcpy(buf, ",\"at\":", 6);
		size_t n = 6 + tt_format_us(buf + 6, ts);
		buf[n++] = '}';
		w->middle.len = 0;
		if (!tt_append(&w->middle, buf, n))
			return -CP_E_NOMEM;
	}
	if (start) {
		*slot = shared_frame(w, name, len);
		if (*slot == UINT32_MAX)
			return -CP_E_NOMEM;
	}
	struct spool *s = t->data;
	if (!s) {
		s = t->data = calloc(1, sizeof(*s));
		if (!s)
			return -CP_E_NOMEM;
	}
	if (!s->file) {
		const char *dir;
		s->file = cp_spool_new("cprof-timeline", &dir);
		if (!s->file) {
			int saved = errno;
			snprintf(w->spool_dir, sizeof(w->spool_dir), "%s", dir);
			errno = saved;
			return -CP_E_SYS;
		}
	}
	tt_put(s->file, s->events++ ? ",\n{\"type\":\"" : "\n{\"type\":\"");
	tt_put(s->file, start ? "O\",\"frame\":" : "C\",\"frame\":");
	tt_put_i64(s->file, *slot);
	tt_put_n(s->file, w->middle.data, w->middle.len);
	return 0;
}

static void speedscope_flush(void *state)
{
}

static bool speedscope_failed(void *state,
			      const struct cp_timeline_thread_info *t)
{
	const struct spool *s = t ? t->data : NULL;
	return s && s->file && ferror(s->file);
}

/* The document, with each thread's spooled events.  */
static int speedscope_finish(void *state,
			     struct cp_timeline_thread_info *const *threads,
			     size_t n)
{
	struct speedscope *w = state;
	FILE *out = w->out;
	tt_put(out, "{\"$schema\":\"https://www.speedscope.app/"
		    "file-format-schema.json\",\n\"exporter\":\"cprof@" CP_VERSION
		    "\",\"name\":");
	const char *name = w->doc_name ? w->doc_name : "cprof timeline";
	tt_put_json(out, name, strlen(name));
	tt_put(out, ",\"activeProfileIndex\":0,\n\"shared\":{\"frames\":[");
	for (uint32_t i = 0; i < w->nframes; i++) {
		const char *s = w->names + w->off[i];
		tt_put(out, i ? ",\n{\"name\":" : "\n{\"name\":");
		tt_put_json(out, s, strlen(s));
		putc_unlocked('}', out);
	}
	tt_put(out, "\n]},\n\"profiles\":[");
	size_t written = 0;
	for (size_t i = 0; i < n; i++) {
		struct cp_timeline_thread_info *t = threads[i];
		if (!t->samples)
			continue;
		char label[64];
		snprintf(label, sizeof(label), "%d", (int)t->tid);
		tt_put(out, written++ ? ",\n{\"type\":\"evented\",\"name\":"
				      : "\n{\"type\":\"evented\",\"name\":");
		if (t->name) {
			char *full;
			if (asprintf(&full, "%s %s", label, t->name) < 0)
				return -CP_E_NOMEM;
			tt_put_json(out, full, strlen(full));
			free(full);
		} else {
			tt_put_json(out, label, strlen(label));
		}
		char buf[32];
		tt_put(out, ",\"unit\":\"microseconds\",\"startValue\":");
		tt_put_n(out, buf, tt_format_us(buf, t->first_ts));
		tt_put(out, ",\"endValue\":");
		tt_put_n(out, buf, tt_format_us(buf, t->end_ts));
		tt_put(out, ",\"events\":[");
		struct spool *s = t->data;
		if (s && s->file) {
			int rc = cp_spool_copy(s->file, out);
			if (rc < 0)
				return rc;
			fclose(s->file);
			s->file = NULL;
		}
		tt_put(out, "\n]}");
	}
	tt_put(out, "\n]}\n");
	return 0;
}

static const char *speedscope_spool_dir(void *state)
{
	return ((struct speedscope *)state)->spool_dir;
}

const struct cp_timeline_writer cp_timeline_writer_speedscope = {
	.closes_frames = true,
	.open = speedscope_open,
	.close = speedscope_close,
	.thread_free = speedscope_thread_free,
	.event = speedscope_event,
	.flush = speedscope_flush,
	.failed = speedscope_failed,
	.finish = speedscope_finish,
	.spool_dir = speedscope_spool_dir,
};
