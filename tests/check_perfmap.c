/* Unit tests for perf maps (cprof/perfmap.h): the line parser, the table
 * fed in pieces, lookups, and the follower of a map file (incremental
 * reads of what a JIT appends, re-reads of a replaced or rewritten file,
 * the files it refuses).  */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/perfmap.h"
#include "cprof/tpath.h"

/* ------------------------------------------------------------ parsing */

static bool parse(const char *line, uint64_t *start, uint64_t *size,
		  char *name, size_t name_size)
{
	const char *n;
	size_t n_len;

	if (!cp_perfmap_parse_line(line, strlen(line), start, size, &n,
				   &n_len))
		return false;
	snprintf(name, name_size, "%.*s", (int)n_len, n);
	return true;
}

START_TEST(test_parse_lines)
{
	uint64_t start, size;
	char name[256];

	ck_assert(parse("7f0012340000 1a0 LazyCompile:~main app.js:1", &start,
			&size, name, sizeof(name)));
	ck_assert_uint_eq(start, 0x7f0012340000);
	ck_assert_uint_eq(size, 0x1a0);
	ck_assert_str_eq(name, "LazyCompile:~main app.js:1");
	/* 0x prefixes (.NET), tabs, several blanks, a CRLF end.  */
	ck_assert(parse("0x1000\t0X20   f g\r", &start, &size, name,
			sizeof(name)));
	ck_assert_uint_eq(start, 0x1000);
	ck_assert_uint_eq(size, 0x20);
	ck_assert_str_eq(name, "f g");
	/* The top of the address space, exactly.  */
	ck_assert(parse("ffffffffffffff00 100 top", &start, &size, name,
			sizeof(name)));
	ck_assert(parse("ABCDEF 1 upper", &start, &size, name, sizeof(name)));
	ck_assert_uint_eq(start, 0xabcdef);
}
END_TEST

START_TEST(test_parse_bad_lines)
{
	static const char *const bad[] = {
		"",
		"1000",
		"1000 20",
		"1000 20 ",
		"1000 20\t",
		" 1000 20 leading_blank",
		"1000  name_without_size",
		"xyz 20 not_hex",
		"1000 0 empty_range",
		"10000000000000000 1 seventeen_digits",
		"1000 10000000000000000 seventeen_digits",
		"ffffffffffffff00 101 past_the_top",
		"0x 20 bare_prefix",
		"1000,20 comma",
	};
	uint64_t start, size;
	char name[64];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!parse(bad[i], &start, &size, name, sizeof(name)),
			      "\"%s\" parsed", bad[i]);
	/* A NUL byte inside the line.  */
	const char *n;
	size_t n_len;
	ck_assert(!cp_perfmap_parse_line("1000 20 a\0b", 11, &start, &size, &n,
					 &n_len));
	/* Only LEN bytes are read: "1000 20 ab" cut after "1000 2".  */
	ck_assert(!cp_perfmap_parse_line("1000 20 ab", 6, &start, &size, &n,
					 &n_len));
}
END_TEST

/* ------------------------------------------------------------ the table */

static const char *lookup(struct cp_perfmap *map, uint64_t address)
{
	struct cp_perfmap_sym sym;

	if (!cp_perfmap_lookup(map, address, &sym))
		return NULL;
	ck_assert(address >= sym.start && address - sym.start < sym.size);
	return sym.name;
}

static struct cp_perfmap *table_of(const char *text)
{
	struct cp_perfmap *map = cp_perfmap_new();

	ck_assert_ptr_nonnull(map);
	ck_assert_int_eq(cp_perfmap_feed(map, text, strlen(text)), 0);
	ck_assert_int_eq(cp_perfmap_finish(map), 0);
	return map;
}

