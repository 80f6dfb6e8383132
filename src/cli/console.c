/* The console: cprof-attach's interactive "(cprof) " prompt on a
 * terminal, with GNU readline's line editing, a history kept in a file
 * and completion of commands and function names (script_complete).
 *
 * Readline is driven through its callback interface, as Python's
 * readline module does: we wait in poll(2) for a key or a signal, so a
 * Ctrl-C at the prompt is ours to handle (a fresh prompt) and readline
 * installs no signal handler of its own (rl_catch_signals 0): while a
 * command runs, the stop signals keep the meaning the tracing process
 * gives them (attach_signals.c: the first ends the command, a second
 * one cprof-attach).  */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <readline/readline.h>

#include "attach.h"
#include "console.h"
#include "script.h"

/* While a line is typed, the session is served (script_idle) in slices
 * of this many milliseconds, keys read between them.  */
#define IDLE_SLICE_MS 50

/* Words the completion of one word offers (script_complete's).  */
struct words {
	char **v;
	size_t n, cap, next;
};

struct console {
	struct script_reader r;
	struct script *script;
	char *line;             /* the line last read; readline's malloc */
	bool got_line;          /* the line handler was called */
	const char *prompt;     /* the prompt shown */
	struct console_history history;
	struct words words;
	bool redraw_at_key;     /* continued after Ctrl-Z: draw the line
				 * again before the next key */
	int capture_fd;         /* memfd: what serving the session at the
				 * prompt printed; -1: printed as it comes */
};

/* Readline's callbacks take no argument: the console running.  */
static struct console *console;

/* What the signal handler tells the prompt; a byte on WAKE_PIPE wakes
 * its poll (the handler may run on another thread of ours).  */
static volatile sig_atomic_t at_prompt;          /* waiting for a line */
static volatile sig_atomic_t prompt_interrupted; /* Ctrl-C there */
static volatile sig_atomic_t resized;            /* SIGWINCH there */
static volatile sig_atomic_t suspend_asked;      /* Ctrl-Z there */
static volatile sig_atomic_t continued;          /* SIGCONT there */
static volatile sig_atomic_t ending_signal;      /* SIGTERM or SIGHUP */
static int wake_pipe[2] = {-1, -1};

/* The actions ours replaced, to chain to and to restore; whether ours
 * is in.  SIGINT, SIGTERM and SIGHUP: while the console runs; SIGWINCH,
 * SIGTSTP and SIGCONT: at the prompt only (a command's own, top's
 * ncurses, keeps the defaults).  */
static struct sigaction saved_actions[NSIG];
static bool installed[NSIG];

static void wake(void)
{
	if (wake_pipe[1] >= 0) {
		char byte = 1;
		ssize_t n = write(wake_pipe[1], &byte, 1);
		(void)n; /* a full pipe wakes the poll already */
	}
}

/* The console's signal handler.  A Ctrl-C at the prompt is the
 * prompt's: nothing runs that it could end.  Otherwise a stop signal
 * goes on to the handler it replaced (on_stop_signal): a command
 * running ends, and a SIGTERM or SIGHUP also ends the console.  */
static void on_console_signal(int sig, siginfo_t *info, void *context)
{
	int saved_errno = errno;
	if (sig == SIGWINCH || sig == SIGTSTP || sig == SIGCONT) {
		if (sig == SIGWINCH)
			resized = 1;
		else if (sig == SIGTSTP)
			suspend_asked = 1;
		else
			continued = 1;
		wake();
	} else if (sig == SIGINT && at_prompt) {
		prompt_interrupted = 1;
		wake();
	} else {
		if (sig != SIGINT) {
			ending_signal = sig;
			wake();
		}
		const struct sigaction *old = &saved_actions[sig];
		if (old->sa_flags & SA_SIGINFO) {
			old->sa_sigaction(sig, info, context);
		} else if (old->sa_handler == SIG_DFL) {
			/* what it would have done without us */
			signal(sig, SIG_DFL);
			raise(sig);
		} else if (old->sa_handler != SIG_IGN) {
			old->sa_handler(sig);
		}
	}
	errno = saved_errno;
}

/* Put our handler in front of SIG's, unless SIG is ignored (a stop
 * signal ignored at start stays ignored; so does a SIGTSTP that a shell
 * without job control left ignored).  */
