/* Tests of the timeline engine (cp_timeline_*) and of cprof timeline.
 *
 *   - the examples of the issue, exactly, through the library and the
 *     program, and the recursion example (main;foo;foo -> main;foo ends
 *     one foo);
 *   - debouncing details: streaks lost, a name coming back at another
 *     depth starting anew;
 *   - property tests over many random sample sequences (several threads
 *     interleaved, depth 0-20, names from a small alphabet with prefixes
 *     of each other and a space, so that repeats and recursion are
 *     common): the events equal those of a naive reference model written
 *     from the rules; per thread they nest; with N = 1 replaying them
 *     gives back every sample's stack at its timestamp; every start is of
 *     a frame present in exactly N consecutive samples so far; the text
 *     reader and the array API agree; trace output is the same events
 *     plus the closing ones;
 *   - trace and speedscope documents: golden text, and python3's json
 *     module reads them back (balanced, non-decreasing per thread);
 *   - memory stays flat however many samples go through;
 *   - malformed lines: one "FILE:LINE: what" message, exit 2, no output
 *     file (not even a temporary), nothing on standard output;
 *   - weights: raw lines carry them (their sum is the profile's total on
 *     a real program whose threads wait for a CPU), a thread's last
 *     sample lasts what it stands for, so a trace of a real program has
 *     no zero-length frames, and names its process and threads.  */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/timeline.h"
#include "testutil.h"

#define CPROF CP_BUILD_DIR "/cprof"

/* ck_assert_* records every check that passes (a write to Check's
 * message file); the property loops check millions of things, so they
 * call Check only when something is wrong.  */
#define EXPECT(cond) EXPECT_MSG(cond, "%s:%d: %s", __FILE__, __LINE__, #cond)
#define EXPECT_MSG(cond, ...)                                              \
	do {                                                               \
		if (!(cond))                                               \
			ck_abort_msg(__VA_ARGS__);                         \
	} while (0)

/* ------------------------------------------------------------ helpers */

/* TEXT as a stream to read from.  */
static FILE *stream_of(const char *text)
{
	FILE *f = tmpfile();
	ck_assert_ptr_nonnull(f);
	size_t len = strlen(text);
	ck_assert_uint_eq(fwrite(text, 1, len, f), len);
	rewind(f);
	return f;
}

static void assert_text_eq(const char *got, const char *want,
			   const char *what)
{
	ck_assert_msg(strcmp(got, want) == 0,
		      "%s differs.\n--- want\n%s--- got\n%s", what, want, got);
}

/* Convert raw TEXT with the library: FORMAT, MIN_SAMPLES.  Returns the
 * output (the caller frees); fails the test on any error.  */
static char *convert(const char *text, enum cp_timeline_format format,
		     unsigned min_samples)
{
	char *out = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&out, &size);
	ck_assert_ptr_nonnull(mem);
	struct cp_timeline_options o = {
		.format = format,
		.min_samples = min_samples,
		.name = "t.raw",
	};
	struct cp_timeline *tl;
	ck_assert_int_eq(cp_timeline_new(&o, mem, &tl), 0);
	FILE *in = stream_of(text);
	char error[256];
	int rc = cp_timeline_read_raw(tl, in, "t.raw", error, sizeof(error));
	ck_assert_msg(rc == 0, "reading failed: %s (%s)", cp_strerror(rc),
		      error);
	fclose(in);
	ck_assert_int_eq(cp_timeline_finish(tl), 0);
	ck_assert_int_eq(fclose(mem), 0);
	return out;
}

/* Reading TEXT fails with RC and exactly MESSAGE.  */
static void expect_error(const char *text, int want_rc, const char *message)
{
	char *out = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&out, &size);
	struct cp_timeline_options o = {.format = CP_TIMELINE_EVENTS};
	struct cp_timeline *tl;
	ck_assert_int_eq(cp_timeline_new(&o, mem, &tl), 0);
	FILE *in = stream_of(text);
	char error[256] = "untouched";
	int rc = cp_timeline_read_raw(tl, in, "t.raw", error, sizeof(error));
	fclose(in);
	cp_timeline_free(tl);
	fclose(mem);
	free(out);
	ck_assert_msg(rc == want_rc, "\"%s\": expected %d, got %d (%s)", text,
		      want_rc, rc, error);
	ck_assert_msg(strcmp(error, message) == 0,
		      "\"%s\": message\n  \"%s\", expected\n  \"%s\"", text,
		      error, message);
}

/* ------------------------------------------------------ issue examples */

static const struct {
	const char *raw;
	unsigned min_samples;
	const char *events;
} examples[] = {
	/* The issue's first example.  */
	{"1.0 7 main\n2.5 7 main;func1\n3.1 7 main\n", 1,
	 "start 1.0 7 main\n"
	 "start 2.5 7 func1\n"
	 "end 3.1 7 func1\n"},
	/* --min-samples 2.  */
	{"1.0 7 main\n2.0 7 main\n3.0 7 main;foo\n4.0 7 main;foo\n", 2,
	 "start 2.0 7 main\n"
	 "start 4.0 7 foo\n"},
	/* Nothing carries over: a;b -> c;b;a.  */
	{"1 7 a;b\n2 7 c;b;a\n", 1,
	 "start 1 7 a\n"
	 "start 1 7 b\n"
	 "end 2 7 b\n"
	 "end 2 7 a\n"
	 "start 2 7 c\n"
	 "start 2 7 b\n"
	 "start 2 7 a\n"},
	/* Recursion: main;foo;foo -> main;foo ends only the deeper foo.  */
	{"1 7 main;foo;foo\n2 7 main;foo\n", 1,
	 "start 1 7 main\n"
	 "start 1 7 foo\n"
	 "start 1 7 foo\n"
	 "end 2 7 foo\n"},
};

START_TEST(issue_examples)
{
	for (size_t i = 0; i < sizeof(examples) / sizeof(*examples); i++) {
		char *got = convert(examples[i].raw, CP_TIMELINE_EVENTS,
				    examples[i].min_samples);
		char what[64];
		snprintf(what, sizeof(what), "example %zu", i);
		assert_text_eq(got, examples[i].events, what);
		free(got);
	}
	/* With N = 1 the output is the undebounced one; 0 means 1.  */
	char *one = convert(examples[0].raw, CP_TIMELINE_EVENTS, 1);
	char *zero = convert(examples[0].raw, CP_TIMELINE_EVENTS, 0);
	assert_text_eq(zero, one, "--min-samples 0 vs 1");
	free(one);
	free(zero);
}
END_TEST

