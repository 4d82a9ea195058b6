/* mesh_bench.c — how the cross-host window and the coordinator's traffic
 * grow with hosts (issue 20, ADR 0066/0067), over network namespaces
 * joined by a bridge (tests/netns.sh): the coordinator in namespace 0, one
 * agent per host in 1..H, CURVE on, for H = 2, 4, 8, 16.
 *
 * 1. The global window's cost: windows_wall_s / global_windows of the
 *    lockstep fixture `traffic` (2 ranks per host, a component each, one
 *    daemon per host run by its agent: --colocate host --transport inproc),
 *    whose windows carry almost no work, with the barrier flat
 *    (KB_BARRIER_FANOUT=0: the coordinator grants every host) and as a tree
 *    (the default fan-out, and 2). Median of REPS runs.
 * 2. What crosses the coordinator's link: the bytes its namespace sent
 *    (kb0's tx counter) during a data-mode ring (ring_attention, one rank
 *    of 2 PEs per host, pass=kv), against the bytes all agents sent.
 * With KB_BIN_BEFORE (a build of the code before ADR 0066, whose
 * coordinator routes every message) the same figures are taken with it,
 * side by side. Figures are printed, never asserted. Needs root
 * (otherwise one line says it skipped), KB_BIN and KB_ROOT (`make bench`);
 * MESH_BENCH_HOSTS="2 4" measures fewer host counts. */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define MAX_HOSTS 16
#define REPS 3
#define RUN_PORT "5555"

static char net_id[16];
static char tmp_dir[128];

static int netns(const char *args)
{
	char cmd[1200];
	const char *root = getenv("KB_ROOT");

	snprintf(cmd, sizeof(cmd), "sh '%s/tests/netns.sh' %s", root ? root : ".", args);
	return system(cmd);
}

static void down(void)
{
	char args[64], cmd[200];

	if (net_id[0]) {
		snprintf(args, sizeof(args), "down %s", net_id);
		netns(args);
		net_id[0] = '\0';
	}
	if (tmp_dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "mesh_bench: could not remove %s\n", tmp_dir);
		tmp_dir[0] = '\0';
	}
}

