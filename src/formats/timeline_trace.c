/* The timeline's trace writer: Chrome Trace Event JSON,
 * {"traceEvents":[...]}: "M" events naming the process and the threads,
 * "B"/"E" events with "ts" in microseconds (nanosecond decimals when
 * needed).  The engine closes the frames still open at the end and puts
 * starts that follow ends 1 ns after them (starts_after_ends).  The part
 * of an event that depends only on the sample is formatted once per
 * sample and time, and a sample's events go out in one write.  */
#include "analysis/timeline_writer.h"
#include "cprof/error.h"
#include "formats/timeline_text.h"

#ifndef CP_VERSION
#define CP_VERSION "unknown"
#endif

struct trace {
	FILE *out;
	pid_t pid;             /* settled at begin */
	uint64_t written;      /* events written (for the commas) */
	struct tt_text batch;  /* the sample's events */
	struct tt_text middle; /* ","pid":P,"tid":T,"ts":X,"name": */
};

static int trace_open(const struct cp_timeline_options *o, FILE *out,
		      void **state)
{
	struct trace *w = calloc(1, sizeof(*w));
	if (!w)
		return -CP_E_NOMEM;
	w->out = out;
	*state = w;
	return 0;
}

static void trace_close(void *state)
{
	struct trace *w = state;
	free(w->batch.data);
	free(w->middle.data);
	free(w);
}

/* An event object, with the comma that separates it.  */
static void open_event(struct trace *w)
{
	tt_put(w->out, w->written++ ? ",\n{" : "\n{");
}

static void trace_thread_named(void *state, struct cp_timeline_thread_info *t)
{
	struct trace *w = state;
	open_event(w);
	tt_put(w->out, "\"ph\":\"M\",\"pid\":");
	tt_put_i64(w->out, w->pid);
	tt_put(w->out, ",\"tid\":");
	tt_put_i64(w->out, t->tid);
	tt_put(w->out, ",\"name\":\"thread_name\",\"args\":{\"name\":");
	tt_put_json(w->out, t->name, strlen(t->name));
	tt_put(w->out, "}}");
}

/* The head of the document and the names known so far.  */
static void trace_begin(void *state, pid_t pid, const char *process_name,
			struct cp_timeline_thread_info *const *threads,
			size_t n)
{
	struct trace *w = state;
	w->pid = pid;
	tt_put(w->out, "{\"traceEvents\":[");
	if (process_name && pid) {
		open_event(w);
		tt_put(w->out, "\"ph\":\"M\",\"pid\":");
		tt_put_i64(w->out, pid);
		tt_put(w->out, ",\"tid\":");
		tt_put_i64(w->out, pid);
		tt_put(w->out, ",\"name\":\"process_name\",\"args\":{\"name\":");
		tt_put_json(w->out, process_name, strlen(process_name));
		tt_put(w->out, "}}");
	}
	for (size_t i = 0; i < n; i++)
		if (threads[i]->name)
			trace_thread_named(w, threads[i]);
}

static int trace_event(void *state, struct cp_timeline_thread_info *t,
		       bool start, const char *name, size_t len,
		       uint32_t *slot, const char *ts_text, double ts,
		       bool new_time)
{
	struct trace *w = state;
	if (new_time) {
		/* "ph":"B" + ","pid":P,"tid":T,"ts":X,"name":" + name + } */
		char buf[96];
		size_t n = 0;
		memcpy(buf, "\",\"pid\":", 8);
		n = 8;
		n += tt_format_i64(buf + n, w->pid);
		memcpy(buf + n, ",\"tid\":", 7);
		n += 7;
		n += tt_format_i64(buf + n, t->tid);
		memcpy(buf + n, ",\"ts\":", 6);
		n += 6;
		n += tt_format_us(buf + n, ts);
		memcpy(buf + n, ",\"name\":", 8);
		n += 8;
		w->middle.len = 0;
		if (!tt_append(&w->middle, buf, n))
			return -CP_E_NOMEM;
	}
	if (tt_plain_json(name, len)) {
		char *at = tt_room(&w->batch, 16 + w->middle.len + len);
		if (!at)
			return -CP_E_NOMEM;
		if (w->written++)
			*at++ = ',';
		memcpy(at, "\n{\"ph\":\"", 8);
		at += 8;
		*at++ = start ? 'B' : 'E';
		memcpy(at, w->middle.data, w->middle.len);
		at += w->middle.len;
		*at++ = '"';
		memcpy(at, name, len);
		at += len;
		*at++ = '"';
		*at++ = '}';
		w->batch.len = (size_t)(at - w->batch.data);
		return 0;
	}
	tt_flush(&w->batch, w->out);
	open_event(w);
	tt_put(w->out, start ? "\"ph\":\"B" : "\"ph\":\"E");
	tt_put_n(w->out, w->middle.data, w->middle.len);
	tt_put_json(w->out, name, len);
	putc_unlocked('}', w->out);
	return 0;
}

static void trace_flush(void *state)
{
	struct trace *w = state;
	tt_flush(&w->batch, w->out);
}

static int trace_finish(void *state,
			struct cp_timeline_thread_info *const *threads,
			size_t n)
{
	struct trace *w = state;
	tt_put(w->out, "\n],\"displayTimeUnit\":\"ms\","
		       "\"otherData\":{\"exporter\":\"cprof@" CP_VERSION
		       "\"}}\n");
	return 0;
}

const struct cp_timeline_writer cp_timeline_writer_trace = {
	.starts_after_ends = true,
	.closes_frames = true,
	.open = trace_open,
	.close = trace_close,
	.begin = trace_begin,
	.thread_named = trace_thread_named,
	.event = trace_event,
	.flush = trace_flush,
	.finish = trace_finish,
};
