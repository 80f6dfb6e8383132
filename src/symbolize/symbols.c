/* Symbolization with libdwfl: address -> module, function, inlined calls,
 * source position; JIT code through the target's perf map.
 *
 * Debug information is looked for the way gdb and eu-stack do (the module
 * itself, .gnu_debuglink with its CRC, build-id directories, debuginfod
 * when DEBUGINFOD_URLS is set), with the user's --debuginfo-dir
 * directories first.  Every file whose name the target controls (module
 * paths, the directories beside them, debuglink names, /tmp/perf-PID.map)
 * is opened by the rules of cprof/tpath.h, never by libdwfl's own
 * callbacks: the search is modfiles.c's, the perf map perfmap.c's.
 *
 * The modules are the target's address space's (cprof/addrspace.h): the
 * Dwfl is brought in line with its current view where the symbolizer
 * re-reads the mappings (an address in no module, an exec), and a
 * module's file is the one the address space keeps open.
 *
 * Memory: the resolver's symbolizer gives libdw a compressed separate
 * debug file as an image holding only the compile units its addresses
 * need (dwlazy.h), and lets go of the modules it has not looked anything
 * up in for a while (cp_symbols_release); both keep every answer the
 * same.  */
#include "cprof/symbols.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libiberty/demangle.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cprof/addrspace.h"
#include "cprof/error.h"
#include "cprof/perfmap.h"
#include "cprof/procfs.h"
#include "cprof/profile.h"
#include "cprof/tpath.h"
#include "util/hashidx.h"
#include "symbolize/dwlazy.h"
#include "symbolize/modfiles.h"
#include "symbolize/symbols_int.h"

#define MAX_INLINE 32

/* Images of one debug file (dwlazy.h) made before it is read whole: each
 * new compile unit asked for costs one (inflating .debug_info up to it),
 * so a profile that keeps meeting new units of a module ends up paying
 * what reading it whole costs, once.  */
#define LAZY_MAX_IMAGES 24

/* A debug file read by compile unit, by the module it is for.  */
struct lazy_file {
	char *name;                  /* the module's */
	uint64_t low;                /* its start */
	dev_t dev;                   /* the debug file's */
	ino_t ino;
	struct cp_dwlazy *units;     /* NULL: read whole */
	bool whole;                  /* read whole from now on */
};

struct cp_symbols {
	pid_t pid;
	Dwfl *dwfl;
	Dwfl_Callbacks callbacks;
	char *debuginfo_path;
	struct cp_symbols_options options;
	char **dirs;                 /* copies of options.debuginfo_dirs */
	struct cp_profile *strings;  /* interned, stable strings */
	struct cp_symbol **syms;     /* by id; each allocated with its frames */
	uint32_t nsyms, syms_cap;
	struct cp_hashidx index;     /* address -> id */
	struct cp_addrspace *space;  /* the target's address space */
	bool own_space;              /* made by cp_symbols_new */
	/* The view the Dwfl's modules were last made from: its mappings,
	 * its modules' open files.  */
	const struct cp_addrspace_view *view;
	struct cp_tpath_creds creds; /* the target's, to judge its files */
	bool have_creds;
	bool reread_allowed;         /* one maps re-read per epoch */
	struct cp_perfmap_file *perfmap; /* /tmp/perf-PID.map, once needed */
	bool perfmap_allowed;        /* one perf map refresh per epoch */
	uint64_t lookups, hits, rereads;
	struct module_data **modules; /* every module's userdata */
	size_t nmodules;
	char **warned;               /* files already warned about */
	size_t nwarned;
	uint64_t generation;         /* changes with the set of modules */
	uint64_t *sym_generation;    /* by id: GENERATION it was resolved in */
	uint64_t *sym_epoch;         /* by id: EPOCH it was resolved in */
	uint64_t epoch;              /* cp_symbols_new_epoch() calls */
	struct cp_symbol **retired;  /* replaced unknown answers (borrowed) */
	size_t nretired;
	uint64_t released;           /* modules cp_symbols_release dropped */
	bool lazy_dwarf;             /* debug files read by unit */
	struct lazy_file **lazy;
	size_t nlazy;
	/* The addresses about to be looked up (borrowed, during a lookup or
	 * a prefetch): the first image of a debug file has their units.  */
	const uint64_t *pending;
	size_t npending;
};

struct symtab;
static void free_symtab(struct symtab *t);
static int open_kept(struct cp_symbols *s, Dwfl_Module *mod,
		     const char *modname, struct stat *st, char **file_name);

/* libdwfl's callbacks get no argument of ours; the symbolizer running the
 * lookup is found through this pointer (one lookup at a time per thread). */
static __thread struct cp_symbols *current;

static const char *intern(struct cp_symbols *s, const char *str)
{
	uint32_t id = cp_profile_intern(s->strings, str, strlen(str));
	return id == UINT32_MAX ? NULL : cp_profile_string(s->strings, id);
}

