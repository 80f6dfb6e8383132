/* Finding a module's files for libdwfl, safely: see modfiles.h.  */
#include "symbolize/modfiles.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "cprof/error.h"

static void warnf(const struct cp_modfiles *mf, const char *key,
		  const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void warnf(const struct cp_modfiles *mf, const char *key,
		  const char *fmt, ...)
{
	char message[1024];
	va_list ap;
	if (!mf->warn)
		return;
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	mf->warn(mf->warn_arg, key, message);
}

/* ------------------------------------------------------------ main file */

/* The mapping of PATH at file offset 0, for /proc/PID/map_files.  */
static const struct cp_map *first_mapping(const struct cp_modfiles *mf,
					  const char *path)
{
	if (!mf->maps)
		return NULL;
	size_t len = strlen(path);
	for (size_t i = 0; i < mf->maps->count; i++) {
		const struct cp_map *m = &mf->maps->maps[i];
		if (m->offset == 0 && strncmp(m->path, path, len) == 0 &&
		    (m->path[len] == '\0' ||
		     strcmp(m->path + len, " (deleted)") == 0))
			return m;
	}
	return NULL;
}

static bool deleted(const char *modname)
{
	size_t len = strlen(modname);
	return len > 10 && strcmp(modname + len - 10, " (deleted)") == 0;
}

int cp_modfiles_open_module(const struct cp_modfiles *mf, const char *modname,
			    struct stat *st, char **file_name)
{
	const struct cp_map *m = first_mapping(mf, modname);
	const char *why = NULL;
	char path[96];
	int fd;
	*file_name = NULL;
	if (m) {
		/* The very file mapped, whatever was done to its name since
		 * (deleted, replaced by an upgrade — or by a FIFO).  */
		fd = cp_tpath_open_mapped(mf->pid, m->start, m->end, st, &why);
		if (fd >= 0) {
			snprintf(path, sizeof(path),
				 "/proc/%d/map_files/%" PRIx64 "-%" PRIx64,
				 (int)mf->pid, m->start, m->end);
			*file_name = strdup(path);
			goto out;
		}
		if (fd == -CP_E_PERM)
			goto refused; /* a mapped device: not ours to open */
	}
	if (deleted(modname))
		return -1; /* whatever has that name now is another file */
	fd = cp_tpath_open(mf->pid, modname,
			   CP_TPATH_IN_ROOT | CP_TPATH_NOFOLLOW | CP_TPATH_READABLE,
			   mf->creds, st, &why);
	if (fd == -CP_E_PERM)
		goto refused;
	if (fd >= 0 && m && (uint64_t)st->st_ino != m->inode) {
		close(fd);
		return -1; /* replaced since it was mapped */
	}
	if (fd >= 0)
		*file_name = strdup(modname);
out:
	if (fd >= 0 && !*file_name) {
		close(fd);
		fd = -1;
	}
	return fd;
refused:
	warnf(mf, modname, "not reading module %s: %s; its frames stay unnamed",
	      modname, why);
	return -1;
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

/* The build-id note of the ELF file open as FD into BUF (hex); false when
 * it has none.  */
static bool fd_build_id(int fd, char *buf, size_t size)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	const void *id = NULL;
	ssize_t len = elf ? dwelf_elf_gnu_build_id(elf, &id) : -1;
	if (len > 0)
		hex(id, (int)len, buf, size);
	if (elf)
		elf_end(elf);
	return len > 0;
}

/* The .gnu_debuglink CRC (zlib's CRC-32) of the file open as FD.  */
static bool fd_crc32(int fd, uint32_t *out)
{
	enum { CHUNK = 1 << 16 };
	unsigned char *buf = malloc(CHUNK);
	uLong crc = crc32(0, Z_NULL, 0);
	off_t offset = 0;
	bool ok = buf != NULL;
	while (ok) {
		ssize_t got = pread(fd, buf, CHUNK, offset);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			ok = got == 0;
			break;
		}
		crc = crc32(crc, buf, (uInt)got);
		offset += got;
	}
	free(buf);
	*out = (uint32_t)crc;
	return ok;
}

/* One search for a module's separate debug file by name.  */
struct debug_search {
	const struct cp_modfiles *mf;
	const char *modname;         /* for messages */
	const struct stat *main;     /* the main file, not to be taken */
	char module_id[129];         /* its build-id (hex), "" when none */
	GElf_Word crc;               /* from .gnu_debuglink; checked if ... */
	bool check_crc;              /* ... the module has no build-id */
	bool alt;                    /* a dwz file: not checked here */
};

/* Open PATH by FLAGS (cprof/tpath.h) and take it if it is this module's
 * debug file; each file that is not gets one warning.  Returns its
 * descriptor, with *NAME (the caller frees), or -1.  */
