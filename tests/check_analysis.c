/* The analyses of the library driven directly, no program in between:
 *
 *   - report (cp_report_functions, cp_report_write) on a hand-built
 *     profile: self and total weights, a recursive function counted once
 *     per stack, inlined lines counting as functions, the order of both
 *     tables, --top, the unit taken from the profile (bytes for a heap
 *     profile), an empty profile, a stream that cannot be written;
 *   - diff (cp_diff_*) of two hand-built profiles: stacks of either,
 *     merged across threads and locations of one name, byte order,
 *     normalizing (rounded half up), the folded text;
 *   - the raw sample reader (cp_raw_read) with callbacks: every field and
 *     header, the format from before weights, a byte-order mark and
 *     "\r\n", frames split from the start or from a frame on
 *     (cp_raw_frames), malformed lines (one "NAME:LINE: what" each,
 *     the samples before them delivered), a callback's own failure, no
 *     samples, gzip data.  */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/diff.h"
#include "cprof/error.h"
#include "cprof/profile.h"
#include "cprof/rawread.h"
#include "cprof/report.h"
#include "cprof/timeline.h"

/* ------------------------------------------------------------ helpers */

/* A location of PROFILE with one line per name of NAMES (innermost first,
 * NULL-ended), the outer ones marked inlined into the next as the
 * symbolizer does.  */
static uint32_t location(struct cp_profile *p, const char *const *names)
{
	struct cp_line lines[8];
	uint32_t n = 0;
	for (; names[n]; n++)
		lines[n] = (struct cp_line){
			.function = cp_profile_intern(p, names[n],
						      strlen(names[n])),
			.inlined = names[n + 1] != NULL,
		};
	uint32_t id = cp_profile_add_location(p, 0, 0, lines, n);
	ck_assert_uint_ne(id, UINT32_MAX);
	return id;
}

/* Add COUNT samples of the stack of locations LOCS (innermost first, N)
 * on thread TID.  */
static void add(struct cp_profile *p, pid_t tid, const uint32_t *locs,
		size_t n, uint64_t count)
{
	uint32_t stack = cp_profile_intern_stack(p, locs, n);
	ck_assert_uint_ne(stack, UINT32_MAX);
	ck_assert_int_eq(cp_profile_add(p, tid, stack, count), 0);
}

/* What WRITE wrote to a memory stream; the caller frees it.  */
static char *report_text(const struct cp_profile *p,
			 const struct cp_report_options *o)
{
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	ck_assert_ptr_nonnull(mem);
	ck_assert_int_eq(cp_report_write(p, o, mem), 0);
	ck_assert_int_eq(fclose(mem), 0);
	return text;
}

/* A profile of main -> parse -> hash (hash recursing once), main ->
 * parse, and main -> work with lookup inlined into work:
 *   main;parse;hash;hash   5  (thread 1)
 *   main;parse            3  (thread 1)
 *   main;parse;hash        2  (thread 2)
 *   main;work;lookup[i]    10 (thread 1: one location, two lines)  */
static struct cp_profile *sample_profile(void)
{
	struct cp_profile *p = cp_profile_new();
	ck_assert_ptr_nonnull(p);
	uint32_t main_ = location(p, (const char *[]){"main", NULL});
	uint32_t parse = location(p, (const char *[]){"parse", NULL});
	uint32_t hash = location(p, (const char *[]){"hash", NULL});
	uint32_t work = location(p, (const char *[]){"lookup", "work", NULL});
	add(p, 1, (uint32_t[]){hash, hash, parse, main_}, 4, 5);
	add(p, 1, (uint32_t[]){parse, main_}, 2, 3);
	add(p, 2, (uint32_t[]){hash, parse, main_}, 3, 2);
	add(p, 1, (uint32_t[]){work, main_}, 2, 10);
	return p;
}

/* ------------------------------------------------------------- report */

