/* Spools (spool.h).  */
#include "util/spool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "cprof/error.h"

FILE *cp_spool_new(const char *tag, const char **dir_out)
{
	const char *dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = "/tmp";
	if (dir_out)
		*dir_out = dir;
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/%s-XXXXXX", dir, tag) >=
	    (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	int fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return NULL;
	unlink(path);
	FILE *f = fdopen(fd, "w+");
	if (!f) {
		int saved = errno;
		close(fd);
		errno = saved;
	}
	return f;
}

int cp_spool_copy(FILE *spool, FILE *out)
{
	if (fflush(spool) != 0 || fseek(spool, 0, SEEK_SET) != 0)
		return -CP_E_SYS;
	char chunk[1 << 16];
	size_t n;
	while ((n = fread_unlocked(chunk, 1, sizeof(chunk), spool)) > 0)
		if (fwrite_unlocked(chunk, 1, n, out) != n)
			return -CP_E_SYS;
	if (ferror(spool)) {
		if (!errno)
			errno = EIO;
		return -CP_E_SYS;
	}
	return 0;
}
