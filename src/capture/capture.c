/* The capture path (cprof/capture.h): take while held, unwind after.  */
#include "cprof/capture.h"

#include <stdlib.h>
#include <string.h>

#include "arch/x86_64/regs.h"
#include "cprof/error.h"

struct cp_capture {
	struct cp_target *target;
	struct cp_unwinder *unwinder;
	const struct cp_unwind_ops *ops;
	size_t max_depth;
};

/* ------------------------------------------------------------ snapshot */

static int snapshot_take(struct cp_capture *c, pid_t tid,
			 struct cp_capture_slot *slot)
{
	slot->npcs = 0;
	return cp_target_snapshot(c->target, tid, &slot->snap);
}

static size_t snapshot_unwind(struct cp_capture *c,
			      const struct cp_capture_slot *slot,
			      uint64_t *pcs, size_t max)
{
	return cp_unwinder_unwind(c->unwinder, &slot->snap, pcs, max);
}

/* -------------------------------------------------------------- ptrace */

static int ptrace_take(struct cp_capture *c, pid_t tid,
		       struct cp_capture_slot *slot)
{
	slot->npcs = 0;
	slot->snap.tid = tid;
	slot->snap.stack_len = 0;
	int rc = cp_target_get_regs(c->target, tid, &slot->snap.regs);
	if (rc < 0)
		return rc;
	if (slot->pcs_cap < c->max_depth) {
		uint64_t *grown =
			realloc(slot->pcs, c->max_depth * sizeof(*grown));
		if (!grown)
			return -CP_E_NOMEM;
		slot->pcs = grown;
		slot->pcs_cap = c->max_depth;
	}
	slot->npcs = cp_unwinder_unwind_ptrace(c->unwinder, tid, slot->pcs,
					       c->max_depth);
	return 0;
}

static size_t ptrace_unwind(struct cp_capture *c,
			    const struct cp_capture_slot *slot, uint64_t *pcs,
			    size_t max)
{
	(void)c;
	size_t n = slot->npcs < max ? slot->npcs : max;
	memcpy(pcs, slot->pcs, n * sizeof(*pcs));
	return n;
}

static const struct cp_unwind_ops methods[] = {
	[CP_UNWIND_SNAPSHOT] = {"snapshot", snapshot_take, snapshot_unwind},
	[CP_UNWIND_PTRACE] = {"ptrace", ptrace_take, ptrace_unwind},
};

/* ------------------------------------------------------------- public */

const struct cp_unwind_ops *cp_unwind_ops_of(enum cp_unwind_mode mode)
{
	if ((size_t)mode >= sizeof(methods) / sizeof(methods[0]))
		return &methods[CP_UNWIND_SNAPSHOT];
	return &methods[mode];
}

int cp_unwind_mode_parse(const char *name, enum cp_unwind_mode *mode)
{
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (strcmp(methods[i].name, name) == 0) {
			*mode = (enum cp_unwind_mode)i;
			return 0;
		}
	return -CP_E_INVAL;
}

int cp_capture_new(struct cp_target *target, struct cp_unwinder *unwinder,
		   enum cp_unwind_mode mode, size_t max_depth,
		   struct cp_capture **out)
{
	struct cp_capture *c = calloc(1, sizeof(*c));
	if (!c)
		return -CP_E_NOMEM;
	c->target = target;
	c->unwinder = unwinder;
	c->ops = cp_unwind_ops_of(mode);
	c->max_depth = max_depth ? max_depth : 1;
	*out = c;
	return 0;
}

void cp_capture_free(struct cp_capture *c)
{
	free(c);
}

int cp_capture_take(struct cp_capture *c, pid_t tid,
		    struct cp_capture_slot *slot)
{
	return c->ops->take(c, tid, slot);
}

int cp_capture_take_regs(struct cp_capture *c, pid_t tid,
			 const struct user_regs_struct *regs,
			 struct cp_capture_slot *slot)
{
	if (c->ops->take == snapshot_take) {
		slot->npcs = 0;
		slot->snap.regs = *regs;
		return cp_target_snapshot_stack(c->target, tid, &slot->snap);
	}
	int rc = cp_target_set_regs(c->target, tid, regs);
	if (rc < 0)
		return rc;
	return c->ops->take(c, tid, slot);
}

size_t cp_capture_unwind(struct cp_capture *c,
			 const struct cp_capture_slot *slot, uint64_t *pcs,
			 size_t max)
{
	if (max == 0 || max > c->max_depth)
		max = c->max_depth;
	cp_target_learn_stack(c->target, slot->snap.tid,
			      cp_regs_sp(&slot->snap.regs));
	return c->ops->unwind(c, slot, pcs, max);
}

const char *cp_capture_method(const struct cp_capture *c)
{
	return c->ops->name;
}

void cp_capture_slot_free(struct cp_capture_slot *slot)
{
	free(slot->snap.stack);
	free(slot->pcs);
	memset(slot, 0, sizeof(*slot));
}
