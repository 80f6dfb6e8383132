/* Frames no unwind table covers: see nocfi.h.  */
#include "unwind/nocfi.h"

#include <string.h>

/* How far above a frame's stack pointer its frame pointer may lie, and
 * the frame-pointer scan of cp_nocfi_recover_rbp looks: room for large
 * local arrays.  */
#define FP_SCAN_MAX (64 * 1024)
/* How far above a frame's stack pointer a return address is looked for
 * when neither the stack pointer nor a frame pointer leads to one.  */
#define RET_SCAN_MAX (16 * 1024)
/* A direct call into the frame's function calls an address at most this
 * far below the frame's pc.  */
#define MAX_FUNCTION_SIZE (64 * 1024)
/* Below this, no x86-64 code: user space ends at 2^47, or 2^56 with
 * 5-level page tables.  */
#define USER_END (1ull << 56)

/* The stack word at ADDR from the copy.  */
static bool stack_word(const struct cp_snapshot *s, uint64_t addr,
		       uint64_t *out)
{
	if (addr < s->stack_addr || addr - s->stack_addr > s->stack_len ||
	    s->stack_len - (addr - s->stack_addr) < sizeof(*out))
		return false;
	memcpy(out, s->stack + (addr - s->stack_addr), sizeof(*out));
	return true;
}

/* Length of a `call r/m64` (FF /2) from its ModRM byte and the byte
 * after it (the SIB byte when there is one), prefixes not counted.  */
static size_t indirect_call_length(unsigned char modrm, unsigned char sib)
{
	unsigned mod = modrm >> 6, rm = modrm & 7;
	size_t len = 2;
	if (mod == 3)
		return len;
	if (rm == 4) {
		len++;
		if (mod == 0 && (sib & 7) == 5)
			len += 4;
	} else if (mod == 0 && rm == 5) {
		len += 4;       /* rip-relative: call *disp32(%rip) */
	}
	if (mod == 1)
		len += 1;
	else if (mod == 2)
		len += 4;
	return len;
}

enum call_site { NOT_A_CALL, INDIRECT_CALL, DIRECT_CALL };

/* Does a call instruction end at RET, i.e. is RET a return address?  For
 * `call rel32`, its target goes to *TARGET.  */
static enum call_site call_before(const struct cp_nocfi_code *code,
				  uint64_t ret, uint64_t *target)
{
	unsigned char b[8];
	if (ret < sizeof(b) || ret >= USER_END ||
	    !code->read(code->ctx, ret - sizeof(b), b, sizeof(b)))
		return NOT_A_CALL;
	if (b[3] == 0xe8) {
		int32_t rel;
		memcpy(&rel, b + 4, sizeof(rel));
		*target = ret + (uint64_t)(int64_t)rel;
		return DIRECT_CALL;
	}
	for (size_t len = 2; len <= 7; len++) {
		const unsigned char *op = b + sizeof(b) - len;
		if (op[0] == 0xff && ((op[1] >> 3) & 7) == 2 &&
		    indirect_call_length(op[1], len > 2 ? op[2] : 0) == len)
			return INDIRECT_CALL;
	}
	return NOT_A_CALL;
}

/* Is the code at ADDR a PLT stub: [endbr64] [bnd] jmp *disp32(%rip)?  */
static bool plt_stub(const struct cp_nocfi_code *code, uint64_t addr)
{
	unsigned char c[8];
	if (!code->read(code->ctx, addr, c, sizeof(c)))
		return false;
	size_t i = memcmp(c, "\xf3\x0f\x1e\xfa", 4) == 0 ? 4 : 0;
	if (c[i] == 0xf2)
		i++;
	return c[i] == 0xff && c[i + 1] == 0x25;
}

/* Functions the frame at hand is not: the callees of the frames below
 * it, whose entries the direct calls before their return addresses
 * name.  A stale return address is most often one of an earlier call of
 * the same helper (musl's __syscall_cp_c, called by every cancellable
 * system call, lies below most of its callers).  */
struct not_here {
	uint64_t entry[CP_NOCFI_BELOW];
	size_t count;
};

static void callees_below(const struct cp_nocfi_code *code,
			  const uint64_t *below, size_t nbelow,
			  struct not_here *out)
{
	out->count = 0;
	for (size_t i = 0; i < nbelow && i < CP_NOCFI_BELOW; i++) {
		uint64_t target;
		if (call_before(code, below[i], &target) == DIRECT_CALL)
			out->entry[out->count++] = target;
	}
}

