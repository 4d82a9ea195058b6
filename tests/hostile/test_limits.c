/* test_limits.c — resource limits and machine sizes: each limit too small
 * for the run is one line saying which and how much, before anything is
 * spawned; every documented size runs. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../integration/harness.h"
#include "hostile.h"

/* Runs `kernbench run traffic ... EXTRA...` (NULL-terminated) under one
 * limit; returns the exit status and the launcher's stderr (caller frees). */
static int run_limited(int resource, rlim_t value, char **err, pid_t *launcher, ...)
{
	char dir[256], errpath[300];
	char *argv[32] = { (char *)"kernbench", (char *)"run", (char *)"traffic", (char *)"--quiet",
			   (char *)"--out", dir };
	int n = 6, status;
	const char *a;
	va_list ap;

	kb_tmpdir(dir, sizeof(dir), "limit");
	snprintf(errpath, sizeof(errpath), "%s.stderr", dir);
	va_start(ap, launcher);
	while (n < 31 && (a = va_arg(ap, const char *)))
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	kb_adopt_orphans();
	*launcher = kbh_spawn(argv, errpath, resource, value, false);
	status = kb_wait(*launcher);
	*err = kbh_stderr(errpath);
	unlink(errpath);
	return status;
}

static void expect_refused(int status, const char *err, pid_t launcher, const char *what,
			   const char *how_much)
{
	cr_expect(status == 1 || status == 2, "exit %d (not a clean refusal): %s", status, err);
	cr_expect(strstr(err, what), "the line does not name the limit '%s': %s", what, err);
	cr_expect(strstr(err, how_much), "the line does not say how much ('%s'): %s", how_much,
		  err);
	cr_expect_eq(kb_count_lines(err), 1, "not one line: %s", err);
	usleep(200000);
	cr_expect_eq(kb_leftover_socket_dirs(launcher), 0, "socket directory left behind");
	cr_expect_eq(kb_leftover_daemons(), 0, "daemons left behind");
}

Test(hostile_limits, too_few_descriptors_is_one_line_before_spawning, .timeout = 60)
{
	char *err;
	pid_t pid;
	int status = run_limited(RLIMIT_NOFILE, 32, &err, &pid, NULL);

	expect_refused(status, err, pid, "file descriptors", "ulimit -n");
	free(err);
}

/* (64 KiB: at 16 KiB even the dynamic loader may not reach main) */
Test(hostile_limits, too_small_stack_is_one_line, .timeout = 60)
{
	char *err;
	pid_t pid;
	int status = run_limited(RLIMIT_STACK, 64 << 10, &err, &pid, NULL);

	expect_refused(status, err, pid, "stack limit", "ulimit -s");
	free(err);
}

/* A small soft limit is raised, not refused: the run works. */
Test(hostile_limits, small_soft_stack_limit_is_raised, .timeout = 60)
{
	char dir[256];
	struct kb_result r;
	struct rlimit rl;

	getrlimit(RLIMIT_STACK, &rl);
	rl.rlim_cur = 64 << 10;
	cr_assert_eq(setrlimit(RLIMIT_STACK, &rl), 0);
	kb_tmpdir(dir, sizeof(dir), "softstack");
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
}

Test(hostile_limits, too_little_address_space_for_the_hbm_is_one_line, .timeout = 60)
{
#if defined(__SANITIZE_ADDRESS__)
	cr_skip_test("AddressSanitizer cannot start under an address-space limit");
#else
	char *err;
	pid_t pid;
	int status = run_limited(RLIMIT_AS, 2ull << 30, &err, &pid, "--mode", "data", NULL);

	expect_refused(status, err, pid, "address space", "ulimit -v");
	cr_expect_null(strstr(err, "outside HBM"), "%s", err);
	free(err);
#endif
}

/* 16 ranks x 64 PEs in data mode is 1 040 memfds: their list overflowed a
 * 4 KiB buffer in the launcher and a daemon died of SIGSEGV. */
Test(hostile_limits, data_mode_at_16_ranks_of_64_pes_runs, .timeout = 120)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "16x64");
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--mode", "data", "--ranks", "16",
	       "--pes", "64", "--arg", "components=2", "--arg", "messages=8", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(kb_summary_u64(dir, "messages"), 8);
}

/* The same size with too few descriptors for its memfds: refused before
 * spawning, saying how many it needs. */
Test(hostile_limits, data_mode_needing_more_descriptors_than_allowed_is_refused, .timeout = 60)
{
	char *err;
	pid_t pid;
	int status = run_limited(RLIMIT_NOFILE, 512, &err, &pid, "--mode", "data", "--ranks", "16",
				 "--pes", "64", "--arg", "components=2", "--arg", "messages=10",
				 NULL);

	expect_refused(status, err, pid, "file descriptors", "ulimit -n");
	free(err);
}

/* More inproc daemons than a ZeroMQ context allows sockets by default
 * (1023): every daemon thread failed to create its socket past that. */
Test(hostile_limits, inproc_run_with_1100_daemons_runs, .timeout = 120)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "inproc1100");
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--transport", "inproc", "--arg",
	       "components=1100", "--arg", "messages=2200", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect_gt(kb_summary_u64(dir, "messages"), 0);
}
