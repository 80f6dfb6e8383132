/* Symbolization with libdwfl: address -> module, function, inlined calls,
 * source position.
 *
 * Debug information is looked for the way gdb and eu-stack do (libdwfl's
 * standard search: the module itself, .gnu_debuglink with its CRC, build-id
 * directories, debuginfod when DEBUGINFOD_URLS is set), with the user's
 * --debuginfo-dir directories first.  Files are opened through /proc when
 * the path the target loaded no longer leads to the same file.  */
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
#include "cprof/procfs.h"
#include "cprof/profile.h"
#include "hashidx.h"

#define MAX_INLINE 32

/* One line of a JIT's /tmp/perf-PID.map.  */
struct perf_sym {
	uint64_t start, end;
	uint32_t name; /* string id */
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
	struct cp_maps *maps;        /* for /proc/PID/map_files */
	bool other_mount_ns;         /* read files through /proc/PID/root */
	bool reread_allowed;         /* one maps re-read per epoch */
	struct perf_sym *perf_syms;  /* sorted by start */
	size_t nperf_syms;
	struct timespec perf_mtime;  /* of the perf map last read */
	uint64_t lookups, hits, rereads;
	struct symtab **symtabs;     /* built per module, freed at the end */
	size_t nsymtabs;
	char **warned;               /* debug files already warned about */
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

/* The mapping of PATH at file offset 0, for /proc/PID/map_files.  */
static const struct cp_map *first_mapping(struct cp_symbols *s,
					  const char *path)
{
	if (!s->maps)
		return NULL;
	size_t len = strlen(path);
	for (size_t i = 0; i < s->maps->count; i++) {
		const struct cp_map *m = &s->maps->maps[i];
		if (m->offset == 0 && strncmp(m->path, path, len) == 0 &&
		    (m->path[len] == '\0' ||
		     strcmp(m->path + len, " (deleted)") == 0))
			return m;
	}
	return NULL;
}

/* Open the file the target really has mapped as MODNAME.  The path may
 * lead elsewhere now: the file was deleted or replaced (an upgrade), or
 * the target lives in another mount namespace (a container).  */
static int open_module_file(struct cp_symbols *s, const char *modname,
			    char **file_name)
{
	char path[4096];
	const struct cp_map *m = first_mapping(s, modname);
	struct stat st;
	if (s->other_mount_ns)
		snprintf(path, sizeof(path), "/proc/%d/root%s", (int)s->pid,
			 modname);
	else
		snprintf(path, sizeof(path), "%s", modname);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool same = fd >= 0 && fstat(fd, &st) == 0 &&
		    (!m || (uint64_t)st.st_ino == m->inode);
	if (!same && m) {
		/* The kernel still holds the mapped file: read it from
		 * there.  */
		if (fd >= 0)
			close(fd);
		snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64,
			 (int)s->pid, m->start, m->end);
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (fd >= 0)
		*file_name = strdup(path);
	return fd;
}

static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname,
		    Dwarf_Addr base, char **file_name, Elf **elfp)
{
	struct cp_symbols *s = current;
	if (s && modname[0] == '/') {
		int fd = open_module_file(s, modname, file_name);
		if (fd >= 0)
			return fd;
	}
	return dwfl_linux_proc_find_elf(mod, userdata, modname, base,
					file_name, elfp);
}

/* -------------------------------------------------------- debug files */

/* Is FD a whole, readable ELF file?  A truncated or corrupt debug file
 * must not take the module's symbols down with it.  */
static const char *elf_problem(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return "cannot stat";
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return "not an ELF file";
	const char *problem = NULL;
	size_t nsections;
	GElf_Ehdr ehdr;
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr)) {
		problem = "not an ELF file";
	} else if (elf_getshdrnum(elf, &nsections) != 0 ||
		   ehdr.e_shoff + (uint64_t)nsections * ehdr.e_shentsize >
			   (uint64_t)st.st_size) {
		problem = "truncated (section headers past the end)";
	} else {
		for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh)) {
				problem = "unreadable section header";
				break;
			}
			if (sh.sh_type != SHT_NOBITS &&
			    sh.sh_offset + sh.sh_size > (uint64_t)st.st_size) {
				problem = "truncated (a section runs past the end)";
				break;
			}
		}
	}
	elf_end(elf);
	return problem;
}

