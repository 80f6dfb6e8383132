/* The unwind tables a target brings with it: cprof must never die of
 * them (issue 11, item 4).
 *
 * Unit tests of the checker (cprof/ehframe.h) over handmade .eh_frame,
 * .debug_frame and .eh_frame_hdr bytes: each rule it enforces, the
 * records it keeps and those it leaves out, and its agreement with the
 * linker's own index on real files.
 *
 * End to end: copies of the unwtables fixture (fixtures/unwtables.c)
 * with corrupted unwind sections, profiled by cprof-attach in CPU mode,
 * heap mode and --unwind ptrace.  The saved recipes are the corruptions
 * that killed cprof-attach before the checker (libunwind-ptrace's
 * dwarf_find_unwind_table aborted on the first, followed a garbage
 * pointer on the second; in heap mode the target then died of the int3s
 * left in it); the random ones are 200 seeded corruptions of
 * .eh_frame, .eh_frame_hdr and .debug_frame.  Every run must end with
 * cprof-attach exiting by itself with 0 or 1 (never by a signal), and
 * the target alive, untraced and running.  */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cprof/addrspace.h"
#include "cprof/ehframe.h"
#include "cprof/error.h"
#include "cprof/procfs.h"
#include "testutil.h"
#include "unwind/unwtables.h"

#define READY_TIMEOUT_MS 15000
#define RUN_TIMEOUT_MS 30000
#define EXIT_TIMEOUT_MS 30000

/* ------------------------------------------------ handmade records */

/* A section being written.  */
struct sec {
	uint8_t d[4096];
	size_t n;
};

static void put(struct sec *s, const void *p, size_t n)
{
	if (n == 0)
		return;
	ck_assert_uint_le(s->n + n, sizeof(s->d));
	memcpy(s->d + s->n, p, n);
	s->n += n;
}

static void put8(struct sec *s, uint8_t v) { put(s, &v, 1); }
static void put32(struct sec *s, uint32_t v) { put(s, &v, 4); }
static void put64(struct sec *s, uint64_t v) { put(s, &v, 8); }

static void put_uleb(struct sec *s, uint64_t v)
{
	do {
		uint8_t b = v & 0x7f;
		v >>= 7;
		put8(s, b | (v ? 0x80 : 0));
	} while (v);
}

static void put_sleb(struct sec *s, int64_t v)
{
	for (;;) {
		uint8_t b = (uint64_t)v & 0x7f;
		v >>= 7;
		bool done = (v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40));
		put8(s, b | (done ? 0 : 0x80));
		if (done)
			return;
	}
}

/* Fill in the 32-bit length of the record that starts at AT.  */
static void close_record(struct sec *s, size_t at)
{
	uint32_t len = (uint32_t)(s->n - at - 4);
	memcpy(s->d + at, &len, 4);
}

/* The usual CFI of a function's entry: CFA = rsp + 8, return address at
 * CFA - 8.  */
static const uint8_t entry_cfi[] = {0x0c, 0x07, 0x08, 0x90, 0x01};

/* An .eh_frame CIE with augmentation AUG ("zR" and the like; its data
 * AUG_DATA), return address column RET_COL and the instructions INSTR.
 * Returns its offset.  */
static size_t eh_cie(struct sec *s, const char *aug, const uint8_t *aug_data,
		     size_t aug_len, uint8_t ret_col, const uint8_t *instr,
		     size_t instr_len)
{
	size_t at = s->n;
	put32(s, 0);
	put32(s, 0);          /* CIE id */
	put8(s, 1);           /* version */
	put(s, aug, strlen(aug) + 1);
	put_uleb(s, 1);       /* code alignment */
	put_sleb(s, -8);      /* data alignment */
	put8(s, ret_col);
	if (aug[0] == 'z') {
		put_uleb(s, aug_len);
		put(s, aug_data, aug_len);
	}
	put(s, instr, instr_len);
	close_record(s, at);
	return at;
}

/* The CIE most FDEs here use: "zR", pc-relative sdata4 pointers.  */
static size_t std_cie(struct sec *s)
{
	static const uint8_t r[] = {0x1b};
	return eh_cie(s, "zR", r, 1, 16, entry_cfi, sizeof(entry_cfi));
}

/* An .eh_frame FDE for [PC, PC + RANGE) using the "zR" CIE at CIE_OFF of
 * a section at address BASE, with the instructions INSTR.  Returns its
 * offset.  */
static size_t eh_fde(struct sec *s, uint64_t base, size_t cie_off, uint64_t pc,
		     uint32_t range, const uint8_t *instr, size_t instr_len)
{
	size_t at = s->n;
	put32(s, 0);
	put32(s, (uint32_t)(s->n - cie_off));  /* back to the CIE */
	put32(s, (uint32_t)(pc - (base + s->n)));  /* pcrel sdata4 */
	put32(s, range);
	put_uleb(s, 0);       /* augmentation data: none */
	put(s, instr, instr_len);
	close_record(s, at);
	return at;
}

#define BASE 0x10000u
static const struct cp_ehframe_range test_code[] = {{0x1000, 0x9000}};

static struct cp_ehframe_table *build(const struct sec *s,
				      enum cp_ehframe_kind kind,
				      uint64_t bias)
{
	struct cp_ehframe_input in = {
		.kind = kind, .data = s->d, .size = s->n, .addr = BASE,
		.bias = bias, .image_addr = 0x8000000000010000ull,
		.code = test_code, .ncode = 1,
	};
	struct cp_ehframe_table *t = NULL;
	ck_assert_int_eq(cp_ehframe_table_build(&in, &t), 0);
	ck_assert_ptr_nonnull(t);
	return t;
}

static struct cp_ehframe_stats stats(const struct cp_ehframe_table *t)
{
	struct cp_ehframe_stats st;
	cp_ehframe_table_stats(t, &st);
	return st;
}

static void assert_problem(const struct cp_ehframe_table *t, const char *what)
{
	struct cp_ehframe_stats st = stats(t);
	ck_assert_msg(st.problem && strstr(st.problem, what),
		      "expected a problem with \"%s\", got \"%s\"", what,
		      st.problem ? st.problem : "(none)");
}

START_TEST(test_valid_records)
{
	struct sec s = {0};
	size_t cie = std_cie(&s);
	size_t f1 = eh_fde(&s, BASE, cie, 0x2000, 0x100, entry_cfi,
			   sizeof(entry_cfi));
	size_t f2 = eh_fde(&s, BASE, cie, 0x1100, 0x80, NULL, 0);
	put32(&s, 0);  /* terminator */
	struct cp_ehframe_table *t = build(&s, CP_EHFRAME_EH, 0);
	struct cp_ehframe_stats st = stats(t);
	ck_assert_uint_eq(st.cies, 1);
	ck_assert_uint_eq(st.fdes, 2);
	ck_assert_uint_eq(st.kept, 2);
	ck_assert_uint_eq(st.rejected, 0);
	ck_assert_ptr_null(st.problem);
	/* Sorted by address; found by any pc inside, not outside.  */
	ck_assert_uint_eq(cp_ehframe_table_count(t), 2);
	ck_assert_uint_eq(cp_ehframe_table_fde(t, 0)->pc_start, 0x1100);
	const struct cp_ehframe_fde *f = cp_ehframe_table_lookup(t, 0x20ff);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(f->pc_start, 0x2000);
	ck_assert_uint_eq(f->pc_end, 0x2100);
	ck_assert_uint_eq(f->fde_addr, BASE + f1);
	ck_assert_uint_eq(cp_ehframe_table_lookup(t, 0x1100)->fde_addr,
			  BASE + f2);
	ck_assert_ptr_null(cp_ehframe_table_lookup(t, 0x2100));
	ck_assert_ptr_null(cp_ehframe_table_lookup(t, 0x1180));
	ck_assert_ptr_null(cp_ehframe_table_lookup(t, 0x10ff));
	/* The image is the section as read, at its address.  */
	const uint8_t *data;
	size_t size;
	uint64_t addr;
	cp_ehframe_table_image(t, &data, &size, &addr);
	ck_assert_uint_eq(addr, BASE);
	ck_assert_uint_eq(size, s.n);
	ck_assert_mem_eq(data, s.d, s.n);
	cp_ehframe_table_free(t);
	cp_ehframe_table_free(NULL);
}
END_TEST

