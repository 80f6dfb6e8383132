/* The console's history: readline's list of the lines entered, loaded
 * from a file when the console starts and written back to it when it
 * ends, as gdb keeps ~/.gdb_history (console.h).  */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <readline/history.h>

#include "common.h"
#include "console.h"
#include "cprof/output.h"

/* Lines kept unless $CPROF_HISTSIZE says otherwise.  */
#define HISTORY_SIZE_DEFAULT 1000

/* $CPROF_HISTSIZE, as gdb reads $GDBHISTSIZE: a number of lines; empty
 * or negative: unlimited; anything else: the default.  */
static int history_size(void)
{
	const char *text = getenv("CPROF_HISTSIZE");
	if (!text)
		return HISTORY_SIZE_DEFAULT;
	if (!*text || strcmp(text, "unlimited") == 0)
		return -1;
	char *end;
	errno = 0;
	long n = strtol(text, &end, 10);
	if (errno || end == text || *end)
		return HISTORY_SIZE_DEFAULT;
	if (n < 0)
		return -1;
	return n > INT_MAX ? INT_MAX : (int)n;
}

/* The history file: $CPROF_HISTFILE (empty: none), else
 * $XDG_STATE_HOME/cprof/history, else ~/.cprof_history.  A new string,
 * or NULL.  */
static char *history_path(void)
{
	const char *file = getenv("CPROF_HISTFILE");
	if (file)
		return *file ? strdup(file) : NULL;
	char *path = NULL;
	const char *state = getenv("XDG_STATE_HOME");
	/* The XDG base directory specification: a relative path is
	 * invalid and to be ignored.  */
	if (state && state[0] == '/') {
		if (asprintf(&path, "%s/cprof/history", state) < 0)
			path = NULL;
		return path;
	}
	const char *home = getenv("HOME");
	if (!home || home[0] != '/') {
		struct passwd *pw = getpwuid(getuid());
		home = pw ? pw->pw_dir : NULL;
	}
	if (!home || !*home)
		return NULL;
	if (asprintf(&path, "%s/.cprof_history", home) < 0)
		path = NULL;
	return path;
}

/* May we read PATH?  A symbolic link is followed only when we or root
 * own it (output.h's rule for what we write): cprof runs as root, and a
 * link planted in a directory someone else controls must not make it
 * read a file of root's into the history.  Only a regular file is read
 * (a FIFO would block us; /dev/null holds nothing).  */
static FILE *open_history(const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return NULL;
	if (S_ISLNK(st.st_mode) && st.st_uid != geteuid() && st.st_uid != 0)
		return NULL;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	FILE *f = NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		f = fdopen(fd, "r");
	if (!f)
		close(fd);
	return f;
}

/* Call FN with each line of the history file.  */
static void read_history_lines(const char *path,
			       void (*fn)(void *arg, const char *line),
			       void *arg)
{
	FILE *f = open_history(path);
	if (!f)
		return;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) >= 0) {
		if (n > 0 && line[n - 1] == '\n')
			line[--n] = '\0';
		if (n > 0)
			fn(arg, line);
	}
	free(line);
	fclose(f);
}

/* Is LINE worth a history entry: not blank, and not the last one
 * again (gdb's and bash's ignoredups)?  */
static bool history_wants(const char *line)
{
	if (!line[strspn(line, " \t")])
		return false;
	HIST_ENTRY *last = history_length > 0
				   ? history_get(history_base + history_length - 1)
				   : NULL;
	return !last || strcmp(last->line, line) != 0;
}

static void load_line(void *arg, const char *line)
{
	(void)arg;
	if (history_wants(line))
		add_history(line);
}

/* Lines of the file as it is now, then this run's, for writing.  */
struct history_lines {
	char **v;
	size_t n, cap;
	bool failed;
};

