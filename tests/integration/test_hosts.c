/* test_hosts.c — runs across hosts on one machine: a coordinator
 * (`run --hosts`) and one `kernbench agent` per host, each a real process
 * talking loopback tcp, against the one-host run of the same job. */
#include <criterion/criterion.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "harness.h"
#include "kernbench.pb-c.h"

/* A port of this test process's own, below the kernel's ephemeral range
 * (32768 and up), where outgoing connections could already hold it. */
static int test_port(int offset)
{
	return 10000 + (int)(((long)getpid() * 10 + offset) % 22000);
}

static void write_hosts(const char *path, int port, const char *hosts)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fprintf(f, "coordinator: tcp://127.0.0.1:%d\nhosts:\n%s", port, hosts);
	fclose(f);
}

/* One test's folder: the outputs of a run (out) or of the one-host and
 * two-host runs (one, two), its hosts file and each process's stderr. */
struct hosts_case {
	char base[256], out[300], one[300], two[300], hosts[300], e0[300], e1[300], ec[300];
};

static void hosts_case(struct hosts_case *c, const char *tag, int port, const char *hosts)
{
	kb_tmpdir(c->base, sizeof(c->base), tag);
	snprintf(c->out, sizeof(c->out), "%s/out", c->base);
	snprintf(c->one, sizeof(c->one), "%s/one", c->base);
	snprintf(c->two, sizeof(c->two), "%s/two", c->base);
	snprintf(c->hosts, sizeof(c->hosts), "%s/hosts.yaml", c->base);
	snprintf(c->e0, sizeof(c->e0), "%s/a0.err", c->base);
	snprintf(c->e1, sizeof(c->e1), "%s/a1.err", c->base);
	snprintf(c->ec, sizeof(c->ec), "%s/c.err", c->base);
	write_hosts(c->hosts, port, hosts);
}

/* Waits (20 s at most) until agent `pid` has its folder, made once the
 * coordinator assigned it a host. */
static bool agent_started(pid_t pid)
{
	char pattern[64];

	snprintf(pattern, sizeof(pattern), "/tmp/kb-agent-%d-*", (int)pid);
	for (int i = 0; i < 2000; i++) {
		glob_t g;
		bool found = glob(pattern, 0, NULL, &g) == 0;

		globfree(&g);
		if (found)
			return true;
		usleep(10000);
	}
	return false;
}

static pid_t spawn_agent(int port, int index, const char *err)
{
	char coord[64], idx[16];
	char *argv[] = { (char *)kb_bin(), (char *)"agent", (char *)"--coordinator", coord,
			 (char *)"--index", idx, NULL };

	snprintf(coord, sizeof(coord), "tcp://127.0.0.1:%d", port);
	snprintf(idx, sizeof(idx), "%d", index);
	return kb_spawn(argv, err);
}

/* The run's command line: ring_attention, 2 ranks x 2 PEs, data mode. */
static int ring_argv(char **argv, const char *out, const char *pass, const char *colocate,
		     const char *hosts)
{
	static char passarg[32];
	int n = 0;

	snprintf(passarg, sizeof(passarg), "pass=%s", pass);
	argv[n++] = (char *)kb_bin();
	argv[n++] = (char *)"run";
	argv[n++] = (char *)"ring_attention";
	argv[n++] = (char *)"--ranks";
	argv[n++] = (char *)"2";
	argv[n++] = (char *)"--pes";
	argv[n++] = (char *)"2";
	argv[n++] = (char *)"--mode";
	argv[n++] = (char *)"data";
	argv[n++] = (char *)"--arg";
	argv[n++] = passarg;
	argv[n++] = (char *)"--arg";
	argv[n++] = (char *)"seq_kv=256";
	argv[n++] = (char *)"--colocate";
	argv[n++] = (char *)colocate;
	argv[n++] = (char *)"--quiet";
	argv[n++] = (char *)"--out";
	argv[n++] = (char *)out;
	if (hosts) {
		argv[n++] = (char *)"--hosts";
		argv[n++] = (char *)hosts;
	}
	argv[n] = NULL;
	return n;
}

