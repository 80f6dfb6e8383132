/* The interactive console (src/cli/console.c), typed into as a person
 * would: cprof-attach runs in a pane of a tmux server of the test's own
 * (a socket of its own), the keys go in with send-keys and the screen
 * comes back with capture-pane.  Every wait polls the screen until the
 * text it expects is there; the limits are only there so that a broken
 * console fails the test instead of hanging it.
 *
 * The pane runs cprof-attach in the test's temporary directory (its
 * working directory, the history file, an empty inputrc), then prints
 * "[console exited STATUS]" and lingers a while, so the last screen can
 * be read; the server ends by itself when that is over, and teardown
 * kills it at once.  */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define READY_TIMEOUT_MS 10000
#define SCREEN_TIMEOUT_MS 30000

/* The tmux server of the test case running (each case is a process of
 * its own).  */
static char tmux_socket[64];
static char work_dir[PATH_MAX];
static char hist_file[PATH_MAX];
static bool tmux_started;
/* The session keys go to and the screen is read from.  */
static const char *pane = "console";

/* Run tmux on our socket with ARGS (NULL-terminated); its standard
 * output into *OUT when OUT is not NULL (malloc'd, NUL-ended).  Returns
 * its exit status, -1 when it could not run.  */
static int tmux_run(const char *const args[], char **out)
{
	const char *argv[32] = {"tmux", "-L", tmux_socket, "-f", NULL};
	char conf[PATH_MAX + 16];
	snprintf(conf, sizeof(conf), "%s/tmux.conf", work_dir);
	argv[4] = conf;
	size_t n = 5;
	for (size_t i = 0; args[i] && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	int pipefd[2] = {-1, -1};
	if (out && pipe(pipefd) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (out) {
			dup2(pipefd[1], STDOUT_FILENO);
			close(pipefd[0]);
			close(pipefd[1]);
		}
		unsetenv("TMUX");
		execvp("tmux", (char *const *)argv);
		_exit(127);
	}
	if (out) {
		close(pipefd[1]);
		size_t len = 0, cap = 4096;
		char *buf = malloc(cap);
		ssize_t got;
		while (buf && (got = read(pipefd[0], buf + len, cap - len - 1)) != 0) {
			if (got < 0) {
				if (errno == EINTR)
					continue;
				break;
			}
			len += (size_t)got;
			if (cap - len < 1024) {
				char *grown = realloc(buf, cap * 2);
				if (!grown)
					break;
				buf = grown;
				cap *= 2;
			}
		}
		close(pipefd[0]);
		if (buf)
			buf[len] = '\0';
		*out = buf;
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The whole pane, its scrolled-off lines too, wrapped lines joined
 * (JOINED) or as the screen shows them.  */
static char *screen_lines(bool joined)
{
	char *text = NULL;
	const char *const joined_args[] = {"capture-pane", "-p", "-J", "-S",
					   "-", "-t", pane, NULL};
	const char *const as_shown[] = {"capture-pane", "-p", "-S", "-",
					"-t", pane, NULL};
	tmux_run(joined ? joined_args : as_shown, &text);
	return text ? text : strdup("");
}

static char *screen(void)
{
	return screen_lines(true);
}

static void stop_tmux(void)
{
	if (!tmux_started)
		return;
	tmux_run((const char *const[]){"kill-server", NULL}, NULL);
	/* tmux leaves its socket behind */
	const char *base = getenv("TMUX_TMPDIR");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/tmux-%d/%s",
		 base && *base ? base : "/tmp", (int)getuid(), tmux_socket);
	unlink(path);
	tmux_started = false;
}

static void teardown(void)
{
	stop_tmux();
	tu_cleanup();
}

/* Fail with the screen in the log (and the server gone: a failing case
 * does not get to its teardown).  */
static void give_up(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void give_up(const char *fmt, ...)
{
	char why[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	char *text = screen();
	fprintf(stderr, "---- the console's screen:\n%s\n---- end of screen\n",
		text);
	free(text);
	stop_tmux();
	ck_abort_msg("%s", why);
}

/* The last line of TEXT that is not empty, without trailing blanks,
 * into LINE.  */
static void last_line(const char *text, char *line, size_t size)
{
	const char *end = text + strlen(text);
	while (end > text && (end[-1] == '\n' || end[-1] == ' '))
		end--;
	const char *start = end;
	while (start > text && start[-1] != '\n')
		start--;
	snprintf(line, size, "%.*s", (int)(end - start), start);
}

/* Does TEXT have a line equal to LINE (trailing blanks ignored)?  */
static bool has_line(const char *text, const char *line)
{
	size_t len = strlen(line);
	for (const char *p = text; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		while (n > 0 && p[n - 1] == ' ')
			n--;
		if (n == len && strncmp(p, line, len) == 0)
			return true;
		p = nl ? nl + 1 : NULL;
	}
	return false;
}

/* How many times NEEDLE is in TEXT.  */
static int count(const char *text, const char *needle)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, needle)) != NULL;
	     p += strlen(needle))
		n++;
	return n;
}

