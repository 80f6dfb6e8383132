/* The x86-64 System V calling convention on a struct user_regs_struct,
 * for code outside src/arch/ that must not name registers: a function's
 * integer arguments at its first instruction, its return value after it
 * returned, and moving a thread's program counter and stack pointer
 * (heap mode continues a thread past an emulated instruction or a return
 * it caught).  */
#ifndef CPROF_ARCH_ABI_H
#define CPROF_ARCH_ABI_H

#include <stdint.h>
#include <sys/user.h>

/* Integer arguments passed in registers.  */
#define CP_ABI_REG_ARGS 6

/* Integer argument N (0-based, < CP_ABI_REG_ARGS) of a function whose
 * first instruction REGS are stopped at; 0 for N out of range.  */
static inline uint64_t cp_abi_arg(const struct user_regs_struct *regs,
				  unsigned n)
{
	switch (n) {
	case 0: return regs->rdi;
	case 1: return regs->rsi;
	case 2: return regs->rdx;
	case 3: return regs->rcx;
	case 4: return regs->r8;
	case 5: return regs->r9;
	default: return 0;
	}
}

/* The integer or pointer a function returned, REGS taken right after
 * its return.  */
static inline uint64_t cp_abi_retval(const struct user_regs_struct *regs)
{
	return regs->rax;
}

/* Bytes a call instruction pushes (the return address).  */
#define CP_ABI_RET_SLOT 8

static inline void cp_abi_set_pc(struct user_regs_struct *regs, uint64_t pc)
{
	regs->rip = pc;
}

static inline void cp_abi_set_sp(struct user_regs_struct *regs, uint64_t sp)
{
	regs->rsp = sp;
}

#endif