/* The coordinator and both agents exit 0. All three are waited for
 * first: an agent's own line often says why the run stopped. */
static void expect_clean_exits(const struct hosts_case *c, pid_t coord, pid_t a0, pid_t a1)
{
	int rc = kb_wait(coord), r0 = kb_wait(a0), r1 = kb_wait(a1);

	cr_assert(rc == 0 && r0 == 0 && r1 == 0,
		  "exit %d / %d / %d\ncoordinator: %s\nagent 0: %s\nagent 1: %s", rc, r0, r1,
		  kb_slurp_stderr(c->ec), kb_slurp_stderr(c->e0), kb_slurp_stderr(c->e1));
}

/* One host, then the same job over two agents; outputs compared. */
/* The run on one host (ipc, a daemon per component) and over two agents
 * with `colocate` and `transport` give the same outputs. */
static void two_hosts_match(const char *tag, const char *pass, const char *colocate,
			    const char *transport, int port_off)
{
	struct hosts_case c;
	char *argv[32];
	struct kb_result res;
	int port = test_port(port_off), n;
	pid_t coord, a0, a1;
	uint64_t latency, global, lookahead;

	hosts_case(&c, tag, port, "  - ranks: [0]\n  - ranks: [1]\n");
	ring_argv(argv, c.one, pass, "none", NULL);
	kb_runv(&res, argv);
	cr_assert_eq(res.status, 0, "one host: %s", res.err);

	n = ring_argv(argv, c.two, pass, colocate, c.hosts);
	argv[n++] = (char *)"--transport";
	argv[n++] = (char *)transport;
	argv[n] = NULL;
	coord = kb_spawn(argv, c.ec);
	/* agents may start before the coordinator binds: ZeroMQ reconnects */
	a1 = spawn_agent(port, 1, c.e1);
	a0 = spawn_agent(port, 0, c.e0);
	expect_clean_exits(&c, coord, a0, a1);
	kb_expect_same_run(c.one, c.two, true);

	/* two-level sync: one global window per ring-link latency at most */
	latency = kb_summary_u64(c.two, "latency_ps");
	lookahead = kb_summary_u64(c.two, "lookahead_ps");
	global = kb_summary_u64(c.two, "global_windows");
	cr_expect_eq(lookahead, 500u * 1000u, "global lookahead is the ring link latency");
	cr_expect(global >= 1 && global <= latency / lookahead + 2,
		  "global_windows %llu > %llu / %llu + 2", (unsigned long long)global,
		  (unsigned long long)latency, (unsigned long long)lookahead);
	cr_expect_eq(kb_summary_u64(c.one, "global_windows"), 0);
}

Test(hosts, two_agents_match_one_host_pass_q, .timeout = 120)
{
	two_hosts_match("hosts_q", "q", "none", "ipc", 0);
}

Test(hosts, two_agents_match_one_host_pass_kv_colocate_pe, .timeout = 120)
{
	two_hosts_match("hosts_kv_pe", "kv", "pe", "ipc", 1);
}

Test(hosts, two_agents_match_one_host_colocate_rank, .timeout = 120)
{
	two_hosts_match("hosts_q_rank", "q", "rank", "ipc", 2);
}

/* Each agent runs its daemons as threads of its own */
Test(hosts, two_agents_match_one_host_inproc_threads, .timeout = 120)
{
	two_hosts_match("hosts_kv_threads", "kv", "pe", "inproc", 12);
}

/* One daemon per host, run by the agent itself (direct calls) */
Test(hosts, two_agents_match_one_host_one_daemon_per_host, .timeout = 120)
{
	two_hosts_match("hosts_kv_direct", "kv", "host", "inproc", 13);
}

