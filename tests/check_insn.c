/* Unit tests for the breakpoint-displaced instruction decoder and emulator
 * (cprof/insn.h).
 *
 * Decoding is checked against the exact bytes found at allocator entry
 * points (glibc 2.36, jemalloc 5.3) and against forms that must be
 * refused.  Emulation is checked against the CPU itself: each supported
 * form is assembled into a small stub that loads all 16 general registers
 * and the arithmetic flags from an input array, executes the instruction,
 * and stores every register and the flags to an output array.  The same
 * input goes through cp_insn_emulate, and the two results must agree.  */
#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/user.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/insn.h"

#define FL_CF 0x001ull
#define FL_PF 0x004ull
#define FL_AF 0x010ull
#define FL_ZF 0x040ull
#define FL_SF 0x080ull
#define FL_OF 0x800ull
#define FL_ARITH (FL_CF | FL_PF | FL_AF | FL_ZF | FL_SF | FL_OF)
/* AF is undefined after and/or/xor/test: the CPU may leave anything.  */
#define FL_LOGIC (FL_ARITH & ~FL_AF)

/* Every ck_assert records a checkpoint (a write to Check's pipe), which
 * in loops of a million comparisons costs half a minute; EXPECT costs
 * nothing until it fails.  */
#define EXPECT(cond, ...)                                               \
	do {                                                            \
		if (!(cond))                                            \
			ck_abort_msg(__VA_ARGS__);                      \
	} while (0)

static const char *const reg_names[16] = {
	"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
	"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
};

/* Where register NUM lives in a user_regs_struct, written out here rather
 * than taken from cp_insn_reg, which is itself under test.  */
static const size_t reg_offsets[16] = {
	offsetof(struct user_regs_struct, rax),
	offsetof(struct user_regs_struct, rcx),
	offsetof(struct user_regs_struct, rdx),
	offsetof(struct user_regs_struct, rbx),
	offsetof(struct user_regs_struct, rsp),
	offsetof(struct user_regs_struct, rbp),
	offsetof(struct user_regs_struct, rsi),
	offsetof(struct user_regs_struct, rdi),
	offsetof(struct user_regs_struct, r8),
	offsetof(struct user_regs_struct, r9),
	offsetof(struct user_regs_struct, r10),
	offsetof(struct user_regs_struct, r11),
	offsetof(struct user_regs_struct, r12),
	offsetof(struct user_regs_struct, r13),
	offsetof(struct user_regs_struct, r14),
	offsetof(struct user_regs_struct, r15),
};

static unsigned long long *reg_field(struct user_regs_struct *regs,
				     unsigned num)
{
	return (unsigned long long *)((char *)regs + reg_offsets[num]);
}

/* xorshift64: a fixed seed, so a failure reproduces.  */
static uint64_t next_random(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *state = x;
}

static void hex_bytes(const uint8_t *bytes, size_t len, char *out,
		      size_t size)
{
	size_t used = 0;
	out[0] = '\0';
	for (size_t i = 0; i < len && used + 4 < size; i++)
		used += (size_t)snprintf(out + used, size - used, "%s%02x",
					 i ? " " : "", bytes[i]);
}

/* ------------------------------------------------------------ decoding */

static struct cp_insn decode_ok(const uint8_t *code, size_t len)
{
	struct cp_insn insn;
	char hex[64];
	hex_bytes(code, len, hex, sizeof(hex));
	int rc = cp_insn_decode(code, len, &insn);
	EXPECT(rc == 0, "decoding [%s]: rc %d (%s)", hex, rc, cp_strerror(rc));
	return insn;
}

#define DECODE(...)                                                     \
	({                                                              \
		static const uint8_t code_[] = { __VA_ARGS__ };         \
		decode_ok(code_, sizeof(code_));                        \
	})

START_TEST(decode_glibc_entries)
{
	/* malloc, calloc, realloc: push %r12 / %r13 / %r15 */
	struct cp_insn insn = DECODE(0x41, 0x54);
	ck_assert_int_eq(insn.kind, CP_INSN_PUSH);
	ck_assert_uint_eq(insn.len, 2);
	ck_assert_uint_eq(insn.src, 12);
	ck_assert_uint_eq(insn.width, 8);
	insn = DECODE(0x41, 0x55);
	ck_assert_int_eq(insn.kind, CP_INSN_PUSH);
	ck_assert_uint_eq(insn.len, 2);
	ck_assert_uint_eq(insn.src, 13);
	insn = DECODE(0x41, 0x57);
	ck_assert_int_eq(insn.kind, CP_INSN_PUSH);
	ck_assert_uint_eq(insn.len, 2);
	ck_assert_uint_eq(insn.src, 15);

	/* reallocarray: mov %rsi,%rax */
	insn = DECODE(0x48, 0x89, 0xf0);
	ck_assert_int_eq(insn.kind, CP_INSN_MOV_RR);
	ck_assert_uint_eq(insn.len, 3);
	ck_assert_uint_eq(insn.width, 8);
	ck_assert_uint_eq(insn.src, 6);
	ck_assert_uint_eq(insn.dst, 0);

	/* free: test %rdi,%rdi */
	insn = DECODE(0x48, 0x85, 0xff);
	ck_assert_int_eq(insn.kind, CP_INSN_ALU_RR);
	ck_assert_int_eq(insn.alu, CP_ALU_TEST);
	ck_assert_uint_eq(insn.len, 3);
	ck_assert_uint_eq(insn.width, 8);
	ck_assert_uint_eq(insn.src, 7);
	ck_assert_uint_eq(insn.dst, 7);

	/* posix_memalign: cmpb $0x0,0x140201(%rip) */
	insn = DECODE(0x80, 0x3d, 0x01, 0x02, 0x14, 0x00, 0x00);
	ck_assert_int_eq(insn.kind, CP_INSN_CMP_MI);
	ck_assert_int_eq(insn.alu, CP_ALU_CMP);
	ck_assert_uint_eq(insn.len, 7);
	ck_assert_uint_eq(insn.width, 1);
	ck_assert_int_eq(insn.disp, 0x140201);
	ck_assert_int_eq(insn.imm, 0);
}
END_TEST

START_TEST(decode_jemalloc_entries)
{
	/* malloc: cmp $0x1000,%rdi */
	struct cp_insn insn = DECODE(0x48, 0x81, 0xff, 0x00, 0x10, 0x00, 0x00);
	ck_assert_int_eq(insn.kind, CP_INSN_ALU_RI);
	ck_assert_int_eq(insn.alu, CP_ALU_CMP);
	ck_assert_uint_eq(insn.len, 7);
	ck_assert_uint_eq(insn.width, 8);
	ck_assert_uint_eq(insn.dst, 7);
	ck_assert_int_eq(insn.imm, 0x1000);

	/* free: mov %rdi,%rax */
	insn = DECODE(0x48, 0x89, 0xf8);
	ck_assert_int_eq(insn.kind, CP_INSN_MOV_RR);
	ck_assert_uint_eq(insn.len, 3);
	ck_assert_uint_eq(insn.width, 8);
	ck_assert_uint_eq(insn.src, 7);
	ck_assert_uint_eq(insn.dst, 0);
}
END_TEST

