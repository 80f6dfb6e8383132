/* Reading raw samples: the text cprof-attach --format raw writes, one
 * timestamped stack per line, streamed to callbacks one sample at a
 * time (nothing of a sample is kept after its call: memory grows with
 * the longest line, never with the input).  Lines:
 *
 *   SECONDS TID FRAME;FRAME;...;FRAME
 *   SECONDS TID WEIGHT FRAME;FRAME;...;FRAME     (after "# fields", below)
 *
 * SECONDS a decimal number (the time of the sample), TID a decimal thread
 * id, WEIGHT a whole number from 1 (the sample's weight), the frames
 * root first; the stack may be empty ("1.5 42").  Fields are separated
 * by runs of spaces or tabs; the stack is the rest of the line, so
 * frames may contain spaces.  Lines beginning with '#' are headers:
 *   "# thread TID NAME"    names a thread;
 *   "# target PID [NAME]"  names the target;
 *   "# frequency HZ"       a unit of weight is 1/HZ seconds;
 *   "# weight-unit UNIT"   "samples" (the default: 1/HZ seconds each),
 *                          "nanoseconds", or another: unknown;
 *   "# fields SECONDS TID WEIGHT STACK" the sample lines that follow have
 *                          a WEIGHT ("# fields SECONDS TID STACK": not,
 *                          the default, as files from before weights);
 * other headers and blank lines are skipped.  "\r\n" line ends and a
 * UTF-8 byte-order mark are accepted.  */
#ifndef CPROF_RAWREAD_H
#define CPROF_RAWREAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Timestamps are within +-this many seconds (nanoseconds in 64 bits).  */
#define CP_RAW_MAX_SECONDS 9.0e9

struct cp_raw_reader;

/* One sample line, borrowed for the duration of the callback.  */
struct cp_raw_sample {
	double seconds;           /* the timestamp */
	const char *seconds_text; /* the timestamp as written */
	pid_t tid;
	uint64_t weight;          /* 1 when the lines have no WEIGHT */
	const char *stack;        /* the frames as written, joined by ';',
				   * root first ("" when empty): not yet
				   * checked, see cp_raw_frames() */
	size_t stack_len;
	struct cp_raw_reader *reader;
};

enum cp_raw_weight_unit {
	CP_RAW_WEIGHT_SAMPLES,     /* periods of the sampling frequency */
	CP_RAW_WEIGHT_NANOSECONDS,
	CP_RAW_WEIGHT_UNKNOWN,
};

/* What the reader calls.  Each returns 0 to go on or a -CP_E_* code to
 * stop the reading (cp_raw_read() returns it).  Only SAMPLE is
 * required; a NULL header callback skips its header.  */
struct cp_raw_callbacks {
	int (*sample)(void *arg, const struct cp_raw_sample *sample);
	/* "# thread TID NAME": NAME not empty.  */
	int (*thread)(void *arg, pid_t tid, const char *name);
	/* "# target PID [NAME]": NAME NULL when absent.  */
	int (*target)(void *arg, pid_t pid, const char *name);
	/* "# frequency HZ": HZ from 1e-6 to 1e9 (others are skipped).  */
	int (*frequency)(void *arg, double hz);
	/* "# weight-unit UNIT".  */
	int (*weight_unit)(void *arg, enum cp_raw_weight_unit unit);
};

/* The frames of SAMPLE from byte AT of its stack on, checked: none
 * empty or blank, no NUL byte.  AT is 0 or just after a ';'; FIRST is
 * the number of frames before AT (for messages).  *FRAMES (not
 * NUL-terminated: *LENS gives their lengths) and *LENS are borrowed until
 * the callback returns; *N is set to their number (0 for an empty
 * stack).  A consumer that has checked a prefix of the stack before (a
 * thread's previous line shared it) splits only the rest.  Returns 0;
 * -CP_E_PARSE when a frame is malformed (the reader has the message:
 * return the code from the callback) or -CP_E_NOMEM.  */
int cp_raw_frames(const struct cp_raw_sample *sample, size_t first,
		  size_t at, const char *const **frames, const size_t **lens,
		  size_t *n);

/* Say why the sample callback fails, as "NAME:LINE: " and the message
 * (the line of the sample at hand): the callback then returns its
 * -CP_E_* code.  */
void cp_raw_fail(struct cp_raw_reader *reader, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Read the raw samples of IN, calling CALLBACKS with ARG.  NAME names the
 * input in messages.  Returns 0; -CP_E_PARSE with "NAME:LINE: what" in
 * ERROR for a malformed line (a missing field, a timestamp that is not a
 * number within +-CP_RAW_MAX_SECONDS, a bad TID or WEIGHT, a "# fields"
 * header naming other fields, binary data, gzip data) and
 * "NAME: no samples ..." when there is no sample line; -CP_E_SYS when
 * reading failed, with a message; -CP_E_NOMEM; or what a callback
 * returned, with its message (cp_raw_fail) or "NAME:LINE: " and the
 * code's cp_strerror().  ERROR (ERROR_SIZE bytes) may be NULL.  */
int cp_raw_read(FILE *in, const char *name,
		const struct cp_raw_callbacks *callbacks, void *arg,
		char *error, size_t error_size);

#endif
