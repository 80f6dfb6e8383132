/* Every example printed in README.md and in the EXAMPLES of the man pages
 * is run here exactly as printed, in the order printed, in one directory,
 * by bash with the build directory first on PATH.  Only the PID 4242 is
 * replaced: by a running demo program's, or for a --heap example by a
 * program that allocates all the time.  An example that would run for
 * long (-d 30, a heap trace without -d) is ended after a few seconds with
 * SIGINT to its process group, as Ctrl-C would; every example must exit
 * 0, and every file it names with -o must be there, non-empty and of the
 * format its name says.  The examples are found by reading the files, so
 * one added later is run too: a code line of README.md beginning with
 * "cprof" is an example unless it is a synopsis (it has a [ or an
 * upper-case placeholder); in a man page, every line of EXAMPLES.  Files
 * an example reads without making them (big.tar, ./app, before.folded,
 * after.folded, app.raw, the scripts of docs/examples/) are prepared
 * first.
 *
 * Scripts (SCRIPTING in cprof-attach(1)): every .EX ... .EE block of that
 * section is an example too: a block of "cprof-attach" lines is run line
 * by line as above; any other block is a script, written to a file (4242
 * replaced in it) and run as "cprof-attach -x FILE --batch".  A script, or
 * a line running one of the .cprof scripts of docs/examples/, gets the
 * allocating program's PID when it starts heap tracing (heap start),
 * else the demo program's; it runs to its end (--batch: never
 * interrupted), and every file it names in a write command must be there
 * like an -o file.  */
#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define MAX_EXAMPLES 64
#define EXAMPLE_PID "4242"
#define INTERRUPT_AFTER_MS 2500 /* then SIGINT, as Ctrl-C */
#define FINISH_TIMEOUT_MS 90000 /* after the SIGINT (go tool pprof...) */

struct example {
	char *line;        /* as printed (man escapes undone), no comment */
	char *script;      /* a script block: its text (line is NULL) */
	char where[64];    /* file:line */
};

static struct example examples[MAX_EXAMPLES];
static size_t nexamples;

static void add_example(const char *text, const char *file, int lineno)
{
	ck_assert_msg(nexamples < MAX_EXAMPLES, "too many examples");
	char *line = strdup(text);
	ck_assert_ptr_nonnull(line);
	/* A comment begins at " #" outside quotes.  */
	bool quoted = false;
	for (char *c = line; *c; c++) {
		if (*c == '"' || *c == '\'')
			quoted = !quoted;
		if (!quoted && c > line && *c == '#' && c[-1] == ' ') {
			*c = '\0';
			break;
		}
	}
	size_t len = strlen(line);
	while (len > 0 && isspace((unsigned char)line[len - 1]))
		line[--len] = '\0';
	examples[nexamples].line = line;
	examples[nexamples].script = NULL;
	snprintf(examples[nexamples].where, sizeof(examples[0].where), "%s:%d",
		 file, lineno);
	nexamples++;
}

/* A synopsis line: "cprof diff BEFORE AFTER [-o OUT]".  */
static bool is_synopsis(const char *line)
{
	if (strchr(line, '['))
		return true;
	for (const char *c = line; *c; c++) {
		if (*c == '#')
			break;
		bool start = c == line || c[-1] == ' ';
		if (start && isupper((unsigned char)c[0]) &&
		    isupper((unsigned char)c[1]))
			return true;
	}
	return false;
}

static void read_readme(const char *path)
{
	FILE *f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	char buf[4096];
	bool code = false;
	int lineno = 0;
	while (fgets(buf, sizeof(buf), f)) {
		lineno++;
		buf[strcspn(buf, "\n")] = '\0';
		if (strncmp(buf, "```", 3) == 0) {
			code = !code;
			continue;
		}
		if (code && strncmp(buf, "cprof", 5) == 0 && !is_synopsis(buf))
			add_example(buf, "README.md", lineno);
	}
	fclose(f);
}

/* Undo the roff escapes the pages use in examples: \- and \\ (a minus
 * and a backslash) and \e (a backslash).  */
