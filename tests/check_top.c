/* The live view, `cprof-attach --top PID`, driven the way a person uses
 * it: in a real terminal (a detached tmux server of our own, 120x40),
 * with keys typed into it (send-keys) and the screen read back
 * (capture-pane).  Each test waits for what it expects to appear on the
 * screen, polling, with a generous limit that only ends a hung test:
 * nothing asserts how long anything took.
 *
 * The counting itself (self, total once a stack, per thread, the pause)
 * is checked first on profiles made by hand (top_data.c).
 *
 * The pane runs a shell line: cprof-attach, then its exit status and the
 * terminal's modes (stty -a) into files of a temporary directory, then a
 * file saying it is done; the test reads those to see that the program
 * ended as asked and gave the terminal back.  */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

/* The view's data part, for its unit tests (it is cprof-attach's, not
 * the library's).  */
#include "cli/top_data.c"

#define READY_TIMEOUT_MS 10000 /* fixture start-up */
#define SCREEN_TIMEOUT_MS 30000 /* for something to appear on screen */
#define RUN_TIMEOUT_MS 20000
#define LONG_RUN "120"

/* The tmux server of the running test (its -L socket name), killed by
 * the teardown with whatever runs in it.  */
static char tmux_socket[64];
static const char *run_dir; /* where the pane's shell writes its files */

/* Run tmux with ARGS (after -L SOCKET), its stdout into a new string
 * (the caller frees it; NULL when OUT is NULL).  Returns its exit
 * status, -1 when it could not run.  */
