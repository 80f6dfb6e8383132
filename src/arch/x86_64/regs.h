/* x86-64 registers by role, for code outside src/arch/ that must not name
 * them: the program counter, the stack pointer, the frame pointer.  */
#ifndef CPROF_ARCH_REGS_H
#define CPROF_ARCH_REGS_H

#include <stdint.h>
#include <sys/user.h>

static inline uint64_t cp_regs_pc(const struct user_regs_struct *regs)
{
	return regs->rip;
}

static inline uint64_t cp_regs_sp(const struct user_regs_struct *regs)
{
	return regs->rsp;
}

static inline uint64_t cp_regs_fp(const struct user_regs_struct *regs)
{
	return regs->rbp;
}

#endif
