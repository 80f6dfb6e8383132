/* Helpers for the end-to-end tests: start fixtures and cprof-attach as
 * child processes, wait for them with timeouts, parse folded profiles, and
 * read what /proc says about a process.
 *
 * Every process started here is remembered, and tu_cleanup() (the
 * teardown of every test case) kills and reaps whatever is still around.
 * When a Check assertion fails in fork mode the test child exits at once
 * without its teardown; Check then kills the test's whole process group,
 * and the children started here stay in that group for this reason.  They
 * also get PR_SET_PDEATHSIG, so they die with the test process in any
 * mode.
 *
 * Paths: fixtures are CP_BUILD_DIR/fixtures/NAME and the profiler is
 * CP_BUILD_DIR/cprof-attach (CP_BUILD_DIR comes from the makefile).
 *
 * Timeouts are in milliseconds.  */
#ifndef CPROF_TESTUTIL_H
#define CPROF_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* ------------------------------------------------------------ processes */

/* A child started by a test: a fixture (stdout on a pipe) or a helper.  */
struct tu_proc {
	pid_t pid;
	char pid_text[16];  /* PID in decimal, for argument lists */
	int stdout_fd;      /* read end of the child's stdout, -1 once at EOF */
	char *output;       /* everything read from its stdout; NUL-ended */
	size_t output_len;
	bool reaped;
	int status;         /* wait status, valid once REAPED */
};

/* Start fixture NAME (e.g. "chain-O0") with the arguments that follow, up
 * to a NULL, and its stdout on a pipe.  The fixture's stderr is ours, so
 * its complaints show up in the test log.  Returns NULL (after printing
 * why) when the fixture cannot be started.  Owned by the cleanup list:
 * free with tu_proc_kill or leave it to tu_cleanup.  */
struct tu_proc *tu_fixture_start(const char *name, ...)
	__attribute__((sentinel));

/* Read PROC's stdout until a line equal to LINE (without the newline)
 * has been received, or TIMEOUT_MS passed, or the pipe closed.  Lines
 * seen earlier count too.  True when the line was seen.  */
bool tu_proc_wait_line(struct tu_proc *proc, const char *line,
		       int timeout_ms);

/* True when a complete line starting with PREFIX has been received.  */
bool tu_proc_has_line_prefix(const struct tu_proc *proc, const char *prefix);

/* Wait up to TIMEOUT_MS for PROC to exit, reading its stdout to the end
 * meanwhile.  True when it exited (PROC->status then holds the wait
 * status); false on timeout (the process is left running).  */
bool tu_proc_wait_exit(struct tu_proc *proc, int timeout_ms);

/* SIGKILL PROC if it still runs, reap it, and free it.  NULL is fine.  */
void tu_proc_kill(struct tu_proc *proc);

/* Kill and reap every process started through this file and still
 * running, free every tu_proc and tu_run, remove temporary directories.
 * The teardown of each test case.  */
void tu_cleanup(void);

/* --------------------------------------------------------- cprof-attach */

/* One run of cprof-attach.  */
struct tu_run {
	pid_t pid;
	int status;          /* wait status once finished */
	bool finished;       /* exited (or was killed) and reaped */
	bool timed_out;      /* killed by tu_run_wait because of the timeout */
	char *out;           /* captured stdout, NUL-ended (after wait) */
	char *err;           /* captured stderr, NUL-ended (after wait) */
	double elapsed;      /* seconds from start to exit */
	/* Internal: the capture files and the start time.  */
	FILE *out_file, *err_file;
	uint64_t start_ns;
};

/* Start CP_BUILD_DIR/cprof-attach with the arguments that follow (not
 * including argv[0]), up to a NULL, stdout and stderr to anonymous
 * temporary files.  NULL (after printing why) when it cannot be started.
 * Owned by the cleanup list.  */
struct tu_run *tu_cprof_start(const char *arg, ...) __attribute__((sentinel));

/* The same with an argument array ending in NULL.  */
struct tu_run *tu_cprof_startv(const char *const args[]);

/* tu_cprof_startv, with the signals in IGNORED (0-terminated) ignored
 * (SIG_IGN) in cprof-attach from its start, as a shell script's
 * background job has SIGINT ignored.  */
struct tu_run *tu_cprof_startv_ignoring(const char *const args[],
					const int ignored[]);

/* Wait up to TIMEOUT_MS for RUN to exit; on timeout kill it with SIGKILL
 * and set RUN->timed_out.  Either way RUN is reaped and its output read.
 * Returns RUN->finished && !RUN->timed_out.  */
bool tu_run_wait(struct tu_run *run, int timeout_ms);

/* Start, then wait: tu_cprof_start + tu_run_wait.  Never NULL (a failure
 * to start is a failed run with exit status 127).  */
struct tu_run *tu_cprof_run(int timeout_ms, const char *arg, ...)
	__attribute__((sentinel));

/* The exit code of a finished run, or -1 when it was killed by a signal or
 * has not finished.  */
