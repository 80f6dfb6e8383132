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

#if !defined(__x86_64__)
#error "cprof unwinds x86-64 targets only for now"
#endif

#define PAGE_SIZE_ 4096u
#define PAGE_CACHE_SLOTS 1024u   /* 4 MiB of read-only target pages */

struct page_slot {
	uint64_t page;           /* target address, 0 when empty */
	unsigned char *data;     /* PAGE_SIZE_ bytes */
};

/* One module (one file mapped at one base address).  Its unwind table is
 * located in target memory, from the ELF headers the loader mapped: that
 * needs no file, so it works for deleted or replaced files and for
 * containers alike, and costs nothing per lookup.  A module without an
 * .eh_frame_hdr falls back to libunwind-ptrace, which reads the file
 * (.debug_frame) — one handle per module, so its one-entry cache holds. */
struct module {
	char *path;
	uint64_t base;           /* address of file offset 0 */
	bool table_tried, table_ok;
	unw_dyn_info_t table;    /* remote .eh_frame_hdr search table */
	void *upt;               /* libunwind-ptrace handle, made on demand */
};

struct tid_upt {
	pid_t tid;
	void *upt;
};

struct cp_unwinder {
	pid_t pid;
	unw_addr_space_t as;          /* snapshot accessors */
	unw_addr_space_t as_ptrace;   /* libunwind-ptrace accessors */
	struct cp_maps *maps;
	struct module *modules;
	size_t nmodules;
	struct page_slot *pages;
	const struct cp_snapshot *snap; /* the snapshot being unwound */
	struct tid_upt *tid_upts;       /* for CP_UNWIND_PTRACE */
	size_t ntid_upts;
};

/* libunwind's search of a remote .eh_frame_hdr table.  It is what
 * libunwind-ptrace itself calls, so it is exported; its header is not
 * installed.  */
extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as,
					      unw_word_t ip,
					      unw_dyn_info_t *di,
					      unw_proc_info_t *pi,
					      int need_unwind_info, void *arg);

/* libunwind-ptrace's find_proc_info hands our memory accessor its own
 * handle as ARG, not ours, so the accessors find the unwinder being run
 * through this pointer.  One unwind runs at a time per thread.  */
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

/* Locate the .eh_frame_hdr binary search table of the ELF image whose
 * file offset 0 is mapped at M->base, reading its headers from target
 * memory.  Fills M->table.  */
static bool locate_table(struct cp_unwinder *uw, struct module *m)
{
	Elf64_Ehdr eh;
	if (cp_target_read(uw->pid, m->base, &eh, sizeof(eh)) !=
		    (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phnum == 0 ||
	    eh.e_phnum > 64 || eh.e_phentsize != sizeof(Elf64_Phdr))
		return false;
	Elf64_Phdr ph[64];
	size_t size = eh.e_phnum * sizeof(Elf64_Phdr);
	if (cp_target_read(uw->pid, m->base + eh.e_phoff, ph, size) !=
	    (ssize_t)size)
		return false;
	const Elf64_Phdr *first_load = NULL, *text = NULL, *hdr = NULL;
	for (int i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0)
			first_load = &ph[i];
		if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X) && !text)
			text = &ph[i];
		if (ph[i].p_type == PT_GNU_EH_FRAME)
			hdr = &ph[i];
	}
	if (!first_load || !text || !hdr)
		return false;
	/* BASE holds file offset 0, which the first segment maps at its
	 * (page-aligned) virtual address.  */
	uint64_t bias = m->base - (first_load->p_vaddr & ~(uint64_t)0xfff);
	unsigned char h[12];
	if (cp_target_read(uw->pid, bias + hdr->p_vaddr, h, sizeof(h)) !=
	    (ssize_t)sizeof(h))
		return false;
	/* version 1; eh_frame_ptr pcrel|sdata4; fde_count udata4; a table
	 * of datarel|sdata4 pairs: what every linker writes.  */
	if (h[0] != 1 || h[1] != 0x1b || h[2] != 0x03 || h[3] != 0x3b)
		return false;
	uint32_t fde_count;
	memcpy(&fde_count, h + 8, sizeof(fde_count));
	memset(&m->table, 0, sizeof(m->table));
	m->table.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	m->table.start_ip = bias + text->p_vaddr;
	m->table.end_ip = bias + text->p_vaddr + text->p_memsz;
	m->table.u.rti.segbase = bias + hdr->p_vaddr;
	m->table.u.rti.table_data = bias + hdr->p_vaddr + 12;
	m->table.u.rti.table_len = fde_count * 8 / sizeof(unw_word_t);
	return true;
}

