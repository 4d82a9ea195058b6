/* test_alloc_faults.c — allocation-failure injection (KB_FAULT_ALLOC,
 * rt/faults.h, ADR 0069) and the exit status of errors (ADR 0068).
 *
 * The walks fail the Nth allocation of the launcher (a whole run with its
 * daemons as threads: --colocate all --transport inproc) or of every
 * daemon process, for N from 1 past the last allocation. Each run either
 * succeeds with the unfaulted run's result, byte for byte, or fails with
 * one line and exit 1: never a crash, a sanitizer report, a hang, a
 * process, socket folder or staging folder left behind. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../integration/harness.h"

/* Every N up to here, then about as many again spread over the rest: the
 * first allocations (start-up) are the ones whose failures differ most. */
#define EVERY_N_UP_TO 256
#define SPREAD_RUNS 256

/* The small data-mode GEMM both walks run (c.npy is its result). */
static int gemm_argv(char **argv, const char *out, bool embedded)
{
	static const char *const base[] = { "run", "gemm", "--mode", "data", "--arg", "m=64",
					    "--arg", "k=64", "--arg", "n=64", "--pes", "1",
					    "--quiet" };
	int n = 0;

	argv[n++] = (char *)kb_bin();
	for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++)
		argv[n++] = (char *)base[i];
	if (embedded) {
		argv[n++] = (char *)"--colocate";
		argv[n++] = (char *)"all";
		argv[n++] = (char *)"--transport";
		argv[n++] = (char *)"inproc";
	}
	argv[n++] = (char *)"--out";
	argv[n++] = (char *)out;
	argv[n] = NULL;
	return n;
}

/* The most allocations any process aimed at made in an unfaulted run
 * (KB_FAULT_ALLOC=0: each writes "kb-faultsim: NAME made K allocations"). */
static unsigned long count_allocations(const char *who, char **argv)
{
	char spec[32];
	struct kb_result r;
	unsigned long most = 0;

	snprintf(spec, sizeof(spec), "0%s%s", who ? "@" : "", who ? who : "");
	setenv("KB_FAULT_ALLOC", spec, 1);
	kb_runv(&r, argv);
	unsetenv("KB_FAULT_ALLOC");
	cr_assert_eq(r.status, 0, "the unfaulted run failed: %s", r.err);
	for (const char *p = r.err; (p = strstr(p, " made ")); p++) {
		unsigned long k = strtoul(p + 6, NULL, 10);

		most = k > most ? k : most;
	}
	cr_assert(most > 0, "no allocation counted (is this kernbench-test?): %s", r.err);
	return most;
}

static bool has_entry(const char *dir, const char *name)
{
	char path[600];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

/* One run with the Nth allocation failing: a correct result or one line;
 * true if it succeeded. */
static bool run_with_fault(const char *who, unsigned long n, char **argv, const char *out,
			   const char *ref)
{
	char spec[48], got[700], want[700];
	struct kb_result r;

	snprintf(spec, sizeof(spec), "%lu%s%s", n, who ? "@" : "", who ? who : "");
	setenv("KB_FAULT_ALLOC", spec, 1);
	kb_runv(&r, argv);
	unsetenv("KB_FAULT_ALLOC");
	if (r.status == 0) {
		snprintf(got, sizeof(got), "%s/c.npy", out);
		snprintf(want, sizeof(want), "%s/c.npy", ref);
		cr_expect(kb_same_file(got, want), "KB_FAULT_ALLOC=%s: exit 0 with another c.npy",
			  spec);
		cr_expect_eq(kb_summary_u64(out, "latency_ps"), kb_summary_u64(ref, "latency_ps"),
			     "KB_FAULT_ALLOC=%s: exit 0 with another latency", spec);
	} else {
		cr_expect_eq(r.status, 1, "KB_FAULT_ALLOC=%s: exit %d: %s", spec, r.status, r.err);
		cr_expect_eq(kb_count_lines(r.err), 1, "KB_FAULT_ALLOC=%s: not one line: %s", spec,
			     r.err);
		cr_expect(!strncmp(r.err, "kernbench: error: ", 18), "KB_FAULT_ALLOC=%s: %s", spec,
			  r.err);
		cr_expect(!has_entry(out, "summary.json") && !has_entry(out, ".kernbench-staging"),
			  "KB_FAULT_ALLOC=%s: a failed run left results or its staging folder", spec);
	}
	cr_expect_eq(kb_leftover_daemons(), 0, "KB_FAULT_ALLOC=%s: daemons left behind", spec);
	cr_expect_eq(kb_leftover_socket_dirs(r.pid), 0, "KB_FAULT_ALLOC=%s: socket folder left",
		     spec);
	return r.status == 0;
}

/* N from 1 to one past the last allocation (that run is unfaulted). */
static void walk(const char *tag, const char *who, bool embedded)
{
	char dir[256], out[300], ref[300];
	char *argv[32];
	unsigned long total, step;

	kb_tmpdir(dir, sizeof(dir), tag);
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(ref, sizeof(ref), "%s/ref", dir);
	kb_adopt_orphans();
	gemm_argv(argv, ref, embedded);
	total = count_allocations(who, argv);
	gemm_argv(argv, out, embedded);
	step = total > EVERY_N_UP_TO ? (total - EVERY_N_UP_TO) / SPREAD_RUNS + 1 : 1;
	for (unsigned long n = 1; n <= total; n += n < EVERY_N_UP_TO ? 1 : step)
		run_with_fault(who, n, argv, out, ref);
	cr_expect(run_with_fault(who, total + 1, argv, out, ref),
		  "with no allocation failing the run must succeed");
}

Test(alloc_faults, every_launcher_allocation_of_an_embedded_run, .timeout = 600)
{
	walk("faultsim_launcher", NULL, true);
}

Test(alloc_faults, every_daemon_allocation_of_a_run, .timeout = 600)
{
	walk("faultsim_daemons", "daemon", false);
}

/* ---------------------------------------------------------------- exit status */

/* A non-usage RT_EINVAL (the merge refusing a value, as "trace part has
 * more than 2^32 records" would) exits 1: only RT_EUSAGE is 2. */
Test(alloc_faults, a_non_usage_invalid_value_exits_1, .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "einval_merge");
	setenv("KB_FAULT", "einval@merge", 1);
	kb_run(&r, "run", "traffic", "--arg", "components=4", "--arg", "messages=20", "--quiet",
	       "--out", dir, NULL);
	unsetenv("KB_FAULT");
	cr_expect_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "merge failed: RT_EINVAL"), "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
	cr_expect(!has_entry(dir, "summary.json"), "a failed run left results");

	/* and a usage error found at the same place (an --arg no kernel
	 * read) still exits 2 */
	kb_run(&r, "run", "gemm", "--pes", "1", "--arg", "nobody_reads=1", "--quiet", "--out", dir,
	       NULL);
	cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
}

/* A failure the command line did not cause exits 1 even while the command
 * line is read (out of memory then is not a usage error). */
Test(alloc_faults, out_of_memory_reading_the_command_line_exits_1, .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "enomem_cli");
	setenv("KB_FAULT_ALLOC", "1", 1);
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, NULL);
	unsetenv("KB_FAULT_ALLOC");
	cr_expect_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "out of memory"), "%s", r.err);
}
