/* Parsers and readers for /proc files.  */
#include "cprof/procfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cprof/error.h"

int cp_procfs_slurp(const char *path, char **text, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -CP_E_SYS;
	size_t cap = 4096, used = 0;
	char *buf = malloc(cap + 1);
	if (!buf)
		goto fail_nomem;
	for (;;) {
		if (used == cap) {
			char *grown = realloc(buf, 2 * cap + 1);
			if (!grown)
				goto fail_nomem;
			buf = grown;
			cap *= 2;
		}
		ssize_t n = read(fd, buf + used, cap - used);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int saved = errno;
			free(buf);
			close(fd);
			errno = saved;
			return -CP_E_SYS;
		}
		if (n == 0)
			break;
		used += (size_t)n;
	}
	close(fd);
	buf[used] = '\0';
	*text = buf;
	*len = used;
	return 0;
fail_nomem:
	free(buf);
	close(fd);
	errno = ENOMEM;
	return -CP_E_NOMEM;
}

/* Parse an unsigned hex number at *P, advancing it.  */
static bool parse_hex(const char **p, const char *end, uint64_t *out)
{
	uint64_t v = 0;
	const char *s = *p;
	if (s >= end)
		return false;
	const char *start = s;
	for (; s < end; s++) {
		int d;
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			break;
		if (v >> 60)
			return false;   /* more than 64 bits */
		v = (v << 4) | (uint64_t)d;
	}
	if (s == start)
		return false;
	*p = s;
	*out = v;
	return true;
}

static bool parse_dec(const char **p, const char *end, uint64_t *out)
{
	uint64_t v = 0;
	const char *s = *p;
	const char *start = s;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		uint64_t d = (uint64_t)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;   /* more than 64 bits */
		v = v * 10 + d;
	}
	if (s == start)
		return false;
	*p = s;
	*out = v;
	return true;
}

static bool expect(const char **p, const char *end, char c)
{
	if (*p >= end || **p != c)
		return false;
	(*p)++;
	return true;
}

static void skip_spaces(const char **p, const char *end)
{
	while (*p < end && **p == ' ')
		(*p)++;
}

/* One maps line: "start-end perms offset dev:dev inode   path".  The path
 * is everything after the inode and its padding, spaces included.  */
static bool parse_map_line(const char *s, const char *end, struct cp_map *m)
{
	uint64_t dev;
	if (!parse_hex(&s, end, &m->start) || !expect(&s, end, '-') ||
	    !parse_hex(&s, end, &m->end) || !expect(&s, end, ' '))
		return false;
	if (end - s < 5)
		return false;
	m->readable = s[0] == 'r';
	m->writable = s[1] == 'w';
	m->executable = s[2] == 'x';
	s += 4;
	if (!expect(&s, end, ' ') || !parse_hex(&s, end, &m->offset) ||
	    !expect(&s, end, ' ') || !parse_hex(&s, end, &dev) ||
	    !expect(&s, end, ':') || !parse_hex(&s, end, &dev) ||
	    !expect(&s, end, ' ') || !parse_dec(&s, end, &m->inode))
		return false;
	if (m->end < m->start)
		return false;
	skip_spaces(&s, end);
	size_t n = (size_t)(end - s);
	m->path = malloc(n + 1);
	if (!m->path)
		return false;
	memcpy(m->path, s, n);
	m->path[n] = '\0';
	return true;
}

static int compare_maps(const void *a, const void *b)
{
	const struct cp_map *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

int cp_maps_parse(const char *text, size_t len, struct cp_maps **out,
		  size_t *bad_line)
{
	struct cp_maps *maps = calloc(1, sizeof(*maps));
	if (!maps)
		return -CP_E_NOMEM;
	size_t cap = 0, line_no = 0;
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			eol = end;
		line_no++;
		if (eol > p) {
			if (maps->count == cap) {
				cap = cap ? cap * 2 : 64;
				struct cp_map *grown =
					realloc(maps->maps, cap * sizeof(*grown));
				if (!grown) {
					cp_maps_free(maps);
					return -CP_E_NOMEM;
				}
				maps->maps = grown;
			}
			struct cp_map *m = &maps->maps[maps->count];
			memset(m, 0, sizeof(*m));
			if (!parse_map_line(p, eol, m)) {
				free(m->path);
				cp_maps_free(maps);
				if (bad_line)
					*bad_line = line_no;
				return -CP_E_PARSE;
			}
			maps->count++;
		}
		p = eol + 1;
	}
	if (maps->count > 1)
		qsort(maps->maps, maps->count, sizeof(*maps->maps),
		      compare_maps);
	*out = maps;
	return 0;
}

