/* End-to-end tests of cprof-attach's command language (-x FILE, -ex
 * COMMAND, --batch, --json, commands on standard input): real scripts
 * run by the real program against fixture processes, checked as a user
 * would check them: the profiles written, the text and JSON results,
 * the heap counts of a window against what the fixture says it
 * allocated there, the breakpoints' hits and backtraces, the exit status
 * and message of every error, and the target afterwards (untraced,
 * running, its code byte for byte its files).
 *
 * Each test starts its own fixture and waits for its "ready" line (never
 * a sleep); every run of cprof-attach has a timeout and the teardown
 * kills and reaps what is left (tu_cleanup).  No assertion depends on how
 * fast the machine is: sample counts are only asked to be nonzero, or
 * compared with a bound derived in the test's comment.  */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

/* Generous bounds: they only end a test that hangs.  */
#define READY_TIMEOUT_MS 10000   /* fixture start-up */
#define RUN_TIMEOUT_MS 60000     /* a script of a few seconds */
#define STEP_TIMEOUT_MS 30000    /* one command's answer on a pipe */

/* The arguments for a fixture that outlives the test (teardown kills it).  */
#define LONG_RUN "120"

/* Fail with a formatted message after printing RUN (may be NULL) for the
 * log.  */
#define CHECK_RUN(cond, run, ...)                                          \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: check failed: %s\n",       \
				__FILE__, __LINE__, #cond);                \
			if ((run) != NULL)                                 \
				tu_run_dump((run), __func__, 6000);        \
			ck_abort_msg(__VA_ARGS__);                         \
		}                                                          \
	} while (0)

static void teardown(void)
{
	tu_cleanup();
}

/* ------------------------------------------------------------- helpers */

static struct tu_proc *ready(struct tu_proc *fixture)
{
	ck_assert_msg(fixture != NULL, "the fixture could not be started");
	ck_assert_msg(tu_proc_wait_line(fixture, "ready", READY_TIMEOUT_MS),
		      "fixture %d did not print \"ready\" (stdout so far: %s)",
		      (int)fixture->pid, fixture->output);
	return fixture;
}

/* A path NAME in this test's temporary directory (malloc'd).  */
static char *temp_path(const char *name)
{
	static const char *dir;
	char *path;

	if (dir == NULL)
		dir = tu_temp_dir();
	ck_assert_ptr_nonnull(dir);
	ck_assert_int_gt(asprintf(&path, "%s/%s", dir, name), 0);
	return path;
}

/* Write the script file NAME (formatted text) in the temporary
 * directory; returns its path (malloc'd).  */
static __attribute__((format(printf, 2, 3))) char *
script_file(const char *name, const char *format, ...)
{
	char *path = temp_path(name);
	FILE *f = fopen(path, "w");
	va_list args;

	ck_assert_msg(f != NULL, "cannot create %s", path);
	va_start(args, format);
	vfprintf(f, format, args);
	va_end(args);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

/* Start cprof-attach with ARGS (NULL-ended) and its standard input on a
 * pipe whose write end goes to *STDIN_FD, or /dev/null when STDIN_FD is
 * NULL (the test's own input is never read by a script).  */
static struct tu_run *start_cprof(int *stdin_fd, const char *const args[])
{
	int fds[2];
	int saved = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
	struct tu_run *run;

	if (stdin_fd != NULL) {
		ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
	} else {
		fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		fds[1] = -1;
		ck_assert_int_ge(fds[0], 0);
	}
	/* The child inherits fd 0 (dup2 clears close-on-exec on the copy);
	 * ours is put back right after.  */
	ck_assert_int_ge(dup2(fds[0], STDIN_FILENO), 0);
	run = tu_cprof_startv(args);
	if (saved >= 0) {
		dup2(saved, STDIN_FILENO);
		close(saved);
	} else {
		close(STDIN_FILENO);
	}
	close(fds[0]);
	ck_assert_msg(run != NULL, "cannot start cprof-attach");
	if (stdin_fd != NULL)
		*stdin_fd = fds[1];
	return run;
}

/* Run cprof-attach with ARGS to its end (standard input /dev/null).  */
static struct tu_run *run_cprof(const char *const args[])
{
	struct tu_run *run = start_cprof(NULL, args);

	tu_run_wait(run, RUN_TIMEOUT_MS);
	CHECK_RUN(!run->timed_out, run, "cprof-attach did not finish in time");
	return run;
}

#define RUN(...) run_cprof((const char *const[]){ __VA_ARGS__, NULL })

static void expect_exit(const struct tu_run *run, int code)
{
	CHECK_RUN(tu_run_exit_code(run) == code, run,
		  "cprof-attach exited with %d, expected %d",
		  tu_run_exit_code(run), code);
}

/* What RUN has written to its standard output so far (malloc'd).  */
static char *stdout_so_far(const struct tu_run *run)
{
	size_t cap = 4096, len = 0;
	char *text = malloc(cap);
	ssize_t n;

	ck_assert_ptr_nonnull(text);
	for (;;) {
		if (cap - len < 2048) {
			cap *= 2;
			text = realloc(text, cap);
			ck_assert_ptr_nonnull(text);
		}
		n = pread(fileno(run->out_file), text + len, cap - len - 1,
			  (off_t)len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	text[len] = '\0';
	return text;
}

static unsigned count_of(const char *text, const char *needle)
{
	unsigned n = 0;

	for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

/* Write LINE and a newline to the pipe FD.  */
static void say(int fd, const char *line)
{
	size_t len = strlen(line);

	ck_assert_int_eq(write(fd, line, len), (ssize_t)len);
	ck_assert_int_eq(write(fd, "\n", 1), 1);
}

/* Type COMMAND into RUN's standard input (the pipe IN) and wait for the
 * output it gives: until what RUN writes from now on holds NEEDLE.
 * Returns that new output (malloc'd).  */
static char *command_answer(struct tu_run *run, int in, const char *command,
			    const char *needle)
{
	char *before = stdout_so_far(run);
	size_t offset = strlen(before);
	uint64_t deadline = tu_now_ns() + STEP_TIMEOUT_MS * 1000000ull;

	free(before);
	say(in, command);
	for (;;) {
		char *text = stdout_so_far(run);
		char *fresh = strdup(text + offset);

		free(text);
		ck_assert_ptr_nonnull(fresh);
		if (strstr(fresh, needle) != NULL)
			return fresh;
		free(fresh);
		CHECK_RUN(tu_now_ns() < deadline &&
				  waitpid(run->pid, NULL,
					  WNOHANG | WNOWAIT) != run->pid,
			  run, "no \"%s\" after \"%s\"", needle, command);
		poll(NULL, 0, 2);
	}
}

/* Every thread of FIXTURE untraced, the process running or sleeping as
 * before, and its code byte for byte its files: nothing of ours left.  */
static void expect_untouched(const struct tu_proc *fixture)
{
	char state = tu_proc_state(fixture->pid);
	int traced = tu_traced_tasks(fixture->pid);
	char why[512];

	ck_assert_msg(state == 'R' || state == 'S',
		      "fixture %d is in state '%c' after cprof-attach, "
		      "expected R or S", (int)fixture->pid,
		      state ? state : '0');
	ck_assert_msg(traced == 0,
		      "%d threads of fixture %d are still traced", traced,
		      (int)fixture->pid);
	ck_assert_msg(tu_code_matches_files(fixture->pid, why, sizeof(why)),
		      "the code of fixture %d is not its files': %s",
		      (int)fixture->pid, why);
}

/* The one line of RUN's stderr: "cprof-attach: " then MESSAGE at its
 * start (MESSAGE may be a prefix of the line's rest).  */
static void expect_message(const struct tu_run *run, const char *message)
{
	CHECK_RUN(strncmp(run->err, "cprof-attach: ", 14) == 0, run,
		  "the error does not start with \"cprof-attach: \"");
	CHECK_RUN(strncmp(run->err + 14, message, strlen(message)) == 0, run,
		  "the error is not \"cprof-attach: %s...\"", message);
	CHECK_RUN(tu_count_lines(run->err) == 1, run,
		  "the error is %zu lines, expected one",
		  tu_count_lines(run->err));
}

/* Parse every line of TEXT (JSON lines) with python3's json.loads into
 * the list R, then run the python CHECKS on it (asserts).  Fails the
 * test with python's complaint when a line does not parse or a check
 * does not hold.  */
static void json_check(const struct tu_run *run, const char *text,
		       const char *checks)
{
	char *data = temp_path("results.jsonl");
	char *errors = temp_path("python.err");
	char *program;
	FILE *f = fopen(data, "w");
	pid_t pid;
	int status;

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_gt(asprintf(&program,
		"import json, sys\n"
		"lines = open(sys.argv[1]).read().split('\\n')\n"
		"assert lines[-1] == '', 'the output does not end with a newline'\n"
		"R = []\n"
		"for n, l in enumerate(lines[:-1], 1):\n"
		"    try:\n"
		"        o = json.loads(l)\n"
		"    except ValueError as e:\n"
		"        sys.exit('line %%d is not JSON (%%s): %%r' %% (n, e, l))\n"
		"    assert isinstance(o, dict), 'line %%d is no object' %% n\n"
		"    R.append(o)\n"
		"C = [o for o in R if 'command' in o]\n"
		"E = [o for o in R if 'event' in o]\n"
		"for o in R:\n"
		"    assert ('command' in o) != ('event' in o), 'neither a result nor an event: %%r' %% o\n"
		"    if 'command' in o:\n"
		"        assert o.get('ok') in (True, False), 'no ok: %%r' %% o\n"
		"%s\n", checks), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(errors, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0)
			_exit(126);
		dup2(fd, STDERR_FILENO);
		dup2(fd, STDOUT_FILENO);
		execlp("python3", "python3", "-c", program, data, (char *)NULL);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char *why = tu_read_file(errors);

		CHECK_RUN(false, run, "the JSON results do not check out: %s",
			  why ? why : "(python3 said nothing)");
	}
	free(program);
	free(data);
	free(errors);
}

/* The folded file PATH, parsed; it must be a non-empty profile.  */
static struct tu_profile *read_profile(const struct tu_run *run,
				       const char *path)
{
	char *text = tu_read_file(path);
	char error[256];
	struct tu_profile *profile;

	CHECK_RUN(text != NULL, run, "%s was not written", path);
	profile = tu_profile_parse(text, error, sizeof(error));
	CHECK_RUN(profile != NULL, run, "%s is no folded profile: %s", path,
		  error);
	CHECK_RUN(tu_profile_total(profile) > 0, run, "%s is empty", path);
	free(text);
	return profile;
}

/* The four frames of the chain fixture's hot path.  */
#define CHAIN TU_FRAMES("main", "chain_alpha", "chain_beta", "chain_gamma")

/* Every stack of PROFILE runs through main, and nearly every one through
 * the whole chain: the chain fixture spends all but its loop's few
 * instructions in chain_gamma (check_e2e asks for 95 %, the same).  */
static void expect_chain(const struct tu_run *run,
			 const struct tu_profile *profile, const char *what)
{
	uint64_t total = tu_profile_total(profile);
	uint64_t chain = tu_profile_count_contiguous(profile, CHAIN);

	if (tu_profile_count_frame(profile, "main") != total ||
	    chain * 100 < total * 95)
		tu_profile_dump(profile, 20);
	CHECK_RUN(tu_profile_count_frame(profile, "main") == total, run,
		  "%s: a stack without main", what);
	CHECK_RUN(chain * 100 >= total * 95, run,
		  "%s: main;chain_alpha;chain_beta;chain_gamma in %" PRIu64
		  " of %" PRIu64 " samples, expected 95 %% at least", what,
		  chain, total);
}

/* ------------------------------------------------------------ sampling */

/* Two samplings in one attach, written to two files: both profiles of
 * the hot chain, each holding its own window's samples (write empties
 * the session's profile), and the target attached once: one "Attached"
 * line, and info inferior, run after both windows, has been attached
 * for at least their 1.5 s and at most the run of cprof-attach.  */
START_TEST(test_two_samplings)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-O0", LONG_RUN,
							 NULL));
	char *first = temp_path("first.folded");
	char *second = temp_path("second.folded");
	char *script = script_file("two.cprof",
				   "# two windows, one attach\n"
				   "attach %d\n"
				   "sample --wall for 1s\n"
				   "write %s\n"
				   "sample -F 199 --wall for 500ms\n"
				   "write %s --format folded\n"
				   "info inferior\n",
				   (int)fixture->pid, first, second);
	struct tu_run *run = RUN("-x", script, "--batch");
	struct tu_profile *a, *b;

	expect_exit(run, 0);
	CHECK_RUN(count_of(run->out, "Attached to process") == 1, run,
		  "not one \"Attached\" line");
	a = read_profile(run, first);
	b = read_profile(run, second);
	expect_chain(run, a, "the first window");
	expect_chain(run, b, "the second window");
	/* Each write says how many samples it wrote: its file's total.  */
	char said[256];
	snprintf(said, sizeof(said), "%" PRIu64 " samples written to %s",
		 tu_profile_total(a), first);
	CHECK_RUN(strstr(run->out, said) != NULL, run, "no \"%s\"", said);
	snprintf(said, sizeof(said), "%" PRIu64 " samples written to %s",
		 tu_profile_total(b), second);
	CHECK_RUN(strstr(run->out, said) != NULL, run, "no \"%s\"", said);
	const char *info = strstr(run->out, "running, attached ");
	double attached = 0;
	CHECK_RUN(info != NULL &&
			  sscanf(info, "running, attached %lf s", &attached) == 1,
		  run, "no info inferior line");
	CHECK_RUN(attached >= 1.5 && attached <= run->elapsed + 0.05, run,
		  "info inferior says attached %.1f s, after windows of 1.5 s "
		  "in a run of %.2f s", attached, run->elapsed);
	CHECK_RUN(run->err[0] == '\0', run, "cprof-attach complained");
	expect_untouched(fixture);
	tu_profile_free(a);
	tu_profile_free(b);
	free(first);
	free(second);
	free(script);
}
END_TEST

/* -p PID, then -ex commands, run in the order given with -x FILE: the
 * window between them is the file's.  */
START_TEST(test_ex_and_x_in_order)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-O0", LONG_RUN,
							 NULL));
	char *out = temp_path("mid.folded");
	char *script = script_file("mid.cprof", "echo file\\n\n"
				   "sample --wall for 300ms\n");
	char write[4200];
	struct tu_run *run;
	struct tu_profile *profile;

	snprintf(write, sizeof(write), "write %s", out);
	run = RUN("-p", fixture->pid_text, "-ex", "echo first\\n", "-x",
		  script, "-ex", write, "-ex", "echo last\\n", "--batch");
	expect_exit(run, 0);
	const char *f = strstr(run->out, "first\n");
	const char *x = strstr(run->out, "file\n");
	const char *l = strstr(run->out, "last\n");
	CHECK_RUN(f && x && l && f < x && x < l, run,
		  "the commands did not run in the order given");
	profile = read_profile(run, out);
	expect_chain(run, profile, "the window");
	expect_untouched(fixture);
	tu_profile_free(profile);
	free(out);
	free(script);
}
END_TEST

