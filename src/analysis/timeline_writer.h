/* The timeline engine's writers (internal to libcprof).  The engine
 * (src/analysis/timeline.c) decides which frames start and end when; a
 * writer (src/formats/timeline_*.c) turns those events into one output
 * format.  Adding a format is a writer file and a line of the engine's
 * format table.
 *
 * The calls, for one timeline: open; begin (once, before the first
 * sample's events, for a writer that has it); then per sample its events
 * in order, ends before starts, and flush; thread_named whenever a thread
 * is named after begin; at the end, for a writer that closes_frames, the
 * ends of every frame still open (at its thread's end) and flush, then
 * finish; close always (also after a failure).  */
#ifndef CPROF_TIMELINE_WRITER_H
#define CPROF_TIMELINE_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "cprof/timeline.h"

/* What a writer sees of a thread.  */
struct cp_timeline_thread_info {
	pid_t tid;
	const char *name;      /* NULL: not named */
	uint64_t samples;      /* finish: samples seen */
	double first_ts;       /* finish: its first sample's time */
	double end_ts;         /* finish: when its last sample ends */
	void *data;            /* the writer's, per thread (NULL at first) */
};

struct cp_timeline_writer {
	/* Starts that follow ends in one sample are given 1 ns after them
	 * (trace: a viewer pairs a B and an E of one name at one time).  */
	bool starts_after_ends;
	/* Frames still open at the end are closed at their thread's end.  */
	bool closes_frames;
	/* A new writer to OUT (borrowed) into *STATE.  Returns 0 or
	 * -CP_E_NOMEM.  */
	int (*open)(const struct cp_timeline_options *options, FILE *out,
		    void **state);
	/* Free STATE (and nothing of the threads: thread_free did).  */
	void (*close)(void *state);
	/* Free what the writer keeps for thread T (T->data); optional.  */
	void (*thread_free)(void *state, struct cp_timeline_thread_info *t);
	/* The first sample is coming: the head of the document.  PID is
	 * settled (the target's, or the first thread's); THREADS (N) are
	 * the threads known so far.  Optional.  */
	void (*begin)(void *state, pid_t pid, const char *process_name,
		      struct cp_timeline_thread_info *const *threads, size_t n);
	/* Thread T was named after begin.  Optional.  */
	void (*thread_named)(void *state, struct cp_timeline_thread_info *t);
	/* Frame NAME (LEN bytes) of thread T starts (START) or ends at TS
	 * (TS_TEXT as the input wrote it).  NEW_TIME: the first event at
	 * this thread and time.  SLOT is the frame's: what a writer stores
	 * at its start is there at its end.  Returns 0, -CP_E_NOMEM or
	 * -CP_E_SYS (errno set).  */
	int (*event)(void *state, struct cp_timeline_thread_info *t, bool start,
		     const char *name, size_t len, uint32_t *slot,
		     const char *ts_text, double ts, bool new_time);
	/* The events of a sample are all in: write them out.  */
	void (*flush)(void *state);
	/* True when writing for thread T (NULL: the writer's own) failed
	 * somewhere the engine cannot see (a spool).  Optional.  */
	bool (*failed)(void *state, const struct cp_timeline_thread_info *t);
	/* Complete the document: THREADS (N) with their samples, first and
	 * end times.  Returns 0, -CP_E_NOMEM or -CP_E_SYS.  Optional.  */
	int (*finish)(void *state, struct cp_timeline_thread_info *const *threads,
		      size_t n);
	/* The directory a temporary file could not be made in, or "" (for
	 * the message of a -CP_E_SYS).  Optional.  */
	const char *(*spool_dir)(void *state);
};

extern const struct cp_timeline_writer cp_timeline_writer_events;
extern const struct cp_timeline_writer cp_timeline_writer_trace;
extern const struct cp_timeline_writer cp_timeline_writer_speedscope;

#endif
