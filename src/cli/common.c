/* What the command-line programs share (common.h).  */
#include "cli/common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *cli_program = "cprof";
const char *cli_help_command;

void message(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", cli_program);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

void die_usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", cli_program);
	vfprintf(stderr, fmt, ap);
	if (cli_help_command)
		fprintf(stderr, " (see %s %s --help)\n", cli_program,
			cli_help_command);
	else
		fprintf(stderr, " (see %s --help)\n", cli_program);
	va_end(ap);
	exit(EXIT_USAGE);
}

long parse_long(const char *text, const char *what, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno || end == text || *end || v < lo || v > hi)
		die_usage("invalid %s '%s': expected a whole number from %ld to %ld",
			  what, text, lo, hi);
	return v;
}

bool ends_with(const char *text, const char *suffix)
{
	size_t n = strlen(text), m = strlen(suffix);
	return n > m && strcasecmp(text + n - m, suffix) == 0;
}