int tu_run_exit_code(const struct tu_run *run);

/* Print RUN (arguments are not kept: only status, timing and output, the
 * output cut to MAX_BYTES each) to stderr, for the log of a failing test.  */
void tu_run_dump(const struct tu_run *run, const char *what, size_t max_bytes);

/* ------------------------------------------------------- folded profiles */

/* One line of folded output: frames root first, and its count.  */
struct tu_stack {
	char **frames;       /* frames[0] is the root, frames[depth-1] the leaf */
	size_t depth;
	uint64_t count;
};

struct tu_profile {
	struct tu_stack *stacks;
	size_t count;        /* number of lines (distinct stacks) */
};

/* A NULL-terminated list of frame names, root first, for the matching
 * functions below: TU_FRAMES("main", "chain_alpha").  */
#define TU_FRAMES(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* Parse folded text: "frame;frame;...;frame COUNT" lines, the count after
 * the LAST space (frames may contain spaces: "1234 worker-a"); a first
 * line "# cprof sample_type: TYPE UNIT" is skipped.  Empty text is an
 * empty profile.  Returns NULL when a line is malformed (no
 * count, a count of 0 or not a number, an empty frame, a blank line), with
 * the reason in ERROR (ERROR_SIZE bytes).  Free with tu_profile_free.  */
struct tu_profile *tu_profile_parse(const char *text, char *error,
				    size_t error_size);

void tu_profile_free(struct tu_profile *profile);

/* Sum of all counts.  */
uint64_t tu_profile_total(const struct tu_profile *profile);

/* True when STACK holds the frames NAMES one right after the other, root
 * to leaf (anywhere in the stack).  */
bool tu_stack_has_contiguous(const struct tu_stack *stack,
			     const char *const names[]);

/* True when STACK holds NAMES in order root to leaf, possibly with other
 * frames between them.  */
bool tu_stack_has_subsequence(const struct tu_stack *stack,
			      const char *const names[]);

/* Samples whose stack holds NAMES contiguously / as a subsequence.  */
uint64_t tu_profile_count_contiguous(const struct tu_profile *profile,
				     const char *const names[]);
uint64_t tu_profile_count_subsequence(const struct tu_profile *profile,
				      const char *const names[]);

/* Samples with a frame equal to NAME anywhere / as the leaf.  */
uint64_t tu_profile_count_frame(const struct tu_profile *profile,
				const char *name);
uint64_t tu_profile_count_leaf(const struct tu_profile *profile,
			       const char *name);

/* Samples whose first (root) frame equals NAME.  */
uint64_t tu_profile_count_root(const struct tu_profile *profile,
			       const char *name);

/* The largest number of frames of any stack.  */
size_t tu_profile_max_depth(const struct tu_profile *profile);

/* Print the first MAX_LINES stacks (long stacks shortened) to stderr.  */
void tu_profile_dump(const struct tu_profile *profile, size_t max_lines);

/* ----------------------------------------------------------------- /proc */

/* The state letter of PID from /proc/PID/status ('R', 'S', 't', 'Z'...),
 * or 0 when the process is gone.  */
char tu_proc_state(pid_t pid);

/* TracerPid of thread TID of process PID (TID 0: /proc/PID/status, which
 * is the main thread's), 0 when untraced, -1 when unreadable.  */
pid_t tu_task_tracer(pid_t pid, pid_t tid);

/* The threads of PID, at most MAX into TIDS.  Returns how many threads
 * there are (may exceed MAX), or -1 when PID is gone.  */
int tu_tasks(pid_t pid, pid_t *tids, size_t max);

/* Thread TID of process PID's name (comm) into NAME (16 bytes).  False
 * when unreadable.  */
bool tu_task_name(pid_t pid, pid_t tid, char name[16]);

/* The TID of the thread of PID named NAME, 0 when there is none.  */
pid_t tu_find_task(pid_t pid, const char *name);

/* Number of threads of PID whose TracerPid is nonzero.  */
int tu_traced_tasks(pid_t pid);

/* Poll /proc every millisecond until every thread of PID has a nonzero
 * TracerPid (the profiler has seized them all), at most TIMEOUT_MS.  */
bool tu_wait_traced(pid_t pid, int timeout_ms);

/* The state letter of thread TID of PID from its status file (TID 0:
 * /proc/PID/status, the main thread's), or 0 when it is gone.  */
char tu_task_state(pid_t pid, pid_t tid);

/* Poll /proc every millisecond until the state letter of PID (TID 0),
 * of its thread TID, or of every thread of PID (TID -1) is one of STATES
 * ("T", "RS"), at most TIMEOUT_MS.  True when it got there; false on
 * timeout or when PID is gone.  */
bool tu_wait_state(pid_t pid, pid_t tid, const char *states, int timeout_ms);

/* Poll /proc every millisecond until thread TID of PID has a nonzero
 * TracerPid, at most TIMEOUT_MS.  */
