/* test_finish.c — issue 20 item 1: nothing is lost at the end of a run
 * across hosts (ADR 0050). Agents ship their output files in credited
 * pieces, list them in their BYE and exit 0 only once the coordinator
 * confirmed it all.
 *
 * * Shaped uplinks: network namespaces as hosts, every agent's link to
 *   the bridge shaped by `tc qdisc ... tbf` (egress of its veth: its
 *   uplink), and a coordinator made slow to take the pieces
 *   (KB_DRAIN_DELAY_MS): the run completes and equals the one-host run
 *   byte for byte. Before ADR 0050 an agent sent everything, said BYE and
 *   exited with a 2 s linger: a tail that had not crossed its link by then
 *   was dropped and the coordinator said the host was gone.
 * * The coordinator killed while it takes its hosts' files (after the
 *   simulation): every agent exits non-zero with one line naming what was
 *   not confirmed, and leaves nothing in /tmp. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "multihost.h"

#define PORT "5555"

static struct mh_net net;

static void teardown(void)
{
	mh_net_down(&net);
}

/* The ring job with larger outputs than the other tests' (each host ships
 * hundreds of KiB: op log, trace and critical-path parts, tensors). */
static void big_ring_argv(char **argv, const char *out, const char *hosts, const char *keys)
{
	static const char *const fixed[] = {
		"run", "ring_attention", "--mode", "data", "--ranks", "4", "--pes", "1", "--seed",
		"7", "--arg", "heads_q=4", "--arg", "heads_kv=2", "--arg", "head_dim=32", "--arg",
		"tile=16", "--arg", "seq_kv=64", "--colocate", "rank", "--arg", "pass=kv",
		"--quiet", "--out",
	};
	int n = 0;

	argv[n++] = (char *)kb_bin();
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		argv[n++] = (char *)fixed[i];
	argv[n++] = (char *)out;
	if (hosts) {
		argv[n++] = (char *)"--hosts";
		argv[n++] = (char *)hosts;
		argv[n++] = (char *)"--keys";
		argv[n++] = (char *)keys;
	}
	argv[n] = NULL;
}

/* Shapes the uplink of namespace `host` (its veth's egress). */
static void shape_uplink(int host, const char *rate)
{
	char ns[64], cmd[300];

	mh_ns_name(&net, host, ns, sizeof(ns));
	snprintf(cmd, sizeof(cmd), "ip netns exec %s tc qdisc add dev kb0 root tbf rate %s "
		 "burst 16kb latency 2s", ns, rate);
	if (system(cmd) != 0)
		cr_skip_test("cannot shape a link here (%s failed: no sch_tbf?)", cmd);
}

Test(finish, shaped_uplinks_and_a_slow_coordinator_lose_nothing, .timeout = 300,
     .fini = teardown)
{
	enum { AGENTS = 3 };
	char base[256], one[300], many[300], file[300], keys[300], why[512];
	char err[AGENTS + 1][300];
	char *argv[48];
	char *env[] = { (char *)"KB_DRAIN_DELAY_MS=40", NULL };
	pid_t pid[AGENTS + 1];
	struct kb_result res;

	if (!mh_net_up(&net, AGENTS + 1, why, sizeof(why)))
		cr_skip_test("network namespaces unavailable here: %s", why);
	kb_tmpdir(base, sizeof(base), "finish-shaped");
	snprintf(one, sizeof(one), "%s/one", base);
	snprintf(many, sizeof(many), "%s/many", base);
	snprintf(file, sizeof(file), "%s/hosts.yaml", base);
	mh_keygen(base, keys, sizeof(keys));
	mh_write_hosts(file, "tcp://10.77.0.1:" PORT,
		       "  - ranks: [0]\n  - ranks: [1, 2]\n  - ranks: [3]\n");

	big_ring_argv(argv, one, NULL, NULL);
	kb_runv(&res, argv);
	cr_assert_eq(res.status, 0, "one host: %s", res.err);

	/* 2 Mbit/s: a host's hundreds of KiB take seconds to cross */
	for (int h = 1; h <= AGENTS; h++)
		shape_uplink(h, h == 2 ? "1mbit" : "2mbit");
	big_ring_argv(argv, many, file, keys);
	snprintf(err[0], sizeof(err[0]), "%s/coordinator.err", base);
	pid[0] = mh_spawn(&net, 0, argv, env, err[0]);
	for (int i = 0; i < AGENTS; i++) {
		snprintf(err[i + 1], sizeof(err[0]), "%s/agent%d.err", base, i);
		pid[i + 1] = mh_spawn_agent(&net, i, "tcp://10.77.0.1:" PORT, keys, err[i + 1]);
	}
	cr_assert_eq(mh_wait(pid[0], 240), 0, "coordinator: %s", kb_slurp_stderr(err[0]));
	for (int i = 0; i < AGENTS; i++)
		cr_assert_eq(mh_wait(pid[i + 1], 30), 0, "agent %d: %s", i,
			     kb_slurp_stderr(err[i + 1]));
	kb_expect_same_run(one, many, true);
	cr_expect_eq(mh_leftovers(pid, AGENTS + 1), 0, "socket or staging folders left");
}

