/* The command language's inside, shared by script.c (lines, blocks,
 * variables, output), script_expr.c (expressions, printf) and
 * script_cmds.c (the commands).  */
#ifndef CPROF_CLI_SCRIPT_INT_H
#define CPROF_CLI_SCRIPT_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "script.h"

/* ------------------------------------------------------------ values */

enum value_kind { V_VOID, V_INT, V_DBL, V_STR };

struct value {
	enum value_kind kind;
	int64_t i;
	double d;
	char *s;            /* V_STR: owned */
};

void value_clear(struct value *v);
/* "void", "42", "1.5", the string itself: into BUF.  */
const char *value_text(const struct value *v, char *buf, size_t size);

/* Evaluate expression TEXT (gdb's operators on integers, decimals and
 * strings; $variables, convenience variables, registers of the held
 * thread).  Returns 0, or -1 with the error set (script_error).  */
int expr_eval(struct script *s, const char *text, struct value *out);

/* Is V true (nonzero, non-empty)?  */
bool value_true(const struct value *v);

/* printf "FORMAT", ARG, ...: the text into *OUT (malloc'd).  Returns 0
 * or -1 with the error set.  */
int script_format(struct script *s, const char *args, char **out);

/* The value of $NAME (without the $), looked up in this order:
 * convenience variables, registers of the held thread, user variables.
 * Returns 0 (V_VOID when it has none) or -1 with the error set.  */
int var_get(struct script *s, const char *name, struct value *out);

/* User variable $NAME's value (V_VOID when unset), copied into OUT.
 * Returns 0 or -1.  */
int var_user(struct script *s, const char *name, struct value *out);

/* Set user variable $NAME to V (copied).  Returns 0 or -1.  */
int var_set(struct script *s, const char *name, const struct value *v);

/* ------------------------------------------------------------ bodies */

/* Lines of a block (if, while, define, commands), with where each was.  */
struct body {
	char **lines;
	unsigned *linenos;
	size_t n, cap;
	char *file;
};

void body_free(struct body *b);

/* Append LINE (from line LINENO of its file) to B.  Returns 0 or -1. */
int body_add(struct script *s, struct body *b, const char *line,
	     unsigned lineno);

/* A copy of SRC into DST (empty).  Returns 0 or -1.  */
int body_copy(struct script *s, struct body *dst, const struct body *src);

/* ------------------------------------------------- breakpoints' side */

/* What the interpreter keeps of breakpoint ID beside the session's.  */
struct bp_extra {
	int id;
	struct body commands;   /* commands N ... end */
	bool has_commands;
	char *condition;        /* condition N EXPR */
	uint64_t ignore;        /* ignore N COUNT: hits still to ignore */
	uint64_t hits;          /* hits reported (condition true, not
				 * ignored) */
	/* where it is, kept for the hit of a temporary breakpoint (the
	 * session has deleted it by then) */
	char function[256];
	char file[256];
	unsigned line;
	bool temporary;
};

/* ------------------------------------------------------- the script */

struct definition {
	char *name;
	struct body body;
};

struct var {
	char *name;
	struct value v;
};

enum last_data { LAST_NONE, LAST_SAMPLES, LAST_HEAP };

struct script {
	struct cp_session *session;
	struct script_config cfg;
	bool json;
	bool done;
	int quit_status;
	/* where the command running came from, for messages */
	const char *file;
	unsigned line;
	char command[64];
	char error[1024];
	bool error_set;
	/* variables and definitions */
	struct var *vars;
	size_t nvars, vars_cap;
	struct definition *defs;
	size_t ndefs, defs_cap;
	int depth;              /* nesting of sourced files and defines */
	int loop_control;       /* 1: loop_break, 2: loop_continue */
	/* breakpoints */
	struct bp_extra *bps;
	size_t nbps, bps_cap;
	int bpnum;              /* $bpnum: the last breakpoint set */
	uint64_t last_hits;     /* $_hits */
	bool in_commands;       /* running a breakpoint's commands */
	bool resume_wait;       /* `continue` in them */
	/* the target */
	int64_t exitcode;       /* $_exitcode; INT64_MIN: void */
	int exitsignal;         /* $_exitsignal; 0: void */
	char *program;          /* file PROG */
	bool sampling;           /* sample start or profile is on */
	bool heap_filled;        /* the last heap trace's profile is made */
	enum last_data last;    /* what `write` writes by default */
	pid_t sample_tids[64];  /* sample -t TID...: the threads sampled */
	size_t nsample_tids;
	bool heap_on;
	/* JSON output: each command's fields, collected then printed as
	 * one line; a stack for commands run by commands.  */
	struct outbuf {
		char name[64];  /* the command, "" for an event */
		FILE *f;
		char *buf;
		size_t len;
		int level;
		bool first[16];
	} out[32];
	int nout;
	bool event_pushed;
};