/* One FDE with CFI INSTR next to a good one: the bad one is left out
 * with a problem naming WHY, the good one kept.  */
static void check_bad_cfi(const uint8_t *instr, size_t len, const char *why)
{
	struct sec s = {0};
	size_t cie = std_cie(&s);
	eh_fde(&s, BASE, cie, 0x2000, 0x100, instr, len);
	eh_fde(&s, BASE, cie, 0x3000, 0x100, entry_cfi, sizeof(entry_cfi));
	struct cp_ehframe_table *t = build(&s, CP_EHFRAME_EH, 0);
	ck_assert_uint_eq(stats(t).rejected, 1);
	ck_assert_uint_eq(cp_ehframe_table_count(t), 1);
	ck_assert_ptr_null(cp_ehframe_table_lookup(t, 0x2000));
	ck_assert_ptr_nonnull(cp_ehframe_table_lookup(t, 0x3000));
	assert_problem(t, why);
	cp_ehframe_table_free(t);
}

START_TEST(test_bad_cfi)
{
	/* DW_CFA_register r3 in r99: libunwind checks the first register
	 * only and indexes its locations with the second.  */
	static const uint8_t reg[] = {0x09, 0x03, 0x63};
	check_bad_cfi(reg, sizeof(reg), "register number");
	/* DW_CFA_offset r20 (6-bit operand), DW_CFA_def_cfa r40.  */
	static const uint8_t off[] = {0x94, 0x01};
	check_bad_cfi(off, sizeof(off), "register number");
	static const uint8_t cfa[] = {0x0c, 0x28, 0x08};
	check_bad_cfi(cfa, sizeof(cfa), "register number");
	/* DW_CFA_val_offset: libunwind skips it without its operands.  */
	static const uint8_t val[] = {0x14, 0x03, 0x02};
	check_bad_cfi(val, sizeof(val), "does not know");
	/* An operand cut by the end of the record.  */
	static const uint8_t cut[] = {0x04, 0x01, 0x02};
	check_bad_cfi(cut, sizeof(cut), "cut short");
	/* DW_CFA_def_cfa_expression longer than the record.  */
	static const uint8_t longexpr[] = {0x0f, 0x20, 0x77};
	check_bad_cfi(longexpr, sizeof(longexpr), "leaves the record");
	/* DW_OP_skip -3: libunwind would evaluate it for ever.  */
	static const uint8_t loop[] = {0x0f, 0x03, 0x2f, 0xfd, 0xff};
	check_bad_cfi(loop, sizeof(loop), "branch");
	/* DW_OP_bra past the end of the expression.  */
	static const uint8_t far[] = {0x0f, 0x04, 0x30, 0x28, 0x10, 0x00};
	check_bad_cfi(far, sizeof(far), "branch");
	/* DW_OP_call2: not evaluated by libunwind.  */
	static const uint8_t call[] = {0x0f, 0x03, 0x98, 0x00, 0x00};
	check_bad_cfi(call, sizeof(call), "does not evaluate");
}
END_TEST

START_TEST(test_good_expressions)
{
	/* glibc's signal trampoline style: DW_CFA_expression r16 with
	 * breg7 + deref, a forward skip and bra, and literals.  */
	static const uint8_t expr[] = {
		0x10, 0x10, 0x06, 0x77, 0x08, 0x06, 0x2f, 0x00, 0x00,
		0x0f, 0x06, 0x31, 0x28, 0x01, 0x00, 0x96, 0x30,
	};
	struct sec s = {0};
	size_t cie = std_cie(&s);
	eh_fde(&s, BASE, cie, 0x2000, 0x100, expr, sizeof(expr));
	struct cp_ehframe_table *t = build(&s, CP_EHFRAME_EH, 0);
	ck_assert_msg(stats(t).rejected == 0, "%s", stats(t).problem);
	ck_assert_ptr_nonnull(cp_ehframe_table_lookup(t, 0x2000));
	cp_ehframe_table_free(t);
}
END_TEST

/* A CIE built with AUG, AUG_DATA and RET_COL leaves its FDE out, for WHY.  */
static void check_bad_cie(const char *aug, const uint8_t *aug_data,
			  size_t aug_len, uint8_t ret_col, const char *why)
{
	struct sec s = {0};
	size_t cie = eh_cie(&s, aug, aug_data, aug_len, ret_col, entry_cfi,
			    sizeof(entry_cfi));
	eh_fde(&s, BASE, cie, 0x2000, 0x100, NULL, 0);
	struct cp_ehframe_table *t = build(&s, CP_EHFRAME_EH, 0);
	ck_assert_uint_eq(cp_ehframe_table_count(t), 0);
	assert_problem(t, why);
	cp_ehframe_table_free(t);
}

START_TEST(test_bad_cie)
{
	static const uint8_t r[] = {0x1b}, textrel[] = {0x2b},
			     indirect[] = {0x9b}, two[] = {0x1b, 0x1b};
	/* libunwind indexes its locations with the return column.  */
	check_bad_cie("zR", r, 1, 17, "return address column");
	check_bad_cie("zR", r, 1, 0xff, "return address column");
	/* Augmentations libunwind reads differently or not at all.  */
	check_bad_cie("zX", r, 1, 16, "augmentation");
	check_bad_cie("eh", r, 1, 16, "augmentation");
	check_bad_cie("zRRRR", r, 1, 16, "augmentation too long");
	/* The size must be where libunwind's reading ends.  */
	check_bad_cie("zR", two, 2, 16, "augmentation size");
	/* Encodings: textrel (unsupported), indirect initial locations.  */
	check_bad_cie("zR", textrel, 1, 16, "encoding");
	check_bad_cie("zR", indirect, 1, 16, "encoding");
}
END_TEST

START_TEST(test_bad_layout)
{
	/* An FDE whose CIE pointer lands inside the CIE, not on it.  */
	struct sec s = {0};
	size_t cie = std_cie(&s);
	size_t f = eh_fde(&s, BASE, cie, 0x2000, 0x100, NULL, 0);
	uint32_t ptr;
	memcpy(&ptr, s.d + f + 4, 4);
	ptr -= 4;
	memcpy(s.d + f + 4, &ptr, 4);
	struct cp_ehframe_table *t = build(&s, CP_EHFRAME_EH, 0);
	ck_assert_uint_eq(cp_ehframe_table_count(t), 0);
	assert_problem(t, "does not point at a CIE");
	cp_ehframe_table_free(t);

	/* Code outside the module's code, a wrapping range, no code.  */
	s.n = 0;
	cie = std_cie(&s);
	eh_fde(&s, BASE, cie, 0x8f00, 0x200, NULL, 0);
	eh_fde(&s, BASE, cie, 0x2000, 0, NULL, 0);
	eh_fde(&s, BASE, cie, 0x3000, 0x100, NULL, 0);
	t = build(&s, CP_EHFRAME_EH, 0);
	ck_assert_uint_eq(stats(t).rejected, 2);
	ck_assert_uint_eq(cp_ehframe_table_count(t), 1);
	assert_problem(t, "outside the module's code");
	cp_ehframe_table_free(t);

	/* Overlapping FDEs: the first kept.  */
	s.n = 0;
	cie = std_cie(&s);
	f = eh_fde(&s, BASE, cie, 0x2000, 0x100, NULL, 0);
	eh_fde(&s, BASE, cie, 0x2080, 0x100, NULL, 0);
	t = build(&s, CP_EHFRAME_EH, 0);
	ck_assert_uint_eq(cp_ehframe_table_count(t), 1);
	ck_assert_uint_eq(cp_ehframe_table_lookup(t, 0x2000)->fde_addr,
			  BASE + f);
	ck_assert_ptr_null(cp_ehframe_table_lookup(t, 0x2150));
	assert_problem(t, "overlaps");
	cp_ehframe_table_free(t);

	/* A length that leaves the section ends the scan; what came
	 * before stays.  */
	s.n = 0;
	cie = std_cie(&s);
	eh_fde(&s, BASE, cie, 0x2000, 0x100, NULL, 0);
	f = eh_fde(&s, BASE, cie, 0x3000, 0x100, NULL, 0);
	uint32_t huge = 0x7ffffff0;
	memcpy(s.d + f, &huge, 4);
	eh_fde(&s, BASE, cie, 0x4000, 0x100, NULL, 0);
	t = build(&s, CP_EHFRAME_EH, 0);
	ck_assert_uint_eq(cp_ehframe_table_count(t), 1);
	assert_problem(t, "leaves the section");
	cp_ehframe_table_free(t);

	/* Nothing at all, and nothing but a terminator.  */
	s.n = 0;
	t = build(&s, CP_EHFRAME_EH, 0);
	ck_assert_uint_eq(cp_ehframe_table_count(t), 0);
	ck_assert_ptr_null(cp_ehframe_table_lookup(t, 0x2000));
	cp_ehframe_table_free(t);
	put32(&s, 0);
	t = build(&s, CP_EHFRAME_EH, 0);
	ck_assert_uint_eq(cp_ehframe_table_count(t), 0);
	cp_ehframe_table_free(t);
}
END_TEST

