/* Helpers for the end-to-end tests; see testutil.h.  */
#include "testutil.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CP_BUILD_DIR
#error "CP_BUILD_DIR must be defined by the makefile"
#endif

#define CPROF_ATTACH_PATH CP_BUILD_DIR "/cprof-attach"
#define FIXTURE_DIR CP_BUILD_DIR "/fixtures"

/* PF_KTHREAD from include/linux/sched.h: the flags field of
 * /proc/PID/stat has it for kernel threads.  */
#define TU_PF_KTHREAD 0x00200000u

/* ------------------------------------------------------------ cleanup list */

/* Something a test started or made, undone by tu_cleanup newest first.  */
enum owned_kind {
	OWNED_PROC,   /* struct tu_proc: kill, reap, free */
	OWNED_RUN,    /* struct tu_run: kill, reap, free */
	OWNED_PID,    /* a bare child (zombie, tracer helper): kill, reap */
	OWNED_DIR,    /* a temporary directory: remove with its files */
};

struct owned {
	enum owned_kind kind;
	void *object;   /* tu_proc, tu_run or the directory path; NULL: done */
	pid_t pid;      /* OWNED_PID */
};

static struct owned *owned_list;
static size_t owned_count, owned_cap;

static void *xmalloc(size_t size)
{
	void *memory = malloc(size ? size : 1);

	if (memory == NULL) {
		fprintf(stderr, "testutil: out of memory\n");
		abort();
	}
	return memory;
}

static void *xrealloc(void *old, size_t size)
{
	void *memory = realloc(old, size ? size : 1);

	if (memory == NULL) {
		fprintf(stderr, "testutil: out of memory\n");
		abort();
	}
	return memory;
}

static char *xstrdup(const char *text)
{
	size_t len = strlen(text);
	char *copy = xmalloc(len + 1);

	memcpy(copy, text, len + 1);
	return copy;
}

static void own(enum owned_kind kind, void *object, pid_t pid)
{
	if (owned_count == owned_cap) {
		owned_cap = owned_cap ? 2 * owned_cap : 16;
		owned_list = xrealloc(owned_list, owned_cap * sizeof(*owned_list));
	}
	owned_list[owned_count++] = (struct owned){ kind, object, pid };
}

/* Forget OBJECT: the caller has disposed of it.  */
static void disown(void *object)
{
	for (size_t i = 0; i < owned_count; i++)
		if (owned_list[i].object == object)
			owned_list[i].object = NULL;
}

/* ------------------------------------------------------------------ time */

uint64_t tu_now_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static uint64_t deadline_in(int timeout_ms)
{
	return tu_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0)
				     * 1000000u;
}

/* Milliseconds left until DEADLINE_NS, rounded up, 0 when past.  */
static int ms_left(uint64_t deadline_ns)
{
	uint64_t now_ns = tu_now_ns();
	uint64_t left_ms;

	if (now_ns >= deadline_ns)
		return 0;
	left_ms = (deadline_ns - now_ns + 999999u) / 1000000u;
	return left_ms > INT_MAX ? INT_MAX : (int)left_ms;
}

void tu_delay_ms(int ms)
{
	uint64_t deadline_ns = deadline_in(ms);
	int left;

	while ((left = ms_left(deadline_ns)) > 0)
		poll(NULL, 0, left);
}

/* ------------------------------------------------------ child processes */

/* In a freshly forked child: die with the parent, and undo what the test
 * process may have changed that exec would keep (blocked signals and
 * ignored ones: a test run from a non-interactive shell in the background
 * has SIGINT ignored, and cprof-attach must see the SIGINT the tests
 * send).  */
