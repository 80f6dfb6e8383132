/* End-to-end tests of cprof-attach against a target that lays traps in
 * the paths it controls (fixtures/hostile.c, running as nobody), as root
 * runs it on a shared machine:
 *
 *   /tmp/perf-PID.map a FIFO, a symlink to /dev/zero, a symlink or a hard
 *   link to a file only root may read, a file of another user, 3 million
 *   lines, a line of 64 MiB; a mapped library whose name now leads to a
 *   FIFO (renamed away after cprof-attach read the mappings, or deleted
 *   and a FIFO made under the "NAME (deleted)" that /proc/PID/maps shows),
 *   a container whose library name became an absolute symlink that means
 *   a FIFO in the host; a .gnu_debuglink that is a path.
 *
 * Each trap hung cprof-attach (and left the target traced), grew it
 * without bound, or put a file the target may not read into the profile.
 * What must hold now: cprof-attach finishes with a profile and at most one
 * warning about the trap, the target runs on untraced, nothing of the
 * secret shows up, cprof-attach stays small (its peak RSS from wait4), and
 * what the target named legitimately is still named.  The module traps are
 * also run with cprof-attach as nobody, where /proc/PID/map_files is
 * closed to it and the paths themselves are opened.
 *
 * Every run has a timeout: a hang is a failed test, never a hung one.  The
 * files a test plants are removed by the test as soon as the run is over,
 * and again by the teardown.  */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define FIXTURES CP_BUILD_DIR "/fixtures"
#define CPROF_ATTACH CP_BUILD_DIR "/cprof-attach"

#define NOBODY 65534
#define OTHER_UID 4242

/* Generous bounds: they only end a run that hangs.  */
#define READY_TIMEOUT_MS 20000   /* fixture start-up (3 M lines written) */
#define RUN_TIMEOUT_MS 20000     /* a cprof-attach run of a few seconds */
#define LINE_TIMEOUT_MS 10000

/* A fixture that outlives the test (the teardown kills it).  */
#define LONG_RUN "60"

/* The long line: far over the parser's 4 KiB cap, far under what would
 * weigh on the machine; the old reader's buffer held all of it, twice
 * over while growing.  */
#define LONG_LINE_BYTES (64L << 20)
#define LONG_LINE_TEXT "67108864"

/* How much more than a run on a target without a perf map cprof-attach
 * may take at its peak with the /dev/zero link or the 64 MiB line.  */
#define RSS_SLACK_KB (24L << 10)

/* Fail the test with a formatted message, after printing RUN.  A failed
 * check ends the test without its teardown (fork mode): the files the
 * test planted are removed first.  */
#define CHECK_RUN(cond, run, ...)                                          \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: check failed: %s\n",       \
				__FILE__, __LINE__, #cond);                \
			if ((run) != NULL)                                 \
				run_dump((run), __func__);                 \
			remove_files();                                    \
			ck_abort_msg(__VA_ARGS__);                         \
		}                                                          \
	} while (0)

static void remove_files(void);

/* --------------------------------------------------------- our own runs */

/* A run of cprof-attach, as root or as nobody, with its peak RSS.  */
struct run {
	pid_t pid;
	int status;
	bool finished, timed_out;
	long max_rss_kb;       /* ru_maxrss of cprof-attach */
	FILE *out_file, *err_file;
	char *out, *err;       /* NUL-ended, after run_wait */
};

#define MAX_RUNS 8
static struct run runs[MAX_RUNS];
static size_t nruns;

/* /tmp/perf-PID.map files of our fixtures and trees of ours to remove.  */
#define MAX_PATHS 16
static char planted[MAX_PATHS][PATH_MAX];
static size_t nplanted;
static char trees[MAX_PATHS][PATH_MAX];
static size_t ntrees;

static char *slurp_file(FILE *f)
{
	long size;
	char *text;

	fflush(f);
	size = lseek(fileno(f), 0, SEEK_END);
	if (size < 0)
		size = 0;
	text = malloc((size_t)size + 1);
	ck_assert_msg(text != NULL, "out of memory");
	if (size > 0 && pread(fileno(f), text, (size_t)size, 0) != size)
		size = 0;
	text[size] = '\0';
	return text;
}

/* Start cprof-attach with ARGS (NULL-ended, without argv[0]), stdout and
 * stderr to temporary files; as nobody when AS_NOBODY.  */
static struct run *run_start(bool as_nobody, const char *const args[])
{
	const char *argv[32];
	size_t argc = 0;
	struct run *run;
	pid_t parent = getpid();

