/* test_netns.c — issue 11 item 2: network namespaces as hosts. The
 * coordinator (`run --hosts`) runs in one namespace, one `kernbench agent`
 * in each of the others, all joined by a bridge with addresses of their
 * own (10.77.0.0/24, so off loopback: CURVE keys required) — and the
 * output folder is byte-identical to the one-host run. Needs root; skips
 * with one line where namespaces cannot be made. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "multihost.h"

#define PORT "5555" /* each set of namespaces has its own ports */

static struct mh_net net;

static void teardown(void)
{
	mh_net_down(&net);
}

/* Namespaces 0 (coordinator) .. n_agents; skips the test when impossible. */
static void hosts_up(int n_agents)
{
	char why[512];

	if (!mh_net_up(&net, n_agents + 1, why, sizeof(why)))
		cr_skip_test("network namespaces unavailable here: %s", why);
}

static pid_t spawn_agent(int index, const char *keys, const char *err)
{
	char *argv[] = { (char *)kb_bin(), (char *)"agent", (char *)"--coordinator",
			 (char *)"tcp://10.77.0.1:" PORT, (char *)"--index", NULL, (char *)"--keys",
			 (char *)keys, NULL };
	char idx[16];

	snprintf(idx, sizeof(idx), "%d", index);
	argv[5] = idx;
	return mh_spawn(&net, index + 1, argv, NULL, err);
}

/* Runs the ring job on one host, then with `hosts` (the hosts file's list)
 * over n_agents namespaces, and compares. */
static void across_namespaces(const char *tag, const char *pass, const char *colocate,
			      const char *hosts, int n_agents)
{
	char base[256], one[300], many[300], file[300], keys[300], err[MH_MAX_HOSTS][300];
	char *argv[48];
	pid_t coord, agents[MH_MAX_HOSTS], all[MH_MAX_HOSTS + 1];
	struct kb_result res;

	hosts_up(n_agents);
	kb_tmpdir(base, sizeof(base), tag);
	snprintf(one, sizeof(one), "%s/one", base);
	snprintf(many, sizeof(many), "%s/many", base);
	snprintf(file, sizeof(file), "%s/hosts.yaml", base);
	mh_keygen(base, keys, sizeof(keys));
	mh_write_hosts(file, "tcp://10.77.0.1:" PORT, hosts);

	mh_ring_argv(argv, one, pass, colocate, NULL, NULL);
	kb_runv(&res, argv);
	cr_assert_eq(res.status, 0, "one host: %s", res.err);

	mh_ring_argv(argv, many, pass, colocate, file, keys);
	snprintf(err[0], sizeof(err[0]), "%s/coordinator.err", base);
	coord = mh_spawn(&net, 0, argv, NULL, err[0]);
	all[0] = coord;
	/* agents may come before the coordinator binds: ZeroMQ reconnects */
	for (int i = n_agents - 1; i >= 0; i--) {
		snprintf(err[i + 1], sizeof(err[0]), "%s/agent%d.err", base, i);
		agents[i] = spawn_agent(i, keys, err[i + 1]);
		all[i + 1] = agents[i];
	}
	cr_assert_eq(mh_wait(coord, 90), 0, "coordinator: %s", kb_slurp_stderr(err[0]));
	for (int i = 0; i < n_agents; i++)
		cr_assert_eq(mh_wait(agents[i], 30), 0, "agent %d: %s", i,
			     kb_slurp_stderr(err[i + 1]));
	kb_expect_same_run(one, many, true);
	cr_expect_gt(kb_summary_u64(many, "global_windows"), 0,
		     "a run across hosts counts its global windows");

	/* nothing left in any namespace or in /tmp */
	for (int h = 0; h <= n_agents; h++) {
		pid_t left[8];

		cr_expect_eq(mh_ns_procs(&net, h, left, 8), 0, "processes left in namespace %d", h);
	}
	cr_expect_eq(mh_leftovers(all, n_agents + 1), 0, "socket or staging folders left");
}

Test(netns, two_agents_over_a_bridge_match_one_host, .timeout = 150, .fini = teardown)
{
	across_namespaces("netns-kv", "kv", "none", "  - ranks: [0, 1]\n  - ranks: [2, 3]\n", 2);
}

/* Ranks placed out of order and unevenly over three hosts, a daemon per
 * PE, the other ring pass. */
Test(netns, three_agents_with_scattered_ranks_match_one_host, .timeout = 150,
     .fini = teardown)
{
	across_namespaces("netns-q", "q", "pe",
			  "  - ranks: [3]\n  - ranks: [0, 2]\n  - ranks: [1]\n", 3);
}

/* Off loopback an agent without keys is refused before it connects, with
 * one line that says why. */
Test(netns, an_agent_off_loopback_without_keys_is_refused, .timeout = 30, .fini = teardown)
{
	char base[256], errpath[300], *err;
	char *argv[] = { (char *)kb_bin(), (char *)"agent", (char *)"--coordinator",
			 (char *)"tcp://10.77.0.1:" PORT, (char *)"--index", (char *)"0", NULL };
	pid_t agent;

	hosts_up(1);
	kb_tmpdir(base, sizeof(base), "netns-nokeys");
	snprintf(errpath, sizeof(errpath), "%s/agent.err", base);
	agent = mh_spawn(&net, 1, argv, NULL, errpath);
	cr_assert_eq(mh_wait(agent, 20), 2);
	err = kb_slurp_stderr(errpath);
	cr_assert(err);
	cr_expect_eq(kb_count_lines(err), 1, "%s", err);
	cr_expect(strstr(err, "--keys"), "%s", err);
	free(err);
}
