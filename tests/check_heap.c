/* End-to-end tests of cprof-attach --heap: run the real program on the
 * heap fixtures (fixtures/heap-*.c) and check what a user would check:
 * the per-function call counts and bytes equal to what the fixture says
 * it did, the leak found at the right site with the right stack, the
 * accounting identity (allocations = tracked frees + realloc releases +
 * live at the end), the target computing correctly while traced and
 * after, and every byte of its code restored whenever the run ends.
 *
 * The heap fixtures talk on stdin and stdout (heap-fixture.h): "ready",
 * then "go" from us starts the work phase, "done ..." reports the exact
 * counts, "exit" from us ends them ("ok").  The tests attach after
 * "ready" and say "go" only once cprof-attach has printed its "tracing
 * the heap" line, so every call of the work phase is traced and the
 * counts are exact.  Each test starts its own fixture (never a sleep:
 * every wait is on a pipe line or a process exit, with a bound that only
 * ends a test that hangs); the teardown kills and reaps whatever is left
 * (tu_cleanup), and every test case has a Check timeout.  On a failed
 * check the cprof-attach run (status, stdout, stderr), the report and the
 * fixture's output are printed to stderr first.  */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/heap.h"
#include "cprof/profile.h"
#include "cprof/sampler.h"
#include "cprof/symbols.h"
#include "cprof/target.h"
#include "cprof/unwinder.h"
#include "testutil.h"

/* Generous bounds: they only end a test that hangs (a trap costs 20-60
 * microseconds on a slow machine, and heap-stress makes 400000 calls).  */
#define READY_TIMEOUT_MS 15000     /* fixture start-up */
#define TRACING_TIMEOUT_MS 30000   /* cprof-attach until breakpoints are in */
#define WORK_TIMEOUT_MS 60000      /* a small fixture's traced work phase */
#define STRESS_TIMEOUT_MS 200000   /* heap-stress 4 100000, traced */
#define RUN_TIMEOUT_MS 30000       /* cprof-attach from its end to its exit */
#define EXIT_TIMEOUT_MS 15000      /* a fixture from "exit" to its exit */

/* ------------------------------------------------------- test context */

/* What a failed check prints: the current cprof-attach run, the report
 * it wrote, the fixture (any may be NULL).  */
static struct {
	struct tu_run *run;
	const char *report;
	struct tu_proc *fixture;
} ctx;

/* The write end of the current fixture's stdin, -1 when none.  */
static int fixture_stdin = -1;

static void dump_context(void)
{
	if (ctx.run != NULL)
		tu_run_dump(ctx.run, "heap", 4000);
	if (ctx.report != NULL) {
		size_t len = strlen(ctx.report);

		fprintf(stderr, "  --- report (%zu bytes%s)\n%.*s\n", len,
			len > 6000 ? ", first part" : "",
			(int)(len > 6000 ? 6000 : len), ctx.report);
	}
	if (ctx.fixture != NULL)
		fprintf(stderr, "  --- fixture %d stdout:\n%s\n",
			(int)ctx.fixture->pid, ctx.fixture->output);
}

/* Fail the test with a formatted message after printing the context.  */
#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: check failed: %s\n",       \
				__FILE__, __LINE__, #cond);                \
			dump_context();                                    \
			ck_abort_msg(__VA_ARGS__);                         \
		}                                                          \
	} while (0)

static void setup(void)
{
	/* A fixture that died must fail the check that writes to it, not
	 * kill the test with SIGPIPE (children get SIG_DFL back).  */
	signal(SIGPIPE, SIG_IGN);
	ctx.run = NULL;
	ctx.report = NULL;
	ctx.fixture = NULL;
	fixture_stdin = -1;
}

static void teardown(void)
{
	if (fixture_stdin >= 0)
		close(fixture_stdin);
	fixture_stdin = -1;
	ctx.run = NULL;
	ctx.report = NULL;
	ctx.fixture = NULL;
	tu_cleanup();
	unsetenv("CPROF_HEAP_FORCE_STEP");
}

/* ---------------------------------------------------- fixture driving */

/* Start heap fixture NAME with up to three arguments (NULL ends them)
 * and its stdin on our pipe; wait for its "ready".  */
static struct tu_proc *start_fixture(const char *name, const char *arg1,
				     const char *arg2, const char *arg3)
{
	struct tu_proc *fixture;

	fixture = tu_fixture_start_stdin(&fixture_stdin, name, arg1, arg2,
					 arg3, NULL);
	CHECK(fixture != NULL, "fixture %s could not be started", name);
	ctx.fixture = fixture;
	CHECK(tu_proc_wait_line(fixture, "ready", READY_TIMEOUT_MS),
	      "fixture %s (%d) did not print \"ready\"", name,
	      (int)fixture->pid);
	return fixture;
}

/* Write LINE and a newline to the fixture's stdin.  */
static void say(const char *line)
{
	char text[64];
	int len = snprintf(text, sizeof(text), "%s\n", line);

	CHECK(fixture_stdin >= 0, "no fixture stdin to say \"%s\" to", line);
	CHECK(write(fixture_stdin, text, (size_t)len) == len,
	      "cannot write \"%s\" to the fixture: %s", line, strerror(errno));
}

/* A copy of the fixture's first stdout line starting with PREFIX, after
 * waiting for it up to TIMEOUT_MS; the caller frees it.  */
static char *wait_line(struct tu_proc *fixture, const char *prefix,
		       int timeout_ms)
{
	size_t prefix_len = strlen(prefix);
	const char *start;

	CHECK(tu_proc_wait_line_prefix(fixture, prefix, timeout_ms),
	      "fixture %d did not print a \"%s\" line within %d s (%s)",
	      (int)fixture->pid, prefix, timeout_ms / 1000,
	      tu_machine_load());
	/* Only now: reading the pipe may have moved the output.  */
	start = fixture->output;
	for (;;) {
		const char *end = strchr(start, '\n');

		ck_assert_ptr_nonnull(end);
		if (strncmp(start, prefix, prefix_len) == 0)
			return strndup(start, (size_t)(end - start));
		start = end + 1;
	}
}

/* The number after " KEY=" in a "done ..." line, -1 when missing.  */
static long long done_value(const char *done, const char *key)
{
	char pattern[64];
	const char *hit;

	snprintf(pattern, sizeof(pattern), " %s=", key);
	hit = strstr(done, pattern);
	if (hit == NULL)
		return -1;
	return strtoll(hit + strlen(pattern), NULL, 10);
}

/* The fixture's "done" value KEY, which must be there.  */
static unsigned long long done_count(const char *done, const char *key)
{
	long long value = done_value(done, key);

	CHECK(value >= 0, "no %s= in the fixture's line: %s", key, done);
	return (unsigned long long)value;
}

/* Say "exit" and check that the fixture ends the way it should: a line
 * equal to OK_LINE ("ok", or "ok N" for heap-stress) and exit status 0.
 * This is how the tests see that the target still computed correctly
 * after the tracer wrote into its code and left.  */
static void finish_fixture(struct tu_proc *fixture, const char *ok_line)
{
	say("exit");
	CHECK(tu_proc_wait_exit(fixture, EXIT_TIMEOUT_MS),
	      "fixture %d did not exit after \"exit\"", (int)fixture->pid);
	CHECK(tu_proc_wait_line(fixture, ok_line, 0),
	      "fixture %d did not print \"%s\"", (int)fixture->pid, ok_line);
	CHECK(WIFEXITED(fixture->status) && WEXITSTATUS(fixture->status) == 0,
	      "fixture %d ended with wait status %#x, expected exit 0",
	      (int)fixture->pid, (unsigned)fixture->status);
}

/* ------------------------------------------------------ cprof-attach */

/* Start cprof-attach --heap EXTRA... -o OUTPUT PID on FIXTURE (EXTRA: a
 * NULL-ended list, may be NULL) and wait until its breakpoints are in:
 * the "tracing the heap of" line on its stderr.  */
static struct tu_run *attach_heap(const struct tu_proc *fixture,
				  const char *output,
				  const char *const extra[])
{
	const char *args[32];
	size_t argc = 0;
	struct tu_run *run;

	args[argc++] = "--heap";
	for (size_t i = 0; extra != NULL && extra[i] != NULL; i++)
		args[argc++] = extra[i];
	args[argc++] = "-o";
	args[argc++] = output;
	args[argc++] = fixture->pid_text;
	args[argc] = NULL;
	run = tu_cprof_startv(args);
	CHECK(run != NULL, "cprof-attach could not be started");
	ctx.run = run;
	if (!tu_run_wait_stderr(run, "tracing the heap of ",
				TRACING_TIMEOUT_MS)) {
		tu_run_wait(run, 0);
		CHECK(false, "cprof-attach --heap %s did not print \"tracing "
		      "the heap of ...\" within %d s", fixture->pid_text,
		      TRACING_TIMEOUT_MS / 1000);
	}
	return run;
}

/* Check that RUN finished in time with exit status 0.  */
static void expect_exit_ok(struct tu_run *run, int timeout_ms)
{
	CHECK(tu_run_wait(run, timeout_ms),
	      "cprof-attach did not exit within %d s", timeout_ms / 1000);
	CHECK(tu_run_exit_code(run) == 0, "cprof-attach exited with %d, "
	      "expected 0", tu_run_exit_code(run));
}

/* End RUN with SIGNO and check that it exits 0.  */
static void end_run(struct tu_run *run, int signo)
{
	CHECK(kill(run->pid, signo) == 0, "kill(%d, %d): %s", (int)run->pid,
	      signo, strerror(errno));
	expect_exit_ok(run, RUN_TIMEOUT_MS);
}

/* Check that the finished RUN printed the line "cprof-attach: tracing
 * the heap of PID (CMDLINE): N breakpoints in WHERE" with N > 0 and that
 * CMDLINE starts with the fixture's path.  */
static void expect_tracing_line(const struct tu_run *run,
				const struct tu_proc *fixture,
				const char *fixture_name, const char *where)
{
	char prefix[128];
	char tail[128];
	const char *line;
	const char *end;
	const char *colon;
	unsigned long breakpoints = 0;

	snprintf(prefix, sizeof(prefix), "cprof-attach: tracing the heap of "
		 "%s (%s/fixtures/%s", fixture->pid_text, CP_BUILD_DIR,
		 fixture_name);
	line = strstr(run->err, prefix);
	CHECK(line != NULL && (line == run->err || line[-1] == '\n'),
	      "no line starting with \"%s\" on stderr", prefix);
	end = strchr(line, '\n');
	CHECK(end != NULL, "the tracing line does not end");
	/* The command line may itself hold "): ", so take the last one.  */
	colon = NULL;
	for (const char *p = line; p + 3 <= end; p++)
		if (memcmp(p, "): ", 3) == 0)
			colon = p;
	CHECK(colon != NULL, "no \"): \" in the tracing line");
	snprintf(tail, sizeof(tail), "%.*s", (int)(end - colon - 3),
		 colon + 3);
	CHECK(sscanf(tail, "%lu breakpoints in ", &breakpoints) == 1
	      && breakpoints > 0,
	      "the tracing line does not say \"N breakpoints in\": %s", tail);
	CHECK(strstr(tail, " in ") != NULL
	      && strcmp(strstr(tail, " in ") + 4, where) == 0,
	      "the tracing line says \"%s\", expected the breakpoints in %s",
	      tail, where);
}

/* ------------------------------------------------------------ reports */

#define MAX_SITES 16
#define LIVE_TABLE " sites by live bytes at end (leak candidates)\n"
#define ALLOC_TABLE " sites by bytes allocated\n"
#define MAX_FRAMES 24