static void prepare_child(pid_t parent)
{
	static const int reset_signals[] = {
		SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD, SIGUSR1,
		SIGUSR2, SIGALRM,
	};
	sigset_t none;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* The parent may have died before prctl: then nobody would kill us.  */
	if (getppid() != parent)
		_exit(127);
	for (size_t i = 0; i < sizeof(reset_signals) / sizeof(reset_signals[0]);
	     i++)
		signal(reset_signals[i], SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Wait until child PID has exited and reap it, or DEADLINE_NS passes.
 * True when reaped, with the wait status in *STATUS.
 *
 * A pidfd becomes readable when the process exits, so the wait usually
 * costs no polling.  But a child traced by someone else (cprof-attach) is
 * reported to its tracer first: the pidfd is then readable while waitpid
 * still says "not yet", and from that point a 1 ms poll takes over.  */
static bool wait_child(pid_t pid, uint64_t deadline_ns, int *status)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	bool pidfd_fired = false;
	bool reaped = false;

	for (;;) {
		pid_t got = waitpid(pid, status, WNOHANG | __WALL);
		int left;

		if (got == pid) {
			reaped = true;
			break;
		}
		if (got < 0 && errno != EINTR)
			break;
		left = ms_left(deadline_ns);
		if (left == 0)
			break;
		if (pidfd >= 0 && !pidfd_fired) {
			struct pollfd wanted = { .fd = pidfd, .events = POLLIN };

			if (poll(&wanted, 1, left) > 0)
				pidfd_fired = true;
		} else {
			poll(NULL, 0, 1);
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	return reaped;
}

/* SIGKILL PID and reap it.  */
static void kill_and_reap(pid_t pid)
{
	int status;

	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	/* A SIGKILLed process dies at once even when ptrace-stopped; the
	 * long bound only guards against a wedged kernel.  */
	if (!wait_child(pid, deadline_in(10000), &status))
		fprintf(stderr, "testutil: could not reap %d\n", (int)pid);
}

/* ---------------------------------------------------------------- fixtures */

struct tu_proc *tu_fixture_start(const char *name, ...)
{
	const char *argv[16];
	size_t argc = 0;
	char path[PATH_MAX];
	int pipe_fds[2];
	struct tu_proc *proc;
	pid_t parent = getpid();
	va_list args;
	const char *arg;

	snprintf(path, sizeof(path), "%s/%s", FIXTURE_DIR, name);
	argv[argc++] = path;
	va_start(args, name);
	while ((arg = va_arg(args, const char *)) != NULL
	       && argc < sizeof(argv) / sizeof(argv[0]) - 1)
		argv[argc++] = arg;
	va_end(args);
	argv[argc] = NULL;

	if (access(path, X_OK) != 0) {
		fprintf(stderr, "testutil: fixture %s: %s (make fixtures?)\n",
			path, strerror(errno));
		return NULL;
	}
	/* Close-on-exec: other children must not inherit the write end, or
	 * the pipe would never report end of file.  */
	if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
		perror("testutil: pipe2");
		return NULL;
	}
	fflush(NULL);
	proc = xmalloc(sizeof(*proc));
	*proc = (struct tu_proc){ .stdout_fd = pipe_fds[0] };
	proc->output = xmalloc(1);
	proc->output[0] = '\0';
	proc->pid = fork();
	if (proc->pid < 0) {
		perror("testutil: fork");
		close(pipe_fds[0]);
		close(pipe_fds[1]);
		free(proc->output);
		free(proc);
		return NULL;
	}
	if (proc->pid == 0) {
		prepare_child(parent);
		dup2(pipe_fds[1], STDOUT_FILENO);
		execv(path, (char *const *)argv);
		fprintf(stderr, "testutil: exec %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	close(pipe_fds[1]);
	snprintf(proc->pid_text, sizeof(proc->pid_text), "%d", (int)proc->pid);
	own(OWNED_PROC, proc, 0);
	return proc;
}

/* Read what is available on PROC's stdout, waiting at most WAIT_MS for
 * the first byte.  */
static void read_some(struct tu_proc *proc, int wait_ms)
{
	struct pollfd wanted = { .fd = proc->stdout_fd, .events = POLLIN };
	char chunk[4096];
	ssize_t got;

	if (proc->stdout_fd < 0)
		return;
	if (poll(&wanted, 1, wait_ms) <= 0)
		return;
	got = read(proc->stdout_fd, chunk, sizeof(chunk));
	if (got < 0 && errno == EINTR)
		return;
	if (got <= 0) {
		close(proc->stdout_fd);
		proc->stdout_fd = -1;
		return;
	}
	proc->output = xrealloc(proc->output, proc->output_len + (size_t)got + 1);
	memcpy(proc->output + proc->output_len, chunk, (size_t)got);
	proc->output_len += (size_t)got;
	proc->output[proc->output_len] = '\0';
}

/* True when OUTPUT has a complete line that equals LINE (EXACT) or starts
 * with it.  */
static bool has_line(const char *output, const char *line, bool exact)
{
	size_t line_len = strlen(line);
	const char *start = output;
	const char *end;

	while ((end = strchr(start, '\n')) != NULL) {
		size_t len = (size_t)(end - start);

		if (exact ? (len == line_len && memcmp(start, line, len) == 0)
			  : (len >= line_len && memcmp(start, line, line_len) == 0))
			return true;
		start = end + 1;
	}
	return false;
}

bool tu_proc_wait_line(struct tu_proc *proc, const char *line, int timeout_ms)
{
	uint64_t deadline_ns = deadline_in(timeout_ms);

	for (;;) {
		int left;

		if (has_line(proc->output, line, true))
			return true;
		left = ms_left(deadline_ns);
		if (proc->stdout_fd < 0 || left == 0)
			return false;
		read_some(proc, left);
	}
}

bool tu_proc_has_line_prefix(const struct tu_proc *proc, const char *prefix)
{
	return has_line(proc->output, prefix, false);
}

bool tu_proc_wait_exit(struct tu_proc *proc, int timeout_ms)
{
	uint64_t deadline_ns = deadline_in(timeout_ms);
	int left;

	if (proc->reaped)
		return true;
	/* Drain stdout first: the last lines ("ok N") come just before the
	 * exit, and end of file comes with it.  */
	while (proc->stdout_fd >= 0 && (left = ms_left(deadline_ns)) > 0)
		read_some(proc, left);
	if (wait_child(proc->pid, deadline_ns, &proc->status))
		proc->reaped = true;
	return proc->reaped;
}

void tu_proc_kill(struct tu_proc *proc)
{
	if (proc == NULL)
		return;
	if (!proc->reaped)
		kill_and_reap(proc->pid);
	if (proc->stdout_fd >= 0)
		close(proc->stdout_fd);
	disown(proc);
	free(proc->output);
	free(proc);
}

/* ------------------------------------------------------------ cprof runs */

/* An anonymous temporary file for captured output, not inherited by other
 * children (each run has its own).  */
static FILE *capture_file(void)
{
	FILE *file = tmpfile();

	if (file != NULL)
		fcntl(fileno(file), F_SETFD, FD_CLOEXEC);
	return file;
}

/* All of FILE (from its start) as a NUL-ended string.  */
static char *slurp(FILE *file)
{
	char *text = xmalloc(1);
	size_t len = 0;
	char chunk[4096];
	size_t got;

	text[0] = '\0';
	if (file == NULL)
		return text;
	/* The child wrote through its own descriptor: the stream's buffer
	 * and offset are stale.  */
	fflush(file);
	rewind(file);
	while ((got = fread(chunk, 1, sizeof(chunk), file)) > 0) {
		text = xrealloc(text, len + got + 1);
		memcpy(text + len, chunk, got);
		len += got;
		text[len] = '\0';
	}
	return text;
}

/* Signals the next cprof-attach started gets with SIG_IGN, as a shell
 * script's background job gets SIGINT (0-terminated; NULL: none).  */
static const int *ignored_in_child;

struct tu_run *tu_cprof_startv_ignoring(const char *const args[],
					const int ignored[])
{
	struct tu_run *run;

	ignored_in_child = ignored;
	run = tu_cprof_startv(args);
	ignored_in_child = NULL;
	return run;
}

struct tu_run *tu_cprof_startv(const char *const args[])
{
	const char **argv;
	size_t argc = 0;
	struct tu_run *run;
	pid_t parent = getpid();

	while (args[argc] != NULL)
		argc++;
	argv = xmalloc((argc + 2) * sizeof(*argv));
	argv[0] = CPROF_ATTACH_PATH;
	memcpy(argv + 1, args, argc * sizeof(*argv));
	argv[argc + 1] = NULL;

	run = xmalloc(sizeof(*run));
	*run = (struct tu_run){ .pid = -1 };
	run->out_file = capture_file();
	run->err_file = capture_file();
	if (run->out_file == NULL || run->err_file == NULL) {
		perror("testutil: tmpfile");
		goto fail;
	}
	fflush(NULL);
	run->start_ns = tu_now_ns();
	run->pid = fork();
	if (run->pid < 0) {
		perror("testutil: fork");
		goto fail;
	}
	if (run->pid == 0) {
		prepare_child(parent);
		for (size_t i = 0; ignored_in_child && ignored_in_child[i]; i++)
			signal(ignored_in_child[i], SIG_IGN);
		dup2(fileno(run->out_file), STDOUT_FILENO);
		dup2(fileno(run->err_file), STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "testutil: exec %s: %s\n", argv[0],
			strerror(errno));
		_exit(127);
	}
	free(argv);
	own(OWNED_RUN, run, 0);
	return run;

fail:
	if (run->out_file != NULL)
		fclose(run->out_file);
	if (run->err_file != NULL)
		fclose(run->err_file);
	free(run);
	free(argv);
	return NULL;
}

/* Collect the variadic arguments after FIRST into a NULL-ended array
 * (FIRST itself may be NULL: no arguments).  */
#define MAX_ARGS 64
static void collect_args(const char *args[MAX_ARGS + 1], const char *first,
			 va_list rest)
{
	size_t argc = 0;
	const char *arg = first;

	while (arg != NULL && argc < MAX_ARGS) {
		args[argc++] = arg;
		arg = va_arg(rest, const char *);
	}
	args[argc] = NULL;
}

struct tu_run *tu_cprof_start(const char *arg, ...)
{
	const char *args[MAX_ARGS + 1];
	va_list rest;

	va_start(rest, arg);
	collect_args(args, arg, rest);
	va_end(rest);
	return tu_cprof_startv(args);
}

bool tu_run_wait(struct tu_run *run, int timeout_ms)
{
	if (!run->finished) {
		if (!wait_child(run->pid, deadline_in(timeout_ms), &run->status)) {
			run->timed_out = true;
			kill(run->pid, SIGKILL);
			wait_child(run->pid, deadline_in(10000), &run->status);
		}
		run->finished = true;
		run->elapsed = (double)(tu_now_ns() - run->start_ns) / 1e9;
		free(run->out);
		free(run->err);
		run->out = slurp(run->out_file);
		run->err = slurp(run->err_file);
	}
	return !run->timed_out;
}

struct tu_run *tu_cprof_run(int timeout_ms, const char *arg, ...)
{
	const char *args[MAX_ARGS + 1];
	struct tu_run *run;
	va_list rest;

	va_start(rest, arg);
	collect_args(args, arg, rest);
	va_end(rest);
	run = tu_cprof_startv(args);
	if (run == NULL) {
		/* A run that could not start reads as one whose exec failed,
		 * so the test's exit-status assertion reports it.  */
		run = xmalloc(sizeof(*run));
		*run = (struct tu_run){ .pid = -1, .finished = true,
					.status = 127 << 8 };
		run->out = xstrdup("");
		run->err = xstrdup("testutil: could not start cprof-attach\n");
		own(OWNED_RUN, run, 0);
		return run;
	}
	tu_run_wait(run, timeout_ms);
	return run;
}

int tu_run_exit_code(const struct tu_run *run)
{
	if (!run->finished || run->timed_out || !WIFEXITED(run->status))
		return -1;
	return WEXITSTATUS(run->status);
}

/* Print TEXT to stderr, at most MAX_BYTES of it.  */
static void dump_text(const char *label, const char *text, size_t max_bytes)
{
	size_t len = text ? strlen(text) : 0;
	size_t shown = len > max_bytes ? max_bytes : len;

	fprintf(stderr, "  --- %s (%zu bytes)%s\n", label, len,
		len > max_bytes ? ", first part" : "");
	if (shown == 0)
		return;
	fwrite(text, 1, shown, stderr);
	if (text[shown - 1] != '\n')
		fputc('\n', stderr);
}

void tu_run_dump(const struct tu_run *run, const char *what, size_t max_bytes)
{
	fprintf(stderr, "[%s] cprof-attach pid %d: ", what, (int)run->pid);
	if (!run->finished)
		fprintf(stderr, "still running\n");
	else if (run->timed_out)
		fprintf(stderr, "TIMED OUT after %.2f s, killed\n", run->elapsed);
	else if (WIFEXITED(run->status))
		fprintf(stderr, "exit %d after %.2f s\n",
			WEXITSTATUS(run->status), run->elapsed);
	else if (WIFSIGNALED(run->status))
		fprintf(stderr, "killed by signal %d after %.2f s\n",
			WTERMSIG(run->status), run->elapsed);
	else
		fprintf(stderr, "wait status %#x\n", (unsigned)run->status);
	dump_text("stdout", run->out, max_bytes);
	dump_text("stderr", run->err, max_bytes);
}

/* -------------------------------------------------------------- cleanup */

/* Remove the files (and empty subdirectories) in DIR, then DIR.  */
static void remove_dir(const char *dir)
{
	char **names;
	int count = tu_dir_entries(dir, &names);

	for (int i = 0; i < count; i++) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (unlink(path) != 0)
			rmdir(path);
	}
	if (count >= 0)
		tu_free_names(names);
	rmdir(dir);
}

static void free_run(struct tu_run *run)
{
	if (!run->finished && run->pid > 0)
		kill_and_reap(run->pid);
	if (run->out_file != NULL)
		fclose(run->out_file);
	if (run->err_file != NULL)
		fclose(run->err_file);
	free(run->out);
	free(run->err);
	free(run);
}

void tu_cleanup(void)
{
	/* Newest first: a tracer helper dies before its tracee, so the
	 * tracee's exit is reported to us and not held for the tracer.  */
	while (owned_count > 0) {
		struct owned item = owned_list[--owned_count];

		switch (item.kind) {
		case OWNED_PROC:
			if (item.object != NULL)
				tu_proc_kill(item.object);
			break;
		case OWNED_RUN:
			if (item.object != NULL)
				free_run(item.object);
			break;
		case OWNED_PID:
			kill_and_reap(item.pid);
			break;
		case OWNED_DIR:
			if (item.object != NULL) {
				remove_dir(item.object);
				free(item.object);
			}
			break;
		}
	}
	free(owned_list);
	owned_list = NULL;
	owned_cap = 0;
}

/* ------------------------------------------------------- folded profiles */

static void set_error(char *error, size_t error_size, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

static void set_error(char *error, size_t error_size, const char *format, ...)
{
	va_list args;

	if (error == NULL || error_size == 0)
		return;
	va_start(args, format);
	vsnprintf(error, error_size, format, args);
	va_end(args);
}

/* Parse one line (without its newline) into STACK.  */
static bool parse_line(const char *line, size_t len, struct tu_stack *stack,
		       char *error, size_t error_size, size_t line_number)
{
	const char *space = NULL;
	const char *frame_start;
	char *end;
	char count_text[32];
	size_t count_len;

	for (size_t i = 0; i < len; i++)
		if (line[i] == ' ')
			space = line + i;
	if (space == NULL || space == line) {
		set_error(error, error_size, "line %zu: no \"STACK COUNT\": %.*s",
			  line_number, (int)(len > 80 ? 80 : len), line);
		return false;
	}
	count_len = (size_t)(line + len - (space + 1));
	if (count_len == 0 || count_len >= sizeof(count_text)) {
		set_error(error, error_size, "line %zu: bad count", line_number);
		return false;
	}
	memcpy(count_text, space + 1, count_len);
	count_text[count_len] = '\0';
	errno = 0;
	stack->count = strtoull(count_text, &end, 10);
	if (errno != 0 || *end != '\0' || !isdigit((unsigned char)count_text[0])
	    || stack->count == 0) {
		set_error(error, error_size, "line %zu: bad count \"%s\"",
			  line_number, count_text);
		return false;
	}

	stack->depth = 0;
	stack->frames = NULL;
	frame_start = line;
	for (const char *p = line;; p++) {
		if (p == space || *p == ';') {
			size_t frame_len = (size_t)(p - frame_start);
			char *frame;

			if (frame_len == 0) {
				set_error(error, error_size,
					  "line %zu: empty frame %zu",
					  line_number, stack->depth + 1);
				return false;
			}
			frame = xmalloc(frame_len + 1);
			memcpy(frame, frame_start, frame_len);
			frame[frame_len] = '\0';
			stack->frames = xrealloc(stack->frames,
						 (stack->depth + 1)
						 * sizeof(*stack->frames));
			stack->frames[stack->depth++] = frame;
			frame_start = p + 1;
			if (p == space)
				break;
		}
	}
	return true;
}

static void free_stack(struct tu_stack *stack)
{
	for (size_t i = 0; i < stack->depth; i++)
		free(stack->frames[i]);
	free(stack->frames);
}

struct tu_profile *tu_profile_parse(const char *text, char *error,
				    size_t error_size)
{
	struct tu_profile *profile = xmalloc(sizeof(*profile));
	const char *line = text;
	size_t line_number = 0;

	*profile = (struct tu_profile){ 0 };
	set_error(error, error_size, "no error");
	if (text == NULL) {
		set_error(error, error_size, "no text");
		free(profile);
		return NULL;
	}
	while (*line != '\0') {
		const char *newline = strchr(line, '\n');
		size_t len = newline ? (size_t)(newline - line) : strlen(line);
		struct tu_stack stack;

		line_number++;
		/* cprof's first line for counts that are not samples
		 * (output.h CP_FOLDED_SAMPLE_TYPE_TAG) is not a stack.  */
		static const char tag[] = "# cprof sample_type:";
		if (line_number == 1 && len >= sizeof(tag) - 1 &&
		    memcmp(line, tag, sizeof(tag) - 1) == 0) {
			if (newline == NULL)
				break;
			line = newline + 1;
			continue;
		}
		if (!parse_line(line, len, &stack, error, error_size,
				line_number)) {
			free_stack(&stack);
			tu_profile_free(profile);
			return NULL;
		}
		profile->stacks = xrealloc(profile->stacks,
					   (profile->count + 1)
					   * sizeof(*profile->stacks));
		profile->stacks[profile->count++] = stack;
		if (newline == NULL)
			break;
		line = newline + 1;
	}
	return profile;
}

void tu_profile_free(struct tu_profile *profile)
{
	if (profile == NULL)
		return;
	for (size_t i = 0; i < profile->count; i++)
		free_stack(&profile->stacks[i]);
	free(profile->stacks);
	free(profile);
}

uint64_t tu_profile_total(const struct tu_profile *profile)
{
	uint64_t total = 0;

	for (size_t i = 0; i < profile->count; i++)
		total += profile->stacks[i].count;
	return total;
}

bool tu_stack_has_contiguous(const struct tu_stack *stack,
			     const char *const names[])
{
	size_t wanted = 0;

	while (names[wanted] != NULL)
		wanted++;
	if (wanted == 0)
		return true;
	for (size_t start = 0; start + wanted <= stack->depth; start++) {
		size_t matched = 0;

		while (matched < wanted
		       && strcmp(stack->frames[start + matched],
				 names[matched]) == 0)
			matched++;
		if (matched == wanted)
			return true;
	}
	return false;
}

bool tu_stack_has_subsequence(const struct tu_stack *stack,
			      const char *const names[])
{
	size_t matched = 0;

	for (size_t i = 0; i < stack->depth && names[matched] != NULL; i++)
		if (strcmp(stack->frames[i], names[matched]) == 0)
			matched++;
	return names[matched] == NULL;
}

uint64_t tu_profile_count_contiguous(const struct tu_profile *profile,
				     const char *const names[])
{
	uint64_t samples = 0;

	for (size_t i = 0; i < profile->count; i++)
		if (tu_stack_has_contiguous(&profile->stacks[i], names))
			samples += profile->stacks[i].count;
	return samples;
}

uint64_t tu_profile_count_subsequence(const struct tu_profile *profile,
				      const char *const names[])
{
	uint64_t samples = 0;

	for (size_t i = 0; i < profile->count; i++)
		if (tu_stack_has_subsequence(&profile->stacks[i], names))
			samples += profile->stacks[i].count;
	return samples;
}

uint64_t tu_profile_count_frame(const struct tu_profile *profile,
				const char *name)
{
	return tu_profile_count_contiguous(profile, TU_FRAMES(name));
}

uint64_t tu_profile_count_leaf(const struct tu_profile *profile,
			       const char *name)
{
	uint64_t samples = 0;

	for (size_t i = 0; i < profile->count; i++) {
		const struct tu_stack *stack = &profile->stacks[i];

		if (stack->depth > 0
		    && strcmp(stack->frames[stack->depth - 1], name) == 0)
			samples += stack->count;
	}
	return samples;
}

uint64_t tu_profile_count_root(const struct tu_profile *profile,
			       const char *name)
{
	uint64_t samples = 0;

	for (size_t i = 0; i < profile->count; i++) {
		const struct tu_stack *stack = &profile->stacks[i];

		if (stack->depth > 0 && strcmp(stack->frames[0], name) == 0)
			samples += stack->count;
	}
	return samples;
}

size_t tu_profile_max_depth(const struct tu_profile *profile)
{
	size_t deepest = 0;

	for (size_t i = 0; i < profile->count; i++)
		if (profile->stacks[i].depth > deepest)
			deepest = profile->stacks[i].depth;
	return deepest;
}

void tu_profile_dump(const struct tu_profile *profile, size_t max_lines)
{
	/* Deep stacks are shown as their first and last few frames.  */
	const size_t shown_ends = 6;

	if (profile == NULL) {
		fprintf(stderr, "  (no profile)\n");
		return;
	}
	fprintf(stderr, "  profile: %zu stacks, %" PRIu64 " samples\n",
		profile->count, tu_profile_total(profile));
	for (size_t i = 0; i < profile->count && i < max_lines; i++) {
		const struct tu_stack *stack = &profile->stacks[i];

		fprintf(stderr, "    ");
		for (size_t f = 0; f < stack->depth; f++) {
			if (stack->depth > 2 * shown_ends && f == shown_ends) {
				fprintf(stderr, ";...(%zu frames)...",
					stack->depth - 2 * shown_ends);
				f = stack->depth - shown_ends - 1;
				continue;
			}
			fprintf(stderr, "%s%s", f ? ";" : "", stack->frames[f]);
		}
		fprintf(stderr, " %" PRIu64 "\n", stack->count);
	}
	if (profile->count > max_lines)
		fprintf(stderr, "    ... %zu more stacks\n",
			profile->count - max_lines);
}

/* ----------------------------------------------------------------- /proc */

/* The value after "KEY:" in /proc/PID/task/TID/status (or
 * /proc/PID/status when TID is 0), whitespace skipped, into VALUE.  */
static bool status_field(pid_t pid, pid_t tid, const char *key, char *value,
			 size_t value_size)
{
	char path[64];
	char line[256];
	size_t key_len = strlen(key);
	FILE *file;
	bool found = false;

	if (tid > 0)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid,
			 (int)tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	file = fopen(path, "re");
	if (file == NULL)
		return false;
	while (fgets(line, sizeof(line), file) != NULL) {
		if (strncmp(line, key, key_len) == 0 && line[key_len] == ':') {
			const char *start = line + key_len + 1;

			while (*start == ' ' || *start == '\t')
				start++;
			snprintf(value, value_size, "%s", start);
			value[strcspn(value, "\n")] = '\0';
			found = true;
			break;
		}
	}
	fclose(file);
	return found;
}

char tu_proc_state(pid_t pid)
{
	char value[64];

	if (!status_field(pid, 0, "State", value, sizeof(value)))
		return 0;
	return value[0];
}

pid_t tu_task_tracer(pid_t pid, pid_t tid)
{
	char value[64];

	if (!status_field(pid, tid, "TracerPid", value, sizeof(value)))
		return -1;
	return (pid_t)strtol(value, NULL, 10);
}

int tu_tasks(pid_t pid, pid_t *tids, size_t max)
{
	char path[64];
	DIR *dir;
	struct dirent *entry;
	int count = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (dir == NULL)
		return -1;
	while ((entry = readdir(dir)) != NULL) {
		if (!isdigit((unsigned char)entry->d_name[0]))
			continue;
		if ((size_t)count < max)
			tids[count] = (pid_t)strtol(entry->d_name, NULL, 10);
		count++;
	}
	closedir(dir);
	return count;
}

bool tu_task_name(pid_t pid, pid_t tid, char name[16])
{
	char path[64];
	FILE *file;
	bool ok;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid,
		 (int)tid);
	file = fopen(path, "re");
	if (file == NULL)
		return false;
	ok = fgets(name, 16, file) != NULL;
	fclose(file);
	if (ok)
		name[strcspn(name, "\n")] = '\0';
	return ok;
}

pid_t tu_find_task(pid_t pid, const char *name)
{
	pid_t tids[256];
	int count = tu_tasks(pid, tids, 256);

	for (int i = 0; i < count && i < 256; i++) {
		char task_name[16];

		if (tu_task_name(pid, tids[i], task_name)
		    && strcmp(task_name, name) == 0)
			return tids[i];
	}
	return 0;
}

int tu_traced_tasks(pid_t pid)
{
	pid_t tids[256];
	int count = tu_tasks(pid, tids, 256);
	int traced = 0;

	for (int i = 0; i < count && i < 256; i++)
		if (tu_task_tracer(pid, tids[i]) > 0)
			traced++;
	return traced;
}

bool tu_wait_traced(pid_t pid, int timeout_ms)
{
	uint64_t deadline_ns = deadline_in(timeout_ms);

	for (;;) {
		int count = tu_tasks(pid, (pid_t[1]){ 0 }, 0);

		if (count > 0 && tu_traced_tasks(pid) == count)
			return true;
		if (count < 0 || ms_left(deadline_ns) == 0)
			return false;
		poll(NULL, 0, 1);
	}
}

/* Read /proc/PID/stat into TEXT (TEXT_SIZE bytes) and return where the
 * fields after the name begin (at the space before the state), or NULL
 * when PID is gone.  */
static const char *stat_after_name(pid_t pid, char *text, size_t text_size)
{
	char path[64];
	FILE *file;
	size_t len;
	const char *name_end;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	file = fopen(path, "re");
	if (file == NULL)
		return NULL;
	len = fread(text, 1, text_size - 1, file);
	fclose(file);
	text[len] = '\0';
	/* The name (field 2) is in parentheses and may itself contain
	 * spaces and ')': the fields resume after the LAST ')'.  */
	name_end = strrchr(text, ')');
	return name_end != NULL ? name_end + 1 : NULL;
}

/* The flags field (the 9th) of /proc/PID/stat, or false.  */
static bool stat_flags(pid_t pid, unsigned long *flags)
{
	char text[1024];
	const char *fields = stat_after_name(pid, text, sizeof(text));

	/* state ppid pgrp session tty_nr tpgid flags */
	return fields != NULL
	       && sscanf(fields, " %*c %*d %*d %*d %*d %*d %lu", flags) == 1;
}

long long tu_proc_cpu_ticks(pid_t pid)
{
	char text[1024];
	const char *fields = stat_after_name(pid, text, sizeof(text));
	unsigned long long utime, stime;

	/* state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	 * cmajflt utime stime: fields 3 to 15.  */
	if (fields == NULL
	    || sscanf(fields, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			      "%llu %llu", &utime, &stime) != 2)
		return -1;
	return (long long)(utime + stime);
}

bool tu_wait_cpu_ticks(pid_t pid, long long ticks, int timeout_ms)
{
	uint64_t deadline_ns = deadline_in(timeout_ms);
	long long start = tu_proc_cpu_ticks(pid);

	for (;;) {
		long long now = tu_proc_cpu_ticks(pid);

		if (start < 0 || now < 0)
			return false;
		if (now - start >= ticks)
			return true;
		if (ms_left(deadline_ns) == 0)
			return false;
		poll(NULL, 0, 1);
	}
}

char tu_task_state(pid_t pid, pid_t tid)
{
	char value[64];

	if (!status_field(pid, tid, "State", value, sizeof(value)))
		return 0;
	return value[0];
}

/* True when the state of PID (TID 0), of its thread TID, or of every
 * thread (TID -1) is in STATES; *GONE set when PID no longer exists.  */
static bool state_in(pid_t pid, pid_t tid, const char *states, bool *gone)
{
	pid_t tids[256];
	int count, matched = 0;

	*gone = false;
	if (tid >= 0) {
		char state = tu_task_state(pid, tid);

		*gone = state == 0;
		return state != 0 && strchr(states, state) != NULL;
	}
	count = tu_tasks(pid, tids, 256);
	if (count <= 0) {
		*gone = true;
		return false;
	}
	for (int i = 0; i < count && i < 256; i++) {
		char state = tu_task_state(pid, tids[i]);

		/* A thread that has just exited is not a reason to fail.  */
		if (state == 0)
			continue;
		if (strchr(states, state) == NULL)
			return false;
		matched++;
	}
	*gone = matched == 0;
	return matched > 0;
}

bool tu_wait_state(pid_t pid, pid_t tid, const char *states, int timeout_ms)
{
	uint64_t deadline_ns = deadline_in(timeout_ms);

	for (;;) {
		bool gone;

		if (state_in(pid, tid, states, &gone))
			return true;
		if (gone || ms_left(deadline_ns) == 0)
			return false;
		poll(NULL, 0, 1);
	}
}

bool tu_wait_task_traced(pid_t pid, pid_t tid, int timeout_ms)
{
	uint64_t deadline_ns = deadline_in(timeout_ms);

	for (;;) {
		pid_t tracer = tu_task_tracer(pid, tid);

		if (tracer > 0)
			return true;
		if (tracer < 0 || ms_left(deadline_ns) == 0)
			return false;
		poll(NULL, 0, 1);
	}
}

pid_t tu_find_kernel_thread(void)
{
	unsigned long flags;
	DIR *dir;
	struct dirent *entry;
	pid_t found = 0;

	/* kthreadd is PID 2 wherever the kernel's threads are visible.  */
	if (stat_flags(2, &flags) && (flags & TU_PF_KTHREAD))
		return 2;
	dir = opendir("/proc");
	if (dir == NULL)
		return 0;
	while (found == 0 && (entry = readdir(dir)) != NULL) {
		pid_t pid;

		if (!isdigit((unsigned char)entry->d_name[0]))
			continue;
		pid = (pid_t)strtol(entry->d_name, NULL, 10);
		if (stat_flags(pid, &flags) && (flags & TU_PF_KTHREAD))
			found = pid;
	}
	closedir(dir);
	return found;
}

/* ----------------------------------------------------------------- misc */

pid_t tu_make_zombie(void)
{
	siginfo_t info;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0)
		_exit(0);
	own(OWNED_PID, NULL, pid);
	/* WNOWAIT: wait until it has exited but leave it unreaped.  */
	memset(&info, 0, sizeof(info));
	while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) != 0)
		if (errno != EINTR)
			return -1;
	return pid;
}

