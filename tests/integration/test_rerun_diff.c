/* test_rerun_diff.c — issue 22 items 4 and 5: `kernbench run --from DIR`
 * (and `--config DIR/summary.json`) reruns what a folder recorded and
 * checks its digest; `kernbench diff A B` says what differs, with exit 0
 * same, 1 different, 2 usage error, and the largest tensor errors, which
 * the test computes itself from the .npy files. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "rt/half.h"
#include "rt/npy.h"

static const char *const data_run[] = { "gemm", "--mode", "data", "--arg", "m=32", "--arg",
					"k=64", "--arg", "n=48", "--seed", "7", "--set",
					"gemm.array_rows=64", NULL };

static void same_tensor(const char *a, const char *b, const char *name)
{
	char pa[600], pb[600];

	snprintf(pa, sizeof(pa), "%s/%s", a, name);
	snprintf(pb, sizeof(pb), "%s/%s", b, name);
	cr_expect(kb_same_file(pa, pb), "%s differs between %s and %s", name, a, b);
}

/* Everything a folder recorded comes back: the same digest and outputs,
 * under another deployment; the rerun lands beside the folder. */
Test(rerun, from_dir_gives_the_same_run, .timeout = 120)
{
	char dir[256], a[300], b[300];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "rerun");
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/a/rerun", dir);
	kb_run_ok(a, data_run);
	kb_run(&r, "run", "--from", a, "--colocate", "pe", "--transport", "inproc", "--quiet",
	       NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	kb_expect_same_run(a, b, false);
	same_tensor(a, b, "c.npy");
	/* --config DIR/summary.json without WORKLOAD is the same */
	snprintf(b, sizeof(b), "%s/a/summary.json", dir);
	kb_run(&r, "run", "--config", b, "--quiet", "--out", NULL);
	cr_expect_neq(r.status, 0, "an incomplete --out is a usage error");
	snprintf(a, sizeof(a), "%s/c", dir);
	kb_run(&r, "run", "--config", b, "--quiet", "--out", a, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(b, sizeof(b), "%s/a", dir);
	kb_expect_same_run(b, a, false);
	same_tensor(b, a, "c.npy");
}

/* A folder whose digest no rerun gives: one line naming both digests,
 * exit 1. Options that would change the run are usage errors. */
Test(rerun, digest_mismatch_and_conflicting_options, .timeout = 120)
{
	char dir[256], a[300], path[400], *text, *d;
	struct kb_result r;
	FILE *f;

	kb_tmpdir(dir, sizeof(dir), "rerun-bad");
	snprintf(a, sizeof(a), "%s/a", dir);
	kb_run_ok(a, (const char *const[]){ "gemm", "--arg", "m=64", NULL });
	snprintf(path, sizeof(path), "%s/summary.json", a);
	text = kb_slurp(path, NULL);
	cr_assert_not_null(text);
	d = strstr(text, "\"delivery_digest\": \"");
	cr_assert_not_null(d);
	d += strlen("\"delivery_digest\": \"");
	d[0] = d[0] == '0' ? '1' : '0'; /* a digest no run of this gives */
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	free(text);
	kb_run(&r, "run", "--from", a, "--quiet", NULL);
	cr_expect_eq(r.status, 1, "%s", r.err);
	cr_expect(strstr(r.err, "delivery digest") && strstr(r.err, "recorded") &&
		  kb_count_lines(r.err) == 1, "%s", r.err);
	kb_run(&r, "run", "--from", a, "--set", "dma.bytes_per_cycle=8", NULL);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "--set would change") && kb_count_lines(r.err) == 1, "%s", r.err);
	kb_run(&r, "run", "gemm", "--from", a, NULL);
	cr_expect_eq(r.status, 2);
	kb_run(&r, "run", "--from", dir, NULL);
	cr_expect_eq(r.status, 2, "a folder without summary.json: %s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
}

/* --config summary.json with a workload is a configuration layer: later
 * --set override it as they override any config file. */
Test(rerun, config_summary_is_a_layer, .timeout = 120)
{
	char dir[256], a[300], b[300], cfg[400];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "rerun-layer");
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/b", dir);
	kb_run_ok(a, (const char *const[]){ "gemm", "--set", "gemm.array_cols=32", "--set",
					    "dma.setup_cycles=7", NULL });
	snprintf(cfg, sizeof(cfg), "%s/summary.json", a);
	kb_run(&r, "run", "gemm", "--config", cfg, "--set", "dma.setup_cycles=9", "--quiet",
	       "--out", b, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(kb_summary_u64(b, "config.gemm.array_cols"), 32);
	cr_expect_eq(kb_summary_u64(b, "config.dma.setup_cycles"), 9);
}

/* ---------------------------------------------------------------- diff */

Test(diff, same_runs_exit_0_and_deployment_is_no_difference, .timeout = 120)
{
	char dir[256], a[300], b[300];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "diff-same");
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/b", dir);
	kb_run_ok(a, data_run);
	kb_run_ok(b, (const char *const[]){ "gemm", "--mode", "data", "--arg", "m=32", "--arg",
					    "k=64", "--arg", "n=48", "--seed", "7", "--set",
					    "gemm.array_rows=64", "--colocate", "all", "--transport",
					    "inproc", NULL });
	kb_run(&r, "diff", a, b, NULL);
	cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
	cr_expect(strstr(r.out, "result: the same"), "%s", r.out);
	cr_expect(strstr(r.out, "c.npy") == NULL || strstr(r.out, "the same"), "%s", r.out);
}

