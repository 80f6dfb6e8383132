/* End-to-end tests of symbolization: cprof-attach on programs built the
 * way production programs are (stripped, with their debug information in
 * a separate file found by .gnu_debuglink, by build-id or from a
 * debuginfod server; C++ with templates, lambdas and inlining; a plugin
 * loaded and unloaded while profiled; a deleted executable; JIT code named
 * by a perf map; libc with its debug package), checked the way a user
 * would: the functions named, in the right order, and when a name cannot
 * be found, a frame that says where the code is ("module+0xOFFSET" that
 * addr2line accepts) and a warning that says why.
 *
 * Each test starts its own fixture and waits for its "ready" line on a
 * pipe (never a sleep), runs cprof-attach with a timeout and kills and
 * reaps everything in its teardown.  Every run has --no-debuginfod but
 * the one that tests debuginfod, so a DEBUGINFOD_URLS in the caller's
 * environment changes nothing.  On a failed check the run (exit status, stdout,
 * stderr) and the parsed profile are printed first.  */
#include <check.h>
#include <ctype.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <gelf.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cprof/addrspace.h"
#include "cprof/procfs.h"
#include "cprof/symbols.h"
#include "testutil.h"

#define FIXTURES CP_BUILD_DIR "/fixtures"

/* Generous bounds: they only end a test that hangs.  */
#define READY_TIMEOUT_MS 10000   /* fixture start-up */
#define RUN_TIMEOUT_MS 20000     /* a cprof-attach run of a few seconds */
#define EXIT_TIMEOUT_MS 15000    /* a fixture finishing its last seconds */
#define DEBUGINFOD_TIMEOUT_MS 20000  /* debuginfod start-up and first scan */

/* A fixture that outlives the test (the teardown kills it).  */
#define LONG_RUN "60"

/* One second at 299 Hz: about 300 samples, enough for the shares below,
 * and short, so the whole suite stays well under a minute.  */
#define DURATION "1"
#define FREQUENCY "299"

/* Fail the test with a formatted message, after printing RUN and PROFILE
 * (either may be NULL) for the log.  */
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

/* ------------------------------------------------ programs not in fixtures */

/* A program this file starts itself, because tu_fixture_start only runs
 * CP_BUILD_DIR/fixtures/NAME: a copy of a fixture elsewhere, or a system
 * tool (debuginfod).  Killed and reaped by the teardown.  */
struct program {
	pid_t pid;
	int stdout_fd;        /* read end of its stdout, -1 when not piped */
	char output[8192];    /* its stdout so far, NUL-ended */
	size_t output_len;
	bool reaped;
	int status;           /* wait status, once REAPED */
};

#define MAX_PROGRAMS 4
static struct program programs[MAX_PROGRAMS];
static size_t nprograms;

/* Directories whose contents may nest (a debuginfod cache): removed
 * whole by the teardown, before tu_cleanup (which removes one level).
 *
 * A failed check in fork mode ends the test without its teardown (Check
 * then kills the test's process group), so the tests also remove their
 * files in /tmp themselves as soon as the runs that need them are over,
 * before they check anything.  */
#define MAX_TREES 4
static char trees[MAX_TREES][PATH_MAX];
static size_t ntrees;

/* The PID whose /tmp/perf-PID.map the teardown removes (a JIT fixture
 * killed before its end leaves it behind).  */
static pid_t perf_map_pid;

/* Start ARGV[0] with ARGV.  Its stdout goes to a pipe we read (LOG NULL)
 * or, with its stderr, to the file LOG.  Fails the test when it cannot be
 * started.  */
static struct program *program_start(const char *const argv[],
				     const char *log)
{
	struct program *program;
	pid_t parent = getpid();
	int pipe_fds[2] = { -1, -1 };
	int log_fd = -1;

	ck_assert_msg(nprograms < MAX_PROGRAMS, "too many programs");
	program = &programs[nprograms];
	*program = (struct program){ .stdout_fd = -1 };
	if (log != NULL) {
		log_fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			      0644);
		ck_assert_msg(log_fd >= 0, "cannot create %s: %s", log,
			      strerror(errno));
	} else {
		ck_assert_int_eq(pipe2(pipe_fds, O_CLOEXEC), 0);
	}
	fflush(NULL);
	program->pid = fork();
	ck_assert_msg(program->pid >= 0, "fork: %s", strerror(errno));
	if (program->pid == 0) {
		sigset_t none;

		/* Die with the test process, whatever happens to it.  */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		signal(SIGPIPE, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (log_fd >= 0) {
			dup2(log_fd, STDOUT_FILENO);
			dup2(log_fd, STDERR_FILENO);
		} else {
			dup2(pipe_fds[1], STDOUT_FILENO);
		}
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	nprograms++;
	if (log_fd >= 0)
		close(log_fd);
	if (pipe_fds[1] >= 0)
		close(pipe_fds[1]);
	program->stdout_fd = pipe_fds[0];
	return program;
}

/* Read PROGRAM's stdout until a line equal to LINE has come, TIMEOUT_MS
 * passed or the pipe closed.  True when the line came.  */
static bool program_wait_line(struct program *program, const char *line,
			      int timeout_ms)
{
	uint64_t deadline_ns = tu_now_ns() + (uint64_t)timeout_ms * 1000000u;
	size_t line_len = strlen(line);

	for (;;) {
		const char *start = program->output;
		const char *end;
		uint64_t now_ns;
		struct pollfd wanted = { .fd = program->stdout_fd,
					 .events = POLLIN };
		ssize_t got;

		while ((end = strchr(start, '\n')) != NULL) {
			if ((size_t)(end - start) == line_len
			    && memcmp(start, line, line_len) == 0)
				return true;
			start = end + 1;
		}
		now_ns = tu_now_ns();
		if (program->stdout_fd < 0 || now_ns >= deadline_ns
		    || program->output_len + 1 >= sizeof(program->output))
			return false;
		if (poll(&wanted, 1,
			 (int)((deadline_ns - now_ns) / 1000000u) + 1) <= 0)
			continue;
		got = read(program->stdout_fd, program->output
			   + program->output_len, sizeof(program->output)
			   - program->output_len - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			close(program->stdout_fd);
			program->stdout_fd = -1;
			continue;
		}
		program->output_len += (size_t)got;
		program->output[program->output_len] = '\0';
	}
}

/* True when PROGRAM has exited (and reap it).  */
static bool program_exited(struct program *program)
{
	if (!program->reaped
	    && waitpid(program->pid, &program->status, WNOHANG) == program->pid)
		program->reaped = true;
	return program->reaped;
}

static void program_kill(struct program *program)
{
	if (!program->reaped && program->pid > 0) {
		kill(program->pid, SIGKILL);
		while (waitpid(program->pid, &program->status, 0) < 0
		       && errno == EINTR)
			;
		program->reaped = true;
	}
	if (program->stdout_fd >= 0) {
		close(program->stdout_fd);
		program->stdout_fd = -1;
	}
}

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

/* Remove DIR and everything below it now.  */
static void remove_tree(const char *dir)
{
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A new temporary directory (tu_temp_dir) that the teardown removes with
 * everything below it.  */
static const char *temp_tree(void)
{
	const char *dir = tu_temp_dir();

	ck_assert_msg(dir != NULL, "cannot create a temporary directory");
	if (ntrees < MAX_TREES)
		snprintf(trees[ntrees++], PATH_MAX, "%s", dir);
	return dir;
}

/* Remove the perf map a JIT fixture PID wrote, if it is still there.  */
static void remove_perf_map(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)pid);
	unlink(path);
}

static void teardown(void)
{
	/* Newest first, as tu_cleanup does.  */
	while (nprograms > 0)
		program_kill(&programs[--nprograms]);
	while (ntrees > 0)
		remove_tree(trees[--ntrees]);
	tu_cleanup();
	if (perf_map_pid > 0) {
		remove_perf_map(perf_map_pid);
		perf_map_pid = 0;
	}
}

/* ------------------------------------------------------------- helpers */

/* Check that FIXTURE started and printed "ready"; return it.  */
static struct tu_proc *ready(struct tu_proc *fixture)
{
	ck_assert_msg(fixture != NULL, "the fixture could not be started");
	ck_assert_msg(tu_proc_wait_line(fixture, "ready", READY_TIMEOUT_MS),
		      "fixture %d did not print \"ready\" (stdout so far: %s)",
		      (int)fixture->pid, fixture->output);
	return fixture;
}

/* Check that RUN finished in time with exit status 0 and printed a
 * well-formed, non-empty folded profile; return the parsed profile.  */
static struct tu_profile *expect_profile(const struct tu_run *run)
{
	char error[256];
	struct tu_profile *profile;

	CHECK_RUN(!run->timed_out, run, no_profile,
		  "cprof-attach did not finish in time");
	CHECK_RUN(tu_run_exit_code(run) == 0, run, no_profile,
		  "cprof-attach exited with %d, expected 0",
		  tu_run_exit_code(run));
	profile = tu_profile_parse(run->out, error, sizeof(error));
	CHECK_RUN(profile != NULL, run, no_profile,
		  "the output is not a folded profile: %s", error);
	CHECK_RUN(tu_profile_total(profile) > 0, run, profile,
		  "the profile is empty");
	return profile;
}

