/* Unwind rules evaluated from checked FDEs, and their cache: see
 * rules.h.  */
#include "unwind/rules.h"

#include <stdlib.h>
#include <string.h>

#include "unwind/cfi.h"

const uint8_t cp_rule_saved_reg[CP_RULE_NSAVED] = {3, 6, 12, 13, 14, 15, 16};

/* ------------------------------------------------------- evaluation */

/* libunwind's dwarf_where_t, and its two CFA columns after the 17
 * registers (DWARF_CFA_REG_COLUMN, DWARF_CFA_OFF_COLUMN).  */
enum where { W_UNDEF, W_SAME, W_CFAREL, W_REG, W_EXPR, W_VAL_EXPR };
#define CFA_REG NUM_REGS
#define CFA_OFF (NUM_REGS + 1)
#define NCOLS (NUM_REGS + 2)
#define RA_REG 16
#define RSP_REG 7
/* remember_state nesting we follow (libunwind's has no bound; deeper
 * programs are left to it).  */
#define MAX_STATES 8

struct state {
	uint8_t where[NCOLS];
	uint64_t val[NCOLS];
};

struct cie_info {
	uint64_t code_align, ret_col;
	int64_t data_align;
	uint8_t fde_enc, lsda_enc;
	bool z, signal;
	size_t instr, end;   /* its instructions, offsets in the image */
};

/* Run the instructions DATA[R) from location *LOC while *LOC <= END_PC,
 * like run_cfi_program.  INITIAL is the state DW_CFA_restore goes back
 * to.  Returns false where libunwind fails or we do not follow
 * (set_loc, remember_state too deep, anything unknown).  */
static bool run(struct rd *r, const struct cie_info *c, uint64_t *loc,
		uint64_t end_pc, struct state *cur, const struct state *initial)
{
	struct state stack[MAX_STATES];
	size_t depth = 0;
	while (*loc <= end_pc && r->pos < r->end) {
		uint8_t op = 0, u8;
		uint16_t u16;
		uint32_t u32;
		uint64_t reg, u;
		int64_t s;
		rd_u8(r, &op);
		uint8_t operand = op & 0x3f;
		switch (op & 0xc0) {
		case 0x40: /* advance_loc */
			*loc += operand * c->code_align;
			continue;
		case 0x80: /* offset */
			if (operand >= NUM_REGS || !rd_uleb(r, &u))
				return false;
			cur->where[operand] = W_CFAREL;
			cur->val[operand] = u * (uint64_t)c->data_align;
			continue;
		case 0xc0: /* restore */
			if (operand >= NUM_REGS)
				return false;
			cur->where[operand] = initial->where[operand];
			cur->val[operand] = initial->val[operand];
			continue;
		}
		switch (op) {
		case 0x00: /* nop */
			break;
		case 0x02: /* advance_loc1 */
			if (!rd_u8(r, &u8))
				return false;
			*loc += u8 * c->code_align;
			break;
		case 0x03: /* advance_loc2 */
			if (!rd_u16(r, &u16))
				return false;
			*loc += u16 * c->code_align;
			break;
		case 0x04: /* advance_loc4 */
			if (!rd_u32(r, &u32))
				return false;
			*loc += u32 * c->code_align;
			break;
		case 0x05: /* offset_extended */
		case 0x2f: /* GNU_negative_offset_extended */
			if (!rd_uleb(r, &reg) || reg >= NUM_REGS ||
			    !rd_uleb(r, &u))
				return false;
			cur->where[reg] = W_CFAREL;
			cur->val[reg] = u * (uint64_t)c->data_align;
			if (op == 0x2f)
				cur->val[reg] = -cur->val[reg];
			break;
		case 0x11: /* offset_extended_sf */
			if (!rd_uleb(r, &reg) || reg >= NUM_REGS ||
			    !rd_sleb(r, &s))
				return false;
			cur->where[reg] = W_CFAREL;
			cur->val[reg] = (uint64_t)s * (uint64_t)c->data_align;
			break;
		case 0x06: /* restore_extended */
			if (!rd_uleb(r, &reg) || reg >= NUM_REGS)
				return false;
			cur->where[reg] = initial->where[reg];
			cur->val[reg] = initial->val[reg];
			break;
		case 0x07: /* undefined */
		case 0x08: /* same_value */
			if (!rd_uleb(r, &reg) || reg >= NUM_REGS)
				return false;
			cur->where[reg] = op == 0x07 ? W_UNDEF : W_SAME;
			cur->val[reg] = 0;
			break;
		case 0x09: /* register */
			if (!rd_uleb(r, &reg) || reg >= NUM_REGS ||
			    !rd_uleb(r, &u))
				return false;
			cur->where[reg] = W_REG;
			cur->val[reg] = u;
			break;
		case 0x0a: /* remember_state */
			if (depth == MAX_STATES)
				return false;
			stack[depth++] = *cur;
			break;
		case 0x0b: /* restore_state: libunwind fails on an empty
			    * stack */
			if (depth == 0)
				return false;
			*cur = stack[--depth];
			break;
		case 0x0c: /* def_cfa */
		case 0x12: /* def_cfa_sf */
			if (!rd_uleb(r, &reg) || reg >= NUM_REGS)
				return false;
			if (op == 0x0c) {
				if (!rd_uleb(r, &u))
					return false;
			} else {
				if (!rd_sleb(r, &s))
					return false;
				u = (uint64_t)s * (uint64_t)c->data_align;
			}
			cur->where[CFA_REG] = W_REG;
			cur->val[CFA_REG] = reg;
			cur->where[CFA_OFF] = 0;
			cur->val[CFA_OFF] = u;
			break;
		case 0x0d: /* def_cfa_register */
			if (!rd_uleb(r, &reg) || reg >= NUM_REGS)
				return false;
			cur->where[CFA_REG] = W_REG;
			cur->val[CFA_REG] = reg;
			break;
		case 0x0e: /* def_cfa_offset */
			if (!rd_uleb(r, &u))
				return false;
			cur->val[CFA_OFF] = u;
			break;
		case 0x13: /* def_cfa_offset_sf */
			if (!rd_sleb(r, &s))
				return false;
			cur->val[CFA_OFF] = (uint64_t)s * (uint64_t)c->data_align;
			break;
		case 0x0f: /* def_cfa_expression */
		case 0x10: /* expression */
		case 0x16: /* val_expression */
			reg = CFA_REG;
			if (op != 0x0f &&
			    (!rd_uleb(r, &reg) || reg >= NUM_REGS))
				return false;
			if (!rd_uleb(r, &u) || !rd_skip(r, u))
				return false;
			cur->where[reg] = op == 0x16 ? W_VAL_EXPR : W_EXPR;
			break;
		case 0x2e: /* GNU_args_size: libunwind keeps it for
			    * unw_resume only */
			if (!rd_uleb(r, &u))
				return false;
			break;
		default:   /* set_loc and everything libunwind refuses */
			return false;
		}
	}
	return true;
}

