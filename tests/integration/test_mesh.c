/* test_mesh.c — issue 20 item 2 (ADR 0066, 0067): messages between hosts
 * go agent to agent and the barrier is a tree. Network namespaces as
 * hosts (tests/netns.sh), CURVE keys (off loopback), one rank per host.
 * The coordinator is given KB_BARRIER_FANOUT=1 (a chain: host 0 under the
 * coordinator, host h under host h - 1) or 2, so every host but the last
 * forwards GRANTs and combines DONEs. Needs root; skips with one line
 * where namespaces cannot be made. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "multihost.h"

#define COORD "tcp://10.77.0.1:5555"
#define FOUR_HOSTS "  - ranks: [0]\n  - ranks: [1]\n  - ranks: [2]\n  - ranks: [3]\n"
#define SETTLE_S 60 /* generous: hosts give up on a silent peer after 5 s */

static struct mh_net net;

static void teardown(void)
{
	mh_net_down(&net);
}

/* One run over four agents and every pid seen in its namespaces. */
struct run4 {
	char base[256], keys[300], hosts[300], out[300];
	char err[5][300]; /* coordinator, agents 0..3 */
	pid_t pid[5];
};

/* Namespaces, keys and the hosts file for one run called `tag`. */
static void prepare(struct run4 *r, const char *tag)
{
	char why[512];

	if (!mh_net_up(&net, 5, why, sizeof(why)))
		cr_skip_test("network namespaces unavailable here: %s", why);
	memset(r, 0, sizeof(*r));
	kb_tmpdir(r->base, sizeof(r->base), tag);
	snprintf(r->hosts, sizeof(r->hosts), "%s/hosts.yaml", r->base);
	snprintf(r->out, sizeof(r->out), "%s/many", r->base);
	mh_keygen(r->base, r->keys, sizeof(r->keys));
	mh_write_hosts(r->hosts, COORD, FOUR_HOSTS);
	for (int i = 0; i < 5; i++)
		snprintf(r->err[i], sizeof(r->err[i]), "%s/%s%d.err", r->base,
			 i ? "agent" : "coordinator", i - 1);
}

/* The coordinator (argv, with KB_BARRIER_FANOUT=fanout) and four agents. */
static void take_off(struct run4 *r, char **argv, const char *fanout)
{
	char env_fanout[64];
	char *env[] = { env_fanout, NULL };

	snprintf(env_fanout, sizeof(env_fanout), "KB_BARRIER_FANOUT=%s", fanout);
	r->pid[0] = mh_spawn(&net, 0, argv, env, r->err[0]);
	for (int i = 3; i >= 0; i--) /* the deepest first: they wait for their parents */
		r->pid[i + 1] = mh_spawn_agent(&net, i, COORD, r->keys, r->err[i + 1]);
}

/* No process in any namespace and nothing of the run's in /tmp. */
static void expect_nothing_left(const struct run4 *r, pid_t killed)
{
	pid_t others[5];
	int n = 0;

	for (int h = 0; h < 5; h++) {
		pid_t left[16];
		int alive = 0;

		for (int t = 0; t < 100 && (alive = mh_ns_procs(&net, h, left, 16)) > 0; t++)
			usleep(100000);
		cr_expect_eq(alive, 0, "processes left in namespace %d", h);
	}
	for (int i = 0; i < 5; i++)
		if (r->pid[i] != killed)
			others[n++] = r->pid[i];
	cr_expect_eq(mh_leftovers(others, n), 0, "socket or staging folders left in /tmp");
}

static void tree_matches_one_host(const char *tag, const char *fanout)
{
	struct run4 r;
	char one[300], *argv[48];
	struct kb_result res;

	prepare(&r, tag);
	snprintf(one, sizeof(one), "%s/one", r.base);
	mh_ring_argv(argv, one, "kv", "rank", NULL, NULL);
	kb_runv(&res, argv);
	cr_assert_eq(res.status, 0, "one host: %s", res.err);
	mh_ring_argv(argv, r.out, "kv", "rank", r.hosts, r.keys);
	take_off(&r, argv, fanout);
	cr_assert_eq(mh_wait(r.pid[0], 120), 0, "coordinator: %s", kb_slurp_stderr(r.err[0]));
	for (int i = 1; i < 5; i++)
		cr_assert_eq(mh_wait(r.pid[i], 30), 0, "agent %d: %s", i - 1,
			     kb_slurp_stderr(r.err[i]));
	kb_expect_same_run(one, r.out, true);
	cr_expect_gt(kb_summary_u64(r.out, "global_windows"), 0);
	expect_nothing_left(&r, 0);
}

Test(mesh, a_chain_of_four_hosts_matches_one_host, .timeout = 240, .fini = teardown)
{
	tree_matches_one_host("mesh-chain", "1");
}

Test(mesh, a_binary_tree_of_four_hosts_matches_one_host, .timeout = 240, .fini = teardown)
{
	tree_matches_one_host("mesh-tree", "2");
}

/* An inner host of the tree (host 1: the parent of host 2, a child of
 * host 0) is SIGKILLed in the middle of the run: the coordinator names it
 * in one line, and every other host, above and below it, ends by itself
 * with a failure status and leaves nothing behind. */
Test(mesh, an_inner_tree_host_killed_is_named_and_ends_every_host, .timeout = 240,
     .fini = teardown)
{
	struct run4 r;
	char *argv[48], *text;
	int ready = 0;

	prepare(&r, "mesh-kill");
	mh_long_argv(argv, r.out, r.hosts, r.keys);
	for (int i = 0; argv[i]; i++) /* the long job has 4 ranks: one per host */
		if (!strcmp(argv[i], "--colocate") && argv[i + 1])
			argv[i + 1] = (char *)"rank";
	take_off(&r, argv, "1");
	for (int t = 0; t < 1200 && ready < 5; t++) { /* every host running its daemons */
		pid_t seen[32];
		bool up = true;

		for (int h = 1; h <= 4; h++)
			up &= mh_ns_procs(&net, h, seen, 32) >= 2;
		ready = up ? ready + 1 : 0;
		usleep(50000);
	}
	cr_assert_eq(ready, 5, "the run did not start on every host: %s",
		     kb_slurp_stderr(r.err[0]));
	usleep(800000); /* inside the windows */
	cr_assert_eq(kill(r.pid[0], 0), 0, "the run ended before the fault: %s",
		     kb_slurp_stderr(r.err[0]));
	cr_assert_eq(kill(r.pid[2], SIGKILL), 0);
	for (int i = 0; i < 5; i++) {
		int rc = mh_wait(r.pid[i], SETTLE_S);

		if (i == 2)
			continue;
		cr_expect_neq(rc, -1, "process %d did not end within %d s: %s", i, SETTLE_S,
			      kb_slurp_stderr(r.err[i]));
		cr_expect(rc != 0, "process %d exited 0 after the fault", i);
	}
	text = kb_slurp_stderr(r.err[0]);
	cr_assert(text, "the coordinator said nothing");
	cr_expect_eq(kb_count_lines(text), 1, "not one line: %s", text);
	cr_expect(strstr(text, "host 1 (rank 1)"), "does not name host 1: %s", text);
	free(text);
	expect_nothing_left(&r, r.pid[2]);
}
