/* Profiling a function (cp_session_sample_start_in, "profile FUNC"): a
 * thread is sampled only while it is inside FUNC, and its samples weigh
 * the CPU time it ran there, so their count matches the time the program
 * measures itself spending inside FUNC.  Against fixtures/inside.c: two
 * threads alternate between handler() (recursive every third call, and
 * calling helper()) and other(), and time their own outermost handler
 * calls with CLOCK_THREAD_CPUTIME_ID.  After the stop the target is
 * untraced, its code equal to its files, and it goes on computing right
 * (a return address of ours left on a stack would send a thread back
 * into handler's first instruction: a crash or a FAIL).  */
#include <check.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cprof/dump.h"
#include "cprof/error.h"
#include "cprof/session.h"
#include "testutil.h"

#define READY_TIMEOUT_MS 15000
#define ANSWER_TIMEOUT_MS 20000
#define HZ 499

static uint64_t monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void teardown(void)
{
	tu_cleanup();
}

static void warn_print(void *arg, const char *message)
{
	(void)arg;
	fprintf(stderr, "session warning: %s\n", message);
}

/* ------------------------------------------------------------ fixture */

struct inside {
	struct tu_proc *proc;
	int in;              /* its stdin */
};

/* What "total" answers.  */
struct total {
	uint64_t ns, calls, nested;
};

static void start_fixture(struct inside *fx)
{
	fx->proc = tu_fixture_start_stdin(&fx->in, "inside", "120", NULL);
	ck_assert_ptr_nonnull(fx->proc);
	ck_assert(tu_proc_wait_line(fx->proc, "ready", READY_TIMEOUT_MS));
	/* Going: some CPU time spent past "ready".  */
	ck_assert(tu_wait_cpu_ticks(fx->proc->pid, 2, READY_TIMEOUT_MS));
}

static void send_line(struct inside *fx, const char *line)
{
	size_t len = strlen(line);
	ck_assert_int_eq(write(fx->in, line, len), (ssize_t)len);
	ck_assert_int_eq(write(fx->in, "\n", 1), 1);
}

/* Lines of the fixture's output so far that start with PREFIX.  */
static size_t count_prefix(const struct inside *fx, const char *prefix)
{
	size_t n = 0, len = strlen(prefix);
	for (const char *p = fx->proc->output; p && *p;) {
		const char *nl = strchr(p, '\n');
		if (!nl)
			break;
		if (strncmp(p, prefix, len) == 0)
			n++;
		p = nl + 1;
	}
	return n;
}

/* Keep SESSION's sampling (if on) served while the fixture answers:
 * threads at our int3 wait for us.  */
static void serve_a_moment(struct cp_session *s, struct inside *fx)
{
	/* Not sampling: -CP_E_INVAL, nothing done.  */
	if (s)
		cp_session_sample_run(s, monotonic_ns() + 2000000, NULL, NULL);
	tu_proc_wait_line(fx->proc, "\001 no such line", 2);
}

/* Send LINE and wait for the next line starting with PREFIX (serving S
 * meanwhile); the line into LINE_OUT (CAP bytes).  */
static void ask(struct cp_session *s, struct inside *fx, const char *line,
		const char *prefix, char *line_out, size_t cap)
{
	size_t before = count_prefix(fx, prefix);
	send_line(fx, line);
	uint64_t give_up = monotonic_ns() + ANSWER_TIMEOUT_MS * 1000000ull;
	while (count_prefix(fx, prefix) == before &&
	       monotonic_ns() < give_up && fx->proc->stdout_fd >= 0)
		serve_a_moment(s, fx);
	ck_assert_msg(count_prefix(fx, prefix) > before,
		      "no \"%s\" after \"%s\"; output: %s", prefix, line,
		      fx->proc->output);
	/* The last such line.  */
	const char *last = NULL;
	size_t len = strlen(prefix);
	for (const char *p = fx->proc->output; p && *p;) {
		const char *nl = strchr(p, '\n');
		if (!nl)
			break;
		if (strncmp(p, prefix, len) == 0)
			last = p;
		p = nl + 1;
	}
	size_t n = (size_t)(strchr(last, '\n') - last);
	if (n >= cap)
		n = cap - 1;
	memcpy(line_out, last, n);
	line_out[n] = '\0';
}

