/* The target's address space: see cprof/addrspace.h.
 *
 * Here, in capture/, because it is the target's state, changed by what
 * the capture side sees (an exec, the dynamic linker's notification of a
 * dlopen or dlclose) and read by the stages after it (the unwinder, the
 * symbolizer) and by heap mode's breakpoints.  The files it keeps open
 * are opened by the one implementation of cprof/tpath.h's rules for
 * mapped files, symbolize/modfiles.c.
 *
 * Concurrency: AS->current is the view readers see; a reader takes a
 * reference under AS->lock, which is held only for that and for the swap
 * of a new view, never across I/O.  AS->refresh_lock serializes the
 * refreshes (each reads the maps and builds a view).  Views and modules
 * are reference-counted and never change once published, but for a
 * module's file, opened once on first need under its own lock
 * (cp_addrspace_module_open).  */
#include "cprof/addrspace.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/target.h"
#include "cprof/tpath.h"
#include "symbolize/modfiles.h"

struct module {
	struct cp_addrspace_module pub;   /* first: a pub pointer is ours */
	atomic_int refs;
	pid_t pid;
	/* Its file is opened on first need (cp_addrspace_module_open):
	 * PUB's file fields are written once, under OPEN_LOCK.  */
	pthread_mutex_t open_lock;
	atomic_bool open_tried;
	struct cp_map first;              /* its mapping at file offset 0 */
	bool have_first;
};

struct view {
	struct cp_addrspace_view pub;     /* first, likewise */
	atomic_int refs;
	char *text;                       /* the maps as read */
	size_t len;
	struct cp_maps *maps;
	struct module **modules;
	struct module **gone;
};

struct cp_addrspace {
	pid_t pid;
	pthread_mutex_t lock;             /* CURRENT */
	pthread_mutex_t refresh_lock;     /* one refresh at a time */
	struct view *current;
	atomic_uint_fast64_t epoch, generation;
};

/* ------------------------------------------------------------ modules */

static void module_unref(struct module *m)
{
	if (!m || atomic_fetch_sub(&m->refs, 1) != 1)
		return;
	if (m->pub.fd >= 0)
		close(m->pub.fd);
	pthread_mutex_destroy(&m->open_lock);
	free((char *)m->pub.path);
	free((char *)m->pub.file_name);
	free((char *)m->pub.build_id);
	free(m);
}

static struct module *module_ref(struct module *m)
{
	atomic_fetch_add(&m->refs, 1);
	return m;
}

static bool pread_all(int fd, void *buf, size_t len, uint64_t offset)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  (off_t)(offset + done));
		if (n <= 0)
			return false;
		done += (size_t)n;
	}
	return true;
}

/* The load bias and build id of M from the ELF headers of its file: a few
 * preads, no libelf (every new module of every refresh gets this).  */
static void read_elf_info(struct module *m)
{
	int fd = m->pub.fd;
	Elf64_Ehdr eh;
	Elf64_Phdr ph[64];
	if (!pread_all(fd, &eh, sizeof(eh), 0) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phnum == 0 ||
	    eh.e_phnum > 64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    !pread_all(fd, ph, eh.e_phnum * sizeof(Elf64_Phdr), eh.e_phoff))
		return;
	for (int i = 0; i < eh.e_phnum && !m->pub.elf; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
			/* BASE holds file offset 0, which the first segment
			 * maps at its page-aligned virtual address.  */
			m->pub.bias = m->pub.base -
				      (ph[i].p_vaddr & ~(uint64_t)0xfff);
			m->pub.elf = true;
		}
	for (int i = 0; i < eh.e_phnum && !m->pub.build_id; i++) {
		if (ph[i].p_type != PT_NOTE || ph[i].p_filesz > 4096 ||
		    ph[i].p_filesz < 12)
			continue;
		unsigned char notes[4096];
		size_t size = ph[i].p_filesz;
		if (!pread_all(fd, notes, size, ph[i].p_offset))
			continue;
		for (size_t at = 0; at + 12 <= size;) {
			uint32_t namesz, descsz, type;
			memcpy(&namesz, notes + at, 4);
			memcpy(&descsz, notes + at + 4, 4);
			memcpy(&type, notes + at + 8, 4);
			size_t name_at = at + 12;
			size_t desc_at = name_at + ((namesz + 3u) & ~3u);
			if (namesz > size || descsz > size || desc_at > size ||
			    descsz > size - desc_at)
				break;
			if (type == NT_GNU_BUILD_ID && namesz == 4 &&
			    memcmp(notes + name_at, "GNU", 4) == 0 &&
			    descsz > 0 && descsz <= 64) {
				char *hex = malloc(2 * descsz + 1);
				for (size_t j = 0; hex && j < descsz; j++)
					snprintf(hex + 2 * j, 3, "%02x",
						 notes[desc_at + j]);
				m->pub.build_id = hex;
				break;
			}
			at = desc_at + ((descsz + 3u) & ~3u);
		}
	}
}