pid_t tu_reaped_pid(void)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0)
		_exit(0);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return pid;
}

/* The tracer helper: seize TARGET, report on RESULT_FD, then keep it
 * traced until killed.  Stops of the target are passed on (a tracer that
 * never waits would leave the target stuck in its first signal stop).  */
static void __attribute__((noreturn)) hold_traced(pid_t target, int result_fd)
{
	int error = 0;
	int status;

	if (ptrace(PTRACE_SEIZE, target, NULL, NULL) != 0)
		error = errno;
	if (write(result_fd, &error, sizeof(error)) != sizeof(error))
		_exit(1);
	close(result_fd);
	if (error != 0)
		_exit(1);
	while (waitpid(target, &status, __WALL) == target) {
		int signo;

		if (!WIFSTOPPED(status))
			continue;
		signo = WSTOPSIG(status);
		if ((status >> 16) == PTRACE_EVENT_STOP) {
			/* A group-stop (SIGSTOP and friends): keep it, as
			 * a tracer must, with LISTEN.  */
			ptrace(PTRACE_LISTEN, target, NULL, NULL);
			continue;
		}
		/* A signal-delivery-stop: deliver the signal.  */
		ptrace(PTRACE_CONT, target, NULL, (void *)(uintptr_t)signo);
	}
	for (;;)
		pause();
}