	ck_assert_msg(nruns < MAX_RUNS, "too many runs");
	run = &runs[nruns];
	*run = (struct run){ .pid = -1 };
	argv[argc++] = CPROF_ATTACH;
	while (*args != NULL && argc < 31)
		argv[argc++] = *args++;
	argv[argc] = NULL;
	run->out_file = tmpfile();
	run->err_file = tmpfile();
	ck_assert_msg(run->out_file && run->err_file, "tmpfile: %s",
		      strerror(errno));
	fflush(NULL);
	run->pid = fork();
	ck_assert_msg(run->pid >= 0, "fork: %s", strerror(errno));
	if (run->pid == 0) {
		sigset_t none;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		dup2(fileno(run->out_file), STDOUT_FILENO);
		dup2(fileno(run->err_file), STDERR_FILENO);
		if (as_nobody && (setgroups(0, NULL) != 0
				  || setresgid(NOBODY, NOBODY, NOBODY) != 0
				  || setresuid(NOBODY, NOBODY, NOBODY) != 0)) {
			fprintf(stderr, "cannot become nobody: %s\n",
				strerror(errno));
			_exit(127);
		}
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	nruns++;
	return run;
}

/* Wait up to TIMEOUT_MS for RUN; on timeout kill it (a hang).  */
static void run_wait(struct run *run, int timeout_ms)
{
	uint64_t deadline_ns = tu_now_ns() + (uint64_t)timeout_ms * 1000000u;
	struct rusage usage;

	while (!run->finished) {
		pid_t got = wait4(run->pid, &run->status, WNOHANG, &usage);

		if (got == run->pid) {
			run->finished = true;
			run->max_rss_kb = usage.ru_maxrss;
		} else if (got < 0 && errno != EINTR) {
			break;
		} else if (tu_now_ns() >= deadline_ns) {
			run->timed_out = true;
			kill(run->pid, SIGKILL);
			wait4(run->pid, &run->status, 0, &usage);
			run->finished = true;
			run->max_rss_kb = usage.ru_maxrss;
		} else {
			poll(NULL, 0, 2);
		}
	}
	free(run->out);
	free(run->err);
	run->out = slurp_file(run->out_file);
	run->err = slurp_file(run->err_file);
}

static struct run *run_cprof(bool as_nobody, const char *const args[])
{
	struct run *run = run_start(as_nobody, args);

