/* --wall on threads blocked in system calls (issue 11, item 7): a ptrace
 * stop of a thread asleep in epoll_wait, sigtimedwait or a socket call
 * with a timeout makes the call fail with EINTR, so cprof-attach --wall
 * must sample blocked threads without stopping them.
 *
 * The target is fixtures/blockers.c, built -O2 (CFI only) and -O0 with
 * frame pointers (where unwinding from the pc and stack pointer alone
 * needs rbp, recovered from the stack): eleven threads blocked in eleven
 * kinds of wait, each woken every 50 ms, each counting the EINTRs it
 * gets; the test asks for the counts on the fixture's stdin while
 * cprof-attach is attached and after it left.  What a user would check:
 *   - no EINTR the target would not see without us (the baseline, an
 *     unprofiled run, sees none);
 *   - the stacks name each wait's callers (blocker_main;blocker_epoll;
 *     epoll_wait), none cut short;
 *   - the target alive and computing correctly afterwards;
 *   - and, through the library, that blocked threads cost no ptrace
 *     stop: their samples are repeated or read from /proc.  */
#include <check.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/profile.h"
#include "cprof/sampler.h"
#include "cprof/symbols.h"
#include "cprof/target.h"
#include "cprof/unwinder.h"
#include "testutil.h"

/* Generous bounds: they only end a test that hangs.  */
#define READY_TIMEOUT_MS 10000
#define REPLY_TIMEOUT_MS 10000
#define RUN_TIMEOUT_MS 30000
#define EXIT_TIMEOUT_MS 15000
/* How long cprof-attach samples (wall time; not an assertion).  */
#define SAMPLE_MS 3000

/* The fixture's blockers, in the order of its "counts" answers.  */
static const char *const blockers[] = {
	"epoll", "poll", "select", "nanosleep", "sem_wait", "cond_wait",
	"read", "accept", "sem_timedwait", "sigtimedwait", "recv_timeo",
	"epoll_busy",
};
#define NBLOCKERS (sizeof(blockers) / sizeof(blockers[0]))
/* Its threads: the blockers, the waker, the control thread, main.  */
#define NTHREADS (NBLOCKERS + 3)

/* The fixture variants: CFI only, and frame pointers.  */
static const char *const variants[] = { "blockers-O2", "blockers-O0" };

/* Fail the test with a message, after printing RUN and PROFILE (either
 * may be NULL) for the log.  */
#define CHECK_RUN(cond, run, profile, ...)                                 \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: check failed: %s\n",       \
				__FILE__, __LINE__, #cond);                \
			if ((run) != NULL)                                 \
				tu_run_dump((run), __func__, 4000);        \
			if ((profile) != NULL)                             \
				tu_profile_dump((profile), 40);            \
			ck_abort_msg(__VA_ARGS__);                         \
		}                                                          \
	} while (0)

static const struct tu_profile *const no_profile = NULL;
static const struct tu_run *const no_run = NULL;

static void teardown(void)
{
	tu_cleanup();
}

/* ------------------------------------------------------------- helpers */

struct counts {
	uint64_t eintr[NBLOCKERS];
};

/* The fixture with its stdin on a pipe (*STDIN_FD), once "ready".  */
static struct tu_proc *start_fixture(const char *name, const char *seconds,
				     int *stdin_fd)
{
	struct tu_proc *fixture =
		tu_fixture_start_stdin(stdin_fd, name, seconds, NULL);
	ck_assert_msg(fixture != NULL, "%s could not be started", name);
	ck_assert_msg(tu_proc_wait_line(fixture, "ready", READY_TIMEOUT_MS),
		      "%s did not print \"ready\" (stdout so far: %s)", name,
		      fixture->output);
	return fixture;
}

static void send_line(int fd, const char *line)
{
	size_t len = strlen(line);
	ck_assert_msg(write(fd, line, len) == (ssize_t)len,
		      "cannot write to the fixture's stdin");
}