pid_t tu_hold_traced(pid_t target)
{
	int pipe_fds[2];
	int error = 0;
	pid_t parent = getpid();
	pid_t helper;

	if (pipe2(pipe_fds, O_CLOEXEC) != 0)
		return -1;
	fflush(NULL);
	helper = fork();
	if (helper < 0) {
		close(pipe_fds[0]);
		close(pipe_fds[1]);
		return -1;
	}
	if (helper == 0) {
		prepare_child(parent);
		close(pipe_fds[0]);
		hold_traced(target, pipe_fds[1]);
	}
	close(pipe_fds[1]);
	own(OWNED_PID, NULL, helper);
	if (read(pipe_fds[0], &error, sizeof(error)) != sizeof(error))
		error = EIO;
	close(pipe_fds[0]);
	if (error != 0) {
		fprintf(stderr, "testutil: PTRACE_SEIZE %d: %s\n", (int)target,
			strerror(error));
		return -1;
	}
	return helper;
}

const char *tu_temp_dir(void)
{
	const char *base = getenv("TMPDIR");
	char template[PATH_MAX];
	char *dir;

	if (base == NULL || base[0] == '\0')
		base = "/tmp";
	snprintf(template, sizeof(template), "%s/cprof-e2e-XXXXXX", base);
	if (mkdtemp(template) == NULL) {
		perror("testutil: mkdtemp");
		return NULL;
	}
	dir = xstrdup(template);
	own(OWNED_DIR, dir, 0);
	return dir;
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int tu_dir_entries(const char *path, char ***names)
{
	DIR *dir = opendir(path);
	struct dirent *entry;
	char **list = xmalloc(sizeof(*list));
	int count = 0;

	*names = NULL;
	if (dir == NULL) {
		free(list);
		return -1;
	}
	while ((entry = readdir(dir)) != NULL) {
		if (strcmp(entry->d_name, ".") == 0
		    || strcmp(entry->d_name, "..") == 0)
			continue;
		list = xrealloc(list, (size_t)(count + 2) * sizeof(*list));
		list[count++] = xstrdup(entry->d_name);
	}
	closedir(dir);
	list[count] = NULL;
	qsort(list, (size_t)count, sizeof(*list), compare_names);
	*names = list;
	return count;
}

void tu_free_names(char **names)
{
	if (names == NULL)
		return;
	for (size_t i = 0; names[i] != NULL; i++)
		free(names[i]);
	free(names);
}

char *tu_read_file(const char *path)
{
	FILE *file = fopen(path, "re");
	char *text;

	if (file == NULL)
		return NULL;
	text = slurp(file);
	fclose(file);
	return text;
}

bool tu_text_has_line_prefix(const char *text, const char *prefix)
{
	return text != NULL && has_line(text, prefix, false);
}

const char *tu_machine_load(void)
{
	static char description[128];
	double load[3] = { -1, -1, -1 };

	getloadavg(load, 3);
	snprintf(description, sizeof(description),
		 "%ld CPUs online, load average %.2f %.2f %.2f",
		 sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2]);
	return description;
}