	run_wait(run, RUN_TIMEOUT_MS);
	return run;
}

static void run_dump(const struct run *run, const char *what)
{
	fprintf(stderr, "[%s] cprof-attach pid %d: %s, status 0x%x, peak RSS "
		"%ld KiB\n", what, (int)run->pid,
		run->timed_out ? "TIMED OUT (killed)" : "finished",
		run->status, run->max_rss_kb);
	fprintf(stderr, "  --- stdout\n%.3000s\n  --- stderr\n%.3000s\n",
		run->out ? run->out : "", run->err ? run->err : "");
}

static void run_kill_all(void)
{
	while (nruns > 0) {
		struct run *run = &runs[--nruns];

		if (!run->finished && run->pid > 0) {
			kill(run->pid, SIGKILL);
			waitpid(run->pid, NULL, 0);
		}
		if (run->out_file)
			fclose(run->out_file);
		if (run->err_file)
			fclose(run->err_file);
		free(run->out);
		free(run->err);
	}
}

/* ------------------------------------------------------------ planting */

static int remove_entry(const char *path, const struct stat *st, int type,
			struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (type == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

/* A new temporary directory that nobody may write in; removed with all
 * below it by the teardown.  */
static const char *nobody_dir(void)
{
	const char *dir = tu_temp_dir();

	ck_assert_msg(dir != NULL, "cannot create a temporary directory");
	ck_assert_int_eq(chown(dir, NOBODY, NOBODY), 0);
	ck_assert_int_eq(chmod(dir, 0755), 0);
	if (ntrees < MAX_PATHS)
		snprintf(trees[ntrees++], PATH_MAX, "%s", dir);
	return dir;
}

static void remember_perf_map(pid_t pid)
{
	if (nplanted < MAX_PATHS)
		snprintf(planted[nplanted++], PATH_MAX, "/tmp/perf-%d.map",
			 (int)pid);
}

/* Remove every file the test or its fixtures planted: the perf maps (a
 * fixture killed before its end leaves its own) and our directories (in
 * the host: a container fixture's mounts are in its own namespace).  */
static void remove_files(void)
{
	while (nplanted > 0)
		unlink(planted[--nplanted]);
	while (ntrees > 0)
		nftw(trees[--ntrees], remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void teardown(void)
{
	run_kill_all();
	tu_cleanup();
	remove_files();
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	ck_assert_msg(fd >= 0, "cannot create %s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

static void copy_file(const char *from, const char *to)
{
	char *command;

	ck_assert(asprintf(&command, "cp '%s' '%s'", from, to) > 0);
	ck_assert_msg(system(command) == 0, "%s failed", command);
	free(command);
}

/* ------------------------------------------------------------ fixtures */

/* The hostile fixture in MODE (arguments up to a NULL), started and
 * ready; its generated code's address and size into CODE (may be NULL).
 * STDIN_FD: its stdin on a pipe (may be NULL).  */
static struct tu_proc *hostile(int *stdin_fd, char code[64],
			       const char *mode, const char *arg1,
			       const char *arg2, const char *arg3)
{
	struct tu_proc *fixture;
	int unused_fd;

	fixture = tu_fixture_start_stdin(stdin_fd ? stdin_fd : &unused_fd,
					 "hostile", mode, LONG_RUN, arg1, arg2,
					 arg3, NULL);
	if (fixture == NULL)
		remove_files();
	ck_assert_msg(fixture != NULL, "the fixture could not be started");
	remember_perf_map(fixture->pid);
	if (!tu_proc_wait_line(fixture, "ready", READY_TIMEOUT_MS)) {
		tu_proc_kill(fixture);
		remove_files();
		ck_abort_msg("hostile %s did not print \"ready\"", mode);
	}
	if (code != NULL) {
		/* "code ADDR SIZE": as a perf map line wants them.  */
		const char *line = strstr(fixture->output, "code ");

		ck_assert_msg(line != NULL, "no code line: %s",
			      fixture->output);
		snprintf(code, 64, "%.*s", (int)strcspn(line + 5, "\n"),
			 line + 5);
	}
	return fixture;
}

/* The target runs on, untraced: cprof-attach let go of every thread. */
static void expect_target_free(const struct run *run, pid_t pid)
{
	CHECK_RUN(kill(pid, 0) == 0, run, "the target %d is gone", (int)pid);
	CHECK_RUN(tu_traced_tasks(pid) == 0, run,
		  "%d threads of the target %d are still traced",
		  tu_traced_tasks(pid), (int)pid);
	CHECK_RUN(tu_wait_cpu_ticks(pid, 2, 10000), run,
		  "the target %d does not run any more (state %c)", (int)pid,
		  tu_proc_state(pid));
}

/* RUN finished in time with exit status 0 and a folded profile.  */
static struct tu_profile *expect_profile(const struct run *run)
{
	char error[256];
	struct tu_profile *profile;

	CHECK_RUN(!run->timed_out, run, "cprof-attach hung: killed after %d "
		  "ms", RUN_TIMEOUT_MS);
	CHECK_RUN(WIFEXITED(run->status) && WEXITSTATUS(run->status) == 0,
		  run, "cprof-attach did not exit with status 0");
	profile = tu_profile_parse(run->out, error, sizeof(error));
	CHECK_RUN(profile != NULL && profile->count > 0, run,
		  "no folded profile: %s", profile ? "empty" : error);
	return profile;
}

static size_t count_lines_with(const char *text, const char *needle)
{
	size_t n = 0;

	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char *copy = strndup(line, len);

		if (copy && strstr(copy, needle))
			n++;
		free(copy);
		line = end ? end + 1 : NULL;
	}
	return n;
}

/* Exactly one line on RUN's stderr is a warning that contains each of
 * the WORDS (NULL-ended).  */
static void expect_one_warning(const struct run *run,
			       const char *const words[])
{
	size_t n = 0;

	for (const char *line = run->err; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char *copy = strndup(line, len);
		bool all = copy && strstr(copy, "warning") != NULL;

		for (size_t i = 0; all && words[i]; i++)
			all = strstr(copy, words[i]) != NULL;
		n += all;
		free(copy);
		line = end ? end + 1 : NULL;
	}
	CHECK_RUN(n == 1, run, "%zu warnings with \"%s\"%s, expected one", n,
		  words[0], words[1] ? " (and more words)" : "");
}

/* Peak RSS of cprof-attach on a target with no perf map: what the
 * memory bounds below are relative to (the sanitizer build weighs more). */
static long baseline_rss_kb(void)
{
	static long baseline;
	struct tu_proc *fixture;
	struct run *run;
	struct tu_profile *profile;

	if (baseline > 0)
		return baseline;
	fixture = hostile(NULL, NULL, "none", NULL, NULL, NULL);
	run = run_cprof(false, TU_FRAMES("-q", "--no-debuginfod", "-d", "1",
					 fixture->pid_text));
	profile = expect_profile(run);
	tu_profile_free(profile);
	baseline = run->max_rss_kb;
	tu_proc_kill(fixture);
	return baseline;
}

/* ------------------------------------------------------ the perf map */

/* A FIFO at /tmp/perf-PID.map: opening it for reading waited for a
 * writer for ever, the target stayed traced.  Also with --dump.  */
START_TEST(test_perf_map_fifo)
{
	struct tu_proc *fixture = hostile(NULL, NULL, "fifo", NULL, NULL,
					  NULL);
	struct run *run = run_cprof(false, TU_FRAMES("-q", "--no-debuginfod",
		"-d", "1", fixture->pid_text));
	struct tu_profile *profile = expect_profile(run);

	expect_one_warning(run, TU_FRAMES("perf map", "a FIFO"));
	CHECK_RUN(tu_profile_count_frame(profile, "[unknown]") > 0, run,
		  "the generated code was named from a FIFO");
	tu_profile_free(profile);
	expect_target_free(run, fixture->pid);

	run = run_cprof(false, TU_FRAMES("--dump", "--no-debuginfod",
					 fixture->pid_text));
	CHECK_RUN(!run->timed_out && WIFEXITED(run->status)
		  && WEXITSTATUS(run->status) == 0, run,
		  "cprof-attach --dump did not finish well");
	CHECK_RUN(strstr(run->out, "Thread ") != NULL, run, "no dump");
	expect_target_free(run, fixture->pid);
}
END_TEST

/* A symlink to /dev/zero: a line that never ends, read into memory at
 * 20 MB/s.  */
START_TEST(test_perf_map_dev_zero)
{
	long baseline = baseline_rss_kb();
	struct tu_proc *fixture = hostile(NULL, NULL, "symlink", "/dev/zero",
					  NULL, NULL);
	struct run *run = run_cprof(false, TU_FRAMES("-q", "--no-debuginfod",
		"-d", "1", fixture->pid_text));
	struct tu_profile *profile = expect_profile(run);

	expect_one_warning(run, TU_FRAMES("perf map", "symbolic link"));
	CHECK_RUN(run->max_rss_kb < baseline + RSS_SLACK_KB, run,
		  "peak RSS %ld KiB, %ld KiB without a perf map", run->max_rss_kb,
		  baseline);
	tu_profile_free(profile);
	expect_target_free(run, fixture->pid);
}
END_TEST

/* A file only root may read, with a perf map line naming the target's
 * code: its "name" must not reach the profile through cprof-attach.  */
static void write_secret(const char *path, const char *code)
{
	char text[256];

	snprintf(text, sizeof(text), "%s root_only_secret_name\n", code);
	write_file(path, text, 0600);
	ck_assert_int_eq(chown(path, 0, 0), 0);
}

/* ... through a symlink the target made.  */
START_TEST(test_perf_map_symlink_to_secret)
{
	const char *dir = nobody_dir();
	char secret[PATH_MAX], code[64];
	struct tu_proc *fixture;
	struct run *run;
	struct tu_profile *profile;

	snprintf(secret, sizeof(secret), "%s/secret", dir);
	fixture = hostile(NULL, code, "symlink", secret, NULL, NULL);
	write_secret(secret, code);
	run = run_cprof(false, TU_FRAMES("-q", "--no-debuginfod", "-d", "1",
					 fixture->pid_text));
	unlink(secret);
	profile = expect_profile(run);
	CHECK_RUN(strstr(run->out, "root_only_secret_name") == NULL, run,
		  "the root-only file's content is in the profile");
	expect_one_warning(run, TU_FRAMES("perf map", "symbolic link"));
	tu_profile_free(profile);
	expect_target_free(run, fixture->pid);
}
END_TEST

/* ... through a hard link (fs.protected_hardlinks may be off; root makes
 * it here in any case): root's file, but not one the target may read.  */
START_TEST(test_perf_map_hardlink_to_secret)
{
	const char *dir = nobody_dir();
	char secret[PATH_MAX], map[64], code[64];
	struct tu_proc *fixture;
	struct run *run;
	struct tu_profile *profile;

	snprintf(secret, sizeof(secret), "%s/secret", dir);
	fixture = hostile(NULL, code, "none", NULL, NULL, NULL);
	write_secret(secret, code);
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)fixture->pid);
	ck_assert_msg(link(secret, map) == 0, "link %s %s: %s", secret, map,
		      strerror(errno));
	run = run_cprof(false, TU_FRAMES("-q", "--no-debuginfod", "-d", "1",
					 fixture->pid_text));
	unlink(map);
	unlink(secret);
	profile = expect_profile(run);
	CHECK_RUN(strstr(run->out, "root_only_secret_name") == NULL, run,
		  "the root-only file's content is in the profile");
	expect_one_warning(run, TU_FRAMES("perf map", "may not read"));
	tu_profile_free(profile);
	expect_target_free(run, fixture->pid);
}
END_TEST

/* A perf map of OWNER with MODE naming the target's code NAME: planted
 * by the test, then profiled.  */
static struct run *planted_map_run(uid_t owner, mode_t mode,
				   const char *name, struct tu_proc **out)
{
	char map[64], code[64], text[256];
	struct tu_proc *fixture = hostile(NULL, code, "none", NULL, NULL, NULL);
	struct run *run;

	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)fixture->pid);
	snprintf(text, sizeof(text), "%s %s\n", code, name);
	write_file(map, text, mode);
	ck_assert_int_eq(chown(map, owner, owner), 0);
	run = run_cprof(false, TU_FRAMES("-q", "--no-debuginfod", "-d", "1",
					 fixture->pid_text));
	unlink(map);
	*out = fixture;
	return run;
}

/* Another user's file at the target's perf map path.  */
START_TEST(test_perf_map_of_another_user)
{
	struct tu_proc *fixture;
	struct run *run = planted_map_run(OTHER_UID, 0644,
					  "planted_by_another_user", &fixture);
	struct tu_profile *profile = expect_profile(run);

	CHECK_RUN(strstr(run->out, "planted_by_another_user") == NULL, run,
		  "another user's perf map named the target's code");
	expect_one_warning(run, TU_FRAMES("perf map", "owned by another user",
					  "4242"));
	tu_profile_free(profile);
	expect_target_free(run, fixture->pid);
}
END_TEST

/* What the rules let through: the target's own map, even one only it
 * may read, and a map of root's that everyone may read.  */
START_TEST(test_perf_map_of_target_or_root)
{
	struct tu_proc *fixture;
	struct run *run = planted_map_run(NOBODY, 0600, "jit_of_the_target",
					  &fixture);
	struct tu_profile *profile = expect_profile(run);

	CHECK_RUN(tu_profile_count_leaf(profile, "jit_of_the_target") > 0,
		  run, "the target's own perf map was not used");
	CHECK_RUN(count_lines_with(run->err, "warning") == 0, run,
		  "a warning about the target's own perf map");
	tu_profile_free(profile);

	run = planted_map_run(0, 0644, "jit_of_root", &fixture);
	profile = expect_profile(run);
	CHECK_RUN(tu_profile_count_leaf(profile, "jit_of_root") > 0, run,
		  "root's readable perf map was not used");
	tu_profile_free(profile);
}
END_TEST

/* Wait until RUN's raw output (so far) has a sample line that contains
 * one of TEXTS (NULL-ended; "" for any sample), at most TIMEOUT_MS.  The
 * first sample line says that cprof-attach has read the target's
 * mappings and named a first stack.  */
static bool wait_sample_with(struct run *run, const char *const texts[],
			     int timeout_ms)
{
	uint64_t deadline_ns = tu_now_ns() + (uint64_t)timeout_ms * 1000000u;
	int status;

	while (tu_now_ns() < deadline_ns) {
		char *text = slurp_file(run->out_file);
		bool seen = false;

		for (const char *line = text; *line && !seen;) {
			const char *end = strchr(line, '\n');

			if (!end)
				break;
			for (size_t i = 0; line[0] != '#' && texts[i] && !seen;
			     i++) {
				const char *hit = strstr(line, texts[i]);

				seen = hit != NULL && hit < end;
			}
			line = end + 1;
		}
		free(text);
		if (seen)
			return true;
		if (waitpid(run->pid, &status, WNOHANG) != 0)
			return false;
		poll(NULL, 0, 5);
	}
	return false;
}

/* Stop RUN as a user would, with Ctrl-C, and collect it.  */
static void run_interrupt(struct run *run)
{
	kill(run->pid, SIGINT);
	run_wait(run, RUN_TIMEOUT_MS);
}

/* Samples of raw text (the lines after the '#' header) with a frame
 * equal to FRAME.  */
static size_t raw_frame_count(const char *text, const char *frame)
{
	size_t n = 0;
	size_t frame_len = strlen(frame);

	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n');
		const char *stack = strchr(line, ' ');

		stack = stack ? strchr(stack + 1, ' ') : NULL;
		if (!end)
			end = line + strlen(line);
		for (const char *p = stack; line[0] != '#' && p && p < end;) {
			const char *next = memchr(p + 1, ';', (size_t)(end - p - 1));
			const char *stop = next ? next : end;

			if ((size_t)(stop - p - 1) == frame_len
			    && memcmp(p + 1, frame, frame_len) == 0) {
				n++;
				break;
			}
			p = next;
		}
		line = *end ? end + 1 : NULL;
	}
	return n;
}

/* 3 million lines, the code's line last; then the JIT appends one more
 * line for new code.  Both names must be used: the whole map read once,
 * then only what was appended; and cprof-attach's memory stays about the
 * size of the map.  */
START_TEST(test_perf_map_three_million_lines)
{
	long baseline = baseline_rss_kb();
	int stdin_fd;
	struct tu_proc *fixture = hostile(&stdin_fd, NULL, "lines", "3000000",
					  NULL, NULL);
	char map[64];
	struct stat st;
	struct run *run;
	bool sampled, more = false, late = false;

	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)fixture->pid);
	ck_assert_int_eq(stat(map, &st), 0);
	run = run_start(false, TU_FRAMES("-q", "--no-debuginfod", "-d", "60",
					 "--format", "raw", fixture->pid_text));
	sampled = wait_sample_with(run, TU_FRAMES(""), RUN_TIMEOUT_MS);

	/* The map has been read once: now the JIT appends to it.  */
	if (sampled)
		ck_assert_int_eq(write(stdin_fd, "more\n", 5), 5);
	more = sampled && tu_proc_wait_line(fixture, "more", LINE_TIMEOUT_MS);
	late = more && wait_sample_with(run, TU_FRAMES("jit_late_loop",
						       "[unknown]"),
					RUN_TIMEOUT_MS);
	run_interrupt(run);
	CHECK_RUN(!run->timed_out, run, "cprof-attach hung");
	CHECK_RUN(sampled && more && late, run, "first sample %d, second "
		  "function generated %d, sampled %d", sampled, more, late);
	CHECK_RUN(WIFEXITED(run->status) && WEXITSTATUS(run->status) == 0, run,
		  "cprof-attach did not exit with status 0");
	CHECK_RUN(raw_frame_count(run->out, "jit_hot_loop") > 0, run,
		  "the last of 3 million lines was not used");
	CHECK_RUN(raw_frame_count(run->out, "jit_late_loop") > 0, run,
		  "the line appended later was not used");
