/* Remote DWARF CFI unwinding with libunwind, from a stack snapshot.  */
#include "cprof/unwinder.h"

#include <errno.h>
#include <libunwind-ptrace.h>
#include <elf.h>
#include <libunwind.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "cprof/procfs.h"
#include "unwtables.h"

#if !defined(__x86_64__)
#error "cprof unwinds x86-64 targets only for now"
#endif

#define PAGE_SIZE_ 4096u
#define PAGE_CACHE_SLOTS 1024u   /* 4 MiB of read-only target pages */

struct page_slot {
	uint64_t page;           /* target address, 0 when empty */
	unsigned char *data;     /* PAGE_SIZE_ bytes */
};

struct tid_upt {
	pid_t tid;
	void *upt;
};

struct cp_unwinder {
	pid_t pid;
	unw_addr_space_t as;          /* snapshot accessors */
	unw_addr_space_t as_ptrace;   /* libunwind-ptrace's memory and
				       * registers, our unwind tables */
	struct cp_maps *maps;
	struct cp_unwtables *tables;  /* the modules' checked unwind tables */
	struct page_slot *pages;
	const struct cp_snapshot *snap; /* the snapshot being unwound */
	struct tid_upt *tid_upts;       /* for CP_UNWIND_PTRACE */
	size_t ntid_upts;
};

/* libunwind's search of a remote .eh_frame_hdr table, which parses the
 * FDE it finds.  It is what libunwind-ptrace itself calls, so it is
 * exported; its header is not installed.  */
extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as,
					      unw_word_t ip,
					      unw_dyn_info_t *di,
					      unw_proc_info_t *pi,
					      int need_unwind_info, void *arg);

/* In CP_UNWIND_PTRACE mode the accessors get libunwind-ptrace's handle
 * as ARG, not ours, so they find the unwinder being run through this
 * pointer.  One unwind runs at a time per thread.  */
static __thread struct cp_unwinder *current;

static const struct cp_map *find_map(struct cp_unwinder *uw, uint64_t addr)
{
	const struct cp_map *m = cp_maps_find(uw->maps, addr);
	if (m)
		return m;
	struct cp_maps *fresh;
	if (cp_maps_read(uw->pid, &fresh) < 0)
		return NULL;
	/* Module handles stay valid: they are keyed by path.  */
	cp_maps_free(uw->maps);
	uw->maps = fresh;
	return cp_maps_find(uw->maps, addr);
}

/* The unwind information of IP for libunwind.  The FDE is found in the
 * module's checked table (unwtables.h); libunwind never sees the
 * target's own search table, nor reads any file: it gets a one-entry
 * search table (CP_UNWTABLES_ENTRY, which matches every pc) whose segbase
 * is the FDE's address, so its search parses exactly that FDE, read
 * through our access_mem from the checked image.  No system call: the
 * tables are built on the first pc of each module.  */
static int find_proc_info(unw_addr_space_t as, unw_word_t ip,
			  unw_proc_info_t *pi, int need_unwind_info, void *arg)
{
	struct cp_unwinder *uw = current;
	const struct cp_map *map = find_map(uw, ip);
	if (!map || map->path[0] == '\0' ||
	    (map->path[0] == '[' && strcmp(map->path, "[vdso]") != 0))
		return -UNW_ENOINFO;
	const struct cp_ehframe_fde *fde =
		cp_unwtables_find(uw->tables, uw->maps, map, ip);
	/* Rules cached from dropped tables may name expressions in an image
	 * no longer served (libunwind flushes lazily: safe mid-step).  */
	if (cp_unwtables_dropped(uw->tables)) {
		unw_flush_cache(uw->as, 0, 0);
		unw_flush_cache(uw->as_ptrace, 0, 0);
	}
	if (!fde)
		return -UNW_ENOINFO;
	unw_dyn_info_t di;
	memset(&di, 0, sizeof(di));
	di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di.start_ip = fde->pc_start;
	di.end_ip = fde->pc_end;
	di.u.rti.segbase = fde->fde_addr;
	di.u.rti.table_data = CP_UNWTABLES_ENTRY;
	di.u.rti.table_len = 8 / sizeof(unw_word_t);
	return _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi,
						  need_unwind_info, arg);
}

