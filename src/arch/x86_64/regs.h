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

/* Parking a thread: the bytes of a syscall instruction, its length,
 * and the registers that make the thread run the one at AT as pause(2)
 * (no restart of the call it may have been in: orig_rax -1).  */
#define CP_REGS_SYSCALL_INSN "\x0f\x05"
#define CP_REGS_SYSCALL_LEN 2

static inline void cp_regs_park(struct user_regs_struct *regs, uint64_t at)
{
	regs->rip = at;
	regs->rax = 34; /* __NR_pause */
	regs->orig_rax = (unsigned long long)-1;
}

#endif
