/* Growing an array by doubling.  Internal to libcprof.  */
#ifndef CPROF_GROW_H
#define CPROF_GROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Make *ARRAY (of *CAP elements of SIZE bytes) hold at least NEED, by
 * doubling from FIRST.  False when out of memory; *ARRAY and *CAP are
 * then as they were.  */
static inline bool cp_grow(void **array, size_t *cap, size_t need,
			   size_t size, size_t first)
{
	if (need <= *cap)
		return true;
	size_t n = *cap ? *cap : first;
	while (n < need)
		n *= 2;
	void *grown = realloc(*array, n * size);
	if (!grown)
		return false;
	*array = grown;
	*cap = n;
	return true;
}

/* cp_grow, with the elements added zeroed.  */
static inline bool cp_grow_zeroed(void **array, size_t *cap, size_t need,
				  size_t size, size_t first)
{
	size_t old = *cap;
	if (!cp_grow(array, cap, need, size, first))
		return false;
	memset((char *)*array + old * size, 0, (*cap - old) * size);
	return true;
}

#endif
