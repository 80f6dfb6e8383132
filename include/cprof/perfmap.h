/* Perf maps: the names a JIT gives its generated code.
 *
 * V8 (node --perf-basic-prof), the JVM with perf-map-agent, LuaJIT, .NET
 * and others write /tmp/perf-PID.map for perf: one line per piece of
 * code, "START SIZE NAME", START and SIZE in hex (an "0x" prefix is
 * accepted), NAME to the end of the line.  They append to it as they
 * generate code; a later line for the same address wins.
 *
 * Two layers.  struct cp_perfmap is the table, built from text fed in
 * pieces of any size: no file, so it is unit-tested and fuzzed.  struct
 * cp_perfmap_file follows the file of one process: opened by the rules
 * of cprof/tpath.h (a regular file owned by the target's uid or root and
 * readable by it; never a FIFO, a device or a symlink), read again only
 * when it changed and then only what was appended, read from the start
 * when it was replaced or truncated, at most CP_PERFMAP_MAX_BYTES of it.
 * Lookups go through the table: an address in code no module covers
 * (today: any address outside the modules; the anonymous executable
 * mappings of /proc/PID/maps are the natural next user).  */
#ifndef CPROF_PERFMAP_H
#define CPROF_PERFMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cprof/tpath.h"

/* A line longer than this (newline included) is skipped whole, without
 * ever being held in memory.  */
#define CP_PERFMAP_MAX_LINE 4096

/* Of a longer file only this much is read (about 5 million lines).  */
#define CP_PERFMAP_MAX_BYTES (512u << 20)

struct cp_perfmap;

/* One named range of code.  */
struct cp_perfmap_sym {
	uint64_t start, size;   /* [start, start + size) */
	const char *name;       /* borrowed, valid until the table changes */
};

/* What was read so far.  */
struct cp_perfmap_stats {
	size_t symbols;         /* lines taken */
	uint64_t bytes;         /* bytes fed */
	uint64_t bad_lines;     /* lines that are not "START SIZE NAME" */
	uint64_t long_lines;    /* lines over CP_PERFMAP_MAX_LINE, skipped */
};

/* An empty table; NULL when out of memory.  */
struct cp_perfmap *cp_perfmap_new(void);

/* NULL is fine.  */
void cp_perfmap_free(struct cp_perfmap *map);

/* Forget every line fed so far (the file was replaced).  */
void cp_perfmap_reset(struct cp_perfmap *map);

/* Parse one line (LINE, LEN bytes, without its newline): "START SIZE
 * NAME", fields separated by spaces or tabs, a '\r' at the end ignored.
 * True when it is one, with NAME borrowed from LINE (*NAME_LEN bytes, not
 * NUL-terminated).  A size of 0, a range past 2^64, or a NUL byte make it
 * not one.  */
bool cp_perfmap_parse_line(const char *line, size_t len, uint64_t *start,
			   uint64_t *size, const char **name,
			   size_t *name_len);

/* Feed LEN bytes of map text.  Complete lines are parsed (malformed ones
 * counted and skipped); an unterminated last line is kept for the next
 * call, up to CP_PERFMAP_MAX_LINE bytes (a longer line is skipped to its
 * end, however long).  Returns 0 or -CP_E_NOMEM.  */
int cp_perfmap_feed(struct cp_perfmap *map, const char *text, size_t len);

/* The text ended: parse a kept unterminated last line.  Returns 0 or
 * -CP_E_NOMEM.  */
int cp_perfmap_finish(struct cp_perfmap *map);

/* The latest line whose range holds ADDRESS, into *OUT.  False when none
 * does.  Sorts what was fed since the last lookup (so it is not const). */
bool cp_perfmap_lookup(struct cp_perfmap *map, uint64_t address,
		       struct cp_perfmap_sym *out);

void cp_perfmap_stats(const struct cp_perfmap *map,
		      struct cp_perfmap_stats *out);

/* ------------------------------------------------------------ the file */

struct cp_perfmap_file;

/* A follower of PATH (/tmp/perf-PID.map).  Nothing is read yet.  Returns
 * 0 or -CP_E_NOMEM.  */
int cp_perfmap_file_new(const char *path, struct cp_perfmap_file **out);

void cp_perfmap_file_free(struct cp_perfmap_file *file);

/* Bring the table up to date with the file, the map of a process with
 * credentials CREDS (NULL when unknown: then only a file owned by root
 * and readable by all is taken): nothing to do when it is
 * unchanged, the new bytes when it grew, all of it when it was replaced
 * or rewritten.  Never blocks: only a regular file is ever read, and at
 * most CP_PERFMAP_MAX_BYTES of it.  Returns
 *   0            up to date (an absent file is an empty table);
 *   -CP_E_PERM   the file is refused, *WHY says why ("a FIFO", ...; a
 *                static string) and *OWNER who owns it (uid_t -1 when
 *                unknown); the table is left empty;
 *   -CP_E_SYS    it cannot be read (errno);
 *   -CP_E_NOMEM  out of memory (what was read stays).
 * WHY and OWNER may be NULL.  A caller warns once per refused file: the
 * same refusal is returned for the same file at every refresh.  */
int cp_perfmap_file_refresh(struct cp_perfmap_file *file,
			    const struct cp_tpath_creds *creds,
			    const char **why, uid_t *owner);

/* True when the last refresh found more than CP_PERFMAP_MAX_BYTES: the
 * rest of the file was not read.  */
bool cp_perfmap_file_truncated(const struct cp_perfmap_file *file);

/* The table of FILE: borrowed, valid until cp_perfmap_file_free().  */
struct cp_perfmap *cp_perfmap_file_table(struct cp_perfmap_file *file);

#endif