START_TEST(report_functions)
{
	struct cp_profile *p = sample_profile();
	struct cp_report_function *f;
	size_t n;
	ck_assert_int_eq(cp_report_functions(p, &f, &n), 0);
	/* By self, then total, then name: lookup 10/10, hash 7/7, parse
	 * 3/10, main 0/20, work 0/10.  */
	static const struct {
		const char *name;
		uint64_t self, total;
	} want[] = {
		{"lookup", 10, 10}, {"hash", 7, 7}, {"parse", 3, 10},
		{"main", 0, 20},    {"work", 0, 10},
	};
	ck_assert_uint_eq(n, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < n; i++) {
		ck_assert_str_eq(f[i].name, want[i].name);
		ck_assert_str_eq(cp_profile_string(p, f[i].function),
				 want[i].name);
		ck_assert_uint_eq(f[i].self, want[i].self);
		ck_assert_uint_eq(f[i].total, want[i].total);
	}
	free(f);
	cp_profile_free(p);
}
END_TEST

START_TEST(report_text_golden)
{
	struct cp_profile *p = sample_profile();
	char *text = report_text(p, &(struct cp_report_options){
					    .top = 3, .name = "hand"});
	ck_assert_str_eq(
		text,
		"hand: 20 samples, 4 stacks, 5 functions\n"
		"\n"
		"Top 3 of 5 functions by self samples:\n"
		" self   self%  total  total%  function\n"
		"   10  50.00%     10  50.00%  lookup\n"
		"    7  35.00%      7  35.00%  hash\n"
		"    3  15.00%     10  50.00%  parse\n"
		"\n"
		"Top 3 of 5 functions by total samples:\n"
		"total  total%   self   self%  function\n"
		"   20 100.00%      0   0.00%  main\n"
		"   10  50.00%     10  50.00%  lookup\n"
		"   10  50.00%      3  15.00%  parse\n");
	free(text);
	/* No options: every function, named "profile".  */
	text = report_text(p, NULL);
	ck_assert_ptr_nonnull(strstr(text, "profile: 20 samples, 4 stacks, 5 functions\n"));
	ck_assert_ptr_nonnull(strstr(text, "Top 5 of 5 functions by self samples:\n"));
	ck_assert_ptr_nonnull(strstr(text, "      0   0.00%  work\n"));
	free(text);
	cp_profile_free(p);
}
END_TEST

/* The unit comes from the profile: a heap profile's report says bytes.  */
START_TEST(report_unit_from_profile)
{
	struct cp_profile *p = sample_profile();
	cp_profile_set_count_type(p, "inuse_space", "bytes");
	char *text = report_text(p, &(struct cp_report_options){.top = 1});
	ck_assert_ptr_nonnull(strstr(text, "profile: 20 bytes, 4 stacks"));
	ck_assert_ptr_nonnull(strstr(text, "functions by self bytes:\n"));
	ck_assert_ptr_nonnull(strstr(text, "functions by total bytes:\n"));
	ck_assert_ptr_null(strstr(text, "samples"));
	free(text);
	/* Objects: allocations.  */
	cp_profile_set_count_type(p, "alloc_objects", "count");
	text = report_text(p, &(struct cp_report_options){.top = 1});
	ck_assert_ptr_nonnull(strstr(text, "profile: 20 allocations, 4 stacks"));
	ck_assert_ptr_nonnull(strstr(text, "functions by self allocations:\n"));
	free(text);
	cp_profile_free(p);
}
END_TEST

START_TEST(report_empty_profile)
{
	struct cp_profile *p = cp_profile_new();
	struct cp_report_function *f = (void *)1;
	size_t n = 1;
	ck_assert_int_eq(cp_report_functions(p, &f, &n), 0);
	ck_assert_ptr_null(f);
	ck_assert_uint_eq(n, 0);
	char *text = report_text(p, NULL);
	ck_assert_str_eq(text, "profile: 0 samples, 0 stacks, 0 functions\n"
			       "\n"
			       "Top 0 of 0 functions by self samples:\n"
			       " self   self%  total  total%  function\n"
			       "\n"
			       "Top 0 of 0 functions by total samples:\n"
			       "total  total%   self   self%  function\n");
	free(text);
	cp_profile_free(p);
}
END_TEST