/* A .debug_frame: CIE id ~0, the FDE's CIE pointer a section offset,
 * addresses absolute and link-time.  The image must be .eh_frame that
 * the checker accepts as such, with run-time addresses.  */
START_TEST(test_debug_frame)
{
	const uint64_t bias = 0x7f0000000000ull;
	struct sec s = {0};
	/* An FDE may name a CIE that comes later in .debug_frame.  */
	size_t fde_at = s.n;
	put32(&s, 0);
	put32(&s, 0);              /* CIE offset, patched below */
	put64(&s, 0x2000);         /* initial location */
	put64(&s, 0x100);          /* range */
	/* advance 4, set_loc 0x2010 (link-time), def_cfa_offset 16 */
	put8(&s, 0x44);
	put8(&s, 0x01);
	put64(&s, 0x2010);
	put8(&s, 0x0e);
	put8(&s, 0x10);
	close_record(&s, fde_at);
	size_t cie_at = s.n;
	put32(&s, 0);
	put32(&s, 0xffffffff);     /* CIE id */
	put8(&s, 4);               /* version 4: address and segment size */
	put8(&s, 0);               /* "" */
	put8(&s, 8);
	put8(&s, 0);
	put_uleb(&s, 1);
	put_sleb(&s, -8);
	put_uleb(&s, 16);
	put(&s, entry_cfi, sizeof(entry_cfi));
	close_record(&s, cie_at);
	uint32_t cie_off = (uint32_t)cie_at;
	memcpy(s.d + fde_at + 4, &cie_off, 4);

	const struct cp_ehframe_range rt_code[] = {
		{bias + 0x1000, bias + 0x9000}};
	struct cp_ehframe_input in = {
		.kind = CP_EHFRAME_DEBUG, .data = s.d, .size = s.n,
		.bias = bias, .image_addr = 0x8000000000010000ull,
		.code = rt_code, .ncode = 1,
	};
	struct cp_ehframe_table *t = NULL;
	ck_assert_int_eq(cp_ehframe_table_build(&in, &t), 0);
	ck_assert_msg(stats(t).rejected == 0, "%s", stats(t).problem);
	const struct cp_ehframe_fde *f = cp_ehframe_table_lookup(t, bias + 0x2080);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(f->pc_start, bias + 0x2000);
	ck_assert_uint_eq(f->pc_end, bias + 0x2100);

	/* The image, checked again as .eh_frame at its address: the same
	 * FDE, and the set_loc moved by the bias.  */
	const uint8_t *data;
	size_t size;
	uint64_t addr;
	cp_ehframe_table_image(t, &data, &size, &addr);
	ck_assert_uint_eq(addr, in.image_addr);
	ck_assert_uint_ge(f->fde_addr, addr);
	ck_assert_uint_lt(f->fde_addr, addr + size);
	struct cp_ehframe_input again = {
		.kind = CP_EHFRAME_EH, .data = data, .size = size, .addr = addr,
		.code = rt_code, .ncode = 1,
	};
	struct cp_ehframe_table *t2 = NULL;
	ck_assert_int_eq(cp_ehframe_table_build(&again, &t2), 0);
	ck_assert_msg(stats(t2).rejected == 0, "%s", stats(t2).problem);
	ck_assert_uint_eq(cp_ehframe_table_count(t2), 1);
	const struct cp_ehframe_fde *f2 = cp_ehframe_table_fde(t2, 0);
	ck_assert_uint_eq(f2->pc_start, f->pc_start);
	ck_assert_uint_eq(f2->pc_end, f->pc_end);
	ck_assert_uint_eq(f2->fde_addr, f->fde_addr);
	uint64_t loc = bias + 0x2010;
	ck_assert_ptr_nonnull(memmem(data, size, &loc, sizeof(loc)));
	cp_ehframe_table_free(t2);
	cp_ehframe_table_free(t);

	/* An .eh_frame CIE id in .debug_frame is an FDE pointing at
	 * offset 0, itself: not a CIE.  */
	struct sec e = {0};
	size_t c = std_cie(&e);
	eh_fde(&e, BASE, c, 0x2000, 0x100, NULL, 0);
	in.data = e.d;
	in.size = e.n;
	in.bias = 0;
	in.code = test_code;
	ck_assert_int_eq(cp_ehframe_table_build(&in, &t), 0);
	ck_assert_uint_eq(cp_ehframe_table_count(t), 0);
	cp_ehframe_table_free(t);
}
END_TEST

/* An .eh_frame_hdr for an .eh_frame at EH_FRAME with the entries
 * {pc, fde} (absolute addresses), at address HDR.  */
static void make_hdr(struct sec *s, uint64_t hdr, uint64_t eh_frame,
		     const uint64_t (*entries)[2], size_t n)
{
	s->n = 0;
	put8(s, 1);
	put8(s, 0x1b);
	put8(s, 0x03);
	put8(s, 0x3b);
	put32(s, (uint32_t)(eh_frame - (hdr + 4)));
	put32(s, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		put32(s, (uint32_t)(entries[i][0] - hdr));
		put32(s, (uint32_t)(entries[i][1] - hdr));
	}
}

START_TEST(test_hdr)
{
	const uint64_t hdr = 0x5000, eh = 0x5100;
	const struct cp_ehframe_range loads[] = {{0x0, 0x4000},
						  {0x5000, 0x6000}};
	const uint64_t good[][2] = {{0x1000, 0x5100}, {0x2000, 0x5140}};
	struct sec s;
	struct cp_ehframe_hdr h;

	make_hdr(&s, hdr, eh, good, 2);
	ck_assert_int_eq(cp_ehframe_hdr_parse(s.d, s.n, hdr, loads, 2, &h), 0);
	ck_assert_uint_eq(h.eh_frame, eh);
	ck_assert_uint_eq(h.eh_frame_end, 0x6000);
	ck_assert_uint_eq(h.fde_count, 2);
	ck_assert(h.table_ok);
	ck_assert_ptr_null(h.problem);

	/* The saved recipes' corruptions: a table encoding libunwind
	 * aborts on, and a count encoding (indirect) that had it follow a
	 * garbage pointer.  .eh_frame stays usable with the first.  */
	s.d[3] = 0x3a;
	ck_assert_int_eq(cp_ehframe_hdr_parse(s.d, s.n, hdr, loads, 2, &h), 0);
	ck_assert(!h.table_ok);
	ck_assert_uint_eq(h.eh_frame, eh);
	s.d[3] = 0x3b;
	s.d[2] = 0xb2;
	ck_assert_int_eq(cp_ehframe_hdr_parse(s.d, s.n, hdr, loads, 2, &h), 0);
	ck_assert(!h.table_ok);
	s.d[2] = 0x03;

	/* Header faults: version, pointer encoding, pointer outside the
	 * module, too short.  */
	s.d[0] = 2;
	ck_assert_int_eq(cp_ehframe_hdr_parse(s.d, s.n, hdr, loads, 2, &h),
			 -CP_E_PARSE);
	ck_assert_ptr_nonnull(h.problem);
	s.d[0] = 1;
	s.d[1] = 0x9b;
	ck_assert_int_eq(cp_ehframe_hdr_parse(s.d, s.n, hdr, loads, 2, &h),
			 -CP_E_PARSE);
	s.d[1] = 0xff;
	ck_assert_int_eq(cp_ehframe_hdr_parse(s.d, s.n, hdr, loads, 2, &h),
			 -CP_E_PARSE);
	s.d[1] = 0x1b;
	ck_assert_int_eq(cp_ehframe_hdr_parse(s.d, s.n, hdr, loads, 1, &h),
			 -CP_E_PARSE);
	ck_assert_int_eq(cp_ehframe_hdr_parse(s.d, 6, hdr, loads, 2, &h),
			 -CP_E_PARSE);

	/* Table faults: unsorted, an FDE outside .eh_frame, a count larger
	 * than the section.  */
	const uint64_t unsorted[][2] = {{0x2000, 0x5100}, {0x1000, 0x5140}};
	make_hdr(&s, hdr, eh, unsorted, 2);
	ck_assert_int_eq(cp_ehframe_hdr_parse(s.d, s.n, hdr, loads, 2, &h), 0);
	ck_assert(!h.table_ok);
	ck_assert_ptr_nonnull(strstr(h.problem, "sorted"));
	const uint64_t outside[][2] = {{0x1000, 0x5100}, {0x2000, 0x7000}};
	make_hdr(&s, hdr, eh, outside, 2);
	ck_assert_int_eq(cp_ehframe_hdr_parse(s.d, s.n, hdr, loads, 2, &h), 0);
	ck_assert(!h.table_ok);
	ck_assert_ptr_nonnull(strstr(h.problem, "outside"));
	make_hdr(&s, hdr, eh, good, 2);
	uint32_t many = 1000;
	memcpy(s.d + 8, &many, 4);
	ck_assert_int_eq(cp_ehframe_hdr_parse(s.d, s.n, hdr, loads, 2, &h), 0);
	ck_assert(!h.table_ok);
	ck_assert_ptr_nonnull(strstr(h.problem, "count"));
}
END_TEST

