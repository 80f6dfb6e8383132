/* The console's parts (console.c: the prompt, keys, completion, signals;
 * console_history.c: the history and its file).  */
#ifndef CPROF_CLI_CONSOLE_H
#define CPROF_CLI_CONSOLE_H

#include <stdbool.h>

/* Readline's history of one console run and the file it is kept in.  */
struct console_history {
	char *path;     /* the history file; NULL: none */
	int size;       /* lines kept; -1: unlimited; 0: no history */
	int added;      /* lines added in this run */
};

/* Find the history file ($CPROF_HISTFILE, else
 * $XDG_STATE_HOME/cprof/history, else ~/.cprof_history) and its size
 * ($CPROF_HISTSIZE), and load its lines into readline's history.  */
void console_history_open(struct console_history *h);

/* Add LINE, as entered, unless it is blank or the last line again.  */
void console_history_add(struct console_history *h, const char *line);

/* Write the lines added to the history file (after those other consoles
 * added meanwhile), empty readline's history and free H's.  */
void console_history_close(struct console_history *h);

#endif