/* A new module for RANGE of MAPS; its file is opened when first
 * needed.  */
static struct module *module_new(pid_t pid, const struct cp_maps *maps,
				 const struct cp_addrspace_module *range)
{
	struct module *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	atomic_init(&m->refs, 1);
	atomic_init(&m->open_tried, range->vdso);
	pthread_mutex_init(&m->open_lock, NULL);
	m->pid = pid;
	m->pub = *range;
	m->pub.fd = -1;
	m->pub.file_name = NULL;
	m->pub.build_id = NULL;
	m->pub.path = strdup(range->path);
	if (!m->pub.path) {
		pthread_mutex_destroy(&m->open_lock);
		free(m);
		return NULL;
	}
	/* The mapping /proc/PID/map_files opens it by (modfiles.c).  */
	for (size_t i = 0; i < maps->count && !m->have_first; i++) {
		const struct cp_map *mm = &maps->maps[i];
		if (mm->offset == 0 && mm->inode == range->inode &&
		    mm->start >= range->start && mm->end <= range->end &&
		    strcmp(mm->path, range->path) == 0) {
			m->first = *mm;
			m->first.path = (char *)m->pub.path;
			m->have_first = true;
		}
	}
	return m;
}

int cp_addrspace_module_open(const struct cp_addrspace_module *mod)
{
	struct module *m = (struct module *)mod;
	if (atomic_load(&m->open_tried))
		return m->pub.fd;
	pthread_mutex_lock(&m->open_lock);
	if (!atomic_load(&m->open_tried)) {
		struct cp_tpath_creds creds;
		bool have_creds = cp_tpath_creds_read(m->pid, &creds) == 0;
		struct cp_maps first = {&m->first, m->have_first ? 1 : 0};
		struct cp_modfiles mf = {
			.pid = m->pid, .maps = &first,
			.creds = have_creds ? &creds : NULL};
		char *file_name = NULL;
		m->pub.fd = cp_modfiles_open_module(&mf, m->pub.path,
						    &m->pub.st, &file_name);
		m->pub.file_name = file_name;
		if (m->pub.fd >= 0)
			read_elf_info(m);
		atomic_store(&m->open_tried, true);
	}
	pthread_mutex_unlock(&m->open_lock);
	return m->pub.fd;
}

/* ------------------------------------------------------------ views */

static void view_unref(struct view *v)
{
	if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
		return;
	for (size_t i = 0; i < v->pub.nmodules; i++)
		module_unref(v->modules[i]);
	for (size_t i = 0; i < v->pub.ngone; i++)
		module_unref(v->gone[i]);
	free(v->modules);
	free(v->gone);
	cp_maps_free(v->maps);
	free(v->text);
	free(v);
}

/* A view of MODULES and GONE (references handed over) and MAPS, TEXT.  */
static struct view *view_new(char *text, size_t len, struct cp_maps *maps,
			     struct module **modules, size_t nmodules,
			     struct module **gone, size_t ngone,
			     uint64_t epoch, uint64_t generation)
{
	struct view *v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	atomic_init(&v->refs, 1);
	v->text = text;
	v->len = len;
	v->maps = maps;
	v->modules = modules;
	v->gone = gone;
	v->pub.maps = maps;
	v->pub.modules = (const struct cp_addrspace_module *const *)modules;
	v->pub.nmodules = nmodules;
	v->pub.gone = (const struct cp_addrspace_module *const *)gone;
	v->pub.ngone = ngone;
	v->pub.epoch = epoch;
	v->pub.generation = generation;
	return v;
}

