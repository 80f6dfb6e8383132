/* Tests of the folded-stacks reader (cp_read_folded) and of the offline
 * program cprof: golden outputs of report and diff --format folded on
 * hand-checked inputs (fixtures/data/cprof-*), malformed and empty input
 * (one "FILE:LINE: what" message, exit 2, no output file), standard input,
 * round trips folded -> profile -> folded, and the help against the man
 * page.  */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/output.h"
#include "cprof/profile.h"
#include "testutil.h"

#define DATA CP_SOURCE_DIR "/fixtures/data"
#define CPROF CP_BUILD_DIR "/cprof"
#define MAN_PAGE CP_SOURCE_DIR "/docs/cprof.1"

/* ------------------------------------------------------------ helpers */

/* TEXT (LEN bytes) as a stream to read from.  */
static FILE *stream_of(const char *text, size_t len)
{
	FILE *f = tmpfile();
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, len, f), len);
	rewind(f);
	return f;
}

/* Read TEXT (LEN bytes) named "t.folded"; returns the reader's code.  */
static int read_bytes(const char *text, size_t len, struct cp_profile **p,
		      char *error, size_t error_size)
{
	FILE *f = stream_of(text, len);
	int rc = cp_read_folded(f, "t.folded", p, error, error_size);
	fclose(f);
	return rc;
}

static struct cp_profile *read_ok(const char *text)
{
	struct cp_profile *p = NULL;
	char error[256];
	int rc = read_bytes(text, strlen(text), &p, error, sizeof(error));
	ck_assert_msg(rc == 0, "reading \"%s\" failed: %s (%s)", text,
		      cp_strerror(rc), error);
	ck_assert_ptr_nonnull(p);
	return p;
}

/* PROFILE written back as folded text; the caller frees it.  */
static char *folded_of(const struct cp_profile *p)
{
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	ck_assert_ptr_nonnull(mem);
	ck_assert_int_eq(cp_write_folded(p, NULL, mem), 0);
	fclose(mem);
	return text;
}

/* Read TEXT and write it back.  */
static char *roundtrip(const char *text)
{
	struct cp_profile *p = read_ok(text);
	char *out = folded_of(p);
	cp_profile_free(p);
	return out;
}

/* Reading LEN bytes of TEXT fails with -CP_E_PARSE and exactly MESSAGE. */
static void expect_error_bytes(const char *text, size_t len,
			       const char *message)
{
	struct cp_profile *p = (struct cp_profile *)&p; /* must be reset */
	char error[256] = "untouched";
	int rc = read_bytes(text, len, &p, error, sizeof(error));
	ck_assert_msg(rc == -CP_E_PARSE, "\"%s\": expected -CP_E_PARSE, got %d",
		      text, rc);
	ck_assert_ptr_null(p);
	ck_assert_msg(strcmp(error, message) == 0,
		      "\"%s\": message\n  \"%s\", expected\n  \"%s\"", text,
		      error, message);
}

static void expect_error(const char *text, const char *message)
{
	expect_error_bytes(text, strlen(text), message);
}

/* The whole of PATH, NUL-terminated; fails the test when unreadable.  */
static char *slurp(const char *path)
{
	char *text = tu_read_file(path);
	ck_assert_msg(text != NULL, "cannot read %s: %s", path,
		      strerror(errno));
	return text;
}

static void assert_text_eq(const char *got, const char *want,
			   const char *what)
{
	ck_assert_msg(strcmp(got, want) == 0, "%s differs.\n--- want\n%s--- got\n%s",
		      what, want, got);
}

/* The location of the frame at DEPTH from the innermost of the only
 * sample's stack.  */
static const struct cp_location *frame_at(const struct cp_profile *p,
					  size_t sample, size_t depth)
{
	size_t n;
	const struct cp_sample *s = cp_profile_samples(p, &n);
	ck_assert_uint_lt(sample, n);
	size_t depth_n;
	const uint32_t *locs = cp_profile_stack(p, s[sample].stack, &depth_n);
	ck_assert_uint_lt(depth, depth_n);
	const struct cp_location *loc = cp_profile_location(p, locs[depth]);
	ck_assert_ptr_nonnull(loc);
	return loc;
}

/* ------------------------------------------------------------- reader */

START_TEST(read_structure)
{
	struct cp_profile *p = read_ok("main;parse;hash 42\n"
				       "main;parse 10\n"
				       "main;parse;hash 8\n");
	ck_assert_uint_eq(cp_profile_total(p), 60);
	ck_assert_str_eq(cp_sample_type_word(
				 &cp_profile_meta_const(p)->count_type), "samples");
	size_t n;
	const struct cp_sample *s = cp_profile_samples(p, &n);
	ck_assert_uint_eq(n, 2); /* the same stack twice adds up */
	ck_assert_int_eq(s[0].tid, 0);
	ck_assert_uint_eq(s[0].count, 50);
	ck_assert_uint_eq(s[1].count, 10);
	/* innermost first; one location per distinct name */
	size_t depth;
	uint32_t locs[3]; /* a copy: cp_profile_stack's buffer is reused */
	ck_assert_uint_eq(depth = cp_profile_stack_locs(p, s[0].stack, locs, 3),
			  3);
	ck_assert_uint_eq(cp_profile_location_count(p), 3);
	const char *want[] = {"hash", "parse", "main"};
	for (size_t i = 0; i < 3; i++) {
		const struct cp_location *loc = cp_profile_location(p, locs[i]);
		ck_assert_uint_eq(loc->address, 0);
		ck_assert_uint_eq(loc->nlines, 1);
		ck_assert(!loc->lines[0].inlined);
		ck_assert_str_eq(cp_profile_string(p, loc->lines[0].function),
				 want[i]);
	}
	size_t depth2;
	const uint32_t *locs2 = cp_profile_stack(p, s[1].stack, &depth2);
	ck_assert_uint_eq(depth2, 2);
	ck_assert_uint_eq(locs2[0], locs[1]);
	ck_assert_uint_eq(locs2[1], locs[2]);
	cp_profile_free(p);
}
END_TEST