/* Parse the CIE at offset OFF of the image R.  */
static bool parse_cie(const struct rd *img, size_t off, uint64_t addr,
		      struct cie_info *c)
{
	struct rd r = {img->data, off, img->end};
	uint32_t len, id;
	uint8_t version, ch;
	char aug[5] = {0};
	size_t naug = 0;
	memset(c, 0, sizeof(*c));
	c->fde_enc = PE_UDATA8;
	c->lsda_enc = PE_OMIT;
	/* 64-bit records are left to libunwind.  */
	if (!rd_u32(&r, &len) || len >= 0xfffffff0u || len > r.end - r.pos)
		return false;
	r.end = r.pos + len;
	c->end = r.end;
	if (!rd_u32(&r, &id) || id != 0 || !rd_u8(&r, &version) ||
	    (version != 1 && version != 3 && version != 4))
		return false;
	for (;;) {
		if (!rd_u8(&r, &ch))
			return false;
		if (!ch)
			break;
		if (naug < 4)
			aug[naug++] = (char)ch;
	}
	if (!rd_uleb(&r, &c->code_align) || !rd_sleb(&r, &c->data_align))
		return false;
	if (version == 1) {
		if (!rd_u8(&r, &ch))
			return false;
		c->ret_col = ch;
	} else if (!rd_uleb(&r, &c->ret_col)) {
		return false;
	}
	size_t i = 0;
	uint64_t u;
	if (aug[0] == 'z') {
		c->z = true;
		if (!rd_uleb(&r, &u))
			return false;
		i++;
	}
	for (; i < naug; i++) {
		uint8_t enc;
		switch (aug[i]) {
		case 'L':
			if (!rd_u8(&r, &c->lsda_enc))
				return false;
			break;
		case 'R':
			if (!rd_u8(&r, &c->fde_enc))
				return false;
			break;
		case 'P':
			if (!rd_u8(&r, &enc))
				return false;
			if (enc != PE_OMIT &&
			    (!encoding_ok(enc, PTR_AUX) ||
			     !rd_encoded(&r, enc, addr, 0, &u)))
				return false;
			break;
		case 'S':
			c->signal = true;
			break;
		default:
			return false;
		}
	}
	c->instr = r.pos;
	return true;
}