START_TEST(debounce_details)
{
	static const struct {
		const char *raw;
		unsigned min_samples;
		const char *events;
	} cases[] = {
		/* b flickers: its streak is lost at 3, and 4, 5, 6 make it. */
		{"1 7 a\n2 7 a;b\n3 7 a\n4 7 a;b\n5 7 a;b\n6 7 a;b\n7 7\n", 3,
		 "start 3 7 a\n"
		 "start 6 7 b\n"
		 "end 7 7 b\n"
		 "end 7 7 a\n"},
		/* A name at another depth (or under another caller) is a new
		 * frame: b of 1 is not b of 2.  */
		{"1 7 a;b\n2 7 b\n3 7 b\n", 2, "start 3 7 b\n"},
		{"1 7 x;b\n2 7 y;b\n3 7 y;b\n", 2,
		 "start 3 7 y\n"
		 "start 3 7 b\n"},
		/* Unconfirmed frames never end; confirmed ones end when
		 * they go, whatever their descendants did.  */
		{"1 7 a;b\n2 7 a;c\n3 7 d\n", 2,
		 "start 2 7 a\n"
		 "end 3 7 a\n"},
		/* Threads are independent, interleaved, and the same
		 * timestamp twice is fine.  */
		{"1 7 a\n1 8 a\n2 7 a\n2 8 b\n2 8 b\n3 7 b\n", 2,
		 "start 2 7 a\n"
		 "start 2 8 b\n"
		 "end 3 7 a\n"},
		/* An empty stack ends everything.  */
		{"1 7 a;b\n2 7\n3 7 a\n", 1,
		 "start 1 7 a\n"
		 "start 1 7 b\n"
		 "end 2 7 b\n"
		 "end 2 7 a\n"
		 "start 3 7 a\n"},
		/* Frames with spaces, and names that are prefixes of each
		 * other.  */
		{"1 7 a;ab;operator new(unsigned long)\n2 7 a;a;operator new(unsigned long)\n"
		 "3 7 a;a;operator new(unsigned long) x\n", 1,
		 "start 1 7 a\n"
		 "start 1 7 ab\n"
		 "start 1 7 operator new(unsigned long)\n"
		 "end 2 7 operator new(unsigned long)\n"
		 "end 2 7 ab\n"
		 "start 2 7 a\n"
		 "start 2 7 operator new(unsigned long)\n"
		 "end 3 7 operator new(unsigned long)\n"
		 "start 3 7 operator new(unsigned long) x\n"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		char *got = convert(cases[i].raw, CP_TIMELINE_EVENTS,
				    cases[i].min_samples);
		char what[64];
		snprintf(what, sizeof(what), "debounce case %zu", i);
		assert_text_eq(got, cases[i].events, what);
		free(got);
	}
}
END_TEST

/* Headers, blank lines, tabs, CRLF, a byte-order mark and timestamps in
 * any decimal notation are read; the timestamp is echoed as written.  */
START_TEST(raw_lenient)
{
	const char *raw = "\xef\xbb\xbf# cprof-attach raw\r\n"
			  "# target 42 app\n"
			  "# thread 7 worker one\n"
			  "# thread pool comment\n"
			  "\n"
			  "  \t\n"
			  "1.000000\t7\tmain;run  \r\n"
			  ".5e1  7   main\n"
			  "+6. 7\n"
			  "7 7 \n";
	char *got = convert(raw, CP_TIMELINE_EVENTS, 1);
	assert_text_eq(got,
		       "start 1.000000 7 main\n"
		       "start 1.000000 7 run\n"
		       "end .5e1 7 run\n"
		       "end +6. 7 main\n",
		       "lenient input");
	free(got);
}
END_TEST

START_TEST(raw_malformed)
{
	static const struct {
		const char *raw;
		const char *message;
	} cases[] = {
		{"1.0\n", "t.raw:1: missing thread id: expected 'TIMESTAMP TID FRAME;FRAME;...', found '1.0'"},
		{"1 7 a\n# ok\n2.0   \n", "t.raw:3: missing thread id: expected 'TIMESTAMP TID FRAME;FRAME;...', found '2.0'"},
		{"abc 7 main\n", "t.raw:1: timestamp 'abc' is not a number of seconds"},
		{"1,5 7 main\n", "t.raw:1: timestamp '1,5' is not a number of seconds"},
		{"nan 7 main\n", "t.raw:1: timestamp 'nan' is not a number of seconds"},
		{"inf 7 main\n", "t.raw:1: timestamp 'inf' is not a number of seconds"},
		{"0x10 7 main\n", "t.raw:1: timestamp '0x10' is not a number of seconds"},
		{"1e999 7 main\n", "t.raw:1: timestamp '1e999' is not a number of seconds"},
		{"1e 7 main\n", "t.raw:1: timestamp '1e' is not a number of seconds"},
		{". 7 main\n", "t.raw:1: timestamp '.' is not a number of seconds"},
		{"1 x main\n", "t.raw:1: thread id 'x' is not a number from 0 to 2147483647"},
		{"1 -7 main\n", "t.raw:1: thread id '-7' is not a number from 0 to 2147483647"},
		{"1 2147483648 main\n", "t.raw:1: thread id '2147483648' is not a number from 0 to 2147483647"},
		{"1 7 a;;b\n", "t.raw:1: frame 2 is empty in 'a;;b'"},
		{"1 7 ;a\n", "t.raw:1: frame 1 is empty in ';a'"},
		{"1 7 a;b\n2 7 a;b;\n", "t.raw:2: frame 3 is empty in 'a;b;'"},
		{"1 7 a;b\n2 7 a; ;c\n", "t.raw:2: frame 2 is empty in 'a; ;c'"},
		{"1 7 a\n2 7 a;b\n1.5 7 a\n", "t.raw:3: time goes backwards in thread 7: 1.5 after 2"},
		{"3 7 a\n1 8 a\n2 8 b\n1 7 a\n", "t.raw:4: time goes backwards in thread 7: 1 after 3"},
		{"", "t.raw: no samples (the input is empty, or has only blank lines and headers)"},
		{"# thread 7 main\n\n", "t.raw: no samples (the input is empty, or has only blank lines and headers)"},
		{"\x1f\x8b\x08\n", "t.raw: gzip-compressed data, not raw samples text"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
		expect_error(cases[i].raw, -CP_E_PARSE, cases[i].message);

	/* A NUL byte: the string functions cannot be used to write it.  */
	FILE *in = tmpfile();
	fwrite("1 7 a\n2 7 a;b\0c\n", 1, 16, in);
	rewind(in);
	struct cp_timeline_options o = {0};
	FILE *null = fopen("/dev/null", "w");
	struct cp_timeline *tl;
	ck_assert_int_eq(cp_timeline_new(&o, null, &tl), 0);
	char error[256];
	ck_assert_int_eq(cp_timeline_read_raw(tl, in, "t.raw", error,
					      sizeof(error)),
			 -CP_E_PARSE);
	ck_assert_str_eq(error, "t.raw:2: binary data (a NUL byte), not raw samples");
	cp_timeline_free(tl);
	fclose(in);
	fclose(null);
}
END_TEST

/* ------------------------------------------------------------- the API */

START_TEST(api_contract)
{
	char *out = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&out, &size);
	struct cp_timeline *tl = (struct cp_timeline *)&tl;
	struct cp_timeline_options bad = {.format = 42};
	ck_assert_int_eq(cp_timeline_new(&bad, mem, &tl), -CP_E_INVAL);
	ck_assert_ptr_null(tl);
	cp_timeline_free(NULL);

	struct cp_timeline_options o = {.format = CP_TIMELINE_EVENTS};
	ck_assert_int_eq(cp_timeline_new(&o, mem, &tl), 0);
	const char *s1[] = {"main", "work"};
	ck_assert_int_eq(cp_timeline_process(tl, 42, "app"), 0);
	ck_assert_int_eq(cp_timeline_sample(tl, NULL, 1.5, 7, s1, 2), 0);
	/* the target is settled once samples came */
	ck_assert_int_eq(cp_timeline_process(tl, 43, NULL), -CP_E_INVAL);
	/* backwards: refused, nothing written, the state unchanged */
	ck_assert_int_eq(cp_timeline_sample(tl, "1.0", 1.0, 7, s1, 1),
			 -CP_E_PARSE);
	double nan = __builtin_nan("");
	ck_assert_int_eq(cp_timeline_sample(tl, "x", nan, 7, s1, 1),
			 -CP_E_INVAL);
	ck_assert_int_eq(cp_timeline_sample(tl, "2", 2, 7, s1, 1), 0);
	ck_assert_int_eq(cp_timeline_sample(tl, "2", 2, 7, NULL, 0), 0);
	ck_assert_int_eq(cp_timeline_finish(tl), 0);
	fflush(mem);
	assert_text_eq(out,
		       "start 1.500000 7 main\n"
		       "start 1.500000 7 work\n"
		       "end 2 7 work\n"
		       "end 2 7 main\n",
		       "API events");
	fclose(mem);
	free(out);
}
END_TEST

/* Empty stacks through the API, before any sample had frames: FRAMES
 * NULL with NFRAMES 0 (cprof-attach passes that for a stack it could not
 * unwind).  tests/fuzz/fuzz_timeline found the engine doing arithmetic
 * on the null FRAMES and on its own LENS, still NULL (undefined; clang's
 * UBSan stops there).  */
START_TEST(api_empty_stacks)
{
	char *out = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&out, &size);
	struct cp_timeline_options o = {.format = CP_TIMELINE_EVENTS};
	struct cp_timeline *tl;
	ck_assert_int_eq(cp_timeline_new(&o, mem, &tl), 0);
	ck_assert_int_eq(cp_timeline_sample(tl, "1", 1, 7, NULL, 0), 0);
	ck_assert_int_eq(cp_timeline_sample(tl, "2", 2, 8, NULL, 0), 0);
	const char *s1[] = {"main"};
	ck_assert_int_eq(cp_timeline_sample(tl, "3", 3, 7, s1, 1), 0);
	ck_assert_int_eq(cp_timeline_sample(tl, "4", 4, 7, s1, 1), 0);
	ck_assert_int_eq(cp_timeline_sample(tl, "5", 5, 7, NULL, 0), 0);
	ck_assert_int_eq(cp_timeline_finish(tl), 0);
	fflush(mem);
	assert_text_eq(out, "start 3 7 main\nend 5 7 main\n",
		       "API events of empty stacks");
	fclose(mem);
	free(out);
}
END_TEST

/* The trace document, exactly: the target and thread names from the
 * header and from the API after samples, B/E in microseconds (decimals
 * only when there are nanoseconds), frames still open closed at their
 * thread's last sample, names escaped.  */
START_TEST(trace_golden)
{
	const char *raw = "# target 42 my \"app\"\n"
			  "# thread 7 main\n"
			  "1.0 7 main;parse\n"
			  "1.0000015 8 worker\n"
			  "2.5 7 main;\"quoted\\name\"\n"
			  "3.25 7 main\n"
			  "4 8\n";
	char *got = convert(raw, CP_TIMELINE_TRACE, 1);
	assert_text_eq(got,
		       "{\"traceEvents\":[\n"
		       "{\"ph\":\"M\",\"pid\":42,\"tid\":42,\"name\":\"process_name\",\"args\":{\"name\":\"my \\\"app\\\"\"}},\n"
		       "{\"ph\":\"M\",\"pid\":42,\"tid\":7,\"name\":\"thread_name\",\"args\":{\"name\":\"main\"}},\n"
		       "{\"ph\":\"B\",\"pid\":42,\"tid\":7,\"ts\":1000000,\"name\":\"main\"},\n"
		       "{\"ph\":\"B\",\"pid\":42,\"tid\":7,\"ts\":1000000,\"name\":\"parse\"},\n"
		       "{\"ph\":\"B\",\"pid\":42,\"tid\":8,\"ts\":1000001.500,\"name\":\"worker\"},\n"
		       "{\"ph\":\"E\",\"pid\":42,\"tid\":7,\"ts\":2500000,\"name\":\"parse\"},\n"
		       "{\"ph\":\"B\",\"pid\":42,\"tid\":7,\"ts\":2500000.001,\"name\":\"\\\"quoted\\\\name\\\"\"},\n"
		       "{\"ph\":\"E\",\"pid\":42,\"tid\":7,\"ts\":3250000,\"name\":\"\\\"quoted\\\\name\\\"\"},\n"
		       "{\"ph\":\"E\",\"pid\":42,\"tid\":8,\"ts\":4000000,\"name\":\"worker\"},\n"
		       "{\"ph\":\"E\",\"pid\":42,\"tid\":7,\"ts\":4000000,\"name\":\"main\"}\n"
		       "],\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":\"cprof@" CP_VERSION "\"}}\n",
		       "trace");
	free(got);

	/* No target: the first thread seen stands for the pid; a thread
	 * named after its samples gets its M event then.  */
	char *out = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&out, &size);
	struct cp_timeline_options o = {.format = CP_TIMELINE_TRACE};
	struct cp_timeline *tl;
	ck_assert_int_eq(cp_timeline_new(&o, mem, &tl), 0);
	const char *s[] = {"f"};
	ck_assert_int_eq(cp_timeline_sample(tl, NULL, 0.5, 9, s, 1), 0);
	ck_assert_int_eq(cp_timeline_thread_name(tl, 9, "late"), 0);
	ck_assert_int_eq(cp_timeline_finish(tl), 0);
	fclose(mem);
	assert_text_eq(out,
		       "{\"traceEvents\":[\n"
		       "{\"ph\":\"B\",\"pid\":9,\"tid\":9,\"ts\":500000,\"name\":\"f\"},\n"
		       "{\"ph\":\"M\",\"pid\":9,\"tid\":9,\"name\":\"thread_name\",\"args\":{\"name\":\"late\"}},\n"
		       "{\"ph\":\"E\",\"pid\":9,\"tid\":9,\"ts\":500001,\"name\":\"f\"}\n"
		       "],\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":\"cprof@" CP_VERSION "\"}}\n",
		       "trace without a target");
	free(out);
}
END_TEST