/* ----------------------------------------------- real files, via libelf */

struct file {
	uint8_t *data;
	size_t size;
};

static struct file read_whole(const char *path)
{
	struct file f = {0};
	FILE *fp = fopen(path, "rb");
	ck_assert_msg(fp != NULL, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(fseek(fp, 0, SEEK_END), 0);
	f.size = (size_t)ftell(fp);
	rewind(fp);
	f.data = malloc(f.size);
	ck_assert_ptr_nonnull(f.data);
	ck_assert_uint_eq(fread(f.data, 1, f.size, fp), f.size);
	fclose(fp);
	return f;
}

static int buffer_read(void *ctx, uint64_t offset, void *buf, size_t len)
{
	const struct file *f = ctx;
	if (offset > f->size || len > f->size - offset)
		return -CP_E_PARSE;
	memcpy(buf, f->data + offset, len);
	return 0;
}

/* A section of the ELF file PATH, by libelf (independent of the code
 * under test).  False when there is none.  */
static bool elf_section(const char *path, const char *name,
			GElf_Shdr *out)
{
	bool found = false;
	elf_version(EV_CURRENT);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	ck_assert_ptr_nonnull(elf);
	size_t shstrndx;
	ck_assert_int_eq(elf_getshdrstrndx(elf, &shstrndx), 0);
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn && !found;
	     scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		const char *n;
		if (gelf_getshdr(scn, &sh) &&
		    (n = elf_strptr(elf, shstrndx, sh.sh_name)) &&
		    strcmp(n, name) == 0) {
			*out = sh;
			found = true;
		}
	}
	elf_end(elf);
	close(fd);
	return found;
}

/* Our index of PATH's .eh_frame must hold exactly what the linker put
 * in its .eh_frame_hdr search table: nothing a real toolchain writes
 * is refused.  */
static void check_agrees_with_linker(const char *path)
{
	struct file f = read_whole(path);
	GElf_Shdr eh, hdr;
	ck_assert(elf_section(path, ".eh_frame", &eh));
	ck_assert(elf_section(path, ".eh_frame_hdr", &hdr));
	/* Our own section lookup finds the same.  */
	struct cp_ehframe_section mine;
	ck_assert_int_eq(cp_ehframe_elf_section(buffer_read, &f, f.size,
						".eh_frame", &mine), 0);
	ck_assert_uint_eq(mine.addr, eh.sh_addr);
	ck_assert_uint_eq(mine.offset, eh.sh_offset);
	ck_assert_uint_eq(mine.size, eh.sh_size);
	ck_assert(mine.alloc);
	ck_assert_int_eq(cp_ehframe_elf_section(buffer_read, &f, f.size,
						".no_such", &mine),
			 -CP_E_PARSE);

	const Elf64_Ehdr *e = (const Elf64_Ehdr *)f.data;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(f.data + e->e_phoff);
	struct cp_ehframe_range text[16], loads[16];
	size_t ntext = 0, nloads = 0;
	for (int i = 0; i < e->e_phnum && nloads < 16; i++) {
		if (ph[i].p_type != PT_LOAD)
			continue;
		loads[nloads++] = (struct cp_ehframe_range){
			ph[i].p_vaddr, ph[i].p_vaddr + ph[i].p_filesz};
		if (ph[i].p_flags & PF_X)
			text[ntext++] = (struct cp_ehframe_range){
				ph[i].p_vaddr, ph[i].p_vaddr + ph[i].p_memsz};
	}
	struct cp_ehframe_input in = {
		.kind = CP_EHFRAME_EH, .data = f.data + eh.sh_offset,
		.size = eh.sh_size, .addr = eh.sh_addr, .code = text,
		.ncode = ntext,
	};
	struct cp_ehframe_table *t = NULL;
	ck_assert_int_eq(cp_ehframe_table_build(&in, &t), 0);
	struct cp_ehframe_hdr h;
	ck_assert_int_eq(cp_ehframe_hdr_parse(f.data + hdr.sh_offset,
					      hdr.sh_size, hdr.sh_addr, loads,
					      nloads, &h), 0);
	ck_assert_msg(h.table_ok, "%s: %s", path, h.problem);
	ck_assert_uint_eq(h.eh_frame, eh.sh_addr);
	ck_assert_msg(cp_ehframe_table_count(t) == h.fde_count,
		      "%s: %zu FDEs indexed, %" PRIu64 " in .eh_frame_hdr "
		      "(first problem: %s)", path, cp_ehframe_table_count(t),
		      h.fde_count, stats(t).problem);
	const int32_t *entry = (const int32_t *)(f.data + hdr.sh_offset + 12);
	for (uint64_t i = 0; i < h.fde_count; i++) {
		uint64_t pc = hdr.sh_addr + (uint64_t)(int64_t)entry[2 * i];
		uint64_t fde = hdr.sh_addr + (uint64_t)(int64_t)entry[2 * i + 1];
		const struct cp_ehframe_fde *x = cp_ehframe_table_fde(t, i);
		ck_assert_uint_eq(x->pc_start, pc);
		ck_assert_uint_eq(x->fde_addr, fde);
	}
	cp_ehframe_table_free(t);
	free(f.data);
}

/* The path of a library mapped in this process, from /proc/self/maps.  */
static bool mapped_library(const char *name, char *path, size_t size)
{
	char *maps = tu_read_file("/proc/self/maps");
	bool found = false;
	ck_assert_ptr_nonnull(maps);
	for (char *line = strtok(maps, "\n"); line && !found;
	     line = strtok(NULL, "\n")) {
		char *slash = strchr(line, '/');
		if (slash && strstr(slash, name) &&
		    (size_t)snprintf(path, size, "%s", slash) < size)
			found = true;
	}
	free(maps);
	return found;
}

