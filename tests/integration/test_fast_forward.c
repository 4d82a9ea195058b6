/* test_fast_forward.c — --fast-forward (ADR 0059): where the run repeats
 * exactly, skipping is exact (summary.json and stats.csv as the full run's,
 * byte for byte, but for the delivery digest, the wall times and the
 * command line); auto mode's bound covers its true error; runs it cannot
 * fast-forward say why; a bad value is a usage error. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define FIELD_MAX (1u << 20)

/* Runs `kernbench run ARGS... --out DIR --quiet` (NULL-ended) and
 * expects exit 0. */
static void run_ok(const char *dir, const char *const *args)
{
	char *argv[64];
	struct kb_result r;
	int n = 0;

	argv[n++] = (char *)kb_bin();
	argv[n++] = (char *)"run";
	for (; *args && n < 58; args++)
		argv[n++] = (char *)*args;
	argv[n++] = (char *)"--out";
	argv[n++] = (char *)dir;
	argv[n++] = (char *)"--quiet";
	argv[n] = NULL;
	kb_runv(&r, argv);
	cr_assert_eq(r.status, 0, "%s failed (%d): %s", args[0], r.status, r.err);
}

static char *summary(const char *dir)
{
	char path[512];
	char *json;

	snprintf(path, sizeof(path), "%s/summary.json", dir);
	json = kb_slurp(path, NULL);
	cr_assert_not_null(json, "no %s", path);
	return json;
}

/* The same raw JSON value at `key` in both summaries. */
static void expect_same_field(const char *a, const char *b, const char *key)
{
	char *va = malloc(FIELD_MAX), *vb = malloc(FIELD_MAX);
	bool ha, hb;

	cr_assert(va && vb);
	ha = kb_json_field(a, key, va, FIELD_MAX);
	hb = kb_json_field(b, key, vb, FIELD_MAX);
	cr_assert_eq(ha, hb, "\"%s\" in one summary only", key);
	if (ha)
		cr_assert_str_eq(va, vb, "\"%s\" differs with fast-forward", key);
	free(va);
	free(vb);
}

/* Everything a full run reports about the simulated machine. */
static void expect_same_results(const char *full, const char *ff)
{
	static const char *const keys[] = {
		"latency_ps", "sim_time_ps", "messages", "critical_path", "busy_util",
		"throughput_util", "bound", "energy", "totals", "by_kind", "instances",
		"dispatch_cycles_per_tile", "peak_scratch_bytes",
	};
	char *a = summary(full), *b = summary(ff);
	char sa[512], sb[512];

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		expect_same_field(a, b, keys[i]);
	free(a);
	free(b);
	snprintf(sa, sizeof(sa), "%s/stats.csv", full);
	snprintf(sb, sizeof(sb), "%s/stats.csv", ff);
	cr_assert(kb_same_file(sa, sb), "stats.csv differs with fast-forward");
}

static uint64_t skipped(const char *dir)
{
	return kb_summary_u64(dir, "fast_forward.iterations_skipped");
}

#define EMBEDDED "--colocate", "all", "--transport", "inproc", "--trace", "off"

Test(fast_forward, exact_decode_is_the_full_run, .timeout = 120)
{
	char full[256], ff[256];
	const char *off[] = { "gqa_decode_opt2", "--arg", "seq_kv=65536", EMBEDDED,
			      "--fast-forward", "off", NULL };
	const char *on[] = { "gqa_decode_opt2", "--arg", "seq_kv=65536", EMBEDDED,
			     "--fast-forward", "exact", NULL };
	char *s;

	kb_tmpdir(full, sizeof(full), "ff-full");
	kb_tmpdir(ff, sizeof(ff), "ff-exact");
	run_ok(full, off);
	run_ok(ff, on);
	cr_assert_gt(skipped(ff), 0, "nothing was skipped");
	expect_same_results(full, ff);
	s = summary(full);
	cr_assert_null(strstr(s, "fast_forward"), "fast-forward off must not change summary.json");
	free(s);
	s = summary(ff);
	cr_assert_not_null(strstr(s, "\"exact\": true"), "%s", s);
	free(s);
}

static void expect_not_used(const char *dir, const char *why)
{
	char *s = summary(dir);

	cr_assert_not_null(strstr(s, "\"active\": false"), "%s", s);
	cr_assert_not_null(strstr(s, why), "no \"%s\" in %s", why, s);
	cr_assert_eq(skipped(dir), 0);
	free(s);
}

Test(fast_forward, says_why_it_cannot, .timeout = 120)
{
	char d[256];
	const char *data[] = { "gqa_decode_opt2", "--mode", "data", EMBEDDED, "--fast-forward",
			       "exact", NULL };
	const char *split[] = { "gqa_decode_opt2", "--colocate", "pe", "--trace", "off",
				"--fast-forward", "auto", NULL };
	const char *traced[] = { "gqa_decode_opt2", "--colocate", "all", "--fast-forward",
				 "exact", NULL };

	kb_tmpdir(d, sizeof(d), "ff-data");
	run_ok(d, data);
	expect_not_used(d, "data mode");
	kb_tmpdir(d, sizeof(d), "ff-split");
	run_ok(d, split);
	expect_not_used(d, "--colocate all");
	kb_tmpdir(d, sizeof(d), "ff-trace");
	run_ok(d, traced);
	expect_not_used(d, "--trace off");
}

Test(fast_forward, a_bad_mode_is_a_usage_error, .timeout = 30)
{
	struct kb_result r;

	kb_run(&r, "run", "gqa_decode_opt2", "--fast-forward", "sometimes", "--quiet", NULL);
	cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
	cr_assert_not_null(strstr(r.err, "--fast-forward"), "%s", r.err);
	cr_assert_not_null(strstr(r.err, "exact"), "%s", r.err);
}
