/* What the command-line programs (cprof, cprof-attach) share: their exit
 * codes, messages on standard error prefixed with the program's name,
 * usage errors that point at the help, and parsing of numbers given as
 * options.  Not part of the library: only programs print.  */
#ifndef CPROF_CLI_COMMON_H
#define CPROF_CLI_COMMON_H

#include <stdbool.h>
#include <stdint.h>

/* The documented exit codes of both programs.  */
enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* The program's name for messages ("cprof"); set by main before the
 * first message.  */
extern const char *cli_program;

/* The command whose help a usage error points at ("report": "see cprof
 * report --help"); NULL: the program's own help.  */
extern const char *cli_help_command;

/* "PROGRAM: " and the message, a newline, on standard error.  */
void message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A usage error: the message and " (see PROGRAM [COMMAND] --help)" on
 * standard error, then exit with EXIT_USAGE.  */
void die_usage(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

/* TEXT as a whole decimal number from LO to HI; anything else is a usage
 * error naming WHAT ("invalid WHAT 'TEXT': expected a whole number from
 * LO to HI").  */
long parse_long(const char *text, const char *what, long lo, long hi);

/* Does TEXT end with SUFFIX (ignoring case), with something before it? */
bool ends_with(const char *text, const char *suffix);

/* CLOCK_MONOTONIC now, in ns (async-signal-safe: clock_gettime).  */
uint64_t cli_now_ns(void);

/* A duration: a decimal number of seconds, or one with a unit: 500ms,
 * 2s, 1m (also min, h).  Returns true and *SECONDS (>= 0).  */
bool parse_duration_text(const char *text, double *seconds);

#endif
