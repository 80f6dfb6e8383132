/* Fuzz the x86-64 decoder of displaced instructions, cp_insn_decode(),
 * and its emulator, cp_insn_emulate().
 *
 * The input: the code bytes first (at most CP_INSN_MAX are decoded);
 * the bytes after the instruction fill the register set and choose where
 * a small window of readable and writable memory lies, so that a push
 * or a rip-relative compare sometimes reaches it and sometimes does not.
 * What must hold, beyond no crash or undefined behaviour:
 *   - decoding depends only on the instruction's own bytes: a copy of
 *     exactly its length decodes the same (ASan sees any read past it),
 *     one byte less does not decode, more bytes change nothing;
 *   - the fields are in range (length, width, register numbers);
 *   - emulation either fails on a memory access and leaves the registers
 *     as they were, or moves rip past the instruction (or to the jump's
 *     target) and changes no register the instruction does not name;
 *     push stores the old value at the new rsp, mov sets the destination
 *     the way the CPU does.  (tests/check_insn.c compares every form
 *     with the real CPU.)  */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/insn.h"
#include "fuzzutil.h"

#define WINDOW 64
#define FLAGS_ARITH 0x8d5ULL /* CF PF AF ZF SF OF */

struct memory {
	uint64_t base;
	uint8_t bytes[WINDOW];
};

static int access_window(struct memory *m, uint64_t addr, size_t len)
{
	if (addr < m->base || addr - m->base > WINDOW ||
	    len > WINDOW - (addr - m->base))
		return -1;
	return (int)(addr - m->base);
}

static int mem_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct memory *m = arg;
	int at = access_window(m, addr, len);
	if (at < 0)
		return -1;
	memcpy(buf, m->bytes + at, len);
	return 0;
}

static int mem_write(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct memory *m = arg;
	int at = access_window(m, addr, len);
	if (at < 0)
		return -1;
	memcpy(m->bytes + at, buf, len);
	return 0;
}

static bool same_insn(const struct cp_insn *a, const struct cp_insn *b)
{
	return a->kind == b->kind && a->alu == b->alu && a->len == b->len &&
	       a->width == b->width && a->dst == b->dst && a->src == b->src &&
	       a->imm == b->imm && a->disp == b->disp;
}

static void check_decode(const uint8_t *data, size_t avail,
			 const struct cp_insn *insn)
{
	FUZZ_CHECK(insn->len >= 1 && insn->len <= avail, "length %u of %zu",
		   insn->len, avail);
	FUZZ_CHECK(insn->kind == CP_INSN_NOP || insn->width == 1 ||
			   insn->width == 4 || insn->width == 8,
		   "width %u", insn->width);
	FUZZ_CHECK(insn->dst < 16 && insn->src < 16, "registers %u, %u",
		   insn->dst, insn->src);
	FUZZ_CHECK(insn->kind <= CP_INSN_JMP && insn->alu <= CP_ALU_TEST,
		   "kind %d, alu %d", insn->kind, insn->alu);

	uint8_t *exact = malloc(insn->len);
	FUZZ_CHECK(exact != NULL, "out of memory");
	memcpy(exact, data, insn->len);
	struct cp_insn again;
	FUZZ_CHECK(cp_insn_decode(exact, insn->len, &again) == 0 &&
			   same_insn(insn, &again),
		   "decodes differently from its own %u bytes", insn->len);
	FUZZ_CHECK(cp_insn_decode(exact, insn->len - 1u, &again) < 0,
		   "decodes from %u bytes of %u", insn->len - 1u, insn->len);
	free(exact);
	for (size_t n = insn->len + 1u; n <= avail; n++)
		FUZZ_CHECK(cp_insn_decode(data, n, &again) == 0 &&
				   same_insn(insn, &again),
			   "decodes differently with %zu bytes", n);
}