/* Files in OUT/.kernbench-staging (and its .parts): the coordinator has
 * begun to take its hosts' outputs, so the simulation is over. */
static int staged_files(const char *out)
{
	const char *subs[] = { "", "/.parts" };
	int n = 0;

	for (size_t k = 0; k < 2; k++) {
		char dir[400];
		DIR *d;
		struct dirent *e;

		snprintf(dir, sizeof(dir), "%s/.kernbench-staging%s", out, subs[k]);
		d = opendir(dir);
		while (d && (e = readdir(d)))
			n += e->d_name[0] != '.' && strcmp(e->d_name, "summary.json");
		if (d)
			closedir(d);
	}
	return n;
}

Test(finish, the_coordinator_killed_while_taking_files_fails_every_agent, .timeout = 180)
{
	enum { AGENTS = 2 };
	char base[256], out[300], file[300], keys[300], coord[64], err[AGENTS + 1][300];
	char *argv[48];
	/* slow enough that the pieces are still coming when it is killed */
	char *env[] = { (char *)"KB_DRAIN_DELAY_MS=400", NULL };
	pid_t pid[AGENTS + 1];
	int waited = 0;

	kb_tmpdir(base, sizeof(base), "finish-coord-dies");
	snprintf(out, sizeof(out), "%s/out", base);
	snprintf(file, sizeof(file), "%s/hosts.yaml", base);
	snprintf(coord, sizeof(coord), "tcp://127.0.0.1:%d", mh_free_port());
	mh_keygen(base, keys, sizeof(keys));
	mh_write_hosts(file, coord, "  - ranks: [0, 1]\n  - ranks: [2, 3]\n");
	big_ring_argv(argv, out, file, keys);
	snprintf(err[0], sizeof(err[0]), "%s/coordinator.err", base);
	pid[0] = mh_spawn(NULL, 0, argv, env, err[0]);
	for (int i = 0; i < AGENTS; i++) {
		snprintf(err[i + 1], sizeof(err[0]), "%s/agent%d.err", base, i);
		pid[i + 1] = mh_spawn_agent(NULL, i, coord, keys, err[i + 1]);
	}
	while (staged_files(out) == 0 && waited++ < 1200 && kill(pid[0], 0) == 0)
		usleep(50000);
	cr_assert_gt(staged_files(out), 0, "the coordinator took no file: %s",
		     kb_slurp_stderr(err[0]));
	cr_assert_eq(kill(pid[0], SIGKILL), 0);
	mh_wait(pid[0], 5);
	for (int i = 0; i < AGENTS; i++) {
		int rc = mh_wait(pid[i + 1], 30);
		char *text = kb_slurp_stderr(err[i + 1]);

		cr_log_info("agent %d: %s", i, text ? text : "");
		cr_expect(rc != 0 && rc != -1, "agent %d exited %d with its files unconfirmed: %s", i,
			  rc, text);
		cr_expect_eq(kb_count_lines(text), 1, "agent %d printed: %s", i, text);
		cr_expect(text && strstr(text, "did not confirm") && strstr(text, "BYE"),
			  "agent %d does not name what was not confirmed: %s", i, text);
		free(text);
	}
	cr_expect_eq(mh_leftovers(pid + 1, AGENTS), 0, "an agent left entries in /tmp");
}
