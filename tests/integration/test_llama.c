/* test_llama.c — the Llama decoder layer (llama_decode_step,
 * llama_prefill_step) through the real binary, on reduced dimensions in
 * data mode: every step's output against an fp64 reference computed here
 * from the tensors the step read (as the run saved them), and the whole
 * layer against an fp64 reference from the inputs alone; at full size in
 * timing mode, the memory roofline and the all-reduce's α–β bound. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_model.h"
#include "harness.h"
#include "rt/npy.h"

/* A saved tensor: [ranks, rows, cols] as doubles. */
struct mat {
	uint64_t R, rows, cols;
	double *v;
};

static void load(const char *dir, const char *name, struct mat *m)
{
	char path[600];
	struct rt_npy n;

	snprintf(path, sizeof(path), "%s/%s.npy", dir, name);
	cr_assert_eq(rt_npy_read(path, &n), RT_EOK, "%s: %s", path, rt_last_error());
	cr_assert(n.type == RT_NPY_F32 && n.ndim == 3, "%s", path);
	m->R = n.shape[0];
	m->rows = n.shape[1];
	m->cols = n.shape[2];
	m->v = malloc(n.count * sizeof(double) + 8);
	for (uint64_t i = 0; i < n.count; i++) {
		float f;

		memcpy(&f, n.data + 4 * i, 4);
		m->v[i] = f;
	}
	rt_npy_release(&n);
}

static double *el(const struct mat *m, uint64_t r, uint64_t i, uint64_t j)
{
	return &m->v[(r * m->rows + i) * m->cols + j];
}

/* A fresh rows x cols matrix (one rank). */
static struct mat zeros(uint64_t rows, uint64_t cols)
{
	struct mat m = { 1, rows, cols, calloc(rows * cols + 1, sizeof(double)) };

	return m;
}

/* The model as run. */
struct model {
	uint32_t H, HQ, HK, D, F, B, S, tp, cp, ranks;
	uint32_t hq, hk, f, nqkv, sl, T; /* per rank */
	bool prefill;
};

static struct model model_of(uint32_t H, uint32_t HQ, uint32_t HK, uint32_t D, uint32_t F,
			     uint32_t B, uint32_t S, uint32_t tp, uint32_t cp, bool prefill)
{
	struct model m = { H, HQ, HK, D, F, B, S, tp, cp, tp * cp, 0, 0, 0, 0, 0, 0, prefill };

	m.hq = HQ / tp;
	m.hk = HK / tp;
	m.f = F / tp;
	m.nqkv = (m.hq + 2 * m.hk) * D;
	m.sl = prefill ? S / cp : S;
	m.T = prefill ? B * m.sl : B;
	return m;
}

/* ------------------------------------------------------------ reference math */

static void matmul(const struct mat *a, uint64_t ra, const struct mat *b, uint64_t rb,
		   struct mat *c)
{
	for (uint64_t i = 0; i < a->rows; i++)
		for (uint64_t j = 0; j < b->cols; j++) {
			double s = 0;

			for (uint64_t k = 0; k < a->cols; k++)
				s += *el(a, ra, i, k) * *el(b, rb, k, j);
			*el(c, 0, i, j) = s;
		}
}

static void rmsnorm(const struct mat *x, uint64_t rx, const struct mat *w, uint64_t rw,
		    struct mat *y)
{
	for (uint64_t i = 0; i < x->rows; i++) {
		double ms = 0;

		for (uint64_t j = 0; j < x->cols; j++)
			ms += *el(x, rx, i, j) * *el(x, rx, i, j);
		ms = 1.0 / sqrt(ms / x->cols + 1e-5);
		for (uint64_t j = 0; j < x->cols; j++)
			*el(y, 0, i, j) = *el(x, rx, i, j) * ms * *el(w, rw, 0, j);
	}
}

/* RoPE (rotate-half, Llama's) of one head vector at position pos. */
static void rope(const double *x, double *y, uint32_t D, double pos)
{
	for (uint32_t j = 0; j < D; j++) {
		double ang = pos * pow(500000.0, -2.0 * (j % (D / 2)) / D);
		double rot = j < D / 2 ? -x[j + D / 2] : x[j - D / 2];

		y[j] = x[j] * cos(ang) + rot * sin(ang);
	}
}

