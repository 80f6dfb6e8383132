/* x86-64 instructions displaced by a breakpoint: decode the few forms
 * that allocator entry points start with, and emulate them on a register
 * set, so a thread that hit an int3 of ours continues past the original
 * instruction without the byte ever being put back (no other thread can
 * run through an unpatched entry unseen, and no thread is single-stepped).
 *
 * glibc 2.36 starts malloc with `push %r12`, free with `test %rdi,%rdi`,
 * reallocarray with `mov %rsi,%rax`, memalign and friends with
 * `cmpb $0x0,disp(%rip)`; jemalloc 5.3 starts malloc with
 * `cmp $0x1000,%rdi` and free with `mov %rdi,%rax`.  Anything else is
 * reported unsupported and the caller falls back to stepping the
 * original instruction with every other thread stopped.
 *
 * Pure code: memory is reached through callbacks, so the unit tests run
 * each supported form on the real CPU and compare.  */
#ifndef CPROF_INSN_H
#define CPROF_INSN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/user.h>

enum cp_insn_kind {
	CP_INSN_NOP,       /* endbr64, nop: nothing but the length */
	CP_INSN_PUSH,      /* push %reg */
	CP_INSN_MOV_RR,    /* mov %src,%dst (32 or 64 bits) */
	CP_INSN_MOV_RI,    /* mov $imm,%dst */
	CP_INSN_ALU_RR,    /* test/xor/and/or/add/sub/cmp %src,%dst */
	CP_INSN_ALU_RI,    /* add/or/and/sub/xor/cmp $imm,%dst */
	CP_INSN_CMP_MI,    /* cmpb/cmpl/cmpq $imm,disp(%rip) */
	CP_INSN_JMP,       /* jmp rel8/rel32 */
};

enum cp_insn_alu { CP_ALU_ADD, CP_ALU_OR, CP_ALU_AND, CP_ALU_SUB,
		   CP_ALU_XOR, CP_ALU_CMP, CP_ALU_TEST };

/* A decoded instruction.  */
struct cp_insn {
	enum cp_insn_kind kind;
	enum cp_insn_alu alu;
	uint8_t len;        /* bytes */
	uint8_t width;      /* operand bytes: 1, 4 or 8 */
	uint8_t dst, src;   /* register numbers, 0 = rax ... 15 = r15 */
	int64_t imm;        /* sign-extended immediate, or jump displacement */
	int32_t disp;       /* rip-relative displacement (CMP_MI) */
};

/* The longest instruction cp_insn_decode needs to see.  */
#define CP_INSN_MAX 15

/* Decode the instruction in CODE (LEN bytes available).  Returns 0, or
 * -CP_E_INVAL when it is not one of the supported forms.  */
int cp_insn_decode(const uint8_t *code, size_t len, struct cp_insn *insn);

/* Reads or writes LEN bytes of target memory at ADDR; 0 or -1.  */
typedef int (*cp_insn_mem)(void *arg, uint64_t addr, void *buf, size_t len);

/* Execute INSN, located at ADDRESS, on REGS: registers, flags, the stack
 * (through WRITE) and rip all end as the CPU would leave them.  Returns 0,
 * or -CP_E_SYS when a memory access failed (REGS is then unchanged).  */
int cp_insn_emulate(const struct cp_insn *insn, uint64_t address,
		    struct user_regs_struct *regs, cp_insn_mem read,
		    cp_insn_mem write, void *arg);

/* The field of REGS holding register NUM (0 = rax ... 15 = r15).  */
unsigned long long *cp_insn_reg(struct user_regs_struct *regs, unsigned num);

#endif