START_TEST(test_lookup)
{
	struct cp_perfmap *map = table_of("3000 100 c\n"
					  "1000 100 a\n"
					  "garbage\n"
					  "2000 10 b\n");
	struct cp_perfmap_stats stats;

	ck_assert_ptr_null(lookup(map, 0xfff));
	ck_assert_str_eq(lookup(map, 0x1000), "a");
	ck_assert_str_eq(lookup(map, 0x10ff), "a");
	ck_assert_ptr_null(lookup(map, 0x1100));
	ck_assert_str_eq(lookup(map, 0x200f), "b");
	ck_assert_ptr_null(lookup(map, 0x2010));
	ck_assert_str_eq(lookup(map, 0x3000), "c");
	ck_assert_ptr_null(lookup(map, UINT64_MAX));
	cp_perfmap_stats(map, &stats);
	ck_assert_uint_eq(stats.symbols, 3);
	ck_assert_uint_eq(stats.bad_lines, 1);
	ck_assert_uint_eq(stats.long_lines, 0);
	cp_perfmap_free(map);
	cp_perfmap_free(NULL);
}
END_TEST

/* Code freed and generated again: the later line wins where lines
 * overlap, whichever starts first.  */
START_TEST(test_later_line_wins)
{
	struct cp_perfmap *map = table_of("1000 1000 old_big\n"
					  "1800 10 new_small\n"
					  "1000 10 same_start_newer\n"
					  "4000 10 x\n"
					  "4000 10 y\n");

	ck_assert_str_eq(lookup(map, 0x1000), "same_start_newer");
	ck_assert_str_eq(lookup(map, 0x1010), "old_big");
	ck_assert_str_eq(lookup(map, 0x1805), "new_small");
	ck_assert_str_eq(lookup(map, 0x1810), "old_big");
	ck_assert_str_eq(lookup(map, 0x4000), "y");
	cp_perfmap_free(map);

	/* A big later line over an earlier small one.  */
	map = table_of("1800 10 old_small\n1000 1000 new_big\n");
	ck_assert_str_eq(lookup(map, 0x1805), "new_big");
	cp_perfmap_free(map);
}
END_TEST

/* The same text fed in pieces of every size gives the same table, and
 * lines fed after lookups (a JIT appending) are merged in.  */
START_TEST(test_feed_in_pieces)
{
	const char *text = "2000 10 two\n1000 10 one\n0x3000 0x10 three\r\n"
			   "bad line\n4000 10 four";
	size_t len = strlen(text);

	for (size_t piece = 1; piece <= len; piece++) {
		struct cp_perfmap *map = cp_perfmap_new();
		struct cp_perfmap_stats stats;

		for (size_t i = 0; i < len; i += piece) {
			size_t n = len - i < piece ? len - i : piece;

			ck_assert_int_eq(cp_perfmap_feed(map, text + i, n), 0);
			/* Lookups between pieces sort what came so far.  */
			lookup(map, 0x1000);
		}
		/* The unterminated last line waits for its end.  */
		ck_assert_ptr_null(lookup(map, 0x4000));
		ck_assert_int_eq(cp_perfmap_finish(map), 0);
		ck_assert_str_eq(lookup(map, 0x1000), "one");
		ck_assert_str_eq(lookup(map, 0x2000), "two");
		ck_assert_str_eq(lookup(map, 0x3005), "three");
		ck_assert_str_eq(lookup(map, 0x4000), "four");
		cp_perfmap_stats(map, &stats);
		ck_assert_uint_eq(stats.symbols, 4);
		ck_assert_uint_eq(stats.bad_lines, 1);
		ck_assert_uint_eq(stats.bytes, len);
		cp_perfmap_free(map);
	}
}
END_TEST

/* Many lines appended in batches, out of order, with lookups between:
 * every one is found (the merge of new lines into sorted ones).  */
START_TEST(test_appended_batches)
{
	struct cp_perfmap *map = cp_perfmap_new();
	char line[64];
	uint32_t x = 12345;

	for (int batch = 0; batch < 20; batch++) {
		for (int i = 0; i < 500; i++) {
			uint64_t slot = (uint64_t)(batch * 500 + i);
			int n;

			/* A permutation of the slots: x*7919 mod 10007.  */
			x = (uint32_t)(slot * 7919 % 10007);
			n = snprintf(line, sizeof(line), "%x 10 f%u\n",
				     x * 0x100, x);
			ck_assert_int_eq(cp_perfmap_feed(map, line, (size_t)n),
					 0);
		}
		lookup(map, 0);
		for (uint64_t slot = 0; slot < (uint64_t)(batch + 1) * 500;
		     slot++) {
			uint32_t y = (uint32_t)(slot * 7919 % 10007);
			char want[16];

			snprintf(want, sizeof(want), "f%u", y);
			ck_assert_str_eq(lookup(map, (uint64_t)y * 0x100 + 5),
					 want);
		}
	}
	cp_perfmap_free(map);
}
END_TEST