static struct total ask_total(struct cp_session *s, struct inside *fx)
{
	char line[128];
	struct total t;
	ask(s, fx, "total", "total ", line, sizeof(line));
	ck_assert_int_eq(sscanf(line, "total %" SCNu64 " %" SCNu64
				      " %" SCNu64,
				&t.ns, &t.calls, &t.nested),
			 3);
	return t;
}

/* The fixture ends cleanly: "ok N", exit 0, no FAIL on the way.  */
static void finish_fixture(struct inside *fx)
{
	send_line(fx, "exit");
	close(fx->in);
	fx->in = -1;
	ck_assert(tu_proc_wait_exit(fx->proc, ANSWER_TIMEOUT_MS));
	ck_assert_msg(WIFEXITED(fx->proc->status) &&
			      WEXITSTATUS(fx->proc->status) == 0,
		      "fixture status %#x, output: %s", fx->proc->status,
		      fx->proc->output);
	ck_assert(tu_proc_has_line_prefix(fx->proc, "ok "));
	ck_assert_msg(!tu_proc_has_line_prefix(fx->proc, "FAIL"), "%s",
		      fx->proc->output);
}

/* Detached: no thread traced, no byte of ours left in its code.  */
static void check_untouched(pid_t pid)
{
	ck_assert_int_eq(tu_traced_tasks(pid), 0);
	char why[256];
	ck_assert_msg(tu_code_matches_files(pid, why, sizeof(why)), "%s", why);
}

/* ------------------------------------------------------------ profile */

/* Frames of STACK (by its locations' lines) named FUNCTION.  */
static size_t frames_named(const struct cp_profile *profile, uint32_t stack,
			   const char *function)
{
	size_t depth, n = 0;
	const uint32_t *locs = cp_profile_stack(profile, stack, &depth);
	for (size_t j = 0; j < depth; j++) {
		const struct cp_location *loc =
			cp_profile_location(profile, locs[j]);
		for (uint32_t k = 0; k < loc->nlines; k++)
			n += strcmp(cp_profile_string(profile,
						      loc->lines[k].function),
				    function) == 0;
	}
	return n;
}

/* Samples of PROFILE with at least MIN frames named FUNCTION (each
 * sample once, however many there are).  */
static uint64_t samples_with(const struct cp_profile *profile,
			     const char *function, size_t min)
{
	size_t n;
	const struct cp_sample *samples = cp_profile_samples(profile, &n);
	uint64_t count = 0;
	for (size_t i = 0; i < n; i++)
		if (frames_named(profile, samples[i].stack, function) >= min)
			count += samples[i].count;
	return count;
}

static void dump_profile(const struct cp_profile *profile)
{
	size_t n;
	const struct cp_sample *samples = cp_profile_samples(profile, &n);
	for (size_t i = 0; i < n && i < 30; i++) {
		size_t depth;
		const uint32_t *locs =
			cp_profile_stack(profile, samples[i].stack, &depth);
		fprintf(stderr, "  %" PRIu64 ":", (uint64_t)samples[i].count);
		for (size_t j = 0; j < depth; j++) {
			const struct cp_location *loc =
				cp_profile_location(profile, locs[j]);
			fprintf(stderr, " ");
			for (uint32_t k = 0; k < loc->nlines; k++)
				fprintf(stderr, "%s%s", k ? "/" : "",
					cp_profile_string(
						profile, loc->lines[k].function));
		}
		fprintf(stderr, "\n");
	}
}

