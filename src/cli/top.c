/* cprof-attach's live view: the hottest functions of a running target,
 * redrawn every refresh interval, like perf top and py-spy top.
 *
 * The session samples on this thread in short steps; between steps the
 * keyboard is read, and at each refresh the profile of the interval is
 * taken (cp_session_take_profile: no tick is lost) and folded into two
 * tables of per-thread, per-function counts: everything since the start
 * and the last interval.  The screen is drawn from those tables with the
 * thread filter and the sort key of the moment; the window profiles
 * themselves are freed once folded, so memory grows with the functions
 * and threads seen, not with time.
 *
 * Pause freezes the display, not the sampling (py-spy's choice): the
 * intervals taken while paused are held apart and join the totals when
 * the display goes on, so no tick is lost and nothing on screen moves.
 *
 * Here: sampling, the screen, the keys, the terminal and job control;
 * the tables and their folding are top_data.c.  */
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <curses.h>

#include "cprof/error.h"
#include "cprof/profile.h"
#include "cprof/sampler.h"
#include "cprof/session.h"
#include "cprof/target.h"

#include "common.h"
#include "top_int.h"

/* How long a sampling step lasts at most: the delay of a key press.  */
#define STEP_NS 100000000ull

/* Take the interval sampled since the last take and fold it in.  */
static int take_window(struct top *top)
{
	struct cp_profile *window = cp_session_take_profile(top->session);
	if (!window)
		return -CP_E_NOMEM;
	uint64_t now = cli_now_ns();
	int rc = top_add_window(top, window,
				(double)(now - top->window_start_ns) / 1e9);
	cp_profile_free(window);
	top->window_start_ns = now;
	top->stats = *cp_session_sample_stats(top->session);
	return rc;
}


/* -------------------------------------------------------------- screen */