static int tmux(char **out, const char *const args[])
{
	const char *argv[32];
	size_t n = 0;
	argv[n++] = "tmux";
	argv[n++] = "-f";
	argv[n++] = "/dev/null";
	argv[n++] = "-L";
	argv[n++] = tmux_socket;
	for (size_t i = 0; args[i] && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		execvp("tmux", (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	size_t len = 0, cap = 4096;
	char *text = malloc(cap);
	ssize_t got;
	while (text && (got = read(fds[0], text + len, cap - len - 1)) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		len += (size_t)got;
		if (cap - len < 1024) {
			cap *= 2;
			char *grown = realloc(text, cap);
			if (!grown) {
				free(text);
				text = NULL;
			} else {
				text = grown;
			}
		}
	}
	close(fds[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (text)
		text[len] = '\0';
	if (out)
		*out = text;
	else
		free(text);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#define TMUX(out, ...) tmux((out), (const char *const[]){__VA_ARGS__, NULL})

static void kill_tmux(void)
{
	if (tmux_socket[0]) {
		TMUX(NULL, "kill-server");
		/* The server leaves its socket behind.  */
		const char *dir = getenv("TMUX_TMPDIR");
		char path[512];
		snprintf(path, sizeof(path), "%s/tmux-%u/%s",
			 dir && *dir ? dir : "/tmp", (unsigned)getuid(),
			 tmux_socket);
		unlink(path);
	}
	tmux_socket[0] = '\0';
}

static void teardown(void)
{
	kill_tmux();
	tu_cleanup();
}

/* A new tmux server for this test: its socket's name into tmux_socket.
 * Killed by the teardown, or before a failed wait ends the test (Check
 * skips the teardown then); what runs in it ends by itself after 300 s
 * anyway, and the server with it.  */
static void new_server(const char *kind)
{
	static unsigned serial;
	snprintf(tmux_socket, sizeof(tmux_socket), "cprof-check-top-%d-%s%u",
		 (int)getpid(), kind, serial++);
	run_dir = tu_temp_dir();
}

static struct tu_proc *ready(struct tu_proc *fixture)
{
	ck_assert_msg(fixture != NULL, "the fixture could not be started");
	ck_assert_msg(tu_proc_wait_line(fixture, "ready", READY_TIMEOUT_MS),
		      "fixture %d did not print \"ready\" (stdout so far: %s)",
		      (int)fixture->pid, fixture->output);
	return fixture;
}

/* Start `cprof-attach --top [EXTRA] PID` in a new tmux server, 120x40.  */
static void start_top(pid_t pid, const char *extra)
{
	new_server("");
	char line[2048];
	snprintf(line, sizeof(line),
		 "timeout --foreground -k 5 300 %s/cprof-attach --top %s %d "
		 "2>%s/err; echo $? >%s/status; stty -a >%s/stty; : >%s/done; "
		 "exec sleep 300",
		 CP_BUILD_DIR, extra ? extra : "", (int)pid, run_dir, run_dir,
		 run_dir, run_dir);
	int rc = TMUX(NULL, "new-session", "-d", "-x", "120", "-y", "40",
		      line);
	ck_assert_msg(rc == 0, "tmux new-session failed (%d)", rc);
}

static char *screen(void)
{
	char *text = NULL;
	int rc = TMUX(&text, "capture-pane", "-p");
	ck_assert_msg(rc == 0 && text, "tmux capture-pane failed (%d)", rc);
	return text;
}

static void keys(const char *key)
{
	int rc = TMUX(NULL, "send-keys", key);
	ck_assert_msg(rc == 0, "tmux send-keys %s failed", key);
}

/* Line N (0-based) of TEXT into LINE (SIZE bytes); false when none.  */
static bool line_of(const char *text, int n, char *line, size_t size)
{
	for (; n > 0 && text; n--) {
		text = strchr(text, '\n');
		if (text)
			text++;
	}
	if (!text || !*text)
		return false;
	size_t len = strcspn(text, "\n");
	if (len >= size)
		len = size - 1;
	memcpy(line, text, len);
	line[len] = '\0';
	return true;
}

/* One row of the table: "SELF%  TOTAL%  SELF  TOTAL  FUNCTION [MODULE]". */
struct screen_row {
	double self_pct, total_pct;
	uint64_t self, total;
	char function[128];
};

/* The rows of screen TEXT, at most MAX; returns how many.  */
static size_t rows_of(const char *text, struct screen_row *rows, size_t max)
{
	size_t n = 0;
	char line[512];
	for (int i = 3; n < max && line_of(text, i, line, sizeof(line)); i++) {
		struct screen_row r;
		if (sscanf(line, "%lf%% %lf%% %" SCNu64 " %" SCNu64 " %127s",
			   &r.self_pct, &r.total_pct, &r.self, &r.total,
			   r.function) == 5)
			rows[n++] = r;
	}
	return n;
}

static const struct screen_row *find_row(const struct screen_row *rows, size_t n,
				  const char *function)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(rows[i].function, function) == 0)
			return &rows[i];
	return NULL;
}

/* The samples of the view ("... N samples  sort: KEY" on line 1), or
 * -1.  */
static long long samples_of(const char *text)
{
	char line[512];
	if (!line_of(text, 1, line, sizeof(line)))
		return -1;
	const char *end = strstr(line, " samples  sort:");
	if (!end)
		return -1;
	const char *p = end;
	while (p > line && p[-1] >= '0' && p[-1] <= '9')
		p--;
	return p == end ? -1 : strtoll(p, NULL, 10);
}

/* The whole seconds elapsed of the header, or -1.  */
static long elapsed_of(const char *text)
{
	char line[512];
	if (!line_of(text, 0, line, sizeof(line)))
		return -1;
	const char *p = strstr(line, "elapsed ");
	return p ? strtol(p + 8, NULL, 10) : -1;
}

/* Poll the screen until ACCEPT(screen, ARG) says yes; return that
 * screen (the caller frees it).  Fails the test after the limit, with
 * the last screen.  */
static char *wait_screen(bool (*accept)(const char *, const void *),
			 const void *arg, const char *what)
{
	uint64_t limit = tu_now_ns() + (uint64_t)SCREEN_TIMEOUT_MS * 1000000u;
	for (;;) {
		char *text = screen();
		if (accept(text, arg))
			return text;
		if (tu_now_ns() > limit) {
			char path[512];
			snprintf(path, sizeof(path), "%s/err", run_dir);
			char *err = tu_read_file(path);
			fprintf(stderr, "the screen, waiting for %s:\n%s\n"
				"cprof-attach's stderr: %s\n", what, text,
				err ? err : "(none)");
			free(err);
			free(text);
			kill_tmux();
			ck_abort_msg("the live view never showed %s", what);
		}
		free(text);
		tu_delay_ms(100);
	}
}

static bool has_text(const char *text, const void *arg)
{
	return strstr(text, arg) != NULL;
}

/* A screen whose table has function ARG with at least 20 samples.  */
static bool has_row(const char *text, const void *arg)
{
	struct screen_row rows[64];
	size_t n = rows_of(text, rows, 64);
	const struct screen_row *r = find_row(rows, n, arg);
	return r && r->total >= 20;
}

static bool samples_above(const char *text, const void *arg)
{
	return samples_of(text) > *(const long long *)arg;
}

static bool elapsed_above(const char *text, const void *arg)
{
	return elapsed_of(text) > *(const long *)arg;
}

/* Wait for the pane's shell to say cprof-attach ended; its exit status. */
static int wait_done(void)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/done", run_dir);
	uint64_t limit = tu_now_ns() + (uint64_t)RUN_TIMEOUT_MS * 1000000u;
	while (access(path, F_OK) != 0) {
		if (tu_now_ns() > limit) {
			char *text = screen();
			fprintf(stderr, "the screen:\n%s\n", text);
			free(text);
			kill_tmux();
			ck_abort_msg("cprof-attach --top did not end");
		}
		tu_delay_ms(50);
	}
	snprintf(path, sizeof(path), "%s/status", run_dir);
	char *status = tu_read_file(path);
	ck_assert_msg(status != NULL, "no exit status written");
	int code = atoi(status);
	free(status);
	return code;
}

static char *run_file(const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", run_dir, name);
	char *text = tu_read_file(path);
	ck_assert_msg(text != NULL, "cannot read %s", path);
	return text;
}

/* The terminal is as a shell leaves it: canonical input, echo.  */
static void check_terminal_restored(void)
{
	char *modes = run_file("stty");
	ck_assert_msg(strstr(modes, " icanon") && !strstr(modes, "-icanon"),
		      "the terminal is left without icanon:\n%s", modes);
	ck_assert_msg(strstr(modes, " echo ") && !strstr(modes, "-echo "),
		      "the terminal is left without echo:\n%s", modes);
	free(modes);
}

/* The target runs on, untraced.  */
static void check_target_released(struct tu_proc *fixture)
{
	ck_assert_msg(tu_task_tracer(fixture->pid, 0) == 0,
		      "process %d is still traced", (int)fixture->pid);
	ck_assert_msg(tu_wait_cpu_ticks(fixture->pid, 2, RUN_TIMEOUT_MS),
		      "process %d does not run on", (int)fixture->pid);
}

/* ------------------------------------------------------ data (unit) */

/* A location of one function, or of INNER inlined into OUTER.  */
static uint32_t location(struct cp_profile *p, uint64_t address,
			 const char *inner, const char *outer)
{
	struct cp_line lines[2] = {
		{.function = cp_profile_intern(p, inner, strlen(inner)),
		 .inlined = outer != NULL},
		{.function = outer ? cp_profile_intern(p, outer, strlen(outer))
				   : 0},
	};
	uint32_t module = cp_profile_intern(p, "app", 3);
	uint32_t id = cp_profile_add_location(p, address, module, lines,
					      outer ? 2 : 1);
	ck_assert_uint_ne(id, UINT32_MAX);
	return id;
}

static void add(struct cp_profile *p, pid_t tid, uint64_t count,
		const uint32_t *locs, size_t n)
{
	uint32_t stack = cp_profile_intern_stack(p, locs, n);
	ck_assert_uint_ne(stack, UINT32_MAX);
	ck_assert_int_eq(cp_profile_add(p, tid, stack, count), 0);
}

static const struct row_data {
	const char *name;
	uint64_t self, total;
} *no_rows = NULL;

/* TOP's rows are WANT (in order), of SAMPLES samples.  */
static void check_rows(struct top *top, uint64_t samples,
		       const struct row_data *want, size_t n)
{
	uint64_t got_samples = 0;
	ck_assert_int_eq(top_make_rows(top, &got_samples), 0);
	ck_assert_uint_eq(got_samples, samples);
	ck_assert_msg(top->nrows == n, "%zu rows, expected %zu", top->nrows,
		      n);
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &top->rows[i];
		const char *name = top->functions[r->function].name;
		ck_assert_msg(strcmp(name, want[i].name) == 0 &&
				      r->self == want[i].self &&
				      r->total == want[i].total,
			      "row %zu: %s %" PRIu64 " %" PRIu64
			      ", expected %s %" PRIu64 " %" PRIu64,
			      i, name, r->self, r->total, want[i].name,
			      want[i].self, want[i].total);
	}
}

/* Thread 101: c <- a <- b <- a <- main (a recursive: its total counts
 * once a stack) 3 times, and inl_leaf inlined into d <- main once;
 * thread 102: b <- main twice.  */
static struct cp_profile *hand_profile(void)
{
	struct cp_profile *p = cp_profile_new();
	ck_assert_ptr_nonnull(p);
	uint32_t m = location(p, 0x1000, "main", NULL);
	uint32_t a = location(p, 0x2000, "a", NULL);
	uint32_t b = location(p, 0x3000, "b", NULL);
	uint32_t c = location(p, 0x4000, "c", NULL);
	uint32_t inl = location(p, 0x5000, "inl_leaf", "d");
	add(p, 101, 3, (const uint32_t[]){c, a, b, a, m}, 5);
	add(p, 101, 1, (const uint32_t[]){inl, m}, 2);
	add(p, 102, 2, (const uint32_t[]){b, m}, 2);
	cp_profile_set_thread_name(p, 101, "worker-1");
	cp_profile_set_thread_name(p, 102, "worker-2");
	return p;
}

START_TEST(test_data_counts)
{
	struct top top = {.accumulated = true};
	struct cp_profile *p = hand_profile();
	ck_assert_int_eq(top_add_window(&top, p, 1.0), 0);
	cp_profile_free(p);
	/* By self, then total, then name.  */
	static const struct row_data all[] = {
		{"c", 3, 3},	    {"b", 2, 5}, {"inl_leaf", 1, 1},
		{"main", 0, 6}, {"a", 0, 3}, {"d", 0, 1},
	};
	check_rows(&top, 6, all, 6);
	top.sort = SORT_TOTAL;
	static const struct row_data by_total[] = {
		{"main", 0, 6}, {"b", 2, 5},	{"c", 3, 3},
		{"a", 0, 3},	{"inl_leaf", 1, 1}, {"d", 0, 1},
	};
	check_rows(&top, 6, by_total, 6);
	top.sort = SORT_NAME;
	static const struct row_data by_name[] = {
		{"a", 0, 3}, {"b", 2, 5},	 {"c", 3, 3},
		{"d", 0, 1}, {"inl_leaf", 1, 1}, {"main", 0, 6},
	};
	check_rows(&top, 6, by_name, 6);
	/* One thread: its rows, its samples.  */
	top.sort = SORT_SELF;
	top.shown_tid = 102;
	static const struct row_data t102[] = {{"b", 2, 2}, {"main", 0, 2}};
	check_rows(&top, 2, t102, 2);
	ck_assert_str_eq(top_thread_name(&top, 101), "worker-1");
	ck_assert_str_eq(top_thread_name(&top, 102), "worker-2");
	/* > steps all, 101, 102, all; < the other way.  */
	top.shown_tid = 0;
	top_cycle_thread(&top, 1);
	ck_assert_int_eq(top.shown_tid, 101);
	top_cycle_thread(&top, 1);
	ck_assert_int_eq(top.shown_tid, 102);
	top_cycle_thread(&top, 1);
	ck_assert_int_eq(top.shown_tid, 0);
	top_cycle_thread(&top, -1);
	ck_assert_int_eq(top.shown_tid, 102);
	top_free(&top);
}
END_TEST

/* A second window adds to "since the start" and is the last interval;
 * while paused, windows are held and the tables shown stay as they
 * were; on resume the held ones join.  */
START_TEST(test_data_windows)
{
	struct top top = {.accumulated = true};
	struct cp_profile *p = hand_profile();
	ck_assert_int_eq(top_add_window(&top, p, 1.0), 0);
	top.paused = true;
	ck_assert_int_eq(top_add_window(&top, p, 1.0), 0);
	ck_assert_int_eq(top_add_window(&top, p, 1.0), 0);
	static const struct row_data once[] = {
		{"c", 3, 3},	    {"b", 2, 5}, {"inl_leaf", 1, 1},
		{"main", 0, 6}, {"a", 0, 3}, {"d", 0, 1},
	};
	check_rows(&top, 6, once, 6);
	ck_assert_int_eq(top_resume(&top), 0);
	ck_assert(!top.paused);
	static const struct row_data thrice[] = {
		{"c", 9, 9},	     {"b", 6, 15}, {"inl_leaf", 3, 3},
		{"main", 0, 18}, {"a", 0, 9},  {"d", 0, 3},
	};
	check_rows(&top, 18, thrice, 6);
	top.accumulated = false;
	check_rows(&top, 6, once, 6);
	/* An empty window: the last interval is empty, the rest stays.  */
	struct cp_profile *empty = cp_profile_new();
	ck_assert_int_eq(top_add_window(&top, empty, 1.0), 0);
	check_rows(&top, 0, no_rows, 0);
	top.accumulated = true;
	check_rows(&top, 18, thrice, 6);
	cp_profile_free(empty);
	cp_profile_free(p);
	top_free(&top);
}
END_TEST

/* ------------------------------------------------------------- tests */

/* The hot chain of chain-O0 is in the table with its shares: the leaf
 * fx_work has nearly every sample as self, and every function of the
 * chain nearly every sample as total.  */
START_TEST(test_rows)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", LONG_RUN, NULL));
	start_top(fixture->pid, NULL);
	char *text = wait_screen(has_row, "chain_gamma", "chain_gamma's row");
	struct screen_row rows[64];
	size_t n = rows_of(text, rows, 64);
	static const char *const chain[] = {"main", "chain_alpha",
					    "chain_beta", "chain_gamma",
					    "fx_work"};
	for (size_t i = 0; i < sizeof(chain) / sizeof(*chain); i++) {
		const struct screen_row *r = find_row(rows, n, chain[i]);
		ck_assert_msg(r, "no row for %s:\n%s", chain[i], text);
		ck_assert_msg(r->total_pct >= 80.0,
			      "%s is on %.2f%% of the stacks, expected nearly "
			      "all:\n%s", chain[i], r->total_pct, text);
	}
	const struct screen_row *leaf = find_row(rows, n, "fx_work");
	ck_assert_msg(leaf->self_pct >= 80.0 && leaf == &rows[0],
		      "fx_work should lead the table by self:\n%s", text);
	ck_assert_msg(strstr(text, "pid ") && strstr(text, "chain-O0") &&
			      strstr(text, "running") &&
			      strstr(text, "samples/s"),
		      "the header does not say what runs:\n%s", text);
	free(text);
	keys("q");
	ck_assert_int_eq(wait_done(), 0);
	check_terminal_restored();
	check_target_released(fixture);
}
END_TEST

/* The table updates: the sample count grows from one screen to a
 * later one, and the last-interval view (a) shows fewer.  */
START_TEST(test_updates)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", LONG_RUN, NULL));
	start_top(fixture->pid, NULL);
	char *text = wait_screen(has_row, "chain_gamma", "chain_gamma's row");
	long long first = samples_of(text);
	free(text);
	ck_assert_msg(first > 0, "no sample count on line 1");
	text = wait_screen(samples_above, &first, "more samples");
	free(text);
	/* Since the start vs. the last interval.  */
	keys("a");
	text = wait_screen(has_text, "last interval", "the last interval");
	free(text);
	long long later = 0;
	text = wait_screen(samples_above, &later, "a sample count");
	later = samples_of(text);
	free(text);
	keys("a");
	text = wait_screen(has_text, "since the start", "since the start");
	long long all = samples_of(text);
	free(text);
	ck_assert_msg(all > later,
		      "since the start (%lld) should hold more than the last "
		      "interval (%lld)", all, later);
	keys("q");
	ck_assert_int_eq(wait_done(), 0);
}
END_TEST