static struct cp_session *attach(pid_t pid)
{
	struct cp_session_config config = {.warn = warn_print};
	struct cp_session *s = NULL;
	ck_assert_int_eq(cp_session_new(&config, &s), 0);
	ck_assert_int_eq(cp_session_attach(s, pid, NULL, 0, false, NULL), 0);
	return s;
}

/* Sample S until UNTIL (CLOCK_MONOTONIC ns).  */
static void run_until(struct cp_session *s, uint64_t until)
{
	enum cp_session_end end = CP_SESSION_STOPPED;
	while (monotonic_ns() < until) {
		ck_assert_int_eq(cp_session_sample_run(s, until, NULL, &end), 0);
		ck_assert_int_ne(end, CP_SESSION_EXITED);
	}
}

/* Sample S until at least N calls returned through us (both threads
 * have entered handler under our int3 by then, most likely), or 30 s.  */
static void run_until_returns(struct cp_session *s, uint64_t n)
{
	struct cp_session_in_stats in;
	for (int i = 0; i < 300; i++) {
		cp_session_in_stats(s, &in);
		if (in.returns >= n)
			return;
		run_until(s, monotonic_ns() + 100000000ull);
	}
}

/* Profile handler at 499 Hz for 2 s, or longer until the fixture spent
 * 0.2 s of CPU time inside (a loaded machine gives it little): every
 * sample inside it, their count what the fixture measured, recursion
 * once, entries the outermost calls.  */