static void install(int sig)
{
	struct sigaction *old = &saved_actions[sig];
	installed[sig] = false;
	if (sigaction(sig, NULL, old) != 0 ||
	    (!(old->sa_flags & SA_SIGINFO) && old->sa_handler == SIG_IGN &&
	     sig != SIGWINCH && sig != SIGCONT))
		return;
	struct sigaction sa = *old;
	sa.sa_sigaction = on_console_signal;
	/* No SA_RESTART, as the handler we chain to: waits end early.  */
	sa.sa_flags = (old->sa_flags & ~(SA_RESETHAND | SA_RESTART)) |
		      SA_SIGINFO;
	installed[sig] = sigaction(sig, &sa, NULL) == 0;
}

static void uninstall(int sig)
{
	if (installed[sig])
		sigaction(sig, &saved_actions[sig], NULL);
	installed[sig] = false;
}

static void drain_wake_pipe(void)
{
	char buf[64];
	while (read(wake_pipe[0], buf, sizeof(buf)) > 0)
		;
}

/* ------------------------------------------------------ completion */

static void words_clear(struct words *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->v[i]);
	w->n = w->next = 0;
}

static bool collect_word(void *arg, const char *word)
{
	struct words *w = arg;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 32;
		char **v = realloc(w->v, cap * sizeof(*v));
		if (!v)
			return false;
		w->v = v;
		w->cap = cap;
	}
	if (!(w->v[w->n] = strdup(word)))
		return false;
	w->n++;
	return true;
}

/* Readline's generator: the collected words one by one (readline frees
 * them).  */
static char *next_word(const char *text, int state)
{
	(void)text;
	struct words *w = &console->words;
	if (state == 0)
		w->next = 0;
	if (w->next >= w->n)
		return NULL;
	char *word = w->v[w->next];
	w->v[w->next++] = NULL;
	return word;
}

/* Do the arguments of the command on LINE name files?  source FILE,
 * write FILE, file PROGRAM, run ARG..., shell COMMAND (also "!"): their
 * words complete as file names when the interpreter offers nothing.  */
static bool takes_file_names(const char *line, size_t start)
{
	static const char *const commands[] = {"source", "write", "file",
					       "run", "shell", NULL};
	const char *p = line + strspn(line, " \t");
	if (*p == '!')
		return (size_t)(p - line) < start;
	size_t len = strcspn(p, " \t");
	if ((size_t)(p - line) + len >= start)
		return false; /* the command's own name */
	for (size_t i = 0; commands[i]; i++)
		if (strlen(commands[i]) == len &&
		    strncmp(p, commands[i], len) == 0)
			return true;
	return false;
}

/* Readline's completer: the interpreter's words for TEXT, the word from
 * START to END of the line; file names only where a command takes them
 * (a command name or a function is never completed as a file).  */
static char **complete(const char *text, int start, int end)
{
	rl_attempted_completion_over = 1;
	struct words *w = &console->words;
	words_clear(w);
	char *line = strndup(rl_line_buffer, (size_t)end);
	if (!line)
		return NULL;
	script_complete(console->script, line, (size_t)start, text,
			collect_word, w);
	if (w->n == 0) {
		if (takes_file_names(line, (size_t)start))
			rl_attempted_completion_over = 0;
		free(line);
		return NULL;
	}
	free(line);
	return rl_completion_matches(text, next_word);
}

/* ---------------------------------------------------------- prompt */

static void on_line(char *line)
{
	console->line = line;
	console->got_line = true;
	/* Now, or readline shows the prompt again at once.  */
	rl_callback_handler_remove();
}

/* Ctrl-C at the prompt: the line is dropped and a new prompt shown, as
 * bash does.  */
static void new_prompt(struct console *c)
{
	rl_point = rl_end;
	rl_redisplay();
	fputs("^C", rl_outstream);
	rl_free_line_state();
	rl_callback_sigcleanup();
	rl_callback_handler_remove();
	fputc('\n', rl_outstream);
	fflush(rl_outstream);
	rl_callback_handler_install(c->prompt, on_line);
}