static bool sorted_by(const char *text, const void *arg)
{
	char key = *(const char *)arg;
	char want[32];
	snprintf(want, sizeof(want), "sort: %s",
		 key == 't' ? "total" : key == 'n' ? "name" : "self");
	if (!strstr(text, want))
		return false;
	struct screen_row rows[64];
	return rows_of(text, rows, 64) >= 5;
}

/* s, t and n sort by self, total and name: the header says which and
 * marks its column, and the rows are in that order.  */
START_TEST(test_sort)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", LONG_RUN, NULL));
	start_top(fixture->pid, NULL);
	free(wait_screen(has_row, "chain_gamma", "chain_gamma's row"));
	static const char order[] = {'n', 't', 's'};
	for (size_t k = 0; k < sizeof(order); k++) {
		char key[2] = {order[k], '\0'};
		keys(key);
		char *text = wait_screen(sorted_by, &order[k], "the sort key");
		const char *mark = order[k] == 'n'   ? "*FUNCTION"
				   : order[k] == 't' ? "*TOTAL%"
						     : "*SELF%";
		ck_assert_msg(strstr(text, mark), "%s not marked:\n%s", mark,
			      text);
		struct screen_row rows[64];
		size_t n = rows_of(text, rows, 64);
		for (size_t i = 1; i < n; i++) {
			const struct screen_row *a = &rows[i - 1], *b = &rows[i];
			bool in_order =
				order[k] == 'n'	  ? strcmp(a->function,
							   b->function) <= 0
				: order[k] == 't' ? a->total >= b->total
						  : a->self >= b->self;
			ck_assert_msg(in_order, "rows %zu and %zu are not in "
				      "order for '%c':\n%s", i - 1, i,
				      order[k], text);
		}
		if (order[k] == 'n')
			ck_assert_msg(strcmp(rows[0].function, "fx_work") != 0,
				      "by name, fx_work is not first:\n%s",
				      text);
		else if (order[k] == 's')
			ck_assert_msg(strcmp(rows[0].function, "fx_work") == 0,
				      "by self, fx_work is first:\n%s", text);
		free(text);
	}
	keys("q");
	ck_assert_int_eq(wait_done(), 0);
}
END_TEST

