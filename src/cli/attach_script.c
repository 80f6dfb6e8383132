/* cprof-attach's scripting mode: -x FILE and -ex COMMAND in the order
 * given, then (without --batch) the console on a terminal or the
 * commands on standard input, all over one session (script.h).  */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach.h"
#include "cprof/session.h"
#include "script.h"

/* Lines of standard input (not a terminal, or the console left out),
 * read with read(2) into our own buffer so that poll(2) tells the truth
 * about what is left: while no line is there, the session is served
 * (script_idle).  */
struct stdin_reader {
	struct script_reader r;
	struct script *s;
	char *buf;              /* bytes read, not yet returned */
	size_t len, cap;
	char *line;             /* the line returned last */
	bool eof;
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
		char *nl = sr->len ? memchr(sr->buf, '\n', sr->len) : NULL;
		if (nl || (sr->eof && sr->len)) {
			size_t n = nl ? (size_t)(nl - sr->buf) : sr->len;
			free(sr->line);
			sr->line = strndup(sr->buf, n);
			size_t used = nl ? n + 1 : n;
			memmove(sr->buf, sr->buf + used, sr->len - used);
			sr->len -= used;
			if (!sr->line)
				return NULL;
			sr->r.line++;
			return sr->line;
		}
		if (sr->eof)
			return NULL;
		struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
		if (poll(&pfd, 1, 0) == 0 && script_idle(sr->s, 100))
			continue;
		if (sr->cap - sr->len < 4096) {
			size_t cap = sr->cap ? 2 * sr->cap : 8192;
			char *b = realloc(sr->buf, cap);
			if (!b)
				return NULL;
			sr->buf = b;
			sr->cap = cap;
		}
		ssize_t got = read(STDIN_FILENO, sr->buf + sr->len,
				   sr->cap - sr->len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			sr->eof = true;
		else
			sr->len += (size_t)got;
	}
}

static int run_stdin(struct script *s, bool prompt)
{
	struct stdin_reader sr = {
		.r = {.next = stdin_next, .name = "stdin",
		      .interactive = prompt},
		.s = s,
		.prompt = prompt,
	};
	sr.r.arg = &sr;
	int status = script_run(s, &sr.r);
	if (prompt && !script_done(s, NULL))
		fputs("quit\n", stdout);
	free(sr.line);
	free(sr.buf);
	return status;
}

/* Without GNU readline's console (console.c): a plain prompt.  */
__attribute__((weak)) int console_run(struct script *s)
{
	return run_stdin(s, true);
}

/* -ex COMMAND: a line with no more after it (a block opened on it is an
 * error, as in gdb).  */
static char *no_more(void *arg, const char *prompt)
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
		if (it->kind == 'x' && strcmp(it->text, "-") == 0) {
			/* standard input, the session served between lines */
			status = run_stdin(s, false);
		} else if (it->kind == 'x') {
			status = script_run_file(s, it->text);
		} else {
			struct script_reader one = {.next = no_more,
						    .name = "-ex",
						    .line = ++nex};
			status = script_exec(s, it->text, &one);
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
