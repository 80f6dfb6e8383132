/* One-shot stack dump.  */
#include "cprof/dump.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/procfs.h"
#include "syscalls.h"
#include "arch/x86_64/waits.h"

const char *cp_syscall_name(long nr)
{
	if (nr < 0 || (size_t)nr >= sizeof(syscall_names) / sizeof(*syscall_names))
		return NULL;
	return syscall_names[nr];
}

/* The system call a blocked thread is in, from /proc/PID/task/TID/syscall
 * ("NR args... sp pc"; "running"; "-1 sp pc" when not in a call).  */
static long blocked_syscall(pid_t pid, pid_t tid)
{
	char path[96], *text;
	size_t len;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid,
		 (int)tid);
	if (cp_procfs_slurp(path, &text, &len) < 0)
		return -1;
	char *end;
	long nr = strtol(text, &end, 10);
	if (end == text)
		nr = -1;
	free(text);
	return nr;
}

void cp_dump_free(struct cp_dump *dump)
{
	if (!dump)
		return;
	for (size_t i = 0; i < dump->nthreads; i++)
		free(dump->threads[i].frames);
	free(dump->threads);
	free(dump);
}

static int compare_tid(const void *a, const void *b)
{
	const struct cp_dump_thread *x = a, *y = b;
	return (x->tid > y->tid) - (x->tid < y->tid);
}

int cp_dump_collect(struct cp_target *target, struct cp_unwinder *unwinder,
		    struct cp_symbols *symbols, size_t max_depth,
		    struct cp_dump **out)
{
	struct cp_capture *capture = NULL;
	int rc = cp_capture_new(target, unwinder, CP_UNWIND_SNAPSHOT,
				max_depth, &capture);
	if (rc == 0)
		rc = cp_dump_capture(target, capture, symbols, max_depth, out);
	cp_capture_free(capture);
	return rc;
}

int cp_dump_capture(struct cp_target *target, struct cp_capture *capture,
		    struct cp_symbols *symbols, size_t max_depth,
		    struct cp_dump **out)
{
	int rc = -CP_E_NOMEM;
	pid_t pid = cp_target_pid(target);
	size_t n;
	struct cp_thread *threads = cp_target_threads(target, &n);
	struct cp_dump *dump = calloc(1, sizeof(*dump));
	struct cp_capture_slot *snaps = calloc(n ? n : 1, sizeof(*snaps));
	uint64_t *pcs = malloc((max_depth ? max_depth : 1) * sizeof(*pcs));
	if (!dump || !snaps || !pcs)
		goto out;
	dump->pid = pid;
	dump->threads = calloc(n ? n : 1, sizeof(*dump->threads));
	if (!dump->threads)
		goto out;
	/* The state must be read before the thread is stopped: afterwards
	 * every thread reads as "tracing stop".  */
	for (size_t i = 0; i < n; i++) {
		struct cp_dump_thread *t = &dump->threads[i];
		t->tid = threads[i].tid;
		t->state = threads[i].attach_state
				   ? threads[i].attach_state
				   : cp_target_thread_state(target, &threads[i]);
		t->syscall = t->state == 'R' ? -1 : blocked_syscall(pid, t->tid);
		cp_procfs_comm(pid, t->tid, t->name, sizeof(t->name));
	}
	size_t count = n;
	for (size_t i = 0; i < count; i++)
		cp_target_interrupt(target, dump->threads[i].tid);
	/* Hold every thread until all are copied: one consistent picture.  */
	pid_t tid;
	size_t copied = 0;
	while (cp_target_wait_any(target, &tid) == 0) {
		for (size_t i = 0; i < count; i++) {
			if (dump->threads[i].tid != tid)
				continue;
			snaps[i].snap.tid = 0;
			if (cp_capture_take(capture, tid, &snaps[i]) == 0)
				copied++;
			break;
		}
	}
	for (size_t i = 0; i < count; i++) {
		/* Our stop broke a wait the kernel does not restart
		 * (epoll_wait, sigtimedwait, ...): make it a restart.  */
		struct user_regs_struct regs = snaps[i].snap.regs;
		if (snaps[i].snap.tid == dump->threads[i].tid &&
		    cp_waits_undo_eintr(&regs))
			cp_target_set_regs(target, snaps[i].snap.tid, &regs);
		cp_target_resume(target, dump->threads[i].tid);
	}
	(void)copied;
	for (size_t i = 0; i < count; i++) {
		struct cp_dump_thread *t = &dump->threads[i];
		if (snaps[i].snap.tid != t->tid)
			continue; /* exited meanwhile */
		size_t npcs = cp_capture_unwind(capture, &snaps[i], pcs,
						max_depth);
		size_t cap = 0;
		for (size_t j = 0; j < npcs; j++) {
			uint64_t pc = cp_unwind_address(pcs[j]);
			const struct cp_symbol *sym =
				cp_symbols_lookup(symbols, pc);
			for (size_t k = 0; k < sym->nframes; k++) {
				if (t->nframes == cap) {
					cap = cap ? cap * 2 : 32;
					struct cp_dump_frame *grown = realloc(
						t->frames, cap * sizeof(*grown));
					if (!grown)
						goto out;
					t->frames = grown;
				}
				t->frames[t->nframes++] = (struct cp_dump_frame){
					/* Show return addresses as they are
					 * on the stack.  */
					.address = j == 0 ? pc : pc + 1,
					.frame = &sym->frames[k],
					.module = sym->module,
				};
			}
		}
	}
	dump->nthreads = count;
	qsort(dump->threads, count, sizeof(*dump->threads), compare_tid);
	rc = 0;
out:
	for (size_t i = 0; snaps && i < n; i++)
		cp_capture_slot_free(&snaps[i]);
	free(snaps);
	free(pcs);
	if (rc == 0)
		*out = dump;
	else
		cp_dump_free(dump);
	return rc;
}