/* The table part of a screen: lines 1 and below.  */
static const char *table_part(const char *text)
{
	const char *p = strchr(text, '\n');
	return p ? p + 1 : "";
}

/* p freezes the numbers (sampling goes on: the clock of the header
 * moves), p again lets them move, with what came meanwhile.  */
START_TEST(test_pause)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", LONG_RUN, NULL));
	start_top(fixture->pid, NULL);
	free(wait_screen(has_row, "chain_gamma", "chain_gamma's row"));
	keys("p");
	char *frozen = wait_screen(has_text, "paused", "paused");
	long when = elapsed_of(frozen);
	long long frozen_samples = samples_of(frozen);
	ck_assert_msg(when >= 0 && frozen_samples > 0, "header:\n%s", frozen);
	/* Two refreshes later at least: the clock moved 3 s.  */
	long until = when + 2;
	char *later = wait_screen(elapsed_above, &until, "the clock moving");
	ck_assert_msg(strstr(later, "paused"), "not paused:\n%s", later);
	ck_assert_msg(strcmp(table_part(frozen), table_part(later)) == 0,
		      "the table moved while paused:\n%s\n---\n%s", frozen,
		      later);
	free(frozen);
	free(later);
	keys("p");
	char *moving = wait_screen(samples_above, &frozen_samples,
				   "the numbers moving again");
	ck_assert_msg(strstr(moving, "running"), "not running:\n%s", moving);
	free(moving);
	keys("q");
	ck_assert_int_eq(wait_done(), 0);
}
END_TEST