/* A line over CP_PERFMAP_MAX_LINE is skipped whole, fed at once or in
 * pieces, and the lines around it are taken.  */
START_TEST(test_long_line)
{
	size_t long_len = 3 * CP_PERFMAP_MAX_LINE;
	char *text = malloc(long_len + 64);
	size_t len = 0;

	len += (size_t)sprintf(text, "1000 10 before\n2000 10 ");
	memset(text + len, 'x', long_len);
	len += long_len;
	len += (size_t)sprintf(text + len, "\n3000 10 after\n");
	for (size_t piece = 1; piece < len; piece = piece * 3 + 1) {
		struct cp_perfmap *map = cp_perfmap_new();
		struct cp_perfmap_stats stats;

		for (size_t i = 0; i < len; i += piece)
			ck_assert_int_eq(cp_perfmap_feed(map, text + i,
				len - i < piece ? len - i : piece), 0);
		ck_assert_int_eq(cp_perfmap_finish(map), 0);
		ck_assert_str_eq(lookup(map, 0x1000), "before");
		ck_assert_ptr_null(lookup(map, 0x2000));
		ck_assert_str_eq(lookup(map, 0x3000), "after");
		cp_perfmap_stats(map, &stats);
		ck_assert_uint_eq(stats.symbols, 2);
		ck_assert_uint_eq(stats.long_lines, 1);
		cp_perfmap_free(map);
	}
	/* The longest line kept: one byte under the cap with its newline. */
	{
		struct cp_perfmap *map = cp_perfmap_new();
		size_t n = (size_t)sprintf(text, "5000 10 ");

		memset(text + n, 'y', CP_PERFMAP_MAX_LINE - 1 - n);
		text[CP_PERFMAP_MAX_LINE - 1] = '\n';
		ck_assert_int_eq(cp_perfmap_feed(map, text,
						 CP_PERFMAP_MAX_LINE), 0);
		ck_assert_ptr_nonnull(lookup(map, 0x5000));
		/* One more byte: skipped.  */
		text[CP_PERFMAP_MAX_LINE - 1] = 'y';
		text[CP_PERFMAP_MAX_LINE] = '\n';
		text[0] = '6';
		ck_assert_int_eq(cp_perfmap_feed(map, text,
						 CP_PERFMAP_MAX_LINE + 1), 0);
		ck_assert_ptr_null(lookup(map, 0x6000));
		cp_perfmap_free(map);
	}
	free(text);
}
END_TEST

START_TEST(test_reset)
{
	struct cp_perfmap *map = table_of("1000 10 a\n2000 10 partial");
	struct cp_perfmap_stats stats;

	cp_perfmap_reset(map);
	ck_assert_ptr_null(lookup(map, 0x1000));
	cp_perfmap_stats(map, &stats);
	ck_assert_uint_eq(stats.symbols, 0);
	ck_assert_int_eq(cp_perfmap_feed(map, "3000 10 c\n", 10), 0);
	ck_assert_str_eq(lookup(map, 0x3000), "c");
	cp_perfmap_free(map);
}
END_TEST

/* ------------------------------------------------------------ the file */

static char dir[PATH_MAX];
static char path[PATH_MAX + 32];
static struct cp_tpath_creds root_creds;

static void file_setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/check_perfmap-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/perf-1.map", dir);
	memset(&root_creds, 0, sizeof(root_creds));
	root_creds.uid = root_creds.euid = geteuid();
	root_creds.gid = root_creds.egid = getegid();
}

static void file_teardown(void)
{
	char other[PATH_MAX + 32];

	unlink(path);
	snprintf(other, sizeof(other), "%s/other", dir);
	unlink(other);
	rmdir(dir);
}