static double silu(double x)
{
	return x / (1.0 + exp(-x));
}

/* max |got - ref| / max |ref| over rank r's copy. */
static double rel(const struct mat *got, uint64_t r, const struct mat *ref)
{
	double num = 0, den = 0;

	for (uint64_t i = 0; i < ref->rows; i++)
		for (uint64_t j = 0; j < ref->cols; j++) {
			double d = fabs(*el(got, r, i, j) - *el(ref, 0, i, j)), a = fabs(*el(ref, 0, i, j));

			num = d > num ? d : num;
			den = a > den ? a : den;
		}
	return den ? num / den : num;
}

/* fp16 storage: each step's output rounded once (2^-11 relative) from an
 * f32 computation on f16 inputs; 2^-10 of the largest value covers both. */
#define STEP_TOL 0x1p-10

#define EXPECT_STEP(name, got, r, ref)                                                   \
	do {                                                                             \
		double e_ = rel((got), (r), (ref));                                      \
		cr_expect(e_ <= STEP_TOL, "%s, rank %u: max relative error %.3g (fp16: %.3g)", \
			  (name), (unsigned)(r), e_, STEP_TOL);                          \
		if (e_ > worst_step)                                                     \
			worst_step = e_;                                                 \
	} while (0)

static double worst_step, worst_layer;

/* Attention of query row vector q (D) over keys/values [n, D] (rows of
 * mats k, v from `row0`), keys 0..vis-1 visible. */
static void attend(const double *q, const struct mat *k, uint64_t rk, const struct mat *v,
		   uint64_t rv, uint64_t row0, uint64_t vis, uint32_t D, double *out)
{
	double *s = malloc(vis * sizeof(double)), mx = -1e300, l = 0;

	for (uint64_t t = 0; t < vis; t++) {
		double d = 0;

		for (uint32_t j = 0; j < D; j++)
			d += q[j] * *el(k, rk, row0 + t, j);
		s[t] = d / sqrt((double)D);
		mx = s[t] > mx ? s[t] : mx;
	}
	for (uint64_t t = 0; t < vis; t++)
		l += s[t] = exp(s[t] - mx);
	for (uint32_t j = 0; j < D; j++) {
		double a = 0;

		for (uint64_t t = 0; t < vis; t++)
			a += s[t] * *el(v, rv, row0 + t, j);
		out[j] = a / l;
	}
	free(s);
}

/* ------------------------------------------------------------ steps */

