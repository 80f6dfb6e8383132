/* Blocked threads in --wall mode: the per-thread table, its /proc reads
 * and which waits survive a ptrace stop.  See blocked.h.  */
#include "capture/blocked.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cprof/addrspace.h"
#include "cprof/error.h"
#include "cprof/unwinder.h"

struct cp_blocked {
	pid_t pid;
	const struct cp_addrspace *space;  /* for its exec epoch */
	uint64_t epoch;                    /* SPACE's, as last seen */
	uint64_t tick;                     /* current tick */
	struct cp_blocked_thread *threads; /* sorted by TID */
	size_t count, cap;
};

struct cp_blocked *cp_blocked_new(const struct cp_addrspace *space)
{
	struct cp_blocked *t = calloc(1, sizeof(*t));
	if (t) {
		t->pid = cp_addrspace_pid(space);
		t->space = space;
		t->epoch = cp_addrspace_epoch(space);
	}
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
	/* The target exec'ed: the stacks kept are of the old image.  */
	uint64_t epoch = cp_addrspace_epoch(t->space);
	if (epoch != t->epoch) {
		t->epoch = epoch;
		cp_blocked_forget_stacks(t);
	}
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

/* THREAD's scheduler counters: one pread.  Returns 0, -CP_E_GONE (the
 * thread exited) or -CP_E_PARSE; also -CP_E_INVAL when the kernel keeps
 * no such counters (it writes "0 0 0"), which must not be taken for
 * "did not run".  */
static int read_schedstat(struct cp_blocked *t, struct cp_blocked_thread *th,
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

/* What THREAD is blocked in: one pread.  Returns 0, -CP_E_GONE or
 * -CP_E_PARSE.  */
static int read_syscall(struct cp_blocked *t, struct cp_blocked_thread *th,
			struct cp_task_syscall *out)
{
	char buf[256];
	ssize_t n = read_task_file(t, th, "syscall", &th->syscall_fd, buf,
				   sizeof(buf));
	if (n <= 0)
		return -CP_E_GONE;
	return cp_task_syscall_parse(buf, (size_t)n, out);
}

/* Both reads give the same counters: the thread did not run between.  */
static bool same_schedstat(const struct cp_task_schedstat *a,
			   const struct cp_task_schedstat *b)
{
	return a->run_ns == b->run_ns && a->slices == b->slices;
}

/* Copy the stack of THREAD, off the CPU in SC, into READ without
 * stopping it.  STAT: its counters just read, or NULL.  */
static int read_blocked(struct cp_blocked *t, struct cp_target *target,
			struct cp_blocked_thread *th,
			const struct cp_task_syscall *sc,
			const struct cp_task_schedstat *stat,
			struct cp_blocked_read *read)
{
	struct cp_snapshot *snap = &read->snap;
	memset(&snap->regs, 0, sizeof(snap->regs));
	snap->regs.rip = sc->pc;
	snap->regs.rsp = sc->sp;
	read->known = CP_UNWIND_REG(CP_REG_RIP) | CP_UNWIND_REG(CP_REG_RSP);
	if (sc->state == CP_TASK_IN_SYSCALL) {
		/* At the instruction after `syscall` the argument registers
		 * still hold the arguments: the kernel returns them
		 * unchanged (only rax, rcx and r11 differ).  */
		snap->regs.rdi = sc->args[0];
		snap->regs.rsi = sc->args[1];
		snap->regs.rdx = sc->args[2];
		snap->regs.r10 = sc->args[3];
		snap->regs.r8 = sc->args[4];
		snap->regs.r9 = sc->args[5];
		snap->regs.orig_rax = (unsigned long long)sc->nr;
		read->known |= CP_UNWIND_REG(CP_REG_RDI) |
			       CP_UNWIND_REG(CP_REG_RSI) |
			       CP_UNWIND_REG(CP_REG_RDX) |
			       CP_UNWIND_REG(CP_REG_R10) |
			       CP_UNWIND_REG(CP_REG_R8) |
			       CP_UNWIND_REG(CP_REG_R9);
	}
	int rc = cp_target_snapshot_stack(target, th->tid, snap);
	if (rc == -CP_E_NOMEM)
		return rc;
	if (rc < 0)
		return CP_BLOCKED_NONE;
	/* The copy is the stack at SC only if the thread did not run
	 * meanwhile: check the counters (or, without them, the syscall
	 * file) again.  */
	bool still;
	if (stat) {
		struct cp_task_schedstat after;
		still = read_schedstat(t, th, &after) == 0 &&
			same_schedstat(&after, stat);
	} else {
		struct cp_task_syscall again;
		still = read_syscall(t, th, &again) == 0 &&
			again.state == sc->state && again.sp == sc->sp &&
			again.pc == sc->pc;
	}
	if (!still)
		return CP_BLOCKED_NONE;
	read->syscall = *sc;
	read->has_stat = stat != NULL;
	if (stat)
		read->stat = *stat;
	return CP_BLOCKED_READ;
}

int cp_blocked_look(struct cp_blocked *t, struct cp_target *target,
		    const struct cp_thread *listed, struct cp_blocked_thread *th,
		    struct cp_blocked_read *read)
{
	struct cp_task_schedstat stat;
	bool has_stat = read_schedstat(t, th, &stat) == 0;
	if (has_stat && th->has_baseline && th->stack != UINT32_MAX &&
	    same_schedstat(&stat, &th->baseline))
		return CP_BLOCKED_REPEAT;   /* not on a CPU for a moment */
	th->has_baseline = false;
	struct cp_task_syscall sc;
	if (read_syscall(t, th, &sc) < 0 || sc.state == CP_TASK_RUNNING) {
		th->settling = false;
		return CP_BLOCKED_STOP;
	}
	if (th->settling && th->stack != UINT32_MAX && sc.sp == th->sp &&
	    sc.pc == th->pc) {
		/* Back in the wait our stop found it in (restarted): the run
		 * we caused is over, the stack is the stop's.  (Had it woken
		 * up, run and come back to the very same stack pointer and
		 * pc meanwhile, its stack would be the same all the same,
		 * but for callers changed under an unchanged frame.)  */
		th->settling = false;
		th->baseline = stat;
		th->has_baseline = has_stat;
		return CP_BLOCKED_REPEAT;
	}
	th->settling = false;
	/* A thread in a group-stop (SIGSTOP) is in no wait of its own: it
	 * is stopped as before, once, and repeated from then on.  */
	if (listed->group_stopped)
		return CP_BLOCKED_STOP;
	return read_blocked(t, target, th, &sc, has_stat ? &stat : NULL, read);
}

void cp_blocked_read_done(struct cp_blocked_thread *th, uint32_t stack,
			  const struct cp_blocked_read *read)
{
	th->stack = stack;
	th->baseline = read->stat;
	th->has_baseline = read->has_stat;
	th->settling = false;
}

void cp_blocked_stopped(struct cp_blocked_thread *th, uint32_t stack,
			uint64_t sp, uint64_t pc)
{
	th->stack = stack;
	th->has_baseline = false;
	th->settling = true;
	th->sp = sp;
	th->pc = pc;
}

bool cp_blocked_unmoved(struct cp_blocked *t, struct cp_blocked_thread *th,
			const struct cp_blocked_read *read)
{
	struct cp_task_schedstat now;
	return read->has_stat && read_schedstat(t, th, &now) == 0 &&
	       same_schedstat(&now, &read->stat);
}

void cp_blocked_read_free(struct cp_blocked_read *read)
{
	free(read->snap.stack);
	read->snap.stack = NULL;
	read->snap.stack_cap = 0;
}