/* Wait for FIXTURE to finish and check its self-check: "ok N", exit 0.  */
static void expect_fixture_ok(struct tu_proc *fixture)
{
	ck_assert_msg(tu_proc_wait_exit(fixture, EXIT_TIMEOUT_MS),
		      "fixture %d did not exit at the end of its run",
		      (int)fixture->pid);
	ck_assert_msg(tu_proc_has_line_prefix(fixture, "ok "),
		      "fixture %d did not report \"ok\"; its output: %s",
		      (int)fixture->pid, fixture->output);
	ck_assert_msg(WIFEXITED(fixture->status)
		      && WEXITSTATUS(fixture->status) == 0,
		      "fixture %d ended with wait status %#x, expected exit 0",
		      (int)fixture->pid, (unsigned)fixture->status);
}

/* The four frames every sample of the chain fixtures should hold.  */
#define CHAIN TU_FRAMES("main", "chain_alpha", "chain_beta", "chain_gamma")

/* Check that at least PERCENT % of PROFILE's samples hold the chain.  */
static void expect_chain_share(const struct tu_run *run,
			       const struct tu_profile *profile,
			       unsigned percent)
{
	uint64_t total = tu_profile_total(profile);
	uint64_t chain = tu_profile_count_contiguous(profile, CHAIN);

	CHECK_RUN(chain * 100 >= total * percent, run, profile,
		  "main;chain_alpha;chain_beta;chain_gamma is in %" PRIu64
		  " of %" PRIu64 " samples, expected at least %u %%",
		  chain, total, percent);
}

static bool has_prefix(const char *text, const char *prefix)
{
	return strncmp(text, prefix, strlen(prefix)) == 0;
}

static bool has_suffix(const char *text, const char *suffix)
{
	size_t len = strlen(text), suffix_len = strlen(suffix);

	return len >= suffix_len
	       && strcmp(text + len - suffix_len, suffix) == 0;
}

/* The first frame of PROFILE that PREDICATE(frame, ARG) accepts, or NULL. */
static const char *find_frame(const struct tu_profile *profile,
			      bool (*predicate)(const char *, const char *),
			      const char *arg)
{
	for (size_t i = 0; i < profile->count; i++)
		for (size_t j = 0; j < profile->stacks[i].depth; j++)
			if (predicate(profile->stacks[i].frames[j], arg))
				return profile->stacks[i].frames[j];
	return NULL;
}

static bool frame_contains(const char *frame, const char *text)
{
	return strstr(frame, text) != NULL;
}

/* Samples whose leaf frame starts with PREFIX.  */
static uint64_t count_leaf_prefix(const struct tu_profile *profile,
				  const char *prefix)
{
	uint64_t samples = 0;

	for (size_t i = 0; i < profile->count; i++) {
		const struct tu_stack *stack = &profile->stacks[i];

		if (stack->depth > 0
		    && has_prefix(stack->frames[stack->depth - 1], prefix))
			samples += stack->count;
	}
	return samples;
}

/* A frame naming one of the chain functions, or NULL.  */
static const char *chain_frame(const struct tu_profile *profile)
{
	static const char *const names[] = { "chain_alpha", "chain_beta",
					     "chain_gamma" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *frame = find_frame(profile, frame_contains,
					       names[i]);

		if (frame != NULL)
			return frame;
	}
	return NULL;
}

/* Check that PROFILE of chain fixture MODULE names none of the chain's
 * functions and that nearly every sample ends in a "MODULE+0x..." frame:
 * the program's code, found but not named.  */
static void expect_chain_unnamed(const struct tu_run *run,
				 const struct tu_profile *profile,
				 const char *module)
{
	char prefix[64];
	uint64_t total = tu_profile_total(profile);
	uint64_t unnamed;
	const char *named = chain_frame(profile);

	CHECK_RUN(named == NULL, run, profile,
		  "frame \"%s\" is named although %s's debug information "
		  "should not have been found", named, module);
	snprintf(prefix, sizeof(prefix), "%s+0x", module);
	unnamed = count_leaf_prefix(profile, prefix);
	CHECK_RUN(unnamed * 100 >= total * 90, run, profile,
		  "%" PRIu64 " of %" PRIu64 " samples end in a \"%s...\" "
		  "frame, expected at least 90 %%", unnamed, total, prefix);
}

/* Lines of TEXT that contain NEEDLE.  */
static size_t count_lines_with(const char *text, const char *needle)
{
	size_t lines = 0;
	const char *start = text;

	while (start != NULL && *start != '\0') {
		const char *end = strchr(start, '\n');
		size_t len = end ? (size_t)(end - start) : strlen(start);
		char *line = strndup(start, len);

		if (line != NULL && strstr(line, needle) != NULL)
			lines++;
		free(line);
		start = end ? end + 1 : NULL;
	}
	return lines;
}

/* The first line of TEXT that contains NEEDLE, copied into LINE.  */
static bool line_with(const char *text, const char *needle, char *line,
		      size_t size)
{
	const char *hit = strstr(text, needle);
	const char *start, *end;

	if (hit == NULL)
		return false;
	for (start = hit; start > text && start[-1] != '\n'; start--)
		;
	end = strchr(hit, '\n');
	snprintf(line, size, "%.*s",
		 (int)(end ? (size_t)(end - start) : strlen(start)), start);
	return true;
}

/* Run shell COMMAND and return its stdout (the caller frees it); fails
 * the test when it does not exit 0.  */
static char *command_output(const char *command)
{
	FILE *pipe = popen(command, "r");
	char *text = malloc(1);
	size_t len = 0;
	char chunk[4096];
	size_t got;
	int status;

	ck_assert_msg(pipe != NULL && text != NULL, "popen %s: %s", command,
		      strerror(errno));
	text[0] = '\0';
	while ((got = fread(chunk, 1, sizeof(chunk), pipe)) > 0) {
		char *grown = realloc(text, len + got + 1);

		ck_assert_msg(grown != NULL, "out of memory");
		text = grown;
		memcpy(text + len, chunk, got);
		len += got;
		text[len] = '\0';
	}
	status = pclose(pipe);
	ck_assert_msg(status != -1 && WIFEXITED(status)
		      && WEXITSTATUS(status) == 0,
		      "\"%s\" failed (status %#x); its output: %s", command,
		      (unsigned)status, text);
	return text;
}

/* Copy file FROM to TO, or only its first KEEP bytes (KEEP < 0: all).  */
static void copy_file(const char *from, const char *to, off_t keep)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	char chunk[65536];
	off_t copied = 0;
	ssize_t got;

	ck_assert_msg(in >= 0, "cannot open %s: %s", from, strerror(errno));
	ck_assert_msg(out >= 0, "cannot create %s: %s", to, strerror(errno));
	while ((keep < 0 || copied < keep)
	       && (got = read(in, chunk, sizeof(chunk))) > 0) {
		size_t want = (size_t)got;

		if (keep >= 0 && copied + got > keep)
			want = (size_t)(keep - copied);
		ck_assert_msg(write(out, chunk, want) == (ssize_t)want,
			      "cannot write %s: %s", to, strerror(errno));
		copied += (off_t)want;
	}
	close(in);
	ck_assert_msg(close(out) == 0, "cannot write %s: %s", to,
		      strerror(errno));
}

static off_t file_size(const char *path)
{
	struct stat st;

	ck_assert_msg(stat(path, &st) == 0, "cannot stat %s: %s", path,
		      strerror(errno));
	return st.st_size;
}

/* The GNU build-id of ELF file PATH in hex into ID (at least 41 bytes);
 * false when it has none.  */
static bool build_id(const char *path, char *id, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *elf;
	const void *bits = NULL;
	ssize_t len = -1;

	if (fd < 0)
		return false;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf != NULL)
		len = dwelf_elf_gnu_build_id(elf, &bits);
	if (len > 0 && (size_t)len * 2 < size)
		for (ssize_t i = 0; i < len; i++)
			snprintf(id + 2 * i, 3, "%02x",
				 ((const unsigned char *)bits)[i]);
	if (elf != NULL)
		elf_end(elf);
	close(fd);
	return len > 0 && (size_t)len * 2 < size;
}

/* ------------------------------------------------ separate debug files */

/* chain-debuglink is stripped; its .gnu_debuglink names a file that only
 * --debuginfo-dir leads to.  With it, the chain is named; without it, the
 * frames are the module and an offset.  */
START_TEST(test_debuglink)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-debuglink",
							 LONG_RUN, NULL));
	struct tu_run *run = tu_cprof_run(RUN_TIMEOUT_MS, "-q",
		"--no-debuginfod", "-d", DURATION, "-F", FREQUENCY,
		"--debuginfo-dir", FIXTURES "/debug-dl", fixture->pid_text,
		NULL);
	struct tu_profile *profile = expect_profile(run);

	expect_chain_share(run, profile, 90);
	tu_profile_free(profile);

	run = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "--no-debuginfod", "-d",
			   DURATION, "-F", FREQUENCY, fixture->pid_text, NULL);
	profile = expect_profile(run);
	expect_chain_unnamed(run, profile, "chain-debuglink");
	tu_profile_free(profile);
}
END_TEST

/* chain-buildid is stripped and has no debuglink: its debug file is only
 * at DIR/.build-id/xx/rest.debug.  */