/* Poll the screen until it holds TEXT (at least TIMES times).  */
static void wait_text_times(const char *text, int times)
{
	uint64_t deadline = tu_now_ns() + SCREEN_TIMEOUT_MS * 1000000ull;
	for (;;) {
		char *s = screen();
		bool there = count(s, text) >= times;
		free(s);
		if (there)
			return;
		if (tu_now_ns() > deadline)
			give_up("the screen never showed \"%s\"%s", text,
			     times > 1 ? " that many times" : "");
		tu_delay_ms(50);
	}
}

static void wait_text(const char *text)
{
	wait_text_times(text, 1);
}

/* Poll the screen until its last line is LINE: the prompt with what was
 * typed (the prompt alone is "(cprof)": tmux drops trailing blanks).  */
static void wait_last(const char *line)
{
	uint64_t deadline = tu_now_ns() + SCREEN_TIMEOUT_MS * 1000000ull;
	char last[1024] = "";
	for (;;) {
		char *s = screen();
		last_line(s, last, sizeof(last));
		free(s);
		if (strcmp(last, line) == 0)
			return;
		if (tu_now_ns() > deadline)
			give_up("the last line of the screen is \"%s\", never \"%s\"",
			     last, line);
		tu_delay_ms(50);
	}
}

/* Poll the screen until the console has exited; with STATUS (may be
 * NULL) the status it must have.  Nothing a sanitizer says is on the
 * screen.  */
static void wait_exit(const char *status)
{
	wait_text("[console exited ");
	char *s = screen();
	bool sanitizer = strstr(s, "Sanitizer") || strstr(s, "runtime error");
	char want[64] = "";
	if (status)
		snprintf(want, sizeof(want), "[console exited %s]", status);
	bool status_ok = !status || strstr(s, want);
	free(s);
	if (sanitizer)
		give_up("a sanitizer complained");
	if (!status_ok)
		give_up("the console did not exit with status %s", status);
}

/* Keys by tmux's names (Enter, Tab, Up, C-c), up to a NULL.  */
static void keys(const char *key, ...)
{
	const char *argv[24] = {"send-keys", "-t", pane};
	size_t n = 3;
	va_list ap;
	va_start(ap, key);
	for (const char *k = key; k && n < 23; k = va_arg(ap, const char *))
		argv[n++] = k;
	va_end(ap);
	argv[n] = NULL;
	if (tmux_run(argv, NULL) != 0)
		give_up("tmux send-keys failed");
}

/* TEXT typed as it is (no key names).  */
static void type(const char *text)
{
	if (tmux_run((const char *const[]){"send-keys", "-t", pane, "-l",
					   text, NULL},
		     NULL) != 0)
		give_up("tmux send-keys failed");
}

/* A line typed and entered.  */
static void enter(const char *line)
{
	type(line);
	keys("Enter", NULL);
}

/* An empty file DIR/NAME.  */
static void touch(const char *name)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", work_dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "cannot create %s: %s", path, strerror(errno));
	close(fd);
}

/* Make the temporary directory; the history file's path in it.  */
static void prepare(void)
{
	const char *dir = tu_temp_dir();
	ck_assert_msg(dir != NULL, "no temporary directory");
	snprintf(work_dir, sizeof(work_dir), "%s", dir);
	snprintf(hist_file, sizeof(hist_file), "%s/history", dir);
	touch("tmux.conf");
	touch("inputrc");
}

/* Start cprof-attach ARGS (shell words; may be "") in the pane, in the
 * temporary directory, with HOME that directory, ENV (shell words, may
 * be "") in its environment and no other variable of the history's, and
 * wait for the prompt.  */