/* The filter part of line 1 ("thread TID NAME" or "all threads (N)"),
 * into FILTER.  */
static void filter_of(const char *text, char filter[128])
{
	char line[512];
	filter[0] = '\0';
	if (line_of(text, 1, line, sizeof(line))) {
		char *end = strstr(line, "  ");
		if (end)
			*end = '\0';
		snprintf(filter, 128, "%.127s", line);
	}
}

/* A screen whose filter is not ARG any more (a key was acted on).  */
static bool filter_moved(const char *text, const void *arg)
{
	char filter[128];
	filter_of(text, filter);
	return filter[0] && strcmp(filter, arg) != 0;
}

/* > steps the filter through the threads: on worker-b, only its
 * functions are in the table, and the header names it; 0 goes back to
 * all threads.  */
START_TEST(test_thread_filter)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("threads", LONG_RUN, NULL));
	pid_t worker_b = tu_find_task(fixture->pid, "worker-b");
	ck_assert_msg(worker_b > 0, "no thread worker-b");
	start_top(fixture->pid, NULL);
	free(wait_screen(has_row, "path_b2", "path_b2's row"));
	free(wait_screen(has_row, "path_a2", "path_a2's row"));
	char *text = screen();
	char filter[128];
	filter_of(text, filter);
	free(text);
	text = NULL;
	for (int i = 0; i < 10 && !text; i++) {
		keys(">");
		/* Each key is acted on and the view redrawn before the next
		 * is typed.  */
		char *now = wait_screen(filter_moved, filter, "the next thread");
		filter_of(now, filter);
		if (strncmp(filter, "thread ", 7) == 0 &&
		    strstr(filter, "worker-b"))
			text = now;
		else
			free(now);
	}
	ck_assert_msg(text, "> never reached worker-b");
	char want[64];
	snprintf(want, sizeof(want), "thread %d worker-b", (int)worker_b);
	ck_assert_msg(strstr(text, want), "expected \"%s\":\n%s", want, text);
	struct screen_row rows[64];
	size_t n = rows_of(text, rows, 64);
	ck_assert_msg(find_row(rows, n, "path_b2") &&
			      find_row(rows, n, "path_b1"),
		      "worker-b's functions are missing:\n%s", text);
	static const char *const others[] = {"path_a1", "path_a2", "path_c1",
					     "path_c2", "path_d1", "path_d2"};
	for (size_t i = 0; i < sizeof(others) / sizeof(*others); i++)
		ck_assert_msg(!find_row(rows, n, others[i]),
			      "%s is not worker-b's:\n%s", others[i], text);
	free(text);
	keys("0");
	text = wait_screen(has_text, "all threads", "all threads");
	n = rows_of(text, rows, 64);
	ck_assert_msg(find_row(rows, n, "path_a2") &&
			      find_row(rows, n, "path_b2"),
		      "all threads should show every path:\n%s", text);
	free(text);
	/* T and a thread id typed: worker-c alone.  */
	pid_t worker_c = tu_find_task(fixture->pid, "worker-c");
	ck_assert_msg(worker_c > 0, "no thread worker-c");
	keys("T");
	free(wait_screen(has_text, "thread id:", "the thread id prompt"));
	char tid[16];
	snprintf(tid, sizeof(tid), "%d", (int)worker_c);
	ck_assert_int_eq(TMUX(NULL, "send-keys", tid, "Enter"), 0);
	snprintf(want, sizeof(want), "thread %d worker-c", (int)worker_c);
	text = wait_screen(has_text, want, want);
	n = rows_of(text, rows, 64);
	ck_assert_msg(find_row(rows, n, "path_c2") &&
			      !find_row(rows, n, "path_b2"),
		      "worker-c's functions only:\n%s", text);
	free(text);
	keys("q");
	ck_assert_int_eq(wait_done(), 0);
	check_target_released(fixture);
}
END_TEST

