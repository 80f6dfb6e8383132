/* The unwind tables of a target's modules: see unwtables.h.  */
#include "unwind/unwtables.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cprof/addrspace.h"
#include "cprof/error.h"
#include "cprof/target.h"
#include "cprof/tpath.h"

#define MAX_PHDRS 64
#define MAX_RANGES 16
/* Bounds on what is read of a module's tables (a large browser's
 * .eh_frame is some tens of MiB).  */
#define MAX_HDR_SIZE (16u << 20)
#define MAX_EH_FRAME (256u << 20)
#define MAX_DEBUG_FRAME (256u << 20)
/* .debug_frame images are served from here up: like CP_UNWTABLES_ENTRY,
 * non-canonical addresses, which no x86-64 process can map.  */
#define IMAGE_BASE (CP_UNWTABLES_ENTRY + 0x10000)
#define IMAGE_GAP 0x1000u
/* The search table entry, little-endian: start_ip_offset INT32_MIN, then
 * fde_offset 0.  */
#define ENTRY_WORD 0x0000000080000000ull

/* What libunwind may read of one table.  */
struct image {
	const uint8_t *data;     /* NULL: none */
	size_t size;
	uint64_t addr;
};

/* One module: one file mapped at one base address.  */
struct module {
	char *path;
	uint64_t base;           /* address of file offset 0 */
	uint64_t inode;          /* of the mapped file (0: not a file) */
	bool mem_tried;          /* its memory was looked at */
	bool file_tried;         /* its file was looked at */
	bool elf_ok;             /* the ELF headers in memory made sense */
	uint64_t bias;           /* run-time minus link-time addresses */
	struct cp_ehframe_range code[MAX_RANGES];  /* executable segments */
	size_t ncode;
	struct cp_ehframe_range loads[MAX_RANGES]; /* loaded file bytes */
	size_t nloads;
	struct cp_ehframe_table *eh;    /* .eh_frame, checked */
	struct cp_ehframe_table *debug; /* .debug_frame, checked, rewritten */
	struct image eh_image, debug_image;
};

struct cp_unwtables {
	pid_t pid;
	struct module *modules;
	size_t count;
	struct image hint;       /* the image read last */
	uint64_t next_image;     /* address for the next .debug_frame image */
	bool dropped;            /* a module's tables were dropped */
};

int cp_unwtables_new(pid_t pid, struct cp_unwtables **out)
{
	struct cp_unwtables *t = calloc(1, sizeof(*t));
	if (!t)
		return -CP_E_NOMEM;
	t->pid = pid;
	t->next_image = IMAGE_BASE;
	*out = t;
	return 0;
}

static void forget_tables(struct cp_unwtables *t, struct module *m)
{
	cp_ehframe_table_free(m->eh);
	cp_ehframe_table_free(m->debug);
	m->eh = m->debug = NULL;
	m->eh_image = m->debug_image = (struct image){0};
	t->hint = (struct image){0};
}

void cp_unwtables_reset(struct cp_unwtables *t)
{
	for (size_t i = 0; i < t->count; i++) {
		forget_tables(t, &t->modules[i]);
		free(t->modules[i].path);
	}
	free(t->modules);
	t->modules = NULL;
	t->count = 0;
	t->next_image = IMAGE_BASE;
}

void cp_unwtables_prune(struct cp_unwtables *t,
			const struct cp_addrspace_view *view)
{
	size_t kept = 0;
	for (size_t i = 0; i < t->count; i++) {
		struct module *m = &t->modules[i];
		const struct cp_addrspace_module *v =
			cp_addrspace_view_module(view, m->base);
		if (v && v->base == m->base && v->inode == m->inode &&
		    strcmp(v->path, m->path) == 0) {
			t->modules[kept++] = *m;
			continue;
		}
		if (m->eh || m->debug)
			t->dropped = true;
		forget_tables(t, m);
		free(m->path);
	}
	t->count = kept;
}

void cp_unwtables_free(struct cp_unwtables *t)
{
	if (!t)
		return;
	cp_unwtables_reset(t);
	free(t);
}

/* The module MAP belongs to: the file mapped there, found by the mapping
 * of the same file at offset 0 (its base).  */
