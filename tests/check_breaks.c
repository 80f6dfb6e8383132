/* Breakpoints through the session API (cprof/session.h, "breakpoints"
 * and "inspection"), driven directly like check_session: set at a
 * function or a source line, wait for hits, the held thread's stack,
 * continue; temporary, disabled, deleted; hits counted while nobody
 * waits; with sampling on, with heap tracing on; fork children; and
 * after every test the target untraced, alive, and its code byte for
 * byte what its files hold.  The fixture is fixtures/trigger.c.  */
#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cprof/addrspace.h"
#include "cprof/error.h"
#include "cprof/session.h"
#include "cprof/target.h"
#include "testutil.h"

#define READY_TIMEOUT_MS 15000
#define WAIT_NS 20000000000ull /* a hit comes every few ms; 20 s of slack
				* for a loaded machine */

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

/* The line of fixtures/trigger.c marked BODY_MARK (the first line of
 * handle_request's body).  */
static unsigned body_line(void)
{
	char *text = tu_read_file(CP_SOURCE_DIR "/fixtures/trigger.c");
	ck_assert_ptr_nonnull(text);
	unsigned line = 1;
	char *mark = strstr(text, "/* BODY_MARK */");
	ck_assert_ptr_nonnull(mark);
	for (char *p = text; p < mark; p++)
		line += *p == '\n';
	free(text);
	return line;
}

static struct cp_session *attach(pid_t pid)
{
	struct cp_session_config config = {.warn = warn_print};
	struct cp_session *s = NULL;
	ck_assert_int_eq(cp_session_new(&config, &s), 0);
	ck_assert_int_eq(cp_session_attach(s, pid, NULL, 0, false, NULL), 0);
	return s;
}

static struct tu_proc *start_trigger(int *stdin_fd)
{
	struct tu_proc *fx =
		stdin_fd ? tu_fixture_start_stdin(stdin_fd, "trigger", "120",
						  NULL)
			 : tu_fixture_start("trigger", "120", NULL);
	ck_assert_ptr_nonnull(fx);
	ck_assert(tu_proc_wait_line(fx, "ready", READY_TIMEOUT_MS));
	return fx;
}

/* The byte at ADDR in PID, read through /proc/PID/mem.  */
static int code_byte(pid_t pid, uint64_t addr)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	int fd = open(path, O_RDONLY);
	unsigned char byte = 0;
	ssize_t got = fd >= 0 ? pread(fd, &byte, 1, (off_t)addr) : -1;
	if (fd >= 0)
		close(fd);
	return got == 1 ? byte : -1;
}

static const struct cp_session_break *find_break(struct cp_session *s,
						 int id)
{
	size_t n;
	const struct cp_session_break *b = cp_session_breaks(s, &n);
	for (size_t i = 0; i < n; i++)
		if (b[i].id == id)
			return &b[i];
	return NULL;
}

/* Wait for the next hit; it must be breakpoint ID's.  */
static struct cp_session_hit wait_hit(struct cp_session *s, int id)
{
	enum cp_session_end end = CP_SESSION_DEADLINE;
	struct cp_session_hit hit = {0};
	ck_assert_int_eq(cp_session_wait(s, monotonic_ns() + WAIT_NS, NULL,
					 &end, &hit),
			 0);
	ck_assert_int_eq(end, CP_SESSION_BREAK);
	ck_assert_int_eq(hit.id, id);
	ck_assert_ptr_nonnull(cp_session_held(s));
	ck_assert_int_eq(cp_session_held(s)->tid, hit.tid);
	return hit;
}

/* The function name of frame I of the one thread of DUMP, or "".  */
static const char *frame_name(const struct cp_dump *dump, size_t i)
{
	const struct cp_dump_thread *t = &dump->threads[0];
	if (i >= t->nframes || !t->frames[i].frame ||
	    !t->frames[i].frame->function)
		return "";
	return t->frames[i].frame->function;
}

/* The held thread's stack: FUNCTIONS innermost first, from frame 0.  */
static void assert_held_stack(struct cp_session *s, const char *const *names,
			      size_t n)
{
	struct cp_dump *dump = NULL;
	ck_assert_int_eq(cp_session_backtrace(s, 0, 64, &dump), 0);
	ck_assert_uint_eq(dump->nthreads, 1);
	ck_assert_int_eq(dump->threads[0].tid, cp_session_held(s)->tid);
	ck_assert_uint_ge(dump->threads[0].nframes, n);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(strcmp(frame_name(dump, i), names[i]) == 0,
			      "frame %zu is %s, expected %s", i,
			      frame_name(dump, i), names[i]);
	/* The innermost frame is where the breakpoint is.  */
	ck_assert_uint_eq(dump->threads[0].frames[0].address,
			  cp_session_held(s)->pc);
	cp_dump_free(dump);
}

static const char *const request_stack[] = {"handle_request", "dispatch",
					    "main"};

/* Detach, and the target: untraced, alive, no failure of its checks, its
 * code as its files have it.  */