/* A stream that cannot be written: -CP_E_SYS.  */
START_TEST(report_write_error)
{
	struct cp_profile *p = sample_profile();
	FILE *full = fopen("/dev/full", "we");
	ck_assert_ptr_nonnull(full);
	setvbuf(full, NULL, _IONBF, 0);
	ck_assert_int_eq(cp_report_write(p, NULL, full), -CP_E_SYS);
	fclose(full);
	cp_profile_free(p);
}
END_TEST

/* --------------------------------------------------------------- diff */

START_TEST(diff_two_profiles)
{
	/* before: main;parse;hash;hash 5 + main;parse 3 + main;parse;hash 2
	 * + main;work;lookup_[i] 10 (sample_profile), total 20.  */
	struct cp_profile *before = sample_profile();
	/* after: main;parse 4 on two threads through two locations of one
	 * name, main;idle 6, an empty stack 2; total 12.  */
	struct cp_profile *after = cp_profile_new();
	uint32_t main_ = location(after, (const char *[]){"main", NULL});
	uint32_t parse1 = location(after, (const char *[]){"parse", NULL});
	uint32_t parse2 = location(after, (const char *[]){"parse", NULL});
	uint32_t idle = location(after, (const char *[]){"idle", NULL});
	add(after, 1, (uint32_t[]){parse1, main_}, 2, 1);
	add(after, 2, (uint32_t[]){parse2, main_}, 2, 3);
	add(after, 1, (uint32_t[]){idle, main_}, 2, 6);
	add(after, 3, NULL, 0, 2);

	struct cp_diff *d;
	ck_assert_int_eq(cp_diff_new(before, after, false, &d), 0);
	size_t n;
	const struct cp_diff_stack *s = cp_diff_stacks(d, &n);
	static const struct {
		const char *stack;
		uint64_t before, after, normalized;
	} want[] = {
		{"", 0, 2, 0},
		{"main;idle", 0, 6, 0},
		{"main;parse", 3, 4, 2},          /* 3 * 12 / 20 = 1.8 */
		{"main;parse;hash", 2, 0, 1},     /* 1.2 */
		{"main;parse;hash;hash", 5, 0, 3}, /* 3.0 */
		{"main;work;lookup_[i]", 10, 0, 6}, /* 6.0 */
	};
	ck_assert_uint_eq(n, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < n; i++) {
		ck_assert_str_eq(s[i].stack, want[i].stack);
		ck_assert_uint_eq(s[i].before, want[i].before);
		ck_assert_uint_eq(s[i].after, want[i].after);
	}
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	ck_assert_int_eq(cp_diff_write_folded(d, mem), 0);
	fclose(mem);
	ck_assert_str_eq(text, " 0 2\n"
			       "main;idle 0 6\n"
			       "main;parse 3 4\n"
			       "main;parse;hash 2 0\n"
			       "main;parse;hash;hash 5 0\n"
			       "main;work;lookup_[i] 10 0\n");
	free(text);
	cp_diff_free(d);

	ck_assert_int_eq(cp_diff_new(before, after, true, &d), 0);
	s = cp_diff_stacks(d, &n);
	ck_assert_uint_eq(n, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < n; i++) {
		ck_assert_str_eq(s[i].stack, want[i].stack);
		ck_assert_uint_eq(s[i].before, want[i].normalized);
		ck_assert_uint_eq(s[i].after, want[i].after);
	}
	cp_diff_free(d);

	/* Against an empty profile: every stack of the other, 0 on the
	 * empty side; normalizing an empty BEFORE changes nothing.  */
	struct cp_profile *empty = cp_profile_new();
	ck_assert_int_eq(cp_diff_new(empty, after, true, &d), 0);
	s = cp_diff_stacks(d, &n);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(s[2].stack, "main;parse");
	ck_assert_uint_eq(s[2].before, 0);
	ck_assert_uint_eq(s[2].after, 4);
	cp_diff_free(d);
	ck_assert_int_eq(cp_diff_new(empty, empty, false, &d), 0);
	cp_diff_stacks(d, &n);
	ck_assert_uint_eq(n, 0);
	cp_diff_free(d);
	cp_diff_free(NULL);
	cp_profile_free(empty);
	cp_profile_free(before);
	cp_profile_free(after);
}
END_TEST

