/* Fuzz the unwind-table checker (cprof/ehframe.h), and libunwind on what
 * it accepts.
 *
 * The input is the bytes of one section, taken every way the unwinder
 * takes a section: as .eh_frame (cp_ehframe_table_build, kind EH), as
 * .debug_frame (kind DEBUG, rewritten into .eh_frame form), as an
 * .eh_frame_hdr (cp_ehframe_hdr_parse) and as an ELF file whose
 * .eh_frame is looked up (cp_ehframe_elf_section).  Seeds are real
 * sections of the fixtures (tests/fuzz/corpus/ehframe/).
 *
 * What must hold, beyond no crash, leak or undefined behaviour in cprof:
 *   - the table is sorted, its FDEs do not overlap, each lies in the code
 *     ranges given, each FDE address lies in the image, and a lookup of
 *     an FDE's first and last byte finds that FDE;
 *   - an .eh_frame image is the input's first bytes; a rewritten
 *     .debug_frame image, checked again as .eh_frame at its address,
 *     gives the same FDEs with nothing refused;
 *   - libunwind, given only what was accepted (served the way the
 *     unwinder serves it: a one-entry search table per FDE, reads from
 *     the image), parses each FDE and steps one frame without crashing
 *     or hanging, wherever in the FDE's code the pc is.  (libunwind is not
 *     instrumented: this finds its aborts, wild reads and endless loops,
 *     not every read past an array.)
 *   - our own rule of that pc (src/unwind/rules.h), when it says it is
 *     simple, steps the frame exactly as libunwind did: the same result,
 *     pc, stack pointer and callee-saved registers.  */
#include <libunwind.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/ehframe.h"
#include "cprof/error.h"
#include "fuzzutil.h"
#include "unwind/rules.h"

/* Where the input lies, the code it may describe, and the rewritten
 * .debug_frame image (as in src/unwind/unwtables.c: above 2^63).  */
#define SECTION_ADDR 0x10000ull
#define IMAGE_ADDR 0x8000000000010000ull
static const struct cp_ehframe_range code[] = {
	{0x1000, 0x7fffffffffffull},
};
/* The one-entry search table of src/unwind/unwtables.h.  */
#define ENTRY_ADDR 0x8000000000000000ull
#define ENTRY_WORD 0x0000000080000000ull
/* A fake stack for libunwind's step.  */
#define STACK_ADDR 0x7ff000000000ull
#define STACK_SIZE 4096

extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as,
					      unw_word_t ip,
					      unw_dyn_info_t *di,
					      unw_proc_info_t *pi,
					      int need_unwind_info, void *arg);

/* The table being stepped through, and the fake machine.  */
static const struct cp_ehframe_table *table;
static const uint8_t *image;
static size_t image_size;
static uint64_t image_addr;
static uint64_t regs[17];
static uint8_t stack[STACK_SIZE];

static int find_proc_info(unw_addr_space_t as, unw_word_t ip,
			  unw_proc_info_t *pi, int need_unwind_info, void *arg)
{
	const struct cp_ehframe_fde *f = cp_ehframe_table_lookup(table, ip);
	if (!f)
		return -UNW_ENOINFO;
	unw_dyn_info_t di;
	memset(&di, 0, sizeof(di));
	di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di.start_ip = f->pc_start;
	di.end_ip = f->pc_end;
	di.u.rti.segbase = f->fde_addr;
	di.u.rti.table_data = ENTRY_ADDR;
	di.u.rti.table_len = 1;
	return _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi,
						  need_unwind_info, arg);
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi,
			    void *arg)
{
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dilap,
				  void *arg)
{
	return -UNW_ENOINFO;
}

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *valp,
		      int write, void *arg)
{
	if (write)
		return -UNW_EINVAL;
	if (addr == ENTRY_ADDR) {
		*valp = ENTRY_WORD;
		return 0;
	}
	if (addr >= STACK_ADDR && addr - STACK_ADDR <= STACK_SIZE - 8) {
		memcpy(valp, stack + (addr - STACK_ADDR), 8);
		return 0;
	}
	if (addr < image_addr + image_size && addr + 8 > image_addr &&
	    addr <= UINT64_MAX - 8) {
		uint8_t bytes[8] = {0};
		for (size_t i = 0; i < 8; i++)
			if (addr + i >= image_addr &&
			    addr + i < image_addr + image_size)
				bytes[i] = image[addr + i - image_addr];
		memcpy(valp, bytes, 8);
		return 0;
	}
	/* Anything else is the target's other memory, which the unwinder
	 * would read there (an indirect personality pointer of a CIE):
	 * some word.  */
	*valp = addr * 0x9e3779b97f4a7c15ull;
	return 0;
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg,
		      unw_word_t *valp, int write, void *arg)
{
	if (write)
		return -UNW_EREADONLYREG;
	if (reg < 0 || reg > UNW_X86_64_RIP)
		return -UNW_EBADREG;
	*valp = regs[reg];
	return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg,
			unw_fpreg_t *val, int write, void *arg)
{
	return -UNW_EBADREG;
}