static void hex(const unsigned char *bytes, int len, char *out, size_t size)
{
	out[0] = '\0';
	for (int i = 0; i < len && (size_t)(2 * i + 2) < size; i++)
		snprintf(out + 2 * i, 3, "%02x", bytes[i]);
}

/* The build-id note of the ELF file at PATH into BUF (hex); false when it
 * has none or cannot be read.  */
static bool file_build_id(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	const void *id = NULL;
	ssize_t len = elf ? dwelf_elf_gnu_build_id(elf, &id) : -1;
	if (len > 0)
		hex(id, (int)len, buf, size);
	if (elf)
		elf_end(elf);
	close(fd);
	return len > 0;
}

/* libdwfl rejects a .gnu_debuglink file whose CRC does not match without a
 * word.  A user who put a debug file of another build in the way wants to
 * know: look where the search looked and name the file that was skipped. */
static void explain_missing_debuginfo(struct cp_symbols *s, Dwfl_Module *mod,
				      const char *file_name,
				      const char *debuglink)
{
	if (!debuglink || !file_name)
		return;
	const unsigned char *bits;
	GElf_Addr vaddr;
	int len = dwfl_module_build_id(mod, &bits, &vaddr);
	if (len <= 0)
		return;
	char module_id[128];
	hex(bits, len, module_id, sizeof(module_id));
	const char *slash = strrchr(file_name, '/');
	char dir[2048];
	snprintf(dir, sizeof(dir), "%.*s",
		 slash ? (int)(slash - file_name) : 1, slash ? file_name : ".");
	char candidates[8][4096];
	size_t n = 0;
	for (char **d = s->dirs; d && *d && n < 6; d++) {
		snprintf(candidates[n++], sizeof(candidates[0]), "%s%s/%s", *d,
			 dir, debuglink);
		snprintf(candidates[n++], sizeof(candidates[0]), "%s/%s", *d,
			 debuglink);
	}
	snprintf(candidates[n++], sizeof(candidates[0]), "%s/%s", dir, debuglink);
	snprintf(candidates[n++], sizeof(candidates[0]), "%s/.debug/%s", dir,
		 debuglink);
	for (size_t i = 0; i < n; i++) {
		char id[128];
		if (access(candidates[i], R_OK) != 0 ||
		    strcmp(candidates[i], file_name) == 0)
			continue;
		if (!file_build_id(candidates[i], id, sizeof(id))) {
			warn(s, candidates[i],
			     "debug file %s for %s is not usable (no build-id, CRC does not match): ignored",
			     candidates[i], file_name);
		} else if (strcmp(id, module_id) != 0) {
			warn(s, candidates[i],
			     "debug file %s (build-id %s) does not match %s (build-id %s): ignored",
			     candidates[i], id, file_name, module_id);
		}
		return;
	}
}

static int find_debuginfo(Dwfl_Module *mod, void **userdata,
			  const char *modname, GElf_Addr base,
			  const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	struct cp_symbols *s = current;
	int fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base,
					      file_name, debuglink_file,
					      debuglink_crc,
					      debuginfo_file_name);
	if (!s)
		return fd;
	if (fd < 0) {
		explain_missing_debuginfo(s, mod, file_name, debuglink_file);
		return fd;
	}
	const char *problem = elf_problem(fd);
	if (problem) {
		const char *path = *debuginfo_file_name ? *debuginfo_file_name
							: "(unnamed)";
		warn(s, path, "skipping corrupt debug file %s for %s: %s",
		     path, modname, problem);
		close(fd);
		free(*debuginfo_file_name);
		*debuginfo_file_name = NULL;
		errno = ENOENT;
		return -1;
	}
	return fd;
}

/* ---------------------------------------------------------- lifecycle */

