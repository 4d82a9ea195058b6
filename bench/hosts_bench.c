/* hosts_bench.c — what running across hosts costs, measured side by side
 * over a real network path: network namespaces joined by a bridge
 * (tests/netns.sh), the coordinator in namespace 0, agents in 1 and 2.
 *
 * 1. Cross-host window cost ÷ a bare ZeroMQ round over the same bridge
 *    (target <= 1.3). Bare: a ROUTER in namespace 0 and one DEALER in each
 *    agent namespace exchanging one small frame each way per round, with
 *    CURVE as the run has it (and without, for reference). kernbench:
 *    windows_wall_s / global_windows of the lockstep fixture `traffic`
 *    (4 ranks, a component each, two per host, CURVE), whose windows carry
 *    almost no work — as sync_bench measures the one-host window. One
 *    daemon per host, run by its agent (--transport inproc --colocate
 *    host, ADR 0020), so a global window is the cross-host round plus the
 *    agent's own work. For reference: the same with the agent's daemons as
 *    threads (--colocate rank, a local round per window), and ring
 *    attention in data mode, whose windows also carry the kernel's work.
 *    The bare round and the traffic run alternate PAIRS times; the figure
 *    is the median of the pairs' ratios.
 * 2. Two-host per-component ring wall ÷ the one-host per-component run
 *    (target <= 1.5): ring_attention with a daemon per component, the
 *    whole command's wall (start-up included), best of 3 each.
 * Figures are printed, never asserted. Needs root for the namespaces
 * (otherwise one line says it skipped), KB_BIN and KB_ROOT (set by
 * `make bench`). */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "bench.h"
#include "bench_netns.h"
#include "bench_zmq.h"

#define ROUNDS 3000
#define PAIRS 11
#define BARE_PORT "5600"
#define RUN_PORT "5555"


/* ---------------------------------------------------------------- bare round */

struct curve {
	char server_pub[41], server_sec[41], client_pub[41], client_sec[41];
	bool on;
};

static void peer(int host, const struct curve *k)
{
	void *ctx, *s;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (!bench_net_enter(host))
		_exit(1);
	ctx = zmq_ctx_new();
	s = zmq_socket(ctx, ZMQ_DEALER);
	if (k->on) {
		zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, k->server_pub, 41);
		zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, k->client_pub, 41);
		zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, k->client_sec, 41);
	}
	bench_bare_peer(ctx, s, host, "tcp://10.77.0.1:" BARE_PORT);
}

/* The coordinator's side, in namespace 0 (a child, so this process stays
 * in the root namespace); writes µs per round to `fd`. */
static void coordinator(int fd, const struct curve *k, int n_peers)
{
	void *ctx, *s;
	int one = 1;
	double us;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (!bench_net_enter(0))
		_exit(1);
	ctx = zmq_ctx_new();
	s = bench_router(ctx);
	if (k->on) {
		zmq_setsockopt(s, ZMQ_CURVE_SERVER, &one, sizeof(one));
		zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, k->server_sec, 41);
	}
	if (zmq_bind(s, "tcp://10.77.0.1:" BARE_PORT))
		_exit(1);
	us = bench_bare_rounds(s, 1, n_peers, 0, ROUNDS);
	dprintf(fd, "%.3f\n", us);
	zmq_close(s);
	zmq_ctx_term(ctx);
	_exit(0);
}

/* µs per round between namespace 0 and namespaces 1..2, or -1. */
static double bare_round(bool curve)
{
	struct curve k = { .on = curve };
	int fds[2];
	pid_t kids[3];
	char buf[64] = "";
	ssize_t n;

	if (curve && (zmq_curve_keypair(k.server_pub, k.server_sec) ||
		      zmq_curve_keypair(k.client_pub, k.client_sec)))
		return -1;
	if (pipe(fds))
		return -1;
	kids[0] = fork();
	if (kids[0] == 0)
		coordinator(fds[1], &k, 2);
	for (int p = 1; p <= 2; p++) {
		kids[p] = fork();
		if (kids[p] == 0)
			peer(p, &k);
	}
	close(fds[1]);
	n = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	for (int i = 0; i < 3; i++)
		waitpid(kids[i], NULL, 0);
	return n > 0 ? atof(buf) : -1;
}

/* ---------------------------------------------------------------- kernbench runs */

/* A job: the workload's fixed arguments, then --colocate/--transport. */
struct job {
	const char *const *fixed;
	size_t n_fixed;
	const char *colocate, *transport;
};

/* ring attention: 4 ranks x 1 PE, small heads, data mode */
static const char *const ring_fixed[] = {
	"run", "ring_attention", "--ranks", "4", "--pes", "1", "--mode", "data",
	"--arg", "heads_q=4", "--arg", "heads_kv=2", "--arg", "head_dim=32", "--arg",
	"tile=16", "--arg", "seq_kv=64", "--arg", "pass=kv", "--trace", "off", "--quiet",
};