START_TEST(decode_prologues)
{
	struct cp_insn insn = DECODE(0xf3, 0x0f, 0x1e, 0xfa);
	ck_assert_int_eq(insn.kind, CP_INSN_NOP);
	ck_assert_uint_eq(insn.len, 4);
	insn = DECODE(0x90);
	ck_assert_int_eq(insn.kind, CP_INSN_NOP);
	ck_assert_uint_eq(insn.len, 1);

	/* push %rbp */
	insn = DECODE(0x55);
	ck_assert_int_eq(insn.kind, CP_INSN_PUSH);
	ck_assert_uint_eq(insn.len, 1);
	ck_assert_uint_eq(insn.src, 5);
	/* an empty REX prefix changes nothing */
	insn = DECODE(0x40, 0x55);
	ck_assert_int_eq(insn.kind, CP_INSN_PUSH);
	ck_assert_uint_eq(insn.len, 2);
	ck_assert_uint_eq(insn.src, 5);

	/* sub $0x18,%rsp */
	insn = DECODE(0x48, 0x83, 0xec, 0x18);
	ck_assert_int_eq(insn.kind, CP_INSN_ALU_RI);
	ck_assert_int_eq(insn.alu, CP_ALU_SUB);
	ck_assert_uint_eq(insn.len, 4);
	ck_assert_uint_eq(insn.width, 8);
	ck_assert_uint_eq(insn.dst, 4);
	ck_assert_int_eq(insn.imm, 0x18);
	/* and $-16,%rsp: imm8 sign-extended */
	insn = DECODE(0x48, 0x83, 0xe4, 0xf0);
	ck_assert_int_eq(insn.kind, CP_INSN_ALU_RI);
	ck_assert_int_eq(insn.alu, CP_ALU_AND);
	ck_assert_uint_eq(insn.dst, 4);
	ck_assert_int_eq(insn.imm, -16);

	/* xor %eax,%eax */
	insn = DECODE(0x31, 0xc0);
	ck_assert_int_eq(insn.kind, CP_INSN_ALU_RR);
	ck_assert_int_eq(insn.alu, CP_ALU_XOR);
	ck_assert_uint_eq(insn.len, 2);
	ck_assert_uint_eq(insn.width, 4);
	ck_assert_uint_eq(insn.dst, 0);
	ck_assert_uint_eq(insn.src, 0);
	/* sub %r9,%r10 (REX.W+R+B, 29 /r: r/m is the destination) */
	insn = DECODE(0x4d, 0x29, 0xca);
	ck_assert_int_eq(insn.kind, CP_INSN_ALU_RR);
	ck_assert_int_eq(insn.alu, CP_ALU_SUB);
	ck_assert_uint_eq(insn.dst, 10);
	ck_assert_uint_eq(insn.src, 9);
	/* add %r9,%r10 written the other way (03 /r: reg is the destination) */
	insn = DECODE(0x4d, 0x03, 0xd1);
	ck_assert_int_eq(insn.kind, CP_INSN_ALU_RR);
	ck_assert_int_eq(insn.alu, CP_ALU_ADD);
	ck_assert_uint_eq(insn.dst, 10);
	ck_assert_uint_eq(insn.src, 9);

	/* mov $0x12345678,%eax */
	insn = DECODE(0xb8, 0x78, 0x56, 0x34, 0x12);
	ck_assert_int_eq(insn.kind, CP_INSN_MOV_RI);
	ck_assert_uint_eq(insn.len, 5);
	ck_assert_uint_eq(insn.width, 4);
	ck_assert_uint_eq(insn.dst, 0);
	ck_assert_int_eq(insn.imm, 0x12345678);
	/* mov $0xffffffff,%r11d: zero-extended, not -1 */
	insn = DECODE(0x41, 0xbb, 0xff, 0xff, 0xff, 0xff);
	ck_assert_int_eq(insn.kind, CP_INSN_MOV_RI);
	ck_assert_uint_eq(insn.len, 6);
	ck_assert_uint_eq(insn.width, 4);
	ck_assert_uint_eq(insn.dst, 11);
	ck_assert_int_eq(insn.imm, 0xffffffffll);
	/* movabs $0x8877665544332211,%r8 */
	insn = DECODE(0x49, 0xb8, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
		      0x88);
	ck_assert_int_eq(insn.kind, CP_INSN_MOV_RI);
	ck_assert_uint_eq(insn.len, 10);
	ck_assert_uint_eq(insn.width, 8);
	ck_assert_uint_eq(insn.dst, 8);
	ck_assert_uint_eq((uint64_t)insn.imm, 0x8877665544332211ull);
	/* mov $-1,%rax (REX.W c7 /0: imm32 sign-extended) */
	insn = DECODE(0x48, 0xc7, 0xc0, 0xff, 0xff, 0xff, 0xff);
	ck_assert_int_eq(insn.kind, CP_INSN_MOV_RI);
	ck_assert_uint_eq(insn.len, 7);
	ck_assert_uint_eq(insn.width, 8);
	ck_assert_int_eq(insn.imm, -1);

	/* the c7 /0 form of a 32-bit mov means the same as the b8+r form */
	insn = DECODE(0xc7, 0xc0, 0x00, 0x00, 0x00, 0x80);
	ck_assert_int_eq(insn.kind, CP_INSN_MOV_RI);
	ck_assert_uint_eq(insn.len, 6);
	ck_assert_uint_eq(insn.width, 4);
	ck_assert_int_eq(insn.imm, DECODE(0xb8, 0x00, 0x00, 0x00, 0x80).imm);

	/* jmp rel32, both directions, and jmp rel8 */
	insn = DECODE(0xe9, 0x78, 0x56, 0x34, 0x12);
	ck_assert_int_eq(insn.kind, CP_INSN_JMP);
	ck_assert_uint_eq(insn.len, 5);
	ck_assert_int_eq(insn.imm, 0x12345678);
	insn = DECODE(0xe9, 0xfb, 0xff, 0xff, 0xff);
	ck_assert_int_eq(insn.kind, CP_INSN_JMP);
	ck_assert_int_eq(insn.imm, -5);
	insn = DECODE(0xeb, 0xfe);
	ck_assert_int_eq(insn.kind, CP_INSN_JMP);
	ck_assert_uint_eq(insn.len, 2);
	ck_assert_int_eq(insn.imm, -2);

	/* cmpl / cmpq $imm,disp(%rip) */
	insn = DECODE(0x83, 0x3d, 0xf0, 0xff, 0xff, 0xff, 0x80);
	ck_assert_int_eq(insn.kind, CP_INSN_CMP_MI);
	ck_assert_uint_eq(insn.len, 7);
	ck_assert_uint_eq(insn.width, 4);
	ck_assert_int_eq(insn.disp, -16);
	ck_assert_int_eq(insn.imm, -128);
	insn = DECODE(0x48, 0x81, 0x3d, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
		      0x00, 0x80);
	ck_assert_int_eq(insn.kind, CP_INSN_CMP_MI);
	ck_assert_uint_eq(insn.len, 11);
	ck_assert_uint_eq(insn.width, 8);
	ck_assert_int_eq(insn.disp, 0x100);
	ck_assert_int_eq(insn.imm, INT32_MIN);
}
END_TEST

/* Bytes the decoder must refuse, each with the reason.  */
static const struct {
	uint8_t bytes[16];
	size_t len;
	const char *what;
} refused[] = {
	{ { 0xe8, 0x00, 0x00, 0x00, 0x00 }, 5, "call rel32" },
	{ { 0x48, 0x8b, 0x05, 0x10, 0x20, 0x30, 0x00 }, 7,
	  "mov 0x302010(%rip),%rax (a load)" },
	{ { 0x48, 0x8d, 0x05, 0x10, 0x20, 0x30, 0x00 }, 7, "lea" },
	{ { 0x0f, 0x05 }, 2, "syscall" },
	{ { 0xc3 }, 1, "ret" },
	{ { 0xcc }, 1, "int3" },
	{ { 0x41 }, 1, "a REX prefix alone" },
	{ { 0x48 }, 1, "REX.W alone" },
	{ { 0x48, 0x85 }, 2, "test without its ModRM" },
	{ { 0x48, 0x81, 0xff, 0x00, 0x10 }, 5, "cmp with a cut imm32" },
	{ { 0x48, 0x83, 0xec }, 3, "sub without its imm8" },
	{ { 0x80, 0x3d, 0x01, 0x02, 0x14, 0x00 }, 6, "cmpb without its imm8" },
	{ { 0x80, 0x3d, 0x01, 0x02 }, 4, "cmpb with a cut disp32" },
	{ { 0xb8, 0x01, 0x02 }, 3, "mov $imm32 cut" },
	{ { 0x48, 0xb8, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07 }, 9,
	  "movabs cut" },
	{ { 0xe9, 0x00, 0x00 }, 3, "jmp rel32 cut" },
	{ { 0xeb }, 1, "jmp rel8 cut" },
	{ { 0xf3, 0x0f, 0x1e }, 3, "endbr64 cut" },
	{ { 0x90 }, 0, "nothing" },
	{ { 0x48, 0x89, 0x07 }, 3, "mov %rax,(%rdi) (a store)" },
	{ { 0x48, 0x8b, 0x07 }, 3, "mov (%rdi),%rax (a load)" },
	{ { 0x48, 0x85, 0x07 }, 3, "test %rax,(%rdi)" },
	{ { 0x48, 0x83, 0x07, 0x01 }, 4, "addq $1,(%rdi)" },
	{ { 0x80, 0x05, 0x01, 0x02, 0x03, 0x04, 0x05 }, 7,
	  "addb $5,disp(%rip) (a write)" },
	{ { 0x83, 0xd0, 0x01 }, 3, "adc $1,%eax (needs CF in)" },
	{ { 0x83, 0xd8, 0x01 }, 3, "sbb $1,%eax (needs CF in)" },
	{ { 0x48, 0x11, 0xc0 }, 3, "adc %rax,%rax" },
	{ { 0x38, 0xc0 }, 2, "cmp %al,%al (8-bit)" },
	{ { 0x84, 0xc0 }, 2, "test %al,%al (8-bit)" },
	{ { 0x88, 0xc0 }, 2, "mov %al,%al (8-bit)" },
	{ { 0x80, 0xf8, 0x01 }, 3, "cmp $1,%al (8-bit)" },
	{ { 0x66, 0x89, 0xc0 }, 3, "mov %ax,%ax (16-bit)" },
	{ { 0x41, 0x90 }, 2, "xchg %eax,%r8d" },
	{ { 0xc7, 0xc8, 0x01, 0x00, 0x00, 0x00 }, 6, "c7 /1 (undefined)" },
	{ { 0x5d }, 1, "pop %rbp" },
	{ { 0x41, 0x5c }, 2, "pop %r12" },
	{ { 0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00 }, 9,
	  "mov %fs:0x28,%rax" },
};