/* Another configuration: the key, the statistics with their deltas, the
 * digest; tensors compared element by element. */
Test(diff, config_and_statistics_with_deltas, .timeout = 120)
{
	char dir[256], a[300], b[300];
	struct kb_result r;
	unsigned long long la, lb;
	char want[2048];

	kb_tmpdir(dir, sizeof(dir), "diff-cfg");
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/b", dir);
	kb_run_ok(a, (const char *const[]){ "gemm", "--arg", "m=64", NULL });
	kb_run_ok(b, (const char *const[]){ "gemm", "--arg", "m=64", "--set",
					    "gemm.setup_cycles=500", NULL });
	kb_run(&r, "diff", a, b, NULL);
	cr_expect_eq(r.status, 1, "%s%s", r.out, r.err);
	snprintf(want, sizeof(want), "%llu -> 500",
		 (unsigned long long)kb_summary_u64(a, "config.gemm.setup_cycles"));
	cr_expect(strstr(r.out, "config.gemm.setup_cycles") && strstr(r.out, want), "%s", r.out);
	la = kb_summary_u64(a, "latency_ps");
	lb = kb_summary_u64(b, "latency_ps");
	cr_assert_gt(lb, la);
	snprintf(want, sizeof(want), "%llu -> %llu  (+%llu, +%.3f%%)", la, lb, lb - la,
		 100.0 * (double)(lb - la) / (double)la);
	cr_expect(strstr(r.out, want), "no '%s' in %s", want, r.out);
	cr_expect(strstr(r.out, "delivery digest: differs"), "%s", r.out);
	/* --json: one JSON object (read whole by python3) */
	snprintf(want, sizeof(want), "%s diff --json %s %s > %s/d.json; test $? = 1 && python3 -c "
		 "'import json,sys; d=json.load(open(sys.argv[1])); assert not d[\"same\"]' %s/d.json",
		 kb_bin(), a, b, dir, dir);
	cr_expect_eq(system(want), 0, "%s", want);
	kb_run(&r, "diff", a, NULL);
	cr_expect_eq(r.status, 2);
	kb_run(&r, "diff", a, dir, NULL);
	cr_expect_eq(r.status, 2, "no summary.json in %s: %s", dir, r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
}

/* The largest element errors of c.npy between two seeds, as the test
 * computes them from the files. */
Test(diff, tensor_errors_match_a_computation_from_the_files, .timeout = 120)
{
	char dir[256], a[300], b[300], pa[400], pb[400], want[200];
	const char *other[] = { "gemm", "--mode", "data", "--arg", "m=32", "--arg", "k=64", "--arg",
				"n=48", "--seed", "8", "--set", "gemm.array_rows=64", NULL };
	struct rt_npy x, y;
	struct kb_result r;
	double max_abs = 0;
	float u, v;

	kb_tmpdir(dir, sizeof(dir), "diff-npy");
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/b", dir);
	kb_run_ok(a, data_run);
	kb_run_ok(b, other);
	snprintf(pa, sizeof(pa), "%s/c.npy", a);
	snprintf(pb, sizeof(pb), "%s/c.npy", b);
	cr_assert_eq(rt_npy_read(pa, &x), RT_EOK);
	cr_assert_eq(rt_npy_read(pb, &y), RT_EOK);
	cr_assert_eq(x.count, y.count);
	for (uint64_t i = 0; i < x.count; i++) {
		memcpy(&u, x.data + 4 * i, 4);
		memcpy(&v, y.data + 4 * i, 4);
		if (fabs((double)u - (double)v) > max_abs)
			max_abs = fabs((double)u - (double)v);
	}
	rt_npy_release(&x);
	rt_npy_release(&y);
	kb_run(&r, "diff", a, b, NULL);
	cr_expect_eq(r.status, 1);
	snprintf(want, sizeof(want), "max abs error %.6g", max_abs);
	cr_expect(strstr(r.out, "c.npy") && strstr(r.out, want), "no '%s' in %s", want, r.out);
	cr_expect(strstr(r.out, "args.seed") || strstr(r.out, "seed"), "%s", r.out);
}

/* A workload without kernel hosts (the traffic fixture) records the
 * arguments it was given, so its rerun is the same run. */
Test(rerun, traffic_records_its_arguments, .timeout = 120)
{
	char dir[256], a[300], b[300], *da, *db;
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "rerun-traffic");
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/a/rerun", dir);
	kb_run_ok(a, (const char *const[]){ "traffic", "--arg", "components=6", "--arg",
					    "messages=3000", NULL });
	kb_run(&r, "run", "--from", a, "--quiet", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	da = kb_summary_field(a, "delivery_digest");
	db = kb_summary_field(b, "delivery_digest");
	cr_expect_str_eq(da, db);
	cr_expect_eq(kb_summary_u64(a, "messages"), kb_summary_u64(b, "messages"));
	free(da);
	free(db);
}