#if !defined(__SANITIZE_ADDRESS__)
	/* A table about the size of the text (the old reader held twice
	 * that); ASan's redzones and quarantine are not counted on.  */
	CHECK_RUN(run->max_rss_kb < baseline + st.st_size / 1024 * 3 / 2, run,
		  "peak RSS %ld KiB for a map of %ld KiB (%ld KiB without a "
		  "perf map)", run->max_rss_kb, (long)(st.st_size / 1024),
		  baseline);
#else
	(void)baseline;
#endif
	expect_target_free(run, fixture->pid);
}
END_TEST

/* One line of 64 MiB before the code's line: skipped without being held
 * in memory; the line after it is used.  */
START_TEST(test_perf_map_long_line)
{
	long baseline = baseline_rss_kb();
	struct tu_proc *fixture = hostile(NULL, NULL, "longline",
					  LONG_LINE_TEXT, NULL, NULL);
	struct run *run = run_cprof(false, TU_FRAMES("-q", "--no-debuginfod",
		"-d", "1", fixture->pid_text));
	char map[64];
	struct tu_profile *profile;

	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)fixture->pid);
	unlink(map);
	profile = expect_profile(run);
	CHECK_RUN(run->max_rss_kb < baseline + RSS_SLACK_KB, run,
		  "peak RSS %ld KiB, %ld KiB without a perf map (the line is "
		  "%ld KiB)", run->max_rss_kb, baseline, LONG_LINE_BYTES >> 10);
	CHECK_RUN(tu_profile_count_leaf(profile, "jit_hot_loop") > 0, run,
		  "the line after the long one was not used");
	expect_one_warning(run, TU_FRAMES("perf map", "longer than"));
	tu_profile_free(profile);
	expect_target_free(run, fixture->pid);
}
END_TEST

