/* tidy.c — see tidy.h. */
#include "tidy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* `inside`: an entry of a folder being removed, where a link of ours goes
 * too (the link itself, never what it points at). */
static void remove_entry(int at, const char *name, bool dirs, bool inside)
{
	struct stat st;

	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) || st.st_uid != geteuid())
		return;
	if (S_ISREG(st.st_mode) || S_ISSOCK(st.st_mode) || (inside && S_ISLNK(st.st_mode))) {
		unlinkat(at, name, 0);
	} else if (S_ISDIR(st.st_mode) && dirs) {
		int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		struct dirent *e;

		if (!d) {
			if (fd >= 0)
				close(fd);
			return;
		}
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				remove_entry(dirfd(d), e->d_name, true, true);
		closedir(d);
		unlinkat(at, name, AT_REMOVEDIR);
	}
}

void kb_remove_owned(int at, const char *name, bool dirs)
{
	remove_entry(at, name, dirs, false);
}

void kb_sweep_dead_tmp(const char *prefix)
{
	DIR *d = opendir("/tmp");
	struct dirent *e;
	char pattern[64];

	snprintf(pattern, sizeof(pattern), "%s%%d-%%n", prefix);
	while (d && (e = readdir(d))) {
		int pid = 0, used = 0;

		if (sscanf(e->d_name, pattern, &pid, &used) != 1 || !used || pid <= 0 ||
		    strlen(e->d_name + used) != 6 || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		kb_remove_owned(dirfd(d), e->d_name, true);
	}
	if (d)
		closedir(d);
}

/* What getdents64 returns (its header, linux_dirent64). */
struct dirent64_rec {
	unsigned long long ino;
	long long off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

/* Empties folder `fd` (entries of ours only, links not followed), at most
 * `depth` levels down; no allocation, no stdio. */
static void empty_now(int fd, int depth)
{
	char buf[4096] __attribute__((aligned(8)));
	long n;

	while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long at = 0; at < n;) {
			struct dirent64_rec *e = (struct dirent64_rec *)(buf + at);
			struct stat st;

			at += e->reclen;
			if (!strcmp(e->name, ".") || !strcmp(e->name, "..") ||
			    fstatat(fd, e->name, &st, AT_SYMLINK_NOFOLLOW) || st.st_uid != geteuid())
				continue;
			if (S_ISDIR(st.st_mode) && depth > 0) {
				int sub = openat(fd, e->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
							      O_CLOEXEC);

				if (sub >= 0) {
					empty_now(sub, depth - 1);
					close(sub);
				}
				unlinkat(fd, e->name, AT_REMOVEDIR);
			} else if (!S_ISDIR(st.st_mode)) {
				unlinkat(fd, e->name, 0);
			}
		}
	}
}

/* Rounds of emptying a folder that files keep appearing in. */
#define REMOVE_ROUNDS 8

void kb_remove_tree_now(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return;
	if (fstat(fd, &st) || st.st_uid != geteuid()) {
		close(fd);
		return;
	}
	/* the other threads of a process dying of a signal (inproc daemons)
	 * run on until it dies and may write a part meanwhile: the folder is
	 * then not empty, so empty it again; once it is gone nothing can be
	 * made in it */
	for (int round = 0; round < REMOVE_ROUNDS; round++) {
		lseek(fd, 0, SEEK_SET);
		empty_now(fd, 2);
		if (!rmdir(path) || errno != ENOTEMPTY)
			break;
	}
	close(fd);
}