static void warn(struct cp_symbols *s, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void warn(struct cp_symbols *s, const char *key, const char *fmt, ...)
{
	/* One warning per file, however often it is looked at.  */
	for (size_t i = 0; i < s->nwarned; i++)
		if (strcmp(s->warned[i], key) == 0)
			return;
	char **grown = realloc(s->warned, (s->nwarned + 1) * sizeof(*grown));
	if (grown) {
		s->warned = grown;
		s->warned[s->nwarned] = strdup(key);
		if (s->warned[s->nwarned])
			s->nwarned++;
	}
	if (!s->options.warn)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->options.warn(s->options.warn_arg, msg);
}

/* ------------------------------------------------------------ finding ELF */

/* What we keep per libdwfl module (its userdata).  */
struct module_data {
	struct symtab *symtab;       /* built on first lookup */
	bool failed;                 /* its file could not be opened */
	bool have_file;              /* DEV and INO are the main file's */
	bool read;                   /* looked up in: its files are read */
	bool used;                   /* looked up in since the last release */
	struct lazy_file *lazy;      /* its debug file is an image of it */
	dev_t dev;
	ino_t ino;
};

/* The module's data, created on first use.  NULL when out of memory.  */
static struct module_data *module_data(struct cp_symbols *s, void **userdata)
{
	if (*userdata)
		return *userdata;
	struct module_data **grown =
		realloc(s->modules, (s->nmodules + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	s->modules = grown;
	struct module_data *md = calloc(1, sizeof(*md));
	if (!md)
		return NULL;
	s->modules[s->nmodules++] = md;
	*userdata = md;
	return md;
}

/* The target's credentials may change (setuid, an exec): read them again
 * before judging its files.  Unknown ones judge everything unreadable. */
static void update_creds(struct cp_symbols *s)
{
	s->have_creds = cp_tpath_creds_read(s->pid, &s->creds) == 0;
}

static const struct cp_tpath_creds *creds(const struct cp_symbols *s)
{
	return s->have_creds ? &s->creds : NULL;
}

/* What the search for a module's files needs (modfiles.h).  */
static void warn_message(void *arg, const char *key, const char *message)
{
	warn(arg, key, "%s", message);
}

static struct cp_modfiles modfiles(struct cp_symbols *s)
{
	return (struct cp_modfiles){
		.pid = s->pid,
		.maps = s->view->maps,
		.creds = creds(s),
		.dirs = s->dirs,
		.warn = warn_message,
		.warn_arg = s,
	};
}

static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname,
		    Dwarf_Addr base, char **file_name, Elf **elfp)
{
	struct cp_symbols *s = current;
	/* libdwfl opens a *FILE_NAME left behind by a failed callback
	 * itself, with a plain open(): never leave one.  */
	*file_name = NULL;
	if (modname[0] == '/') {
		/* Never libdwfl's own fallback for a path: it stat()s, then
		 * open()s the path, following symlinks, a FIFO swapped in
		 * between blocking us for ever.  */
		struct module_data *md = s ? module_data(s, userdata) : NULL;
		if (!md)
			return -1;
		struct stat st;
		int fd = open_kept(s, mod, modname, &st, file_name);
		if (fd < 0) {
			struct cp_modfiles mf = modfiles(s);
			fd = cp_modfiles_open_module(&mf, modname, &st,
						     file_name);
		}
		if (fd >= 0) {
			md->have_file = true;
			md->dev = st.st_dev;
			md->ino = st.st_ino;
		}
		/* Tried again at the next re-read: the loader may not have
		 * finished mapping it, or it was looked at too late.  */
		md->failed = fd < 0;
		return fd;
	}
	/* The vDSO ("[vdso: PID]"): read from the target's memory.  */
	if (strncmp(modname, "[vdso: ", 7) == 0) {
		int fd = dwfl_linux_proc_find_elf(mod, userdata, modname, base,
						  file_name, elfp);
		struct module_data *md = s ? module_data(s, userdata) : NULL;
		if (md)
			md->failed = fd < 0 && !*elfp;
		return fd;
	}
	return -1;
}

/* The debug file FD of module MOD named MODNAME as libdw is to read it:
 * an image with the compile units asked for so far (FD closed), or FD
 * itself when the file cannot be read by unit or is to be read whole.  */
static int lazy_image(struct cp_symbols *s, Dwfl_Module *mod,
		      void **userdata, const char *modname, int fd)
{
	Dwarf_Addr low = 0;
	dwfl_module_info(mod, NULL, &low, NULL, NULL, NULL, NULL, NULL);
	struct module_data *md = module_data(s, userdata);
	if (!md)
		return fd;
	struct stat st;
	if (fstat(fd, &st) != 0)
		return fd;
	/* The same module with the same debug file (not one replaced
	 * since, an upgrade between two execs).  */
	struct lazy_file *lf = NULL;
	for (size_t i = 0; i < s->nlazy && !lf; i++)
		if (s->lazy[i]->low == low && s->lazy[i]->dev == st.st_dev &&
		    s->lazy[i]->ino == st.st_ino &&
		    strcmp(s->lazy[i]->name, modname) == 0)
			lf = s->lazy[i];
	if (!lf) {
		struct lazy_file **grown =
			realloc(s->lazy, (s->nlazy + 1) * sizeof(*grown));
		if (!grown)
			return fd;
		s->lazy = grown;
		lf = calloc(1, sizeof(*lf));
		if (!lf || !(lf->name = strdup(modname))) {
			free(lf);
			return fd;
		}
		lf->low = low;
		lf->dev = st.st_dev;
		lf->ino = st.st_ino;
		lf->whole = cp_dwlazy_open(fd, &lf->units) < 0;
		s->lazy[s->nlazy++] = lf;
		/* The units of the addresses about to be looked up in the
		 * module go into its first image (by the main file's bias:
		 * the debug file's is the same unless it was prelinked, and
		 * a unit missed is added by lazy_prepare).  */
		Dwarf_Addr high = 0, bias = 0;
		dwfl_module_info(mod, NULL, NULL, &high, NULL, NULL, NULL,
				 NULL);
		for (size_t i = 0; !lf->whole && i < s->npending; i++) {
			uint64_t a = s->pending[i];
			int64_t unit;
			if (a < low || a >= high || !dwfl_module_getelf(mod, &bias))
				continue;
			unit = cp_dwlazy_unit(lf->units, a - bias);
			if (unit >= 0 && cp_dwlazy_add(lf->units, (uint64_t)unit) < 0)
				lf->whole = true;
		}
	}
	md->lazy = lf;
	if (lf->whole)
		return fd;
	int image = cp_dwlazy_image(lf->units);
	if (image < 0) {
		lf->whole = true;
		return fd;
	}
	close(fd);
	return image;
}

static int find_debuginfo(Dwfl_Module *mod, void **userdata,
			  const char *modname, GElf_Addr base,
			  const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	struct cp_symbols *s = current;
	if (!s) {
		/* Never expected; then only what involves no target path:
		 * build-id directories and debuginfod.  */
		struct cp_modfiles none = {0};
		return cp_modfiles_find_debuginfo(&none, mod, userdata, "", base,
						  NULL, 0, NULL,
						  debuginfo_file_name);
	}
	struct module_data *md = *userdata;
	struct stat main = {0};
	if (md && md->have_file) {
		main.st_dev = md->dev;
		main.st_ino = md->ino;
	}
	struct cp_modfiles mf = modfiles(s);
	int fd = cp_modfiles_find_debuginfo(&mf, mod, userdata, modname, base,
					    debuglink_file, debuglink_crc,
					    md && md->have_file ? &main : NULL,
					    debuginfo_file_name);
	if (fd >= 0 && s->lazy_dwarf && modname[0] == '/')
		fd = lazy_image(s, mod, userdata, modname, fd);
	return fd;
}

/* ------------------------------------------------------------ modules */

/* A module as libdwfl had it before a re-read.  */
struct old_module {
	char *name;
	uint64_t low, high;
	bool failed;
	bool seen;                   /* reported again */
	struct module_data *md;      /* its userdata (may be NULL) */
};

struct old_modules {
	struct old_module *mods;
	size_t count, cap;
};

static int remember_module(Dwfl_Module *mod, void **userdata,
			   const char *name, Dwarf_Addr low, void *arg)
{
	struct old_modules *old = arg;
	if (old->count == old->cap) {
		size_t cap = old->cap ? old->cap * 2 : 64;
		struct old_module *grown =
			realloc(old->mods, cap * sizeof(*grown));
		if (!grown)
			return DWARF_CB_ABORT;
		old->mods = grown;
		old->cap = cap;
	}
	Dwarf_Addr high = 0;
	dwfl_module_info(mod, NULL, NULL, &high, NULL, NULL, NULL, NULL);
	struct module_data *md = *userdata;
	char *copy = strdup(name ? name : "");
	if (!copy)
		return DWARF_CB_ABORT;
	old->mods[old->count++] = (struct old_module){
		copy, low, high, md && md->failed, false, md};
	return DWARF_CB_OK;
}

/* The name libdwfl knows module M by.  */
static const char *dwfl_name(const struct cp_symbols *s,
			     const struct cp_addrspace_module *m, char *vdso,
			     size_t size)
{
	if (!m->vdso)
		return m->path;
	snprintf(vdso, size, "[vdso: %d]", (int)s->pid);
	return vdso;
}

/* Make the Dwfl's modules VIEW's (a reference handed over), which
 * becomes S->view.  A module reported again with the same name and range
 * is libdwfl's same module (its files stay open, its symbol table
 * built).  One whose file could not be opened is made anew, so the next
 * lookup tries again (the loader had not finished mapping it, or it was
 * looked at too late).  What VIEW does not have goes: the address space
 * decided what a torn read of the mappings keeps.  */
static void report_view(struct cp_symbols *s,
			const struct cp_addrspace_view *view)
{
	const struct cp_addrspace_view *old_view = s->view;
	/* VIEW's files are the ones find_elf looks at from now on.  */
	s->view = view;
	char vdso[32];
	struct old_modules old = {0};
	dwfl_getmodules(s->dwfl, remember_module, &old, 0);
	bool changed = false, retry = false;
	bool *again = calloc(view->nmodules + 1, sizeof(*again));
	dwfl_report_begin(s->dwfl);
	for (size_t i = 0; i < view->nmodules; i++) {
		const struct cp_addrspace_module *m = view->modules[i];
		const char *name = dwfl_name(s, m, vdso, sizeof(vdso));
		struct old_module *o = NULL;
		for (size_t j = 0; j < old.count && !o; j++)
			if (old.mods[j].low == m->start &&
			    old.mods[j].high == m->end &&
			    strcmp(old.mods[j].name, name) == 0)
				o = &old.mods[j];
		if (o)
			o->seen = true;
		else
			changed = true;
		if (o && o->failed && again) {
			/* Dropped now, made anew below.  */
			again[i] = retry = true;
			continue;
		}
		dwfl_report_module(s->dwfl, name, m->start, m->end);
	}
	for (size_t j = 0; j < old.count; j++)
		if (!old.mods[j].seen)
			changed = true;
	dwfl_report_end(s->dwfl, NULL, NULL);
	if (retry) {
		changed = true;
		dwfl_report_begin_add(s->dwfl);
		for (size_t i = 0; i < view->nmodules; i++)
			if (again[i])
				dwfl_report_module(
					s->dwfl,
					dwfl_name(s, view->modules[i], vdso,
						  sizeof(vdso)),
					view->modules[i]->start,
					view->modules[i]->end);
		dwfl_report_end(s->dwfl, NULL, NULL);
	}
	if (changed)
		s->generation++;
	for (size_t j = 0; j < old.count; j++)
		free(old.mods[j].name);
	free(old.mods);
	free(again);
	cp_addrspace_view_release(old_view);
}

/* The file of the module libdwfl has as MOD, named MODNAME, that the
 * address space keeps open (in S->view, or gone from it): a new
 * descriptor for libdwfl to own, with *ST and *FILE_NAME (the caller
 * frees it); or -1.  */
static int open_kept(struct cp_symbols *s, Dwfl_Module *mod,
		     const char *modname, struct stat *st, char **file_name)
{
	Dwarf_Addr low = 0;
	dwfl_module_info(mod, NULL, &low, NULL, NULL, NULL, NULL, NULL);
	const struct cp_addrspace_module *kept = NULL;
	for (size_t i = 0; i < s->view->nmodules && !kept; i++)
		if (s->view->modules[i]->start == low &&
		    strcmp(s->view->modules[i]->path, modname) == 0)
			kept = s->view->modules[i];
	for (size_t i = 0; i < s->view->ngone && !kept; i++)
		if (s->view->gone[i]->start == low &&
		    strcmp(s->view->gone[i]->path, modname) == 0)
			kept = s->view->gone[i];
	if (!kept || cp_addrspace_module_open(kept) < 0 || !kept->file_name)
		return -1;
	*file_name = strdup(kept->file_name);
	int fd = *file_name ? fcntl(kept->fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (fd < 0) {
		free(*file_name);
		*file_name = NULL;
		return -1;
	}
	*st = kept->st;
	return fd;
}

/* ADDRESS is in no module the target has mapped now; a refresh of the
 * address space may have seen it in one that is gone since (a library
 * unloaded, or the target gone before the lookup thread got to it):
 * report that module as it was, unless a module now lies in its place.
 * True when it did.  */
static bool report_captured(struct cp_symbols *s, uint64_t address)
{
	const struct cp_addrspace_view *v = s->view;
	bool reported = false;
	for (size_t i = 0; i < v->ngone && !reported; i++) {
		const struct cp_addrspace_module *m = v->gone[i];
		if (address < m->start || address >= m->end || m->vdso)
			continue;
		struct old_modules now = {0};
		dwfl_getmodules(s->dwfl, remember_module, &now, 0);
		bool taken = false;
		for (size_t j = 0; j < now.count; j++) {
			taken |= now.mods[j].low < m->end &&
				 m->start < now.mods[j].high;
			free(now.mods[j].name);
		}
		free(now.mods);
		if (taken)
			break;
		dwfl_report_begin_add(s->dwfl);
		reported = dwfl_report_module(s->dwfl, m->path, m->start,
					      m->end) != NULL;
		dwfl_report_end(s->dwfl, NULL, NULL);
		s->generation++;
	}
	return reported;
}

/* ---------------------------------------------------------- lifecycle */

/* Read the target's mappings again (a refresh of the address space) and
 * report its modules.  A target gone leaves the modules as the last
 * refresh that read them has them.  */
static int report(struct cp_symbols *s)
{
	int rc = cp_addrspace_refresh(s->space);
	if (rc == 0)
		update_creds(s);
	const struct cp_addrspace_view *view = cp_addrspace_view(s->space);
	if (view == s->view)
		cp_addrspace_view_release(view);
	else
		report_view(s, view);
	return rc;
}

static char *build_debuginfo_path(const struct cp_symbols_options *o)
{
	/* libdwfl's path: the module's own directory (empty entry), its
	 * .debug/ subdirectory, /usr/lib/debug; absolute entries are also
	 * searched for .build-id/.  Ours go first.  */
	size_t len = 64;
	for (size_t i = 0; i < o->n_debuginfo_dirs; i++)
		len += strlen(o->debuginfo_dirs[i]) + 1;
	char *path = malloc(len);
	if (!path)
		return NULL;
	path[0] = '\0';
	for (size_t i = 0; i < o->n_debuginfo_dirs; i++) {
		strcat(path, o->debuginfo_dirs[i]);
		strcat(path, ":");
	}
	strcat(path, ":.debug:/usr/lib/debug");
	return path;
}

int cp_symbols_new(pid_t pid, const struct cp_symbols_options *options,
		   struct cp_symbols **out)
{
	struct cp_addrspace *space;
	int rc = cp_addrspace_new(pid, &space);
	if (rc < 0)
		return rc;
	rc = cp_symbols_new_in(space, options, out);
	if (rc < 0)
		cp_addrspace_free(space);
	else
		(*out)->own_space = true;
	return rc;
}

int cp_symbols_new_in(struct cp_addrspace *space,
		      const struct cp_symbols_options *options,
		      struct cp_symbols **out)
{
	static const struct cp_symbols_options defaults;
	struct cp_symbols *s = calloc(1, sizeof(*s));
	if (!s)
		return -CP_E_NOMEM;
	s->pid = cp_addrspace_pid(space);
	s->space = space;
	s->options = options ? *options : defaults;
	s->strings = cp_profile_new();
	s->dirs = calloc(s->options.n_debuginfo_dirs + 1, sizeof(char *));
	if (!s->strings || !s->dirs) {
		cp_symbols_free(s);
		return -CP_E_NOMEM;
	}
	for (size_t i = 0; i < s->options.n_debuginfo_dirs; i++) {
		/* Absolute (libdwfl searches .build-id/ only under absolute
		 * entries) and without a trailing slash (joined with "/..."
		 * below).  */
		s->dirs[i] = realpath(s->options.debuginfo_dirs[i], NULL);
		if (!s->dirs[i] && errno != ENOMEM)
			s->dirs[i] = strdup(s->options.debuginfo_dirs[i]);
		if (!s->dirs[i]) {
			cp_symbols_free(s);
			return -CP_E_NOMEM;
		}
		size_t n = strlen(s->dirs[i]);
		while (n > 1 && s->dirs[i][n - 1] == '/')
			s->dirs[i][--n] = '\0';
	}
	s->options.debuginfo_dirs = (const char *const *)s->dirs;
	s->debuginfo_path = build_debuginfo_path(&s->options);
	if (!s->debuginfo_path) {
		cp_symbols_free(s);
		return -CP_E_NOMEM;
	}
	s->callbacks.find_elf = find_elf;
	s->callbacks.find_debuginfo = find_debuginfo;
	s->callbacks.debuginfo_path = &s->debuginfo_path;
	s->dwfl = dwfl_begin(&s->callbacks);
	if (!s->dwfl) {
		cp_symbols_free(s);
		return -CP_E_NOMEM;
	}
	/* The modules as the address space has them now.  */
	update_creds(s);
	report_view(s, cp_addrspace_view(s->space));
	s->reread_allowed = true;
	s->perfmap_allowed = true;
	*out = s;
	return 0;
}

void cp_symbols_free(struct cp_symbols *s)
{
	if (!s)
		return;
	if (s->dwfl)
		dwfl_end(s->dwfl);
	for (uint32_t i = 0; i < s->nsyms; i++)
		free(s->syms[i]);
	free(s->syms);
	cp_hashidx_free(&s->index);
	for (char **d = s->dirs; d && *d; d++)
		free(*d);
	free(s->dirs);
	for (size_t i = 0; i < s->nwarned; i++)
		free(s->warned[i]);
	free(s->warned);
	cp_perfmap_file_free(s->perfmap);
	for (size_t i = 0; i < s->nlazy; i++) {
		cp_dwlazy_free(s->lazy[i]->units);
		free(s->lazy[i]->name);
		free(s->lazy[i]);
	}
	free(s->lazy);
	for (size_t i = 0; i < s->nmodules; i++) {
		free_symtab(s->modules[i]->symtab);
		free(s->modules[i]);
	}
	free(s->modules);
	free(s->sym_generation);
	free(s->sym_epoch);
	for (size_t i = 0; i < s->nretired; i++)
		free(s->retired[i]);
	free(s->retired);
	cp_addrspace_view_release(s->view);
	if (s->own_space)
		cp_addrspace_free(s->space);
	cp_profile_free(s->strings);
	free(s->debuginfo_path);
	free(s);
}

/* ------------------------------------------------------------ perf map */

/* The name /tmp/perf-PID.map gives ADDRESS, or NULL.  The file is
 * brought up to date at most once per epoch (only what the JIT appended
 * is read) and only on this thread, never while the sampler holds a
 * thread of the target stopped for it.  */
static const char *perf_map_name(struct cp_symbols *s, uint64_t address)
{
	char path[64];
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)s->pid);
	if (!s->perfmap && cp_perfmap_file_new(path, &s->perfmap) < 0)
		return NULL;
	if (s->perfmap_allowed) {
		s->perfmap_allowed = false;
		const char *why;
		uid_t owner;
		update_creds(s);
		int rc = cp_perfmap_file_refresh(s->perfmap, creds(s), &why,
						 &owner);
		if (rc == -CP_E_PERM && owner != (uid_t)-1)
			warn(s, path,
			     "skipping the perf map %s: %s (owner uid %u); JIT frames stay unnamed",
			     path, why, (unsigned)owner);
		else if (rc == -CP_E_PERM)
			warn(s, path,
			     "skipping the perf map %s: %s; JIT frames stay unnamed",
			     path, why);
		else if (rc < 0)
			warn(s, path, "cannot read the perf map %s: %s", path,
			     rc == -CP_E_SYS ? strerror(errno) : cp_strerror(rc));
		struct cp_perfmap_stats stats;
		cp_perfmap_stats(cp_perfmap_file_table(s->perfmap), &stats);
		if (cp_perfmap_file_truncated(s->perfmap))
			warn(s, "perf map: too large",
			     "the perf map %s is larger than %u MiB: only its first %u MiB are read",
			     path, CP_PERFMAP_MAX_BYTES >> 20,
			     CP_PERFMAP_MAX_BYTES >> 20);
		if (stats.long_lines > 0)
			warn(s, "perf map: long lines",
			     "the perf map %s has lines longer than %d bytes: skipped",
			     path, CP_PERFMAP_MAX_LINE);
	}
	struct cp_perfmap_sym sym;
	if (!cp_perfmap_lookup(cp_perfmap_file_table(s->perfmap), address, &sym))
		return NULL;
	return intern(s, sym.name);
}

/* ------------------------------------------------------ symbol tables */

/* A module's function symbols sorted by address.  dwfl_module_addrinfo
 * scans the whole symbol table on every call (tens of thousands of
 * entries in a large program); this is built once per module and
 * searched in O(log n), as perf does.  */
struct sym_entry {
	uint64_t start, end;   /* end == start for a symbol without size */
	uint64_t limit;        /* without size: the end of its section */
	const char *name;      /* libelf's string table: lives with the Dwfl */
	int rank;              /* binding: GLOBAL 0, WEAK 1, LOCAL 2 */
};

struct symtab {
	struct sym_entry *entries;
	size_t count;
};

static int compare_entries(const void *a, const void *b)
{
	const struct sym_entry *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank - y->rank;
	/* sized before unsized, then the longer */
	return (y->end - y->start > x->end - x->start) -
	       (y->end - y->start < x->end - x->start);
}

static struct symtab *build_symtab(Dwfl_Module *mod)
{
	struct symtab *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	int nsyms = dwfl_module_getsymtab(mod);
	if (nsyms > 0)
		t->entries = malloc((size_t)nsyms * sizeof(*t->entries));
	for (int i = 0; t->entries && i < nsyms; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		Elf *elf = NULL;
		Dwarf_Addr bias = 0;
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr,
							   &shndx, &elf, &bias);
		int type = GELF_ST_TYPE(sym.st_info);
		if (!name || !*name || sym.st_shndx == SHN_UNDEF ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC &&
		     !(type == STT_NOTYPE && sym.st_size > 0)))
			continue;
		int bind = GELF_ST_BIND(sym.st_info);
		/* A symbol without size (_init, _fini, hand-written code)
		 * names at most the rest of its section, never what lies
		 * beyond.  */
		uint64_t limit = addr;
		GElf_Shdr shdr;
		Elf_Scn *scn = sym.st_size == 0 && elf ? elf_getscn(elf, shndx)
						       : NULL;
		if (scn && gelf_getshdr(scn, &shdr) &&
		    (shdr.sh_flags & SHF_ALLOC) &&
		    shdr.sh_addr + bias <= addr)
			limit = shdr.sh_addr + bias + shdr.sh_size;
		t->entries[t->count++] = (struct sym_entry){
			.start = addr,
			.end = addr + sym.st_size,
			.limit = limit,
			.name = name,
			.rank = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2,
		};
	}
	if (t->count > 1)
		qsort(t->entries, t->count, sizeof(*t->entries),
		      compare_entries);
	return t;
}