/* ---------------------------------------------------------- modules */

/* A copy of libhostile.so in a directory of nobody's; its path.  */
static const char *lib_copy(char path[PATH_MAX])
{
	const char *dir = nobody_dir();

	snprintf(path, PATH_MAX, "%s/libhostile.so", dir);
	copy_file(FIXTURES "/libhostile.so", path);
	return dir;
}

/* The library's frames, named (from the very file mapped) or not.  */
static uint64_t lib_named(const struct tu_profile *profile)
{
	return tu_profile_count_contiguous(profile,
		TU_FRAMES("host_lib_call", "hostile_lib_work",
			  "hostile_lib_inner"));
}

/* The library deleted, and a FIFO made under the name /proc/PID/maps
 * gives it now, "PATH (deleted)".  */
static void deleted_library(bool as_nobody)
{
	char lib[PATH_MAX];
	struct tu_proc *fixture;
	struct run *run;
	struct tu_profile *profile;

	lib_copy(lib);
	fixture = hostile(NULL, NULL, "deleted", lib, NULL, NULL);
	run = run_cprof(as_nobody, TU_FRAMES("-q", "--no-debuginfod", "-d", "1",
					     fixture->pid_text));
	profile = expect_profile(run);
	if (!as_nobody)
		CHECK_RUN(lib_named(profile) > 0, run,
			  "the deleted library was not named from the file "
			  "mapped");
	tu_profile_free(profile);
	expect_target_free(run, fixture->pid);
}