size_t tu_count_lines(const char *text)
{
	size_t lines = 0;
	const char *p;

	if (text == NULL)
		return 0;
	for (p = text; *p != '\0'; p++)
		if (*p == '\n')
			lines++;
	if (p != text && p[-1] != '\n')
		lines++;
	return lines;
}

/* ------------------------------------------- fixtures driven on stdin */

struct tu_proc *tu_fixture_start_stdin(int *stdin_fd, const char *name, ...)
{
	const char *args[9] = { NULL };
	size_t argc = 0;
	int pipe_fds[2];
	int saved_stdin;
	struct tu_proc *proc;
	va_list rest;
	const char *arg;

	*stdin_fd = -1;
	va_start(rest, name);
	while ((arg = va_arg(rest, const char *)) != NULL && argc < 8)
		args[argc++] = arg;
	va_end(rest);
	if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
		perror("testutil: pipe2");
		return NULL;
	}
	/* tu_fixture_start's child inherits our fd 0: for the time of the
	 * call, make that the read end of the pipe (dup2 clears
	 * close-on-exec on the copy), then put our own stdin back.  */
	saved_stdin = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
	if (dup2(pipe_fds[0], STDIN_FILENO) < 0) {
		perror("testutil: dup2");
		close(pipe_fds[0]);
		close(pipe_fds[1]);
		if (saved_stdin >= 0)
			close(saved_stdin);
		return NULL;
	}
	/* The unused trailing arguments are NULL: the list ends at the
	 * first of them.  */
	proc = tu_fixture_start(name, args[0], args[1], args[2], args[3],
				args[4], args[5], args[6], args[7], NULL);
	if (saved_stdin >= 0) {
		dup2(saved_stdin, STDIN_FILENO);
		close(saved_stdin);
	} else {
		close(STDIN_FILENO);
	}
	close(pipe_fds[0]);
	if (proc == NULL) {
		close(pipe_fds[1]);
		return NULL;
	}
	*stdin_fd = pipe_fds[1];
	return proc;
}

