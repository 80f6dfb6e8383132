/* Fuzz the raw-samples reader, cp_timeline_read_raw(), and the timeline
 * engine behind it, in its three output formats.
 *
 * The input is the text of a raw file (cprof-attach --format raw).  The
 * debounce setting (MIN_SAMPLES 1 to 3) is chosen from a hash of the
 * input, so every byte stays text and a crash reproduces from the file.
 * What must hold, beyond no crash, leak or undefined behaviour:
 *   - events: per thread, every end closes the innermost started frame
 *     (the starts and ends nest);
 *   - the same samples given one by one to cp_timeline_sample_weighted()
 *     give the same events (the reader finds the common prefix on the
 *     text, the API compares frame by frame: two roads to one answer;
 *     a "# fields ... WEIGHT ..." header puts a weight after the TID);
 *   - trace and speedscope: the output is JSON, with as many ends as
 *     starts (frames still open are closed at the end).  */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/timeline.h"
#include "fuzzutil.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* Speedscope spools each thread's events to a temporary file in
	 * $TMPDIR: memory, not a disk, when there is a choice.  */
	if (access("/dev/shm", W_OK) == 0)
		setenv("TMPDIR", "/dev/shm", 1);
	return 0;
}

struct output {
	char *text;
	size_t len;
	FILE *stream;
};

/* Run the reader on DATA in FORMAT.  Returns its result; *OUT holds what
 * was written (complete only on success).  */
static int convert(const uint8_t *data, size_t size,
		   enum cp_timeline_format format, unsigned min_samples,
		   struct output *out)
{
	struct cp_timeline_options options = {
		.format = format,
		.min_samples = min_samples,
	};
	struct cp_timeline *tl;
	char error[256];
	out->stream = open_memstream(&out->text, &out->len);
	FUZZ_CHECK(out->stream != NULL, "open_memstream failed");
	int rc = cp_timeline_new(&options, out->stream, &tl);
	FUZZ_CHECK(rc == 0, "cp_timeline_new: %s", cp_strerror(rc));
	FILE *in = fuzz_stream(data, size);
	rc = cp_timeline_read_raw(tl, in, "fuzz", error, sizeof(error));
	fclose(in);
	if (rc == 0) {
		rc = cp_timeline_finish(tl);
		FUZZ_CHECK(rc == 0, "cp_timeline_finish: %s", cp_strerror(rc));
	} else {
		FUZZ_CHECK(rc == -CP_E_PARSE, "unexpected error %s: %s",
			   cp_strerror(rc), error);
		FUZZ_CHECK(error[0] != '\0', "an error without a message");
		cp_timeline_free(tl);
	}
	fclose(out->stream);
	return rc;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* ------------------------------------------------------ events nest */

struct open_frames {
	long tid;
	const char **names; /* into the output text, each ending at '\n' */
	size_t *lens;
	size_t depth, cap;
};

/* Every "end" of the events TEXT closes the innermost open frame of its
 * thread.  */
static void check_nesting(const char *text, size_t len)
{
	struct open_frames *threads = NULL;
	size_t nthreads = 0;
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		FUZZ_CHECK(eol != NULL, "events output ends without a newline");
		bool start = (size_t)(eol - p) > 6 && memcmp(p, "start ", 6) == 0;
		FUZZ_CHECK(start || ((size_t)(eol - p) > 4 &&
				     memcmp(p, "end ", 4) == 0),
			   "an event line that is neither start nor end");
		const char *q = memchr(p, ' ', (size_t)(eol - p)) + 1;
		q = memchr(q, ' ', (size_t)(eol - q)); /* after the timestamp */
		FUZZ_CHECK(q != NULL, "an event line without a thread");
		char *after;
		long tid = strtol(q + 1, &after, 10);
		FUZZ_CHECK(after < eol && *after == ' ',
			   "an event line without a name");
		const char *name = after + 1;
		size_t name_len = (size_t)(eol - name);

		struct open_frames *t = NULL;
		for (size_t i = 0; i < nthreads && !t; i++)
			if (threads[i].tid == tid)
				t = &threads[i];
		if (!t) {
			threads = realloc(threads, (nthreads + 1) * sizeof(*t));
			FUZZ_CHECK(threads != NULL, "out of memory");
			t = &threads[nthreads++];
			*t = (struct open_frames){.tid = tid};
		}
		if (start) {
			if (t->depth == t->cap) {
				t->cap = t->cap ? 2 * t->cap : 16;
				t->names = realloc(t->names,
						   t->cap * sizeof(*t->names));
				t->lens = realloc(t->lens,
						  t->cap * sizeof(*t->lens));
				FUZZ_CHECK(t->names && t->lens, "out of memory");
			}
			t->names[t->depth] = name;
			t->lens[t->depth++] = name_len;
		} else {
			FUZZ_CHECK(t->depth > 0,
				   "thread %ld: an end with nothing open", tid);
			t->depth--;
			FUZZ_CHECK(t->lens[t->depth] == name_len &&
					   memcmp(t->names[t->depth], name,
						  name_len) == 0,
				   "thread %ld: end of '%.*s' while '%.*s' is "
				   "the innermost open frame",
				   tid, (int)name_len, name,
				   (int)t->lens[t->depth], t->names[t->depth]);
		}
		p = eol + 1;
	}
	for (size_t i = 0; i < nthreads; i++) {
		free(threads[i].names);
		free(threads[i].lens);
	}
	free(threads);
}

/* ------------------------------------------------- the API's answer */

/* The words of TEXT (blank-separated) joined by single spaces, into OUT
 * (OUT_SIZE bytes; cut).  */