/* info inferior's time attached is a duration (cp_session_attached_ns is
 * the moment of the attach): at least the 1 s window
 * sampled in it, at most the run of cprof-attach; its overhead is the
 * CPU time over that, and $_overhead the same.  */
START_TEST(test_info_inferior_times)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-O0", LONG_RUN,
							 NULL));
	struct tu_run *run = RUN("-p", fixture->pid_text, "--json", "--batch",
				 "-ex", "sample for 1s", "-ex", "info inferior",
				 "-ex", "print $_overhead");
	char checks[1024];

	expect_exit(run, 0);
	snprintf(checks, sizeof(checks),
		 "i = C[1]\n"
		 "assert 1.0 <= i['attached_seconds'] <= %.3f, i\n"
		 "assert i['cpu_seconds'] <= i['attached_seconds'], i\n"
		 "o = 100 * i['cpu_seconds'] / i['attached_seconds']\n"
		 "assert abs(i['overhead_percent'] - o) <= 0.01 * o + 1e-3, (i, o)\n"
		 "assert abs(C[2]['value'] - o) <= 0.05 * o + 1e-3, (C[2], o)\n",
		 run->elapsed);
	json_check(run, run->out, checks);
	expect_untouched(fixture);
}
END_TEST

/* ------------------------------------------------------------- control */

/* if/else, while, define with $arg0 and $argc, set $x, print, printf,
 * echo, and the convenience variable $_samples after a sample (the
 * session's profile: what write would write).  */
START_TEST(test_control)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-O0", LONG_RUN,
							 NULL));
	char *script = script_file("control.cprof",
		"define greet\n"
		"  printf \"%%s has %%d args\\n\", \"$arg0\", $argc\n"
		"  if $argc > 1\n"
		"    echo more than one\\n\n"
		"  else\n"
		"    echo one only\\n\n"
		"  end\n"
		"end\n"
		"greet alpha beta\n"
		"greet gamma\n"
		"set $n = 0\n"
		"set $sum = 0\n"
		"while $n < 5\n"
		"  set $n = $n + 1\n"
		"  if $n == 3\n"
		"    loop_continue\n"
		"  end\n"
		"  set $sum = $sum + $n\n"
		"end\n"
		"print $sum\n"
		"print $n * 2 + 1\n"
		"print \"text\"\n"
		"set $ratio = 7 / 2.0\n"
		"printf \"ratio %%.2f hex %%x\\n\", $ratio, 255\n"
		"attach %d\n"
		"sample --wall for 500ms\n"
		"if $_samples > 0\n"
		"  echo sampled\\n\n"
		"else\n"
		"  echo nothing\\n\n"
		"end\n"
		"printf \"samples=%%d\\n\", $_samples\n"
		"detach\n",
		(int)fixture->pid);
	struct tu_run *run = RUN("-x", script, "--batch");
	unsigned long samples = 0;
	const char *at;

	expect_exit(run, 0);
	CHECK_RUN(strstr(run->out, "alpha has 2 args\nmore than one\n"
				   "gamma has 1 args\none only\n"
				   "12\n11\n\"text\"\nratio 3.50 hex ff\n") != NULL,
		  run, "the control commands printed something else");
	CHECK_RUN(strstr(run->out, "\nsampled\n") != NULL, run,
		  "$_samples was not > 0 after a sample");
	at = strstr(run->out, "samples=");
	CHECK_RUN(at && sscanf(at, "samples=%lu", &samples) == 1 && samples > 0,
		  run, "no samples=N line");
	char said[128];
	snprintf(said, sizeof(said), "; %lu in the session's profile", samples);
	CHECK_RUN(strstr(run->out, said) != NULL, run,
		  "$_samples is not the session's profile");
	CHECK_RUN(strstr(run->out, "Detached from process") != NULL, run,
		  "no detach");
	expect_untouched(fixture);
	free(script);
}
END_TEST