START_TEST(speedscope_golden)
{
	const char *raw = "# thread 7 main\n"
			  "1.0 7 main;parse\n"
			  "1.5 8 main\n"
			  "2.0 7 main;main\n";
	char *got = convert(raw, CP_TIMELINE_SPEEDSCOPE, 1);
	assert_text_eq(got,
		       "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n"
		       "\"exporter\":\"cprof@" CP_VERSION "\",\"name\":\"t.raw\",\"activeProfileIndex\":0,\n"
		       "\"shared\":{\"frames\":[\n"
		       "{\"name\":\"main\"},\n"
		       "{\"name\":\"parse\"}\n"
		       "]},\n"
		       "\"profiles\":[\n"
		       "{\"type\":\"evented\",\"name\":\"7 main\",\"unit\":\"microseconds\",\"startValue\":1000000,\"endValue\":3000000,\"events\":[\n"
		       "{\"type\":\"O\",\"frame\":0,\"at\":1000000},\n"
		       "{\"type\":\"O\",\"frame\":1,\"at\":1000000},\n"
		       "{\"type\":\"C\",\"frame\":1,\"at\":2000000},\n"
		       "{\"type\":\"O\",\"frame\":0,\"at\":2000000},\n"
		       "{\"type\":\"C\",\"frame\":0,\"at\":3000000},\n"
		       "{\"type\":\"C\",\"frame\":0,\"at\":3000000}\n"
		       "]},\n"
		       "{\"type\":\"evented\",\"name\":\"8\",\"unit\":\"microseconds\",\"startValue\":1500000,\"endValue\":2500000,\"events\":[\n"
		       "{\"type\":\"O\",\"frame\":0,\"at\":1500000},\n"
		       "{\"type\":\"C\",\"frame\":0,\"at\":2500000}\n"
		       "]}\n"
		       "]}\n",
		       "speedscope");
	free(got);
}
END_TEST

/* Raw samples with weights ("# fields SECONDS TID WEIGHT STACK"): the
 * events are those of the same samples without weights; a thread's last
 * sample lasts WEIGHT units (ticks of 1/frequency s, or nanoseconds), so
 * frames that begin there are not closed where they begin.  Files from
 * before weights (no "# fields") still read, each sample one tick.  */
START_TEST(raw_weights)
{
	const char *weighted = "# cprof-attach raw samples\n"
			       "# fields SECONDS TID WEIGHT STACK\n"
			       "# target 42 app\n"
			       "# frequency 100\n"
			       "# weight-unit samples\n"
			       "# thread 7 main\n"
			       "1.0 7 1 main;parse\n"
			       "1.5 7 3 main;run\n"
			       "1.52 8 2 worker\n";
	const char *plain = "# target 42 app\n"
			    "# frequency 100\n"
			    "# thread 7 main\n"
			    "1.0 7 main;parse\n"
			    "1.5 7 main;run\n"
			    "1.52 8 worker\n";
	char *a = convert(weighted, CP_TIMELINE_EVENTS, 1);
	char *b = convert(plain, CP_TIMELINE_EVENTS, 1);
	assert_text_eq(a, b, "events with and without weights");
	free(a);
	free(b);

	char *trace = convert(weighted, CP_TIMELINE_TRACE, 1);
	/* run began at the last sample of 7, 3 ticks of 10 ms: 1.53 s */
	ck_assert_msg(strstr(trace, "{\"ph\":\"E\",\"pid\":42,\"tid\":7,\"ts\":1530000,\"name\":\"run\"}") &&
			      strstr(trace, "{\"ph\":\"E\",\"pid\":42,\"tid\":7,\"ts\":1530000,\"name\":\"main\"}") &&
			      strstr(trace, "{\"ph\":\"E\",\"pid\":42,\"tid\":8,\"ts\":1540000,\"name\":\"worker\"}"),
		      "closing events:\n%s", trace);
	free(trace);
	trace = convert(plain, CP_TIMELINE_TRACE, 1);
	ck_assert_msg(strstr(trace, "\"tid\":7,\"ts\":1510000,\"name\":\"main\"}") &&
			      strstr(trace, "\"tid\":8,\"ts\":1530000,\"name\":\"worker\"}"),
		      "closing events without weights:\n%s", trace);
	free(trace);

	/* Nanoseconds: 5 ms.  */
	char *ss = convert("# fields SECONDS TID WEIGHT STACK\n"
			   "# weight-unit nanoseconds\n"
			   "2 9 5000000 f\n",
			   CP_TIMELINE_SPEEDSCOPE, 1);
	ck_assert_msg(strstr(ss, "\"startValue\":2000000,\"endValue\":2005000,") &&
			      strstr(ss, "{\"type\":\"C\",\"frame\":0,\"at\":2005000}"),
		      "speedscope:\n%s", ss);
	free(ss);

	/* The API: a weight of 0 is refused.  */
	char *out = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&out, &size);
	struct cp_timeline_options o = {.format = CP_TIMELINE_TRACE,
					.period = 0.001};
	struct cp_timeline *tl;
	ck_assert_int_eq(cp_timeline_new(&o, mem, &tl), 0);
	const char *f[] = {"f"};
	ck_assert_int_eq(cp_timeline_sample_weighted(tl, NULL, 1, 3, 0, f, 1),
			 -CP_E_INVAL);
	ck_assert_int_eq(cp_timeline_sample_weighted(tl, NULL, 1, 3, 4, f, 1),
			 0);
	ck_assert_int_eq(cp_timeline_finish(tl), 0);
	fclose(mem);
	ck_assert_msg(strstr(out, "{\"ph\":\"E\",\"pid\":3,\"tid\":3,\"ts\":1004000,\"name\":\"f\"}"),
		      "API, 4 ms:\n%s", out);
	free(out);

	expect_error("# fields SECONDS TID WEIGHT STACK\n1 7 0 main\n",
		     -CP_E_PARSE,
		     "t.raw:2: weight '0' is not a whole number from 1 to 18446744073709551615");
	expect_error("# fields SECONDS TID WEIGHT STACK\n1 7 x main\n",
		     -CP_E_PARSE,
		     "t.raw:2: weight 'x' is not a whole number from 1 to 18446744073709551615");
	expect_error("# fields SECONDS TID WEIGHT STACK\n1 7\n", -CP_E_PARSE,
		     "t.raw:2: missing weight: expected 'TIMESTAMP TID WEIGHT FRAME;FRAME;...' (see the '# fields' header)");
	expect_error("# fields SECONDS TID CPU STACK\n1 7 1 main\n",
		     -CP_E_PARSE,
		     "t.raw:1: unknown fields 'SECONDS TID CPU STACK': expected 'SECONDS TID WEIGHT STACK' or 'SECONDS TID STACK'");
}
END_TEST

/* ------------------------------------------------------ property tests */

#define MAX_DEPTH 20
#define MAX_SAMPLES 400

static const char *const alphabet[] = {"a", "ab", "b", "a b", "ba"};

struct seq_sample {
	int tid;
	char ts[24];
	double seconds;
	int depth;
	int frames[MAX_DEPTH]; /* indexes into ALPHABET, root first */
};

struct sequence {
	struct seq_sample samples[MAX_SAMPLES];
	int n;
};

static uint64_t rng_state;