START_TEST(decode_refuses)
{
	struct cp_insn insn;
	char hex[64];
	hex_bytes(refused[_i].bytes, refused[_i].len, hex, sizeof(hex));
	int rc = cp_insn_decode(refused[_i].bytes, refused[_i].len, &insn);
	ck_assert_msg(rc == -CP_E_INVAL,
		      "[%s] (%s): rc %d, kind %d len %u, want -CP_E_INVAL", hex,
		      refused[_i].what, rc, (int)insn.kind, insn.len);
}
END_TEST

/* LEN bounds what the decoder reads: each instruction, whole or cut, is
 * placed right before an inaccessible page.  */
START_TEST(decode_reads_only_len)
{
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *map = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	ck_assert_int_eq(mprotect(map + page, (size_t)page, PROT_NONE), 0);
	static const struct {
		uint8_t bytes[11];
		size_t len;
	} whole[] = {
		{ { 0x41, 0x54 }, 2 },
		{ { 0x48, 0x85, 0xff }, 3 },
		{ { 0x80, 0x3d, 0x01, 0x02, 0x14, 0x00, 0x00 }, 7 },
		{ { 0x48, 0x81, 0xff, 0x00, 0x10, 0x00, 0x00 }, 7 },
		{ { 0xf3, 0x0f, 0x1e, 0xfa }, 4 },
		{ { 0x49, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8 }, 10 },
		{ { 0xe9, 1, 2, 3, 4 }, 5 },
		{ { 0x48, 0x81, 0x3d, 0, 1, 0, 0, 0, 0, 0, 0x80 }, 11 },
	};
	for (size_t w = 0; w < sizeof(whole) / sizeof(whole[0]); w++) {
		for (size_t len = 0; len <= whole[w].len; len++) {
			uint8_t *at = map + page - len;
			memcpy(at, whole[w].bytes, len);
			struct cp_insn insn;
			int rc = cp_insn_decode(at, len, &insn);
			if (len == whole[w].len) {
				ck_assert_int_eq(rc, 0);
				ck_assert_uint_eq(insn.len, len);
			} else {
				ck_assert_msg(rc == -CP_E_INVAL,
					      "instruction %zu cut to %zu bytes: rc %d",
					      w, len, rc);
			}
		}
	}
	munmap(map, (size_t)page * 2);
}
END_TEST

/* Bytes after the instruction do not change it.  */
START_TEST(decode_ignores_what_follows)
{
	uint8_t code[CP_INSN_MAX];
	memset(code, 0xcc, sizeof(code));
	memcpy(code, "\x48\x89\xf0", 3);
	struct cp_insn insn = decode_ok(code, sizeof(code));
	ck_assert_int_eq(insn.kind, CP_INSN_MOV_RR);
	ck_assert_uint_eq(insn.len, 3);
	memset(code, 0x41, sizeof(code));
	code[0] = 0x55;
	insn = decode_ok(code, sizeof(code));
	ck_assert_int_eq(insn.kind, CP_INSN_PUSH);
	ck_assert_uint_eq(insn.len, 1);
	ck_assert_uint_eq(insn.src, 5);
}
END_TEST

START_TEST(reg_numbers)
{
	struct user_regs_struct regs;
	for (unsigned num = 0; num < 16; num++)
		ck_assert_msg(cp_insn_reg(&regs, num) == reg_field(&regs, num),
			      "register %u (%s)", num, reg_names[num]);
}
END_TEST

/* ------------------------------------------------- the CPU as reference */

/* The stub's data page.  IN and OUT hold the 16 general registers in
 * encoding order (rax, rcx, ... r15) and then rflags.  */
#define D_IN 0x000
#define D_OUT 0x100
#define D_SAVED_RSP 0x200  /* the C caller's rsp while the stub runs */
#define D_TARGET 0xe00     /* the operand of cmp $imm,disp(%rip) */
#define D_STACK 0xf00      /* rsp for push: the value lands at 0xef8 */
#define NREGS 17
#define FLAGS 16

/* Two pages: the stub's code (writable while it is assembled, then
 * read+exec) and its data.  */
struct cpu {
	uint8_t *code;
	uint8_t *data;
	size_t page;
	uint64_t insn_addr;  /* where the instruction under test starts */
	/* What the emulator's callbacks saw.  */
	int reads, writes;
	uint64_t read_addr, write_addr;
	size_t read_len, write_len;
	uint64_t written;
	bool fail_memory;   /* make the callbacks fail */
};

static uint64_t *cpu_in(struct cpu *cpu)
{
	return (uint64_t *)(cpu->data + D_IN);
}

static uint64_t *cpu_out(struct cpu *cpu)
{
	return (uint64_t *)(cpu->data + D_OUT);
}

