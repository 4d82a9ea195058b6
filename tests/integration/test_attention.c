/* test_attention.c — the attention kernels (gqa_decode_opt2/opt3,
 * gqa_prefill, ring_attention) through the real binary: numerics against
 * an fp64 reference computed here from the q/k/v the run wrote, ADR-0065
 * tests 6 and 7, ADR-0063 test 3, input files, determinism across
 * colocation and the golden latencies (tests/golden/attention_*.txt). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rt/half.h"
#include "rt/npy.h"

#define SMALL "heads_q=4", "heads_kv=2", "head_dim=32", "tile=32"
#define MAX_ARGS 48

/* Runs `kernbench run KERNEL --out DIR` with extra options (NULL-ended,
 * "name=value" items become --arg name=value, others are passed as is). */
static void run_kernel(struct kb_result *res, const char *dir,
		       const char *kernel, ...)
{
	char *argv[MAX_ARGS];
	int n = 0;
	va_list ap;
	const char *s;

	argv[n++] = (char *)kb_bin();
	argv[n++] = (char *)"run";
	argv[n++] = (char *)kernel;
	argv[n++] = (char *)"--out";
	argv[n++] = (char *)dir;
	argv[n++] = (char *)"--quiet";
	va_start(ap, kernel);
	while ((s = va_arg(ap, const char *)) && n < MAX_ARGS - 2) {
		if (s[0] != '-' && strchr(s, '='))
			argv[n++] = (char *)"--arg";
		argv[n++] = (char *)s;
	}
	va_end(ap);
	argv[n] = NULL;
	kb_runv(res, argv);
}

#define RUN_OK(dir, kernel, ...)                                               \
	do {                                                                   \
		struct kb_result r_;                                           \
		run_kernel(&r_, (dir), (kernel), __VA_ARGS__, NULL);           \
		cr_assert_eq(r_.status, 0, "%s failed (%d): %s", (kernel),     \
			     r_.status, r_.err);                               \
	} while (0)

/* A 3-D tensor as doubles. */
struct t3 {
	uint64_t n0, n1, n2;
	double *v;
};

static void load3(const char *dir, const char *file, struct t3 *t)
{
	struct rt_npy n;
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	cr_assert_eq(rt_npy_read(path, &n), RT_EOK, "%s: %s", path, rt_last_error());
	cr_assert_eq(n.type, RT_NPY_F16, "%s is not float16", path);
	cr_assert_eq(n.ndim, 3, "%s has %u dims", path, n.ndim);
	t->n0 = n.shape[0];
	t->n1 = n.shape[1];
	t->n2 = n.shape[2];
	t->v = malloc(n.count * sizeof(double));
	for (uint64_t i = 0; i < n.count; i++) {
		uint16_t h;

		memcpy(&h, n.data + 2 * i, 2);
		t->v[i] = rt_f16_to_f32(h);
	}
	rt_npy_release(&n);
}

/* Max |o - reference| over all outputs; the reference is exact softmax
 * attention in fp64 (causal: query i sits at position S - sq + i). */
static double attention_error(const char *dir, bool causal)
{
	struct t3 q, k, v, o;
	double err = 0;

	load3(dir, "q.npy", &q);
	load3(dir, "k.npy", &k);
	load3(dir, "v.npy", &v);
	load3(dir, "o.npy", &o);
	cr_assert(o.n0 == q.n0 && o.n1 == q.n1 && o.n2 == q.n2, "o shape");
	uint64_t hq = q.n0, sq = q.n1, d = q.n2, hkv = k.n0, S = k.n1;
	uint64_t g = hq / hkv;
	double *p = malloc(S * sizeof(double));

	for (uint64_t qh = 0; qh < hq; qh++) {
		const double *K = k.v + (qh / g) * S * d, *V = v.v + (qh / g) * S * d;

		for (uint64_t i = 0; i < sq; i++) {
			const double *Q = q.v + (qh * sq + i) * d;
			uint64_t last = causal ? S - sq + i : S - 1;
			double mx = -INFINITY, sum = 0;

			for (uint64_t j = 0; j <= last; j++) {
				double s = 0;

				for (uint64_t c = 0; c < d; c++)
					s += Q[c] * K[j * d + c];
				p[j] = s / sqrt((double)d);
				mx = fmax(mx, p[j]);
			}
			for (uint64_t j = 0; j <= last; j++)
				sum += (p[j] = exp(p[j] - mx));
			for (uint64_t c = 0; c < d; c++) {
				double acc = 0;

				for (uint64_t j = 0; j <= last; j++)
					acc += p[j] * V[j * d + c];
				err = fmax(err, fabs(acc / sum - o.v[(qh * sq + i) * d + c]));
			}
		}
	}
	free(p);
	free(q.v);
	free(k.v);
	free(v.v);
	free(o.v);
	return err;
}

