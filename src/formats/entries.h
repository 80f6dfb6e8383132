/* What the files of src/formats/ share for their registry entries.  A
 * format is a file that defines `const struct cp_format cp_format_NAME`
 * (cprof/format.h: its name, suffixes, description, the kinds it
 * represents and its functions, static in the file) and one X(NAME) in
 * registry.c's table.  */
#ifndef CPROF_FORMATS_ENTRIES_H
#define CPROF_FORMATS_ENTRIES_H

#include "cprof/format.h"

/* The parameters of an entry's write and begin functions.  */
#define CP_FORMAT_WRITE_ARGS                                                \
	const struct cp_format_input *in,                                   \
	const struct cp_format_options *options, FILE *stream
#define CP_FORMAT_BEGIN_ARGS CP_FORMAT_WRITE_ARGS, void **state

/* The readers' entry for raw samples (raw.c): aggregated into a
 * profile.  */
int cp_format_raw_read(FILE *stream, const char *name,
		       struct cp_profile **out, char *error,
		       size_t error_size);

#endif