static bool no_module_column(const char *text, const void *arg)
{
	struct screen_row rows[64];
	return !strstr(text, "MODULE") && rows_of(text, rows, 64) >= 1;
}

static bool first_row_is(const char *text, const void *arg)
{
	struct screen_row rows[64];
	return rows_of(text, rows, 64) >= 1 &&
	       strcmp(rows[0].function, arg) == 0;
}

/* A smaller terminal (KEY_RESIZE): the module's column goes, the table
 * fits, and Down/Up scroll it by a row (paused, so it holds still).  */
START_TEST(test_resize_scroll)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", LONG_RUN, NULL));
	start_top(fixture->pid, NULL);
	free(wait_screen(has_row, "chain_gamma", "chain_gamma's row"));
	keys("n");
	free(wait_screen(has_text, "sort: name", "sort by name"));
	keys("p");
	char *text = wait_screen(has_text, "paused", "paused");
	struct screen_row all[64];
	size_t nall = rows_of(text, all, 64);
	free(text);
	ck_assert_msg(nall >= 5, "too few rows to scroll");
	int rc = TMUX(NULL, "resize-window", "-x", "90", "-y", "9");
	ck_assert_msg(rc == 0, "tmux resize-window failed");
	text = wait_screen(no_module_column, NULL, "the narrower table");
	struct screen_row rows[64];
	size_t n = rows_of(text, rows, 64);
	ck_assert_msg(n == 4 && strcmp(rows[0].function, all[0].function) == 0,
		      "9 lines hold 4 rows from %s:\n%s", all[0].function,
		      text);
	free(text);
	keys("Down");
	text = wait_screen(first_row_is, all[1].function,
			   "the table scrolled");
	n = rows_of(text, rows, 64);
	ck_assert_msg(n == 4 && strcmp(rows[0].function, all[1].function) == 0,
		      "Down should start the table at %s:\n%s",
		      all[1].function, text);
	free(text);
	keys("Up");
	text = wait_screen(first_row_is, all[0].function, "the table back");
	n = rows_of(text, rows, 64);
	ck_assert_msg(n == 4 && strcmp(rows[0].function, all[0].function) == 0,
		      "Up should start the table at %s again:\n%s",
		      all[0].function, text);
	free(text);
	keys("q");
	ck_assert_int_eq(wait_done(), 0);
	check_terminal_restored();
}
END_TEST

