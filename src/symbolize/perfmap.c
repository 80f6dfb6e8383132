/* Perf maps: the table (pure) and the follower of a JIT's map file.  */
#include "cprof/perfmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cprof/error.h"

/* One line: 16 bytes, so millions of them stay small.  */
struct entry {
	uint64_t start;
	uint32_t size;
	/* Offset of the name in NAMES.  Names are stored in the order the
	 * lines came, so this also says which of two lines is the later.  */
	uint32_t name;
};

struct cp_perfmap {
	struct entry *entries;
	size_t count, cap;
	size_t sorted;           /* entries[0, sorted) are sorted by start */
	char *names;             /* NUL-terminated names, one after another */
	size_t names_len, names_cap;
	char pending[CP_PERFMAP_MAX_LINE]; /* an unterminated last line */
	size_t pending_len;
	bool skipping;           /* inside a line too long to keep */
	struct cp_perfmap_stats stats;
};

struct cp_perfmap *cp_perfmap_new(void)
{
	return calloc(1, sizeof(struct cp_perfmap));
}

void cp_perfmap_free(struct cp_perfmap *map)
{
	if (!map)
		return;
	free(map->entries);
	free(map->names);
	free(map);
}

void cp_perfmap_reset(struct cp_perfmap *map)
{
	map->count = map->sorted = 0;
	map->names_len = 0;
	map->pending_len = 0;
	map->skipping = false;
	memset(&map->stats, 0, sizeof(map->stats));
}

/* ------------------------------------------------------------ parsing */

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A hex number of 1 to 16 digits, "0x" allowed, at LINE[*I].  */
static bool parse_hex(const char *line, size_t len, size_t *i, uint64_t *out)
{
	size_t p = *i;
	if (p + 1 < len && line[p] == '0' && (line[p + 1] == 'x' || line[p + 1] == 'X') &&
	    p + 2 < len && hex_digit(line[p + 2]) >= 0)
		p += 2;
	uint64_t value = 0;
	size_t digits = 0;
	for (int d; p < len && (d = hex_digit(line[p])) >= 0; p++) {
		if (++digits > 16)
			return false;
		value = value << 4 | (uint64_t)d;
	}
	if (digits == 0)
		return false;
	*i = p;
	*out = value;
	return true;
}

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

/* At least one blank at LINE[*I], and the ones after it.  */
static bool skip_blanks(const char *line, size_t len, size_t *i)
{
	if (*i >= len || !blank(line[*i]))
		return false;
	while (*i < len && blank(line[*i]))
		(*i)++;
	return true;
}

bool cp_perfmap_parse_line(const char *line, size_t len, uint64_t *start,
			   uint64_t *size, const char **name,
			   size_t *name_len)
{
	size_t i = 0;
	if (memchr(line, '\0', len))
		return false;
	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (!parse_hex(line, len, &i, start) || !skip_blanks(line, len, &i) ||
	    !parse_hex(line, len, &i, size) || !skip_blanks(line, len, &i) ||
	    i >= len)
		return false;
	if (*size == 0 || *size - 1 > UINT64_MAX - *start)
		return false;
	*name = line + i;
	*name_len = len - i;
	return true;
}

/* Take one complete line (without its newline).  */
static int take_line(struct cp_perfmap *map, const char *line, size_t len)
{
	uint64_t start, size;
	const char *name;
	size_t name_len;
	if (!cp_perfmap_parse_line(line, len, &start, &size, &name,
				   &name_len) ||
	    size > UINT32_MAX) {
		map->stats.bad_lines++;
		return 0;
	}
	if (map->names_len + name_len + 1 > UINT32_MAX)
		return -CP_E_NOMEM;
	if (map->names_len + name_len + 1 > map->names_cap) {
		size_t cap = map->names_cap ? map->names_cap : 4096;
		while (cap < map->names_len + name_len + 1)
			cap *= 2;
		char *grown = realloc(map->names, cap);
		if (!grown)
			return -CP_E_NOMEM;
		map->names = grown;
		map->names_cap = cap;
	}
	if (map->count == map->cap) {
		size_t cap = map->cap ? map->cap * 2 : 256;
		struct entry *grown = realloc(map->entries, cap * sizeof(*grown));
		if (!grown)
			return -CP_E_NOMEM;
		map->entries = grown;
		map->cap = cap;
	}
	map->entries[map->count++] = (struct entry){
		.start = start,
		.size = (uint32_t)size,
		.name = (uint32_t)map->names_len,
	};
	memcpy(map->names + map->names_len, name, name_len);
	map->names[map->names_len + name_len] = '\0';
	map->names_len += name_len + 1;
	map->stats.symbols++;
	return 0;
}