/* gdb puts a user command's arguments in as each line runs: a line that
 * does not run may name an argument that was not given, which is how a
 * define with optional arguments is written (if $argc > 1 ... $arg1).  */
START_TEST(test_define_optional_arg)
{
	char *script = script_file("optional.cprof",
		"define greet\n"
		"  if $argc > 1\n"
		"    echo $arg0 and $arg1\\n\n"
		"  else\n"
		"    echo $arg0 alone\\n\n"
		"  end\n"
		"end\n"
		"greet alpha beta\n"
		"greet gamma\n");
	struct tu_run *run = RUN("--batch", "-x", script);

	expect_exit(run, 0);
	CHECK_RUN(strcmp(run->out, "alpha and beta\ngamma alone\n") == 0, run,
		  "the optional argument");
	free(script);
}
END_TEST

/* file PROG + run + wait: the program runs to its end under the session,
 * and $_exitcode is its exit status.  */
START_TEST(test_run_exitcode)
{
	struct tu_run *run = RUN("--batch", "-ex", "file /bin/sh",
				 "-ex", "run -c \"exit 7\"",
				 "-ex", "wait",
				 "-ex", "printf \"code=%d\\n\", $_exitcode",
				 "-ex", "info inferior");
	expect_exit(run, 0);
	CHECK_RUN(strstr(run->out, "Started process ") != NULL, run,
		  "run said nothing");
	CHECK_RUN(strstr(run->out, "exited with code 7]") != NULL, run,
		  "wait did not see the program exit with 7");
	CHECK_RUN(strstr(run->out, "code=7\n") != NULL, run,
		  "$_exitcode is not 7");
}
END_TEST


/* --------------------------------------------------------------- json */

/* --json: one object per line, each command's name, "ok", its fields
 * (samples > 0 after a sample; print's value; the written file's
 * count), and the failing last command's error object: ok false, the
 * error text, file and line.  */
START_TEST(test_json)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-O0", LONG_RUN,
							 NULL));
	char *out = temp_path("json.folded");
	char *script = script_file("json.cprof",
				   "sample --wall for 500ms\n"
				   "print $_samples\n"
				   "info inferior\n"
				   "write %s\n"
				   "set $x = 6 * 7\n"
				   "echo hello\\n\n"
				   "printf \"%%d\\n\", $x\n"
				   "info threads\n"
				   "\n"
				   "# a comment, then the error\n"
				   "frob the knob\n"
				   "echo not reached\n",
				   out);
	char checks[4096], expected[4300];
	struct tu_run *run = RUN("-p", fixture->pid_text, "--json", "-x",
				 script, "--batch");
	struct tu_profile *profile;

	expect_exit(run, 1);
	profile = read_profile(run, out);
	snprintf(checks, sizeof(checks),
		 "names = [o['command'] for o in C]\n"
		 "assert names == ['sample', 'print', 'info', 'write', 'set', "
		 "'echo', 'printf', 'info', 'frob'], names\n"
		 "assert all(o['ok'] is True for o in C[:-1]), C\n"
		 "s = C[0]\n"
		 "assert s['samples'] > 0 and s['frequency'] == 99 and "
		 "s['wall'] is True, s\n"
		 "assert s['profile_samples'] == s['samples'], s\n"
		 "assert s['seconds'] >= 0.5, s\n"
		 "assert C[1]['value'] == s['samples'], C[1]\n"
		 "i = C[2]\n"
		 "assert i['what'] == 'inferior' and i['pid'] == %d and "
		 "i['state'] == 'running' and i['samples'] == s['samples'], i\n"
		 "w = C[3]\n"
		 "assert w['path'] == '%s' and w['format'] == 'folded' and "
		 "w['kind'] == 'samples' and w['samples'] == %" PRIu64 ", w\n"
		 "assert C[4]['variable'] == 'x' and C[4]['value'] == '42', C[4]\n"
		 "assert C[5]['text'] == 'hello\\n', C[5]\n"
		 "assert C[6]['text'] == '42\\n', C[6]\n"
		 "t = C[7]['threads']\n"
		 "assert len(t) == 1 and t[0]['tid'] == %d, t\n"
		 "e = C[8]\n"
		 "assert e['ok'] is False, e\n"
		 "assert e['error'].startswith('undefined command'), e\n"
		 "assert e['file'] == '%s' and e['line'] == 11, e\n"
		 "assert set(e) == {'command', 'ok', 'error', 'file', 'line'}, e\n"
		 "assert E == [], E\n",
		 (int)fixture->pid, out, tu_profile_total(profile),
		 (int)fixture->pid, script);
	json_check(run, run->out, checks);
	/* In JSON mode the error is said on stderr too, FILE:LINE first.  */
	snprintf(expected, sizeof(expected), "%s:11: frob: undefined command",
		 script);
	expect_message(run, expected);
	expect_untouched(fixture);
	tu_profile_free(profile);
	free(out);
	free(script);
}
END_TEST

/* --------------------------------------------------------------- heap */

/* The number after "KEY=" in the heap fixture's done line.  */
static unsigned long long done_count(const char *line, const char *key)
{
	char pattern[64];
	const char *at;

	snprintf(pattern, sizeof(pattern), " %s=", key);
	at = strstr(line, pattern);
	ck_assert_msg(at != NULL, "no %s= in \"%s\"", key, line);
	return strtoull(at + strlen(pattern), NULL, 10);
}

/* The integer field KEY of the JSON object on one line of TEXT: the
 * first "KEY": in it (the whole output is checked by python3 later).  */
static long long json_int(const char *text, const char *key)
{
	char pattern[64];
	const char *at;

	snprintf(pattern, sizeof(pattern), "\"%s\":", key);
	at = strstr(text, pattern);
	ck_assert_msg(at != NULL, "no %s in %s", key, text);
	return strtoll(at + strlen(pattern), NULL, 10);
}

/* The complete line of TEXT that begins with PREFIX (malloc'd).  */
static char *line_of(const char *text, const char *prefix)
{
	const char *p = text;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, prefix, strlen(prefix)) == 0)
			return strndup(p, strcspn(p, "\n"));
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return NULL;
}

/* One heap window typed into RUN (pipe IN): heap start, the fixture
 * (pipe FIX_IN) runs COMMAND, its NUMBER-th, heap stop.  The window's
 * totals must be exactly what the fixture says it allocated: heap-leak
 * windows makes no allocator call outside its commands (it reads and
 * writes with read(2) and write(2): heap-fixture.h), and the script's
 * idle wait serves the traps while the fixture works, so nothing else
 * can be in the window and nothing of it can be missed.  Returns the
 * fixture's done line (malloc'd).  */
static char *heap_window(struct tu_run *run, int in, struct tu_proc *fixture,
			 int fix_in, const char *command, unsigned number,
			 const char *site)
{
	char prefix[32], *answer, *done;

	answer = command_answer(run, in, "heap start", "\"ok\":");
	CHECK_RUN(strstr(answer, "\"ok\":true") != NULL &&
			  json_int(answer, "breakpoints") > 0,
		  run, "heap start: %s", answer);
	free(answer);
	say(fix_in, command);
	snprintf(prefix, sizeof(prefix), "done n=%u ", number);
	CHECK_RUN(tu_proc_wait_line_prefix(fixture, prefix, STEP_TIMEOUT_MS),
		  run, "the fixture did not finish \"%s\" (its output: %s)",
		  command, fixture->output);
	done = line_of(fixture->output, prefix);
	ck_assert_ptr_nonnull(done);
	answer = command_answer(run, in, "heap stop", "\"ok\":");
	CHECK_RUN(json_int(answer, "allocations") ==
				  (long long)(done_count(done, "malloc") +
					      done_count(done, "calloc") +
					      done_count(done, "realloc")) &&
			  json_int(answer, "alloc_bytes") ==
				  (long long)done_count(done, "alloc_bytes") &&
			  json_int(answer, "frees") ==
				  (long long)done_count(done, "free") &&
			  json_int(answer, "live_count") == 0 &&
			  json_int(answer, "live_bytes") == 0,
		  run, "window %u (%s): the heap says %s, the fixture \"%s\"",
		  number, command, answer, done);
	free(answer);
	/* The report of the window, and its top site: the fixture's
	 * function of the command.  */
	char write[4200];
	char *path = temp_path(command);
	snprintf(write, sizeof(write), "write %s --format report", path);
	answer = command_answer(run, in, write, "\"ok\":");
	CHECK_RUN(strstr(answer, "\"kind\":\"heap\"") != NULL, run,
		  "%s: %s", write, answer);
	free(answer);
	char *report = tu_read_file(path);
	CHECK_RUN(report != NULL && strstr(report, site) != NULL, run,
		  "the report of window %u does not name %s: %s", number,
		  site, report ? report : "(none)");
	free(report);
	free(path);
	return done;
}

/* heap start/stop windows on one attachment, typed into cprof-attach's
 * standard input while the test makes the fixture allocate: each
 * window's totals are the fixture's count for that window alone, the
 * sampling between them works, and when the input ends the target is
 * left untraced, its code as in its files, still working.  */