Test(hosts, missing_agent_is_named_with_its_ranks, .timeout = 60)
{
	struct hosts_case c;
	char *argv[40];
	int port = test_port(3), n;
	pid_t coord, a0;
	char *err;

	hosts_case(&c, "hosts_missing", port, "  - ranks: [0]\n  - ranks: [1]\n");
	n = ring_argv(argv, c.out, "q", "none", c.hosts);
	argv[n++] = (char *)"--agent-timeout";
	argv[n++] = (char *)"2";
	argv[n] = NULL;
	kb_adopt_orphans();
	coord = kb_spawn(argv, c.ec);
	a0 = spawn_agent(port, 0, c.e0);
	cr_assert_eq(kb_wait(coord), 1);
	err = kb_slurp_stderr(c.ec);
	cr_assert(err && strstr(err, "host 1 (rank 1)") && strstr(err, "no agent joined"),
		  "stderr: %s", err);
	cr_expect_eq(kb_count_lines(err), 1, "one line: %s", err);
	cr_expect_neq(kb_wait(a0), 0, "the agent that came stops too");
	cr_expect_eq(kb_leftover_daemons(), 0);
	free(err);
}

/* An index the hosts file does not have is refused at once (usage). */
Test(hosts, agent_with_an_index_beyond_the_hosts_is_refused, .timeout = 60)
{
	struct hosts_case c;
	char e[300];
	char *argv[40], *err;
	int port = test_port(8), n;
	pid_t coord, stray;

	hosts_case(&c, "hosts_stray", port, "  - ranks: [0]\n  - ranks: [1]\n");
	snprintf(e, sizeof(e), "%s/a7.err", c.base);
	n = ring_argv(argv, c.out, "q", "none", c.hosts);
	argv[n++] = (char *)"--agent-timeout";
	argv[n++] = (char *)"3";
	argv[n] = NULL;
	coord = kb_spawn(argv, c.ec);
	stray = spawn_agent(port, 7, e);
	cr_expect_eq(kb_wait(stray), 2);
	err = kb_slurp_stderr(e);
	cr_expect(err && strstr(err, "agent index 7") && strstr(err, "names no host"), "%s", err);
	cr_expect_eq(kb_count_lines(err), 1, "%s", err);
	free(err);
	cr_expect_eq(kb_wait(coord), 1, "the run still waits for its own agents, then fails");
}

/* 4 ranks over 3 hosts placed out of order, timing mode: still the
 * one-host run, byte for byte. */
Test(hosts, three_hosts_with_ranks_out_of_order_match_one_host, .timeout = 120)
{
	struct hosts_case c;
	char e[3][300];
	char *argv[40];
	struct kb_result res;
	int port = test_port(9), n;
	pid_t coord, a[3];

	hosts_case(&c, "hosts_three", port, "  - ranks: [3, 0]\n  - ranks: [2]\n  - ranks: [1]\n");
	n = ring_argv(argv, c.one, "q", "rank", NULL);
	argv[4] = (char *)"4";  /* --ranks */
	argv[6] = (char *)"1";  /* --pes */
	argv[8] = (char *)"timing";
	kb_runv(&res, argv);
	cr_assert_eq(res.status, 0, "one host: %s", res.err);
	n = ring_argv(argv, c.two, "q", "rank", c.hosts);
	argv[4] = (char *)"4";
	argv[6] = (char *)"1";
	argv[8] = (char *)"timing";
	(void)n;
	coord = kb_spawn(argv, c.ec);
	for (int i = 0; i < 3; i++) {
		snprintf(e[i], sizeof(e[i]), "%s/a%d.err", c.base, i);
		a[i] = spawn_agent(port, 2 - i, e[i]);
	}
	cr_assert_eq(kb_wait(coord), 0, "coordinator: %s", kb_slurp_stderr(c.ec));
	for (int i = 0; i < 3; i++)
		cr_expect_eq(kb_wait(a[i]), 0, "agent %d: %s", 2 - i, kb_slurp_stderr(e[i]));
	kb_expect_same_run(c.one, c.two, false); /* timing mode */
}

/* An agent killed while it starts its daemons (after its Assign, before
 * READY) is named by its silence, long before --agent-timeout (60 s, more
 * than this test may take). */