/* ---------------------------------------------------------------- raw */

/* What the callbacks saw, one line per call.  */
struct recorder {
	char *text;
	size_t size;
	FILE *log;
	int fail_at;      /* the sample (from 1) whose callback fails; 0: none */
	bool explain;     /* ... with a message of its own */
	int samples;
};

static int rec_sample(void *arg, const struct cp_raw_sample *s)
{
	struct recorder *r = arg;
	if (++r->samples == r->fail_at) {
		if (r->explain)
			cp_raw_fail(s->reader, "refused sample %d", r->samples);
		return -CP_E_INVAL;
	}
	const char *const *frames;
	const size_t *lens;
	size_t n;
	int rc = cp_raw_frames(s, 0, 0, &frames, &lens, &n);
	if (rc < 0)
		return rc;
	fprintf(r->log, "sample %s=%.9g %d %llu [%zu]", s->seconds_text,
		s->seconds, (int)s->tid, (unsigned long long)s->weight, n);
	for (size_t i = 0; i < n; i++)
		fprintf(r->log, " <%.*s>", (int)lens[i], frames[i]);
	fputc('\n', r->log);
	return 0;
}

static int rec_thread(void *arg, pid_t tid, const char *name)
{
	fprintf(((struct recorder *)arg)->log, "thread %d <%s>\n", (int)tid,
		name);
	return 0;
}

static int rec_target(void *arg, pid_t pid, const char *name)
{
	fprintf(((struct recorder *)arg)->log, "target %d <%s>\n", (int)pid,
		name ? name : "(none)");
	return 0;
}

static int rec_frequency(void *arg, double hz)
{
	fprintf(((struct recorder *)arg)->log, "frequency %g\n", hz);
	return 0;
}

static int rec_weight_unit(void *arg, enum cp_raw_weight_unit unit)
{
	fprintf(((struct recorder *)arg)->log, "weight-unit %d\n", (int)unit);
	return 0;
}

static const struct cp_raw_callbacks rec_callbacks = {
	.sample = rec_sample,
	.thread = rec_thread,
	.target = rec_target,
	.frequency = rec_frequency,
	.weight_unit = rec_weight_unit,
};

/* Read TEXT (LEN bytes) through the recorder; its log into *LOG (the
 * caller frees it), the message into ERROR.  Returns cp_raw_read's
 * result.  */
static int read_raw(const char *text, size_t len, struct recorder *r,
		    char **log, char error[256])
{
	FILE *in = fmemopen((void *)text, len, "r");
	ck_assert_ptr_nonnull(in);
	r->log = open_memstream(&r->text, &r->size);
	ck_assert_ptr_nonnull(r->log);
	int rc = cp_raw_read(in, "t.raw", &rec_callbacks, r, error, 256);
	fclose(r->log);
	fclose(in);
	*log = r->text;
	return rc;
}

START_TEST(raw_read_fields_and_headers)
{
	static const char text[] =
		"\xef\xbb\xbf# target 42 my prog\r\n"
		"# frequency 99\n"
		"# weight-unit nanoseconds\n"
		"# fields SECONDS TID WEIGHT STACK\n"
		"\n"
		"# a comment\n"
		"# thread 43 worker one\n"
		"1.500000 43 3 main;do work;leaf\r\n"
		"  1.25\t42  1\t  \n"
		"2e0 43 18446744073709551615 main\n"
		"# weight-unit furlongs\n"
		"# weight-unit samples\n"
		"# frequency 0\n"
		"# target 7\n"
		"# fields SECONDS TID STACK\n"
		"3 44 a b;c\n";
	struct recorder r = {0};
	char *log, error[256];
	ck_assert_int_eq(read_raw(text, sizeof(text) - 1, &r, &log, error), 0);
	ck_assert_str_eq(error, "");
	ck_assert_str_eq(log,
			 "target 42 <my prog>\n"
			 "frequency 99\n"
			 "weight-unit 1\n"
			 "thread 43 <worker one>\n"
			 "sample 1.500000=1.5 43 3 [3] <main> <do work> <leaf>\n"
			 "sample 1.25=1.25 42 1 [0]\n"
			 "sample 2e0=2 43 18446744073709551615 [1] <main>\n"
			 "weight-unit 2\n"
			 "weight-unit 0\n"
			 "target 7 <(none)>\n"
			 "sample 3=3 44 1 [2] <a b> <c>\n");
	free(log);
}
END_TEST