static void start_console_env(const char *env, const char *args,
			      bool wait_prompt)
{
	if (!work_dir[0])
		prepare();
	/* A server of its own each time: one just killed may still be
	 * going away on the old socket.  */
	static int servers;
	snprintf(tmux_socket, sizeof(tmux_socket), "cprof-check-%d-%d",
		 (int)getpid(), ++servers);
	char command[6 * PATH_MAX];
	/* timeout: a hung console ends by itself even when the test
	 * process is gone (-k: killed when SIGTERM does not end it, as
	 * when LeakSanitizer hangs at exit under SANITIZE=1); --foreground
	 * keeps it in the terminal's foreground process group.  */
	snprintf(command, sizeof(command),
		 "cd '%s' && timeout --foreground -k 5 300 env -u XDG_STATE_HOME "
		 "-u CPROF_HISTFILE -u CPROF_HISTSIZE INPUTRC='%s/inputrc' "
		 "HOME='%s' %s '%s/cprof-attach' %s; "
		 "echo \"[console exited $?]\"; sleep 60",
		 work_dir, work_dir, work_dir, env, CP_BUILD_DIR, args);
	int rc = tmux_run((const char *const[]){"new-session", "-d", "-s",
						"console", "-x", "120", "-y",
						"40", command, NULL},
			  NULL);
	ck_assert_msg(rc == 0, "tmux new-session failed (%d)", rc);
	tmux_started = true;
	if (wait_prompt)
		wait_last("(cprof)");
}

/* The same with the history in HIST_FILE.  */
static void start_console(const char *args)
{
	if (!work_dir[0])
		prepare();
	char env[PATH_MAX + 32];
	snprintf(env, sizeof(env), "CPROF_HISTFILE='%s'", hist_file);
	start_console_env(env, args, true);
}

/* Start fixture chain-O0 and attach to it from the prompt.  */
static struct tu_proc *attach_chain(void)
{
	struct tu_proc *fx = tu_fixture_start("chain-O0", "300", NULL);
	if (!fx || !tu_proc_wait_line(fx, "ready", READY_TIMEOUT_MS))
		give_up("the fixture chain-O0 did not start");
	char line[64];
	snprintf(line, sizeof(line), "attach %d", (int)fx->pid);
	enter(line);
	char said[64];
	snprintf(said, sizeof(said), "Attached to process %d", (int)fx->pid);
	wait_text(said);
	wait_last("(cprof)");
	if (tu_task_tracer(fx->pid, 0) <= 0)
		give_up("process %d is not traced after attach", (int)fx->pid);
	return fx;
}

/* The target goes on, untraced, and still runs.  */
static void check_released(struct tu_proc *fx)
{
	ck_assert_msg(tu_proc_state(fx->pid) != 0, "the target is gone");
	ck_assert_msg(tu_task_tracer(fx->pid, 0) == 0,
		      "the target is still traced after the console ended");
	ck_assert_msg(tu_traced_tasks(fx->pid) == 0,
		      "a thread of the target is still traced");
	ck_assert_msg(tu_wait_cpu_ticks(fx->pid, 2, 20000),
		      "the target does not run after the console ended");
}

/* ---------------------------------------------------------------- cases */

START_TEST(test_prompt)
{
	/* No PID and no command: the console, with nothing attached.  */
	start_console("");
	char *s = screen();
	ck_assert_msg(has_line(s, "(cprof)"), "no prompt:\n%s", s);
	free(s);
	enter("echo hello\\n");
	wait_text("\nhello\n");
	/* Output without a newline keeps its line; the prompt comes on the
	 * next one.  */
	enter("echo no newline");
	wait_text("no newline");
	uint64_t deadline = tu_now_ns() + SCREEN_TIMEOUT_MS * 1000000ull;
	for (bool own_line = false; !own_line;) {
		char *lines = screen_lines(false);
		own_line = strstr(lines, "\nno newline\n(cprof)\n") != NULL;
		free(lines);
		if (!own_line && tu_now_ns() > deadline)
			give_up("the prompt did not come on a line of its own "
				"after output without a newline");
		tu_delay_ms(50);
	}
	enter("quit");
	wait_exit("0");
}
END_TEST

START_TEST(test_after_commands)
{
	/* -ex and -x without --batch: their commands, then the console,
	 * attached to what they attached.  */
	prepare();
	struct tu_proc *fx = tu_fixture_start("chain-O0", "300", NULL);
	if (!fx || !tu_proc_wait_line(fx, "ready", READY_TIMEOUT_MS))
		give_up("the fixture chain-O0 did not start");
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/first.cprof", work_dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("echo from the file\\n\n", f);
	fclose(f);
	char args[256];
	snprintf(args, sizeof(args),
		 "-ex 'attach %d' -x first.cprof -ex 'echo from -ex\\n'",
		 (int)fx->pid);
	start_console(args);
	char *s = screen();
	bool order = strstr(s, "Attached to process") &&
		     strstr(s, "from the file") && strstr(s, "from -ex") &&
		     strstr(s, "from the file") < strstr(s, "from -ex");
	free(s);
	if (!order)
		give_up("the commands given did not run first, in order");
	type("bt");
	wait_last("(cprof) bt");
	keys("Enter", NULL);
	wait_text("chain_alpha");
	wait_last("(cprof)");
	enter("quit");
	wait_exit("0");
	check_released(fx);
}
END_TEST