bool tu_proc_wait_line_prefix(struct tu_proc *proc, const char *prefix,
			      int timeout_ms)
{
	uint64_t deadline_ns = deadline_in(timeout_ms);

	for (;;) {
		int left;

		if (has_line(proc->output, prefix, false))
			return true;
		left = ms_left(deadline_ns);
		if (proc->stdout_fd < 0 || left == 0)
			return false;
		read_some(proc, left);
	}
}

/* True when TEXT holds a complete line containing NEEDLE.  */
static bool has_line_containing(const char *text, const char *needle)
{
	const char *start = text;
	const char *end;

	while ((end = strchr(start, '\n')) != NULL) {
		if (memmem(start, (size_t)(end - start), needle,
			   strlen(needle)) != NULL)
			return true;
		start = end + 1;
	}
	return false;
}

/* Everything RUN wrote to stderr so far, NUL-ended; the caller frees.  */
static char *stderr_so_far(const struct tu_run *run)
{
	char *text = xmalloc(1);
	size_t len = 0;
	char chunk[4096];
	ssize_t got;

	text[0] = '\0';
	if (run->err_file == NULL)
		return text;
	/* pread: the stream's own offset and buffer stay untouched for
	 * slurp() in tu_run_wait.  */
	while ((got = pread(fileno(run->err_file), chunk, sizeof(chunk),
			    (off_t)len)) > 0) {
		text = xrealloc(text, len + (size_t)got + 1);
		memcpy(text + len, chunk, (size_t)got);
		len += (size_t)got;
		text[len] = '\0';
	}
	return text;
}