/* Set the error of the command running.  Returns -1.  */
int script_error(struct script *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Text output (not in JSON mode): to standard output.  */
void out_text(struct script *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* JSON fields of the command running (nothing in text mode).  KEY is
 * NULL inside an array.  */
void out_str(struct script *s, const char *key, const char *v);
void out_int(struct script *s, const char *key, int64_t v);
void out_num(struct script *s, const char *key, double v);
void out_bool(struct script *s, const char *key, bool v);
void out_null(struct script *s, const char *key);
void out_open(struct script *s, const char *key, char bracket);
void out_close(struct script *s, char bracket);
/* An event line of its own ({"event": NAME, ...}): begun here, its
 * fields with out_*, ended with out_event_end.  */
void out_event(struct script *s, const char *name);
void out_event_end(struct script *s);

/* Run the lines of BODY (file:line as recorded).  Returns 0 or -1.  */
int run_body(struct script *s, const struct body *body);

/* Read a block's lines from R until its "end" (or "else" when
 * ELSE_ENDS, *AT_ELSE set then) into B.  Returns 0 or -1.  */
int read_block(struct script *s, struct script_reader *r, const char *what,
	       struct body *b, bool else_ends, bool *at_else);

/* Run the commands of file PATH ("-": standard input) as source
 * does.  Returns 0 or -1 with the error set.  */
int script_source(struct script *s, const char *path);

/* Run one line.  Returns 0 or -1 (the error said).  */
int exec_line(struct script *s, const char *line, struct script_reader *r);

/* The breakpoint side of ID, created when missing (NULL: out of
 * memory).  */
struct bp_extra *bp_extra(struct script *s, int id, bool create);
void bp_extra_drop(struct script *s, int id);

/* Split ARGS into at most MAX words in place, at blanks outside
 * "quotes"; KEEP_QUOTES: the quotes (and backslashes) stay in the word,
 * as gdb passes $argN text on; else they go.  Returns the count.  */
int split_words(char *args, char **argv, int max, bool keep_quotes);

/* ---------------------------------------------------------- commands */

struct command {
	const char *name;
	const char *alias;      /* another name, or NULL */
	/* Runs with the rest of the line (variables expanded unless RAW).
	 * Returns 0 or -1 with the error set.  */
	int (*run)(struct script *s, char *args, struct script_reader *r);
	bool raw;               /* ARGS unexpanded (expressions, text) */
	bool holds;             /* needs the thread held at a breakpoint
				 * (bt of the held thread, printf of its
				 * registers): others let it go first */
	const char *usage;      /* one line: "sample [-F HZ] ... for DURATION" */
	const char *summary;    /* one line for help */
	const char *help;       /* the rest, for help COMMAND */
};

/* The table, NULL-terminated; and a lookup by name or alias.  */
extern const struct command script_commands[];
const struct command *command_find(const char *name);

/* The subcommands a command takes (info, set, heap, sample, thread),
 * NULL-terminated, or NULL.  */
const char *const *command_subcommands(const char *name);

/* Wait (the `wait` and `continue` commands): until a breakpoint's hit
 * was handled, the deadline (0: none), an interruption or the target's
 * exit.  Returns 0 or -1.  */
int script_wait(struct script *s, uint64_t until_ns, const char *why);

#endif