/* Every step of every rank against fp64 from the tensors it read. */
static void check_steps(const char *dir, const struct model *m)
{
	struct mat x, wan, wqkv, wo, wfn, wgu, wd, xn, qkv, rq, kc, vc, o, y1, y1r, h, hn, gu, a,
		y2, y2r, out;
	uint32_t D = m->D, G = m->hq / m->hk;

	load(dir, "x", &x), load(dir, "w_attn_norm", &wan), load(dir, "w_qkv", &wqkv);
	load(dir, "w_o", &wo), load(dir, "w_ffn_norm", &wfn), load(dir, "w_gu", &wgu);
	load(dir, "w_down", &wd), load(dir, "attn_norm.xn", &xn), load(dir, "qkv.qkv", &qkv);
	load(dir, m->prefill ? "rope.q" : "rope.qkv", &rq), load(dir, "rope.k_cache", &kc);
	load(dir, "rope.v_cache", &vc), load(dir, "attention.o", &o);
	load(dir, "o_proj.y1", &y1), load(dir, "ffn_norm.h", &h), load(dir, "ffn_norm.hn", &hn);
	load(dir, "gate_up.gu", &gu), load(dir, "silu_mul.a", &a), load(dir, "down.y2", &y2);
	load(dir, "residual.out", &out);
	if (m->tp > 1) {
		load(dir, "attn_reduce.y1", &y1r);
		load(dir, "ffn_reduce.y2", &y2r);
	} else {
		y1r = y1;
		y2r = y2;
	}
	for (uint32_t r = 0; r < m->ranks; r++) {
		uint32_t c = r / m->tp, t0 = r - r % m->tp;
		struct mat ref = zeros(m->T, m->H), rqkv = zeros(m->T, m->nqkv);
		struct mat ro = zeros(m->T, m->hq * D), rgu = zeros(m->T, 2 * m->f);
		struct mat ra = zeros(m->T, m->f), rq1 = zeros(1, D), rk1 = zeros(1, D);
		double qv[1024];

		/* one input per TP group, one set of weights per TP shard */
		for (uint64_t i = 0; i < (uint64_t)m->T * m->H; i++)
			cr_assert(*el(&x, r, 0, i) == *el(&x, t0, 0, i), "rank %u's x is not rank %u's", r,
				  t0);
		for (uint64_t i = 0; i < (uint64_t)m->H * m->nqkv; i++)
			cr_assert(*el(&wqkv, r, 0, i) == *el(&wqkv, r % m->tp, 0, i),
				  "rank %u's w_qkv is not rank %u's", r, r % m->tp);
		rmsnorm(&x, r, &wan, r, &ref);
		EXPECT_STEP("attn_norm", &xn, r, &ref);
		matmul(&xn, r, &wqkv, r, &rqkv);
		EXPECT_STEP("qkv", &qkv, r, &rqkv);
		/* rope: q heads, and the new k and v rows in the cache */
		for (uint32_t t = 0; t < m->T; t++) {
			uint32_t b = m->prefill ? t / m->sl : t, lp = m->prefill ? t % m->sl : m->S - 1;
			double pos = m->prefill ? (double)c * m->sl + lp : m->S - 1.0;

			for (uint32_t j = 0; j < m->hq + m->hk; j++) {
				bool isq = j < m->hq;
				const double *src = el(&qkv, r, t, (uint64_t)j * D);
				double *got = isq ? (m->prefill ? el(&rq, r, ((uint64_t)b * m->hq + j) *
									     m->S + (uint64_t)pos, 0)
								: el(&rq, r, t, (uint64_t)j * D))
						  : el(&kc, r, ((uint64_t)b * m->hk + j - m->hq) * m->sl + lp,
						       0);

				rope(src, qv, D, pos);
				for (uint32_t d = 0; d < D; d++) {
					*el(&rq1, 0, 0, d) = got[d];
					*el(&rk1, 0, 0, d) = qv[d];
				}
				EXPECT_STEP(isq ? "rope q" : "rope k", &rq1, 0, &rk1);
			}
			for (uint32_t j = 0; j < m->hk; j++)
				for (uint32_t d = 0; d < D; d++)
					cr_expect(*el(&vc, r, ((uint64_t)b * m->hk + j) * m->sl + lp, d) ==
							  *el(&qkv, r, t, (uint64_t)(m->hq + m->hk + j) * D + d),
						  "rope v");
		}
		/* attention over the cache (prefill: causal, every cp rank's keys) */
		for (uint32_t t = 0; t < m->T; t++) {
			uint32_t b = m->prefill ? t / m->sl : t;
			uint64_t pos = m->prefill ? (uint64_t)c * m->sl + t % m->sl : m->S - 1;

			for (uint32_t j = 0; j < m->hq; j++) {
				const double *q = m->prefill ? el(&rq, r, ((uint64_t)b * m->hq + j) * m->S + pos, 0)
							     : el(&rq, r, t, (uint64_t)j * D);
				double acc[1024] = { 0 };

				if (!m->prefill) {
					attend(q, &kc, r, &vc, r, ((uint64_t)b * m->hk + j / G) * m->S,
					       m->S, D, acc);
				} else { /* keys 0..pos, spread over the cp ranks */
					double mx = -1e300, l = 0, *s = malloc((pos + 1) * sizeof(double));

					for (uint64_t kp = 0; kp <= pos; kp++) {
						uint32_t kr = (uint32_t)(kp / m->sl) * m->tp + r % m->tp;
						uint64_t row = ((uint64_t)b * m->hk + j / G) * m->sl + kp % m->sl;
						double dot = 0;

						for (uint32_t d = 0; d < D; d++)
							dot += q[d] * *el(&kc, kr, row, d);
						s[kp] = dot / sqrt((double)D);
						mx = s[kp] > mx ? s[kp] : mx;
					}
					for (uint64_t kp = 0; kp <= pos; kp++)
						l += s[kp] = exp(s[kp] - mx);
					for (uint64_t kp = 0; kp <= pos; kp++) {
						uint32_t kr = (uint32_t)(kp / m->sl) * m->tp + r % m->tp;
						uint64_t row = ((uint64_t)b * m->hk + j / G) * m->sl + kp % m->sl;

						for (uint32_t d = 0; d < D; d++)
							acc[d] += s[kp] / l * *el(&vc, kr, row, d);
					}
					free(s);
				}
				for (uint32_t d = 0; d < D; d++)
					*el(&ro, 0, t, (uint64_t)j * D + d) = acc[d];
			}
		}
		EXPECT_STEP("attention", &o, r, &ro);
		matmul(&o, r, &wo, r, &ref);
		EXPECT_STEP("o_proj", &y1, r, &ref);
		/* the all-reduce over this rank's tp group */
		memset(ref.v, 0, m->T * m->H * sizeof(double));
		for (uint32_t q = t0; q < t0 + m->tp; q++)
			for (uint64_t i = 0; i < (uint64_t)m->T * m->H; i++)
				ref.v[i] += y1.v[q * (uint64_t)m->T * m->H + i];
		if (m->tp > 1)
			EXPECT_STEP("attn_reduce", &y1r, r, &ref);
		for (uint64_t i = 0; i < (uint64_t)m->T * m->H; i++)
			ref.v[i] = x.v[r * (uint64_t)m->T * m->H + i] + y1r.v[r * (uint64_t)m->T * m->H + i];
		EXPECT_STEP("ffn_norm sum", &h, r, &ref);
		rmsnorm(&h, r, &wfn, r, &ref);
		EXPECT_STEP("ffn_norm", &hn, r, &ref);
		matmul(&hn, r, &wgu, r, &rgu);
		EXPECT_STEP("gate_up", &gu, r, &rgu);
		for (uint32_t t = 0; t < m->T; t++)
			for (uint32_t j = 0; j < m->f; j++)
				*el(&ra, 0, t, j) = silu(*el(&gu, r, t, j)) * *el(&gu, r, t, m->f + j);
		EXPECT_STEP("silu_mul", &a, r, &ra);
		matmul(&a, r, &wd, r, &ref);
		EXPECT_STEP("down", &y2, r, &ref);
		memset(ref.v, 0, m->T * m->H * sizeof(double));
		for (uint32_t q = t0; q < t0 + m->tp; q++)
			for (uint64_t i = 0; i < (uint64_t)m->T * m->H; i++)
				ref.v[i] += y2.v[q * (uint64_t)m->T * m->H + i];
		if (m->tp > 1)
			EXPECT_STEP("ffn_reduce", &y2r, r, &ref);
		for (uint64_t i = 0; i < (uint64_t)m->T * m->H; i++)
			ref.v[i] = h.v[r * (uint64_t)m->T * m->H + i] + y2r.v[r * (uint64_t)m->T * m->H + i];
		EXPECT_STEP("residual", &out, r, &ref);
		free(ref.v), free(rqkv.v), free(ro.v), free(rgu.v), free(ra.v), free(rq1.v), free(rk1.v);
	}
}