static int resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf,
			 size_t len, unw_word_t *offp, void *arg)
{
	return -UNW_ENOINFO;
}

static unw_accessors_t accessors = {
	.find_proc_info = find_proc_info,
	.put_unwind_info = put_unwind_info,
	.get_dyn_info_list_addr = get_dyn_info_list_addr,
	.access_mem = access_mem,
	.access_reg = access_reg,
	.access_fpreg = access_fpreg,
	.resume = resume,
	.get_proc_name = get_proc_name,
};

static unw_addr_space_t as;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	as = unw_create_addr_space(&accessors, 0);
	FUZZ_CHECK(as != NULL, "unw_create_addr_space failed");
	/* No cache: a rule cached for one input's pc must not serve the
	 * next input's.  */
	unw_set_caching_policy(as, UNW_CACHE_NONE);
	for (size_t i = 0; i < STACK_SIZE; i++)
		stack[i] = (uint8_t)(i * 7 + 3);
	return 0;
}

static bool stack_word(uint64_t addr, uint64_t *val)
{
	if (addr < STACK_ADDR || addr - STACK_ADDR > STACK_SIZE - 8)
		return false;
	memcpy(val, stack + (addr - STACK_ADDR), 8);
	return true;
}

/* Our rule of PC (FDE F) against libunwind's step from the same
 * registers: STEP, IP and SP its result, CURSOR at the caller.  */
static void compare_rule(const struct cp_ehframe_fde *f, uint64_t pc,
			 int step, unw_cursor_t *cursor)
{
	struct cp_rule r;
	cp_rule_eval(image, image_size, image_addr, f->fde_addr, f->pc_start,
		     pc, &r);
	FUZZ_CHECK(r.kind == CP_RULE_SIMPLE || r.kind == CP_RULE_COMPLEX,
		   "rule kind %u", r.kind);
	if (r.kind != CP_RULE_SIMPLE)
		return;
	/* As the unwinder's fast_step does; what it would leave to
	 * libunwind (a slot outside the stack) is not compared.  */
	uint64_t cfa = (r.cfa_reg == UNW_X86_64_RSP ? regs[UNW_X86_64_RSP]
						     : regs[r.cfa_reg]) +
		       (uint64_t)(int64_t)r.cfa_off;
	uint64_t vals[CP_RULE_NSAVED];
	for (unsigned i = 0; i < CP_RULE_NSAVED; i++) {
		unsigned reg = cp_rule_saved_reg[i];
		vals[i] = regs[reg];
		if (cp_rule_how(&r, i) == CP_SAVED_CFA &&
		    !stack_word(cfa + (uint64_t)((int64_t)r.slot[i] * 8),
				&vals[i]))
			return;
	}
	bool ra_undef = cp_rule_how(&r, CP_RULE_RA) == CP_SAVED_UNDEF;
	uint64_t next_ip = ra_undef ? 0 : vals[CP_RULE_RA];
	int expect = 1;
	if (next_ip == pc && cfa == regs[UNW_X86_64_RSP])
		expect = -1;
	else if (ra_undef || cp_rule_how(&r, 1) == CP_SAVED_UNDEF)
		expect = 0;
	FUZZ_CHECK(expect < 0 ? step < 0 : step == expect,
		   "pc %#llx: libunwind's step %d, ours %d (cfa r%u%+d, "
		   "saved %#x; FDE at %#llx of image %#llx, code %#llx)",
		   (unsigned long long)pc, step, expect,
		   r.cfa_reg, r.cfa_off, r.how, (unsigned long long)f->fde_addr,
		   (unsigned long long)image_addr,
		   (unsigned long long)f->pc_start);
	if (expect <= 0)
		return;
	unw_word_t ip = 0, sp = 0;
	unw_get_reg(cursor, UNW_REG_IP, &ip);
	unw_get_reg(cursor, UNW_REG_SP, &sp);
	FUZZ_CHECK(ip == next_ip && sp == cfa,
		   "pc %#llx: libunwind's caller %#llx sp %#llx, ours %#llx "
		   "sp %#llx", (unsigned long long)pc, (unsigned long long)ip,
		   (unsigned long long)sp, (unsigned long long)next_ip,
		   (unsigned long long)cfa);
	for (unsigned i = 0; i + 1 < CP_RULE_NSAVED; i++) {
		unw_word_t v = 0;
		if (cp_rule_how(&r, i) == CP_SAVED_UNDEF)
			continue;
		int rc = unw_get_reg(cursor, cp_rule_saved_reg[i], &v);
		FUZZ_CHECK(rc == 0 && v == vals[i],
			   "pc %#llx: register %u: libunwind %#llx (%d), "
			   "ours %#llx", (unsigned long long)pc,
			   cp_rule_saved_reg[i], (unsigned long long)v, rc,
			   (unsigned long long)vals[i]);
	}
}

