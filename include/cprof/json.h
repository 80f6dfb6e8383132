/* JSON text for the writers (speedscope, dump json, timeline): one
 * string escaper, so no writer needs another module's header for it.  */
#ifndef CPROF_JSON_H
#define CPROF_JSON_H

#include <stdio.h>

/* Write S as a JSON string literal (quoted; '"', '\\' and control
 * characters escaped; other bytes as they are) to STREAM.  NULL is
 * written as "".  */
void cp_json_string(FILE *stream, const char *s);

#endif
