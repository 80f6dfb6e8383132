/* cprof-attach's command language: gdb's, over one session.  A script
 * (-x FILE, -ex COMMAND, standard input, the console) is a sequence of
 * lines; each is a command (attach, sample, bt, dump, heap, break, ...)
 * or part of a block (if/while/define/commands ... end).  Every command
 * is a front end of a session operation (cprof/session.h), the same ones
 * cprof-attach's options drive.  Results go to standard output as text,
 * or with --json (set print json on) one JSON object per command and
 * line; errors go to standard error naming FILE:LINE and the command.
 * The parts: script.c (lines, blocks, variables, the run), script_expr.c
 * (expressions and printf), script_cmds.c (the command table).  */
#ifndef CPROF_CLI_SCRIPT_H
#define CPROF_CLI_SCRIPT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

struct cp_session;
struct options;
struct script;

/* Where lines come from.  */
struct script_reader {
	/* The next line (no newline), or NULL at the end.  PROMPT is
	 * "(cprof) " at the top level and ">" inside a block; an
	 * interactive reader shows it, others ignore it.  The line stays
	 * the reader's until the next call.  */
	char *(*next)(void *arg, const char *prompt);
	void *arg;
	const char *name;   /* for messages: the file's name, "-ex",
			     * "stdin" */
	unsigned line;      /* the number of the line last returned; the
			     * reader counts */
	bool interactive;   /* an error ends the command, not the run */
};

struct script_config {
	/* cprof-attach's options: the defaults of the commands (format,
	 * frequency, depth, --wall, -t, debug directories, quiet) */
	const struct options *options;
	bool json;          /* --json */
	bool batch;         /* --batch */
	/* The first Ctrl-C (SIGINT, SIGTERM, SIGHUP): the command running
	 * ends; the interpreter clears it before the next command.  */
	volatile sig_atomic_t *interrupt;
};

/* An interpreter driving SESSION (borrowed; attached or not).  Returns
 * NULL when out of memory.  */
struct script *script_new(struct cp_session *session,
			  const struct script_config *config);

/* Run the lines of READER until its end or quit; not interactive, the
 * first error (or an interruption) ends the run.  Returns 0 when the
 * last command succeeded, else 1 (gdb's batch rule), or the status quit
 * was given.  */
int script_run(struct script *script, struct script_reader *reader);

/* Run one line, as -ex does (a block opened on it reads its body from
 * READER, may be NULL: then it is an error).  Returns 0 or 1.  */
int script_exec(struct script *script, const char *line,
		struct script_reader *reader);

/* Run the commands of file PATH ("-": standard input), as -x FILE
 * and source do: the first error ends it.  Returns 0 or 1.  */
int script_run_file(struct script *script, const char *path);

/* Serve the session for up to MS milliseconds while the reader waits
 * for input (the console's idle hook, standard input's poll): sampling
 * started with `sample start` takes its ticks, heap tracing serves the
 * allocator's traps, breakpoints' commands run as they are hit, the
 * target's exit is noticed — otherwise a thread calling malloc would
 * wait for the next command.  Returns true when there was something to
 * serve (and MS passed or an event came), false at once when there is
 * nothing (then the caller may block on its input).  */
bool script_idle(struct script *script, unsigned ms);

/* Has quit been run (or the target detached for good in batch mode)?
 * *STATUS (may be NULL) gets quit's exit status.  */
bool script_done(const struct script *script, int *status);

/* The session the script drives (attach and detach change what it
 * holds, not the object).  */
struct cp_session *script_session(struct script *script);

/* Tab completion: call FN with each word that completes TEXT, the word
 * that begins at byte START of LINE: command names for the first word
 * (and after "help"), subcommand names (info, set, heap, sample,
 * thread), function names of the target after break, tbreak, profile
 * and bt.  FN returns false to stop.  */
void script_complete(struct script *script, const char *line, size_t start,
		     const char *text, bool (*fn)(void *arg, const char *word),
		     void *arg);

/* Detach (every byte restored) and free.  NULL is fine.  */
void script_free(struct script *script);

/* The console: an interactive "(cprof) " prompt on the terminal with
 * line editing, history (kept in a file) and completion (console.c,
 * GNU readline).  Runs until quit or end of input; returns the exit
 * status as script_run does.  */
int console_run(struct script *script);

#endif