START_TEST(test_heap_windows)
{
	int fix_in = -1, in = -1;
	struct tu_proc *fixture = ready(tu_fixture_start_stdin(
		&fix_in, "heap-leak", "windows", NULL));
	struct tu_run *run = start_cprof(&in, (const char *const[]){
		"-p", fixture->pid_text, "--json", NULL });
	char *small, *grow, *answer, *done3, checks[2048];

	small = heap_window(run, in, fixture, fix_in, "small", 1,
			    "small_allocs");
	answer = command_answer(run, in, "sample --wall for 300ms", "\"ok\":");
	CHECK_RUN(strstr(answer, "\"ok\":true") != NULL, run,
		  "sampling between the windows: %s", answer);
	free(answer);
	grow = heap_window(run, in, fixture, fix_in, "grow", 2,
			   "grow_buffer");
	close(in);
	tu_run_wait(run, RUN_TIMEOUT_MS);
	CHECK_RUN(!run->timed_out, run, "the end of the input did not end it");
	expect_exit(run, 0);
	CHECK_RUN(run->err[0] == '\0', run, "cprof-attach complained");
	/* Every line is JSON, and the two heap stops are the windows'.  */
	snprintf(checks, sizeof(checks),
		 "h = [o for o in C if o['command'] == 'heap' and 'frees' in o]\n"
		 "assert len(h) == 2, h\n"
		 "assert (h[0]['allocations'], h[0]['frees']) == (%llu, %llu), h\n"
		 "assert (h[1]['allocations'], h[1]['frees']) == (%llu, %llu), h\n",
		 done_count(small, "malloc"), done_count(small, "free"),
		 done_count(grow, "malloc") + done_count(grow, "realloc"),
		 done_count(grow, "free"));
	json_check(run, run->out, checks);
	expect_untouched(fixture);
	/* Untraced, it still computes.  */
	say(fix_in, "small");
	ck_assert(tu_proc_wait_line_prefix(fixture, "done n=3 ",
					   STEP_TIMEOUT_MS));
	done3 = line_of(fixture->output, "done n=3 ");
	ck_assert_uint_eq(done_count(done3, "malloc"), 1000);
	close(fix_in);
	free(done3);
	free(small);
	free(grow);
}
END_TEST

/* ------------------------------------------------------------- errors */

/* An unknown command: exit 1, "FILE:LINE: frob: undefined command", the
 * commands after it not run (--batch), the target untouched.  */
START_TEST(test_error_unknown_command)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-O0", LONG_RUN,
							 NULL));
	char *script = script_file("unknown.cprof", "echo before\\n\n"
				   "\n"
				   "frob\n"
				   "echo after\\n\n");
	struct tu_run *run = RUN("-p", fixture->pid_text, "-x", script,
				 "--batch");
	char expected[4200];

	expect_exit(run, 1);
	snprintf(expected, sizeof(expected), "%s:3: frob: undefined command",
		 script);
	expect_message(run, expected);
	CHECK_RUN(strcmp(run->out, "before\n") == 0, run,
		  "the output is not just the line before the error");
	expect_untouched(fixture);
	free(script);
}
END_TEST

/* --batch with -ex: the first error ends the run, a later -ex is not
 * run, and the message names -ex and the command's number.  */
START_TEST(test_error_batch_stops)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-O0", LONG_RUN,
							 NULL));
	struct tu_run *run = RUN("-p", fixture->pid_text, "--batch",
				 "-ex", "echo one\\n", "-ex", "print 1 +",
				 "-ex", "echo two\\n");

	expect_exit(run, 1);
	CHECK_RUN(strcmp(run->out, "one\n") == 0, run,
		  "a command after the error ran");
	expect_message(run, "-ex:2: print: ");
	expect_untouched(fixture);
}
END_TEST

/* The last command's status is the run's: 0 when it succeeded.  */
START_TEST(test_status_last_command)
{
	struct tu_run *run = RUN("--batch", "-ex", "set $a = 1",
				 "-ex", "print $a");
	expect_exit(run, 0);
	CHECK_RUN(strcmp(run->out, "1\n") == 0, run, "print $a");
	run = RUN("--batch", "-ex", "quit 3");
	expect_exit(run, 3);
}
END_TEST

/* attach to a process that does not exist: exit 1, a message naming it;
 * -p of one with a script: the attach error of the command line, 2.  */
START_TEST(test_error_bad_pid)
{
	struct tu_run *run = RUN("--batch", "-ex", "attach 999999",
				 "-ex", "echo not reached\\n");
	char pid[16];

	expect_exit(run, 1);
	expect_message(run, "-ex:1: attach: no process 999999");
	CHECK_RUN(run->out[0] == '\0', run, "something was printed");
	snprintf(pid, sizeof(pid), "%d", (int)tu_reaped_pid());
	run = RUN("--batch", "-ex", "echo hi", "-p", pid);
	expect_exit(run, 2);
	CHECK_RUN(strstr(run->err, pid) != NULL, run,
		  "the error does not name %s", pid);
}
END_TEST

/* A breakpoint on a function the target does not have: exit 1, the
 * message names it; the target untouched.  */
START_TEST(test_error_missing_function)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-O0", LONG_RUN,
							 NULL));
	struct tu_run *run = RUN("-p", fixture->pid_text, "--batch",
				 "-ex", "break chain_beta_nosuch",
				 "-ex", "echo not reached\\n");

	expect_exit(run, 1);
	expect_message(run, "-ex:1: break: no function or source line "
			    "\"chain_beta_nosuch\"");
	CHECK_RUN(run->out[0] == '\0', run, "something was printed");
	expect_untouched(fixture);
}
END_TEST

/* A block without its end: exit 1, said; nothing of it ran.  */
START_TEST(test_error_block_without_end)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-O0", LONG_RUN,
							 NULL));
	char *script = script_file("open.cprof", "while 1\n"
				   "  echo looping\\n\n"
				   "  if 1\n"
				   "    echo inner\\n\n"
				   "  end\n");
	struct tu_run *run = RUN("-p", fixture->pid_text, "-x", script,
				 "--batch");
	char expected[4200];

	expect_exit(run, 1);
	snprintf(expected, sizeof(expected), "%s:1: while: the input ended "
		 "inside 'while'", script);
	expect_message(run, expected);
	CHECK_RUN(run->out[0] == '\0', run, "a line of the block ran");
	expect_untouched(fixture);
	free(script);
}
END_TEST

/* SIGINT while a script samples for 30 s: the command ends at once as
 * an error, the script with it (exit 1), the target detached.  The
 * script says it is about to sample through shell (which writes at
 * once), so the signal comes while the sampling runs.  */
START_TEST(test_error_interrupted)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-O0", LONG_RUN,
							 NULL));
	char *marker = temp_path("sampling");
	char *script;
	struct tu_run *run;
	char *out = temp_path("never.folded");

	script = script_file("long.cprof", "shell touch %s\n"
			     "sample for 30s\n"
			     "write %s\n", marker, out);
	run = start_cprof(NULL, (const char *const[]){
		"-p", fixture->pid_text, "-x", script, "--batch", NULL });
	uint64_t deadline = tu_now_ns() + STEP_TIMEOUT_MS * 1000000ull;
	while (access(marker, F_OK) != 0) {
		CHECK_RUN(tu_now_ns() < deadline, run, "the script did not "
			  "start");
		poll(NULL, 0, 2);
	}
	ck_assert_int_eq(kill(run->pid, SIGINT), 0);
	tu_run_wait(run, RUN_TIMEOUT_MS);
	CHECK_RUN(!run->timed_out, run, "SIGINT did not end the script");
	expect_exit(run, 1);
	CHECK_RUN(strstr(run->err, ":2: sample: interrupted") != NULL, run,
		  "the error is not the sample's interruption");
	CHECK_RUN(access(out, F_OK) != 0, run, "the write after it ran");
	expect_untouched(fixture);
	free(marker);
	free(out);
	free(script);
}
END_TEST

/* -o and --heap are for one run: refused with a script, exit 2, before
 * anything is attached.  */
START_TEST(test_error_options)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-O0", LONG_RUN,
							 NULL));
	char *script = script_file("any.cprof", "info inferior\n");
	struct tu_run *run = RUN("-p", fixture->pid_text, "-x", script,
				 "-o", "x.folded");

	expect_exit(run, 2);
	expect_message(run, "-o is for one run");
	run = RUN("--heap", "-p", fixture->pid_text, "-ex", "info inferior");
	expect_exit(run, 2);
	expect_message(run, "--heap and --dump are for one run");
	run = RUN("--dump", "--batch", "-p", fixture->pid_text);
	expect_exit(run, 2);
	expect_untouched(fixture);
	free(script);
}
END_TEST

/* -------------------------------------------------------- breakpoints */

/* The trigger fixture (fixtures/trigger.c): main -> dispatch ->
 * handle_request(i), request i every 2 ms on the main thread, and a
 * worker thread busy in crunch.  */
static struct tu_proc *start_trigger(void)
{
	return ready(tu_fixture_start("trigger", LONG_RUN, NULL));
}

/* The trigger fixture checks every request's result: a register or a
 * stack word broken by a breakpoint would be a "FAIL" line.  */
static void expect_trigger_fine(struct tu_proc *fixture)
{
	tu_proc_wait_line(fixture, "no such line", 1);
	ck_assert_msg(strstr(fixture->output, "FAIL") == NULL,
		      "the fixture failed: %s", fixture->output);
	expect_untouched(fixture);
}

/* The backtraces of TEXT (text mode: "#0 ..." lines): how many, each
 * checked to be handle_request <- dispatch <- main.  */