static void complex_rule(uint64_t pc, struct cp_rule *out)
{
	memset(out, 0, sizeof(*out));
	out->pc = pc;
	out->kind = CP_RULE_COMPLEX;
}

/* The rule a final state says, as apply_reg_state and x86-64's unw_step
 * would use it.  */
static void rule_of(const struct state *st, uint64_t ret_col, uint64_t pc,
		    struct cp_rule *out)
{
	complex_rule(pc, out);
	/* The CFA: a register plus an offset that fits.  */
	if (st->where[CFA_REG] != W_REG || st->val[CFA_REG] >= 16 ||
	    (int64_t)st->val[CFA_OFF] != (int32_t)st->val[CFA_OFF] ||
	    ret_col != RA_REG)
		return;
	uint16_t how = 0;
	int8_t slot[CP_RULE_NSAVED] = {0};
	size_t saved = 0;
	for (unsigned reg = 0; reg < NUM_REGS; reg++) {
		bool kept = saved < CP_RULE_NSAVED &&
			    cp_rule_saved_reg[saved] == reg;
		uint8_t w = st->where[reg];
		if (!kept) {
			/* rsp is the CFA whatever its rule says (libunwind
			 * reads the CFA for it); any other register must
			 * keep its value.  */
			if (w == W_SAME ||
			    (reg == RSP_REG && (w == W_UNDEF || w == W_CFAREL)))
				continue;
			return;
		}
		unsigned h;
		if (w == W_SAME) {
			h = CP_SAVED_SAME;
		} else if (w == W_UNDEF) {
			h = CP_SAVED_UNDEF;
		} else if (w == W_CFAREL && st->val[reg] % 8 == 0 &&
			   (int64_t)st->val[reg] >= -128 * 8 &&
			   (int64_t)st->val[reg] <= 127 * 8) {
			h = CP_SAVED_CFA;
			slot[saved] = (int8_t)((int64_t)st->val[reg] / 8);
		} else {
			return;
		}
		/* A return address of the same value would read the
		 * register: libunwind's.  */
		if (reg == RA_REG && h == CP_SAVED_SAME)
			return;
		how |= (uint16_t)(h << (2 * saved));
		saved++;
	}
	out->kind = CP_RULE_SIMPLE;
	out->cfa_reg = (uint8_t)st->val[CFA_REG];
	out->cfa_off = (int32_t)st->val[CFA_OFF];
	out->how = how;
	memcpy(out->slot, slot, sizeof(slot));
}