START_TEST(test_real_files)
{
	char path[PATH_MAX];
	check_agrees_with_linker(CP_BUILD_DIR "/fixtures/unwtables");
	check_agrees_with_linker(CP_BUILD_DIR "/fixtures/unwtables-df");
	check_agrees_with_linker(CP_BUILD_DIR "/cprof-attach");
	ck_assert(mapped_library("/libc.so", path, sizeof(path)));
	check_agrees_with_linker(path);
	ck_assert(mapped_library("/libelf", path, sizeof(path)));
	check_agrees_with_linker(path);
	ck_assert(mapped_library("/ld-linux", path, sizeof(path)));
	check_agrees_with_linker(path);

	/* unwtables-df's own functions are in .debug_frame only: all of
	 * them indexed, at run-time addresses once biased.  */
	const char *df = CP_BUILD_DIR "/fixtures/unwtables-df";
	struct file f = read_whole(df);
	GElf_Shdr sh;
	ck_assert(elf_section(df, ".debug_frame", &sh));
	const struct cp_ehframe_range all = {0x0, 0x100000};
	struct cp_ehframe_input in = {
		.kind = CP_EHFRAME_DEBUG, .data = f.data + sh.sh_offset,
		.size = sh.sh_size, .image_addr = 0x8000000000010000ull,
		.code = &all, .ncode = 1,
	};
	struct cp_ehframe_table *t = NULL;
	ck_assert_int_eq(cp_ehframe_table_build(&in, &t), 0);
	ck_assert_msg(stats(t).rejected == 0, "%s", stats(t).problem);
	ck_assert_uint_ge(cp_ehframe_table_count(t), 4);
	cp_ehframe_table_free(t);

	/* Truncated and garbage files are refused by the section lookup.  */
	struct cp_ehframe_section s;
	struct file cut = {f.data, 40};
	ck_assert_int_eq(cp_ehframe_elf_section(buffer_read, &cut, cut.size,
						".eh_frame", &s), -CP_E_PARSE);
	cut.size = f.size - 64;  /* the section headers cut */
	ck_assert_int_lt(cp_ehframe_elf_section(buffer_read, &cut, f.size,
						".eh_frame", &s), 0);
	memset(f.data, 0x41, 64);
	ck_assert_int_eq(cp_ehframe_elf_section(buffer_read, &f, f.size,
						".eh_frame", &s), -CP_E_PARSE);
	free(f.data);
}
END_TEST

/* ---------------------------------------------- corrupted binaries */

/* One change to a copy of a fixture: at OFFSET of SECTION, XOR or SET.  */
struct patch {
	const char *section;
	uint64_t offset;
	enum { SET, XOR, WORD } how;
	uint32_t value;
};

/* The saved recipes: each of these single bytes killed cprof-attach
 * before the unwind tables were checked (commit 5076806).  The memory
 * .eh_frame_hdr was refused by the unwinder's quick check, so it let
 * libunwind-ptrace read the file, which does no better.  */
static const struct patch recipe_table_enc[] = {
	/* table encoding 0x3b -> 0x3a: dwarf_find_unwind_table abort()s */
	{".eh_frame_hdr", 3, SET, 0x3a},
};
static const struct patch recipe_count_enc[] = {
	/* fde_count encoding 0x03 -> 0xb2 (indirect | datarel | udata2):
	 * dwarf_read_encoded_pointer dereferences a garbage pointer in
	 * cprof's own memory (SIGSEGV) */
	{".eh_frame_hdr", 2, SET, 0xb2},
};

/* The directory for corrupted copies: inside the fixtures directory,
 * so tu_fixture_start runs them (removed by teardown).  */
static char corrupt_dir[PATH_MAX];

static void remove_dir(const char *dir)
{
	char **names;
	int n = tu_dir_entries(dir, &names);
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX * 2];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	if (n >= 0)
		tu_free_names(names);
	rmdir(dir);
}

static void setup(void)
{
	/* A failed test ends without its teardown (Check's fork mode): the
	 * directories of test processes that are gone go now.  */
	char **names;
	int n = tu_dir_entries(CP_BUILD_DIR "/fixtures", &names);
	for (int i = 0; i < n; i++) {
		int pid;
		char dir[PATH_MAX];
		if (sscanf(names[i], "unwtables-corrupt-%d", &pid) == 1 &&
		    kill(pid, 0) != 0 && errno == ESRCH) {
			snprintf(dir, sizeof(dir), CP_BUILD_DIR "/fixtures/%s",
				 names[i]);
			remove_dir(dir);
		}
	}
	if (n >= 0)
		tu_free_names(names);
	snprintf(corrupt_dir, sizeof(corrupt_dir),
		 CP_BUILD_DIR "/fixtures/unwtables-corrupt-%d", (int)getpid());
	mkdir(corrupt_dir, 0755);
}

static void teardown(void)
{
	tu_cleanup();
	remove_dir(corrupt_dir);
}

/* Apply PATCHES (N) to a copy of FIXTURE named NAME in the corrupt
 * directory; DESC gets a description.  Returns the name to give
 * tu_fixture_start.  */
static const char *write_copy(const char *fixture, const char *name,
			      const struct patch *patches, size_t n,
			      char *desc, size_t desc_size)
{
	static char rel[PATH_MAX];
	char src[PATH_MAX], dst[PATH_MAX * 2];
	snprintf(src, sizeof(src), CP_BUILD_DIR "/fixtures/%s", fixture);
	struct file f = read_whole(src);
	size_t used = 0;
	desc[0] = 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Shdr sh;
		ck_assert_msg(elf_section(src, patches[i].section, &sh),
			      "%s has no %s", src, patches[i].section);
		ck_assert_uint_lt(patches[i].offset, sh.sh_size);
		uint8_t *p = f.data + sh.sh_offset + patches[i].offset;
		size_t room = sh.sh_size - patches[i].offset;
		switch (patches[i].how) {
		case SET:
			*p = (uint8_t)patches[i].value;
			break;
		case XOR:
			*p ^= (uint8_t)patches[i].value;
			break;
		case WORD:
			for (size_t k = 0; k < 4 && k < room; k++)
				p[k] = (uint8_t)(patches[i].value >> (8 * k));
			break;
		}
		used += (size_t)snprintf(desc + used, desc_size - used,
					 "%s%s+%#" PRIx64 " %s %#x",
					 i ? "; " : "", patches[i].section,
					 patches[i].offset,
					 patches[i].how == SET ? "=" :
					 patches[i].how == XOR ? "^=" : "word",
					 patches[i].value);
		if (used >= desc_size)
			used = desc_size - 1;
	}
	snprintf(dst, sizeof(dst), "%s/%s", corrupt_dir, name);
	int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	ck_assert_msg(fd >= 0, "%s: %s", dst, strerror(errno));
	ck_assert_int_eq(write(fd, f.data, f.size), (ssize_t)f.size);
	close(fd);
	free(f.data);
	snprintf(rel, sizeof(rel), "%s/%s", strrchr(corrupt_dir, '/') + 1,
		 name);
	return rel;
}

enum mode { MODE_CPU, MODE_HEAP, MODE_PTRACE, MODE_WALL };
static const char *const mode_names[] = {"CPU", "heap", "--unwind ptrace",
					 "--wall"};

/* One cprof-attach run on a target, in progress.  */
struct profiling {
	struct tu_proc *target;
	enum mode mode;
	const char *what;
	char path[PATH_MAX];
	struct tu_run *run;
};

/* Start profiling P->target in P->mode for SECONDS.  */
static void profile_start(struct profiling *p, const char *seconds)
{
	snprintf(p->path, sizeof(p->path), "%s/profile-%d", tu_temp_dir(),
		 (int)p->target->pid);
	const char *pid = p->target->pid_text;
	switch (p->mode) {
	case MODE_CPU:
		p->run = tu_cprof_start("-q", "-F", "499", "-d", seconds, "-o",
					p->path, pid, NULL);
		break;
	case MODE_HEAP:
		p->run = tu_cprof_start("-q", "--heap", "--heap-metric",
					"alloc-bytes", "--format", "folded",
					"-d", seconds, "-o", p->path, pid, NULL);
		break;
	case MODE_WALL:
		p->run = tu_cprof_start("-q", "--wall", "-F", "499", "-d",
					seconds, "-o", p->path, pid, NULL);
		break;
	default:
		p->run = tu_cprof_start("-q", "--unwind", "ptrace", "-F", "499",
					"-d", seconds, "-o", p->path, pid, NULL);
		break;
	}
	ck_assert_ptr_nonnull(p->run);
}

/* Wait for the run P: cprof-attach must end by itself with 0 or 1 (1
 * only with a message), and leave the target alive, untraced and
 * running.  OUT (may be NULL) gets the profile (the caller frees).  */
