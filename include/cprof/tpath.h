/* Opening files whose paths the target controls.
 *
 * cprof runs as root against programs it does not trust, and some of the
 * files it reads are named by the target: /tmp/perf-PID.map, the module
 * paths of /proc/PID/maps, the directories beside them where separate
 * debug files are looked for, the .gnu_debuglink names inside its files.
 * A target can put anything at such a path: a FIFO (an open or a read
 * that never returns), a device (/dev/zero: a read that never ends), a
 * symbolic link to a file only root may read, a link out of its container
 * into the host's files.  Every such file is opened here, with these
 * rules:
 *
 *   - Nothing but a regular file is ever opened for reading: the path is
 *     first opened with O_PATH (which opens no device and no FIFO) and
 *     checked with fstat; only then is that very inode reopened, read-only
 *     and non-blocking, through /proc/self/fd.
 *   - A symbolic link as the last component is refused (CP_TPATH_NOFOLLOW).
 *   - A path in the target's view of the file system is resolved under
 *     /proc/PID/root with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
 *     (CP_TPATH_IN_ROOT): a container's absolute symlinks and ".." stay in
 *     the container, and no /proc magic link leads out of it.
 *   - The target's credentials decide whose files it may name: owned by its
 *     real or effective uid or by root (CP_TPATH_OWNED), and readable by it
 *     through the mode bits (CP_TPATH_READABLE), so a hard link to a file
 *     only root may read is refused too.
 *
 * The target's mapped files have a safer name: /proc/PID/map_files/START-END
 * is the very file mapped there, whatever happened to its path since
 * (cp_tpath_open_mapped).  */
#ifndef CPROF_TPATH_H
#define CPROF_TPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Who the target is, from /proc/PID/status.  */
struct cp_tpath_creds {
	uid_t uid, euid;        /* real and effective */
	gid_t gid, egid;
	gid_t groups[64];       /* supplementary groups (the first 64) */
	size_t ngroups;
};

/* Parse the text of /proc/PID/status (TEXT, LEN bytes) into OUT: the
 * Uid:, Gid: and Groups: lines.  Returns 0, or -CP_E_PARSE when a Uid or
 * Gid line is missing or malformed.  */
int cp_tpath_creds_parse(const char *text, size_t len,
			 struct cp_tpath_creds *out);

/* Read the credentials of process PID.  Returns 0, -CP_E_NOPROC or
 * -CP_E_PARSE.  */
int cp_tpath_creds_read(pid_t pid, struct cp_tpath_creds *out);

/* Could the target with CREDS read the file ST describes itself (root, or
 * the owner, group or other read bit that applies to it)?  ACLs are not
 * looked at: a file readable only through an ACL is refused.  */
bool cp_tpath_can_read(const struct cp_tpath_creds *creds,
		       const struct stat *st);

/* Flags of cp_tpath_open.  */
enum {
	CP_TPATH_NOFOLLOW = 1 << 0,  /* refuse a symlink as last component */
	CP_TPATH_IN_ROOT = 1 << 1,   /* PATH is in the target's root (PID) */
	CP_TPATH_OWNED = 1 << 2,     /* owner: the target's uid or root */
	CP_TPATH_READABLE = 1 << 3,  /* the target could read it itself */
};

/* Open PATH for reading, by the rules above and FLAGS.  CREDS is needed
 * for CP_TPATH_OWNED and CP_TPATH_READABLE, PID for CP_TPATH_IN_ROOT.
 * Returns a file descriptor (O_RDONLY | O_NONBLOCK | O_CLOEXEC, a regular
 * file) and fills *ST (may be NULL) with its status, as it does when the
 * file was found but refused (the owner, for a message); or
 *   -CP_E_SYS   the path cannot be opened (errno: ENOENT, EACCES, ...);
 *   -CP_E_PERM  it can, but the rules refuse it: *WHY (may be NULL) says
 *               why, in a few words ("a FIFO", "a symbolic link", "owned
 *               by uid 1001, not the target's", ...; a static string).  */
int cp_tpath_open(pid_t pid, const char *path, unsigned flags,
		  const struct cp_tpath_creds *creds, struct stat *st,
		  const char **why);

/* Open the file process PID has mapped at [START, END), through
 * /proc/PID/map_files/START-END: no path is resolved, so nothing the
 * target did to the file's name since it was mapped matters.  Needs
 * CAP_SYS_ADMIN (or CAP_CHECKPOINT_RESTORE); without it, -CP_E_SYS with
 * errno EPERM, and the caller falls back on the path.  Returns a
 * descriptor as cp_tpath_open does, -CP_E_SYS, or -CP_E_PERM when the
 * mapping is not of a regular file (a device).  */
int cp_tpath_open_mapped(pid_t pid, uint64_t start, uint64_t end,
			 struct stat *st, const char **why);

/* Is NAME, a .gnu_debuglink name read from a file the target controls,
 * safe to look up in a directory?  A file name, not a path: not empty, at
 * most NAME_MAX bytes, not ".", no '/', no "..", no control character.  */
bool cp_tpath_debuglink_ok(const char *name);

#endif