START_TEST(read_inline_suffix)
{
	const char *text = "_[i];main;outer;mid_[i];inner_[i] 7\n"
			   "main;inner 1\n";
	struct cp_profile *p = read_ok(text);
	/* "inner_[i]" is inlined "inner", a location apart from "inner" */
	const struct cp_location *inner = frame_at(p, 0, 0);
	ck_assert_str_eq(cp_profile_string(p, inner->lines[0].function),
			 "inner");
	ck_assert(inner->lines[0].inlined);
	const struct cp_location *plain = frame_at(p, 1, 0);
	ck_assert_str_eq(cp_profile_string(p, plain->lines[0].function),
			 "inner");
	ck_assert(!plain->lines[0].inlined);
	ck_assert_ptr_ne(inner, plain);
	/* a frame that is nothing but the suffix is an ordinary name */
	const struct cp_location *bare = frame_at(p, 0, 4);
	ck_assert_str_eq(cp_profile_string(p, bare->lines[0].function),
			 "_[i]");
	ck_assert(!bare->lines[0].inlined);
	ck_assert_uint_eq(cp_profile_location_count(p), 6);
	char *back = folded_of(p);
	assert_text_eq(back, "_[i];main;outer;mid_[i];inner_[i] 7\n"
			     "main;inner 1\n", "inline round trip");
	free(back);
	cp_profile_free(p);
}
END_TEST

START_TEST(read_decimal_counts)
{
	static const struct {
		const char *count;
		uint64_t want; /* 0: the line is dropped */
	} cases[] = {
		{"3", 3}, {"0.5", 1}, {"2.5", 3}, {"2.49", 2}, {"2.51", 3},
		{"1.", 1}, {".5", 1}, {"7.0", 7}, {"0.49", 0}, {"0", 0},
		{"0.0", 0}, {"000012", 12}, {"18446744073709551615", UINT64_MAX},
		{"18446744073709551614.5", UINT64_MAX},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[128];
		/* a line that is dropped needs another one: no samples
		 * is an error */
		snprintf(text, sizeof(text), "main;x %s\n%s", cases[i].count,
			 cases[i].want ? "" : "main;y 1\n");
		struct cp_profile *p = read_ok(text);
		size_t n;
		const struct cp_sample *s = cp_profile_samples(p, &n);
		if (cases[i].want == 0) {
			ck_assert_msg(n == 1, "count %s: %zu samples, want 1",
				      cases[i].count, n);
		} else {
			ck_assert_msg(n == 1 && s[0].count == cases[i].want,
				      "count %s read as %" PRIu64 ", want %" PRIu64,
				      cases[i].count, n ? s[0].count : 0,
				      cases[i].want);
		}
		cp_profile_free(p);
	}
}
END_TEST

START_TEST(read_lenient)
{
	/* BOM, comments, blank and whitespace-only lines, CRLF, tabs and
	 * runs of blanks before the count, blanks after it, frames with
	 * spaces (the thread frame of --threads), zero counts.  */
	const char text[] = "\xef\xbb\xbf# comment\r\n"
			    "\n"
			    "   \t \r\n"
			    "main;work\t\t3\r\n"
			    "1234 worker-1;main;operator new(unsigned long)   2 \t\n"
			    "#main;work 100\n"
			    "main;idle 0\n"
			    "main;work 1";
	char *out = roundtrip(text);
	assert_text_eq(out, "1234 worker-1;main;operator new(unsigned long) 2\n"
			    "main;work 4\n", "lenient input");
	free(out);
}
END_TEST

START_TEST(read_malformed)
{
	expect_error("main;foo\n",
		     "t.folded:1: no sample count: expected 'frame;frame;... COUNT', found 'main;foo'");
	expect_error("a 1\n\n# comment\na;;b 3\n",
		     "t.folded:4: frame 2 is empty in 'a;;b'");
	expect_error(";a 3\n", "t.folded:1: frame 1 is empty in ';a'");
	expect_error("a; 3\n", "t.folded:1: frame 2 is empty in 'a;'");
	expect_error("a; \t;b 3\n", "t.folded:1: frame 2 is empty in 'a; \t;b'");
	expect_error("a;b -3\n", "t.folded:1: count '-3' is negative");
	expect_error("a;b -0.5\n", "t.folded:1: count '-0.5' is negative");
	static const char *const not_numbers[] = {
		"abc", "1e3", "0x10", "3x", "1.2.3", ".", "+3", "nan", "inf",
		"12a",
	};
	for (size_t i = 0; i < sizeof(not_numbers) / sizeof(*not_numbers);
	     i++) {
		char text[64], message[160];
		snprintf(text, sizeof(text), "ok 1\na;b %s\n", not_numbers[i]);
		snprintf(message, sizeof(message),
			 "t.folded:2: expected a sample count after the last space, found '%s'",
			 not_numbers[i]);
		expect_error(text, message);
	}
	expect_error("  5\n", "t.folded:1: a count without a stack");
	expect_error("a 99999999999999999999\n",
		     "t.folded:1: count '99999999999999999999' is too large");
	expect_error("a 18446744073709551615.5\n",
		     "t.folded:1: count '18446744073709551615.5' is too large");
	expect_error("a 18446744073709551615\nb 1\n",
		     "t.folded:2: the counts add up to more than 18446744073709551615");
	expect_error_bytes("a 1\nb\0c 2\n", 10,
			   "t.folded:2: binary data (a NUL byte), not folded stacks");
	expect_error_bytes("\x1f\x8b\x08\0\0\0\0\0\0\xff", 10,
			   "t.folded: gzip-compressed data (a pprof profile?), not folded stacks text");
	/* a long line is quoted shortened */
	char text[256], message[256];
	memset(text, 'x', 100);
	strcpy(text + 100, "\n");
	snprintf(message, sizeof(message),
		 "t.folded:1: no sample count: expected 'frame;frame;... COUNT', found '%.37s...'",
		 text);
	expect_error(text, message);
}
END_TEST

