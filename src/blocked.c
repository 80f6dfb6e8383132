/* Blocked threads in --wall mode: the per-thread table, its /proc reads
 * and which waits survive a ptrace stop.  See blocked.h.  */
#include "blocked.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cprof/error.h"

struct cp_blocked {
	pid_t pid;
	uint64_t tick;                     /* current tick */
	struct cp_blocked_thread *threads; /* sorted by TID */
	size_t count, cap;
};

struct cp_blocked *cp_blocked_new(pid_t pid)
{
	struct cp_blocked *t = calloc(1, sizeof(*t));
	if (t)
		t->pid = pid;
	return t;
}

static void close_fds(struct cp_blocked_thread *th)
{
	if (th->schedstat_fd >= 0)
		close(th->schedstat_fd);
	if (th->syscall_fd >= 0)
		close(th->syscall_fd);
	th->schedstat_fd = th->syscall_fd = -1;
}

void cp_blocked_free(struct cp_blocked *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->count; i++)
		close_fds(&t->threads[i]);
	free(t->threads);
	free(t);
}

void cp_blocked_begin_tick(struct cp_blocked *t, uint64_t tick)
{
	t->tick = tick;
}

/* The index of TID, or where it would go.  */
static size_t lower_bound(const struct cp_blocked *t, pid_t tid)
{
	size_t lo = 0, hi = t->count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->threads[mid].tid < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct cp_blocked_thread *cp_blocked_find(struct cp_blocked *t, pid_t tid)
{
	size_t i = lower_bound(t, tid);
	return i < t->count && t->threads[i].tid == tid ? &t->threads[i]
							 : NULL;
}

struct cp_blocked_thread *cp_blocked_thread(struct cp_blocked *t, pid_t tid)
{
	size_t i = lower_bound(t, tid);
	if (i == t->count || t->threads[i].tid != tid) {
		if (t->count == t->cap) {
			size_t cap = t->cap ? t->cap * 2 : 16;
			struct cp_blocked_thread *grown =
				realloc(t->threads, cap * sizeof(*grown));
			if (!grown)
				return NULL;
			t->threads = grown;
			t->cap = cap;
		}
		memmove(&t->threads[i + 1], &t->threads[i],
			(t->count - i) * sizeof(*t->threads));
		t->count++;
		t->threads[i] = (struct cp_blocked_thread){
			.tid = tid,
			.schedstat_fd = -1,
			.syscall_fd = -1,
			.stack = UINT32_MAX,
		};
	}
	t->threads[i].tick = t->tick;
	return &t->threads[i];
}

void cp_blocked_prune(struct cp_blocked *t)
{
	size_t kept = 0;
	for (size_t i = 0; i < t->count; i++) {
		if (t->threads[i].tick != t->tick) {
			close_fds(&t->threads[i]);
			continue;
		}
		t->threads[kept++] = t->threads[i];
	}
	t->count = kept;
}

void cp_blocked_forget_stacks(struct cp_blocked *t)
{
	for (size_t i = 0; i < t->count; i++) {
		t->threads[i].stack = UINT32_MAX;
		t->threads[i].has_baseline = false;
		t->threads[i].settling = false;
	}
}

/* pread the /proc file NAME of THREAD through the descriptor in *FD,
 * opened on first use.  /proc files are generated afresh by each read
 * from offset 0, so a kept descriptor costs one system call per look.  */
static ssize_t read_task_file(struct cp_blocked *t,
			      const struct cp_blocked_thread *th,
			      const char *name, int *fd, char *buf,
			      size_t size)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		if (*fd < 0) {
			char path[64];
			snprintf(path, sizeof(path), "/proc/%d/task/%d/%s",
				 (int)t->pid, (int)th->tid, name);
			*fd = open(path, O_RDONLY | O_CLOEXEC);
			if (*fd < 0)
				return -1;
		}
		ssize_t n;
		do
			n = pread(*fd, buf, size, 0);
		while (n < 0 && errno == EINTR);
		if (n > 0)
			return n;
		/* The task the descriptor was opened on is gone; if its TID
		 * was given to a new thread already, that one's file is a
		 * new open away.  */
		close(*fd);
		*fd = -1;
	}
	return -1;
}

int cp_blocked_read_schedstat(struct cp_blocked *t,
			      struct cp_blocked_thread *th,
			      struct cp_task_schedstat *out)
{
	char buf[96];
	ssize_t n = read_task_file(t, th, "schedstat", &th->schedstat_fd, buf,
				   sizeof(buf));
	if (n <= 0)
		return -CP_E_GONE;
	int rc = cp_task_schedstat_parse(buf, (size_t)n, out);
	if (rc < 0)
		return rc;
	return out->run_ns == 0 && out->slices == 0 ? -CP_E_INVAL : 0;
}

int cp_blocked_read_syscall(struct cp_blocked *t,
			    struct cp_blocked_thread *th,
			    struct cp_task_syscall *out)
{
	char buf[256];
	ssize_t n = read_task_file(t, th, "syscall", &th->syscall_fd, buf,
				   sizeof(buf));
	if (n <= 0)
		return -CP_E_GONE;
	return cp_task_syscall_parse(buf, (size_t)n, out);
}

bool cp_blocked_same_schedstat(const struct cp_task_schedstat *a,
			       const struct cp_task_schedstat *b)
{
	return a->run_ns == b->run_ns && a->slices == b->slices;
}