#define TOL 4e-3

/* ------------------------------------------------------------ numerics */

Test(attention, decode_opt2_and_opt3_match_fp64_over_shapes_and_seeds, .timeout = 120)
{
	static const char *const kernels[2] = { "gqa_decode_opt2", "gqa_decode_opt3" };
	static const char *const seeds[2] = { "1", "7" };
	char dir[256];

	for (int k = 0; k < 2; k++)
		for (int s = 0; s < 2; s++) {
			kb_tmpdir(dir, sizeof(dir), "attn-dec");
			RUN_OK(dir, kernels[k], "--mode", "data", "--pes", "2",
			       "--seed", seeds[s], SMALL, s ? "seq_kv=96" : "seq_kv=64");
			double e = attention_error(dir, true);
			cr_assert_leq(e, TOL, "%s seed %s: max abs error %g", kernels[k],
				      seeds[s], e);
		}
	/* G = 1, several heads per PE, 2 query positions, a deeper pipeline */
	kb_tmpdir(dir, sizeof(dir), "attn-dec2");
	RUN_OK(dir, "gqa_decode_opt3", "--mode", "data", "--pes", "2", "heads_q=3",
	       "heads_kv=3", "head_dim=16", "tile=16", "seq_kv=80", "seq_q=2",
	       "depth=3");
	cr_assert_leq(attention_error(dir, true), TOL);
}

Test(attention, prefill_causal_and_full_match_fp64, .timeout = 120)
{
	char dir[256];

	kb_tmpdir(dir, sizeof(dir), "attn-pre");
	RUN_OK(dir, "gqa_prefill", "--mode", "data", "--pes", "2", SMALL,
	       "seq_kv=64", "seq_q=64", "qblock=16");
	cr_assert_leq(attention_error(dir, true), TOL);
	kb_tmpdir(dir, sizeof(dir), "attn-pre-nc");
	RUN_OK(dir, "gqa_prefill", "--mode", "data", "--pes", "2", "--seed", "3",
	       SMALL, "seq_kv=64", "seq_q=24", "causal=0", "opt=3");
	cr_assert_leq(attention_error(dir, false), TOL);
	/* queries shorter than a block: blocks span whole heads, causal mask
	 * with a diagonal that is not tile aligned */
	kb_tmpdir(dir, sizeof(dir), "attn-pre-sh");
	RUN_OK(dir, "gqa_prefill", "--mode", "data", "--pes", "1", SMALL,
	       "seq_kv=64", "seq_q=5");
	cr_assert_leq(attention_error(dir, true), TOL);
}

Test(attention, ring_pass_kv_and_pass_q_match_fp64_for_2_and_4_ranks, .timeout = 120)
{
	static const char *const ranks[2] = { "2", "4" };
	char dir[256];

	for (int r = 0; r < 2; r++) {
		kb_tmpdir(dir, sizeof(dir), "attn-ringkv");
		RUN_OK(dir, "ring_attention", "--mode", "data", "--ranks", ranks[r],
		       "--pes", "2", "--colocate", "all", SMALL, "seq_kv=32",
		       "pass=kv", r ? "seq_q=64" : "seq_q=32");
		cr_assert_leq(attention_error(dir, true), TOL, "pass=kv R=%s", ranks[r]);
		kb_tmpdir(dir, sizeof(dir), "attn-ringq");
		RUN_OK(dir, "ring_attention", "--mode", "data", "--ranks", ranks[r],
		       "--pes", "2", "--colocate", "all", "--seed", "5", SMALL,
		       "seq_kv=64", "pass=q");
		cr_assert_leq(attention_error(dir, true), TOL, "pass=q R=%s", ranks[r]);
	}
	/* query blocks going round in several ring passes (qwindow=1) */
	kb_tmpdir(dir, sizeof(dir), "attn-ringkv-win");
	RUN_OK(dir, "ring_attention", "--mode", "data", "--ranks", "2", "--pes", "1",
	       "--colocate", "all", SMALL, "seq_kv=32", "seq_q=64", "qblock=16", "qwindow=1",
	       "pass=kv");
	cr_assert_leq(attention_error(dir, true), TOL, "pass=kv with qwindow=1");
	/* prefill through pass=q, not causal */
	kb_tmpdir(dir, sizeof(dir), "attn-ringq2");
	RUN_OK(dir, "ring_attention", "--mode", "data", "--ranks", "2", "--pes", "1",
	       "--colocate", "all", SMALL, "seq_kv=32", "seq_q=8", "pass=q", "causal=0");
	cr_assert_leq(attention_error(dir, false), TOL);
}

