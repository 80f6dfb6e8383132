/* Finding a module's files for libdwfl: its main ELF file and its
 * separate debug file, safely.  Internal to libcprof; used by the
 * symbolizer's libdwfl callbacks (symbols.c).
 *
 * Every name involved is the target's to choose: the module paths of
 * /proc/PID/maps, the directories beside them, the .gnu_debuglink names
 * in its files.  libdwfl's own callbacks open them with a plain open():
 * a FIFO blocks it for ever, a symlink leads anywhere, a debuglink
 * "../../x" leaves the directory.  Here every file of the target is
 * opened by the rules of cprof/tpath.h, a mapped file through
 * /proc/PID/map_files, and a debuglink must be a plain file name.  */
#ifndef CPROF_MODFILES_H
#define CPROF_MODFILES_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "cprof/procfs.h"
#include "cprof/tpath.h"

/* What the search needs to know; everything is borrowed.  */
struct cp_modfiles {
	pid_t pid;
	const struct cp_maps *maps;          /* the target's mappings */
	const struct cp_tpath_creds *creds;  /* the target's; NULL: unknown */
	char *const *dirs;  /* --debuginfo-dir directories, absolute, NULL-ended */
	/* One line of text about a file met along the way; KEY names the
	 * file (the caller warns once per key).  */
	void (*warn)(void *arg, const char *key, const char *message);
	void *warn_arg;
};

/* Open the file the target really has mapped as MODNAME (a path from
 * /proc/PID/maps), never anything else its name may lead to by now:
 * /proc/PID/map_files first; without the privilege for that, the path in
 * the target's root by the target's rules, and only while it is still the
 * inode mapped.  Returns a descriptor with *ST and *FILE_NAME (the caller
 * frees it), or -1.  */
int cp_modfiles_open_module(const struct cp_modfiles *mf, const char *modname,
			    struct stat *st, char **file_name);

/* libdwfl's find_debuginfo for module MOD named MODNAME: build-id
 * directories (ours) through libdwfl, then the .gnu_debuglink DEBUGLINK
 * with CRC (or MODULE.debug when NULL) in our --debuginfo-dir directories,
 * beside the module and in its .debug/ (the target's: its rules), and
 * under /usr/lib/debug, then debuginfod through libdwfl (only when
 * DEBUGINFOD_URLS names a server: else libdwfl would load libdebuginfod
 * only to learn that it asks none).  A debug file
 * that is corrupt, of another build or not allowed gets one warning.
 * MAIN (may be NULL) is the module's main file, not to be taken for its
 * debug file.  Returns a descriptor with *DEBUGINFO_FILE_NAME (the caller
 * frees it), or -1 with *DEBUGINFO_FILE_NAME NULL (libdwfl would open a
 * name left there itself).  */
int cp_modfiles_find_debuginfo(const struct cp_modfiles *mf, Dwfl_Module *mod,
			       void **userdata, const char *modname,
			       GElf_Addr base, const char *debuglink,
			       GElf_Word crc, const struct stat *main,
			       char **debuginfo_file_name);

#endif