static void cpu_open(struct cpu *cpu)
{
	memset(cpu, 0, sizeof(*cpu));
	cpu->page = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *map = mmap(NULL, cpu->page * 2, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	cpu->code = map;
	cpu->data = map + cpu->page;
}

static void cpu_close(struct cpu *cpu)
{
	munmap(cpu->code, cpu->page * 2);
}

struct emitter {
	uint8_t *p;
};

static void emit(struct emitter *e, const void *bytes, size_t len)
{
	memcpy(e->p, bytes, len);
	e->p += len;
}

static void emit1(struct emitter *e, uint8_t byte)
{
	*e->p++ = byte;
}

static void emit32(struct emitter *e, uint32_t value)
{
	emit(e, &value, 4);  /* x86 is little-endian */
}

static void emit64(struct emitter *e, uint64_t value)
{
	emit(e, &value, 8);
}

/* mov disp32(%rax),%REG (LOAD) or mov %REG,disp32(%rax): REX.W (+R),
 * 8b or 89, ModRM mod=10 reg=REG r/m=000 (rax, no SIB needed).  */
static void emit_rax_relative(struct emitter *e, bool load, unsigned reg,
			      uint32_t disp)
{
	emit1(e, (uint8_t)(0x48 | (reg >= 8 ? 4 : 0)));
	emit1(e, load ? 0x8b : 0x89);
	emit1(e, (uint8_t)(0x80 | (reg & 7) << 3));
	emit32(e, disp);
}

/* Assemble the stub around the instruction CODE (LEN bytes).  The code
 * page stays writable, so a caller can still patch the instruction (a
 * rip-relative displacement depends on where it landed) before
 * cpu_seal().  Returns where the instruction starts.
 *
 *	push %rbx; push %rbp; push %r12 ... %r15  callee-saved registers
 *	movabs $saved_rsp,%rax; mov %rsp,(%rax)   so rsp can be anything
 *	movabs $in,%rax
 *	push 128(%rax); popfq                     the input flags
 *	mov 8(%rax),%rcx ... mov 120(%rax),%r15   rsp included
 *	mov 0(%rax),%rax                          rax last: it was the base
 *	<the instruction>
 *	movabs %rax,out                           moffs form: no other reg
 *	movabs $out,%rax
 *	mov %rcx,8(%rax) ... mov %r15,120(%rax)   rsp included
 *	movabs $saved_rsp,%rsp; mov (%rsp),%rsp   back on the C stack
 *	pushfq; pop %rcx; mov %rcx,128(%rax)      the output flags
 *	pop %r15 ... pop %rbx; ret
 *
 * Between popfq and pushfq only mov runs, which leaves the flags alone,
 * and nothing touches the stack while rsp holds the test's value (which
 * for push points into the data page).  */
static uint64_t cpu_assemble(struct cpu *cpu, const uint8_t *code,
			     size_t len)
{
	uint64_t data = (uint64_t)(uintptr_t)cpu->data;
	EXPECT(mprotect(cpu->code, cpu->page, PROT_READ | PROT_WRITE) == 0,
	       "mprotect: %m");
	struct emitter e = { cpu->code };
	emit(&e, "\x53\x55\x41\x54\x41\x55\x41\x56\x41\x57", 10);
	emit(&e, "\x48\xb8", 2);
	emit64(&e, data + D_SAVED_RSP);
	emit(&e, "\x48\x89\x20", 3);
	emit(&e, "\x48\xb8", 2);
	emit64(&e, data + D_IN);
	emit(&e, "\xff\xb0", 2);  /* push disp32(%rax) */
	emit32(&e, FLAGS * 8);
	emit1(&e, 0x9d);          /* popfq */
	for (unsigned reg = 1; reg < 16; reg++)
		emit_rax_relative(&e, true, reg, reg * 8);
	emit_rax_relative(&e, true, 0, 0);
	cpu->insn_addr = (uint64_t)(uintptr_t)e.p;
	emit(&e, code, len);
	emit(&e, "\x48\xa3", 2);  /* movabs %rax,moffs64 */
	emit64(&e, data + D_OUT);
	emit(&e, "\x48\xb8", 2);
	emit64(&e, data + D_OUT);
	for (unsigned reg = 1; reg < 16; reg++)
		emit_rax_relative(&e, false, reg, reg * 8);
	emit(&e, "\x48\xbc", 2);  /* movabs $imm64,%rsp */
	emit64(&e, data + D_SAVED_RSP);
	emit(&e, "\x48\x8b\x24\x24", 4);
	emit(&e, "\x9c\x59", 2);  /* pushfq; pop %rcx */
	emit_rax_relative(&e, false, 1, FLAGS * 8);
	emit(&e, "\x41\x5f\x41\x5e\x41\x5d\x41\x5c\x5d\x5b\xc3", 11);
	EXPECT((size_t)(e.p - cpu->code) < cpu->page, "stub too long");
	return cpu->insn_addr;
}

static void cpu_seal(struct cpu *cpu)
{
	EXPECT(mprotect(cpu->code, cpu->page, PROT_READ | PROT_EXEC) == 0,
	       "mprotect: %m");
}

/* Run the sealed stub on the registers in cpu_in; results in cpu_out.  */
static void cpu_run(struct cpu *cpu)
{
	void (*stub)(void);
	void *code = cpu->code;
	memcpy(&stub, &code, sizeof(stub));
	memset(cpu_out(cpu), 0xa5, NREGS * 8);
	stub();
}

static int read_memory(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct cpu *cpu = arg;
	cpu->reads++;
	cpu->read_addr = addr;
	cpu->read_len = len;
	if (cpu->fail_memory)
		return -1;
	uint64_t data = (uint64_t)(uintptr_t)cpu->data;
	if (addr < data || addr + len > data + cpu->page || len > 8)
		return -1;
	memcpy(buf, cpu->data + (addr - data), len);
	return 0;
}

/* Records what push would store; the data page keeps the CPU's copy.  */
static int write_memory(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct cpu *cpu = arg;
	cpu->writes++;
	cpu->write_addr = addr;
	cpu->write_len = len;
	if (cpu->fail_memory)
		return -1;
	cpu->written = 0;
	memcpy(&cpu->written, buf, len < 8 ? len : 8);
	return 0;
}

/* One instruction to compare.  */
struct form {
	uint8_t bytes[CP_INSN_MAX];
	size_t len;
	int dst, src;        /* operand registers, -1 if none */
	int64_t imm;         /* an immediate worth probing near */
	uint64_t flag_mask;  /* the flags the CPU defines afterwards */
	size_t disp_at;      /* CMP_MI: offset of disp32 in BYTES, else 0 */
};

static uint64_t edge_value(uint64_t *rng, int64_t imm)
{
	const uint64_t edges[] = {
		0, 1, UINT64_MAX, 0x80000000, 0x7fffffff, 0xffffffff,
		0x100000000, (uint64_t)INT64_MIN, (uint64_t)INT64_MAX,
		0x7f, 0x80, 0xff, 0x1000, 0xfff,
		(uint64_t)imm, (uint64_t)imm - 1, (uint64_t)imm + 1,
		(uint32_t)imm, ~(uint64_t)imm, (uint64_t)-imm,
		0xffffffff00000000, 0x8000000000000001,
	};
	return edges[next_random(rng) % (sizeof(edges) / sizeof(edges[0]))];
}

static uint64_t random_value(uint64_t *rng, int64_t imm)
{
	uint64_t r = next_random(rng);
	switch (r % 8) {
	case 0:
	case 1:
	case 2:
		return edge_value(rng, imm);
	case 3:
		return next_random(rng) & 0xffffffff;
	case 4:
		return next_random(rng) & 0xff;
	case 5: /* near a sign boundary */
		return (r & 1 ? 0x80000000 : (uint64_t)INT64_MIN) +
		       (next_random(rng) % 5) - 2;
	default:
		return next_random(rng);
	}
}

/* Random registers and flags for FORM; rsp into the data page for push.
 * Only the arithmetic flags vary: TF, DF or AC set by popfq would trap
 * or change what the stub itself does.  0x202 is the reserved bit 1
 * and IF, as they always read in user mode.  */
static void random_input(struct cpu *cpu, const struct form *form,
			 bool is_push, uint64_t *rng)
{
	uint64_t *in = cpu_in(cpu);
	for (unsigned reg = 0; reg < 16; reg++)
		in[reg] = random_value(rng, form->imm);
	if (form->dst >= 0 && form->src >= 0 && next_random(rng) % 4 == 0)
		in[form->src] = in[form->dst];  /* equal operands */
	if (is_push)
		in[4] = (uint64_t)(uintptr_t)cpu->data + D_STACK;
	in[FLAGS] = 0x202 | (next_random(rng) & FL_ARITH);
}

/* The registers and flags REGS as text, for failure messages.  */
struct regs_text {
	char s[512];
};

static struct regs_text format_regs(const uint64_t *regs)
{
	struct regs_text text;
	size_t used = 0;
	for (unsigned reg = 0; reg < 16; reg++)
		used += (size_t)snprintf(text.s + used, sizeof(text.s) - used,
					 "%s=%#llx ", reg_names[reg],
					 (unsigned long long)regs[reg]);
	snprintf(text.s + used, sizeof(text.s) - used, "rflags=%#llx",
		 (unsigned long long)regs[FLAGS]);
	return text;
}

/* The emulator's registers for the stub's input, at the instruction's
 * real address; the fields the emulator must not touch get a pattern.
 * Its rflags also get system flags the stub cannot load (TF, DF, NT, AC,
 * ID), which the emulator must keep as they are.  */
static struct user_regs_struct emulator_input(struct cpu *cpu, uint64_t *rng)
{
	struct user_regs_struct regs;
	memset(&regs, 0x5a, sizeof(regs));
	for (unsigned reg = 0; reg < 16; reg++)
		*reg_field(&regs, reg) = cpu_in(cpu)[reg];
	regs.eflags = cpu_in(cpu)[FLAGS] |
		      (next_random(rng) & (0x100 | 0x400 | 0x4000 | 0x40000 |
					   0x200000));
	regs.rip = cpu->insn_addr;
	return regs;
}

/* Run FORM ITERATIONS times on the CPU and in the emulator, and fail at
 * the first difference, printing the instruction and the input.  */
static void compare_with_cpu(struct cpu *cpu, const struct form *form,
			     int iterations, uint64_t *rng)
{
	char hex[64];
	hex_bytes(form->bytes, form->len, hex, sizeof(hex));
	struct cp_insn insn = decode_ok(form->bytes, form->len);
	EXPECT(insn.len == form->len, "[%s]: len %u, want %zu", hex, insn.len,
	       form->len);
	bool is_push = insn.kind == CP_INSN_PUSH;
	bool is_cmp_mi = insn.kind == CP_INSN_CMP_MI;

	cpu_assemble(cpu, form->bytes, form->len);
	if (form->disp_at) {
		/* point disp(%rip) at D_TARGET in the data page */
		uint64_t target = (uint64_t)(uintptr_t)cpu->data + D_TARGET;
		int32_t disp = (int32_t)(target - (cpu->insn_addr + form->len));
		memcpy((uint8_t *)(uintptr_t)cpu->insn_addr + form->disp_at,
		       &disp, 4);
		uint8_t patched[CP_INSN_MAX];
		memcpy(patched, (uint8_t *)(uintptr_t)cpu->insn_addr,
		       form->len);
		insn = decode_ok(patched, form->len);
		EXPECT(insn.disp == disp, "[%s]: disp %d, want %d", hex,
		       insn.disp, disp);
		hex_bytes(patched, form->len, hex, sizeof(hex));
	}
	cpu_seal(cpu);

	for (int it = 0; it < iterations; it++) {
		random_input(cpu, form, is_push, rng);
		if (is_cmp_mi)
			*(uint64_t *)(cpu->data + D_TARGET) =
				random_value(rng, form->imm);
		memset(cpu->data + D_STACK - 16, 0xee, 16);
		cpu_run(cpu);
		uint64_t *in = cpu_in(cpu), *out = cpu_out(cpu);
		uint64_t pushed;
		memcpy(&pushed, cpu->data + D_STACK - 8, 8);

		struct user_regs_struct regs = emulator_input(cpu, rng);
		struct user_regs_struct before = regs;
		cpu->reads = cpu->writes = 0;
		int rc = cp_insn_emulate(&insn, cpu->insn_addr, &regs,
					 read_memory, write_memory, cpu);

		/* the message of each failure: instruction, input, CPU's output */
#define CASE "[%s]\n  input %s\n  CPU   %s\n  "
#define CASE_ARGS hex, format_regs(in).s, format_regs(out).s
		EXPECT(rc == 0, CASE "rc %d", CASE_ARGS, rc);
		for (unsigned reg = 0; reg < 16; reg++) {
			unsigned long long got = *reg_field(&regs, reg);
			EXPECT(got == out[reg], CASE "%s: emulator %#llx, CPU %#llx",
			       CASE_ARGS, reg_names[reg], got,
			       (unsigned long long)out[reg]);
		}
		uint64_t diff = (regs.eflags ^ out[FLAGS]) & form->flag_mask;
		EXPECT(diff == 0,
		       CASE "flags: emulator %#llx, CPU %#llx (differ in %#llx, "
			    "compared %#llx)",
		       CASE_ARGS, regs.eflags, (unsigned long long)out[FLAGS],
		       (unsigned long long)diff,
		       (unsigned long long)form->flag_mask);
		/* the emulator keeps every flag it does not compute */
		EXPECT(((regs.eflags ^ before.eflags) & ~FL_ARITH) == 0,
		       CASE "non-arithmetic flags changed: %#llx -> %#llx",
		       CASE_ARGS, before.eflags, regs.eflags);
		EXPECT(regs.rip == cpu->insn_addr + form->len,
		       CASE "rip %#llx, want %#llx", CASE_ARGS, regs.rip,
		       (unsigned long long)(cpu->insn_addr + form->len));
		/* and every field that is not a register it changes */
		regs.rip = before.rip;
		regs.eflags = before.eflags;
		for (unsigned reg = 0; reg < 16; reg++)
			*reg_field(&regs, reg) = *reg_field(&before, reg);
		EXPECT(memcmp(&regs, &before, sizeof(regs)) == 0,
		       CASE "a non-GPR field of user_regs_struct changed",
		       CASE_ARGS);

		uint64_t data = (uint64_t)(uintptr_t)cpu->data;
		if (is_push) {
			EXPECT(cpu->writes == 1 &&
				       cpu->write_addr == data + D_STACK - 8 &&
				       cpu->write_len == 8,
			       CASE "%d writes, last %zu bytes at %#llx, want 8 "
				    "at %#llx",
			       CASE_ARGS, cpu->writes, cpu->write_len,
			       (unsigned long long)cpu->write_addr,
			       (unsigned long long)(data + D_STACK - 8));
			EXPECT(cpu->written == pushed,
			       CASE "pushed %#llx, CPU pushed %#llx", CASE_ARGS,
			       (unsigned long long)cpu->written,
			       (unsigned long long)pushed);
		} else {
			EXPECT(cpu->writes == 0, CASE "%d writes", CASE_ARGS,
			       cpu->writes);
		}
		if (is_cmp_mi) {
			EXPECT(cpu->reads == 1 &&
				       cpu->read_addr == data + D_TARGET &&
				       cpu->read_len == insn.width,
			       CASE "%d reads, last %zu bytes at %#llx, want %u "
				    "at %#llx",
			       CASE_ARGS, cpu->reads, cpu->read_len,
			       (unsigned long long)cpu->read_addr, insn.width,
			       (unsigned long long)(data + D_TARGET));
		} else {
			EXPECT(cpu->reads == 0, CASE "%d reads", CASE_ARGS,
			       cpu->reads);
		}
#undef CASE
#undef CASE_ARGS
	}
}

/* The ModRM-form instruction OP with REX.W = W, reg field REG and r/m
 * register RM, a REX prefix only when one is needed.  */
static struct form modrm_form(uint8_t op, bool w, unsigned reg, unsigned rm)
{
	struct form f;
	memset(&f, 0, sizeof(f));
	uint8_t rex = (uint8_t)((w ? 8 : 0) | (reg >= 8 ? 4 : 0) |
				(rm >= 8 ? 1 : 0));
	if (rex)
		f.bytes[f.len++] = 0x40 | rex;
	f.bytes[f.len++] = op;
	f.bytes[f.len++] = (uint8_t)(0xc0 | (reg & 7) << 3 | (rm & 7));
	f.dst = f.src = -1;
	f.flag_mask = FL_ARITH;
	return f;
}

/* Known input, known result: the stub itself works.  */
START_TEST(stub_sanity)
{
	struct cpu cpu;
	cpu_open(&cpu);
	/* add %rcx,%rax */
	cpu_assemble(&cpu, (const uint8_t *)"\x48\x01\xc8", 3);
	cpu_seal(&cpu);
	uint64_t *in = cpu_in(&cpu), *out = cpu_out(&cpu);
	for (unsigned reg = 0; reg < 16; reg++)
		in[reg] = 0x1111111111111111ull * reg;
	in[0] = UINT64_MAX;
	in[1] = 1;
	in[FLAGS] = 0x202;
	cpu_run(&cpu);
	ck_assert_uint_eq(out[0], 0);
	ck_assert_uint_eq(out[1], 1);
	for (unsigned reg = 2; reg < 16; reg++)
		ck_assert_uint_eq(out[reg], 0x1111111111111111ull * reg);
	ck_assert_uint_eq(out[FLAGS] & FL_ARITH, FL_CF | FL_ZF | FL_PF | FL_AF);
	in[0] = 0x7fffffffffffffff;
	in[FLAGS] = 0x202 | FL_ARITH;
	cpu_run(&cpu);
	ck_assert_uint_eq(out[0], 0x8000000000000000ull);
	ck_assert_uint_eq(out[FLAGS] & FL_ARITH, FL_OF | FL_SF | FL_PF | FL_AF);
	cpu_close(&cpu);
}
END_TEST

START_TEST(cpu_allocator_entries)
{
	static const struct {
		uint8_t bytes[8];
		size_t len;
		int dst, src;
		int64_t imm;
		uint64_t mask;
	} entries[] = {
		{ { 0x41, 0x54 }, 2, -1, 12, 0, FL_ARITH },  /* push %r12 */
		{ { 0x41, 0x55 }, 2, -1, 13, 0, FL_ARITH },  /* push %r13 */
		{ { 0x41, 0x57 }, 2, -1, 15, 0, FL_ARITH },  /* push %r15 */
		{ { 0x55 }, 1, -1, 5, 0, FL_ARITH },         /* push %rbp */
		{ { 0x48, 0x89, 0xf0 }, 3, 0, 6, 0, FL_ARITH },
		{ { 0x48, 0x85, 0xff }, 3, 7, 7, 0, FL_LOGIC },
		{ { 0x48, 0x81, 0xff, 0x00, 0x10, 0x00, 0x00 }, 7, 7, -1,
		  0x1000, FL_ARITH },
		{ { 0x48, 0x89, 0xf8 }, 3, 0, 7, 0, FL_ARITH },
		{ { 0xf3, 0x0f, 0x1e, 0xfa }, 4, -1, -1, 0, FL_ARITH },
		{ { 0x90 }, 1, -1, -1, 0, FL_ARITH },
		{ { 0x48, 0x83, 0xec, 0x18 }, 4, 4, -1, 0x18, FL_ARITH },
		{ { 0x31, 0xc0 }, 2, 0, 0, 0, FL_LOGIC },
		{ { 0xb8, 0x78, 0x56, 0x34, 0x12 }, 5, 0, -1, 0, FL_ARITH },
		{ { 0xb8, 0xff, 0xff, 0xff, 0xff }, 5, 0, -1, 0, FL_ARITH },
	};
	struct cpu cpu;
	cpu_open(&cpu);
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
		struct form f;
		memset(&f, 0, sizeof(f));
		memcpy(f.bytes, entries[i].bytes, entries[i].len);
		f.len = entries[i].len;
		f.dst = entries[i].dst;
		f.src = entries[i].src;
		f.imm = entries[i].imm;
		f.flag_mask = entries[i].mask;
		compare_with_cpu(&cpu, &f, 4096, &rng);
	}
	cpu_close(&cpu);
}
END_TEST