START_TEST(test_buildid)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-buildid",
							 LONG_RUN, NULL));
	struct tu_run *run = tu_cprof_run(RUN_TIMEOUT_MS, "-q",
		"--no-debuginfod", "-d", DURATION, "-F", FREQUENCY,
		"--debuginfo-dir", FIXTURES "/debug-bid", fixture->pid_text,
		NULL);
	struct tu_profile *profile = expect_profile(run);

	expect_chain_share(run, profile, 90);
	tu_profile_free(profile);
}
END_TEST

/* The same with the directory given relative to the current directory,
 * as a user types it: "--debuginfo-dir fixtures/debug-bid" from the
 * build directory.  */
START_TEST(test_buildid_relative_dir)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-buildid",
							 LONG_RUN, NULL));
	struct tu_run *run;
	struct tu_profile *profile;

	ck_assert_msg(chdir(CP_BUILD_DIR) == 0, "cannot cd to %s: %s",
		      CP_BUILD_DIR, strerror(errno));
	run = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "--no-debuginfod", "-d",
			   DURATION, "-F", FREQUENCY, "--debuginfo-dir",
			   "fixtures/debug-bid", fixture->pid_text, NULL);
	profile = expect_profile(run);
	expect_chain_share(run, profile, 90);
	tu_profile_free(profile);
}
END_TEST

/* -------------------------------------------------------------- debuginfod */

/* A free TCP port on the loopback interface (the kernel's pick for port
 * 0; free again once we close it, and not handed out again at once).  */
static int free_port(void)
{
	struct sockaddr_in address = { .sin_family = AF_INET,
				       .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(address);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int port = -1;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&address, len) == 0
	    && getsockname(fd, (struct sockaddr *)&address, &len) == 0)
		port = ntohs(address.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* The HTTP status of GET PATH from 127.0.0.1:PORT, or -1 when the server
 * does not answer (not listening yet).  */
static int http_status(int port, const char *path)
{
	struct sockaddr_in address = { .sin_family = AF_INET,
				       .sin_port = htons((uint16_t)port),
				       .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char request[512], reply[64];
	size_t got = 0;
	int status = -1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0)
		goto out;
	snprintf(request, sizeof(request),
		 "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
	if (write(fd, request, strlen(request)) != (ssize_t)strlen(request))
		goto out;
	/* "HTTP/1.1 200 OK": the status is the second word.  */
	while (got < sizeof(reply) - 1) {
		struct pollfd wanted = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&wanted, 1, 5000) <= 0)
			break;
		n = read(fd, reply + got, sizeof(reply) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		reply[got] = '\0';
		if (strchr(reply, '\n') != NULL)
			break;
	}
	reply[got] = '\0';
	if (sscanf(reply, "HTTP/%*s %d", &status) != 1)
		status = -1;
out:
	close(fd);
	return status;
}

/* chain-dinfod's debug file is served only by a debuginfod.  Start the
 * real server on it, wait until it serves the file, and check that
 * cprof-attach fetches it when DEBUGINFOD_URLS says so, and does not
 * with --no-debuginfod.  */
START_TEST(test_debuginfod)
{
	const char *dir;
	char db[PATH_MAX], cache[PATH_MAX], log[PATH_MAX], url[64];
	char port_text[16], id[64], path[128], *server_log;
	struct program *server;
	struct tu_proc *fixture;
	struct tu_run *unnamed_run, *named_run;
	struct tu_profile *profile;
	uint64_t deadline_ns;
	int port, status = -1;

	if (access("/usr/bin/debuginfod", X_OK) != 0) {
		fprintf(stderr, "SKIP test_debuginfod: /usr/bin/debuginfod is "
			"not installed (apt-get install debuginfod)\n");
		return;
	}
	ck_assert_msg(build_id(FIXTURES "/chain-dinfod", id, sizeof(id)),
		      "%s has no build-id", FIXTURES "/chain-dinfod");
	fixture = ready(tu_fixture_start("chain-dinfod", LONG_RUN, NULL));
	dir = temp_tree();
	snprintf(db, sizeof(db), "%s/db.sqlite", dir);
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	snprintf(log, sizeof(log), "%s/debuginfod.log", dir);
	port = free_port();
	ck_assert_msg(port > 0, "no free loopback port: %s", strerror(errno));
	snprintf(port_text, sizeof(port_text), "%d", port);
	server = program_start(TU_FRAMES("/usr/bin/debuginfod", "-p", port_text,
					 "-F", FIXTURES "/debuginfod-root",
					 "-d", db), log);

	/* Ready when it serves the file: it has bound the port and scanned
	 * the directory.  Polled, since it says neither.  */
	snprintf(path, sizeof(path), "/buildid/%s/debuginfo", id);
	deadline_ns = tu_now_ns() + DEBUGINFOD_TIMEOUT_MS * 1000000ull;
	while (tu_now_ns() < deadline_ns && !program_exited(server)
	       && (status = http_status(port, path)) != 200)
		poll(NULL, 0, 20);
	if (status != 200) {
		server_log = tu_read_file(log);
		program_kill(server);
		remove_tree(dir);
		ck_abort_msg("debuginfod on port %d did not serve %s within "
			     "%d ms (last status %d%s); its log:\n%s", port,
			     path, DEBUGINFOD_TIMEOUT_MS, status,
			     server->reaped ? ", it exited" : "",
			     server_log ? server_log : "(none)");
	}

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	/* tu_cprof_run's child inherits our environment.  */
	setenv("DEBUGINFOD_URLS", url, 1);
	setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
	setenv("DEBUGINFOD_TIMEOUT", "10", 1);

	/* First --no-debuginfod, with the server up and the cache empty: the
	 * flag alone keeps the names away.  */
	unnamed_run = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "--no-debuginfod",
				   "-d", DURATION, "-F", FREQUENCY,
				   fixture->pid_text, NULL);
	/* Then as a user with DEBUGINFOD_URLS set runs it.  */
	named_run = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "-d", DURATION, "-F",
				 FREQUENCY, fixture->pid_text, NULL);
	unsetenv("DEBUGINFOD_URLS");
	unsetenv("DEBUGINFOD_CACHE_PATH");
	unsetenv("DEBUGINFOD_TIMEOUT");
	server_log = tu_read_file(log);
	program_kill(server);
	remove_tree(dir);

	profile = expect_profile(unnamed_run);
	expect_chain_unnamed(unnamed_run, profile, "chain-dinfod");
	tu_profile_free(profile);
	profile = expect_profile(named_run);
	if (chain_frame(profile) == NULL)
		fprintf(stderr, "debuginfod's log:\n%s\n",
			server_log ? server_log : "(none)");
	free(server_log);
	expect_chain_share(named_run, profile, 90);
	tu_profile_free(profile);
}
END_TEST

/* ---------------------------------------------------- no debug info at all */

/* The function name eu-addr2line -f printed on LINE: the name, or for an
 * address in an inlined copy ("fx_work inlined at f.c:21:9 in
 * chain_gamma") the function it was inlined into, as without -i the
 * question is which real function holds the address.  */
static void addr2line_function(const char *line, char *name, size_t size)
{
	const char *in = strstr(line, " inlined at ");

	if (in != NULL) {
		const char *last = NULL;

		for (const char *p = in; (p = strstr(p, " in ")) != NULL; p++)
			last = p;
		if (last != NULL)
			line = last + 4;
	}
	snprintf(name, size, "%.*s", (int)strcspn(line, "\n"), line);
}

/* chain-stripped has no symbols and no debug file anywhere: frames are
 * "chain-stripped+0xOFFSET".  The offsets must be ones addr2line accepts:
 * those of the leaf-most four frames of the hottest stack lead, in the
 * unstripped build, to chain_gamma, chain_beta, chain_alpha and main.  */
START_TEST(test_stripped_offsets)
{
	static const char *const expected[] = { "chain_gamma", "chain_beta",
						"chain_alpha", "main" };
	const size_t want = sizeof(expected) / sizeof(expected[0]);
	struct tu_proc *fixture = ready(tu_fixture_start("chain-stripped",
							 LONG_RUN, NULL));
	struct tu_run *run = tu_cprof_run(RUN_TIMEOUT_MS, "-q",
		"--no-debuginfod", "-d", DURATION, "-F", FREQUENCY,
		fixture->pid_text, NULL);
	struct tu_profile *profile = expect_profile(run);
	const struct tu_stack *hottest = &profile->stacks[0];
	const char *offsets[4];
	size_t found = 0;
	char command[1024];
	char *output;
	const char *line;

	expect_chain_unnamed(run, profile, "chain-stripped");
	for (size_t i = 1; i < profile->count; i++)
		if (profile->stacks[i].count > hottest->count)
			hottest = &profile->stacks[i];
	for (size_t j = hottest->depth; j-- > 0 && found < want;) {
		if (!has_prefix(hottest->frames[j], "chain-stripped+0x"))
			break;
		offsets[found++] = hottest->frames[j]
				   + strlen("chain-stripped+");
	}
	CHECK_RUN(found == want, run, profile,
		  "the hottest stack ends in %zu \"chain-stripped+0x...\" "
		  "frames, expected at least %zu", found, want);
	snprintf(command, sizeof(command),
		 "eu-addr2line -f -e '%s/chain-unstripped' %s %s %s %s",
		 FIXTURES, offsets[0], offsets[1], offsets[2], offsets[3]);
	output = command_output(command);
	/* Two lines per address: the function, then file:line.  */
	line = output;
	for (size_t i = 0; i < want; i++) {
		char name[256];

		CHECK_RUN(line != NULL && *line != '\0', run, profile,
			  "%s printed too little:\n%s", command, output);
		addr2line_function(line, name, sizeof(name));
		CHECK_RUN(strcmp(name, expected[i]) == 0, run, profile,
			  "frame chain-stripped+%s (%zu from the leaf) is %s "
			  "in chain-unstripped, expected %s; %s printed:\n%s",
			  offsets[i], i, name, expected[i], command, output);
		line = strchr(line, '\n');
		line = line ? strchr(line + 1, '\n') : NULL;
		line = line ? line + 1 : NULL;
	}
	free(output);
	tu_profile_free(profile);
}
END_TEST