static struct module *module_for(struct cp_unwtables *t,
				 const struct cp_maps *maps,
				 const struct cp_map *map)
{
	uint64_t base = map->start - map->offset;
	for (size_t i = 0; maps && i < maps->count; i++) {
		const struct cp_map *m = &maps->maps[i];
		if (m->offset == 0 && m->start <= map->start &&
		    m->inode == map->inode && strcmp(m->path, map->path) == 0)
			base = m->start;
	}
	for (size_t i = 0; i < t->count; i++)
		if (t->modules[i].base == base &&
		    strcmp(t->modules[i].path, map->path) == 0)
			return &t->modules[i];
	struct module *grown =
		realloc(t->modules, (t->count + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	t->modules = grown;
	struct module *m = &t->modules[t->count];
	memset(m, 0, sizeof(*m));
	m->path = strdup(map->path);
	if (!m->path)
		return NULL;
	m->base = base;
	m->inode = map->inode;
	t->count++;
	return m;
}

static struct image image_of(const struct cp_ehframe_table *table)
{
	struct image im = {0};
	if (table)
		cp_ehframe_table_image(table, &im.data, &im.size, &im.addr);
	return im;
}

static bool overlap(const struct image *a, const struct image *b)
{
	return a->data && b->data && a->addr < b->addr + b->size &&
	       b->addr < a->addr + a->size;
}

/* Index the .eh_frame at ADDR (at most SIZE bytes, up to the end of its
 * segment) from a copy of the target's memory.  */
static void build_eh(struct cp_unwtables *t, struct module *m, uint64_t addr,
		     uint64_t size)
{
	if (size > MAX_EH_FRAME)
		size = MAX_EH_FRAME;
	uint8_t *buf = malloc(size ? size : 1);
	if (!buf)
		return;
	ssize_t n = cp_target_read(t->pid, addr, buf, size);
	if (n > 0) {
		struct cp_ehframe_input in = {
			.kind = CP_EHFRAME_EH, .data = buf, .size = (size_t)n,
			.addr = addr, .code = m->code, .ncode = m->ncode,
		};
		if (cp_ehframe_table_build(&in, &m->eh) == 0)
			m->eh_image = image_of(m->eh);
	}
	free(buf);
	/* A module whose image covers the same addresses is gone (unloaded
	 * without an exec): its copy must not answer for the new one.  */
	for (size_t i = 0; m->eh && i < t->count; i++) {
		struct module *o = &t->modules[i];
		if (o != m && overlap(&o->eh_image, &m->eh_image)) {
			forget_tables(t, o);
			o->mem_tried = o->file_tried = false;
			t->dropped = true;
		}
	}
}

/* Read the ELF and program headers the loader mapped at M->base: the
 * module's segments, and its .eh_frame through PT_GNU_EH_FRAME.  */
static void load_memory(struct cp_unwtables *t, struct module *m)
{
	Elf64_Ehdr eh;
	if (cp_target_read(t->pid, m->base, &eh, sizeof(eh)) !=
		    (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phnum == 0 ||
	    eh.e_phnum > MAX_PHDRS || eh.e_phentsize != sizeof(Elf64_Phdr))
		return;
	Elf64_Phdr ph[MAX_PHDRS];
	size_t size = eh.e_phnum * sizeof(Elf64_Phdr);
	if (cp_target_read(t->pid, m->base + eh.e_phoff, ph, size) !=
	    (ssize_t)size)
		return;
	const Elf64_Phdr *first_load = NULL, *hdr = NULL;
	for (int i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0)
			first_load = &ph[i];
		if (ph[i].p_type == PT_GNU_EH_FRAME)
			hdr = &ph[i];
	}
	if (!first_load)
		return;
	/* BASE holds file offset 0, which the first segment maps at its
	 * (page-aligned) virtual address.  */
	m->bias = m->base - (first_load->p_vaddr & ~(uint64_t)0xfff);
	for (int i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD || m->nloads == MAX_RANGES)
			continue;
		uint64_t start = m->bias + ph[i].p_vaddr;
		m->loads[m->nloads++] = (struct cp_ehframe_range){
			start, start + ph[i].p_filesz};
		if (ph[i].p_flags & PF_X)
			m->code[m->ncode++] = (struct cp_ehframe_range){
				start, start + ph[i].p_memsz};
	}
	m->elf_ok = true;
	if (!hdr || hdr->p_memsz == 0 || hdr->p_memsz > MAX_HDR_SIZE)
		return;
	uint8_t *buf = malloc(hdr->p_memsz);
	if (!buf)
		return;
	uint64_t addr = m->bias + hdr->p_vaddr;
	struct cp_ehframe_hdr h;
	if (cp_target_read(t->pid, addr, buf, hdr->p_memsz) ==
		    (ssize_t)hdr->p_memsz &&
	    cp_ehframe_hdr_parse(buf, hdr->p_memsz, addr, m->loads,
				 m->nloads, &h) == 0)
		build_eh(t, m, h.eh_frame, h.eh_frame_end - h.eh_frame);
	free(buf);
}

static int file_read(void *ctx, uint64_t offset, void *buf, size_t len)
{
	int fd = *(int *)ctx;
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  (off_t)(offset + done));
		if (n <= 0)
			return -CP_E_SYS;
		done += (size_t)n;
	}
	return 0;
}

/* Look in the module's file for what its memory did not say: where its
 * .eh_frame is when it has no .eh_frame_hdr, and its .debug_frame.  The
 * file is the one mapped (same inode), opened through the target's root
 * without following a last symlink or blocking on a FIFO planted there.  */