static unsigned count_request_backtraces(const struct tu_run *run,
					 const char *text)
{
	unsigned n = 0;

	for (const char *p = text; (p = strstr(p, "\n#0 ")) != NULL; p++) {
		const char *one = strstr(p + 1, "\n#1 ");
		const char *two = one ? strstr(one + 1, "\n#2 ") : NULL;
		const char *end = two ? strchr(two + 1, '\n') : NULL;

		CHECK_RUN(end != NULL, run, "a backtrace of less than three "
			  "frames");
		CHECK_RUN(strstr(p, " in handle_request ") < one &&
				  strstr(p, " in handle_request ") != NULL &&
				  strstr(one, " in dispatch ") < two &&
				  strstr(one, " in dispatch ") != NULL &&
				  strstr(two, " in main ") < end &&
				  strstr(two, " in main ") != NULL,
			  run, "backtrace %u is not handle_request <- dispatch "
			  "<- main", n + 1);
		n++;
	}
	return n;
}

/* The line of breakpoint ID in info breakpoints' table (text), parsed:
 * its hits as the script counted them, and the crossings the library
 * saw (reached) and passed while nobody waited.  */
static void breakpoint_counts(const struct tu_run *run, const char *text,
			      int id, unsigned long *hits,
			      unsigned long *reached, unsigned long *passed)
{
	char prefix[16], kind[32], enabled[8];
	int got;
	unsigned long address;
	char *line;
	const char *at;

	snprintf(prefix, sizeof(prefix), "%-7d ", id);
	line = line_of(text, prefix);
	CHECK_RUN(line != NULL &&
			  sscanf(line, "%d %31s %7s %lx %lu", &got, kind,
				 enabled, &address, hits) == 5,
		  run, "no line of breakpoint %d in info breakpoints", id);
	free(line);
	*reached = *passed = 0;
	at = strstr(text, "\treached ");
	if (at != NULL)
		sscanf(at, "\treached %lu time%*s (%lu while nobody waited)",
		       reached, passed);
}

/* break on a function with commands bt end, hit 5 times (a while loop
 * on $_hits around wait): 5 hit lines, 5 backtraces naming
 * handle_request <- dispatch <- main, info breakpoints with 5 hits;
 * after the detach every byte of the code is its file's, and the
 * fixture's results all checked out.  */
START_TEST(test_break_commands_bt)
{
	struct tu_proc *fixture = start_trigger();
	char *script = script_file("bt.cprof",
				   "break handle_request\n"
				   "commands\n"
				   "  bt\n"
				   "end\n"
				   "while $_hits < 5\n"
				   "  wait\n"
				   "end\n"
				   "info breakpoints\n"
				   "printf \"bpnum=%%d hits=%%d\\n\", $bpnum, $_hits\n"
				   "detach\n");
	struct tu_run *run = RUN("-p", fixture->pid_text, "-x", script,
				 "--batch");
	unsigned long hits, reached, passed;

	expect_exit(run, 0);
	CHECK_RUN(strstr(run->out, "Breakpoint 1 at 0x") != NULL &&
			  strstr(run->out, ": file fixtures/trigger.c, line ")
				  != NULL,
		  run, "break did not say where");
	CHECK_RUN(count_of(run->out, "\nBreakpoint 1, handle_request () at "
				     "fixtures/trigger.c:") == 5,
		  run, "not 5 hit lines");
	CHECK_RUN(count_request_backtraces(run, run->out) == 5, run,
		  "not 5 backtraces");
	breakpoint_counts(run, run->out, 1, &hits, &reached, &passed);
	CHECK_RUN(hits == 5 && reached >= 5, run,
		  "info breakpoints: %lu hits, reached %lu", hits, reached);
	CHECK_RUN(strstr(run->out, "bpnum=1 hits=5\n") != NULL, run,
		  "$bpnum or $_hits");
	CHECK_RUN(run->err[0] == '\0', run, "cprof-attach complained");
	expect_trigger_fine(fixture);
	free(script);
}
END_TEST

/* The same in JSON: a breakpoint event per hit (id, tid, function,
 * hits 1, 2, 3), each followed by its backtrace's result, whose frames
 * are handle_request, dispatch, main.  */
START_TEST(test_break_json)
{
	struct tu_proc *fixture = start_trigger();
	char *script = script_file("bt-json.cprof",
				   "break handle_request\n"
				   "commands\n"
				   "  bt\n"
				   "end\n"
				   "while $_hits < 3\n"
				   "  wait\n"
				   "end\n");
	struct tu_run *run = RUN("-p", fixture->pid_text, "--json", "-x",
				 script, "--batch");
	char checks[2048];

	expect_exit(run, 0);
	snprintf(checks, sizeof(checks),
		 "b = R[0]\n"
		 "assert b['command'] == 'break' and b['id'] == 1 and "
		 "b['function'] == 'handle_request' and "
		 "b['file'].endswith('trigger.c') and b['line'] > 0, b\n"
		 "rest = R[1:]\n"
		 "assert len(rest) == 9, rest\n"
		 "for k in range(3):\n"
		 "    e, t, w = rest[3 * k:3 * k + 3]\n"
		 "    assert e.get('event') == 'breakpoint' and e['id'] == 1 "
		 "and e['tid'] == %d and e['function'] == 'handle_request' "
		 "and e['hits'] == k + 1 and e['line'] == b['line'], e\n"
		 "    assert t['command'] == 'backtrace' and t['ok'], t\n"
		 "    f = [x['function'] for x in t['threads'][0]['frames']]\n"
		 "    assert f[:3] == ['handle_request', 'dispatch', 'main'], f\n"
		 "    assert t['threads'][0]['tid'] == %d, t\n"
		 "    assert w['command'] == 'wait' and w['ok'], w\n",
		 (int)fixture->pid, (int)fixture->pid);
	json_check(run, run->out, checks);
	expect_trigger_fine(fixture);
	free(script);
}
END_TEST

/* tbreak: one hit, then the breakpoint is gone; $bpnum its number.  */
START_TEST(test_tbreak)
{
	struct tu_proc *fixture = start_trigger();
	struct tu_run *run = RUN("-p", fixture->pid_text, "--batch",
				 "-ex", "tbreak handle_request",
				 "-ex", "print $bpnum",
				 "-ex", "wait",
				 "-ex", "info breakpoints",
				 "-ex", "print $_hits");

	expect_exit(run, 0);
	CHECK_RUN(strstr(run->out, "Temporary breakpoint 1 at 0x") != NULL,
		  run, "tbreak said nothing");
	CHECK_RUN(count_of(run->out, "reakpoint 1, ") == 1, run,
		  "not one hit");
	CHECK_RUN(strstr(run->out, "\nNo breakpoints.\n1\n") != NULL, run,
		  "the breakpoint is still there after its hit");
	expect_trigger_fine(fixture);
}
END_TEST

/* The hit of a tbreak names its function and says "Temporary", as the
 * hit of a break does (the breakpoint is deleted when its hit is
 * reported: its name must be taken before), in text and in the JSON
 * event.  */
START_TEST(test_tbreak_hit_named)
{
	struct tu_proc *fixture = start_trigger();
	struct tu_run *run = RUN("-p", fixture->pid_text, "--batch",
				 "-ex", "tbreak handle_request", "-ex", "wait");

	expect_exit(run, 0);
	CHECK_RUN(strstr(run->out, "\nTemporary breakpoint 1, handle_request "
				   "() at fixtures/trigger.c:") != NULL,
		  run, "the hit of the tbreak does not name handle_request");
	run = RUN("-p", fixture->pid_text, "--batch", "--json",
		  "-ex", "tbreak handle_request", "-ex", "wait");
	expect_exit(run, 0);
	json_check(run, run->out,
		   "assert E[0]['function'] == 'handle_request' and "
		   "E[0]['file'].endswith('trigger.c'), E\n");
	expect_trigger_fine(fixture);
}
END_TEST

/* break FILE:LINE: the first line of handle_request's body (marked
 * BODY_MARK in the fixture's source); the hit's backtrace is there.  */
START_TEST(test_break_file_line)
{
	struct tu_proc *fixture = start_trigger();
	char *source = tu_read_file(CP_SOURCE_DIR "/fixtures/trigger.c");
	char location[64], said[128], frame[128];
	unsigned line = 1;
	const char *mark;

	ck_assert_ptr_nonnull(source);
	mark = strstr(source, "/* BODY_MARK */");
	ck_assert_ptr_nonnull(mark);
	for (const char *p = source; p < mark; p++)
		line += *p == '\n';
	snprintf(location, sizeof(location), "break trigger.c:%u", line);
	char *script = script_file("fl.cprof", "commands 1\n"
				   "  silent\n"
				   "  bt\n"
				   "end\n"
				   "wait\n");
	struct tu_run *run = RUN("-p", fixture->pid_text, "--batch",
				 "-ex", location, "-ex", "commands 1",
				 "-x", script);
	/* commands on -ex has no lines to read: an error, as in gdb */
	expect_exit(run, 1);
	expect_message(run, "-ex:2: commands: ");
	run = RUN("-p", fixture->pid_text, "--batch", "-ex", location,
		  "-x", script);
	expect_exit(run, 0);
	snprintf(said, sizeof(said), ": file fixtures/trigger.c, line %u.\n",
		 line);
	CHECK_RUN(strstr(run->out, said) != NULL, run, "not at line %u", line);
	snprintf(frame, sizeof(frame), " in handle_request "
		 "(fixtures/trigger.c:%u) [trigger]\n#1 ", line);
	CHECK_RUN(strstr(run->out, frame) != NULL, run,
		  "the hit is not at line %u", line);
	CHECK_RUN(count_request_backtraces(run, run->out) == 1, run,
		  "not one backtrace");
	expect_trigger_fine(fixture);
	free(source);
	free(script);
}
END_TEST

/* condition N EXPR on the first argument: every hit counted has
 * $rdi % 4 == 1 (three consecutive requests cannot all be: without the
 * condition this fails).  */