/* One site of a "top N sites" table.  */
struct site {
	/* live table: live bytes and count, then all bytes and count;
	 * alloc table: all bytes and count, then live bytes and count.  */
	unsigned long long bytes, count, other_bytes, other_count;
	char frames[MAX_FRAMES][256];  /* function names, innermost first */
	size_t depth;
};

/* A call line: "  NAME  COUNT  (MODULE)" or "  NAME  -  (NOTE)".  */
struct call {
	bool found;
	bool counted;                 /* a number, not "-" */
	unsigned long long count;
	char note[128];               /* MODULE or NOTE */
};

struct report {
	const char *text;
	unsigned long long allocations, alloc_bytes;
	unsigned long long frees_tracked, frees_untracked, frees_null;
	unsigned long long frees_double, frees_inside;
	unsigned long long reallocs, realloc_releases;
	unsigned long long failed, peak_bytes, live_count, live_bytes;
	struct site live_sites[MAX_SITES];
	size_t live_site_count;
	struct site alloc_sites[MAX_SITES];
	size_t alloc_site_count;
};

/* The first line of TEXT starting with PREFIX, or NULL.  */
static const char *find_line(const char *text, const char *prefix)
{
	size_t prefix_len = strlen(prefix);

	for (const char *line = text; line != NULL && *line != '\0';) {
		const char *end = strchr(line, '\n');

		if (strncmp(line, prefix, prefix_len) == 0)
			return line;
		line = end != NULL ? end + 1 : NULL;
	}
	return NULL;
}

/* sscanf the rest of the line of TEXT starting with PREFIX with FORMAT;
 * the number of conversions, or -1 when there is no such line.  */
static int scan_line(const char *text, const char *prefix,
		     const char *format, ...)
	__attribute__((format(scanf, 3, 4)));

static int scan_line(const char *text, const char *prefix,
		     const char *format, ...)
{
	const char *line = find_line(text, prefix);
	char copy[512];
	const char *end;
	va_list args;
	int converted;

	if (line == NULL)
		return -1;
	end = strchr(line, '\n');
	snprintf(copy, sizeof(copy), "%.*s",
		 (int)(end != NULL ? end - line : (long)strlen(line)), line);
	va_start(args, format);
	converted = vsscanf(copy + strlen(prefix), format, args);
	va_end(args);
	return converted;
}

/* The call line of function NAME in the report's "calls" table.  */
static struct call report_call(const struct report *report, const char *name)
{
	struct call call = { 0 };
	const char *calls = find_line(report->text, "calls\n");
	char prefix[64];
	const char *line;
	const char *p;
	const char *end;

	if (calls == NULL)
		return call;
	snprintf(prefix, sizeof(prefix), "  %s ", name);
	line = find_line(calls, prefix);
	if (line == NULL)
		return call;
	end = strchr(line, '\n');
	if (end == NULL)
		end = line + strlen(line);
	call.found = true;
	p = line + strlen(prefix);
	while (*p == ' ')
		p++;
	if (*p == '-') {
		p++;
	} else {
		char *number_end;

		call.count = strtoull(p, &number_end, 10);
		call.counted = number_end != p;
		p = number_end;
	}
	while (*p == ' ')
		p++;
	if (*p == '(' && end > p + 1 && end[-1] == ')')
		snprintf(call.note, sizeof(call.note), "%.*s",
			 (int)(end - p - 2), p + 1);
	return call;
}

/* The function name of the frame line LINE ("    NAME (WHERE)",
 * "    NAME [inlined] (WHERE)") into NAME.  */
static void frame_name(const char *line, size_t len, char *name,
		       size_t name_size)
{
	size_t name_len = len;

	/* The last parenthesised group is the place; the name itself may
	 * hold parentheses ("operator new(unsigned long)").  */
	if (len > 0 && line[len - 1] == ')') {
		int depth = 0;

		for (size_t i = len; i-- > 0;) {
			if (line[i] == ')')
				depth++;
			else if (line[i] == '(' && --depth == 0) {
				if (i > 0 && line[i - 1] == ' ')
					name_len = i - 1;
				break;
			}
		}
	}
	if (name_len >= 10
	    && memcmp(line + name_len - 10, " [inlined]", 10) == 0)
		name_len -= 10;
	snprintf(name, name_size, "%.*s", (int)name_len, line);
}

/* Parse the table whose header line ends in HEADER ("top 10 sites by
 * bytes allocated\n") into SITES.  */
static size_t parse_sites(const char *text, const char *header, bool live,
			  struct site *sites, size_t max)
{
	const char *line = strstr(text, header);
	size_t count = 0;

	if (line == NULL)
		return 0;
	line = strchr(line, '\n');
	while (line != NULL && line[1] != '\0') {
		const char *start = line + 1;
		const char *end = strchr(start, '\n');
		size_t len = end != NULL ? (size_t)(end - start)
					 : strlen(start);

		line = end;
		if (start[0] == '#') {
			struct site *site;
			char copy[256];
			int got;

			if (count == max)
				break;
			site = &sites[count++];
			memset(site, 0, sizeof(*site));
			snprintf(copy, sizeof(copy), "%.*s", (int)len, start);
			if (live)
				got = sscanf(copy, "#%*u %llu bytes live in "
					     "%llu allocations (%llu bytes in "
					     "%llu allocations in all)",
					     &site->bytes, &site->count,
					     &site->other_bytes,
					     &site->other_count);
			else
				got = sscanf(copy, "#%*u %llu bytes in %llu "
					     "allocations (%llu bytes in %llu "
					     "still live)",
					     &site->bytes, &site->count,
					     &site->other_bytes,
					     &site->other_count);
			if (got != 4)
				count--;
		} else if (len > 4 && memcmp(start, "    ", 4) == 0
			   && count > 0) {
			struct site *site = &sites[count - 1];

			if (site->depth < MAX_FRAMES)
				frame_name(start + 4, len - 4,
					   site->frames[site->depth++],
					   sizeof(site->frames[0]));
		} else {
			break;  /* a blank line: the end of the table */
		}
	}
	return count;
}

/* Read and parse the heap report OUTPUT that RUN wrote.  The caller
 * frees REPORT->text.  */
static void read_report(const char *output, struct report *report)
{
	char *text = tu_read_file(output);

	memset(report, 0, sizeof(*report));
	CHECK(text != NULL, "cprof-attach did not write %s", output);
	ctx.report = text;
	report->text = text;
	CHECK(strncmp(text, "cprof heap report\n", 18) == 0,
	      "%s does not begin with \"cprof heap report\"", output);
	CHECK(scan_line(text, "allocations   ", "%llu (%llu bytes)",
			&report->allocations, &report->alloc_bytes) == 2,
	      "no \"allocations   N (B bytes)\" line");
	CHECK(scan_line(text, "frees         ", "%llu tracked, %llu untracked, "
			"%llu of NULL, %llu double, %llu inside the allocator",
			&report->frees_tracked, &report->frees_untracked,
			&report->frees_null, &report->frees_double,
			&report->frees_inside) == 5,
	      "no \"frees         T tracked, U untracked, Z of NULL, D "
	      "double, I inside the allocator\" line");
	CHECK(scan_line(text, "reallocs      ", "%llu (%llu released their "
			"old block)", &report->reallocs,
			&report->realloc_releases) == 2,
	      "no \"reallocs      R (M released their old block)\" line");
	CHECK(scan_line(text, "failed        ", "%llu", &report->failed) == 1,
	      "no \"failed        F\" line");
	CHECK(scan_line(text, "peak live     ", "%llu bytes at",
			&report->peak_bytes) == 1,
	      "no \"peak live     B bytes at S s\" line");
	CHECK(scan_line(text, "live at end   ", "%llu allocations, %llu bytes",
			&report->live_count, &report->live_bytes) == 2,
	      "no \"live at end   C allocations, B bytes\" line");
	CHECK(strstr(text, LIVE_TABLE) != NULL,
	      "no \"top N sites by live bytes at end\" table");
	CHECK(strstr(text, ALLOC_TABLE) != NULL,
	      "no \"top N sites by bytes allocated\" table");
	report->live_site_count = parse_sites(text, LIVE_TABLE, true,
					      report->live_sites, MAX_SITES);
	report->alloc_site_count = parse_sites(text, ALLOC_TABLE, false,
					       report->alloc_sites, MAX_SITES);
}

static void free_report(struct report *report)
{
	if (ctx.report == report->text)
		ctx.report = NULL;
	free((char *)report->text);
	report->text = NULL;
}

/* Check the identity every report must hold: every allocation seen is
 * freed (tracked), released by a realloc, or live at the end.  */
static void expect_identity(const struct report *report)
{
	CHECK(report->allocations == report->frees_tracked
			      + report->realloc_releases + report->live_count,
	      "allocations %llu != tracked frees %llu + realloc releases %llu "
	      "+ live at end %llu (= %llu)", report->allocations,
	      report->frees_tracked, report->realloc_releases,
	      report->live_count,
	      report->frees_tracked + report->realloc_releases
		      + report->live_count);
}

/* True when frame NAME is function FUNCTION: equal, or FUNCTION
 * followed by a C++ parameter list ("leak_here()").  */
static bool frame_is(const char *name, const char *function)
{
	size_t len = strlen(function);

	return strncmp(name, function, len) == 0
	       && (name[len] == '\0' || name[len] == '(');
}

/* Check that the #1 leak site is BYTES bytes in COUNT allocations with
 * FIRST as its first frame (after ALLOCATOR_FRAMES frames whose names
 * start with "operator new", for C++) and CALLER right below it.  */
static void expect_top_leak(const struct report *report,
			    unsigned long long bytes, unsigned long long count,
			    const char *first, const char *caller)
{
	const struct site *site = &report->live_sites[0];
	size_t at = 0;

	CHECK(report->live_site_count > 0, "no site in the leak table");
	CHECK(site->bytes == bytes && site->count == count,
	      "leak site #1 has %llu bytes live in %llu allocations, "
	      "expected %llu in %llu", site->bytes, site->count, bytes,
	      count);
	CHECK(site->other_bytes == bytes && site->other_count == count,
	      "leak site #1 allocated %llu bytes in %llu allocations in all, "
	      "expected %llu in %llu (the leak only)", site->other_bytes,
	      site->other_count, bytes, count);
	CHECK(site->depth >= 2, "leak site #1 has %zu frames", site->depth);
	while (at + 2 < site->depth && !frame_is(site->frames[at], first))
		at++;
	CHECK(frame_is(site->frames[at], first),
	      "leak site #1 does not name %s", first);
	CHECK(at + 1 < site->depth && frame_is(site->frames[at + 1], caller),
	      "the frame below %s in leak site #1 is \"%s\", expected %s",
	      first, at + 1 < site->depth ? site->frames[at + 1] : "(none)",
	      caller);
	/* Above FIRST only the C++ operator may come: the allocator's own
	 * frame (malloc) is left out.  */
	for (size_t i = 0; i < at; i++)
		CHECK(strncmp(site->frames[i], "operator new", 12) == 0,
		      "leak site #1 has frame \"%s\" above %s", site->frames[i],
		      first);
}

/* Check that call line NAME holds exactly EXPECTED calls.  */
static void expect_calls(const struct report *report, const char *name,
			 unsigned long long expected)
{
	struct call call = report_call(report, name);

	CHECK(call.found, "no \"%s\" line in the calls table", name);
	CHECK(call.counted && call.count == expected,
	      "the report counts %s%llu calls of %s, the fixture made %llu",
	      call.counted ? "" : "no number of (\"-\") ", call.count, name,
	      expected);
}

/* ------------------------------------------------------ heap-leak run */

