/* Uprobe events defined in tracefs (tracefs_probes.h).  */
#include "capture/tracefs_probes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Where tracefs is found mounted (never mounted by us).  */
static const char *const mounts[] = {
	"/sys/kernel/tracing",
	"/sys/kernel/debug/tracing",
};

#define GROUP_PREFIX "cprof_"

static int write_line(const char *dir, const char *line)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/uprobe_events", dir);
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	size_t len = strlen(line);
	ssize_t n = write(fd, line, len);
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

static bool read_id(const char *dir, const char *group, unsigned i,
		    uint64_t *id)
{
	char path[160], text[32];
	snprintf(path, sizeof(path), "%s/events/%s/e%u/id", dir, group, i);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return false;
	text[n] = '\0';
	char *end;
	*id = strtoull(text, &end, 10);
	return end != text;
}

/* Remove every event of GROUP.  */
static void remove_group(const char *dir, const char group[256])
{
	char path[384];
	snprintf(path, sizeof(path), "%s/events/%s", dir, group);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		char line[600];
		snprintf(line, sizeof(line), "-:%s/%s\n", group, e->d_name);
		write_line(dir, line);
	}
	closedir(d);
}

/* The groups of a cprof-attach that is gone (killed before it could
 * remove them): removed, once per process.  */
static void sweep(const char *dir)
{
	static bool swept;
	if (swept)
		return;
	swept = true;
	char path[128];
	snprintf(path, sizeof(path), "%s/events", dir);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, GROUP_PREFIX, strlen(GROUP_PREFIX)) != 0)
			continue;
		char *end;
		long pid = strtol(e->d_name + strlen(GROUP_PREFIX), &end, 10);
		if (*end != '_' || pid <= 0 || pid == (long)getpid())
			continue;
		if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			remove_group(dir, e->d_name);
	}
	closedir(d);
}

int cp_tracefs_probes_define(struct cp_tracefs_probes *p, size_t n,
			     const char *const paths[],
			     const uint64_t offsets[], const bool rets[],
			     const unsigned events[])
{
	static unsigned serial;
	memset(p, 0, sizeof(*p));
	if (n > CP_TRACEFS_PROBES_MAX)
		return -1;
	for (size_t i = 0; i < sizeof(mounts) / sizeof(mounts[0]); i++) {
		char path[96];
		snprintf(path, sizeof(path), "%s/uprobe_events", mounts[i]);
		if (access(path, W_OK) == 0) {
			snprintf(p->dir, sizeof(p->dir), "%s", mounts[i]);
			break;
		}
	}
	if (!p->dir[0])
		return -1;
	sweep(p->dir);
	snprintf(p->group, sizeof(p->group), GROUP_PREFIX "%d_%u",
		 (int)getpid(), __atomic_fetch_add(&serial, 1, __ATOMIC_RELAXED));
	for (size_t i = 0; i < n; i++) {
		char line[256];
		unsigned k = events[i];
		if (k > p->n || k >= CP_TRACEFS_PROBES_MAX)
			goto fail; /* not in the order of first use */
		int len = snprintf(line, sizeof(line), "%c:%s/e%u %s:0x%llx\n",
				   rets[i] ? 'r' : 'p', p->group, k, paths[i],
				   (unsigned long long)offsets[i]);
		if (len < 0 || (size_t)len >= sizeof(line) ||
		    write_line(p->dir, line) < 0)
			goto fail;
		if (k == p->n) {
			p->n = k + 1;
			if (!read_id(p->dir, p->group, k, &p->ids[k]))
				goto fail;
		}
	}
	return 0;
fail:
	cp_tracefs_probes_remove(p);
	return -1;
}

void cp_tracefs_probes_remove(struct cp_tracefs_probes *p)
{
	for (size_t i = 0; i < p->n; i++) {
		char line[96];
		snprintf(line, sizeof(line), "-:%s/e%zu\n", p->group, i);
		write_line(p->dir, line);
	}
	p->n = 0;
}
