/* test_spmd.c — issue 20 items 3 and 4: `mpirun -n N kernbench run ...`
 * with no hosts file (ADR 0064). OpenMPI's mpirun (openmpi-bin, in
 * TEST_DEB_PKGS) starts the same command N times; process 0 coordinates
 * and hosts ranks, the others are agents, the address and keys come from
 * mpirun's environment. The output folder must be byte-identical to the
 * one-host run; faults through the engine (a process killed, mpirun
 * tearing the job down; SIGCONT + SIGTERM to every process as Slurm's
 * scancel sends them) end every process by itself with nothing left in
 * /tmp, and the coordinator names the host it lost. Every process the
 * engine starts carries KB_TEST_TAG in its environment: the test finds
 * them (and their daemons) in /proc though they are not its children. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "multihost.h"

#define SETTLE_S 60 /* generous: every host gives up on a silent peer in 5 s */

static void need_mpirun(void)
{
	cr_assert_eq(system("command -v mpirun >/dev/null 2>&1"), 0,
		     "mpirun is not on PATH: run `make deps` (installs openmpi-bin)");
}

/* `pid`'s exit status (128 + signal), or -2 while it runs. */
static int poll_exit(pid_t pid)
{
	int status;
	pid_t got = waitpid(pid, &status, WNOHANG);

	if (got == 0)
		return -2;
	if (got != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* mpirun ... -n NP RUN (run: the run's argv, binary first) */
static void spmd_argv(char **argv, int np, char **run)
{
	static char nps[16];
	int n = 0;

	snprintf(nps, sizeof(nps), "%d", np);
	argv[n++] = (char *)"mpirun";
	argv[n++] = (char *)"--allow-run-as-root";
	argv[n++] = (char *)"--oversubscribe";
	argv[n++] = (char *)"--bind-to";
	argv[n++] = (char *)"none";
	argv[n++] = (char *)"-n";
	argv[n++] = nps;
	for (int i = 0; run[i]; i++)
		argv[n++] = run[i];
	argv[n] = NULL;
}

/* Appends more arguments to a NULL-terminated argv. */
static void append(char **argv, const char *a, const char *b)
{
	int n = 0;

	while (argv[n])
		n++;
	argv[n++] = (char *)a;
	if (b)
		argv[n++] = (char *)b;
	argv[n] = NULL;
}

/* The test's tag: unique on this machine, "spmd-PID-WHAT". */
static void make_tag(char *tag, size_t cap, char *env, size_t env_cap, const char *what)
{
	snprintf(tag, cap, "spmd-%d-%s", (int)getpid(), what);
	snprintf(env, env_cap, "KB_TEST_TAG=%s", tag);
}

/* The port of process 0's coordinator, from its own agent's command line
 * (`agent --coordinator tcp://127.0.0.1:PORT ...`); 0 until it is seen. */
static int coordinator_port(const char *tag)
{
	char path[64], buf[4096];
	pid_t agent;
	ssize_t n = 0;
	int fd, port = 0;

	if (mh_tagged(tag, NULL, "agent", &agent, 1) != 1)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)agent);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	for (ssize_t at = 0; n > 0 && at < n; at += (ssize_t)strlen(buf + at) + 1)
		if (!strcmp(buf + at, "--coordinator") && at + 14 < n && strrchr(buf + at + 14, ':'))
			port = atoi(strrchr(buf + at + 14, ':') + 1);
	return port;
}

/* The coordinator's ephemeral key file (hostkeys.h) still there. */
static bool keys_left(int port)
{
	char path[96];

	snprintf(path, sizeof(path), "/tmp/kernbench-%u/coordinator-%d.keys", (unsigned)geteuid(),
		 port);
	return port && access(path, F_OK) == 0;
}

/* Runs mpirun to its end, gathering every tagged process meanwhile. */
static int run_gathering(char **argv, const char *env_tag, const char *tag, const char *errpath,
			 pid_t *seen, int *n_seen, int *port)
{
	char *env[] = { (char *)env_tag, NULL };
	pid_t pid = mh_spawn(NULL, 0, argv, env, errpath);

	for (int i = 0; i < 1200; i++) {
		const struct timespec nap = { 0, 100 * 1000000L };
		int rc = poll_exit(pid);

		if (rc != -2)
			return rc;
		mh_gather_tagged(tag, seen, n_seen, 256);
		if (!*port)
			*port = coordinator_port(tag);
		nanosleep(&nap, NULL);
	}
	return mh_wait(pid, 1);
}

static void expect_nothing_left(const char *tag, const pid_t *seen, int n_seen, int port)
{
	pid_t alive[64];

	cr_expect_gt(n_seen, 0, "no tagged process was ever seen");
	cr_expect(mh_all_gone(seen, n_seen, SETTLE_S), "processes of the run outlived it");
	cr_expect_eq(mh_tagged(tag, NULL, NULL, alive, 64), 0, "a process of the run is alive");
	cr_expect_eq(mh_leftovers(seen, n_seen), 0, "the run left folders in /tmp or /dev/shm");
	cr_expect(port > 0, "process 0's agent was never seen");
	cr_expect(!keys_left(port), "process 0 left its key file (port %d)", port);
}

static void spmd_matches_one_host(const char *what, int np, bool rendezvous)
{
	char base[256], one[300], many[300], errpath[300], dir[300], tag[64], env[96];
	char *run[64], *argv[96];
	pid_t seen[256];
	int n_seen = 0, rc, port = 0;
	struct kb_result res;

	need_mpirun();
	kb_tmpdir(base, sizeof(base), what);
	make_tag(tag, sizeof(tag), env, sizeof(env), what);
	snprintf(one, sizeof(one), "%s/one", base);
	snprintf(many, sizeof(many), "%s/many", base);
	snprintf(errpath, sizeof(errpath), "%s/mpirun.err", base);
	snprintf(dir, sizeof(dir), "%s/rendezvous", base);

	mh_ring_argv(run, one, "kv", "none", NULL, NULL);
	kb_runv(&res, run);
	cr_assert_eq(res.status, 0, "one host: %s", res.err);

	mh_ring_argv(run, many, "kv", "none", NULL, NULL);
	if (rendezvous) {
		cr_assert_eq(mkdir(dir, 0700), 0);
		append(run, "--rendezvous", dir);
	}
	spmd_argv(argv, np, run);
	rc = run_gathering(argv, env, tag, errpath, seen, &n_seen, &port);
	cr_assert_eq(rc, 0, "mpirun -n %d exited %d: %s", np, rc, kb_slurp_stderr(errpath));
	kb_expect_same_run(one, many, true);
	cr_expect_gt(kb_summary_u64(many, "global_windows"), 0, "not a run across hosts");
	expect_nothing_left(tag, seen, n_seen, port);
	if (rendezvous) {
		char *ls = NULL;
		size_t len = 0;
		FILE *f;
		char cmd[400];

		snprintf(cmd, sizeof(cmd), "ls -A '%s'", dir);
		f = popen(cmd, "r");
		if (f) {
			ls = calloc(1, 4096);
			len = ls ? fread(ls, 1, 4095, f) : 0;
			pclose(f);
		}
		cr_expect_eq(len, 0, "the rendezvous folder kept: %s", ls ? ls : "");
		free(ls);
	}
}

Test(spmd, mpirun_two_processes_match_one_host, .timeout = 150)
{
	spmd_matches_one_host("np2", 2, false);
}

/* 4 ranks over 3 processes: hosts of 1, 1 and 2 ranks. */
Test(spmd, mpirun_three_processes_match_one_host, .timeout = 150)
{
	spmd_matches_one_host("np3", 3, false);
}

/* The address and keys through a rendezvous folder instead. */
Test(spmd, mpirun_with_a_rendezvous_folder_matches_one_host, .timeout = 150)
{
	spmd_matches_one_host("rdv", 2, true);
}

/* More processes than ranks: every process refuses alike (exit 2). */
Test(spmd, more_processes_than_ranks_is_a_usage_error, .timeout = 60)
{
	char base[256], out[300], errpath[300], tag[64], env[96];
	char *run[64], *argv[96];
	char *envs[2];
	int rc;

	need_mpirun();
	kb_tmpdir(base, sizeof(base), "np5");
	make_tag(tag, sizeof(tag), env, sizeof(env), "np5");
	envs[0] = env;
	envs[1] = NULL;
	snprintf(out, sizeof(out), "%s/out", base);
	snprintf(errpath, sizeof(errpath), "%s/mpirun.err", base);
	mh_ring_argv(run, out, "kv", "none", NULL, NULL);
	spmd_argv(argv, 5, run);
	rc = mh_wait(mh_spawn(NULL, 0, argv, envs, errpath), 50);
	cr_expect_neq(rc, 0);
	cr_expect_geq(mh_lines_with(kb_slurp_stderr(errpath), "started 5 processes for 4 ranks"), 1,
		      "%s", kb_slurp_stderr(errpath));
	cr_expect_eq(access(out, F_OK), -1, "a refused run made its output folder");
}

/* A long run under mpirun -n 3 (hosts: rank 0 | rank 1 | ranks 2, 3),
 * started and seen running; returns mpirun's pid. */
static pid_t start_long(const char *what, char *tag, size_t tag_cap, char *env, size_t env_cap,
			char *errpath, size_t err_cap, pid_t *seen, int *n_seen, int *port)
{
	static char base[256], out[300];
	char *run[64], *argv[96];
	/* scancel's case stands in for slurmstepd, which waits KillWait (30 s
	 * by default) before SIGKILL; mpirun's own is 1 s after a process
	 * ends, tested by the killed-process case */
	char slurm_wait[] = "OMPI_MCA_odls_base_sigkill_timeout=30";
	char *envs[3] = { env, strcmp(what, "term") ? NULL : slurm_wait, NULL };
	pid_t pid, agents[8];

	need_mpirun();
	kb_tmpdir(base, sizeof(base), what);
	make_tag(tag, tag_cap, env, env_cap, what);
	snprintf(out, sizeof(out), "%s/out", base);
	snprintf(errpath, err_cap, "%s/mpirun.err", base);
	mh_long_argv(run, out, NULL, NULL);
	spmd_argv(argv, 3, run);
	pid = mh_spawn(NULL, 0, argv, envs, errpath);
	/* running: process 0's agent and both others are up, a while after */
	for (int i = 0; i < 300 && mh_tagged(tag, NULL, "agent", agents, 8) < 1; i++)
		usleep(100000);
	/* (its daemons are "agent" too between their fork and exec) */
	cr_assert_geq(mh_tagged(tag, NULL, "agent", agents, 8), 1,
		      "process 0's agent never started: %s", kb_slurp_stderr(errpath));
	*port = coordinator_port(tag);
	for (int i = 0; i < 30; i++) {
		mh_gather_tagged(tag, seen, n_seen, 256);
		usleep(100000);
	}
	cr_assert_eq(poll_exit(pid), -2, "the run ended before the fault: %s",
		     kb_slurp_stderr(errpath));
	return pid;
}

/* Waits for mpirun to end, gathering; its status. */
static int settle(pid_t pid, const char *tag, pid_t *seen, int *n_seen)
{
	for (int i = 0; i < SETTLE_S * 10; i++) {
		int rc = poll_exit(pid);

		if (rc != -2)
			return rc;
		mh_gather_tagged(tag, seen, n_seen, 256);
		usleep(100000);
	}
	return mh_wait(pid, 1);
}

/* mpirun sees process 2 killed and tears the job down (SIGCONT, SIGTERM,
 * SIGKILL a second later) before the coordinator's own 5 s watch: its
 * line still names the host it lost. */
Test(spmd, a_killed_process_is_named_by_the_coordinator, .timeout = 150)
{
	char tag[64], env[96], errpath[300];
	pid_t seen[256], victim[4];
	int n_seen = 0, rc, port = 0;
	const char *err;

	pid_t pid = start_long("kill2", tag, sizeof(tag), env, sizeof(env), errpath,
			       sizeof(errpath), seen, &n_seen, &port);

	cr_assert_eq(mh_tagged(tag, "OMPI_COMM_WORLD_RANK=2", "run", victim, 4), 1,
		     "process 2 not found");
	cr_assert_eq(kill(victim[0], SIGKILL), 0);
	rc = settle(pid, tag, seen, &n_seen);
	err = kb_slurp_stderr(errpath);
	cr_expect_neq(rc, 0, "mpirun succeeded after losing a process");
	cr_expect_neq(rc, -1, "mpirun did not end within %d s: %s", SETTLE_S, err);
	cr_expect_geq(mh_lines_with(err, "lost host 2 (ranks 2, 3)") +
			      mh_lines_with(err, "host 2 (ranks 2, 3) is gone"), 1,
		      "the coordinator did not name host 2: %s", err);
	/* the killed process's own folders are swept by the next run on this
	 * host; its daemons, staging folder and the others' must be gone */
	for (int i = 0; i < n_seen; i++)
		if (seen[i] == victim[0])
			seen[i] = seen[--n_seen];
	expect_nothing_left(tag, seen, n_seen, port);
}

/* What Slurm's scancel does to a step: SIGCONT then SIGTERM to every
 * process of it (daemons included), SIGKILL after KillWait (30 s by
 * default). Every process ends by itself before that, leaving nothing. */
Test(spmd, sigcont_then_sigterm_to_every_process_leaves_nothing, .timeout = 150)
{
	char tag[64], env[96], errpath[300];
	pid_t seen[256], now[256];
	int n_seen = 0, n, rc, port = 0;

	pid_t pid = start_long("term", tag, sizeof(tag), env, sizeof(env), errpath, sizeof(errpath),
			       seen, &n_seen, &port);

	/* the step's processes, not the launcher (mpirun stands in for
	 * slurmstepd here; srun is not in the step) */
	n = mh_tagged(tag, NULL, NULL, now, 256);
	for (int i = 0; i < n; i++)
		if (now[i] == pid)
			now[i--] = now[--n];
	for (int i = 0; i < n; i++)
		kill(now[i], SIGCONT);
	for (int i = 0; i < n; i++)
		kill(now[i], SIGTERM);
	rc = settle(pid, tag, seen, &n_seen);
	cr_expect(mh_all_gone(now, n, 30), "a process outlived SIGTERM for Slurm's KillWait (30 s)");
	cr_expect_neq(rc, 0);
	cr_expect_neq(rc, -1, "mpirun did not end: %s", kb_slurp_stderr(errpath));
	expect_nothing_left(tag, seen, n_seen, port);
}