/* ----------------------------------------------------------------- C++ */

/* The chain of the cxx fixture starting at frame I of STACK:
 * Engine<int>::run, its lambda, crunch, then mix inlined into crunch.  */
static bool cxx_chain_at(const struct tu_stack *stack, size_t i)
{
	char *const *f = stack->frames + i;

	return i + 4 <= stack->depth
	       && has_prefix(f[0], "app::Engine<int>::run(")
	       && strstr(f[0], "lambda") == NULL
	       && has_prefix(f[1], "app::Engine<int>::run(")
	       && strstr(f[1], "{lambda(") != NULL
	       && strstr(f[1], "::operator()") != NULL
	       && has_prefix(f[2], "app::detail::crunch(")
	       && has_prefix(f[3], "app::detail::mix(")
	       && has_suffix(f[3], "_[i]");
}

static uint64_t count_cxx_chain(const struct tu_profile *profile)
{
	uint64_t samples = 0;

	for (size_t i = 0; i < profile->count; i++)
		for (size_t j = 0; j < profile->stacks[i].depth; j++)
			if (cxx_chain_at(&profile->stacks[i], j)) {
				samples += profile->stacks[i].count;
				break;
			}
	return samples;
}

static bool frame_is_inlined(const char *frame, const char *unused)
{
	(void)unused;
	return has_suffix(frame, "_[i]");
}

/* Demangled names, the lambda, the inlined function; --no-demangle keeps
 * the mangled names; --no-inline folds mix into crunch.  */
START_TEST(test_cxx)
{
	struct tu_proc *fixture = ready(tu_fixture_start("cxx", LONG_RUN,
							 NULL));
	struct tu_run *run = tu_cprof_run(RUN_TIMEOUT_MS, "-q",
		"--no-debuginfod", "-d", DURATION, "-F", FREQUENCY,
		fixture->pid_text, NULL);
	struct tu_profile *profile = expect_profile(run);
	uint64_t total = tu_profile_total(profile);
	uint64_t chain = count_cxx_chain(profile);
	const char *frame;

	CHECK_RUN(chain * 100 >= total * 90, run, profile,
		  "app::Engine<int>::run(...);{lambda}::operator();"
		  "app::detail::crunch(...);app::detail::mix(...)_[i] is in %"
		  PRIu64 " of %" PRIu64 " samples, expected at least 90 %%",
		  chain, total);
	frame = find_frame(profile, frame_contains, "_ZN");
	CHECK_RUN(frame == NULL, run, profile,
		  "frame \"%s\" is still mangled", frame);
	tu_profile_free(profile);

	run = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "--no-debuginfod",
			   "--no-demangle", "-d", DURATION, "-F", FREQUENCY,
			   fixture->pid_text, NULL);
	profile = expect_profile(run);
	frame = find_frame(profile, frame_contains, "app::");
	CHECK_RUN(frame == NULL, run, profile,
		  "frame \"%s\" is demangled despite --no-demangle", frame);
	/* app::detail::crunch(unsigned long, int) */
	CHECK_RUN(tu_profile_count_frame(profile, "_ZN3app6detail6crunchEmi")
		  * 100 >= tu_profile_total(profile) * 90, run, profile,
		  "the mangled name _ZN3app6detail6crunchEmi is not in 90 %% "
		  "of the samples with --no-demangle");
	tu_profile_free(profile);

	run = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "--no-debuginfod",
			   "--no-inline", "-d", DURATION, "-F", FREQUENCY,
			   fixture->pid_text, NULL);
	profile = expect_profile(run);
	frame = find_frame(profile, frame_is_inlined, NULL);
	CHECK_RUN(frame == NULL, run, profile,
		  "frame \"%s\" is an inlined frame despite --no-inline",
		  frame);
	CHECK_RUN(tu_profile_count_leaf(profile,
					"app::detail::crunch(unsigned long, int)")
		  * 100 >= tu_profile_total(profile) * 90, run, profile,
		  "with --no-inline, app::detail::crunch(unsigned long, int) "
		  "is not the leaf of 90 %% of the samples");
	tu_profile_free(profile);
}
END_TEST

/* ------------------------------------------------------------- plugin */

/* libplugin.so is loaded after the attach and unloaded before the end:
 * its frames must still be named.  */
START_TEST(test_plugin_unloaded)
{
	struct tu_proc *fixture = ready(tu_fixture_start("plugin-host", "4",
							 NULL));
	struct tu_run *run = tu_cprof_start("-q", "--no-debuginfod", "-d", "3",
					    "-F", FREQUENCY, fixture->pid_text,
					    NULL);
	struct tu_profile *profile;
	uint64_t total, plugin, host;
	const char *frame;

	ck_assert_msg(run != NULL, "cannot start cprof-attach");
	ck_assert_msg(tu_wait_traced(fixture->pid, 5000),
		      "cprof-attach did not attach to %d within 5 s",
		      (int)fixture->pid);
	ck_assert_int_eq(kill(fixture->pid, SIGUSR1), 0);
	ck_assert_msg(tu_proc_wait_line(fixture, "unloaded", 5000),
		      "plugin-host did not load, run and unload the plugin "
		      "within 5 s; its output: %s", fixture->output);
	tu_run_wait(run, RUN_TIMEOUT_MS);
	profile = expect_profile(run);
	total = tu_profile_total(profile);
	plugin = tu_profile_count_contiguous(profile,
		TU_FRAMES("main", "plugin_phase", "plugin_work",
			  "plugin_inner"));
	host = tu_profile_count_contiguous(profile,
		TU_FRAMES("main", "host_loop", "host_work"));
	/* About 1 s of the 3 in the plugin, the rest in host_loop.  */
	CHECK_RUN(plugin * 100 >= total * 15, run, profile,
		  "main;plugin_phase;plugin_work;plugin_inner is in %" PRIu64
		  " of %" PRIu64 " samples, expected at least 15 %%", plugin,
		  total);
	CHECK_RUN(host * 100 >= total * 30, run, profile,
		  "main;host_loop;host_work is in %" PRIu64 " of %" PRIu64
		  " samples, expected at least 30 %%", host, total);
	frame = find_frame(profile, frame_contains, "libplugin.so");
	CHECK_RUN(frame == NULL, run, profile,
		  "frame \"%s\" of the plugin is not named", frame);
	tu_profile_free(profile);
	expect_fixture_ok(fixture);
}
END_TEST

/* --------------------------------------------------- deleted executable */

/* Busy processes beside a test, as on the loaded hosts where names were
 * lost: NBUSY of them, SIGKILLed by busy_stop (and by PDEATHSIG when the
 * test dies first).  */
#define NBUSY 6
static pid_t busy_pids[NBUSY];