/* Files from before weights: no "# fields", three fields a line.  */
START_TEST(raw_read_weightless)
{
	static const char text[] = "0.1 1 main;a\n0.2 1 5;main\n";
	struct recorder r = {0};
	char *log, error[256];
	ck_assert_int_eq(read_raw(text, sizeof(text) - 1, &r, &log, error), 0);
	ck_assert_str_eq(log, "sample 0.1=0.1 1 1 [2] <main> <a>\n"
			      "sample 0.2=0.2 1 1 [2] <5> <main>\n");
	free(log);
}
END_TEST

/* Frames split from the end of a frame on, as the timeline does for the
 * part of a stack its thread's previous one did not share.  */
static int split_rest(void *arg, const struct cp_raw_sample *s)
{
	FILE *log = arg;
	const char *const *frames;
	const size_t *lens;
	size_t n;
	/* After "main" (4 bytes), frame 1 on.  */
	int rc = cp_raw_frames(s, 1, 4, &frames, &lens, &n);
	fprintf(log, "%s [%zu]",
		rc == 0 ? "ok" : rc == -CP_E_PARSE ? "parse" : "other", n);
	for (size_t i = 0; rc == 0 && i < n; i++)
		fprintf(log, " <%.*s>", (int)lens[i], frames[i]);
	fputc('\n', log);
	/* Not the end of a frame with FIRST 0, or beyond the stack.  */
	ck_assert_int_eq(cp_raw_frames(s, 0, 2, &frames, &lens, &n),
			 -CP_E_INVAL);
	ck_assert_int_eq(cp_raw_frames(s, 1, s->stack_len + 1, &frames,
				       &lens, &n),
			 -CP_E_INVAL);
	return 0;
}

START_TEST(raw_read_frames_from)
{
	static const char text[] = "1 1 main;a;b\n2 1 main\n3 1 main;;x\n";
	char *log = NULL, error[256];
	size_t size;
	FILE *out = open_memstream(&log, &size);
	FILE *in = fmemopen((void *)text, sizeof(text) - 1, "r");
	struct cp_raw_callbacks cb = {.sample = split_rest};
	/* "main;;x" from frame 1 on: the empty frame 2 is found (the
	 * callback goes on: the reader takes the first message).  */
	ck_assert_int_eq(cp_raw_read(in, "t.raw", &cb, out, error,
				     sizeof(error)),
			 0);
	fclose(out);
	fclose(in);
	ck_assert_str_eq(log, "ok [2] <a> <b>\n"
			      "ok [0]\n"
			      "parse [0]\n");
	ck_assert_str_eq(error, "");
	free(log);
}
END_TEST