const struct cp_addrspace_view *cp_addrspace_view(struct cp_addrspace *as)
{
	pthread_mutex_lock(&as->lock);
	struct view *v = as->current;
	atomic_fetch_add(&v->refs, 1);
	pthread_mutex_unlock(&as->lock);
	return &v->pub;
}

void cp_addrspace_view_release(const struct cp_addrspace_view *view)
{
	view_unref((struct view *)view);
}

const struct cp_addrspace_module *
cp_addrspace_view_module(const struct cp_addrspace_view *view,
			 uint64_t address)
{
	size_t lo = 0, hi = view->nmodules;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct cp_addrspace_module *m = view->modules[mid];
		if (address < m->start)
			hi = mid;
		else if (address >= m->end)
			lo = mid + 1;
		else
			return m;
	}
	return NULL;
}

bool cp_addrspace_has(struct cp_addrspace *as, uint64_t address)
{
	const struct cp_addrspace_view *v = cp_addrspace_view(as);
	bool has = cp_maps_find(v->maps, address) != NULL;
	cp_addrspace_view_release(v);
	return has;
}

/* ------------------------------------------------------------ reading */

/* Read /proc/PID/maps into *TEXT until two reads agree (at most 4
 * times); *STABLE says whether they did.  Returns 0, -CP_E_NOPROC or
 * -CP_E_SYS/-CP_E_NOMEM.  */
static int read_maps(pid_t pid, char **text, size_t *len, bool *stable)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	char *last = NULL;
	size_t last_len = 0;
	*stable = false;
	for (int i = 0; i < 4 && !*stable; i++) {
		char *now;
		size_t now_len;
		int rc = cp_procfs_slurp(path, &now, &now_len);
		if (rc < 0) {
			if (last)
				break;
			return errno == ENOENT || errno == ESRCH
				       ? -CP_E_NOPROC
				       : rc;
		}
		*stable = last && now_len == last_len &&
			  memcmp(now, last, now_len) == 0;
		free(last);
		last = now;
		last_len = now_len;
	}
	*text = last;
	*len = last_len;
	return 0;
}

/* A mapping that belongs to a module: of a file, executable or not (the
 * module's range covers all of the file's mappings, as libdwfl's does).  */
static bool file_mapping(const struct cp_map *m)
{
	return m->path[0] == '/' && m->inode != 0;
}

/* The modules of MAPS into *OUT (the caller frees it; the paths are
 * borrowed from MAPS): the mappings of one file in a row (other
 * mappings, the .bss, may lie between) make one module, as libdwfl's
 * dwfl_linux_proc_report has them, with two differences.  A mapping of
 * the same file far from where the file's first mapping puts it is not
 * part of the module: node copies its text to huge pages elsewhere and
 * maps its file there too, and one module from the executable to that
 * copy would swallow every JIT region in between (named after the
 * executable's last symbol).  And a bad line is skipped, not the end of
 * the modules.  */
static size_t derive_modules(const struct cp_maps *maps,
			     struct cp_addrspace_module **out)
{
	*out = NULL;
	struct cp_addrspace_module *mods =
		maps->count ? calloc(maps->count, sizeof(*mods)) : NULL;
	if (!mods)
		return 0;
	size_t n = 0;
	struct cp_addrspace_module *cur = NULL;
	for (size_t i = 0; i < maps->count; i++) {
		const struct cp_map *m = &maps->maps[i];
		if (strcmp(m->path, "[vdso]") == 0) {
			mods[n++] = (struct cp_addrspace_module){
				.path = m->path, .start = m->start,
				.end = m->end, .base = m->start,
				.executable = true, .vdso = true, .fd = -1};
			cur = NULL;
			continue;
		}
		if (!file_mapping(m))
			continue;
		uint64_t base = m->start - m->offset;
		/* Segments of one ELF file: each at its offset from the same
		 * base, give or take the segment alignment (2 MiB for old
		 * x86-64 binaries; up to 64 MiB allowed either way).  */
		bool same_file = cur && cur->inode == m->inode &&
				 strcmp(cur->path, m->path) == 0;
		uint64_t apart = cur ? (base > cur->base ? base - cur->base
							 : cur->base - base)
				     : 0;
		if (same_file && apart < (64u << 20)) {
			cur->end = m->end;
			cur->executable |= m->executable;
			continue;
		}
		if (same_file) {
			/* The same file far away: a copy, not a module (see
			 * above); the module goes on after it.  */
			continue;
		}
		cur = &mods[n++];
		*cur = (struct cp_addrspace_module){
			.path = m->path, .start = m->start, .end = m->end,
			.base = base, .inode = m->inode,
			.executable = m->executable, .fd = -1};
	}
	*out = mods;
	return n;
}