int cp_perfmap_feed(struct cp_perfmap *map, const char *text, size_t len)
{
	map->stats.bytes += len;
	while (len > 0) {
		const char *nl = memchr(text, '\n', len);
		size_t chunk = nl ? (size_t)(nl - text) : len;
		size_t step = nl ? chunk + 1 : chunk;
		int rc = 0;
		if (map->skipping) {
			/* The rest of a line over the limit: dropped as it
			 * comes, so its length costs no memory.  */
			map->skipping = nl == NULL;
		} else if (map->pending_len + chunk >= CP_PERFMAP_MAX_LINE) {
			map->stats.long_lines++;
			map->pending_len = 0;
			map->skipping = nl == NULL;
		} else if (!nl) {
			memcpy(map->pending + map->pending_len, text, chunk);
			map->pending_len += chunk;
		} else if (map->pending_len > 0) {
			memcpy(map->pending + map->pending_len, text, chunk);
			rc = take_line(map, map->pending, map->pending_len + chunk);
			map->pending_len = 0;
		} else {
			rc = take_line(map, text, chunk);
		}
		if (rc < 0)
			return rc;
		text += step;
		len -= step;
	}
	return 0;
}

int cp_perfmap_finish(struct cp_perfmap *map)
{
	int rc = 0;
	if (map->pending_len > 0)
		rc = take_line(map, map->pending, map->pending_len);
	map->pending_len = 0;
	map->skipping = false;
	return rc;
}

/* ------------------------------------------------------------ lookup */

static int compare_entries(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	/* Of two lines for one address, the later one goes last.  */
	return (x->name > y->name) - (x->name < y->name);
}

/* Sort the lines fed since the last lookup into the sorted ones: sort the
 * new run, then merge it in from the back.  A JIT appends a few lines at
 * a time to millions, so this is linear, not a sort of everything.  */
static void sort_new(struct cp_perfmap *map)
{
	size_t old = map->sorted, added = map->count - old;
	struct entry *e = map->entries;
	qsort(e + old, added, sizeof(*e), compare_entries);
	if (old > 0 && compare_entries(&e[old - 1], &e[old]) > 0) {
		struct entry *run = malloc(added * sizeof(*run));
		if (!run) {
			qsort(e, map->count, sizeof(*e), compare_entries);
		} else {
			memcpy(run, e + old, added * sizeof(*run));
			size_t i = old, j = added, w = map->count;
			while (j > 0) {
				if (i > 0 && compare_entries(&e[i - 1], &run[j - 1]) > 0)
					e[--w] = e[--i];
				else
					e[--w] = run[--j];
			}
			free(run);
		}
	}
	map->sorted = map->count;
}

/* How far back from the last line starting at or before an address to
 * look for a longer line that holds it.  */
#define LOOK_BACK 64

bool cp_perfmap_lookup(struct cp_perfmap *map, uint64_t address,
		       struct cp_perfmap_sym *out)
{
	if (map->sorted < map->count)
		sort_new(map);
	size_t lo = 0, hi = map->count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (map->entries[mid].start <= address)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Lines may overlap (code freed and generated again): of those that
	 * hold ADDRESS, the latest.  */
	const struct entry *best = NULL;
	for (size_t i = lo; i > 0 && lo - i < LOOK_BACK; i--) {
		const struct entry *e = &map->entries[i - 1];
		if (address - e->start < e->size && (!best || e->name > best->name))
			best = e;
	}
	if (!best)
		return false;
	*out = (struct cp_perfmap_sym){
		.start = best->start,
		.size = best->size,
		.name = map->names + best->name,
	};
	return true;
}

void cp_perfmap_stats(const struct cp_perfmap *map,
		      struct cp_perfmap_stats *out)
{
	*out = map->stats;
}

/* ------------------------------------------------------------ the file */

#define READ_CHUNK (256u << 10)
#define TAIL 64

struct cp_perfmap_file {
	char *path;
	struct cp_perfmap *map;
	bool following;          /* the fields below describe a file */
	dev_t dev;
	ino_t ino;
	struct timespec mtime;
	uint64_t offset;         /* bytes of it fed to MAP */
	/* Its last bytes before OFFSET, to tell an append (they are still
	 * there) from a rewrite.  */
	unsigned char tail[TAIL];
	size_t tail_len;
	bool truncated;          /* longer than CP_PERFMAP_MAX_BYTES */
};

