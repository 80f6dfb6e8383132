/* Decoding and emulation of the instructions a breakpoint displaces.
 * See include/cprof/insn.h for why emulation and which forms.  */
#include "cprof/insn.h"

#include <stdbool.h>
#include <string.h>

#include "cprof/error.h"

#define FL_CF 0x001u
#define FL_PF 0x004u
#define FL_AF 0x010u
#define FL_ZF 0x040u
#define FL_SF 0x080u
#define FL_OF 0x800u
#define FL_ARITH (FL_CF | FL_PF | FL_AF | FL_ZF | FL_SF | FL_OF)

unsigned long long *cp_insn_reg(struct user_regs_struct *r, unsigned num)
{
	switch (num & 15) {
	case 0: return &r->rax;
	case 1: return &r->rcx;
	case 2: return &r->rdx;
	case 3: return &r->rbx;
	case 4: return &r->rsp;
	case 5: return &r->rbp;
	case 6: return &r->rsi;
	case 7: return &r->rdi;
	case 8: return &r->r8;
	case 9: return &r->r9;
	case 10: return &r->r10;
	case 11: return &r->r11;
	case 12: return &r->r12;
	case 13: return &r->r13;
	case 14: return &r->r14;
	default: return &r->r15;
	}
}

static int64_t read_le(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	/* sign-extend */
	if (n < 8 && (v >> (8 * n - 1)) & 1)
		v |= ~0ULL << (8 * n);
	return (int64_t)v;
}

/* The ALU operation of the "group 1" opcodes (reg field of the ModRM
 * byte with 0x80/0x81/0x83), or -1 for adc/sbb, which need CF in.  */
static int group1_alu(unsigned reg)
{
	static const int map[8] = { CP_ALU_ADD, CP_ALU_OR, -1, -1,
				    CP_ALU_AND, CP_ALU_SUB, CP_ALU_XOR,
				    CP_ALU_CMP };
	return map[reg & 7];
}

/* The ALU operation of the two-register opcodes 01..3b, 85.  */
static int rr_alu(uint8_t op, bool *reg_is_dst)
{
	*reg_is_dst = (op & 2) != 0;
	switch (op) {
	case 0x01: case 0x03: return CP_ALU_ADD;
	case 0x09: case 0x0b: return CP_ALU_OR;
	case 0x21: case 0x23: return CP_ALU_AND;
	case 0x29: case 0x2b: return CP_ALU_SUB;
	case 0x31: case 0x33: return CP_ALU_XOR;
	case 0x39: case 0x3b: return CP_ALU_CMP;
	case 0x85: *reg_is_dst = false; return CP_ALU_TEST;
	default: return -1;
	}
}