static uint32_t rng(void)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(rng_state >> 33);
}

/* A random sequence: 1-4 threads interleaved at random, each stack a
 * random edit of the thread's previous one (so prefixes are shared),
 * depth 0-20, names from the first NAMES of the alphabet, timestamps
 * strictly increasing (unique, so events name their sample).  */
static void random_sequence(struct sequence *q, int names)
{
	int nthreads = 1 + (int)(rng() % 4);
	struct seq_sample last[4] = {{0}};
	q->n = 1 + (int)(rng() % MAX_SAMPLES);
	for (int i = 0; i < q->n; i++) {
		int t = (int)(rng() % (uint32_t)nthreads);
		struct seq_sample *s = &q->samples[i];
		*s = last[t];
		s->tid = 100 + t;
		uint32_t kind = rng() % 10;
		if (kind < 3) {
			/* same stack */
		} else if (kind < 9) {
			/* pop some, push some */
			int pop = (int)(rng() % (uint32_t)(s->depth + 1));
			s->depth -= pop;
			int push = (int)(rng() % (uint32_t)(MAX_DEPTH - s->depth + 1));
			if (push > 4)
				push = (int)(rng() % 5);
			for (int k = 0; k < push; k++)
				s->frames[s->depth++] = (int)(rng() % (uint32_t)names);
		} else {
			/* anything */
			s->depth = (int)(rng() % (MAX_DEPTH + 1));
			for (int k = 0; k < s->depth; k++)
				s->frames[k] = (int)(rng() % (uint32_t)names);
		}
		snprintf(s->ts, sizeof(s->ts), "%d.%03d", i / 1000, i % 1000);
		s->seconds = i / 1000.0;
		last[t] = *s;
	}
}

static char *sequence_text(const struct sequence *q)
{
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	for (int i = 0; i < q->n; i++) {
		const struct seq_sample *s = &q->samples[i];
		fprintf(mem, "%s %d ", s->ts, s->tid);
		for (int k = 0; k < s->depth; k++)
			fprintf(mem, "%s%s", k ? ";" : "", alphabet[s->frames[k]]);
		fputc('\n', mem);
	}
	fclose(mem);
	return text;
}

/* Do samples I and J have the same frames at positions 0..D?  */
static bool same_prefix(const struct seq_sample *a, const struct seq_sample *b,
			int d)
{
	if (a->depth <= d || b->depth <= d)
		return false;
	for (int k = 0; k <= d; k++)
		if (a->frames[k] != b->frames[k])
			return false;
	return true;
}

/* The number of consecutive samples of sample I's thread, ending with I,
 * that hold I's frames 0..D: counted backwards, from scratch.  */
static int run_length(const struct sequence *q, int i, int d)
{
	int run = 0;
	for (int j = i; j >= 0; j--) {
		if (q->samples[j].tid != q->samples[i].tid)
			continue;
		if (!same_prefix(&q->samples[j], &q->samples[i], d))
			break;
		run++;
	}
	return run;
}

/* The events the rules give, written naively from the issue's text.  */
static char *reference_events(const struct sequence *q, int n_min)
{
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	for (int i = 0; i < q->n; i++) {
		const struct seq_sample *s = &q->samples[i];
		int prev = -1;
		for (int j = i - 1; j >= 0 && prev < 0; j--)
			if (q->samples[j].tid == s->tid)
				prev = j;
		int common = 0;
		if (prev >= 0) {
			const struct seq_sample *p = &q->samples[prev];
			while (common < p->depth && common < s->depth &&
			       p->frames[common] == s->frames[common])
				common++;
			/* ends: confirmed frames of the previous stack beyond
			 * the prefix, deepest first */
			for (int d = p->depth - 1; d >= common; d--)
				if (run_length(q, prev, d) >= n_min)
					fprintf(mem, "end %s %d %s\n", s->ts,
						s->tid, alphabet[p->frames[d]]);
		}
		/* starts: frames whose streak reaches N now */
		for (int d = 0; d < s->depth; d++)
			if (run_length(q, i, d) == n_min)
				fprintf(mem, "start %s %d %s\n", s->ts, s->tid,
					alphabet[s->frames[d]]);
	}
	fclose(mem);
	return text;
}

/* The events the engine gives when fed through the array API.  */
static char *api_events(const struct sequence *q, unsigned n_min)
{
	char *out = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&out, &size);
	struct cp_timeline_options o = {.min_samples = n_min};
	struct cp_timeline *tl;
	EXPECT(cp_timeline_new(&o, mem, &tl) == 0);
	for (int i = 0; i < q->n; i++) {
		const struct seq_sample *s = &q->samples[i];
		const char *frames[MAX_DEPTH];
		for (int k = 0; k < s->depth; k++)
			frames[k] = alphabet[s->frames[k]];
		EXPECT(cp_timeline_sample(tl, s->ts, s->seconds, s->tid,
					  frames, (size_t)s->depth) == 0);
	}
	EXPECT(cp_timeline_finish(tl) == 0);
	fclose(mem);
	return out;
}

struct event {
	bool start;
	int sample;   /* the index of the sample, from the timestamp */
	int tid;
	int name;     /* index into ALPHABET */
};

/* Parse events text into EVENTS (at most MAX).  */
static int parse_events(const char *text, struct event *events, int max)
{
	int n = 0;
	for (const char *p = text; *p;) {
		const char *eol = strchr(p, '\n');
		EXPECT_MSG(eol != NULL, "no newline");
		char kind[8], name[16];
		int whole, frac, tid, used = 0;
		EXPECT_MSG(sscanf(p, "%7s %d.%d %d %n", kind, &whole, &frac,
				  &tid, &used) == 4,
			   "bad event line %.40s", p);
		size_t len = (size_t)(eol - (p + used));
		EXPECT(len < sizeof(name));
		memcpy(name, p + used, len);
		name[len] = '\0';
		int id = -1;
		for (int k = 0; k < (int)(sizeof(alphabet) / sizeof(*alphabet)); k++)
			if (strcmp(alphabet[k], name) == 0)
				id = k;
		EXPECT_MSG(id >= 0, "unknown name '%s'", name);
		EXPECT(n < max);
		events[n++] = (struct event){
			.start = strcmp(kind, "start") == 0,
			.sample = whole * 1000 + frac,
			.tid = tid,
			.name = id,
		};
		p = eol + 1;
	}
	return n;
}

/* The properties of the issue, checked on EVENTS directly.  */
static void check_properties(const struct sequence *q, int n_min,
			     const struct event *events, int nevents)
{
	/* per thread: the replayed stack of started frames */
	int stacks[4][MAX_DEPTH];
	int depth[4] = {0};
	int e = 0;
	for (int i = 0; i < q->n; i++) {
		const struct seq_sample *s = &q->samples[i];
		int t = s->tid - 100;
		for (; e < nevents && events[e].sample == i; e++) {
			const struct event *ev = &events[e];
			EXPECT(ev->tid == s->tid);
			if (ev->start) {
				/* a frame is started only once it is present
				 * in N consecutive samples, at the Nth */
				EXPECT(depth[t] < MAX_DEPTH);
				int d = depth[t];
				EXPECT(d < s->depth);
				EXPECT(s->frames[d] == ev->name);
				EXPECT(run_length(q, i, d) == n_min);
				stacks[t][depth[t]++] = ev->name;
			} else {
				/* every end has a matching earlier start:
				 * they nest */
				EXPECT_MSG(depth[t] > 0,
					   "end of %s without a start",
					   alphabet[ev->name]);
				EXPECT(stacks[t][depth[t] - 1] == ev->name);
				depth[t]--;
			}
		}
		/* every frame present in N consecutive samples is started */
		int confirmed = 0;
		while (confirmed < s->depth &&
		       run_length(q, i, confirmed) >= n_min)
			confirmed++;
		EXPECT(depth[t] == confirmed);
		for (int d = 0; d < confirmed; d++)
			EXPECT(stacks[t][d] == s->frames[d]);
		/* with N = 1, the replay is exactly the sample's stack */
		if (n_min == 1)
			EXPECT(depth[t] == s->depth);
	}
	EXPECT(e == nevents);
}

/* The trace of Q: per thread, the same B/E as EVENTS (a B that follows an
 * E of the same sample 1 ns after it), then E for what is still open once
 * the thread's last sample has lasted (without a frequency: the smallest
 * interval between two samples of one thread, or 1 us); ts never
 * decreases.  */
