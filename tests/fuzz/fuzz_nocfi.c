/* Fuzz the callers of frames without CFI (src/unwind/nocfi.h): cp_nocfi_caller,
 * cp_nocfi_recover_rbp, cp_nocfi_after_call.
 *
 * The input is what a target controls: its registers, a copy of its stack
 * and the code those point into.  Layout: 8 bytes each of pc, sp, rbp and
 * a word of flags (rbp known, innermost, how many "below" return
 * addresses), then 256 bytes of code mapped executable at CODE_BASE, then
 * the stack copy at STACK_BASE (at most 64 KiB).  The pc, sp, rbp and
 * the below addresses are taken as offsets from the bases when small,
 * as given otherwise (wrapping sums, addresses outside everything).
 * What must hold, beyond no crash, leak or undefined behaviour:
 *   - a caller found lies above the frame (its sp above SP), its return
 *     address is the word just below its sp in the stack copy and follows
 *     a call instruction in the code (cp_nocfi_after_call); a scan never
 *     takes the entry point;
 *   - a caller at the stack pointer keeps every register, and its sp is
 *     SP + 8; one by the frame pointer has its sp at rbp + 16 and the
 *     caller's rbp the word at rbp;
 *   - a recovered rbp has its return address slot (rbp + 8) in the copy.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/nocfi.h"
#include "fuzzutil.h"

#define CODE_BASE 0x400000ull
#define CODE_SIZE 256u
#define STACK_BASE 0x7ffd00000000ull
#define STACK_MAX (64u * 1024)
#define HEADER 32u

static const uint8_t *code_bytes;
static size_t code_len;

static bool read_code(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	if (addr < CODE_BASE || addr - CODE_BASE > code_len ||
	    code_len - (addr - CODE_BASE) < len)
		return false;
	memcpy(buf, code_bytes + (addr - CODE_BASE), len);
	return true;
}

static uint64_t word(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* Small values are offsets from BASE, so most inputs point somewhere.  */
static uint64_t place(uint64_t v, uint64_t base)
{
	return v < 0x20000 ? base + v : v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < HEADER + CODE_SIZE)
		return 0;
	uint64_t flags = word(data + 24);
	uint64_t pc = place(word(data), CODE_BASE);
	uint64_t sp = place(word(data + 8), STACK_BASE);
	uint64_t rbp = place(word(data + 16), STACK_BASE);
	code_bytes = data + HEADER;
	code_len = CODE_SIZE;
	size_t stack_len = size - HEADER - CODE_SIZE;
	if (stack_len > STACK_MAX)
		stack_len = STACK_MAX;
	unsigned char *stack = malloc(stack_len ? stack_len : 1);
	if (!stack)
		return 0;
	memcpy(stack, data + HEADER + CODE_SIZE, stack_len);
	struct cp_snapshot snap;
	memset(&snap, 0, sizeof(snap));
	snap.stack = stack;
	snap.stack_len = stack_len;
	snap.stack_cap = stack_len;
	snap.stack_addr = STACK_BASE;
	const struct cp_nocfi_code code = {read_code, NULL};

	/* Return addresses below: code offsets from the flags' bytes.  */
	uint64_t below[CP_NOCFI_BELOW];
	size_t nbelow = (flags >> 8) % (CP_NOCFI_BELOW + 1);
	for (size_t i = 0; i < nbelow; i++)
		below[i] = CODE_BASE + ((flags >> (16 + i)) & 0xff);
	bool rbp_known = flags & 1, innermost = flags & 2;
	uint64_t entry = flags & 4 ? CODE_BASE + ((flags >> 40) & 0xff) : 0;

	struct cp_nocfi_caller c;
	int found = cp_nocfi_caller(&code, &snap, pc, sp,
				    rbp_known ? &rbp : NULL, innermost, entry,
				    below, nbelow, &c);
	FUZZ_CHECK(found >= -1 && found <= 1, "result %d", found);
	if (found == 1) {
		FUZZ_CHECK(c.sp > sp, "caller's sp %#llx not above %#llx",
			   (unsigned long long)c.sp, (unsigned long long)sp);
		FUZZ_CHECK(c.sp - 8 >= STACK_BASE &&
				   c.sp - STACK_BASE <= stack_len,
			   "return address slot %#llx outside the copy",
			   (unsigned long long)(c.sp - 8));
		FUZZ_CHECK(word(stack + (c.sp - 8 - STACK_BASE)) == c.ret,
			   "the return address is not the word below the sp");
		FUZZ_CHECK(cp_nocfi_after_call(&code, c.ret),
			   "return address %#llx follows no call",
			   (unsigned long long)c.ret);
		if (c.how == CP_NOCFI_SCANNED)
			FUZZ_CHECK(c.ret != entry, "the entry point scanned");
		if (c.how == CP_NOCFI_AT_SP)
			FUZZ_CHECK(innermost && c.regs_kept && c.sp == sp + 8,
				   "at the stack pointer, but not so");
		if (c.how == CP_NOCFI_FRAME_POINTER) {
			FUZZ_CHECK(rbp_known && c.sp == rbp + 16 &&
					   c.rbp_known &&
					   c.rbp == word(stack + (rbp - STACK_BASE)),
				   "by the frame pointer, but not so");
		}
	}
	uint64_t recovered;
	bool strong;
	if (cp_nocfi_recover_rbp(&code, &snap, sp, flags & 8 ? pc : 0,
				 &recovered, &strong))
		FUZZ_CHECK(recovered + 8 >= STACK_BASE &&
				   recovered + 8 - STACK_BASE + 8 <= stack_len,
			   "recovered rbp %#llx: no return address slot above "
			   "it in the copy", (unsigned long long)recovered);
	free(stack);
	return 0;
}