/* One traced work phase of heap fixture NAME, ended by SIGINT after its
 * "done" line: the report, and the "done" line in *DONE (the caller
 * frees it).  EXTRA: more cprof-attach options.  The fixture is left
 * running, waiting for "exit".  */
static struct tu_proc *traced_work(const char *name, const char *output,
				   const char *const extra[],
				   struct tu_run **run, char **done)
{
	struct tu_proc *fixture = start_fixture(name, NULL, NULL, NULL);

	*run = attach_heap(fixture, output, extra);
	say("go");
	*done = wait_line(fixture, "done", WORK_TIMEOUT_MS);
	end_run(*run, SIGINT);
	return fixture;
}

/* The output path NAME in a new temporary directory, into PATH.  */
static void temp_output(const char *name, char *path, size_t path_size)
{
	const char *dir = tu_temp_dir();

	CHECK(dir != NULL, "no temporary directory");
	snprintf(path, path_size, "%s/%s", dir, name);
}

/* ------------------------------------------------------------- tests */

/* heap-leak under glibc: every count of the report equals what the
 * fixture says it did, and the leak is found where it is.  */
START_TEST(test_leak_report)
{
	char output[PATH_MAX];
	struct tu_run *run;
	struct tu_proc *fixture;
	struct report report;
	char *done;
	static const char *const counted[] = {
		"malloc", "calloc", "realloc", "reallocarray", "posix_memalign",
		"valloc", "pvalloc", "free",
	};
	struct call aligned, memalign;

	temp_output("leak.txt", output, sizeof(output));
	fixture = traced_work("heap-leak", output, NULL, &run, &done);
	expect_tracing_line(run, fixture, "heap-leak", "libc.so.6");
	read_report(output, &report);

	for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++)
		expect_calls(&report, counted[i], done_count(done, counted[i]));
	/* glibc's aligned_alloc and memalign are one function at one
	 * address: one breakpoint, its calls counted under aligned_alloc,
	 * memalign marked as its alias.  */
	aligned = report_call(&report, "aligned_alloc");
	memalign = report_call(&report, "memalign");
	CHECK(aligned.found && aligned.counted && memalign.found,
	      "no aligned_alloc or memalign line with a count");
	CHECK(memalign.counted || strstr(memalign.note, "alias") != NULL,
	      "memalign has no count and is not said to be an alias (%s)",
	      memalign.note);
	CHECK(aligned.count + (memalign.counted ? memalign.count : 0)
	      == done_count(done, "aligned_alloc")
		 + done_count(done, "memalign"),
	      "aligned_alloc %llu + memalign %llu calls counted, the fixture "
	      "made %llu + %llu", aligned.count, memalign.count,
	      done_count(done, "aligned_alloc"), done_count(done, "memalign"));
	CHECK(strcmp(report_call(&report, "malloc").note, "libc.so.6") == 0,
	      "the malloc line does not say (libc.so.6)");

	CHECK(report.alloc_bytes == done_count(done, "alloc_bytes"),
	      "the report has %llu bytes allocated, the fixture asked for "
	      "%llu", report.alloc_bytes, done_count(done, "alloc_bytes"));
	CHECK(report.frees_tracked == done_count(done, "free"),
	      "%llu tracked frees, the fixture freed %llu blocks",
	      report.frees_tracked, done_count(done, "free"));
	CHECK(report.frees_untracked == 0 && report.frees_double == 0,
	      "%llu untracked and %llu double frees in a program that frees "
	      "only what it allocated after the tracer came, once",
	      report.frees_untracked, report.frees_double);
	CHECK(report.failed == 0, "%llu failed calls", report.failed);
	CHECK(report.peak_bytes == done_count(done, "peak_bytes"),
	      "peak live %llu bytes, the fixture's peak was %llu",
	      report.peak_bytes, done_count(done, "peak_bytes"));
	CHECK(report.live_count == done_count(done, "leaked_count")
	      && report.live_bytes == done_count(done, "leaked_bytes"),
	      "live at end %llu allocations, %llu bytes; the fixture leaked "
	      "%llu, %llu bytes", report.live_count, report.live_bytes,
	      done_count(done, "leaked_count"),
	      done_count(done, "leaked_bytes"));
	expect_identity(&report);
	expect_top_leak(&report, 3700, 37, "leak_here", "main");
	CHECK(find_line(report.text, "note          the target exited") == NULL,
	      "the report says the target exited; it was still running");
	finish_fixture(fixture, "ok");
	free_report(&report);
	free(done);
}
END_TEST

/* The target exits while traced: cprof-attach notices, restores, writes
 * the report with a note, and exits 0 on its own.  */
START_TEST(test_leak_target_exits)
{
	char output[PATH_MAX];
	struct tu_proc *fixture = start_fixture("heap-leak", NULL, NULL, NULL);
	struct tu_run *run;
	struct report report;
	char *done;

	temp_output("exits.txt", output, sizeof(output));
	run = attach_heap(fixture, output, NULL);
	say("go");
	done = wait_line(fixture, "done", WORK_TIMEOUT_MS);
	finish_fixture(fixture, "ok");
	expect_exit_ok(run, RUN_TIMEOUT_MS);
	read_report(output, &report);
	CHECK(find_line(report.text, "note          the target exited during "
			"tracing\n") != NULL,
	      "no \"note          the target exited during tracing\" line");
	expect_top_leak(&report, 3700, 37, "leak_here", "main");
	expect_calls(&report, "malloc", done_count(done, "malloc"));
	expect_identity(&report);
	free_report(&report);
	free(done);
}
END_TEST

/* --format folded --heap-metric live-bytes: the leak as one folded
 * stack, root first, leak_here its leaf, 3700 its count.  */
START_TEST(test_leak_folded)
{
	static const char *const extra[] = {
		"--format", "folded", "--heap-metric", "live-bytes", NULL,
	};
	char output[PATH_MAX];
	char error[256];
	struct tu_run *run;
	struct tu_proc *fixture;
	struct tu_profile *profile;
	char *done;
	char *text;

	temp_output("leak.folded", output, sizeof(output));
	fixture = traced_work("heap-leak", output, extra, &run, &done);
	text = tu_read_file(output);
	CHECK(text != NULL, "cprof-attach did not write %s", output);
	ctx.report = text;
	profile = tu_profile_parse(text, error, sizeof(error));
	CHECK(profile != NULL, "%s is not a folded profile: %s", output, error);
	CHECK(tu_profile_count_leaf(profile, "leak_here") == 3700,
	      "%" PRIu64 " live bytes in stacks ending in leak_here, expected "
	      "3700", tu_profile_count_leaf(profile, "leak_here"));
	CHECK(tu_profile_count_contiguous(profile,
					  TU_FRAMES("main", "leak_here"))
	      == 3700, "the leak's stack does not hold main;leak_here");
	CHECK(tu_profile_total(profile) == 3700,
	      "%" PRIu64 " live bytes in the profile, the fixture leaked only "
	      "3700", tu_profile_total(profile));
	finish_fixture(fixture, "ok");
	tu_profile_free(profile);
	ctx.report = NULL;
	free(text);
	free(done);
}
END_TEST

/* --format speedscope in heap mode (refused before issue 13: the data
 * fits): a sampled profile in bytes whose total is the live bytes at the
 * end, the leak's 3700, and whose frames name leak_here.  */
START_TEST(test_leak_speedscope)
{
	static const char *const extra[] = {
		"--format", "speedscope", "--heap-metric", "live-bytes", NULL,
	};
	char output[PATH_MAX];
	struct tu_run *run;
	struct tu_proc *fixture;
	char *done;
	char *text;

	temp_output("leak.speedscope.json", output, sizeof(output));
	fixture = traced_work("heap-leak", output, extra, &run, &done);
	text = tu_read_file(output);
	CHECK(text != NULL, "cprof-attach did not write %s", output);
	ctx.report = text;
	CHECK(strstr(text, "\"unit\":\"bytes\"") != NULL,
	      "the speedscope profile is not in bytes");
	CHECK(strstr(text, "\"endValue\":3700") != NULL,
	      "the speedscope profile does not weigh the 3700 bytes leaked");
	CHECK(strstr(text, "\"name\":\"leak_here\"") != NULL,
	      "no leak_here frame in the speedscope profile");
	finish_fixture(fixture, "ok");
	ctx.report = NULL;
	free(text);
	free(done);
}
END_TEST

/* -o x.pb.gz picks pprof: a gzip file that go tool pprof reads, with
 * leak_here in its alloc_space table (-nodefraction=0: the leak is 0.4 %
 * of the bytes allocated, below pprof's default cut).  */
START_TEST(test_leak_pprof)
{
	char output[PATH_MAX];
	char command[PATH_MAX + 256];
	unsigned char magic[2] = { 0, 0 };
	struct tu_run *run;
	struct tu_proc *fixture;
	char *done;
	FILE *file;
	char line[512];
	bool found = false;
	int status;

	temp_output("leak.pb.gz", output, sizeof(output));
	fixture = traced_work("heap-leak", output, NULL, &run, &done);
	finish_fixture(fixture, "ok");
	file = fopen(output, "rb");
	CHECK(file != NULL, "cprof-attach did not write %s", output);
	CHECK(fread(magic, 1, 2, file) == 2 && magic[0] == 0x1f
	      && magic[1] == 0x8b, "%s is not gzip (starts %02x %02x)", output,
	      magic[0], magic[1]);
	fclose(file);
	if (system("command -v go >/dev/null 2>&1") != 0) {
		fprintf(stderr, "test_leak_pprof: go not installed, "
			"go tool pprof part skipped\n");
		free(done);
		return;
	}
	snprintf(command, sizeof(command),
		 "HOME=\"${HOME:-/tmp}\" go tool pprof "
		 "-sample_index=alloc_space -nodefraction=0 -top '%s' 2>&1",
		 output);
	file = popen(command, "r");
	CHECK(file != NULL, "cannot run go tool pprof");
	fprintf(stderr, "test_leak_pprof: %s\n", command);
	while (fgets(line, sizeof(line), file) != NULL) {
		fputs(line, stderr);
		if (strstr(line, "leak_here") != NULL)
			found = true;
	}
	status = pclose(file);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "go tool pprof failed (status %#x) on %s", (unsigned)status,
	      output);
	CHECK(found, "go tool pprof -sample_index=alloc_space -top does not "
	      "list leak_here");
	free(done);
}
END_TEST

/* The same fixture with jemalloc ahead of libc: the breakpoints go into
 * libjemalloc.so.2 (and libc for what jemalloc lacks).  */
START_TEST(test_leak_jemalloc)
{
	char output[PATH_MAX];
	struct tu_run *run;
	struct tu_proc *fixture;
	struct report report;
	struct call malloc_call;
	char *done;

	temp_output("jemalloc.txt", output, sizeof(output));
	fixture = traced_work("heap-leak-jemalloc", output, NULL, &run, &done);
	expect_tracing_line(run, fixture, "heap-leak-jemalloc",
			    "libjemalloc.so.2, libc.so.6");
	read_report(output, &report);
	malloc_call = report_call(&report, "malloc");
	CHECK(malloc_call.found
	      && strcmp(malloc_call.note, "libjemalloc.so.2") == 0,
	      "the malloc line does not say (libjemalloc.so.2): (%s)",
	      malloc_call.note);
	expect_top_leak(&report, 3700, 37, "leak_here", "main");
	expect_identity(&report);
	finish_fixture(fixture, "ok");
	free_report(&report);
	free(done);
}
END_TEST

/* C++: new[] reaches malloc through operator new; the leak site names
 * the operator above leak_here.  */