/* Ask FIXTURE for its EINTR counts so far ("counts TAG").  */
static struct counts ask_counts(struct tu_proc *fixture, int stdin_fd,
				const char *tag)
{
	char request[64], prefix[64];
	snprintf(request, sizeof(request), "counts %s\n", tag);
	snprintf(prefix, sizeof(prefix), "counts %s ", tag);
	send_line(stdin_fd, request);
	ck_assert_msg(tu_proc_wait_line_prefix(fixture, prefix,
					       REPLY_TIMEOUT_MS),
		      "no answer to \"counts %s\" (stdout so far: %s)", tag,
		      fixture->output);
	struct counts c;
	const char *p = strstr(fixture->output, prefix) + strlen(prefix);
	for (size_t i = 0; i < NBLOCKERS; i++) {
		char name[32];
		int used;
		ck_assert_msg(sscanf(p, "%31s %" SCNu64 "%n", name,
				     &c.eintr[i], &used) == 2 &&
				      strcmp(name, blockers[i]) == 0,
			      "malformed answer to \"counts %s\": %s", tag,
			      fixture->output);
		p += used;
	}
	return c;
}

/* Check that no blocker got an EINTR between BEFORE and AFTER, naming
 * each one that did.  */
static void expect_no_new_eintr(const struct counts *before,
				const struct counts *after, const char *when,
				const struct tu_run *run,
				const struct tu_profile *profile)
{
	char report[512] = "";
	size_t used = 0;
	uint64_t total = 0;
	for (size_t i = 0; i < NBLOCKERS; i++) {
		uint64_t n = after->eintr[i] - before->eintr[i];
		total += n;
		if (n && used < sizeof(report))
			used += (size_t)snprintf(report + used,
						 sizeof(report) - used,
						 " %s: %" PRIu64, blockers[i],
						 n);
	}
	CHECK_RUN(total == 0, run, profile,
		  "%" PRIu64 " EINTRs %s (an unprofiled run has none):%s",
		  total, when, report);
}

/* End FIXTURE's run ("quit") and check its final report: every blocker
 * ran, "ok" and exit 0: its waits, registers and memory were left intact;
 * and, when AFTER is not NULL, no EINTR since AFTER was asked (only
 * without a profiler: an EINTR of a detach may still be on its way to
 * the counter when the counts are asked).  Returns the final counts.  */
static struct counts expect_fixture_ok(struct tu_proc *fixture,
				       int stdin_fd,
				       const struct counts *after)
{
	struct counts final;
	send_line(stdin_fd, "quit\n");
	close(stdin_fd);
	ck_assert_msg(tu_proc_wait_exit(fixture, EXIT_TIMEOUT_MS),
		      "fixture %d did not exit after \"quit\"",
		      (int)fixture->pid);
	ck_assert_msg(tu_proc_has_line_prefix(fixture, "ok "),
		      "fixture %d did not report \"ok\"; its output: %s",
		      (int)fixture->pid, fixture->output);
	ck_assert_msg(WIFEXITED(fixture->status) &&
			      WEXITSTATUS(fixture->status) == 0,
		      "fixture %d ended with wait status %#x, expected exit 0",
		      (int)fixture->pid, (unsigned)fixture->status);
	for (size_t i = 0; i < NBLOCKERS; i++) {
		char prefix[64];
		uint64_t calls, eintr;
		snprintf(prefix, sizeof(prefix), "blocker %s calls ",
			 blockers[i]);
		const char *line = strstr(fixture->output, prefix);
		ck_assert_msg(line != NULL &&
				      sscanf(line + strlen(prefix),
					     "%" SCNu64 " eintr %" SCNu64,
					     &calls, &eintr) == 2,
			      "no final line for %s: %s", blockers[i],
			      fixture->output);
		ck_assert_msg(calls > 0, "%s never returned", blockers[i]);
		final.eintr[i] = eintr;
		ck_assert_msg(!after || eintr == after->eintr[i],
			      "%s: %" PRIu64 " EINTRs at the end, %" PRIu64
			      " when last asked", blockers[i], eintr,
			      after ? after->eintr[i] : 0);
	}
	return final;
}

