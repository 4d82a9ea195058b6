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
	const char *off[] = { "gqa_decode_opt2", "--arg", "seq_kv=65536", "--arg", "tile=256", EMBEDDED,
			      "--fast-forward", "off", NULL };
	const char *on[] = { "gqa_decode_opt2", "--arg", "seq_kv=65536", "--arg", "tile=256", EMBEDDED,
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

static double summary_num(const char *dir, const char *key)
{
	char *s = summary(dir), v[64];
	bool ok = kb_json_field(s, key, v, sizeof(v));

	free(s);
	cr_assert(ok, "%s/summary.json has no %s", dir, key);
	return strtod(v, NULL);
}

/* Auto mode: the latency's error against the full run is within the
 * bound it reports (and within 0.5 %). */
static void expect_bound_covers(const char *full, const char *ff)
{
	double lf = summary_num(full, "latency_ps"), la = summary_num(ff, "latency_ps");
	double bound = summary_num(ff, "fast_forward.error_bound_ps");
	double err = la > lf ? la - lf : lf - la;

	cr_assert_leq(err, bound, "error %.0f ps above the bound %.0f ps", err, bound);
	cr_assert_leq(err, 0.005 * lf, "error %.0f ps above 0.5 %% of %.0f ps", err, lf);
}

Test(fast_forward, auto_bound_covers_its_error, .timeout = 240)
{
	char full[256], ff[256];
	const char *off[] = { "gqa_decode_opt3", "--arg", "seq_kv=65536", "--arg", "tile=256",
			      EMBEDDED, NULL };
	const char *on[] = { "gqa_decode_opt3", "--arg", "seq_kv=65536", "--arg", "tile=256",
			     EMBEDDED, "--fast-forward", "auto", NULL };
	const char *roff[] = { "ring_attention", "--ranks", "4", "--pes", "2", "--arg",
			       "seq_kv=1024", EMBEDDED, NULL };
	const char *ron[] = { "ring_attention", "--ranks", "4", "--pes", "2", "--arg",
			      "seq_kv=1024", EMBEDDED, "--fast-forward", "auto", NULL };

	kb_tmpdir(full, sizeof(full), "ff-afull");
	kb_tmpdir(ff, sizeof(ff), "ff-auto");
	run_ok(full, off);
	run_ok(ff, on);
	cr_assert_gt(skipped(ff), 0, "nothing was skipped");
	expect_bound_covers(full, ff);
	kb_tmpdir(full, sizeof(full), "ff-rfull");
	kb_tmpdir(ff, sizeof(ff), "ff-rauto");
	run_ok(full, roff);
	run_ok(ff, ron);
	expect_bound_covers(full, ff);
}

/* A user's kernel: a TL_FOR of loads and a softmax step, every iteration
 * alike (exact mode skips it and gives the full run), and the same loop
 * with an odd iteration out every 9th (the pattern then repeats only every
 * 9 iterations: whatever it skips, the result is the full run's). */
static const char user_loops[] =
	"#include \"tl.h\"\n"
	"int loops(struct tl *tl, const struct tl_args *args)\n"
	"{\n"
	"	uint32_t n = tl_arg_u32(args, \"n\", 400, 1, 100000);\n"
	"	uint32_t odd = tl_arg_u32(args, \"odd\", 0, 0, 1000);\n"
	"	TL_FOR(tl, i, 0, n) {\n"
	"		TL_SCRATCH_SCOPE(tl) {\n"
	"			tl_tensor x = tl_load(tl, (uint64_t)i * 8192, 64, 64, TL_F16);\n"
	"			tl_tensor y = tl_exp(tl, x);\n"
	"			if (odd && i % odd == 0)\n"
	"				y = tl_add(tl, y, tl_exp(tl, y));\n"
	"			tl_wait(tl, (tl_future){ y });\n"
	"		}\n"
	"	}\n"
	"	return 0;\n"
	"}\n";

Test(fast_forward, user_loops_are_the_full_run, .timeout = 240)
{
	char dir[256], so[512], spec[600], full[256], ff[256];
	static const char *const odds[] = { "odd=0", "odd=9" };

	kb_tmpdir(dir, sizeof(dir), "ff-user");
	kb_build_kernel(dir, "loops", user_loops, so, sizeof(so));
	snprintf(spec, sizeof(spec), "%s:loops", so);
	for (size_t i = 0; i < 2; i++) {
		const char *off[] = { spec, "--arg", odds[i], "--pes", "2", "--colocate", "all",
				      "--trace", "off", NULL };
		const char *on[] = { spec, "--arg", odds[i], "--pes", "2", "--colocate", "all",
				     "--trace", "off", "--fast-forward", "exact", NULL };

		kb_tmpdir(full, sizeof(full), "ff-ufull");
		kb_tmpdir(ff, sizeof(ff), "ff-uexact");
		run_ok(full, off);
		run_ok(ff, on);
		if (i == 0)
			cr_assert_gt(skipped(ff), 0, "nothing was skipped");
		expect_same_results(full, ff);
	}
}

/* The ring (issue 24): pass=q (decode) contiguous and zigzag, pass=kv
 * (prefill) causal contiguous, zigzag and without a mask, each against
 * its full run in both modes. Sizes that run in seconds: 4 ranks x 2 PEs,
 * pass=kv at 2K tokens with 2 heads and 32-row tiles (16 tiles per rank
 * and step), pass=q at 256K tokens. */
#define RING "ring_attention", "--ranks", "4", "--pes", "2"
#define RING_KV "--arg", "seq_kv=2048", "--arg", "heads_q=2", "--arg", "heads_kv=2", \
	"--arg", "tile=32"
#define RING_Q "--arg", "pass=q", "--arg", "seq_kv=262144", "--arg", "tile=256"

/* Runs `args` (NULL-ended) embedded with --fast-forward `mode` into a
 * fresh folder `dir` (256 bytes). */
static void run_mode(const char *const *args, const char *mode, char *dir)
{
	static const char *const tail[] = { EMBEDDED, "--fast-forward" };
	const char *argv[48];
	size_t n = 0;

	for (; args[n]; n++) {
		cr_assert_lt(n, 40);
		argv[n] = args[n];
	}
	for (size_t i = 0; i < sizeof(tail) / sizeof(tail[0]); i++)
		argv[n++] = tail[i];
	argv[n++] = mode;
	argv[n] = NULL;
	kb_tmpdir(dir, 256, "ff-ring");
	run_ok(dir, argv);
}

/* `args` with --fast-forward off, exact and auto into full, exact, autod. */
static void run_three(const char *const *args, char *full, char *exact, char *autod)
{
	run_mode(args, "off", full);
	run_mode(args, "exact", exact);
	run_mode(args, "auto", autod);
}

/* pass=q: every rank sweeps its KV in one TL_FOR at once; exact gives the
 * full run byte for byte, auto too. */
Test(fast_forward, ring_pass_q_is_the_full_run, .timeout = 240)
{
	static const char *const layouts[] = { "layout=contiguous", "layout=zigzag" };
	char full[256], exact[256], autod[256];

	for (size_t i = 0; i < 2; i++) {
		const char *args[] = { RING, RING_Q, "--arg", layouts[i], NULL };

		run_three(args, full, exact, autod);
		cr_assert_gt(skipped(exact), 0, "%s: nothing was skipped", layouts[i]);
		expect_same_results(full, exact);
		expect_bound_covers(full, autod);
	}
}

/* pass=kv: the ranks' alike runs are TL_FORs, the causal diagonal's tiles
 * plain loops. Two bugs this catches, causal: a skip while one rank works
 * through its diagonal left that rank's tiles to be run again after it
 * (14.1 us late on a 12.5 ms run; a kernel issuing commands outside its
 * watched loops now stops every skip), and a skip while a rank's inbox
 * held messages unlike the skipped ones (rank 2's end 285 us early in its
 * statistics; the inbox's messages are now in the digest). */
Test(fast_forward, ring_pass_kv_is_the_full_run, .timeout = 300)
{
	static const char *const masks[] = { "causal=1", "causal=0" };
	char full[256], exact[256], autod[256];

	for (size_t i = 0; i < 2; i++) {
		const char *args[] = { RING, RING_KV, "--arg", masks[i], NULL };

		run_three(args, full, exact, autod);
		cr_assert_gt(skipped(exact), 0, "%s: nothing was skipped", masks[i]);
		expect_same_results(full, exact);
		expect_bound_covers(full, autod);
	}
}

/* pass=kv zigzag: a rank's two chunks put a diagonal in every step, so
 * nothing repeats long enough; both modes give the full run. */
Test(fast_forward, ring_pass_kv_zigzag_is_the_full_run, .timeout = 240)
{
	const char *args[] = { RING, RING_KV, "--arg", "layout=zigzag", NULL };
	char full[256], exact[256], autod[256];

	run_three(args, full, exact, autod);
	expect_same_results(full, exact);
	expect_same_results(full, autod);
}