/* ? shows the keys; any key goes back to the table.  */
START_TEST(test_help)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", LONG_RUN, NULL));
	start_top(fixture->pid, NULL);
	free(wait_screen(has_row, "chain_gamma", "chain_gamma's row"));
	keys("?");
	char *text = wait_screen(has_text, "this help", "the help");
	ck_assert_msg(strstr(text, "sort by self, total, name") &&
			      strstr(text, "pause"),
		      "the help does not list the keys:\n%s", text);
	free(text);
	keys("x");
	free(wait_screen(has_row, "chain_gamma", "the table again"));
	keys("q");
	ck_assert_int_eq(wait_done(), 0);
}
END_TEST

/* Ctrl-C ends the view as q does: exit 0, the terminal and the target
 * as they were.  */
START_TEST(test_ctrl_c)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", LONG_RUN, NULL));
	start_top(fixture->pid, NULL);
	free(wait_screen(has_row, "chain_gamma", "chain_gamma's row"));
	keys("C-c");
	ck_assert_int_eq(wait_done(), 0);
	check_terminal_restored();
	check_target_released(fixture);
}
END_TEST

/* The shell waits for a command: its last line is the bare prompt
 * (capture-pane drops the space after "$").  */
static bool at_prompt(const char *text, const void *arg)
{
	size_t len = strlen(text);
	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
		len--;
	return len >= 1 && text[len - 1] == '$' &&
	       (len == 1 || text[len - 2] == '\n');
}

static bool view_gone(const char *text, const void *arg)
{
	return !strstr(text, "cprof top");
}

/* Ctrl-Z in a shell with job control: the view gives the terminal back
 * and stops (the shell says Stopped) while the target runs on, no thread
 * held; fg draws it again and it samples on; q, exit 0, terminal as it
 * was.  */
START_TEST(test_ctrl_z)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", LONG_RUN, NULL));
	new_server("z");
	/* A shell that ends by itself if the test leaves it behind.  */
	int rc = TMUX(NULL, "new-session", "-d", "-x", "120", "-y", "40",
		      "timeout --foreground -k 5 300 env PS1='$ ' "
		      "HISTFILE=/dev/null bash --norc --noprofile -i");
	ck_assert_msg(rc == 0, "tmux new-session failed (%d)", rc);
	free(wait_screen(at_prompt, NULL, "the prompt"));
	char line[1024];
	snprintf(line, sizeof(line),
		 "timeout --foreground -k 5 300 %s/cprof-attach --top %d 2>%s/err",
		 CP_BUILD_DIR, (int)fixture->pid, run_dir);
	ck_assert_int_eq(TMUX(NULL, "send-keys", line, "Enter"), 0);
	free(wait_screen(has_row, "chain_gamma", "chain_gamma's row"));
	keys("C-z");
	/* The view is gone from the screen once cprof-attach stopped (the
	 * shell's "Stopped" may have been printed on the view's screen,
	 * left just after: the other processes of the job stop at once).  */
	free(wait_screen(view_gone, NULL, "the normal screen"));
	/* Stopped between two sampling steps: no thread of the target is
	 * held, it runs.  */
	ck_assert_msg(tu_wait_cpu_ticks(fixture->pid, 10, RUN_TIMEOUT_MS),
		      "the target does not run while cprof-attach is "
		      "stopped");
	ck_assert_int_eq(TMUX(NULL, "send-keys", "fg", "Enter"), 0);
	char *text = wait_screen(has_text, "running", "the view again");
	long long before = samples_of(text);
	free(text);
	free(wait_screen(samples_above, &before, "samples after fg"));
	keys("q");
	free(wait_screen(at_prompt, NULL, "the prompt after q"));
	snprintf(line, sizeof(line),
		 "echo $? >%s/status; stty -a >%s/stty; : >%s/done", run_dir,
		 run_dir, run_dir);
	ck_assert_int_eq(TMUX(NULL, "send-keys", line, "Enter"), 0);
	ck_assert_int_eq(wait_done(), 0);
	check_terminal_restored();
	check_target_released(fixture);
}
END_TEST