/* Step one frame from PC (in FDE F) with libunwind, on the fake
 * machine, and compare our rule's step.  */
static void step_from(const struct cp_ehframe_fde *f, uint64_t pc)
{
	for (int r = 0; r < 17; r++)
		regs[r] = STACK_ADDR + 64 * (uint64_t)r;
	regs[UNW_X86_64_RSP] = STACK_ADDR + STACK_SIZE / 2;
	regs[UNW_X86_64_RIP] = pc;
	unw_cursor_t cursor;
	if (unw_init_remote(&cursor, as, NULL) < 0)
		return;
	int step = unw_step(&cursor);
	unw_is_signal_frame(&cursor);
	compare_rule(f, pc, step, &cursor);
}

/* The properties of a built table T of IN.  */
static void check_table(const struct cp_ehframe_input *in,
			const struct cp_ehframe_table *t)
{
	const uint8_t *data;
	size_t size;
	uint64_t addr;
	cp_ehframe_table_image(t, &data, &size, &addr);
	if (in->kind == CP_EHFRAME_EH) {
		FUZZ_CHECK(addr == in->addr && size <= in->size &&
				   (size == 0 || memcmp(data, in->data, size) == 0),
			   "the .eh_frame image is not the input's start");
	} else {
		FUZZ_CHECK(addr == in->image_addr, "image at %#llx",
			   (unsigned long long)addr);
	}
	struct cp_ehframe_stats st;
	cp_ehframe_table_stats(t, &st);
	size_t n = cp_ehframe_table_count(t);
	FUZZ_CHECK(st.kept == n && st.kept <= st.fdes,
		   "kept %zu, count %zu, fdes %zu", st.kept, n, st.fdes);
	for (size_t i = 0; i < n; i++) {
		const struct cp_ehframe_fde *f = cp_ehframe_table_fde(t, i);
		FUZZ_CHECK(f->pc_start < f->pc_end, "FDE %zu empty", i);
		FUZZ_CHECK(f->pc_start >= code[0].start &&
				   f->pc_end <= code[0].end,
			   "FDE %zu outside the code", i);
		FUZZ_CHECK(f->fde_addr >= addr && f->fde_addr - addr < size,
			   "FDE %zu outside the image", i);
		if (i > 0)
			FUZZ_CHECK(cp_ehframe_table_fde(t, i - 1)->pc_end <=
					   f->pc_start,
				   "FDEs %zu and %zu overlap or are not sorted",
				   i - 1, i);
		FUZZ_CHECK(cp_ehframe_table_lookup(t, f->pc_start) == f &&
				   cp_ehframe_table_lookup(t, f->pc_end - 1) == f,
			   "FDE %zu not found by its own addresses", i);
	}
	/* libunwind on a few FDEs, at their start and further in.  */
	table = t;
	image = data;
	image_size = size;
	image_addr = addr;
	for (size_t i = 0; i < n && i < 8; i++) {
		const struct cp_ehframe_fde *f = cp_ehframe_table_fde(t, i);
		step_from(f, f->pc_start);
		step_from(f, f->pc_start + (f->pc_end - f->pc_start) / 2);
		step_from(f, f->pc_end - 1);
	}
	table = NULL;
}