/* the lockstep fixture: 4 components, one per rank, little work per window */
static const char *const traffic_fixed[] = {
	"run", "traffic", "--ranks", "4", "--arg", "components=4", "--arg", "messages=40000",
	"--trace", "off", "--quiet",
};

#define JOB(fixed, colocate, transport) \
	((struct job){ fixed, sizeof(fixed) / sizeof(fixed[0]), colocate, transport })

static int job_args(char **argv, int n, const struct job *job, const char *out)
{
	for (size_t i = 0; i < job->n_fixed; i++)
		argv[n++] = (char *)job->fixed[i];
	argv[n++] = (char *)"--colocate";
	argv[n++] = (char *)job->colocate;
	argv[n++] = (char *)"--transport";
	argv[n++] = (char *)job->transport;
	argv[n++] = (char *)"--out";
	argv[n++] = (char *)out;
	argv[n] = NULL;
	return n;
}

/* Starts argv in namespace `host` (host < 0: here); stderr to /dev/null. */
static pid_t start(int host, char *const argv[])
{
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (host >= 0 && !bench_net_enter(host))
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Wall seconds of the one-host run (here), or -1. */
static double one_host(const struct job *job, const char *out)
{
	char *argv[48];
	double t0 = bench_now_s();

	argv[0] = getenv("KB_BIN");
	job_args(argv, 1, job, out);
	return bench_exited_0(start(-1, argv)) ? bench_now_s() - t0 : -1;
}

/* Wall seconds of the two-host run over the bridge, or -1. */
static double two_hosts(const struct job *job, const char *out, const char *hosts,
			const char *keys)
{
	char *run[48], *agent[12], idx[2][4];
	pid_t pid[3];
	double t0 = bench_now_s();
	bool all = true;
	int n;

	run[0] = getenv("KB_BIN");
	n = job_args(run, 1, job, out);
	run[n++] = (char *)"--hosts";
	run[n++] = (char *)hosts;
	run[n++] = (char *)"--keys";
	run[n++] = (char *)keys;
	run[n] = NULL;
	pid[0] = start(0, run);
	for (int h = 0; h < 2; h++) {
		char *a[] = { getenv("KB_BIN"), (char *)"agent", (char *)"--coordinator",
			      (char *)"tcp://10.77.0.1:" RUN_PORT, (char *)"--index", idx[h],
			      (char *)"--keys", (char *)keys, NULL };

		snprintf(idx[h], sizeof(idx[h]), "%d", h);
		memcpy(agent, a, sizeof(a));
		pid[h + 1] = start(h + 1, agent);
	}
	for (int i = 0; i < 3; i++)
		all &= bench_exited_0(pid[i]);
	return all ? bench_now_s() - t0 : -1;
}

static double best_of(int n, double (*one)(void))
{
	double best = -1;

	for (int i = 0; i < n; i++) {
		double t = one();

		if (t > 0 && (best < 0 || t < best))
			best = t;
	}
	return best;
}

static char hosts_path[200], keys_path[200], out_one[200], out_two[200];

static double one_host_none(void)
{
	return one_host(&JOB(ring_fixed, "none", "ipc"), out_one);
}

static double two_hosts_none(void)
{
	return two_hosts(&JOB(ring_fixed, "none", "ipc"), out_two, hosts_path, keys_path);
}

static double bare_plain_round(void)
{
	return bare_round(false);
}

/* µs per global window of a two-host run, or -1. */
static double global_window_us(const struct job *job)
{
	if (two_hosts(job, out_two, hosts_path, keys_path) < 0)
		return -1;
	return bench_summary_number(out_two, "windows_wall_s") /
	       bench_summary_number(out_two, "global_windows") * 1e6;
}

static double traffic_window_us(void)
{
	return global_window_us(&JOB(traffic_fixed, "host", "inproc"));
}

static double traffic_threads_window_us(void)
{
	return global_window_us(&JOB(traffic_fixed, "rank", "inproc"));
}

static double ring_window_us(void)
{
	return global_window_us(&JOB(ring_fixed, "host", "inproc"));
}

/* The ring job on one host: what its window costs without the network. */
static double one_host_window_us(void)
{
	if (one_host(&JOB(ring_fixed, "rank", "inproc"), out_one) < 0)
		return -1;
	return bench_summary_number(out_one, "windows_wall_s") /
	       bench_summary_number(out_one, "windows") * 1e6;
}

int main(void)
{
	char args[64], cmd[400];
	double bare, bare_plain, one, two, win_us, threads_us, ring_us, one_win_us, global, local;
	double ring_global, ratio, bares[PAIRS], wins[PAIRS], ratios[PAIRS];
	FILE *f;

	if (!getenv("KB_BIN")) {
		fprintf(stderr, "hosts_bench: KB_BIN is not set (run it with `make bench`)\n");
		return 2;
	}
	if (geteuid() != 0 || bench_netns("probe") != 0) {
		printf("hosts_bench: skipped: needs root and network namespaces (tests/netns.sh probe)\n");
		return 0;
	}
	snprintf(bench_net_id, sizeof(bench_net_id), "%dq", (int)getpid());
	snprintf(args, sizeof(args), "up %s 3", bench_net_id);
	atexit(bench_net_down);
	signal(SIGINT, bench_net_on_signal);
	signal(SIGTERM, bench_net_on_signal);
	if (bench_netns(args) != 0) {
		fprintf(stderr, "hosts_bench: could not set up namespaces\n");
		return 1;
	}
	snprintf(bench_tmp_dir, sizeof(bench_tmp_dir), "/tmp/kb-hosts-bench-XXXXXX");
	if (!mkdtemp(bench_tmp_dir)) {
		bench_tmp_dir[0] = '\0';
		return 1;
	}
	snprintf(hosts_path, sizeof(hosts_path), "%s/hosts.yaml", bench_tmp_dir);
	snprintf(keys_path, sizeof(keys_path), "%s/run.keys", bench_tmp_dir);
	snprintf(out_one, sizeof(out_one), "%s/one", bench_tmp_dir);
	snprintf(out_two, sizeof(out_two), "%s/two", bench_tmp_dir);
	f = fopen(hosts_path, "w");
	if (!f)
		return 1;
	fprintf(f, "coordinator: tcp://10.77.0.1:" RUN_PORT "\nhosts:\n  - ranks: [0, 1]\n"
		"  - ranks: [2, 3]\n");
	fclose(f);
	snprintf(cmd, sizeof(cmd), "'%s' keygen --out '%s'", getenv("KB_BIN"), keys_path);
	if (system(cmd) != 0)
		return 1;

	printf("runs across hosts: namespaces on a bridge (10.77.0.0/24), coordinator + 2 agents, "
	       "CURVE\n");
	/* the target pair alternated, PAIRS times: a virtual machine's wake-up
	 * costs drift by tens of percent within seconds, and a drift slows
	 * both sides of one pair alike; the median pair is the figure */
	for (int i = 0; i < PAIRS; i++) {
		bares[i] = bare_round(true);
		wins[i] = traffic_window_us();
		if (bares[i] <= 0 || wins[i] <= 0) {
			fprintf(stderr, "hosts_bench: a bare round or a traffic run failed\n");
			return 1;
		}
		ratios[i] = wins[i] / bares[i];
	}
	global = bench_summary_number(out_two, "global_windows");
	local = bench_summary_number(out_two, "windows");
	bare = bench_median(bares, PAIRS);
	win_us = bench_median(wins, PAIRS);
	ratio = bench_median(ratios, PAIRS);
	/* the rest for reference: best of 3 (the least disturbed) */
	bare_plain = best_of(3, bare_plain_round);
	printf("  bare ZeroMQ round over the bridge, 2 peers:  %8.1f us (CURVE, median of %d), "
	       "%8.1f us (plain, best of 3); %d rounds each\n", bare, PAIRS, bare_plain, ROUNDS);
	threads_us = best_of(3, traffic_threads_window_us);
	ring_us = best_of(3, ring_window_us);
	ring_global = bench_summary_number(out_two, "global_windows");
	one_win_us = best_of(3, one_host_window_us);
	if (win_us < 0 || threads_us < 0 || ring_us < 0 || one_win_us < 0) {
		fprintf(stderr, "hosts_bench: a --colocate rank run failed\n");
		return 1;
	}
	printf("  cross-host global window, traffic (4 ranks, 2 per host), a daemon per host:  "
	       "%8.1f us  (median of %d; %.0f global windows, %.2f local windows each)\n", win_us,
	       PAIRS, global, local / global);
	printf("  the same, 2 daemon threads per agent (a local round each window):      "
	       "%8.1f us\n", threads_us);
	printf("  cross-host global window, ring attention 4x1, data, a daemon per host: "
	       "%8.1f us  (%.0f global windows)\n", ring_us, ring_global);
	printf("  the same ring job on one host (4 daemon threads):                       "
	       "%8.1f us  (its work plus a local round)\n", one_win_us);

	one = best_of(3, one_host_none);
	two = best_of(3, two_hosts_none);
	if (one < 0 || two < 0) {
		fprintf(stderr, "hosts_bench: a per-component ring run failed\n");
		return 1;
	}
	printf("  ring 4x1 per component, wall (best of 3): one host %.3f s, two hosts %.3f s\n",
	       one, two);
	printf("ratios:\n");
	printf("  cross-host window / bare round (CURVE)   %6.2f   (target <= 1.3; median of %d "
	       "alternated pairs, %.2f to %.2f)\n", ratio, PAIRS, ratios[0], ratios[PAIRS - 1]);
	printf("  ring attention: (cross-host window - one-host window) / bare round   %6.2f   "
	       "(what the network level adds to a window with work)\n", (ring_us - one_win_us) / bare);
	printf("  two-host ring wall / one-host ring wall  %6.2f   (target <= 1.5)\n", two / one);
	return 0;
}