START_TEST(test_condition)
{
	struct tu_proc *fixture = start_trigger();
	char *script = script_file("cond.cprof",
				   "break handle_request\n"
				   "condition 1 $rdi %% 4 == 1\n"
				   "commands\n"
				   "  silent\n"
				   "  printf \"rdi=%%d\\n\", $rdi\n"
				   "end\n"
				   "while $_hits < 3\n"
				   "  wait\n"
				   "end\n"
				   "info breakpoints\n");
	struct tu_run *run = RUN("-p", fixture->pid_text, "-x", script,
				 "--batch");
	unsigned n = 0;

	expect_exit(run, 0);
	for (const char *p = run->out; (p = strstr(p, "\nrdi=")) != NULL;
	     p++) {
		unsigned long long rdi = strtoull(p + 5, NULL, 10);

		CHECK_RUN(rdi % 4 == 1, run, "a hit with $rdi = %llu", rdi);
		n++;
	}
	CHECK_RUN(n == 3, run, "%u hits, expected 3", n);
	CHECK_RUN(strstr(run->out, "\tstop only if $rdi % 4 == 1\n") != NULL,
		  run, "info breakpoints does not show the condition");
	expect_trigger_fine(fixture);
	free(script);
}
END_TEST

/* ignore N COUNT: of the crossings the script saw while it waited
 * (reached less passed while nobody waited, exact), COUNT were ignored
 * and the rest counted: 2 + 3.  continue in the commands keeps the one
 * wait going until the third counted hit.  */
START_TEST(test_ignore)
{
	struct tu_proc *fixture = start_trigger();
	char *script = script_file("ignore.cprof",
				   "break handle_request\n"
				   "ignore 1 2\n"
				   "commands\n"
				   "  silent\n"
				   "  if $_hits < 3\n"
				   "    continue\n"
				   "  end\n"
				   "end\n"
				   "wait\n"
				   "info breakpoints\n");
	struct tu_run *run = RUN("-p", fixture->pid_text, "-x", script,
				 "--batch");
	unsigned long hits, reached, passed;

	expect_exit(run, 0);
	CHECK_RUN(strstr(run->out, "Will ignore next 2 crossings of "
				   "breakpoint 1.\n") != NULL,
		  run, "ignore said nothing");
	breakpoint_counts(run, run->out, 1, &hits, &reached, &passed);
	CHECK_RUN(hits == 3 && reached - passed == 5, run,
		  "%lu hits, %lu reached, %lu passed: expected 3 hits of 5 "
		  "crossings seen", hits, reached, passed);
	expect_trigger_fine(fixture);
	free(script);
}
END_TEST

/* disable, enable, delete: no hit while disabled (a wait of 300 ms, 150
 * requests, sees none), one after enable, none left after delete; the
 * order of results and events in JSON says it.  */
START_TEST(test_disable_enable_delete)
{
	struct tu_proc *fixture = start_trigger();
	char *script = script_file("enable.cprof",
				   "break handle_request\n"
				   "disable 1\n"
				   "wait for 300ms\n"
				   "info breakpoints\n"
				   "enable 1\n"
				   "wait\n"
				   "delete\n"
				   "info breakpoints\n");
	struct tu_run *run = RUN("-p", fixture->pid_text, "--json", "-x",
				 script, "--batch");

	expect_exit(run, 0);
	json_check(run, run->out,
		   "seq = [o.get('command') or 'event ' + o['event'] for o in R]\n"
		   "assert seq == ['break', 'disable', 'wait', 'info', 'enable', "
		   "'event breakpoint', 'wait', 'delete', 'info'], seq\n"
		   "assert R[1]['ids'] == [1] and R[4]['ids'] == [1], R\n"
		   "b = R[3]['breakpoints']\n"
		   "assert len(b) == 1 and b[0]['enabled'] is False and "
		   "b[0]['hits'] == 0, b\n"
		   "assert R[7]['ids'] == [1] and R[8]['breakpoints'] == [], R\n");
	expect_trigger_fine(fixture);
	free(script);
}
END_TEST

/* A breakpoint as a trigger of sampling: its commands sample for a
 * while (the held thread let go first); and sampling started before a
 * wait goes on through the hits (deleted before the sleep, which would
 * run their commands too).  Both profiles hold the worker's crunch, the
 * thread busy all the time.  */
START_TEST(test_break_triggers_sampling)
{
	struct tu_proc *fixture = start_trigger();
	char *first = temp_path("triggered.folded");
	char *second = temp_path("through.folded");
	char *script = script_file("trig.cprof",
				   "break handle_request\n"
				   "commands\n"
				   "  silent\n"
				   "  sample --wall for 300ms\n"
				   "end\n"
				   "wait\n"
				   "write %s\n"
				   "commands 1\n"
				   "  silent\n"
				   "  bt\n"
				   "end\n"
				   "sample --wall start\n"
				   "while $_hits < 3\n"
				   "  wait\n"
				   "end\n"
				   "delete\n"
				   "sleep 300ms\n"
				   "sample stop\n"
				   "write %s\n",
				   first, second);
	struct tu_run *run = RUN("-p", fixture->pid_text, "-x", script,
				 "--batch");
	struct tu_profile *a, *b;

	expect_exit(run, 0);
	a = read_profile(run, first);
	b = read_profile(run, second);
	CHECK_RUN(tu_profile_count_frame(a, "crunch") > 0 &&
			  tu_profile_count_frame(b, "crunch") > 0,
		  run, "the worker's crunch is not in the profiles");
	/* hits 2 and 3 (the first was the sampling one) while sampling  */
	CHECK_RUN(count_request_backtraces(run, run->out) == 2, run,
		  "not 2 backtraces while sampling");
	expect_trigger_fine(fixture);
	tu_profile_free(a);
	tu_profile_free(b);
	free(first);
	free(second);
	free(script);
}
END_TEST

/* An error while breakpoints and heap tracing are in (int3 bytes in the
 * program and in libc): the run ends with status 1 and every byte is
 * back.  */
START_TEST(test_error_restores_bytes)
{
	struct tu_proc *fixture = start_trigger();
	char *script = script_file("restore.cprof",
				   "break handle_request\n"
				   "tbreak fork_child\n"
				   "heap start\n"
				   "info breakpoints\n"
				   "frob\n");
	struct tu_run *run = RUN("-p", fixture->pid_text, "-x", script,
				 "--batch");
	char expected[4200];

	expect_exit(run, 1);
	snprintf(expected, sizeof(expected), "%s:5: frob: undefined command",
		 script);
	expect_message(run, expected);
	CHECK_RUN(strstr(run->out, "Tracing the heap of process") != NULL &&
			  strstr(run->out, "in fork_child at") != NULL,
		  run, "the breakpoints or the heap tracing were not in");
	expect_trigger_fine(fixture);
	free(script);
}
END_TEST

/* The source line of malloc's first instruction in libc
 * ("malloc.c:3281", from its debug information), in OUT; false when it
 * cannot be found (no nm, eu-addr2line or libc6-dbg).  */
static bool malloc_entry_line(char *out, size_t size)
{
	FILE *p = popen("l=$(ldd /bin/true | awk '/libc\\.so/ { print $3 }'); "
			"a=$(nm -D \"$l\" | awk '$3 ~ /^malloc@@/ { print $1; "
			"exit }'); [ -n \"$a\" ] && "
			"eu-addr2line -e \"$l\" 0x$a 2>/dev/null", "r");
	char line[512] = "";
	if (!p)
		return false;
	if (!fgets(line, sizeof(line), p))
		line[0] = '\0';
	pclose(p);
	/* ".../malloc/malloc.c:3281:1" */
	char *colon = strchr(line, ':');
	char *slash = colon ? memrchr(line, '/', (size_t)(colon - line)) : NULL;
	unsigned number;
	if (!colon || sscanf(colon + 1, "%u", &number) != 1 || number == 0)
		return false;
	*colon = '\0';
	snprintf(out, size, "%s:%u", slash ? slash + 1 : line, number);
	return true;
}

/* heap start takes the kernel's uprobes (no breakpoint set before it),
 * whose int3s sit at the allocator's entry points; a breakpoint set
 * after it at malloc (after its prologue) is one of ours beside them:
 * hit, with the heap traced on, and every byte back.  One at malloc's
 * very first instruction (its opening line) is refused, saying what to
 * do: the kernel's int3 there would take its trap.  */
START_TEST(test_break_during_heap_uprobes)
{
	struct tu_proc *fixture = tu_fixture_start("heap-pairs", "1000000000",
						   "3", NULL);
	ck_assert_ptr_nonnull(fixture);
	ck_assert(tu_wait_cpu_ticks(fixture->pid, 2, READY_TIMEOUT_MS));
	char *script = script_file("uprobes.cprof", "heap start\n"
				   "break malloc\n"
				   "wait\n"
				   "delete\n"
				   "heap stop\n");
	struct tu_run *run = RUN("-p", fixture->pid_text, "-x", script,
				 "--batch");

	expect_exit(run, 0);
	CHECK_RUN(strstr(run->out, "Tracing the heap of process") != NULL, run,
		  "the heap tracing was not in");
	CHECK_RUN(strstr(run->out, "\nBreakpoint 1, ") != NULL &&
			  strstr(run->out, "malloc") != NULL,
		  run, "the breakpoint at malloc was not hit");
	expect_untouched(fixture);
	free(script);

	char entry[300], expected[4400];
	ck_assert_msg(malloc_entry_line(entry, sizeof(entry)),
		      "malloc's first line not found (nm, eu-addr2line, "
		      "libc6-dbg: make deps)");
	script = script_file("entry.cprof", "heap start\nbreak %s\n", entry);
	run = RUN("-p", fixture->pid_text, "-x", script, "--batch");
	expect_exit(run, 1);
	snprintf(expected, sizeof(expected),
		 "%s:2: break: the kernel's uprobes of heap tracing are at %s: "
		 "heap stop first, or set breakpoints before heap start (it "
		 "then uses traps)", script, entry);
	expect_message(run, expected);
	expect_untouched(fixture);
	free(script);
}
END_TEST

