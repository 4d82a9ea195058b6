/* test_mpirun.c — issue 11 item 2: OpenMPI's mpirun (Debian openmpi-bin,
 * in DEB_PKGS) launches the coordinator as process 0 and the agents as
 * processes 1..N of one MPMD job; the agents take their index from
 * OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE (no --index), and the run
 * gives the one-host bytes. As root mpirun needs --allow-run-as-root;
 * --oversubscribe lets 3 processes share this machine's 2 cores. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "multihost.h"

/* Fails (never skips) without mpirun: `make test` installs openmpi-bin. */
static void need_mpirun(void)
{
	cr_assert_eq(system("command -v mpirun >/dev/null 2>&1"), 0,
		     "mpirun is not on PATH: run `make deps` (installs openmpi-bin)");
}

/* mpirun -np 1 RUN... : -np n_agents kernbench agent ..., from `ring`
 * (the run's argv without the binary) into argv. */
static void mpmd_argv(char **argv, char **ring, int n_agents, const char *coordinator,
		      const char *keys)
{
	static char np[16];
	int n = 0;

	snprintf(np, sizeof(np), "%d", n_agents);
	argv[n++] = (char *)"mpirun";
	argv[n++] = (char *)"--allow-run-as-root";
	argv[n++] = (char *)"--oversubscribe";
	argv[n++] = (char *)"-np";
	argv[n++] = (char *)"1";
	argv[n++] = (char *)kb_bin();
	for (int i = 1; ring[i]; i++)
		argv[n++] = ring[i];
	argv[n++] = (char *)":";
	argv[n++] = (char *)"-np";
	argv[n++] = np;
	argv[n++] = (char *)kb_bin();
	argv[n++] = (char *)"agent";
	argv[n++] = (char *)"--coordinator";
	argv[n++] = (char *)coordinator;
	argv[n++] = (char *)"--keys";
	argv[n++] = (char *)keys;
	argv[n] = NULL;
}

static void mpmd_matches_one_host(const char *tag, const char *hosts, int n_agents)
{
	char base[256], one[300], many[300], file[300], keys[300], errpath[300], coord[64];
	char *ring[48], *argv[96];
	struct kb_result res;
	int rc;

	need_mpirun();
	kb_tmpdir(base, sizeof(base), tag);
	snprintf(one, sizeof(one), "%s/one", base);
	snprintf(many, sizeof(many), "%s/many", base);
	snprintf(file, sizeof(file), "%s/hosts.yaml", base);
	snprintf(errpath, sizeof(errpath), "%s/mpirun.err", base);
	snprintf(coord, sizeof(coord), "tcp://127.0.0.1:%d", mh_free_port());
	mh_keygen(base, keys, sizeof(keys));
	mh_write_hosts(file, coord, hosts);

	mh_ring_argv(ring, one, "kv", "none", NULL, NULL);
	kb_runv(&res, ring);
	cr_assert_eq(res.status, 0, "one host: %s", res.err);

	mh_ring_argv(ring, many, "kv", "none", file, keys);
	mpmd_argv(argv, ring, n_agents, coord, keys);
	rc = mh_wait(mh_spawn(NULL, 0, argv, NULL, errpath), 120);
	cr_assert_eq(rc, 0, "mpirun exited %d: %s", rc, kb_slurp_stderr(errpath));
	kb_expect_same_run(one, many, true);
	cr_expect_gt(kb_summary_u64(many, "global_windows"), 0);
}

Test(mpirun, mpmd_coordinator_and_two_agents_match_one_host, .timeout = 150)
{
	mpmd_matches_one_host("mpirun2", "  - ranks: [0, 1]\n  - ranks: [2, 3]\n", 2);
}

/* Four agents, one rank each, listed out of order: MPI process k + 1 is
 * host k whatever ranks that host has. */
Test(mpirun, mpmd_four_agents_in_scattered_order_match_one_host, .timeout = 150)
{
	mpmd_matches_one_host("mpirun4",
			      "  - ranks: [2]\n  - ranks: [0]\n  - ranks: [3]\n  - ranks: [1]\n", 4);
}