static void write_text(const char *text, const char *how)
{
	FILE *f = fopen(path, how);

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

static const char *file_lookup(struct cp_perfmap_file *f, uint64_t address)
{
	return lookup(cp_perfmap_file_table(f), address);
}

static int refresh(struct cp_perfmap_file *f)
{
	return cp_perfmap_file_refresh(f, &root_creds, NULL, NULL);
}

START_TEST(test_file_absent_then_appended)
{
	struct cp_perfmap_file *f;
	struct cp_perfmap_stats stats;

	ck_assert_int_eq(cp_perfmap_file_new(path, &f), 0);
	ck_assert_int_eq(refresh(f), 0);
	ck_assert_ptr_null(file_lookup(f, 0x1000));

	/* More than the last 64 bytes, which the reader compares to tell
	 * an append from a rewrite, after the first line.  */
	write_text("1000 10 first\n"
		   "9000 10 filler_one_filler_one_filler_one\n"
		   "9100 10 filler_two_filler_two_filler_two\n"
		   "2000 10 half", "w");
	ck_assert_int_eq(refresh(f), 0);
	ck_assert_str_eq(file_lookup(f, 0x1000), "first");
	ck_assert_ptr_null(file_lookup(f, 0x2000)); /* being written */

	/* The JIT finishes its line and appends one more.  And the first
	 * line is changed in place, same length: an appending reader does
	 * not read it again, so it still says "first".  */
	write_text("_line\n3000 10 third\n", "a");
	{
		int fd = open(path, O_WRONLY);

		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pwrite(fd, "FIRST", 5, 8), 5);
		close(fd);
	}
	ck_assert_int_eq(refresh(f), 0);
	ck_assert_str_eq(file_lookup(f, 0x1000), "first");
	ck_assert_str_eq(file_lookup(f, 0x2000), "half_line");
	ck_assert_str_eq(file_lookup(f, 0x3000), "third");
	cp_perfmap_stats(cp_perfmap_file_table(f), &stats);
	ck_assert_uint_eq(stats.symbols, 5);

	/* Unchanged: nothing read.  */
	ck_assert_int_eq(refresh(f), 0);
	cp_perfmap_stats(cp_perfmap_file_table(f), &stats);
	ck_assert_uint_eq(stats.symbols, 5);

	/* Gone: what was read stays.  */
	unlink(path);
	ck_assert_int_eq(refresh(f), 0);
	ck_assert_str_eq(file_lookup(f, 0x3000), "third");
	cp_perfmap_file_free(f);
	cp_perfmap_file_free(NULL);
}
END_TEST

/* Rewritten (truncated and written again, longer or shorter) or replaced
 * by another file: read again from the start.  */
START_TEST(test_file_rewritten_or_replaced)
{
	struct cp_perfmap_file *f;
	char other[PATH_MAX + 32];

	ck_assert_int_eq(cp_perfmap_file_new(path, &f), 0);
	write_text("1000 10 a\n", "w");
	ck_assert_int_eq(refresh(f), 0);
	ck_assert_str_eq(file_lookup(f, 0x1000), "a");

	/* Shorter.  */
	write_text("2000 1 b\n", "w");
	ck_assert_int_eq(refresh(f), 0);
	ck_assert_ptr_null(file_lookup(f, 0x1000));
	ck_assert_str_eq(file_lookup(f, 0x2000), "b");

	/* Longer, other content: not mistaken for an append.  */
	write_text("3000 10 c\n4000 10 d\n", "w");
	ck_assert_int_eq(refresh(f), 0);
	ck_assert_ptr_null(file_lookup(f, 0x2000));
	ck_assert_str_eq(file_lookup(f, 0x3000), "c");
	ck_assert_str_eq(file_lookup(f, 0x4000), "d");

	/* Another file renamed over it.  */
	snprintf(other, sizeof(other), "%s/other", dir);
	{
		FILE *o = fopen(other, "w");

		ck_assert_ptr_nonnull(o);
		fputs("5000 10 e\n", o);
		fclose(o);
	}
	ck_assert_int_eq(rename(other, path), 0);
	ck_assert_int_eq(refresh(f), 0);
	ck_assert_ptr_null(file_lookup(f, 0x3000));
	ck_assert_str_eq(file_lookup(f, 0x5000), "e");
	cp_perfmap_file_free(f);
}
END_TEST