/* The whole layer in fp64 from x, the weights and the cache alone (no
 * rounding between steps): the output within what eleven fp16 roundings
 * on the way can add up to (11 x 2^-11 < 8 x 2^-10, with the norms'
 * gain). Decode, tensor parallel only. */
static void check_layer(const char *dir, const struct model *m)
{
	struct mat x, wan, wqkv, wo, wfn, wgu, wd, kc, vc, out;
	uint32_t D = m->D, G = m->hq / m->hk, T = m->T, H = m->H;
	struct mat y1 = zeros(T, H), y2 = zeros(T, H), hh = zeros(T, H), xn = zeros(T, H);
	struct mat ref = zeros(T, H);
	double e;

	load(dir, "x", &x), load(dir, "w_attn_norm", &wan), load(dir, "w_qkv", &wqkv);
	load(dir, "w_o", &wo), load(dir, "w_ffn_norm", &wfn), load(dir, "w_gu", &wgu);
	load(dir, "w_down", &wd), load(dir, "k_cache", &kc), load(dir, "v_cache", &vc);
	load(dir, "residual.out", &out);
	for (uint32_t r = 0; r < m->ranks; r++) { /* each rank's part of the sums */
		struct mat qkv = zeros(T, m->nqkv), o = zeros(T, m->hq * D), part = zeros(T, H);

		rmsnorm(&x, r, &wan, r, &xn);
		matmul(&xn, 0, &wqkv, r, &qkv);
		for (uint32_t b = 0; b < T; b++) {
			double q[1024], k[1024];

			for (uint32_t j = 0; j < m->hk; j++) { /* this token's k, v into the cache */
				uint64_t row = ((uint64_t)b * m->hk + j) * m->S + m->S - 1;

				rope(el(&qkv, 0, b, (uint64_t)(m->hq + j) * D), k, D, m->S - 1.0);
				for (uint32_t d = 0; d < D; d++) {
					*el(&kc, r, row, d) = k[d];
					*el(&vc, r, row, d) = *el(&qkv, 0, b, (uint64_t)(m->hq + m->hk + j) * D + d);
				}
			}
			for (uint32_t j = 0; j < m->hq; j++) {
				rope(el(&qkv, 0, b, (uint64_t)j * D), q, D, m->S - 1.0);
				attend(q, &kc, r, &vc, r, ((uint64_t)b * m->hk + j / G) * m->S, m->S, D,
				       el(&o, 0, b, (uint64_t)j * D));
			}
		}
		matmul(&o, 0, &wo, r, &part);
		for (uint64_t i = 0; i < (uint64_t)T * H; i++)
			y1.v[i] += part.v[i];
		free(qkv.v), free(o.v), free(part.v);
	}
	for (uint64_t i = 0; i < (uint64_t)T * H; i++)
		hh.v[i] = x.v[i] + y1.v[i];
	rmsnorm(&hh, 0, &wfn, 0, &xn);
	for (uint32_t r = 0; r < m->ranks; r++) {
		struct mat gu = zeros(T, 2 * m->f), a = zeros(T, m->f), part = zeros(T, H);

		matmul(&xn, 0, &wgu, r, &gu);
		for (uint32_t t = 0; t < T; t++)
			for (uint32_t j = 0; j < m->f; j++)
				*el(&a, 0, t, j) = silu(*el(&gu, 0, t, j)) * *el(&gu, 0, t, m->f + j);
		matmul(&a, 0, &wd, r, &part);
		for (uint64_t i = 0; i < (uint64_t)T * H; i++)
			y2.v[i] += part.v[i];
		free(gu.v), free(a.v), free(part.v);
	}
	for (uint64_t i = 0; i < (uint64_t)T * H; i++)
		ref.v[i] = hh.v[i] + y2.v[i];
	for (uint32_t r = 0; r < m->ranks; r++) {
		e = rel(&out, r, &ref);
		cr_expect(e < 8 * STEP_TOL, "the layer, rank %u: max relative error %.3g", r, e);
		worst_layer = e > worst_layer ? e : worst_layer;
	}
}

