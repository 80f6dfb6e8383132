/* Heap mode's allocator: the descriptor table of its entry points (what
 * each argument and result means) and the lookup of their addresses in
 * the target, in link-map order.  See heap_alloc.h.  */
#include "capture/heap_alloc.h"

#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/procfs.h"
#include "cprof/target.h"
#include "cprof/tpath.h"

#define NO CP_HEAP_NO_ARG

/* The traced entry points, in the order the report lists them.  A row:
 * name, kind, result, then the arguments holding size, count, alignment,
 * the old or freed block, the stored result; the size's rounding; whether
 * tracing needs it.  */
static const struct cp_heap_entry entries[] = {
	{ "malloc", CP_HEAP_KIND_ALLOC, CP_HEAP_RESULT_PTR,
	  0, NO, NO, NO, NO, 0, true },
	{ "calloc", CP_HEAP_KIND_ALLOC, CP_HEAP_RESULT_PTR,
	  1, 0, NO, NO, NO, 0, false },
	{ "realloc", CP_HEAP_KIND_REALLOC, CP_HEAP_RESULT_PTR,
	  1, NO, NO, 0, NO, 0, false },
	{ "reallocarray", CP_HEAP_KIND_REALLOC, CP_HEAP_RESULT_PTR,
	  2, 1, NO, 0, NO, 0, false },
	{ "free", CP_HEAP_KIND_FREE, CP_HEAP_RESULT_NONE,
	  NO, NO, NO, 0, NO, 0, false },
	{ "posix_memalign", CP_HEAP_KIND_ALLOC, CP_HEAP_RESULT_STORED,
	  2, NO, 1, NO, 0, 0, false },
	{ "aligned_alloc", CP_HEAP_KIND_ALLOC, CP_HEAP_RESULT_PTR,
	  1, NO, 0, NO, NO, 0, false },
	{ "memalign", CP_HEAP_KIND_ALLOC, CP_HEAP_RESULT_PTR,
	  1, NO, 0, NO, NO, 0, false },
	{ "valloc", CP_HEAP_KIND_ALLOC, CP_HEAP_RESULT_PTR,
	  0, NO, NO, NO, NO, 0, false },
	{ "pvalloc", CP_HEAP_KIND_ALLOC, CP_HEAP_RESULT_PTR,
	  0, NO, NO, NO, NO, 4096, false },
};

#define NENTRIES (sizeof(entries) / sizeof(entries[0]))
_Static_assert(NENTRIES <= CP_HEAP_MAX_ENTRIES,
	       "raise CP_HEAP_MAX_ENTRIES for the new rows");

const struct cp_heap_entry *cp_heap_entries(size_t *n)
{
	*n = NENTRIES;
	return entries;
}

int cp_heap_entry_find(const char *name)
{
	for (size_t i = 0; i < NENTRIES; i++)
		if (strcmp(entries[i].name, name) == 0)
			return (int)i;
	return -1;
}

static bool read_u64(pid_t pid, uint64_t addr, uint64_t *v)
{
	return cp_target_read(pid, addr, v, sizeof(*v)) == (ssize_t)sizeof(*v);
}

static bool grow(void **items, size_t size, size_t need, size_t *cap)
{
	if (need <= *cap)
		return true;
	size_t n = *cap ? *cap : 16;
	while (n < need)
		n *= 2;
	void *p = realloc(*items, n * size);
	if (!p)
		return false;
	*items = p;
	*cap = n;
	return true;
}

/* ------------------------------------------------------ lookup */

struct module {
	char name[128];    /* basename, for messages */
	uint64_t bias;     /* load bias (link_map l_addr) */
	uint64_t inside;   /* an address in one of its file mappings (its
			    * dynamic section), 0 for the executable */
};

/* Open the file process PID has mapped at ADDR, the way every file of the
 * target is opened (cprof/tpath.h): the mapping itself through
 * /proc/PID/map_files, or without the privilege for that its path in the
 * target's root by the target's rules, and only while that path is still
 * the inode mapped.  The names the link map gives are the target's to
 * write and are never opened.  MAPS: PID's mappings, read here when
 * NULL.  Returns a descriptor or -1.  */
static int open_mapped(pid_t pid, const struct cp_maps *maps, uint64_t addr)
{
	struct cp_maps *read_here = NULL;
	if (!maps) {
		if (cp_maps_read(pid, &read_here) < 0)
			return -1;
		maps = read_here;
	}
	int fd = -1;
	const struct cp_map *m = cp_maps_find(maps, addr);
	if (m && m->path[0] == '/') {
		fd = cp_tpath_open_mapped(pid, m->start, m->end, NULL, NULL);
		if (fd == -CP_E_SYS) {
			struct cp_tpath_creds creds;
			struct stat st;
			fd = -1;
			if (cp_tpath_creds_read(pid, &creds) == 0)
				fd = cp_tpath_open(pid, m->path,
						   CP_TPATH_IN_ROOT |
							   CP_TPATH_NOFOLLOW |
							   CP_TPATH_READABLE,
						   &creds, &st, NULL);
			if (fd >= 0 && (uint64_t)st.st_ino != m->inode) {
				close(fd);
				fd = -1;
			}
		}
	}
	cp_maps_free(read_here);
	return fd < 0 ? -1 : fd;
}