static void profile_finish(struct profiling *p, char **out)
{
	const char *mode = mode_names[p->mode];
	struct tu_run *run = p->run;
	tu_run_wait(run, RUN_TIMEOUT_MS);
	int code = tu_run_exit_code(run);
	if (!(run->finished && !run->timed_out && (code == 0 || code == 1) &&
	      (code == 0 || run->err[0] != 0))) {
		tu_run_dump(run, mode, 4000);
		ck_abort_msg("%s, %s mode: cprof-attach %s (status %#x)",
			     p->what, mode,
			     run->timed_out ? "hung" :
			     WIFSIGNALED(run->status) ? strsignal(WTERMSIG(run->status)) :
			     "failed", run->status);
	}
	/* Alive and untraced, and running: in heap mode an int3 left in
	 * it would kill it at its next allocation, some microseconds on.  */
	pid_t pid = p->target->pid;
	char state = tu_proc_state(pid);
	if (state == 0 || state == 'Z' || state == 'X') {
		tu_proc_wait_exit(p->target, 1000);
		ck_abort_msg("%s, %s mode: the target is gone (wait status "
			     "%#x, output: %s)", p->what, mode,
			     p->target->status, p->target->output);
	}
	ck_assert_msg(tu_traced_tasks(pid) == 0,
		      "%s, %s mode: the target is still traced", p->what, mode);
	ck_assert_msg(tu_wait_cpu_ticks(pid, 2, 10000),
		      "%s, %s mode: the target does not run after detach (%s)",
		      p->what, mode, tu_machine_load());
	state = tu_proc_state(pid);
	ck_assert_msg(state != 0 && state != 'Z' && state != 'X',
		      "%s, %s mode: the target died after detach", p->what,
		      mode);
	if (out)
		*out = tu_read_file(p->path);
	unlink(p->path);
}

/* Profile TARGET in MODE for 1 s: cprof-attach ends well (see
 * profile_finish), and some stack is whole, main to the leaf (WHAT says
 * what is profiled, for the messages).  A second, not 0.3: the target
 * works 30 us between sleeps of 20 us, and a stop asked for while it
 * works often lands at its next system call (the interrupt reaches a
 * thread on a CPU only when the kernel kicks it, slow on a virtual
 * machine): most CPU samples show clock_nanosleep, and 0.3 s gave no
 * whole stack in about one run of five.  The targets work 4 units
 * (120 us) between sleeps of 80 us.  */
static void check_whole_stacks(struct tu_proc *target, enum mode mode,
			       const char *what)
{
	char *text = NULL;
	struct profiling run = {target, mode, what, "", NULL};
	profile_start(&run, "1");
	profile_finish(&run, &text);
	ck_assert_ptr_nonnull(text);
	char error[128];
	struct tu_profile *p = tu_profile_parse(text, error, sizeof(error));
	ck_assert_msg(p != NULL, "%s", error);
	uint64_t whole = tu_profile_count_contiguous(
		p, TU_FRAMES("main", "uw_alpha", "uw_beta", "uw_gamma"));
	if (whole == 0)
		tu_profile_dump(p, 10);
	ck_assert_msg(whole > 0, "%s, %s mode: no whole stack", what,
		      mode_names[mode]);
	tu_profile_free(p);
	free(text);
}

/* A saved recipe, profiled in each mode in turn on one target, which
 * must then finish its work correctly.  The corrupted search table costs
 * nothing: .eh_frame is indexed anew, so the stacks are whole.  */
static void run_recipe(const struct patch *patches, size_t n,
		       const char *name)
{
	char desc[256];
	const char *copy = write_copy("unwtables", name, patches, n, desc,
				      sizeof(desc));
	/* Long enough for three runs of a second of the sanitized
	 * cprof-attach.  */
	struct tu_proc *target = tu_fixture_start(copy, "9", "80", "4", NULL);
	ck_assert_ptr_nonnull(target);
	ck_assert(tu_proc_wait_line(target, "ready", READY_TIMEOUT_MS));
	for (enum mode mode = MODE_CPU; mode <= MODE_PTRACE; mode++)
		check_whole_stacks(target, mode, desc);
	ck_assert(tu_proc_wait_exit(target, EXIT_TIMEOUT_MS));
	ck_assert_msg(WIFEXITED(target->status) &&
			      WEXITSTATUS(target->status) == 0,
		      "%s: target status %#x, output: %s", desc, target->status,
		      target->output);
	ck_assert(tu_proc_has_line_prefix(target, "ok "));
}

START_TEST(test_recipe_table_encoding)
{
	run_recipe(recipe_table_enc,
		   sizeof(recipe_table_enc) / sizeof(recipe_table_enc[0]),
		   "table-enc");
}
END_TEST

START_TEST(test_recipe_count_encoding)
{
	run_recipe(recipe_count_enc,
		   sizeof(recipe_count_enc) / sizeof(recipe_count_enc[0]),
		   "count-enc");
}
END_TEST

/* Tables found without .eh_frame_hdr: unwtables-df's own functions are
 * described in .debug_frame only (read from the file, rewritten), and
 * unwtables-musl (built when musl-gcc is installed) has .eh_frame but no
 * .eh_frame_hdr, found through the file's section headers.  Before,
 * both unwound no further than their first frame.  (Heap mode on the
 * musl build: see test_musl_libc_frames.)  */
START_TEST(test_tables_from_files)
{
	struct tu_proc *target = tu_fixture_start("unwtables-df", "9", "80", "4",
						  NULL);
	ck_assert_ptr_nonnull(target);
	ck_assert(tu_proc_wait_line(target, "ready", READY_TIMEOUT_MS));
	check_whole_stacks(target, MODE_CPU, "unwtables-df");
	check_whole_stacks(target, MODE_HEAP, "unwtables-df");
	check_whole_stacks(target, MODE_PTRACE, "unwtables-df");
	tu_proc_kill(target);

	if (access(CP_BUILD_DIR "/fixtures/unwtables-musl", X_OK) != 0) {
		fprintf(stderr, "test_tables_from_files: no unwtables-musl "
				"(musl-gcc not installed): skipped\n");
		return;
	}
	target = tu_fixture_start("unwtables-musl", "9", "80", "4", NULL);
	ck_assert_ptr_nonnull(target);
	ck_assert(tu_proc_wait_line(target, "ready", READY_TIMEOUT_MS));
	check_whole_stacks(target, MODE_CPU, "unwtables-musl");
	tu_proc_kill(target);
}
END_TEST

/* Profile TARGET in MODE for 0.3 s (cprof-attach ends well: see
 * profile_finish) and parse the profile (the caller frees it).  */
static struct tu_profile *profile_of(struct tu_proc *target, enum mode mode,
				     const char *what)
{
	char *text = NULL;
	struct profiling run = {target, mode, what, "", NULL};
	profile_start(&run, "0.3");
	profile_finish(&run, &text);
	ck_assert_ptr_nonnull(text);
	char error[128];
	struct tu_profile *p = tu_profile_parse(text, error, sizeof(error));
	ck_assert_msg(p != NULL, "%s", error);
	free(text);
	return p;
}

/* Frames that no unwind table covers, in musl's libc (issue 12 item 8):
 * nocfi-musl and nocfi-musl-static (fixtures/nocfi.c, built when musl-gcc
 * is installed) spend most of their time in musl's memset and strlen,
 * called by nc_leaf.  Every such sample must be whole,
 * main;nc_mid;nc_leaf_[fp];memset, nc_leaf marked as found without
 * unwind tables (the return address at memset's stack pointer); in heap
 * mode every allocation's stack is main;nc_mid;nc_leaf_[fp].  Before,
 * these were leaf-only: "memset", "strlen" and, in heap mode, "malloc".  */
static void check_musl_libc_frames(const char *fixture)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), CP_BUILD_DIR "/fixtures/%s", fixture);
	if (access(path, X_OK) != 0) {
		fprintf(stderr, "%s: not built (musl-gcc not installed): "
				"skipped\n", fixture);
		return;
	}
	struct tu_proc *target = tu_fixture_start(fixture, "20", NULL);
	ck_assert_ptr_nonnull(target);
	ck_assert(tu_proc_wait_line(target, "ready", READY_TIMEOUT_MS));
	for (enum mode mode = MODE_CPU; mode <= MODE_PTRACE; mode++) {
		struct tu_profile *p = profile_of(target, mode, fixture);
		uint64_t total = tu_profile_total(p), in_libc = 0, whole = 0;
		if (mode == MODE_HEAP) {
			in_libc = total;
			whole = tu_profile_count_contiguous(
				p, TU_FRAMES("main", "nc_mid", "nc_leaf_[fp]"));
		} else {
			static const char *const libc_fns[] = {"memset",
							       "strlen"};
			for (size_t i = 0; i < 2; i++) {
				in_libc += tu_profile_count_leaf(p, libc_fns[i]);
				whole += tu_profile_count_contiguous(
					p, TU_FRAMES("main", "nc_mid",
						     "nc_leaf_[fp]",
						     libc_fns[i]));
			}
		}
		if (in_libc == 0 || whole != in_libc)
			tu_profile_dump(p, 12);
		ck_assert_msg(in_libc > 0, "%s, %s mode: no sample in musl's "
			      "memset or strlen (%" PRIu64 " samples)",
			      fixture, mode_names[mode], total);
		ck_assert_msg(whole == in_libc, "%s, %s mode: %" PRIu64 " of %"
			      PRIu64 " samples in musl's libc have the whole "
			      "stack main;nc_mid;nc_leaf_[fp]", fixture,
			      mode_names[mode], whole, in_libc);
		tu_profile_free(p);
	}
	tu_proc_kill(target);
}