/* SIGINT during a wait for a breakpoint that is never reached (fork_child
 * runs only when asked): the wait ends as an error, the script with it
 * (exit 1), the byte of the breakpoint back.  */
START_TEST(test_error_interrupted_wait)
{
	struct tu_proc *fixture = start_trigger();
	char *marker = temp_path("waiting");
	char *script = script_file("wait.cprof", "break fork_child\n"
				   "shell touch %s\n"
				   "wait\n"
				   "echo not reached\\n\n", marker);
	struct tu_run *run = start_cprof(NULL, (const char *const[]){
		"-p", fixture->pid_text, "-x", script, "--batch", NULL });
	uint64_t deadline = tu_now_ns() + STEP_TIMEOUT_MS * 1000000ull;

	while (access(marker, F_OK) != 0) {
		CHECK_RUN(tu_now_ns() < deadline, run, "the script did not "
			  "start");
		poll(NULL, 0, 2);
	}
	ck_assert_int_eq(kill(run->pid, SIGINT), 0);
	tu_run_wait(run, RUN_TIMEOUT_MS);
	CHECK_RUN(!run->timed_out, run, "SIGINT did not end the wait");
	expect_exit(run, 1);
	CHECK_RUN(strstr(run->err, ":3: wait: interrupted") != NULL, run,
		  "the error is not the wait's interruption");
	CHECK_RUN(strstr(run->out, "not reached") == NULL, run,
		  "the script went on");
	expect_trigger_fine(fixture);
	free(marker);
	free(script);
}
END_TEST

/* --------------------------------------------------- profile FUNC */

/* The first number of the fixture's N-th line (1, 2...) that begins
 * with PREFIX, read until it came: for inside's "total NS CALLS NESTED"
 * the CPU ns its threads spent in the outermost handler calls returned
 * so far.  */
static unsigned long long nth_line_number(struct tu_proc *fixture,
					  const char *prefix, unsigned n)
{
	uint64_t deadline = tu_now_ns() + STEP_TIMEOUT_MS * 1000000ull;

	for (;;) {
		unsigned k = 0;

		for (const char *p = fixture->output; p && *p;) {
			const char *end = strchr(p, '\n');

			if (end == NULL)
				break;
			if (strncmp(p, prefix, strlen(prefix)) == 0 && ++k == n)
				return strtoull(p + strlen(prefix), NULL, 10);
			p = end + 1;
		}
		ck_assert_msg(tu_now_ns() < deadline && fixture->stdout_fd >= 0,
			      "no %u lines \"%s\" from the fixture: %s", n,
			      prefix, fixture->output);
		/* read what came meanwhile (no such line: a short wait) */
		tu_proc_wait_line(fixture, "\n", 20);
	}
}

/* profile handler at 499 Hz for a few seconds (until the fixture had
 * 0.2 s inside handler), typed into cprof-attach while the test drives
 * the fixture: the folded profile written has only stacks
 * under handler, none under other (the fixture's other half), and as
 * many samples as the fixture's own clock says its threads spent inside
 * handler in the window.  The window is bracketed exactly: the workers
 * are parked (asleep inside handler, no CPU) when the profile starts and
 * when it stops, and the fixture's totals are read then.  What remains
 * is check_funcprof's tolerance: 15 % of the expected count for what a
 * loaded machine does to the fixture's calibration, plus 16 periods: per
 * thread the time credited and not yet sampled at the stop (under a
 * period), and at each end the call each thread is parked in (counted by
 * the fixture and not by us at the start, by us and not yet by the
 * fixture at the end): handler(2) is 5.4 ms, 2.7 periods; 2 threads x
 * (1 + 2 x 2.7) < 16.  */
START_TEST(test_profile_function)
{
	int fix_in = -1, in = -1;
	struct tu_proc *fixture = ready(tu_fixture_start_stdin(
		&fix_in, "inside", LONG_RUN, NULL));
	char *out = temp_path("handler.folded");
	struct tu_run *run = start_cprof(&in, (const char *const[]){
		"-p", fixture->pid_text, "--json", NULL });
	char write[4200], *answer;
	unsigned long long before, after;

	say(fix_in, "park");
	nth_line_number(fixture, "parked", 1);
	say(fix_in, "total");
	before = nth_line_number(fixture, "total ", 1);
	answer = command_answer(run, in, "profile handler -F 499", "\"ok\":");
	CHECK_RUN(strstr(answer, "\"ok\":true") != NULL &&
			  strstr(answer, "\"function\":\"handler\"") != NULL,
		  run, "profile: %s", answer);
	free(answer);
	say(fix_in, "unpark");
	nth_line_number(fixture, "unparked", 1);
	/* Windows of a second until the workers had 0.2 s inside handler
	 * (100 periods): a loaded machine gives them little CPU.  */
	unsigned totals = 1;
	for (int second = 0; second < 60; second++) {
		answer = command_answer(run, in, "sleep 1s", "\"ok\":");
		free(answer);
		say(fix_in, "total");
		if (nth_line_number(fixture, "total ", ++totals) - before >=
		    200000000u)
			break;
	}
	say(fix_in, "park");
	nth_line_number(fixture, "parked", 2);
	say(fix_in, "total");
	after = nth_line_number(fixture, "total ", ++totals);
	answer = command_answer(run, in, "sample stop", "\"ok\":");
	CHECK_RUN(strstr(answer, "\"ok\":true") != NULL, run,
		  "sample stop: %s", answer);
	free(answer);
	snprintf(write, sizeof(write), "write %s", out);
	answer = command_answer(run, in, write, "\"ok\":");
	free(answer);
	say(fix_in, "unpark");
	close(in);
	tu_run_wait(run, RUN_TIMEOUT_MS);
	expect_exit(run, 0);

	struct tu_profile *profile = read_profile(run, out);
	uint64_t total = tu_profile_total(profile);
	uint64_t with_handler = tu_profile_count_frame(profile, "handler");
	uint64_t under_other = tu_profile_count_frame(profile, "other");
	double expected = (double)(after - before) / (1e9 / 499);
	double tolerance = 0.15 * expected + 16;

	fprintf(stderr, "profile handler: %" PRIu64 " samples, the fixture "
		"%.3f s inside: %.1f periods (%s)\n", total,
		(double)(after - before) / 1e9, expected, tu_machine_load());
	if (with_handler != total || under_other != 0)
		tu_profile_dump(profile, 20);
	CHECK_RUN(total >= 20, run, "only %" PRIu64 " samples", total);
	CHECK_RUN(with_handler == total && under_other == 0, run,
		  "%" PRIu64 " of %" PRIu64 " stacks without handler, %" PRIu64
		  " under other", total - with_handler, total, under_other);
	CHECK_RUN((double)total >= expected - tolerance &&
			  (double)total <= expected + tolerance,
		  run, "%" PRIu64 " samples, the fixture's time inside is "
		  "%.1f periods (tolerance %.1f)", total, expected, tolerance);
	CHECK_RUN(tu_traced_tasks(fixture->pid) == 0, run,
		  "the fixture is still traced");
	/* It runs on and its own checks pass to the end.  */
	say(fix_in, "exit");
	ck_assert(tu_proc_wait_exit(fixture, STEP_TIMEOUT_MS));
	ck_assert_msg(WIFEXITED(fixture->status) &&
			      WEXITSTATUS(fixture->status) == 0 &&
			      strstr(fixture->output, "FAIL") == NULL,
		      "the fixture failed after the profile: %s",
		      fixture->output);
	close(fix_in);
	tu_profile_free(profile);
	free(out);
}
END_TEST

/* ------------------------------------------- docs/examples/ scripts */

/* Run the example script NAME (docs/examples/) on process PID as its
 * comment says (cprof-attach -p PID -x NAME --batch), in this test's
 * temporary directory, where its files are written.  */
static struct tu_run *run_example(const char *name, const char *pid)
{
	char path[4096];
	char *dir = temp_path(".");

	ck_assert_int_eq(chdir(dir), 0);
	free(dir);
	snprintf(path, sizeof(path), "%s/docs/examples/%s", CP_SOURCE_DIR,
		 name);
	struct tu_run *run = RUN("-p", pid, "-x", path, "--batch");
	expect_exit(run, 0);
	CHECK_RUN(run->err[0] == '\0', run, "%s: cprof-attach complained",
		  name);
	return run;
}

/* The demo program's three threads: each stack is under one of them.  */
static void expect_demo(const struct tu_run *run,
			const struct tu_profile *profile, const char *what)
{
	uint64_t total = tu_profile_total(profile);
	uint64_t known = tu_profile_count_frame(profile, "main") +
			 tu_profile_count_frame(profile, "hasher_main") +
			 tu_profile_count_frame(profile, "compressor_main");

	if (known != total)
		tu_profile_dump(profile, 20);
	CHECK_RUN(known == total, run, "%s: a stack under none of the "
		  "demo's threads", what);
}

/* two-windows.cprof on the demo: a CPU profile and a wall-clock flame
 * graph of one attach.  */