/* ------------------------------------------------------------ ADRs */

/* ADR-0065 test 6: opt2 and opt3 compute the same final state; o is the
 * final O / l, so equal o within fp tolerance means equal (m, l, O) up to
 * the common normalisation. */
Test(attention, adr0065_t6_opt2_and_opt3_agree, .timeout = 60)
{
	char d2[256], d3[256];
	struct t3 o2, o3;
	double diff = 0;

	kb_tmpdir(d2, sizeof(d2), "attn-t6a");
	kb_tmpdir(d3, sizeof(d3), "attn-t6b");
	RUN_OK(d2, "gqa_decode_opt2", "--mode", "data", "--pes", "2", SMALL, "seq_kv=128");
	RUN_OK(d3, "gqa_decode_opt3", "--mode", "data", "--pes", "2", SMALL, "seq_kv=128");
	load3(d2, "o.npy", &o2);
	load3(d3, "o.npy", &o3);
	for (uint64_t i = 0; i < o2.n0 * o2.n1 * o2.n2; i++)
		diff = fmax(diff, fabs(o2.v[i] - o3.v[i]));
	cr_assert_leq(diff, 2e-3, "opt2 and opt3 differ by %g", diff);
	cr_assert(kb_same_file(strcat(strcpy((char[300]){ 0 }, d2), "/q.npy"),
			       strcat(strcpy((char[300]){ 0 }, d3), "/q.npy")));
	free(o2.v);
	free(o3.v);
}

/* ADR-0065 test 7: per-tile PE_CPU dispatch cycles of opt3 > 2 x opt2. */
Test(attention, adr0065_t7_opt3_dispatch_per_tile_over_twice_opt2, .timeout = 60)
{
	char d2[256], d3[256];

	kb_tmpdir(d2, sizeof(d2), "attn-t7a");
	kb_tmpdir(d3, sizeof(d3), "attn-t7b");
	RUN_OK(d2, "gqa_decode_opt2", "--pes", "1", "--colocate", "all",
	       "heads_kv=1", "heads_q=8", "seq_kv=8192");
	RUN_OK(d3, "gqa_decode_opt3", "--pes", "1", "--colocate", "all",
	       "heads_kv=1", "heads_q=8", "seq_kv=8192");
	uint64_t t2 = kb_summary_u64(d2, "tiles"), t3 = kb_summary_u64(d3, "tiles");
	double c2 = (double)kb_summary_u64(d2, "totals.dispatch_cycles") / (double)t2;
	double c3 = (double)kb_summary_u64(d3, "totals.dispatch_cycles") / (double)t3;

	cr_assert_eq(t2, 64);
	cr_assert_eq(t3, 64);
	cr_assert_gt(c3, 2 * c2, "opt3 %.1f vs opt2 %.1f cycles per tile", c3, c2);
}

/* ADR-0063 test 3 on a real kernel: a decode sweep whose per-tile scratch
 * overflows 1 MiB without scopes completes with them, with a peak that
 * does not grow with the context. */
Test(attention, adr0063_t3_long_decode_needs_scopes_and_peak_is_bounded, .timeout = 120)
{
	char dir[256], dir2[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "attn-t3a");
	run_kernel(&r, dir, "gqa_decode_opt2", "--pes", "1", "--colocate", "all",
		   "heads_kv=1", "heads_q=8", "seq_kv=32768", "scopes=0", NULL);
	cr_assert_neq(r.status, 0, "the unscoped sweep should overflow");
	cr_assert(strstr(r.err, "scratch overflow"), "stderr: %s", r.err);
	RUN_OK(dir, "gqa_decode_opt2", "--pes", "1", "--colocate", "all",
	       "heads_kv=1", "heads_q=8", "seq_kv=32768");
	kb_tmpdir(dir2, sizeof(dir2), "attn-t3b");
	RUN_OK(dir2, "gqa_decode_opt2", "--pes", "1", "--colocate", "all",
	       "heads_kv=1", "heads_q=8", "seq_kv=4096");
	cr_assert_eq(kb_summary_u64(dir, "peak_scratch_bytes"),
		     kb_summary_u64(dir2, "peak_scratch_bytes"));
	cr_assert_lt(kb_summary_u64(dir, "peak_scratch_bytes"), 1u << 20);
}