static void unescape(const char *line, char *text, size_t size)
{
	size_t n = 0;
	for (const char *c = line; *c && n + 1 < size; c++) {
		if (c[0] == '\\' && (c[1] == '-' || c[1] == '\\')) {
			c++;
			text[n++] = *c;
		} else if (c[0] == '\\' && c[1] == 'e') {
			c++;
			text[n++] = '\\';
		} else {
			text[n++] = *c;
		}
	}
	text[n] = '\0';
}

/* A script block of SCRIPTING (its lines in TEXT) as one example.  */
static void add_script(const char *text, const char *file, int lineno)
{
	ck_assert_msg(nexamples < MAX_EXAMPLES, "too many examples");
	examples[nexamples].line = NULL;
	examples[nexamples].script = strdup(text);
	ck_assert_ptr_nonnull(examples[nexamples].script);
	snprintf(examples[nexamples].where, sizeof(examples[0].where), "%s:%d",
		 file, lineno);
	nexamples++;
}

static void read_man_page(const char *path, const char *name)
{
	FILE *f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	char buf[4096];
	bool in = false, scripting = false, block = false;
	int lineno = 0, block_line = 0;
	char script[8192];
	size_t script_len = 0;
	while (fgets(buf, sizeof(buf), f)) {
		lineno++;
		buf[strcspn(buf, "\n")] = '\0';
		if (strncmp(buf, ".SH", 3) == 0) {
			in = strcmp(buf, ".SH EXAMPLES") == 0;
			scripting = strcmp(buf, ".SH SCRIPTING") == 0;
			continue;
		}
		char text[4096];
		if (scripting && strcmp(buf, ".EX") == 0) {
			block = true;
			block_line = lineno + 1;
			script_len = 0;
			script[0] = '\0';
			continue;
		}
		if (scripting && block && strcmp(buf, ".EE") == 0) {
			block = false;
			if (strncmp(script, "cprof-attach ", 13) == 0) {
				/* command lines, each an example */
				int k = block_line;
				for (char *l = strtok(script, "\n"); l;
				     l = strtok(NULL, "\n"), k++)
					add_example(l, name, k);
			} else if (script_len > 0) {
				add_script(script, name, block_line);
			}
			continue;
		}
		if (scripting && block) {
			unescape(buf, text, sizeof(text));
			size_t len = strlen(text);
			ck_assert_msg(script_len + len + 2 < sizeof(script),
				      "%s:%d: a script block too long", name,
				      lineno);
			memcpy(script + script_len, text, len);
			script_len += len;
			script[script_len++] = '\n';
			script[script_len] = '\0';
			continue;
		}
		if (!in || buf[0] == '.' || buf[0] == '\0')
			continue;
		unescape(buf, text, sizeof(text));
		add_example(text, name, lineno);
	}
	fclose(f);
}

/* ------------------------------------------------------------ running */

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Run LINE with bash in DIR; if it is an EXAMPLE, unless it launches a
 * command (it has " -- "), runs a script to its end (--batch) or is a
 * pipeline (whose reader a Ctrl-C ends too), end it with SIGINT to its
 * group after INTERRUPT_AFTER_MS.  Returns the wait status; *INTERRUPTED
 * says whether it was.  Its output goes to DIR/.out and DIR/.err.  */
