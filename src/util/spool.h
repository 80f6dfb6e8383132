/* Spools: anonymous temporary files for output that must not reach its
 * destination before it is complete (standard output, a FIFO or a device
 * cannot be taken back), or that is written out of order.  Internal to
 * libcprof.  */
#ifndef CPROF_SPOOL_H
#define CPROF_SPOOL_H

#include <stdio.h>

/* An anonymous temporary file (already unlinked), open for writing and
 * reading, in $TMPDIR or /tmp: unlike tmpfile(), which always uses /tmp,
 * it goes where the user said there is room.  TAG begins its name
 * ("cprof": /tmp/cprof-XXXXXX).  *DIR (when DIR is not NULL) is set to
 * the directory tried.  NULL with errno set on failure.  */
FILE *cp_spool_new(const char *tag, const char **dir);

/* Copy SPOOL from its start to OUT.  Returns 0 or -CP_E_SYS (errno set;
 * EIO when the stream did not say).  */
int cp_spool_copy(FILE *spool, FILE *out);

#endif