static void check_trace(const struct sequence *q, const char *trace,
			const struct event *events, int nevents)
{
	EXPECT(strncmp(trace, "{\"traceEvents\":[\n", 17) == 0);
	const char *p = trace + 17;
	int e = 0, open[4] = {0}, last_sample[4] = {-1, -1, -1, -1};
	double last_ts[4] = {-1, -1, -1, -1};
	int min_gap = 0; /* samples are 1 ms apart */
	for (int i = 0; i < q->n; i++) {
		int t = q->samples[i].tid - 100;
		if (last_sample[t] >= 0 &&
		    (min_gap == 0 || i - last_sample[t] < min_gap))
			min_gap = i - last_sample[t];
		last_sample[t] = i;
	}
	double hold_us = min_gap ? min_gap * 1000.0 : 1.0;
	int ended_at[4] = {-1, -1, -1, -1}; /* sample of the thread's last E */
	int closing = 0;
	while (*p == '{') {
		char ph, name[16];
		int pid, tid, used = 0;
		double ts;
		const char *eol = strchr(p, '\n');
		EXPECT_MSG(eol != NULL, "no newline");
		EXPECT_MSG(sscanf(p, "{\"ph\":\"%c\",\"pid\":%d,\"tid\":%d,\"ts\":%lf,\"name\":\"%15[^\"]\"}%n",
				  &ph, &pid, &tid, &ts, name, &used) == 5,
			   "bad trace line %.60s", p);
		EXPECT(p + used == eol || (p[used] == ',' && p + used + 1 == eol));
		int t = tid - 100;
		EXPECT_MSG(ts >= last_ts[t], "ts decreases in thread %d", tid);
		last_ts[t] = ts;
		if (e < nevents) {
			const struct event *ev = &events[e++];
			EXPECT(ph == (ev->start ? 'B' : 'E'));
			EXPECT(tid == ev->tid);
			EXPECT_MSG(strcmp(name, alphabet[ev->name]) == 0,
				   "name %s, expected %s", name,
				   alphabet[ev->name]);
			/* starts after ends of the same sample: 1 ns later */
			double want = ev->sample * 1000.0;
			if (ev->start && ended_at[t] == ev->sample)
				want += 0.001;
			if (!ev->start)
				ended_at[t] = ev->sample;
			EXPECT_MSG(ts == want, "%c at %f, expected %f", ph, ts,
				   want);
		} else {
			/* closing: E after the thread's last sample */
			EXPECT(ph == 'E');
			EXPECT_MSG(ts == last_sample[t] * 1000.0 + hold_us,
				   "closing E at %f, expected %f", ts,
				   last_sample[t] * 1000.0 + hold_us);
			closing++;
		}
		open[t] += ph == 'B' ? 1 : -1;
		EXPECT(open[t] >= 0);
		p = eol + 1;
	}
	EXPECT(e == nevents);
	for (int t = 0; t < 4; t++)
		EXPECT(open[t] == 0);
	EXPECT(strncmp(p, "],", 2) == 0);
	(void)closing;
}

START_TEST(property_random)
{
	static struct sequence q;
	static struct event events[MAX_SAMPLES * 2 * MAX_DEPTH];
	static const unsigned mins[] = {1, 2, 3, 5};
	rng_state = 20260122u + (uint64_t)_i * 7919u;
	int checked = 0;
	for (int round = 0; round < 300; round++) {
		random_sequence(&q, 2 + round % 4);
		char *raw = sequence_text(&q);
		for (size_t m = 0; m < sizeof(mins) / sizeof(*mins); m++) {
			unsigned n_min = mins[m];
			char *want = reference_events(&q, (int)n_min);
			char *got = convert(raw, CP_TIMELINE_EVENTS, n_min);
			if (strcmp(got, want) != 0) {
				fprintf(stderr, "input:\n%s", raw);
				assert_text_eq(got, want, "events vs reference");
			}
			char *api = api_events(&q, n_min);
			assert_text_eq(api, got, "array API vs raw text");
			int nevents = parse_events(got, events,
						   (int)(sizeof(events) / sizeof(*events)));
			check_properties(&q, (int)n_min, events, nevents);
			char *trace = convert(raw, CP_TIMELINE_TRACE, n_min);
			check_trace(&q, trace, events, nevents);
			free(trace);
			free(api);
			free(got);
			free(want);
			checked++;
		}
		free(raw);
	}
	ck_assert_int_eq(checked, 1200);
}
END_TEST

/* ------------------------------------------------- JSON read back (python) */

/* Reads a trace or speedscope file with python3's json module, checks
 * what viewers need, and prints the events as "B|E US TID NAME" lines in
 * document order, per thread (trace: traceEvents order; speedscope: one
 * profile after the other).  */
static const char checker[] =
	"import json, sys\n"
	"def fail(msg):\n"
	"    print('json check: ' + msg)\n"
	"    sys.exit(1)\n"
	"def number(v):\n"
	"    return isinstance(v, (int, float)) and not isinstance(v, bool)\n"
	"path, kind = sys.argv[1], sys.argv[2]\n"
	"with open(path, encoding='utf-8') as f:\n"
	"    doc = json.load(f)\n"
	"out = []\n"
	"if kind == 'trace':\n"
	"    evs = doc['traceEvents']\n"
	"    stacks, last = {}, {}\n"
	"    for e in evs:\n"
	"        if e['ph'] == 'M':\n"
	"            if e['name'] not in ('process_name', 'thread_name') or \\\n"
	"                    not isinstance(e['args']['name'], str):\n"
	"                fail('bad M event %r' % e)\n"
	"            continue\n"
	"        if e['ph'] not in ('B', 'E'):\n"
	"            fail('ph %r' % e['ph'])\n"
	"        for k in ('pid', 'tid', 'ts'):\n"
	"            if not number(e[k]):\n"
	"                fail('%s %r' % (k, e[k]))\n"
	"        key = (e['pid'], e['tid'])\n"
	"        if e['ts'] < last.get(key, e['ts']):\n"
	"            fail('ts decreases in %r' % (key,))\n"
	"        last[key] = e['ts']\n"
	"        st = stacks.setdefault(key, [])\n"
	"        if e['ph'] == 'B':\n"
	"            st.append(e['name'])\n"
	"        else:\n"
	"            if not st or st.pop() != e['name']:\n"
	"                fail('unbalanced E %r' % e)\n"
	"        # a B 1 ns after the E of its sample reads as at the sample\n"
	"        out.append('%s %.2f %d %s' % (e['ph'], e['ts'], e['tid'], e['name']))\n"
	"    for key, st in stacks.items():\n"
	"        if st:\n"
	"            fail('open at the end in %r: %r' % (key, st))\n"
	"else:\n"
	"    if doc['$schema'] != 'https://www.speedscope.app/file-format-schema.json':\n"
	"        fail('schema')\n"
	"    frames = doc['shared']['frames']\n"
	"    for p in doc['profiles']:\n"
	"        if p['type'] != 'evented' or p['unit'] != 'microseconds':\n"
	"            fail('profile type or unit')\n"
	"        if not (number(p['startValue']) and number(p['endValue']) and\n"
	"                p['startValue'] <= p['endValue']):\n"
	"            fail('start/end value')\n"
	"        tid = int(p['name'].split()[0])\n"
	"        st, at = [], p['startValue']\n"
	"        for e in p['events']:\n"
	"            if not p['startValue'] <= e['at'] <= p['endValue'] or e['at'] < at:\n"
	"                fail('at %r out of order or range' % e['at'])\n"
	"            at = e['at']\n"
	"            name = frames[e['frame']]['name']\n"
	"            if e['type'] == 'O':\n"
	"                st.append(e['frame'])\n"
	"            elif e['type'] == 'C':\n"
	"                if not st or st.pop() != e['frame']:\n"
	"                    fail('unbalanced C')\n"
	"            else:\n"
	"                fail('type %r' % e['type'])\n"
	"            out.append('%s %.2f %d %s' % ('B' if e['type'] == 'O' else 'E', e['at'], tid, name))\n"
	"        if st:\n"
	"            fail('open at the end')\n"
	"sys.stdout.write(''.join(l + '\\n' for l in out))\n";

static char *json_check(const char *text, const char *kind)
{
	const char *dir = tu_temp_dir();
	ck_assert_ptr_nonnull(dir);
	char script[PATH_MAX], data[PATH_MAX], cmd[3 * PATH_MAX];
	snprintf(script, sizeof(script), "%s/check_json.py", dir);
	snprintf(data, sizeof(data), "%s/doc.json", dir);
	FILE *f = fopen(script, "w");
	ck_assert_ptr_nonnull(f);
	fputs(checker, f);
	ck_assert_int_eq(fclose(f), 0);
	f = fopen(data, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
	snprintf(cmd, sizeof(cmd), "python3 '%s' '%s' %s", script, data, kind);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	char *out = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&out, &len);
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		fwrite(buf, 1, n, m);
	fclose(m);
	int status = pclose(f);
	ck_assert_msg(status == 0, "%s: status %d\n%.2000s", cmd, status, out);
	return out;
}

/* The "B|E US TID NAME" lines of the thread TID in LINES, in order.  */
static char *thread_lines(const char *lines, int tid)
{
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	for (const char *p = lines; *p;) {
		const char *eol = strchr(p, '\n');
		double us;
		int t;
		if (sscanf(p, "%*c %lf %d", &us, &t) == 2 && t == tid)
			fwrite(p, 1, (size_t)(eol - p + 1), mem);
		p = eol + 1;
	}
	fclose(mem);
	return text;
}

/* Random sequences through trace and speedscope, read back by python:
 * the same events per thread, balanced, in order.  */
START_TEST(json_read_back)
{
	static struct sequence q;
	rng_state = 4242;
	for (int round = 0; round < 12; round++) {
		random_sequence(&q, 5);
		char *raw = sequence_text(&q);
		unsigned n_min = 1 + (unsigned)round % 3;
		char *trace = convert(raw, CP_TIMELINE_TRACE, n_min);
		char *speedscope = convert(raw, CP_TIMELINE_SPEEDSCOPE, n_min);
		char *from_trace = json_check(trace, "trace");
		char *from_speedscope = json_check(speedscope, "speedscope");
		for (int tid = 100; tid < 104; tid++) {
			char *a = thread_lines(from_trace, tid);
			char *b = thread_lines(from_speedscope, tid);
			assert_text_eq(b, a, "speedscope vs trace, per thread");
			free(a);
			free(b);
		}
		free(from_trace);
		free(from_speedscope);
		free(trace);
		free(speedscope);
		free(raw);
	}
}
END_TEST

