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

/* The registers a perf sample copies (PERF_SAMPLE_REGS_USER), as bits
 * of perf's x86-64 numbering (asm/perf_regs.h): ax bx cx dx si di bp sp
 * ip flags (0-9) and r8-r15 (16-23); not the segment registers, which
 * the kernel refuses or the unwinder does not need.  A sample gives
 * their values in that order.  */
#define CP_REGS_PERF_MASK (0x3ffull | (0xffull << 16))
#define CP_REGS_PERF_COUNT 18

static inline void cp_regs_from_perf(const uint64_t *v,
				     struct user_regs_struct *regs)
{
	*regs = (struct user_regs_struct){
		.rax = v[0], .rbx = v[1], .rcx = v[2], .rdx = v[3],
		.rsi = v[4], .rdi = v[5], .rbp = v[6], .rsp = v[7],
		.rip = v[8], .eflags = v[9],
		.r8 = v[10], .r9 = v[11], .r10 = v[12], .r11 = v[13],
		.r12 = v[14], .r13 = v[15], .r14 = v[16], .r15 = v[17],
		.orig_rax = (unsigned long long)-1,
	};
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
