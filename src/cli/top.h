/* cprof-attach's live view (`cprof-attach --top PID`, the console's
 * `top`): a full-screen table of the hottest functions, redrawn every
 * refresh interval from the session's profile windows, with ncurses.  */
#ifndef CPROF_CLI_TOP_H
#define CPROF_CLI_TOP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct cp_session;

struct top_config {
	unsigned frequency;      /* samples per second per thread; 0: 99 */
	bool wall;               /* sample sleeping threads too */
	size_t max_depth;        /* frames kept per stack; 0: 512 */
	double duration;         /* seconds; <= 0: until q or Ctrl-C */
	double refresh;          /* seconds between redraws; <= 0: 1 */
	/* Set by a signal handler (a Ctrl-C ends the view as q does): the
	 * tracing process's stop_requested.  May be NULL.  */
	volatile sig_atomic_t *stop;
	/* Set by a second Ctrl-C: end at once.  May be NULL.  */
	volatile sig_atomic_t *force;
};

/* Is there a terminal to draw on (standard input and output)?  */
bool top_has_terminal(void);

/* Sample SESSION's target (attached, neither sampling nor tracing the
 * heap) and show the live view until q, Ctrl-C (*CONFIG->stop), the
 * duration, or the target's exit and then q.  The view starts empty:
 * the session's profile must hold no samples (write or reset them
 * first; refused otherwise), and the session is left with an empty
 * profile, sampling stopped, the target still attached.  The terminal
 * is given back as it was on every way out, a forced exit from the
 * signal handler included (on_stop_signal calls top_terminal_restore).
 * Returns the exit code: 0, 1 (a failure, said on standard error), 2
 * (no terminal, or samples in the session: said on standard error).  */
int top_run(struct cp_session *session, const struct top_config *config);

/* Give the terminal back as it was before the view took it, from a
 * signal handler (async-signal-safe: tcsetattr and write); nothing when
 * the view is not on.  */
void top_terminal_restore(void);

#endif