START_TEST(samples_match_time_inside)
{
	struct inside fx;
	start_fixture(&fx);
	pid_t pid = fx.proc->pid;
	struct cp_session *s = attach(pid);
	struct cp_sampler_options so = {.frequency = HZ, .max_depth = 64};
	ck_assert_int_eq(cp_session_sample_start_in(s, "handler", &so), 0);
	/* The int3 is in: calls entered from now on are followed.  The
	 * fixture's totals count calls returned; read right after the
	 * start and right before the stop, each misses or adds at most
	 * the call each thread is in at either end.  */
	struct total a = ask_total(s, &fx);
	run_until(s, monotonic_ns() + 2000000000ull);
	struct total b = ask_total(s, &fx);
	for (int more = 0; b.ns - a.ns < 200000000u && more < 60; more++) {
		run_until(s, monotonic_ns() + 500000000ull);
		b = ask_total(s, &fx);
	}
	ck_assert_int_eq(cp_session_sample_stop(s), 0);
	struct cp_session_in_stats in;
	cp_session_in_stats(s, &in);
	const struct cp_profile *p = cp_session_profile(s);
	ck_assert_ptr_nonnull(p);
	uint64_t total = cp_profile_total(p);
	uint64_t with_handler = samples_with(p, "handler", 1);
	uint64_t recursive = samples_with(p, "handler", 2);
	uint64_t under_other = samples_with(p, "other", 1);
	uint64_t under_worker = samples_with(p, "worker", 1);
	uint64_t fixture_ns = b.ns - a.ns;
	uint64_t calls = b.calls - a.calls, nested = b.nested - a.nested;
	double period_ns = 1e9 / HZ;
	double expected = (double)fixture_ns / period_ns;
	fprintf(stderr,
		"profile handler: %" PRIu64 " samples (%" PRIu64
		" recursive), fixture %.3f s inside = %.1f periods; "
		"entries %" PRIu64 " returns %" PRIu64 " inside %.3f s; "
		"fixture calls %" PRIu64 " nested %" PRIu64 "; %s\n",
		total, recursive, (double)fixture_ns / 1e9, expected,
		in.entries, in.returns, (double)in.inside_ns / 1e9, calls,
		nested, tu_machine_load());
	if (with_handler != total || under_other || under_worker != total)
		dump_profile(p);
	/* Enough to compare (the fixture had CPU time inside).  */
	ck_assert_uint_ge(total, 50);
	/* Only inside handler: every stack has it, none is only under
	 * other.  */
	ck_assert_uint_eq(with_handler, total);
	ck_assert_uint_eq(under_other, 0);
	/* The frames above the outermost handler are the real ones: the
	 * return address we replaced is put back in each stack copy.  */
	ck_assert_uint_eq(under_worker, total);
	/* Recursion sampled, and such a sample counts once (the samples
	 * with handler, each counted once, are all the samples).  */
	ck_assert_uint_gt(recursive, 0);
	/* The count matches the fixture's own clock.  Each sample weighs
	 * the CPU time its thread ran inside since its last one, read from
	 * the same clock the fixture reads (the thread's sum_exec_runtime)
	 * at the entry and return traps, so the count is the time inside
	 * over the period up to: per thread, the time credited and not yet
	 * sampled at the stop (under a period), and at each end of the
	 * window the call each thread is in (counted by the fixture's
	 * totals and not by us, or the other way round): handler(2) is
	 * 180 units of 30 us, 5.4 ms, 2.7 periods; so 2 threads x (1 + 2 x
	 * 2.7) < 16 periods.  On top, 15 % for what a loaded machine does
	 * to the fixture's 30 us calibration (a call's length) and to the
	 * timing of the totals' reads.  */
	double tolerance = 0.15 * expected + 16;
	ck_assert_msg((double)total >= expected - tolerance &&
			      (double)total <= expected + tolerance,
		      "%" PRIu64 " samples, the fixture's time inside is %.1f "
		      "periods (tolerance %.1f)",
		      total, expected, tolerance);
	/* Our own measure of the calls returned agrees as well (the same
	 * ends: 2 threads x 2 calls of at most 5.4 ms).  */
	double ours = (double)in.inside_ns, theirs = (double)fixture_ns;
	ck_assert_msg(ours >= theirs * 0.85 - 22e6 &&
			      ours <= theirs * 1.15 + 22e6,
		      "inside_ns %.0f, fixture %.0f", ours, theirs);
	/* Entries are the outermost calls (the nested ones not counted):
	 * at most 2 calls per thread at each end apart from the fixture's
	 * count, far from calls + nested.  */
	ck_assert_uint_gt(nested, 10);
	ck_assert_msg(in.entries + 8 >= calls && in.entries <= calls + 8,
		      "entries %" PRIu64 ", fixture's outermost calls %" PRIu64,
		      in.entries, calls);
	/* At most one call per thread still open at the stop.  */
	ck_assert_uint_le(in.entries - in.returns, 2);
	cp_session_detach(s);
	check_untouched(pid);
	/* It goes on, computing right.  */
	struct total c = ask_total(NULL, &fx);
	struct total d;
	do
		d = ask_total(NULL, &fx);
	while (d.calls < c.calls + 20);
	cp_session_free(s);
	finish_fixture(&fx);
}
END_TEST

/* Stop while both threads are inside handler, their return addresses
 * ours: the stop gives them back, and the calls return normally — with
 * the session still attached and sampling (plainly) after, and once
 * detached.  */