START_TEST(cpu_push)
{
	struct cpu cpu;
	cpu_open(&cpu);
	uint64_t rng = 0x1234567887654321ull;
	for (unsigned reg = 0; reg < 16; reg++) {
		for (unsigned rex = 0; rex < 3; rex++) {
			/* push REG: plain, with REX.B for r8-r15, and with an
			 * empty (0x40) or REX.W (0x48) prefix, which change
			 * nothing */
			struct form f;
			memset(&f, 0, sizeof(f));
			uint8_t prefix = (uint8_t)(reg >= 8 ? 0x41 : 0);
			if (rex == 1)
				prefix |= 0x40;
			if (rex == 2)
				prefix |= 0x48;
			if (prefix)
				f.bytes[f.len++] = prefix;
			f.bytes[f.len++] = (uint8_t)(0x50 + (reg & 7));
			f.dst = -1;
			f.src = (int)reg;
			f.flag_mask = FL_ARITH;
			compare_with_cpu(&cpu, &f, 256, &rng);
		}
	}
	cpu_close(&cpu);
}
END_TEST

START_TEST(cpu_mov_rr)
{
	struct cpu cpu;
	cpu_open(&cpu);
	uint64_t rng = 0x0ddba11cafef00dull;
	static const uint8_t ops[] = { 0x89, 0x8b };
	for (size_t o = 0; o < 2; o++)
		for (int w = 0; w < 2; w++)
			for (unsigned reg = 0; reg < 16; reg++)
				for (unsigned rm = 0; rm < 16; rm++) {
					struct form f = modrm_form(ops[o], w, reg, rm);
					f.dst = (int)(ops[o] == 0x89 ? rm : reg);
					f.src = (int)(ops[o] == 0x89 ? reg : rm);
					compare_with_cpu(&cpu, &f, 32, &rng);
				}
	cpu_close(&cpu);
}
END_TEST

