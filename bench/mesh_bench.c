/* mesh_bench.c — how the cross-host window and the coordinator's traffic
 * grow with hosts (issue 20, ADR 0066/0067), over network namespaces
 * joined by a bridge (tests/netns.sh): the coordinator in namespace 0, one
 * agent per host in 1..H, CURVE on, for H = 2, 4, 8, 16.
 *
 * 1. The global window: windows_wall_s / global_windows, and the
 *    coordinator's CPU time per global window (all its threads, during
 *    the windows: the hub's serial work, which the flat barrier makes
 *    grow with hosts; KB_REPORT_WINDOWS_CPU=1 makes it print it), of a
 *    timing-mode ring (ring_attention, one rank per host, a daemon per host
 *    run by its agent: --colocate host --transport inproc), whose windows
 *    carry little work; with the barrier flat (KB_BARRIER_FANOUT=0), as a
 *    tree of fan-out 2, and the default (8: flat up to 8 hosts). Median
 *    of REPS runs.
 * 2. What crosses the coordinator's link: the bytes its namespace sent
 *    (kb0's tx counter) during a data-mode ring (one rank of 2 PEs per
 *    host, pass=kv), against the bytes all agents' namespaces sent.
 * With KB_BIN_BEFORE (a build of the code before ADR 0066, whose
 * coordinator routes every message, with the KB_REPORT_WINDOWS_CPU hook
 * of deploy/src/launch.c added) the same figures are taken with it,
 * side by side. On a machine with few cores every process of every host
 * shares them, so the wall per window also counts the hosts' work one
 * after another. Figures are printed, never asserted. Needs root
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
#include "bench_netns.h"

#define MAX_HOSTS 16
#define REPS 3
#define RUN_PORT "5555"


/* Starts argv in namespace `ns` with KB_BARRIER_FANOUT=fanout (NULL:
 * unset) and KB_REPORT_WINDOWS_CPU=1; stderr to `errpath` (NULL:
 * /dev/null). */
static pid_t start(int ns, char *const argv[], const char *fanout, const char *errpath)
{
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		int err = errpath ? open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)
				  : null;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(null, 0);
		dup2(null, 1);
		dup2(err >= 0 ? err : null, 2);
		setenv("KB_REPORT_WINDOWS_CPU", "1", 1);
		if (fanout)
			setenv("KB_BARRIER_FANOUT", fanout, 1);
		else
			unsetenv("KB_BARRIER_FANOUT");
		if (!bench_net_enter(ns))
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* The CPU seconds the coordinator used in its windows, from the line
 * KB_REPORT_WINDOWS_CPU=1 makes it print (-1: none). */
static double windows_cpu_s(const char *errpath)
{
	FILE *f = fopen(errpath, "r");
	char line[512];
	unsigned long long windows;
	double cpu = -1, v;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "kernbench: coordinator: %llu windows, %lf s CPU", &windows, &v) == 2)
			cpu = v;
	if (f)
		fclose(f);
	return cpu;
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
		if (!bench_net_enter(ns) || !(f = fopen("/proc/self/net/dev", "r")))
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

static char keys_path[200], hosts_path[200], out_dir[200], coord_err[200];

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

/* What one run cost. */
struct cost {
	double coord_tx, agents_tx; /* bytes sent by the coordinator's, agents' namespaces */
	double coord_cpu_s;         /* CPU the coordinator used in its windows */
	double window_us;           /* windows_wall_s / global_windows */
	double coord_cpu_us;        /* coordinator CPU per global window */
};

/* One run over `hosts` agents with binary `bin`. False if it failed. */
static bool run_hosts(const char *bin, char **run_args, int hosts, const char *fanout,
		      struct cost *cost)
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
	pid[0] = start(0, run, fanout, coord_err);
	for (int h = 0; h < hosts; h++) {
		char *agent[] = { (char *)bin, (char *)"agent", (char *)"--coordinator",
				  (char *)"tcp://10.77.0.1:" RUN_PORT, (char *)"--index", idx[h],
				  (char *)"--keys", keys_path, NULL };

		snprintf(idx[h], sizeof(idx[h]), "%d", h);
		pid[h + 1] = start(h + 1, agent, fanout, NULL);
	}
	for (int i = 0; i <= hosts; i++)
		all &= bench_exited_0(pid[i]);
	cost->coord_cpu_s = windows_cpu_s(coord_err);
	for (int h = 1; h <= hosts; h++)
		after_a += tx_bytes(h);
	cost->coord_tx = tx_bytes(0) - before_c;
	cost->agents_tx = after_a - before_a;
	if (all) {
		double windows = bench_summary_number(out_dir, "global_windows");

		cost->window_us = bench_summary_number(out_dir, "windows_wall_s") / windows * 1e6;
		cost->coord_cpu_us = cost->coord_cpu_s / windows * 1e6;
	}
	return all;
}

/* The window of a timing-mode ring (one rank per host, a daemon per host
 * run by its agent), whose windows carry little work: median of REPS of
 * the wall and of the coordinator's CPU per window in *win / *cpu. */