START_TEST(stop_while_inside)
{
	struct inside fx;
	start_fixture(&fx);
	pid_t pid = fx.proc->pid;
	struct cp_session *s = attach(pid);
	struct cp_sampler_options so = {.frequency = HZ, .max_depth = 64};
	ck_assert_int_eq(cp_session_sample_start_in(s, "handler", &so), 0);
	run_until_returns(s, 10);
	char line[64];
	/* Each thread's next handler call waits in helper, asleep.  */
	ask(s, &fx, "park", "parked", line, sizeof(line));
	ck_assert_str_eq(line, "parked");
	run_until(s, monotonic_ns() + 200000000ull);
	struct cp_session_in_stats in;
	cp_session_in_stats(s, &in);
	/* Both inside, entered under our int3 (parking came after calls
	 * returned through us).  */
	ck_assert_uint_eq(in.entries - in.returns, 2);
	/* A backtrace meanwhile shows the real frames above handler: the
	 * return address we replaced is mended in its copy too.  */
	pid_t a = tu_find_task(pid, "inside-a");
	ck_assert_int_gt(a, 0);
	struct cp_dump *bt = NULL;
	ck_assert_int_eq(cp_session_backtrace(s, a, 64, &bt), 0);
	bool handler_seen = false, worker_above = false;
	for (size_t i = 0; i < bt->threads[0].nframes; i++) {
		const char *name = bt->threads[0].frames[i].frame->function;
		fprintf(stderr, "bt %zu: %s\n", i, name);
		if (strcmp(name, "handler") == 0)
			handler_seen = true;
		else if (handler_seen && strcmp(name, "worker") == 0)
			worker_above = true;
	}
	cp_dump_free(bt);
	ck_assert(handler_seen && worker_above);
	ck_assert_int_eq(cp_session_sample_stop(s), 0);
	struct cp_session_in_stats after;
	cp_session_in_stats(s, &after);
	ck_assert_uint_eq(after.entries, in.entries);
	/* The session goes on: plain sampling while the calls return.  */
	ck_assert_int_eq(cp_session_sample_start(s, &so), 0);
	ask(s, &fx, "unpark", "unparked", line, sizeof(line));
	struct total c = ask_total(s, &fx);
	struct total d;
	do
		d = ask_total(s, &fx);
	while (d.calls < c.calls + 20);
	ck_assert_int_eq(cp_session_sample_stop(s), 0);
	cp_session_in_stats(s, &after);
	ck_assert_uint_eq(after.entries, in.entries);
	/* A second profile of handler on the same attachment: parked
	 * again, then detached while inside (the detach gives the return
	 * addresses back).  */
	ck_assert_int_eq(cp_session_sample_start_in(s, "handler", &so), 0);
	run_until_returns(s, 10);
	ask(s, &fx, "park", "parked", line, sizeof(line));
	run_until(s, monotonic_ns() + 100000000ull);
	cp_session_in_stats(s, &in);
	ck_assert_uint_eq(in.entries - in.returns, 2);
	cp_session_detach(s);
	check_untouched(pid);
	ask(NULL, &fx, "unpark", "unparked", line, sizeof(line));
	c = ask_total(NULL, &fx);
	do
		d = ask_total(NULL, &fx);
	while (d.calls < c.calls + 20);
	cp_session_free(s);
	finish_fixture(&fx);
}
END_TEST

/* A fork inside handler, while the forking thread's return address is
 * ours: the child, which returns from handler, has neither our int3 nor
 * our return address.  */
START_TEST(fork_inside)
{
	struct inside fx;
	start_fixture(&fx);
	pid_t pid = fx.proc->pid;
	struct cp_session *s = attach(pid);
	struct cp_sampler_options so = {.frequency = HZ, .max_depth = 64};
	ck_assert_int_eq(cp_session_sample_start_in(s, "handler", &so), 0);
	run_until_returns(s, 10);
	char line[128];
	for (int i = 0; i < 3; i++) {
		ask(s, &fx, "fork", "child ", line, sizeof(line));
		ck_assert_str_eq(line, "child ok");
	}
	ck_assert_msg(!tu_proc_has_line_prefix(fx.proc, "FAIL"), "%s",
		      fx.proc->output);
	struct cp_session_in_stats in;
	cp_session_in_stats(s, &in);
	ck_assert_uint_gt(in.entries, 0);
	ck_assert_int_eq(cp_session_sample_stop(s), 0);
	cp_session_detach(s);
	check_untouched(pid);
	cp_session_free(s);
	finish_fixture(&fx);
}
END_TEST

/* --wall: threads asleep inside handler (parked in helper) are sampled
 * off the CPU, read without a stop, their stacks mended the same way;
 * the main thread, asleep outside, is not.  */