START_TEST(test_help)
{
	start_console("");
	enter("help");
	wait_text("Commands (help COMMAND for one):");
	wait_last("(cprof)");
	char *s = screen();
	static const char *const names[] = {"attach", "sample", "break",
					    "backtrace", "dump", "heap",
					    "write", "help", "quit", NULL};
	for (size_t i = 0; names[i]; i++) {
		char prefix[32];
		snprintf(prefix, sizeof(prefix), "  %s ", names[i]);
		if (!tu_text_has_line_prefix(s, prefix)) {
			free(s);
			give_up("help does not list %s", names[i]);
		}
	}
	free(s);
}
END_TEST

START_TEST(test_help_command)
{
	start_console("");
	enter("help sample");
	wait_text("Usage: sample ");
	wait_last("(cprof)");
	char *s = screen();
	bool has_for = strstr(s, "for DURATION") != NULL;
	free(s);
	if (!has_for)
		give_up("help sample does not show its usage");
}
END_TEST

START_TEST(test_complete_command)
{
	start_console("");
	/* One command begins with "hel": completed, with a space after.  */
	type("hel");
	keys("Tab", NULL);
	type("X");
	wait_last("(cprof) help X");
	keys("C-u", NULL);
	/* "he": heap and help; the second Tab lists both.  */
	type("he");
	keys("Tab", "Tab", NULL);
	wait_text("heap");
	char *s = screen();
	bool listed = false;
	for (const char *p = s; (p = strstr(p, "heap")) != NULL; p++) {
		const char *nl = strchr(p, '\n');
		const char *help = strstr(p, "help");
		if (help && (!nl || help < nl))
			listed = true;
	}
	free(s);
	if (!listed)
		give_up("he<Tab><Tab> did not list heap and help on one line");
	wait_last("(cprof) he");
}
END_TEST

START_TEST(test_complete_function)
{
	start_console("");
	struct tu_proc *fx = attach_chain();
	/* The target's function names, after break.  */
	type("break chain_al");
	keys("Tab", NULL);
	type("X");
	wait_last("(cprof) break chain_alpha X");
	keys("C-u", NULL);
	type("break chain_");
	keys("Tab", "Tab", NULL);
	wait_text("chain_gamma");
	char *s = screen();
	bool all = strstr(s, "chain_alpha") && strstr(s, "chain_beta");
	free(s);
	if (!all)
		give_up("break chain_<Tab><Tab> did not list the chain functions");
	keys("C-u", NULL);
	enter("quit");
	wait_exit("0");
	check_released(fx);
}
END_TEST

START_TEST(test_complete_files)
{
	prepare();
	touch("cmds-xyz.cprof");
	start_console("");
	/* source takes a file: its name completes.  */
	type("source cmds-x");
	keys("Tab", NULL);
	type("X");
	wait_last("(cprof) source cmds-xyz.cprof X");
	keys("C-u", NULL);
	/* break does not: nothing happens.  */
	type("break cmds-x");
	keys("Tab", NULL);
	type("Y");
	wait_last("(cprof) break cmds-xY");
}
END_TEST

START_TEST(test_history)
{
	start_console("");
	enter("echo one\\n");
	wait_text("\none\n");
	enter("echo two\\n");
	wait_text("\ntwo\n");
	enter("echo two\\n"); /* the same again: one entry */
	wait_text_times("\ntwo\n", 2);
	enter(""); /* an empty line is no entry, and runs nothing */
	wait_text_times("\ntwo\n", 2);
	keys("Up", NULL);
	wait_last("(cprof) echo two\\n");
	keys("Up", NULL);
	wait_last("(cprof) echo one\\n");
	keys("C-u", NULL);
	enter("quit");
	wait_exit("0");
	char *text = tu_read_file(hist_file);
	ck_assert_msg(text != NULL, "no history file %s", hist_file);
	ck_assert_msg(strcmp(text, "echo one\\n\necho two\\n\nquit\n") == 0,
		      "the history file holds:\n%s", text);
	free(text);
	struct stat st;
	ck_assert_int_eq(stat(hist_file, &st), 0);
	ck_assert_msg((st.st_mode & 0777) == 0600,
		      "the history file's mode is %o, not 600",
		      (unsigned)(st.st_mode & 0777));
	/* The next console has it.  */
	stop_tmux();
	start_console("");
	keys("Up", NULL);
	wait_last("(cprof) quit");
	keys("Up", NULL);
	wait_last("(cprof) echo two\\n");
	keys("C-u", NULL);
	enter("echo three\\n");
	wait_text("\nthree\n");
	keys("C-d", NULL);
	wait_exit("0");
	text = tu_read_file(hist_file);
	ck_assert_msg(text && strcmp(text, "echo one\\n\necho two\\n\nquit\n"
					   "echo three\\n\n") == 0,
		      "the history file holds:\n%s", text ? text : "(none)");
	free(text);
}
END_TEST