START_TEST(test_module_deleted_fifo)
{
	deleted_library(false);
}
END_TEST

START_TEST(test_module_deleted_fifo_unprivileged)
{
	deleted_library(true);
}
END_TEST

/* Can a child make a mount namespace of its own and mount a tmpfs in
 * it (root, but not in every container a CI runs in)?  */
static bool can_make_containers(void)
{
	pid_t child;
	int status;

	fflush(NULL);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0)
		_exit(unshare(CLONE_NEWNS) == 0
		      && mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0
		      && mount("tmpfs", "/tmp", "tmpfs", 0, NULL) == 0 ? 0 : 1);
	return waitpid(child, &status, 0) == child && WIFEXITED(status)
	       && WEXITSTATUS(status) == 0;
}

/* The library's name, read by cprof-attach from /proc/PID/maps, leads to
 * a trap by the time its file is opened: the library renamed away and a
 * FIFO made at its path (or, IN_CONTAINER, a symlink to an absolute path
 * that is a FIFO in the host and nothing in the container).  */
static void swapped_library(bool in_container, bool as_nobody)
{
	char lib[PATH_MAX], inner[PATH_MAX], hide[PATH_MAX], fifo[2 * PATH_MAX];
	const char *dir = lib_copy(lib);
	struct tu_proc *fixture;
	struct run *run;
	bool sampled, swapped, in_lib;

	if (in_container && !can_make_containers()) {
		fprintf(stderr, "SKIP %s: no mount namespace can be made "
			"here\n", __func__);
		return;
	}
	if (in_container) {
		/* Mount points for the fixture's tmpfs; in the host,
		 * HIDE/fifo is the trap.  */
		snprintf(inner, sizeof(inner), "%s/container", dir);
		snprintf(hide, sizeof(hide), "%s/hide", dir);
		snprintf(fifo, sizeof(fifo), "%s/fifo", hide);
		ck_assert_int_eq(mkdir(inner, 0755), 0);
		ck_assert_int_eq(mkdir(hide, 0755), 0);
		ck_assert_int_eq(mkfifo(fifo, 0666), 0);
		fixture = hostile(NULL, NULL, "container", inner, hide, lib);
	} else {
		fixture = hostile(NULL, NULL, "swap", lib, NULL, NULL);
	}
	run = run_start(as_nobody, TU_FRAMES("-q", "--no-debuginfod", "-d", "60",
					     "--format", "raw",
					     fixture->pid_text));
	/* cprof-attach has read the mappings: now the swap, then samples
	 * in the library, named or not.  */
	sampled = wait_sample_with(run, TU_FRAMES(""), RUN_TIMEOUT_MS);
	if (sampled)
		kill(fixture->pid, SIGUSR1);
	swapped = sampled && tu_proc_wait_line(fixture, "swapped",
					       LINE_TIMEOUT_MS);
	in_lib = swapped && wait_sample_with(run,
		TU_FRAMES("hostile_lib_", "libhostile.so+"), RUN_TIMEOUT_MS);
	run_interrupt(run);
	CHECK_RUN(!run->timed_out, run, "cprof-attach hung");
	CHECK_RUN(sampled && swapped && in_lib, run, "first sample %d, "
		  "swapped %d, sample in the library %d", sampled, swapped,
		  in_lib);
	CHECK_RUN(WIFEXITED(run->status) && WEXITSTATUS(run->status) == 0, run,
		  "cprof-attach did not exit with status 0");
	if (!as_nobody)
		CHECK_RUN(raw_frame_count(run->out, "hostile_lib_inner") > 0,
			  run, "the library was not named from the file "
			  "mapped");
	expect_target_free(run, fixture->pid);
}