static void load_file(struct cp_unwtables *t, struct module *m)
{
	if (m->path[0] != '/' || !m->elf_ok)
		return;
	/* The path is the target's: resolved inside its root (a
	 * container's absolute symlinks stay in the container), never a
	 * FIFO or a device, no symlink as the last component (tpath.h).  */
	struct stat st;
	int fd = cp_tpath_open(t->pid, m->path,
			       CP_TPATH_IN_ROOT | CP_TPATH_NOFOLLOW, NULL, &st,
			       NULL);
	if (fd < 0)
		return;
	struct cp_ehframe_section s;
	if ((uint64_t)st.st_ino != m->inode)
		goto out;
	/* .eh_frame is loaded: read it from memory, as the target has it.  */
	if (!m->eh &&
	    cp_ehframe_elf_section(file_read, &fd, (uint64_t)st.st_size,
				   ".eh_frame", &s) == 0 &&
	    s.alloc && s.size > 0) {
		uint64_t addr = m->bias + s.addr;
		for (size_t i = 0; i < m->nloads; i++)
			if (addr >= m->loads[i].start && addr < m->loads[i].end) {
				uint64_t room = m->loads[i].end - addr;
				build_eh(t, m, addr, s.size < room ? s.size : room);
				break;
			}
	}
	if (cp_ehframe_elf_section(file_read, &fd, (uint64_t)st.st_size,
				   ".debug_frame", &s) == 0 &&
	    !s.alloc && s.size > 0 && s.size <= MAX_DEBUG_FRAME) {
		uint8_t *buf = malloc(s.size);
		if (buf && file_read(&fd, s.offset, buf, s.size) == 0) {
			struct cp_ehframe_input in = {
				.kind = CP_EHFRAME_DEBUG, .data = buf,
				.size = s.size, .bias = m->bias,
				.image_addr = t->next_image, .code = m->code,
				.ncode = m->ncode,
			};
			if (cp_ehframe_table_build(&in, &m->debug) == 0) {
				m->debug_image = image_of(m->debug);
				t->next_image += (m->debug_image.size + 2 * IMAGE_GAP) &
						 ~(uint64_t)(IMAGE_GAP - 1);
			}
		}
		free(buf);
	}
out:
	close(fd);
}

const struct cp_ehframe_fde *cp_unwtables_find(struct cp_unwtables *t,
					       const struct cp_maps *maps,
					       const struct cp_map *map,
					       uint64_t pc)
{
	struct module *m = module_for(t, maps, map);
	if (!m)
		return NULL;
	if (!m->mem_tried) {
		m->mem_tried = true;
		load_memory(t, m);
	}
	const struct cp_ehframe_fde *fde =
		m->eh ? cp_ehframe_table_lookup(m->eh, pc) : NULL;
	if (fde)
		return fde;
	if (!m->file_tried) {
		m->file_tried = true;
		load_file(t, m);
		fde = m->eh ? cp_ehframe_table_lookup(m->eh, pc) : NULL;
		if (fde)
			return fde;
	}
	return m->debug ? cp_ehframe_table_lookup(m->debug, pc) : NULL;
}

bool cp_unwtables_dropped(struct cp_unwtables *t)
{
	bool dropped = t->dropped;
	t->dropped = false;
	return dropped;
}

/* The word at ADDR from IM, when ADDR's word overlaps it.  */
static bool image_word(const struct image *im, uint64_t addr,
		       uint64_t *word)
{
	if (!im->data || addr >= im->addr + im->size ||
	    addr + sizeof(*word) <= im->addr || addr > UINT64_MAX - 8)
		return false;
	unsigned char bytes[sizeof(*word)] = {0};
	for (size_t i = 0; i < sizeof(bytes); i++)
		if (addr + i >= im->addr && addr + i < im->addr + im->size)
			bytes[i] = im->data[addr + i - im->addr];
	memcpy(word, bytes, sizeof(bytes));
	return true;
}

bool cp_unwtables_read(struct cp_unwtables *t, uint64_t addr,
		       uint64_t *word)
{
	if (addr == CP_UNWTABLES_ENTRY) {
		*word = ENTRY_WORD;
		return true;
	}
	if (image_word(&t->hint, addr, word))
		return true;
	for (size_t i = 0; i < t->count; i++) {
		struct module *m = &t->modules[i];
		if (image_word(&m->eh_image, addr, word)) {
			t->hint = m->eh_image;
			return true;
		}
		if (image_word(&m->debug_image, addr, word)) {
			t->hint = m->debug_image;
			return true;
		}
	}
	return false;
}

static bool image_has(const struct image *im, uint64_t addr)
{
	return im->data && addr >= im->addr && addr - im->addr < im->size;
}

bool cp_unwtables_image(struct cp_unwtables *t, uint64_t addr,
			const uint8_t **data, size_t *size,
			uint64_t *image_addr)
{
	const struct image *found = NULL;
	if (image_has(&t->hint, addr))
		found = &t->hint;
	for (size_t i = 0; !found && i < t->count; i++) {
		struct module *m = &t->modules[i];
		if (image_has(&m->eh_image, addr))
			found = &m->eh_image;
		else if (image_has(&m->debug_image, addr))
			found = &m->debug_image;
	}
	if (!found)
		return false;
	*data = found->data;
	*size = found->size;
	*image_addr = found->addr;
	return true;
}