/* ------------------------------------------------------------- memory */

/* Heap in use after feeding N samples of 8 threads at depth 30 to a
 * timeline of FORMAT writing to /dev/null.  */
static size_t heap_after(enum cp_timeline_format format, unsigned n_min,
			 long n)
{
	FILE *null = fopen("/dev/null", "w");
	EXPECT(null != NULL);
	struct cp_timeline_options o = {.format = format, .min_samples = n_min};
	struct cp_timeline *tl;
	EXPECT(cp_timeline_new(&o, null, &tl) == 0);
	char names[64][16];
	for (int i = 0; i < 64; i++)
		snprintf(names[i], sizeof(names[i]), "fn_%d", i);
	const char *stacks[8][30];
	for (int t = 0; t < 8; t++)
		for (int d = 0; d < 30; d++)
			stacks[t][d] = names[(t + d) % 64];
	rng_state = 99;
	size_t used = 0;
	for (long i = 0; i < n; i++) {
		int t = (int)(i % 8);
		int k = 1 + (int)(rng() % 4);
		for (int d = 30 - k; d < 30; d++)
			stacks[t][d] = names[rng() % 64];
		EXPECT(cp_timeline_sample(tl, NULL, (double)i / 800.0,
					  1000 + t, stacks[t], 30) == 0);
		if (i == n - 1)
			used = mallinfo2().uordblks;
	}
	EXPECT(cp_timeline_finish(tl) == 0);
	fclose(null);
	return used;
}

START_TEST(memory_flat)
{
	static const enum cp_timeline_format formats[] = {
		CP_TIMELINE_EVENTS, CP_TIMELINE_TRACE, CP_TIMELINE_SPEEDSCOPE};
	for (size_t i = 0; i < 3; i++) {
		size_t small = heap_after(formats[i], 2, 10000);
		size_t large = heap_after(formats[i], 2, 400000);
		ck_assert_msg(large <= small + 64 * 1024,
			      "format %zu: heap %zu bytes after 10,000 samples, %zu after 400,000",
			      i, small, large);
	}
}
END_TEST

/* ---------------------------------------------------------------- cli */

struct cli_run {
	int code;   /* exit code; -1 when killed by a signal */
	char *out;  /* standard output, NUL-terminated */
	char *err;  /* standard error */
};

/* Everything F (a pipe) gives, NUL-terminated; F stays open.  */
static char *slurp_stream_nofree(FILE *f)
{
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	ck_assert_ptr_nonnull(mem);
	int c;
	while ((c = getc(f)) != EOF)
		putc(c, mem);
	fclose(mem);
	return text;
}

static char *slurp_stream(FILE *f)
{
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	ck_assert_ptr_nonnull(mem);
	rewind(f);
	int c;
	while ((c = getc(f)) != EOF)
		putc(c, mem);
	fclose(mem);
	fclose(f);
	return text;
}

/* Run cprof with ARGS (NULL-terminated, without argv[0]), INPUT on its
 * standard input (NULL: /dev/null).  */
static struct cli_run cli_runv(const char *input, const char *const args[])
{
	FILE *out = tmpfile(), *err = tmpfile();
	FILE *in = input ? stream_of(input) : fopen("/dev/null", "r");
	ck_assert(out && err && in);
	const char *argv[32] = {"cprof"};
	size_t argc = 1;
	for (size_t i = 0; args[i]; i++) {
		ck_assert_uint_lt(argc, 31);
		argv[argc++] = args[i];
	}
	argv[argc] = NULL;
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(fileno(in), STDIN_FILENO);
		dup2(fileno(out), STDOUT_FILENO);
		dup2(fileno(err), STDERR_FILENO);
		alarm(30); /* survives exec: a hung cprof dies */
		execv(CPROF, (char *const *)argv);
		fprintf(stderr, "cannot run %s: %s\n", CPROF, strerror(errno));
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		ck_assert_int_eq(errno, EINTR);
	fclose(in);
	return (struct cli_run){
		.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1,
		.out = slurp_stream(out),
		.err = slurp_stream(err),
	};
}

#define CLI(input, ...) \
	cli_runv((input), (const char *const[]){ __VA_ARGS__, NULL })

static void cli_free(struct cli_run *run)
{
	free(run->out);
	free(run->err);
}

static void assert_ok(const struct cli_run *run, const char *what)
{
	ck_assert_msg(run->code == 0 && run->err[0] == '\0',
		      "%s: exit %d, stderr: %s", what, run->code, run->err);
}

/* RUN failed with CODE and the one line "cprof: MESSAGE" on stderr, and
 * wrote nothing on stdout.  */
static void assert_fails(const struct cli_run *run, int code,
			 const char *message, const char *what)
{
	ck_assert_msg(run->code == code, "%s: exit %d, expected %d; stderr: %s",
		      what, run->code, code, run->err);
	char want[4096];
	snprintf(want, sizeof(want), "cprof: %s\n", message);
	ck_assert_msg(strcmp(run->err, want) == 0, "%s: stderr\n  %s  expected\n  %s",
		      what, run->err, want);
	ck_assert_msg(run->out[0] == '\0', "%s: wrote to stdout: %.200s", what,
		      run->out);
}

static void teardown(void)
{
	tu_cleanup();
}

static char *path_in(const char *dir, const char *name)
{
	char *path;
	ck_assert_int_gt(asprintf(&path, "%s/%s", dir, name), 0);
	return path;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "cannot create %s", path);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

static int dir_count(const char *dir)
{
	char **names;
	int n = tu_dir_entries(dir, &names);
	tu_free_names(names);
	return n;
}

static char *slurp(const char *path)
{
	char *text = tu_read_file(path);
	ck_assert_msg(text != NULL, "cannot read %s: %s", path,
		      strerror(errno));
	return text;
}

START_TEST(cli_examples)
{
	const char *dir = tu_temp_dir();
	ck_assert_ptr_nonnull(dir);
	for (size_t i = 0; i < sizeof(examples) / sizeof(*examples); i++) {
		char what[64], n[16];
		snprintf(what, sizeof(what), "cli example %zu", i);
		snprintf(n, sizeof(n), "%u", examples[i].min_samples);
		/* standard input to standard output */
		struct cli_run run = CLI(examples[i].raw, "timeline",
					 "--min-samples", n, "-");
		assert_ok(&run, what);
		assert_text_eq(run.out, examples[i].events, what);
		cli_free(&run);
		/* a file to a file, options after the argument */
		char *raw = path_in(dir, "in.raw"), *out = path_in(dir, "out.txt");
		write_file(raw, examples[i].raw);
		run = CLI(NULL, "timeline", raw, "-o", out, "--format=events",
			  "--min-samples", n);
		assert_ok(&run, what);
		ck_assert_str_eq(run.out, "");
		char *got = slurp(out);
		assert_text_eq(got, examples[i].events, what);
		free(got);
		free(raw);
		free(out);
		cli_free(&run);
	}
}
END_TEST

