/* strays.c — see strays.h. Moved out of launch.c: a signal handler
 * (stops.c) and the host module both end what kernels forked. */
#include "strays.h"

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The one child that is left to end by itself, or told to (SPMD process
 * 0's own agent, spmd.c): it removes its own folders; its parent reaps it. */
static volatile pid_t spared_child;

void kb_spare_child(pid_t pid)
{
	spared_child = pid;
}

/* Reaps one ended child other than the spared one (its parent waits for
 * it): its pid, or 0/-1 as waitpid. */
static pid_t reap_stray(void)
{
	siginfo_t info = { 0 };

	if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) || !info.si_pid)
		return 0;
	if (info.si_pid == spared_child)
		return 0;
	return waitpid(info.si_pid, NULL, WNOHANG);
}

/* Kills and reaps every child that is not a daemon: what kernels forked,
 * re-parented to us (we are a subreaper) when their daemon ended. */
void kb_kill_strays(void)
{
	for (int round = 0; round < 100; round++) {
		char path[64], line[4096];
		bool any = false;
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
		f = fopen(path, "r");
		if (!f)
			return;
		while (fscanf(f, "%4095s", line) == 1) {
			pid_t pid = (pid_t)strtol(line, NULL, 10);

			if (pid > 0 && pid != spared_child) {
				kill(pid, SIGKILL);
				any = true;
			}
		}
		fclose(f);
		while (reap_stray() > 0)
			any = true;
		if (!any)
			return;
		usleep(1000);
	}
}

void kb_kill_strays_now(void)
{
	char path[64] = "/proc/self/task/", buf[4096];
	size_t used = strlen(path);
	pid_t self = getpid(), pid = 0;
	ssize_t n;
	int fd;

	/* "/proc/self/task/PID/children" without snprintf */
	for (pid_t p = self, div = 1; p / div >= 10; div *= 10)
		;
	{
		char digits[16];
		int k = 0;

		for (pid_t p = self; p; p /= 10)
			digits[k++] = (char)('0' + p % 10);
		while (k)
			path[used++] = digits[--k];
		memcpy(path + used, "/children", 10);
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] >= '0' && buf[i] <= '9') {
				pid = pid * 10 + (buf[i] - '0');
			} else {
				if (pid > 0)
					kill(pid, pid == spared_child ? SIGTERM : SIGKILL);
				pid = 0;
			}
		}
	if (pid > 0)
		kill(pid, pid == spared_child ? SIGTERM : SIGKILL);
	close(fd);
}
