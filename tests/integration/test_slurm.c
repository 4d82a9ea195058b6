/* test_slurm.c — issue 20 item 6: a real single-node Slurm (Debian's
 * slurm-wlm and munge, TEST_DEB_PKGS) brought up by tests/slurm.sh with
 * its own munge key, socket, config and state in a temporary folder, its
 * daemons started and stopped by PID. On it: `srun -n 3 kernbench run`
 * with no hosts file (ADR 0064), `sbatch` on both shipped scripts
 * (deploy/slurm/kernbench-spmd.sbatch and the hosts-file kernbench.sbatch),
 * each byte-identical to the one-host run, and `scancel` of a running
 * step: every process ends by itself (Slurm sends SIGCONT, SIGTERM, and
 * SIGKILL only after KillWait) and nothing is left in /tmp. Skips, with
 * the script's line, only where Slurm cannot run (not installed, not
 * root). `make test-slurm` runs these alone. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "multihost.h"

#define SETTLE_S 60

static char cluster[300]; /* the cluster's folder (tests/slurm.sh) */

static void slurm_down(void)
{
	char cmd[800];

	if (!cluster[0])
		return;
	snprintf(cmd, sizeof(cmd), "sh '%s/tests/slurm.sh' down '%s'", getenv("KB_ROOT"), cluster);
	if (system(cmd))
		cr_log_warn("slurm.sh down failed");
	cluster[0] = '\0';
}

static void slurm_up(void)
{
	char base[256], cmd[900], log[400], conf[400];
	int rc;

	cr_assert(getenv("KB_ROOT"), "KB_ROOT is not set (run through make)");
	kb_tmpdir(base, sizeof(base), "slurm");
	snprintf(cluster, sizeof(cluster), "%s/cluster", base);
	snprintf(log, sizeof(log), "%s/up.log", base);
	snprintf(cmd, sizeof(cmd), "sh '%s/tests/slurm.sh' up '%s' >'%s' 2>&1", getenv("KB_ROOT"),
		 cluster, log);
	rc = system(cmd);
	if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
		cluster[0] = '\0';
		cr_skip_test("%s", kb_slurp_stderr(log));
	}
	cr_assert_eq(rc, 0, "tests/slurm.sh up failed: %s", kb_slurp_stderr(log));
	snprintf(conf, sizeof(conf), "%s/slurm.conf", cluster);
	setenv("SLURM_CONF", conf, 1);
	setenv("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", 1);
}

TestSuite(slurm, .init = slurm_up, .fini = slurm_down);

/* The ring job's workload and options without --ranks, --out or --quiet
 * (the scripts add --ranks and --out). */
static int ring_args(char **argv)
{
	static const char *const fixed[] = {
		"ring_attention", "--mode", "data", "--pes", "1", "--seed", "7", "--arg",
		"heads_q=4", "--arg", "heads_kv=2", "--arg", "head_dim=32", "--arg", "tile=16",
		"--arg", "seq_kv=40", "--colocate", "none", "--arg", "pass=kv", "--quiet",
	};
	int n = 0;

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		argv[n++] = (char *)fixed[i];
	argv[n] = NULL;
	return n;
}

static void one_host(const char *base, char *one, size_t cap)
{
	char *run[64];
	struct kb_result res;

	snprintf(one, cap, "%s/one", base);
	mh_ring_argv(run, one, "kv", "none", NULL, NULL);
	kb_runv(&res, run);
	cr_assert_eq(res.status, 0, "one host: %s", res.err);
}

Test(slurm, srun_three_tasks_match_one_host, .timeout = 180)
{
	char base[256], one[300], many[300], errpath[300], tag[64], env[96];
	char *argv[96];
	char *envs[] = { env, NULL };
	pid_t seen[256];
	int n = 0, n_seen = 0, rc;

	kb_tmpdir(base, sizeof(base), "srun3");
	one_host(base, one, sizeof(one));
	snprintf(many, sizeof(many), "%s/many", base);
	snprintf(errpath, sizeof(errpath), "%s/srun.err", base);
	snprintf(tag, sizeof(tag), "slurm-%d-srun3", (int)getpid());
	snprintf(env, sizeof(env), "KB_TEST_TAG=%s", tag);
	argv[n++] = (char *)"srun";
	argv[n++] = (char *)"-n";
	argv[n++] = (char *)"3";
	argv[n++] = (char *)"--overcommit";
	argv[n++] = (char *)kb_bin();
	argv[n++] = (char *)"run";
	n += ring_args(argv + n);
	argv[n++] = (char *)"--ranks";
	argv[n++] = (char *)"4";
	argv[n++] = (char *)"--out";
	argv[n++] = many;
	argv[n] = NULL;
	{
		pid_t pid = mh_spawn(NULL, 0, argv, envs, errpath);

		while (waitpid(pid, &rc, WNOHANG) == 0) {
			mh_gather_tagged(tag, seen, &n_seen, 256);
			usleep(100000);
		}
		rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
	}
	cr_assert_eq(rc, 0, "srun exited %d: %s", rc, kb_slurp_stderr(errpath));
	kb_expect_same_run(one, many, true);
	cr_expect_gt(kb_summary_u64(many, "global_windows"), 0, "not a run across hosts");
	cr_expect(mh_all_gone(seen, n_seen, SETTLE_S));
	cr_expect_eq(mh_leftovers(seen, n_seen), 0, "the run left folders in /tmp");
}