/* The format from --format or from the name of the output.  */
START_TEST(cli_formats)
{
	const char *dir = tu_temp_dir();
	ck_assert_ptr_nonnull(dir);
	char *raw = path_in(dir, "in.raw");
	write_file(raw, "# thread 7 main\n1.0 7 main;work\n2.0 7 main\n");
	char *trace = convert("# thread 7 main\n1.0 7 main;work\n2.0 7 main\n",
			      CP_TIMELINE_TRACE, 1);
	static const struct {
		const char *file;
		const char *format; /* NULL: from the name */
		const char *start;
	} cases[] = {
		{"a.json", NULL, "{\"traceEvents\":["},
		{"a.JSON", NULL, "{\"traceEvents\":["},
		{"a.speedscope.json", NULL, "{\"$schema\":\"https://www.speedscope.app/"},
		{"a.txt", NULL, "start 1.0 7 main\n"},
		{"a.events", NULL, "start 1.0 7 main\n"},
		{"b.json", "events", "start 1.0 7 main\n"},
		{"b.txt", "trace", "{\"traceEvents\":["},
		{"b.dat", "speedscope", "{\"$schema\":\"https://www.speedscope.app/"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		char *out = path_in(dir, cases[i].file);
		struct cli_run run =
			cases[i].format
				? CLI(NULL, "timeline", raw, "-o", out,
				      "--format", cases[i].format)
				: CLI(NULL, "timeline", raw, "-o", out);
		assert_ok(&run, cases[i].file);
		char *got = slurp(out);
		ck_assert_msg(strncmp(got, cases[i].start,
				      strlen(cases[i].start)) == 0,
			      "%s begins %.60s", cases[i].file, got);
		free(got);
		free(out);
		cli_free(&run);
	}
	/* the program writes what the library writes */
	struct cli_run run = CLI(NULL, "timeline", "--format", "trace", raw);
	assert_ok(&run, "trace to stdout");
	assert_text_eq(run.out, trace, "cprof timeline --format trace");
	cli_free(&run);
	free(trace);
	free(raw);
}
END_TEST

START_TEST(cli_usage_errors)
{
	static const struct {
		const char *args[6];
		const char *message;
	} cases[] = {
		{{"timeline"}, "missing RAW (see cprof timeline --help)"},
		{{"timeline", "a", "b"}, "unexpected argument 'b' (see cprof timeline --help)"},
		{{"timeline", "--format", "png", "a"}, "unknown format 'png' for timeline: events, trace or speedscope (see cprof timeline --help)"},
		{{"timeline", "--min-samples", "0", "a"}, "invalid --min-samples '0': expected a whole number from 1 to 2147483647 (see cprof timeline --help)"},
		{{"timeline", "--min-samples", "x", "a"}, "invalid --min-samples 'x': expected a whole number from 1 to 2147483647 (see cprof timeline --help)"},
		{{"timeline", "a", "--min-samples"}, "option '--min-samples' needs a value (see cprof timeline --help)"},
		{{"timeline", "--top", "3", "a"}, "unknown option '--top' for cprof timeline (see cprof timeline --help)"},
		{{"timeline", "/nonexistent/x.raw"}, "cannot open /nonexistent/x.raw: No such file or directory"},
		{{"timeline", "/"}, "/ is a directory, not a file of raw samples"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct cli_run run = cli_runv(NULL, cases[i].args);
		char what[64];
		snprintf(what, sizeof(what), "usage case %zu", i);
		assert_fails(&run, 2, cases[i].message, what);
		cli_free(&run);
	}
	struct cli_run run = CLI(NULL, "timeline", "--help");
	assert_ok(&run, "timeline --help");
	ck_assert(strncmp(run.out, "Usage: cprof timeline ", 22) == 0);
	ck_assert(strstr(run.out, "--min-samples N"));
	ck_assert(strstr(run.out, "Exit status: "));
	cli_free(&run);
	run = CLI(NULL, "--help");
	assert_ok(&run, "--help");
	ck_assert(strstr(run.out, "\nUsage: cprof timeline "));
	cli_free(&run);
}
END_TEST

/* Malformed lines: one message naming the line, exit 2, and nothing
 * written: no output file, not even a temporary, an existing file kept,
 * nothing on standard output, whatever the format.  */
START_TEST(cli_bad_input)
{
	const char *in_dir = tu_temp_dir();
	const char *out_dir = tu_temp_dir();
	ck_assert(in_dir && out_dir);
	static const struct {
		const char *raw;
		const char *message; /* after "FILE:" */
	} cases[] = {
		{"1.0 7 main\n2.0\n", "2: missing thread id: expected 'TIMESTAMP TID FRAME;FRAME;...', found '2.0'"},
		{"1.0 7 main\n# c\nabc 7 main\n", "3: timestamp 'abc' is not a number of seconds"},
		{"1.0 7 main\n2.0 7 main;f\n1.5 7 main\n", "3: time goes backwards in thread 7: 1.5 after 2.0"},
		{"1.0 7 main\n2.0 7 main;;f\n", "2: frame 2 is empty in 'main;;f'"},
		{"# thread 7 main\n", " no samples (the input is empty, or has only blank lines and headers)"},
	};
	static const char *const formats[] = {"events", "trace", "speedscope"};
	char *raw = path_in(in_dir, "bad.raw");
	char *out = path_in(out_dir, "out.json");
	char *kept = path_in(out_dir, "kept.json");
	write_file(kept, "old\n");
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		write_file(raw, cases[i].raw);
		/* a long valid prefix, so that output would be flushed */
		char *big = NULL;
		size_t size = 0;
		FILE *mem = open_memstream(&big, &size);
		for (int k = 0; k < 20000; k++)
			fprintf(mem, "0.%06d 9 main;f%d;g\n", k, k % 7);
		fputs(cases[i].raw, mem);
		fclose(mem);
		char message[PATH_MAX + 256], stdin_message[512];
		snprintf(message, sizeof(message), "%s:%s", raw, cases[i].message);
		snprintf(stdin_message, sizeof(stdin_message), "<stdin>:%s",
			 cases[i].message);
		for (size_t f = 0; f < 3; f++) {
			char what[64];
			snprintf(what, sizeof(what), "bad input %zu, %s", i,
				 formats[f]);
			struct cli_run run = CLI(NULL, "timeline", raw, "-o",
						 out, "--format", formats[f]);
			assert_fails(&run, 2, message, what);
			cli_free(&run);
			ck_assert_msg(dir_count(out_dir) == 1,
				      "%s left files in %s", what, out_dir);
			run = CLI(NULL, "timeline", raw, "-o", kept,
				  "--format", formats[f]);
			assert_fails(&run, 2, message, what);
			cli_free(&run);
			/* standard output: nothing at all */
			run = CLI(NULL, "timeline", raw, "--format", formats[f]);
			assert_fails(&run, 2, message, what);
			cli_free(&run);
			if (i < 4) {
				/* line numbers count the prefix */
				char shifted[512];
				int line = atoi(cases[i].message) + 20000;
				snprintf(shifted, sizeof(shifted), "<stdin>:%d%s",
					 line, strchr(cases[i].message, ':'));
				run = CLI(big, "timeline", "-", "--format",
					  formats[f]);
				assert_fails(&run, 2, shifted, what);
				cli_free(&run);
			} else {
				run = CLI(cases[i].raw, "timeline", "-",
					  "--format", formats[f]);
				assert_fails(&run, 2, stdin_message, what);
				cli_free(&run);
			}
		}
		free(big);
	}
	char *old = slurp(kept);
	ck_assert_str_eq(old, "old\n");
	free(old);
	ck_assert_int_eq(dir_count(out_dir), 1);
	free(raw);
	free(out);
	free(kept);

	struct cli_run run = CLI(NULL, "timeline", "x", "-o",
				 "/nonexistent/x.json");
	assert_fails(&run, 1, "cannot create output file /nonexistent/x.json: No such file or directory",
		     "unwritable output");
	cli_free(&run);

	/* No room for the temporary files: standard output's spool, a
	 * speedscope thread's events.  */
	char *good = path_in(in_dir, "good.raw");
	out = path_in(out_dir, "out.speedscope.json");
	write_file(good, "1 7 main\n");
	setenv("TMPDIR", "/nonexistent", 1);
	run = CLI(NULL, "timeline", good);
	assert_fails(&run, 1, "cannot create a temporary file in /nonexistent: No such file or directory (set TMPDIR to a writable directory, or give -o FILE)",
		     "no TMPDIR, standard output");
	cli_free(&run);
	run = CLI(NULL, "timeline", good, "-o", out);
	char message[PATH_MAX + 256];
	snprintf(message, sizeof(message),
		 "%s:1: cannot create a temporary file in /nonexistent: No such file or directory (set TMPDIR to a writable directory)",
		 good);
	assert_fails(&run, 1, message, "no TMPDIR, speedscope");
	cli_free(&run);
	unsetenv("TMPDIR");
	ck_assert_int_eq(dir_count(out_dir), 1);
	free(good);
	free(out);
}
END_TEST

/* ----------------------------------------------------------------- suite */

/* ----------------------------------------------------- real programs */

/* Checks a Chrome trace (argv[1]) the way a viewer reads it: a
 * process_name event, a thread_name event for every thread with events,
 * and per thread B/E properly nested, each E after its B (a pair at one
 * timestamp is drawn as nothing, and speedscope's importer warns).
 * Prints "ok THREADS PAIRS".  */
static const char trace_check[] =
	"import json, sys\n"
	"doc = json.load(open(sys.argv[1]))\n"
	"procs, names, open_, pairs = set(), {}, {}, 0\n"
	"for e in doc['traceEvents']:\n"
	"    if e['ph'] == 'M':\n"
	"        if e['name'] == 'process_name' and e['args']['name']:\n"
	"            procs.add(e['pid'])\n"
	"        if e['name'] == 'thread_name':\n"
	"            names[e['tid']] = e['args']['name']\n"
	"        continue\n"
	"    st = open_.setdefault(e['tid'], [])\n"
	"    if e['ph'] == 'B':\n"
	"        st.append(e)\n"
	"        continue\n"
	"    assert e['ph'] == 'E', e\n"
	"    b = st.pop()\n"
	"    assert b['name'] == e['name'], (b, e)\n"
	"    assert e['ts'] > b['ts'], 'zero-length: %r %r' % (b, e)\n"
	"    pairs += 1\n"
	"assert all(not st for st in open_.values()), 'unbalanced'\n"
	"assert open_, 'no events'\n"
	"pids = {e['pid'] for e in doc['traceEvents']}\n"
	"assert pids <= procs, 'no process_name for %r' % (pids - procs)\n"
	"for tid in open_:\n"
	"    assert names.get(tid), 'no thread_name for %d' % tid\n"
	"print('ok', len(open_), pairs)\n";

/* Run trace_check on PATH; fails the test unless it says ok.  */
static void check_trace_file(const char *path)
{
	char script[4096], cmd[8192];
	snprintf(script, sizeof(script), "%s/trace_check.py", tu_temp_dir());
	write_file(script, trace_check);
	snprintf(cmd, sizeof(cmd), "python3 '%s' '%s' 2>&1", script, path);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	char *out = slurp_stream_nofree(p);
	int status = pclose(p);
	ck_assert_msg(status == 0 && strncmp(out, "ok ", 3) == 0,
		      "trace %s: %s", path, out);
	free(out);
}

/* N of "cprof-attach: N samples from ..." in RUN's standard error.  */
static unsigned long long summary_samples(const struct tu_run *run)
{
	const char *at = strstr(run->err, "cprof-attach: ");
	ck_assert_msg(at != NULL, "no summary: %s", run->err);
	char *end;
	unsigned long long n = strtoull(at + 14, &end, 10);
	ck_assert_msg(strncmp(end, " samples from", 13) == 0,
		      "no sample count in: %.200s", at);
	return n;
}

/* What cprof-attach --format raw found on the threads fixture with two
 * busy programs beside it (2 CPUs): its workers wait for a CPU, so a
 * sample can stand for several ticks (--wall: ticks that came due while
 * a stop asked for waited with the thread; CPU mode: CPU time of more
 * than a period).  In both modes the raw file's weights add up to the
 * summary's samples (the folded profile's total); one line per sample
 * did not (--wall: 946 lines for 986 samples).  Then cprof timeline makes
 * a trace of it that viewers draw (thread names, no zero-length
 * frames).  */
static const char *const raw_modes[] = {"--wall", "--frequency=99"};

START_TEST(e2e_raw_weights)
{
	struct tu_proc *fixture = tu_fixture_start("threads", "60", NULL);
	ck_assert_ptr_nonnull(fixture);
	ck_assert(tu_proc_wait_line(fixture, "ready", 30000));
	for (int i = 0; i < 2; i++) {
		struct tu_proc *hog = tu_fixture_start("chain-O0", "60", NULL);
		ck_assert_ptr_nonnull(hog);
		ck_assert(tu_proc_wait_line(hog, "ready", 30000));
	}
	const char *dir = tu_temp_dir();
	char *raw_path = path_in(dir, "app.raw");
	char *trace_path = path_in(dir, "app.json");
	struct tu_run *run = tu_cprof_run(60000, raw_modes[_i], "--format",
					  "raw", "-d", "2", "-o", raw_path,
					  fixture->pid_text, NULL);
	if (tu_run_exit_code(run) != 0)
		tu_run_dump(run, "cprof-attach", 4000);
	ck_assert_int_eq(tu_run_exit_code(run), 0);
	unsigned long long samples = summary_samples(run);

	char *text = slurp(raw_path);
	bool weighted = false;
	unsigned long long lines = 0, total = 0;
	for (char *line = text, *eol; *line; line = eol + 1) {
		eol = strchr(line, '\n');
		ck_assert_ptr_nonnull(eol);
		*eol = '\0';
		if (strcmp(line, "# fields SECONDS TID WEIGHT STACK") == 0)
			weighted = true;
		if (line[0] == '#')
			continue;
		lines++;
		unsigned long long weight = 1;
		if (weighted) {
			char *p = strchr(line, ' ');
			ck_assert_ptr_nonnull(p);
			p = strchr(p + 1, ' ');
			ck_assert_ptr_nonnull(p);
			weight = strtoull(p + 1, NULL, 10);
			ck_assert_uint_ge(weight, 1);
		}
		total += weight;
	}
	free(text);
	fprintf(stderr, "e2e_raw_weights %s: %llu samples in %llu raw lines\n",
		raw_modes[_i], samples, lines);
	ck_assert_msg(total == samples,
		      "%s: the raw file stands for %llu samples (%llu lines%s), the summary (and the folded profile) %llu",
		      raw_modes[_i], total, lines,
		      weighted ? "" : ", no weights", samples);

	struct cli_run cli = CLI(NULL, "timeline", raw_path, "-o", trace_path);
	assert_ok(&cli, "cprof timeline");
	cli_free(&cli);
	check_trace_file(trace_path);
	free(raw_path);
	free(trace_path);
}
END_TEST

/* cprof-attach --format trace of a real program whose stack changes at
 * nearly every sample (python3 compressing with zlib), so frames begin at
 * each thread's last sample: each still has a width, and the process and
 * thread are named.  */
START_TEST(e2e_trace_python)
{
	const char *dir = tu_temp_dir();
	char *script = path_in(dir, "z.py");
	char *trace_path = path_in(dir, "python.json");
	write_file(script,
		   "import sys, time, zlib\n"
		   "data = bytes(range(256)) * 4096\n"
		   "end = time.monotonic() + float(sys.argv[1])\n"
		   "while time.monotonic() < end:\n"
		   "    zlib.compress(data, 6)\n");
	struct tu_run *run = tu_cprof_run(60000, "-F", "199", "--format",
					  "trace", "-o", trace_path, "--",
					  "python3", script, "1", NULL);
	if (tu_run_exit_code(run) != 0)
		tu_run_dump(run, "cprof-attach", 4000);
	ck_assert_int_eq(tu_run_exit_code(run), 0);
	check_trace_file(trace_path);
	free(script);
	free(trace_path);
}
END_TEST


/* cp_timeline_convert: read, write and finish in one call; spooled,
 * nothing reaches the output before the timeline is complete, and the
 * output is the same as written directly.  */
START_TEST(convert_spooled)
{
	static const char text[] = "1 1 main;a\n2 1 main;b\n3 2 x\n";
	for (int format = CP_TIMELINE_EVENTS; format <= CP_TIMELINE_SPEEDSCOPE;
	     format++) {
		char *want = convert(text, (enum cp_timeline_format)format, 1);
		for (int spool = 0; spool < 2; spool++) {
			char *out = NULL;
			size_t size = 0;
			FILE *mem = open_memstream(&out, &size);
			struct cp_timeline_options o = {
				.format = (enum cp_timeline_format)format,
				.min_samples = 1,
				.name = "t.raw",
			};
			FILE *in = stream_of(text);
			char error[256];
			const char *dir = "untouched";
			ck_assert_int_eq(cp_timeline_convert(&o, in, "t.raw", mem,
							     spool, &dir, error,
							     sizeof(error)),
					 0);
			fclose(in);
			ck_assert_str_eq(error, "");
			ck_assert_ptr_null(dir);
			ck_assert_int_eq(fclose(mem), 0);
			assert_text_eq(out, want, "cp_timeline_convert");
			free(out);
		}
		free(want);
	}

	/* A malformed line after good ones: its message, and spooled,
	 * nothing written.  */
	char *out = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&out, &size);
	struct cp_timeline_options o = {.format = CP_TIMELINE_EVENTS};
	FILE *in = stream_of("1 1 main;a\n2 1 main;b\nbad\n");
	char error[256];
	const char *dir;
	ck_assert_int_eq(cp_timeline_convert(&o, in, "t.raw", mem, true, &dir,
					     error, sizeof(error)),
			 -CP_E_PARSE);
	fclose(in);
	fclose(mem);
	ck_assert_uint_eq(size, 0);
	ck_assert_str_eq(error, "t.raw:3: missing thread id: expected 'TIMESTAMP TID FRAME;FRAME;...', found 'bad'");
	free(out);

	/* No room for the spool: -CP_E_SYS, the directory tried, no
	 * message of its own, nothing written.  */
	char *saved = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
	setenv("TMPDIR", "/nonexistent", 1);
	out = NULL;
	mem = open_memstream(&out, &size);
	in = stream_of("1 1 main\n");
	errno = 0;
	int rc = cp_timeline_convert(&o, in, "t.raw", mem, true, &dir, error,
				     sizeof(error));
	int err = errno;
	char tried[64];
	snprintf(tried, sizeof(tried), "%s", dir ? dir : "(null)");
	if (saved)
		setenv("TMPDIR", saved, 1);
	else
		unsetenv("TMPDIR");
	free(saved);
	fclose(in);
	fclose(mem);
	ck_assert_int_eq(rc, -CP_E_SYS);
	ck_assert_int_eq(err, ENOENT);
	ck_assert_str_eq(tried, "/nonexistent");
	ck_assert_str_eq(error, "");
	ck_assert_uint_eq(size, 0);
	free(out);
}
END_TEST