static void busy_start(void)
{
	pid_t parent = getpid();

	for (int i = 0; i < NBUSY; i++) {
		busy_pids[i] = fork();
		ck_assert_msg(busy_pids[i] >= 0, "fork: %s", strerror(errno));
		if (busy_pids[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(0);
			for (volatile uint64_t n = 0;; n++)
				;
		}
	}
}

static void busy_stop(void)
{
	for (int i = 0; i < NBUSY; i++)
		if (busy_pids[i] > 0) {
			kill(busy_pids[i], SIGKILL);
			waitpid(busy_pids[i], NULL, 0);
			busy_pids[i] = 0;
		}
}

/* Issue 12 item 4: a library loaded after the attach, on a host busy with
 * other work.  The symbolizer thread runs at a low priority and lags far
 * behind the samples; the plugin is unloaded again before it gets to
 * them.  Every frame must be named all the same (they were all
 * "[unknown]" below plugin_phase), and main must stay in every stack.  */
START_TEST(test_plugin_under_load)
{
	struct tu_proc *fixture = ready(tu_fixture_start("plugin-host", "4",
							 NULL));
	struct tu_run *run;
	struct tu_profile *profile;
	uint64_t total, plugin, host;
	const char *frame;

	busy_start();
	run = tu_cprof_start("-q", "--no-debuginfod", "-d", "3", "-F",
			     FREQUENCY, fixture->pid_text, NULL);
	ck_assert_msg(run != NULL, "cannot start cprof-attach");
	ck_assert_msg(tu_wait_traced(fixture->pid, 5000),
		      "cprof-attach did not attach to %d within 5 s",
		      (int)fixture->pid);
	ck_assert_int_eq(kill(fixture->pid, SIGUSR1), 0);
	ck_assert_msg(tu_proc_wait_line(fixture, "unloaded", 15000),
		      "plugin-host did not load, run and unload the plugin "
		      "within 15 s; its output: %s", fixture->output);
	tu_run_wait(run, RUN_TIMEOUT_MS);
	busy_stop();
	profile = expect_profile(run);
	total = tu_profile_total(profile);
	plugin = tu_profile_count_contiguous(profile,
		TU_FRAMES("main", "plugin_phase", "plugin_work",
			  "plugin_inner"));
	host = tu_profile_count_contiguous(profile,
		TU_FRAMES("main", "host_loop", "host_work"));
	frame = find_frame(profile, frame_contains, "[unknown]");
	CHECK_RUN(frame == NULL, run, profile,
		  "a frame is \"%s\" after the plugin was loaded", frame);
	frame = find_frame(profile, frame_contains, "libplugin.so");
	CHECK_RUN(frame == NULL, run, profile,
		  "frame \"%s\" of the plugin is not named", frame);
	CHECK_RUN(plugin > 0 && host > 0, run, profile,
		  "main;plugin_phase;plugin_work;plugin_inner in %" PRIu64
		  " and main;host_loop;host_work in %" PRIu64 " of %" PRIu64
		  " samples: expected both", plugin, host, total);
	tu_profile_free(profile);
	expect_fixture_ok(fixture);
}
END_TEST

/* A program whose executable was deleted after it started (an upgrade, a
 * build directory cleaned): the file is gone from the directory, but the
 * kernel still holds it (/proc/PID/map_files).  */
START_TEST(test_deleted_executable)
{
	const char *dir = temp_tree();
	char copy[PATH_MAX], maps_path[64], pid_text[16], *maps;
	struct program *program;
	struct tu_run *run;
	struct tu_profile *profile;
	bool started;

	snprintf(copy, sizeof(copy), "%s/chain-O2", dir);
	copy_file(FIXTURES "/chain-O2", copy, -1);
	program = program_start(TU_FRAMES(copy, LONG_RUN), NULL);
	started = program_wait_line(program, "ready", READY_TIMEOUT_MS);
	/* Gone from the directory, and the directory gone too: the running
	 * program needs neither.  */
	unlink(copy);
	remove_tree(dir);
	ck_assert_msg(started, "%s did not print \"ready\" (stdout so far: "
		      "%s)", copy, program->output);
	/* The premise: the kernel now calls the mapping deleted.  */
	snprintf(maps_path, sizeof(maps_path), "/proc/%d/maps",
		 (int)program->pid);
	maps = tu_read_file(maps_path);
	ck_assert_msg(maps != NULL && strstr(maps, " (deleted)") != NULL,
		      "%s does not show the executable as deleted", maps_path);
	free(maps);

	snprintf(pid_text, sizeof(pid_text), "%d", (int)program->pid);
	run = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "--no-debuginfod", "-d",
			   DURATION, "-F", FREQUENCY, pid_text, NULL);
	profile = expect_profile(run);
	expect_chain_share(run, profile, 90);
	tu_profile_free(profile);
}
END_TEST

/* ---------------------------------------------------------------- libc */

/* libc's debug file (libc6-dbg): its path under /usr/lib/debug/.build-id
 * for the libc that PID has mapped, into PATH.  False when PID maps no
 * libc.so.6 with a build-id.  */
static bool libc_debug_file(pid_t pid, char *path, size_t size)
{
	char maps_path[64], libc[PATH_MAX], id[64];
	char *maps, *hit, *start, *end;

	snprintf(maps_path, sizeof(maps_path), "/proc/%d/maps", (int)pid);
	maps = tu_read_file(maps_path);
	if (maps == NULL)
		return false;
	hit = strstr(maps, "/libc.so.6\n");
	if (hit == NULL) {
		free(maps);
		return false;
	}
	for (start = hit; start > maps && start[-1] != ' '; start--)
		;
	end = strchr(hit, '\n');
	snprintf(libc, sizeof(libc), "%.*s", (int)(end - start), start);
	free(maps);
	if (!build_id(libc, id, sizeof(id)))
		return false;
	snprintf(path, size, "/usr/lib/debug/.build-id/%.2s/%s.debug", id,
		 id + 2);
	return true;
}

static bool frame_in_libc_unnamed(const char *frame, const char *unused)
{
	(void)unused;
	return has_prefix(frame, "libc.so.6+0x");
}

/* With libc's debug file installed, every libc frame of a wall-clock
 * profile of sleeping threads is named, internal functions too (they are
 * only in the debug file's .symtab).  */
START_TEST(test_libc_named)
{
	struct tu_proc *fixture = ready(tu_fixture_start("sleepers", LONG_RUN,
							 NULL));
	char debug_file[PATH_MAX];
	struct tu_run *run;
	struct tu_profile *profile;
	uint64_t waits = 0;
	const char *frame;

	if (!libc_debug_file(fixture->pid, debug_file, sizeof(debug_file))
	    || access(debug_file, R_OK) != 0) {
		fprintf(stderr, "SKIP test_libc_named: no debug file for "
			"libc.so.6 in /usr/lib/debug/.build-id (apt-get "
			"install libc6-dbg)\n");
		return;
	}
	run = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "--no-debuginfod", "--wall",
			   "-d", DURATION, "-F", "99", fixture->pid_text, NULL);
	profile = expect_profile(run);
	frame = find_frame(profile, frame_in_libc_unnamed, NULL);
	CHECK_RUN(frame == NULL, run, profile,
		  "libc frame \"%s\" is not named although %s is installed",
		  frame, debug_file);
	/* The sleepers wait in libc: the frame right after sleeper_wait is
	 * libc's pthread_cond_timedwait (under whichever of its names).  */
	for (size_t i = 0; i < profile->count; i++) {
		const struct tu_stack *stack = &profile->stacks[i];

		for (size_t j = 0; j + 1 < stack->depth; j++)
			if (strcmp(stack->frames[j], "sleeper_wait") == 0
			    && strstr(stack->frames[j + 1], "pthread_cond_")
			    != NULL)
				waits += stack->count;
	}
	CHECK_RUN(waits > 0, run, profile,
		  "no sample shows sleeper_wait calling libc's "
		  "pthread_cond_timedwait");
	tu_profile_free(profile);
}
END_TEST

/* ---------------------------------------------------------------- --dump */

/* One thread of a stack dump: its TID and its function names, innermost
 * first.  */
#define MAX_DUMP_THREADS 16
#define MAX_DUMP_FRAMES 64
struct dump_thread {
	pid_t tid;
	size_t nframes;
	char frames[MAX_DUMP_FRAMES][128];
};

/* NAME without a symbol version ("__libc_start_main@@GLIBC_2.34").  */
static void add_frame(struct dump_thread *thread, const char *name,
		      size_t len)
{
	size_t at = strcspn(name, "@");

	if (at < len)
		len = at;
	if (thread->nframes < MAX_DUMP_FRAMES)
		snprintf(thread->frames[thread->nframes++], 128, "%.*s",
			 (int)len, name);
}

/* Parse cprof-attach --dump text:
 *   Thread 4242 "worker-a" (running)
 *     #0  0x00005566... in path_a2 (threads.c:36) [threads]
 *     #1  0x00005566... in fx_work (inlined) (fixture.h:119) [threads]
 * Inlined frames are skipped (eu-stack without -i does not show them).
 * Returns the number of threads.  */
static size_t parse_cprof_dump(const char *text, struct dump_thread *threads)
{
	size_t count = 0;
	const char *line = text;

	while (line != NULL && *line != '\0') {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *in;
		int tid;

		if (sscanf(line, "Thread %d ", &tid) == 1
		    && count < MAX_DUMP_THREADS) {
			threads[count++] = (struct dump_thread){ .tid = tid };
		} else if (count > 0 && (in = strstr(line, " in ")) != NULL
			   && in < line + len) {
			const char *name = in + 4;
			size_t name_len = 0;
			const char *inlined = strstr(name, " (inlined)");

			while (name + name_len < line + len
			       && strncmp(name + name_len, " (", 2) != 0
			       && strncmp(name + name_len, " [", 2) != 0)
				name_len++;
			if (inlined == NULL || inlined >= line + len)
				add_frame(&threads[count - 1], name, name_len);
		}
		line = end ? end + 1 : NULL;
	}
	return count;
}

/* Parse eu-stack -p output:
 *   TID 4242:
 *   #0  0x00005566... path_a2
 * Returns the number of threads.  */
static size_t parse_eu_stack(const char *text, struct dump_thread *threads)
{
	size_t count = 0;
	const char *line = text;

	while (line != NULL && *line != '\0') {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		int tid, consumed = 0;
		unsigned frame_number;
		unsigned long long address;

		if (sscanf(line, "TID %d:", &tid) == 1
		    && count < MAX_DUMP_THREADS) {
			threads[count++] = (struct dump_thread){ .tid = tid };
		} else if (count > 0
			   && sscanf(line, "#%u 0x%llx %n", &frame_number,
				     &address, &consumed) == 2) {
			const char *name = consumed > 0 ? line + consumed
						       : line + len;

			if (name < line + len)
				add_frame(&threads[count - 1], name,
					  (size_t)(line + len - name));
			else
				add_frame(&threads[count - 1], "??", 2);
		}
		line = end ? end + 1 : NULL;
	}
	return count;
}