/* The unwind information libunwind's FDE parser made lives in its own
 * pool, which it frees itself (it never calls this for DWARF frames).  */
static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi,
			    void *arg)
{
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dilap,
				  void *arg)
{
	return -UNW_ENOINFO;
}

static bool read_cached(struct cp_unwinder *uw, uint64_t addr, void *out,
			size_t len)
{
	uint64_t page = addr & ~(uint64_t)(PAGE_SIZE_ - 1);
	size_t off = (size_t)(addr - page);
	if (off + len > PAGE_SIZE_)
		return false;
	struct page_slot *slot =
		&uw->pages[(page / PAGE_SIZE_) % PAGE_CACHE_SLOTS];
	if (slot->page != page) {
		if (!slot->data) {
			slot->data = malloc(PAGE_SIZE_);
			if (!slot->data)
				return false;
		}
		if (cp_target_read(uw->pid, page, slot->data, PAGE_SIZE_) !=
		    (ssize_t)PAGE_SIZE_) {
			slot->page = 0;
			return false;
		}
		slot->page = page;
	}
	memcpy(out, slot->data + off, len);
	return true;
}

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *valp,
		      int write, void *arg)
{
	struct cp_unwinder *uw = current;
	if (write)
		return -UNW_EINVAL;
	const struct cp_snapshot *s = uw->snap;
	/* Written so that no sum can wrap: ADDR comes from the target's
	 * stack and registers (0xffffffffffffffff + 8 is 7).  */
	if (s && addr >= s->stack_addr && s->stack_len >= sizeof(*valp) &&
	    addr - s->stack_addr <= s->stack_len - sizeof(*valp)) {
		memcpy(valp, s->stack + (addr - s->stack_addr), sizeof(*valp));
		return 0;
	}
	/* The unwind tables: only from the checked copies.  */
	if (cp_unwtables_read(uw->tables, addr, valp))
		return 0;
	/* Other read-only file mappings (code) do not change while the
	 * target runs: cache their pages.  */
	const struct cp_map *m = cp_maps_find(uw->maps, addr);
	if (m && !m->writable && (m->path[0] == '/' ||
				  strcmp(m->path, "[vdso]") == 0) &&
	    read_cached(uw, addr, valp, sizeof(*valp)))
		return 0;
	if (cp_target_read(uw->pid, addr, valp, sizeof(*valp)) ==
	    (ssize_t)sizeof(*valp))
		return 0;
	return -UNW_EINVAL;
}

static unsigned long long *reg_slot(struct user_regs_struct *r,
				    unw_regnum_t reg)
{
	switch (reg) {
	case UNW_X86_64_RAX: return &r->rax;
	case UNW_X86_64_RDX: return &r->rdx;
	case UNW_X86_64_RCX: return &r->rcx;
	case UNW_X86_64_RBX: return &r->rbx;
	case UNW_X86_64_RSI: return &r->rsi;
	case UNW_X86_64_RDI: return &r->rdi;
	case UNW_X86_64_RBP: return &r->rbp;
	case UNW_X86_64_RSP: return &r->rsp;
	case UNW_X86_64_R8: return &r->r8;
	case UNW_X86_64_R9: return &r->r9;
	case UNW_X86_64_R10: return &r->r10;
	case UNW_X86_64_R11: return &r->r11;
	case UNW_X86_64_R12: return &r->r12;
	case UNW_X86_64_R13: return &r->r13;
	case UNW_X86_64_R14: return &r->r14;
	case UNW_X86_64_R15: return &r->r15;
	case UNW_X86_64_RIP: return &r->rip;
	default: return NULL;
	}
}

/* A partial unwind (cp_unwinder_unwind_partial) in progress: registers
 * of the snapshot that hold no value, and those of them the unwind asked
 * for.  Both 0 otherwise.  */