static bool same_module(const struct cp_addrspace_module *a,
			const struct cp_addrspace_module *b)
{
	return a->start == b->start && a->end == b->end &&
	       a->base == b->base && a->inode == b->inode &&
	       a->vdso == b->vdso && strcmp(a->path, b->path) == 0;
}

static int by_start(const void *a, const void *b)
{
	const struct module *x = *(struct module *const *)a;
	const struct module *y = *(struct module *const *)b;
	return (x->pub.start > y->pub.start) - (x->pub.start < y->pub.start);
}

/* Make the view of TEXT (handed over) after OLD in EPOCH: modules OLD
 * has unchanged are shared, new ones made (their files are opened when
 * first needed); when the read was not
 * STABLE, OLD's modules that no module shown overlaps are kept.  The
 * generation moves on only when the modules changed.  Returns the view
 * or NULL (out of memory, or TEXT unparsable: OLD stays).  */
static struct view *build_view(struct cp_addrspace *as, struct view *old,
			       char *text, size_t len, bool stable,
			       uint64_t epoch)
{
	struct cp_maps *maps;
	if (cp_maps_parse(text, len, &maps, NULL) < 0) {
		free(text);
		return NULL;
	}
	struct cp_addrspace_module *ranges;
	size_t n = derive_modules(maps, &ranges);
	bool same_epoch = old && old->pub.epoch == epoch;
	size_t nold = same_epoch ? old->pub.nmodules : 0;
	size_t ngone_old = same_epoch ? old->pub.ngone : 0;
	struct module **mods = calloc(n + nold + 1, sizeof(*mods));
	struct module **gone = calloc(CP_ADDRSPACE_GONE_MAX, sizeof(*gone));
	bool *seen = calloc(nold + 1, sizeof(*seen));
	bool changed = !same_epoch;
	size_t count = 0, ngone = 0;
	if (!mods || !gone || !seen)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		struct module *m = NULL;
		for (size_t j = 0; j < nold && !m; j++)
			if (!seen[j] && same_module(&old->modules[j]->pub,
						    &ranges[i])) {
				seen[j] = true;
				m = module_ref(old->modules[j]);
			}
		if (!m) {
			m = module_new(as->pid, maps, &ranges[i]);
			if (!m)
				goto fail;
			changed = true;
		}
		mods[count++] = m;
	}
	/* What OLD had that is not shown: kept (a torn read) or gone.  */
	for (size_t j = 0; j < nold; j++) {
		if (seen[j])
			continue;
		struct module *o = old->modules[j];
		bool overlapped = false;
		for (size_t i = 0; i < n && !overlapped; i++)
			overlapped = ranges[i].start < o->pub.end &&
				     o->pub.start < ranges[i].end;
		if (!stable && !overlapped) {
			mods[count++] = module_ref(o);
			continue;
		}
		changed = true;
		/* Only an open file still names it: its mapping is gone.  */
		if (atomic_load(&o->open_tried) && o->pub.fd >= 0 &&
		    ngone < CP_ADDRSPACE_GONE_MAX)
			gone[ngone++] = module_ref(o);
	}
	for (size_t j = 0; j < ngone_old && ngone < CP_ADDRSPACE_GONE_MAX; j++)
		gone[ngone++] = module_ref(old->gone[j]);
	if (count > 1)
		qsort(mods, count, sizeof(*mods), by_start);
	free(ranges);
	free(seen);
	uint64_t generation = atomic_load(&as->generation);
	struct view *v = view_new(text, len, maps, mods, count, gone, ngone,
				  epoch, changed ? generation + 1 : generation);
	if (!v)
		goto fail_refs;
	return v;
fail_refs:
	free(text);
	cp_maps_free(maps);
	for (size_t i = 0; i < count; i++)
		module_unref(mods[i]);
	for (size_t i = 0; i < ngone; i++)
		module_unref(gone[i]);
	free(mods);
	free(gone);
	return NULL;