static void detach_and_check(struct cp_session *s, struct tu_proc *fx)
{
	cp_session_detach(s);
	ck_assert(!cp_session_attached(s));
	size_t n = 99;
	cp_session_breaks(s, &n);
	ck_assert_uint_eq(n, 0);
	cp_session_free(s);
	ck_assert_int_eq(tu_traced_tasks(fx->pid), 0);
	char why[256] = "";
	ck_assert_msg(tu_code_matches_files(fx->pid, why, sizeof(why)), "%s",
		      why);
	/* Still serving requests, each checked.  */
	long long ticks = tu_proc_cpu_ticks(fx->pid);
	ck_assert(ticks >= 0 && tu_wait_cpu_ticks(fx->pid, 2, READY_TIMEOUT_MS));
	ck_assert(tu_proc_state(fx->pid) != 'Z');
	tu_proc_wait_line(fx, "never", 100);
	ck_assert_msg(!tu_proc_has_line_prefix(fx, "FAIL"), "%s", fx->output);
}

START_TEST(break_function)
{
	struct tu_proc *fx = start_trigger(NULL);
	struct cp_session *s = attach(fx->pid);
	int id = 0;
	ck_assert_int_eq(cp_session_break_insert(s, "handle_request", false,
						 &id),
			 0);
	ck_assert_int_eq(id, 1);
	const struct cp_session_break *b = find_break(s, id);
	ck_assert_ptr_nonnull(b);
	ck_assert_str_eq(b->location, "handle_request");
	ck_assert_str_eq(b->function, "handle_request");
	ck_assert_uint_ne(b->addr, 0);
	ck_assert(b->enabled && !b->temporary);
	/* After the prologue, as a debugger puts it: on the body's first
	 * line.  */
	ck_assert_msg(strlen(b->file) > 9 &&
			      strcmp(b->file + strlen(b->file) - 9,
				     "trigger.c") == 0,
		      "file %s", b->file);
	ck_assert_uint_eq(b->line, body_line());
	ck_assert(strstr(b->module, "trigger") != NULL);
	uint64_t addr = b->addr;
	ck_assert_int_eq(code_byte(fx->pid, addr), 0xcc);

	for (int round = 0; round < 5; round++) {
		struct cp_session_hit hit = wait_hit(s, id);
		ck_assert_int_eq(hit.tid, fx->pid); /* the main thread */
		ck_assert_uint_eq(hit.pc, addr);
		struct user_regs_struct regs;
		ck_assert_int_eq(cp_session_held_regs(s, &regs), 0);
		ck_assert_uint_eq(regs.rip, addr);
		assert_held_stack(s, request_stack, 3);
		if (round == 0) {
			/* A dump of every thread while one is held: the
			 * held one where it stands.  */
			struct cp_dump *all = NULL;
			ck_assert_int_eq(cp_session_dump(s, 64, &all), 0);
			ck_assert_uint_eq(all->nthreads, 2);
			const struct cp_dump_thread *t = &all->threads[0];
			if (t->tid != hit.tid)
				t = &all->threads[1];
			ck_assert_int_eq(t->tid, hit.tid);
			ck_assert_uint_ge(t->nframes, 3);
			ck_assert_str_eq(t->frames[0].frame->function,
					 "handle_request");
			ck_assert_uint_eq(t->frames[0].address, addr);
			cp_dump_free(all);
		}
		/* Waiting again without continuing: the same hit.  */
		enum cp_session_end end;
		struct cp_session_hit again = {0};
		ck_assert_int_eq(cp_session_wait(s, 0, NULL, &end, &again), 0);
		ck_assert_int_eq(end, CP_SESSION_BREAK);
		ck_assert_int_eq(again.tid, hit.tid);
		ck_assert_int_eq(cp_session_continue(s), 0);
		ck_assert_ptr_null(cp_session_held(s));
	}
	ck_assert_int_eq(cp_session_continue(s), -CP_E_NOTHELD);
	struct cp_dump *dump = NULL;
	ck_assert_int_eq(cp_session_backtrace(s, 0, 64, &dump), -CP_E_NOTHELD);
	b = find_break(s, id);
	ck_assert_uint_ge(b->hits, 5);
	ck_assert_uint_eq(b->hits - b->passed, 5);
	detach_and_check(s, fx);
}
END_TEST