static __thread uint32_t partial_unknown, partial_needed;

static int access_reg(unw_addr_space_t as, unw_regnum_t reg,
		      unw_word_t *valp, int write, void *arg)
{
	struct cp_unwinder *uw = current;
	if (write)
		return -UNW_EREADONLYREG;
	/* libunwind reads registers lazily, only when a frame's rule uses
	 * one that no inner frame saved: an error here ends the walk at the
	 * frame that needed it (unw_step fails), and we note which.  */
	if (reg >= 0 && reg < 32 && (partial_unknown & (1u << reg))) {
		partial_needed |= 1u << reg;
		return -UNW_EBADREG;
	}
	unsigned long long *slot =
		reg_slot((struct user_regs_struct *)&uw->snap->regs, reg);
	if (!slot)
		return -UNW_EBADREG;
	*valp = *slot;
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
	/* Names come from the symbolizer, once per address.  */
	return -UNW_ENOINFO;
}

static unw_accessors_t snapshot_accessors = {
	.find_proc_info = find_proc_info,
	.put_unwind_info = put_unwind_info,
	.get_dyn_info_list_addr = get_dyn_info_list_addr,
	.access_mem = access_mem,
	.access_reg = access_reg,
	.access_fpreg = access_fpreg,
	.resume = resume,
	.get_proc_name = get_proc_name,
};

/* CP_UNWIND_PTRACE: libunwind-ptrace's registers and memory, our unwind
 * tables (libunwind-ptrace's own find_proc_info reads the module's file
 * unchecked, and aborts the process on a table encoding it does not
 * expect).  */
static int ptrace_access_mem(unw_addr_space_t as, unw_word_t addr,
			     unw_word_t *valp, int write, void *arg)
{
	if (!write && current && cp_unwtables_read(current->tables, addr, valp))
		return 0;
	return _UPT_access_mem(as, addr, valp, write, arg);
}

static unw_accessors_t ptrace_accessors = {
	.find_proc_info = find_proc_info,
	.put_unwind_info = put_unwind_info,
	.get_dyn_info_list_addr = get_dyn_info_list_addr,
	.access_mem = ptrace_access_mem,
	.access_reg = _UPT_access_reg,
	.access_fpreg = _UPT_access_fpreg,
	.resume = resume,
	.get_proc_name = get_proc_name,
};

int cp_unwinder_new(pid_t pid, struct cp_unwinder **out)
{
	struct cp_unwinder *uw = calloc(1, sizeof(*uw));
	if (!uw)
		return -CP_E_NOMEM;
	uw->pid = pid;
	uw->pages = calloc(PAGE_CACHE_SLOTS, sizeof(*uw->pages));
	uw->as = unw_create_addr_space(&snapshot_accessors, 0);
	uw->as_ptrace = unw_create_addr_space(&ptrace_accessors, 0);
	if (!uw->pages || !uw->as || !uw->as_ptrace ||
	    cp_unwtables_new(pid, &uw->tables) < 0) {
		cp_unwinder_free(uw);
		return -CP_E_NOMEM;
	}
	/* Remember the unwind rules of each pc seen: a hit skips the unwind
	 * table search and the CFI parsing.  (libunwind 1.6 guards this cache
	 * with two sigprocmask calls per frame; measured against
	 * UNW_CACHE_NONE, which parses every frame's FDE again, the total
	 * tracer CPU time is about the same, and the cache wins on deep
	 * stacks.)  */
	unw_set_caching_policy(uw->as, UNW_CACHE_GLOBAL);
	unw_set_cache_size(uw->as, 4096, 0);
	unw_set_caching_policy(uw->as_ptrace, UNW_CACHE_GLOBAL);
	unw_set_cache_size(uw->as_ptrace, 4096, 0);
	int rc = cp_maps_read(pid, &uw->maps);
	if (rc < 0) {
		cp_unwinder_free(uw);
		return rc;
	}
	*out = uw;
	return 0;
}