Test(hosts, agent_killed_while_starting_is_named, .timeout = 40)
{
	struct hosts_case c;
	char *argv[40], *err;
	int port = test_port(17);
	pid_t coord, a0, a1;

	hosts_case(&c, "hosts_kill_start", port, "  - ranks: [0]\n  - ranks: [1]\n");
	ring_argv(argv, c.out, "q", "none", c.hosts);
	argv[6] = (char *)"32";     /* --pes: hundreds of daemons to start */
	argv[8] = (char *)"timing"; /* --mode */
	kb_adopt_orphans();
	coord = kb_spawn(argv, c.ec);
	a0 = spawn_agent(port, 0, c.e0);
	a1 = spawn_agent(port, 1, c.e1);
	cr_assert(agent_started(a1)); /* assigned: its staging folder exists */
	cr_assert_eq(kill(a1, SIGKILL), 0);
	cr_assert_eq(kb_wait(coord), 1, "coordinator: %s", kb_slurp_stderr(c.ec));
	cr_expect_neq(kb_wait(a0), 0, "the other agent stops too");
	kb_wait(a1);
	err = kb_slurp_stderr(c.ec);
	cr_assert(err && strstr(err, "host 1 (rank 1)") && strstr(err, "is gone"), "stderr: %s",
		  err);
	cr_expect_eq(kb_count_lines(err), 1, "one line: %s", err);
	free(err);
	sleep(1); /* daemons of the killed agent die with it (PDEATHSIG) */
	cr_expect_eq(kb_leftover_daemons(), 0);
}

Test(hosts, killed_agent_tears_down_every_host, .timeout = 60)
{
	struct hosts_case c;
	char *argv[40];
	int port = test_port(4), n;
	pid_t coord, a0, a1;
	char *err;

	hosts_case(&c, "hosts_kill", port, "  - ranks: [0]\n  - ranks: [1]\n");
	n = ring_argv(argv, c.out, "q", "none", c.hosts);
	argv[n - 8] = (char *)"seq_kv=65536"; /* long enough to be killed mid-run */
	kb_adopt_orphans();
	coord = kb_spawn(argv, c.ec);
	a0 = spawn_agent(port, 0, c.e0);
	a1 = spawn_agent(port, 1, c.e1);
	cr_assert(agent_started(a0) && agent_started(a1));
	sleep(4); /* into the run: both sent READY long before */
	cr_assert_eq(kill(a1, SIGKILL), 0);
	cr_assert_eq(kb_wait(coord), 1, "coordinator: %s", kb_slurp_stderr(c.ec));
	cr_expect_eq(kb_wait(a1), 128 + SIGKILL);
	cr_expect_neq(kb_wait(a0), 0, "the other agent stops too");
	err = kb_slurp_stderr(c.ec);
	cr_assert(err && strstr(err, "host 1 (rank 1)") && strstr(err, "is gone"), "stderr: %s",
		  err);
	cr_expect_eq(kb_count_lines(err), 1, "one line: %s", err);
	sleep(1); /* daemons of the killed agent die with it (PDEATHSIG) */
	cr_expect_eq(kb_leftover_daemons(), 0);
	free(err);
}