static int run_line(const char *dir, const char *line, bool example,
		    bool *interrupted)
{
	char out[8192], err[8192];
	snprintf(out, sizeof(out), "%s/.out", dir);
	snprintf(err, sizeof(err), "%s/.err", dir);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setpgid(0, 0);
		if (chdir(dir) < 0)
			_exit(126);
		int in = open("/dev/null", O_RDONLY);
		int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (in < 0 || o < 0 || e < 0)
			_exit(126);
		dup2(in, 0);
		dup2(o, 1);
		dup2(e, 2);
		/* SIGINT must reach the example as Ctrl-C would.  */
		signal(SIGINT, SIG_DFL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execlp("bash", "bash", "-o", "pipefail", "-c", line, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);
	*interrupted = false;
	double start = now_ms();
	int status;
	for (;;) {
		pid_t got = waitpid(pid, &status, WNOHANG);
		if (got == pid)
			return status;
		double elapsed = now_ms() - start;
		if (example && !*interrupted &&
		    elapsed >= INTERRUPT_AFTER_MS &&
		    !strstr(line, " -- ") && !strstr(line, "--batch") &&
		    !strchr(line, '|')) {
			kill(-pid, SIGINT);
			*interrupted = true;
			start = now_ms();
		} else if (elapsed >= FINISH_TIMEOUT_MS) {
			kill(-pid, SIGKILL);
			waitpid(pid, &status, 0);
			ck_abort_msg("\"%s\" did not end%s", line,
				     *interrupted ? " after SIGINT" : "");
		}
		usleep(20000);
	}
}

/* What the last line run in DIR wrote to its stderr (DIR/.err), or
 * NULL; the caller frees it.  */
static char *line_stderr(const char *dir)
{
	char path[8192];
	snprintf(path, sizeof(path), "%s/.err", dir);
	return tu_read_file(path);
}

/* The file NAME in DIR is there and looks like its name says.  */
static void check_output(const char *dir, const struct example *ex,
			 const char *name)
{
	const char *line = ex->line ? ex->line : "the script";
	char path[8192];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	char *text = tu_read_file(path);
	ck_assert_msg(text != NULL && text[0] != '\0',
		      "%s: \"%s\" did not write %s", ex->where, line, name);
	size_t len = strlen(name);
#define ENDS(s) (len >= strlen(s) && strcmp(name + len - strlen(s), s) == 0)
	if (ENDS(".svg"))
		ck_assert_msg(strstr(text, "<svg") != NULL, "%s: %s is no SVG",
			      ex->where, name);
	else if (ENDS(".json"))
		ck_assert_msg(text[strspn(text, " \n")] == '{' ||
				      text[strspn(text, " \n")] == '[',
			      "%s: %s is no JSON", ex->where, name);
	else if (ENDS(".gz"))
		ck_assert_msg((unsigned char)text[0] == 0x1f &&
				      (unsigned char)text[1] == 0x8b,
			      "%s: %s is not gzip'd", ex->where, name);
	else if (ENDS(".folded"))
		ck_assert_msg(strchr(text, ';') != NULL || strchr(text, ' '),
			      "%s: %s is no folded profile", ex->where, name);
	else if (ENDS(".txt"))
		ck_assert_msg(strstr(text, "allocations") != NULL,
			      "%s: %s is no heap report", ex->where, name);
#undef ENDS
	free(text);
}

/* Every file a script writes (write FILE, a name without variables).  */
static void check_script_outputs(const char *dir, const struct example *ex,
				 const char *script)
{
	char *copy = strdup(script);
	ck_assert_ptr_nonnull(copy);
	for (char *l = strtok(copy, "\n"); l; l = strtok(NULL, "\n")) {
		char name[256];
		l += strspn(l, " \t");
		if (strncmp(l, "write ", 6) == 0 &&
		    sscanf(l + 6, "%255s", name) == 1 && name[0] != '-' &&
		    !strchr(name, '$'))
			check_output(dir, ex, name);
	}
	free(copy);
}

/* The files named by -o in EX's line, or by write in its script (or in
 * the docs/examples script its line runs with -x), are there and look
 * like their names say.  */
static void check_outputs(const char *dir, const struct example *ex)
{
	char name[256];
	if (ex->script) {
		check_script_outputs(dir, ex, ex->script);
		return;
	}
	const char *x = strstr(ex->line, " -x ");
	if (x && sscanf(x + 4, "%255s", name) == 1) {
		char path[8192];
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		char *script = tu_read_file(path);
		ck_assert_msg(script != NULL, "%s: no script %s", ex->where,
			      name);
		check_script_outputs(dir, ex, script);
		free(script);
	}
	const char *o = strstr(ex->line, " -o ");
	if (o && sscanf(o + 4, "%255s", name) == 1)
		check_output(dir, ex, name);
}

/* Does EX start heap tracing: --heap, or heap start in its script (or
 * in the script file its line runs, in DIR)?  */
static bool traces_heap(const char *dir, const struct example *ex)
{
	if (ex->script)
		return strstr(ex->script, "heap start") != NULL;
	if (strstr(ex->line, "--heap"))
		return true;
	const char *x = strstr(ex->line, " -x ");
	char name[256], path[8192];
	if (!x || sscanf(x + 4, "%255s", name) != 1)
		return false;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	char *script = tu_read_file(path);
	bool heap = script && strstr(script, "heap start");
	free(script);
	return heap;
}

/* TEXT with every 4242 replaced by PID, into OUT.  */
static void put_pid(const char *text, const char *pid, char *out, size_t size)
{
	size_t n = 0;
	for (const char *c = text; *c && n + 16 < size;) {
		if (strncmp(c, EXAMPLE_PID, strlen(EXAMPLE_PID)) == 0) {
			n += (size_t)snprintf(out + n, size - n, "%s", pid);
			c += strlen(EXAMPLE_PID);
		} else {
			out[n++] = *c++;
		}
	}
	out[n] = '\0';
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	FILE *in = fopen(from, "r"), *out = fopen(to, "w");
	ck_assert_msg(in && out, "cannot copy %s to %s", from, to);
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		ck_assert_int_eq(fwrite(buf, 1, n, out), n);
	fclose(in);
	ck_assert_int_eq(fclose(out), 0);
	chmod(to, mode);
}

/* Run a preparation command in DIR (bash) to its end (never
 * interrupted: it runs cprof-attach -d 1 three times, over
 * INTERRUPT_AFTER_MS on a slow machine, and a SIGINT that came as one of
 * them started, or in the cp, failed it); it must exit 0.  */
static void prepare(const char *dir, const char *command)
{
	bool interrupted;
	int status = run_line(dir, command, false, &interrupted);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return;
	char *err = line_stderr(dir);
	ck_abort_msg("preparing the examples: \"%s\" failed (status %d); "
		     "stderr: %.1500s", command,
		     WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status),
		     err ? err : "");
}