/* Text at row Y, cut to the screen's width.  */
static void put_line(int y, int attr, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void put_line(int y, int attr, const char *fmt, ...)
{
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (attr)
		attron(attr);
	mvaddnstr(y, 0, text, COLS);
	if (attr) {
		/* A bar across the whole width.  */
		for (int x = (int)strlen(text); x < COLS; x++)
			mvaddch(y, x, ' ');
		attroff(attr);
	}
}

/* Rows of the table that fit on the screen.  */
static size_t table_lines(void)
{
	return LINES > 5 ? (size_t)(LINES - 5) : 1;
}

static const char keys_line[] =
	"q quit  p pause  s/t/n sort self/total/name  </> thread  T tid  "
	"0 all  a all/last  ? help";

static const char *const help_text[] = {
	"cprof top: the functions the target's threads are in",
	"",
	"  SELF%   samples with the function running (the leaf of the stack)",
	"  TOTAL%  samples with the function anywhere on the stack (once a",
	"          stack, recursion included); of the thread shown, or all",
	"",
	"  q, Ctrl-C       quit (the target runs on, detached)",
	"  p, space        pause the display (sampling goes on; what comes",
	"                  meanwhile joins the totals when it goes on)",
	"  s, t, n         sort by self, total, name",
	"  >, Tab / <      next / previous thread; 0: all threads",
	"  T               type a thread id (Enter shows it, Esc cancels)",
	"  a               everything since the start / the last interval",
	"  Up, Down, PgUp, PgDn, Home, End   scroll",
	"  ?               this help (any key closes it)",
	NULL,
};

static void draw(struct top *top)
{
	erase();
	uint64_t now = cli_now_ns();
	double elapsed = (double)(now - top->start_ns) / 1e9;
	const struct cp_sampler_stats *s = &top->stats;
	double taken = s->ticks_scheduled
			       ? 100.0 * (double)(s->ticks_scheduled -
						  s->ticks_missed) /
					 (double)s->ticks_scheduled
			       : 100.0;
	double rate = top->newest_seconds > 0
			      ? (double)top->newest.samples / top->newest_seconds
			      : 0;
	put_line(0, A_BOLD,
		 "cprof top  %s  pid %d (%s)  %zu thread%s  %.0f samples/s  "
		 "ticks taken %.1f%%  elapsed %.0fs",
		 top->exited   ? "exited (q quits)"
		 : top->paused ? "paused"
			       : "running",
		 (int)top->pid, top->target, s->threads_now,
		 s->threads_now == 1 ? "" : "s", rate, taken, elapsed);
	if (top->help) {
		for (int i = 0; help_text[i] && i + 2 < LINES; i++)
			put_line(i + 2, 0, "%s", help_text[i]);
		refresh();
		return;
	}
	uint64_t samples = 0;
	if (top_make_rows(top, &samples) < 0) {
		put_line(2, 0, "out of memory");
		refresh();
		return;
	}
	char filter[64];
	if (top->shown_tid)
		snprintf(filter, sizeof(filter), "thread %d %s",
			 (int)top->shown_tid,
			 top_thread_name(top, top->shown_tid));
	else
		snprintf(filter, sizeof(filter), "all threads (%zu)",
			 top->nthreads);
	static const char *const sort_names[] = {
		[SORT_SELF] = "self", [SORT_TOTAL] = "total",
		[SORT_NAME] = "name"};
	put_line(1, 0, "%s  %s  %" PRIu64 " samples  sort: %s", filter,
		 top->accumulated ? "since the start" : "last interval",
		 samples, sort_names[top->sort]);
	/* The module's column when there is room for it.  */
	bool modules = COLS >= 100;
	int name_width = COLS - 36 - (modules ? 24 : 0);
	if (name_width < 8)
		name_width = 8;
	put_line(2, A_REVERSE, "%7s  %7s  %7s  %7s  %-*s %s",
		 top->sort == SORT_SELF ? "*SELF%" : "SELF%",
		 top->sort == SORT_TOTAL ? "*TOTAL%" : "TOTAL%", "SELF",
		 "TOTAL", name_width,
		 top->sort == SORT_NAME ? "*FUNCTION" : "FUNCTION",
		 modules ? "MODULE" : "");
	size_t lines = table_lines();
	if (top->scroll + lines > top->nrows)
		top->scroll = top->nrows > lines ? top->nrows - lines : 0;
	for (size_t i = 0; i < lines && top->scroll + i < top->nrows; i++) {
		const struct row *r = &top->rows[top->scroll + i];
		const struct function *f = &top->functions[r->function];
		double d = samples ? (double)samples : 1;
		put_line(3 + (int)i, 0,
			 "%6.2f%%  %6.2f%%  %7" PRIu64 "  %7" PRIu64 "  %-*.*s %s",
			 100.0 * (double)r->self / d,
			 100.0 * (double)r->total / d, r->self, r->total,
			 name_width, name_width, f->name,
			 modules ? f->module : "");
	}
	if (top->nrows == 0)
		put_line(3, 0, "%s", top->exited ? "no samples"
						 : "waiting for samples...");
	if (top->typing)
		put_line(LINES - 1, A_REVERSE,
			 "thread id: %s_  (Enter: show it, Esc: cancel)",
			 top->tid_text);
	else
		put_line(LINES - 1, A_REVERSE, "%s", keys_line);
	refresh();
}

/* Act on key CH.  Returns false when it asks to quit.  */
/* A key while a thread id is typed (T).  */
static void type_tid(struct top *top, int ch)
{
	size_t len = strlen(top->tid_text);
	if (ch >= '0' && ch <= '9' && len + 1 < sizeof(top->tid_text)) {
		top->tid_text[len] = (char)ch;
		top->tid_text[len + 1] = '\0';
	} else if ((ch == KEY_BACKSPACE || ch == 127 || ch == '\b') &&
		   len > 0) {
		top->tid_text[len - 1] = '\0';
	} else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
		/* A thread with no samples yet shows an empty table.  */
		long tid = strtol(top->tid_text, NULL, 10);
		if (tid > 0)
			top->shown_tid = (pid_t)tid;
		top->scroll = 0;
		top->typing = false;
	} else if (ch == 27 || ch == 7) { /* Esc, Ctrl-G */
		top->typing = false;
	}
}