START_TEST(raw_read_malformed)
{
	static const struct {
		const char *text;
		const char *error;
		int samples; /* delivered before the error */
	} cases[] = {
		{"1 1 a\n1.5\n", "t.raw:2: missing thread id: expected 'TIMESTAMP TID FRAME;FRAME;...', found '1.5'", 1},
		{"x 1 a\n", "t.raw:1: timestamp 'x' is not a number of seconds", 0},
		{"1e10 1 a\n", "t.raw:1: timestamp '1e10' is not a number of seconds", 0},
		{"1 -2 a\n", "t.raw:1: thread id '-2' is not a number from 0 to 2147483647", 0},
		{"1 2147483648 a\n", "t.raw:1: thread id '2147483648' is not a number from 0 to 2147483647", 0},
		{"# fields SECONDS TID WEIGHT STACK\n1 1\n", "t.raw:2: missing weight: expected 'TIMESTAMP TID WEIGHT FRAME;FRAME;...' (see the '# fields' header)", 0},
		{"# fields SECONDS TID WEIGHT STACK\n1 1 0 a\n", "t.raw:2: weight '0' is not a whole number from 1 to 18446744073709551615", 0},
		{"# fields SECONDS TID WEIGHT STACK\n1 1 18446744073709551616 a\n", "t.raw:2: weight '18446744073709551616' is not a whole number from 1 to 18446744073709551615", 0},
		{"# fields TID SECONDS\n", "t.raw:1: unknown fields 'TID SECONDS': expected 'SECONDS TID WEIGHT STACK' or 'SECONDS TID STACK'", 0},
		{"1 1 a;;b\n", "t.raw:1: frame 2 is empty in 'a;;b'", 0},
		{"1 1 a; ;b\n", "t.raw:1: frame 2 is empty in 'a; ;b'", 0},
		{"1 1 a;b;\n", "t.raw:1: frame 3 is empty in 'a;b;'", 0},
		{"1 1 ;a\n", "t.raw:1: frame 1 is empty in ';a'", 0},
		{"", "t.raw: no samples (the input is empty, or has only blank lines and headers)", 0},
		{"# thread 1 main\n\n", "t.raw: no samples (the input is empty, or has only blank lines and headers)", 0},
		{"\x1f\x8b\x08\x00", "t.raw: gzip-compressed data, not raw samples text", 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct recorder r = {0};
		char *log, error[256];
		int rc = read_raw(cases[i].text, strlen(cases[i].text), &r,
				  &log, error);
		ck_assert_msg(rc == -CP_E_PARSE, "case %zu: %d", i, rc);
		ck_assert_str_eq(error, cases[i].error);
		int lines = 0;
		for (const char *p = log; (p = strstr(p, "sample ")); p++)
			lines++;
		ck_assert_int_eq(lines, cases[i].samples);
		free(log);
	}
	/* A NUL byte in a stack or a header: binary data.  */
	static const char nul_stack[] = "1 1 a;b\0c\n";
	static const char nul_header[] = "# thr\0ead\n1 1 a\n";
	const char *nul[] = {nul_stack, nul_header};
	size_t nul_len[] = {sizeof(nul_stack) - 1, sizeof(nul_header) - 1};
	for (size_t i = 0; i < 2; i++) {
		struct recorder r = {0};
		char *log, error[256];
		ck_assert_int_eq(read_raw(nul[i], nul_len[i], &r, &log, error),
				 -CP_E_PARSE);
		ck_assert_str_eq(error, "t.raw:1: binary data (a NUL byte), not raw samples");
		free(log);
	}
}
END_TEST

/* A callback's failure stops the reading with its code: its message when
 * it gave one, the code's text otherwise.  */
START_TEST(raw_read_callback_fails)
{
	static const char text[] = "1 1 a\n2 1 b\n3 1 c\n";
	struct recorder r = {.fail_at = 2, .explain = true};
	char *log, error[256];
	ck_assert_int_eq(read_raw(text, sizeof(text) - 1, &r, &log, error),
			 -CP_E_INVAL);
	ck_assert_str_eq(error, "t.raw:2: refused sample 2");
	ck_assert_str_eq(log, "sample 1=1 1 1 [1] <a>\n");
	free(log);
	r = (struct recorder){.fail_at = 3};
	ck_assert_int_eq(read_raw(text, sizeof(text) - 1, &r, &log, error),
			 -CP_E_INVAL);
	ck_assert_str_eq(error, "t.raw:3: invalid argument");
	free(log);
	/* No error buffer: the same results.  */
	r = (struct recorder){.fail_at = 1, .explain = true};
	FILE *in = fmemopen((void *)text, sizeof(text) - 1, "r");
	r.log = open_memstream(&r.text, &r.size);
	ck_assert_int_eq(cp_raw_read(in, NULL, &rec_callbacks, &r, NULL, 0),
			 -CP_E_INVAL);
	fclose(r.log);
	fclose(in);
	free(r.text);
}
END_TEST

/* Header callbacks are optional: a reader of samples only.  */
START_TEST(raw_read_samples_only)
{
	static const char text[] = "# thread 1 main\n# frequency 10\n"
				   "# weight-unit samples\n# target 1 x\n"
				   "1 1 a\n";
	struct recorder r = {0};
	FILE *in = fmemopen((void *)text, sizeof(text) - 1, "r");
	r.log = open_memstream(&r.text, &r.size);
	struct cp_raw_callbacks cb = {.sample = rec_sample};
	char error[256];
	ck_assert_int_eq(cp_raw_read(in, "t.raw", &cb, &r, error,
				     sizeof(error)),
			 0);
	fclose(r.log);
	fclose(in);
	ck_assert_str_eq(r.text, "sample 1=1 1 1 [1] <a>\n");
	free(r.text);
}
END_TEST

/* ------------------------------------------------------- format tables */

/* The diff and timeline formats by name and by the output's suffix (the
 * longest suffix wins, any case); the default is the first.  */
START_TEST(format_tables)
{
	size_t n;
	const struct cp_diff_format *d = cp_diff_formats(&n);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(d[0].name, "svg");
	ck_assert_ptr_eq(cp_diff_format_find("folded"), &d[1]);
	ck_assert_ptr_null(cp_diff_format_find("pprof"));
	ck_assert_ptr_null(cp_diff_format_find(NULL));
	ck_assert_ptr_eq(cp_diff_format_for_path("a/b.FOLDED"), &d[1]);
	ck_assert_ptr_eq(cp_diff_format_for_path("x.svg"), &d[0]);
	ck_assert_ptr_null(cp_diff_format_for_path(".folded"));
	ck_assert_ptr_null(cp_diff_format_for_path("x.txt"));
	ck_assert_ptr_null(cp_diff_format_for_path(NULL));

	const struct cp_timeline_format_info *t = cp_timeline_formats(&n);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(t[0].name, "events");
	ck_assert_int_eq(t[0].format, CP_TIMELINE_EVENTS);
	ck_assert_int_eq(cp_timeline_format_find("trace")->format,
			 CP_TIMELINE_TRACE);
	ck_assert_int_eq(cp_timeline_format_find("speedscope")->format,
			 CP_TIMELINE_SPEEDSCOPE);
	ck_assert_ptr_null(cp_timeline_format_find("raw"));
	ck_assert_int_eq(cp_timeline_format_for_path("t.json")->format,
			 CP_TIMELINE_TRACE);
	ck_assert_int_eq(cp_timeline_format_for_path("t.Speedscope.JSON")->format,
			 CP_TIMELINE_SPEEDSCOPE);
	ck_assert_ptr_null(cp_timeline_format_for_path("t.events"));
	ck_assert_ptr_null(cp_timeline_format_for_path(".json"));
	ck_assert_ptr_null(cp_timeline_format_for_path(NULL));
}
END_TEST

static Suite *analysis_suite(void)
{
	Suite *s = suite_create("analysis");
	TCase *tc = tcase_create("report");
	tcase_add_test(tc, report_functions);
	tcase_add_test(tc, report_text_golden);
	tcase_add_test(tc, report_unit_from_profile);
	tcase_add_test(tc, report_empty_profile);
	tcase_add_test(tc, report_write_error);
	suite_add_tcase(s, tc);
	tc = tcase_create("diff");
	tcase_add_test(tc, diff_two_profiles);
	tcase_add_test(tc, format_tables);
	suite_add_tcase(s, tc);
	tc = tcase_create("raw");
	tcase_add_test(tc, raw_read_fields_and_headers);
	tcase_add_test(tc, raw_read_weightless);
	tcase_add_test(tc, raw_read_frames_from);
	tcase_add_test(tc, raw_read_malformed);
	tcase_add_test(tc, raw_read_callback_fails);
	tcase_add_test(tc, raw_read_samples_only);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(analysis_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