static const struct dump_thread *thread_by_tid(
	const struct dump_thread *threads, size_t count, pid_t tid)
{
	for (size_t i = 0; i < count; i++)
		if (threads[i].tid == tid)
			return &threads[i];
	return NULL;
}

/* True when TEXT is one JSON object: starts with "{", and every bracket
 * and brace outside strings is closed in order, with nothing but blanks
 * after the last one.  Not a full parser: it catches truncated output,
 * a bracket closed by the wrong kind and an unterminated string.  */
static bool json_balanced(const char *text)
{
	char stack[64];
	size_t depth = 0;
	const char *p = text;

	while (isspace((unsigned char)*p))
		p++;
	if (*p != '{')
		return false;
	for (; *p != '\0'; p++) {
		if (*p == '"') {
			for (p++; *p != '"'; p++) {
				if (*p == '\0' || *p == '\n')
					return false;
				if (*p == '\\' && *++p == '\0')
					return false;
			}
		} else if (*p == '{' || *p == '[') {
			if (depth == sizeof(stack))
				return false;
			stack[depth++] = *p == '{' ? '}' : ']';
		} else if (*p == '}' || *p == ']') {
			if (depth == 0 || stack[--depth] != *p)
				return false;
			if (depth == 0)
				break;
		}
	}
	if (*p == '\0')
		return false;
	for (p++; *p != '\0'; p++)
		if (!isspace((unsigned char)*p))
			return false;
	return true;
}

/* True when JSON has a member "tid": TID.  */
static bool json_has_tid(const char *json, pid_t tid)
{
	for (const char *p = json; (p = strstr(p, "\"tid\"")) != NULL; p++) {
		const char *q = p + 5;
		char *end;
		long value;

		while (isspace((unsigned char)*q))
			q++;
		if (*q++ != ':')
			continue;
		value = strtol(q, &end, 10);
		if (end != q && value == tid)
			return true;
	}
	return false;
}

/* --dump on a stopped process: it stays stopped; every thread's stack
 * agrees with eu-stack's; --format json is one JSON document naming
 * every thread.  */
START_TEST(test_dump_stopped)
{
	struct tu_proc *fixture = ready(tu_fixture_start("threads", "3",
							 NULL));
	struct dump_thread ours[MAX_DUMP_THREADS], theirs[MAX_DUMP_THREADS];
	pid_t tids[MAX_DUMP_THREADS];
	size_t nours, ntheirs;
	int ntids;
	struct tu_run *run;
	char command[128];
	char *eu_stack;

	ck_assert_int_eq(kill(fixture->pid, SIGSTOP), 0);
	ck_assert_msg(tu_wait_state(fixture->pid, -1, "T", 5000),
		      "fixture %d did not stop within 5 s of SIGSTOP",
		      (int)fixture->pid);
	ntids = tu_tasks(fixture->pid, tids, MAX_DUMP_THREADS);
	ck_assert_msg(ntids == 5, "threads fixture has %d threads, expected 5",
		      ntids);

	run = tu_cprof_run(RUN_TIMEOUT_MS, "--no-debuginfod", "--dump",
			   fixture->pid_text, NULL);
	CHECK_RUN(tu_run_exit_code(run) == 0, run, no_profile,
		  "cprof-attach --dump exited with %d, expected 0",
		  tu_run_exit_code(run));
	/* A detached thread goes back into the group-stop by itself.  */
	CHECK_RUN(tu_wait_state(fixture->pid, -1, "T", 1000)
		  && tu_traced_tasks(fixture->pid) == 0, run, no_profile,
		  "fixture %d is not stopped and untraced after --dump "
		  "(state '%c', %d threads traced)", (int)fixture->pid,
		  tu_proc_state(fixture->pid) ? tu_proc_state(fixture->pid)
					       : '0',
		  tu_traced_tasks(fixture->pid));
	nours = parse_cprof_dump(run->out, ours);
	CHECK_RUN(nours == (size_t)ntids, run, no_profile,
		  "the dump shows %zu threads, the fixture has %d", nours,
		  ntids);

	snprintf(command, sizeof(command), "eu-stack -p %d 2>&1",
		 (int)fixture->pid);
	eu_stack = command_output(command);
	ntheirs = parse_eu_stack(eu_stack, theirs);
	ck_assert_msg(ntheirs == (size_t)ntids,
		      "eu-stack shows %zu threads, the fixture has %d:\n%s",
		      ntheirs, ntids, eu_stack);
	for (int i = 0; i < ntids; i++) {
		const struct dump_thread *a = thread_by_tid(ours, nours, tids[i]);
		const struct dump_thread *b = thread_by_tid(theirs, ntheirs,
							    tids[i]);

		CHECK_RUN(a != NULL && b != NULL, run, no_profile,
			  "thread %d is missing from the dump or from "
			  "eu-stack's output:\n%s", (int)tids[i], eu_stack);
		CHECK_RUN(a->nframes > 0, run, no_profile,
			  "thread %d has no frames in the dump", (int)tids[i]);
		for (size_t j = 0; j < a->nframes || j < b->nframes; j++)
			CHECK_RUN(j < a->nframes && j < b->nframes
				  && strcmp(a->frames[j], b->frames[j]) == 0,
				  run, no_profile,
				  "thread %d, frame #%zu (not counting inlined "
				  "frames): the dump says %s, eu-stack says %s; "
				  "eu-stack's output:\n%s", (int)tids[i], j,
				  j < a->nframes ? a->frames[j] : "(nothing)",
				  j < b->nframes ? b->frames[j] : "(nothing)",
				  eu_stack);
	}
	free(eu_stack);

	run = tu_cprof_run(RUN_TIMEOUT_MS, "--no-debuginfod", "--dump",
			   "--format", "json", fixture->pid_text, NULL);
	CHECK_RUN(tu_run_exit_code(run) == 0, run, no_profile,
		  "cprof-attach --dump --format json exited with %d, "
		  "expected 0", tu_run_exit_code(run));
	CHECK_RUN(json_balanced(run->out), run, no_profile,
		  "--dump --format json is not one well-formed JSON object");
	CHECK_RUN(strstr(run->out, "\"threads\"") != NULL, run, no_profile,
		  "--dump --format json has no \"threads\"");
	for (int i = 0; i < ntids; i++)
		CHECK_RUN(json_has_tid(run->out, tids[i]), run, no_profile,
			  "--dump --format json does not name thread %d",
			  (int)tids[i]);
	CHECK_RUN(tu_wait_state(fixture->pid, -1, "T", 1000), run, no_profile,
		  "fixture %d is not stopped after --dump --format json",
		  (int)fixture->pid);

	ck_assert_int_eq(kill(fixture->pid, SIGCONT), 0);
	expect_fixture_ok(fixture);
}
END_TEST

/* ------------------------------------------------------------------ JIT */

/* Code in an anonymous mapping is named by /tmp/perf-PID.map.  */
START_TEST(test_jit_perf_map)
{
	struct tu_proc *fixture = ready(tu_fixture_start("jit", "3", NULL));
	struct tu_run *run;
	struct tu_profile *profile;
	uint64_t total, jit;

	perf_map_pid = fixture->pid;
	run = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "--no-debuginfod", "-d",
			   DURATION, "-F", FREQUENCY, fixture->pid_text, NULL);
	/* cprof-attach has read the map; the fixture's own removal at its
	 * exit then finds nothing to do.  */
	remove_perf_map(fixture->pid);
	profile = expect_profile(run);
	total = tu_profile_total(profile);
	jit = tu_profile_count_leaf(profile, "jit_hot_loop");
	CHECK_RUN(jit * 100 >= total * 90, run, profile,
		  "jit_hot_loop is the leaf of %" PRIu64 " of %" PRIu64
		  " samples, expected at least 90 %%", jit, total);
	tu_profile_free(profile);
	expect_fixture_ok(fixture);
}
END_TEST

/* --------------------------------------------------------------- --lines */

/* The number of the line of CP_SOURCE_DIR/fixtures/FILE that contains
 * TEXT (the last such line when LAST), or 0.  */
static int source_line(const char *file, const char *text, bool last)
{
	char path[PATH_MAX];
	char *source;
	int number = 1, found = 0;

	snprintf(path, sizeof(path), "%s/fixtures/%s", CP_SOURCE_DIR, file);
	source = tu_read_file(path);
	ck_assert_msg(source != NULL, "cannot read %s", path);
	for (const char *line = source; line != NULL; number++) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *hit = strstr(line, text);

		if (hit != NULL && hit < line + len) {
			found = number;
			if (!last)
				break;
		}
		line = end ? end + 1 : NULL;
	}
	free(source);
	return found;
}

/* Issue 12 item 5: node --perf-basic-prof names its JIT code in
 * /tmp/perf-PID.map, in anonymous executable memory that lies between two
 * mappings of node's own executable (node copies its text to huge pages
 * and maps the file there too).  Every JS frame of the hot function is
 * named from the map (none were: the executable's module swallowed the JIT
 * code and named it after its last symbol, _fini).  Skipped without
 * /usr/bin/node.  */