void cp_unwinder_free(struct cp_unwinder *uw)
{
	if (!uw)
		return;
	cp_unwtables_free(uw->tables);
	for (size_t i = 0; i < uw->ntid_upts; i++)
		_UPT_destroy(uw->tid_upts[i].upt);
	free(uw->tid_upts);
	if (uw->pages)
		for (size_t i = 0; i < PAGE_CACHE_SLOTS; i++)
			free(uw->pages[i].data);
	free(uw->pages);
	if (uw->as)
		unw_destroy_addr_space(uw->as);
	if (uw->as_ptrace)
		unw_destroy_addr_space(uw->as_ptrace);
	cp_maps_free(uw->maps);
	free(uw);
}

void cp_unwinder_invalidate(struct cp_unwinder *uw)
{
	cp_unwtables_reset(uw->tables);
	for (size_t i = 0; i < PAGE_CACHE_SLOTS; i++)
		uw->pages[i].page = 0;
	unw_flush_cache(uw->as, 0, 0);
	unw_flush_cache(uw->as_ptrace, 0, 0);
	struct cp_maps *fresh;
	if (cp_maps_read(uw->pid, &fresh) == 0) {
		cp_maps_free(uw->maps);
		uw->maps = fresh;
	}
}

/* Walk CURSOR into PCS.  A return address is adjusted by one so it falls
 * inside the call, except after a signal frame, where the next pc is the
 * interrupted instruction itself.  */