static void words_of(const char *text, char *out, size_t out_size)
{
	size_t n = 0;
	while (*text) {
		while (is_blank(*text))
			text++;
		if (!*text)
			break;
		if (n && n + 1 < out_size)
			out[n++] = ' ';
		while (*text && !is_blank(*text)) {
			if (n + 1 < out_size)
				out[n++] = *text;
			text++;
		}
	}
	out[n] = '\0';
}

/* The events of the samples of DATA (which the reader accepted), given
 * to cp_timeline_sample() one at a time.  */
static void replay(const uint8_t *data, size_t size, unsigned min_samples,
		   struct output *out)
{
	struct cp_timeline_options options = {
		.format = CP_TIMELINE_EVENTS,
		.min_samples = min_samples,
	};
	struct cp_timeline *tl;
	out->stream = open_memstream(&out->text, &out->len);
	FUZZ_CHECK(out->stream != NULL, "open_memstream failed");
	int rc = cp_timeline_new(&options, out->stream, &tl);
	FUZZ_CHECK(rc == 0, "cp_timeline_new: %s", cp_strerror(rc));

	char *text = malloc(size + 1);
	FUZZ_CHECK(text != NULL, "out of memory");
	memcpy(text, data, size);
	text[size] = '\0';
	const char **frames = NULL;
	size_t frames_cap = 0;
	bool weighted = false; /* "# fields SECONDS TID WEIGHT STACK" */
	char *p = text, *end = text + size;
	if (size >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
		p += 3;
	while (p < end) {
		char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			eol = end;
		char *next = eol + 1;
		while (eol > p && is_blank(eol[-1]))
			eol--;
		*eol = '\0';
		while (p < eol && is_blank(*p))
			p++;
		if (p < eol && *p == '#') {
			char words[64];
			words_of(p + 1, words, sizeof(words));
			if (strcmp(words, "fields SECONDS TID WEIGHT STACK") == 0)
				weighted = true;
			else if (strcmp(words, "fields SECONDS TID STACK") == 0)
				weighted = false;
		}
		if (p == eol || *p == '#') { /* headers: not in events */
			p = next;
			continue;
		}
		char *ts = p;
		while (p < eol && !is_blank(*p))
			p++;
		FUZZ_CHECK(p < eol, "a sample line without a thread id");
		*p++ = '\0';
		while (p < eol && is_blank(*p))
			p++;
		char *after;
		long tid = strtol(p, &after, 10);
		p = after;
		while (p < eol && is_blank(*p))
			p++;
		unsigned long long weight = 1;
		if (weighted) {
			weight = strtoull(p, &after, 10);
			p = after;
			while (p < eol && is_blank(*p))
				p++;
		}
		size_t nframes = 0;
		while (p < eol) {
			char *semi = memchr(p, ';', (size_t)(eol - p));
			if (nframes == frames_cap) {
				frames_cap = frames_cap ? 2 * frames_cap : 64;
				frames = realloc(frames,
						 frames_cap * sizeof(*frames));
				FUZZ_CHECK(frames != NULL, "out of memory");
			}
			frames[nframes++] = p;
			if (!semi)
				break;
			*semi = '\0';
			p = semi + 1;
		}
		rc = cp_timeline_sample_weighted(tl, ts, strtod(ts, NULL),
						 (pid_t)tid, weight, frames,
						 nframes);
		FUZZ_CHECK(rc == 0,
			   "cp_timeline_sample_weighted: %s (the reader took it)",
			   cp_strerror(rc));
		p = next;
	}
	rc = cp_timeline_finish(tl);
	FUZZ_CHECK(rc == 0, "cp_timeline_finish: %s", cp_strerror(rc));
	fclose(out->stream);
	free(frames);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned min_samples = 1 + (unsigned)(fuzz_hash(data, size) % 3);
	struct output events, api, trace, speedscope;

	int rc = convert(data, size, CP_TIMELINE_EVENTS, min_samples, &events);
	if (rc == 0) {
		check_nesting(events.text, events.len);
		replay(data, size, min_samples, &api);
		FUZZ_CHECK(api.len == events.len &&
				   memcmp(api.text, events.text, api.len) == 0,
			   "cp_timeline_sample() and the reader disagree:\n"
			   "reader:\n%s\nAPI:\n%s",
			   events.text, api.text);
		free(api.text);
	}
	free(events.text);
	if (rc != 0)
		return 0; /* the other formats read the same way */

	rc = convert(data, size, CP_TIMELINE_TRACE, min_samples, &trace);
	FUZZ_CHECK(rc == 0, "trace: %s where events succeeded",
		   cp_strerror(rc));
	FUZZ_CHECK(fuzz_json_valid(trace.text, trace.len),
		   "trace output is not JSON:\n%s", trace.text);
	FUZZ_CHECK(fuzz_count(trace.text, trace.len, "\"ph\":\"B\"") ==
			   fuzz_count(trace.text, trace.len, "\"ph\":\"E\""),
		   "trace: begins and ends differ in number");
	free(trace.text);

	rc = convert(data, size, CP_TIMELINE_SPEEDSCOPE, min_samples,
		     &speedscope);
	FUZZ_CHECK(rc == 0, "speedscope: %s where events succeeded",
		   cp_strerror(rc));
	FUZZ_CHECK(fuzz_json_valid(speedscope.text, speedscope.len),
		   "speedscope output is not JSON:\n%s", speedscope.text);
	FUZZ_CHECK(fuzz_count(speedscope.text, speedscope.len,
			      "{\"type\":\"O\"") ==
			   fuzz_count(speedscope.text, speedscope.len,
				      "{\"type\":\"C\""),
		   "speedscope: opens and closes differ in number");
	free(speedscope.text);
	return 0;
}