/* ------------------------------------------------------------ inputs */

Test(attention, inputs_dir_round_trips_and_bad_shape_is_one_clear_error, .timeout = 60)
{
	char a[256], b[256], c[256], path[300], bad[1400];
	struct kb_result r;

	kb_tmpdir(a, sizeof(a), "attn-in-a");
	kb_tmpdir(b, sizeof(b), "attn-in-b");
	RUN_OK(a, "gqa_decode_opt2", "--mode", "data", "--pes", "2", "--seed", "9",
	       SMALL, "seq_kv=64");
	/* the same inputs given back as files: the same o */
	RUN_OK(b, "gqa_decode_opt2", "--mode", "data", "--pes", "2", "--inputs", a,
	       SMALL, "seq_kv=64");
	snprintf(path, sizeof(path), "%s/o.npy", a);
	snprintf(bad, sizeof(bad), "%s/o.npy", b);
	cr_assert(kb_same_file(path, bad), "o differs with --inputs");
	/* wrong shape: o.npy [4, 1, 32] given as k.npy */
	kb_tmpdir(c, sizeof(c), "attn-in-c");
	snprintf(bad, sizeof(bad), "cp %s/q.npy %s/v.npy %s/ && cp %s/o.npy %s/k.npy",
		 a, a, c, a, c);
	cr_assert_eq(system(bad), 0);
	run_kernel(&r, b, "gqa_decode_opt2", "--pes", "2", "--inputs", c, SMALL,
		   "seq_kv=64", NULL);
	cr_assert_neq(r.status, 0);
	cr_assert(strstr(r.err, "k.npy") && strstr(r.err, "expected float16 (2, 64, 32)"),
		  "stderr: %s", r.err);
}

/* ------------------------------------------------------------ determinism */

Test(attention, ipc_and_colocate_all_give_identical_op_log_and_o, .timeout = 120)
{
	char a[256], b[256], fa[300], fb[300];
	static const char *const files[2] = { "op_log.jsonl", "o.npy" };

	kb_tmpdir(a, sizeof(a), "attn-det-a");
	kb_tmpdir(b, sizeof(b), "attn-det-b");
	RUN_OK(a, "ring_attention", "--mode", "data", "--ranks", "2", "--pes", "2",
	       "--transport", "ipc", "--colocate", "none", SMALL, "seq_kv=32", "seq_q=32");
	RUN_OK(b, "ring_attention", "--mode", "data", "--ranks", "2", "--pes", "2",
	       "--transport", "ipc", "--colocate", "all", SMALL, "seq_kv=32", "seq_q=32");
	for (int i = 0; i < 2; i++) {
		snprintf(fa, sizeof(fa), "%s/%s", a, files[i]);
		snprintf(fb, sizeof(fb), "%s/%s", b, files[i]);
		cr_assert(kb_same_file(fa, fb), "%s differs between colocate none and all",
			  files[i]);
	}
}

/* ------------------------------------------------------------ goldens */

/* Each line of tests/golden/attention_latency.txt: NAME LATENCY_PS ARGS...
 * (regenerated by tests/golden/regenerate.sh, i.e. `make golden`). */
Test(attention, golden_latencies_are_pinned, .timeout = 120)
{
	const char *root = getenv("KB_ROOT");
	char path[1024], line[1024], dir[256];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "%s/tests/golden/attention_latency.txt",
		 root ? root : ".");
	f = fopen(path, "r");
	cr_assert_not_null(f, "no %s (run make golden)", path);
	while (fgets(line, sizeof(line), f)) {
		char *argv[MAX_ARGS], *save = NULL, *tok;
		unsigned long long want;
		int k = 0;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		strtok_r(line, " \n", &save); /* name */
		want = strtoull(strtok_r(NULL, " \n", &save), NULL, 10);
		kb_tmpdir(dir, sizeof(dir), "attn-gold");
		argv[k++] = (char *)kb_bin();
		while ((tok = strtok_r(NULL, " \n", &save)) && k < MAX_ARGS - 4)
			argv[k++] = tok;
		argv[k++] = (char *)"--out";
		argv[k++] = dir;
		argv[k++] = (char *)"--quiet";
		argv[k] = NULL;
		struct kb_result r;

		kb_runv(&r, argv);
		cr_assert_eq(r.status, 0, "golden run %s failed: %s", line, r.err);
		cr_assert_eq(kb_summary_u64(dir, "latency_ps"), want,
			     "%s: latency changed (make golden if intended)", line);
		n++;
	}
	fclose(f);
	cr_assert_geq(n, 4);
}
