/* startup_bench.c — what one daemon costs to start, with many of them.
 *
 * Runs `traffic` with a daemon per component (N = 128 and 512 daemons over
 * ipc, one token, N messages: the simulation itself is negligible) and
 * prints per daemon:
 *   - CPU ms: user + system time of the launcher and all its daemons
 *     (RUSAGE_CHILDREN), divided by the daemons;
 *   - RSS MB and private MB (resident minus file-backed/shared pages): the
 *     sum over the launcher's children, sampled every 50 ms while the run
 *     is up, at the sample with the most of them alive, divided by them.
 * Daemons map the topology the launcher built from the sealed job file
 * (rt_topology_map) instead of building and sorting every link themselves.
 * Figures are printed, never asserted. Needs KB_BIN (set by `make bench`). */
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct sample {
	int alive;          /* children seen */
	double rss_mb;      /* their summed resident memory */
	double private_mb;  /* ... minus shared (file-backed) pages */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_children_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_CHILDREN, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* Parent pid from /proc/PID/stat (the field after the closing paren). */
static long parent_of(const char *pid)
{
	char path[300], buf[512], *close;
	FILE *f;
	long ppid = -1;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f) && (close = strrchr(buf, ')')))
		sscanf(close + 2, "%*c %ld", &ppid);
	fclose(f);
	return ppid;
}

/* The children of `launcher` now: how many, and their memory. */
static struct sample sample_children(pid_t launcher)
{
	struct sample s = { 0 };
	long page = sysconf(_SC_PAGESIZE);
	DIR *d = opendir("/proc");
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char path[300];
		long size, resident, shared;
		FILE *f;

		if (e->d_name[0] < '1' || e->d_name[0] > '9' || parent_of(e->d_name) != launcher)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/statm", e->d_name);
		f = fopen(path, "r");
		if (f && fscanf(f, "%ld %ld %ld", &size, &resident, &shared) == 3) {
			s.alive++;
			s.rss_mb += (double)(resident * page) / (1 << 20);
			s.private_mb += (double)((resident - shared) * page) / (1 << 20);
		}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return s;
}

/* One run with `n` daemons; 0 on success. */
static int measure(int n)
{
	const char *bin = getenv("KB_BIN") ? getenv("KB_BIN") : "build/bin/kernbench";
	char out[64], comps[32], msgs[32], cmd[128];
	const char *argv[] = { bin, "run", "traffic", "--quiet", "--trace", "off", "--transport",
			       "ipc", "--colocate", "none", "--arg", comps, "--arg", msgs, "--arg",
			       "tokens=1", "--out", out, NULL };
	struct sample best = { 0 };
	double cpu0 = cpu_children_s(), t0 = now_s(), wall;
	int status = 0;
	pid_t pid;

	snprintf(out, sizeof(out), "/tmp/kb-startup-bench-%d", (int)getpid());
	snprintf(comps, sizeof(comps), "components=%d", n);
	snprintf(msgs, sizeof(msgs), "messages=%d", n);
	if (posix_spawn(&pid, bin, NULL, NULL, (char *const *)argv, environ))
		return 1;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		struct sample s = sample_children(pid);

		if (s.alive > best.alive)
			best = s;
		usleep(50000);
	}
	wall = now_s() - t0;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", out);
	if (system(cmd) != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !best.alive) {
		printf("  %4d  kernbench run failed (status %d)\n", n, status);
		return 1;
	}
	printf("  %4d  %8.1f  %14.1f  %12.1f  %14.1f  (%d alive at once)\n", n, wall,
	       (cpu_children_s() - cpu0) * 1e3 / n, best.rss_mb / best.alive,
	       best.private_mb / best.alive, best.alive);
	return 0;
}

int main(void)
{
	static const int sizes[] = { 128, 512 };

	printf("daemon start-up (traffic, a daemon per component, ipc, trace off)\n");
	printf("  %4s  %8s  %14s  %12s  %14s\n", "N", "wall s", "CPU ms/daemon", "RSS MB/daemon",
	       "private MB/dmn");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (measure(sizes[i]))
			return 1;
	return 0;
}
