/* Symbolization with libdwfl: address -> module, function.  */
#include "cprof/symbols.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cprof/error.h"
#include "hashidx.h"

struct cp_symbols {
	pid_t pid;
	Dwfl *dwfl;
	Dwfl_Callbacks callbacks;
	char *debuginfo_path;
	struct cp_symbol **syms;     /* by id; each allocated with its frames */
	uint32_t nsyms, syms_cap;
	struct cp_hashidx index;     /* address -> id */
	char **modules;              /* interned module paths and basenames */
	size_t nmodules;
	bool reread_allowed;         /* one maps re-read per epoch */
	int verbose;
	uint64_t lookups, hits, rereads;
};

static int report(struct cp_symbols *s)
{
	dwfl_report_begin(s->dwfl);
	int rc = dwfl_linux_proc_report(s->dwfl, s->pid);
	dwfl_report_end(s->dwfl, NULL, NULL);
	if (rc != 0)
		return rc == ENOENT || rc == ESRCH ? -CP_E_NOPROC : -CP_E_SYS;
	return 0;
}

int cp_symbols_new(pid_t pid, const struct cp_symbols_options *options,
		   struct cp_symbols **out)
{
	struct cp_symbols *s = calloc(1, sizeof(*s));
	if (!s)
		return -CP_E_NOMEM;
	s->pid = pid;
	s->verbose = options ? options->verbose : 0;
	s->callbacks.find_elf = dwfl_linux_proc_find_elf;
	s->callbacks.find_debuginfo = dwfl_standard_find_debuginfo;
	s->callbacks.debuginfo_path = &s->debuginfo_path;
	s->dwfl = dwfl_begin(&s->callbacks);
	if (!s->dwfl) {
		free(s);
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
	for (uint32_t i = 0; i < s->nsyms; i++) {
		for (size_t j = 0; j < s->syms[i]->nframes; j++)
			free((char *)s->syms[i]->frames[j].function);
		free(s->syms[i]);
	}
	free(s->syms);
	cp_hashidx_free(&s->index);
	for (size_t i = 0; i < s->nmodules; i++)
		free(s->modules[i]);
	free(s->modules);
	free(s->debuginfo_path);
	free(s);
}

/* Module names outlive the Dwfl modules (a plugin may be unloaded), so
 * they are copied once and kept.  */
static const char *intern_module(struct cp_symbols *s, const char *name)
{
	for (size_t i = 0; i < s->nmodules; i++)
		if (strcmp(s->modules[i], name) == 0)
			return s->modules[i];
	char **grown = realloc(s->modules, (s->nmodules + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	s->modules = grown;
	char *copy = strdup(name);
	if (!copy)
		return NULL;
	s->modules[s->nmodules++] = copy;
	return copy;
}

struct addr_key {
	const struct cp_symbols *s;
	uint64_t address;
};

static bool addr_eq(const void *ctx, uint32_t id)
{
	const struct addr_key *k = ctx;
	return k->s->syms[id]->address == k->address;
}

static const struct cp_symbol unknown_symbol = {
	.nframes = 1,
	.frames = (const struct cp_frame[]){{.function = "[unknown]"}},
};

static struct cp_symbol *resolve(struct cp_symbols *s, uint64_t address)
{
	Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, address);
	if (!mod && s->reread_allowed) {
		/* A library loaded after we read the mappings.  */
		s->reread_allowed = false;
		s->rereads++;
		report(s);
		mod = dwfl_addrmodule(s->dwfl, address);
	}
	struct cp_symbol *sym = calloc(1, sizeof(*sym) + sizeof(struct cp_frame));
	if (!sym)
		return NULL;
	struct cp_frame *frame = (struct cp_frame *)(sym + 1);
	sym->address = address;
	sym->nframes = 1;
	sym->frames = frame;
	char *name = NULL;
	if (mod) {
		Dwarf_Addr bias = 0;
		dwfl_module_getelf(mod, &bias);
		const char *path = dwfl_module_info(mod, NULL, NULL, NULL, NULL,
						    NULL, NULL, NULL);
		if (path) {
			const char *base = strrchr(path, '/');
			sym->module_path = intern_module(s, path);
			sym->module = intern_module(s, base ? base + 1 : path);
		}
		sym->module_offset = address - bias;
		GElf_Off offset;
		GElf_Sym elf_sym;
		const char *fn = dwfl_module_addrinfo(mod, address, &offset,
						      &elf_sym, NULL, NULL, NULL);
		if (fn && *fn) {
			/* Versioned dynamic symbols read "malloc@@GLIBC_2.2.5":
			 * the version is not part of the function's name.  */
			name = strndup(fn, strcspn(fn, "@"));
			frame->named = true;
		} else if (sym->module &&
			   asprintf(&name, "%s+0x%" PRIx64, sym->module,
				    sym->module_offset) < 0) {
			name = NULL;
		}
	}
	if (!name)
		name = strdup("[unknown]");
	if (!name) {
		free(sym);
		return NULL;
	}
	frame->function = name;
	return sym;
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
	struct cp_symbol *sym = resolve(s, address);
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
	free((char *)sym->frames[0].function);
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