static size_t walk(unw_cursor_t *cursor, uint64_t *pcs, size_t max)
{
	size_t n = 0;
	bool exact = true;
	while (n < max) {
		unw_word_t ip = 0, sp = 0;
		if (unw_get_reg(cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		unw_get_reg(cursor, UNW_REG_SP, &sp);
		pcs[n++] = exact ? ip : ip - 1;
		exact = unw_is_signal_frame(cursor) > 0;
		if (unw_step(cursor) <= 0)
			break;
		unw_word_t next_ip = 0, next_sp = 0;
		unw_get_reg(cursor, UNW_REG_IP, &next_ip);
		unw_get_reg(cursor, UNW_REG_SP, &next_sp);
		/* A frame that does not move is a loop in bad unwind data.  */
		if (next_ip == ip && next_sp == sp)
			break;
	}
	return n;
}

size_t cp_unwinder_unwind(struct cp_unwinder *uw,
			  const struct cp_snapshot *snap, uint64_t *pcs,
			  size_t max)
{
	if (max == 0)
		return 0;
	unw_cursor_t cursor;
	current = uw;
	uw->snap = snap;
	size_t n;
	if (unw_init_remote(&cursor, uw->as, uw) < 0) {
		pcs[0] = snap->regs.rip;
		n = 1;
	} else {
		n = walk(&cursor, pcs, max);
	}
	uw->snap = NULL;
	current = NULL;
	return n;
}

static void *upt_for_tid(struct cp_unwinder *uw, pid_t tid)
{
	for (size_t i = 0; i < uw->ntid_upts; i++)
		if (uw->tid_upts[i].tid == tid)
			return uw->tid_upts[i].upt;
	struct tid_upt *grown =
		realloc(uw->tid_upts, (uw->ntid_upts + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	uw->tid_upts = grown;
	void *upt = _UPT_create(tid);
	if (!upt)
		return NULL;
	uw->tid_upts[uw->ntid_upts].tid = tid;
	uw->tid_upts[uw->ntid_upts].upt = upt;
	uw->ntid_upts++;
	return upt;
}

size_t cp_unwinder_unwind_ptrace(struct cp_unwinder *uw, pid_t tid,
				 uint64_t *pcs, size_t max)
{
	if (max == 0)
		return 0;
	void *upt = upt_for_tid(uw, tid);
	if (!upt)
		return 0;
	unw_cursor_t cursor;
	current = uw;
	size_t n = 0;
	if (unw_init_remote(&cursor, uw->as_ptrace, upt) == 0)
		n = walk(&cursor, pcs, max);
	current = NULL;
	return n;
}

/* ---------------------------------------------------- partial unwinds */

/* How far above a frame's stack pointer the frame-pointer scan looks for
 * the frame's saved rbp: room for large local arrays.  */
#define FP_SCAN_MAX (64 * 1024)

/* The stack word at ADDR from the snapshot's copy.  */
static bool stack_word(const struct cp_snapshot *s, uint64_t addr,
		       uint64_t *out)
{
	if (addr < s->stack_addr || addr - s->stack_addr > s->stack_len ||
	    s->stack_len - (addr - s->stack_addr) < sizeof(*out))
		return false;
	memcpy(out, s->stack + (addr - s->stack_addr), sizeof(*out));
	return true;
}

/* LEN bytes of target code at ADDR, which must lie in one executable
 * mapping of the kept maps (never re-read here: the scan tries stack
 * words that are no addresses at all).  */
static bool read_code(struct cp_unwinder *uw, uint64_t addr,
		      unsigned char *buf, size_t len)
{
	const struct cp_map *m = cp_maps_find(uw->maps, addr);
	if (!m || !m->executable || m->end - addr < len)
		return false;
	if (!m->writable && (m->path[0] == '/' ||
			     strcmp(m->path, "[vdso]") == 0) &&
	    read_cached(uw, addr, buf, len))
		return true;
	return cp_target_read(uw->pid, addr, buf, len) == (ssize_t)len;
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
static enum call_site call_before(struct cp_unwinder *uw, uint64_t ret,
				  uint64_t *target)
{
	unsigned char b[8];
	if (ret < sizeof(b) || !read_code(uw, ret - sizeof(b), b, sizeof(b)))
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

/* For a function starting at START with the usual frame-pointer
 * prologue — [endbr64] push %rbp; mov %rsp,%rbp; pushes of callee-saved
 * registers; sub $N,%rsp — how far rbp lies above the stack pointer at
 * its call sites (gcc and clang at -O0, and any code built with
 * -fno-omit-frame-pointer that neither pushes arguments nor uses
 * alloca).  */
static bool frame_pointer_offset(struct cp_unwinder *uw, uint64_t start,
				 uint64_t *offset)
{
	unsigned char c[24];
	if (!read_code(uw, start, c, sizeof(c)))
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

/* Recover the value rbp has in the frame whose stack pointer is FRAME_SP,
 * in the function starting at START (0 when unknown), whose unwind rule
 * needs it (the frame base of a frame-pointer function) — no inner frame
 * saved it, so it is still that frame's rbp.  A frame-pointer frame keeps
 * [rbp] = the caller's rbp and [rbp+8] = the return address into the
 * caller, so a candidate A above FRAME_SP must hold a return address at
 * A+8, i.e. the address right after a call instruction.  In order of
 * trust:
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
static bool recover_rbp(struct cp_unwinder *uw, const struct cp_snapshot *s,
			uint64_t frame_sp, uint64_t start, uint64_t *rbp,
			bool *strong)
{
	uint64_t offset, ret, saved, target, hi = s->stack_addr + s->stack_len;
	*strong = true;
	if (start && frame_pointer_offset(uw, start, &offset) &&
	    offset <= FP_SCAN_MAX && stack_word(s, frame_sp + offset + 8, &ret) &&
	    call_before(uw, ret, &target) != NOT_A_CALL) {
		*rbp = frame_sp + offset;
		return true;
	}
	uint64_t weak = 0;
	for (uint64_t a = (frame_sp + 7) & ~(uint64_t)7;
	     a - frame_sp <= FP_SCAN_MAX && stack_word(s, a + 8, &ret); a += 8) {
		enum call_site kind = call_before(uw, ret, &target);
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
		    call_before(uw, caller_ret, &target) != NOT_A_CALL)
			weak = a;
	}
	if (!weak)
		return false;
	*strong = false;
	*rbp = weak;
	return true;
}

/* walk() for a partial snapshot: registers in UNKNOWN are not served.
 * Sets *ENDED when unw_step reported the outermost frame, *NEEDED to the
 * unknown registers asked for and, when one was, *STOP_SP and
 * *STOP_START to the stack pointer and function start of the frame whose
 * rule needed it (the last frame in PCS).  */
static size_t walk_partial(struct cp_unwinder *uw,
			   const struct cp_snapshot *snap, uint32_t unknown,
			   uint64_t *pcs, size_t max, bool *ended,
			   uint32_t *needed, uint64_t *stop_sp,
			   uint64_t *stop_start)
{
	unw_cursor_t cursor;
	size_t n = 0;
	current = uw;
	uw->snap = snap;
	partial_unknown = unknown;
	partial_needed = 0;
	*ended = false;
	*stop_sp = *stop_start = 0;
	if (unw_init_remote(&cursor, uw->as, uw) < 0) {
		pcs[n++] = snap->regs.rip;
		goto out;
	}
	bool exact = true;
	while (n < max) {
		unw_word_t ip = 0, sp = 0;
		if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		unw_get_reg(&cursor, UNW_REG_SP, &sp);
		pcs[n++] = exact ? ip : ip - 1;
		exact = unw_is_signal_frame(&cursor) > 0;
		int step = unw_step(&cursor);
		if (step <= 0) {
			*ended = step == 0;
			break;
		}
		unw_word_t next_ip = 0, next_sp = 0;
		unw_get_reg(&cursor, UNW_REG_IP, &next_ip);
		unw_get_reg(&cursor, UNW_REG_SP, &next_sp);
		if (next_ip == ip && next_sp == sp)
			break;
	}
	if (partial_needed) {
		/* A failed step leaves the cursor at the frame it failed on
		 * (libunwind computes the CFA before changing anything).  */
		unw_word_t sp = 0;
		unw_proc_info_t pi;
		unw_get_reg(&cursor, UNW_REG_SP, &sp);
		*stop_sp = sp;
		if (unw_get_proc_info(&cursor, &pi) == 0)
			*stop_start = pi.start_ip;
	}
out:
	*needed = partial_needed;
	partial_unknown = partial_needed = 0;
	uw->snap = NULL;
	current = NULL;
	return n;
}

size_t cp_unwinder_unwind_partial(struct cp_unwinder *uw,
				  const struct cp_snapshot *snap,
				  struct cp_unwind_partial *partial,
				  uint64_t *pcs, size_t max)
{
	const uint32_t all = CP_UNWIND_REG(CP_REG_RIP + 1) - 1;
	uint32_t unknown = all & ~partial->known;
	uint64_t stop_sp, stop_start;
	partial->needed = 0;
	partial->rbp_scanned = false;
	partial->ended = false;
	if (max == 0)
		return 0;
	size_t n = walk_partial(uw, snap, unknown, pcs, max, &partial->ended,
				&partial->needed, &stop_sp, &stop_start);
	if (partial->needed != CP_UNWIND_REG(CP_REG_RBP) || !stop_sp)
		return n;
	/* The frame-pointer case: find rbp on the stack and walk again with
	 * it.  The result must need nothing else; a weakly founded rbp must
	 * also lead to the outermost frame (a wrong one makes the next
	 * frames' addresses garbage, and garbage seldom ends there).  */
	uint64_t rbp;
	bool strong, ended;
	uint32_t needed;
	if (!recover_rbp(uw, snap, stop_sp, stop_start, &rbp, &strong))
		return n;
	struct cp_snapshot with_rbp = *snap;
	with_rbp.regs.rbp = rbp;
	size_t m = walk_partial(uw, &with_rbp,
				unknown & ~CP_UNWIND_REG(CP_REG_RBP), pcs, max,
				&ended, &needed, &stop_sp, &stop_start);
	if (needed == 0 && (strong || ended || m == max)) {
		partial->needed = 0;
		partial->rbp_scanned = true;
		partial->ended = ended;
		return m;
	}
	/* Not trusted: the frames as far as they were known.  */
	return walk_partial(uw, snap, unknown, pcs, max, &partial->ended,
			    &partial->needed, &stop_sp, &stop_start);
}
