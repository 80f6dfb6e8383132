/* The analyses of the library driven directly, no program in between:
 *
 *   - report (cp_report_functions, cp_report_write) on a hand-built
 *     profile: self and total weights, a recursive function counted once
 *     per stack, inlined lines counting as functions, the order of both
 *     tables, --top, the unit taken from the profile (bytes for a heap
 *     profile), an empty profile, a stream that cannot be written;
 *   - diff (cp_diff_*) of two hand-built profiles: stacks of either,
 *     merged across threads and locations of one name, byte order,
 *     normalizing (rounded half up), the folded text.  */
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
#include "cprof/report.h"

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
	snprintf(cp_profile_meta(p)->unit, sizeof(cp_profile_meta(p)->unit),
		 "bytes");
	char *text = report_text(p, &(struct cp_report_options){.top = 1});
	ck_assert_ptr_nonnull(strstr(text, "profile: 20 bytes, 4 stacks"));
	ck_assert_ptr_nonnull(strstr(text, "functions by self bytes:\n"));
	ck_assert_ptr_nonnull(strstr(text, "functions by total bytes:\n"));
	ck_assert_ptr_null(strstr(text, "samples"));
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