static void check_emulate(const struct cp_insn *insn, const uint8_t *rest,
			  size_t rest_len)
{
	struct user_regs_struct before, regs;
	struct memory mem;
	memset(&before, 0x5a, sizeof(before));
	memcpy(&before, rest, rest_len < sizeof(before) ? rest_len
							: sizeof(before));
	rest += rest_len < sizeof(before) ? rest_len : sizeof(before);
	rest_len -= rest_len < sizeof(before) ? rest_len : sizeof(before);
	uint8_t where = rest_len ? rest[0] : 0;
	memset(mem.bytes, 0xa5, sizeof(mem.bytes));
	if (rest_len > 1)
		memcpy(mem.bytes, rest + 1,
		       rest_len - 1 < WINDOW ? rest_len - 1 : WINDOW);

	/* The address the instruction would touch, and the window placed
	 * around it, or a little off.  */
	uint64_t address = before.rip;
	uint64_t next = address + insn->len;
	uint64_t target = insn->kind == CP_INSN_PUSH ? before.rsp - 8
			  : next + (uint64_t)(int64_t)insn->disp;
	mem.base = target - (uint64_t)(where % (WINDOW + 16));

	regs = before;
	struct memory mem_before = mem;
	int rc = cp_insn_emulate(insn, address, &regs, mem_read, mem_write,
				 &mem);
	if (rc < 0) {
		FUZZ_CHECK(rc == -CP_E_SYS, "unexpected error %s",
			   cp_strerror(rc));
		FUZZ_CHECK(insn->kind == CP_INSN_PUSH ||
				   insn->kind == CP_INSN_CMP_MI,
			   "kind %d failed without touching memory",
			   insn->kind);
		FUZZ_CHECK(memcmp(&regs, &before, sizeof(regs)) == 0,
			   "registers changed by a failed emulation");
		FUZZ_CHECK(memcmp(&mem, &mem_before, sizeof(mem)) == 0,
			   "memory changed by a failed emulation");
		return;
	}

	uint64_t want_rip = insn->kind == CP_INSN_JMP
				    ? next + (uint64_t)insn->imm
				    : next;
	FUZZ_CHECK(regs.rip == want_rip, "rip 0x%llx, expected 0x%llx",
		   regs.rip, (unsigned long long)want_rip);

	/* What may change: the destination, rsp for a push, the arithmetic
	 * flags for ALU and compare forms, rip.  */
	struct user_regs_struct expect = before;
	expect.rip = regs.rip;
	bool writes_dst = insn->kind == CP_INSN_MOV_RR ||
			  insn->kind == CP_INSN_MOV_RI ||
			  (insn->kind == CP_INSN_ALU_RR &&
			   insn->alu != CP_ALU_CMP && insn->alu != CP_ALU_TEST) ||
			  (insn->kind == CP_INSN_ALU_RI && insn->alu != CP_ALU_CMP);
	if (writes_dst)
		*cp_insn_reg(&expect, insn->dst) = *cp_insn_reg(&regs, insn->dst);
	if (insn->kind == CP_INSN_ALU_RR || insn->kind == CP_INSN_ALU_RI ||
	    insn->kind == CP_INSN_CMP_MI) {
		expect.eflags = (before.eflags & ~FLAGS_ARITH) |
				(regs.eflags & FLAGS_ARITH);
	}
	if (insn->kind == CP_INSN_PUSH) {
		expect.rsp = before.rsp - 8;
		uint64_t stored;
		FUZZ_CHECK(mem_read(&mem, before.rsp - 8, &stored, 8) == 0,
			   "push stored outside the window");
		FUZZ_CHECK(stored == *cp_insn_reg(&before, insn->src),
			   "push stored 0x%llx", (unsigned long long)stored);
	}
	FUZZ_CHECK(memcmp(&regs, &expect, sizeof(regs)) == 0,
		   "kind %d changed a register it does not name", insn->kind);

	uint64_t dst = *cp_insn_reg(&regs, insn->dst);
	if (insn->kind == CP_INSN_MOV_RR) {
		uint64_t src = *cp_insn_reg(&before, insn->src);
		FUZZ_CHECK(dst == (insn->width == 4 ? (uint32_t)src : src),
			   "mov set 0x%llx from 0x%llx",
			   (unsigned long long)dst, (unsigned long long)src);
	}
	if (insn->kind == CP_INSN_MOV_RI)
		FUZZ_CHECK(dst == (insn->width == 4 ? (uint32_t)insn->imm
						    : (uint64_t)insn->imm),
			   "mov $imm set 0x%llx", (unsigned long long)dst);
	if (writes_dst && insn->width == 4)
		FUZZ_CHECK(dst >> 32 == 0,
			   "a 32-bit result left the upper half set");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t avail = size < CP_INSN_MAX ? size : CP_INSN_MAX;
	struct cp_insn insn;
	int rc = cp_insn_decode(data, avail, &insn);
	if (rc < 0) {
		FUZZ_CHECK(rc == -CP_E_INVAL, "unexpected error %s",
			   cp_strerror(rc));
		return 0;
	}
	check_decode(data, avail, &insn);
	check_emulate(&insn, data + insn.len, size - insn.len);
	return 0;
}