static bool key(struct top *top, int ch)
{
	size_t page = table_lines();
	if (top->typing && ch != KEY_RESIZE) {
		type_tid(top, ch);
		return true;
	}
	if (top->help && ch != KEY_RESIZE) {
		top->help = false;
		return ch != 'q' && ch != 'Q';
	}
	switch (ch) {
	case 'q':
	case 'Q':
		return false;
	case 'p':
	case 'P':
	case ' ':
		if (top->exited)
			break;
		if (top->paused) {
			if (top_resume(top) < 0)
				return false;
		} else {
			top->paused = true;
		}
		break;
	case 's':
		top->sort = SORT_SELF;
		break;
	case 't':
		top->sort = SORT_TOTAL;
		break;
	case 'n':
		top->sort = SORT_NAME;
		break;
	case '>':
	case '\t':
		top_cycle_thread(top, 1);
		break;
	case '<':
	case KEY_BTAB:
		top_cycle_thread(top, -1);
		break;
	case '0':
		top->shown_tid = 0;
		top->scroll = 0;
		break;
	case 'T':
		top->typing = true;
		top->tid_text[0] = '\0';
		break;
	case 'a':
		top->accumulated = !top->accumulated;
		break;
	case '?':
	case 'h':
		top->help = true;
		break;
	case KEY_UP:
	case 'k':
		if (top->scroll > 0)
			top->scroll--;
		break;
	case KEY_DOWN:
	case 'j':
		top->scroll++;
		break;
	case KEY_PPAGE:
		top->scroll = top->scroll > page ? top->scroll - page : 0;
		break;
	case KEY_NPAGE:
		top->scroll += page;
		break;
	case KEY_HOME:
		top->scroll = 0;
		break;
	case KEY_END:
		top->scroll = top->nrows;
		break;
	default:
		break;
	}
	return true;
}

/* ----------------------------------------------------------- terminal */

/* What a forced exit puts back (top_terminal_restore, from a signal
 * handler): the terminal's modes and the strings that leave the
 * alternate screen and show the cursor again.  */
static volatile sig_atomic_t terminal_taken;
static struct termios terminal_modes;
static char terminal_reset[128];

/* Job control: Ctrl-Z (SIGTSTP), or a background view touching the
 * terminal (SIGTTIN, SIGTTOU).  Stopping where the signal comes could
 * leave a thread of the target held for its sample (or on its way to a
 * stop asked for) until fg; so the handler only notes the signal, and
 * the view stops sampling first (suspend), then itself.  Signals
 * ignored at the start stay ignored (ncurses installs its own handler
 * only where the action is the default, so it leaves ours alone).  */
static const int job_signals[] = {SIGTSTP, SIGTTIN, SIGTTOU};
static struct sigaction job_before[3];
static volatile sig_atomic_t suspend_signal;

static void on_job_signal(int sig)
{
	suspend_signal = sig;
}

static void catch_job_signals(bool on)
{
	for (size_t i = 0; i < 3; i++) {
		if (!on) {
			sigaction(job_signals[i], &job_before[i], NULL);
			continue;
		}
		sigaction(job_signals[i], NULL, &job_before[i]);
		if (job_before[i].sa_handler != SIG_DFL)
			continue;
		struct sigaction sa = {.sa_handler = on_job_signal};
		sigemptyset(&sa.sa_mask);
		sigaction(job_signals[i], &sa, NULL);
	}
}

static void keep_string(const char *cap)
{
	char *value = tigetstr(cap);
	if (!value || value == (char *)-1)
		return;
	size_t used = strlen(terminal_reset);
	if (used + strlen(value) < sizeof(terminal_reset))
		strcat(terminal_reset, value);
}

void top_terminal_restore(void)
{
	if (!terminal_taken)
		return;
	terminal_taken = 0;
	/* Async-signal-safe only: tcsetattr and write.  */
	tcsetattr(STDIN_FILENO, TCSANOW, &terminal_modes);
	size_t len = strlen(terminal_reset);
	const char *p = terminal_reset;
	while (len > 0) {
		ssize_t n = write(STDOUT_FILENO, p, len);
		if (n <= 0)
			break;
		p += n;
		len -= (size_t)n;
	}
}

bool top_has_terminal(void)
{
	return isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
}

static SCREEN *take_terminal(void)
{
	if (tcgetattr(STDIN_FILENO, &terminal_modes) < 0)
		return NULL;
	catch_job_signals(true);
	SCREEN *screen = newterm(NULL, stdout, stdin);
	if (!screen) {
		catch_job_signals(false);
		return NULL;
	}
	terminal_reset[0] = '\0';
	keep_string("cnorm");
	keep_string("sgr0");
	keep_string("rmcup");
	terminal_taken = 1;
	cbreak(); /* keys one by one; Ctrl-C is still SIGINT */
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	set_escdelay(100); /* Esc alone, not the start of a key's sequence */
	nodelay(stdscr, TRUE);
	curs_set(0);
	return screen;
}