int cp_maps_read(pid_t pid, struct cp_maps **out)
{
	char path[64];
	char *text;
	size_t len;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	int rc = cp_procfs_slurp(path, &text, &len);
	if (rc < 0)
		return errno == ENOENT || errno == ESRCH ? -CP_E_NOPROC : rc;
	rc = cp_maps_parse(text, len, out, NULL);
	free(text);
	return rc;
}

const struct cp_map *cp_maps_find(const struct cp_maps *maps, uint64_t addr)
{
	if (!maps)
		return NULL;
	size_t lo = 0, hi = maps->count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct cp_map *m = &maps->maps[mid];
		if (addr < m->start)
			hi = mid;
		else if (addr >= m->end)
			lo = mid + 1;
		else
			return m;
	}
	return NULL;
}

void cp_maps_free(struct cp_maps *maps)
{
	if (!maps)
		return;
	for (size_t i = 0; i < maps->count; i++)
		free(maps->maps[i].path);
	free(maps->maps);
	free(maps);
}

int cp_task_stat_parse(const char *text, size_t len, struct cp_task_stat *out)
{
	memset(out, 0, sizeof(*out));
	const char *end = text + len;
	const char *p = text;
	uint64_t v;
	if (!parse_dec(&p, end, &v) || !expect(&p, end, ' ') ||
	    !expect(&p, end, '('))
		return -CP_E_PARSE;
	out->tid = (pid_t)v;
	/* The command name is free text: it may hold spaces and parentheses,
	 * so its end is the last ')' of the line.  */
	const char *close = NULL;
	for (const char *q = end; q > p; q--)
		if (q[-1] == ')') {
			close = q - 1;
			break;
		}
	if (!close)
		return -CP_E_PARSE;
	size_t n = (size_t)(close - p);
	if (n >= sizeof(out->comm))
		n = sizeof(out->comm) - 1;
	memcpy(out->comm, p, n);
	out->comm[n] = '\0';
	p = close + 1;
	if (!expect(&p, end, ' ') || p >= end)
		return -CP_E_PARSE;
	out->state = *p++;
	/* Fields after the state: ppid pgrp session tty_nr tpgid flags.  */
	uint64_t fields[6];
	for (int i = 0; i < 6; i++) {
		if (!expect(&p, end, ' '))
			return -CP_E_PARSE;
		bool negative = p < end && *p == '-';
		if (negative)
			p++;
		if (!parse_dec(&p, end, &fields[i]))
			return -CP_E_PARSE;
	}
	out->ppid = (pid_t)fields[0];
	out->flags = (unsigned long)fields[5];
	return 0;
}

int cp_task_stat_read(pid_t pid, pid_t tid, struct cp_task_stat *out)
{
	char path[64];
	char *text;
	size_t len;
	if (tid > 0)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid,
			 (int)tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int rc = cp_procfs_slurp(path, &text, &len);
	if (rc < 0)
		return errno == ENOENT || errno == ESRCH ? -CP_E_NOPROC : rc;
	rc = cp_task_stat_parse(text, len, out);
	free(text);
	return rc;
}

/* TEXT without its one final newline, if any.  */
static const char *line_end(const char *text, size_t len)
{
	const char *end = text + len;
	if (end > text && end[-1] == '\n')
		end--;
	return end;
}

/* " 0xHEX" at *P, advancing it.  */
static bool parse_field_hex(const char **p, const char *end, uint64_t *out)
{
	return expect(p, end, ' ') && expect(p, end, '0') &&
	       expect(p, end, 'x') && parse_hex(p, end, out);
}

int cp_task_syscall_parse(const char *text, size_t len,
			  struct cp_task_syscall *out)
{
	memset(out, 0, sizeof(*out));
	out->nr = -1;
	const char *p = text, *end = line_end(text, len);
	static const char running[] = "running";
	if ((size_t)(end - p) == sizeof(running) - 1 &&
	    memcmp(p, running, sizeof(running) - 1) == 0) {
		out->state = CP_TASK_RUNNING;
		return 0;
	}
	uint64_t nr;
	if (expect(&p, end, '-')) {
		/* Only -1 is written: "not in a system call".  */
		if (!parse_dec(&p, end, &nr) || nr != 1 ||
		    !parse_field_hex(&p, end, &out->sp) ||
		    !parse_field_hex(&p, end, &out->pc) || p != end)
			goto bad;
		out->state = CP_TASK_BLOCKED;
		return 0;
	}
	/* Numbers are small; a huge one is not a system call.  */
	if (!parse_dec(&p, end, &nr) || nr > 0x7fffffff)
		goto bad;
	for (int i = 0; i < 6; i++)
		if (!parse_field_hex(&p, end, &out->args[i]))
			goto bad;
	if (!parse_field_hex(&p, end, &out->sp) ||
	    !parse_field_hex(&p, end, &out->pc) || p != end)
		goto bad;
	out->state = CP_TASK_IN_SYSCALL;
	out->nr = (long)nr;
	return 0;
bad:
	memset(out, 0, sizeof(*out));
	out->nr = -1;
	return -CP_E_PARSE;
}