START_TEST(wall_inside)
{
	struct inside fx;
	start_fixture(&fx);
	pid_t pid = fx.proc->pid;
	struct cp_session *s = attach(pid);
	struct cp_sampler_options so = {.frequency = 97, .wall = true,
					.max_depth = 64};
	ck_assert_int_eq(cp_session_sample_start_in(s, "handler", &so), 0);
	run_until_returns(s, 10);
	char line[64];
	ask(s, &fx, "park", "parked", line, sizeof(line));
	ck_assert_int_eq(cp_session_reset(s), 0);
	run_until(s, monotonic_ns() + 500000000ull);
	struct cp_profile *p = cp_session_take_profile(s);
	ck_assert_ptr_nonnull(p);
	uint64_t total = cp_profile_total(p);
	uint64_t with_handler = samples_with(p, "handler", 1);
	uint64_t under_worker = samples_with(p, "worker", 1);
	uint64_t in_helper = samples_with(p, "helper", 1);
	if (with_handler != total || under_worker != total)
		dump_profile(p);
	/* Two threads asleep, 97 ticks a second, half a second: not
	 * asserted how many (a tick may come late), but some.  */
	ck_assert_uint_gt(total, 0);
	ck_assert_uint_eq(with_handler, total);
	ck_assert_uint_eq(under_worker, total);
	ck_assert_uint_eq(in_helper, total);
	ck_assert_uint_eq(samples_with(p, "main", 1), 0);
	cp_profile_free(p);
	ask(s, &fx, "unpark", "unparked", line, sizeof(line));
	ck_assert_int_eq(cp_session_sample_stop(s), 0);
	cp_session_detach(s);
	check_untouched(pid);
	cp_session_free(s);
	finish_fixture(&fx);
}
END_TEST

/* Refusals: a function that is not there, a second start, nothing
 * attached; the counters of the last profile stay after its stop.  */
START_TEST(refusals)
{
	struct cp_session_config config = {.warn = warn_print};
	struct cp_session *s = NULL;
	struct cp_sampler_options so = {.frequency = HZ, .max_depth = 64};
	ck_assert_int_eq(cp_session_new(&config, &s), 0);
	ck_assert_int_eq(cp_session_sample_start_in(s, "handler", &so),
			 -CP_E_GONE);
	struct cp_session_in_stats in;
	cp_session_in_stats(s, &in);
	ck_assert_uint_eq(in.entries, 0);
	cp_session_free(s);

	struct inside fx;
	start_fixture(&fx);
	pid_t pid = fx.proc->pid;
	s = attach(pid);
	ck_assert_int_eq(cp_session_sample_start_in(s, "no_such_function_x",
						    &so),
			 -CP_E_NOSYM);
	ck_assert_int_eq(cp_session_sample_start_in(s, "handler", &so), 0);
	ck_assert_int_eq(cp_session_sample_start_in(s, "handler", &so),
			 -CP_E_BUSY);
	ck_assert_int_eq(cp_session_sample_start(s, &so), -CP_E_BUSY);
	run_until_returns(s, 3);
	ck_assert_int_eq(cp_session_sample_stop(s), 0);
	cp_session_in_stats(s, &in);
	ck_assert_uint_gt(in.entries, 0);
	ck_assert_uint_gt(in.returns, 0);
	ck_assert_uint_gt(in.inside_ns, 0);
	/* Stopped: its byte is out while the session stays attached.  */
	char why[256];
	ck_assert_msg(tu_code_matches_files(pid, why, sizeof(why)), "%s", why);
	cp_session_detach(s);
	check_untouched(pid);
	cp_session_free(s);
	finish_fixture(&fx);
}
END_TEST

static Suite *funcprof_suite(void)
{
	Suite *suite = suite_create("funcprof");
	TCase *tc = tcase_create("profile a function");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, samples_match_time_inside);
	tcase_add_test(tc, stop_while_inside);
	tcase_add_test(tc, fork_inside);
	tcase_add_test(tc, wall_inside);
	tcase_add_test(tc, refusals);
	suite_add_tcase(suite, tc);
	return suite;
}

int main(void)
{
	SRunner *runner = srunner_create(funcprof_suite());
	srunner_run_all(runner, CK_NORMAL);
	int failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