START_TEST(test_module_swapped_for_fifo)
{
	swapped_library(false, false);
}
END_TEST

START_TEST(test_module_swapped_for_fifo_unprivileged)
{
	swapped_library(false, true);
}
END_TEST

START_TEST(test_container_symlink_to_host)
{
	swapped_library(true, false);
}
END_TEST

START_TEST(test_container_symlink_to_host_unprivileged)
{
	swapped_library(true, true);
}
END_TEST

/* A .gnu_debuglink "../hostile-secret.debug": looked up beside the
 * library, it left its directory, and a FIFO there hung the search.  */
START_TEST(test_debuglink_is_a_path)
{
	const char *dir = nobody_dir();
	char lib_dir[PATH_MAX], lib[2 * PATH_MAX], fifo[PATH_MAX];
	struct tu_proc *fixture;
	struct run *run;
	struct tu_profile *profile;

	snprintf(lib_dir, sizeof(lib_dir), "%s/lib", dir);
	snprintf(lib, sizeof(lib), "%s/libhostile-dl.so", lib_dir);
	snprintf(fifo, sizeof(fifo), "%s/hostile-secret.debug", dir);
	ck_assert_int_eq(mkdir(lib_dir, 0755), 0);
	copy_file(FIXTURES "/libhostile-dl.so", lib);
	ck_assert_int_eq(mkfifo(fifo, 0666), 0);
	fixture = hostile(NULL, NULL, "debuglink", lib, NULL, NULL);
	run = run_cprof(false, TU_FRAMES("-q", "--no-debuginfod", "-d", "1",
					 fixture->pid_text));
	profile = expect_profile(run);
	expect_one_warning(run, TU_FRAMES(".gnu_debuglink", "libhostile-dl.so",
					  "not a plain file name"));
	/* Its exported functions are still named (.dynsym).  */
	CHECK_RUN(tu_profile_count_frame(profile, "hostile_lib_work") > 0, run,
		  "hostile_lib_work is not named");
	tu_profile_free(profile);
	expect_target_free(run, fixture->pid);
}
END_TEST