static void free_symtab(struct symtab *t)
{
	if (t) {
		free(t->entries);
		free(t);
	}
}

/* The name of the function containing ADDRESS in MOD, or NULL.  */
static const char *symtab_lookup(struct cp_symbols *s, Dwfl_Module *mod,
				 uint64_t address)
{
	void **userdata;
	dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
	struct module_data *md = module_data(s, userdata);
	if (!md)
		return NULL;
	if (!md->symtab)
		md->symtab = build_symtab(mod);
	struct symtab *t = md->symtab;
	if (!t)
		return NULL;
	/* The last symbol starting at or before ADDRESS...  */
	size_t lo = 0, hi = t->count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->entries[mid].start <= address)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	/* ...but the first (best-ranked) of those at that same address, and
	 * one whose extent holds ADDRESS: walk back over aliases and over
	 * small symbols nested in a larger one.  */
	uint64_t start = t->entries[lo - 1].start;
	size_t i = lo - 1;
	while (i > 0 && t->entries[i - 1].start == start)
		i--;
	for (size_t j = i; j < lo; j++)
		if (address < t->entries[j].end)
			return t->entries[j].name;
	for (size_t j = lo; j-- > 0 && lo - j < 64;)
		if (address < t->entries[j].end)
			return t->entries[j].name;
	/* No sized symbol holds it: an unsized one right before it (hand
	 * written assembly) is the best guess, as libdwfl would say, but
	 * only inside its section.  */
	return t->entries[i].end == t->entries[i].start &&
			       address < t->entries[i].limit
		       ? t->entries[i].name
		       : NULL;
}