START_TEST(test_history_size)
{
	prepare();
	FILE *f = fopen(hist_file, "w");
	ck_assert_ptr_nonnull(f);
	fputs("echo old1\necho old2\necho old3\n", f);
	fclose(f);
	char env[PATH_MAX + 64];
	snprintf(env, sizeof(env), "CPROF_HISTFILE='%s' CPROF_HISTSIZE=2",
		 hist_file);
	start_console_env(env, "", true);
	keys("Up", NULL);
	wait_last("(cprof) echo old3");
	keys("Up", NULL);
	wait_last("(cprof) echo old2");
	keys("Up", NULL); /* old1 was not kept: no older line */
	type("Z");
	wait_last("(cprof) echo old2Z");
	keys("C-u", NULL);
	enter("quit");
	wait_exit("0");
	char *text = tu_read_file(hist_file);
	ck_assert_msg(text && strcmp(text, "echo old3\nquit\n") == 0,
		      "the history file holds:\n%s", text ? text : "(none)");
	free(text);
}
END_TEST

/* One line entered and quit, with ENV; the console's history file then
 * holds "echo WORD" last.  */
static void one_line_run(const char *env, const char *word)
{
	start_console_env(env, "", true);
	char line[64];
	snprintf(line, sizeof(line), "echo %s\\n", word);
	enter(line);
	char shown[64];
	snprintf(shown, sizeof(shown), "\n%s\n", word);
	wait_text(shown);
	keys("C-d", NULL);
	wait_exit("0");
	stop_tmux();
}

static void check_dir_mode(const char *path, unsigned mode)
{
	struct stat st;
	ck_assert_msg(stat(path, &st) == 0, "no %s", path);
	ck_assert_msg(S_ISDIR(st.st_mode) && (st.st_mode & 0777) == mode,
		      "%s: mode %o, not a directory of mode %o", path,
		      (unsigned)(st.st_mode & 0777), mode);
}

START_TEST(test_history_merge)
{
	/* Two consoles at once: each adds its lines to the file when it
	 * ends, after what the other one wrote meanwhile.  */
	start_console("");
	char command[6 * PATH_MAX];
	snprintf(command, sizeof(command),
		 "cd '%s' && env -u XDG_STATE_HOME -u CPROF_HISTSIZE "
		 "CPROF_HISTFILE='%s' INPUTRC='%s/inputrc' HOME='%s' "
		 "'%s/cprof-attach'; echo \"[console exited $?]\"; sleep 60",
		 work_dir, hist_file, work_dir, work_dir, CP_BUILD_DIR);
	ck_assert_int_eq(tmux_run((const char *const[]){"new-session", "-d",
							"-s", "second", "-x",
							"120", "-y", "40",
							command, NULL},
				  NULL),
			 0);
	pane = "second";
	wait_last("(cprof)");
	pane = "console";
	enter("echo first\\n");
	wait_text("\nfirst\n");
	pane = "second";
	enter("echo second\\n");
	wait_text("\nsecond\n");
	pane = "console";
	enter("quit");
	wait_exit("0");
	pane = "second";
	enter("quit");
	wait_exit("0");
	pane = "console";
	char *text = tu_read_file(hist_file);
	ck_assert_msg(text && strcmp(text, "echo first\\n\nquit\n"
					   "echo second\\n\nquit\n") == 0,
		      "the history file holds:\n%s", text ? text : "(none)");
	free(text);
}
END_TEST

START_TEST(test_history_places)
{
	prepare();
	char path[PATH_MAX + 64], env[PATH_MAX + 64];
	/* $XDG_STATE_HOME/cprof/history, the directories made, 0700.  */
	snprintf(env, sizeof(env), "XDG_STATE_HOME='%s/state'", work_dir);
	one_line_run(env, "xdg");
	snprintf(path, sizeof(path), "%s/state", work_dir);
	check_dir_mode(path, 0700);
	snprintf(path, sizeof(path), "%s/state/cprof", work_dir);
	check_dir_mode(path, 0700);
	snprintf(path, sizeof(path), "%s/state/cprof/history", work_dir);
	char *text = tu_read_file(path);
	ck_assert_msg(text && strcmp(text, "echo xdg\\n\n") == 0,
		      "%s holds:\n%s", path, text ? text : "(nothing)");
	free(text);
	/* Neither: ~/.cprof_history.  */
	one_line_run("", "home");
	snprintf(path, sizeof(path), "%s/.cprof_history", work_dir);
	text = tu_read_file(path);
	ck_assert_msg(text && strcmp(text, "echo home\\n\n") == 0,
		      "%s holds:\n%s", path, text ? text : "(nothing)");
	free(text);
	/* CPROF_HISTFILE empty: no history file; the others stay.  */
	one_line_run("CPROF_HISTFILE=", "none");
	text = tu_read_file(path);
	ck_assert_msg(text && strcmp(text, "echo home\\n\n") == 0,
		      "%s holds:\n%s", path, text ? text : "(nothing)");
	free(text);
	char **names = NULL;
	int n = tu_dir_entries(work_dir, &names);
	for (int i = 0; i < n; i++)
		ck_assert_msg(strstr(names[i], "hist") == NULL ||
				      strcmp(names[i], ".cprof_history") == 0,
			      "a history file %s was written", names[i]);
	tu_free_names(names);
}
END_TEST