START_TEST(test_cxx)
{
	char output[PATH_MAX];
	struct tu_run *run;
	struct tu_proc *fixture;
	struct report report;
	char *done;

	temp_output("cxx.txt", output, sizeof(output));
	fixture = traced_work("heap-cxx", output, NULL, &run, &done);
	read_report(output, &report);
	expect_top_leak(&report, 3700, 37, "leak_here", "main");
	CHECK(strncmp(report.live_sites[0].frames[0], "operator new", 12) == 0,
	      "leak site #1 begins with \"%s\", expected operator new",
	      report.live_sites[0].frames[0]);
	expect_calls(&report, "malloc", done_count(done, "malloc"));
	expect_calls(&report, "free", done_count(done, "free"));
	CHECK(report.alloc_bytes == done_count(done, "alloc_bytes"),
	      "the report has %llu bytes allocated, the fixture asked for "
	      "%llu", report.alloc_bytes, done_count(done, "alloc_bytes"));
	expect_identity(&report);
	finish_fixture(fixture, "ok");
	free_report(&report);
	free(done);
}
END_TEST

/* heap-stress THREADS OPS traced from its "go" to its exit: the fixture
 * still computes correctly ("ok TOTAL"), the accounting holds.  */
static struct tu_run *run_stress(const char *threads, const char *ops,
				 const char *ok_line,
				 const char *const extra[])
{
	char output[PATH_MAX];
	struct tu_proc *fixture = start_fixture("heap-stress", threads, ops,
						NULL);
	struct tu_run *run;
	struct report report;
	char *ok;

	temp_output("stress.txt", output, sizeof(output));
	run = attach_heap(fixture, output, extra);
	say("go");
	ok = wait_line(fixture, "ok", STRESS_TIMEOUT_MS);
	CHECK(strcmp(ok, ok_line) == 0, "heap-stress said \"%s\", expected "
	      "\"%s\"", ok, ok_line);
	CHECK(tu_proc_wait_exit(fixture, EXIT_TIMEOUT_MS),
	      "heap-stress did not exit after its \"ok\" line");
	CHECK(WIFEXITED(fixture->status) && WEXITSTATUS(fixture->status) == 0,
	      "heap-stress ended with wait status %#x, expected exit 0",
	      (unsigned)fixture->status);
	expect_exit_ok(run, RUN_TIMEOUT_MS);
	read_report(output, &report);
	expect_identity(&report);
	CHECK(report.allocations > 0, "no allocation seen");
	CHECK(report.frees_double == 0,
	      "%llu double frees reported in a program that has none",
	      report.frees_double);
	CHECK(report.failed == 0, "%llu failed calls", report.failed);
	CHECK(find_line(report.text, "note          the target exited during "
			"tracing\n") != NULL,
	      "no \"the target exited during tracing\" note");
	free_report(&report);
	free(ok);
	return run;
}

START_TEST(test_stress)
{
	run_stress("4", "100000", "ok 400000", NULL);
}
END_TEST

/* The fallback for displaced instructions: single-step with every thread
 * stopped, forced on every entry point.  */
START_TEST(test_stress_force_step)
{
	setenv("CPROF_HEAP_FORCE_STEP", "1", 1);
	run_stress("4", "3000", "ok 12000", NULL);
}
END_TEST

/* heap-fork fork|vfork: the child runs untraced and fine, the parent
 * stays traced after the fork.  */
static const char *const fork_modes[] = { "fork", "vfork" };

START_TEST(test_fork)
{
	const char *mode = fork_modes[_i];
	char output[PATH_MAX];
	char note[128];
	struct tu_proc *fixture = start_fixture("heap-fork", mode, NULL, NULL);
	struct tu_run *run;
	struct report report;
	const struct site *after = NULL;
	char *status_line;

	temp_output("fork.txt", output, sizeof(output));
	run = attach_heap(fixture, output, NULL);
	say("go");
	status_line = wait_line(fixture, "child-status ", WORK_TIMEOUT_MS);
	CHECK(strcmp(status_line, "child-status 0") == 0,
	      "heap-fork %s: \"%s\", expected \"child-status 0\" (5: the child "
	      "was killed by SIGTRAP)", mode, status_line);
	free(wait_line(fixture, "done", WORK_TIMEOUT_MS));
	end_run(run, SIGINT);
	read_report(output, &report);
	snprintf(note, sizeof(note), "note          %d fork and %d vfork "
		 "children ran untraced\n", _i == 0, _i == 1);
	CHECK(find_line(report.text, note) != NULL, "no line \"%.*s\"",
	      (int)strlen(note) - 1, note);
	for (size_t i = 0; i < report.live_site_count; i++)
		if (report.live_sites[i].depth > 0
		    && frame_is(report.live_sites[i].frames[0], "after_fork"))
			after = &report.live_sites[i];
	CHECK(after != NULL, "no leak site begins with after_fork: the parent "
	      "was not traced after the %s", mode);
	CHECK(after->bytes == 1000 && after->count == 5,
	      "after_fork has %llu bytes live in %llu allocations, expected "
	      "1000 in 5", after->bytes, after->count);
	CHECK(after->depth >= 2 && frame_is(after->frames[1], "main"),
	      "the frame below after_fork is not main");
	expect_identity(&report);
	finish_fixture(fixture, "ok");
	free_report(&report);
	free(status_line);
}
END_TEST

/* ----------------------------------------------- interruption safety */

/* After cprof-attach left, not one byte of a breakpoint may remain.  */
static void expect_code_restored(pid_t pid, unsigned round)
{
	char why[PATH_MAX + 256];

	CHECK(tu_code_matches_files(pid, why, sizeof(why)), "round %u: %s",
	      round, why);
}

/* heap-stress runs forever; cprof-attach comes and goes 20 times, ended
 * at a random moment by SIGINT, SIGTERM or its -d duration.  After each
 * run the target must be alive, untraced, with its code byte for byte
 * its files; at the end it must still compute correctly.  */
START_TEST(test_interrupt)
{
	static const char *const ways[] = { "SIGINT", "SIGTERM", "-d" };
	const unsigned rounds = 20;
	uint32_t rng = 0x9e3779b9u;
	struct tu_proc *fixture = start_fixture("heap-stress", "4", "0",
						"forever");
	const char *dir = tu_temp_dir();
	char *ok;

	CHECK(dir != NULL, "no temporary directory");
	say("go");
	for (unsigned round = 0; round < rounds; round++) {
		unsigned way = round % 3;
		unsigned delay_ms = tu_random(&rng) % 401;
		char output[PATH_MAX];
		char duration[32];
		const char *extra[3] = { NULL, NULL, NULL };
		struct tu_run *run;
		struct report report;
		char state;

		snprintf(output, sizeof(output), "%s/round-%u.txt", dir, round);
		if (way == 2) {
			/* -d must be positive: at least a millisecond.  */
			snprintf(duration, sizeof(duration), "%.3f",
				 (delay_ms ? delay_ms : 1) / 1000.0);
			extra[0] = "-d";
			extra[1] = duration;
		}
		fprintf(stderr, "test_interrupt: round %u: %s after %u ms\n",
			round, ways[way], delay_ms);
		run = attach_heap(fixture, output, extra);
		if (way == 2) {
			expect_exit_ok(run, RUN_TIMEOUT_MS);
		} else {
			tu_delay_ms((int)delay_ms);
			end_run(run, way == 0 ? SIGINT : SIGTERM);
		}
		read_report(output, &report);
		expect_identity(&report);
		CHECK(find_line(report.text, "note          the target exited")
		      == NULL, "round %u: the report says the target exited",
		      round);
		free_report(&report);
		state = tu_proc_state(fixture->pid);
		CHECK(state != 0 && state != 'Z' && state != 'X',
		      "round %u: heap-stress is gone (state '%c') after %s",
		      round, state ? state : '0', ways[way]);
		CHECK(tu_traced_tasks(fixture->pid) == 0,
		      "round %u: %d threads of heap-stress still traced", round,
		      tu_traced_tasks(fixture->pid));
		CHECK(!tu_proc_has_line_prefix(fixture, "FAIL"),
		      "round %u: heap-stress reported a failure", round);
		expect_code_restored(fixture->pid, round);
		ctx.run = NULL;
	}
	say("exit");
	ok = wait_line(fixture, "ok ", EXIT_TIMEOUT_MS);
	CHECK(strtoull(ok + 3, NULL, 10) > 0, "heap-stress did no work: %s",
	      ok);
	CHECK(tu_proc_wait_exit(fixture, EXIT_TIMEOUT_MS),
	      "heap-stress did not exit after \"exit\"");
	CHECK(WIFEXITED(fixture->status) && WEXITSTATUS(fixture->status) == 0,
	      "heap-stress ended with wait status %#x, expected exit 0",
	      (unsigned)fixture->status);
	free(ok);
}
END_TEST

/* --------------------------------------------------------- launch mode */

#define LAUNCH_TIMEOUT_MS 180000   /* a command run to its end, traced */
#define MEMCHECK_TIMEOUT_MS 180000 /* the same under valgrind */

/* cprof-attach --heap -q -o OUTPUT -- ARGV...: the command is run to its
 * end, and cprof-attach exits with its status, 0.  */
static struct tu_run *launch_heap_with(const char *output,
				       const char *const extra[],
				       const char *const argv[])
{
	const char *args[48];
	size_t argc = 0;
	struct tu_run *run;

	args[argc++] = "--heap";
	args[argc++] = "-q";
	for (size_t i = 0; extra != NULL && extra[i] != NULL && argc < 8; i++)
		args[argc++] = extra[i];
	args[argc++] = "-o";
	args[argc++] = output;
	args[argc++] = "--";
	for (size_t i = 0; argv[i] != NULL && argc < 39; i++)
		args[argc++] = argv[i];
	args[argc] = NULL;
	run = tu_cprof_startv(args);
	CHECK(run != NULL, "cprof-attach could not be started");
	ctx.run = run;
	expect_exit_ok(run, LAUNCH_TIMEOUT_MS);
	return run;
}

static struct tu_run *launch_heap(const char *output,
				  const char *const argv[])
{
	return launch_heap_with(output, NULL, argv);
}

/* The line of TEXT that starts with PREFIX, copied (the caller frees it),
 * or NULL.  */
static char *line_copy(const char *text, const char *prefix)
{
	const char *line = find_line(text, prefix);

	if (line == NULL)
		return NULL;
	return strndup(line, strcspn(line, "\n"));
}

/* Launch mode and a library constructor that allocates (libheap-ctor.so,
 * as libstdc++ mallocs its emergency pool): the breakpoints are in before
 * the first constructor runs, so every count of the report equals the
 * fixture's, the constructor's 4 allocations included (cprof-attach set
 * them at the program's entry point, after the constructors, and counted
 * 13 of 17 allocations).  */