/* -------------------------------------------------------------- lookup */

static const char *display_name(struct cp_symbols *s, const char *raw)
{
	/* Versioned dynamic symbols read "malloc@@GLIBC_2.2.5": the version
	 * is not part of the function's name.  */
	char plain[1024];
	size_t n = strcspn(raw, "@");
	if (n < sizeof(plain) && raw[n]) {
		memcpy(plain, raw, n);
		plain[n] = '\0';
		raw = plain;
	}
	if (!s->options.no_demangle) {
		char *demangled = cplus_demangle(raw, DMGL_PARAMS | DMGL_ANSI |
							      DMGL_AUTO);
		if (demangled) {
			const char *name = intern(s, demangled);
			free(demangled);
			if (name)
				return name;
		}
	}
	return intern(s, raw);
}

/* The name of a DWARF function DIE: its linkage name when it has one (so
 * C++ gets the full qualified name after demangling), else its name.  */
static const char *die_function_name(struct cp_symbols *s, Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *name = NULL;
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr))
		name = dwarf_formstring(&attr);
	if (!name)
		name = dwarf_diename(die);
	return name ? display_name(s, name) : NULL;
}

static const char *call_file(Dwarf_Die *cu, Dwarf_Die *inlined)
{
	Dwarf_Attribute attr;
	Dwarf_Word index;
	Dwarf_Files *files;
	size_t nfiles;
	if (!dwarf_attr(inlined, DW_AT_call_file, &attr) ||
	    dwarf_formudata(&attr, &index) != 0 ||
	    dwarf_getsrcfiles(cu, &files, &nfiles) != 0 || index >= nfiles)
		return NULL;
	return dwarf_filesrc(files, index, NULL, NULL);
}

