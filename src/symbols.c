/* Symbolization with libdwfl: address -> module, function, inlined calls,
 * source position; JIT code through the target's perf map.
 *
 * Debug information is looked for the way gdb and eu-stack do (the module
 * itself, .gnu_debuglink with its CRC, build-id directories, debuginfod
 * when DEBUGINFOD_URLS is set), with the user's --debuginfo-dir
 * directories first.  Every file whose name the target controls (module
 * paths, the directories beside them, debuglink names, /tmp/perf-PID.map)
 * is opened by the rules of cprof/tpath.h, never by libdwfl's own
 * callbacks: the search is modfiles.c's, the perf map perfmap.c's.  */
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cprof/error.h"
#include "cprof/perfmap.h"
#include "cprof/procfs.h"
#include "cprof/profile.h"
#include "cprof/tpath.h"
#include "hashidx.h"
#include "modfiles.h"

#define MAX_INLINE 32

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
	struct cp_maps *maps;        /* for /proc/PID/map_files */
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
};

struct symtab;
static void free_symtab(struct symtab *t);

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
	bool have_file;              /* DEV and INO are the main file's */
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
		.maps = s->maps,
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
		struct cp_modfiles mf = modfiles(s);
		struct stat st;
		int fd = cp_modfiles_open_module(&mf, modname, &st, file_name);
		if (fd >= 0) {
			md->have_file = true;
			md->dev = st.st_dev;
			md->ino = st.st_ino;
		}
		return fd;
	}
	/* The vDSO ("[vdso: PID]"): read from the target's memory.  */
	if (strncmp(modname, "[vdso: ", 7) == 0)
		return dwfl_linux_proc_find_elf(mod, userdata, modname, base,
						file_name, elfp);
	return -1;
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
	return cp_modfiles_find_debuginfo(&mf, mod, userdata, modname, base,
					  debuglink_file, debuglink_crc,
					  md && md->have_file ? &main : NULL,
					  debuginfo_file_name);
}

/* ---------------------------------------------------------- lifecycle */

static int report(struct cp_symbols *s)
{
	struct cp_maps *fresh;
	if (cp_maps_read(s->pid, &fresh) == 0) {
		cp_maps_free(s->maps);
		s->maps = fresh;
	}
	update_creds(s);
	/* Called inside a lookup too (a re-read): leave CURRENT as it was. */
	struct cp_symbols *outer = current;
	current = s;
	dwfl_report_begin(s->dwfl);
	int rc = dwfl_linux_proc_report(s->dwfl, s->pid);
	dwfl_report_end(s->dwfl, NULL, NULL);
	current = outer;
	if (rc != 0)
		return rc == ENOENT || rc == ESRCH ? -CP_E_NOPROC : -CP_E_SYS;
	return 0;
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
	static const struct cp_symbols_options defaults;
	struct cp_symbols *s = calloc(1, sizeof(*s));
	if (!s)
		return -CP_E_NOMEM;
	s->pid = pid;
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
	int rc = report(s);
	if (rc < 0) {
		cp_symbols_free(s);
		return rc;
	}
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
	for (size_t i = 0; i < s->nmodules; i++) {
		free_symtab(s->modules[i]->symtab);
		free(s->modules[i]);
	}
	free(s->modules);
	cp_maps_free(s->maps);
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
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr,
							   &shndx, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info);
		if (!name || !*name || sym.st_shndx == SHN_UNDEF ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC &&
		     !(type == STT_NOTYPE && sym.st_size > 0)))
			continue;
		int bind = GELF_ST_BIND(sym.st_info);
		t->entries[t->count++] = (struct sym_entry){
			.start = addr,
			.end = addr + sym.st_size,
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
	 * written assembly) is the best guess, as libdwfl would say.  */
	return t->entries[i].end == t->entries[i].start ? t->entries[i].name
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

static struct cp_symbol *resolve(struct cp_symbols *s, uint64_t address)
{
	Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, address);
	if (!mod && s->reread_allowed) {
		/* A library loaded after we read the mappings, or JIT code
		 * that appeared since.  */
		s->reread_allowed = false;
		s->rereads++;
		report(s);
		mod = dwfl_addrmodule(s->dwfl, address);
	}
	struct cp_frame frames[MAX_INLINE];
	size_t n = 0;
	const char *module = NULL, *module_path = NULL, *build_id = NULL;
	uint64_t module_offset = 0, module_start = 0, module_end = 0;
	if (mod) {
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
		const char *jit = perf_map_name(s, address);
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

const struct cp_symbol *cp_symbols_lookup(struct cp_symbols *s,
					  uint64_t address)
{
	uint64_t hash = cp_hash_u64(address);
	struct addr_key key = {s, address};
	uint32_t id = cp_hashidx_find(&s->index, hash, addr_eq, &key);
	if (id != UINT32_MAX) {
		s->hits++;
		return s->syms[id];
	}
	s->lookups++;
	current = s;
	struct cp_symbol *sym = resolve(s, address);
	current = NULL;
	if (!sym)
		return &unknown_symbol;
	if (s->nsyms == s->syms_cap) {
		uint32_t cap = s->syms_cap ? s->syms_cap * 2 : 1024;
		struct cp_symbol **grown = realloc(s->syms, cap * sizeof(*grown));
		if (!grown)
			goto fail;
		s->syms = grown;
		s->syms_cap = cap;
	}
	if (!cp_hashidx_insert(&s->index, hash, s->nsyms))
		goto fail;
	s->syms[s->nsyms++] = sym;
	return sym;
fail:
	free(sym);
	return &unknown_symbol;
}

void cp_symbols_new_epoch(struct cp_symbols *s)
{
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

void cp_symbols_stats(const struct cp_symbols *s, uint64_t *lookups,
		      uint64_t *hits, uint64_t *rereads)
{
	*lookups = s->lookups;
	*hits = s->hits;
	*rereads = s->rereads;
}