START_TEST(read_empty)
{
	static const char *const empties[] = {
		"", "\n\n", "# only a comment\n", "main 0\nmain;x 0.4\n",
	};
	for (size_t i = 0; i < sizeof(empties) / sizeof(*empties); i++)
		expect_error(empties[i],
			     "t.folded: no samples (the input is empty, or has only blank lines, comments and zero counts)");
}
END_TEST

START_TEST(read_small_error_buffer)
{
	struct cp_profile *p = NULL;
	char error[8];
	ck_assert_int_eq(read_bytes("a;;b 1\n", 7, &p, error, sizeof(error)),
			 -CP_E_PARSE);
	ck_assert_str_eq(error, "t.folde"); /* cut, NUL-terminated */
	ck_assert_int_eq(read_bytes("a;;b 1\n", 7, &p, NULL, 0), -CP_E_PARSE);
	ck_assert_ptr_null(p);
}
END_TEST

START_TEST(read_error_from_stream)
{
	/* A directory opens for reading but cannot be read.  */
	FILE *f = fopen(DATA, "r");
	ck_assert_ptr_nonnull(f);
	struct cp_profile *p = NULL;
	char error[256];
	ck_assert_int_eq(cp_read_folded(f, "dir", &p, error, sizeof(error)),
			 -CP_E_SYS);
	fclose(f);
	ck_assert_ptr_null(p);
	ck_assert_str_eq(error, "dir: cannot read: Is a directory");
}
END_TEST

/* cp_write_folded output (cprof-attach's, the golden files) reads back to
 * the same bytes.  */
START_TEST(roundtrip_canonical)
{
	static const char *const files[] = {
		"basic.folded", "inline.folded", "no-inline.folded",
		"threads.folded", "lines.folded", "cprof-flamegraph.out",
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), DATA "/%s", files[i]);
		char *text = slurp(path);
		char *out = roundtrip(text);
		assert_text_eq(out, text, files[i]);
		free(out);
		free(text);
	}
}
END_TEST

/* A frame may begin with any bytes, gzip's magic too: what
 * cp_write_folded writes first must read back (tests/fuzz/fuzz_folded
 * found a name starting with 1f 8b refused as "gzip-compressed data" once
 * sorting put it on the first line).  A real gzip file is still named.  */
START_TEST(roundtrip_gzip_magic_frame)
{
	const char *text = "\x1f\x8b\x08;main 2\nmain;work 1\n";
	char *out = roundtrip(text);
	assert_text_eq(out, text, "a first frame that begins with 1f 8b");
	free(out);
	expect_error("\x1f\x8b\x08 is not a count\n",
		     "t.folded: gzip-compressed data (a pprof profile?), not folded stacks text");
}
END_TEST

/* A FlameGraph-style file (unsorted, repeated stacks, tabs, decimal
 * counts, comments) comes back sorted, merged and rounded, and that is a
 * fixed point.  */
START_TEST(roundtrip_flamegraph)
{
	char *text = slurp(DATA "/cprof-flamegraph.folded");
	char *want = slurp(DATA "/cprof-flamegraph.out");
	char *once = roundtrip(text);
	assert_text_eq(once, want, "cprof-flamegraph.folded read and written");
	char *twice = roundtrip(once);
	assert_text_eq(twice, once, "cprof-flamegraph.out read and written");
	free(twice);
	free(once);
	free(want);
	free(text);
}
END_TEST

static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) +
	       (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* 1,000,000 samples over 100,000 stacks of 2,000 functions: interning is
 * by hash, so this takes a fraction of a second (a linear search would
 * take minutes).  The bound is loose for sanitizer builds.  */
START_TEST(read_large)
{
	char *text = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&text, &size);
	ck_assert_ptr_nonnull(mem);
	uint32_t seed = 12345;
	for (int s = 0; s < 100000; s++) {
		/* Stack s: main, then a depth from 5 to 24 of pseudo-random
		 * functions, and the stack number last so that every stack is
		 * distinct.  */
		fputs("main", mem);
		seed = seed * 1103515245u + 12345u;
		int depth = 5 + (int)((seed >> 16) % 20);
		for (int d = 0; d < depth; d++) {
			seed = seed * 1103515245u + 12345u;
			fprintf(mem, ";function_%u", (seed >> 12) % 2000);
		}
		fprintf(mem, ";leaf_%d 10\n", s % 100);
	}
	fclose(mem);

	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	FILE *f = fmemopen(text, size, "r");
	ck_assert_ptr_nonnull(f);
	struct cp_profile *p = NULL;
	char error[256];
	ck_assert_int_eq(cp_read_folded(f, "large", &p, error, sizeof(error)), 0);
	fclose(f);
	double took = seconds_since(&t0);
	ck_assert_uint_eq(cp_profile_total(p), 1000000);
	size_t n;
	cp_profile_samples(p, &n);
	ck_assert_uint_ge(n, 99000); /* nearly all distinct */
	ck_assert_uint_le(cp_profile_location_count(p), 1 + 2000 + 100);
	/* Timing belongs to make bench, not to a pass/fail test: report it
	 * only.  */
	fprintf(stderr, "read_large: %zu bytes, %zu stacks, 1000000 samples read in %.3f s\n",
		size, n, took);
	cp_profile_free(p);
	free(text);
}
END_TEST