START_TEST(test_history_fifo)
{
	/* A history file that is a FIFO is neither read (it would wait for
	 * a writer) nor written (it would wait for a reader): the console
	 * starts and quits.  */
	prepare();
	ck_assert_int_eq(mkfifo(hist_file, 0600), 0);
	start_console("");
	enter("echo x\\n");
	wait_text("\nx\n");
	enter("quit");
	wait_exit("0");
	struct stat st;
	ck_assert_int_eq(lstat(hist_file, &st), 0);
	ck_assert_msg(S_ISFIFO(st.st_mode), "the FIFO was replaced");
}
END_TEST

START_TEST(test_history_symlink)
{
	/* A history file that is a link someone else owns is not written
	 * through (cprof runs as root): the file it points to stays as it
	 * was.  */
	prepare();
	char victim[PATH_MAX + 16];
	snprintf(victim, sizeof(victim), "%s/victim", work_dir);
	FILE *f = fopen(victim, "w");
	ck_assert_ptr_nonnull(f);
	fputs("precious\n", f);
	fclose(f);
	ck_assert_int_eq(symlink(victim, hist_file), 0);
	if (geteuid() == 0)
		ck_assert_int_eq(lchown(hist_file, 65534, 65534), 0);
	else
		fprintf(stderr, "history_symlink: not root: the link is ours "
				"and followed; only the victim is checked\n");
	start_console("");
	enter("echo x");
	enter("quit");
	wait_exit("0");
	char *text = tu_read_file(victim);
	if (geteuid() == 0) {
		ck_assert_msg(text && strcmp(text, "precious\n") == 0,
			      "the file the link points to was changed:\n%s",
			      text ? text : "(gone)");
		struct stat st;
		ck_assert_int_eq(lstat(hist_file, &st), 0);
		ck_assert_msg(S_ISLNK(st.st_mode), "the link was replaced");
		wait_text("history not saved");
	}
	free(text);
}
END_TEST

START_TEST(test_ctrl_c_at_prompt)
{
	start_console("");
	type("echo abc\\n");
	wait_last("(cprof) echo abc\\n");
	keys("C-c", NULL);
	wait_last("(cprof)");
	char *s = screen();
	bool shown = has_line(s, "(cprof) echo abc\\n^C");
	free(s);
	if (!shown)
		give_up("Ctrl-C did not leave the line as typed, marked ^C");
	enter("echo def\\n");
	wait_text("\ndef\n");
	s = screen();
	bool ran = has_line(s, "abc");
	free(s);
	if (ran)
		give_up("the line Ctrl-C dropped was run");
	/* A second one at the prompt is no "second interruption".  */
	keys("C-c", NULL);
	wait_text_times("(cprof) ^C", 1);
	enter("echo ghi\\n");
	wait_text("\nghi\n");
	enter("quit");
	wait_exit("0");
}
END_TEST

START_TEST(test_ctrl_c_in_command)
{
	start_console("");
	struct tu_proc *fx = attach_chain();
	/* Ctrl-C ends the command, not the console.  The keys reach the
	 * terminal in order, but a Ctrl-C that comes before the console
	 * read the line's Enter is the prompt's (and the terminal drops
	 * the line): then type it again.  */
	bool interrupted = false;
	for (int attempt = 0; attempt < 3 && !interrupted; attempt++) {
		enter("sample for 10m");
		tu_delay_ms(1000);
		keys("C-c", NULL);
		uint64_t deadline = tu_now_ns() + 15000000000ull;
		while (!interrupted && tu_now_ns() < deadline) {
			char *s = screen();
			interrupted = strstr(s, "interrupted") != NULL;
			free(s);
			tu_delay_ms(50);
		}
	}
	if (!interrupted)
		give_up("Ctrl-C did not end sample");
	wait_last("(cprof)");
	enter("echo alive\\n");
	wait_text("\nalive\n");
	ck_assert_msg(tu_task_tracer(fx->pid, 0) > 0,
		      "the target was let go by an interrupted command");
	enter("quit");
	wait_exit("0");
	check_released(fx);
}
END_TEST

