/* bench_netns.h — network namespaces as hosts for the benches across hosts
 * (hosts_bench, mesh_bench): tests/netns.sh's sets, entering one, and
 * tearing the set and the bench's temporary folder down on exit or on a
 * signal. Each bench names its set (bench_net_id) and folder
 * (bench_tmp_dir) before `up`. */
#ifndef KB_BENCH_NETNS_H
#define KB_BENCH_NETNS_H

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static char bench_net_id[16];   /* the set's id: pid + a letter */
static char bench_tmp_dir[128]; /* the bench's folder in /tmp, or "" */

/* sh tests/netns.sh ARGS (KB_ROOT: the source tree). */
static inline int bench_netns(const char *args)
{
	char cmd[1200];
	const char *root = getenv("KB_ROOT");

	snprintf(cmd, sizeof(cmd), "sh '%s/tests/netns.sh' %s", root ? root : ".", args);
	return system(cmd);
}

/* The namespaces and the folder, gone (idempotent). */
static inline void bench_net_down(void)
{
	char args[64], cmd[200];

	if (bench_net_id[0]) {
		snprintf(args, sizeof(args), "down %s", bench_net_id);
		bench_netns(args);
		bench_net_id[0] = '\0';
	}
	if (bench_tmp_dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", bench_tmp_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "bench: could not remove %s\n", bench_tmp_dir);
		bench_tmp_dir[0] = '\0';
	}
}

static inline void bench_net_on_signal(int sig)
{
	bench_net_down();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Moves this process into namespace `host` of the set. */
static inline bool bench_net_enter(int host)
{
	char path[128];
	int fd;
	bool ok;

	snprintf(path, sizeof(path), "/run/netns/kb-%s-h%d", bench_net_id, host);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ok = setns(fd, CLONE_NEWNET) == 0;
	close(fd);
	return ok;
}

/* Waits for child `pid`: true if it exited 0. */
static inline bool bench_exited_0(pid_t pid)
{
	int st;

	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

#endif