START_TEST(test_musl_libc_frames)
{
	check_musl_libc_frames("nocfi-musl");
	check_musl_libc_frames("nocfi-musl-static");
}
END_TEST

/* A thread of nocfi-musl asleep in nanosleep, after a close: both went
 * through musl's __syscall_cp_c, and the close's return address is still
 * in the unwritten locals of the frames without CFI above it.  Every
 * --wall sample of nc_sleeper in nanosleep must be
 * nc_sleeper;nanosleep;clock_nanosleep with no close between.  Before,
 * the stale word passed as clock_nanosleep's return address (its call
 * of __syscall_cp_c, below clock_nanosleep, looked like a call into it):
 * nanosleep_[fp];close_[fp];clock_nanosleep_[fp].  */
START_TEST(test_musl_stale_return_address)
{
	if (access(CP_BUILD_DIR "/fixtures/nocfi-musl", X_OK) != 0) {
		fprintf(stderr, "nocfi-musl: not built (musl-gcc not "
				"installed): skipped\n");
		return;
	}
	struct tu_proc *target = tu_fixture_start("nocfi-musl", "20", "1000",
						  "sleeper", NULL);
	ck_assert_ptr_nonnull(target);
	ck_assert(tu_proc_wait_line(target, "ready", READY_TIMEOUT_MS));
	struct tu_profile *p = profile_of(target, MODE_WALL, "nocfi-musl");
	uint64_t asleep = tu_profile_count_contiguous(
		p, TU_FRAMES("nc_sleeper_[fp]", "nanosleep_[fp]"));
	uint64_t right = tu_profile_count_contiguous(
		p, TU_FRAMES("nc_sleeper_[fp]", "nanosleep_[fp]",
			     "clock_nanosleep_[fp]"));
	uint64_t stale = tu_profile_count_frame(p, "close_[fp]");
	if (asleep == 0 || right != asleep || stale)
		tu_profile_dump(p, 12);
	ck_assert_msg(asleep > 0, "nocfi-musl: no sample of nc_sleeper in "
		      "nanosleep");
	ck_assert_msg(right == asleep && stale == 0,
		      "nocfi-musl: %" PRIu64 " of %" PRIu64 " samples in "
		      "nanosleep are nanosleep;clock_nanosleep, %" PRIu64
		      " have a frame close_[fp]", right, asleep, stale);
	tu_profile_free(p);
	tu_proc_kill(target);
}
END_TEST

/* A program built without unwind tables (issue 12 item 7): nocfi-bare
 * (gcc -O2 -fno-asynchronous-unwind-tables -fno-unwind-tables, no -g)
 * and nocfi-bare-fp (the same with frame pointers).  No sample may have
 * an "[unknown]" frame, its leaf least of all, and every stack must go
 * down to _start: main_[fp];nc_mid_[fp];nc_leaf wherever nc_leaf is.
 * Before, libunwind's guess of a frame-pointer frame took whatever rbp
 * held: leaf-only stacks (nc_leaf;memset) without frame pointers,
 * garbage under __libc_start_call_main with them, and "[unknown]" frames
 * that made the symbolizer re-read the mappings once per batch (under
 * load a re-read could lose modules: every frame, leaf included,
 * "[unknown]").  */
static void check_bare_frames(const char *fixture)
{
	struct tu_proc *target = tu_fixture_start(fixture, "20", NULL);
	ck_assert_ptr_nonnull(target);
	ck_assert(tu_proc_wait_line(target, "ready", READY_TIMEOUT_MS));
	for (enum mode mode = MODE_CPU; mode <= MODE_PTRACE; mode++) {
		struct tu_profile *p = profile_of(target, mode, fixture);
		uint64_t total = tu_profile_total(p);
		uint64_t unknown = tu_profile_count_frame(p, "[unknown]");
		uint64_t unknown_leaf = tu_profile_count_leaf(p, "[unknown]");
		uint64_t rooted = tu_profile_count_root(p, "_start");
		uint64_t in_leaf = tu_profile_count_frame(p, "nc_leaf");
		uint64_t whole = tu_profile_count_contiguous(
			p, TU_FRAMES("main_[fp]", "nc_mid_[fp]", "nc_leaf"));
		if (unknown || rooted != total || in_leaf == 0 ||
		    whole != in_leaf)
			tu_profile_dump(p, 12);
		ck_assert_msg(unknown_leaf == 0 && unknown == 0,
			      "%s, %s mode: %" PRIu64 " samples with an "
			      "[unknown] frame, %" PRIu64 " as the leaf",
			      fixture, mode_names[mode], unknown, unknown_leaf);
		ck_assert_msg(total > 0 && rooted == total,
			      "%s, %s mode: %" PRIu64 " of %" PRIu64 " stacks "
			      "go down to _start", fixture, mode_names[mode],
			      rooted, total);
		ck_assert_msg(in_leaf > 0 && whole == in_leaf,
			      "%s, %s mode: %" PRIu64 " of %" PRIu64 " samples "
			      "in nc_leaf are main_[fp];nc_mid_[fp];nc_leaf",
			      fixture, mode_names[mode], whole, in_leaf);
		tu_profile_free(p);
	}
	tu_proc_kill(target);
}

START_TEST(test_bare_frames)
{
	check_bare_frames("nocfi-bare");
	check_bare_frames("nocfi-bare-fp");
}
END_TEST

/* Samples in a signal handler (fixtures/sigframe.c): below the signal
 * frame, sf_spin was interrupted at its first or second instruction, and
 * its pc is exact; sf_caller's call of sf_spin is its last instruction,
 * so only the return address minus one is in sf_caller.  Every sample in
 * sf_handler must be main;sf_caller;sf_spin;<signal frame>;sf_handler.
 * Before, the walk asked libunwind whether a frame was a signal frame
 * before stepping from it, which told of the frame before: the frame
 * under the signal frame was named at pc - 1 (sigframe+0x169f, before
 * sf_spin) and its caller at its return address (sigframe+0x16b9, past
 * sf_caller).  */
START_TEST(test_signal_frames)
{
	struct tu_proc *target = tu_fixture_start("sigframe", "20", NULL);
	ck_assert_ptr_nonnull(target);
	ck_assert(tu_proc_wait_line(target, "ready", READY_TIMEOUT_MS));
	static const enum mode modes[] = {MODE_CPU, MODE_PTRACE};
	for (size_t i = 0; i < 2; i++) {
		struct tu_profile *p = profile_of(target, modes[i], "sigframe");
		uint64_t in_handler = tu_profile_count_frame(p, "sf_handler");
		uint64_t whole = tu_profile_count_subsequence(
			p, TU_FRAMES("main", "sf_caller", "sf_spin",
				     "sf_handler"));
		uint64_t below = tu_profile_count_contiguous(
			p, TU_FRAMES("main", "sf_caller", "sf_spin"));
		if (in_handler == 0 || whole != in_handler ||
		    below != tu_profile_total(p))
			tu_profile_dump(p, 12);
		ck_assert_msg(in_handler > 0 && whole == in_handler,
			      "sigframe, %s mode: %" PRIu64 " of %" PRIu64
			      " samples in the handler are main;sf_caller;"
			      "sf_spin;...;sf_handler", mode_names[modes[i]],
			      whole, in_handler);
		ck_assert_msg(below == tu_profile_total(p),
			      "sigframe, %s mode: %" PRIu64 " of %" PRIu64
			      " samples are main;sf_caller;sf_spin",
			      mode_names[modes[i]], below, tu_profile_total(p));
		tu_profile_free(p);
	}
	tu_proc_kill(target);
}
END_TEST

/* xorshift64*: the corruptions of one seed are the same on every run.  */
static uint64_t next_random(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dull;
}

#define RANDOM_CORRUPTIONS 200
#define RANDOM_BATCH 20