START_TEST(test_eof)
{
	start_console("");
	keys("C-d", NULL);
	/* gdb's way: the prompt then "quit".  */
	wait_exit("0");
	char *s = screen();
	bool said = has_line(s, "(cprof) quit");
	free(s);
	if (!said)
		give_up("Ctrl-D did not print quit after the prompt");
}
END_TEST

START_TEST(test_quit_detaches)
{
	start_console("");
	struct tu_proc *fx = attach_chain();
	enter("quit");
	wait_exit("0");
	check_released(fx);
}
END_TEST

START_TEST(test_sigterm_at_prompt)
{
	start_console("");
	struct tu_proc *fx = attach_chain();
	type("echo half-typed");
	wait_last("(cprof) echo half-typed");
	pid_t tracer = tu_task_tracer(fx->pid, 0);
	ck_assert_msg(tracer > 0, "no tracer");
	ck_assert_int_eq(kill(tracer, SIGTERM), 0);
	wait_exit(NULL);
	check_released(fx);
}
END_TEST

START_TEST(test_output_above_prompt)
{
	/* What the session prints while a line is being typed (here: the
	 * target's end, seen while sample start samples) comes above the
	 * prompt, which is drawn again with the line as typed.  */
	start_console("");
	struct tu_proc *fx = attach_chain();
	enter("sample start");
	wait_text("Sampling process");
	wait_last("(cprof)");
	type("echo partial\\n");
	wait_last("(cprof) echo partial\\n");
	char said[64];
	snprintf(said, sizeof(said), "[process %d ", (int)fx->pid);
	tu_proc_kill(fx);
	wait_text(said);
	wait_last("(cprof) echo partial\\n");
	char *s = screen();
	int lines_with_it = count(s, "echo partial");
	free(s);
	if (lines_with_it != 1)
		give_up("the typed line shows %d times (output mixed into it?)",
		     lines_with_it);
	keys("Enter", NULL);
	wait_text("\npartial\n");
	enter("quit");
	wait_exit(NULL);
}
END_TEST

START_TEST(test_breakpoint_output)
{
	/* A breakpoint's commands run while a line is typed; what they
	 * print comes above the prompt, and the line typed is kept.  */
	start_console("");
	struct tu_proc *fx = tu_fixture_start("trigger", "120", "100", NULL);
	if (!fx || !tu_proc_wait_line(fx, "ready", READY_TIMEOUT_MS))
		give_up("the fixture trigger did not start");
	char line[64];
	snprintf(line, sizeof(line), "attach %d", (int)fx->pid);
	enter(line);
	wait_last("(cprof)");
	enter("break handle_request");
	wait_text("Breakpoint 1 at ");
	enter("commands");
	wait_last(">");
	enter("silent");
	enter("printf \"[hit %d]\\n\", $_hits");
	enter("end");
	wait_last("(cprof)");
	type("echo still typing");
	wait_text_times("[hit ", 3);
	wait_last("(cprof) echo still typing");
	keys("Enter", NULL);
	wait_text("\nstill typing");
	enter("delete");
	enter("quit");
	wait_exit("0");
	check_released(fx);
	char why[256];
	ck_assert_msg(tu_code_matches_files(fx->pid, why, sizeof(why)), "%s",
		      why);
}
END_TEST