int cp_insn_decode(const uint8_t *code, size_t len, struct cp_insn *insn)
{
	memset(insn, 0, sizeof(*insn));
	if (len >= 4 && code[0] == 0xf3 && code[1] == 0x0f &&
	    code[2] == 0x1e && code[3] == 0xfa) {
		insn->kind = CP_INSN_NOP; /* endbr64 */
		insn->len = 4;
		return 0;
	}
	size_t i = 0;
	uint8_t rex = 0;
	if (len > 0 && (code[0] & 0xf0) == 0x40) {
		rex = code[0];
		i = 1;
	}
	if (i >= len)
		return -CP_E_INVAL;
	bool w = rex & 8;
	unsigned r = (rex & 4) ? 8 : 0, b = (rex & 1) ? 8 : 0;
	uint8_t op = code[i++];
	insn->width = w ? 8 : 4;

	if (op == 0x90 && !rex) {
		insn->kind = CP_INSN_NOP;
		insn->len = 1;
		return 0;
	}
	if (op >= 0x50 && op <= 0x57) {
		insn->kind = CP_INSN_PUSH;
		insn->src = (uint8_t)((op & 7) | b);
		insn->width = 8;
		insn->len = (uint8_t)i;
		return 0;
	}
	if (op >= 0xb8 && op <= 0xbf) {
		size_t n = w ? 8 : 4;
		if (i + n > len)
			return -CP_E_INVAL;
		insn->kind = CP_INSN_MOV_RI;
		insn->dst = (uint8_t)((op & 7) | b);
		insn->imm = read_le(code + i, n);
		if (!w)
			insn->imm = (int64_t)(uint32_t)insn->imm;
		insn->len = (uint8_t)(i + n);
		return 0;
	}
	if (op == 0xe9 || op == 0xeb) {
		size_t n = op == 0xe9 ? 4 : 1;
		if (rex || i + n > len)
			return -CP_E_INVAL;
		insn->kind = CP_INSN_JMP;
		insn->imm = read_le(code + i, n);
		insn->len = (uint8_t)(i + n);
		return 0;
	}
	if (i >= len)
		return -CP_E_INVAL;
	uint8_t modrm = code[i++];
	unsigned mod = modrm >> 6, reg = (modrm >> 3) & 7, rm = modrm & 7;

	if (mod == 3) {
		bool reg_is_dst;
		int alu = rr_alu(op, &reg_is_dst);
		if (alu >= 0) {
			insn->kind = CP_INSN_ALU_RR;
			insn->alu = (enum cp_insn_alu)alu;
			insn->dst = (uint8_t)(reg_is_dst ? reg | r : rm | b);
			insn->src = (uint8_t)(reg_is_dst ? rm | b : reg | r);
			insn->len = (uint8_t)i;
			return 0;
		}
		if (op == 0x89 || op == 0x8b) {
			insn->kind = CP_INSN_MOV_RR;
			insn->dst = (uint8_t)(op == 0x8b ? reg | r : rm | b);
			insn->src = (uint8_t)(op == 0x8b ? rm | b : reg | r);
			insn->len = (uint8_t)i;
			return 0;
		}
		if (op == 0x81 || op == 0x83) {
			int g = group1_alu(reg);
			size_t n = op == 0x81 ? 4 : 1;
			if (g < 0 || i + n > len)
				return -CP_E_INVAL;
			insn->kind = CP_INSN_ALU_RI;
			insn->alu = (enum cp_insn_alu)g;
			insn->dst = (uint8_t)(rm | b);
			insn->imm = read_le(code + i, n);
			insn->len = (uint8_t)(i + n);
			return 0;
		}
		if (op == 0xc7 && reg == 0) {
			if (i + 4 > len)
				return -CP_E_INVAL;
			insn->kind = CP_INSN_MOV_RI;
			insn->dst = (uint8_t)(rm | b);
			insn->imm = read_le(code + i, 4);
			if (!w)
				insn->imm = (int64_t)(uint32_t)insn->imm;
			insn->len = (uint8_t)(i + 4);
			return 0;
		}
		return -CP_E_INVAL;
	}
	/* cmp $imm,disp32(%rip): mod 00, r/m 101.  */
	if (mod == 0 && rm == 5 && reg == 7 &&
	    (op == 0x80 || op == 0x81 || op == 0x83)) {
		size_t n = op == 0x81 ? 4 : 1;
		if (i + 4 + n > len)
			return -CP_E_INVAL;
		insn->kind = CP_INSN_CMP_MI;
		insn->alu = CP_ALU_CMP;
		insn->width = op == 0x80 ? 1 : insn->width;
		insn->disp = (int32_t)read_le(code + i, 4);
		insn->imm = read_le(code + i + 4, n);
		insn->len = (uint8_t)(i + 4 + n);
		return 0;
	}
	return -CP_E_INVAL;
}

static uint64_t width_mask(unsigned width)
{
	return width >= 8 ? ~0ULL : (1ULL << (8 * width)) - 1;
}

static bool parity_even(uint64_t v)
{
	return !__builtin_parity((unsigned)(v & 0xff));
}

