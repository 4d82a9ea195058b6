/* test_spmd_netns.c — issue 20 item 3 across "nodes" (ADR 0064): network
 * namespaces stand in for the nodes of an SPMD launch, and each process
 * gets the environment its engine would give it on a node of its own
 * (mpirun: OMPI_COMM_WORLD_RANK/SIZE with a local size of 1; srun:
 * SLURM_PROCID, SLURM_STEP_* and SLURM_LAUNCH_NODE_IPADDR). No engine
 * runs here — mpirun and srun need one machine's loopback, which a
 * namespace does not share — so the tests check what only the several-
 * nodes paths do: --coordinator with --keys, a rendezvous folder carrying
 * the address and the keys, srun's launch-node address, and the refusal
 * of a launch across nodes with no way to carry keys. Every run is
 * byte-identical to the one-host run and leaves nothing behind. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "multihost.h"

#define N 3

static struct mh_net net;

static void teardown(void)
{
	mh_net_down(&net);
}

/* The engine's variables of process `rank` (NULL-terminated, in env). */
static void engine_env(bool slurm, int rank, const char *job, char env[][96], char **out)
{
	int n = 0;

	if (slurm) {
		snprintf(env[n++], 96, "SLURM_PROCID=%d", rank);
		snprintf(env[n++], 96, "SLURM_STEP_ID=0");
		snprintf(env[n++], 96, "SLURM_STEP_NUM_TASKS=%d", N);
		snprintf(env[n++], 96, "SLURM_STEP_NUM_NODES=%d", N);
		snprintf(env[n++], 96, "SLURM_JOB_ID=%s", job);
		snprintf(env[n++], 96, "SLURM_LAUNCH_NODE_IPADDR=10.77.0.1");
	} else {
		snprintf(env[n++], 96, "OMPI_COMM_WORLD_RANK=%d", rank);
		snprintf(env[n++], 96, "OMPI_COMM_WORLD_SIZE=%d", N);
		snprintf(env[n++], 96, "OMPI_COMM_WORLD_LOCAL_SIZE=1");
		snprintf(env[n++], 96, "OMPI_MCA_ess_base_jobid=%s", job);
	}
	for (int i = 0; i < n; i++)
		out[i] = env[i];
	out[n] = NULL;
}

/* Runs the ring job as N processes, process i in namespace i, with
 * `extra` (NULL-terminated) after the run's options; each exit status
 * into rc[], their stderr files into err[]. */