static int report(struct cp_symbols *s)
{
	struct cp_maps *fresh;
	if (cp_maps_read(s->pid, &fresh) == 0) {
		cp_maps_free(s->maps);
		s->maps = fresh;
	}
	current = s;
	dwfl_report_begin(s->dwfl);
	int rc = dwfl_linux_proc_report(s->dwfl, s->pid);
	dwfl_report_end(s->dwfl, NULL, NULL);
	current = NULL;
	if (rc != 0)
		return rc == ENOENT || rc == ESRCH ? -CP_E_NOPROC : -CP_E_SYS;
	return 0;
}

static bool same_mount_ns(pid_t pid)
{
	char path[64];
	struct stat ours, theirs;
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	if (stat("/proc/self/ns/mnt", &ours) != 0 || stat(path, &theirs) != 0)
		return true;
	return ours.st_ino == theirs.st_ino && ours.st_dev == theirs.st_dev;
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
	s->other_mount_ns = !same_mount_ns(pid);
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
	free(s->perf_syms);
	for (size_t i = 0; i < s->nsymtabs; i++)
		free_symtab(s->symtabs[i]);
	free(s->symtabs);
	cp_maps_free(s->maps);
	cp_profile_free(s->strings);
	free(s->debuginfo_path);
	free(s);
}

/* ------------------------------------------------------------ perf map */

static int compare_perf(const void *a, const void *b)
{
	const struct perf_sym *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* (Re)read /tmp/perf-PID.map when it changed: "START SIZE name" lines, hex,
 * written by JITs (V8, the JVM with perf-map-agent, LuaJIT, ...).  */
static void load_perf_map(struct cp_symbols *s)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)s->pid);
	if (stat(path, &st) != 0)
		return;
	if (st.st_mtim.tv_sec == s->perf_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == s->perf_mtime.tv_nsec)
		return;
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	s->perf_mtime = st.st_mtim;
	s->nperf_syms = 0;
	size_t cap = 0;
	char *line = NULL;
	size_t line_cap = 0;
	while (getline(&line, &line_cap, f) > 0) {
		char *end;
		uint64_t start = strtoull(line, &end, 16);
		if (end == line || *end != ' ')
			continue;
		char *p = end + 1;
		uint64_t size = strtoull(p, &end, 16);
		if (end == p || *end != ' ')
			continue;
		char *name = end + 1;
		name[strcspn(name, "\n")] = '\0';
		if (s->nperf_syms == cap) {
			cap = cap ? cap * 2 : 256;
			struct perf_sym *grown =
				realloc(s->perf_syms, cap * sizeof(*grown));
			if (!grown)
				break;
			s->perf_syms = grown;
		}
		uint32_t id = cp_profile_intern(s->strings, name, strlen(name));
		if (id == UINT32_MAX)
			break;
		s->perf_syms[s->nperf_syms++] =
			(struct perf_sym){start, start + size, id};
	}
	free(line);
	fclose(f);
	qsort(s->perf_syms, s->nperf_syms, sizeof(*s->perf_syms), compare_perf);
}

static const char *perf_map_lookup(struct cp_symbols *s, uint64_t address)
{
	size_t lo = 0, hi = s->nperf_syms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (address < s->perf_syms[mid].start)
			hi = mid;
		else if (address >= s->perf_syms[mid].end)
			lo = mid + 1;
		else
			return cp_profile_string(s->strings,
						 s->perf_syms[mid].name);
	}
	return NULL;
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
	struct symtab *t = *userdata;
	if (!t) {
		t = build_symtab(mod);
		if (!t)
			return NULL;
		struct symtab **grown =
			realloc(s->symtabs, (s->nsymtabs + 1) * sizeof(*grown));
		if (!grown) {
			free_symtab(t);
			return NULL;
		}
		s->symtabs = grown;
		s->symtabs[s->nsymtabs++] = t;
		*userdata = t;
	}
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
		load_perf_map(s);
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
		if (s->nperf_syms == 0)
			load_perf_map(s);
		const char *jit = perf_map_lookup(s, address);
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
