/* Timelines: the sampled stacks of each thread, in time order, turned into
 * function start/end events that a trace viewer draws along time.
 *
 * The engine is streaming: samples go in one at a time (from a raw file
 * or, live, from the sampler) and events come out as they are decided.
 * What it keeps is, per thread, the current stack and for each of its
 * frames the sample where it appeared: memory grows with the depth of the
 * stacks and the number of threads, never with the number of samples.
 *
 * For each thread separately, between two consecutive samples of it:
 *   - the longest common prefix of the previous and the current stack is
 *     found comparing by position (recursion is right: main;foo;foo ->
 *     main;foo ends only the deeper foo);
 *   - every frame of the previous stack beyond it ends, deepest first,
 *     then every frame of the current stack beyond it starts, outermost
 *     first, both at the current sample's timestamp.
 * A frame is a position together with all its ancestors.  With
 * MIN_SAMPLES N > 1 a frame is confirmed only once it has been present in
 * N consecutive samples of its thread: its start carries the timestamp of
 * the Nth of them, and only confirmed frames end.  A frame that disappears
 * loses its streak; a name that comes back (anywhere) starts anew at 1.
 *
 * Writers:
 *   events      one line per event, "KIND TIMESTAMP TID NAME", KIND start
 *               or end, TIMESTAMP as given to cp_timeline_sample(); frames
 *               still open at the end are not closed.
 *   trace       Chrome Trace Event JSON, {"traceEvents":[...]}: "M" events
 *               naming the process and the threads, "B"/"E" events with
 *               "ts" in microseconds (nanosecond decimals when needed);
 *               frames still open at the end are closed once their
 *               thread's last sample has lasted the time it stands for
 *               (below), so viewers draw them with a width.  Starts that
 *               follow ends in one sample are written 1 ns after them
 *               (speedscope pairs a B and an E of one name at one
 *               timestamp as a frame that begins and ends there).
 *   speedscope  speedscope's file format with one "evented" profile per
 *               thread (balanced "O"/"C" events, microseconds), closed
 *               the same way.  Each thread's events are spooled to an
 *               anonymous temporary file and copied out at the end.
 *
 * Weights: a sample stands for WEIGHT units of time (cprof-attach: the
 * ticks of the sampling period it counts for, more than 1 when the thread
 * waited for a CPU before it could be stopped).  Events are placed at the
 * samples' timestamps whatever their weight; the weight decides how long
 * a thread's last sample lasts: WEIGHT * the unit's seconds
 * (cp_timeline_options.period, or from the raw headers).  With the unit
 * unknown it lasts the smallest interval seen between two samples of one
 * thread, or 1 microsecond when there is none.  */
#ifndef CPROF_TIMELINE_H
#define CPROF_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

enum cp_timeline_format {
	CP_TIMELINE_EVENTS,
	CP_TIMELINE_TRACE,
	CP_TIMELINE_SPEEDSCOPE,
};

/* The timeline formats by name (cprof timeline --format), the default
 * first.  */
struct cp_timeline_format_info {
	const char *name;            /* "events", "trace", "speedscope" */
	const char *suffixes[3];     /* picked by the output's name, the
				      * longest match winning;
				      * NULL-terminated */
	const char *description;     /* one line for --help */
	enum cp_timeline_format format;
};

/* The timeline formats, the default first; *N set.  Static.  */
const struct cp_timeline_format_info *cp_timeline_formats(size_t *n);

/* The timeline format named NAME, or NULL.  */
const struct cp_timeline_format_info *cp_timeline_format_find(const char *name);

/* The timeline format the suffix of PATH asks for (any case; the longest
 * matching suffix: ".speedscope.json" before ".json"), or NULL when PATH
 * is NULL or says nothing.  */
const struct cp_timeline_format_info *
cp_timeline_format_for_path(const char *path);

struct cp_timeline_options {
	enum cp_timeline_format format;
	unsigned min_samples;     /* debounce: consecutive samples a frame
				   * needs to start; 0 and 1: no debouncing */
	pid_t pid;                /* the target, for trace "pid"; 0: unknown
				   * (then the first TID seen stands in) */
	const char *process_name; /* trace process_name; NULL: none; copied */
	const char *name;         /* speedscope document name; NULL:
				   * "cprof timeline"; copied */
	double period;            /* seconds one unit of weight stands for
				   * (1/frequency for ticks); 0: unknown
				   * (the raw headers may tell) */
};

struct cp_timeline;

/* A new timeline writing to OUT (borrowed: it must stay open until
 * cp_timeline_finish() or cp_timeline_free()).  Nothing is written yet.
 * Returns 0, -CP_E_INVAL (unknown format), -CP_E_NOMEM or -CP_E_SYS (no
 * temporary file).  Free with cp_timeline_finish() or
 * cp_timeline_free().  */
int cp_timeline_new(const struct cp_timeline_options *options, FILE *out,
		    struct cp_timeline **timeline);

