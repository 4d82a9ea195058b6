/* test_netem.c — issue 20 item 1: a data-mode run across hosts over links
 * shaped by `tc qdisc ... netem` inside network namespaces (tests/netns.sh):
 * each agent's uplink delays by 20 ms ± 10 ms, drops 1% of packets and is
 * limited to 4 Mbit/s (where the kernel has no netem: tbf at 2 Mbit/s
 * with a 50 ms queue, dropping the excess). The run
 * completes, every host exits 0, and the output folder is byte-identical
 * to the one-host run. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "multihost.h"

#define COORD "tcp://10.77.0.1:5555"

static struct mh_net net;

static void teardown(void)
{
	mh_net_down(&net);
}

/* netem where the kernel has it; else (a container without sch_netem)
 * tbf with a queue of 50 ms, which drops what does not fit: still a slow
 * link that loses packets. */
static void netem_uplink(int host)
{
	char ns[64], cmd[300];

	mh_ns_name(&net, host, ns, sizeof(ns));
	snprintf(cmd, sizeof(cmd), "ip netns exec %s tc qdisc add dev kb0 root netem delay 20ms "
		 "10ms loss 1%% rate 4mbit 2>/dev/null", ns);
	if (system(cmd) == 0)
		return;
	cr_log_info("no sch_netem here: tbf rate 2mbit with a 50 ms queue instead");
	snprintf(cmd, sizeof(cmd), "ip netns exec %s tc qdisc add dev kb0 root tbf rate 2mbit "
		 "burst 4kb latency 50ms", ns);
	if (system(cmd) != 0)
		cr_skip_test("cannot shape a link here (%s failed: no sch_netem, no sch_tbf)", cmd);
}

Test(netem, delayed_lossy_uplinks_lose_nothing_in_data_mode, .timeout = 300, .fini = teardown)
{
	enum { AGENTS = 2 };
	char base[256], one[300], many[300], file[300], keys[300], why[512];
	char err[AGENTS + 1][300], idx[AGENTS][8];
	char *argv[48];
	pid_t pid[AGENTS + 1];
	struct kb_result res;

	if (!mh_net_up(&net, AGENTS + 1, why, sizeof(why)))
		cr_skip_test("network namespaces unavailable here: %s", why);
	kb_tmpdir(base, sizeof(base), "netem");
	snprintf(one, sizeof(one), "%s/one", base);
	snprintf(many, sizeof(many), "%s/many", base);
	snprintf(file, sizeof(file), "%s/hosts.yaml", base);
	mh_keygen(base, keys, sizeof(keys));
	mh_write_hosts(file, COORD, "  - ranks: [0, 1]\n  - ranks: [2, 3]\n");

	mh_ring_argv(argv, one, "kv", "rank", NULL, NULL);
	kb_runv(&res, argv);
	cr_assert_eq(res.status, 0, "one host: %s", res.err);

	for (int h = 1; h <= AGENTS; h++)
		netem_uplink(h);
	mh_ring_argv(argv, many, "kv", "rank", file, keys);
	snprintf(err[0], sizeof(err[0]), "%s/coordinator.err", base);
	pid[0] = mh_spawn(&net, 0, argv, NULL, err[0]);
	for (int i = 0; i < AGENTS; i++) {
		char *agent[] = { (char *)kb_bin(), (char *)"agent", (char *)"--coordinator",
				  (char *)COORD, (char *)"--index", idx[i], (char *)"--keys", keys,
				  NULL };

		snprintf(idx[i], sizeof(idx[i]), "%d", i);
		snprintf(err[i + 1], sizeof(err[0]), "%s/agent%d.err", base, i);
		pid[i + 1] = mh_spawn(&net, i + 1, agent, NULL, err[i + 1]);
	}
	cr_assert_eq(mh_wait(pid[0], 240), 0, "coordinator: %s", kb_slurp_stderr(err[0]));
	for (int i = 0; i < AGENTS; i++)
		cr_assert_eq(mh_wait(pid[i + 1], 30), 0, "agent %d: %s", i,
			     kb_slurp_stderr(err[i + 1]));
	kb_expect_same_run(one, many, true);
	cr_expect_eq(mh_leftovers(pid, AGENTS + 1), 0, "socket or staging folders left");
}