static void keep_line(void *arg, const char *line)
{
	struct history_lines *h = arg;
	if (h->failed)
		return;
	if (h->n > 0 && strcmp(h->v[h->n - 1], line) == 0)
		return;
	if (h->n == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 64;
		char **v = realloc(h->v, cap * sizeof(*v));
		if (!v) {
			h->failed = true;
			return;
		}
		h->v = v;
		h->cap = cap;
	}
	if (!(h->v[h->n] = strdup(line)))
		h->failed = true;
	else
		h->n++;
}

/* Make the directories of PATH that are missing, mode 0700 (the XDG
 * specification's), but only in a directory of our own: root, run with
 * a user's $XDG_STATE_HOME, must not leave a directory of root's in the
 * user's home.  */
static void make_parents(const char *path)
{
	char *dir = strdup(path);
	if (!dir)
		return;
	for (char *p = dir + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		struct stat st;
		if (stat(dir, &st) != 0) {
			char *slash = strrchr(dir, '/');
			*slash = '\0';
			bool ours = stat(slash == dir ? "/" : dir, &st) == 0 &&
				    st.st_uid == geteuid();
			*slash = '/';
			if (!ours || mkdir(dir, 0700) != 0)
				break;
		}
		*p = '/';
	}
	free(dir);
}

/* Write the history file: the lines it holds now (another console may
 * have added some since we read it), then the ones this run added, the
 * last HISTSIZE of them, through cp_output_open (output.h: a temporary
 * renamed into place; a link is followed only when we or root own it;
 * a device is written through, /dev/null takes nothing).  */
static void save_history(const struct console_history *c)
{
	if (!c->path || c->added == 0 || c->size == 0)
		return;
	/* Only a regular file keeps a history: /dev/null is the way to
	 * keep none, and a FIFO would hold the console's end until
	 * someone read it.  */
	struct stat st;
	if (stat(c->path, &st) == 0 && !S_ISREG(st.st_mode))
		return;
	if (getenv("CPROF_HISTFILE") == NULL)
		make_parents(c->path);
	struct history_lines h = {0};
	read_history_lines(c->path, keep_line, &h);
	int ours = c->added < history_length ? c->added : history_length;
	for (int i = history_length - ours; i < history_length; i++) {
		HIST_ENTRY *e = history_get(history_base + i);
		if (e)
			keep_line(&h, e->line);
	}
	size_t first = 0;
	if (c->size > 0 && h.n > (size_t)c->size)
		first = h.n - (size_t)c->size;
	bool is_new = lstat(c->path, &st) != 0 && errno == ENOENT;
	char error[PATH_MAX + 256];
	struct cp_output *out = NULL;
	if (h.failed) {
		message("history not saved in %s: out of memory", c->path);
	} else if (cp_output_open(c->path, &out, error, sizeof(error)) <
		   0) {
		message("history not saved: %s", error);
	} else {
		FILE *f = cp_output_stream(out);
		/* A new history file is the user's alone (a replaced one
		 * keeps its bits).  */
		if (is_new && cp_output_kind(out) == CP_OUTPUT_REPLACE)
			fchmod(fileno(f), 0600);
		for (size_t i = first; i < h.n; i++)
			fprintf(f, "%s\n", h.v[i]);
		if (cp_output_commit(out) < 0)
			message("history not saved in %s: %s", c->path,
				strerror(errno));
	}
	for (size_t i = 0; i < h.n; i++)
		free(h.v[i]);
	free(h.v);
}

void console_history_open(struct console_history *h)
{
	h->size = history_size();
	h->path = history_path();
	h->added = 0;
	using_history();
	if (h->size >= 0)
		stifle_history(h->size);
	if (h->path && h->size != 0)
		read_history_lines(h->path, load_line, NULL);
}

void console_history_add(struct console_history *h, const char *line)
{
	if (h->size != 0 && history_wants(line)) {
		add_history(line);
		h->added++;
	}
}

void console_history_close(struct console_history *h)
{
	save_history(h);
	clear_history();
	free(h->path);
	h->path = NULL;
}