/* Name the target: PID (0: keep the one known) and NAME (NULL: keep;
 * copied), as the raw header "# target PID NAME" does.  Only before the
 * first sample, as the trace's events carry the pid: -CP_E_INVAL after.
 * Returns 0, -CP_E_INVAL or -CP_E_NOMEM.  */
int cp_timeline_process(struct cp_timeline *timeline, pid_t pid,
			const char *name);

/* Name thread TID (NAME copied): a trace "thread_name" event, the name of
 * the thread's speedscope profile ("TID NAME").  May come before or
 * after the thread's samples; a later name replaces an earlier one.
 * Returns 0, -CP_E_NOMEM or -CP_E_SYS (write failed).  */
int cp_timeline_thread_name(struct cp_timeline *timeline, pid_t tid,
			    const char *name);

/* One sample of thread TID taken at TS seconds: NFRAMES frame names
 * FRAMES, root first (NFRAMES may be 0).  TS_TEXT is the timestamp as the
 * input wrote it, echoed by the events writer; NULL: TS printed with
 * "%.6f".  Nothing is kept of TS_TEXT or FRAMES after the call.  Frames
 * are compared by their bytes; a name should not contain ';' or a
 * newline, which the raw and events texts cannot represent.  Returns 0;
 * -CP_E_PARSE when TS is before the thread's previous sample, or
 * -CP_E_INVAL when TS is not a number within +-9e9 seconds (nothing is
 * written then, and the timeline can go on); -CP_E_NOMEM; -CP_E_SYS when
 * writing failed (errno set).  After -CP_E_NOMEM or -CP_E_SYS the output
 * is incomplete: free the timeline.  */
int cp_timeline_sample(struct cp_timeline *timeline, const char *ts_text,
		       double ts, pid_t tid, const char *const *frames,
		       size_t nframes);

/* cp_timeline_sample() for a sample that stands for WEIGHT units of time
 * (cp_timeline_sample() is WEIGHT 1).  -CP_E_INVAL when WEIGHT is 0.  */
int cp_timeline_sample_weighted(struct cp_timeline *timeline,
				const char *ts_text, double ts, pid_t tid,
				uint64_t weight, const char *const *frames,
				size_t nframes);

/* End the output: trace and speedscope close the frames still open (at
 * their thread's last sample) and complete the document; events write
 * nothing more.  Does not close OUT, but flushes it.  Frees TIMELINE,
 * whatever the result.  Returns 0, -CP_E_NOMEM or -CP_E_SYS.  */
int cp_timeline_finish(struct cp_timeline *timeline);

/* Abandon TIMELINE: free it without completing the output (what was
 * written stays written; the caller discards it).  NULL is fine.  */
void cp_timeline_free(struct cp_timeline *timeline);

/* Read raw samples (the text cprof-attach --format raw writes, as
 * include/cprof/rawread.h describes it) from IN with cp_raw_read() and
 * feed them to TIMELINE: "# thread" and "# target" headers name threads
 * and the target, "# frequency" and "# weight-unit" say what a unit of
 * weight stands for (unless cp_timeline_options.period said).  NAME
 * names the input in messages.
 *
 * Returns 0; -CP_E_PARSE with "NAME:LINE: what" in ERROR for a malformed
 * line (those of cp_raw_read(), an empty frame, time going backwards
 * within a thread) and "NAME: no samples ..." when there is no sample
 * line; -CP_E_SYS when reading (or writing) failed, with a message;
 * -CP_E_NOMEM.  ERROR (ERROR_SIZE bytes) may be NULL.  On failure the
 * output is incomplete: discard it and free TIMELINE with
 * cp_timeline_free().  */
int cp_timeline_read_raw(struct cp_timeline *timeline, FILE *in,
			 const char *name, char *error, size_t error_size);

/* Read the raw samples of IN (named NAME in messages) and write their
 * timeline with OPTIONS to OUT (borrowed; flushed, not closed):
 * cp_timeline_new, cp_timeline_read_raw and cp_timeline_finish in one
 * call.  With SPOOL nothing reaches OUT before the timeline is complete:
 * it is written to an anonymous temporary file in $TMPDIR (or /tmp) and
 * copied to OUT at the end, for an OUT that cannot be taken back
 * (standard output, a FIFO, a device).  Returns 0; what
 * cp_timeline_new or cp_timeline_read_raw returned, with the message in
 * ERROR; or, with ERROR empty, -CP_E_SYS (errno set) when writing failed
 * or, with *SPOOL_DIR set to the directory tried (SPOOL_DIR may be
 * NULL), when the temporary file could not be made; -CP_E_NOMEM.  What
 * reached OUT after a failure is incomplete: discard it.  */
int cp_timeline_convert(const struct cp_timeline_options *options, FILE *in,
			const char *name, FILE *out, bool spool,
			const char **spool_dir, char *error,
			size_t error_size);

#endif