static void run(const char *dir, const char *kernel, const char *ranks, const char *pes, ...)
{
	char *argv[48];
	struct kb_result r;
	int n = 0;
	va_list ap;
	const char *s;

	argv[n++] = (char *)kb_bin();
	argv[n++] = (char *)"run";
	argv[n++] = (char *)kernel;
	argv[n++] = (char *)"--ranks";
	argv[n++] = (char *)ranks;
	argv[n++] = (char *)"--pes";
	argv[n++] = (char *)pes;
	argv[n++] = (char *)"--out";
	argv[n++] = (char *)dir;
	argv[n++] = (char *)"--quiet";
	argv[n++] = (char *)"--colocate";
	argv[n++] = (char *)"all";
	va_start(ap, pes);
	while ((s = va_arg(ap, const char *)) && n < 46) {
		if (s[0] != '-' && strchr(s, '=') && strcmp(argv[n - 1], "--set"))
			argv[n++] = (char *)"--arg";
		argv[n++] = (char *)s;
	}
	va_end(ap);
	argv[n] = NULL;
	kb_runv(&r, argv);
	cr_assert_eq(r.status, 0, "%s failed (%d): %s", kernel, r.status, r.err);
}

#define SMALL "hidden=256", "heads_q=8", "heads_kv=2", "head_dim=32", "ffn=512"

