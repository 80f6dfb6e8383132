/* Remote DWARF CFI unwinding from a stack snapshot: each frame whose rule
 * is simple stepped with our own rules (rules.h), the others by libunwind;
 * where no CFI covers a pc, the caller found by nocfi.c.  */
#include "cprof/unwinder.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind-ptrace.h>
#include <libunwind.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch/x86_64/regs.h"
#include "cprof/addrspace.h"
#include "cprof/error.h"
#include "cprof/procfs.h"
#include "unwind/nocfi.h"
#include "unwind/rules.h"
#include "unwind/unwtables.h"

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

/* The most saved-register slots below a copy's stack pointer.  */
#define POPPED_MAX 8

struct cp_unwinder {
	pid_t pid;
	unw_addr_space_t as;          /* snapshot accessors */
	unw_addr_space_t as_ptrace;   /* libunwind-ptrace's memory and
				       * registers, our unwind tables */
	struct cp_addrspace *space;   /* the target's address space */
	bool own_space;               /* made by cp_unwinder_new */
	const struct cp_addrspace_view *view; /* a reference to it */
	const struct cp_maps *maps;   /* VIEW's mappings */
	/* What the tables and the page cache were last checked against: a
	 * module gone since, or a new epoch, drops what was cached.  */
	uint64_t synced_epoch, synced_generation;
	bool refreshed;               /* the walk re-read the mappings */
	uint64_t refreshes;           /* ... how many times, ever */
	struct cp_unwtables *tables;  /* the modules' checked unwind tables */
	struct page_slot *pages;
	const struct cp_snapshot *snap; /* the snapshot being unwound */
	/* The registers libunwind starts a walk from: the snapshot's, then
	 * those of a caller found without CFI (restart_at).  */
	struct user_regs_struct regs;
	uint32_t lost;                  /* registers of REGS without a value
					 * (a guessed frame's) */
	bool own_regs;                  /* CP_UNWIND_PTRACE: REGS, not the
					 * thread's, are served */
	bool cfi_missing;               /* find_proc_info found no FDE */
	struct cp_snapshot ptrace_stack; /* CP_UNWIND_PTRACE: a copy of the
					  * stack, for frames without CFI */
	bool ptrace_stack_read;         /* ... taken in this walk */
	uint64_t entry;                 /* the executable's entry point
					 * (_start), 0 when unknown */
	struct tid_upt *tid_upts;       /* for CP_UNWIND_PTRACE */
	size_t ntid_upts;
	struct cp_rules *rules;         /* our rules by pc (rules.h) */
	int rules_mode;                 /* CP_UNWIND_RULES_* */
	/* A kernel copy's innermost frame in an epilogue: the slots below
	 * the stack pointer its rule names, and the registers' values.  */
	uint64_t popped_at[POPPED_MAX], popped_val[POPPED_MAX];
	size_t npopped;
	bool popped_found;              /* this walk has looked for them */
	uint64_t outer_sp;              /* the last walk's last frame's
					 * stack pointer */
	bool walk_rules;                /* the walk running uses RULES */
	struct cp_unwinder_rules_stats stats;
	uint64_t *check_pcs;            /* CP_UNWIND_RULES_CHECK: the */
	size_t check_cap;               /* other walk's frames */
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

/* Take the address space's current view.  */
static void take_view(struct cp_unwinder *uw)
{
	cp_addrspace_view_release(uw->view);
	uw->view = cp_addrspace_view(uw->space);
	uw->maps = uw->view->maps;
}

/* The mapping of ADDR; a miss re-reads the mappings, once per walk (a
 * library loaded since; garbage addresses of a bad step must not cost a
 * read each).  The tables are checked against the new view at the next
 * walk (sync_space): module handles stay valid meanwhile, they are keyed by
 * path and base.  */
static const struct cp_map *find_map(struct cp_unwinder *uw, uint64_t addr)
{
	const struct cp_map *m = cp_maps_find(uw->maps, addr);
	if (m || uw->refreshed)
		return m;
	uw->refreshed = true;
	uw->refreshes++;
	if (cp_addrspace_refresh(uw->space) < 0)
		return NULL;
	take_view(uw);
	return cp_maps_find(uw->maps, addr);
}

/* Forget everything cached of the target's memory and tables.  */
static void forget_all(struct cp_unwinder *uw)
{
	cp_unwtables_reset(uw->tables);
	for (size_t i = 0; i < PAGE_CACHE_SLOTS; i++)
		uw->pages[i].page = 0;
	unw_flush_cache(uw->as, 0, 0);
	unw_flush_cache(uw->as_ptrace, 0, 0);
	cp_rules_flush(uw->rules);
	uw->entry = cp_procfs_auxv(uw->pid, AT_ENTRY);
}

/* Before a walk: when the address space changed since the last one,
 * drop what was cached of modules that are gone (all of it in a new
 * epoch: the target exec'ed), and the cached pages (a library unloaded
 * and another mapped at its addresses).  */
static void sync_space(struct cp_unwinder *uw)
{
	uw->refreshed = false;
	if (cp_addrspace_generation(uw->space) == uw->synced_generation &&
	    uw->view->epoch == uw->synced_epoch)
		return;
	take_view(uw);
	if (uw->view->epoch != uw->synced_epoch) {
		forget_all(uw);
	} else {
		cp_unwtables_prune(uw->tables, uw->view);
		for (size_t i = 0; i < PAGE_CACHE_SLOTS; i++)
			uw->pages[i].page = 0;
		unw_flush_cache(uw->as, 0, 0);
		unw_flush_cache(uw->as_ptrace, 0, 0);
		cp_rules_flush(uw->rules);
	}
	uw->synced_epoch = uw->view->epoch;
	uw->synced_generation = uw->view->generation;
}

/* The unwind information of IP for libunwind.  The FDE is found in the
 * module's checked table (unwtables.h); libunwind never sees the
 * target's own search table, nor reads any file: it gets a one-entry
 * search table (CP_UNWTABLES_ENTRY, which matches every pc) whose segbase
 * is the FDE's address, so its search parses exactly that FDE, read
 * through our access_mem from the checked image.  No system call: the
 * tables are built on the first pc of each module.
 *
 * Where there is no FDE, the answer is not UNW_ENOINFO: with that,
 * libunwind's unw_step guesses a frame-pointer frame from rbp in any
 * code, also code that uses rbp for something else, and hands on what it
 * read there as the return address (garbage frames, "[unknown]" or a
 * wrong function, each a new address for the symbolizer), with the
 * stack pointer left 16 bytes above the callee's.  The step fails
 * instead, and walk() finds the caller itself (nocfi.h).  */
static const struct cp_ehframe_fde *find_fde(struct cp_unwinder *uw,
					   uint64_t ip)
{
	const struct cp_map *map = find_map(uw, ip);
	if (!map || map->path[0] == '\0' ||
	    (map->path[0] == '[' && strcmp(map->path, "[vdso]") != 0))
		return NULL;
	const struct cp_ehframe_fde *fde =
		cp_unwtables_find(uw->tables, uw->maps, map, ip);
	/* Rules cached from dropped tables may name expressions in an image
	 * no longer served (libunwind flushes lazily: safe mid-step), and
	 * ours may be another module's.  */
	if (cp_unwtables_dropped(uw->tables)) {
		unw_flush_cache(uw->as, 0, 0);
		unw_flush_cache(uw->as_ptrace, 0, 0);
		cp_rules_flush(uw->rules);
	}
	return fde;
}

static int find_proc_info(unw_addr_space_t as, unw_word_t ip,
			  unw_proc_info_t *pi, int need_unwind_info, void *arg)
{
	struct cp_unwinder *uw = current;
	const struct cp_ehframe_fde *fde = find_fde(uw, ip);
	if (!fde) {
		uw->cfi_missing = true;
		return -UNW_ESTOPUNWIND;
	}
	unw_dyn_info_t di;
	memset(&di, 0, sizeof(di));
	di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di.start_ip = fde->pc_start;
	di.end_ip = fde->pc_end;
	di.u.rti.segbase = fde->fde_addr;
	di.u.rti.table_data = CP_UNWTABLES_ENTRY;
	di.u.rti.table_len = 8 / sizeof(unw_word_t);
	int rc = _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi,
						    need_unwind_info, arg);
	if (rc == -UNW_ENOINFO) {
		uw->cfi_missing = true;
		return -UNW_ESTOPUNWIND;
	}
	return rc;
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

static void find_popped(struct cp_unwinder *uw,
			const struct cp_snapshot *snap);

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
	/* Below a kernel copy: a slot an epilogue popped (find_popped),
	 * looked for only when a walk reads there.  */
	if (s && s->copied_running && addr < s->stack_addr) {
		if (!uw->popped_found) {
			find_popped(uw, s);
			uw->popped_found = true;
		}
		for (size_t i = 0; i < uw->npopped; i++)
			if (addr == uw->popped_at[i]) {
				*valp = uw->popped_val[i];
				return 0;
			}
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
	/* A copy taken as the thread ran on: its stack now is not what
	 * the copy saw (other memory, such as a global a rule reads, is
	 * read as it is now).  */
	if (s && s->copied_running && m &&
	    cp_regs_sp(&s->regs) >= m->start && cp_regs_sp(&s->regs) < m->end)
		return -UNW_EINVAL;
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
	if (reg >= 0 && reg < 32 && (uw->lost & (1u << reg)))
		return -UNW_EBADREG;
	if (reg >= 0 && reg < 32 && (partial_unknown & (1u << reg))) {
		partial_needed |= 1u << reg;
		return -UNW_EBADREG;
	}
	unsigned long long *slot = reg_slot(&uw->regs, reg);
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

/* The thread's registers, until a walk restarts from a caller found
 * without CFI (restart_at).  */
static int ptrace_access_reg(unw_addr_space_t as, unw_regnum_t reg,
			     unw_word_t *valp, int write, void *arg)
{
	if (current && current->own_regs)
		return access_reg(as, reg, valp, write, arg);
	return _UPT_access_reg(as, reg, valp, write, arg);
}

static unw_accessors_t ptrace_accessors = {
	.find_proc_info = find_proc_info,
	.put_unwind_info = put_unwind_info,
	.get_dyn_info_list_addr = get_dyn_info_list_addr,
	.access_mem = ptrace_access_mem,
	.access_reg = ptrace_access_reg,
	.access_fpreg = _UPT_access_fpreg,
	.resume = resume,
	.get_proc_name = get_proc_name,
};

int cp_unwinder_new(pid_t pid, struct cp_unwinder **out)
{
	struct cp_addrspace *space;
	int rc = cp_addrspace_new(pid, &space);
	if (rc < 0)
		return rc;
	rc = cp_unwinder_new_in(space, out);
	if (rc < 0)
		cp_addrspace_free(space);
	else
		(*out)->own_space = true;
	return rc;
}

int cp_unwinder_new_in(struct cp_addrspace *space, struct cp_unwinder **out)
{
	struct cp_unwinder *uw = calloc(1, sizeof(*uw));
	if (!uw)
		return -CP_E_NOMEM;
	pid_t pid = cp_addrspace_pid(space);
	uw->pid = pid;
	uw->space = space;
	uw->pages = calloc(PAGE_CACHE_SLOTS, sizeof(*uw->pages));
	uw->as = unw_create_addr_space(&snapshot_accessors, 0);
	uw->as_ptrace = unw_create_addr_space(&ptrace_accessors, 0);
	uw->rules = cp_rules_new();
	if (!uw->pages || !uw->as || !uw->as_ptrace || !uw->rules ||
	    cp_unwtables_new(pid, &uw->tables) < 0) {
		cp_unwinder_free(uw);
		return -CP_E_NOMEM;
	}
	/* Remember the unwind rules of each pc seen: a hit skips the unwind
	 * table search and the CFI parsing.  libunwind (1.6 to 1.8) guards
	 * this cache with a lock taken with every signal masked: two
	 * rt_sigprocmask calls per frame.  Nothing it offers avoids them:
	 * UNW_CACHE_PER_THREAD is turned into UNW_CACHE_GLOBAL by
	 * unw_set_caching_policy (HAVE___THREAD is defined by no configure
	 * script; Debian's 1.6.2 disassembles to the same), and
	 * UNW_CACHE_NONE parses each frame's FDE into a dwarf_cie_info taken
	 * from and given back to its mempool, whose lock masks signals too:
	 * four calls per frame (measured, issue 15).  So the walks of
	 * snapshots step every frame they can with rules of our own, keyed
	 * by pc (rules.h), with no system call, and call libunwind only for
	 * the others.  */
	unw_set_caching_policy(uw->as, UNW_CACHE_GLOBAL);
	unw_set_cache_size(uw->as, 4096, 0);
	unw_set_caching_policy(uw->as_ptrace, UNW_CACHE_GLOBAL);
	unw_set_cache_size(uw->as_ptrace, 4096, 0);
	take_view(uw);
	uw->synced_epoch = uw->view->epoch;
	uw->synced_generation = uw->view->generation;
	uw->entry = cp_procfs_auxv(pid, AT_ENTRY);
	/* A switch for tests and measurements, not for users.  */
	const char *mode = getenv("CPROF_UNWIND_RULES");
	if (mode && strcmp(mode, "off") == 0)
		uw->rules_mode = CP_UNWIND_RULES_OFF;
	else if (mode && strcmp(mode, "check") == 0)
		uw->rules_mode = CP_UNWIND_RULES_CHECK;
	else if (mode && strcmp(mode, "abort") == 0)
		uw->rules_mode = CP_UNWIND_RULES_ABORT;
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
	free(uw->ptrace_stack.stack);
	cp_rules_free(uw->rules);
	free(uw->check_pcs);
	if (uw->as)
		unw_destroy_addr_space(uw->as);
	if (uw->as_ptrace)
		unw_destroy_addr_space(uw->as_ptrace);
	cp_addrspace_view_release(uw->view);
	if (uw->own_space)
		cp_addrspace_free(uw->space);
	free(uw);
}

struct cp_addrspace *cp_unwinder_addrspace(const struct cp_unwinder *uw)
{
	return uw->space;
}

void cp_unwinder_invalidate(struct cp_unwinder *uw)
{
	forget_all(uw);
	cp_addrspace_refresh(uw->space);
	take_view(uw);
	uw->synced_epoch = uw->view->epoch;
	uw->synced_generation = uw->view->generation;
}


/* ------------------------------------------------ frames without CFI */

/* LEN bytes of target code at ADDR, which must lie in one executable
 * mapping of the kept maps (never re-read here: the guesses try stack
 * words that are no addresses at all).  File-backed code comes from the
 * page cache, also across a page boundary.  */
static bool read_code(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct cp_unwinder *uw = ctx;
	const struct cp_map *m = cp_maps_find(uw->maps, addr);
	if (!m || !m->executable || m->end - addr < len)
		return false;
	if (!m->writable && (m->path[0] == '/' ||
			     strcmp(m->path, "[vdso]") == 0)) {
		size_t done = 0;
		while (done < len) {
			uint64_t at = addr + done;
			size_t room = PAGE_SIZE_ - (size_t)(at % PAGE_SIZE_);
			size_t chunk = len - done < room ? len - done : room;
			if (!read_cached(uw, at, (char *)buf + done, chunk))
				break;
			done += chunk;
		}
		if (done == len)
			return true;
	}
	return cp_target_read(uw->pid, addr, buf, len) == (ssize_t)len;
}

/* CP_UNWIND_PTRACE: the stack from SP up to the end of its mapping (at
 * most CP_TARGET_STACK_MAX), copied at the first frame without CFI of a
 * walk, in one read: the guesses read many words.  */
static const struct cp_snapshot *ptrace_stack(struct cp_unwinder *uw,
					      uint64_t sp)
{
	struct cp_snapshot *s = &uw->ptrace_stack;
	if (uw->ptrace_stack_read)
		return s;
	uw->ptrace_stack_read = true;
	s->stack_addr = sp;
	s->stack_len = 0;
	const struct cp_map *m = find_map(uw, sp);
	if (!m || !m->writable)
		return s;
	size_t len = m->end - sp < CP_TARGET_STACK_MAX ? (size_t)(m->end - sp)
						      : CP_TARGET_STACK_MAX;
	if (s->stack_cap < len) {
		unsigned char *grown = realloc(s->stack, len);
		if (!grown)
			return s;
		s->stack = grown;
		s->stack_cap = len;
	}
	ssize_t n = cp_target_read(uw->pid, sp, s->stack, len);
	s->stack_len = n > 0 ? (size_t)n : 0;
	return s;
}

/* The value of register REG in the frame CURSOR is at.  A register that
 * a partial snapshot lacks is not "needed" for this read (*FROM_SNAPSHOT
 * says it was one of those): it is only carried over, and needed when a
 * rule uses it.  */
static bool frame_reg(unw_cursor_t *cursor, unw_regnum_t reg, uint64_t *val,
		      bool *from_snapshot)
{
	uint32_t needed = partial_needed;
	unw_word_t v = 0;
	int rc = unw_get_reg(cursor, reg, &v);
	*from_snapshot = partial_needed != needed;
	partial_needed = needed;
	*val = v;
	return rc == 0;
}

#define ALL_REGS (CP_UNWIND_REG(CP_REG_RIP + 1) - 1)
/* _start's length, at most (glibc's is 38 bytes, musl's 22).  */
#define START_SIZE 64

static const unw_regnum_t callee_saved[] = {
	UNW_X86_64_RBX, UNW_X86_64_RBP, UNW_X86_64_R12,
	UNW_X86_64_R13, UNW_X86_64_R14, UNW_X86_64_R15,
};

/* Start CURSOR over at C, the caller of the frame CURSOR is at, found
 * without CFI, from registers of our making: the pc is the return address
 * minus one (inside the call, where libunwind looks a return address up;
 * a new cursor takes its pc as exact), rsp and rbp as found, the other
 * callee-saved registers carried over when nothing was saved below the
 * return address, every other register without a value (a rule that
 * needs one ends the walk there).  */
static int restart_at(struct cp_unwinder *uw, unw_cursor_t *cursor,
		      unw_addr_space_t as, void *arg,
		      const struct cp_nocfi_caller *c)
{
	struct user_regs_struct regs;
	memset(&regs, 0, sizeof(regs));
	uint32_t lost = ALL_REGS, from_snapshot = 0;
	regs.rip = c->ret - 1;
	regs.rsp = c->sp;
	lost &= ~(CP_UNWIND_REG(CP_REG_RIP) | CP_UNWIND_REG(CP_REG_RSP));
	if (c->rbp_known) {
		regs.rbp = c->rbp;
		lost &= ~CP_UNWIND_REG(CP_REG_RBP);
	}
	for (size_t i = 0; c->regs_kept && i < sizeof(callee_saved) /
						   sizeof(callee_saved[0]);
	     i++) {
		unw_regnum_t reg = callee_saved[i];
		uint64_t v;
		bool snap_lacks;
		if (frame_reg(cursor, reg, &v, &snap_lacks)) {
			*reg_slot(&regs, reg) = v;
			lost &= ~(1u << reg);
		} else if (snap_lacks) {
			from_snapshot |= 1u << reg;
			lost &= ~(1u << reg);
		}
	}
	uw->regs = regs;
	uw->lost = lost;
	partial_unknown = from_snapshot;
	uw->own_regs = true;
	return unw_init_remote(cursor, as, arg);
}

/* The caller of the frame at pc PC and stack pointer SP, which has no
 * CFI (nocfi.h), into *C; RBP: the frame's rbp, NULL when it has none.
 * INTERRUPTED: the frame is the thread's own or one a signal interrupted.
 * Returns 1 at the caller, 0 when the frame is the outermost, -1 when no
 * caller was found.  BELOW: the return addresses of the frames below,
 * nearest first (NBELOW).  */
static int caller_without_cfi(struct cp_unwinder *uw, uint64_t pc,
			      uint64_t sp, const uint64_t *rbp,
			      bool interrupted, const uint64_t *below,
			      size_t nbelow, struct cp_nocfi_caller *c)
{
	/* _start is the main thread's first frame (glibc's CFI says so,
	 * musl's _start has none): above it lie argv, the environment and
	 * the auxiliary vector, whose words include code addresses.  */
	if (uw->entry && pc >= uw->entry && pc - uw->entry < START_SIZE)
		return 0;
	/* A pc outside code is garbage a step made.  */
	const struct cp_map *m = cp_maps_find(uw->maps, pc);
	if (!m || !m->executable)
		return -1;
	const struct cp_nocfi_code code = {read_code, uw};
	const struct cp_snapshot *stack =
		uw->snap ? uw->snap : ptrace_stack(uw, sp);
	int found = cp_nocfi_caller(&code, stack, pc, sp, rbp, interrupted,
				    uw->entry, below, nbelow, c);
	if (found <= 0)
		return found;
	/* The stack grows down: a caller's frame lies above.  */
	return c->sp > sp ? 1 : -1;
}

/* The frame CURSOR is at, with pc PC and stack pointer SP, has no CFI:
 * find its caller (caller_without_cfi) and start CURSOR over there.
 * Returns 1 at the caller (*SCANNED: found by a scan of the stack), 0
 * when the frame is the outermost, -1 when no caller was found.  */
static int step_without_cfi(struct cp_unwinder *uw, unw_cursor_t *cursor,
			    unw_addr_space_t as, void *arg, uint64_t pc,
			    uint64_t sp, bool interrupted,
			    const uint64_t *below, size_t nbelow, bool *scanned)
{
	uint64_t rbp;
	bool snap_lacks;
	bool rbp_known = frame_reg(cursor, UNW_X86_64_RBP, &rbp, &snap_lacks);
	struct cp_nocfi_caller c;
	int found = caller_without_cfi(uw, pc, sp, rbp_known ? &rbp : NULL,
				       interrupted, below, nbelow, &c);
	if (found <= 0)
		return found;
	if (restart_at(uw, cursor, as, arg, &c) < 0)
		return -1;
	*scanned = c.how == CP_NOCFI_SCANNED;
	return 1;
}

/* ------------------------------------------------- our own rules */

/* The registers of a frame stepped with our rules (rules.h), numbered as
 * DWARF and libunwind number them on x86-64.  */
struct fast_regs {
	uint64_t val[CP_REG_RIP + 1];
	uint32_t unknown;  /* a partial snapshot's, without a value */
	uint32_t lost;     /* without a value: undefined by a rule, or lost
			    * at a frame without CFI (restart_at) */
};

/* The word at ADDR of the stack copy, as access_mem reads it first.  */
static bool stack_word(const struct cp_snapshot *s, uint64_t addr,
		       uint64_t *val)
{
	if (addr < s->stack_addr || s->stack_len < sizeof(*val) ||
	    addr - s->stack_addr > s->stack_len - sizeof(*val))
		return false;
	memcpy(val, s->stack + (addr - s->stack_addr), sizeof(*val));
	return true;
}

/* Registers to walk SNAP from with our rules, from the registers and
 * masks libunwind would be given (uw->regs, uw->lost, partial_unknown).
 * False when the walk must be libunwind's from the start (no pc or stack
 * pointer, rules off).  */
static bool fast_begin(struct cp_unwinder *uw, struct fast_regs *fr)
{
	const uint32_t need =
		CP_UNWIND_REG(CP_REG_RIP) | CP_UNWIND_REG(CP_REG_RSP);
	if (!uw->walk_rules || !uw->snap ||
	    ((partial_unknown | uw->lost) & need))
		return false;
	for (unw_regnum_t reg = 0; reg <= CP_REG_RIP; reg++)
		fr->val[reg] = *reg_slot(&uw->regs, reg);
	fr->unknown = partial_unknown;
	fr->lost = uw->lost;
	return true;
}

/* A rule_for result besides those of rules.h: no FDE covers the pc.  */
#define RULE_NOCFI (CP_RULE_COMPLEX + 1)

/* The rule of the frame at PC (the pc libunwind looks its FDE up with):
 * from the cache, or evaluated and kept, "complex" when there is no FDE
 * or it says more than a simple rule can.  */
static const struct cp_rule *rule_for(struct cp_unwinder *uw, uint64_t pc,
				      struct cp_rule *buf)
{
	const struct cp_rule *r = cp_rules_find(uw->rules, pc);
	if (r)
		return r;
	memset(buf, 0, sizeof(*buf));
	buf->pc = pc;
	buf->kind = CP_RULE_COMPLEX;
	const struct cp_ehframe_fde *fde = find_fde(uw, pc);
	/* Not kept: the next look-up must see what libunwind's would (a
	 * library loaded since, the mappings re-read once per walk).  */
	if (!fde) {
		buf->kind = RULE_NOCFI;
		return buf;
	}
	const uint8_t *data;
	size_t size;
	uint64_t addr;
	if (fde && cp_unwtables_image(uw->tables, fde->fde_addr, &data, &size,
				      &addr))
		cp_rule_eval(data, size, addr, fde->fde_addr, fde->pc_start,
			     pc, buf);
	uw->stats.evaluated++;
	r = cp_rules_put(uw->rules, buf);
	return r ? r : buf;
}

/* What fast_step says besides 1 (the caller), 0 (the outermost frame)
 * and -1 (a frame that does not move: libunwind's "ip and cfa
 * unchanged").  */
#define FAST_DEFER 2   /* libunwind must step this frame */

/* Step FR with the simple rule R as libunwind would (apply_reg_state,
 * then x86-64's unw_step): the CFA from its register, the return address
 * and the saved registers from the stack copy.  Anything libunwind would
 * find elsewhere (a register without a value, a slot outside the copy)
 * is FAST_DEFER, with FR unchanged.  */
static int fast_step(const struct cp_rule *r, const struct cp_snapshot *s,
		     struct fast_regs *fr)
{
	uint64_t base;
	if (r->cfa_reg == CP_REG_RSP)
		base = fr->val[CP_REG_RSP];   /* libunwind's c->cfa */
	else if ((fr->unknown | fr->lost) & CP_UNWIND_REG(r->cfa_reg))
		return FAST_DEFER;
	else
		base = fr->val[r->cfa_reg];
	uint64_t cfa = base + (uint64_t)(int64_t)r->cfa_off;
	uint64_t vals[CP_RULE_NSAVED] = {0};
	for (unsigned i = 0; i < CP_RULE_NSAVED; i++)
		if (cp_rule_how(r, i) == CP_SAVED_CFA &&
		    !stack_word(s, cfa + (uint64_t)((int64_t)r->slot[i] * 8),
				&vals[i]))
			return FAST_DEFER;
	bool ra_undef = cp_rule_how(r, CP_RULE_RA) == CP_SAVED_UNDEF;
	uint64_t next_ip = ra_undef ? 0 : vals[CP_RULE_RA];
	if (next_ip == fr->val[CP_REG_RIP] && cfa == fr->val[CP_REG_RSP])
		return -1;
	for (unsigned i = 0; i < CP_RULE_NSAVED; i++) {
		unsigned reg = cp_rule_saved_reg[i];
		switch (cp_rule_how(r, i)) {
		case CP_SAVED_UNDEF:
			fr->val[reg] = 0;
			fr->lost |= CP_UNWIND_REG(reg);
			break;
		case CP_SAVED_CFA:
			fr->val[reg] = vals[i];
			fr->lost &= ~CP_UNWIND_REG(reg);
			fr->unknown &= ~CP_UNWIND_REG(reg);
			break;
		}
	}
	fr->val[CP_REG_RIP] = next_ip;
	fr->val[CP_REG_RSP] = cfa;
	/* The end of the chain: an undefined return address, or (x86-64's
	 * unw_step) an undefined rbp.  */
	if (ra_undef || cp_rule_how(r, 1) == CP_SAVED_UNDEF)
		return 0;
	return 1;
}

/* step_without_cfi for the frame FR describes, whose pc is PC: FR gets
 * the caller's registers as restart_at gives them to libunwind.  */
static int fast_without_cfi(struct cp_unwinder *uw, struct fast_regs *fr,
			    uint64_t pc, bool interrupted,
			    const uint64_t *below, size_t nbelow, bool *scanned)
{
	const uint32_t rbp_bit = CP_UNWIND_REG(CP_REG_RBP);
	bool rbp_known = !((fr->lost | fr->unknown) & rbp_bit);
	struct cp_nocfi_caller c;
	int found = caller_without_cfi(uw, pc, fr->val[CP_REG_RSP],
				       rbp_known ? &fr->val[CP_REG_RBP] : NULL,
				       interrupted, below, nbelow, &c);
	if (found <= 0)
		return found;
	struct fast_regs next;
	memset(&next, 0, sizeof(next));
	next.lost = ALL_REGS &
		    ~(CP_UNWIND_REG(CP_REG_RIP) | CP_UNWIND_REG(CP_REG_RSP));
	next.val[CP_REG_RIP] = c.ret - 1;
	next.val[CP_REG_RSP] = c.sp;
	if (c.rbp_known) {
		next.val[CP_REG_RBP] = c.rbp;
		next.lost &= ~rbp_bit;
	}
	for (size_t i = 0; c.regs_kept && i < sizeof(callee_saved) /
						  sizeof(callee_saved[0]);
	     i++) {
		unw_regnum_t reg = callee_saved[i];
		uint32_t bit = CP_UNWIND_REG(reg);
		if (fr->lost & bit)
			continue;
		next.lost &= ~bit;
		if (fr->unknown & bit)
			next.unknown |= bit;
		else
			next.val[reg] = fr->val[reg];
	}
	*fr = next;
	*scanned = c.how == CP_NOCFI_SCANNED;
	return 1;
}

/* Our registers from CURSOR after libunwind stepped a frame, read as
 * restart_at reads them (a register a partial snapshot lacks is unknown,
 * not needed).  False when the pc or the stack pointer has no value.  */
static bool fast_from_cursor(unw_cursor_t *cursor, struct fast_regs *fr)
{
	fr->unknown = fr->lost = 0;
	for (unw_regnum_t reg = 0; reg <= CP_REG_RIP; reg++) {
		uint64_t v = 0;
		bool snap_lacks;
		if (!frame_reg(cursor, reg, &v, &snap_lacks))
			*(snap_lacks ? &fr->unknown : &fr->lost) |=
				CP_UNWIND_REG(reg);
		fr->val[reg] = v;
	}
	return !((fr->unknown | fr->lost) &
		 (CP_UNWIND_REG(CP_REG_RIP) | CP_UNWIND_REG(CP_REG_RSP)));
}

/* Start CURSOR at the frame FR describes, whose pc is PC (a return
 * address minus one for a caller: a new cursor takes its pc as exact),
 * for libunwind to step it: the registers without a value are lost or
 * unknown to it as they are to us.  */
static int hand_over(struct cp_unwinder *uw, unw_cursor_t *cursor,
		     unw_addr_space_t as, void *arg,
		     const struct fast_regs *fr, uint64_t pc)
{
	for (unw_regnum_t reg = 0; reg <= CP_REG_RIP; reg++)
		*reg_slot(&uw->regs, reg) = fr->val[reg];
	uw->regs.rip = pc;
	uw->lost = fr->lost;
	partial_unknown = fr->unknown;
	return unw_init_remote(cursor, as, arg);
}

/* ------------------------------------------------------------ walks */

/* Where a walk ended.  */
struct walk_end {
	bool ended;          /* at the outermost frame (unw_step said 0) */
	uint64_t stop_sp;    /* when a rule needed a register the snapshot */
	uint64_t stop_start; /* lacks: that frame's stack pointer and its
			      * function's start (0 when unknown) */
};

/* Walk from the registers libunwind gets through AS and ARG into PCS (at
 * most MAX).  A return address is adjusted by one so it falls inside the
 * call, except after a signal frame, where the next pc is the interrupted
 * instruction itself.  Where no CFI covers a frame, its caller is found
 * without (step_without_cfi) and its pc tagged CP_UNWIND_GUESSED; the
 * walk goes on from there with the callers' CFI.  A caller found by a
 * scan of the stack must be confirmed: by a frame with CFI further on
 * whose step gives a return address (the address after a call
 * instruction), or by the walk reaching the outermost frame or MAX
 * frames; the frames from the first unconfirmed one on are dropped.  (A
 * stale return address puts the CFI of its function at the wrong place
 * in the stack, and what that reads is seldom an address after a call.)
 */
static size_t walk(struct cp_unwinder *uw, unw_addr_space_t as, void *arg,
		   uint64_t *pcs, size_t max, struct walk_end *end)
{
	unw_cursor_t cursor;
	size_t n = 0;
	memset(end, 0, sizeof(*end));
	uw->outer_sp = 0;
	/* Frames are stepped with our rules while FAST, and the cursor is
	 * made only when libunwind must step one.  */
	struct fast_regs fr;
	bool fast = fast_begin(uw, &fr);
	if (!fast && unw_init_remote(&cursor, as, arg) < 0)
		return 0;
	bool exact = true;        /* the pc is not a return address */
	bool interrupted = true;  /* the frame did not stop at a call */
	bool returned = false;    /* pc + 1 is a return address */
	uint64_t tag = 0;
	/* The last return addresses, for step_without_cfi: a ring.  */
	uint64_t rets[CP_NOCFI_BELOW];
	size_t nrets = 0;
	size_t unconfirmed = SIZE_MAX;  /* the first unconfirmed scan's */
	const struct cp_nocfi_code code = {read_code, uw};
	while (n < max) {
		unw_word_t ip = 0, sp = 0;
		if (fast) {
			ip = fr.val[CP_REG_RIP];
			sp = fr.val[CP_REG_RSP];
			if (ip == 0)
				break;
		} else if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 ||
			   ip == 0) {
			break;
		} else {
			unw_get_reg(&cursor, UNW_REG_SP, &sp);
		}
		uint64_t pc = exact ? ip : ip - 1;
		pcs[n++] = pc | tag;
		uw->outer_sp = sp;
		if (returned)
			rets[nrets++ % CP_NOCFI_BELOW] = pc + 1;
		if (fast) {
			/* PC is where libunwind looks the rule up: the
			 * return address minus one but after a signal
			 * frame.  */
			struct cp_rule buf;
			const struct cp_rule *rule = rule_for(uw, pc, &buf);
			if (rule->kind == RULE_NOCFI) {
				uw->stats.fast_steps++;
				uint64_t below[CP_NOCFI_BELOW];
				size_t nbelow = 0;
				for (size_t i = nrets;
				     i > 0 && nbelow < CP_NOCFI_BELOW; i--)
					below[nbelow++] =
						rets[(i - 1) % CP_NOCFI_BELOW];
				bool scanned = false;
				int step = fast_without_cfi(uw, &fr, pc,
							    interrupted, below,
							    nbelow, &scanned);
				if (step <= 0) {
					end->ended = step == 0;
					break;
				}
				if (scanned && unconfirmed == SIZE_MAX)
					unconfirmed = n;
				tag = CP_UNWIND_GUESSED;
				exact = true;
				interrupted = false;
				returned = true;
				continue;
			}
			int fstep = rule->kind == CP_RULE_SIMPLE
					    ? fast_step(rule, uw->snap, &fr)
					    : FAST_DEFER;
			if (fstep != FAST_DEFER) {
				uw->stats.fast_steps++;
				if (fstep <= 0) {
					end->ended = fstep == 0;
					break;
				}
				tag = 0;
				exact = interrupted = false;
				returned = true;
				if (unconfirmed != SIZE_MAX &&
				    cp_nocfi_after_call(&code,
							fr.val[CP_REG_RIP]))
					unconfirmed = SIZE_MAX;
				continue;
			}
			fast = false;
			if (hand_over(uw, &cursor, as, arg, &fr, pc) < 0)
				break;
		}
		uw->cfi_missing = false;
		uw->stats.lib_steps++;
		int step = unw_step(&cursor);
		if (step < 0 && uw->cfi_missing) {
			uint64_t below[CP_NOCFI_BELOW];
			size_t nbelow = 0;
			for (size_t i = nrets; i > 0 && nbelow < CP_NOCFI_BELOW;
			     i--)
				below[nbelow++] = rets[(i - 1) % CP_NOCFI_BELOW];
			bool scanned = false;
			step = step_without_cfi(uw, &cursor, as, arg, pc, sp,
						interrupted, below, nbelow,
						&scanned);
			if (step > 0 && scanned && unconfirmed == SIZE_MAX)
				unconfirmed = n;
			if (step > 0) {
				/* Its pc is already inside the call.  */
				tag = CP_UNWIND_GUESSED;
				exact = true;
				interrupted = false;
				returned = true;
				/* restart_at made the registers libunwind
				 * would start from: ours too.  */
				fast = fast_begin(uw, &fr);
				continue;
			}
		}
		if (step <= 0) {
			end->ended = step == 0;
			break;
		}
		tag = 0;
		/* Whether the frame just stepped from is a signal frame (its
		 * CIE's "S"; libunwind keeps that of the last step): then the
		 * next pc is the interrupted instruction.  Asked before the
		 * step, it told of the frame before, so the frame under a
		 * signal frame was named at its pc - 1 (the function before,
		 * when interrupted at its first instruction) and its caller at
		 * the return address itself.  */
		bool signal = unw_is_signal_frame(&cursor) > 0;
		exact = interrupted = signal;
		returned = !signal;
		unw_word_t next_ip = 0, next_sp = 0;
		unw_get_reg(&cursor, UNW_REG_IP, &next_ip);
		unw_get_reg(&cursor, UNW_REG_SP, &next_sp);
		/* A frame that does not move is a loop in bad unwind data.  */
		if (next_ip == ip && next_sp == sp)
			break;
		if (unconfirmed != SIZE_MAX && !signal &&
		    cp_nocfi_after_call(&code, next_ip))
			unconfirmed = SIZE_MAX;
		/* The next frames with our rules again, from where libunwind
		 * left the registers.  */
		if (uw->walk_rules && uw->snap)
			fast = fast_from_cursor(&cursor, &fr);
	}
	if (unconfirmed < n && !end->ended && n < max)
		n = unconfirmed;
	if (partial_needed) {
		/* A failed step leaves the cursor at the frame it failed on
		 * (libunwind computes the CFA before changing anything).  */
		unw_word_t sp = 0;
		unw_proc_info_t pi;
		unw_get_reg(&cursor, UNW_REG_SP, &sp);
		end->stop_sp = sp;
		if (unw_get_proc_info(&cursor, &pi) == 0)
			end->stop_start = pi.start_ip;
	}
	return n;
}

/* A copy by the kernel begins at the stack pointer, without the red
 * zone below it that a stop's snapshot takes.  In an epilogue the
 * innermost frame's rule still names slots there for registers it has
 * popped already (glibc's malloc and free between their pops: CFA
 * rsp+16, rbx at c-32 and rbp at c-24): the registers hold those values,
 * which access_mem gives for those slots.  */
static void find_popped(struct cp_unwinder *uw, const struct cp_snapshot *snap)
{
	uw->npopped = 0;
	/* The innermost frame's registers: the snapshot's (the walk may
	 * have moved uw->regs on to a later frame's).  */
	struct user_regs_struct regs = snap->regs;
	struct cp_rule buf;
	const struct cp_rule *r = rule_for(uw, regs.rip, &buf);
	if (r->kind != CP_RULE_SIMPLE)
		return;
	unsigned long long *base = reg_slot(&regs, r->cfa_reg);
	if (!base)
		return;
	uint64_t cfa = *base + (uint64_t)(int64_t)r->cfa_off;
	for (unsigned i = 0; i < CP_RULE_NSAVED && uw->npopped < POPPED_MAX;
	     i++) {
		if (i == CP_RULE_RA || cp_rule_how(r, i) != CP_SAVED_CFA)
			continue;
		uint64_t at = cfa + (uint64_t)((int64_t)r->slot[i] * 8);
		unsigned long long *reg = reg_slot(&regs, cp_rule_saved_reg[i]);
		if (at < snap->stack_addr && reg) {
			uw->popped_at[uw->npopped] = at;
			uw->popped_val[uw->npopped++] = *reg;
		}
	}
}

/* Walk SNAP, whose registers in UNKNOWN hold no value: *NEEDED gets
 * those of them the walk needed (it stopped at the first).  PCS[0] is the
 * pc whatever happens.  */
static size_t walk_snapshot(struct cp_unwinder *uw,
			    const struct cp_snapshot *snap, uint32_t unknown,
			    uint64_t *pcs, size_t max, struct walk_end *end,
			    uint32_t *needed)
{
	current = uw;
	sync_space(uw);
	uw->snap = snap;
	uw->regs = snap->regs;
	uw->lost = 0;
	uw->popped_found = false;
	partial_unknown = unknown;
	partial_needed = 0;
	size_t n = walk(uw, uw->as, uw, pcs, max, end);
	if (n == 0) {
		pcs[n++] = snap->regs.rip;
		end->ended = false;
	}
	*needed = partial_needed;
	partial_unknown = partial_needed = 0;
	uw->snap = NULL;
	current = NULL;
	return n;
}

/* CP_UNWIND_RULES_CHECK: room for MAX frames of the other walk.  */
static uint64_t *check_buffer(struct cp_unwinder *uw, size_t max)
{
	if (uw->check_cap < max) {
		uint64_t *grown = realloc(uw->check_pcs, max * sizeof(*grown));
		if (!grown)
			return NULL;
		uw->check_pcs = grown;
		uw->check_cap = max;
	}
	return uw->check_pcs;
}

/* What the two walks of a check must see alike: the mappings.  */
struct check_state {
	uint64_t refreshes, generation, epoch;
};

static void check_begin(struct cp_unwinder *uw, struct check_state *st)
{
	sync_space(uw);
	st->refreshes = uw->refreshes;
	st->generation = uw->synced_generation;
	st->epoch = uw->synced_epoch;
}

/* SAME: the walks agreed.  When the mappings changed under them (a walk
 * re-read them: an exec, a library loaded or unloaded since the
 * snapshot), they unwound different address spaces and are not
 * compared.  */
static void check_result(struct cp_unwinder *uw,
			 const struct check_state *st, bool same)
{
	if (uw->refreshes != st->refreshes ||
	    uw->synced_generation != st->generation ||
	    uw->synced_epoch != st->epoch) {
		uw->stats.unchecked++;
		return;
	}
	uw->stats.checked++;
	if (same)
		return;
	uw->stats.mismatches++;
	if (uw->rules_mode == CP_UNWIND_RULES_ABORT)
		abort();
}

size_t cp_unwinder_unwind(struct cp_unwinder *uw,
			  const struct cp_snapshot *snap, uint64_t *pcs,
			  size_t max)
{
	return cp_unwinder_unwind_ended(uw, snap, pcs, max, NULL);
}

size_t cp_unwinder_unwind_ended(struct cp_unwinder *uw,
				const struct cp_snapshot *snap, uint64_t *pcs,
				size_t max, bool *ended)
{
	if (ended)
		*ended = false;
	if (max == 0)
		return 0;
	struct walk_end end;
	uint32_t needed;
	struct check_state st;
	bool check = uw->rules_mode >= CP_UNWIND_RULES_CHECK;
	if (check)
		check_begin(uw, &st);
	uw->walk_rules = uw->rules_mode != CP_UNWIND_RULES_OFF;
	size_t n = walk_snapshot(uw, snap, 0, pcs, max, &end, &needed);
	if (ended)
		*ended = end.ended;
	uint64_t *fast_pcs;
	if (!check || !(fast_pcs = check_buffer(uw, max)))
		return n;
	memcpy(fast_pcs, pcs, n * sizeof(*pcs));
	uw->walk_rules = false;
	size_t m = walk_snapshot(uw, snap, 0, pcs, max, &end, &needed);
	check_result(uw, &st,
		     m == n && memcmp(fast_pcs, pcs, n * sizeof(*pcs)) == 0);
	return m;
}

uint64_t cp_unwinder_outer_sp(const struct cp_unwinder *uw)
{
	return uw->outer_sp;
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
	current = uw;
	sync_space(uw);
	uw->snap = NULL;
	uw->lost = 0;
	uw->own_regs = false;
	uw->ptrace_stack_read = false;
	struct walk_end end;
	size_t n = walk(uw, uw->as_ptrace, upt, pcs, max, &end);
	unw_word_t rip;
	if (n == 0 && _UPT_access_reg(uw->as_ptrace, UNW_X86_64_RIP, &rip, 0,
				      upt) == 0)
		pcs[n++] = rip;
	uw->own_regs = false;
	current = NULL;
	return n;
}

/* ---------------------------------------------------- partial unwinds */

static size_t unwind_partial(struct cp_unwinder *uw,
			     const struct cp_snapshot *snap,
			     struct cp_unwind_partial *partial, uint64_t *pcs,
			     size_t max)
{
	uint32_t unknown = ALL_REGS & ~partial->known;
	struct walk_end end;
	partial->needed = 0;
	partial->rbp_scanned = false;
	partial->ended = false;
	if (max == 0)
		return 0;
	size_t n = walk_snapshot(uw, snap, unknown, pcs, max, &end,
				 &partial->needed);
	partial->ended = end.ended;
	if (partial->needed != CP_UNWIND_REG(CP_REG_RBP) || !end.stop_sp)
		return n;
	/* The frame-pointer case: find rbp on the stack and walk again with
	 * it.  The result must need nothing else; a weakly founded rbp must
	 * also lead to the outermost frame (a wrong one makes the next
	 * frames' addresses garbage, and garbage seldom ends there).  */
	const struct cp_nocfi_code code = {read_code, uw};
	uint64_t rbp;
	bool strong;
	uint32_t needed;
	if (!cp_nocfi_recover_rbp(&code, snap, end.stop_sp, end.stop_start,
				  &rbp, &strong))
		return n;
	struct cp_snapshot with_rbp = *snap;
	with_rbp.regs.rbp = rbp;
	size_t m = walk_snapshot(uw, &with_rbp,
				 unknown & ~CP_UNWIND_REG(CP_REG_RBP), pcs, max,
				 &end, &needed);
	if (needed == 0 && (strong || end.ended || m == max)) {
		partial->needed = 0;
		partial->rbp_scanned = true;
		partial->ended = end.ended;
		return m;
	}
	/* Not trusted: the frames as far as they were known.  */
	n = walk_snapshot(uw, snap, unknown, pcs, max, &end, &partial->needed);
	partial->ended = end.ended;
	return n;
}

size_t cp_unwinder_unwind_partial(struct cp_unwinder *uw,
				  const struct cp_snapshot *snap,
				  struct cp_unwind_partial *partial,
				  uint64_t *pcs, size_t max)
{
	struct cp_unwind_partial in = *partial;
	struct check_state st;
	bool check = uw->rules_mode >= CP_UNWIND_RULES_CHECK && max > 0;
	if (check)
		check_begin(uw, &st);
	uw->walk_rules = uw->rules_mode != CP_UNWIND_RULES_OFF;
	size_t n = unwind_partial(uw, snap, partial, pcs, max);
	uint64_t *fast_pcs;
	if (!check || !(fast_pcs = check_buffer(uw, max)))
		return n;
	memcpy(fast_pcs, pcs, n * sizeof(*pcs));
	struct cp_unwind_partial fast = *partial;
	*partial = in;
	uw->walk_rules = false;
	size_t m = unwind_partial(uw, snap, partial, pcs, max);
	check_result(uw, &st,
		     m == n && memcmp(fast_pcs, pcs, n * sizeof(*pcs)) == 0 &&
			     fast.needed == partial->needed &&
			     fast.rbp_scanned == partial->rbp_scanned &&
			     fast.ended == partial->ended);
	return m;
}

/* ------------------------------------------------------ tests only */

void cp_unwinder_rules_mode(struct cp_unwinder *uw, int mode)
{
	uw->rules_mode = mode;
}

void cp_unwinder_rules_stats(const struct cp_unwinder *uw,
			     struct cp_unwinder_rules_stats *out)
{
	*out = uw->stats;
}