int cp_task_schedstat_parse(const char *text, size_t len,
			    struct cp_task_schedstat *out)
{
	memset(out, 0, sizeof(*out));
	const char *p = text, *end = line_end(text, len);
	struct cp_task_schedstat s;
	if (!parse_dec(&p, end, &s.run_ns) || !expect(&p, end, ' ') ||
	    !parse_dec(&p, end, &s.wait_ns) || !expect(&p, end, ' ') ||
	    !parse_dec(&p, end, &s.slices) || p != end)
		return -CP_E_PARSE;
	*out = s;
	return 0;
}

/* The value of the "NAME   :   VALUE" line of TEXT that starts with
 * NAME, past its colon and blanks; NULL when there is none.  */
static const char *sched_value(const char *text, const char *end,
			       const char *name)
{
	size_t n = strlen(name);
	for (const char *p = text; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			eol = end;
		if ((size_t)(eol - p) > n && memcmp(p, name, n) == 0 &&
		    (p[n] == ' ' || p[n] == ':')) {
			const char *v = memchr(p, ':', (size_t)(eol - p));
			if (!v)
				return NULL;
			for (v++; v < eol && *v == ' '; v++)
				;
			return v;
		}
		p = eol + 1;
	}
	return NULL;
}

int cp_task_sched_parse(const char *text, size_t len,
			struct cp_task_sched *out)
{
	const char *end = text + len;
	const char *run = sched_value(text, end, "se.sum_exec_runtime");
	const char *vol = sched_value(text, end, "nr_voluntary_switches");
	uint64_t ms, frac, v;
	/* The run time is printed as milliseconds "." six digits of
	 * nanoseconds.  */
	const char *p = run;
	if (!run || !vol || !parse_dec(&p, end, &ms) || p >= end ||
	    *p != '.' || end - p < 7)
		return -CP_E_PARSE;
	const char *f = ++p;
	if (!parse_dec(&p, end, &frac) || p - f != 6)
		return -CP_E_PARSE;
	p = vol;
	if (!parse_dec(&p, end, &v))
		return -CP_E_PARSE;
	out->run_ns = ms * 1000000u + frac;
	out->voluntary = v;
	return 0;
}

const char *cp_task_state_name(char state)
{
	switch (state) {
	case 'R':
		return "running";
	case 'S':
		return "sleeping";
	case 'D':
		return "disk-wait";
	case 'T':
		return "stopped";
	case 't':
		return "tracing-stop";
	case 'Z':
		return "zombie";
	case 'X':
		return "dead";
	case 'I':
		return "idle";
	case 'P':
		return "parked";
	case 'W':
		return "waking";
	default:
		return "unknown";
	}
}

/* The number at P (before END), decimal or, with BASE 16, hex; false
 * when there is none or it overflows.  */
static bool parse_number(const char **p, const char *end, int base,
			 uint64_t *value)
{
	const char *q = *p;
	uint64_t v = 0;
	bool any = false;
	while (q < end && (*q == ' ' || *q == '\t'))
		q++;
	for (; q < end; q++) {
		int digit;
		if (*q >= '0' && *q <= '9')
			digit = *q - '0';
		else if (base == 16 && *q >= 'a' && *q <= 'f')
			digit = *q - 'a' + 10;
		else if (base == 16 && *q >= 'A' && *q <= 'F')
			digit = *q - 'A' + 10;
		else
			break;
		if (v > (UINT64_MAX - (uint64_t)digit) / (uint64_t)base)
			return false;
		v = v * (uint64_t)base + (uint64_t)digit;
		any = true;
	}
	*p = q;
	*value = v;
	return any;
}

/* Up to 4 decimal numbers of a line ("Uid:\t0\t0\t0\t0") into OUT.  */
static void parse_ids(const char *p, const char *end, long out[4])
{
	for (int i = 0; i < 4; i++) {
		uint64_t v;
		if (!parse_number(&p, end, 10, &v) || v > INT32_MAX * 2ull + 1)
			break;
		out[i] = (long)v;
	}
}

