/* What the command-line programs share (common.h).  */
#include "cli/common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

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

bool parse_duration_text(const char *text, double *seconds)
{
	char *end;
	errno = 0;
	double v = strtod(text, &end);
	if (end == text || errno || !(v >= 0) || v > 1e7)
		return false;
	if (strcmp(end, "ms") == 0)
		v /= 1000;
	else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
		v *= 60;
	else if (strcmp(end, "h") == 0)
		v *= 3600;
	else if (*end && strcmp(end, "s") != 0)
		return false;
	*seconds = v;
	return true;
}

uint64_t cli_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