void cp_rule_eval(const uint8_t *data, size_t size, uint64_t addr,
		  uint64_t fde_addr, uint64_t pc_start, uint64_t pc,
		  struct cp_rule *out)
{
	complex_rule(pc, out);
	if (fde_addr < addr || fde_addr - addr >= size)
		return;
	struct rd img = {data, 0, size};
	struct rd r = {data, (size_t)(fde_addr - addr), size};
	uint32_t len, cie_ptr;
	if (!rd_u32(&r, &len) || len == 0 || len >= 0xfffffff0u ||
	    len > r.end - r.pos)
		return;
	r.end = r.pos + len;
	size_t ptr_at = r.pos;
	if (!rd_u32(&r, &cie_ptr) || cie_ptr == 0)
		return;
	/* The CIE is at the pointer's address minus the pointer, read as a
	 * signed number.  */
	uint64_t cie_off = (uint64_t)ptr_at - (uint64_t)(int64_t)(int32_t)cie_ptr;
	struct cie_info c;
	if (cie_off >= size || !parse_cie(&img, (size_t)cie_off, addr, &c) ||
	    c.signal)
		return;
	uint64_t start, range, u;
	/* libunwind 1.6 reads DW_EH_PE_sleb128 as an unsigned LEB128
	 * (dwarf_i.h): its FDE then starts elsewhere than ours.  Its
	 * reading, whatever it is, is the one to keep.  */
	if ((c.fde_enc & PE_FORMAT_MASK) == PE_SLEB128)
		return;
	/* It also takes an encoded 0 as the address 0, pc-relative or not
	 * (dwarf_read_encoded_pointer_inlined).  */
	struct rd raw = r;
	if (!rd_encoded(&raw, c.fde_enc & PE_FORMAT_MASK, addr, 0, &u) ||
	    u == 0)
		return;
	if (!encoding_ok(c.fde_enc, PTR_CODE) ||
	    !rd_encoded(&r, c.fde_enc, addr, 0, &start) ||
	    !rd_encoded(&r, c.fde_enc & PE_FORMAT_MASK, addr, 0, &range) ||
	    start != pc_start || pc - start >= range)
		return;
	size_t instr;
	if (c.z) {
		if (!rd_uleb(&r, &u) || u > r.end - r.pos)
			return;
		instr = r.pos + (size_t)u;
	} else {
		if (c.lsda_enc != PE_OMIT &&
		    (!encoding_ok(c.lsda_enc, PTR_AUX) ||
		     !rd_encoded(&r, c.lsda_enc, addr, 0, &u)))
			return;
		instr = r.pos;
	}
	/* setup_fde: every column "same", and while the CIE's instructions
	 * run, the state DW_CFA_restore goes back to is all zeros
	 * (DWARF_WHERE_UNDEF).  */
	struct state st, initial;
	memset(&initial, 0, sizeof(initial));
	for (unsigned i = 0; i < NCOLS; i++) {
		st.where[i] = W_SAME;
		st.val[i] = 0;
	}
	uint64_t loc = 0;
	struct rd ci = {data, c.instr, c.end};
	if (!run(&ci, &c, &loc, ~(uint64_t)0, &st, &initial))
		return;
	initial = st;
	loc = start;
	struct rd fi = {data, instr, r.end};
	if (!run(&fi, &c, &loc, pc, &st, &initial))
		return;
	rule_of(&st, c.ret_col, pc, out);
}

/* ------------------------------------------------------------ cache */

#define CACHE_SLOTS 4096u   /* a power of two: 96 KiB */
#define PROBES 8u

struct cp_rules {
	struct cp_rule *slots;   /* CACHE_SLOTS, NULL until the first put */
	size_t count;
};

struct cp_rules *cp_rules_new(void)
{
	return calloc(1, sizeof(struct cp_rules));
}

void cp_rules_free(struct cp_rules *rules)
{
	if (!rules)
		return;
	free(rules->slots);
	free(rules);
}

void cp_rules_flush(struct cp_rules *rules)
{
	if (rules->slots && rules->count)
		memset(rules->slots, 0, CACHE_SLOTS * sizeof(*rules->slots));
	rules->count = 0;
}

static size_t slot_of(uint64_t pc)
{
	/* Fibonacci hashing: pcs of one function differ in low bits.  */
	return (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 52) & (CACHE_SLOTS - 1);
}

const struct cp_rule *cp_rules_find(const struct cp_rules *rules, uint64_t pc)
{
	if (!rules->slots)
		return NULL;
	size_t at = slot_of(pc);
	for (size_t i = 0; i < PROBES; i++) {
		const struct cp_rule *r =
			&rules->slots[(at + i) & (CACHE_SLOTS - 1)];
		if (r->kind == CP_RULE_EMPTY)
			return NULL;
		if (r->pc == pc)
			return r;
	}
	return NULL;
}

const struct cp_rule *cp_rules_put(struct cp_rules *rules,
				   const struct cp_rule *rule)
{
	if (!rules->slots) {
		rules->slots = calloc(CACHE_SLOTS, sizeof(*rules->slots));
		if (!rules->slots)
			return NULL;
	}
	size_t at = slot_of(rule->pc);
	struct cp_rule *victim = &rules->slots[at];
	for (size_t i = 0; i < PROBES; i++) {
		struct cp_rule *r = &rules->slots[(at + i) & (CACHE_SLOTS - 1)];
		if (r->kind == CP_RULE_EMPTY) {
			rules->count++;
			victim = r;
			break;
		}
		if (r->pc == rule->pc) {
			victim = r;
			break;
		}
	}
	/* A full neighbourhood: its first slot goes.  Lookups stop at an
	 * empty slot only, and none is made here, so the others stay
	 * found.  */
	*victim = *rule;
	return victim;
}

size_t cp_rules_count(const struct cp_rules *rules)
{
	return rules->count;
}