/* ------------------------------------------------------------- suite */

static Suite *hostile_suite(void)
{
	Suite *suite = suite_create("hostile");
	TCase *tcase = tcase_create("perf map");

	tcase_add_checked_fixture(tcase, NULL, teardown);
	tcase_set_timeout(tcase, 120);
	tcase_add_test(tcase, test_perf_map_fifo);
	tcase_add_test(tcase, test_perf_map_dev_zero);
	tcase_add_test(tcase, test_perf_map_symlink_to_secret);
	tcase_add_test(tcase, test_perf_map_hardlink_to_secret);
	tcase_add_test(tcase, test_perf_map_of_another_user);
	tcase_add_test(tcase, test_perf_map_of_target_or_root);
	tcase_add_test(tcase, test_perf_map_three_million_lines);
	tcase_add_test(tcase, test_perf_map_long_line);
	suite_add_tcase(suite, tcase);

	tcase = tcase_create("modules");
	tcase_add_checked_fixture(tcase, NULL, teardown);
	tcase_set_timeout(tcase, 120);
	tcase_add_test(tcase, test_module_deleted_fifo);
	tcase_add_test(tcase, test_module_deleted_fifo_unprivileged);
	tcase_add_test(tcase, test_module_swapped_for_fifo);
	tcase_add_test(tcase, test_module_swapped_for_fifo_unprivileged);
	tcase_add_test(tcase, test_container_symlink_to_host);
	tcase_add_test(tcase, test_container_symlink_to_host_unprivileged);
	tcase_add_test(tcase, test_debuglink_is_a_path);
	suite_add_tcase(suite, tcase);
	return suite;
}

int main(void)
{
	SRunner *runner;
	int failed;

	if (geteuid() != 0) {
		fprintf(stderr, "check_hostile: SKIP: needs root (the target "
			"becomes nobody, files of other users are planted)\n");
		return 0;
	}
	runner = srunner_create(hostile_suite());
	srunner_run_all(runner, CK_NORMAL);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
