/* Where an output path leads, found without following anything that was
 * not checked first (the rules are in cprof/output.h).  Internal to
 * libcprof: cp_output_open's first half.  */
#ifndef CPROF_OUTDEST_H
#define CPROF_OUTDEST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "cprof/output.h"

struct cp_outdest {
	enum cp_output_kind kind; /* CP_OUTPUT_REPLACE or CP_OUTPUT_DIRECT */
	int fd;          /* DIRECT: open for writing, the caller's; else -1 */
	int dir_fd;      /* REPLACE: O_PATH of the directory to rename in */
	char *name;      /* REPLACE: the destination's name in DIR_FD */
	bool exists;     /* REPLACE: a regular file is there now */
	struct stat st;  /* REPLACE and EXISTS: that file */
};

/* Look at PATH (not "-") one component at a time and fill *DEST: a
 * device, FIFO or socket is opened (DEST->fd); a regular file or a new
 * name gives the directory (held open) and the name in it.  Returns 0;
 * -CP_E_INVAL when PATH is refused; -CP_E_SYS (errno set); -CP_E_NOMEM.
 * On success the caller owns DEST->fd, DEST->dir_fd and DEST->name; on
 * failure ERROR (ERROR_SIZE bytes) holds one line naming PATH, and *DEST
 * holds nothing.  */
int cp_outdest_resolve(const char *path, struct cp_outdest *dest,
		       char *error, size_t error_size);

#endif
