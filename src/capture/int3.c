/* int3 breakpoints: insert, restore, emulate or step the displaced
 * instruction (capture/int3.h).  */
#include "capture/int3.h"

#include <stdlib.h>
#include <string.h>

#include "arch/x86_64/abi.h"
#include "arch/x86_64/regs.h"
#include "cprof/error.h"
#include "util/grow.h"

int cp_int3_prepare(pid_t pid, struct cp_int3 *bp, uint64_t addr,
		    bool force_step)
{
	uint32_t tag = bp->tag;
	memset(bp, 0, sizeof(*bp));
	bp->tag = tag;
	bp->addr = addr;
	if (cp_target_read_mem(pid, addr, bp->orig, sizeof(bp->orig)) < 0)
		return -CP_E_SYS;
	if (bp->orig[0] == CP_INT3_BYTE)
		return -CP_E_INVAL;
	/* Not decodable: stepped instead, which needs no decoding.  */
	bp->emulate = !force_step &&
		      (bp->orig[0] == CP_INT3_RET ||
		       cp_insn_decode(bp->orig, sizeof(bp->orig), &bp->insn) ==
			       0);
	return 0;
}

int cp_int3_insert(pid_t pid, struct cp_int3 *bp)
{
	uint8_t int3 = CP_INT3_BYTE, check = 0;
	if (cp_target_write_mem(pid, bp->addr, &int3, 1) < 0 ||
	    cp_target_read_mem(pid, bp->addr, &check, 1) < 0 ||
	    check != CP_INT3_BYTE)
		return -CP_E_SYS;
	bp->inserted = true;
	return 0;
}

int cp_int3_restore(pid_t pid, const struct cp_int3 *bp)
{
	uint8_t check = 0;
	for (int attempt = 0; attempt < 3; attempt++) {
		if (cp_target_write_mem(pid, bp->addr, bp->orig, 1) == 0 &&
		    cp_target_read_mem(pid, bp->addr, &check, 1) == 0 &&
		    check == bp->orig[0])
			return 0;
	}
	return -CP_E_SYS;
}

static int mem_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	pid_t pid = *(const pid_t *)arg;
	return cp_target_read(pid, addr, buf, len) == (ssize_t)len ? 0 : -1;
}

static int mem_write(void *arg, uint64_t addr, void *buf, size_t len)
{
	pid_t pid = *(const pid_t *)arg;
	return cp_target_write(pid, addr, buf, len) == 0 ? 0 : -1;
}

int cp_int3_emulate(pid_t pid, const struct cp_int3 *bp, uint64_t pc,
		    struct user_regs_struct *regs)
{
	if (bp->orig[0] == CP_INT3_RET) {
		/* A bare ret (glibc's _dl_debug_state, an empty function):
		 * not among insn.h's forms, and the simplest of all.  */
		uint64_t ret;
		uint64_t sp = cp_regs_sp(regs);
		if (cp_target_read(pid, sp, &ret, sizeof(ret)) !=
		    (ssize_t)sizeof(ret))
			return -1;
		cp_abi_set_pc(regs, ret);
		cp_abi_set_sp(regs, sp + CP_ABI_RET_SLOT);
		return 0;
	}
	return cp_insn_emulate(&bp->insn, pc, regs, mem_read, mem_write,
			       &pid) < 0
		       ? -1
		       : 0;
}

bool cp_int3_writes_add(struct cp_int3_writes *w, uint64_t addr,
			const void *buf, size_t len)
{
	if (len > sizeof(w->buf))
		return false;
	if (w->len == 0) {
		w->addr = addr;
		memcpy(w->buf, buf, len);
		w->len = len;
		return true;
	}
	if (w->len + len > sizeof(w->buf))
		return false;
	if (addr == w->addr + w->len) {
		memcpy(w->buf + w->len, buf, len);
	} else if (addr + len == w->addr) {
		memmove(w->buf + len, w->buf, w->len);
		memcpy(w->buf, buf, len);
		w->addr = addr;
	} else {
		return false;
	}
	w->len += len;
	return true;
}

int cp_int3_writes_flush(pid_t pid, struct cp_int3_writes *w)
{
	if (w->len == 0)
		return 0;
	int rc = cp_target_write(pid, w->addr, w->buf, w->len) == 0
			 ? 0
			 : -CP_E_SYS;
	w->len = 0;
	return rc;
}

/* The gathering emulation's memory: reads from the target (what it
 * reads was not written by this instruction: the forms insn.h knows
 * read before they write), writes into the buffer.  */
struct gather {
	pid_t pid;
	struct cp_int3_writes *writes;
};

static int gather_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct gather *g = arg;
	return cp_target_read(g->pid, addr, buf, len) == (ssize_t)len ? 0
								      : -1;
}

static int gather_write(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct gather *g = arg;
	return cp_int3_writes_add(g->writes, addr, buf, len) ? 0 : -1;
}

int cp_int3_emulate_gather(pid_t pid, const struct cp_int3 *bp, uint64_t pc,
			   struct user_regs_struct *regs,
			   struct cp_int3_writes *writes)
{
	writes->len = 0;
	if (bp->orig[0] == CP_INT3_RET)
		return cp_int3_emulate(pid, bp, pc, regs); /* writes nothing */
	struct gather g = {pid, writes};
	if (cp_insn_emulate(&bp->insn, pc, regs, gather_read, gather_write,
			    &g) < 0) {
		writes->len = 0;
		return -1;
	}
	return 0;
}

int cp_int3_step(struct cp_target *target, pid_t tid, struct cp_int3 *bp)
{
	pid_t pid = cp_target_pid(target);
	if (cp_int3_restore(pid, bp) < 0)
		return -CP_E_SYS;
	uint64_t image = cp_target_images(target);
	int rc = cp_target_step(target, tid);
	if (cp_target_images(target) != image)
		return -CP_E_GONE; /* the image of BP is gone */
	if (cp_int3_insert(pid, bp) < 0)
		return -CP_E_SYS;
	return rc;
}

int cp_int3_queue(struct cp_int3_steps *steps, pid_t tid)
{
	if (!cp_grow_zeroed((void **)&steps->tids, &steps->cap, steps->n + 1,
			    sizeof(*steps->tids), 16))
		return -CP_E_NOMEM;
	steps->tids[steps->n++] = tid;
	return 0;
}

void cp_int3_steps_free(struct cp_int3_steps *steps)
{
	free(steps->tids);
	steps->tids = NULL;
	steps->n = steps->cap = 0;
}