START_TEST(test_examples)
{
	read_readme(CP_SOURCE_DIR "/README.md");
	size_t readme = nexamples;
	read_man_page(CP_SOURCE_DIR "/docs/cprof-attach.1", "cprof-attach.1");
	size_t attach_page = nexamples - readme;
	read_man_page(CP_SOURCE_DIR "/docs/cprof.1", "cprof.1");
	size_t cprof_page = nexamples - readme - attach_page;
	/* The reader itself can fail: there are this many at least.  */
	ck_assert_msg(readme >= 12 && attach_page >= 5 && cprof_page >= 8,
		      "found %zu README examples, %zu in cprof-attach(1), %zu "
		      "in cprof(1): the examples reader is broken",
		      readme, attach_page, cprof_page);

	const char *dir = tu_temp_dir();
	ck_assert_ptr_nonnull(dir);
	/* The programs the examples attach to.  */
	struct tu_proc *demo = tu_fixture_start("demo", "600", NULL);
	ck_assert_msg(demo != NULL, "cannot start the demo program");
	/* A real program that allocates all the time, for ever.  */
	pid_t allocator = fork();
	ck_assert_int_ge(allocator, 0);
	if (allocator == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execlp("python3", "python3", "-c",
		       "while True:\n    x = [bytes(64) for _ in range(100)]\n",
		       (char *)NULL);
		_exit(127);
	}
	char allocator_pid[16];
	snprintf(allocator_pid, sizeof(allocator_pid), "%d", (int)allocator);
	usleep(300000);

	/* Each file's examples run in a directory of their own, with what
	 * they read without making it.  */
	const char *sources[] = {"README.md", "cprof-attach.1", "cprof.1"};
	char dirs[3][2048];
	for (size_t s = 0; s < 3; s++) {
		snprintf(dirs[s], sizeof(dirs[s]), "%s/%s", tu_temp_dir(),
			 sources[s]);
		ck_assert_int_eq(mkdir(dirs[s], 0755), 0);
		char path[8192];
		snprintf(path, sizeof(path), "%s/app", dirs[s]);
		copy_file(CP_BUILD_DIR "/fixtures/heap-pairs", path, 0755);
		char cmd[8192];
		snprintf(cmd, sizeof(cmd),
			 "set -e; head -c 2000000 /dev/urandom > big.tar; "
			 "cp '" CP_SOURCE_DIR "'/docs/examples/*.cprof .; "
			 "'%s/cprof-attach' -q -d 1 -o before.folded %d; "
			 "'%s/cprof-attach' -q -d 1 -o after.folded %d; "
			 "'%s/cprof-attach' -q -d 1 --format raw -o app.raw %d",
			 CP_BUILD_DIR, (int)demo->pid, CP_BUILD_DIR,
			 (int)demo->pid, CP_BUILD_DIR, (int)demo->pid);
		prepare(dirs[s], cmd);
	}

	/* Our programs first on PATH; go tool pprof with a private home and
	 * cache, no network.  */
	char env[8192];
	snprintf(env, sizeof(env), "%s:%s", CP_BUILD_DIR, getenv("PATH"));
	setenv("PATH", env, 1);
	setenv("HOME", dir, 1);
	snprintf(env, sizeof(env), "%s/go", dir);
	setenv("GOPATH", env, 1);
	snprintf(env, sizeof(env), "%s/gocache", dir);
	setenv("GOCACHE", env, 1);
	setenv("GOENV", "off", 1);
	setenv("GOFLAGS", "", 1);
	setenv("GOPROXY", "off", 1);
	setenv("PPROF_TMPDIR", dir, 1);

	for (size_t i = 0; i < nexamples; i++) {
		const struct example *ex = &examples[i];
		const char *exdir = dirs[i < readme ? 0 : i < readme + attach_page ? 1 : 2];
		/* The PID: the allocating program's for the heap examples.  */
		char line[8192];
		const char *pid = traces_heap(exdir, ex) ? allocator_pid
							 : demo->pid_text;
		if (ex->script) {
			/* A script block: into a file of its own, run.  */
			char text[8192], path[8192];
			put_pid(ex->script, pid, text, sizeof(text));
			snprintf(path, sizeof(path), "%s/script-%zu.cprof",
				 exdir, i);
			FILE *f = fopen(path, "w");
			ck_assert_ptr_nonnull(f);
			fputs(text, f);
			ck_assert_int_eq(fclose(f), 0);
			snprintf(line, sizeof(line),
				 "cprof-attach -x script-%zu.cprof --batch", i);
			fprintf(stderr, "example %s: a script:\n%s", ex->where,
				text);
		} else {
			put_pid(ex->line, pid, line, sizeof(line));
		}
		fprintf(stderr, "example %s: %s\n", ex->where, line);
		bool interrupted;
		int status = run_line(exdir, line, true, &interrupted);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			char *err = line_stderr(exdir);
			ck_abort_msg("%s: \"%s\" %s with status %d%s; stderr: "
				     "%.1500s",
				     ex->where, line,
				     WIFEXITED(status) ? "exited" : "was killed",
				     WIFEXITED(status) ? WEXITSTATUS(status)
						       : WTERMSIG(status),
				     interrupted ? " (ended by SIGINT)" : "",
				     err ? err : "");
		}
		check_outputs(exdir, ex);
		/* The targets live on, untraced.  */
		ck_assert_msg(tu_task_tracer(demo->pid, demo->pid) == 0 &&
				      tu_task_tracer(allocator, allocator) == 0 &&
				      waitpid(allocator, NULL, WNOHANG) == 0,
			      "%s: a target is still traced, or died, after \"%s\"",
			      ex->where, line);
	}
	kill(allocator, SIGKILL);
	waitpid(allocator, NULL, 0);
	fprintf(stderr, "ran %zu examples: %zu from README.md, %zu from "
		"cprof-attach(1), %zu from cprof(1)\n",
		nexamples, readme, attach_page, cprof_page);
}
END_TEST

static Suite *examples_suite(void)
{
	Suite *suite = suite_create("examples");
	TCase *tcase = tcase_create("examples");
	tcase_add_checked_fixture(tcase, NULL, tu_cleanup);
	tcase_set_timeout(tcase, 900);
	tcase_add_test(tcase, test_examples);
	suite_add_tcase(suite, tcase);
	return suite;
}

int main(void)
{
	SRunner *runner = srunner_create(examples_suite());
	srunner_run_all(runner, CK_NORMAL);
	int failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