static bool window_cost(const char *bin, int hosts, const char *fanout, double *win,
			double *cpu)
{
	char ranks[8];
	char *args[] = { (char *)"run", (char *)"ring_attention", (char *)"--ranks", ranks,
			 (char *)"--pes", (char *)"1", (char *)"--arg", (char *)"heads_q=4",
			 (char *)"--arg", (char *)"heads_kv=2", (char *)"--arg",
			 (char *)"head_dim=32", (char *)"--arg", (char *)"tile=16", (char *)"--arg",
			 (char *)"seq_kv=256", (char *)"--colocate", (char *)"host",
			 (char *)"--transport", (char *)"inproc", (char *)"--trace", (char *)"off",
			 (char *)"--quiet", NULL };
	double w[REPS], c[REPS];
	struct cost cost;
	int got = 0;

	snprintf(ranks, sizeof(ranks), "%d", hosts);
	write_hosts(hosts, 1);
	for (int i = 0; i < REPS; i++)
		if (run_hosts(bin, args, hosts, fanout, &cost)) {
			w[got] = cost.window_us;
			c[got++] = cost.coord_cpu_us;
		}
	if (!got)
		return false;
	*win = bench_median(w, got);
	*cpu = bench_median(c, got);
	return true;
}

/* A data-mode ring (2 PEs per rank, pass=kv): what the coordinator's and
 * the agents' namespaces sent. */
static bool ring_bytes(const char *bin, int hosts, struct cost *cost)
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

	snprintf(ranks, sizeof(ranks), "%d", hosts);
	write_hosts(hosts, 1);
	return run_hosts(bin, args, hosts, NULL, cost);
}

static void print_row(const char *what, int hosts, double v)
{
	if (v < 0)
		printf("| %s | %d | failed |\n", what, hosts);
	else
		printf("| %s | %d | %.1f |\n", what, hosts, v);
}

int main(void)
{
	const char *bin = getenv("KB_BIN"), *before = getenv("KB_BIN_BEFORE");
	const char *list = getenv("MESH_BENCH_HOSTS");
	int counts[8], n_counts = 0;
	char args[64], cmd[400];

	if (!bin || getuid() != 0 || bench_netns("probe 2>/dev/null") != 0) {
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
	snprintf(bench_net_id, sizeof(bench_net_id), "%dm", (int)getpid());
	snprintf(bench_tmp_dir, sizeof(bench_tmp_dir), "/tmp/kb-mesh-bench-%d", (int)getpid());
	signal(SIGINT, bench_net_on_signal);
	signal(SIGTERM, bench_net_on_signal);
	snprintf(args, sizeof(args), "up %s %d", bench_net_id, MAX_HOSTS + 1);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", bench_tmp_dir);
	if (bench_netns(args) != 0 || system(cmd) != 0) {
		bench_net_down();
		printf("mesh_bench: skipped (cannot make the namespaces)\n");
		return 0;
	}
	snprintf(keys_path, sizeof(keys_path), "%s/keys", bench_tmp_dir);
	snprintf(hosts_path, sizeof(hosts_path), "%s/hosts.yaml", bench_tmp_dir);
	snprintf(out_dir, sizeof(out_dir), "%s/out", bench_tmp_dir);
	snprintf(coord_err, sizeof(coord_err), "%s/coordinator.err", bench_tmp_dir);
	snprintf(cmd, sizeof(cmd), "'%s' keygen --out '%s' >/dev/null", bin, keys_path);
	if (system(cmd) != 0) {
		bench_net_down();
		printf("mesh_bench: skipped (keygen failed)\n");
		return 1;
	}
	printf("| figure | hosts | value |\n| --- | --- | --- |\n");
	for (int i = 0; i < n_counts; i++) {
		static const struct {
			const char *name, *fanout;
			bool before;
		} modes[] = {
			{ "before (the coordinator routes)", NULL, true },
			{ "flat barrier", "0", false },
			{ "tree, fan-out 2", "2", false },
			{ "tree, default fan-out", NULL, false },
		};
		int h = counts[i];
		struct cost cost;
		char what[128];
		double win, cpu;

		for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
			const char *b = modes[m].before ? before : bin;

			if (!b || (!modes[m].fanout && !modes[m].before && h <= 8))
				continue; /* the default fan-out is flat up to 8 hosts */
			if (!window_cost(b, h, modes[m].fanout, &win, &cpu)) {
				win = cpu = -1;
			}
			snprintf(what, sizeof(what), "window µs, %s", modes[m].name);
			print_row(what, h, win);
			snprintf(what, sizeof(what), "coordinator CPU µs per window, %s", modes[m].name);
			print_row(what, h, cpu);
			fflush(stdout);
		}
		for (int b = 0; b < 2; b++) {
			const char *which = b ? bin : before;

			if (!which || !ring_bytes(which, h, &cost))
				continue;
			snprintf(what, sizeof(what), "data ring: coordinator sent MB%s", b ? "" : ", before");
			print_row(what, h, cost.coord_tx / 1e6);
			snprintf(what, sizeof(what), "data ring: agents sent MB%s", b ? "" : ", before");
			print_row(what, h, cost.agents_tx / 1e6);
			fflush(stdout);
		}
	}
	bench_net_down();
	return 0;
}