bool tu_run_wait_stderr(struct tu_run *run, const char *text, int timeout_ms)
{
	uint64_t deadline_ns = deadline_in(timeout_ms);

	if (run == NULL || run->pid <= 0)
		return false;
	for (;;) {
		siginfo_t info;
		bool exited = run->finished;
		char *err;
		bool found;

		if (!exited) {
			/* WNOWAIT: notice the exit without reaping.  */
			memset(&info, 0, sizeof(info));
			exited = waitid(P_PID, (id_t)run->pid, &info,
					WEXITED | WNOHANG | WNOWAIT) == 0
				 && info.si_pid == run->pid;
		}
		err = stderr_so_far(run);
		found = has_line_containing(err, text);
		free(err);
		if (found)
			return true;
		if (exited || ms_left(deadline_ns) == 0)
			return false;
		poll(NULL, 0, 1);
	}
}

bool tu_code_matches_files(pid_t pid, char *why, size_t why_size)
{
	char path[PATH_MAX];
	char line[PATH_MAX + 128];
	FILE *maps;
	int mem;
	unsigned compared = 0;
	bool same = true;

	why[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	maps = fopen(path, "re");
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	mem = open(path, O_RDONLY | O_CLOEXEC);
	if (maps == NULL || mem < 0) {
		snprintf(why, why_size, "cannot read the memory of process "
			 "%d: %s", (int)pid, strerror(errno));
		if (maps != NULL)
			fclose(maps);
		if (mem >= 0)
			close(mem);
		return false;
	}
	while (same && fgets(line, sizeof(line), maps) != NULL) {
		unsigned long long start, end, offset;
		char perms[8];
		int name_at = 0;
		char *name;
		char file_path[PATH_MAX + 64];
		int file;

		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end,
			   perms, &offset, &name_at) < 4 || name_at == 0)
			continue;
		name = line + name_at;
		name[strcspn(name, "\n")] = '\0';
		if (strcmp(perms, "r-xp") != 0 || name[0] != '/')
			continue;
		snprintf(file_path, sizeof(file_path), "/proc/%d/root%s",
			 (int)pid, name);
		file = open(file_path, O_RDONLY | O_CLOEXEC);
		if (file < 0) {
			snprintf(why, why_size, "cannot open %s: %s",
				 file_path, strerror(errno));
			same = false;
			break;
		}
		for (unsigned long long at = 0; same && at < end - start;) {
			static unsigned char in_memory[65536], in_file[65536];
			size_t want = end - start - at < sizeof(in_file)
					      ? (size_t)(end - start - at)
					      : sizeof(in_file);
			ssize_t from_file = pread(file, in_file, want,
						  (off_t)(offset + at));
			ssize_t from_memory;

			/* The mapping's last page goes past the end of the
			 * file: only the file's bytes are compared.  */
			if (from_file <= 0)
				break;
			from_memory = pread(mem, in_memory, (size_t)from_file,
					    (off_t)(start + at));
			if (from_memory != from_file) {
				snprintf(why, why_size, "cannot read %zd bytes "
					 "at %#llx of process %d: %s",
					 from_file, start + at, (int)pid,
					 strerror(errno));
				same = false;
			} else if (memcmp(in_memory, in_file,
					  (size_t)from_file) != 0) {
				size_t k = 0;

				while (in_memory[k] == in_file[k])
					k++;
				snprintf(why, why_size, "process %d's code at "
					 "%#llx (%s + %#llx) is %#04x, the "
					 "file has %#04x: a breakpoint was "
					 "left in", (int)pid, start + at + k,
					 name, offset + at + k, in_memory[k],
					 in_file[k]);
				same = false;
			}
			at += (unsigned long long)from_file;
		}
		close(file);
		compared++;
	}
	fclose(maps);
	close(mem);
	if (same && compared < 2) {
		snprintf(why, why_size, "only %u executable mappings of "
			 "process %d compared", compared, (int)pid);
		same = false;
	}
	return same;
}

uint32_t tu_random(uint32_t *state)
{
	uint32_t x = *state;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*state = x;
	return x;
}