/* Each bad hosts file: exit 2, one line naming the file. */
Test(hosts, bad_hosts_files_exit_2_with_one_line, .timeout = 60)
{
	static const char *const bad[][2] = {
		{ "coordinator: tcp://127.0.0.1:1\nhosts:\n  - ranks: [0]\n  - ranks: [0, 1]\n",
		  "listed twice" },
		{ "coordinator: tcp://127.0.0.1:1\nhosts:\n  - ranks: [0]\n", "--ranks" },
		{ "coordinator: tcp://127.0.0.1:1\nhosts:\n  - ranks: [0, 2]\n", "rank 1 is on no host" },
		{ "coordinator: tcp://10.9.9.9:5555\nhosts:\n  - ranks: [0, 1]\n", "not loopback" },
		{ "coordinator: udp://x\nhosts:\n  - ranks: [0, 1]\n", "tcp://ADDRESS:PORT" },
		{ "hosts:\n  - ranks: [0, 1]\n", "no `coordinator" },
		{ "coordinator: tcp://127.0.0.1:1\nhosts:\n  - ranks: [0, x]\n", "line 3" },
		{ "coordinator: tcp://127.0.0.1:1\nhosts: [\n", "not YAML" },
		{ "coordinator: tcp://127.0.0.1:1\nhost:\n  - ranks: [0, 1]\n", "unknown" },
		{ "coordinator: tcp://127.0.0.1:1\nhosts:\n  - rank: [0, 1]\n", "one key" },
	};
	struct hosts_case c;

	hosts_case(&c, "hosts_bad", 1, ""); /* each case below rewrites the file */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct kb_result res;
		FILE *f = fopen(c.hosts, "w");

		cr_assert_not_null(f);
		fputs(bad[i][0], f);
		fclose(f);
		kb_run(&res, "run", "ring_attention", "--ranks", "2", "--quiet", "--out", c.out,
		       "--hosts", c.hosts, NULL);
		cr_expect_eq(res.status, 2, "file %zu: status %d: %s", i, res.status, res.err);
		cr_expect(strstr(res.err, bad[i][1]) != NULL, "file %zu: '%s' not in: %s", i,
			  bad[i][1], res.err);
		cr_expect_eq(kb_count_lines(res.err), 1, "file %zu: %s", i, res.err);
	}
	{
		struct kb_result res;

		kb_run(&res, "run", "ring_attention", "--ranks", "2", "--quiet", "--out", c.out,
		       "--hosts", "/nonexistent/hosts.yaml", NULL);
		cr_expect_eq(res.status, 2);
		kb_run(&res, "agent", "--index", "0", NULL);
		cr_expect_eq(res.status, 2, "agent without --coordinator: %s", res.err);
		kb_run(&res, "agent", "--coordinator", "tcp://10.9.9.9:1", "--index", "0", NULL);
		cr_expect_eq(res.status, 2, "agent off loopback without keys: %s", res.err);
	}
}

/* The coordinator SIGKILLed mid-run: each agent notices (its heartbeat
 * goes unanswered), names the coordinator, and kills its daemons. */
/* `argv` (a run with --hosts c->hosts) over two agents, KB_FAULT `fault`
 * in host 1's (NULL: none): the run fails with one line holding every one
 * of `needles` (NULL-ended), and every host tears down. */
static void expect_two_host_failure(const struct hosts_case *c, int port, char **argv,
				    const char *fault, const char *const *needles)
{
	pid_t coord, a0, a1;
	char *err;

	kb_adopt_orphans();
	coord = kb_spawn(argv, c->ec);
	a0 = spawn_agent(port, 0, c->e0);
	if (fault)
		setenv("KB_FAULT", fault, 1);
	a1 = spawn_agent(port, 1, c->e1);
	unsetenv("KB_FAULT");
	cr_assert_eq(kb_wait(coord), 1);
	cr_expect_eq(kb_wait(a1), 1);
	cr_expect_eq(kb_wait(a0), 1);
	err = kb_slurp_stderr(c->ec);
	cr_assert_not_null(err);
	for (const char *const *n = needles; *n; n++)
		cr_expect(strstr(err, *n), "'%s' missing: %s (agent 1: %s)", *n, err,
			  kb_slurp_stderr(c->e1));
	cr_expect_eq(kb_count_lines(err), 1, "one line: %s", err);
	free(err);
	cr_expect_eq(kb_leftover_daemons(), 0);
}

/* KB_FAULT `fault` in host 1's agent, `extra` more run arguments
 * (NULL-ended): see expect_two_host_failure. */
static void fault_on_host_1(const char *tag, int port_off, const char *colocate,
			    const char *const *extra, const char *fault,
			    const char *const *needles)
{
	struct hosts_case c;
	char *argv[40];
	int port = test_port(port_off);
	int n;

	hosts_case(&c, tag, port, "  - ranks: [0]\n  - ranks: [1]\n");
	n = ring_argv(argv, c.out, "q", colocate, c.hosts);
	while (extra && *extra)
		argv[n++] = (char *)*extra++;
	argv[n] = NULL;
	expect_two_host_failure(&c, port, argv, fault, needles);
}

/* A daemon of host 1 crashes: the run fails with one line naming the host,
 * its ranks and the daemon, and every host tears down. */