static int call_line(Dwarf_Die *inlined)
{
	Dwarf_Attribute attr;
	Dwarf_Word line;
	if (!dwarf_attr(inlined, DW_AT_call_line, &attr) ||
	    dwarf_formudata(&attr, &line) != 0)
		return 0;
	return (int)line;
}

/* Fill FRAMES (innermost first) for ADDRESS in MOD from DWARF: one frame
 * per inlined call, then the function they are inlined into.  Returns
 * the number of frames, 0 without DWARF.  */
static size_t dwarf_frames(struct cp_symbols *s, Dwfl_Module *mod,
			   uint64_t address, const char *elf_name,
			   struct cp_frame *frames)
{
	Dwarf_Addr bias;
	Dwarf_Die *cu = dwfl_module_addrdie(mod, address, &bias);
	if (!cu)
		return 0;
	const char *file = NULL;
	int line = 0;
	Dwfl_Line *src = dwfl_module_getsrc(mod, address);
	if (src) {
		file = dwfl_lineinfo(src, NULL, &line, NULL, NULL, NULL);
	}
	/* The innermost function-like scope at the address...  */
	Dwarf_Die *scopes = NULL;
	int nscopes = dwarf_getscopes(cu, address - bias, &scopes);
	Dwarf_Die die;
	bool found = false;
	for (int i = 0; i < nscopes && !found; i++) {
		int tag = dwarf_tag(&scopes[i]);
		if (tag == DW_TAG_inlined_subroutine ||
		    tag == DW_TAG_subprogram) {
			die = scopes[i];
			found = true;
		}
	}
	free(scopes);
	/* ...then outwards: the scopes around an inlined instance lead to
	 * the function it was inlined into (dwarf_getscopes_die), as
	 * eu-stack walks them.  */
	size_t n = 0;
	while (found && n < MAX_INLINE) {
		if (dwarf_tag(&die) == DW_TAG_subprogram) {
			/* The symbol table's name of the real function agrees
			 * with perf and gdb; DWARF's is the fallback.  */
			const char *name = elf_name ? display_name(s, elf_name)
						    : die_function_name(s, &die);
			frames[n++] = (struct cp_frame){
				.function = name ? name : "[unknown]",
				.file = file ? intern(s, file) : NULL,
				.line = line,
				.named = name != NULL,
			};
			break;
		}
		const char *name = die_function_name(s, &die);
		frames[n++] = (struct cp_frame){
			.function = name ? name : "[inlined]",
			.file = file ? intern(s, file) : NULL,
			.line = line,
			.inlined = true,
			.named = name != NULL,
		};
		/* The caller's position is where this call was inlined.  */
		file = call_file(cu, &die);
		line = call_line(&die);
		nscopes = dwarf_getscopes_die(&die, &scopes);
		found = false;
		for (int i = 1; i < nscopes && !found; i++) {
			int tag = dwarf_tag(&scopes[i]);
			if (tag == DW_TAG_inlined_subroutine ||
			    tag == DW_TAG_subprogram) {
				die = scopes[i];
				found = true;
			}
		}
		free(scopes);
	}
	if (n > 0 && !frames[n - 1].inlined)
		return n;
	/* No enclosing subprogram found: not a usable DWARF answer.  */
	return 0;
}