/* sbatch --wait SCRIPT ring-args, with `env` (NAME=VALUE, NULL-ended). */
static int sbatch(const char *base, const char *script, char *const env[], const char *log)
{
	char path[600], *argv[96], errpath[400];
	int n = 0;

	snprintf(path, sizeof(path), "%s/deploy/slurm/%s", getenv("KB_ROOT"), script);
	snprintf(errpath, sizeof(errpath), "%s/sbatch.err", base);
	argv[n++] = (char *)"sbatch";
	argv[n++] = (char *)"--wait";
	argv[n++] = (char *)"--nodes=1";
	argv[n++] = (char *)"--ntasks-per-node=2";
	argv[n++] = (char *)"--overcommit";
	argv[n++] = (char *)"--no-requeue";
	argv[n++] = (char *)"-o";
	argv[n++] = (char *)log;
	argv[n++] = path;
	ring_args(argv + n);
	return mh_wait(mh_spawn(NULL, 0, argv, env, errpath), 150);
}

Test(slurm, sbatch_spmd_script_matches_one_host, .timeout = 200)
{
	char base[256], one[300], out[400], log[300], bin[400];
	char *env[] = { bin, out, (char *)"KB_RANKS_PER_HOST=2", NULL };
	int rc;

	kb_tmpdir(base, sizeof(base), "sbatch-spmd");
	one_host(base, one, sizeof(one));
	snprintf(bin, sizeof(bin), "KERNBENCH=%s", kb_bin());
	snprintf(out, sizeof(out), "KB_OUT=%s/many", base);
	snprintf(log, sizeof(log), "%s/job.log", base);
	rc = sbatch(base, "kernbench-spmd.sbatch", env, log);
	cr_assert_eq(rc, 0, "sbatch exited %d: %s", rc, kb_slurp_stderr(log));
	kb_expect_same_run(one, out + 7, true);
	cr_expect_gt(kb_summary_u64(out + 7, "global_windows"), 0, "not a run across hosts");
}

/* The hosts-file way: the batch shell writes the hosts file, runs the
 * coordinator, and srun starts one agent (one node, 4 ranks on it). */
Test(slurm, sbatch_hosts_file_script_matches_one_host, .timeout = 200)
{
	char base[256], one[300], out[400], log[300], bin[400], keys[300], keyenv[400], port[64];
	char *env[] = { bin, out, keyenv, port, (char *)"KB_RANKS_PER_HOST=4",
			(char *)"KB_COORDINATOR_ADDR=127.0.0.1", NULL };
	int rc;

	kb_tmpdir(base, sizeof(base), "sbatch-hosts");
	one_host(base, one, sizeof(one));
	mh_keygen(base, keys, sizeof(keys));
	snprintf(bin, sizeof(bin), "KERNBENCH=%s", kb_bin());
	snprintf(out, sizeof(out), "KB_OUT=%s/many", base);
	snprintf(keyenv, sizeof(keyenv), "KB_KEYS=%s", keys);
	snprintf(port, sizeof(port), "KB_PORT=%d", mh_free_port());
	snprintf(log, sizeof(log), "%s/job.log", base);
	rc = sbatch(base, "kernbench.sbatch", env, log);
	cr_assert_eq(rc, 0, "sbatch exited %d: %s", rc, kb_slurp_stderr(log));
	kb_expect_same_run(one, out + 7, true);
}

/* scancel of a running step: SIGCONT + SIGTERM to every process of it,
 * SIGKILL after KillWait (5 s here). Every process ends by itself and
 * nothing of the run is left. */
Test(slurm, scancel_ends_every_process_and_leaves_nothing, .timeout = 200)
{
	char base[256], out[300], errpath[300], tag[64], env[96], name[96], cmd[300];
	char *argv[96], *run[64];
	char *envs[] = { env, NULL };
	pid_t seen[256], now[256], pid;
	int n = 0, n_seen = 0, rc;

	kb_tmpdir(base, sizeof(base), "scancel");
	snprintf(out, sizeof(out), "%s/out", base);
	snprintf(errpath, sizeof(errpath), "%s/srun.err", base);
	snprintf(tag, sizeof(tag), "slurm-%d-scancel", (int)getpid());
	snprintf(env, sizeof(env), "KB_TEST_TAG=%s", tag);
	snprintf(name, sizeof(name), "--job-name=%s", tag);
	mh_long_argv(run, out, NULL, NULL);
	argv[n++] = (char *)"srun";
	argv[n++] = (char *)"-n";
	argv[n++] = (char *)"3";
	argv[n++] = (char *)"--overcommit";
	argv[n++] = name;
	for (int i = 0; run[i]; i++)
		argv[n++] = run[i];
	argv[n] = NULL;
	pid = mh_spawn(NULL, 0, argv, envs, errpath);
	for (int i = 0; i < 300 && mh_tagged(tag, NULL, "agent", now, 8) < 1; i++)
		usleep(100000);
	cr_assert_geq(mh_tagged(tag, NULL, "agent", now, 8), 1, "the step never started: %s",
		      kb_slurp_stderr(errpath));
	for (int i = 0; i < 30; i++) {
		mh_gather_tagged(tag, seen, &n_seen, 256);
		usleep(100000);
	}
	snprintf(cmd, sizeof(cmd), "scancel --name='%s'", tag);
	cr_assert_eq(system(cmd), 0, "scancel failed");
	rc = mh_wait(pid, SETTLE_S);
	cr_expect_neq(rc, 0, "srun succeeded though cancelled");
	for (int i = 0; i < n_seen; i++)
		if (seen[i] == pid)
			seen[i--] = seen[--n_seen];
	cr_expect(mh_all_gone(seen, n_seen, SETTLE_S), "a process outlived scancel");
	cr_expect_eq(mh_tagged(tag, NULL, NULL, now, 256), 0, "a process of the step is alive");
	cr_expect_eq(mh_leftovers(seen, n_seen), 0, "the step left folders in /tmp or /dev/shm");
}