START_TEST(cpu_mov_ri)
{
	struct cpu cpu;
	cpu_open(&cpu);
	uint64_t rng = 0xfeedfacefeedfaceull;
	static const uint64_t imms[] = {
		0, 1, 0x7fffffff, 0x80000000, 0xffffffff, 0x12345678,
		0x8877665544332211ull, UINT64_MAX,
	};
	for (unsigned reg = 0; reg < 16; reg++)
		for (size_t i = 0; i < sizeof(imms) / sizeof(imms[0]); i++) {
			/* b8+r imm32, REX.W b8+r imm64, c7 /0 imm32 with and
			 * without REX.W */
			for (int shape = 0; shape < 4; shape++) {
				struct form f;
				memset(&f, 0, sizeof(f));
				bool w = shape & 1;
				uint8_t rex = (uint8_t)((w ? 8 : 0) |
							(reg >= 8 ? 1 : 0));
				if (rex)
					f.bytes[f.len++] = 0x40 | rex;
				if (shape < 2) {
					f.bytes[f.len++] = (uint8_t)(0xb8 + (reg & 7));
				} else {
					f.bytes[f.len++] = 0xc7;
					f.bytes[f.len++] = (uint8_t)(0xc0 | (reg & 7));
				}
				size_t n = shape == 1 ? 8 : 4;
				memcpy(f.bytes + f.len, &imms[i], n);
				f.len += n;
				f.dst = (int)reg;
				f.src = -1;
				f.flag_mask = FL_ARITH;
				compare_with_cpu(&cpu, &f, 16, &rng);
			}
		}
	cpu_close(&cpu);
}
END_TEST

/* The register-register ALU opcodes: (op, AF defined afterwards).  */
static const struct {
	uint8_t op;
	bool arith;
} alu_rr_ops[] = {
	{ 0x01, true }, { 0x03, true },   /* add */
	{ 0x09, false }, { 0x0b, false }, /* or */
	{ 0x21, false }, { 0x23, false }, /* and */
	{ 0x29, true }, { 0x2b, true },   /* sub */
	{ 0x31, false }, { 0x33, false }, /* xor */
	{ 0x39, true }, { 0x3b, true },   /* cmp */
	{ 0x85, false },                  /* test */
};

START_TEST(cpu_alu_rr)
{
	struct cpu cpu;
	cpu_open(&cpu);
	uint64_t rng = 0xa5a5a5a55a5a5a5aull + (uint64_t)_i;
	uint8_t op = alu_rr_ops[_i].op;
	bool reg_is_dst = (op & 2) != 0;
	for (int w = 0; w < 2; w++)
		for (unsigned reg = 0; reg < 16; reg++)
			for (unsigned rm = 0; rm < 16; rm++) {
				struct form f = modrm_form(op, w, reg, rm);
				f.dst = (int)(reg_is_dst ? reg : rm);
				f.src = (int)(reg_is_dst ? rm : reg);
				f.flag_mask = alu_rr_ops[_i].arith ? FL_ARITH
								   : FL_LOGIC;
				compare_with_cpu(&cpu, &f, 48, &rng);
			}
	cpu_close(&cpu);
}
END_TEST

START_TEST(cpu_alu_ri)
{
	/* group 1 reg fields: add or and sub xor cmp (not adc, sbb) */
	static const struct {
		unsigned ext;
		bool arith;
	} ops[] = { { 0, true }, { 1, false }, { 4, false },
		    { 5, true }, { 6, false }, { 7, true } };
	static const int64_t imm8s[] = { 0, 1, 0x18, 0x7f, -128, -1, -16 };
	static const int64_t imm32s[] = { 0, 1, 0x1000, 0x7fffffff,
					  INT32_MIN, -1, 0x12345678 };
	struct cpu cpu;
	cpu_open(&cpu);
	uint64_t rng = 0x0123456789abcdefull + (uint64_t)_i;
	unsigned ext = ops[_i].ext;
	for (int w = 0; w < 2; w++)
		for (unsigned rm = 0; rm < 16; rm++)
			for (int wide = 0; wide < 2; wide++) {
				const int64_t *imms = wide ? imm32s : imm8s;
				for (size_t i = 0; i < 7; i++) {
					struct form f = modrm_form(
						wide ? 0x81 : 0x83, w, ext, rm);
					int32_t imm = (int32_t)imms[i];
					memcpy(f.bytes + f.len, &imm, wide ? 4 : 1);
					f.len += wide ? 4 : 1;
					f.dst = (int)rm;
					f.imm = imms[i];
					f.flag_mask = ops[_i].arith ? FL_ARITH
								   : FL_LOGIC;
					compare_with_cpu(&cpu, &f, 48, &rng);
				}
			}
	cpu_close(&cpu);
}
END_TEST

