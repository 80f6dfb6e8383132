/* Names to addresses (symbolize/lookup.h): a function by its symbol, a
 * source line by the line tables, over the modules the symbolizer's Dwfl
 * has.  */
#include "symbolize/lookup.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cprof/addrspace.h"
#include "cprof/error.h"
#include "symbolize/symbols_int.h"

/* ------------------------------------------------------------ modules */

struct modules {
	struct cp_addrspace *space;
	Dwfl_Module **mods;
	size_t n, cap;
	char exe[PATH_MAX];     /* the executable's path, "" unknown */
};

static int collect(Dwfl_Module *mod, void **userdata, const char *name,
		   Dwarf_Addr start, void *arg)
{
	(void)userdata;
	(void)name;
	struct modules *m = arg;
	/* Only what is mapped now: the symbolizer keeps modules that went
	 * (a library unloaded, the image before an exec) to name old
	 * addresses, and those have nothing to break in.  */
	if (!cp_addrspace_has(m->space, start))
		return DWARF_CB_OK;
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 32;
		Dwfl_Module **grown = realloc(m->mods, cap * sizeof(*grown));
		if (!grown)
			return DWARF_CB_ABORT;
		m->mods = grown;
		m->cap = cap;
	}
	m->mods[m->n++] = mod;
	return DWARF_CB_OK;
}

static const char *module_name(Dwfl_Module *mod)
{
	const char *name = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL,
					    NULL, NULL);
	return name ? name : "";
}

static uint64_t module_start(Dwfl_Module *mod)
{
	Dwarf_Addr start = 0;
	dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, NULL, NULL);
	return start;
}

/* The executable first (what a user means by a bare name), then by
 * address.  */
static int compare_modules(const void *a, const void *b, void *arg)
{
	const char *exe_path = arg;
	Dwfl_Module *x = *(Dwfl_Module *const *)a;
	Dwfl_Module *y = *(Dwfl_Module *const *)b;
	bool ex = exe_path[0] && strcmp(module_name(x), exe_path) == 0;
	bool ey = exe_path[0] && strcmp(module_name(y), exe_path) == 0;
	if (ex != ey)
		return ex ? -1 : 1;
	uint64_t sx = module_start(x), sy = module_start(y);
	return (sx > sy) - (sx < sy);
}

/* The modules of S's target, in search order.  */
static int modules_of(struct cp_symbols *s, struct modules *m)
{
	memset(m, 0, sizeof(*m));
	m->space = cp_symbols_addrspace(s);
	Dwfl *dwfl = cp_symbols_dwfl_begin(s);
	if (dwfl_getmodules(dwfl, collect, m, 0) != 0) {
		cp_symbols_dwfl_end(s);
		free(m->mods);
		return -CP_E_NOMEM;
	}
	/* The link /proc/PID/exe names the mapped executable as
	 * /proc/PID/maps does; only compared, never opened.  */
	char link[64];
	snprintf(link, sizeof(link), "/proc/%d/exe",
		 (int)cp_addrspace_pid(cp_symbols_addrspace(s)));
	ssize_t len = readlink(link, m->exe, sizeof(m->exe) - 1);
	m->exe[len > 0 ? len : 0] = '\0';
	qsort_r(m->mods, m->n, sizeof(*m->mods), compare_modules, m->exe);
	return 0;
}

/* ------------------------------------------------------------ names */

/* Is RAW mangled (C++ Itanium, Rust v0)?  Only those are demangled for a
 * comparison: demangling every name of every module costs.  */
static bool mangled(const char *raw)
{
	return raw[0] == '_' && (raw[1] == 'Z' || raw[1] == 'R');
}

/* RAW as cprof prints it: versions dropped, demangled.  */
static const char *shown_name(struct cp_symbols *s, const char *raw,
			      char *buf, size_t size)
{
	if (mangled(raw))
		return cp_symbols_display_name(s, raw);
	size_t n = strcspn(raw, "@");
	if (n >= size)
		n = size - 1;
	memcpy(buf, raw, n);
	buf[n] = '\0';
	return buf;
}

static bool name_matches(struct cp_symbols *s, const char *raw,
			 const char *want)
{
	size_t n = strcspn(raw, "@");
	if (strlen(want) == n && strncmp(raw, want, n) == 0)
		return true;
	if (!mangled(raw))
		return false;
	const char *shown = cp_symbols_display_name(s, raw);
	if (!shown)
		return false;
	size_t wn = strlen(want);
	return strncmp(shown, want, wn) == 0 &&
	       (shown[wn] == '\0' || shown[wn] == '(');
}

static bool is_function(const GElf_Sym *sym)
{
	int type = GELF_ST_TYPE(sym->st_info);
	return sym->st_shndx != SHN_UNDEF &&
	       (type == STT_FUNC || type == STT_GNU_IFUNC);
}