static void spmd_in_namespaces(const char *base, bool slurm, char **extra, const char *out,
			       int rc[N], char err[N][300], pid_t pid[N])
{
	char job[32], env[N][8][96];
	char *envp[N][8];
	char *argv[64];
	int n = 0;

	snprintf(job, sizeof(job), "%d%c", (int)getpid(), slurm ? 's' : 'm');
	mh_ring_argv(argv, out, "kv", "rank", NULL, NULL);
	while (argv[n])
		n++;
	for (int i = 0; extra && extra[i]; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	for (int i = 0; i < N; i++) {
		engine_env(slurm, i, job, env[i], envp[i]);
		snprintf(err[i], 300, "%s/%d.err", base, i);
		pid[i] = mh_spawn(&net, i, argv, envp[i], err[i]);
	}
	for (int i = 0; i < N; i++)
		rc[i] = mh_wait(pid[i], 120);
}

static void matches_one_host(const char *tag, bool slurm, bool keys, bool rendezvous,
			     bool coordinator)
{
	char base[256], one[300], many[300], keyfile[300], dir[300], why[512], err[N][300];
	char *extra[8];
	struct kb_result res;
	char *argv[64];
	pid_t pid[N];
	int rc[N], n = 0;

	if (!mh_net_up(&net, N, why, sizeof(why)))
		cr_skip_test("network namespaces unavailable here: %s", why);
	kb_tmpdir(base, sizeof(base), tag);
	snprintf(one, sizeof(one), "%s/one", base);
	snprintf(many, sizeof(many), "%s/many", base);
	snprintf(dir, sizeof(dir), "%s/rendezvous", base);
	mh_ring_argv(argv, one, "kv", "rank", NULL, NULL);
	kb_runv(&res, argv);
	cr_assert_eq(res.status, 0, "one host: %s", res.err);
	if (keys) {
		mh_keygen(base, keyfile, sizeof(keyfile));
		extra[n++] = (char *)"--keys";
		extra[n++] = keyfile;
	}
	if (rendezvous) {
		cr_assert_eq(mkdir(dir, 0700), 0);
		extra[n++] = (char *)"--rendezvous";
		extra[n++] = dir;
	}
	if (coordinator) {
		extra[n++] = (char *)"--coordinator";
		extra[n++] = (char *)"tcp://10.77.0.1:5555";
	}
	extra[n] = NULL;
	spmd_in_namespaces(base, slurm, extra, many, rc, err, pid);
	for (int i = 0; i < N; i++)
		cr_expect_eq(rc[i], 0, "process %d exited %d: %s", i, rc[i], kb_slurp_stderr(err[i]));
	kb_expect_same_run(one, many, true);
	cr_expect_gt(kb_summary_u64(many, "global_windows"), 0, "not a run across hosts");
	cr_expect_eq(mh_leftovers(pid, N), 0, "socket or staging folders left");
	for (int h = 0; h < N; h++) {
		pid_t left[16];

		cr_expect_eq(mh_ns_procs(&net, h, left, 16), 0, "a process lives on in namespace %d", h);
	}
	if (rendezvous) {
		char probe[400];

		snprintf(probe, sizeof(probe), "%s/kernbench-%d%c.coordinator", dir, (int)getpid(),
			 slurm ? 's' : 'm');
		cr_expect_neq(access(probe, F_OK), 0, "the rendezvous file was left");
	}
}

Test(spmd_netns, mpirun_nodes_with_coordinator_and_keys_match_one_host, .timeout = 200,
     .fini = teardown)
{
	matches_one_host("spmdns-coord", false, true, false, true);
}

/* The address and the keys through a shared folder, nothing else given:
 * process 0 listens on its first address off loopback (10.77.0.1). */
Test(spmd_netns, mpirun_nodes_with_a_rendezvous_folder_match_one_host, .timeout = 200,
     .fini = teardown)
{
	matches_one_host("spmdns-rdv", false, false, true, false);
}

/* srun across nodes: process 0 on srun's launch node, a derived port. */
Test(spmd_netns, srun_nodes_listen_on_the_launch_node_address, .timeout = 200, .fini = teardown)
{
	matches_one_host("spmdns-srun", true, true, false, false);
}

/* Across nodes with neither --keys nor --rendezvous: every process
 * refuses with one line naming both (exit 2), nothing is started. */
Test(spmd_netns, nodes_without_keys_or_rendezvous_are_refused, .timeout = 120, .fini = teardown)
{
	char base[256], out[300], why[512], err[N][300];
	pid_t pid[N];
	int rc[N];

	if (!mh_net_up(&net, N, why, sizeof(why)))
		cr_skip_test("network namespaces unavailable here: %s", why);
	kb_tmpdir(base, sizeof(base), "spmdns-nokeys");
	snprintf(out, sizeof(out), "%s/out", base);
	spmd_in_namespaces(base, true, NULL, out, rc, err, pid);
	for (int i = 0; i < N; i++) {
		cr_expect_eq(rc[i], 2, "process %d exited %d: %s", i, rc[i], kb_slurp_stderr(err[i]));
		cr_expect_geq(mh_lines_with(kb_slurp_stderr(err[i]), "--rendezvous DIR"), 1, "%s",
			      kb_slurp_stderr(err[i]));
	}
	cr_expect_neq(access(out, F_OK), 0, "a refused run made its output folder");
}