START_TEST(break_file_line)
{
	struct tu_proc *fx = start_trigger(NULL);
	struct cp_session *s = attach(fx->pid);
	char where[64];
	snprintf(where, sizeof(where), "fixtures/trigger.c:%u", body_line());
	int by_line = 0, by_name = 0;
	ck_assert_int_eq(cp_session_break_insert(s, where, false, &by_line), 0);
	const struct cp_session_break *b = find_break(s, by_line);
	ck_assert_str_eq(b->function, "handle_request");
	ck_assert_uint_eq(b->line, body_line());
	uint64_t addr = b->addr;
	/* The function's breakpoint is at the same address: one byte,
	 * shared.  */
	ck_assert_int_eq(cp_session_break_insert(s, "handle_request", false,
						 &by_name),
			 0);
	ck_assert_uint_eq(find_break(s, by_name)->addr, addr);
	wait_hit(s, by_line);
	assert_held_stack(s, request_stack, 3);
	ck_assert_int_eq(cp_session_continue(s), 0);
	/* Both counted the hit.  */
	ck_assert_uint_ge(find_break(s, by_name)->hits, 1);
	/* One deleted: the other's int3 stays, and takes the hits.  */
	ck_assert_int_eq(cp_session_break_delete(s, by_line), 0);
	ck_assert_int_eq(code_byte(fx->pid, addr), 0xcc);
	wait_hit(s, by_name);
	ck_assert_int_eq(cp_session_continue(s), 0);
	/* A file name matched only by its end, at a '/'.  */
	snprintf(where, sizeof(where), "rigger.c:%u", body_line());
	ck_assert_int_eq(cp_session_break_insert(s, where, false, NULL),
			 -CP_E_NOSYM);
	detach_and_check(s, fx);
}
END_TEST

START_TEST(temporary_disable_delete)
{
	struct tu_proc *fx = start_trigger(NULL);
	struct cp_session *s = attach(fx->pid);
	int id = 0;
	ck_assert_int_eq(cp_session_break_insert(s, "handle_request", true,
						 &id),
			 0);
	uint64_t addr = find_break(s, id)->addr;
	ck_assert(find_break(s, id)->temporary);
	wait_hit(s, id);
	/* Deleted once its hit was told, the byte back; the thread held
	 * until continued.  */
	ck_assert_ptr_null(find_break(s, id));
	ck_assert_int_ne(code_byte(fx->pid, addr), 0xcc);
	ck_assert_ptr_nonnull(cp_session_held(s));
	ck_assert_int_eq(cp_session_continue(s), 0);
	enum cp_session_end end;
	ck_assert_int_eq(cp_session_wait(s, monotonic_ns() + 200000000u, NULL,
					 &end, NULL),
			 0);
	ck_assert_int_eq(end, CP_SESSION_DEADLINE);

	/* Disabled: the byte back, no hit, none counted.  */
	ck_assert_int_eq(cp_session_break_insert(s, "handle_request", false,
						 &id),
			 0);
	ck_assert_int_eq(id, 2); /* never reused */
	ck_assert_int_eq(code_byte(fx->pid, addr), 0xcc);
	ck_assert_int_eq(cp_session_break_enable(s, id, false), 0);
	ck_assert(!find_break(s, id)->enabled);
	ck_assert_int_ne(code_byte(fx->pid, addr), 0xcc);
	uint64_t hits = find_break(s, id)->hits;
	ck_assert_int_eq(cp_session_wait(s, monotonic_ns() + 200000000u, NULL,
					 &end, NULL),
			 0);
	ck_assert_int_eq(end, CP_SESSION_DEADLINE);
	ck_assert_uint_eq(find_break(s, id)->hits, hits);
	/* Enabled again: hit.  */
	ck_assert_int_eq(cp_session_break_enable(s, id, true), 0);
	ck_assert_int_eq(code_byte(fx->pid, addr), 0xcc);
	wait_hit(s, id);
	ck_assert_int_eq(cp_session_continue(s), 0);
	/* Deleted: gone from the list, the byte back.  */
	ck_assert_int_eq(cp_session_break_delete(s, id), 0);
	ck_assert_int_ne(code_byte(fx->pid, addr), 0xcc);
	size_t n = 9;
	cp_session_breaks(s, &n);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(cp_session_break_delete(s, id), -CP_E_INVAL);
	ck_assert_int_eq(cp_session_break_enable(s, 77, true), -CP_E_INVAL);
	detach_and_check(s, fx);
}
END_TEST

/* Hits while nobody waits (sampling runs) are counted and passed; a
 * wait while sampling is on reports hits, and the profile still fills.
 * _i: 0 CPU time, 1 --wall (the held thread is off the CPU and looks
 * blocked: the sampler must pass it by).  */
START_TEST(break_while_sampling)
{
	struct tu_proc *fx = start_trigger(NULL);
	struct cp_session *s = attach(fx->pid);
	int id = 0;
	ck_assert_int_eq(cp_session_break_insert(s, "handle_request", false,
						 &id),
			 0);
	struct cp_sampler_options so = {.frequency = 199, .max_depth = 64,
					.wall = _i == 1};
	ck_assert_int_eq(cp_session_sample_start(s, &so), 0);
	enum cp_session_end end;
	/* Until the fixture made some requests through the int3.  */
	for (int i = 0; i < 100 && find_break(s, id)->hits < 10; i++)
		ck_assert_int_eq(cp_session_sample_run(
					 s, monotonic_ns() + 100000000u, NULL,
					 &end),
				 0);
	const struct cp_session_break *b = find_break(s, id);
	ck_assert_uint_ge(b->hits, 10);
	ck_assert_uint_eq(b->passed, b->hits);
	ck_assert_ptr_null(cp_session_held(s));

	for (int round = 0; round < 3; round++) {
		wait_hit(s, id);
		assert_held_stack(s, request_stack, 3);
		/* Another thread's stack, stopped for the moment.  */
		pid_t worker = tu_find_task(fx->pid, "worker");
		ck_assert_int_gt(worker, 0);
		struct cp_dump *dump = NULL;
		ck_assert_int_eq(cp_session_backtrace(s, worker, 64, &dump), 0);
		ck_assert_int_eq(dump->threads[0].tid, worker);
		bool crunch = false;
		for (size_t i = 0; i < dump->threads[0].nframes; i++)
			crunch |= strcmp(frame_name(dump, i), "crunch") == 0;
		ck_assert(crunch);
		cp_dump_free(dump);
		ck_assert_int_eq(cp_session_continue(s), 0);
	}
	ck_assert_int_eq(cp_session_backtrace(s, 999999, 64, &(struct cp_dump *){0}),
			 -CP_E_INVAL);
	ck_assert_int_eq(cp_session_sample_run(s, monotonic_ns() + 300000000u,
					       NULL, &end),
			 0);
	ck_assert_int_eq(cp_session_sample_stop(s), 0);
	ck_assert_uint_gt(cp_profile_total(cp_session_profile(s)), 0);
	detach_and_check(s, fx);
}
END_TEST