static void hex(const unsigned char *bytes, int len, char *out, size_t size)
{
	out[0] = '\0';
	for (int i = 0; i < len && (size_t)(2 * i + 2) < size; i++)
		snprintf(out + 2 * i, 3, "%02x", bytes[i]);
}

static struct cp_symbol *new_symbol(uint64_t address, size_t nframes)
{
	struct cp_symbol *sym =
		calloc(1, sizeof(*sym) + nframes * sizeof(struct cp_frame));
	if (sym) {
		sym->address = address;
		sym->nframes = nframes;
		sym->frames = (struct cp_frame *)(sym + 1);
	}
	return sym;
}

/* Is ADDRESS in memory no file backs (JIT code), as far as the last read
 * of the mappings knows?  */
static bool anonymous_code(const struct cp_symbols *s, uint64_t address)
{
	const struct cp_map *m = cp_maps_find(s->view->maps, address);
	return m && m->path[0] != '/' && m->path[0] != '[' && m->executable;
}

static bool reopen_module(struct cp_symbols *s, Dwfl_Module *mod);

/* Before a lookup of ADDRESS in MOD: when MOD's debug file is read by
 * compile unit and the unit of ADDRESS is not in its image yet, a new
 * image with it (or, past LAZY_MAX_IMAGES, the file itself) and the
 * module opened again on it.  Returns the module of ADDRESS then.  */
static Dwfl_Module *lazy_prepare(struct cp_symbols *s, Dwfl_Module *mod,
				 uint64_t address)
{
	Dwarf_Addr bias = 0;
	if (!dwfl_module_getdwarf(mod, &bias))
		return mod;
	void **userdata;
	dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
	struct module_data *md = *userdata;
	struct lazy_file *lf = md ? md->lazy : NULL;
	if (!lf || lf->whole)
		return mod;
	int64_t unit = cp_dwlazy_unit(lf->units, address - bias);
	if (unit < 0 || cp_dwlazy_has(lf->units, (uint64_t)unit))
		return mod;
	uint64_t units, images;
	cp_dwlazy_stats(lf->units, &units, &images);
	if (images >= LAZY_MAX_IMAGES ||
	    cp_dwlazy_add(lf->units, (uint64_t)unit) < 0)
		lf->whole = true;
	if (!reopen_module(s, mod))
		return mod;
	Dwfl_Module *again = dwfl_addrmodule(s->dwfl, address);
	return again ? again : mod;
}

static struct cp_symbol *resolve(struct cp_symbols *s, uint64_t address)
{
	/* JIT code first: whatever module range it may seem to lie in, a
	 * perf map names anonymous executable memory.  */
	const char *jit = anonymous_code(s, address)
				  ? perf_map_name(s, address)
				  : NULL;
	if (jit) {
		struct cp_symbol *sym = new_symbol(address, 1);
		if (sym)
			((struct cp_frame *)sym->frames)[0] = (struct cp_frame){
				.function = jit, .named = true};
		return sym;
	}
	Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, address);
	if (!mod && s->reread_allowed) {
		/* A library loaded after we read the mappings, or JIT code
		 * that appeared since.  */
		s->reread_allowed = false;
		s->rereads++;
		report(s);
		mod = dwfl_addrmodule(s->dwfl, address);
	}
	if (!mod && report_captured(s, address))
		mod = dwfl_addrmodule(s->dwfl, address);
	struct cp_frame frames[MAX_INLINE];
	size_t n = 0;
	const char *module = NULL, *module_path = NULL, *build_id = NULL;
	uint64_t module_offset = 0, module_start = 0, module_end = 0;
	if (mod && s->lazy_dwarf && !s->options.no_dwarf)
		mod = lazy_prepare(s, mod, address);
	if (mod) {
		void **userdata;
		dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL,
				 NULL);
		struct module_data *md = module_data(s, userdata);
		if (md)
			md->read = md->used = true;
		Dwarf_Addr bias = 0;
		dwfl_module_getelf(mod, &bias);
		const char *path = dwfl_module_info(mod, NULL, NULL, NULL, NULL,
						    NULL, NULL, NULL);
		if (path) {
			const char *base = strrchr(path, '/');
			module_path = intern(s, path);
			/* "libfoo.so (deleted)": the file is gone, the module
			 * is still libfoo.so.  */
			char name[256];
			snprintf(name, sizeof(name), "%s", base ? base + 1 : path);
			size_t len = strlen(name);
			if (len > 10 && strcmp(name + len - 10, " (deleted)") == 0)
				name[len - 10] = '\0';
			module = intern(s, name);
		}
		module_offset = address - bias;
		Dwarf_Addr start = 0, end = 0;
		dwfl_module_info(mod, NULL, &start, &end, NULL, NULL, NULL, NULL);
		module_start = start;
		module_end = end;
		const unsigned char *id_bits;
		GElf_Addr id_vaddr;
		int id_len = dwfl_module_build_id(mod, &id_bits, &id_vaddr);
		if (id_len > 0) {
			char hexid[129];
			hex(id_bits, id_len, hexid, sizeof(hexid));
			build_id = intern(s, hexid);
		}
		const char *fn = symtab_lookup(s, mod, address);
		n = s->options.no_dwarf
			    ? 0
			    : dwarf_frames(s, mod, address, fn, frames);
		if (n == 0) {
			const char *name = fn ? display_name(s, fn) : NULL;
			if (!name && module) {
				char buf[1024];
				snprintf(buf, sizeof(buf), "%s+0x%" PRIx64,
					 module, module_offset);
				name = intern(s, buf);
			}
			frames[0] = (struct cp_frame){
				.function = name ? name : "[unknown]",
				.named = fn != NULL,
			};
			n = 1;
		}
	} else {
		jit = perf_map_name(s, address);
		frames[0] = (struct cp_frame){
			.function = jit ? jit : "[unknown]",
			.named = jit != NULL,
		};
		n = 1;
	}
	struct cp_symbol *sym = new_symbol(address, n);
	if (!sym)
		return NULL;
	sym->module = module;
	sym->module_path = module_path;
	sym->module_offset = module_offset;
	sym->module_start = module_start;
	sym->module_end = module_end;
	sym->build_id = build_id;
	memcpy((struct cp_frame *)sym->frames, frames, n * sizeof(*frames));
	return sym;
}