/* endwin, also from the background: the rest of a stopped job (Ctrl-Z)
 * stops at once and the shell may have the terminal already, and a
 * background process that sets the terminal's modes gets SIGTTOU (which
 * ncurses would retry for ever), so it is ignored for the moment.  */
static void leave_screen(void)
{
	struct sigaction ignore = {.sa_handler = SIG_IGN}, ttou;
	sigemptyset(&ignore.sa_mask);
	sigaction(SIGTTOU, &ignore, &ttou);
	endwin();
	sigaction(SIGTTOU, &ttou, NULL);
}

static void give_terminal_back(SCREEN *screen)
{
	leave_screen();
	delscreen(screen);
	terminal_taken = 0;
	/* endwin restores the modes ncurses found; ours are the same.  */
	struct sigaction ignore = {.sa_handler = SIG_IGN}, ttou;
	sigemptyset(&ignore.sa_mask);
	sigaction(SIGTTOU, &ignore, &ttou);
	tcsetattr(STDIN_FILENO, TCSANOW, &terminal_modes);
	sigaction(SIGTTOU, &ttou, NULL);
	catch_job_signals(false);
}

/* ---------------------------------------------------------------- run */

static bool stop_asked(const struct top_config *c)
{
	return (c->stop && *c->stop) || (c->force && *c->force);
}

/* Collect the stops the sampler asked for that had not landed when it
 * stopped (its next step would have: they are left to the target's
 * next poll), resuming each thread: no thread may wait for us while we
 * are stopped, or between two runs of the console.  A thread that does
 * not stop within a second (in a D-state sleep) is left to the next
 * poll.  */
static void settle(struct cp_session *session)
{
	struct cp_target *target = cp_session_target(session);
	for (int i = 0; target && i < 1000 && !cp_target_exited(target) &&
			cp_target_interrupts_outstanding(target) > 0;
	     i++) {
		cp_target_poll(target);
		if (cp_target_interrupts_outstanding(target) == 0)
			break;
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
	}
}

/* Stop as job control asked (suspend_signal), with no thread of the
 * target held: sampling stops first (the stops it asked for served),
 * the terminal is given back, then the signal's default action; after
 * fg, sampling starts again and the view is redrawn.  Returns 0 or a
 * -CP_E_* code.  */
static int suspend(struct top *top)
{
	int sig = suspend_signal;
	suspend_signal = 0;
	bool sampling = !top->exited;
	int rc = sampling ? cp_session_sample_stop(top->session) : 0;
	if (sampling)
		settle(top->session);
	if (rc == 0 && sampling)
		rc = take_window(top);
	if (rc < 0)
		return rc;
	leave_screen();
	struct sigaction dfl = {.sa_handler = SIG_DFL}, ours;
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, &ours);
	raise(sig);
	/* Continued (fg, or SIGCONT).  */
	sigaction(sig, &ours, NULL);
	suspend_signal = 0;
	if (sampling)
		rc = cp_session_sample_start(top->session,
					     &top->sample_options);
	if (sampling &&
	    (rc == -CP_E_GONE || cp_session_target_exited(top->session))) {
		top->exited = true;
		nodelay(stdscr, FALSE);
		timeout(200);
		rc = top_resume(top);
	}
	top->window_start_ns = cli_now_ns();
	clearok(curscr, TRUE);
	draw(top);
	return rc;
}

/* The view, once sampling is on: until q, a stop, the duration.
 * Returns 0 or a -CP_E_* code.  */