/* The rewritten .debug_frame image is .eh_frame the checker accepts
 * whole, with the same FDEs.  */
static void check_rewrite(const struct cp_ehframe_table *t)
{
	struct cp_ehframe_input again = {.kind = CP_EHFRAME_EH,
					 .code = code, .ncode = 1};
	cp_ehframe_table_image(t, &again.data, &again.size, &again.addr);
	struct cp_ehframe_table *t2 = NULL;
	FUZZ_CHECK(cp_ehframe_table_build(&again, &t2) == 0, "rebuild failed");
	struct cp_ehframe_stats st;
	cp_ehframe_table_stats(t2, &st);
	FUZZ_CHECK(st.rejected == 0, "the rewritten image has a problem: %s",
		   st.problem);
	size_t n = cp_ehframe_table_count(t);
	FUZZ_CHECK(cp_ehframe_table_count(t2) == n, "%zu FDEs, then %zu", n,
		   cp_ehframe_table_count(t2));
	for (size_t i = 0; i < n; i++) {
		const struct cp_ehframe_fde *a = cp_ehframe_table_fde(t, i);
		const struct cp_ehframe_fde *b = cp_ehframe_table_fde(t2, i);
		FUZZ_CHECK(a->pc_start == b->pc_start && a->pc_end == b->pc_end &&
				   a->fde_addr == b->fde_addr,
			   "FDE %zu differs after the rewrite", i);
	}
	cp_ehframe_table_free(t2);
}

struct buffer {
	const uint8_t *data;
	size_t size;
};

static int buffer_read(void *ctx, uint64_t offset, void *buf, size_t len)
{
	const struct buffer *b = ctx;
	if (offset > b->size || len > b->size - offset)
		return -CP_E_PARSE;
	memcpy(buf, b->data + offset, len);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int kind = CP_EHFRAME_EH; kind <= CP_EHFRAME_DEBUG; kind++) {
		struct cp_ehframe_input in = {
			.kind = (enum cp_ehframe_kind)kind, .data = data,
			.size = size, .addr = SECTION_ADDR, .bias = 0x1000,
			.image_addr = IMAGE_ADDR, .code = code, .ncode = 1,
		};
		struct cp_ehframe_table *t = NULL;
		int rc = cp_ehframe_table_build(&in, &t);
		FUZZ_CHECK(rc == 0, "build: %s", cp_strerror(rc));
		check_table(&in, t);
		if (kind == CP_EHFRAME_DEBUG)
			check_rewrite(t);
		cp_ehframe_table_free(t);
	}

	struct cp_ehframe_hdr h;
	const struct cp_ehframe_range loads[] = {{0x0, 0x8000},
						  {SECTION_ADDR, SECTION_ADDR + 0x100000}};
	int rc = cp_ehframe_hdr_parse(data, size, SECTION_ADDR, loads, 2, &h);
	FUZZ_CHECK(rc == 0 || (rc == -CP_E_PARSE && h.problem),
		   "hdr: %d without a reason", rc);
	if (rc == 0) {
		FUZZ_CHECK((h.eh_frame >= loads[0].start &&
			    h.eh_frame < loads[0].end &&
			    h.eh_frame_end == loads[0].end) ||
				   (h.eh_frame >= loads[1].start &&
				    h.eh_frame < loads[1].end &&
				    h.eh_frame_end == loads[1].end),
			   ".eh_frame outside the loads");
		FUZZ_CHECK(h.table_ok || h.problem, "table refused silently");
		FUZZ_CHECK(h.fde_count <= size / 8, "%llu entries in %zu bytes",
			   (unsigned long long)h.fde_count, size);
	}

	struct buffer file = {data, size};
	struct cp_ehframe_section s;
	rc = cp_ehframe_elf_section(buffer_read, &file, size, ".eh_frame", &s);
	FUZZ_CHECK(rc == 0 || rc == -CP_E_PARSE, "elf: %s", cp_strerror(rc));
	if (rc == 0)
		FUZZ_CHECK(s.offset <= size && s.size <= size - s.offset,
			   "the section leaves the file");
	return 0;
}