/* -d: the view ends by itself.  */
START_TEST(test_duration)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", LONG_RUN, NULL));
	start_top(fixture->pid, "-d 2");
	ck_assert_int_eq(wait_done(), 0);
	check_terminal_restored();
	check_target_released(fixture);
}
END_TEST

/* The target exits: the view says so and stays until q.  */
START_TEST(test_target_exits)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", "4", NULL));
	start_top(fixture->pid, NULL);
	char *text = wait_screen(has_text, "exited (q quits)", "the exit");
	free(text);
	keys("q");
	ck_assert_int_eq(wait_done(), 0);
	check_terminal_restored();
	ck_assert_msg(tu_proc_wait_exit(fixture, RUN_TIMEOUT_MS),
		      "the fixture did not exit");
	ck_assert_msg(WIFEXITED(fixture->status) &&
			      WEXITSTATUS(fixture->status) == 0,
		      "the fixture failed (status %#x)", fixture->status);
}
END_TEST

/* Not a terminal: one line, exit 2, the target never touched.  */
START_TEST(test_not_a_terminal)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", LONG_RUN, NULL));
	struct tu_run *run = tu_cprof_run(RUN_TIMEOUT_MS, "--top",
					  fixture->pid_text, NULL);
	ck_assert_msg(tu_run_exit_code(run) == 2, "exit %d, expected 2",
		      tu_run_exit_code(run));
	ck_assert_msg(tu_count_lines(run->err) == 1 &&
			      strncmp(run->err, "cprof-attach: ", 14) == 0 &&
			      strstr(run->err, "terminal"),
		      "expected one line about the terminal: %s", run->err);
	ck_assert_msg(run->out[0] == '\0', "stdout: %s", run->out);
	check_target_released(fixture);
}
END_TEST

/* Usage errors: exit 2 with one line, before touching the target.  */
static const char *const bad_usage[][4] = {
	{"--top=5", NULL},             /* a number is for --heap */
	{"--top", "-o", "x.folded", NULL},
	{"--top", "--format", "folded", NULL},
	{"--top", "--dump", NULL},
	{"--top", "-ex", "info threads", NULL},
};

START_TEST(test_bad_usage)
{
	struct tu_proc *fixture =
		ready(tu_fixture_start("chain-O0", LONG_RUN, NULL));
	const char *args[8];
	size_t n = 0;
	for (size_t i = 0; bad_usage[_i][i]; i++)
		args[n++] = bad_usage[_i][i];
	args[n++] = fixture->pid_text;
	args[n] = NULL;
	struct tu_run *run = tu_cprof_startv(args);
	ck_assert_msg(run != NULL, "cprof-attach could not be started");
	tu_run_wait(run, RUN_TIMEOUT_MS);
	ck_assert_msg(tu_run_exit_code(run) == 2 &&
			      tu_count_lines(run->err) == 1,
		      "%s: exit %d, expected 2 and one line: %s",
		      bad_usage[_i][0], tu_run_exit_code(run), run->err);
	ck_assert_msg(tu_task_tracer(fixture->pid, 0) == 0, "traced");
	/* A launched command would write over the view.  */
	run = tu_cprof_run(RUN_TIMEOUT_MS, "--top", "--", "true", NULL);
	ck_assert_msg(tu_run_exit_code(run) == 2, "--top -- true: exit %d",
		      tu_run_exit_code(run));
}
END_TEST

static Suite *top_suite(void)
{
	Suite *suite = suite_create("top");
	TCase *tc = tcase_create("data");
	tcase_add_test(tc, test_data_counts);
	tcase_add_test(tc, test_data_windows);
	suite_add_tcase(suite, tc);
	tc = tcase_create("screen");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_rows);
	tcase_add_test(tc, test_updates);
	tcase_add_test(tc, test_sort);
	tcase_add_test(tc, test_pause);
	tcase_add_test(tc, test_thread_filter);
	tcase_add_test(tc, test_help);
	tcase_add_test(tc, test_resize_scroll);
	tcase_add_test(tc, test_ctrl_c);
	tcase_add_test(tc, test_ctrl_z);
	tcase_add_test(tc, test_duration);
	tcase_add_test(tc, test_target_exits);
	suite_add_tcase(suite, tc);
	tc = tcase_create("errors");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_not_a_terminal);
	tcase_add_loop_test(tc, test_bad_usage, 0,
			    sizeof(bad_usage) / sizeof(*bad_usage));
	suite_add_tcase(suite, tc);
	return suite;
}

int main(void)
{
	SRunner *runner = srunner_create(top_suite());
	srunner_run_all(runner, CK_NORMAL);
	int failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