/* ---------------------------------------------------------------- cli */

struct cli_run {
	int code;   /* exit code; -1 when killed by a signal */
	char *out;  /* standard output, NUL-terminated */
	char *err;  /* standard error */
};

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

/* Run cprof with ARGS (NULL-terminated, without argv[0]) in directory CWD
 * (NULL: ours), INPUT on its standard input (NULL: /dev/null).  */
static struct cli_run cli_runv(const char *cwd, const char *input,
			       const char *const args[])
{
	FILE *out = tmpfile(), *err = tmpfile();
	FILE *in = input ? stream_of(input, strlen(input)) : fopen("/dev/null", "r");
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
		if (cwd && chdir(cwd) != 0)
			_exit(126);
		alarm(30); /* survives exec: a hung cprof dies */
		execv(CPROF, (char *const *)argv);
		fprintf(stderr, "cannot run %s: %s\n", CPROF, strerror(errno));
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		ck_assert_int_eq(errno, EINTR);
	fclose(in);
	struct cli_run run = {
		.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1,
		.out = slurp_stream(out),
		.err = slurp_stream(err),
	};
	return run;
}

#define CLI(cwd, input, ...) \
	cli_runv((cwd), (input), (const char *const[]){ __VA_ARGS__, NULL })

static void cli_free(struct cli_run *run)
{
	free(run->out);
	free(run->err);
}

/* RUN succeeded, silently.  */
static void assert_ok(const struct cli_run *run, const char *what)
{
	ck_assert_msg(run->code == 0 && run->err[0] == '\0',
		      "%s: exit %d, stderr: %s", what, run->code, run->err);
}

/* RUN failed with CODE and one line on stderr, MESSAGE (without the
 * "cprof: " and the newline); NULL: any line.  Nothing on stdout.  */
static void assert_fails(const struct cli_run *run, int code,
			 const char *message, const char *what)
{
	ck_assert_msg(run->code == code, "%s: exit %d, expected %d; stderr: %s",
		      what, run->code, code, run->err);
	ck_assert_msg(strncmp(run->err, "cprof: ", 7) == 0,
		      "%s: stderr does not begin with \"cprof: \": %s", what,
		      run->err);
	ck_assert_msg(tu_count_lines(run->err) == 1 &&
			      run->err[strlen(run->err) - 1] == '\n',
		      "%s: not one line on stderr: %s", what, run->err);
	if (message) {
		size_t len = strlen(run->err);
		ck_assert_msg(len == strlen(message) + 8 &&
				      strncmp(run->err + 7, message,
					      len - 8) == 0,
			      "%s: stderr\n  %s  expected\n  cprof: %s", what,
			      run->err, message);
	}
	ck_assert_msg(run->out[0] == '\0', "%s: wrote to stdout: %s", what,
		      run->out);
}

static void teardown(void)
{
	tu_cleanup();
}