/* A breakpoint and heap tracing at once: both see their traps.  */
START_TEST(break_with_heap)
{
	struct tu_proc *fx = tu_fixture_start("heap-pairs", "1000000000", "3",
					      NULL);
	ck_assert_ptr_nonnull(fx);
	ck_assert(tu_wait_cpu_ticks(fx->pid, 2, READY_TIMEOUT_MS));
	struct cp_session *s = attach(fx->pid);
	struct cp_heap_options ho = {.max_depth = 32};
	ck_assert_int_eq(cp_session_heap_start(s, &ho), 0);
	int id = 0;
	ck_assert_int_eq(cp_session_break_insert(s, "pairs_leaf", false, &id),
			 0);
	for (int round = 0; round < 3; round++) {
		wait_hit(s, id);
		struct cp_dump *dump = NULL;
		ck_assert_int_eq(cp_session_backtrace(s, 0, 64, &dump), 0);
		ck_assert_str_eq(frame_name(dump, 0), "pairs_leaf");
		cp_dump_free(dump);
		ck_assert_int_eq(cp_session_continue(s), 0);
	}
	enum cp_session_end end;
	ck_assert_int_eq(cp_session_heap_run(s, monotonic_ns() + 300000000u,
					     NULL, &end),
			 0);
	ck_assert_int_eq(cp_session_heap_stop(s), 0);
	const struct cp_heap_summary *sum = cp_heap_summary(cp_session_heap(s));
	ck_assert_uint_gt(sum->allocations, 10);
	/* The breakpoint outlives heap tracing.  */
	wait_hit(s, id);
	ck_assert_int_eq(cp_session_continue(s), 0);
	ck_assert_uint_gt(find_break(s, id)->passed, 0);
	detach_and_check(s, fx);
}
END_TEST

/* The same with several heap tracer threads on a program of four
 * allocating threads: the breakpoint first brings every thread back to
 * the session's own tracer thread, parked meanwhile
 * (cp_heap_lanes_collapse), heap tracing goes on, and the program still
 * computes correctly, every block checked.  */
START_TEST(break_with_heap_tracers)
{
	int in = -1;
	struct tu_proc *fx = tu_fixture_start_stdin(&in, "heap-stress", "4",
						    "0", "forever", NULL);
	ck_assert_ptr_nonnull(fx);
	ck_assert(tu_proc_wait_line_prefix(fx, "ready", READY_TIMEOUT_MS));
	ck_assert_int_eq(write(in, "go\n", 3), 3);
	struct cp_session *s = attach(fx->pid);
	struct cp_heap_options ho = {.max_depth = 32, .tracers = 3};
	ck_assert_int_eq(cp_session_heap_start(s, &ho), 0);
	enum cp_session_end end;
	ck_assert_int_eq(cp_session_heap_run(s, monotonic_ns() + 200000000u,
					     NULL, &end),
			 0);
	int id = 0;
	ck_assert_int_eq(cp_session_break_insert(s, "stress_free", false, &id),
			 0);
	for (int round = 0; round < 3; round++) {
		wait_hit(s, id);
		struct cp_dump *dump = NULL;
		ck_assert_int_eq(cp_session_backtrace(s, 0, 64, &dump), 0);
		ck_assert_str_eq(frame_name(dump, 0), "stress_free");
		cp_dump_free(dump);
		ck_assert_int_eq(cp_session_continue(s), 0);
	}
	ck_assert_int_eq(cp_session_heap_run(s, monotonic_ns() + 200000000u,
					     NULL, &end),
			 0);
	ck_assert_int_eq(cp_session_heap_stop(s), 0);
	const struct cp_heap_summary *sum = cp_heap_summary(cp_session_heap(s));
	ck_assert_uint_eq(sum->tracers, 3);
	ck_assert_uint_gt(sum->allocations, 10);
	ck_assert_uint_eq(sum->repeat_frees, 0);
	detach_and_check(s, fx);
	ck_assert_int_eq(write(in, "exit\n", 5), 5);
	ck_assert(tu_proc_wait_line_prefix(fx, "ok ", READY_TIMEOUT_MS));
	ck_assert(tu_proc_wait_exit(fx, READY_TIMEOUT_MS));
	ck_assert(WIFEXITED(fx->status) && WEXITSTATUS(fx->status) == 0);
	close(in);
}
END_TEST