Test(hosts, dead_daemon_on_an_agent_is_named_with_its_host, .timeout = 60)
{
	static const char *const needles[] = { "host 1 (rank 1): daemon kb-dma r1.pe0.dma",
						"died", NULL };

	fault_on_host_1("hosts_crash", 6, "none", NULL, "crash@r1.pe0.dma:3", needles);
}

/* A kernel failing inside a daemon its agent runs directly: one line
 * naming the host, every process out, nothing left. */
Test(hosts, kernel_error_in_a_direct_daemon_is_named_with_its_host, .timeout = 60)
{
	static const char *const needles[] = { "host ", "(rank ", "runs on one rank", NULL };
	struct hosts_case c;
	char *argv[40];
	int port = test_port(14), n;

	hosts_case(&c, "hosts_direct_err", port, "  - ranks: [0]\n  - ranks: [1]\n");
	n = ring_argv(argv, c.out, "q", "host", c.hosts);
	argv[2] = (char *)"gqa_decode_opt2"; /* refuses --ranks 2 at its first event */
	argv[9] = (char *)"--seed";           /* instead of --arg pass=q */
	argv[10] = (char *)"1";
	argv[n++] = (char *)"--transport";
	argv[n++] = (char *)"inproc";
	argv[n] = NULL;
	expect_two_host_failure(&c, port, argv, NULL, needles);
}

/* A daemon its agent runs itself stops running events (an event that never
 * returns): the agent's keeper is its watchdog. */
Test(hosts, stalled_direct_daemon_trips_the_watchdog, .timeout = 60)
{
	static const char *const extra[] = { "--transport", "inproc", "--set",
					     "run.watchdog_ms=1500", NULL };

	static const char *const needles[] = { "host 1 (rank 1)", "watchdog", NULL };

	fault_on_host_1("hosts_direct_stall", 16, "host", extra, "stall@h1:2", needles);
}

/* Where a coordinator without --keys leaves the client side of its keys
 * for its user's agents on port `port` (ADR 0036). */
static void run_keys_path(int port, char *path, size_t cap)
{
	snprintf(path, cap, "/tmp/kernbench-%u/coordinator-%d.keys", (unsigned)geteuid(), port);
}

/* The coordinator SIGKILLed mid-run: each agent ends with one line. With
 * `transport` inproc and `colocate` host each agent runs its daemon in its
 * own thread, where one data-mode event computes for seconds: its keeper
 * thread must notice (ADR 0020). */
static void killed_coordinator(const char *tag, const char *colocate, const char *transport,
			       int port_off)
{
	struct hosts_case c;
	char *argv[40], *err, keys[96];
	int port = test_port(port_off), n;
	pid_t coord, a[2];

	hosts_case(&c, tag, port, "  - ranks: [0]\n  - ranks: [1]\n");
	n = ring_argv(argv, c.out, "q", colocate, c.hosts);
	argv[12] = (char *)"seq_kv=65536";
	argv[n++] = (char *)"--transport";
	argv[n++] = (char *)transport;
	argv[n] = NULL;
	kb_adopt_orphans();
	coord = kb_spawn(argv, c.ec);
	a[0] = spawn_agent(port, 0, c.e0);
	a[1] = spawn_agent(port, 1, c.e1);
	cr_assert(agent_started(a[0]) && agent_started(a[1]));
	sleep(4); /* into the run */
	cr_assert_eq(kill(coord, SIGKILL), 0);
	cr_expect_eq(kb_wait(coord), 128 + SIGKILL);
	/* a SIGKILLed coordinator cannot withdraw its key file: the test that
	 * killed it does (the next coordinator on the port would replace it) */
	run_keys_path(port, keys, sizeof(keys));
	cr_expect_eq(unlink(keys), 0, "the killed coordinator left no key file %s", keys);
	for (int i = 0; i < 2; i++) {
		cr_expect_eq(kb_wait(a[i]), 1, "agent %d", i);
		err = kb_slurp_stderr(i ? c.e1 : c.e0);
		cr_expect(err && strstr(err, "the coordinator at tcp://127.0.0.1") &&
			  strstr(err, "is gone") && strstr(err, i ? "host 1 (rank 1)" : "host 0 (rank 0)"),
			  "agent %d: %s", i, err);
		cr_expect_eq(kb_count_lines(err), 1, "agent %d: %s", i, err);
		free(err);
	}
	cr_expect_eq(kb_leftover_daemons(), 0);
}