bool tu_wait_task_traced(pid_t pid, pid_t tid, int timeout_ms);

/* CPU time PID has used so far, all threads, user and system, in clock
 * ticks (utime + stime of /proc/PID/stat; sysconf(_SC_CLK_TCK) a
 * second); -1 when PID is gone.  Threads that do not run add nothing:
 * the way to tell that a stopped process stayed stopped.  */
long long tu_proc_cpu_ticks(pid_t pid);

/* Poll /proc every millisecond until PID has used TICKS more clock ticks
 * of CPU time than at the call, at most TIMEOUT_MS: the way to tell that
 * a process really runs (a state letter is a snapshot: a traced thread
 * passes through 'R' on its way from one stop to the next).  */
bool tu_wait_cpu_ticks(pid_t pid, long long ticks, int timeout_ms);

/* The first PID of a kernel thread (PF_KTHREAD in /proc/PID/stat), or 0
 * when none is visible (e.g. in a PID namespace).  */
pid_t tu_find_kernel_thread(void);

/* ----------------------------------------------------------------- misc */

/* The next number of a xorshift32 sequence whose state is *STATE (never
 * 0): a fixed seed gives the same "random" moments on every run, so a
 * failure reproduces.  */
uint32_t tu_random(uint32_t *state);

/* Monotonic clock in nanoseconds.  */
uint64_t tu_now_ns(void);

/* Let MS milliseconds of wall time pass (poll(2) in a loop on the clock,
 * so signals do not cut it short).  Only for letting a profiler collect
 * samples, never for waiting on readiness.  */
void tu_delay_ms(int ms);

/* A child that has exited but is not reaped: a zombie.  Reaped by
 * tu_cleanup.  Returns its PID, or -1.  */
pid_t tu_make_zombie(void);

/* The PID of a process that certainly existed and was reaped (it may be
 * reused later, but not soon: PIDs are allocated round-robin).  */
pid_t tu_reaped_pid(void);

/* Fork a helper that PTRACE_SEIZEs TARGET and holds it until killed.
 * Returns the helper's PID once it is the tracer, or -1.  Killed by
 * tu_cleanup (before the target, as everything is killed newest first).  */
pid_t tu_hold_traced(pid_t target);

/* A new empty temporary directory, removed with its files by tu_cleanup.
 * Borrowed string, valid until tu_cleanup.  */
const char *tu_temp_dir(void);

/* Names of the entries of DIR (without "." and ".."), sorted, NULL-ended,
 * in *NAMES; the caller frees with tu_free_names.  Returns the count or -1
 * when DIR cannot be read.  */
int tu_dir_entries(const char *dir, char ***names);
void tu_free_names(char **names);

/* The whole of file PATH, NUL-ended; the caller frees it.  NULL when it
 * cannot be read.  */
char *tu_read_file(const char *path);

/* True when TEXT has a complete line starting with PREFIX.  */
bool tu_text_has_line_prefix(const char *text, const char *prefix);

/* A description of the machine's CPU supply for failure messages about
 * timing: "N CPUs online, load average A B C".  Borrowed static buffer.  */
const char *tu_machine_load(void);

/* Lines in TEXT (a last line without newline counts).  */
size_t tu_count_lines(const char *text);

/* ------------------------------------------- fixtures driven on stdin */

/* Start fixture NAME like tu_fixture_start (at most 8 arguments after
 * NAME, up to a NULL), with its stdin on a pipe as well: the write end
 * (close-on-exec, so no other child holds it) is stored in *STDIN_FD, and
 * the caller writes the fixture's input there and closes it (end of file
 * for the fixture).  Returns NULL (after printing why) when the fixture
 * cannot be started; *STDIN_FD is then -1.  */
struct tu_proc *tu_fixture_start_stdin(int *stdin_fd, const char *name, ...)
	__attribute__((sentinel));

/* Read PROC's stdout until a complete line starting with PREFIX has been
 * received (lines seen earlier count too), or TIMEOUT_MS passed, or the
 * pipe closed.  True when such a line was seen.  */
bool tu_proc_wait_line_prefix(struct tu_proc *proc, const char *prefix,
			      int timeout_ms);

/* Wait up to TIMEOUT_MS for RUN's stderr (so far) to hold a line that
 * contains TEXT, polling the capture file every millisecond.  RUN is not
 * reaped: tu_run_wait still collects it.  True when the line appeared;
 * false on timeout or when RUN exited without writing it.  */
bool tu_run_wait_stderr(struct tu_run *run, const char *text, int timeout_ms);

/* Compare every executable file-backed mapping of PID (r-xp) with its
 * file, read through /proc/PID/root: after a tracer that wrote
 * breakpoints left, not one byte of them may remain.  False at the first
 * difference (or when fewer than two mappings could be compared), with
 * the reason in WHY (WHY_SIZE bytes).  */
bool tu_code_matches_files(pid_t pid, char *why, size_t why_size);

#endif