/* Is RET the return address of a call into the function that holds PC?
 * An indirect call could have called anything; a direct call must call
 * an address at or below PC in reach (the function's entry: a call to
 * another function is a stale word, or a tail call left the function it
 * called) that is not the entry of a function below (NOT, may be NULL;
 * a function that calls itself directly is not told from a stale word
 * then), or a PLT stub.  */
static bool returns_to(const struct cp_nocfi_code *code, uint64_t ret,
		       uint64_t pc, const struct not_here *not)
{
	uint64_t target;
	switch (call_before(code, ret, &target)) {
	case INDIRECT_CALL:
		return true;
	case DIRECT_CALL:
		for (size_t i = 0; not && i < not->count; i++)
			if (target == not->entry[i])
				return false;
		return (target <= pc && pc - target < MAX_FUNCTION_SIZE) ||
		       plt_stub(code, target);
	default:
		return false;
	}
}

bool cp_nocfi_after_call(const struct cp_nocfi_code *code, uint64_t addr)
{
	uint64_t target;
	return call_before(code, addr, &target) != NOT_A_CALL;
}

int cp_nocfi_caller(const struct cp_nocfi_code *code,
		    const struct cp_snapshot *stack, uint64_t pc, uint64_t sp,
		    const uint64_t *rbp, bool innermost, uint64_t entry,
		    const uint64_t *below, size_t nbelow,
		    struct cp_nocfi_caller *out)
{
	uint64_t ret, saved;
	struct not_here not;
	callees_below(code, below, nbelow, &not);
	/* A function that keeps no frame (a leaf in assembly such as
	 * musl's memset, a PLT stub), or one at its first instruction or
	 * its ret: nothing is saved, every register is still the caller's.
	 * Only where the frame was interrupted: at a call site, the
	 * function's own frame lies below its return address.  */
	if (innermost && stack_word(stack, sp, &ret) &&
	    returns_to(code, ret, pc, &not)) {
		*out = (struct cp_nocfi_caller){
			.how = CP_NOCFI_AT_SP, .ret = ret, .sp = sp + 8,
			.rbp = rbp ? *rbp : 0, .rbp_known = rbp != NULL,
			.regs_kept = true,
		};
		return 1;
	}
	/* The frame-pointer chain: [rbp] = the caller's rbp, [rbp + 8] =
	 * the return address, above the frame's stack pointer.  In code
	 * that uses rbp for something else the return address test fails
	 * (the word is no address after a call into this function).  */
	if (rbp && *rbp >= sp && *rbp - sp <= FP_SCAN_MAX && *rbp % 8 == 0 &&
	    stack_word(stack, *rbp, &saved) &&
	    stack_word(stack, *rbp + 8, &ret) &&
	    returns_to(code, ret, pc, &not)) {
		*out = (struct cp_nocfi_caller){
			.how = CP_NOCFI_FRAME_POINTER, .ret = ret,
			.sp = *rbp + 16, .rbp = saved, .rbp_known = true,
		};
		return 1;
	}
	/* The outermost frame: _start and clone clear rbp for it.  (In
	 * code that uses rbp for something else, 0 ends the stack early
	 * rather than take a guess.)  */
	if (!innermost && rbp && *rbp == 0)
		return 0;
	/* The first word above the stack pointer that is the return
	 * address of a call into this function.  The words of the frame
	 * below its own return address are saved registers and locals; a
	 * local never written may still hold a return address of an
	 * earlier call, seldom of a call into this function (musl's free
	 * keeps one from a call to __unlock, above it).  ENTRY is no return
	 * address: it is the auxiliary vector's AT_ENTRY, above the main
	 * thread's first frame.  */
	for (uint64_t a = (sp + (innermost ? 8 : 0) + 7) & ~(uint64_t)7;
	     a - sp <= RET_SCAN_MAX && stack_word(stack, a, &ret); a += 8) {
		if (ret < 4096 || ret >= USER_END || ret == entry ||
		    !returns_to(code, ret, pc, &not))
			continue;
		/* The caller's rbp, if it is certain: this function pushed
		 * it last (or still has it), or it is a frame-pointer frame
		 * whose prologue had not finished.  */
		bool rbp_kept = rbp && stack_word(stack, a - 8, &saved) &&
				saved == *rbp;
		*out = (struct cp_nocfi_caller){
			.how = CP_NOCFI_SCANNED, .ret = ret, .sp = a + 8,
			.rbp = rbp_kept ? *rbp : 0, .rbp_known = rbp_kept,
		};
		return 1;
	}
	return rbp && *rbp == 0 ? 0 : -1;
}