/* What is refused, with the reason; the table is emptied.  */
START_TEST(test_file_refused)
{
	struct cp_perfmap_file *f;
	struct cp_tpath_creds nobody = { .uid = 65534, .euid = 65534,
					 .gid = 65534, .egid = 65534 };
	const char *why;
	uid_t owner;
	char other[PATH_MAX + 32];

	snprintf(other, sizeof(other), "%s/other", dir);
	ck_assert_int_eq(cp_perfmap_file_new(path, &f), 0);
	write_text("1000 10 a\n", "w");
	ck_assert_int_eq(refresh(f), 0);
	ck_assert_str_eq(file_lookup(f, 0x1000), "a");

	/* Root's file that the target may not read.  */
	ck_assert_int_eq(chmod(path, 0600), 0);
	ck_assert_int_eq(cp_perfmap_file_refresh(f, &nobody, &why, &owner),
			 -CP_E_PERM);
	ck_assert_ptr_nonnull(strstr(why, "may not read"));
	ck_assert_ptr_null(file_lookup(f, 0x1000));
	/* Readable by all: taken.  */
	ck_assert_int_eq(chmod(path, 0644), 0);
	ck_assert_int_eq(cp_perfmap_file_refresh(f, &nobody, &why, &owner), 0);
	ck_assert_str_eq(file_lookup(f, 0x1000), "a");
	/* Another user's.  */
	ck_assert_int_eq(chown(path, 4242, 4242), 0);
	ck_assert_int_eq(cp_perfmap_file_refresh(f, &nobody, &why, &owner),
			 -CP_E_PERM);
	ck_assert_ptr_nonnull(strstr(why, "another user"));
	ck_assert_uint_eq(owner, 4242);
	/* The target's own, even 0600.  */
	ck_assert_int_eq(chown(path, 65534, 65534), 0);
	ck_assert_int_eq(chmod(path, 0600), 0);
	ck_assert_int_eq(cp_perfmap_file_refresh(f, &nobody, &why, &owner), 0);
	ck_assert_str_eq(file_lookup(f, 0x1000), "a");
	/* Unknown credentials: only root's readable files.  */
	ck_assert_int_eq(cp_perfmap_file_refresh(f, NULL, &why, &owner),
			 -CP_E_PERM);

	/* A symlink, even to a good file.  */
	ck_assert_int_eq(rename(path, other), 0);
	ck_assert_int_eq(symlink(other, path), 0);
	ck_assert_int_eq(cp_perfmap_file_refresh(f, &nobody, &why, &owner),
			 -CP_E_PERM);
	ck_assert_str_eq(why, "a symbolic link");
	ck_assert_ptr_null(file_lookup(f, 0x1000));
	unlink(path);
	unlink(other);

	/* A FIFO: refused at once, never waited on.  */
	ck_assert_int_eq(mkfifo(path, 0644), 0);
	ck_assert_int_eq(refresh(f), -CP_E_PERM);
	cp_perfmap_file_refresh(f, &root_creds, &why, NULL);
	ck_assert_str_eq(why, "a FIFO");
	unlink(path);
	cp_perfmap_file_free(f);
}
END_TEST

static Suite *perfmap_suite(void)
{
	Suite *suite = suite_create("perfmap");
	TCase *tcase = tcase_create("table");

	tcase_add_test(tcase, test_parse_lines);
	tcase_add_test(tcase, test_parse_bad_lines);
	tcase_add_test(tcase, test_lookup);
	tcase_add_test(tcase, test_later_line_wins);
	tcase_add_test(tcase, test_feed_in_pieces);
	tcase_add_test(tcase, test_appended_batches);
	tcase_add_test(tcase, test_long_line);
	tcase_add_test(tcase, test_reset);
	suite_add_tcase(suite, tcase);

	tcase = tcase_create("file");
	tcase_add_checked_fixture(tcase, file_setup, file_teardown);
	tcase_add_test(tcase, test_file_absent_then_appended);
	tcase_add_test(tcase, test_file_rewritten_or_replaced);
	if (geteuid() == 0)
		tcase_add_test(tcase, test_file_refused); /* chown */
	suite_add_tcase(suite, tcase);
	return suite;
}

int main(void)
{
	SRunner *runner = srunner_create(perfmap_suite());
	int failed;

	srunner_run_all(runner, CK_NORMAL);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