/* Copy the N bytes at the start of FD to standard output.  */
static void copy_out(int fd, off_t n)
{
	char buf[8192];
	off_t at = 0;
	bool newline = true;
	while (at < n) {
		ssize_t got = pread(fd, buf, sizeof(buf), at);
		if (got <= 0)
			break;
		at += got;
		newline = buf[got - 1] == '\n';
		for (ssize_t done = 0; done < got;) {
			ssize_t put = write(STDOUT_FILENO, buf + done,
					    (size_t)(got - done));
			if (put < 0 && errno == EINTR)
				continue;
			if (put <= 0)
				return;
			done += put;
		}
	}
	if (!newline) {
		ssize_t put = write(STDOUT_FILENO, "\n", 1);
		(void)put;
	}
}

/* Serve the session while the user types (breakpoints' commands run,
 * sampling started with sample start takes its ticks, heap tracing
 * serves the allocator).  What that prints is caught (standard output
 * and error into C->capture_fd) and shown above the prompt, which is
 * drawn again with the line being typed: never mixed into it.  Returns
 * script_idle's answer: false when there is nothing to serve.  */
static bool serve(struct console *c)
{
	if (c->capture_fd < 0)
		return script_idle(c->script, IDLE_SLICE_MS);
	fflush(stdout);
	fflush(stderr);
	int saved_out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
	int saved_err = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	if (saved_out < 0 || saved_err < 0 ||
	    dup2(c->capture_fd, STDOUT_FILENO) < 0 ||
	    dup2(c->capture_fd, STDERR_FILENO) < 0) {
		if (saved_out >= 0)
			close(saved_out);
		if (saved_err >= 0)
			close(saved_err);
		return script_idle(c->script, IDLE_SLICE_MS);
	}
	bool served = script_idle(c->script, IDLE_SLICE_MS);
	fflush(stdout);
	fflush(stderr);
	dup2(saved_out, STDOUT_FILENO);
	dup2(saved_err, STDERR_FILENO);
	close(saved_out);
	close(saved_err);
	off_t n = lseek(c->capture_fd, 0, SEEK_END);
	if (n > 0) {
		rl_clear_visible_line();
		fflush(rl_outstream);
		copy_out(c->capture_fd, n);
		rl_on_new_line();
		rl_forced_update_display();
	}
	if (n != 0 && (ftruncate(c->capture_fd, 0) != 0 ||
		       lseek(c->capture_fd, 0, SEEK_SET) != 0)) {
		/* it cannot be emptied: print as it comes from now on */
		close(c->capture_fd);
		c->capture_fd = -1;
	}
	return served;
}

/* Draw the prompt and the line again where readline drew them (or, when
 * something else wrote over them, on the line the cursor is on).  */
static void redraw(void)
{
	rl_clear_visible_line();
	rl_on_new_line();
	rl_forced_update_display();
}

/* Put the cursor at the start of a line of its own before the prompt:
 * a command's output that did not end with a newline (echo, printf)
 * stays on its line instead of being drawn over (zsh's way: a line's
 * width of blanks wraps to the next line only from a column other than
 * the first; then a carriage return).  */
static void start_line(void)
{
	int rows = 0, cols = 0;
	rl_get_screen_size(&rows, &cols);
	if (cols <= 0 || cols > 4096)
		return;
	fprintf(rl_outstream, "%*s\r", cols, "");
	fflush(rl_outstream);
}