START_TEST(test_example_two_windows)
{
	struct tu_proc *demo = ready(tu_fixture_start("demo", LONG_RUN, NULL));
	struct tu_run *run = run_example("two-windows.cprof", demo->pid_text);
	char *cpu = temp_path("cpu.folded");
	char *wall = temp_path("wall.svg");
	struct tu_profile *profile = read_profile(run, cpu);
	char *svg = tu_read_file(wall);

	expect_demo(run, profile, "cpu.folded");
	CHECK_RUN(svg != NULL && strstr(svg, "<svg") != NULL &&
			  strstr(svg, "hash_block") != NULL,
		  run, "wall.svg is no flame graph of the demo");
	CHECK_RUN(count_of(run->out, "Attached") == 0 &&
			  strstr(run->out, "running, attached ") != NULL,
		  run, "info inferior said nothing");
	expect_untouched(demo);
	tu_profile_free(profile);
	free(svg);
	free(cpu);
	free(wall);
}
END_TEST

/* windows.cprof on the demo: five profiles, each the samples its
 * window's line says.  */
START_TEST(test_example_windows)
{
	struct tu_proc *demo = ready(tu_fixture_start("demo", LONG_RUN, NULL));
	struct tu_run *run = run_example("windows.cprof", demo->pid_text);

	for (int i = 0; i < 5; i++) {
		char name[32], said[64], *path;

		snprintf(name, sizeof(name), "window-%d.folded", i);
		path = temp_path(name);
		struct tu_profile *profile = read_profile(run, path);
		expect_demo(run, profile, name);
		snprintf(said, sizeof(said), "window %d: %" PRIu64 " samples\n",
			 i, tu_profile_total(profile));
		CHECK_RUN(strstr(run->out, said) != NULL, run, "no \"%s\"",
			  said);
		tu_profile_free(profile);
		free(path);
	}
	expect_untouched(demo);
}
END_TEST

/* heap-window.cprof on heap-pairs (malloc(64) and free in a loop, for
 * ever): the window's bytes are 64 per allocation exactly, every block
 * freed but the one a call may hold at the stop, the report's top site
 * pairs_leaf, the live flame graph written.  */
START_TEST(test_example_heap_window)
{
	struct tu_proc *pairs = tu_fixture_start("heap-pairs", "1000000000",
						 "1", NULL);
	char exe[4096], link[64];
	unsigned long long allocations, bytes, frees, live, live_bytes;

	ck_assert_ptr_nonnull(pairs);
	/* No ready line (a bench target): attach once it runs its own
	 * code, not the test's before the exec.  */
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pairs->pid);
	for (int i = 0;; i++) {
		ssize_t n = readlink(link, exe, sizeof(exe) - 1);

		exe[n > 0 ? n : 0] = '\0';
		if (strstr(exe, "heap-pairs") &&
		    tu_wait_cpu_ticks(pairs->pid, 1, READY_TIMEOUT_MS))
			break;
		ck_assert_msg(i < 10000, "heap-pairs did not start");
		poll(NULL, 0, 1);
	}
	struct tu_run *run = run_example("heap-window.cprof", pairs->pid_text);
	const char *said = strstr(run->out, " allocations (");

	while (said && said > run->out && said[-1] != '\n')
		said--;
	CHECK_RUN(said && sscanf(said, "%llu allocations (%llu bytes), %llu "
				 "frees; %llu allocations (%llu bytes) live",
				 &allocations, &bytes, &frees, &live,
				 &live_bytes) == 5,
		  run, "heap stop said nothing");
	CHECK_RUN(allocations > 0 && bytes == 64 * allocations &&
			  live <= 1 && live == allocations - frees &&
			  live_bytes == 64 * live,
		  run, "the window is not heap-pairs' malloc(64)/free pairs");
	char *report_path = temp_path("heap.txt");
	char *svg_path = temp_path("heap-live.svg");
	char *report = tu_read_file(report_path);
	char *svg = tu_read_file(svg_path);
	CHECK_RUN(report && strstr(report, "pairs_leaf") != NULL, run,
		  "heap.txt does not name pairs_leaf");
	CHECK_RUN(svg && strstr(svg, "<svg") != NULL, run,
		  "heap-live.svg is no SVG");
	expect_untouched(pairs);
	free(report);
	free(svg);
	free(report_path);
	free(svg_path);
}
END_TEST

/* slow-request.cprof on the demo: three requests caught, each with its
 * stack (ingest <- main, on the main thread), then a profile of the time
 * inside ingest only.  */
START_TEST(test_example_slow_request)
{
	struct tu_proc *demo = ready(tu_fixture_start("demo", LONG_RUN, NULL));
	struct tu_run *run = run_example("slow-request.cprof", demo->pid_text);
	char *path = temp_path("requests.folded");
	struct tu_profile *profile = read_profile(run, path);

	for (int i = 1; i <= 3; i++) {
		char said[128];
		const char *at, *one, *two;

		snprintf(said, sizeof(said), "request %d on thread %d:\n#0 ", i,
			 (int)demo->pid);
		at = strstr(run->out, said);
		CHECK_RUN(at != NULL, run, "no \"request %d on thread %d\"", i,
			  (int)demo->pid);
		one = strstr(at, "\n#1 ");
		two = one ? strchr(one + 1, '\n') : NULL;
		CHECK_RUN(two && strstr(at, " in ingest ") < one &&
				  strstr(one, " in main ") < two &&
				  strstr(one, " in main ") != NULL,
			  run, "request %d's stack is not ingest <- main", i);
	}
	CHECK_RUN(tu_profile_count_frame(profile, "ingest") ==
			  tu_profile_total(profile),
		  run, "requests.folded has stacks outside ingest");
	expect_untouched(demo);
	tu_profile_free(profile);
	free(path);
}
END_TEST

/* ------------------------------------------------------- pipes */

/* Commands typed into a pipe, text mode: each command's answer must be
 * on standard output before the next line is read, or a program driving
 * cprof-attach over pipes waits for ever (gdb flushes before it reads).  */
START_TEST(test_text_answers_flushed)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-O0", LONG_RUN,
							 NULL));
	int in = -1;
	struct tu_run *run = start_cprof(&in, (const char *const[]){
		"-p", fixture->pid_text, "-x", "-", NULL });
	char *answer = command_answer(run, in, "echo one\\n", "one\n");

	free(answer);
	answer = command_answer(run, in, "info inferior", "running");
	free(answer);
	close(in);
	tu_run_wait(run, RUN_TIMEOUT_MS);
	expect_exit(run, 0);
	expect_untouched(fixture);
}
END_TEST

/* --------------------------------------------------------------- suite */

static TCase *new_case(Suite *suite, const char *name, double timeout)
{
	TCase *tcase = tcase_create(name);

	tcase_add_checked_fixture(tcase, NULL, teardown);
	tcase_set_timeout(tcase, timeout);
	suite_add_tcase(suite, tcase);
	return tcase;
}

static Suite *script_suite(void)
{
	Suite *suite = suite_create("script");
	TCase *tcase;

	tcase = new_case(suite, "sampling", 120);
	tcase_add_test(tcase, test_two_samplings);
	tcase_add_test(tcase, test_ex_and_x_in_order);
	tcase_add_test(tcase, test_info_inferior_times);
	tcase = new_case(suite, "control", 120);
	tcase_add_test(tcase, test_control);
	tcase_add_test(tcase, test_define_optional_arg);
	tcase_add_test(tcase, test_run_exitcode);
	tcase_add_test(tcase, test_status_last_command);
	tcase = new_case(suite, "json", 120);
	tcase_add_test(tcase, test_json);
	tcase = new_case(suite, "heap", 180);
	tcase_add_test(tcase, test_heap_windows);
	tcase_add_test(tcase, test_text_answers_flushed);
	tcase = new_case(suite, "breakpoints", 120);
	tcase_add_test(tcase, test_break_commands_bt);
	tcase_add_test(tcase, test_break_json);
	tcase_add_test(tcase, test_tbreak);
	tcase_add_test(tcase, test_tbreak_hit_named);
	tcase_add_test(tcase, test_break_file_line);
	tcase_add_test(tcase, test_condition);
	tcase_add_test(tcase, test_ignore);
	tcase_add_test(tcase, test_disable_enable_delete);
	tcase_add_test(tcase, test_break_triggers_sampling);
	tcase = new_case(suite, "errors", 120);
	tcase_add_test(tcase, test_error_unknown_command);
	tcase_add_test(tcase, test_error_batch_stops);
	tcase_add_test(tcase, test_error_bad_pid);
	tcase_add_test(tcase, test_error_missing_function);
	tcase_add_test(tcase, test_error_block_without_end);
	tcase_add_test(tcase, test_error_interrupted);
	tcase_add_test(tcase, test_error_options);
	tcase_add_test(tcase, test_error_restores_bytes);
	tcase_add_test(tcase, test_break_during_heap_uprobes);
	tcase_add_test(tcase, test_error_interrupted_wait);
	tcase = new_case(suite, "examples", 120);
	tcase_add_test(tcase, test_example_two_windows);
	tcase_add_test(tcase, test_example_windows);
	tcase_add_test(tcase, test_example_heap_window);
	tcase_add_test(tcase, test_example_slow_request);
	tcase = new_case(suite, "profile", 120);
	tcase_add_test(tcase, test_profile_function);
	return suite;
}

int main(void)
{
	SRunner *runner = srunner_create(script_suite());

	srunner_run_all(runner, CK_NORMAL);
	int failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