static const struct cp_symbol unknown_symbol = {
	.nframes = 1,
	.frames = (const struct cp_frame[]){{.function = "[unknown]"}},
};

struct addr_key {
	const struct cp_symbols *s;
	uint64_t address;
};

static bool addr_eq(const void *ctx, uint32_t id)
{
	const struct addr_key *k = ctx;
	return k->s->syms[id]->address == k->address;
}

bool cp_symbols_unknown(const struct cp_symbol *sym)
{
	return !sym->module && !sym->frames[0].named;
}

/* Keep the answer SYM for ID (a new address when ID is NSYMS).  An earlier
 * unknown answer it replaces stays allocated for its borrowers.  */
static bool store(struct cp_symbols *s, uint32_t id, uint64_t hash,
		  struct cp_symbol *sym)
{
	if (id < s->nsyms) {
		struct cp_symbol **grown = realloc(
			s->retired, (s->nretired + 1) * sizeof(*grown));
		if (!grown)
			return false;
		s->retired = grown;
		s->retired[s->nretired++] = s->syms[id];
	} else {
		if (s->nsyms == s->syms_cap) {
			uint32_t cap = s->syms_cap ? s->syms_cap * 2 : 1024;
			struct cp_symbol **grown =
				realloc(s->syms, cap * sizeof(*grown));
			uint64_t *gens = realloc(s->sym_generation,
						 cap * sizeof(*gens));
			if (gens)
				s->sym_generation = gens;
			uint64_t *epochs =
				realloc(s->sym_epoch, cap * sizeof(*epochs));
			if (epochs)
				s->sym_epoch = epochs;
			if (grown)
				s->syms = grown;
			if (!grown || !gens || !epochs)
				return false;
			s->syms_cap = cap;
		}
		if (!cp_hashidx_insert(&s->index, hash, s->nsyms))
			return false;
		s->nsyms++;
	}
	s->syms[id] = sym;
	s->sym_generation[id] = s->generation;
	s->sym_epoch[id] = s->epoch;
	return true;
}

const struct cp_symbol *cp_symbols_lookup(struct cp_symbols *s,
					  uint64_t address)
{
	uint64_t hash = cp_hash_u64(address);
	struct addr_key key = {s, address};
	uint32_t id = cp_hashidx_find(&s->index, hash, addr_eq, &key);
	if (id != UINT32_MAX) {
		/* An unknown answer is asked again once the modules changed,
		 * or in a later epoch (which may re-read the mappings).  */
		if (!cp_symbols_unknown(s->syms[id]) ||
		    (s->sym_generation[id] == s->generation &&
		     s->sym_epoch[id] == s->epoch)) {
			s->hits++;
			return s->syms[id];
		}
	} else {
		id = s->nsyms;
	}
	s->lookups++;
	current = s;
	bool own_pending = s->pending == NULL;
	if (own_pending) {
		s->pending = &address;
		s->npending = 1;
	}
	struct cp_symbol *sym = resolve(s, address);
	if (own_pending) {
		s->pending = NULL;
		s->npending = 0;
	}
	current = NULL;
	if (!sym)
		return id < s->nsyms ? s->syms[id] : &unknown_symbol;
	if (id < s->nsyms && cp_symbols_unknown(sym)) {
		/* Still unknown: the old answer will do.  */
		free(sym);
		s->sym_generation[id] = s->generation;
		s->sym_epoch[id] = s->epoch;
		return s->syms[id];
	}
	if (!store(s, id, hash, sym)) {
		free(sym);
		return id < s->nsyms ? s->syms[id] : &unknown_symbol;
	}
	return sym;
}

void cp_symbols_new_epoch(struct cp_symbols *s)
{
	s->epoch++;
	s->reread_allowed = true;
	s->perfmap_allowed = true;
}

void cp_symbols_refresh(struct cp_symbols *s)
{
	/* After an exec every address means something else: forget them
	 * (the symbols themselves stay allocated for earlier borrowers).  */
	cp_hashidx_free(&s->index);
	s->rereads++;
	report(s);
}

/* Open the modules of ALL that have an MD again: left out of a report,
 * a module goes, with everything libdwfl read for it (dwfl_report_end
 * frees it: its Elf handles, its Dwarf and the sections it
 * decompressed); reported again at once, it is a new module whose files
 * are opened when a lookup needs them, by the same callbacks, so they
 * give the same answers.  */
static void reopen(struct cp_symbols *s, struct old_modules *all)
{
	struct cp_symbols *was = current;
	current = s;
	dwfl_report_begin(s->dwfl);
	for (size_t j = 0; j < all->count; j++)
		if (!all->mods[j].md)
			dwfl_report_module(s->dwfl, all->mods[j].name,
					   all->mods[j].low, all->mods[j].high);
	dwfl_report_end(s->dwfl, NULL, NULL);
	/* Every module reported again, in order, as report_view does: the
	 * others are kept as they are, and libdwfl's table of addresses is
	 * the one a report of the same modules makes (added after the
	 * others, an address past the last module found none where it
	 * found the last module before).  */
	dwfl_report_begin(s->dwfl);
	for (size_t j = 0; j < all->count; j++) {
		dwfl_report_module(s->dwfl, all->mods[j].name,
				   all->mods[j].low, all->mods[j].high);
		struct module_data *md = all->mods[j].md;
		if (!md)
			continue;
		/* Its names pointed into the Elf just freed; the answers
		 * given kept copies (interned).  */
		free_symtab(md->symtab);
		md->symtab = NULL;
		md->read = false;
	}
	dwfl_report_end(s->dwfl, NULL, NULL);
	current = was;
}