/* ------------------------------------------------------------ lines */

/* Where the body of the function at ADDR (SIZE bytes) in MOD begins:
 * the row DWARF marks prologue_end, else the first statement row past
 * the function's first line; 0 when the line table does not say.  */
static uint64_t after_prologue(Dwfl_Module *mod, uint64_t addr,
			       uint64_t size)
{
	Dwarf_Addr bias = 0;
	Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
	Dwarf_Lines *lines = NULL;
	size_t n = 0;
	if (!cu || size == 0 || dwarf_getsrclines(cu, &lines, &n) != 0)
		return 0;
	uint64_t lo = addr - bias, hi = lo + size;
	int first_line = -1;
	for (size_t i = 0; i < n; i++) {
		Dwarf_Line *l = dwarf_onesrcline(lines, i);
		Dwarf_Addr a = 0;
		int line = 0;
		bool stmt = true, end = false, pe = false;
		if (!l || dwarf_lineaddr(l, &a) != 0 || a < lo || a >= hi)
			continue;
		dwarf_lineno(l, &line);
		dwarf_linebeginstatement(l, &stmt);
		dwarf_lineendsequence(l, &end);
		dwarf_lineprologueend(l, &pe);
		if (end)
			continue;
		if (a == lo) {
			if (first_line < 0)
				first_line = line;
			continue;
		}
		if (pe || (stmt && first_line >= 0 && line != first_line))
			return a + bias;
	}
	return 0;
}

/* FILE and LINE of ADDR in MOD into OUT.  */
static void source_of(Dwfl_Module *mod, uint64_t addr, struct cp_place *out)
{
	Dwfl_Line *src = dwfl_module_getsrc(mod, addr);
	int line = 0;
	const char *file = src ? dwfl_lineinfo(src, NULL, &line, NULL, NULL,
					       NULL)
			       : NULL;
	snprintf(out->file, sizeof(out->file), "%s", file ? file : "");
	out->line = file && line > 0 ? (unsigned)line : 0;
}

/* Does source file NAME end in WANT, at a '/' boundary?  */
static bool file_matches(const char *name, const char *want)
{
	size_t n = strlen(name), w = strlen(want);
	if (w > n || strcmp(name + n - w, want) != 0)
		return false;
	return w == n || name[n - w - 1] == '/' || want[0] == '/';
}