static const char *temp_dir(void)
{
	const char *dir = tu_temp_dir();
	ck_assert_ptr_nonnull(dir);
	return dir;
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

START_TEST(cli_version)
{
	struct cli_run run = CLI(NULL, NULL, "--version");
	assert_ok(&run, "--version");
	ck_assert_str_eq(run.out, "cprof " CP_VERSION "\n");
	cli_free(&run);
	run = CLI(NULL, NULL, "-V");
	assert_ok(&run, "-V");
	ck_assert_str_eq(run.out, "cprof " CP_VERSION "\n");
	cli_free(&run);
}
END_TEST

START_TEST(cli_help)
{
	static const char *const helps[] = {"--help", "-h"};
	for (size_t i = 0; i < 2; i++) {
		struct cli_run run = CLI(NULL, NULL, helps[i]);
		assert_ok(&run, helps[i]);
		ck_assert(strncmp(run.out, "Usage: cprof COMMAND", 20) == 0);
		for (const char *c = "flamegraph\0diff\0convert\0report\0"; *c;
		     c += strlen(c) + 1) {
			char usage[64];
			snprintf(usage, sizeof(usage), "\nUsage: cprof %s ", c);
			ck_assert_msg(strstr(run.out, usage),
				      "cprof %s lacks \"%s\"", helps[i], usage + 1);
		}
		cli_free(&run);
	}
	for (const char *c = "flamegraph\0diff\0convert\0report\0"; *c;
	     c += strlen(c) + 1) {
		for (size_t i = 0; i < 2; i++) {
			struct cli_run run = CLI(NULL, NULL, c, helps[i]);
			char usage[64];
			snprintf(usage, sizeof(usage), "Usage: cprof %s ", c);
			assert_ok(&run, c);
			ck_assert_msg(strncmp(run.out, usage, strlen(usage)) == 0,
				      "cprof %s %s: %s", c, helps[i], run.out);
			ck_assert(strstr(run.out, "Exit status: "));
			cli_free(&run);
		}
	}
}
END_TEST

static bool is_option_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* Append to NAMES (NUL-separated, "\0" at the end of the list) each long
 * option "--NAME" in TEXT, where DASH is how a '-' is written ("\\-" in
 * roff, "-" in plain text).  */
static void long_options(const char *text, const char *dash, char *names,
			 size_t size)
{
	char prefix[8];
	snprintf(prefix, sizeof(prefix), "%s%s", dash, dash);
	size_t used = 0, dash_len = strlen(dash);
	for (const char *p = text; (p = strstr(p, prefix)) != NULL;) {
		p += strlen(prefix);
		char name[32];
		size_t len = 0;
		while (len < sizeof(name) - 1) {
			if (strncmp(p, dash, dash_len) == 0 && len > 0) {
				name[len++] = '-';
				p += dash_len;
			} else if (is_option_char(*p) && *p != '-') {
				name[len++] = *p++;
			} else {
				break;
			}
		}
		name[len] = '\0';
		if (len == 0)
			continue;
		bool known = false;
		for (const char *n = names; *n && !known; n += strlen(n) + 1)
			known = strcmp(n, name) == 0;
		if (!known && used + len + 2 < size) {
			memcpy(names + used, name, len + 1);
			used += len + 1;
			names[used] = '\0';
		}
	}
}

/* The long options of the man page and of cprof --help are the same.  */
START_TEST(cli_help_matches_man_page)
{
	char *man = slurp(MAN_PAGE);
	char man_names[1024] = "", help_names[1024] = "";
	long_options(man, "\\-", man_names, sizeof(man_names));
	free(man);
	struct cli_run run = CLI(NULL, NULL, "--help");
	assert_ok(&run, "--help");
	long_options(run.out, "-", help_names, sizeof(help_names));
	cli_free(&run);
	size_t count = 0;
	for (const char *n = man_names; *n; n += strlen(n) + 1, count++) {
		bool found = false;
		for (const char *h = help_names; *h && !found; h += strlen(h) + 1)
			found = strcmp(n, h) == 0;
		ck_assert_msg(found, "%s documents --%s, cprof --help does not",
			      MAN_PAGE, n);
	}
	ck_assert_msg(count >= 10, "only %zu long options found in %s", count,
		      MAN_PAGE);
	for (const char *h = help_names; *h; h += strlen(h) + 1) {
		bool found = false;
		for (const char *n = man_names; *n && !found; n += strlen(n) + 1)
			found = strcmp(n, h) == 0;
		ck_assert_msg(found, "cprof --help has --%s, %s does not", h,
			      MAN_PAGE);
	}
}
END_TEST

START_TEST(cli_usage_errors)
{
	static const struct {
		const char *args[6];
		const char *message;
	} cases[] = {
		{{NULL}, "missing command: flamegraph, diff, convert, report or timeline (see cprof --help)"},
		{{"frob"}, "unknown command 'frob': flamegraph, diff, convert, report or timeline (see cprof --help)"},
		{{"--frob"}, "unknown option '--frob': a command comes first (flamegraph, diff, convert, report or timeline) (see cprof --help)"},
		{{"report"}, "missing IN (see cprof report --help)"},
		{{"report", "a", "b"}, "unexpected argument 'b' (see cprof report --help)"},
		{{"report", "--frob", "a"}, "unknown option '--frob' for cprof report (see cprof report --help)"},
		{{"report", "-x", "a"}, "unknown option '-x' for cprof report (see cprof report --help)"},
		{{"report", "a", "--top"}, "option '--top' needs a value (see cprof report --help)"},
		{{"report", "--top", "-1", "a"}, "invalid --top '-1': expected a whole number from 0 to 2147483647 (see cprof report --help)"},
		{{"report", "--colors", "hot", "a"}, "unknown option '--colors' for cprof report (see cprof report --help)"},
		{{"diff", "a"}, "missing BEFORE or AFTER (see cprof diff --help)"},
		{{"diff", "-", "-"}, "only one input can be standard input (-) (see cprof diff --help)"},
		{{"diff", "a", "b", "--format", "pprof"}, "unknown format 'pprof' for diff: svg or folded (see cprof diff --help)"},
		{{"convert", "a"}, "missing --format (folded, svg, pprof, speedscope or report) (see cprof convert --help)"},
		{{"convert", "a", "-o", "a.txt"}, "cannot tell the output format from the name 'a.txt': give --format folded, svg, pprof, speedscope or report (see cprof convert --help)"},
		{{"convert", "a", "--format", "png"}, "unknown format 'png': folded, svg, pprof, speedscope or report (see cprof convert --help)"},
		/* Formats written only as samples arrive need timestamps.  */
		{{"convert", "a", "--format", "raw"}, "unknown format 'raw': folded, svg, pprof, speedscope or report (see cprof convert --help)"},
		{{"convert", "a", "--format", "text"}, "unknown format 'text': folded, svg, pprof, speedscope or report (see cprof convert --help)"},
		{{"flamegraph", "--width", "wide", "a"}, "invalid width 'wide': expected a whole number from 10 to 1000000 (see cprof flamegraph --help)"},
		{{"flamegraph", "--minwidth", "-1", "a"}, "invalid minimum width '-1': expected a number of pixels, 0 or more (see cprof flamegraph --help)"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct cli_run run = cli_runv(NULL, NULL, cases[i].args);
		char what[64];
		snprintf(what, sizeof(what), "usage case %zu", i);
		assert_fails(&run, 2, cases[i].message, what);
		cli_free(&run);
	}
}
END_TEST

/* report and diff --format folded against hand-checked goldens; the
 * inputs are named relative to fixtures/data, as the header shows.  */
START_TEST(cli_report_golden)
{
	struct cli_run run = CLI(DATA, NULL, "report", "cprof-report.folded");
	assert_ok(&run, "report");
	char *want = slurp(DATA "/cprof-report.txt");
	assert_text_eq(run.out, want, "cprof report cprof-report.folded");
	free(want);
	cli_free(&run);

	run = CLI(DATA, NULL, "report", "cprof-report.folded", "--top", "3");
	assert_ok(&run, "report --top 3");
	want = slurp(DATA "/cprof-report-top3.txt");
	assert_text_eq(run.out, want, "cprof report --top 3");
	free(want);
	cli_free(&run);

	/* --top 0 and a --top beyond the count: all 8 */
	run = CLI(DATA, NULL, "report", "--top=0", "cprof-report.folded");
	assert_ok(&run, "report --top 0");
	want = slurp(DATA "/cprof-report.txt");
	assert_text_eq(run.out, want, "cprof report --top 0");
	cli_free(&run);
	run = CLI(DATA, NULL, "report", "--top", "1000", "cprof-report.folded");
	assert_text_eq(run.out, want, "cprof report --top 1000");
	free(want);
	cli_free(&run);
}
END_TEST

/* convert --format report: the report through the format registry,
 * every function (the registry's report has no default --top).  */
START_TEST(cli_convert_report)
{
	struct cli_run run = CLI(DATA, NULL, "convert", "cprof-report.folded",
				 "--format", "report");
	assert_ok(&run, "convert --format report");
	char *want = slurp(DATA "/cprof-report.txt");
	assert_text_eq(run.out, want, "cprof convert --format report");
	free(want);
	cli_free(&run);
}
END_TEST

/* Folded stacks of a heap profile (cprof-attach --heap --format folded
 * writes the sample type first): the report's unit is bytes.  */
START_TEST(cli_report_heap_units)
{
	struct cli_run run = CLI(NULL,
				 "# cprof sample_type: inuse_space bytes\n"
				 "main;alloc 300\n"
				 "main 100\n",
				 "report", "-");
	assert_ok(&run, "report - (heap)");
	ck_assert_msg(strncmp(run.out, "<stdin>: 400 bytes, 2 stacks, 2 functions\n", 42) == 0,
		      "%s", run.out);
	ck_assert_msg(strstr(run.out, "Top 2 of 2 functions by self bytes:\n") &&
			      strstr(run.out, "Top 2 of 2 functions by total bytes:\n") &&
			      !strstr(run.out, "samples"),
		      "%s", run.out);
	cli_free(&run);
}
END_TEST

/* An input named .raw is cprof-attach's raw samples (the readers' table):
 * the report of their weights per stack is the report of the same
 * stacks as folded text; a directory so named is refused as raw.  */
START_TEST(cli_report_raw_input)
{
	const char *dir = temp_dir();
	char *raw = path_in(dir, "t.raw");
	char *folded = path_in(dir, "t.folded");
	write_file(raw, "# fields SECONDS TID WEIGHT STACK\n"
			"# thread 7 main\n"
			"1.0 7 2 main;a\n"
			"1.1 7 1 main;b\n"
			"1.2 8 3 main;a\n");
	write_file(folded, "main;a 5\nmain;b 1\n");
	struct cli_run run = CLI(dir, NULL, "report", "t.raw");
	assert_ok(&run, "report t.raw");
	struct cli_run want = CLI(dir, NULL, "report", "t.folded");
	assert_ok(&want, "report t.folded");
	/* The same but for the name and the stacks (two threads: 3).  */
	ck_assert_msg(strncmp(run.out, "t.raw: 6 samples, 3 stacks, 3 functions\n", 40) == 0,
		      "%s", run.out);
	assert_text_eq(strchr(run.out, '\n'), strchr(want.out, '\n'),
		       "cprof report t.raw");
	cli_free(&run);
	cli_free(&want);
	char *sub = path_in(dir, "d.raw");
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	run = CLI(dir, NULL, "report", "d.raw");
	assert_fails(&run, 2, "d.raw is a directory, not a file of raw stacks",
		     "report d.raw");
	cli_free(&run);
	free(sub);
	free(raw);
	free(folded);
}
END_TEST

START_TEST(cli_report_stdin)
{
	char *input = slurp(DATA "/cprof-report.folded");
	char *want = slurp(DATA "/cprof-report.txt");
	struct cli_run run = CLI(NULL, input, "report", "-");
	assert_ok(&run, "report -");
	/* the same but for the name in the header */
	const char *rest = strchr(want, ':');
	ck_assert(strncmp(run.out, "<stdin>", 7) == 0);
	assert_text_eq(run.out + 7, rest, "cprof report - < cprof-report.folded");
	cli_free(&run);
	free(want);
	free(input);
}
END_TEST

/* -o writes the same as standard output.  */
START_TEST(cli_report_output_file)
{
	const char *dir = temp_dir();
	char *out = path_in(dir, "report.txt");
	struct cli_run run = CLI(DATA, NULL, "report", "cprof-report.folded",
				 "-o", out);
	assert_ok(&run, "report -o");
	ck_assert_str_eq(run.out, "");
	char *got = slurp(out), *want = slurp(DATA "/cprof-report.txt");
	assert_text_eq(got, want, "report -o");
	free(got);
	free(want);
	free(out);
	cli_free(&run);
	ck_assert_int_eq(dir_count(dir), 1);
}
END_TEST

START_TEST(cli_diff_folded_golden)
{
	char *want = slurp(DATA "/cprof-diff.txt");
	struct cli_run run = CLI(DATA, NULL, "diff", "--format", "folded",
				 "cprof-before.folded", "cprof-after.folded");
	assert_ok(&run, "diff --format folded");
	assert_text_eq(run.out, want, "cprof diff --format folded");
	cli_free(&run);

	/* AFTER from standard input */
	char *after = slurp(DATA "/cprof-after.folded");
	run = CLI(DATA, after, "diff", "cprof-before.folded", "-", "--format",
		  "folded");
	assert_ok(&run, "diff BEFORE -");
	assert_text_eq(run.out, want, "cprof diff BEFORE - --format folded");
	cli_free(&run);
	free(after);

	/* the format from the name of the output */
	const char *dir = temp_dir();
	char *out = path_in(dir, "d.folded");
	run = CLI(DATA, NULL, "diff", "cprof-before.folded",
		  "cprof-after.folded", "-o", out);
	assert_ok(&run, "diff -o d.folded");
	char *got = slurp(out);
	assert_text_eq(got, want, "cprof diff -o d.folded");
	free(got);
	free(out);
	cli_free(&run);
	free(want);

	want = slurp(DATA "/cprof-diff-normalize.txt");
	run = CLI(DATA, NULL, "diff", "--normalize", "--format", "folded",
		  "cprof-before.folded", "cprof-after.folded");
	assert_ok(&run, "diff --normalize --format folded");
	assert_text_eq(run.out, want, "cprof diff --normalize --format folded");
	cli_free(&run);
	free(want);
}
END_TEST

START_TEST(cli_convert_folded)
{
	char *want = slurp(DATA "/cprof-flamegraph.out");
	struct cli_run run = CLI(DATA, NULL, "convert", "--format", "folded",
				 "cprof-flamegraph.folded");
	assert_ok(&run, "convert --format folded");
	assert_text_eq(run.out, want, "convert --format folded");
	cli_free(&run);

	const char *dir = temp_dir();
	char *out = path_in(dir, "c.FOLDED");
	run = CLI(DATA, NULL, "convert", "cprof-flamegraph.folded", "-o", out);
	assert_ok(&run, "convert -o c.FOLDED");
	char *got = slurp(out);
	assert_text_eq(got, want, "convert -o c.FOLDED");
	free(got);
	free(out);
	cli_free(&run);
	free(want);
}
END_TEST

/* The other writers are tested in their own suites; here only that the
 * program picks them by name and writes a file.  */
START_TEST(cli_other_formats)
{
	static const struct {
		const char *args[7];
		const char *file;
		const char *start; /* the file begins with it */
		const char *has;   /* and has it somewhere */
	} cases[] = {
		{{"convert", DATA "/cprof-report.folded", "-o"}, "p.pb.gz", "\x1f\x8b", NULL},
		{{"convert", DATA "/cprof-report.folded", "--format", "pprof", "-o"}, "p.bin", "\x1f\x8b", NULL},
		{{"convert", DATA "/cprof-report.folded", "-o"}, "p.speedscope.json", NULL, "speedscope"},
		{{"convert", DATA "/cprof-report.folded", "-o"}, "p.svg", NULL, "<svg"},
		{{"flamegraph", DATA "/cprof-report.folded", "-o"}, "f.svg", NULL, "<svg"},
		{{"diff", DATA "/cprof-before.folded", DATA "/cprof-after.folded", "-o"}, "d.svg", NULL, "<svg"},
	};
	const char *dir = temp_dir();
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		const char *args[8];
		size_t n = 0;
		while (cases[i].args[n]) {
			args[n] = cases[i].args[n];
			n++;
		}
		char *out = path_in(dir, cases[i].file);
		args[n++] = out;
		args[n] = NULL;
		struct cli_run run = cli_runv(NULL, NULL, args);
		assert_ok(&run, cases[i].file);
		char *got = slurp(out);
		if (cases[i].start)
			ck_assert_msg(strncmp(got, cases[i].start,
					      strlen(cases[i].start)) == 0,
				      "%s does not begin as expected", cases[i].file);
		if (cases[i].has)
			ck_assert_msg(strstr(got, cases[i].has), "%s lacks %s",
				      cases[i].file, cases[i].has);
		free(got);
		free(out);
		cli_free(&run);
	}
}
END_TEST

/* Malformed and empty input: one "FILE:LINE: what" line, exit 2, and no
 * output file — not even a temporary; an existing file stays as it was. */
START_TEST(cli_bad_input)
{
	const char *in_dir = temp_dir();
	char *bad = path_in(in_dir, "bad.folded");
	char *empty = path_in(in_dir, "empty.folded");
	char *good = path_in(in_dir, "good.folded");
	write_file(bad, "main;work 3\n# fine so far\nmain;;work 2\n");
	write_file(empty, "# nothing\n\n");
	write_file(good, "main;work 3\n");
	char bad_msg[PATH_MAX + 64], empty_msg[PATH_MAX + 128];
	snprintf(bad_msg, sizeof(bad_msg),
		 "%s:3: frame 2 is empty in 'main;;work'", bad);
	snprintf(empty_msg, sizeof(empty_msg),
		 "%s: no samples (the input is empty, or has only blank lines, comments and zero counts)",
		 empty);

	const char *out_dir = temp_dir();
	char *out = path_in(out_dir, "out.svg");
	char *kept = path_in(out_dir, "kept.folded");
	const struct {
		const char *args[8];
		const char *message;
	} cases[] = {
		{{"flamegraph", bad, "-o", out}, bad_msg},
		{{"flamegraph", empty, "-o", out}, empty_msg},
		{{"diff", bad, good, "-o", out}, bad_msg},
		{{"diff", good, bad, "-o", out}, bad_msg},
		{{"diff", good, empty, "--format", "folded", "-o"}, empty_msg},
		{{"convert", bad, "-o", out}, bad_msg},
		{{"convert", empty, "--format", "pprof", "-o", out}, empty_msg},
		{{"report", bad, "-o", out}, bad_msg},
		{{"report", empty}, empty_msg},
		{{"convert", bad, "-o", kept}, bad_msg},
	};
	write_file(kept, "old\n");
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		const char *args[8];
		size_t n = 0;
		while (cases[i].args[n]) {
			args[n] = cases[i].args[n];
			n++;
		}
		if (strcmp(args[n - 1], "-o") == 0)
			args[n++] = out;
		args[n] = NULL;
		struct cli_run run = cli_runv(NULL, NULL, args);
		char what[64];
		snprintf(what, sizeof(what), "bad input case %zu", i);
		assert_fails(&run, 2, cases[i].message, what);
		cli_free(&run);
		ck_assert_msg(dir_count(out_dir) == 1,
			      "%s left files in %s", what, out_dir);
	}
	char *old = slurp(kept);
	ck_assert_str_eq(old, "old\n");
	free(old);

	/* standard input: named <stdin> */
	struct cli_run run = CLI(NULL, "a 1\nb\n", "convert", "-", "--format",
				 "folded");
	assert_fails(&run, 2, "<stdin>:2: no sample count: expected 'frame;frame;... COUNT', found 'b'",
		     "malformed stdin");
	cli_free(&run);
	run = CLI(NULL, "", "report", "-");
	assert_fails(&run, 2, "<stdin>: no samples (the input is empty, or has only blank lines, comments and zero counts)",
		     "empty stdin");
	cli_free(&run);

	free(bad);
	free(empty);
	free(good);
	free(out);
	free(kept);
}
END_TEST