static int try_debug_file(struct debug_search *d, const char *path,
			  unsigned flags, char **name)
{
	const struct cp_modfiles *mf = d->mf;
	struct stat st;
	const char *why;
	int fd = cp_tpath_open(mf->pid, path, flags, mf->creds, &st, &why);
	if (fd == -CP_E_PERM)
		warnf(mf, path, "not reading debug file %s for %s: %s", path,
		      d->modname, why);
	if (fd < 0)
		return -1;
	const char *problem = NULL;
	char id[129];
	if (d->main && st.st_dev == d->main->st_dev &&
	    st.st_ino == d->main->st_ino) {
		/* The module itself under another name.  */
	} else if ((problem = elf_problem(fd))) {
		warnf(mf, path, "skipping corrupt debug file %s for %s: %s", path,
		     d->modname, problem);
	} else if (d->alt) {
		goto take;
	} else if (d->module_id[0]) {
		if (!fd_build_id(fd, id, sizeof(id)))
			warnf(mf, path,
			     "debug file %s for %s is not usable (no build-id): ignored",
			     path, d->modname);
		else if (strcmp(id, d->module_id) != 0)
			warnf(mf, path,
			     "debug file %s (build-id %s) does not match %s (build-id %s): ignored",
			     path, id, d->modname, d->module_id);
		else
			goto take;
	} else if (d->check_crc) {
		uint32_t crc;
		if (!fd_crc32(fd, &crc) || crc != d->crc)
			warnf(mf, path,
			     "debug file %s for %s is not usable (no build-id, CRC does not match): ignored",
			     path, d->modname);
		else
			goto take;
	} else {
		goto take;
	}
	close(fd);
	return -1;
take:
	*name = strdup(path);
	if (!*name) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Under ROOT (a debug directory of ours): ROOT/DIR/NAME, then with the
 * leading components of DIR dropped one at a time, down to ROOT/NAME (as
 * libdwfl's search does for an absolute entry of its path).  */
static int try_debug_root(struct debug_search *d, const char *root,
			  const char *dir, const char *name, char **out)
{
	char path[PATH_MAX];
	for (const char *sub = dir;;) {
		while (*sub == '/')
			sub++;
		int n = *sub ? snprintf(path, sizeof(path), "%s/%s/%s", root, sub, name)
			     : snprintf(path, sizeof(path), "%s/%s", root, name);
		if (n > 0 && (size_t)n < sizeof(path)) {
			int fd = try_debug_file(d, path, 0, out);
			if (fd >= 0)
				return fd;
		}
		if (!*sub)
			return -1;
		sub = strchr(sub, '/');
		if (!sub)
			sub = "";
	}
}

/* The module's debug file by its build-id, D->MODULE_ID, in our debug
 * directories and /usr/lib/debug: ROOT/.build-id/xx/rest.debug, the
 * search libdwfl's dwfl_build_id_find_debuginfo makes, but that one
 * keeps for the module an Elf handle of the file it finds, and libdwfl
 * then reads that one whatever descriptor the callback returns; the
 * symbolizer may return an image of the file instead (dwlazy.h).  */
static int find_by_build_id(struct debug_search *d, char **out)
{
	const struct cp_modfiles *mf = d->mf;
	const char *id = d->module_id;
	if (strlen(id) < 3)
		return -1;
	char path[PATH_MAX];
	int fd = -1;
	for (char *const *root = mf->dirs; fd < 0 && root && *root; root++)
		if ((*root)[0] == '/' &&
		    snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug",
			     *root, id, id + 2) < (int)sizeof(path))
			fd = try_debug_file(d, path, 0, out);
	if (fd < 0 && snprintf(path, sizeof(path),
			       "/usr/lib/debug/.build-id/%.2s/%s.debug", id,
			       id + 2) < (int)sizeof(path))
		fd = try_debug_file(d, path, 0, out);
	return fd;
}

/* Is PATH (a dwz file's name) in one of our debug directories?  */
static bool in_debug_dirs(const struct cp_modfiles *mf, const char *path)
{
	static const char system_dir[] = "/usr/lib/debug/";
	if (strncmp(path, system_dir, sizeof(system_dir) - 1) == 0)
		return true;
	for (char *const *d = mf->dirs; d && *d; d++) {
		size_t len = strlen(*d);
		if ((*d)[0] == '/' && strncmp(path, *d, len) == 0 &&
		    path[len] == '/')
			return true;
	}
	return false;
}

/* The search by name libdwfl's standard one does, with every file the
 * target controls opened by the target's rules: the .gnu_debuglink NAME
 * (or MODULE.debug without one) in our --debuginfo-dir directories, then
 * beside the module and in its .debug/ (the target's directories), then
 * under /usr/lib/debug.  */
static int find_by_name(struct debug_search *d, const char *debuglink,
			char **out)
{
	const struct cp_modfiles *mf = d->mf;
	char dir[PATH_MAX], base[NAME_MAX + 1], invented[NAME_MAX + 1];
	if (d->alt) {
		/* A dwz file's name from a debug file: used only inside our
		 * own debug directories.  */
		if (debuglink[0] != '/' || strstr(debuglink, "..") ||
		    !in_debug_dirs(mf, debuglink))
			return -1;
		for (const char *p = debuglink; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				return -1;
		return try_debug_file(d, debuglink, 0, out);
	}
	/* The module's directory and name, in the target's root.  */
	const char *slash = strrchr(d->modname, '/');
	if (!slash || (size_t)(slash - d->modname) >= sizeof(dir))
		return -1;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - d->modname), d->modname);
	snprintf(base, sizeof(base), "%s", slash + 1);
	if (deleted(base))
		base[strlen(base) - 10] = '\0';
	const char *name = debuglink;
	bool invented_name = !debuglink;
	if (invented_name) {
		/* No .gnu_debuglink: libdwfl tries MODULE.debug, and the
		 * module's own name in the debug directories.  */
		if (snprintf(invented, sizeof(invented), "%s.debug", base) >=
		    (int)sizeof(invented))
			return -1;
		name = invented;
		d->check_crc = false;
	}
	if (!cp_tpath_debuglink_ok(name)) {
		/* "../../etc/shadow": a path, not a name.  */
		if (!invented_name)
			warnf(mf, d->modname,
			      "ignoring the .gnu_debuglink of %s: not a plain file name",
			      d->modname);
		return -1;
	}
	bool try_base = invented_name && cp_tpath_debuglink_ok(base);
	int fd = -1;
	for (char *const *root = mf->dirs; fd < 0 && root && *root; root++) {
		if ((*root)[0] != '/')
			continue;
		fd = try_debug_root(d, *root, dir, name, out);
		if (fd < 0 && try_base)
			fd = try_debug_root(d, *root, dir, base, out);
	}
	/* The target's own directories: its rules.  */
	const unsigned target = CP_TPATH_IN_ROOT | CP_TPATH_NOFOLLOW |
				CP_TPATH_READABLE;
	char path[PATH_MAX];
	if (fd < 0 && snprintf(path, sizeof(path), "%s/%s", dir, name) <
			      (int)sizeof(path))
		fd = try_debug_file(d, path, target, out);
	if (fd < 0 && snprintf(path, sizeof(path), "%s/.debug/%s", dir, name) <
			      (int)sizeof(path))
		fd = try_debug_file(d, path, target, out);
	if (fd < 0)
		fd = try_debug_root(d, "/usr/lib/debug", dir, name, out);
	if (fd < 0 && try_base)
		fd = try_debug_root(d, "/usr/lib/debug", dir, base, out);
	return fd;
}