static int view(struct top *top)
{
	const struct top_config *c = top->config;
	uint64_t refresh_ns = (uint64_t)((c->refresh > 0 ? c->refresh : 1.0) *
					 1e9);
	uint64_t end_ns = c->duration > 0
				  ? top->start_ns + (uint64_t)(c->duration * 1e9)
				  : 0;
	uint64_t next_refresh = top->start_ns + refresh_ns;
	draw(top);
	for (;;) {
		if (stop_asked(c))
			return 0;
		if (suspend_signal) {
			int rc = suspend(top);
			if (rc < 0)
				return rc;
		}
		uint64_t now = cli_now_ns();
		if (!top->exited) {
			uint64_t until = now + STEP_NS;
			if (next_refresh < until)
				until = next_refresh;
			if (end_ns && end_ns < until)
				until = end_ns;
			enum cp_session_end end = CP_SESSION_DEADLINE;
			int rc = cp_session_sample_run(top->session, until,
						       c->stop, &end);
			now = cli_now_ns();
			bool refresh = rc == 0 && (end == CP_SESSION_EXITED ||
						   now >= next_refresh);
			if (refresh)
				rc = take_window(top);
			if (rc < 0)
				return rc;
			if (end == CP_SESSION_EXITED) {
				top->exited = true;
				rc = top_resume(top);
				if (rc < 0)
					return rc;
				/* Wait for keys only now.  */
				nodelay(stdscr, FALSE);
				timeout(200);
				draw(top);
			} else if (refresh) {
				next_refresh += refresh_ns;
				if (next_refresh <= now)
					next_refresh = now + refresh_ns;
				draw(top);
			}
		}
		if (end_ns && now >= end_ns)
			return 0;
		/* Every key typed meanwhile.  With the target gone, getch
		 * waits (a while: the stop flag is looked at again).  */
		int ch;
		bool changed = false;
		while ((ch = getch()) != ERR) {
			if (!key(top, ch))
				return 0;
			changed = true;
			if (top->exited)
				break;
		}
		if (changed)
			draw(top);
	}
}

int top_run(struct cp_session *session, const struct top_config *config)
{
	if (!top_has_terminal()) {
		message("the live view (--top) needs a terminal: standard "
			"input and output are not one");
		return EXIT_USAGE;
	}
	const struct cp_profile *before = cp_session_profile(session);
	if (before && cp_profile_total(before) > 0) {
		message("the session's profile holds %" PRIu64 " samples: "
			"write or reset them before the live view",
			cp_profile_total(before));
		return EXIT_USAGE;
	}
	struct top top = {
		.session = session,
		.config = config,
		.pid = cp_session_pid(session),
		.accumulated = true,
	};
	top.sample_options = (struct cp_sampler_options){
		.frequency = config->frequency ? config->frequency : 99,
		.wall = config->wall,
		.max_depth = config->max_depth ? config->max_depth : 512,
	};
	int rc = cp_session_sample_start(session, &top.sample_options);
	if (rc < 0) {
		message("cannot sample process %d: %s", (int)top.pid,
			cp_strerror(rc));
		return EXIT_RUNTIME;
	}
	/* Sampling is on: the session's profile is described.  */
	struct cp_profile *profile = cp_session_profile(session);
	if (profile) {
		/* The program's name: the basename of the command's first
		 * word.  */
		const char *command = cp_profile_meta(profile)->target;
		size_t len = strcspn(command, " ");
		const char *base = command;
		for (size_t i = 0; i < len; i++)
			if (command[i] == '/')
				base = command + i + 1;
		snprintf(top.target, sizeof(top.target), "%.*s",
			 (int)(len - (size_t)(base - command)), base);
	}
	top.start_ns = top.window_start_ns = cli_now_ns();
	SCREEN *screen = take_terminal();
	if (!screen) {
		cp_session_sample_stop(session);
		cp_profile_free(cp_session_take_profile(session));
		message("cannot use the terminal (TERM=%s) for the live view",
			getenv("TERM") ? getenv("TERM") : "");
		return EXIT_RUNTIME;
	}
	rc = view(&top);
	give_terminal_back(screen);
	int stop_rc = cp_session_sample_stop(session);
	settle(session);
	/* The session is left with no samples, as it was found.  */
	cp_profile_free(cp_session_take_profile(session));
	int exit_code = EXIT_OK;
	if (rc < 0 || stop_rc < 0) {
		message("the live view failed: %s",
			cp_strerror(rc < 0 ? rc : stop_rc));
		exit_code = EXIT_RUNTIME;
	} else if (top.exited) {
		message("process %d exited", (int)top.pid);
	}
	top_free(&top);
	return exit_code;
}