/* ----------------------------------------------------------- baseline */

/* Unprofiled, no wait fails with EINTR: the baseline the profiled runs
 * are held to.  */
START_TEST(test_baseline)
{
	int in;
	struct tu_proc *fixture = start_fixture(variants[_i], "60", &in);
	struct counts start = ask_counts(fixture, in, "start");
	tu_delay_ms(1000);
	struct counts end = ask_counts(fixture, in, "end");
	struct counts zero = {{0}};
	expect_no_new_eintr(&zero, &start, "before any profiler came",
			    no_run, no_profile);
	expect_no_new_eintr(&start, &end, "in 1 s without a profiler",
			    no_run, no_profile);
	expect_fixture_ok(fixture, in, &end);
}
END_TEST

/* --------------------------------------------------------------- --wall */

/* Samples of blocker NAME's thread whose stack has blocker_main;
 * blocker_NAME and at least one frame below (the libc call it waits in).  */
static uint64_t blocker_samples(const struct tu_profile *profile,
				const char *name)
{
	char function[64];
	snprintf(function, sizeof(function), "blocker_%s", name);
	uint64_t n = 0;
	for (size_t i = 0; i < profile->count; i++) {
		const struct tu_stack *s = &profile->stacks[i];
		if (tu_stack_has_contiguous(
			    s, TU_FRAMES("blocker_main", function)) &&
		    strcmp(s->frames[s->depth - 1], function) != 0)
			n += s->count;
	}
	return n;
}

/* cprof-attach --wall -F 999 for SAMPLE_MS on the blockers: not one
 * EINTR while it is attached, samples and detaches; every wait with its
 * callers; the target correct afterwards.  */