/* Is there a debuginfod server to ask?  libdebuginfod asks none without
 * DEBUGINFOD_URLS (or with it empty), but libdwfl dlopens it to learn
 * that, with libcurl, its TLS library and libcrypto: about 7 MB of
 * resident memory for nothing.  */
static bool debuginfod_wanted(void)
{
	const char *urls = getenv("DEBUGINFOD_URLS");
	return urls && urls[0];
}

int cp_modfiles_find_debuginfo(const struct cp_modfiles *mf, Dwfl_Module *mod,
			       void **userdata, const char *modname,
			       GElf_Addr base, const char *debuglink,
			       GElf_Word crc, const struct stat *main,
			       char **debuginfo_file_name)
{
	*debuginfo_file_name = NULL;
	struct debug_search d = {
		.mf = mf,
		.modname = modname,
		.main = main,
		.crc = crc,
		.check_crc = crc != 0,
		/* libdwfl asks for a dwz file with a CRC of 0; a real
		 * .gnu_debuglink has one.  */
		.alt = debuglink && crc == 0,
	};
	const unsigned char *bits;
	GElf_Addr vaddr;
	int len = dwfl_module_build_id(mod, &bits, &vaddr);
	if (len > 0)
		hex(bits, len, d.module_id, sizeof(d.module_id));
	/* Build-id: our directories' .build-id/xx/rest.debug (no path of
	 * the target's is involved, only the hex of its build-id); ours
	 * first, then libdwfl's, which also knows the dwz file's.  */
	int fd = d.alt ? -1 : find_by_build_id(&d, debuginfo_file_name);
	if (fd < 0)
		fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base,
						  NULL, NULL, 0,
						  debuginfo_file_name);
	if (fd < 0 && modname[0] == '/') {
		free(*debuginfo_file_name);
		*debuginfo_file_name = NULL;
		fd = find_by_name(&d, debuglink, debuginfo_file_name);
	}
	if (fd < 0 && debuginfod_wanted()) {
		/* Last, debuginfod: with no file name, libdwfl's search by
		 * name finds nothing and goes on to the server.  */
		free(*debuginfo_file_name);
		*debuginfo_file_name = NULL;
		fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base,
						  NULL, NULL, 0,
						  debuginfo_file_name);
	}
	if (fd < 0) {
		free(*debuginfo_file_name);
		*debuginfo_file_name = NULL;
		return -1;
	}
	const char *problem = elf_problem(fd);
	if (problem) {
		const char *path = *debuginfo_file_name ? *debuginfo_file_name
							: "(unnamed)";
		warnf(mf, path, "skipping corrupt debug file %s for %s: %s",
		      path, modname, problem);
		close(fd);
		free(*debuginfo_file_name);
		*debuginfo_file_name = NULL;
		errno = ENOENT;
		return -1;
	}
	return fd;
}