static void launch_ctor(void)
{
	char output[PATH_MAX];
	char program[PATH_MAX];
	const char *argv[2] = { program, NULL };
	struct tu_run *run;
	struct report report;
	char *done;

	temp_output("ctor.txt", output, sizeof(output));
	snprintf(program, sizeof(program), "%s/fixtures/heap-ctor",
		 CP_BUILD_DIR);
	run = launch_heap(output, argv);
	done = line_copy(run->out, "done ");
	CHECK(done != NULL, "heap-ctor printed no \"done\" line");
	read_report(output, &report);
	CHECK(report.allocations == done_count(done, "allocations")
	      && report.alloc_bytes == done_count(done, "alloc_bytes"),
	      "%llu allocations (%llu bytes) counted, the program made %llu "
	      "(%llu bytes), %llu of them in a library constructor before its "
	      "entry point", report.allocations, report.alloc_bytes,
	      done_count(done, "allocations"), done_count(done, "alloc_bytes"),
	      done_count(done, "ctor_allocations"));
	CHECK(report.frees_tracked == done_count(done, "frees")
	      && report.realloc_releases == done_count(done,
						       "realloc_releases"),
	      "%llu tracked frees and %llu realloc releases, the program made "
	      "%llu and %llu", report.frees_tracked, report.realloc_releases,
	      done_count(done, "frees"), done_count(done, "realloc_releases"));
	CHECK(report.live_count == done_count(done, "live_count")
	      && report.live_bytes == done_count(done, "live_bytes"),
	      "live at end %llu allocations, %llu bytes; the program kept %llu, "
	      "%llu bytes", report.live_count, report.live_bytes,
	      done_count(done, "live_count"), done_count(done, "live_bytes"));
	CHECK(report.frees_untracked == 0,
	      "%llu untracked frees in a program traced from its start",
	      report.frees_untracked);
	expect_identity(&report);
	CHECK(report.live_site_count > 0 && report.live_sites[0].bytes == 33000
	      && report.live_sites[0].count == 1,
	      "the first leak site is not the constructor's 33000-byte pool");
	free_report(&report);
	free(done);
}

START_TEST(test_launch_ctor)
{
	launch_ctor();
}
END_TEST

/* The same with every breakpoint stepped instead of emulated, the
 * loader's before tracing begins included (its steps were dropped while
 * tracing had not begun: the thread met the same int3 again and again,
 * and heap-ctor never got past its dynamic linker).  */
START_TEST(test_launch_ctor_force_step)
{
	setenv("CPROF_HEAP_FORCE_STEP", "1", 1);
	launch_ctor();
}
END_TEST

/* The report's timeline: the highest value of its sparkline ("max N
 * bytes") into *SPARK_MAX and of its table's rows into *ROWS_MAX; the
 * number of rows.  */
static size_t timeline_maxima(const char *text,
			      unsigned long long *spark_max,
			      unsigned long long *rows_max)
{
	const char *line = find_line(text, "live bytes over time");
	const char *max;
	size_t rows = 0;

	CHECK(line != NULL, "no \"live bytes over time\" in the report");
	line = strchr(line, '\n') + 1;
	max = strstr(line, "|  max ");
	CHECK(max != NULL && max < strchr(line, '\n')
	      && sscanf(max, "|  max %llu bytes", spark_max) == 1,
	      "no \"|  max N bytes\" after the sparkline");
	line = strchr(line, '\n') + 1;       /* the table's header */
	*rows_max = 0;
	for (line = strchr(line, '\n'); line != NULL && line[1] != '\n'
	     && line[1] != '\0'; line = strchr(line + 1, '\n')) {
		double t;
		unsigned long long bytes, count;

		if (sscanf(line + 1, "%lf %llu %llu", &t, &bytes, &count) != 3)
			break;
		rows++;
		if (bytes > *rows_max)
			*rows_max = bytes;
	}
	return rows;
}

/* heap-peak, three times: a 1 MiB block lives for one malloc/free pair
 * among 4000 calls.  The timeline holds the peak exactly, in its
 * sparkline and in its table (sampled every 100 ms it showed about
 * 60,000 bytes at most: the peak fell between samples); the temporary
 * allocations are the same number on every run, heaptrack's (once 4001
 * or so: "freed within 1 ms" counted whatever the machine was fast
 * enough for).  */
START_TEST(test_launch_peak)
{
	char output[PATH_MAX];
	char program[PATH_MAX];
	const char *argv[2] = { program, NULL };

	snprintf(program, sizeof(program), "%s/fixtures/heap-peak",
		 CP_BUILD_DIR);
	for (int round = 0; round < 3; round++) {
		struct tu_run *run;
		struct report report;
		unsigned long long temporary = 0, spark_max = 0, rows_max = 0;
		char *done;
		size_t rows;

		temp_output("peak.txt", output, sizeof(output));
		run = launch_heap(output, argv);
		done = line_copy(run->out, "done ");
		CHECK(done != NULL, "heap-peak printed no \"done\" line");
		read_report(output, &report);
		CHECK(report.allocations == done_count(done, "allocations"),
		      "round %d: %llu allocations counted, heap-peak made %llu",
		      round, report.allocations,
		      done_count(done, "allocations"));
		CHECK(report.peak_bytes == done_count(done, "peak_bytes"),
		      "round %d: peak live %llu bytes, heap-peak's was %llu",
		      round, report.peak_bytes, done_count(done, "peak_bytes"));
		rows = timeline_maxima(report.text, &spark_max, &rows_max);
		CHECK(spark_max == report.peak_bytes
		      && rows_max == report.peak_bytes,
		      "round %d: the timeline's highest point is %llu bytes in "
		      "the sparkline and %llu in its %zu rows; the peak was "
		      "%llu", round, spark_max, rows_max, rows,
		      report.peak_bytes);
		CHECK(scan_line(report.text, "temporary     ", "%llu",
				&temporary) == 1,
		      "no \"temporary     N\" line");
		CHECK(temporary == done_count(done, "temporary"),
		      "round %d: %llu temporary allocations, heap-peak made %llu "
		      "(released by their thread's next allocator call)", round,
		      temporary, done_count(done, "temporary"));
		free_report(&report);
		free(done);
	}
}
END_TEST

/* heap-short, a three-line program that is gone in a moment, traced 20
 * times from its start with two busy loops beside it (as many as the
 * machine has CPUs, here): every stack is named, main;short_leak, 8
 * allocations.  Its stacks are named after it exited (the symbolizer
 * works beside the tracer, and after the detach): from the mappings
 * captured while it lived.  Before, 15 of 20 runs under load named no
 * frame at all.  */
START_TEST(test_launch_short_names)
{
	static const char *const extra[] = { "--format", "folded",
					     "--heap-metric", "alloc-count",
					     NULL };
	char output[PATH_MAX];
	char program[PATH_MAX];
	unsigned named = 0;

	snprintf(program, sizeof(program), "%s/fixtures/heap-short",
		 CP_BUILD_DIR);
	for (int i = 0; i < 2; i++)
		CHECK(tu_fixture_start("chain-O0", "600", NULL) != NULL,
		      "no busy loop");
	for (int round = 0; round < 20; round++) {
		const char *args[12];
		size_t argc = 0;
		struct tu_run *run;
		struct tu_profile *profile;
		char error[256];
		char *text;

		temp_output("short.folded", output, sizeof(output));
		args[argc++] = "--heap";
		args[argc++] = "-q";
		for (size_t i = 0; extra[i] != NULL; i++)
			args[argc++] = extra[i];
		args[argc++] = "-o";
		args[argc++] = output;
		args[argc++] = "--";
		args[argc++] = program;
		args[argc] = NULL;
		run = tu_cprof_startv(args);
		CHECK(run != NULL, "cprof-attach could not be started");
		ctx.run = run;
		expect_exit_ok(run, LAUNCH_TIMEOUT_MS);
		text = tu_read_file(output);
		CHECK(text != NULL, "cprof-attach did not write %s", output);
		ctx.report = text;
		profile = tu_profile_parse(text, error, sizeof(error));
		CHECK(profile != NULL, "%s is not a folded profile: %s", output,
		      error);
		CHECK(tu_profile_total(profile) == 8,
		      "round %d: %" PRIu64 " allocations, heap-short made 8",
		      round, tu_profile_total(profile));
		CHECK(strstr(text, "[unknown]") == NULL
		      && tu_profile_count_contiguous(profile,
						     TU_FRAMES("main",
							       "short_leak"))
			 == 8,
		      "round %d (%u named before): the stacks of heap-short's "
		      "8 allocations are not all main;short_leak", round,
		      named);
		named++;
		tu_profile_free(profile);
		ctx.report = NULL;
		free(text);
	}
}
END_TEST

/* heap-short linked -static and -static-pie: no dynamic linker, the
 * breakpoints go in at the entry point (glibc's own start-up allocations
 * come before main and are counted too).  In a static-pie glibc's malloc
 * is a local symbol: "no allocator entry points found" before.  */
static const char *const static_builds[] = { "heap-short-static",
					     "heap-short-spie" };

START_TEST(test_launch_static)
{
	static const char *const extra[] = { "--format", "folded",
					     "--heap-metric", "alloc-count",
					     NULL };
	char output[PATH_MAX];
	char program[PATH_MAX];
	const char *args[12];
	size_t argc = 0;
	struct tu_run *run;
	struct tu_profile *profile;
	char error[256];
	char *text;

	snprintf(program, sizeof(program), "%s/fixtures/%s", CP_BUILD_DIR,
		 static_builds[_i]);
	temp_output("static.folded", output, sizeof(output));
	args[argc++] = "--heap";
	for (size_t i = 0; extra[i] != NULL; i++)
		args[argc++] = extra[i];
	args[argc++] = "-o";
	args[argc++] = output;
	args[argc++] = "--";
	args[argc++] = program;
	args[argc] = NULL;
	run = tu_cprof_startv(args);
	CHECK(run != NULL, "cprof-attach could not be started");
	ctx.run = run;
	expect_exit_ok(run, LAUNCH_TIMEOUT_MS);
	text = tu_read_file(output);
	CHECK(text != NULL, "cprof-attach did not write %s", output);
	ctx.report = text;
	profile = tu_profile_parse(text, error, sizeof(error));
	CHECK(profile != NULL, "%s is not a folded profile: %s", output,
	      error);
	CHECK(tu_profile_count_contiguous(profile,
					  TU_FRAMES("main", "short_leak")) == 8,
	      "%s: the 8 allocations of short_leak are not main;short_leak",
	      static_builds[_i]);
	tu_profile_free(profile);
	ctx.report = NULL;
	free(text);
}
END_TEST

/* What memcheck counted: "total heap usage: A allocs, F frees, B bytes
 * allocated".  */
struct totals {
	unsigned long long allocs, frees, bytes;
};

/* Run COMMAND (a shell command line) under valgrind's memcheck and read
 * its totals for the process it started (a fork child reports its own).
 * --run-libc-freeres=no --run-cxx-freeres=no: valgrind's own calls of
 * glibc's and libstdc++'s clean-up functions at exit free blocks the
 * program never frees.  */
static void memcheck_totals(const char *command, struct totals *totals)
{
	char shell[PATH_MAX + 512];
	char line[1024];
	long first_pid = -1;
	bool found = false;
	FILE *pipe;
	int status;

	snprintf(shell, sizeof(shell),
		 "exec valgrind --tool=memcheck --run-libc-freeres=no "
		 "--run-cxx-freeres=no %s 2>&1 >/dev/null", command);
	pipe = popen(shell, "r");
	CHECK(pipe != NULL, "cannot run valgrind");
	while (fgets(line, sizeof(line), pipe) != NULL) {
		long pid;
		const char *usage = strstr(line, "total heap usage: ");
		char digits[256];
		size_t n = 0;

		if (sscanf(line, "==%ld==", &pid) != 1)
			continue;
		if (first_pid < 0)
			first_pid = pid;
		if (usage == NULL || pid != first_pid)
			continue;
		for (const char *p = usage + 18; *p && n + 1 < sizeof(digits);
		     p++)
			if (*p != ',')
				digits[n++] = *p;
		digits[n] = '\0';
		found = sscanf(digits, "%llu allocs %llu frees %llu bytes",
			       &totals->allocs, &totals->frees,
			       &totals->bytes) == 3;
	}
	status = pclose(pipe);
	CHECK(found, "no \"total heap usage\" line from valgrind for %s "
	      "(status %#x)", command, (unsigned)status);
}