START_TEST(test_wall_no_eintr)
{
	int in;
	struct tu_proc *fixture = start_fixture(variants[_i], "60", &in);
	struct counts before = ask_counts(fixture, in, "before");
	struct tu_run *run = tu_cprof_start("--wall", "-F", "999",
					    fixture->pid_text, NULL);
	ck_assert_msg(run != NULL, "cprof-attach could not be started");
	CHECK_RUN(tu_wait_traced(fixture->pid, READY_TIMEOUT_MS), run,
		  no_profile, "cprof-attach did not attach to every thread");
	struct counts attached = ask_counts(fixture, in, "attached");
	tu_delay_ms(SAMPLE_MS);
	/* Still attached: there is no -d; Ctrl-C ends the run.  */
	struct counts sampled = ask_counts(fixture, in, "sampled");
	kill(run->pid, SIGINT);
	CHECK_RUN(tu_run_wait(run, RUN_TIMEOUT_MS) &&
			  tu_run_exit_code(run) == 0,
		  run, no_profile, "cprof-attach did not end cleanly on SIGINT");
	char error[256];
	struct tu_profile *profile = tu_profile_parse(run->out, error,
						      sizeof(error));
	CHECK_RUN(profile != NULL, run, no_profile,
		  "the output is not a folded profile: %s", error);

	expect_no_new_eintr(&before, &attached, "while cprof-attach attached",
			    run, profile);
	expect_no_new_eintr(&attached, &sampled,
			    "while cprof-attach --wall -F 999 sampled", run,
			    profile);

	/* Every thread at every tick.  Each blocker has its share, always
	 * with the call it waits in (or works in) below it, and no stack is
	 * cut short.  */
	uint64_t total = tu_profile_total(profile);
	CHECK_RUN(total >= NTHREADS * 100, run, profile,
		  "only %" PRIu64 " samples in %d ms at 999 Hz", total,
		  SAMPLE_MS);
	for (size_t i = 0; i < NBLOCKERS; i++) {
		uint64_t n = blocker_samples(profile, blockers[i]);
		CHECK_RUN(n * NTHREADS * 2 >= total, run, profile,
			  "blocker_%s: %" PRIu64 " of %" PRIu64 " samples "
			  "name blocker_main;blocker_%s and the call below; "
			  "expected about 1/%zu", blockers[i], n, total,
			  blockers[i], (size_t)NTHREADS);
	}
	CHECK_RUN(tu_profile_count_contiguous(
			  profile, TU_FRAMES("blocker_main", "blocker_epoll",
					     "epoll_wait")) > 0,
		  run, profile, "no blocker_main;blocker_epoll;epoll_wait");
	CHECK_RUN(tu_profile_count_contiguous(
			  profile, TU_FRAMES("blocker_main", "blocker_epoll_busy",
					     "busy_work")) > 0 &&
			  tu_profile_count_contiguous(
				  profile, TU_FRAMES("blocker_epoll_busy",
						     "epoll_wait")) > 0,
		  run, profile, "blocker_epoll_busy is not seen both working "
		  "and waiting");
	CHECK_RUN(tu_profile_count_contiguous(
			  profile, TU_FRAMES("main", "main_wait")) > 0,
		  run, profile, "no main;main_wait");
	CHECK_RUN(tu_profile_count_frame(profile, "[truncated]") == 0, run,
		  profile, "stacks cut short: %" PRIu64 " samples",
		  tu_profile_count_frame(profile, "[truncated]"));
	tu_profile_free(profile);

	ck_assert_msg(tu_traced_tasks(fixture->pid) == 0,
		      "threads of %d still traced after cprof-attach exited",
		      (int)fixture->pid);
	/* Nothing but the detach happened after SAMPLED.  The stop that
	 * PTRACE_DETACH needs breaks these waits as well: the target
	 * module must mend them (waits.h) before it detaches.  Checked
	 * when CPROF_TEST_DETACH_EINTR is set, until it does.  */
	struct counts final = expect_fixture_ok(fixture, in, NULL);
	if (getenv("CPROF_TEST_DETACH_EINTR"))
		expect_no_new_eintr(&sampled, &final,
				    "when cprof-attach detached", no_run,
				    no_profile);
	else
		for (size_t i = 0; i < NBLOCKERS; i++)
			if (final.eintr[i] != sampled.eintr[i])
				fprintf(stderr, "note: %s: %" PRIu64 " EINTR "
					"at detach (not checked: set "
					"CPROF_TEST_DETACH_EINTR)\n",
					blockers[i],
					final.eintr[i] - sampled.eintr[i]);
}
END_TEST

/* CPU mode stops only running threads; one that blocks in epoll_wait as
 * the stop comes (epoll_busy, about once in a hundred stops) has its call
 * mended (waits.h) rather than failed.  */
START_TEST(test_cpu_no_eintr)
{
	int in;
	struct tu_proc *fixture = start_fixture("blockers-O2", "60", &in);
	struct tu_run *run = tu_cprof_start("-F", "999", fixture->pid_text,
					    NULL);
	ck_assert_msg(run != NULL, "cprof-attach could not be started");
	CHECK_RUN(tu_wait_traced(fixture->pid, READY_TIMEOUT_MS), run,
		  no_profile, "cprof-attach did not attach to every thread");
	struct counts attached = ask_counts(fixture, in, "attached");
	tu_delay_ms(SAMPLE_MS);
	struct counts sampled = ask_counts(fixture, in, "sampled");
	kill(run->pid, SIGINT);
	CHECK_RUN(tu_run_wait(run, RUN_TIMEOUT_MS) &&
			  tu_run_exit_code(run) == 0,
		  run, no_profile, "cprof-attach did not end cleanly on SIGINT");
	expect_no_new_eintr(&attached, &sampled,
			    "while cprof-attach -F 999 sampled", run,
			    no_profile);
	expect_fixture_ok(fixture, in, NULL);
}
END_TEST

/* ------------------------------------------------ the sampler's own view */