/* cmp $imm,disp(%rip) at byte, dword and qword width, executed for real
 * with the displacement pointed at the data page.  */
START_TEST(cpu_cmp_rip)
{
	struct cpu cpu;
	cpu_open(&cpu);
	uint64_t rng = 0x5555aaaa3333ccccull;

	/* cmpb: every byte value against a few immediates */
	static const uint8_t imm8s[] = { 0x00, 0x01, 0x7f, 0x80, 0xff, 0x40 };
	for (size_t i = 0; i < sizeof(imm8s); i++) {
		struct form f;
		memset(&f, 0, sizeof(f));
		memcpy(f.bytes, "\x80\x3d\x00\x00\x00\x00", 6);
		f.bytes[6] = imm8s[i];
		f.len = 7;
		f.disp_at = 2;
		f.dst = f.src = -1;
		f.imm = imm8s[i];
		f.flag_mask = FL_ARITH;
		struct cp_insn insn = decode_ok(f.bytes, f.len);
		uint64_t insn_addr = cpu_assemble(&cpu, f.bytes, f.len);
		uint64_t target = (uint64_t)(uintptr_t)cpu.data + D_TARGET;
		int32_t disp = (int32_t)(target - (insn_addr + 7));
		memcpy((uint8_t *)(uintptr_t)insn_addr + 2, &disp, 4);
		insn.disp = disp;
		cpu_seal(&cpu);
		for (unsigned value = 0; value < 256; value++) {
			for (int flags_in = 0; flags_in < 2; flags_in++) {
				random_input(&cpu, &f, false, &rng);
				cpu_in(&cpu)[FLAGS] =
					0x202 | (flags_in ? FL_ARITH : 0);
				memset(cpu.data + D_TARGET, (int)(value ^ 0xff), 8);
				cpu.data[D_TARGET] = (uint8_t)value;
				cpu_run(&cpu);
				struct user_regs_struct regs =
					emulator_input(&cpu, &rng);
				cpu.reads = 0;
				int rc = cp_insn_emulate(&insn, insn_addr, &regs,
							 read_memory, write_memory,
							 &cpu);
				uint64_t want = cpu_out(&cpu)[FLAGS];
				EXPECT(rc == 0 && cpu.reads == 1 &&
					       cpu.read_addr == target &&
					       cpu.read_len == 1,
				       "cmpb $%#x vs %#x: rc %d, %d reads, last %zu "
				       "bytes at %#llx",
				       imm8s[i], value, rc, cpu.reads, cpu.read_len,
				       (unsigned long long)cpu.read_addr);
				EXPECT(((regs.eflags ^ want) & FL_ARITH) == 0,
				       "cmpb $%#x vs %#x, flags in %#llx: emulator "
				       "flags %#llx, CPU %#llx",
				       imm8s[i], value,
				       (unsigned long long)cpu_in(&cpu)[FLAGS],
				       regs.eflags, (unsigned long long)want);
				EXPECT(regs.rip == insn_addr + 7, "rip %#llx",
				       regs.rip);
				for (unsigned reg = 0; reg < 16; reg++)
					EXPECT(*reg_field(&regs, reg) ==
						       cpu_out(&cpu)[reg],
					       "cmpb: %s %#llx, CPU %#llx",
					       reg_names[reg],
					       *reg_field(&regs, reg),
					       (unsigned long long)cpu_out(&cpu)[reg]);
			}
		}
	}

	/* cmpl/cmpq with imm8 and imm32, random memory */
	static const struct {
		uint8_t bytes[11];
		size_t len;
		int64_t imm;
	} wide[] = {
		{ { 0x83, 0x3d, 0, 0, 0, 0, 0x00 }, 7, 0 },
		{ { 0x83, 0x3d, 0, 0, 0, 0, 0xff }, 7, -1 },
		{ { 0x83, 0x3d, 0, 0, 0, 0, 0x80 }, 7, -128 },
		{ { 0x81, 0x3d, 0, 0, 0, 0, 0x00, 0x10, 0x00, 0x00 }, 10, 0x1000 },
		{ { 0x81, 0x3d, 0, 0, 0, 0, 0x00, 0x00, 0x00, 0x80 }, 10,
		  INT32_MIN },
		{ { 0x48, 0x83, 0x3d, 0, 0, 0, 0, 0x00 }, 8, 0 },
		{ { 0x48, 0x83, 0x3d, 0, 0, 0, 0, 0xff }, 8, -1 },
		{ { 0x48, 0x81, 0x3d, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f }, 11,
		  0x7fffffff },
		{ { 0x48, 0x81, 0x3d, 0, 0, 0, 0, 0x00, 0x00, 0x00, 0x80 }, 11,
		  INT32_MIN },
	};
	for (size_t i = 0; i < sizeof(wide) / sizeof(wide[0]); i++) {
		struct form f;
		memset(&f, 0, sizeof(f));
		memcpy(f.bytes, wide[i].bytes, wide[i].len);
		f.len = wide[i].len;
		f.disp_at = f.bytes[0] == 0x48 ? 3 : 2;
		f.dst = f.src = -1;
		f.imm = wide[i].imm;
		f.flag_mask = FL_ARITH;
		compare_with_cpu(&cpu, &f, 4096, &rng);
	}
	cpu_close(&cpu);
}
END_TEST

/* ------------------------------------------------- emulation, no CPU */

static struct user_regs_struct sample_regs(void)
{
	struct user_regs_struct regs;
	memset(&regs, 0x3c, sizeof(regs));
	for (unsigned reg = 0; reg < 16; reg++)
		*reg_field(&regs, reg) = 0x1000 + reg;
	regs.rsp = 0x7ffd12345670;
	regs.eflags = 0x246;
	return regs;
}

START_TEST(emulate_jmp)
{
	struct cpu cpu;
	memset(&cpu, 0, sizeof(cpu));
	static const struct {
		uint8_t bytes[5];
		size_t len;
		int64_t rel;
	} jumps[] = {
		{ { 0xe9, 0x78, 0x56, 0x34, 0x12 }, 5, 0x12345678 },
		{ { 0xe9, 0xfb, 0xff, 0xff, 0xff }, 5, -5 },
		{ { 0xe9, 0x00, 0x00, 0x00, 0x80 }, 5, INT32_MIN },
		{ { 0xeb, 0xfe }, 2, -2 },
		{ { 0xeb, 0x7f }, 2, 127 },
		{ { 0xeb, 0x80 }, 2, -128 },
	};
	const uint64_t address = 0x7f0000401000;
	for (size_t i = 0; i < sizeof(jumps) / sizeof(jumps[0]); i++) {
		struct cp_insn insn = decode_ok(jumps[i].bytes, jumps[i].len);
		struct user_regs_struct regs = sample_regs(), before = regs;
		ck_assert_int_eq(cp_insn_emulate(&insn, address, &regs,
						 read_memory, write_memory,
						 &cpu),
				 0);
		ck_assert_uint_eq(regs.rip,
				  address + jumps[i].len + (uint64_t)jumps[i].rel);
		regs.rip = before.rip;
		ck_assert_mem_eq(&regs, &before, sizeof(regs));
	}
	ck_assert_int_eq(cpu.reads + cpu.writes, 0);
}
END_TEST

START_TEST(emulate_rip_is_next)
{
	struct cpu cpu;
	memset(&cpu, 0, sizeof(cpu));
	const uint64_t address = 0x55555555a0f0;
	static const struct {
		uint8_t bytes[10];
		size_t len;
	} forms[] = {
		{ { 0xf3, 0x0f, 0x1e, 0xfa }, 4 },
		{ { 0x41, 0x54 }, 2 },
		{ { 0x48, 0x89, 0xf0 }, 3 },
		{ { 0x48, 0x85, 0xff }, 3 },
		{ { 0x48, 0x81, 0xff, 0x00, 0x10, 0x00, 0x00 }, 7 },
		{ { 0x49, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8 }, 10 },
	};
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		struct cp_insn insn = decode_ok(forms[i].bytes, forms[i].len);
		struct user_regs_struct regs = sample_regs();
		ck_assert_int_eq(cp_insn_emulate(&insn, address, &regs,
						 read_memory, write_memory,
						 &cpu),
				 0);
		ck_assert_uint_eq(regs.rip, address + forms[i].len);
	}
}
END_TEST