START_TEST(cli_unreadable_and_unwritable)
{
	struct cli_run run = CLI(NULL, NULL, "report", "/nonexistent/x.folded");
	assert_fails(&run, 2, "cannot open /nonexistent/x.folded: No such file or directory",
		     "missing input");
	cli_free(&run);

	run = CLI(NULL, NULL, "report", DATA);
	assert_fails(&run, 2, DATA " is a directory, not a file of folded stacks",
		     "directory input");
	cli_free(&run);

	run = CLI(NULL, NULL, "convert", DATA "/cprof-report.folded", "-o",
		  "/nonexistent/x.folded");
	assert_fails(&run, 1, "cannot create output file /nonexistent/x.folded: No such file or directory",
		     "unwritable output");
	cli_free(&run);

	const char *dir = temp_dir();
	char *out = path_in(dir, "x.svg");
	run = CLI(NULL, NULL, "flamegraph", "--colors", "no-such-palette",
		  DATA "/cprof-report.folded", "-o", out);
	assert_fails(&run, 2, "unknown color palette 'no-such-palette' (see cprof flamegraph --help)",
		     "unknown palette");
	cli_free(&run);
	ck_assert_int_eq(dir_count(dir), 0);
	free(out);
}
END_TEST

/* ----------------------------------------------------------------- suite */

