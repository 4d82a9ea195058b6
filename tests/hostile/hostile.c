/* hostile.c — see hostile.h. */
#include "hostile.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../integration/harness.h"

pid_t kbh_spawn(char *const argv[], const char *errpath, int resource, rlim_t value,
		bool own_group)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int null = open("/dev/null", O_WRONLY);
		struct rlimit rl = { value, value };

		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (own_group)
			setpgid(0, 0);
		dup2(fd, 2);
		dup2(null, 1);
		if (resource >= 0 && setrlimit(resource, &rl))
			_exit(126);
		execv(kb_bin(), argv);
		_exit(127);
	}
	if (own_group)
		setpgid(pid, pid);
	return pid;
}

pid_t kbh_spawn_as(uid_t uid, char *const argv[], const char *errpath)
{
	pid_t pid;

	if (geteuid() != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0666);
		int null = open("/dev/null", O_WRONLY);

		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (fd >= 0)
			fchmod(fd, 0666); /* the test reads it back whoever wrote it */
		dup2(fd, 2);
		dup2(null, 1);
		if (setgroups(0, NULL) || setgid((gid_t)uid) || setuid(uid))
			_exit(126);
		prctl(PR_SET_PDEATHSIG, SIGTERM); /* cleared by the change of user */
		execv(kb_bin(), argv);
		_exit(127);
	}
	return pid;
}

uid_t kbh_nobody(void)
{
	struct passwd *pw = getpwnam("nobody");

	return pw ? pw->pw_uid : 65534;
}

bool kbh_ipc_endpoint(pid_t launcher, char *endpoint, size_t cap)
{
	char pattern[64];
	bool found = false;

	snprintf(pattern, sizeof(pattern), "kb-%d-", (int)launcher);
	for (int tries = 0; tries < 100 && !found; tries++) {
		DIR *d = opendir("/tmp");
		struct dirent *e;

		while (d && !found && (e = readdir(d)))
			if (!strncmp(e->d_name, pattern, strlen(pattern))) {
				snprintf(endpoint, cap, "ipc:///tmp/%s/coord", e->d_name);
				found = true;
			}
		if (d)
			closedir(d);
		if (!found)
			usleep(50000);
	}
	return found;
}

/* The launcher's socket inodes, then the LISTEN row of /proc/net/tcp that
 * has one of them. */
int kbh_tcp_port(pid_t launcher)
{
	char path[128], link[128], line[512];
	unsigned long inodes[256];
	int n = 0, port = 0;
	DIR *d;
	struct dirent *e;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)launcher);
	d = opendir(path);
	while (d && n < 256 && (e = readdir(d))) {
		char fdpath[400];
		ssize_t len;

		snprintf(fdpath, sizeof(fdpath), "%s/%s", path, e->d_name);
		len = readlink(fdpath, link, sizeof(link) - 1);
		if (len > 0) {
			link[len] = '\0';
			if (sscanf(link, "socket:[%lu]", &inodes[n]) == 1)
				n++;
		}
	}
	if (d)
		closedir(d);
	f = fopen("/proc/net/tcp", "r");
	while (f && !port && fgets(line, sizeof(line), f)) {
		unsigned int lport, state;
		unsigned long inode;

		if (sscanf(line, " %*d: %*x:%x %*x:%*x %x %*s %*s %*s %*s %*s %lu", &lport, &state,
			   &inode) != 3 || state != 0x0a)
			continue;
		for (int i = 0; i < n; i++)
			if (inodes[i] == inode)
				port = (int)lport;
	}
	if (f)
		fclose(f);
	return port;
}

int kbh_wait_children(pid_t pid, int n)
{
	pid_t kids[64];
	int got = 0;

	for (int i = 0; i < 100 && (got = kb_children(pid, kids, 64)) < n; i++)
		usleep(50000);
	return got;
}

char *kbh_stderr(const char *path)
{
	char *s = kb_slurp_stderr(path);

	return s ? s : strdup("");
}

char *kbh_read_proc(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 4096, n = 0;
	char *buf = f ? malloc(cap + 1) : NULL;

	while (buf) {
		size_t got = fread(buf + n, 1, cap - n, f);

		n += got;
		if (got == 0)
			break;
		if (n == cap) {
			char *grown = realloc(buf, cap * 2 + 1);

			if (!grown) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = grown;
			cap *= 2;
		}
	}
	if (f)
		fclose(f);
	if (buf)
		buf[n] = '\0';
	*len = n;
	return buf;
}