/* Serves one byte at ADDR for the glibc posix_memalign test.  */
struct one_byte {
	uint64_t addr;
	uint8_t value;
	int reads;
};

static int read_one_byte(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct one_byte *mem = arg;
	mem->reads++;
	if (addr != mem->addr || len != 1)
		return -1;
	*(uint8_t *)buf = mem->value;
	return 0;
}

static int write_nothing(void *arg, uint64_t addr, void *buf, size_t len)
{
	return -1;
}

/* The flags of `cmpb $IMM,VALUE` on this CPU.  pushfq runs below the
 * red zone (lea leaves the flags alone), where the compiler may keep
 * locals.  */
static uint64_t native_cmpb(uint8_t value, uint8_t imm)
{
	uint64_t flags;
	__asm__("cmpb %2,%1\n\t"
		"lea -128(%%rsp),%%rsp\n\tpushfq\n\tpopq %0\n\t"
		"lea 128(%%rsp),%%rsp"
		: "=r"(flags)
		: "m"(value), "iq"(imm)
		: "cc");
	return flags;
}

/* glibc's posix_memalign entry, at its address in libc, with the byte
 * behind the displacement served by a callback.  */
START_TEST(emulate_glibc_cmpb)
{
	static const uint8_t code[] = { 0x80, 0x3d, 0x01, 0x02, 0x14, 0x00,
					0x00 };
	struct cp_insn insn = decode_ok(code, sizeof(code));
	const uint64_t address = 0x7f0688d9a2c0;
	struct one_byte mem = { address + 7 + 0x140201, 0, 0 };
	for (unsigned value = 0; value < 256; value++) {
		mem.value = (uint8_t)value;
		mem.reads = 0;
		struct user_regs_struct regs = sample_regs(), before = regs;
		ck_assert_int_eq(cp_insn_emulate(&insn, address, &regs,
						 read_one_byte, write_nothing,
						 &mem),
				 0);
		ck_assert_int_eq(mem.reads, 1);
		ck_assert_uint_eq(regs.rip, address + 7);
		uint64_t want = native_cmpb((uint8_t)value, 0);
		ck_assert_msg(((regs.eflags ^ want) & FL_ARITH) == 0,
			      "cmpb $0 vs %#x: flags %#llx, CPU %#llx", value,
			      regs.eflags, (unsigned long long)want);
		ck_assert_int_eq(!!(regs.eflags & FL_ZF), value == 0);
		ck_assert_int_eq(!!(regs.eflags & FL_CF), 0);
		ck_assert_int_eq(!!(regs.eflags & FL_SF), value >= 0x80);
		regs.rip = before.rip;
		regs.eflags = before.eflags;
		ck_assert_mem_eq(&regs, &before, sizeof(regs));
	}

	/* a negative displacement reaches below the instruction */
	static const uint8_t back[] = { 0x80, 0x3d, 0x00, 0xff, 0xff, 0xff,
					0x05 };
	insn = decode_ok(back, sizeof(back));
	mem.addr = address + 7 - 0x100;
	static const uint8_t imms[] = { 0x05, 0x00, 0x80, 0xff };
	for (unsigned value = 0; value < 256; value++) {
		for (size_t i = 0; i < sizeof(imms); i++) {
			uint8_t variant[7];
			memcpy(variant, back, 7);
			variant[6] = imms[i];
			insn = decode_ok(variant, 7);
			mem.value = (uint8_t)value;
			struct user_regs_struct regs = sample_regs();
			ck_assert_int_eq(cp_insn_emulate(&insn, address, &regs,
							 read_one_byte,
							 write_nothing, &mem),
					 0);
			uint64_t want = native_cmpb((uint8_t)value, imms[i]);
			ck_assert_msg(((regs.eflags ^ want) & FL_ARITH) == 0,
				      "cmpb $%#x vs %#x: flags %#llx, CPU %#llx",
				      imms[i], value, regs.eflags,
				      (unsigned long long)want);
		}
	}
}
END_TEST

/* A push whose stack write fails reports it and changes nothing; so does
 * a cmp whose read fails.  */
START_TEST(emulate_memory_failure)
{
	struct cpu cpu;
	memset(&cpu, 0, sizeof(cpu));
	cpu.fail_memory = true;
	static const uint8_t pushes[][2] = { { 0x41, 0x54 }, { 0x55, 0x90 } };
	for (size_t i = 0; i < 2; i++) {
		struct cp_insn insn = decode_ok(pushes[i], i == 0 ? 2 : 1);
		struct user_regs_struct regs = sample_regs(), before = regs;
		cpu.writes = 0;
		ck_assert_int_eq(cp_insn_emulate(&insn, 0x401000, &regs,
						 read_memory, write_memory,
						 &cpu),
				 -CP_E_SYS);
		ck_assert_int_eq(cpu.writes, 1);
		ck_assert_uint_eq(cpu.write_addr, before.rsp - 8);
		ck_assert_mem_eq(&regs, &before, sizeof(regs));
	}

	static const uint8_t cmpb[] = { 0x80, 0x3d, 0x01, 0x02, 0x14, 0x00,
					0x00 };
	struct cp_insn insn = decode_ok(cmpb, sizeof(cmpb));
	struct user_regs_struct regs = sample_regs(), before = regs;
	ck_assert_int_eq(cp_insn_emulate(&insn, 0x401000, &regs, read_memory,
					 write_memory, &cpu),
			 -CP_E_SYS);
	ck_assert_int_eq(cpu.reads, 1);
	ck_assert_uint_eq(cpu.read_addr, 0x401000 + 7 + 0x140201);
	ck_assert_mem_eq(&regs, &before, sizeof(regs));
}
END_TEST

/* push %rsp stores the value rsp had before the push.  */
START_TEST(emulate_push_rsp)
{
	struct cpu cpu;
	memset(&cpu, 0, sizeof(cpu));
	static const uint8_t code[] = { 0x54 };
	struct cp_insn insn = decode_ok(code, 1);
	struct user_regs_struct regs = sample_regs();
	uint64_t rsp = regs.rsp;
	ck_assert_int_eq(cp_insn_emulate(&insn, 0x401000, &regs, read_memory,
					 write_memory, &cpu),
			 0);
	ck_assert_int_eq(cpu.writes, 1);
	ck_assert_uint_eq(cpu.write_addr, rsp - 8);
	ck_assert_uint_eq(cpu.write_len, 8);
	ck_assert_uint_eq(cpu.written, rsp);
	ck_assert_uint_eq(regs.rsp, rsp - 8);
}
END_TEST

static Suite *insn_suite(void)
{
	Suite *s = suite_create("insn");

	TCase *tc = tcase_create("decode");
	tcase_add_test(tc, decode_glibc_entries);
	tcase_add_test(tc, decode_jemalloc_entries);
	tcase_add_test(tc, decode_prologues);
	tcase_add_loop_test(tc, decode_refuses, 0,
			    sizeof(refused) / sizeof(refused[0]));
	tcase_add_test(tc, decode_reads_only_len);
	tcase_add_test(tc, decode_ignores_what_follows);
	tcase_add_test(tc, reg_numbers);
	suite_add_tcase(s, tc);

	tc = tcase_create("cpu");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, stub_sanity);
	tcase_add_test(tc, cpu_allocator_entries);
	tcase_add_test(tc, cpu_push);
	tcase_add_test(tc, cpu_mov_rr);
	tcase_add_test(tc, cpu_mov_ri);
	tcase_add_loop_test(tc, cpu_alu_rr, 0,
			    sizeof(alu_rr_ops) / sizeof(alu_rr_ops[0]));
	tcase_add_loop_test(tc, cpu_alu_ri, 0, 6);
	tcase_add_test(tc, cpu_cmp_rip);
	suite_add_tcase(s, tc);

	tc = tcase_create("emulate");
	tcase_add_test(tc, emulate_jmp);
	tcase_add_test(tc, emulate_rip_is_next);
	tcase_add_test(tc, emulate_glibc_cmpb);
	tcase_add_test(tc, emulate_memory_failure);
	tcase_add_test(tc, emulate_push_rsp);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(insn_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