fail:
	free(ranges);
	free(seen);
	goto fail_refs;
}

/* Swap in V (a reference handed over).  */
static void publish(struct cp_addrspace *as, struct view *v)
{
	pthread_mutex_lock(&as->lock);
	struct view *old = as->current;
	as->current = v;
	atomic_store(&as->epoch, v->pub.epoch);
	atomic_store(&as->generation, v->pub.generation);
	pthread_mutex_unlock(&as->lock);
	view_unref(old);
}

/* The refresh, with REFRESH_LOCK held.  */
static int refresh_locked(struct cp_addrspace *as, uint64_t epoch)
{
	char *text;
	size_t len;
	bool stable;
	int rc = read_maps(as->pid, &text, &len, &stable);
	if (rc < 0)
		return rc;
	struct view *old = as->current;
	if (old && old->pub.epoch == epoch && old->text && old->len == len &&
	    memcmp(old->text, text, len) == 0) {
		free(text);
		return 0;
	}
	struct view *v = build_view(as, old, text, len, stable, epoch);
	if (!v)
		return -CP_E_NOMEM;
	publish(as, v);
	return 0;
}

int cp_addrspace_new(pid_t pid, struct cp_addrspace **out)
{
	elf_version(EV_CURRENT);
	struct cp_addrspace *as = calloc(1, sizeof(*as));
	if (!as)
		return -CP_E_NOMEM;
	as->pid = pid;
	pthread_mutex_init(&as->lock, NULL);
	pthread_mutex_init(&as->refresh_lock, NULL);
	atomic_init(&as->epoch, 0);
	atomic_init(&as->generation, 0);
	int rc = refresh_locked(as, 0);
	if (rc < 0) {
		cp_addrspace_free(as);
		return rc;
	}
	*out = as;
	return 0;
}

void cp_addrspace_free(struct cp_addrspace *as)
{
	if (!as)
		return;
	view_unref(as->current);
	pthread_mutex_destroy(&as->lock);
	pthread_mutex_destroy(&as->refresh_lock);
	free(as);
}

pid_t cp_addrspace_pid(const struct cp_addrspace *as)
{
	return as->pid;
}

int cp_addrspace_refresh(struct cp_addrspace *as)
{
	pthread_mutex_lock(&as->refresh_lock);
	int rc = refresh_locked(as, atomic_load(&as->epoch));
	pthread_mutex_unlock(&as->refresh_lock);
	return rc;
}

bool cp_addrspace_captured(struct cp_addrspace *as, uint64_t address)
{
	/* A refresh made by someone else (the unwinder meeting a pc in no
	 * mapping) knows the mapping but opened nothing, and a module
	 * unloaded before its file was open cannot name anything
	 * afterwards.  */
	const struct cp_addrspace_view *v = cp_addrspace_view(as);
	struct module *m =
		(struct module *)cp_addrspace_view_module(v, address);
	bool captured = m ? atomic_load(&m->open_tried)
			  : cp_maps_find(v->maps, address) != NULL;
	cp_addrspace_view_release(v);
	return captured;
}

int cp_addrspace_capture(struct cp_addrspace *as)
{
	int rc = cp_addrspace_refresh(as);
	if (rc < 0)
		return rc;
	const struct cp_addrspace_view *v = cp_addrspace_view(as);
	for (size_t i = 0; i < v->nmodules; i++)
		if (v->modules[i]->executable)
			cp_addrspace_module_open(v->modules[i]);
	cp_addrspace_view_release(v);
	return 0;
}

int cp_addrspace_apply_maps(struct cp_addrspace *as, const char *text,
			    size_t len, bool stable)
{
	char *copy = malloc(len + 1);
	if (!copy)
		return -CP_E_NOMEM;
	memcpy(copy, text, len);
	copy[len] = '\0';
	struct cp_maps *check;
	if (cp_maps_parse(copy, len, &check, NULL) < 0) {
		free(copy);
		return -CP_E_PARSE;
	}
	cp_maps_free(check);
	pthread_mutex_lock(&as->refresh_lock);
	struct view *v = build_view(as, as->current, copy, len, stable,
				    atomic_load(&as->epoch));
	if (v)
		publish(as, v);
	pthread_mutex_unlock(&as->refresh_lock);
	return v ? 0 : -CP_E_NOMEM;
}