/* Sample fixture NAME with the library for 1.5 s of --wall at 999 Hz and
 * return the sampler's statistics.  */
static struct cp_sampler_stats sample_wall(const char *name)
{
	int in;
	struct tu_proc *fixture = start_fixture(name, "60", &in);
	struct cp_target *target;
	struct cp_unwinder *unwinder;
	struct cp_symbols *symbols;
	struct cp_symbols_options symbols_options = { .no_dwarf = true };
	int rc = cp_target_attach(fixture->pid, NULL, 0,
				  CP_TARGET_FOLLOW_CLONES, &target, NULL);
	ck_assert_msg(rc == 0, "attach: %s", cp_strerror(rc));
	ck_assert_int_eq(cp_unwinder_new(fixture->pid, &unwinder), 0);
	ck_assert_int_eq(cp_symbols_new(fixture->pid, &symbols_options,
					&symbols), 0);
	struct cp_profile *profile = cp_profile_new();
	ck_assert_ptr_nonnull(profile);
	struct cp_sampler_options options = {
		.frequency = 999,
		.duration = 1.5,
		.wall = true,
		.max_depth = 512,
		.unwind_mode = CP_UNWIND_SNAPSHOT,
	};
	struct cp_sampler_stats stats;
	rc = cp_sampler_run(target, unwinder, symbols, profile, &options,
			    &stats);
	ck_assert_msg(rc == 0, "cp_sampler_run: %s", cp_strerror(rc));
	cp_target_detach(target);
	cp_unwinder_free(unwinder);
	cp_symbols_free(symbols);
	cp_profile_free(profile);
	fprintf(stderr,
		"%s: %" PRIu64 " samples, %" PRIu64 " stops; without a stop: "
		"%" PRIu64 " repeated, %" PRIu64 " read (%" PRIu64
		" with rbp from the stack, %" PRIu64 " truncated), %" PRIu64
		" blocked threads stopped, %" PRIu64 " torn reads, %" PRIu64
		" EINTRs mended\n",
		name, stats.samples, stats.stopped.count,
		stats.samples_unchanged, stats.samples_unstopped,
		stats.rbp_recovered, stats.samples_truncated,
		stats.blocked_stops, stats.torn_reads, stats.eintr_undone);
	expect_fixture_ok(fixture, in, NULL);
	return stats;
}

/* Blocked threads cost no stop: nearly every sample is a repeat (the
 * thread did not run since its last one) or a read of /proc and a stack
 * copy; only threads caught running are stopped.  -O2: every read
 * unwinds completely from pc and stack pointer.  */
START_TEST(test_sampler_no_stops_O2)
{
	struct cp_sampler_stats s = sample_wall("blockers-O2");
	ck_assert_uint_gt(s.samples, NTHREADS * 100);
	ck_assert_uint_gt(s.samples_unchanged, s.samples / 2);
	ck_assert_uint_gt(s.samples_unstopped, 0);
	ck_assert_msg(s.stopped.count * 10 < s.samples,
		      "%" PRIu64 " of %" PRIu64 " samples stopped a thread",
		      s.stopped.count, s.samples);
	ck_assert_uint_eq(s.samples_truncated, 0);
	ck_assert_uint_eq(s.blocked_stops, 0);
	ck_assert_uint_eq(s.rbp_recovered, 0);
}
END_TEST

/* -O0 with frame pointers: unwinding from pc and stack pointer needs rbp
 * at the first frame-pointer frame; it is found on the stack, so no
 * blocked thread is stopped and no stack is cut short.  */
START_TEST(test_sampler_no_stops_O0)
{
	struct cp_sampler_stats s = sample_wall("blockers-O0");
	ck_assert_uint_gt(s.samples, NTHREADS * 100);
	ck_assert_uint_gt(s.samples_unchanged, s.samples / 2);
	ck_assert_uint_gt(s.rbp_recovered, 0);
	ck_assert_msg(s.stopped.count * 10 < s.samples,
		      "%" PRIu64 " of %" PRIu64 " samples stopped a thread",
		      s.stopped.count, s.samples);
	ck_assert_uint_eq(s.samples_truncated, 0);
	ck_assert_uint_eq(s.blocked_stops, 0);
}
END_TEST