/* A child forked while the int3 is in runs the same code: it must not
 * die of SIGTRAP.  */
START_TEST(fork_child_clean)
{
	int in = -1;
	struct tu_proc *fx = start_trigger(&in);
	struct cp_session *s = attach(fx->pid);
	int id = 0;
	ck_assert_int_eq(cp_session_break_insert(s, "handle_request", false,
						 &id),
			 0);
	ck_assert_int_eq(write(in, "fork\n", 5), 5);
	/* Serve the target (the fork event, the parent's hits) until the
	 * parent says how its child ended.  */
	for (int i = 0; i < 2000 && !tu_proc_has_line_prefix(fx, "child ") &&
			!tu_proc_has_line_prefix(fx, "FAIL");
	     i++) {
		enum cp_session_end end;
		ck_assert_int_eq(cp_session_wait(s, monotonic_ns() + 20000000u,
						 NULL, &end, NULL),
				 0);
		if (end == CP_SESSION_BREAK)
			ck_assert_int_eq(cp_session_continue(s), 0);
		tu_proc_wait_line(fx, "child ok", 1);
	}
	ck_assert_msg(tu_proc_has_line_prefix(fx, "child ok"), "%s",
		      fx->output);
	close(in);
	detach_and_check(s, fx);
}
END_TEST

/* A thread held at a breakpoint when another thread execs: it is gone
 * with the old image, and the exec'ing thread, which takes its TID, is
 * not held for it (the new image runs to its end).  */
START_TEST(exec_while_held)
{
	/* Five generations of 600 ms: 4 and 2 exec from their main thread,
	 * 3 and 1 from their helper, 0 exits.  */
	struct tu_proc *fx = tu_fixture_start("execloop", "4", "600", NULL);
	ck_assert_ptr_nonnull(fx);
	ck_assert(tu_wait_cpu_ticks(fx->pid, 1, READY_TIMEOUT_MS));
	struct cp_session *s = attach(fx->pid);
	int id = 0;
	ck_assert_int_eq(cp_session_break_insert(s, "exec_work", false, &id),
			 0);
	struct cp_sampler_options so = {.frequency = 99, .max_depth = 16};
	ck_assert_int_eq(cp_session_sample_start(s, &so), 0);
	struct cp_addrspace *space = cp_session_addrspace(s);
	uint64_t epoch = cp_addrspace_epoch(space);
	enum cp_session_end end = CP_SESSION_DEADLINE;
	/* Served (hits passed) until the first exec.  */
	for (int i = 0; i < 3000 && cp_addrspace_epoch(space) == epoch; i++)
		ck_assert_int_eq(cp_session_sample_run(
					 s, monotonic_ns() + 20000000u, NULL,
					 &end),
				 0);
	ck_assert_uint_ne(cp_addrspace_epoch(space), epoch);
	uint64_t first = epoch;
	/* Hold the main thread of a generation whose helper execs (3, or
	 * 1 when generation 3's helper exec'd before its main thread was
	 * held: the waits pass the helper's hits, and on a loaded machine
	 * they may take its 600 ms).  Each exec is one epoch.  */
	bool held_main = false;
	for (int i = 0; i < 400 && !held_main; i++) {
		struct cp_session_hit hit = wait_hit(s, id);
		uint64_t generation = 4 - (cp_addrspace_epoch(space) - first);
		held_main = hit.tid == fx->pid && generation % 2 == 1;
		if (!held_main)
			ck_assert_int_eq(cp_session_continue(s), 0);
	}
	ck_assert(held_main);
	epoch = cp_addrspace_epoch(space);
	/* Its helper execs meanwhile (the other hits are passed).  */
	for (int i = 0; i < 3000 && cp_addrspace_epoch(space) == epoch &&
			end != CP_SESSION_EXITED;
	     i++)
		ck_assert_int_eq(cp_session_sample_run(
					 s, monotonic_ns() + 20000000u, NULL,
					 &end),
				 0);
	ck_assert_msg(cp_addrspace_epoch(space) != epoch || end == CP_SESSION_EXITED,
		      "no exec within 60 s");
	ck_assert_ptr_null(cp_session_held(s));
	/* The last generation runs to its end through the int3.  */
	for (int i = 0; i < 3000 && end != CP_SESSION_EXITED; i++)
		ck_assert_int_eq(cp_session_sample_run(
					 s, monotonic_ns() + 20000000u, NULL,
					 &end),
				 0);
	ck_assert_int_eq(end, CP_SESSION_EXITED);
	int status = cp_session_detach(s);
	cp_session_free(s);
	ck_assert(tu_proc_wait_line_prefix(fx, "ok ", READY_TIMEOUT_MS));
	ck_assert(status == -1 ||
		  (WIFEXITED(status) && WEXITSTATUS(status) == 0));
}
END_TEST