int cp_task_status_parse(const char *text, size_t len,
			 struct cp_task_status *out)
{
	*out = (struct cp_task_status){.tgid = -1, .tracer_pid = -1,
				       .uid = {-1, -1, -1, -1},
				       .gid = {-1, -1, -1, -1}};
	bool found = false;
	const char *end = text + len;
	for (const char *line = text; line < end;) {
		const char *eol = memchr(line, '\n', (size_t)(end - line));
		if (!eol)
			eol = end;
		const char *colon = memchr(line, ':', (size_t)(eol - line));
		if (colon) {
			size_t key = (size_t)(colon - line);
			const char *p = colon + 1;
			uint64_t v;
			if (key == 4 && memcmp(line, "Tgid", 4) == 0 &&
			    parse_number(&p, eol, 10, &v) && v <= INT32_MAX) {
				out->tgid = (pid_t)v;
				found = true;
			} else if (key == 9 && memcmp(line, "TracerPid", 9) == 0 &&
				   parse_number(&p, eol, 10, &v) &&
				   v <= INT32_MAX) {
				out->tracer_pid = (pid_t)v;
				found = true;
			} else if (key == 3 && memcmp(line, "Uid", 3) == 0) {
				parse_ids(p, eol, out->uid);
				found = true;
			} else if (key == 3 && memcmp(line, "Gid", 3) == 0) {
				parse_ids(p, eol, out->gid);
				found = true;
			} else if (key == 6 && memcmp(line, "SigPnd", 6) == 0 &&
				   parse_number(&p, eol, 16, &v)) {
				out->sig_pending = v;
				out->have_sig_pending = true;
				found = true;
			}
		}
		line = eol + 1;
	}
	return found ? 0 : -CP_E_PARSE;
}

int cp_task_status_read(pid_t pid, pid_t tid, struct cp_task_status *out)
{
	char path[64];
	char *text;
	size_t len;
	if (tid > 0)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status",
			 (int)pid, (int)tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (cp_procfs_slurp(path, &text, &len) < 0)
		return -CP_E_NOPROC;
	int rc = cp_task_status_parse(text, len, out);
	free(text);
	return rc;
}

int cp_procfs_runnable_tasks(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *dir = opendir(path);
	if (!dir)
		return -1;
	int n = 0;
	struct dirent *d;
	while ((d = readdir(dir))) {
		char *end;
		long tid = strtol(d->d_name, &end, 10);
		struct cp_task_stat st;
		if (*end == '\0' && tid > 0 &&
		    cp_task_stat_read(pid, (pid_t)tid, &st) == 0 &&
		    st.state == 'R')
			n++;
	}
	closedir(dir);
	return n;
}

int cp_procfs_runnable(void)
{
	char *text;
	size_t len;
	if (cp_procfs_slurp("/proc/loadavg", &text, &len) < 0)
		return -1;
	/* "0.51 0.62 0.70 3/412 12345": runnable / existing.  */
	int runnable = -1;
	if (sscanf(text, "%*s %*s %*s %d/", &runnable) != 1)
		runnable = -1;
	free(text);
	return runnable;
}

pid_t cp_procfs_tracer_pid(pid_t pid)
{
	struct cp_task_status st;
	return cp_task_status_read(pid, 0, &st) == 0 ? st.tracer_pid : -1;
}

pid_t cp_procfs_tgid(pid_t tid)
{
	struct cp_task_status st;
	return cp_task_status_read(tid, 0, &st) == 0 ? st.tgid : -1;
}

void cp_procfs_comm(pid_t pid, pid_t tid, char *buf, size_t size)
{
	char path[64];
	char *text;
	size_t len;
	if (size == 0)
		return;
	buf[0] = '\0';
	if (tid > 0)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid,
			 (int)tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (cp_procfs_slurp(path, &text, &len) < 0)
		return;
	while (len > 0 && text[len - 1] == '\n')
		text[--len] = '\0';
	snprintf(buf, size, "%s", text);
	free(text);
}

void cp_procfs_cmdline(pid_t pid, char *buf, size_t size)
{
	char path[64], *text;
	size_t len;
	if (size == 0)
		return;
	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if (cp_procfs_slurp(path, &text, &len) == 0) {
		for (size_t i = 0; i + 1 < len; i++)
			if (text[i] == '\0')
				text[i] = ' ';
		snprintf(buf, size, "%s", text);
		free(text);
	}
	if (!buf[0])
		cp_procfs_comm(pid, 0, buf, size);
}

uint64_t cp_procfs_auxv(pid_t pid, uint64_t type)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	/* Pairs of words, ended by AT_NULL (0).  */
	uint64_t pair[2], value = 0;
	while (read(fd, pair, sizeof(pair)) == (ssize_t)sizeof(pair) &&
	       pair[0] != 0)
		if (pair[0] == type) {
			value = pair[1];
			break;
		}
	close(fd);
	return value;
}