Test(llama, decode_steps_and_layer_equal_fp64_at_tp_1_and_2, .timeout = 600)
{
	char base[256], dir[400];
	struct model m1 = model_of(256, 8, 2, 32, 512, 2, 37, 1, 1, false);
	struct model m2 = model_of(256, 8, 2, 32, 512, 3, 70, 2, 1, false);

	kb_tmpdir(base, sizeof(base), "llama-dec");
	snprintf(dir, sizeof(dir), "%s/tp1", base);
	run(dir, "llama_decode_step", "1", "3", "--mode", "data", SMALL, "batch=2", "seq_kv=37",
	    NULL);
	check_steps(dir, &m1);
	check_layer(dir, &m1);
	snprintf(dir, sizeof(dir), "%s/tp2", base);
	run(dir, "llama_decode_step", "2", "2", "--mode", "data", SMALL, "batch=3", "seq_kv=70",
	    NULL);
	check_steps(dir, &m2);
	check_layer(dir, &m2);
	cr_log_info("decode: worst step %.3g, worst layer %.3g (relative to the largest value)",
		    worst_step, worst_layer);
}

Test(llama, other_dimensions_and_tp_4, .timeout = 600)
{
	char base[256];
	struct model m = model_of(192, 12, 4, 16, 384, 2, 130, 4, 1, false);

	kb_tmpdir(base, sizeof(base), "llama-dim");
	run(base, "llama_decode_step", "4", "2", "--mode", "data", "hidden=192", "heads_q=12",
	    "heads_kv=4", "head_dim=16", "ffn=384", "batch=2", "seq_kv=130", NULL);
	check_steps(base, &m);
	check_layer(base, &m);
}

Test(llama, prefill_tensor_context_and_both_parallel_equal_fp64, .timeout = 600)
{
	char base[256], dir[400];
	struct model tp = model_of(256, 8, 2, 32, 512, 2, 40, 2, 1, true);
	struct model cp = model_of(256, 8, 2, 32, 512, 1, 96, 1, 3, true);
	struct model both = model_of(256, 8, 2, 32, 512, 2, 64, 2, 2, true);

	kb_tmpdir(base, sizeof(base), "llama-pre");
	snprintf(dir, sizeof(dir), "%s/tp", base);
	run(dir, "llama_prefill_step", "2", "2", "--mode", "data", SMALL, "batch=2", "seq_kv=40",
	    NULL);
	check_steps(dir, &tp);
	snprintf(dir, sizeof(dir), "%s/cp", base);
	run(dir, "llama_prefill_step", "3", "2", "--mode", "data", SMALL, "batch=1", "seq_kv=96",
	    "cp=3", NULL);
	check_steps(dir, &cp);
	snprintf(dir, sizeof(dir), "%s/tpcp", base);
	run(dir, "llama_prefill_step", "4", "2", "--mode", "data", SMALL, "batch=2", "seq_kv=64",
	    "cp=2", NULL);
	check_steps(dir, &both);
}