/* Corruption SEED: one to four changes (a bit flipped, a byte set, a
 * 32-bit word overwritten with 0, ~0, the extremes of int32 or anything)
 * anywhere in .eh_frame_hdr, .eh_frame and .debug_frame of unwtables (even
 * seeds) or unwtables-df (odd: its own code in .debug_frame).  */
static size_t random_patches(uint64_t seed, const char **fixture,
			     struct patch *patches)
{
	static const char *const names[] = {".eh_frame_hdr", ".eh_frame",
					    ".debug_frame"};
	static const uint32_t words[] = {0, 0xffffffff, 0x7fffffff,
					 0x80000000};
	char src[PATH_MAX];
	uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
	*fixture = seed % 2 ? "unwtables-df" : "unwtables";
	snprintf(src, sizeof(src), CP_BUILD_DIR "/fixtures/%s", *fixture);
	GElf_Shdr sh[3];
	const char *present[3];
	uint64_t sizes[3];
	size_t npresent = 0;
	for (size_t i = 0; i < 3; i++)
		if (elf_section(src, names[i], &sh[i]) && sh[i].sh_size > 0) {
			present[npresent] = names[i];
			sizes[npresent++] = sh[i].sh_size;
		}
	ck_assert_uint_gt(npresent, 0);
	size_t n = 1 + next_random(&state) % 4;
	for (size_t i = 0; i < n; i++) {
		size_t which = next_random(&state) % npresent;
		patches[i].section = present[which];
		patches[i].offset = next_random(&state) % sizes[which];
		switch (next_random(&state) % 3) {
		case 0:
			patches[i].how = XOR;
			patches[i].value = 1u << (next_random(&state) % 8);
			break;
		case 1:
			patches[i].how = SET;
			patches[i].value = next_random(&state) % 256;
			break;
		default:
			patches[i].how = WORD;
			patches[i].value = next_random(&state) % 2 ?
				words[next_random(&state) % 4] :
				(uint32_t)next_random(&state);
			break;
		}
	}
	return n;
}

/* The unwinder's tables follow the address space: a module the view no
 * longer has (unloaded, here libc taken out of our own mappings) loses
 * its tables, and says so (libunwind's cached rules must go too); one
 * still there keeps them.  */
START_TEST(test_tables_follow_addrspace)
{
	struct cp_addrspace *as = NULL;
	struct cp_unwtables *tables = NULL;
	ck_assert_int_eq(cp_addrspace_new(getpid(), &as), 0);
	ck_assert_int_eq(cp_unwtables_new(getpid(), &tables), 0);
	const struct cp_addrspace_view *v = cp_addrspace_view(as);
	uint64_t pc = (uint64_t)(uintptr_t)&getppid + 1;
	const struct cp_map *map = cp_maps_find(v->maps, pc);
	ck_assert_ptr_nonnull(map);
	ck_assert_ptr_nonnull(strstr(map->path, "libc.so"));
	ck_assert_ptr_nonnull(cp_unwtables_find(tables, v->maps, map, pc));
	ck_assert(!cp_unwtables_dropped(tables));
	cp_unwtables_prune(tables, v);
	ck_assert(!cp_unwtables_dropped(tables));

	/* Our mappings without libc's.  */
	char *text, *kept;
	size_t len, klen = 0;
	ck_assert_int_eq(cp_procfs_slurp("/proc/self/maps", &text, &len), 0);
	kept = malloc(len + 1);
	ck_assert_ptr_nonnull(kept);
	for (const char *line = text; line < text + len;) {
		const char *nl = memchr(line, '\n', (size_t)(text + len - line));
		size_t n = nl ? (size_t)(nl - line) + 1
			      : (size_t)(text + len - line);
		if (!memmem(line, n, "libc.so", 7)) {
			memcpy(kept + klen, line, n);
			klen += n;
		}
		line += n;
	}
	ck_assert_int_eq(cp_addrspace_apply_maps(as, kept, klen, true), 0);
	const struct cp_addrspace_view *without = cp_addrspace_view(as);
	ck_assert_ptr_null(cp_addrspace_view_module(without, pc));
	cp_unwtables_prune(tables, without);
	ck_assert(cp_unwtables_dropped(tables));
	/* Asked again (libc back), the tables are built anew.  */
	ck_assert_ptr_nonnull(cp_unwtables_find(tables, v->maps, map, pc));
	cp_addrspace_view_release(without);
	cp_addrspace_view_release(v);
	free(kept);
	free(text);
	cp_unwtables_free(tables);
	cp_addrspace_free(as);
}
END_TEST

/* Batch _i of the random corruptions: each copy profiled in CPU mode,
 * then in heap mode, on the same target; four copies at a time (most of
 * a run's time is cprof-attach starting and stopping, not CPU; the
 * targets pause 100 us after each 30 us of work, so they leave the CPUs
 * to the others).  */
#define PARALLEL 4

START_TEST(test_random_corruptions)
{
	for (int k = 0; k < RANDOM_BATCH; k += PARALLEL) {
		struct profiling runs[PARALLEL];
		char what[PARALLEL][600];
		for (int j = 0; j < PARALLEL; j++) {
			uint64_t seed = (uint64_t)(_i * RANDOM_BATCH + k + j + 1);
			struct patch patches[4];
			const char *fixture;
			size_t n = random_patches(seed, &fixture, patches);
			char name[64], desc[512];
			snprintf(name, sizeof(name), "seed-%" PRIu64, seed);
			const char *copy = write_copy(fixture, name, patches, n,
						      desc, sizeof(desc));
			snprintf(what[j], sizeof(what[j]),
				 "seed %" PRIu64 " (%s: %s)", seed, fixture, desc);
			runs[j] = (struct profiling){
				.target = tu_fixture_start(copy, "30", "100",
							   NULL),
				.what = what[j],
			};
			ck_assert_ptr_nonnull(runs[j].target);
		}
		for (int j = 0; j < PARALLEL; j++)
			ck_assert_msg(tu_proc_wait_line(runs[j].target, "ready",
							READY_TIMEOUT_MS),
				      "%s: the corrupted target did not start",
				      runs[j].what);
		for (enum mode mode = MODE_CPU; mode <= MODE_HEAP; mode++) {
			for (int j = 0; j < PARALLEL; j++) {
				runs[j].mode = mode;
				profile_start(&runs[j], "0.1");
			}
			for (int j = 0; j < PARALLEL; j++)
				profile_finish(&runs[j], NULL);
		}
		for (int j = 0; j < PARALLEL; j++)
			tu_proc_kill(runs[j].target);
	}
}
END_TEST

static Suite *unwtables_suite(void)
{
	Suite *suite = suite_create("unwtables");
	TCase *unit = tcase_create("checker");
	tcase_add_test(unit, test_valid_records);
	tcase_add_test(unit, test_bad_cfi);
	tcase_add_test(unit, test_good_expressions);
	tcase_add_test(unit, test_bad_cie);
	tcase_add_test(unit, test_bad_layout);
	tcase_add_test(unit, test_debug_frame);
	tcase_add_test(unit, test_hdr);
	tcase_add_test(unit, test_real_files);
	suite_add_tcase(suite, unit);

	TCase *saved = tcase_create("saved corrupt binaries and other tables");
	tcase_add_checked_fixture(saved, setup, teardown);
	tcase_set_timeout(saved, 120);
	tcase_add_test(saved, test_recipe_table_encoding);
	tcase_add_test(saved, test_recipe_count_encoding);
	tcase_add_test(saved, test_tables_from_files);
	tcase_add_test(saved, test_musl_libc_frames);
	tcase_add_test(saved, test_musl_stale_return_address);
	tcase_add_test(saved, test_bare_frames);
	tcase_add_test(saved, test_signal_frames);
	tcase_add_test(saved, test_tables_follow_addrspace);
	suite_add_tcase(suite, saved);

	TCase *random = tcase_create("random corruptions");
	tcase_add_checked_fixture(random, setup, teardown);
	tcase_set_timeout(random, 240);
	tcase_add_loop_test(random, test_random_corruptions, 0,
			    RANDOM_CORRUPTIONS / RANDOM_BATCH);
	suite_add_tcase(suite, random);
	return suite;
}

int main(void)
{
	SRunner *runner = srunner_create(unwtables_suite());
	srunner_run_all(runner, CK_NORMAL);
	int failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