int cp_addrspace_exec(struct cp_addrspace *as)
{
	pthread_mutex_lock(&as->refresh_lock);
	uint64_t epoch = atomic_load(&as->epoch) + 1;
	int rc = refresh_locked(as, epoch);
	if (rc < 0) {
		/* Nothing of the old image is true any more.  */
		struct view *v = view_new(NULL, 0, NULL, NULL, 0, NULL, 0, epoch,
					  atomic_load(&as->generation) + 1);
		if (v)
			publish(as, v);
	}
	pthread_mutex_unlock(&as->refresh_lock);
	return rc;
}

uint64_t cp_addrspace_epoch(const struct cp_addrspace *as)
{
	return atomic_load(&((struct cp_addrspace *)as)->epoch);
}

uint64_t cp_addrspace_generation(const struct cp_addrspace *as)
{
	return atomic_load(&((struct cp_addrspace *)as)->generation);
}

/* ------------------------------------------------------------ symbols */

/* Look in the ELF file FD for the symbols named NAMES[0..N) that it
 * defines and exports (its .symtab too, local symbols included, when
 * STATIC_EXE) and whose VALUES are still 0; fill those with the symbol
 * values plus BIAS and return how many were found.  */
static size_t elf_symbols(int fd, const char *const *names, size_t n,
			  uint64_t *values, uint64_t bias, bool static_exe,
			  unsigned flags)
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
			     !((flags & CP_ADDRSPACE_SYM_DATA) &&
			       type == STT_OBJECT)) ||
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

size_t cp_addrspace_module_symbols(const struct cp_addrspace_module *mod,
				   const char *const *names, size_t n,
				   unsigned flags, uint64_t *values)
{
	if (!mod || cp_addrspace_module_open(mod) < 0)
		return 0;
	return elf_symbols(mod->fd, names, n, values,
			   mod->elf ? mod->bias : mod->base, false, flags);
}

/* The executable's load bias and the run-time address of its dynamic
 * section (0 when static), from its program headers in FD and the
 * kernel's AT_PHDR.  */
static int exe_layout(pid_t pid, int fd, uint64_t *bias, uint64_t *dynamic)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph[64];
	if (!pread_all(fd, &eh, sizeof(eh), 0) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phnum > 64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    !pread_all(fd, ph, eh.e_phnum * sizeof(Elf64_Phdr), eh.e_phoff))
		return -CP_E_PARSE;
	uint64_t phdr_vaddr = 0, dyn_vaddr = 0;
	bool have_phdr = false;
	for (int i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type == PT_PHDR) {
			phdr_vaddr = ph[i].p_vaddr;
			have_phdr = true;
		} else if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0 &&
			   !have_phdr) {
			phdr_vaddr = ph[i].p_vaddr + eh.e_phoff;
			have_phdr = true;
		} else if (ph[i].p_type == PT_DYNAMIC) {
			dyn_vaddr = ph[i].p_vaddr;
		}
	}
	uint64_t at_phdr = cp_procfs_auxv(pid, AT_PHDR);
	if (!have_phdr || !at_phdr)
		return -CP_E_PARSE;
	*bias = at_phdr - phdr_vaddr;
	*dynamic = dyn_vaddr ? *bias + dyn_vaddr : 0;
	return 0;
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

/* One module in link-map order.  */
struct linked {
	const struct cp_addrspace_module *mod; /* NULL: not in the view */
	uint64_t bias;          /* l_addr */
	bool executable;        /* read through /proc/PID/exe */
	char name[128];         /* for messages: the link map's, or
				 * "executable" */
};

/* The modules of the link map at R_DEBUG into *OUT (the caller frees
 * it), matched to VIEW's modules; *MISSING: an entry lies in no module
 * of VIEW.  Just the executable when there is no link map.  */