/* For a function starting at START with the usual frame-pointer
 * prologue — [endbr64] push %rbp; mov %rsp,%rbp; pushes of callee-saved
 * registers; sub $N,%rsp — how far rbp lies above the stack pointer at
 * its call sites (gcc and clang at -O0, and any code built with
 * -fno-omit-frame-pointer that neither pushes arguments nor uses
 * alloca).  */
static bool frame_pointer_offset(const struct cp_nocfi_code *code,
				 uint64_t start, uint64_t *offset)
{
	unsigned char c[24];
	if (!code->read(code->ctx, start, c, sizeof(c)))
		return false;
	size_t i = memcmp(c, "\xf3\x0f\x1e\xfa", 4) == 0 ? 4 : 0;
	if (c[i] != 0x55 || memcmp(c + i + 1, "\x48\x89\xe5", 3) != 0)
		return false;
	i += 4;
	uint64_t below = 0;
	for (;;) {
		if (i + 7 > sizeof(c))
			return false;
		if (c[i] >= 0x50 && c[i] <= 0x57 && c[i] != 0x54) {
			below += 8;          /* push %rbx ... */
			i += 1;
		} else if (c[i] == 0x41 && c[i + 1] >= 0x50 &&
			   c[i + 1] <= 0x57) {
			below += 8;          /* push %r12 ... */
			i += 2;
		} else {
			break;
		}
	}
	if (c[i] == 0x48 && c[i + 1] == 0x83 && c[i + 2] == 0xec) {
		below += c[i + 3];                       /* sub $imm8 */
	} else if (c[i] == 0x48 && c[i + 1] == 0x81 && c[i + 2] == 0xec) {
		uint32_t n;
		memcpy(&n, c + i + 3, sizeof(n));        /* sub $imm32 */
		below += n;
	}
	*offset = below;
	return true;
}

/* A frame-pointer frame keeps [rbp] = the caller's rbp and [rbp+8] = the
 * return address into the caller, so a candidate A above FRAME_SP must
 * hold a return address at A+8, i.e. the address right after a call
 * instruction.  In order of trust:
 *   1. A from the function's own prologue (push %rbp; mov %rsp,%rbp; sub
 *      $N,%rsp: rbp = FRAME_SP + N + pushes), confirmed by a call before
 *      [A+8];
 *   2. the lowest A where [A+8] follows a direct call to START itself;
 *   3. the lowest A where [A+8] follows some call, [A] is a stack address
 *      above A (the caller's rbp) and [[A]+8] follows a call too (*STRONG
 *      false: the caller checks the result further).
 * A stale pair left in the frame's uninitialised locals could pass 2 or
 * 3; the scan goes upwards so it cannot pass over the real one into the
 * callers' frames.  */
bool cp_nocfi_recover_rbp(const struct cp_nocfi_code *code,
			  const struct cp_snapshot *s, uint64_t frame_sp,
			  uint64_t start, uint64_t *rbp, bool *strong)
{
	uint64_t offset, ret, saved, target, hi = s->stack_addr + s->stack_len;
	*strong = true;
	if (start && frame_pointer_offset(code, start, &offset) &&
	    offset <= FP_SCAN_MAX && stack_word(s, frame_sp + offset + 8, &ret) &&
	    call_before(code, ret, &target) != NOT_A_CALL) {
		*rbp = frame_sp + offset;
		return true;
	}
	uint64_t weak = 0;
	for (uint64_t a = (frame_sp + 7) & ~(uint64_t)7;
	     a - frame_sp <= FP_SCAN_MAX && stack_word(s, a + 8, &ret); a += 8) {
		enum call_site kind = call_before(code, ret, &target);
		if (kind == NOT_A_CALL)
			continue;
		if (kind == DIRECT_CALL && start && target == start) {
			*rbp = a;
			return true;
		}
		uint64_t caller_ret;
		if (!weak && stack_word(s, a, &saved) && saved > a &&
		    saved < hi && saved % 8 == 0 &&
		    stack_word(s, saved + 8, &caller_ret) &&
		    call_before(code, caller_ret, &target) != NOT_A_CALL)
			weak = a;
	}
	if (!weak)
		return false;
	*strong = false;
	*rbp = weak;
	return true;
}