Test(hosts, killed_coordinator_stops_every_agent, .timeout = 60)
{
	killed_coordinator("hosts_kill_coord", "none", "ipc", 5);
}

Test(hosts, killed_coordinator_stops_agents_running_their_daemon_themselves, .timeout = 60)
{
	killed_coordinator("hosts_kill_coord_direct", "host", "inproc", 15);
}


/* No --index: the agents take their rank from mpirun's environment, with
 * the coordinator as process 0 of a world of 3; and CURVE keys on the
 * coordinator's link. */
Test(hosts, agents_index_from_mpirun_environment_with_keys, .timeout = 120)
{
	struct hosts_case c;
	char keys[300], e[2][300], coord_at[64];
	char *argv[40];
	struct kb_result res;
	int port = test_port(7), n;
	pid_t coord, a[2];

	hosts_case(&c, "hosts_env", port, "  - ranks: [0]\n  - ranks: [1]\n");
	snprintf(keys, sizeof(keys), "%s/keys", c.base);
	snprintf(coord_at, sizeof(coord_at), "tcp://127.0.0.1:%d", port);
	kb_run(&res, "keygen", "--out", keys, NULL);
	cr_assert_eq(res.status, 0, "%s", res.err);
	ring_argv(argv, c.one, "q", "pe", NULL);
	kb_runv(&res, argv);
	cr_assert_eq(res.status, 0, "one host: %s", res.err);

	n = ring_argv(argv, c.two, "q", "pe", c.hosts);
	argv[n++] = (char *)"--keys";
	argv[n++] = keys;
	argv[n] = NULL;
	coord = kb_spawn(argv, c.ec);
	setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
	for (int i = 0; i < 2; i++) {
		char rank[8];
		char *aargv[] = { (char *)kb_bin(), (char *)"agent", (char *)"--coordinator", coord_at,
				  (char *)"--keys", keys, NULL };

		snprintf(rank, sizeof(rank), "%d", 2 - i); /* host 1 first */
		snprintf(e[i], sizeof(e[i]), "%s/a%d.err", c.base, i);
		setenv("OMPI_COMM_WORLD_RANK", rank, 1);
		a[i] = kb_spawn(aargv, e[i]);
	}
	unsetenv("OMPI_COMM_WORLD_RANK");
	unsetenv("OMPI_COMM_WORLD_SIZE");
	cr_assert_eq(kb_wait(coord), 0, "coordinator: %s", kb_slurp_stderr(c.ec));
	for (int i = 0; i < 2; i++)
		cr_expect_eq(kb_wait(a[i]), 0, "agent %d: %s", i, kb_slurp_stderr(e[i]));
	kb_expect_same_run(c.one, c.two, true);
}

/* The client side of the keys a coordinator without --keys left for its
 * user's agents (ADR 0036): "name KEY" lines. */
static void read_run_keys(int port, char server[41], char pub[41], char sec[41])
{
	char path[96], *text, *line, *save = NULL;

	run_keys_path(port, path, sizeof(path));
	text = kb_slurp(path, NULL);
	cr_assert(text, "no key file %s", path);
	server[0] = pub[0] = sec[0] = '\0';
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *key = strchr(line, ' ');

		if (!key || strlen(key + 1) != 40)
			continue;
		*key++ = '\0';
		memcpy(!strcmp(line, "server-public") ? server : !strcmp(line, "client-public") ? pub
											   : sec,
		       key, 41);
	}
	free(text);
	cr_assert(server[0] && pub[0] && sec[0], "incomplete key file %s", path);
}

/* Strangers on the coordinator's port during a run across hosts: one
 * without the run's keys (its frames never arrive: CURVE), and one holding
 * them that sends garbage, a Hello for a host that has its agent and a
 * READY under a made-up token. None joins or stalls the run; the result
 * is the one-host run's. */