/* Compute A op B in WIDTH bytes; the result in *OUT, the new arithmetic
 * flags merged into *FLAGS.  */
static void alu(enum cp_insn_alu op, uint64_t a, uint64_t b, unsigned width,
		uint64_t *out, unsigned long long *flags)
{
	uint64_t mask = width_mask(width);
	uint64_t sign = 1ULL << (8 * width - 1);
	a &= mask;
	b &= mask;
	uint64_t res = 0;
	unsigned f = 0;
	switch (op) {
	case CP_ALU_ADD:
		res = (a + b) & mask;
		if (res < a)
			f |= FL_CF;
		if ((a ^ res) & (b ^ res) & sign)
			f |= FL_OF;
		f |= (a ^ b ^ res) & FL_AF;
		break;
	case CP_ALU_SUB:
	case CP_ALU_CMP:
		res = (a - b) & mask;
		if (a < b)
			f |= FL_CF;
		if ((a ^ b) & (a ^ res) & sign)
			f |= FL_OF;
		f |= (a ^ b ^ res) & FL_AF;
		break;
	case CP_ALU_AND:
	case CP_ALU_TEST:
		res = a & b;
		break;
	case CP_ALU_OR:
		res = a | b;
		break;
	case CP_ALU_XOR:
		res = a ^ b;
		break;
	}
	if (res == 0)
		f |= FL_ZF;
	if (res & sign)
		f |= FL_SF;
	if (parity_even(res))
		f |= FL_PF;
	*flags = (*flags & ~(unsigned long long)FL_ARITH) | f;
	*out = res;
}

/* Write VALUE (WIDTH bytes) to a register the way the CPU does: a 32-bit
 * result clears the upper half.  */
static void set_reg(struct user_regs_struct *regs, unsigned num,
		    uint64_t value, unsigned width)
{
	*cp_insn_reg(regs, num) = width == 4 ? (uint32_t)value : value;
}

int cp_insn_emulate(const struct cp_insn *insn, uint64_t address,
		    struct user_regs_struct *regs, cp_insn_mem read,
		    cp_insn_mem write, void *arg)
{
	struct user_regs_struct r = *regs;
	uint64_t next = address + insn->len;
	uint64_t res;
	switch (insn->kind) {
	case CP_INSN_NOP:
		break;
	case CP_INSN_PUSH: {
		uint64_t value = *cp_insn_reg(&r, insn->src);
		if (write(arg, r.rsp - 8, &value, 8) < 0)
			return -CP_E_SYS;
		r.rsp -= 8;
		break;
	}
	case CP_INSN_MOV_RR:
		set_reg(&r, insn->dst, *cp_insn_reg(&r, insn->src),
			insn->width);
		break;
	case CP_INSN_MOV_RI:
		set_reg(&r, insn->dst, (uint64_t)insn->imm, insn->width);
		break;
	case CP_INSN_ALU_RR:
	case CP_INSN_ALU_RI: {
		uint64_t a = *cp_insn_reg(&r, insn->dst);
		uint64_t b = insn->kind == CP_INSN_ALU_RR
				     ? *cp_insn_reg(&r, insn->src)
				     : (uint64_t)insn->imm;
		alu(insn->alu, a, b, insn->width, &res, &r.eflags);
		if (insn->alu != CP_ALU_CMP && insn->alu != CP_ALU_TEST)
			set_reg(&r, insn->dst, res, insn->width);
		break;
	}
	case CP_INSN_CMP_MI: {
		uint64_t value = 0;
		if (read(arg, next + (int64_t)insn->disp, &value,
			 insn->width) < 0)
			return -CP_E_SYS;
		alu(CP_ALU_CMP, value, (uint64_t)insn->imm, insn->width, &res,
		    &r.eflags);
		break;
	}
	case CP_INSN_JMP:
		next += (uint64_t)insn->imm;
		break;
	}
	r.rip = next;
	*regs = r;
	return 0;
}