/* The module MAP belongs to: the file mapped there, found by the mapping
 * of the same file at offset 0 (its base).  */
static struct module *module_for(struct cp_unwinder *uw,
				 const struct cp_map *map)
{
	uint64_t base = map->start - map->offset;
	for (size_t i = 0; uw->maps && i < uw->maps->count; i++) {
		const struct cp_map *m = &uw->maps->maps[i];
		if (m->offset == 0 && m->start <= map->start &&
		    m->inode == map->inode && strcmp(m->path, map->path) == 0)
			base = m->start;
	}
	for (size_t i = 0; i < uw->nmodules; i++)
		if (uw->modules[i].base == base &&
		    strcmp(uw->modules[i].path, map->path) == 0)
			return &uw->modules[i];
	struct module *grown =
		realloc(uw->modules, (uw->nmodules + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	uw->modules = grown;
	struct module *m = &uw->modules[uw->nmodules];
	memset(m, 0, sizeof(*m));
	m->path = strdup(map->path);
	m->base = base;
	if (!m->path)
		return NULL;
	uw->nmodules++;
	return m;
}

static int find_proc_info(unw_addr_space_t as, unw_word_t ip,
			  unw_proc_info_t *pi, int need_unwind_info, void *arg)
{
	struct cp_unwinder *uw = current;
	const struct cp_map *map = find_map(uw, ip);
	if (!map || map->path[0] == '\0' ||
	    (map->path[0] == '[' && strcmp(map->path, "[vdso]") != 0))
		return -UNW_ENOINFO;
	struct module *m = module_for(uw, map);
	if (!m)
		return -UNW_ENOINFO;
	if (!m->table_tried) {
		m->table_tried = true;
		m->table_ok = locate_table(uw, m);
	}
	if (m->table_ok && ip >= m->table.start_ip && ip < m->table.end_ip) {
		int rc = _Ux86_64_dwarf_search_unwind_table(
			as, ip, &m->table, pi, need_unwind_info, arg);
		if (rc != -UNW_ENOINFO)
			return rc;
	}
	/* No .eh_frame_hdr in memory: let libunwind-ptrace read the file's
	 * .eh_frame or .debug_frame.  */
	if (map->path[0] != '/')
		return -UNW_ENOINFO;
	if (!m->upt && !(m->upt = _UPT_create(uw->pid)))
		return -UNW_ENOINFO;
	return _UPT_find_proc_info(as, ip, pi, need_unwind_info, m->upt);
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi,
			    void *arg)
{
	_UPT_put_unwind_info(as, pi, arg);
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
	if (s && addr >= s->stack_addr &&
	    addr + sizeof(*valp) <= s->stack_addr + s->stack_len) {
		memcpy(valp, s->stack + (addr - s->stack_addr), sizeof(*valp));
		return 0;
	}
	/* Unwind tables live in read-only file mappings that do not change
	 * while the target runs: cache their pages.  */
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

static int access_reg(unw_addr_space_t as, unw_regnum_t reg,
		      unw_word_t *valp, int write, void *arg)
{
	struct cp_unwinder *uw = current;
	if (write)
		return -UNW_EREADONLYREG;
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

int cp_unwinder_new(pid_t pid, struct cp_unwinder **out)
{
	struct cp_unwinder *uw = calloc(1, sizeof(*uw));
	if (!uw)
		return -CP_E_NOMEM;
	uw->pid = pid;
	uw->pages = calloc(PAGE_CACHE_SLOTS, sizeof(*uw->pages));
	uw->as = unw_create_addr_space(&snapshot_accessors, 0);
	uw->as_ptrace = unw_create_addr_space(&_UPT_accessors, 0);
	if (!uw->pages || !uw->as || !uw->as_ptrace) {
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

static void drop_modules(struct cp_unwinder *uw)
{
	for (size_t i = 0; i < uw->nmodules; i++) {
		free(uw->modules[i].path);
		if (uw->modules[i].upt)
			_UPT_destroy(uw->modules[i].upt);
	}
	free(uw->modules);
	uw->modules = NULL;
	uw->nmodules = 0;
}

void cp_unwinder_free(struct cp_unwinder *uw)
{
	if (!uw)
		return;
	drop_modules(uw);
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
	drop_modules(uw);
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
	if (unw_init_remote(&cursor, uw->as_ptrace, upt) < 0)
		return 0;
	return walk(&cursor, pcs, max);
}