START_TEST(test_node_perf_map)
{
	static const char script[] =
		"function hotLoop(n) { let s = 0;"
		" for (let i = 0; i < n; i++) s = (s * 31 + i) % 1000003;"
		" return s; }\n"
		"let t = 0;\n"
		"for (let i = 0; i < 20; i++) t += hotLoop(1e6);\n"
		"console.log('ready');\n"
		"for (;;) { t += hotLoop(1e6); if (t < 0) break; }\n";
	/* --perf-basic-prof also writes V8's log, isolate-*-v8.log, into
	 * the working directory: not there.  */
	const char *const argv[] = { "/usr/bin/node", "--perf-basic-prof",
				     "--logfile=/dev/null",
				     "--no-logfile-per-isolate", "-e", script,
				     NULL };
	struct program *node;
	char pid_text[16];
	struct tu_run *run;
	struct tu_profile *profile;
	uint64_t total, hot;
	const char *frame;

	if (access(argv[0], X_OK) != 0) {
		fprintf(stderr, "node_perf_map: skipped, no %s\n", argv[0]);
		return;
	}
	node = program_start(argv, NULL);
	perf_map_pid = node->pid;
	ck_assert_msg(program_wait_line(node, "ready", READY_TIMEOUT_MS),
		      "node did not print \"ready\" (stdout: %s)",
		      node->output);
	snprintf(pid_text, sizeof(pid_text), "%d", (int)node->pid);
	run = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "--no-debuginfod", "-d",
			   DURATION, "-F", FREQUENCY, pid_text, NULL);
	remove_perf_map(node->pid);
	profile = expect_profile(run);
	total = tu_profile_total(profile);
	hot = 0;
	for (size_t i = 0; i < profile->count; i++) {
		const struct tu_stack *stack = &profile->stacks[i];

		for (size_t j = 0; j < stack->depth; j++)
			if (strstr(stack->frames[j], "JS:") != NULL
			    && strstr(stack->frames[j], "hotLoop") != NULL) {
				hot += stack->count;
				break;
			}
	}
	frame = find_frame(profile, frame_contains, "_fini");
	CHECK_RUN(frame == NULL, run, profile, "a JIT frame is named \"%s\"",
		  frame);
	/* The JS function is all node does after "ready".  */
	CHECK_RUN(hot * 100 >= total * 50, run, profile,
		  "hotLoop (JS:...hotLoop from the perf map) is in %" PRIu64
		  " of %" PRIu64 " samples, expected at least 50 %%", hot,
		  total);
	tu_profile_free(profile);
}
END_TEST

/* --lines on chain-O0: "function (chain.c:LINE)", each caller at the line
 * of its call.  */
START_TEST(test_lines)
{
	struct tu_proc *fixture = ready(tu_fixture_start("chain-O0", LONG_RUN,
							 NULL));
	char main_frame[64], alpha[64], beta[64], gamma[64];
	struct tu_run *run;
	struct tu_profile *profile;
	uint64_t total, chain;

	/* The hot call in main is the one in its loop, the last one.  */
	snprintf(main_frame, sizeof(main_frame), "main (chain.c:%d)",
		 source_line("chain.c", "total += chain_alpha(loops);", true));
	snprintf(alpha, sizeof(alpha), "chain_alpha (chain.c:%d)",
		 source_line("chain.c", "return chain_beta(loops)", false));
	snprintf(beta, sizeof(beta), "chain_beta (chain.c:%d)",
		 source_line("chain.c", "return chain_gamma(loops)", false));
	snprintf(gamma, sizeof(gamma), "chain_gamma (chain.c:%d)",
		 source_line("chain.c", "return fx_work(loops);", false));
	ck_assert_msg(strstr(main_frame, ":0)") == NULL
		      && strstr(alpha, ":0)") == NULL
		      && strstr(beta, ":0)") == NULL
		      && strstr(gamma, ":0)") == NULL,
		      "fixtures/chain.c does not have the calls this test "
		      "looks for: %s, %s, %s, %s", main_frame, alpha, beta,
		      gamma);

	run = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "--no-debuginfod", "--lines",
			   "-d", DURATION, "-F", FREQUENCY, fixture->pid_text,
			   NULL);
	profile = expect_profile(run);
	total = tu_profile_total(profile);
	chain = tu_profile_count_contiguous(profile,
		TU_FRAMES(main_frame, alpha, beta, gamma));
	CHECK_RUN(chain * 100 >= total * 90, run, profile,
		  "%s;%s;%s;%s is in %" PRIu64 " of %" PRIu64 " samples, "
		  "expected at least 90 %%", main_frame, alpha, beta, gamma,
		  chain, total);
	tu_profile_free(profile);
}
END_TEST

/* ---------------------------------------------------- bad debug files */

/* A debug file cut in half: one warning naming it, then the profile goes
 * on without its names.  */
START_TEST(test_corrupt_debug_file)
{
	const char *original = FIXTURES "/debug-dl/chain-debuglink.debug";
	struct tu_proc *fixture = ready(tu_fixture_start("chain-debuglink",
							 LONG_RUN, NULL));
	const char *dir = temp_tree();
	char debug_file[PATH_MAX], warning[1024];
	struct tu_run *run;
	struct tu_profile *profile;

	snprintf(debug_file, sizeof(debug_file), "%s/chain-debuglink.debug",
		 dir);
	copy_file(original, debug_file, file_size(original) / 2);
	run = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "--no-debuginfod", "-d",
			   DURATION, "-F", FREQUENCY, "--debuginfo-dir", dir,
			   fixture->pid_text, NULL);
	remove_tree(dir);
	profile = expect_profile(run);
	CHECK_RUN(count_lines_with(run->err, "warning:") == 1, run, profile,
		  "%zu \"warning:\" lines on stderr, expected exactly one",
		  count_lines_with(run->err, "warning:"));
	line_with(run->err, "warning:", warning, sizeof(warning));
	CHECK_RUN(strstr(warning, debug_file) != NULL, run, profile,
		  "the warning does not name the debug file %s", debug_file);
	expect_chain_unnamed(run, profile, "chain-debuglink");
	tu_profile_free(profile);
}
END_TEST

/* A debug file of another build under the name chain-debuglink's
 * .gnu_debuglink asks for: a warning naming both files, and the file is
 * not used.  (It comes from chain-O0: chain-buildid-full and the other
 * chain-*-full builds are byte-identical to chain-debuglink-full today,
 * so their debug files would match.)  */
START_TEST(test_mismatched_debug_file)
{
	const char *module = FIXTURES "/chain-debuglink";
	struct tu_proc *fixture = ready(tu_fixture_start("chain-debuglink",
							 LONG_RUN, NULL));
	const char *dir = temp_tree();
	char debug_file[PATH_MAX], command[2 * PATH_MAX], warning[1024];
	char module_id[64], other_id[64];
	struct tu_run *run = NULL;
	struct tu_profile *profile;
	bool different;

	snprintf(debug_file, sizeof(debug_file), "%s/chain-debuglink.debug",
		 dir);
	snprintf(command, sizeof(command),
		 "objcopy --only-keep-debug '%s/chain-O0' '%s'", FIXTURES,
		 debug_file);
	free(command_output(command));
	/* The premise: another build, another build-id.  */
	different = build_id(module, module_id, sizeof(module_id))
		    && build_id(debug_file, other_id, sizeof(other_id))
		    && strcmp(module_id, other_id) != 0;
	if (different)
		run = tu_cprof_run(RUN_TIMEOUT_MS, "-q", "--no-debuginfod",
				   "-d", DURATION, "-F", FREQUENCY,
				   "--debuginfo-dir", dir, fixture->pid_text,
				   NULL);
	remove_tree(dir);
	ck_assert_msg(different, "%s and %s do not have different build-ids",
		      module, debug_file);
	profile = expect_profile(run);
	CHECK_RUN(count_lines_with(run->err, debug_file) == 1, run, profile,
		  "%zu lines on stderr name %s, expected one warning",
		  count_lines_with(run->err, debug_file), debug_file);
	line_with(run->err, debug_file, warning, sizeof(warning));
	CHECK_RUN(strstr(warning, "warning:") != NULL
		  && strstr(warning, module) != NULL, run, profile,
		  "the line naming %s is not a warning that also names the "
		  "module %s", debug_file, module);
	expect_chain_unnamed(run, profile, "chain-debuglink");
	tu_profile_free(profile);
}
END_TEST

/* ----------------------------------------------------------------- suite */

/* ------------------------------------------------------------ capture */

/* The address of function NAME of the module whose path ends in SUFFIX in
 * process PID (its symbol table's value plus the load bias the mapping at
 * offset 0 gives), or 0.  */