/* The same layer computes the same bytes in any process grouping. */
Test(llama, same_result_in_every_grouping, .timeout = 600)
{
	char base[256], one[400], many[400];
	struct kb_result r;

	kb_tmpdir(base, sizeof(base), "llama-group");
	snprintf(one, sizeof(one), "%s/all", base);
	snprintf(many, sizeof(many), "%s/pe", base);
	run(one, "llama_decode_step", "2", "2", "--mode", "data", SMALL, "batch=2", "seq_kv=20",
	    NULL);
	kb_run(&r, "run", "llama_decode_step", "--ranks", "2", "--pes", "2", "--mode", "data",
	       "--colocate", "pe", "--arg", "hidden=256", "--arg", "heads_q=8", "--arg",
	       "heads_kv=2", "--arg", "head_dim=32", "--arg", "ffn=512", "--arg", "batch=2",
	       "--arg", "seq_kv=20", "--quiet", "--out", many, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	kb_expect_same_run(one, many, false);
	cr_expect(kb_same_file(strcat(strcpy((char[600]){ 0 }, one), "/residual.out.npy"),
			       strcat(strcpy((char[600]){ 0 }, many), "/residual.out.npy")));
}

/* ------------------------------------------------------------ bounds */

static uint64_t step_u64(const char *json, const char *step, const char *key)
{
	char pat[96];
	const char *p;

	snprintf(pat, sizeof(pat), "{\"name\": \"%s\"", step);
	p = strstr(json, pat);
	cr_assert(p, "no step %s in summary.json", step);
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(p, pat);
	cr_assert(p, "step %s has no %s", step, key);
	return strtoull(p + strlen(pat), NULL, 10);
}

/* Full Llama-3-70B dimensions, timing mode: a memory-bound decode layer
 * is never faster than (weight + KV bytes of a rank) / HBM peak, which the
 * report prints as its fraction; an all-reduce step never beats its α–β
 * bound; the whole model is layers x the layer. */
Test(llama, decode_layer_respects_the_memory_and_link_bounds, .timeout = 900)
{
	static const char *const tps[] = { "2", "8" };
	char base[256], dir[400], path[500], field[64];
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	kb_tmpdir(base, sizeof(base), "llama-bound");
	for (int i = 0; i < 2; i++) {
		struct cm_cfg c = cm_defaults(false, 0);
		uint64_t lat, bytes, bound, ar, B = 8, H = 8192, S = 2048;
		uint32_t R = (uint32_t)atoi(tps[i]);
		char *json;
		double frac;

		snprintf(dir, sizeof(dir), "%s/tp%s", base, tps[i]);
		run(dir, "llama_decode_step", tps[i], "8", "--transport", "inproc", "--trace", "off",
		    "batch=8", "seq_kv=2048", NULL);
		lat = kb_summary_u64(dir, "latency_ps");
		bytes = kb_summary_u64(dir, "roofline_bytes");
		/* the bytes, computed here: weight shards + the KV cache read */
		{
			uint64_t hq = 64 / R, hk = 8 / R, f = 28672 / R, D = 128;
			uint64_t w = H * (hq + 2 * hk) * D + hq * D * H + H * 2 * f + f * H + 2 * H;

			cr_expect_eq(bytes, 2 * (w + 2 * B * hk * S * D), "roofline bytes");
		}
		bound = (bytes + cfg.hbm_bytes_per_cycle - 1) / cfg.hbm_bytes_per_cycle *
			rt_config_cycle_ps(&cfg);
		cr_expect_eq(kb_summary_u64(dir, "roofline_ps"), bound);
		cr_expect_geq(lat, bound, "TP=%u: a layer of %llu ps beats its memory bound %llu",
			      R, (unsigned long long)lat, (unsigned long long)bound);
		cr_expect_eq(kb_summary_u64(dir, "model_latency_ps"), 80 * lat);
		snprintf(path, sizeof(path), "%s/summary.json", dir);
		json = kb_slurp(path, NULL);
		cr_assert(kb_json_field(json, "roofline_fraction", field, sizeof(field)));
		frac = strtod(field, NULL);
		cr_expect(fabs(frac - (double)bound / (double)lat) < 1e-3, "fraction %s", field);
		ar = step_u64(json, "attn_reduce", "elapsed_ps");
		cr_expect_geq((double)ar / 1000.0, cm_bound(&c, CM_AR, R, B * H * 2.0),
			      "TP=%u: the all-reduce of %llu ps beats its alpha-beta bound", R,
			      (unsigned long long)ar);
		free(json);
	}
}
