/* cprof-attach's parts: the options (attach_options.c), the signal
 * handling of the visible and the tracing process (attach_signals.c),
 * and the runs over the session (cprof-attach.c).  */
#ifndef CPROF_CLI_ATTACH_H
#define CPROF_CLI_ATTACH_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common.h"
#include "cprof/capture.h"
#include "cprof/format.h"

/* Launch mode: cprof-attach exits with the command's status, so its own
 * failures have codes of their own, those of env(1), nohup(1) and
 * timeout(1): 125 for a failure of ours once the command ran, 126 for a
 * COMMAND that cannot be run, 127 for one not found.  */
enum { EXIT_LAUNCH_FAILED = 125, EXIT_CANNOT_RUN = 126, EXIT_NOT_FOUND = 127 };


struct options {
	double duration;
	unsigned frequency;
	const char *output;
	bool wall;
	pid_t *tids;
	size_t ntids;
	bool threads;
	size_t max_depth;
	enum cp_unwind_mode unwind_mode;
	bool quiet;
	int verbose;
	bool dump;
	const char *format;
	const char **debuginfo_dirs;
	size_t n_debuginfo_dirs;
	bool no_debuginfod, no_demangle, no_inline, lines;
	unsigned min_samples;
	bool heap;
	int heap_metric;
	unsigned heap_tracers;  /* --heap-tracers, 0: the library's choice */
	int heap_method;        /* --heap-method: enum cp_heap_method */
	size_t top;
	bool top_view;          /* --top without --heap: the live view */
	pid_t pid;
	char **command;
	/* Scripting (attach_script.c): -x FILE and -ex COMMAND in the
	 * order given ('x' or 'e' and the text), --batch, --json.  */
	struct script_item {
		char kind;
		const char *text;
	} *script_items;
	size_t n_script_items;
	bool batch, json;
	bool script;            /* run the command language: a script was
				 * given, or no PID and no COMMAND */
};


/* Parse the command line into O (defaults first); exits 2 with one line
 * on a usage error, 0 after --help or --version.  */
void parse_options(int argc, char **argv, struct options *o);


/* What the options ask of the writers (folded frames, --top,
 * --min-samples); no warn callback.  */
struct cp_format_options attach_format_options(const struct options *o);

struct cp_heap;
struct cp_profile;

/* Fill PROFILE from HEAP: every site that allocated, each with its four
 * values (pprof writes them all), the count weighing the value of
 * --heap-metric.  Returns 0 or -CP_E_NOMEM.  */
int attach_heap_profile(const struct options *o, const struct cp_heap *heap,
			struct cp_profile *profile);

/* ---------------------------------------------------- what it says */

struct cp_sampler_stats;
struct cp_profile;

/* Explain the attach failure RC of PID (TRACER: another tracer's pid);
 * returns the exit code.  */
int explain_attach_error(int rc, pid_t pid, pid_t tracer,
			 const struct options *o);

/* The progress line (the sampler's progress callback).  */
void progress(void *arg, const struct cp_sampler_stats *s);

/* -v: count the system calls of the calling thread from now on, until
 * count_syscalls_stop; summary prints them per stop.  */
void count_syscalls_start(void);
void count_syscalls_stop(void);

/* The summary after a run that wrote PROFILE to PATH.  */
void summary(const struct options *o, const struct cp_sampler_stats *s,
	     const struct cp_profile *profile, const char *path);

/* ------------------------------------------------- start and finish */

struct cp_session;

/* Attach to O->pid or launch O->command in SESSION; returns 0 or the
 * exit code, having said why.  */
int start(const struct options *o, struct cp_session *session);

/* Launch mode, at the very end: wait for the command and return its
 * status as our exit code (or 125 when we failed: EXIT_CODE not 0).
 * Otherwise EXIT_CODE.  */
int finish_launch(const struct options *o, int exit_code);

/* Scripting: run O's -x files and -ex commands over SESSION (attached
 * to O's PID or COMMAND first, when given), then unless --batch the
 * console (a terminal) or the commands on standard input.  Returns the
 * exit status: the last command's, 1 at the first error.  */
int run_script(const struct options *o, struct cp_session *session);

/* ------------------------------------------------------------ signals */

/* The only globals: what the signal handlers need (attach_signals.c).  */
extern volatile sig_atomic_t stop_requested;  /* first SIGINT/TERM/HUP */
extern volatile sig_atomic_t force_requested; /* a second one: stop now */
extern volatile sig_atomic_t target_written;  /* bytes of ours are in the
					       * target (heap mode) */
extern volatile pid_t launched_child;
extern int launched_status;                   /* its wait status, once
					       * collected by the target */
extern volatile sig_atomic_t own_failure;     /* our failure's exit code */
extern pid_t visible_pid;                     /* the process the user sees */
extern bool ignored_at_start[NSIG];

/* SIGINT, SIGTERM and SIGHUP.  */
void stop_signal_set(sigset_t *set);

/* Install HANDLER for the stop signals not ignored at start.  */
void install_handlers(void (*handler)(int, siginfo_t *, void *));

/* The tracing process's handler of the stop signals.  */
void on_stop_signal(int sig, siginfo_t *info, void *context);

/* Fork the tracing process; the process the user started stays behind,
 * passes stop signals on and exits with the tracing process's status
 * (it never returns from here).  */
void start_holder(void);

#endif