/* ---------------------------------------------------- partial unwinds */

/* A full snapshot of thread NAME of FIXTURE, taken in a stop, and its
 * unwind.  The thread stays held (its stack does not change under the
 * unwinds that read it live) until the caller resumes it.  */
struct full_unwind {
	pid_t tid;
	struct cp_snapshot snap;
	uint64_t pcs[64];
	size_t n;
};

static void snapshot_thread(struct cp_target *target,
			    struct cp_unwinder *unwinder, pid_t pid,
			    const char *name, struct full_unwind *full)
{
	full->tid = tu_find_task(pid, name);
	ck_assert_msg(full->tid > 0, "no thread \"%s\" in %d", name,
		      (int)pid);
	ck_assert_int_eq(cp_target_stop(target, full->tid), 0);
	memset(&full->snap, 0, sizeof(full->snap));
	int rc = cp_target_snapshot(target, full->tid, &full->snap);
	ck_assert_msg(rc == 0, "snapshot: %s", cp_strerror(rc));
	full->n = cp_unwinder_unwind(unwinder, &full->snap, full->pcs, 64);
	ck_assert_uint_ge(full->n, 4);
}

/* The registers /proc/PID/task/TID/syscall gives: pc and stack pointer;
 * every other register of SNAP is overwritten with garbage, so that a
 * read of one would show.  */
static void keep_pc_and_sp(struct cp_snapshot *snap)
{
	struct user_regs_struct kept = snap->regs;
	memset(&snap->regs, 0xa5, sizeof(snap->regs));
	snap->regs.rip = kept.rip;
	snap->regs.rsp = kept.rsp;
}

static const uint32_t pc_and_sp =
	CP_UNWIND_REG(CP_REG_RIP) | CP_UNWIND_REG(CP_REG_RSP);

/* Threads of the blockers fixture whose waits survive a stop.  */
static const char *const harmless_threads[] = {
	"b-poll", "b-select", "b-nanosleep", "b-sem_wait", "b-cond_wait",
	"b-read", "b-sem_timedwait", "waker",
};

/* From pc and stack pointer alone, each thread blocked in a wait unwinds
 * to the same frames as from its full registers: -O2 (CFI) needs nothing
 * else; -O0 (frame pointers) needs rbp where no libc frame saved it, and
 * finds it on the stack.  Without a stack copy to search, such a thread
 * stops at its first frame-pointer frame and says that rbp was needed;
 * the frames found are the full unwind's.  */
