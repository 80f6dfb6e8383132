/* cprof-attach's scripting mode: -x FILE and -ex COMMAND in the order
 * given, then (without --batch) the console on a terminal or the
 * commands on standard input, all over one session (script.h).  */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach.h"
#include "cprof/session.h"
#include "script.h"

/* Lines of standard input (not a terminal, or the console left out).  */
struct stdin_reader {
	struct script_reader r;
	char *line;
	size_t cap;
	bool prompt;
};

static char *stdin_next(void *arg, const char *prompt)
{
	struct stdin_reader *sr = arg;
	if (sr->prompt) {
		fputs(prompt, stdout);
		fflush(stdout);
	}
	for (;;) {
		ssize_t n = getline(&sr->line, &sr->cap, stdin);
		if (n < 0) {
			if (errno == EINTR && !ferror(stdin)) {
				clearerr(stdin);
				continue;
			}
			return NULL;
		}
		if (n > 0 && sr->line[n - 1] == '\n')
			sr->line[n - 1] = '\0';
		sr->r.line++;
		return sr->line;
	}
}

static int run_stdin(struct script *s, bool prompt)
{
	struct stdin_reader sr = {
		.r = {.next = stdin_next, .name = "stdin",
		      .interactive = prompt},
		.prompt = prompt,
	};
	sr.r.arg = &sr;
	int status = script_run(s, &sr.r);
	if (prompt && !script_done(s, NULL))
		fputs("quit\n", stdout);
	free(sr.line);
	return status;
}

/* Without GNU readline's console (console.c): a plain prompt.  */
__attribute__((weak)) int console_run(struct script *s)
{
	return run_stdin(s, true);
}

/* -ex COMMAND as a reader of one line (a block opened on it has no
 * more lines: an error, as in gdb).  */
struct one_reader {
	struct script_reader r;
	bool given;
};

static char *one_next(void *arg, const char *prompt)
{
	(void)arg;
	(void)prompt;
	return NULL;
}

int run_script(const struct options *o, struct cp_session *session)
{
	/* Our bytes may be in the target from the first break or heap
	 * start: a second Ctrl-C restores them before it ends us.  */
	target_written = 1;
	if (o->pid || o->command) {
		int rc = start(o, session);
		if (rc != 0)
			return rc;
	}
	struct script_config config = {
		.options = o,
		.json = o->json,
		.batch = o->batch,
		.interrupt = &stop_requested,
	};
	struct script *s = script_new(session, &config);
	if (!s) {
		message("out of memory");
		return EXIT_RUNTIME;
	}
	int status = 0;
	unsigned nex = 0;
	for (size_t i = 0; i < o->n_script_items && !script_done(s, NULL); i++) {
		const struct script_item *it = &o->script_items[i];
		stop_requested = 0;
		if (it->kind == 'x') {
			status = script_run_file(s, it->text);
		} else {
			struct one_reader one = {
				.r = {.next = one_next, .name = "-ex",
				      .line = ++nex},
			};
			one.r.arg = &one;
			status = script_exec(s, it->text, &one.r);
		}
		if (status != 0)
			break;
	}
	int quit_status;
	if (script_done(s, &quit_status)) {
		status = quit_status;
	} else if (status == 0 && !o->batch) {
		if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO))
			status = console_run(s);
		else
			status = run_stdin(s, false);
	}
	script_free(s);
	return status;
}