/* Make our environment the one valgrind gives the programs it runs (ours
 * and what it adds: LD_PRELOAD of its preload libraries,
 * GLIBCXX_FORCE_NEW, GLIBCPP_FORCE_NEW, and from Debian's wrapper script
 * LD_LIBRARY_PATH), so that a program that copies its environment
 * (bash, make) allocates the same under cprof-attach.  LD_PRELOAD is
 * renamed LD_PRELOAX (as long, so the same bytes are copied): its
 * libraries are valgrind's and run only under it.  The test runs in its
 * own process (Check's fork mode), so nothing else sees the change.  */
static void take_memcheck_environment(void)
{
	FILE *pipe = popen("exec valgrind -q --tool=memcheck "
			   "--run-libc-freeres=no /usr/bin/env -0", "r");
	static char text[65536];
	size_t len;

	CHECK(pipe != NULL, "cannot run valgrind");
	len = fread(text, 1, sizeof(text) - 1, pipe);
	pclose(pipe);
	CHECK(len > 0 && len < sizeof(text) - 1 && text[len - 1] == '\0',
	      "valgrind env -0 printed %zu bytes", len);
	CHECK(memmem(text, len, "LD_PRELOAD=", 11) != NULL,
	      "no LD_PRELOAD in valgrind's environment");
	CHECK(clearenv() == 0, "clearenv failed");
	for (size_t at = 0; at < len; at += strlen(text + at) + 1) {
		char *entry = text + at;

		if (strncmp(entry, "LD_PRELOAD=", 11) == 0)
			entry[9] = 'X';
		CHECK(putenv(entry) == 0, "putenv %s", entry);
	}
}

/* N in "cprof-attach: T tracer threads; N new threads handed to another
 * at birth" of RUN's stderr (-v), after checking T is TRACERS.  */
static unsigned long long tracers_line(const struct tu_run *run,
				       unsigned tracers)
{
	const char *line = strstr(run->err, "tracer thread");
	unsigned t = 0;
	unsigned long long moved = 0;

	CHECK(line != NULL, "no \"tracer threads\" line with -v");
	while (line > run->err && line[-1] != '\n')
		line--;
	CHECK(sscanf(line, "cprof-attach: %u tracer thread%*[s;] %llu new",
		     &t, &moved) == 2,
	      "cannot read the tracer threads line: %.120s", line);
	CHECK(t == tracers, "%u tracer threads, expected %u", t, tracers);
	return moved;
}

/* Several tracer threads, whatever the machine's CPUs: heap-threads
 * launched, its eight workers born while traced and handed to the other
 * tracer threads at birth, counts exactly those of one tracer thread
 * (the program is deterministic in counts and bytes), the same result
 * printed by the program.  */
START_TEST(test_tracers_launch)
{
	char fixture_path[PATH_MAX];
	char output[2][PATH_MAX];
	const char *const counts[] = { "1", "3" };
	struct report report[2];
	char *ok[2];

	snprintf(fixture_path, sizeof(fixture_path), "%s/fixtures/heap-threads",
		 CP_BUILD_DIR);
	const char *const argv[] = { fixture_path, "8", "300", NULL };
	for (int i = 0; i < 2; i++) {
		const char *const extra[] = { "-v", "--heap-tracers",
					      counts[i], NULL };
		struct tu_run *run;

		temp_output(i ? "three.txt" : "one.txt", output[i],
			    sizeof(output[i]));
		run = launch_heap_with(output[i], extra, argv);
		unsigned long long moved = tracers_line(run, i ? 3 : 1);
		if (i)
			CHECK(moved >= 2, "%llu of 8 new threads handed to "
			      "another tracer thread", moved);
		else
			CHECK(moved == 0, "%llu threads moved with one tracer",
			      moved);
		ok[i] = line_copy(run->out, "ok ");
		CHECK(ok[i] != NULL, "heap-threads said no \"ok\" line");
		read_report(output[i], &report[i]);
		expect_identity(&report[i]);
	}
	CHECK(strcmp(ok[0], ok[1]) == 0, "heap-threads said \"%s\" traced by "
	      "one tracer thread, \"%s\" by three", ok[0], ok[1]);
	CHECK(report[0].allocations == report[1].allocations &&
	      report[0].alloc_bytes == report[1].alloc_bytes &&
	      report[0].frees_tracked == report[1].frees_tracked &&
	      report[0].realloc_releases == report[1].realloc_releases &&
	      report[0].live_count == report[1].live_count,
	      "one tracer thread: %llu allocations (%llu bytes), %llu + %llu "
	      "frees, %llu live; three: %llu (%llu bytes), %llu + %llu, %llu",
	      report[0].allocations, report[0].alloc_bytes,
	      report[0].frees_tracked, report[0].realloc_releases,
	      report[0].live_count, report[1].allocations,
	      report[1].alloc_bytes, report[1].frees_tracked,
	      report[1].realloc_releases, report[1].live_count);
	for (int i = 0; i < 2; i++) {
		free_report(&report[i]);
		free(ok[i]);
	}
}
END_TEST

/* The uprobe method (--heap-method uprobes): heap-pairs launched (its
 * main thread probed before its libraries' constructors run) counts
 * exactly what the traps count, no record lost, the same sites, and the
 * program's own result unchanged.  One allocating thread: with several
 * beside it on two CPUs the method still loses records (heap.h).  A
 * kernel without the uprobe PMU is said and passes: there is nothing to
 * compare.  */
START_TEST(test_uprobes_launch)
{
	char fixture_path[PATH_MAX];
	char output[2][PATH_MAX];
	const char *const methods[] = { "traps", "uprobes" };
	struct report report[2];
	char *ok[2];

	if (access("/sys/bus/event_source/devices/uprobe/type", R_OK) != 0) {
		fprintf(stderr, "uprobes_launch: no uprobe PMU here\n");
		return;
	}
	snprintf(fixture_path, sizeof(fixture_path), "%s/fixtures/heap-pairs",
		 CP_BUILD_DIR);
	const char *const argv[] = { fixture_path, "3000", "10", NULL };
	for (int i = 0; i < 2; i++) {
		const char *const extra[] = { "-v", "--heap-tracers", "1",
					      "--heap-method", methods[i], NULL };
		struct tu_run *run;

		temp_output(i ? "uprobes.txt" : "traps.txt", output[i],
			    sizeof(output[i]));
		run = launch_heap_with(output[i], extra, argv);
		const char *line = strstr(run->err, "the kernel's uprobes:");
		if (i) {
			CHECK(line != NULL, "no uprobes line with -v: %.300s",
			      run->err);
			CHECK(strstr(line, " 0 records lost") != NULL &&
			      strstr(line, " 0 threads not probed") != NULL,
			      "uprobes: %.200s", line);
		} else {
			CHECK(line == NULL, "traps said uprobes: %.200s", line);
		}
		ok[i] = line_copy(run->out, "ok ");
		CHECK(ok[i] != NULL, "heap-pairs said no \"ok\" line");
		read_report(output[i], &report[i]);
		expect_identity(&report[i]);
		CHECK(report[i].allocations >= 3000 &&
		      report[i].frees_tracked >= 3000,
		      "%s: %llu allocations, %llu frees of heap-pairs' 3000 "
		      "pairs", methods[i], report[i].allocations,
		      report[i].frees_tracked);
	}
	CHECK(strcmp(ok[0], ok[1]) == 0, "heap-pairs said \"%s\" traced by "
	      "traps, \"%s\" by uprobes", ok[0], ok[1]);
	CHECK(report[0].allocations == report[1].allocations &&
	      report[0].alloc_bytes == report[1].alloc_bytes &&
	      report[0].frees_tracked == report[1].frees_tracked &&
	      report[0].realloc_releases == report[1].realloc_releases &&
	      report[0].live_count == report[1].live_count &&
	      report[0].live_bytes == report[1].live_bytes,
	      "traps: %llu allocations (%llu bytes), %llu + %llu frees, %llu "
	      "live (%llu bytes); uprobes: %llu (%llu bytes), %llu + %llu, "
	      "%llu (%llu)",
	      report[0].allocations, report[0].alloc_bytes,
	      report[0].frees_tracked, report[0].realloc_releases,
	      report[0].live_count, report[0].live_bytes,
	      report[1].allocations, report[1].alloc_bytes,
	      report[1].frees_tracked, report[1].realloc_releases,
	      report[1].live_count, report[1].live_bytes);
	CHECK(report[1].alloc_site_count == report[0].alloc_site_count,
	      "allocation sites: %zu by traps, %zu by uprobes",
	      report[0].alloc_site_count, report[1].alloc_site_count);
	CHECK(strstr(report[1].text, "pairs_leaf") != NULL,
	      "no pairs_leaf in the uprobes report:\n%s", report[1].text);
	for (int i = 0; i < 2; i++) {
		free_report(&report[i]);
		free(ok[i]);
	}
}
END_TEST

/* Several tracer threads on a program attached to: its four threads,
 * present, are shared out before a breakpoint is in; it computes
 * correctly while traced and after.  */
START_TEST(test_tracers_attach)
{
	const char *const extra[] = { "-v", "--heap-tracers", "3", NULL };
	struct tu_run *run = run_stress("4", "30000", "ok 120000", extra);

	tracers_line(run, 3);
}
END_TEST

/* A thread other than the leader calls execve while a tracer thread other
 * than the main one traces it (execloop's odd generations exec from their
 * helper thread, shared out to another tracer thread at attach): tracing
 * stops there and says so, cprof-attach exits 0, and the program goes on
 * untraced through its generations to its end.  */
START_TEST(test_tracers_exec)
{
	const char *const extra[] = { "-v", "--heap-tracers", "3", NULL };
	char output[PATH_MAX];
	char task_dir[64];
	struct tu_proc *fixture = tu_fixture_start_stdin(&fixture_stdin,
							 "execloop", "3",
							 "1500", NULL);
	size_t threads = 0;

	CHECK(fixture != NULL, "execloop could not be started");
	ctx.fixture = fixture;
	snprintf(task_dir, sizeof(task_dir), "/proc/%d/task", (int)fixture->pid);
	for (int tries = 0; tries < 500 && threads < 2; tries++) {
		DIR *dir = opendir(task_dir);
		struct dirent *de;

		threads = 0;
		while (dir != NULL && (de = readdir(dir)) != NULL)
			threads += de->d_name[0] != '.';
		if (dir != NULL)
			closedir(dir);
		if (threads < 2)
			tu_delay_ms(2);
	}
	CHECK(threads == 2, "execloop has %zu threads, expected its helper too",
	      threads);
	temp_output("exec.txt", output, sizeof(output));
	struct tu_run *run = attach_heap(fixture, output, extra);
	expect_exit_ok(run, WORK_TIMEOUT_MS);
	CHECK(strstr(run->err, "called execve: heap tracing stopped there")
	      != NULL, "cprof-attach did not say the target called execve");
	tracers_line(run, 3);
	CHECK(tu_proc_wait_exit(fixture, WORK_TIMEOUT_MS),
	      "execloop did not run to its end after the detach");
	CHECK(WIFEXITED(fixture->status) && WEXITSTATUS(fixture->status) == 0,
	      "execloop ended with wait status %#x, expected exit 0",
	      (unsigned)fixture->status);
	CHECK(tu_proc_has_line_prefix(fixture, "ok "),
	      "execloop did not print its \"ok\" line: %s", fixture->output);
}
END_TEST