/* The second Ctrl-C: every wait given up (config.cancel), and still
 * every int3 taken out before the detach, a held thread let go.  */
START_TEST(cancel_still_restores)
{
	struct tu_proc *fx = start_trigger(NULL);
	static volatile sig_atomic_t cancel;
	cancel = 0;
	struct cp_session_config config = {.warn = warn_print,
					   .cancel = &cancel};
	struct cp_session *s = NULL;
	ck_assert_int_eq(cp_session_new(&config, &s), 0);
	ck_assert_int_eq(cp_session_attach(s, fx->pid, NULL, 0, false, NULL),
			 0);
	int id = 0, other = 0;
	ck_assert_int_eq(cp_session_break_insert(s, "handle_request", false,
						 &id),
			 0);
	ck_assert_int_eq(cp_session_break_insert(s, "crunch", false, &other),
			 0);
	enum cp_session_end end;
	ck_assert_int_eq(cp_session_wait(s, monotonic_ns() + WAIT_NS, NULL,
					 &end, NULL),
			 0);
	ck_assert_int_eq(end, CP_SESSION_BREAK);
	cancel = 1;
	cp_session_free(s);
	char why[256] = "";
	ck_assert_msg(tu_code_matches_files(fx->pid, why, sizeof(why)), "%s",
		      why);
	/* The threads the detach could not wait for stay ours until this
	 * process exits (cp_target_set_cancel); no int3 is left for them
	 * to meet when the kernel lets them go.  */
}
END_TEST

/* An exec replaces the image the int3 was in: the breakpoint is put
 * into the new image where its function is there; the images run
 * untouched to their end.  */
START_TEST(exec_rearms)
{
	/* Three generations of 400 ms each: the first execs from its
	 * helper thread, the second from its main thread.  */
	struct tu_proc *fx = tu_fixture_start("execloop", "2", "400", NULL);
	ck_assert_ptr_nonnull(fx);
	ck_assert(tu_wait_cpu_ticks(fx->pid, 1, READY_TIMEOUT_MS));
	struct cp_session *s = attach(fx->pid);
	int id = 0;
	ck_assert_int_eq(cp_session_break_insert(s, "exec_work", false, &id),
			 0);
	wait_hit(s, id);
	ck_assert_int_eq(cp_session_continue(s), 0);
	/* The hits from now on are passed (sampling serves the target,
	 * and tells the address space of each exec: a new epoch).  */
	struct cp_sampler_options so = {.frequency = 99, .max_depth = 16};
	ck_assert_int_eq(cp_session_sample_start(s, &so), 0);
	uint64_t epoch = cp_addrspace_epoch(cp_session_addrspace(s));
	enum cp_session_end end = CP_SESSION_DEADLINE;
	uint64_t hits_at_exec = 0;
	for (int i = 0; i < 1200 && end != CP_SESSION_EXITED; i++) {
		ck_assert_int_eq(cp_session_sample_run(
					 s, monotonic_ns() + 50000000u, NULL,
					 &end),
				 0);
		const struct cp_session_break *b = find_break(s, id);
		if (!hits_at_exec &&
		    cp_addrspace_epoch(cp_session_addrspace(s)) != epoch)
			hits_at_exec = b->hits;
		ck_assert_uint_eq(b->hits - b->passed, 1);
	}
	ck_assert_uint_gt(hits_at_exec, 0);
	ck_assert_int_eq(end, CP_SESSION_EXITED);
	/* In the last image: each exec made it pending (addr 0) before
	 * putting it back.  (How many hits came after the first exec the
	 * sampler saw depends on when it saw it: on a loaded machine, after
	 * the whole next generation ran.)  */
	ck_assert_uint_ne(find_break(s, id)->addr, 0);
	ck_assert_uint_ge(find_break(s, id)->hits, hits_at_exec);
	/* The fixture is this process's child: the target's end was
	 * collected by the session.  */
	int status = cp_session_detach(s);
	cp_session_free(s);
	ck_assert(tu_proc_wait_line_prefix(fx, "ok ", READY_TIMEOUT_MS));
	ck_assert(status == -1 ||
		  (WIFEXITED(status) && WEXITSTATUS(status) == 0));
}
END_TEST


/* The first byte of PID's executable code as mapped now (0: none).  */
static uint64_t first_code_addr(pid_t pid)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	uint64_t addr = 0;
	while (!addr && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 &&
		    perms[2] == 'x' && strstr(line, "execloop"))
			addr = lo;
	}
	fclose(f);
	return addr;
}

static int read_fresh(pid_t pid, uint64_t addr, uint8_t *byte)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = pread(fd, byte, 1, (off_t)addr);
	close(fd);
	return n == 1 ? 0 : -1;
}

/* A byte written after an execve that is not yet seen (its exec stop not
 * collected) must not reach the new image: the old one's int3 put back
 * after a step that the execve cut short, at an address that means
 * something else now.  Once the exec stop is collected, writes reach the
 * new image again.  */