static uint64_t function_address(pid_t pid, const char *suffix,
				 const char *name)
{
	struct cp_maps *maps;
	uint64_t address = 0;

	if (cp_maps_read(pid, &maps) != 0)
		return 0;
	for (size_t i = 0; i < maps->count && address == 0; i++) {
		const struct cp_map *m = &maps->maps[i];
		size_t len = strlen(m->path), slen = strlen(suffix);
		int fd;
		Elf *elf;
		GElf_Ehdr ehdr;
		Elf_Scn *scn = NULL;

		if (m->offset != 0 || len < slen
		    || strcmp(m->path + len - slen, suffix) != 0)
			continue;
		fd = open(m->path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			break;
		elf_version(EV_CURRENT);
		elf = elf_begin(fd, ELF_C_READ, NULL);
		if (elf != NULL && gelf_getehdr(elf, &ehdr) != NULL) {
			while ((scn = elf_nextscn(elf, scn)) != NULL) {
				GElf_Shdr shdr;
				Elf_Data *data;

				if (gelf_getshdr(scn, &shdr) == NULL
				    || shdr.sh_type != SHT_SYMTAB)
					continue;
				data = elf_getdata(scn, NULL);
				for (size_t j = 0; data != NULL && shdr.sh_entsize
				     && j < shdr.sh_size / shdr.sh_entsize; j++) {
					GElf_Sym sym;
					const char *sname;

					if (gelf_getsym(data, (int)j, &sym) == NULL)
						continue;
					sname = elf_strptr(elf, shdr.sh_link,
							   sym.st_name);
					if (sname != NULL && strcmp(sname, name) == 0
					    && sym.st_value != 0)
						address = sym.st_value
							+ (ehdr.e_type == ET_DYN
							   ? m->start : 0);
				}
			}
		}
		if (elf != NULL)
			elf_end(elf);
		close(fd);
	}
	cp_maps_free(maps);
	return address;
}

/* Heap mode's short-lived targets: the tracer thread captures the
 * mappings while the target lives (here after it dlopen()ed a library the
 * symbolizer has not seen yet), the target is gone when the names are
 * looked up, /proc/PID with it.  Both the executable's function and the
 * plugin's are named from the capture.  */
START_TEST(test_capture_after_exit)
{
	struct tu_proc *fixture = ready(tu_fixture_start("plugin-host",
							 LONG_RUN, NULL));
	struct cp_symbols_options options = { .no_dwarf = false };
	struct cp_symbols *symbols = NULL;
	const struct cp_symbol *sym;
	uint64_t host_work, plugin_inner;

	ck_assert_int_eq(cp_symbols_new(fixture->pid, &options, &symbols), 0);
	ck_assert_int_eq(kill(fixture->pid, SIGUSR1), 0);
	ck_assert_msg(tu_proc_wait_line(fixture, "loaded", READY_TIMEOUT_MS),
		      "plugin-host did not load the plugin (stdout: %s)",
		      fixture->output);
	/* Held still while the addresses are taken and the capture made,
	 * so the plugin is not unloaded in between.  */
	ck_assert_int_eq(kill(fixture->pid, SIGSTOP), 0);
	host_work = function_address(fixture->pid, "/plugin-host", "host_work");
	plugin_inner = function_address(fixture->pid, "/libplugin.so",
					"plugin_inner");
	ck_assert_msg(host_work != 0 && plugin_inner != 0,
		      "host_work at %#" PRIx64 ", plugin_inner at %#" PRIx64
		      ": not both found in the fixture's mappings",
		      host_work, plugin_inner);
	/* A refresh of the mappings that is no capture (the unwinder's, for
	 * a pc it did not know) sees the plugin but keeps nothing of it: a
	 * capture is still due.  */
	ck_assert_int_eq(cp_addrspace_refresh(cp_symbols_addrspace(symbols)),
			 0);
	ck_assert(!cp_symbols_capture_has(symbols, plugin_inner));
	ck_assert_int_eq(cp_symbols_capture(symbols), 0);
	ck_assert(cp_symbols_capture_has(symbols, plugin_inner));
	/* A second capture of the same modules changes nothing.  */
	ck_assert_int_eq(cp_symbols_capture(symbols), 0);
	tu_proc_kill(fixture);

	cp_symbols_new_epoch(symbols);
	sym = cp_symbols_lookup(symbols, host_work + 1);
	ck_assert_msg(strcmp(sym->frames[0].function, "host_work") == 0,
		      "the executable's host_work is named \"%s\" (module %s)",
		      sym->frames[0].function, sym->module ? sym->module : "-");
	sym = cp_symbols_lookup(symbols, plugin_inner + 1);
	ck_assert_msg(strcmp(sym->frames[0].function, "plugin_inner") == 0,
		      "the plugin's plugin_inner is named \"%s\" (module %s)",
		      sym->frames[0].function, sym->module ? sym->module : "-");
	ck_assert_str_eq(sym->module, "libplugin.so");
	cp_symbols_free(symbols);
}
END_TEST

/* Issue 12 item 4: a re-read of the mappings that cannot read them (here
 * the target is gone; under load, a read torn by the loader) must not
 * lose the modules already known: main of the executable became
 * "[unknown]" after such a re-read, for the rest of the run.  */
START_TEST(test_reread_keeps_modules)
{
	struct tu_proc *fixture = ready(tu_fixture_start("plugin-host",
							 LONG_RUN, NULL));
	struct cp_symbols *symbols = NULL;
	const struct cp_symbol *sym;
	uint64_t host_work = function_address(fixture->pid, "/plugin-host",
					      "host_work");
	uint64_t host_loop = function_address(fixture->pid, "/plugin-host",
					      "host_loop");

	ck_assert_msg(host_work != 0 && host_loop != 0,
		      "host_work or host_loop not found");
	ck_assert_int_eq(cp_symbols_new(fixture->pid, NULL, &symbols), 0);
	sym = cp_symbols_lookup(symbols, host_work + 1);
	ck_assert_str_eq(sym->frames[0].function, "host_work");
	tu_proc_kill(fixture);
	/* An address in no module: the symbolizer re-reads the mappings,
	 * and finds none.  */
	cp_symbols_new_epoch(symbols);
	sym = cp_symbols_lookup(symbols, 0x1000);
	ck_assert_str_eq(sym->frames[0].function, "[unknown]");
	sym = cp_symbols_lookup(symbols, host_loop + 1);
	ck_assert_msg(strcmp(sym->frames[0].function, "host_loop") == 0,
		      "host_loop is named \"%s\" after a failed re-read",
		      sym->frames[0].function);
	cp_symbols_free(symbols);
}
END_TEST

/* A capture on one thread while names are looked up on another, as heap
 * mode's tracer and resolver threads do (the sanitizer build checks the
 * memory; each lookup must still name the function).  */
struct capture_loop {
	struct cp_symbols *symbols;
	int captures;
	int failures;
};

static void *capture_thread(void *arg)
{
	struct capture_loop *loop = arg;

	for (int i = 0; i < loop->captures; i++)
		if (cp_symbols_capture(loop->symbols) != 0)
			loop->failures++;
	return NULL;
}

START_TEST(test_capture_concurrent)
{
	struct tu_proc *fixture = ready(tu_fixture_start("plugin-host",
							 LONG_RUN, NULL));
	struct cp_symbols *symbols = NULL;
	struct capture_loop loop = { .captures = 200 };
	pthread_t thread;
	uint64_t host_work = function_address(fixture->pid, "/plugin-host",
					      "host_work");

	ck_assert_msg(host_work != 0, "host_work not found");
	ck_assert_int_eq(cp_symbols_new(fixture->pid, NULL, &symbols), 0);
	loop.symbols = symbols;
	ck_assert_int_eq(pthread_create(&thread, NULL, capture_thread, &loop),
			 0);
	for (int i = 0; i < 2000; i++) {
		const struct cp_symbol *sym;

		cp_symbols_new_epoch(symbols);
		cp_symbols_refresh(symbols);
		sym = cp_symbols_lookup(symbols, host_work + 1 + (uint64_t)(i % 8));
		ck_assert_str_eq(sym->frames[0].function, "host_work");
	}
	pthread_join(thread, NULL);
	ck_assert_int_eq(loop.failures, 0);
	tu_proc_kill(fixture);
	cp_symbols_free(symbols);
}
END_TEST

static TCase *new_case(Suite *suite, const char *name, double timeout)
{
	TCase *tcase = tcase_create(name);

	tcase_add_checked_fixture(tcase, NULL, teardown);
	tcase_set_timeout(tcase, timeout);
	suite_add_tcase(suite, tcase);
	return tcase;
}

static Suite *symbols_suite(void)
{
	Suite *suite = suite_create("symbols");
	TCase *tcase;

	tcase = new_case(suite, "debugfiles", 30);
	tcase_add_test(tcase, test_debuglink);
	tcase_add_test(tcase, test_buildid);
	tcase_add_test(tcase, test_buildid_relative_dir);
	tcase_add_test(tcase, test_stripped_offsets);
	tcase_add_test(tcase, test_corrupt_debug_file);
	tcase_add_test(tcase, test_mismatched_debug_file);

	tcase = new_case(suite, "debuginfod", 45);
	tcase_add_test(tcase, test_debuginfod);

	tcase = new_case(suite, "names", 30);
	tcase_add_test(tcase, test_cxx);
	tcase_add_test(tcase, test_lines);
	tcase_add_test(tcase, test_libc_named);
	tcase_add_test(tcase, test_jit_perf_map);
	tcase_add_test(tcase, test_node_perf_map);

	tcase = new_case(suite, "modules", 30);
	tcase_add_test(tcase, test_plugin_unloaded);
	tcase_add_test(tcase, test_plugin_under_load);
	tcase_add_test(tcase, test_deleted_executable);

	tcase = new_case(suite, "capture", 30);
	tcase_add_test(tcase, test_capture_after_exit);
	tcase_add_test(tcase, test_capture_concurrent);
	tcase_add_test(tcase, test_reread_keeps_modules);

	tcase = new_case(suite, "dump", 30);
	tcase_add_test(tcase, test_dump_stopped);

	return suite;
}

int main(void)
{
	SRunner *runner = srunner_create(symbols_suite());
	int failed;

	srunner_run_all(runner, CK_NORMAL);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