static int link_order(pid_t pid, const struct cp_addrspace_view *view,
		      uint64_t exe_bias, uint64_t r_debug,
		      struct linked **out, size_t *count, bool *missing)
{
	struct linked *mods = NULL;
	size_t n = 0, cap = 0;
	*missing = false;
	uint64_t lm = 0;
	if (r_debug)
		cp_target_read(pid, r_debug + offsetof(struct r_debug, r_map),
			       &lm, sizeof(lm));
	bool have_map = lm != 0;
	uint64_t at_phdr = cp_procfs_auxv(pid, AT_PHDR);
	const struct cp_addrspace_module *exe =
		at_phdr ? cp_addrspace_view_module(view, at_phdr) : NULL;
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
		if (n == cap) {
			cap = cap ? 2 * cap : 32;
			struct linked *grown = realloc(mods, cap * sizeof(*mods));
			if (!grown) {
				free(mods);
				return -CP_E_NOMEM;
			}
			mods = grown;
		}
		if (n == 0 && name[0] == '\0') {
			mods[n++] = (struct linked){exe, exe_bias, true,
						    "executable"};
		} else if (name[0] == '/' && l[2]) {
			/* The name is not opened: the file is the one mapped
			 * where its dynamic section (l_ld) is.  */
			const struct cp_addrspace_module *m =
				cp_addrspace_view_module(view, l[2]);
			if (!m) {
				*missing = true;
			} else if (!m->vdso) {
				mods[n] = (struct linked){m, l[0], false, ""};
				snprintf(mods[n].name, sizeof(mods[n].name),
					 "%s", strrchr(name, '/') + 1);
				n++;
			}
		}
		/* else the vDSO ("linux-vdso.so.1"): no file, no malloc.  */
		lm = l[3];
	}
	if (!have_map) {
		/* Static, or the dynamic linker has not run: the executable
		 * alone.  */
		free(mods);
		mods = calloc(1, sizeof(*mods));
		if (!mods)
			return -CP_E_NOMEM;
		mods[0] = (struct linked){exe, exe_bias, true, "executable"};
		n = 1;
	}
	*out = mods;
	*count = n;
	return 0;
}

int cp_addrspace_find_symbols(struct cp_addrspace *as,
			      const struct cp_addrspace_view **view,
			      uint64_t r_debug, const char *const *names,
			      size_t n, unsigned flags,
			      struct cp_addrspace_symbol *syms,
			      uint64_t *r_debug_out)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)as->pid);
	/* The executable: the kernel's link to the file it runs.  */
	int exe_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (exe_fd < 0)
		return -CP_E_SYS;
	uint64_t exe_bias = 0, dynamic = 0;
	int rc = exe_layout(as->pid, exe_fd, &exe_bias, &dynamic);
	if (rc < 0)
		goto out;
	if (!r_debug)
		r_debug = exe_r_debug(as->pid, dynamic);
	if (r_debug_out)
		*r_debug_out = r_debug;
	struct linked *mods = NULL;
	size_t nmods = 0;
	bool missing = false;
	rc = link_order(as->pid, *view, exe_bias, r_debug, &mods, &nmods,
			&missing);
	if (rc == 0 && missing && cp_addrspace_refresh(as) == 0) {
		/* A library mapped since the view was taken.  */
		cp_addrspace_view_release(*view);
		*view = cp_addrspace_view(as);
		free(mods);
		mods = NULL;
		rc = link_order(as->pid, *view, exe_bias, r_debug, &mods,
				&nmods, &missing);
	}
	if (rc < 0)
		goto out;
	if (nmods == 0) {
		free(mods);
		rc = -CP_E_NOALLOC;
		goto out;
	}
	size_t found = 0;
	uint64_t *got = calloc(n ? n : 1, sizeof(*got));
	if (!got) {
		free(mods);
		rc = -CP_E_NOMEM;
		goto out;
	}
	for (size_t i = 0; i < nmods; i++) {
		int fd = mods[i].mod && cp_addrspace_module_open(mods[i].mod) >= 0
				 ? mods[i].mod->fd
			 : mods[i].executable		      ? exe_fd
								      : -1;
		if (fd < 0)
			continue;
		for (size_t f = 0; f < n; f++)
			got[f] = syms[f].value ? 1 : 0; /* an earlier module's */
		elf_symbols(fd, names, n, got, mods[i].bias, nmods == 1, flags);
		for (size_t f = 0; f < n; f++)
			if (!syms[f].value && got[f]) {
				syms[f].value = got[f];
				syms[f].module = mods[i].mod;
				syms[f].executable = mods[i].executable;
				memcpy(syms[f].name, mods[i].name,
				       sizeof(syms[f].name));
				found++;
			}
	}
	free(got);
	free(mods);
	rc = (int)found;
out:
	close(exe_fd);
	return rc;
}