/* Programs of different shapes, each traced by cprof-attach --heap from
 * its start and run under memcheck: allocations, frees and bytes equal.
 * heap-ctor: C, a library constructor that allocates; heap-stl: C++ and
 * the STL, libstdc++'s emergency pool and static constructors;
 * heap-threads: four threads; bash and make, real programs (once said to
 * be 28-32 allocations short of memcheck: the difference was the
 * environment variables valgrind adds, which they copy).  memcheck counts
 * a realloc that moves a block as one allocation and one free; cprof-attach
 * calls that free a realloc release.  */
static const char *const memcheck_programs[][6] = {
	{ "fixture", "heap-ctor", NULL },
	{ "fixture", "heap-stl", NULL },
	{ "fixture", "heap-threads", "4", "500", NULL },
	{ "bash", "-c", "for i in 1 2 3; do x=\"$x$i\"; done; "
			"case $x in 123) exit 0;; esac; exit 1", NULL },
	{ "make", "-s", NULL },
};

START_TEST(test_memcheck)
{
	const char *const *program = memcheck_programs[_i];
	char output[PATH_MAX];
	char fixture_path[PATH_MAX];
	char command[PATH_MAX + 256];
	const char *argv[8];
	size_t argc = 0, len = 0;
	struct totals memcheck;
	struct report report;

	if (system("command -v valgrind >/dev/null 2>&1") != 0) {
		fprintf(stderr, "test_memcheck: valgrind not installed "
			"(make deps), skipped\n");
		return;
	}
	temp_output("memcheck.txt", output, sizeof(output));
	if (strcmp(program[0], "fixture") == 0) {
		snprintf(fixture_path, sizeof(fixture_path), "%s/fixtures/%s",
			 CP_BUILD_DIR, program[1]);
		argv[argc++] = fixture_path;
		program += 2;
	}
	for (; *program != NULL; program++)
		argv[argc++] = *program;
	argv[argc] = NULL;
	if (strcmp(argv[0], "make") == 0) {
		/* make reads the directory it runs in: one Makefile alone.  */
		const char *dir = tu_temp_dir();
		char makefile[PATH_MAX];
		FILE *file;

		CHECK(dir != NULL, "no temporary directory");
		snprintf(makefile, sizeof(makefile), "%s/Makefile", dir);
		file = fopen(makefile, "w");
		CHECK(file != NULL, "cannot write %s", makefile);
		fputs("all:\n\t@true\n", file);
		fclose(file);
		CHECK(chdir(dir) == 0, "cannot chdir to %s", dir);
	}
	for (size_t i = 0; i < argc; i++)
		len += (size_t)snprintf(command + len, sizeof(command) - len,
					"%s'%s'", i ? " " : "", argv[i]);
	memcheck_totals(command, &memcheck);
	take_memcheck_environment();
	launch_heap(output, argv);
	read_report(output, &report);
	fprintf(stderr, "test_memcheck: %s: memcheck %llu allocs, %llu frees, "
		"%llu bytes; cprof-attach %llu, %llu + %llu, %llu\n", argv[0],
		memcheck.allocs, memcheck.frees, memcheck.bytes,
		report.allocations, report.frees_tracked,
		report.realloc_releases, report.alloc_bytes);
	/* bash keeps its parent's pid and its own as strings (PPID, $$):
	 * the two runs' pids may differ in their number of digits (pid_max
	 * 32768 wraps; 9999 to 10000), a byte or two, seen both ways.  */
	unsigned long long slack =
		strcmp(argv[0], "bash") == 0 ? 4 : 0;
	unsigned long long apart = report.alloc_bytes > memcheck.bytes
		? report.alloc_bytes - memcheck.bytes
		: memcheck.bytes - report.alloc_bytes;
	CHECK(report.allocations == memcheck.allocs && apart <= slack,
	      "%s: %llu allocations (%llu bytes) counted, memcheck counted %llu "
	      "(%llu bytes)", command, report.allocations, report.alloc_bytes,
	      memcheck.allocs, memcheck.bytes);
	CHECK(report.frees_tracked + report.realloc_releases == memcheck.frees,
	      "%s: %llu frees and %llu realloc releases counted, memcheck "
	      "counted %llu frees", command, report.frees_tracked,
	      report.realloc_releases, memcheck.frees);
	expect_identity(&report);
	free_report(&report);
}
END_TEST

/* -------------------------------------------------------------- errors */

/* Check that RUN failed with EXIT_CODE and one line on stderr starting
 * with "cprof-attach: ", and printed nothing on stdout.  */
static void expect_error(struct tu_run *run, int exit_code)
{
	ctx.run = run;
	CHECK(!run->timed_out, "cprof-attach did not finish in time");
	CHECK(tu_run_exit_code(run) == exit_code,
	      "cprof-attach exited with %d, expected %d",
	      tu_run_exit_code(run), exit_code);
	CHECK(strncmp(run->err, "cprof-attach: ", 14) == 0,
	      "the error message does not start with \"cprof-attach: \"");
	CHECK(tu_count_lines(run->err) == 1,
	      "the error message is %zu lines, expected one",
	      tu_count_lines(run->err));
	CHECK(run->out[0] == '\0',
	      "cprof-attach printed on stdout although it failed");
}

/* Options that do not go with --heap, or bad values: exit 2 before
 * touching the target.  */
static const char *const bad_usage[][3] = {
	{ "--wall", NULL, NULL },
	{ "--heap-metric", "bogus", NULL },
	{ "--top", "0", NULL },
};

START_TEST(test_bad_usage)
{
	const char *const *option = bad_usage[_i];
	struct tu_proc *fixture = start_fixture("heap-leak", NULL, NULL, NULL);
	const char *args[6];
	size_t argc = 0;
	struct tu_run *run;

	args[argc++] = "--heap";
	args[argc++] = option[0];
	if (option[1] != NULL)
		args[argc++] = option[1];
	args[argc++] = fixture->pid_text;
	args[argc] = NULL;
	run = tu_cprof_startv(args);
	CHECK(run != NULL, "cprof-attach could not be started");
	tu_run_wait(run, RUN_TIMEOUT_MS);
	expect_error(run, 2);
	CHECK(tu_traced_tasks(fixture->pid) == 0,
	      "the fixture is traced after a usage error");
	/* Untouched: it still does its work when told.  */
	say("go");
	free(wait_line(fixture, "done", WORK_TIMEOUT_MS));
	finish_fixture(fixture, "ok");
}
END_TEST

/* A PID that does not exist: exit 2, as without --heap, and no output
 * file.  */
START_TEST(test_no_such_process)
{
	char output[PATH_MAX];
	char reaped[16];
	char **names;
	const char *dir = tu_temp_dir();

	CHECK(dir != NULL, "no temporary directory");
	snprintf(output, sizeof(output), "%s/none.txt", dir);
	expect_error(tu_cprof_run(RUN_TIMEOUT_MS, "--heap", "-o", output,
				  "4194304", NULL), 2);
	snprintf(reaped, sizeof(reaped), "%d", (int)tu_reaped_pid());
	expect_error(tu_cprof_run(RUN_TIMEOUT_MS, "--heap", "-o", output,
				  reaped, NULL), 2);
	CHECK(tu_dir_entries(dir, &names) == 0, "%s is not empty after a "
	      "failed run: %s", dir, names && names[0] ? names[0] : "?");
	tu_free_names(names);
}
END_TEST

/* ------------------------------------------ on and off, one attachment */

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The function of the innermost frame of PROFILE's stack STACK, or "".  */
static const char *innermost_function(const struct cp_profile *profile,
				      uint32_t stack)
{
	size_t n = 0;
	const uint32_t *locs = cp_profile_stack(profile, stack, &n);
	const struct cp_location *loc;

	if (n == 0)
		return "";
	loc = cp_profile_location(profile, locs[0]);
	if (loc == NULL || loc->nlines == 0)
		return "";
	return cp_profile_string(profile, loc->lines[0].function);
}

/* Events seen by a heap window's on_event, by kind.  */
struct event_counts {
	unsigned long long kind[3];
	unsigned long long bytes; /* of the allocations that succeeded */
};

static void count_event(void *arg, const struct cp_heap_event *event)
{
	struct event_counts *counts = arg;

	if ((unsigned)event->kind < 3)
		counts->kind[event->kind]++;
	if (event->kind != CP_HEAP_EV_FREE && event->addr != 0)
		counts->bytes += event->size;
}

/* One heap window on the attached TARGET: start tracing, have the
 * heap-leak windows fixture run COMMAND (its NUMBER-th), trace until it
 * says "done", finish; then every count of the window is the fixture's,
 * the site of the most allocations is in FUNCTION, and the code is back
 * as in its files while the target stays attached.  */
static void heap_window(struct cp_target *target, struct cp_unwinder *unwinder,
			struct cp_symbols *symbols, struct tu_proc *fixture,
			const char *command, unsigned number,
			const char *function)
{
	struct event_counts events = { { 0 }, 0 };
	struct cp_heap_options options = {
		.max_depth = 64, .on_event = count_event,
		.on_event_arg = &events,
	};
	struct cp_profile *profile = cp_profile_new();
	struct cp_heap *heap = NULL;
	const struct cp_heap_summary *s;
	char prefix[32];
	char why[256];
	char *done;
	uint64_t limit = monotonic_ns() + WORK_TIMEOUT_MS * 1000000ull;
	size_t top = 0;
	int rc;

	ck_assert_ptr_nonnull(profile);
	rc = cp_heap_start(target, unwinder, symbols, profile, &options,
			   &heap);
	CHECK(rc == 0, "cp_heap_start: %s", cp_strerror(-rc));
	ck_assert_uint_gt(cp_heap_breakpoints(heap, NULL), 0);
	say(command);
	snprintf(prefix, sizeof(prefix), "done n=%u ", number);
	while (!tu_proc_wait_line_prefix(fixture, prefix, 1)) {
		enum cp_heap_end end = CP_HEAP_EXITED;

		rc = cp_heap_run_until(heap, monotonic_ns() + 20000000u, NULL,
				       &end);
		CHECK(rc == 0, "cp_heap_run_until: %s", cp_strerror(-rc));
		CHECK(end == CP_HEAP_DEADLINE, "the run ended with %d",
		      (int)end);
		CHECK(monotonic_ns() < limit, "no \"%s\" line within %d s",
		      prefix, WORK_TIMEOUT_MS / 1000);
	}
	ck_assert_int_eq(cp_heap_finish(heap), 0);
	/* Every byte back, the target still ours.  */
	CHECK(tu_code_matches_files(fixture->pid, why, sizeof(why)),
	      "after window %u: %s", number, why);
	ck_assert_int_gt(tu_traced_tasks(fixture->pid), 0);
	cp_heap_resolve(heap);

	done = wait_line(fixture, prefix, 0);
	s = cp_heap_summary(heap);
	ck_assert_uint_eq(s->calls[cp_heap_entry_find("malloc")],
			  done_count(done, "malloc"));
	ck_assert_uint_eq(s->calls[cp_heap_entry_find("calloc")],
			  done_count(done, "calloc"));
	ck_assert_uint_eq(s->calls[cp_heap_entry_find("realloc")],
			  done_count(done, "realloc"));
	ck_assert_uint_eq(s->calls[cp_heap_entry_find("free")],
			  done_count(done, "free"));
	ck_assert_uint_eq(s->allocations, done_count(done, "malloc") +
						  done_count(done, "calloc") +
						  done_count(done, "realloc"));
	ck_assert_uint_eq(s->alloc_bytes, done_count(done, "alloc_bytes"));
	ck_assert_uint_eq(s->frees, done_count(done, "free"));
	ck_assert_uint_eq(s->realloc_releases, done_count(done, "realloc"));
	ck_assert_uint_eq(s->live_count, 0);
	ck_assert_uint_eq(s->untracked_frees + s->repeat_frees, 0);
	ck_assert_uint_eq(s->lost_returns, 0);
	/* One event per call, seen by the second consumer too.  */
	ck_assert_uint_eq(events.kind[CP_HEAP_EV_ALLOC],
			  done_count(done, "malloc") +
				  done_count(done, "calloc"));
	ck_assert_uint_eq(events.kind[CP_HEAP_EV_FREE],
			  done_count(done, "free"));
	ck_assert_uint_eq(events.kind[CP_HEAP_EV_REALLOC],
			  done_count(done, "realloc"));
	ck_assert_uint_eq(events.bytes, done_count(done, "alloc_bytes"));
	for (size_t i = 1; i < s->nsites; i++)
		if (s->sites[i].alloc_count > s->sites[top].alloc_count)
			top = i;
	ck_assert_str_eq(innermost_function(profile, s->sites[top].stack),
			 function);
	free(done);
	cp_heap_free(heap);
	cp_profile_free(profile);
}