/* The reader's next: a line from the terminal.  */
static char *console_next(void *arg, const char *prompt)
{
	struct console *c = arg;
	free(c->line);
	c->line = NULL;
	fflush(stdout);
	fflush(stderr);
	/* A second interruption during the command ended cprof-attach's
	 * work (attach_signals.c); SIGTERM and SIGHUP end it too.  */
	if (force_requested || ending_signal)
		return NULL;
	bool top = strcmp(prompt, ">") != 0;
	c->prompt = prompt;
	c->got_line = false;
	c->redraw_at_key = false;
	drain_wake_pipe();
	prompt_interrupted = 0;
	resized = suspend_asked = continued = 0;
	install(SIGWINCH);
	install(SIGTSTP);
	install(SIGCONT);
	at_prompt = 1;
	bool ended = false;
	/* The terminal may have changed size while a command ran (our
	 * SIGWINCH handler is in only at the prompt).  */
	rl_reset_screen_size();
	start_line();
	rl_callback_handler_install(prompt, on_line);
	while (!c->got_line) {
		struct pollfd fds[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
					{.fd = wake_pipe[0], .events = POLLIN}};
		/* Keys first; the session while none is there; blocked
		 * in poll when it needs nothing.  */
		int n = poll(fds, 2, 0);
		if (n == 0 && !ending_signal && !prompt_interrupted &&
		    serve(c)) {
			if (script_done(c->script, NULL)) {
				ended = true; /* quit in a breakpoint's
					       * commands */
				break;
			}
			continue;
		}
		if (n == 0)
			n = poll(fds, 2, -1);
		if (n < 0 && errno != EINTR) {
			ended = true;
			break;
		}
		if (ending_signal || force_requested) {
			ended = true;
			break;
		}
		if (prompt_interrupted) {
			prompt_interrupted = 0;
			drain_wake_pipe();
			new_prompt(c);
			continue;
		}
		if (suspend_asked) {
			/* Ctrl-Z: the terminal as it was, stopped until fg
			 * (unless fg came already: then a stop would stay
			 * until the next SIGCONT).  */
			suspend_asked = 0;
			rl_deprep_terminal();
			fflush(rl_outstream);
			if (!continued)
				raise(SIGSTOP);
		}
		if (continued) {
			/* The shell put its own terminal modes back while
			 * we were stopped: readline's again, the line
			 * drawn again now and at the next key (the shell
			 * may print its "fg" line after it continued us,
			 * over ours).  */
			continued = 0;
			rl_deprep_terminal();
			rl_prep_terminal(1);
			redraw();
			c->redraw_at_key = true;
		}
		if (resized) {
			resized = 0;
			rl_resize_terminal();
		}
		if (n > 0 && (fds[1].revents & POLLIN))
			drain_wake_pipe();
		if (n > 0 && (fds[0].revents & (POLLERR | POLLNVAL))) {
			ended = true;
			break;
		}
		if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP))) {
			if (c->redraw_at_key)
				redraw();
			c->redraw_at_key = false;
			rl_callback_read_char();
		}
	}
	at_prompt = 0;
	uninstall(SIGWINCH);
	uninstall(SIGTSTP);
	uninstall(SIGCONT);
	if (ended) {
		rl_callback_handler_remove();
		fputc('\n', stdout);
		return NULL;
	}
	if (!c->line) {
		/* Ctrl-D: at the top, quit, said as gdb says it; in a
		 * block, the block ends there (the interpreter says it is
		 * missing its end).  */
		fputs(top ? "quit\n" : "\n", stdout);
		return NULL;
	}
	c->r.line++;
	console_history_add(&c->history, c->line);
	return c->line;
}

int console_run(struct script *script)
{
	struct console c = {
		.r = {.next = console_next, .name = "console",
		      .interactive = true},
		.script = script,
		.capture_fd = memfd_create("cprof-console", MFD_CLOEXEC),
	};
	c.r.arg = &c;
	console = &c;

	rl_readline_name = "cprof"; /* for $if cprof in ~/.inputrc */
	rl_instream = stdin;
	rl_outstream = stdout;
	/* LINES and COLUMNS would reach the programs run starts.  */
	rl_change_environment = 0;
	rl_catch_signals = 0;
	rl_catch_sigwinch = 0;
	rl_attempted_completion_function = complete;
	/* Words are separated by blanks only: C++ names (ns::f<int>),
	 * FILE:LINE and $variables are one word.  */
	rl_completer_word_break_characters = " \t\n";
	/* ~/.inputrc is read here, then: lines pasted are run one by one,
	 * as a script's (bracketed paste would make them one line with
	 * newlines in it).  */
	rl_initialize();
	rl_variable_bind("enable-bracketed-paste", "off");
	console_history_open(&c.history);

	if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		wake_pipe[0] = wake_pipe[1] = -1;
		message("cannot start the console: %s", strerror(errno));
		console_history_close(&c.history);
		if (c.capture_fd >= 0)
			close(c.capture_fd);
		return EXIT_RUNTIME;
	}
	install(SIGINT);
	install(SIGTERM);
	install(SIGHUP);

	int status = script_run(script, &c.r);

	uninstall(SIGINT);
	uninstall(SIGTERM);
	uninstall(SIGHUP);
	close(wake_pipe[0]);
	close(wake_pipe[1]);
	wake_pipe[0] = wake_pipe[1] = -1;
	free(c.line);
	if (c.capture_fd >= 0)
		close(c.capture_fd);
	console_history_close(&c.history);
	words_clear(&c.words);
	free(c.words.v);
	console = NULL;
	fflush(stdout);
	return status;
}