START_TEST(exec_unseen_write)
{
	/* Its main thread execs after 300 ms.  */
	struct tu_proc *fx = tu_fixture_start("execloop", "2", "300", NULL);
	ck_assert_ptr_nonnull(fx);
	ck_assert(tu_wait_cpu_ticks(fx->pid, 1, READY_TIMEOUT_MS));
	struct cp_target *t = NULL;
	ck_assert_int_eq(cp_target_attach(fx->pid, NULL, 0,
					  CP_TARGET_FOLLOW_CLONES, &t, NULL),
			 0);
	uint64_t before = first_code_addr(fx->pid);
	ck_assert_uint_ne(before, 0);
	/* Wait for the exec stop without collecting it.  The execve waits
	 * for its helper thread, which it killed, to be reaped (a traced
	 * thread's exit is its tracer's to collect): reaped here, behind
	 * the target's back.  The leader's first report is then the exec
	 * stop (nothing of ours asks it to stop).  */
	pid_t tids[8];
	int ntids = tu_tasks(fx->pid, tids, 8);
	ck_assert_int_eq(ntids, 2);
	pid_t helper = tids[0] == fx->pid ? tids[1] : tids[0];
	int status;
	ck_assert_int_eq(waitpid(helper, &status, __WALL), helper);
	ck_assert(WIFEXITED(status));
	siginfo_t si;
	bool stopped = false;
	for (int i = 0; i < 3000 && !stopped; i++) {
		memset(&si, 0, sizeof(si));
		ck_assert_int_eq(waitid(P_PID, (id_t)fx->pid, &si,
					WSTOPPED | WEXITED | WNOHANG |
						WNOWAIT | __WALL),
				 0);
		stopped = si.si_pid == fx->pid;
		if (!stopped)
			usleep(10000);
	}
	ck_assert(stopped);
	ck_assert_int_eq(si.si_code, CLD_TRAPPED);
	uint64_t addr = first_code_addr(fx->pid);
	ck_assert_uint_ne(addr, 0);
	uint8_t orig = 0, now = 0, int3 = 0xcc;
	ck_assert_int_eq(read_fresh(fx->pid, addr, &orig), 0);
	ck_assert_int_lt(cp_target_write_mem(fx->pid, addr, &int3, 1), 0);
	ck_assert_int_eq(read_fresh(fx->pid, addr, &now), 0);
	ck_assert_uint_eq(now, orig);
	/* Collected: the new image is the one written to.  */
	cp_target_poll(t);
	ck_assert(cp_target_take_exec(t));
	ck_assert_uint_eq(cp_target_images(t), 1);
	ck_assert_int_eq(cp_target_write_mem(fx->pid, addr, &orig, 1), 0);
	ck_assert_int_eq(cp_target_read_mem(fx->pid, addr, &now, 1), 0);
	ck_assert_uint_eq(now, orig);
	cp_target_detach(t);
	ck_assert(tu_proc_wait_line_prefix(fx, "ok ", READY_TIMEOUT_MS));
	ck_assert(tu_proc_wait_exit(fx, READY_TIMEOUT_MS));
	ck_assert(WIFEXITED(fx->status) && WEXITSTATUS(fx->status) == 0);
}
END_TEST

/* A breakpoint on an instruction that faults (the target's own SIGSEGV,
 * which its handler survives): stepped past, the fault is the target's,
 * once — passed while sampling, and continued from a hold.  */
START_TEST(faulting_instruction)
{
	int in = -1;
	struct tu_proc *fx = start_trigger(&in);
	struct cp_session *s = attach(fx->pid);
	int id = 0;
	ck_assert_int_eq(cp_session_break_insert(s, "trigger_fault_insn",
						 false, &id),
			 0);
	struct cp_sampler_options so = {.frequency = 99, .max_depth = 16};
	ck_assert_int_eq(cp_session_sample_start(s, &so), 0);
	ck_assert_int_eq(write(in, "fault\n", 6), 6);
	enum cp_session_end end;
	for (int i = 0; i < 400 && !tu_proc_has_line_prefix(fx, "fault 1 ok");
	     i++) {
		ck_assert_int_eq(cp_session_sample_run(
					 s, monotonic_ns() + 20000000u, NULL,
					 &end),
				 0);
		tu_proc_wait_line(fx, "fault 1 ok", 1);
	}
	ck_assert_msg(tu_proc_has_line_prefix(fx, "fault 1 ok"), "%s",
		      fx->output);
	ck_assert_uint_eq(find_break(s, id)->hits, 1);
	ck_assert_uint_eq(find_break(s, id)->passed, 1);
	ck_assert_int_eq(write(in, "fault\n", 6), 6);
	wait_hit(s, id);
	ck_assert_int_eq(cp_session_continue(s), 0);
	for (int i = 0; i < 400 && !tu_proc_has_line_prefix(fx, "fault 2 ok");
	     i++) {
		ck_assert_int_eq(cp_session_sample_run(
					 s, monotonic_ns() + 20000000u, NULL,
					 &end),
				 0);
		tu_proc_wait_line(fx, "fault 2 ok", 1);
	}
	ck_assert_msg(tu_proc_has_line_prefix(fx, "fault 2 ok"), "%s",
		      fx->output);
	ck_assert_uint_eq(find_break(s, id)->hits, 2);
	close(in);
	detach_and_check(s, fx);
}
END_TEST