static void on_signal(int sig)
{
	down();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Moves this process into namespace `ns`. */
static bool enter(int ns)
{
	char path[128];
	int fd;
	bool ok;

	snprintf(path, sizeof(path), "/run/netns/kb-%s-h%d", net_id, ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ok = setns(fd, CLONE_NEWNET) == 0;
	close(fd);
	return ok;
}

/* Starts argv in namespace `ns` with KB_BARRIER_FANOUT=fanout (NULL:
 * unset); output to /dev/null. */
static pid_t start(int ns, char *const argv[], const char *fanout)
{
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (fanout)
			setenv("KB_BARRIER_FANOUT", fanout, 1);
		else
			unsetenv("KB_BARRIER_FANOUT");
		if (!enter(ns))
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

static bool ok(pid_t pid)
{
	int st;

	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Bytes namespace `ns` sent on kb0 so far (its /proc/net/dev), or 0. */
static double tx_bytes(int ns)
{
	int fds[2];
	pid_t pid;
	char buf[64] = "";
	ssize_t n;

	if (pipe(fds))
		return 0;
	pid = fork();
	if (pid == 0) {
		FILE *f;
		char line[512];
		unsigned long long v[16];

		close(fds[0]);
		if (!enter(ns) || !(f = fopen("/proc/self/net/dev", "r")))
			_exit(1);
		while (fgets(line, sizeof(line), f)) {
			char *colon = strchr(line, ':');

			if (!colon || !strstr(line, "kb0:"))
				continue;
			if (sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
				   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) == 9)
				dprintf(fds[1], "%llu", v[8]);
		}
		_exit(0);
	}
	close(fds[1]);
	n = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	waitpid(pid, NULL, 0);
	return n > 0 ? atof(buf) : 0;
}

static char keys_path[200], hosts_path[200], out_dir[200];

/* The hosts file for `hosts` hosts of `per` ranks each. */
static void write_hosts(int hosts, int per)
{
	FILE *f = fopen(hosts_path, "w");

	if (!f)
		return;
	fprintf(f, "coordinator: tcp://10.77.0.1:" RUN_PORT "\nhosts:\n");
	for (int h = 0; h < hosts; h++) {
		fprintf(f, "  - ranks: [");
		for (int r = 0; r < per; r++)
			fprintf(f, "%s%d", r ? ", " : "", h * per + r);
		fprintf(f, "]\n");
	}
	fclose(f);
}

/* One run over `hosts` agents with binary `bin`; the coordinator's and
 * the agents' bytes sent in *coord_tx / *agents_tx. False if it failed. */
static bool run_hosts(const char *bin, char **run_args, int hosts, const char *fanout,
		      double *coord_tx, double *agents_tx)
{
	char *run[64], idx[MAX_HOSTS][4];
	pid_t pid[MAX_HOSTS + 1];
	double before_c = tx_bytes(0), before_a = 0, after_a = 0;
	bool all = true;
	int n = 0;
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", out_dir);
	if (system(cmd) != 0)
		return false;
	for (int h = 1; h <= hosts; h++)
		before_a += tx_bytes(h);
	run[n++] = (char *)bin;
	for (char **a = run_args; *a; a++)
		run[n++] = *a;
	run[n++] = (char *)"--hosts";
	run[n++] = hosts_path;
	run[n++] = (char *)"--keys";
	run[n++] = keys_path;
	run[n++] = (char *)"--out";
	run[n++] = out_dir;
	run[n] = NULL;
	pid[0] = start(0, run, fanout);
	for (int h = 0; h < hosts; h++) {
		char *agent[] = { (char *)bin, (char *)"agent", (char *)"--coordinator",
				  (char *)"tcp://10.77.0.1:" RUN_PORT, (char *)"--index", idx[h],
				  (char *)"--keys", keys_path, NULL };

		snprintf(idx[h], sizeof(idx[h]), "%d", h);
		pid[h + 1] = start(h + 1, agent, fanout);
	}
	for (int i = 0; i <= hosts; i++)
		all &= ok(pid[i]);
	for (int h = 1; h <= hosts; h++)
		after_a += tx_bytes(h);
	*coord_tx = tx_bytes(0) - before_c;
	*agents_tx = after_a - before_a;
	return all;
}

/* µs per global window of the traffic fixture (median of REPS), or -1. */
static double window_us(const char *bin, int hosts, const char *fanout)
{
	char ranks[8], comps[32];
	char *args[] = { (char *)"run", (char *)"traffic", (char *)"--ranks", ranks,
			 (char *)"--arg", comps, (char *)"--arg", (char *)"messages=20000",
			 (char *)"--colocate", (char *)"host", (char *)"--transport",
			 (char *)"inproc", (char *)"--trace", (char *)"off", (char *)"--quiet",
			 NULL };
	double v[REPS], c, a;
	int got = 0;

	snprintf(ranks, sizeof(ranks), "%d", 2 * hosts);
	snprintf(comps, sizeof(comps), "components=%d", 2 * hosts);
	write_hosts(hosts, 2);
	for (int i = 0; i < REPS; i++)
		if (run_hosts(bin, args, hosts, fanout, &c, &a))
			v[got++] = bench_summary_number(out_dir, "windows_wall_s") /
				   bench_summary_number(out_dir, "global_windows") * 1e6;
	return got ? bench_median(v, got) : -1;
}

/* The data ring's bytes: the coordinator's, the agents' (MB), and the
 * window (µs). False if it failed. */
static bool ring_bytes(const char *bin, int hosts, double *coord_mb, double *agents_mb,
		       double *win_us)
{
	char ranks[8];
	char *args[] = { (char *)"run", (char *)"ring_attention", (char *)"--ranks", ranks,
			 (char *)"--pes", (char *)"2", (char *)"--mode", (char *)"data",
			 (char *)"--arg", (char *)"pass=kv", (char *)"--arg", (char *)"heads_q=4",
			 (char *)"--arg", (char *)"heads_kv=2", (char *)"--arg",
			 (char *)"head_dim=64", (char *)"--arg", (char *)"seq_kv=256",
			 (char *)"--colocate", (char *)"host", (char *)"--transport",
			 (char *)"inproc", (char *)"--trace", (char *)"off", (char *)"--quiet",
			 NULL };
	double c, a;

	snprintf(ranks, sizeof(ranks), "%d", hosts);
	write_hosts(hosts, 1);
	if (!run_hosts(bin, args, hosts, NULL, &c, &a))
		return false;
	*coord_mb = c / 1e6;
	*agents_mb = a / 1e6;
	*win_us = bench_summary_number(out_dir, "windows_wall_s") /
		  bench_summary_number(out_dir, "global_windows") * 1e6;
	return true;
}

static void print_row(const char *what, int hosts, double v)
{
	if (v < 0)
		printf("| %-44s | %2d | failed |\n", what, hosts);
	else
		printf("| %-44s | %2d | %.1f |\n", what, hosts, v);
}

int main(void)
{
	const char *bin = getenv("KB_BIN"), *before = getenv("KB_BIN_BEFORE");
	const char *list = getenv("MESH_BENCH_HOSTS");
	int counts[8], n_counts = 0;
	char args[64], cmd[400];

	if (!bin || getuid() != 0 || netns("probe 2>/dev/null") != 0) {
		printf("mesh_bench: skipped (needs root, network namespaces and KB_BIN)\n");
		return 0;
	}
	for (const char *p = list ? list : "2 4 8 16"; *p && n_counts < 8;) {
		char *end;
		long h = strtol(p, &end, 10);

		if (end == p)
			break;
		if (h >= 2 && h <= MAX_HOSTS)
			counts[n_counts++] = (int)h;
		p = end;
	}
	snprintf(net_id, sizeof(net_id), "%dm", (int)getpid());
	snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/kb-mesh-bench-%d", (int)getpid());
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	snprintf(args, sizeof(args), "up %s %d", net_id, MAX_HOSTS + 1);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", tmp_dir);
	if (netns(args) != 0 || system(cmd) != 0) {
		down();
		printf("mesh_bench: skipped (cannot make the namespaces)\n");
		return 0;
	}
	snprintf(keys_path, sizeof(keys_path), "%s/keys", tmp_dir);
	snprintf(hosts_path, sizeof(hosts_path), "%s/hosts.yaml", tmp_dir);
	snprintf(out_dir, sizeof(out_dir), "%s/out", tmp_dir);
	snprintf(cmd, sizeof(cmd), "'%s' keygen --out '%s' >/dev/null", bin, keys_path);
	if (system(cmd) != 0) {
		down();
		printf("mesh_bench: skipped (keygen failed)\n");
		return 1;
	}
	printf("| figure | hosts | value |\n| --- | --- | --- |\n");
	for (int i = 0; i < n_counts; i++) {
		int h = counts[i];
		double cmb, amb, win;

		if (before)
			print_row("window µs, traffic, before (coordinator routes)", h,
				  window_us(before, h, NULL));
		print_row("window µs, traffic, flat barrier", h, window_us(bin, h, "0"));
		print_row("window µs, traffic, tree barrier (fan-out 2)", h, window_us(bin, h, "2"));
		print_row("window µs, traffic, tree barrier (default fan-out)", h,
			  window_us(bin, h, NULL));
		if (before && ring_bytes(before, h, &cmb, &amb, &win)) {
			print_row("ring data: coordinator sent MB, before", h, cmb);
			print_row("ring data: agents sent MB, before", h, amb);
			print_row("ring data: window µs, before", h, win);
		}
		if (ring_bytes(bin, h, &cmb, &amb, &win)) {
			print_row("ring data: coordinator sent MB", h, cmb);
			print_row("ring data: agents sent MB", h, amb);
			print_row("ring data: window µs", h, win);
		}
		fflush(stdout);
	}
	down();
	return 0;
}