static Suite *timeline_suite(void)
{
	Suite *s = suite_create("timeline");

	TCase *tc = tcase_create("engine");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, issue_examples);
	tcase_add_test(tc, debounce_details);
	tcase_add_test(tc, raw_lenient);
	tcase_add_test(tc, raw_malformed);
	tcase_add_test(tc, api_contract);
	tcase_add_test(tc, api_empty_stacks);
	tcase_add_test(tc, convert_spooled);
	tcase_add_test(tc, trace_golden);
	tcase_add_test(tc, speedscope_golden);
	tcase_add_test(tc, raw_weights);
	tcase_add_loop_test(tc, property_random, 0, 4);
	tcase_add_test(tc, json_read_back);
	tcase_add_test(tc, memory_flat);
	suite_add_tcase(s, tc);

	tc = tcase_create("cli");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, cli_examples);
	tcase_add_test(tc, cli_formats);
	tcase_add_test(tc, cli_usage_errors);
	tcase_add_test(tc, cli_bad_input);
	suite_add_tcase(s, tc);

	tc = tcase_create("e2e");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 150);
	tcase_add_loop_test(tc, e2e_raw_weights, 0,
			    sizeof(raw_modes) / sizeof(*raw_modes));
	tcase_add_test(tc, e2e_trace_python);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(timeline_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