/* Heap tracing on and off on one attachment, through the library (what
 * a session does): two windows with their own counts, the code restored
 * and the target attached between them, sampled between them too, and
 * after the detach the target untraced, its code as in its files, still
 * working.  */
START_TEST(test_windows_one_attach)
{
	struct tu_proc *fixture = start_fixture("heap-leak", "windows", NULL,
						NULL);
	struct cp_symbols_options symbol_options = { 0 };
	struct cp_target *target = NULL;
	struct cp_unwinder *unwinder = NULL;
	struct cp_symbols *symbols = NULL;
	struct cp_sampler_options sample_options = {
		.frequency = 99, .duration = 0.3, .wall = true,
		.max_depth = 64,
	};
	struct cp_sampler_stats stats;
	struct cp_profile *sampled;
	char why[256];
	char *done;
	int rc;

	rc = cp_target_attach(fixture->pid, NULL, 0,
			      CP_TARGET_FOLLOW_CLONES | CP_TARGET_FOLLOW_FORKS,
			      &target, NULL);
	CHECK(rc == 0, "cannot attach to %d: %s", (int)fixture->pid,
	      cp_strerror(-rc));
	ck_assert_int_eq(cp_unwinder_new(fixture->pid, &unwinder), 0);
	ck_assert_int_eq(cp_symbols_new(fixture->pid, &symbol_options,
					&symbols), 0);

	heap_window(target, unwinder, symbols, fixture, "small", 1,
		    "small_allocs");
	/* Sampled between the windows (wall mode: the fixture waits for
	 * its next command in read).  */
	sampled = cp_profile_new();
	ck_assert_ptr_nonnull(sampled);
	/* Windows until one has a sample: no bound on how soon a loaded
	 * machine gives the first tick.  */
	for (int round = 0; round < 50 && cp_profile_total(sampled) == 0;
	     round++) {
		rc = cp_sampler_run(target, unwinder, symbols, sampled,
				    &sample_options, &stats);
		CHECK(rc == 0, "cp_sampler_run: %s", cp_strerror(-rc));
	}
	ck_assert_uint_gt(cp_profile_total(sampled), 0);
	cp_profile_free(sampled);
	heap_window(target, unwinder, symbols, fixture, "grow", 2,
		    "grow_buffer");

	cp_target_detach(target);
	ck_assert_int_eq(tu_traced_tasks(fixture->pid), 0);
	CHECK(tu_code_matches_files(fixture->pid, why, sizeof(why)),
	      "after the detach: %s", why);
	/* Untraced, it still computes: a third command, then exit.  */
	say("small");
	done = wait_line(fixture, "done n=3 ", WORK_TIMEOUT_MS);
	ck_assert_uint_eq(done_count(done, "malloc"), 1000);
	free(done);
	finish_fixture(fixture, "ok");
	cp_symbols_free(symbols);
	cp_unwinder_free(unwinder);
}
END_TEST

/* The function of frame INDEX (0: innermost) of PROFILE's stack STACK,
 * or "".  */
static const char *frame_function(const struct cp_profile *profile,
				  uint32_t stack, size_t index)
{
	size_t n = 0;
	const uint32_t *locs = cp_profile_stack(profile, stack, &n);
	const struct cp_location *loc;

	if (index >= n)
		return "";
	loc = cp_profile_location(profile, locs[index]);
	if (loc == NULL || loc->nlines == 0)
		return "";
	return cp_profile_string(profile, loc->lines[0].function);
}

/* heap-pairs PAIRS 3 alternate, launched and traced through the library
 * to its exit, with the reuse of unwinds on or off (NO_REUSE): into
 * *EVEN and *ODD the allocations whose site is pairs_leaf called from
 * pairs_via_even or pairs_via_odd, into *REUSED the summary's count.  */
static void trace_twins(unsigned pairs, bool no_reuse, uint64_t *even,
			uint64_t *odd, uint64_t *reused)
{
	char path[PATH_MAX];
	char count[32];
	struct cp_symbols_options symbol_options = { 0 };
	struct cp_heap_options options = {
		.max_depth = 64, .no_unwind_reuse = no_reuse,
	};
	struct cp_target *target = NULL;
	struct cp_unwinder *unwinder = NULL;
	struct cp_symbols *symbols = NULL;
	struct cp_profile *profile = cp_profile_new();
	struct cp_heap *heap = NULL;
	const struct cp_heap_summary *s;
	enum cp_heap_end end = CP_HEAP_DEADLINE;
	uint64_t limit = monotonic_ns() + WORK_TIMEOUT_MS * 1000000ull;
	int rc;

	snprintf(path, sizeof(path), "%s/fixtures/heap-pairs", CP_BUILD_DIR);
	snprintf(count, sizeof(count), "%u", pairs);
	char *argv[] = { path, count, "3", "alternate", NULL };
	ck_assert_ptr_nonnull(profile);
	rc = cp_target_launch(argv, CP_TARGET_FOLLOW_CLONES |
				      CP_TARGET_FOLLOW_FORKS,
			      &target);
	CHECK(rc == 0, "cannot launch %s: %s", path, cp_strerror(-rc));
	ck_assert_int_eq(cp_unwinder_new(cp_target_pid(target), &unwinder),
			 0);
	ck_assert_int_eq(cp_symbols_new(cp_target_pid(target),
					&symbol_options, &symbols), 0);
	rc = cp_heap_start(target, unwinder, symbols, profile, &options,
			   &heap);
	CHECK(rc == 0, "cp_heap_start: %s", cp_strerror(-rc));
	while (end != CP_HEAP_EXITED) {
		rc = cp_heap_run_until(heap, monotonic_ns() + 100000000u,
				       NULL, &end);
		CHECK(rc == 0, "cp_heap_run_until: %s", cp_strerror(-rc));
		CHECK(monotonic_ns() < limit,
		      "heap-pairs did not end within %d s",
		      WORK_TIMEOUT_MS / 1000);
	}
	ck_assert_int_eq(cp_heap_finish(heap), 0);
	ck_assert_int_eq(cp_target_detach_status(target), 0);
	cp_heap_resolve(heap);
	s = cp_heap_summary(heap);
	*even = *odd = 0;
	for (size_t i = 0; i < s->nsites; i++) {
		const char *leaf = frame_function(profile, s->sites[i].stack, 0);
		const char *via = frame_function(profile, s->sites[i].stack, 1);

		if (strcmp(leaf, "pairs_leaf") != 0)
			continue;
		if (strcmp(via, "pairs_via_even") == 0)
			*even += s->sites[i].alloc_count;
		else if (strcmp(via, "pairs_via_odd") == 0)
			*odd += s->sites[i].alloc_count;
		else
			ck_abort_msg("pairs_leaf called from \"%s\"", via);
	}
	*reused = s->unwinds_reused;
	ck_assert_uint_eq(s->lost_returns, 0);
	cp_heap_free(heap);
	cp_profile_free(profile);
	cp_symbols_free(symbols);
	cp_unwinder_free(unwinder);
}

/* An allocation whose registers and stack bytes are an earlier one's
 * takes that one's frames without unwinding; twin callers with the same
 * frame (the same registers, only a return address apart in the stack)
 * are still told apart, as they are when every stack is unwound.  */
START_TEST(test_unwind_reuse)
{
	uint64_t even, odd, reused;

	trace_twins(2000, false, &even, &odd, &reused);
	ck_assert_uint_eq(even, 1000);
	ck_assert_uint_eq(odd, 1000);
	/* All but the first of each twin (and what printf's buffer or an
	 * unlucky set pushed out).  */
	CHECK(reused >= 1900, "only %llu of 2000 unwinds reused",
	      (unsigned long long)reused);
	trace_twins(2000, true, &even, &odd, &reused);
	ck_assert_uint_eq(even, 1000);
	ck_assert_uint_eq(odd, 1000);
	ck_assert_uint_eq(reused, 0);
}
END_TEST

/* --------------------------------------------------------------- suite */

static TCase *new_case(Suite *suite, const char *name, double timeout)
{
	TCase *tcase = tcase_create(name);

	tcase_add_checked_fixture(tcase, setup, teardown);
	tcase_set_timeout(tcase, timeout);
	suite_add_tcase(suite, tcase);
	return tcase;
}

static Suite *heap_suite(void)
{
	Suite *suite = suite_create("heap");
	TCase *tcase;

	tcase = new_case(suite, "leak", 120);
	tcase_add_test(tcase, test_leak_report);
	tcase_add_test(tcase, test_leak_target_exits);
	tcase_add_test(tcase, test_leak_folded);
	tcase_add_test(tcase, test_leak_pprof);
	tcase_add_test(tcase, test_leak_speedscope);

	tcase = new_case(suite, "windows", 120);
	tcase_add_test(tcase, test_windows_one_attach);
	tcase_add_test(tcase, test_unwind_reuse);

	tcase = new_case(suite, "jemalloc", 120);
	tcase_add_test(tcase, test_leak_jemalloc);

	tcase = new_case(suite, "cxx", 120);
	tcase_add_test(tcase, test_cxx);

	tcase = new_case(suite, "fork", 120);
	tcase_add_loop_test(tcase, test_fork, 0,
			    sizeof(fork_modes) / sizeof(fork_modes[0]));

	tcase = new_case(suite, "stress", 300);
	tcase_add_test(tcase, test_stress);
	tcase_add_test(tcase, test_stress_force_step);
	tcase_add_test(tcase, test_tracers_launch);
	tcase_add_test(tcase, test_tracers_attach);
	tcase_add_test(tcase, test_tracers_exec);
	tcase_add_test(tcase, test_uprobes_launch);

	tcase = new_case(suite, "interrupt", 300);
	tcase_add_test(tcase, test_interrupt);

	tcase = new_case(suite, "launch", 300);
	tcase_add_test(tcase, test_launch_ctor);
	tcase_add_test(tcase, test_launch_ctor_force_step);
	tcase_add_test(tcase, test_launch_peak);
	tcase_add_test(tcase, test_launch_short_names);
	tcase_add_loop_test(tcase, test_launch_static, 0,
			    sizeof(static_builds) / sizeof(static_builds[0]));

	tcase = new_case(suite, "memcheck", 600);
	tcase_add_loop_test(tcase, test_memcheck, 0,
			    sizeof(memcheck_programs)
				    / sizeof(memcheck_programs[0]));

	tcase = new_case(suite, "errors", 60);
	tcase_add_loop_test(tcase, test_bad_usage, 0,
			    sizeof(bad_usage) / sizeof(bad_usage[0]));
	tcase_add_test(tcase, test_no_such_process);

	return suite;
}

int main(void)
{
	SRunner *runner = srunner_create(heap_suite());
	int failed;

	srunner_run_all(runner, CK_NORMAL);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
