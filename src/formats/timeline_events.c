/* The timeline's events writer: one line per event, "KIND TIMESTAMP TID
 * NAME", KIND start or end, TIMESTAMP as the input wrote it; frames still
 * open at the end are not closed.  The part of a line that depends only
 * on the sample (" TIMESTAMP TID ") is formatted once per sample, and a
 * sample's lines go out in one write.  */
#include "analysis/timeline_writer.h"
#include "cprof/error.h"
#include "formats/timeline_text.h"

struct events {
	FILE *out;
	struct tt_text batch;  /* the sample's lines */
	struct tt_text middle; /* " TIMESTAMP TID " */
};

static int events_open(const struct cp_timeline_options *o, FILE *out,
		       void **state)
{
	struct events *w = calloc(1, sizeof(*w));
	if (!w)
		return -CP_E_NOMEM;
	w->out = out;
	*state = w;
	return 0;
}

static void events_close(void *state)
{
	struct events *w = state;
	free(w->batch.data);
	free(w->middle.data);
	free(w);
}

static int events_event(void *state, struct cp_timeline_thread_info *t,
			bool start, const char *name, size_t len,
			uint32_t *slot, const char *ts_text, double ts,
			bool new_time)
{
	struct events *w = state;
	if (new_time) {
		char buf[32];
		size_t n = 1;
		buf[0] = ' ';
		n += tt_format_i64(buf + 1, t->tid);
		buf[n++] = ' ';
		w->middle.len = 0;
		if (!tt_append(&w->middle, " ", 1) ||
		    !tt_append(&w->middle, ts_text, strlen(ts_text)) ||
		    !tt_append(&w->middle, buf, n))
			return -CP_E_NOMEM;
	}
	char *at = tt_room(&w->batch, 6 + w->middle.len + len);
	if (!at)
		return -CP_E_NOMEM;
	memcpy(at, start ? "start" : "end", start ? 5 : 3);
	at += start ? 5 : 3;
	memcpy(at, w->middle.data, w->middle.len);
	at += w->middle.len;
	memcpy(at, name, len);
	at += len;
	*at++ = '\n';
	w->batch.len = (size_t)(at - w->batch.data);
	return 0;
}

static void events_flush(void *state)
{
	struct events *w = state;
	tt_flush(&w->batch, w->out);
}

const struct cp_timeline_writer cp_timeline_writer_events = {
	.open = events_open,
	.close = events_close,
	.event = events_event,
	.flush = events_flush,
};