Test(hosts, strangers_neither_join_nor_change_the_run, .timeout = 120)
{
	struct hosts_case c;
	char at[64];
	char *argv[32], reply[512], server[41], pub[41], sec[41];
	struct kb_result res;
	int port = test_port(10), zero = 0, wait_ms = 1500;
	pid_t coord, a0, a1;
	void *zctx = zmq_ctx_new(), *s;
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Hello hello = KB__HELLO__INIT;
	Kb__Ready ready = KB__READY__INIT;
	uint8_t frame[256];
	size_t len;
	int got;

	snprintf(at, sizeof(at), "tcp://127.0.0.1:%d", port);
	hosts_case(&c, "hosts_strangers", port, "  - ranks: [0]\n  - ranks: [1]\n");
	ring_argv(argv, c.one, "q", "none", NULL);
	argv[12] = (char *)"seq_kv=8192"; /* long enough for the probes */
	kb_runv(&res, argv);
	cr_assert_eq(res.status, 0, "one host: %s", res.err);
	ring_argv(argv, c.two, "q", "none", c.hosts);
	argv[12] = (char *)"seq_kv=8192"; /* long enough for the probes */
	coord = kb_spawn(argv, c.ec);
	a0 = spawn_agent(port, 0, c.e0);
	a1 = spawn_agent(port, 1, c.e1);
	/* both agents have their hosts (they made their folders after Assign) */
	cr_assert(agent_started(a0) && agent_started(a1));
	/* the key file lives as long as the run: read it before the probes */
	read_run_keys(port, server, pub, sec);

	/* without the keys: a Hello is never answered */
	hello.index = 0;
	sync.schema_version = KB__SCHEMA__SCHEMA_VERSION;
	sync.body_case = KB__SYNC__BODY_HELLO;
	sync.hello = &hello;
	len = kb__sync__pack(&sync, frame);
	s = zmq_socket(zctx, ZMQ_DEALER);
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_RCVTIMEO, &wait_ms, sizeof(wait_ms));
	cr_assert_eq(zmq_connect(s, at), 0);
	zmq_send(s, frame, len, 0);
	cr_expect_lt(zmq_recv(s, reply, sizeof(reply) - 1, 0), 0,
		     "a stranger without the run's keys was answered");
	zmq_close(s);

	/* with the keys (read from the run's key file, as its agents do) */
	s = zmq_socket(zctx, ZMQ_DEALER);
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	/* an answer is expected here: wait as long as a loaded machine needs */
	wait_ms = 30000;
	zmq_setsockopt(s, ZMQ_RCVTIMEO, &wait_ms, sizeof(wait_ms));
	zmq_setsockopt(s, ZMQ_ROUTING_ID, "hello-stranger", 14);
	zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server, 41);
	zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 41);
	zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 41);
	cr_assert_eq(zmq_connect(s, at), 0);
	zmq_send(s, "\xff\x01 garbage", 10, 0);
	/* a Hello for host 0, which has its agent: refused in one frame */
	zmq_send(s, frame, len, 0);
	got = zmq_recv(s, reply, sizeof(reply) - 1, 0);
	cr_expect(got > 0, "a refused Hello is answered");
	if (got > 0) {
		Kb__Sync *r = kb__sync__unpack(NULL, (size_t)got, (const uint8_t *)reply);

		cr_expect(r && r->body_case == KB__SYNC__BODY_ERROR &&
			  strstr(r->error->message, "already has an agent"));
		if (r)
			kb__sync__free_unpacked(r, NULL);
	}
	/* a READY under a token it does not know */
	ready.daemon = 1;
	ready.token.data = (uint8_t *)"1.00000000000000000000000000000000";
	ready.token.len = 34;
	sync.body_case = KB__SYNC__BODY_READY;
	sync.ready = &ready;
	len = kb__sync__pack(&sync, frame);
	zmq_send(s, frame, len, 0);
	zmq_close(s);
	zmq_ctx_term(zctx);

	expect_clean_exits(&c, coord, a0, a1);
	kb_expect_same_run(c.one, c.two, true);
}