static Suite *cprof_suite(void)
{
	Suite *s = suite_create("cprof");

	TCase *tc = tcase_create("read");
	tcase_add_test(tc, read_structure);
	tcase_add_test(tc, read_inline_suffix);
	tcase_add_test(tc, read_decimal_counts);
	tcase_add_test(tc, read_lenient);
	tcase_add_test(tc, read_malformed);
	tcase_add_test(tc, read_empty);
	tcase_add_test(tc, read_small_error_buffer);
	tcase_add_test(tc, read_error_from_stream);
	tcase_add_test(tc, roundtrip_canonical);
	tcase_add_test(tc, roundtrip_gzip_magic_frame);
	tcase_add_test(tc, roundtrip_flamegraph);
	tcase_add_test(tc, read_large);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("cli");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, cli_version);
	tcase_add_test(tc, cli_help);
	tcase_add_test(tc, cli_help_matches_man_page);
	tcase_add_test(tc, cli_usage_errors);
	tcase_add_test(tc, cli_report_golden);
	tcase_add_test(tc, cli_report_stdin);
	tcase_add_test(tc, cli_convert_report);
	tcase_add_test(tc, cli_report_heap_units);
	tcase_add_test(tc, cli_report_raw_input);
	tcase_add_test(tc, cli_report_output_file);
	tcase_add_test(tc, cli_diff_folded_golden);
	tcase_add_test(tc, cli_convert_folded);
	tcase_add_test(tc, cli_other_formats);
	tcase_add_test(tc, cli_bad_input);
	tcase_add_test(tc, cli_unreadable_and_unwritable);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(cprof_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