static void free_old(struct old_modules *all)
{
	for (size_t j = 0; j < all->count; j++)
		free(all->mods[j].name);
	free(all->mods);
}

size_t cp_symbols_release(struct cp_symbols *s)
{
	struct old_modules all = {0};
	if (dwfl_getmodules(s->dwfl, remember_module, &all, 0) != 0) {
		/* Out of memory: keep everything.  */
		free_old(&all);
		return 0;
	}
	size_t nreleased = 0;
	for (size_t j = 0; j < all.count; j++) {
		struct module_data *md = all.mods[j].md;
		/* Kept: the modules in use; given up: the others.  */
		if (md && !md->used && md->read) {
			nreleased++;
			continue;
		}
		if (md)
			md->used = false;
		all.mods[j].md = NULL;  /* reported as it is */
	}
	if (nreleased > 0) {
		reopen(s, &all);
		s->released += nreleased;
	}
	free_old(&all);
	return nreleased;
}

/* Open MOD again (its debug file's image changed, or it is to be read
 * whole).  False when out of memory.  */
static bool reopen_module(struct cp_symbols *s, Dwfl_Module *mod)
{
	struct old_modules all = {0};
	if (dwfl_getmodules(s->dwfl, remember_module, &all, 0) != 0) {
		free_old(&all);
		return false;
	}
	Dwarf_Addr low = 0;
	dwfl_module_info(mod, NULL, &low, NULL, NULL, NULL, NULL, NULL);
	bool found = false;
	for (size_t j = 0; j < all.count; j++) {
		if (all.mods[j].low == low && all.mods[j].md && !found)
			found = true;
		else
			all.mods[j].md = NULL;
	}
	if (found)
		reopen(s, &all);
	free_old(&all);
	return found;
}

void cp_symbols_read_stats(const struct cp_symbols *s, size_t *read,
			   uint64_t *released)
{
	size_t n = 0;
	for (size_t i = 0; i < s->nmodules; i++)
		n += s->modules[i]->read;
	*read = n;
	*released = s->released;
}

void cp_symbols_stats(const struct cp_symbols *s, uint64_t *lookups,
		      uint64_t *hits, uint64_t *rereads)
{
	*lookups = s->lookups;
	*hits = s->hits;
	*rereads = s->rereads;
}

uint64_t cp_symbols_generation(const struct cp_symbols *s)
{
	return s->generation;
}

int cp_symbols_capture(struct cp_symbols *s)
{
	return cp_addrspace_capture(s->space);
}

struct cp_addrspace *cp_symbols_addrspace(const struct cp_symbols *s)
{
	return s->space;
}

bool cp_symbols_capture_has(struct cp_symbols *s, uint64_t address)
{
	return cp_addrspace_captured(s->space, address);
}

/* ------------------------------------------ for lookup.c (symbols_int.h) */

Dwfl *cp_symbols_dwfl_begin(struct cp_symbols *s)
{
	/* lookup.c walks every unit of a module: its debug files whole.  */
	if (s->lazy_dwarf)
		cp_symbols_set_lazy(s, false);
	current = s;
	report(s);
	return s->dwfl;
}

void cp_symbols_set_lazy(struct cp_symbols *s, bool lazy)
{
	s->lazy_dwarf = lazy;
	if (lazy)
		return;
	struct old_modules all = {0};
	if (dwfl_getmodules(s->dwfl, remember_module, &all, 0) == 0) {
		bool any = false;
		for (size_t j = 0; j < all.count; j++) {
			struct module_data *md = all.mods[j].md;
			if (md && md->lazy && !md->lazy->whole)
				any = true;
			else
				all.mods[j].md = NULL;
		}
		for (size_t i = 0; i < s->nlazy; i++)
			s->lazy[i]->whole = true;
		if (any)
			reopen(s, &all);
	}
	free_old(&all);
}

void cp_symbols_prefetch(struct cp_symbols *s, const uint64_t *addresses,
			 size_t n)
{
	if (!s->lazy_dwarf || s->options.no_dwarf || n == 0)
		return;
	current = s;
	s->pending = addresses;
	s->npending = n;
	/* Each module's debug file opened (its first image with the units
	 * of all of ADDRESSES in it), then the units its image lacks added,
	 * and each such module opened again once.  */
	Dwfl_Module **reopen_mods = NULL;
	size_t nreopen = 0;
	for (size_t i = 0; i < n; i++) {
		Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, addresses[i]);
		Dwarf_Addr bias = 0;
		if (!mod || !dwfl_module_getdwarf(mod, &bias))
			continue;
		void **userdata;
		dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL,
				 NULL);
		struct module_data *md = *userdata;
		struct lazy_file *lf = md ? md->lazy : NULL;
		if (!lf || lf->whole)
			continue;
		int64_t unit = cp_dwlazy_unit(lf->units, addresses[i] - bias);
		if (unit < 0 || cp_dwlazy_has(lf->units, (uint64_t)unit))
			continue;
		uint64_t units, images;
		cp_dwlazy_stats(lf->units, &units, &images);
		if (images >= LAZY_MAX_IMAGES ||
		    cp_dwlazy_add(lf->units, (uint64_t)unit) < 0)
			lf->whole = true;
		bool listed = false;
		for (size_t j = 0; j < nreopen && !listed; j++)
			listed = reopen_mods[j] == mod;
		Dwfl_Module **grown = listed ? reopen_mods
				      : realloc(reopen_mods,
						(nreopen + 1) * sizeof(*grown));
		if (grown && !listed) {
			reopen_mods = grown;
			reopen_mods[nreopen++] = mod;
		}
	}
	/* Opened again after the loop: a module opened again is a new
	 * Dwfl_Module, and the pointers listed would go stale.  */
	for (size_t j = 0; j < nreopen; j++) {
		Dwarf_Addr low = 0;
		dwfl_module_info(reopen_mods[j], NULL, &low, NULL, NULL, NULL,
				 NULL, NULL);
		Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, low);
		if (mod)
			reopen_module(s, mod);
	}
	free(reopen_mods);
	s->pending = NULL;
	s->npending = 0;
	current = NULL;
}

void cp_symbols_lazy_stats(const struct cp_symbols *s, uint64_t *units,
			   uint64_t *images, size_t *whole)
{
	*units = *images = 0;
	*whole = 0;
	for (size_t i = 0; i < s->nlazy; i++) {
		uint64_t u = 0, n = 0;
		if (s->lazy[i]->units)
			cp_dwlazy_stats(s->lazy[i]->units, &u, &n);
		*units += u;
		*images += n;
		*whole += s->lazy[i]->whole;
	}
}

void cp_symbols_dwfl_end(struct cp_symbols *s)
{
	(void)s;
	current = NULL;
}

const char *cp_symbols_display_name(struct cp_symbols *s, const char *raw)
{
	return display_name(s, raw);
}