int cp_perfmap_file_new(const char *path, struct cp_perfmap_file **out)
{
	struct cp_perfmap_file *f = calloc(1, sizeof(*f));
	if (!f)
		return -CP_E_NOMEM;
	f->path = strdup(path);
	f->map = cp_perfmap_new();
	if (!f->path || !f->map) {
		cp_perfmap_file_free(f);
		return -CP_E_NOMEM;
	}
	*out = f;
	return 0;
}

void cp_perfmap_file_free(struct cp_perfmap_file *f)
{
	if (!f)
		return;
	cp_perfmap_free(f->map);
	free(f->path);
	free(f);
}

static void forget(struct cp_perfmap_file *f)
{
	cp_perfmap_reset(f->map);
	f->following = false;
	f->offset = 0;
	f->tail_len = 0;
	f->truncated = false;
}

/* Is FD, the same inode as before, only longer (or as long) than what was
 * read, with the bytes before OFFSET still as they were?  */
static bool appended(struct cp_perfmap_file *f, int fd, const struct stat *st)
{
	if ((uint64_t)st->st_size < f->offset)
		return false;
	if ((uint64_t)st->st_size == f->offset &&
	    (st->st_mtim.tv_sec != f->mtime.tv_sec ||
	     st->st_mtim.tv_nsec != f->mtime.tv_nsec))
		return false; /* rewritten to the same length */
	if (f->tail_len == 0)
		return f->offset == 0;
	unsigned char now[TAIL];
	return pread(fd, now, f->tail_len, (off_t)(f->offset - f->tail_len)) ==
		       (ssize_t)f->tail_len &&
	       memcmp(now, f->tail, f->tail_len) == 0;
}

int cp_perfmap_file_refresh(struct cp_perfmap_file *f,
			    const struct cp_tpath_creds *creds,
			    const char **why, uid_t *owner)
{
	const char *unused_why;
	uid_t unused_owner;
	if (!why)
		why = &unused_why;
	if (!owner)
		owner = &unused_owner;
	*why = NULL;
	*owner = (uid_t)-1;
	struct stat st = {0};
	st.st_uid = (uid_t)-1;
	/* A JIT writes its map as itself: the file must be the target's (or
	 * root's, for a JIT running as root), readable by the target, and a
	 * regular file named by no symlink.  */
	int fd = cp_tpath_open(0, f->path,
			       CP_TPATH_NOFOLLOW | CP_TPATH_OWNED | CP_TPATH_READABLE,
			       creds, &st, why);
	if (fd == -CP_E_PERM) {
		*owner = st.st_uid;
		forget(f);
		return fd;
	}
	if (fd < 0) {
		/* No map (yet, or any more): keep what was read.  */
		return errno == ENOENT ? 0 : -CP_E_SYS;
	}
	bool same = f->following && st.st_dev == f->dev && st.st_ino == f->ino;
	if (same && (uint64_t)st.st_size == f->offset &&
	    st.st_mtim.tv_sec == f->mtime.tv_sec &&
	    st.st_mtim.tv_nsec == f->mtime.tv_nsec) {
		close(fd);
		return 0;
	}
	if (!same || !appended(f, fd, &st))
		forget(f);
	f->following = true;
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->mtime = st.st_mtim;
	/* Up to the size fstat saw: the JIT may be writing a line at the
	 * end right now; what follows is read next time.  */
	uint64_t limit = (uint64_t)st.st_size;
	f->truncated = limit > CP_PERFMAP_MAX_BYTES;
	if (f->truncated)
		limit = CP_PERFMAP_MAX_BYTES;
	int rc = 0;
	char *buf = f->offset < limit ? malloc(READ_CHUNK) : NULL;
	if (f->offset < limit && !buf)
		rc = -CP_E_NOMEM;
	while (rc == 0 && f->offset < limit) {
		size_t want = limit - f->offset < READ_CHUNK
				      ? (size_t)(limit - f->offset)
				      : READ_CHUNK;
		ssize_t got = pread(fd, buf, want, (off_t)f->offset);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break; /* shrunk meanwhile: seen next time */
		rc = cp_perfmap_feed(f->map, buf, (size_t)got);
		f->offset += (uint64_t)got;
	}
	f->tail_len = f->offset < TAIL ? (size_t)f->offset : TAIL;
	if (f->tail_len > 0 &&
	    pread(fd, f->tail, f->tail_len, (off_t)(f->offset - f->tail_len)) !=
		    (ssize_t)f->tail_len)
		f->tail_len = 0; /* unverifiable: read it all next time */
	free(buf);
	close(fd);
	return rc;
}

bool cp_perfmap_file_truncated(const struct cp_perfmap_file *f)
{
	return f->truncated;
}

struct cp_perfmap *cp_perfmap_file_table(struct cp_perfmap_file *f)
{
	return f->map;
}