START_TEST(test_partial_unwind)
{
	const char *name = variants[_i];
	bool frame_pointers = strstr(name, "O0") != NULL;
	int in;
	struct tu_proc *fixture = start_fixture(name, "60", &in);
	struct cp_target *target;
	struct cp_unwinder *unwinder;
	int rc = cp_target_attach(fixture->pid, NULL, 0,
				  CP_TARGET_FOLLOW_CLONES, &target, NULL);
	ck_assert_msg(rc == 0, "attach: %s", cp_strerror(rc));
	ck_assert_int_eq(cp_unwinder_new(fixture->pid, &unwinder), 0);
	size_t scanned = 0;
	for (size_t t = 0; t < sizeof(harmless_threads) /
				       sizeof(harmless_threads[0]); t++) {
		const char *thread = harmless_threads[t];
		struct full_unwind full;
		snapshot_thread(target, unwinder, fixture->pid, thread, &full);
		struct cp_snapshot partial_snap = full.snap;
		keep_pc_and_sp(&partial_snap);
		uint64_t pcs[64];

		/* Nothing to search for rbp first (the unwinder reads the
		 * held thread's stack live): does it need it?  */
		partial_snap.stack_len = 0;
		struct cp_unwind_partial partial = { .known = pc_and_sp };
		size_t n = cp_unwinder_unwind_partial(unwinder, &partial_snap,
						      &partial, pcs, 64);
		bool needs_rbp = partial.needed != 0;
		if (needs_rbp) {
			ck_assert_msg(frame_pointers, "%s %s: CFI code needed "
				      "registers %#x", name, thread,
				      partial.needed);
			ck_assert_uint_eq(partial.needed,
					  CP_UNWIND_REG(CP_REG_RBP));
			ck_assert(!partial.rbp_scanned && !partial.ended);
			ck_assert_uint_ge(n, 2);
			ck_assert_uint_lt(n, full.n);
		} else {
			ck_assert_msg(n == full.n, "%s %s: %zu frames, %zu from "
				      "full registers", name, thread, n,
				      full.n);
		}
		for (size_t i = 0; i < n; i++)
			ck_assert_msg(pcs[i] == full.pcs[i], "%s %s: frame %zu "
				      "is %#" PRIx64 ", %#" PRIx64 " from full "
				      "registers", name, thread, i, pcs[i],
				      full.pcs[i]);

		/* With the stack: every frame, rbp found if needed.  */
		partial_snap.stack_len = full.snap.stack_len;
		partial = (struct cp_unwind_partial){ .known = pc_and_sp };
		n = cp_unwinder_unwind_partial(unwinder, &partial_snap,
					       &partial, pcs, 64);
		ck_assert_msg(partial.needed == 0, "%s %s: the unwind needed "
			      "registers %#x", name, thread, partial.needed);
		ck_assert_int_eq(partial.rbp_scanned, needs_rbp);
		ck_assert(partial.ended);
		ck_assert_uint_eq(n, full.n);
		for (size_t i = 0; i < n; i++)
			ck_assert_msg(pcs[i] == full.pcs[i], "%s %s: frame %zu "
				      "is %#" PRIx64 ", %#" PRIx64 " from full "
				      "registers", name, thread, i, pcs[i],
				      full.pcs[i]);
		scanned += partial.rbp_scanned;
		cp_target_resume(target, full.tid);
		free(full.snap.stack);
	}
	if (frame_pointers)
		ck_assert_msg(scanned > 0, "%s: no thread needed rbp", name);
	cp_unwinder_free(unwinder);
	cp_target_detach(target);
	expect_fixture_ok(fixture, in, NULL);
}
END_TEST

/* ----------------------------------------------------------------- suite */

static TCase *new_case(Suite *suite, const char *name, double timeout)
{
	TCase *tcase = tcase_create(name);
	tcase_add_checked_fixture(tcase, NULL, teardown);
	tcase_set_timeout(tcase, timeout);
	suite_add_tcase(suite, tcase);
	return tcase;
}

static Suite *blocked_suite(void)
{
	Suite *suite = suite_create("blocked");
	size_t nvariants = sizeof(variants) / sizeof(variants[0]);
	TCase *tcase = new_case(suite, "baseline", 30);
	tcase_add_loop_test(tcase, test_baseline, 0, (int)nvariants);
	tcase = new_case(suite, "wall", 60);
	tcase_add_loop_test(tcase, test_wall_no_eintr, 0, (int)nvariants);
	tcase = new_case(suite, "cpu", 60);
	tcase_add_test(tcase, test_cpu_no_eintr);
	tcase = new_case(suite, "unwind", 30);
	tcase_add_loop_test(tcase, test_partial_unwind, 0, (int)nvariants);
	tcase = new_case(suite, "sampler", 60);
	tcase_add_test(tcase, test_sampler_no_stops_O2);
	tcase_add_test(tcase, test_sampler_no_stops_O0);
	return suite;
}

int main(void)
{
	SRunner *runner = srunner_create(blocked_suite());
	srunner_run_all(runner, CK_NORMAL);
	int failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? 1 : 0;
}