/* "FILE:LINE" split; false when LOCATION is not of that form.  */
static bool split_file_line(const char *location, char *file, size_t size,
			    unsigned *line)
{
	const char *colon = strrchr(location, ':');
	if (!colon || colon == location || !colon[1] || colon[-1] == ':')
		return false;
	for (const char *p = colon + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	size_t n = (size_t)(colon - location);
	if (n >= size)
		return false;
	memcpy(file, location, n);
	file[n] = '\0';
	unsigned long v = strtoul(colon + 1, NULL, 10);
	if (v == 0 || v > INT_MAX)
		return false;
	*line = (unsigned)v;
	return true;
}

static void function_of(struct cp_symbols *s, Dwfl_Module *mod,
			uint64_t addr, struct cp_place *out)
{
	GElf_Off off = 0;
	GElf_Sym sym;
	const char *raw = dwfl_module_addrinfo(mod, addr, &off, &sym, NULL,
					       NULL, NULL);
	char buf[256];
	const char *shown = raw ? shown_name(s, raw, buf, sizeof(buf)) : NULL;
	snprintf(out->function, sizeof(out->function), "%s",
		 shown ? shown : "");
	out->entry = raw ? addr - off : 0;
}

static int locate_line(struct cp_symbols *s, struct modules *m,
		       const char *file, unsigned line,
		       struct cp_place *out)
{
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	Dwfl_Module *best_mod = NULL;
	uint64_t best_addr = 0;
	int best_line = 0;
	const char *best_file = NULL;
	for (size_t i = 0; i < m->n && !best_mod; i++) {
		Dwfl_Line **srcs = NULL;
		size_t nsrcs = 0;
		if (dwfl_module_getsrc_file(m->mods[i], base, (int)line, 0,
					    &srcs, &nsrcs) != 0)
			continue;
		for (size_t k = 0; k < nsrcs; k++) {
			Dwarf_Addr addr = 0;
			int l = 0;
			const char *name = dwfl_lineinfo(srcs[k], &addr, &l,
							 NULL, NULL, NULL);
			if (!name || !file_matches(name, file) ||
			    l < (int)line)
				continue;
			if (!best_mod || l < best_line ||
			    (l == best_line && addr < best_addr)) {
				best_mod = m->mods[i];
				best_addr = addr;
				best_line = l;
				best_file = name;
			}
		}
		free(srcs);
	}
	if (!best_mod)
		return -CP_E_NOSYM;
	out->addr = best_addr;
	snprintf(out->file, sizeof(out->file), "%s", best_file);
	out->line = (unsigned)best_line;
	snprintf(out->module, sizeof(out->module), "%s",
		 module_name(best_mod));
	function_of(s, best_mod, best_addr, out);
	return 0;
}

static int locate_function(struct cp_symbols *s, struct modules *m,
			   const char *want, unsigned flags,
			   struct cp_place *out)
{
	for (size_t i = 0; i < m->n; i++) {
		Dwfl_Module *mod = m->mods[i];
		int nsyms = dwfl_module_getsymtab(mod);
		int found = -1, found_rank = 3;
		GElf_Addr found_addr = 0;
		GElf_Sym found_sym;
		for (int k = 0; k < nsyms && found_rank > 0; k++) {
			GElf_Sym sym;
			GElf_Addr addr = 0;
			const char *raw = dwfl_module_getsym_info(
				mod, k, &sym, &addr, NULL, NULL, NULL);
			if (!raw || !*raw || !is_function(&sym) || !addr ||
			    !name_matches(s, raw, want))
				continue;
			int bind = GELF_ST_BIND(sym.st_info);
			int rank = bind == STB_GLOBAL ? 0
				   : bind == STB_WEAK ? 1
						      : 2;
			if (rank < found_rank) {
				found = k;
				found_rank = rank;
				found_addr = addr;
				found_sym = sym;
			}
		}
		if (found < 0)
			continue;
		uint64_t body = (flags & CP_LOCATE_ENTRY)
					? 0
					: after_prologue(mod, found_addr,
							 found_sym.st_size);
		out->entry = found_addr;
		out->addr = body ? body : found_addr;
		const char *raw = dwfl_module_getsym_info(mod, found, &found_sym,
							  &found_addr, NULL,
							  NULL, NULL);
		char buf[256];
		const char *shown = shown_name(s, raw, buf, sizeof(buf));
		snprintf(out->function, sizeof(out->function), "%s",
			 shown ? shown : want);
		snprintf(out->module, sizeof(out->module), "%s",
			 module_name(mod));
		source_of(mod, out->addr, out);
		return 0;
	}
	return -CP_E_NOSYM;
}

int cp_symbols_locate(struct cp_symbols *s, const char *location,
		      unsigned flags, struct cp_place *out)
{
	memset(out, 0, sizeof(*out));
	if (!location || !*location)
		return -CP_E_NOSYM;
	struct modules m;
	int rc = modules_of(s, &m);
	if (rc < 0)
		return rc;
	char file[256];
	unsigned line = 0;
	if (split_file_line(location, file, sizeof(file), &line))
		rc = locate_line(s, &m, file, line, out);
	else
		rc = locate_function(s, &m, location, flags, out);
	cp_symbols_dwfl_end(s);
	free(m.mods);
	return rc;
}

/* ------------------------------------------------------------ completion */

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

long cp_symbols_functions(struct cp_symbols *s, const char *prefix,
			  bool (*fn)(void *arg, const char *name), void *arg)
{
	struct modules m;
	int rc = modules_of(s, &m);
	if (rc < 0)
		return rc == -CP_E_NOSYM ? 0 : rc;
	size_t plen = prefix ? strlen(prefix) : 0;
	char **names = NULL;
	size_t n = 0, cap = 0;
	long passed = -CP_E_NOMEM;
	for (size_t i = 0; i < m.n; i++) {
		Dwfl_Module *mod = m.mods[i];
		int nsyms = dwfl_module_getsymtab(mod);
		for (int k = 0; k < nsyms; k++) {
			GElf_Sym sym;
			GElf_Addr addr = 0;
			const char *raw = dwfl_module_getsym_info(
				mod, k, &sym, &addr, NULL, NULL, NULL);
			if (!raw || !*raw || !is_function(&sym))
				continue;
			char buf[1024];
			const char *shown = shown_name(s, raw, buf,
						       sizeof(buf));
			if (!shown || strncmp(shown, prefix ? prefix : "",
					      plen) != 0)
				continue;
			if (n == cap) {
				size_t c = cap ? cap * 2 : 64;
				char **grown = realloc(names, c * sizeof(*grown));
				if (!grown)
					goto out;
				names = grown;
				cap = c;
			}
			if (!(names[n] = strdup(shown)))
				goto out;
			n++;
		}
	}
	if (n > 1)
		qsort(names, n, sizeof(*names), compare_names);
	passed = 0;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
			continue;
		passed++;
		if (!fn(arg, names[i]))
			break;
	}
out:
	cp_symbols_dwfl_end(s);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(m.mods);
	return passed;
}