/* Open module M of process PID: the executable through /proc/PID/exe
 * (the kernel's link to the file it runs), a library by its mapping in
 * MAPS.  */
static int open_module(pid_t pid, const struct cp_maps *maps,
		       const struct module *m)
{
	if (m->inside)
		return maps ? open_mapped(pid, maps, m->inside) : -1;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* The executable's load bias and the run-time address of its dynamic
 * section (0 when static).  */
static int exe_layout(pid_t pid, uint64_t *bias, uint64_t *dynamic)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -CP_E_SYS;
	int rc = -CP_E_PARSE;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	size_t nph;
	if (!elf || !gelf_getehdr(elf, &eh) || elf_getphdrnum(elf, &nph) < 0)
		goto out;
	uint64_t phdr_vaddr = 0, dyn_vaddr = 0;
	bool have_phdr = false;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_PHDR) {
			phdr_vaddr = ph.p_vaddr;
			have_phdr = true;
		} else if (ph.p_type == PT_LOAD && ph.p_offset == 0 &&
			   !have_phdr) {
			phdr_vaddr = ph.p_vaddr + eh.e_phoff;
			have_phdr = true;
		} else if (ph.p_type == PT_DYNAMIC) {
			dyn_vaddr = ph.p_vaddr;
		}
	}
	uint64_t at_phdr = cp_procfs_auxv(pid, AT_PHDR);
	if (!have_phdr || !at_phdr)
		goto out;
	*bias = at_phdr - phdr_vaddr;
	*dynamic = dyn_vaddr ? *bias + dyn_vaddr : 0;
	rc = 0;
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return rc;
}

/* The address of the dynamic linker's struct r_debug, from the
 * executable's DT_DEBUG (0 when static or not yet filled in).  */
static uint64_t exe_r_debug(pid_t pid, uint64_t dynamic)
{
	uint64_t r_debug = 0;
	for (int i = 0; dynamic && i < 1024; i++) {
		uint64_t dyn[2];
		if (cp_target_read(pid, dynamic + 16 * (uint64_t)i, dyn,
				   sizeof(dyn)) != (ssize_t)sizeof(dyn) ||
		    dyn[0] == DT_NULL)
			break;
		if (dyn[0] == DT_DEBUG)
			r_debug = dyn[1];
	}
	return r_debug;
}

/* The modules in link-map order (the order the dynamic linker resolves
 * symbols in), or just the executable when there is no link map.
 * R_DEBUG: where the dynamic linker's struct r_debug is when known (0:
 * from the executable's DT_DEBUG); *R_DEBUG_OUT gets the one used.  */
static int list_modules(pid_t pid, uint64_t r_debug, struct module **out,
			size_t *n, uint64_t *r_debug_out)
{
	uint64_t bias = 0, dynamic = 0;
	int rc = exe_layout(pid, &bias, &dynamic);
	if (rc < 0)
		return rc;
	struct module *mods = NULL;
	size_t count = 0, cap = 0;
	if (!r_debug)
		r_debug = exe_r_debug(pid, dynamic);
	*r_debug_out = r_debug;
	uint64_t lm = 0;
	if (r_debug)
		read_u64(pid, r_debug + offsetof(struct r_debug, r_map), &lm);
	if (!lm) {
		/* Static, or the dynamic linker has not run: the executable
		 * alone.  */
		mods = calloc(1, sizeof(*mods));
		if (!mods)
			return -CP_E_NOMEM;
		snprintf(mods[0].name, sizeof(mods[0].name), "executable");
		mods[0].bias = bias;
		*out = mods;
		*n = 1;
		return 0;
	}
	for (int guard = 0; lm && guard < 4096; guard++) {
		/* struct link_map: l_addr, l_name, l_ld, l_next, l_prev.  */
		uint64_t l[4];
		if (cp_target_read(pid, lm, l, sizeof(l)) != (ssize_t)sizeof(l))
			break;
		char name[4096] = "";
		if (l[1]) {
			ssize_t got = cp_target_read(pid, l[1], name,
						     sizeof(name) - 1);
			name[got > 0 ? got : 0] = '\0';
			name[sizeof(name) - 1] = '\0';
		}
		if (!grow((void **)&mods, sizeof(*mods), count + 1, &cap)) {
			free(mods);
			return -CP_E_NOMEM;
		}
		struct module *m = &mods[count];
		if (count == 0 && name[0] == '\0') {
			snprintf(m->name, sizeof(m->name), "executable");
			m->bias = bias;
			m->inside = 0;
			count++;
		} else if (name[0] == '/' && l[2]) {
			/* The name is only for messages: the file is the one
			 * mapped where its dynamic section (l_ld) is.  */
			const char *base = strrchr(name, '/');
			snprintf(m->name, sizeof(m->name), "%s", base + 1);
			m->bias = l[0];
			m->inside = l[2];
			count++;
		}
		/* else the vDSO ("linux-vdso.so.1"): no file, no malloc.  */
		lm = l[3];
	}
	*out = mods;
	*n = count;
	return count ? 0 : -CP_E_NOALLOC;
}

