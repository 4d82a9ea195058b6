/* test_liveness.c — the watchdog measures liveness, not wall-clock (issue
 * 19 item 5, ADR 0035): a daemon computing inside one long event is never
 * declared hung, however slow the machine; one that is stopped or stalled
 * (no event, no CPU) is named within run.watchdog_ms. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../integration/harness.h"
#include "hostile.h"

/* A kernel whose first program computes for `ms` milliseconds of its own
 * CPU time in its first event (before any tl call: one event), then ends. */
static const char spin_source[] =
	"#define _POSIX_C_SOURCE 200809L\n"
	"#include <time.h>\n"
	"#include \"tl.h\"\n"
	"int spin(struct tl *tl, const struct tl_args *args);\n"
	"int spin(struct tl *tl, const struct tl_args *args)\n"
	"{\n"
	"	uint64_t ms = tl_arg_u64(args, \"ms\", 1000);\n"
	"	struct timespec ts;\n"
	"	volatile uint64_t sink = 0;\n"
	"\n"
	"	if (tl_program_id(tl) || tl_rank(tl))\n"
	"		return 0;\n"
	"	for (;;) {\n"
	"		for (int i = 0; i < 100000; i++)\n"
	"			sink += (uint64_t)i * i;\n"
	"		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);\n"
	"		if ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 >= ms)\n"
	"			return 0;\n"
	"	}\n"
	"}\n";

static void spin_kernel(const char *dir, char *workload, size_t cap)
{
	char so[600];

	kb_build_kernel(dir, "spin", spin_source, so, sizeof(so));
	snprintf(workload, cap, "%s:spin", so);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One event that computes for four watchdog periods: alive, not hung. */
Test(liveness, one_event_longer_than_the_watchdog_completes, .timeout = 120)
{
	char dir[256], out[300], workload[700];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "live-long");
	snprintf(out, sizeof(out), "%s/out", dir);
	spin_kernel(dir, workload, sizeof(workload));
	kb_run(&r, "run", workload, "--quiet", "--pes", "2", "--out", out, "--arg", "ms=2400",
	       "--set", "run.watchdog_ms=600", NULL);
	cr_expect_eq(r.status, 0, "a daemon computing in one event was declared hung: %s", r.err);
}

/* The same run with the computing daemon stopped (SIGSTOP) in the middle of
 * its event: no heartbeat, no CPU, named by the watchdog. */
Test(liveness, a_stopped_daemon_is_named_within_the_watchdog, .timeout = 120)
{
	char dir[256], out[300], workload[700], errpath[400];
	char *argv[] = { (char *)"kernbench", (char *)"run", workload, (char *)"--quiet",
			 (char *)"--pes", (char *)"2", (char *)"--out", out, (char *)"--arg",
			 (char *)"ms=60000", (char *)"--set", (char *)"run.watchdog_ms=1500",
			 NULL };
	pid_t pid, kids[32];
	char *err;
	int n, status;
	double stopped_at, took;

	kb_tmpdir(dir, sizeof(dir), "live-stop");
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(errpath, sizeof(errpath), "%s/stderr", dir);
	spin_kernel(dir, workload, sizeof(workload));
	kb_adopt_orphans();
	pid = kbh_spawn(argv, errpath, -1, 0, true);
	cr_assert_geq(kbh_wait_children(pid, 10), 10);
	sleep(2); /* well inside the 60 s event */
	n = kb_children(pid, kids, 32);
	for (int i = 0; i < n; i++) {
		char path[64], *comm;
		size_t len;

		snprintf(path, sizeof(path), "/proc/%d/comm", (int)kids[i]);
		comm = kbh_read_proc(path, &len);
		if (comm && !strncmp(comm, "kb-host", 7))
			kill(kids[i], SIGSTOP);
		free(comm);
	}
	stopped_at = now_s();
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	took = now_s() - stopped_at;
	err = kbh_stderr(errpath);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d: %s", status, err);
	cr_expect(strstr(err, "kb-host r0.pe0.host") && strstr(err, "did not answer"),
		  "the stopped daemon is not named: %s", err);
	/* the bound the watchdog promises, with room for a loaded machine; the
	 * event alone would have run for a minute */
	cr_expect_lt(took, 20.0, "named after %.1f s", took);
	cr_expect_eq(kb_count_lines(err), 1, "%s", err);
	free(err);
	usleep(300000);
	cr_expect_eq(kb_leftover_daemons(), 0);
}

/* KB_FAULT=stall: an event that never returns (pause: no CPU) on a daemon
 * process is a watchdog failure naming it. */
Test(liveness, a_stalled_event_is_named_by_the_watchdog, .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "live-stall");
	kb_adopt_orphans();
	setenv("KB_FAULT", "stall@r0.pe0.dma", 1);
	kb_run(&r, "run", "gemm", "--quiet", "--pes", "2", "--out", dir, "--set",
	       "run.watchdog_ms=1000", NULL);
	unsetenv("KB_FAULT");
	cr_expect_eq(r.status, 1, "%s", r.err);
	cr_expect(strstr(r.err, "r0.pe0.dma") && strstr(r.err, "did not answer"), "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
	usleep(300000);
	cr_expect_eq(kb_leftover_daemons(), 0);
}

/* ---------------------------------------------------------------- load */

/* 3 CPU hogs per core beside the run, at the run's own priority. */
static int start_hogs(pid_t *hogs, int cap)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int n = (int)(cores > 0 ? cores : 1) * 3;

	if (n > cap)
		n = cap;
	for (int i = 0; i < n; i++) {
		hogs[i] = fork();
		if (hogs[i] == 0) {
			volatile unsigned long x = 0;

			prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives a failed test */
			for (;;)
				x++;
		}
	}
	return n;
}

static void stop_hogs(pid_t *hogs, int n)
{
	for (int i = 0; i < n; i++)
		if (hogs[i] > 0) {
			kill(hogs[i], SIGKILL);
			waitpid(hogs[i], NULL, 0);
		}
}

/* `make run`'s job and a data-mode ring of 160 daemons (4 ranks x 8 PEs x
 * 5 components), with three CPU hogs per core beside them and the default
 * watchdog: both complete, with the results of a quiet run. The ring runs
 * seq 128 (4.4k one-cycle windows) instead of the default 1024 (840k
 * windows, minutes even on a quiet machine); its first event, where all 32
 * kernel hosts generate their K/V at once, is long under load all the
 * same. */
Test(liveness, runs_pass_beside_three_cpu_hogs_per_core_with_the_default_watchdog,
     .timeout = 900)
{
	static const char *const jobs[][12] = {
		{ "gqa_decode_opt2", "--mode", "data", "--arg", "seq_kv=8192", NULL },
		{ "ring_attention", "--ranks", "4", "--mode", "data", "--arg", "seq_kv=128",
		  "--arg", "seq_q=128", NULL },
	};
	pid_t hogs[64];

	for (size_t j = 0; j < sizeof(jobs) / sizeof(jobs[0]); j++) {
		char quiet[256], loaded[256];
		int n;

		kb_tmpdir(quiet, sizeof(quiet), "live-quiet");
		kb_run_ok(quiet, jobs[j]);
		kb_tmpdir(loaded, sizeof(loaded), "live-loaded");
		n = start_hogs(hogs, 64);
		kb_run_ok(loaded, jobs[j]);
		stop_hogs(hogs, n);
		kb_expect_same_run(quiet, loaded, true);
	}
}
