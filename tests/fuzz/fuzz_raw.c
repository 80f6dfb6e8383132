/* Fuzz the raw-samples reader alone, cp_raw_read() with callbacks, and
 * cp_raw_frames() on what it hands out.
 *
 * The input is the text of a raw file (cprof-attach --format raw).  What
 * must hold, beyond no crash, leak or undefined behaviour:
 *   - every sample delivered has a timestamp within +-CP_RAW_MAX_SECONDS,
 *     a weight from 1, and a stack whose frames (split from the start)
 *     are none empty or blank, hold no ';' or NUL, and joined by ';' give
 *     the stack text back;
 *   - split from the end of any frame on, the frames are the same as the
 *     tail of the whole split (the timeline splits only what its thread's
 *     previous stack did not share);
 *   - header callbacks get what the header says: a thread name not empty
 *     and without a newline, a frequency from 1e-6 to 1e9;
 *   - a failure is -CP_E_PARSE with a message, or the code of the
 *     callback that stopped the reading (at the sample chosen from a hash
 *     of the input) with the callback's message on the sample's line.  */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/rawread.h"
#include "fuzzutil.h"

struct state {
	uint64_t samples;
	uint64_t stop_at;  /* the sample (from 1) whose callback fails; 0:
			    * none */
	const char **frames; /* the whole split, copied out */
	size_t *lens;
	size_t cap;
};

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static int on_sample(void *arg, const struct cp_raw_sample *s)
{
	struct state *st = arg;
	if (++st->samples == st->stop_at) {
		cp_raw_fail(s->reader, "stopped");
		return -CP_E_INVAL;
	}
	FUZZ_CHECK(s->seconds >= -CP_RAW_MAX_SECONDS &&
			   s->seconds <= CP_RAW_MAX_SECONDS,
		   "timestamp %g out of range", s->seconds);
	FUZZ_CHECK(s->weight >= 1, "weight 0");
	FUZZ_CHECK(s->stack[s->stack_len] == '\0',
		   "the stack is not NUL-terminated");
	const char *const *frames;
	const size_t *lens;
	size_t n;
	int rc = cp_raw_frames(s, 0, 0, &frames, &lens, &n);
	if (rc < 0) {
		FUZZ_CHECK(rc == -CP_E_PARSE, "cp_raw_frames: %s",
			   cp_strerror(rc));
		return rc;
	}
	FUZZ_CHECK((n == 0) == (s->stack_len == 0),
		   "%zu frames in a stack of %zu bytes", n, s->stack_len);
	if (n > st->cap) {
		st->cap = n;
		st->frames = realloc(st->frames, n * sizeof(*st->frames));
		st->lens = realloc(st->lens, n * sizeof(*st->lens));
		FUZZ_CHECK(st->frames && st->lens, "out of memory");
	}
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		bool blank = true;
		for (size_t j = 0; j < lens[i]; j++) {
			FUZZ_CHECK(frames[i][j] != ';' && frames[i][j] != '\0',
				   "frame %zu holds ';' or NUL", i);
			blank &= is_blank(frames[i][j]);
		}
		FUZZ_CHECK(lens[i] > 0 && !blank, "frame %zu is blank", i);
		FUZZ_CHECK(frames[i] == s->stack + at,
			   "frame %zu is not where the stack has it", i);
		at += lens[i];
		FUZZ_CHECK(i + 1 == n ? at == s->stack_len
				      : s->stack[at] == ';',
			   "frames joined by ';' are not the stack");
		at++;
		st->frames[i] = frames[i];
		st->lens[i] = lens[i];
	}
	/* From the end of frame K - 1 on: the tail of the same split
	 * (every K of a shallow stack, some sixteen of a deep one).  */
	size_t total = n, step = total > 64 ? total / 16 : 1, end = 0;
	for (size_t k = 1; k <= total; k++) {
		end += st->lens[k - 1] + (k > 1); /* where frame K - 1 ends */
		if (k % step != 0 && k != total)
			continue;
		rc = cp_raw_frames(s, k, end, &frames, &lens, &n);
		FUZZ_CHECK(rc == 0, "cp_raw_frames from frame %zu: %s", k,
			   cp_strerror(rc));
		FUZZ_CHECK(n == total - k, "split from frame %zu: %zu frames of %zu",
			   k, n, total);
		for (size_t i = 0; i < n; i++)
			FUZZ_CHECK(frames[i] == st->frames[k + i] &&
					   lens[i] == st->lens[k + i],
				   "split from frame %zu differs at %zu", k, i);
	}
	return 0;
}

static int on_thread(void *arg, pid_t tid, const char *name)
{
	FUZZ_CHECK(tid > 0, "thread %d", (int)tid);
	FUZZ_CHECK(name[0] != '\0' && !strchr(name, '\n'),
		   "thread name '%s'", name);
	return 0;
}

static int on_target(void *arg, pid_t pid, const char *name)
{
	FUZZ_CHECK(pid > 0, "target %d", (int)pid);
	FUZZ_CHECK(!name || (name[0] != '\0' && !strchr(name, '\n')),
		   "target name '%s'", name);
	return 0;
}

static int on_frequency(void *arg, double hz)
{
	FUZZ_CHECK(hz >= 1e-6 && hz <= 1e9, "frequency %g", hz);
	return 0;
}

static int on_weight_unit(void *arg, enum cp_raw_weight_unit unit)
{
	FUZZ_CHECK(unit == CP_RAW_WEIGHT_SAMPLES ||
			   unit == CP_RAW_WEIGHT_NANOSECONDS ||
			   unit == CP_RAW_WEIGHT_UNKNOWN,
		   "weight unit %d", (int)unit);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct cp_raw_callbacks callbacks = {
		.sample = on_sample,
		.thread = on_thread,
		.target = on_target,
		.frequency = on_frequency,
		.weight_unit = on_weight_unit,
	};
	uint64_t hash = fuzz_hash(data, size);
	struct state st = {
		/* One input in four stops at one of its first 8 samples.  */
		.stop_at = hash % 4 == 0 ? 1 + (hash >> 2) % 8 : 0,
	};
	char error[256];
	FILE *in = fuzz_stream(data, size);
	int rc = cp_raw_read(in, "fuzz", &callbacks, &st, error,
			     sizeof(error));
	fclose(in);
	if (rc == -CP_E_INVAL) {
		FUZZ_CHECK(st.samples == st.stop_at,
			   "-CP_E_INVAL without the callback stopping");
		const char *tail = strstr(error, ": stopped");
		FUZZ_CHECK(strncmp(error, "fuzz:", 5) == 0 && tail &&
				   tail[9] == '\0',
			   "the callback's message is not its own: %s", error);
	} else if (rc != 0) {
		FUZZ_CHECK(rc == -CP_E_PARSE, "unexpected error %s: %s",
			   cp_strerror(rc), error);
		FUZZ_CHECK(strncmp(error, "fuzz", 4) == 0,
			   "an error without a message: '%s'", error);
	} else {
		FUZZ_CHECK(st.samples > 0, "success without samples");
	}
	free(st.frames);
	free(st.lens);
	return 0;
}