/* Look in the ELF file FD for the functions named NAMES[0..N) that it
 * defines and exports (the static executable's .symtab too when
 * STATIC_EXE) and whose VALUES are still 0; fill those with the symbol
 * values plus BIAS and return how many were found.  DATA_TOO: objects
 * count as well as functions.  */
static size_t find_symbols(int fd, const char *const *names, size_t n,
			   uint64_t *values, uint64_t bias, bool static_exe,
			   bool data_too)
{
	size_t found = 0;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Elf_Scn *scn = NULL;
	while (elf && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type != SHT_DYNSYM &&
		    !(static_exe && sh.sh_type == SHT_SYMTAB))
			continue;
		/* Symbol versions: a hidden (non-default) version is not
		 * what a new link binds to.  */
		Elf_Data *versym = NULL;
		if (sh.sh_type == SHT_DYNSYM) {
			Elf_Scn *v = NULL;
			while ((v = elf_nextscn(elf, v))) {
				GElf_Shdr vh;
				if (gelf_getshdr(v, &vh) &&
				    vh.sh_type == SHT_GNU_versym)
					versym = elf_getdata(v, NULL);
			}
		}
		Elf_Data *data = elf_getdata(scn, NULL);
		size_t count = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
		for (size_t i = 0; data && i < count; i++) {
			GElf_Sym sym;
			if (!gelf_getsym(data, (int)i, &sym) ||
			    sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
				continue;
			int type = GELF_ST_TYPE(sym.st_info);
			int bind = GELF_ST_BIND(sym.st_info);
			/* A static executable has one allocator, and in a
			 * static-pie glibc's malloc is a local symbol.  */
			bool local_ok = static_exe && sh.sh_type == SHT_SYMTAB;
			if ((type != STT_FUNC &&
			     !(data_too && type == STT_OBJECT)) ||
			    (bind != STB_GLOBAL && bind != STB_WEAK &&
			     !(local_ok && bind == STB_LOCAL)))
				continue;
			if (versym) {
				GElf_Versym vs;
				if (gelf_getversym(versym, (int)i, &vs) &&
				    (vs & 0x8000))
					continue;
			}
			const char *name =
				elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name)
				continue;
			for (size_t f = 0; f < n; f++)
				if (!values[f] && strcmp(name, names[f]) == 0) {
					values[f] = bias + sym.st_value;
					found++;
				}
		}
	}
	if (elf)
		elf_end(elf);
	return found;
}

/* Look for the entry points module M of process PID defines and exports
 * and that no earlier module defined; fill FOUND.  */
static void scan_module(pid_t pid, const struct cp_maps *maps,
			const struct module *m, struct cp_heap_found *found,
			bool static_exe)
{
	int fd = open_module(pid, maps, m);
	if (fd < 0)
		return;
	const char *names[NENTRIES];
	uint64_t values[NENTRIES] = {0};
	for (size_t f = 0; f < NENTRIES; f++) {
		names[f] = entries[f].name;
		values[f] = found[f].addr ? 1 : 0; /* an earlier module's */
	}
	find_symbols(fd, names, NENTRIES, values, m->bias, static_exe, false);
	for (size_t f = 0; f < NENTRIES; f++)
		if (!found[f].addr && values[f]) {
			found[f].addr = values[f];
			snprintf(found[f].module, sizeof(found[f].module), "%s",
				 m->name);
		}
	close(fd);
}

int cp_heap_alloc_find(pid_t pid, uint64_t r_debug,
		       struct cp_heap_found *found, uint64_t *r_debug_out)
{
	struct module *mods = NULL;
	size_t nmods = 0;
	int rc = list_modules(pid, r_debug, &mods, &nmods, r_debug_out);
	if (rc < 0)
		return rc;
	memset(found, 0, CP_HEAP_MAX_ENTRIES * sizeof(*found));
	elf_version(EV_CURRENT);
	struct cp_maps *mapped = NULL;
	cp_maps_read(pid, &mapped); /* NULL: only the executable is read */
	for (size_t i = 0; i < nmods; i++)
		scan_module(pid, mapped, &mods[i], found, nmods == 1);
	cp_maps_free(mapped);
	free(mods);
	return 0;
}

int cp_heap_alloc_loader(pid_t pid, uint64_t base, uint64_t *brk,
			 uint64_t *r_debug)
{
	static const char *const names[] = { "_dl_debug_state", "_r_debug" };
	uint64_t values[2] = {0, 0};
	int fd = open_mapped(pid, NULL, base);
	if (fd < 0)
		return -1;
	elf_version(EV_CURRENT);
	/* The loader is linked at 0 (ET_DYN): BASE is its bias.  */
	find_symbols(fd, names, 2, values, base, false, true);
	close(fd);
	*brk = values[0];
	*r_debug = values[1];
	return values[0] ? 0 : -1;
}

