/* Unwind rules of our own, in front of libunwind (unwinder.c): for a pc,
 * the CFA as a register plus an offset and where the return address and
 * the callee-saved registers are, evaluated from a checked FDE
 * (cprof/ehframe.h) the way libunwind 1.6 evaluates it (src/dwarf/
 * Gparser.c: run_cfi_program, setup_fde, parse_fde, apply_reg_state), and
 * kept in a cache keyed by pc.
 *
 * Why: libunwind's own rule cache is guarded by a lock it takes with
 * every signal masked, two rt_sigprocmask per frame (the comment above
 * unw_set_caching_policy in unwinder.c).  A frame whose rule is simple is
 * stepped here with no system call and no libunwind call; anything else
 * (expressions, a register kept in another register, signal frames, an
 * FDE we cannot read, a pc without one) is a "complex" rule, and that
 * frame is stepped by libunwind as before.
 *
 * Everything here is a pure function of byte buffers, for unit tests and
 * fuzzing (tests/check_rules.c, tests/fuzz/fuzz_ehframe.c).  Internal to
 * libcprof.  */
#ifndef CPROF_RULES_H
#define CPROF_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a rule says.  */
enum {
	CP_RULE_EMPTY,    /* a free cache slot */
	CP_RULE_SIMPLE,   /* the fields below say how to step */
	CP_RULE_COMPLEX,  /* libunwind steps this pc */
};

/* Where a saved register's value in the caller is.  */
enum {
	CP_SAVED_SAME,    /* unchanged */
	CP_SAVED_UNDEF,   /* undefined (libunwind: a null location) */
	CP_SAVED_CFA,     /* in the stack, at CFA + 8 * slot */
};

/* The registers a simple rule may restore, in this order: rbx, rbp,
 * r12-r15 and the return address (DWARF 3, 6, 12-15, 16).  Every other
 * register keeps its value, except rsp, which is the CFA.  */
#define CP_RULE_NSAVED 7
extern const uint8_t cp_rule_saved_reg[CP_RULE_NSAVED];
#define CP_RULE_RA 6   /* the return address's index */

/* One rule: 24 bytes.  */
struct cp_rule {
	uint64_t pc;                  /* the pc looked up (a return address
				       * minus one for a caller) */
	int32_t cfa_off;              /* CFA = register CFA_REG + CFA_OFF */
	uint8_t cfa_reg;              /* DWARF number, 0..15 (7: rsp) */
	uint8_t kind;                 /* CP_RULE_* */
	uint16_t how;                 /* CP_SAVED_* of saved register I in
				       * bits 2I..2I+1 */
	int8_t slot[CP_RULE_NSAVED];  /* CP_SAVED_CFA: CFA + 8 * slot */
	uint8_t unused;
};

static inline unsigned cp_rule_how(const struct cp_rule *r, unsigned i)
{
	return (r->how >> (2 * i)) & 3u;
}

/* Evaluate for PC the FDE at address FDE_ADDR of the checked image DATA
 * (SIZE bytes at address ADDR; the FDE's CIE lies in it too), whose code
 * starts at PC_START: the CIE's initial instructions, then the FDE's up to
 * PC, as libunwind 1.6 runs them.  *OUT gets PC and kind CP_RULE_SIMPLE
 * with the rule, or kind CP_RULE_COMPLEX when the result is anything a
 * simple rule cannot say, or the records do not read as expected.  Never
 * reads outside DATA; ends for any input.  */
void cp_rule_eval(const uint8_t *data, size_t size, uint64_t addr,
		  uint64_t fde_addr, uint64_t pc_start, uint64_t pc,
		  struct cp_rule *out);

/* A cache of rules keyed by pc: open addressing, a bounded number of
 * slots and of probes (a full neighbourhood overwrites its first slot).  */
struct cp_rules;

/* Returns NULL when out of memory.  The slots are allocated on the first
 * insert.  */
struct cp_rules *cp_rules_new(void);

/* NULL is fine.  */
void cp_rules_free(struct cp_rules *rules);

/* Forget every rule.  */
void cp_rules_flush(struct cp_rules *rules);

/* The rule of PC, or NULL.  Borrowed, valid until the next insert or
 * flush.  */
const struct cp_rule *cp_rules_find(const struct cp_rules *rules,
				    uint64_t pc);

/* Keep RULE (its pc is the key), replacing any rule of the same pc.
 * Returns the kept copy, or NULL when out of memory.  */
const struct cp_rule *cp_rules_put(struct cp_rules *rules,
				   const struct cp_rule *rule);

/* Rules kept now (for tests).  */
size_t cp_rules_count(const struct cp_rules *rules);

/* ------------------------------- the unwinder's use of them (tests) */

struct cp_unwinder;

/* How cp_unwinder_unwind and cp_unwinder_unwind_partial walk.  The
 * environment variable CPROF_UNWIND_RULES ("off", "check", "abort") sets
 * it in cp_unwinder_new_in: a switch for tests and measurements.  */
enum {
	CP_UNWIND_RULES_ON,    /* our rules where they are simple, libunwind
				* for the rest (the default) */
	CP_UNWIND_RULES_OFF,   /* libunwind for every frame, as before */
	CP_UNWIND_RULES_CHECK, /* both walks, compared: the result is
				* libunwind's, a difference is counted
				* (not when the mappings changed between
				* or during the walks) */
	CP_UNWIND_RULES_ABORT, /* the same, and a difference aborts */
};

void cp_unwinder_rules_mode(struct cp_unwinder *uw, int mode);

struct cp_unwinder_rules_stats {
	uint64_t fast_steps;    /* frames stepped with our rules */
	uint64_t lib_steps;     /* frames stepped by libunwind (unw_step) */
	uint64_t evaluated;     /* rules evaluated (cache misses) */
	uint64_t checked;       /* unwinds compared (RULES_CHECK) */
	uint64_t unchecked;     /* ... not: the mappings changed under them */
	uint64_t mismatches;    /* ... that differed */
};

void cp_unwinder_rules_stats(const struct cp_unwinder *uw,
			     struct cp_unwinder_rules_stats *out);

#endif
