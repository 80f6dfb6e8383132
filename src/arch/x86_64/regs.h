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

/* Parking a thread just back from a system call (a new thread at its
 * first stop, back from clone): the bytes of a syscall instruction, the
 * length of that instruction, and the registers that make the thread run
 * it again as pause(2) (no restart: orig_rax -1).  */
#define CP_REGS_SYSCALL_INSN "\x0f\x05"
#define CP_REGS_SYSCALL_LEN 2

static inline void cp_regs_park(struct user_regs_struct *regs)
{
	regs->rip -= CP_REGS_SYSCALL_LEN;
	regs->rax = 34; /* __NR_pause */
	regs->orig_rax = (unsigned long long)-1;
}

#endif