/* A launched command: a breakpoint set before its exec waits, pending,
 * and is put into the command's image at the exec, before its first
 * instruction.  */
START_TEST(launch_pending)
{
	struct cp_session *s = NULL;
	/* Forks followed from the launch on: the insertion holds no
	 * thread (which would take the exec event first).  */
	struct cp_session_config config = {.warn = warn_print,
					   .follow_forks = true};
	ck_assert_int_eq(cp_session_new(&config, &s), 0);
	char *argv[] = {CP_BUILD_DIR "/fixtures/trigger", "30", NULL};
	ck_assert_int_eq(cp_session_launch(s, argv), 0);
	pid_t pid = cp_session_pid(s);
	int id = 0;
	ck_assert_int_eq(cp_session_break_insert(s, "handle_request", true,
						 &id),
			 0);
	ck_assert_uint_eq(find_break(s, id)->addr, 0);
	wait_hit(s, id);
	assert_held_stack(s, request_stack, 3);
	ck_assert_int_eq(cp_session_continue(s), 0);
	cp_session_detach(s);
	cp_session_free(s);
	ck_assert_int_eq(tu_traced_tasks(pid), 0);
	char why[256] = "";
	ck_assert_msg(tu_code_matches_files(pid, why, sizeof(why)), "%s", why);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}
END_TEST

static bool collect(void *arg, const char *name)
{
	int *count = arg;
	if (strcmp(name, "handle_request") == 0)
		count[0]++;
	count[1]++;
	return true;
}

START_TEST(missing_and_inspection)
{
	struct cp_session *s = NULL;
	ck_assert_int_eq(cp_session_new(NULL, &s), 0);
	ck_assert_int_eq(cp_session_break_insert(s, "handle_request", false,
						 NULL),
			 -CP_E_GONE);
	ck_assert_int_eq(cp_session_attached_ns(s), 0);
	ck_assert_ptr_null(cp_session_addrspace(s));
	cp_session_free(s);

	struct tu_proc *fx = start_trigger(NULL);
	s = attach(fx->pid);
	ck_assert_uint_gt(cp_session_attached_ns(s), 0);
	ck_assert_ptr_nonnull(cp_session_addrspace(s));
	ck_assert_int_eq(cp_session_break_insert(s, "no_such_function", false,
						 NULL),
			 -CP_E_NOSYM);
	ck_assert_int_eq(cp_session_break_insert(s, "no_such_file.c:10",
						 false, NULL),
			 -CP_E_NOSYM);
	/* A system call cannot be stepped past from a trap hook.  */
	ck_assert_int_eq(cp_session_break_insert(s, "trigger_syscall", false,
						 NULL),
			 -CP_E_INVAL);
	/* A library's function is found too.  */
	int id = 0;
	ck_assert_int_eq(cp_session_break_insert(s, "nanosleep", false, &id),
			 0);
	ck_assert(strstr(find_break(s, id)->module, "libc") != NULL);
	ck_assert_int_eq(cp_session_break_delete(s, id), 0);
	/* Completion: every name with the prefix, once.  */
	int count[2] = {0, 0};
	ck_assert_int_eq(cp_session_functions(s, "handle_", collect, count),
			 count[1]);
	ck_assert_int_eq(count[0], 1);
	ck_assert_int_ge(count[1], 1);
	count[0] = count[1] = 0;
	ck_assert_int_gt(cp_session_functions(s, "", collect, count), 100);
	ck_assert_int_eq(count[0], 1);
	detach_and_check(s, fx);
}
END_TEST

static Suite *breaks_suite(void)
{
	Suite *suite = suite_create("breaks");
	const struct {
		const char *name;
		const TTest *test;
	} cases[] = {
		{"function", break_function},
		{"file_line", break_file_line},
		{"temporary_disable_delete", temporary_disable_delete},
		{"sampling", break_while_sampling},
		{"heap", break_with_heap},
		{"heap_tracers", break_with_heap_tracers},
		{"fork", fork_child_clean},
		{"missing", missing_and_inspection},
		{"cancel", cancel_still_restores},
		{"exec", exec_rearms},
		{"exec_unseen", exec_unseen_write},
		{"exec_held", exec_while_held},
		{"fault", faulting_instruction},
		{"launch", launch_pending},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_checked_fixture(tc, NULL, teardown);
		tcase_set_timeout(tc, 120);
		_tcase_add_test(tc, cases[i].test, 0, 0, 0,
				cases[i].test == break_while_sampling ? 2 : 1);
		suite_add_tcase(suite, tc);
	}
	return suite;
}

int main(void)
{
	SRunner *runner = srunner_create(breaks_suite());
	srunner_run_all(runner, CK_NORMAL);
	int failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