START_TEST(test_suspend)
{
	/* Ctrl-Z at the prompt stops cprof-attach with the terminal given
	 * back to the shell; fg brings the prompt back, the line as it was,
	 * readline's editing working again.  An interactive bash runs in
	 * the pane for the job control.  */
	prepare();
	snprintf(tmux_socket, sizeof(tmux_socket), "cprof-check-%d-z",
		 (int)getpid());
	char command[4 * PATH_MAX];
	snprintf(command, sizeof(command),
		 "cd '%s' && exec env -u XDG_STATE_HOME -u CPROF_HISTSIZE "
		 "CPROF_HISTFILE= INPUTRC='%s/inputrc' HOME='%s' "
		 "PS1='[shell] ' bash --norc --noprofile -i",
		 work_dir, work_dir, work_dir);
	int rc = tmux_run((const char *const[]){"new-session", "-d", "-s",
						"console", "-x", "120", "-y",
						"40", command, NULL},
			  NULL);
	ck_assert_msg(rc == 0, "tmux new-session failed (%d)", rc);
	tmux_started = true;
	wait_last("[shell]");
	char line[PATH_MAX + 64];
	snprintf(line, sizeof(line), "'%s/cprof-attach'", CP_BUILD_DIR);
	enter(line);
	wait_last("(cprof)");
	type("echo abc");
	wait_last("(cprof) echo abc");
	keys("C-z", NULL);
	wait_text("Stopped");
	wait_last("[shell]");
	enter("fg");
	/* the command line typed, in "Stopped" and as fg says it */
	wait_text_times("/cprof-attach'", 3);
	/* bash may say it after the console drew its line again, over it:
	 * the first key draws it again too (C-e: to the end of the line,
	 * where the cursor is).  */
	keys("C-e", NULL);
	wait_last("(cprof) echo abc");
	type("def");
	wait_last("(cprof) echo abcdef");
	keys("Enter", NULL);
	wait_text("\nabcdef");
	enter("quit");
	wait_text_times("[shell]", 3);
	enter("echo \"[status $?]\"");
	wait_text("[status 0]");
}
END_TEST

START_TEST(test_resize)
{
	/* The terminal narrowed while a command ran: the next prompt's line
	 * editing knows (here: a character put at the start of a line that
	 * wraps lands at its start).  */
	start_console("");
	tmux_run((const char *const[]){"set-option", "-g", "window-size",
				       "manual", NULL},
		 NULL);
	enter("sleep 2");
	if (tmux_run((const char *const[]){"resize-window", "-t", "console",
					   "-x", "50", "-y", "40", NULL},
		     NULL) != 0)
		give_up("tmux resize-window failed");
	wait_text_times("(cprof)", 2);
	wait_last("(cprof)");
	static const char text[] = "echo aaaaaaaaaabbbbbbbbbbccccccccccdddddddddd"
				   "eeeeeeeeeeffffffffffgggggggggg";
	type(text);
	keys("C-a", NULL);
	type("X");
	char want[256];
	snprintf(want, sizeof(want), "(cprof) X%s", text);
	wait_last(want);
}
END_TEST

static TCase *new_case(Suite *suite, const char *name, double timeout)
{
	TCase *tc = tcase_create(name);
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, timeout);
	suite_add_tcase(suite, tc);
	return tc;
}

int main(void)
{
	if (system("tmux -V >/dev/null 2>&1") != 0) {
		fprintf(stderr, "check_console: tmux is not installed "
				"(Debian: tmux): nothing run\n");
		return EXIT_FAILURE;
	}
	Suite *suite = suite_create("console");
	tcase_add_test(new_case(suite, "prompt", 120), test_prompt);
	tcase_add_test(new_case(suite, "after_commands", 120),
		       test_after_commands);
	tcase_add_test(new_case(suite, "help", 120), test_help);
	tcase_add_test(new_case(suite, "help_command", 120),
		       test_help_command);
	tcase_add_test(new_case(suite, "complete_command", 120),
		       test_complete_command);
	tcase_add_test(new_case(suite, "complete_function", 120),
		       test_complete_function);
	tcase_add_test(new_case(suite, "complete_files", 120),
		       test_complete_files);
	tcase_add_test(new_case(suite, "history", 180), test_history);
	tcase_add_test(new_case(suite, "history_size", 120),
		       test_history_size);
	tcase_add_test(new_case(suite, "history_merge", 120),
		       test_history_merge);
	tcase_add_test(new_case(suite, "history_places", 120),
		       test_history_places);
	tcase_add_test(new_case(suite, "history_fifo", 120),
		       test_history_fifo);
	tcase_add_test(new_case(suite, "history_symlink", 120),
		       test_history_symlink);
	tcase_add_test(new_case(suite, "ctrl_c_at_prompt", 120),
		       test_ctrl_c_at_prompt);
	tcase_add_test(new_case(suite, "ctrl_c_in_command", 180),
		       test_ctrl_c_in_command);
	tcase_add_test(new_case(suite, "eof", 120), test_eof);
	tcase_add_test(new_case(suite, "quit_detaches", 120),
		       test_quit_detaches);
	tcase_add_test(new_case(suite, "sigterm_at_prompt", 120),
		       test_sigterm_at_prompt);
	tcase_add_test(new_case(suite, "output_above_prompt", 120),
		       test_output_above_prompt);
	tcase_add_test(new_case(suite, "breakpoint_output", 120),
		       test_breakpoint_output);
	tcase_add_test(new_case(suite, "suspend", 120), test_suspend);
	tcase_add_test(new_case(suite, "resize", 120), test_resize);
	SRunner *runner = srunner_create(suite);
	srunner_run_all(runner, CK_NORMAL);
	int failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
