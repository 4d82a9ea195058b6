/* test_collectives.c — the collectives of tl.h through the real binary
 * (the `collective` kernel): every op and algorithm over groups of 2 to 64
 * ranks, any length, the three spans, dtypes and both topologies, against
 * an fp64 reference computed here from the inputs the run wrote; their
 * times against the α–β model (coll_model.h) and its lower bound; and the
 * point-to-point links they are built on. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_model.h"
#include "harness.h"
#include "rt/npy.h"

#define MAX_ARGS 40

/* Runs `kernbench run collective` with "name=value" args (as --arg) and
 * other options (a --set's value stays one), NULL-ended; the test fails
 * unless it exits 0. */
static void run_coll(const char *dir, ...)
{
	char *argv[MAX_ARGS];
	struct kb_result r;
	int n = 0;
	va_list ap;
	const char *s;

	argv[n++] = (char *)kb_bin();
	argv[n++] = (char *)"run";
	argv[n++] = (char *)"collective";
	argv[n++] = (char *)"--out";
	argv[n++] = (char *)dir;
	argv[n++] = (char *)"--quiet";
	argv[n++] = (char *)"--colocate";
	argv[n++] = (char *)"all";
	argv[n++] = (char *)"--transport";
	argv[n++] = (char *)"inproc";
	va_start(ap, dir);
	while ((s = va_arg(ap, const char *)) && n < MAX_ARGS - 2) {
		if (s[0] != '-' && strchr(s, '=') && strcmp(argv[n - 1], "--set"))
			argv[n++] = (char *)"--arg";
		argv[n++] = (char *)s;
	}
	va_end(ap);
	argv[n] = NULL;
	kb_runv(&r, argv);
	cr_assert_eq(r.status, 0, "collective run failed (%d): %s", r.status, r.err);
}

/* [ranks, pes, row] float32, from the run's folder. */
struct t3 {
	uint64_t R, P, row;
	float *v;
};

static void load(const char *dir, const char *file, struct t3 *t)
{
	char path[600];
	struct rt_npy n;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	cr_assert_eq(rt_npy_read(path, &n), RT_EOK, "%s: %s", path, rt_last_error());
	cr_assert(n.type == RT_NPY_F32 && n.ndim == 3, "%s: not float32 [ranks, pes, n]", path);
	t->R = n.shape[0];
	t->P = n.shape[1];
	t->row = n.shape[2];
	t->v = malloc(n.count * sizeof(float) + 4);
	memcpy(t->v, n.data, n.count * sizeof(float));
	rt_npy_release(&n);
}

static float at(const struct t3 *t, uint64_t r, uint64_t p, uint64_t i)
{
	return t->v[(r * t->P + p) * t->row + i];
}

static void block(uint64_t n, uint64_t members, uint64_t i, uint64_t *off, uint64_t *len)
{
	*len = n / members + (i < n % members);
	*off = i * (n / members) + (i < n % members ? i : n % members);
}

/* One collective's case: op, n, group, dtype (output rounding). */
struct kase {
	const char *op;
	uint64_t n;
	uint32_t first, count, stride, root;
	int span;        /* 0 ranks, 1 split, 2 pes */
	double out_eps;  /* relative rounding of the output dtype */
};

/* Max error of y against the fp64 result, over its bound: reductions may
 * err by the f32 partial sums ((members + 1) 2^-24 sum |x| per element)
 * plus the output's rounding; copies must be exact. Returns the worst
 * error / bound (<= 1 passes). */
static double check(const char *dir, const struct kase *k)
{
	struct t3 x, y;
	double worst = 0;
	bool pes = k->span == 2;
	uint32_t M;

	load(dir, "x.npy", &x);
	load(dir, "y.npy", &y);
	M = pes ? (uint32_t)x.P : k->count;
	for (uint64_t p = 0; p < (pes ? 1 : x.P); p++)
		for (uint32_t mi = 0; mi < (pes ? x.R : M); mi++) {
			/* pes: one group per rank, members its PEs; else the group's
			 * ranks with PE index p */
			uint32_t rank = pes ? mi : k->first + mi * k->stride;

			for (uint32_t yi = 0; yi < (pes ? M : 1); yi++) {
				uint64_t py = pes ? yi : p, off = 0, len = k->n, i;
				bool reduce = !strcmp(k->op, "all_reduce") ||
					      !strcmp(k->op, "reduce_scatter");

				if (!strcmp(k->op, "reduce_scatter") && !pes)
					block(k->n, M, mi, &off, &len);
				for (i = 0; i < len; i++) {
					uint64_t e = off + i;
					double ref = 0, mag = 0, err, bound;
					float got = at(&y, rank, py, pes ? e : i);

					if (reduce) {
						for (uint32_t j = 0; j < M; j++) {
							double v = pes ? at(&x, rank, j, e)
								       : at(&x, k->first + j * k->stride, p, e);

							ref += v;
							mag += fabs(v);
						}
						bound = (M + 1) * 0x1p-24 * mag + k->out_eps * fabs(ref) +
							1e-30;
					} else if (!strcmp(k->op, "broadcast")) {
						ref = pes ? at(&x, rank, k->root, e)
							  : at(&x, k->first + k->root * k->stride, p, e);
						bound = 1e-30;
					} else { /* all-gather: block j from member j */
						uint64_t bo, bl;
						uint32_t j = 0;

						while (block(k->n, M, j, &bo, &bl), e >= bo + bl)
							j++;
						ref = pes ? at(&x, rank, j, e - bo)
							  : at(&x, k->first + j * k->stride, p, e - bo);
						bound = 1e-30;
					}
					err = fabs(got - ref);
					cr_assert(err <= bound, "%s %s n=%llu member %u element %llu: %.9g, "
						  "expected %.9g (bound %.3g)", dir, k->op,
						  (unsigned long long)k->n, mi, (unsigned long long)e,
						  (double)got, ref, bound);
					if (err / bound > worst)
						worst = err / bound;
				}
			}
		}
	free(x.v);
	free(y.v);
	return worst;
}

static const char *const ops[] = { "all_reduce", "reduce_scatter", "all_gather", "broadcast" };
static const char *const algos[] = { "ring", "bidir", "tree" };

/* Every op and algorithm, groups of 2, 3, 5 and 8, lengths that divide
 * by nothing, messages cut into 64-element chunks. */
Test(coll_data, every_op_and_algorithm_equals_fp64, .timeout = 600)
{
	static const uint32_t groups[] = { 2, 3, 5, 8 };
	static const uint64_t lens[] = { 1, 7, 1000 };
	char base[256], dir[400], n[32], ranks[16], root[16];

	kb_tmpdir(base, sizeof(base), "coll-data");
	for (size_t g = 0; g < 4; g++)
		for (size_t o = 0; o < 4; o++)
			for (size_t a = 0; a < 3; a++) {
				uint64_t len = lens[(g + o + a) % 3];
				struct kase k = { ops[o], len, 0, groups[g], 1,
						  groups[g] - 1, 0, 0 };
				char op[64], algo[64];

				snprintf(dir, sizeof(dir), "%s/%s-%s-%u", base, ops[o], algos[a],
					 groups[g]);
				snprintf(n, sizeof(n), "n=%llu", (unsigned long long)len);
				snprintf(ranks, sizeof(ranks), "%u", groups[g]);
				snprintf(root, sizeof(root), "root=%u", groups[g] - 1);
				snprintf(op, sizeof(op), "op=%s", ops[o]);
				snprintf(algo, sizeof(algo), "algo=%s", algos[a]);
				run_coll(dir, "--mode", "data", "--ranks", ranks, "--pes", "1", n, op,
					 algo, root, "chunk=256", NULL);
				check(dir, &k);
			}
}

/* Large and odd groups: 13 and 64 ranks, both ways of summing. */
Test(coll_data, large_groups_of_13_and_64_ranks, .timeout = 600)
{
	static const uint32_t groups[] = { 13, 64 };
	char base[256], dir[400], ranks[16];

	kb_tmpdir(base, sizeof(base), "coll-big");
	for (size_t g = 0; g < 2; g++)
		for (size_t a = 0; a < 3; a += 2) {
			struct kase k = { "all_reduce", 999, 0, groups[g], 1, 0, 0, 0 };
			char algo[64];

			snprintf(dir, sizeof(dir), "%s/%u-%s", base, groups[g], algos[a]);
			snprintf(ranks, sizeof(ranks), "%u", groups[g]);
			snprintf(algo, sizeof(algo), "algo=%s", algos[a]);
			run_coll(dir, "--mode", "data", "--ranks", ranks, "--pes", "1", "n=999", algo,
				 "--set", "memory.hbm_bytes=1048576", NULL);
			check(dir, &k);
		}
	snprintf(dir, sizeof(dir), "%s/ag13", base);
	run_coll(dir, "--mode", "data", "--ranks", "13", "--pes", "1", "n=1001", "op=all_gather",
		 "algo=tree", "--set", "memory.hbm_bytes=1048576", NULL);
	check(dir, &(struct kase){ "all_gather", 1001, 0, 13, 1, 0, 0, 0 });
}

/* Sub-groups (strided, offset), a switch, f16 and bf16 outputs, and the
 * collective split over the PEs of each rank. */
Test(coll_data, groups_topologies_dtypes_and_split_spans, .timeout = 600)
{
	static const struct {
		const char *ranks, *pes, *topo, *dtype, *first, *count, *stride, *span;
		double eps;
	} cases[] = {
		{ "8", "2", "ring", "f32", "1", "3", "2", "ranks", 0 },
		{ "8", "2", "switch", "bf16", "0", "4", "2", "ranks", 0x1p-8 },
		{ "6", "3", "ring", "f32", "0", "6", "1", "split", 0 },
		{ "5", "2", "switch", "f16", "0", "5", "1", "split", 0x1p-11 },
		{ "7", "4", "ring", "f16", "2", "5", "1", "split", 0x1p-11 },
	};
	char base[256], dir[400];

	kb_tmpdir(base, sizeof(base), "coll-groups");
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		for (size_t o = 0; o < 4; o++)
			for (size_t a = 0; a < 3; a++) {
				char topo[64], dt[32], first[32], count[32], stride[32], span[32],
					op[64], algo[64];
				struct kase k = { ops[o], 777, (uint32_t)atoi(cases[c].first),
						  (uint32_t)atoi(cases[c].count),
						  (uint32_t)atoi(cases[c].stride), 1,
						  !strcmp(cases[c].span, "split"), cases[c].eps };

				snprintf(dir, sizeof(dir), "%s/%zu-%s-%s", base, c, ops[o], algos[a]);
				snprintf(topo, sizeof(topo), "links.topology=%s", cases[c].topo);
				snprintf(dt, sizeof(dt), "dtype=%s", cases[c].dtype);
				snprintf(first, sizeof(first), "first=%s", cases[c].first);
				snprintf(count, sizeof(count), "count=%s", cases[c].count);
				snprintf(stride, sizeof(stride), "stride=%s", cases[c].stride);
				snprintf(span, sizeof(span), "span=%s", cases[c].span);
				snprintf(op, sizeof(op), "op=%s", ops[o]);
				snprintf(algo, sizeof(algo), "algo=%s", algos[a]);
				run_coll(dir, "--mode", "data", "--ranks", cases[c].ranks, "--pes",
					 cases[c].pes, "--set", topo, dt, first, count, stride, span,
					 op, algo, "n=777", "root=1", "chunk=512", NULL);
				check(dir, &k);
			}
}

/* Over the PEs of a rank, through its HBM: every op, odd PE counts. */
Test(coll_data, over_the_pes_of_a_rank, .timeout = 300)
{
	char base[256], dir[400];

	kb_tmpdir(base, sizeof(base), "coll-pes");
	for (size_t o = 0; o < 4; o++)
		for (uint64_t n = 1; n <= 1001; n += 500) {
			char op[64], len[32];
			struct kase k = { ops[o], n, 0, 0, 1, 3, 2, 0 };

			snprintf(dir, sizeof(dir), "%s/%s-%llu", base, ops[o], (unsigned long long)n);
			snprintf(op, sizeof(op), "op=%s", ops[o]);
			snprintf(len, sizeof(len), "n=%llu", (unsigned long long)n);
			run_coll(dir, "--mode", "data", "--ranks", "2", "--pes", "5", op, len,
				 "span=pes", "root=3", "chunk=256", NULL);
			check(dir, &k);
		}
}

/* ------------------------------------------------------------ timing */

static double sim_cycles(const char *dir)
{
	return (double)kb_summary_u64(dir, "by_kind.host.collective_end_ps") / 1000.0;
}

/* Runs one collective in timing mode (untraced); its time in cycles. */
static double timed(const char *base, const char *topo, uint32_t R, uint32_t P, const char *op,
		    const char *algo, uint64_t n)
{
	char dir[400], ranks[16], pes[16], len[40], o[64], a[64], t[64];

	snprintf(dir, sizeof(dir), "%s/%s-%s-%s-%u-%u-%llu", base, topo, op, algo, R, P,
		 (unsigned long long)n);
	snprintf(ranks, sizeof(ranks), "%u", R);
	snprintf(pes, sizeof(pes), "%u", P);
	snprintf(len, sizeof(len), "n=%llu", (unsigned long long)n);
	snprintf(o, sizeof(o), "op=%s", op);
	snprintf(a, sizeof(a), "algo=%s", algo);
	snprintf(t, sizeof(t), "links.topology=%s", topo);
	run_coll(dir, "--ranks", ranks, "--pes", pes, "--set", t, len, o, a,
		 P > 1 ? "span=split" : "span=ranks", "--trace", "off", NULL);
	return sim_cycles(dir);
}

static enum cm_op op_of(const char *op)
{
	return !strcmp(op, "all_reduce") ? CM_AR : !strcmp(op, "reduce_scatter") ? CM_RS
					: !strcmp(op, "all_gather") ? CM_AG : CM_BC;
}

/* The ring algorithm against its α–β formula, on a quiet link: 8 PEs per
 * rank drive it (span=split), so neither a PE's DMA channel nor its MATH
 * engine is what limits it. 1 KiB to 4 MiB, every op, groups of 2 to 8,
 * both topologies: within 5 %. */
Test(coll_timing, ring_is_its_alpha_beta_formula, .timeout = 900)
{
	static const uint32_t groups[] = { 2, 3, 5, 8 };
	static const uint64_t kib[] = { 1, 64, 4096 };
	static const char *const topos[] = { "ring", "switch" };
	char base[256];

	kb_tmpdir(base, sizeof(base), "coll-t-ring");
	for (size_t t = 0; t < 2; t++)
		for (size_t o = 0; o < 4; o++)
			for (size_t g = 0; g < 4; g++)
				for (size_t s = 0; s < 3; s++) {
					struct cm_cfg c = cm_defaults(t == 1, 0);
					uint64_t n = kib[s] * 256;
					double sim = timed(base, topos[t], groups[g], 8, ops[o], "ring", n);
					double f = cm_ring(&c, op_of(ops[o]), false, groups[g], n, 4, 8);

					cr_expect(fabs(sim / f - 1) < 0.05,
						  "%s %s R=%u %llu KiB: simulated %.0f cycles, formula %.0f "
						  "(%.3f)", topos[t], ops[o], groups[g],
						  (unsigned long long)kib[s], sim, f, sim / f);
					cr_expect(sim >= cm_bound(&c, op_of(ops[o]), groups[g], n * 4.0),
						  "%s %s R=%u: %.0f cycles beats the alpha-beta bound", topos[t],
						  ops[o], groups[g], sim);
				}
}

/* 256 MiB all-reduce: the formula, and the textbook 2(R-1)(α + S/(Rβ)),
 * within 5 % (the latencies vanish in the bandwidth term). */
Test(coll_timing, a_256_mib_all_reduce_is_hockneys, .timeout = 900)
{
	struct cm_cfg c = cm_defaults(false, 0);
	uint64_t n = 64ull << 20;
	char base[256];
	double sim, f, h;

	kb_tmpdir(base, sizeof(base), "coll-t-256");
	sim = timed(base, "ring", 8, 8, "all_reduce", "ring", n);
	f = cm_ring(&c, CM_AR, false, 8, n, 4, 8);
	h = cm_hockney(&c, CM_AR, CM_RING, 8, n * 4.0);
	cr_expect(fabs(sim / f - 1) < 0.05, "formula: simulated %.0f, formula %.0f", sim, f);
	cr_expect(fabs(sim / h - 1) < 0.05, "Hockney: simulated %.0f, 2(R-1)(a+S/(Rb)) %.0f", sim,
		  h);
}

/* Both ways round a ring: its formula within 10 % (the second direction's
 * processing interleaves with the first's on one PE_CPU; the lag term is
 * the steady state), never above the one-way ring for R >= 3, never below
 * the bound. */
Test(coll_timing, bidir_is_its_formula_and_beats_the_ring, .timeout = 900)
{
	static const uint32_t groups[] = { 3, 5, 8 };
	static const uint64_t kib[] = { 1, 64, 4096 };
	char base[256];

	kb_tmpdir(base, sizeof(base), "coll-t-bidir");
	for (size_t o = 0; o < 3; o++)
		for (size_t g = 0; g < 3; g++)
			for (size_t s = 0; s < 3; s++) {
				struct cm_cfg c = cm_defaults(false, 0);
				uint64_t n = kib[s] * 256;
				double sim = timed(base, "ring", groups[g], 8, ops[o], "bidir", n);
				double ring = timed(base, "ring", groups[g], 8, ops[o], "ring", n);
				double f = cm_ring(&c, op_of(ops[o]), true, groups[g], n, 4, 8);

				cr_expect(fabs(sim / f - 1) < 0.10,
					  "%s R=%u %llu KiB: simulated %.0f, formula %.0f (%.3f)", ops[o],
					  groups[g], (unsigned long long)kib[s], sim, f, sim / f);
				cr_expect(sim <= ring * 1.02, "%s R=%u %llu KiB: both ways %.0f, one way "
					  "%.0f", ops[o], groups[g], (unsigned long long)kib[s], sim, ring);
				cr_expect(sim >= cm_bound(&c, op_of(ops[o]), groups[g], n * 4.0));
			}
}

/* Recursive doubling on a switch, where every member is one hop away:
 * log2 R rounds, its formula within 5 % while each PE's data is one
 * message; below the ring's time for small messages. */
Test(coll_timing, recursive_doubling_is_log2_r_rounds, .timeout = 600)
{
	static const uint32_t groups[] = { 2, 4, 8, 16 };
	static const uint64_t kib[] = { 1, 16 };
	char base[256];

	kb_tmpdir(base, sizeof(base), "coll-t-tree");
	for (size_t g = 0; g < 4; g++)
		for (size_t s = 0; s < 2; s++) {
			struct cm_cfg c = cm_defaults(true, 0);
			uint64_t n = kib[s] * 256;
			double sim = timed(base, "switch", groups[g], 8, "all_reduce", "tree", n);
			double f = cm_tree_ar(&c, groups[g], n, 4, 8);

			cr_expect(fabs(sim / f - 1) < 0.05, "R=%u %llu KiB: simulated %.0f, formula "
				  "%.0f", groups[g], (unsigned long long)kib[s], sim, f);
			cr_expect(sim >= cm_bound(&c, CM_AR, groups[g], n * 4.0));
			if (groups[g] >= 4)
				cr_expect(sim < timed(base, "switch", groups[g], 8, "all_reduce", "ring",
						      n));
		}
}

/* Every algorithm of every op, timed, stays above the α–β lower bound; and
 * TL_COLL_AUTO picks the faster of ring and tree at both ends of the size
 * range on a switch. */
Test(coll_timing, nothing_beats_the_bound_and_auto_picks_the_faster, .timeout = 900)
{
	static const uint32_t groups[] = { 3, 8 };
	char base[256];

	kb_tmpdir(base, sizeof(base), "coll-t-bound");
	for (size_t o = 0; o < 4; o++)
		for (size_t a = 0; a < 3; a++)
			for (size_t g = 0; g < 2; g++)
				for (uint64_t n = 256; n <= 65536 * 16; n *= 64) {
					struct cm_cfg c = cm_defaults(true, 0);
					double sim = timed(base, "switch", groups[g], 2, ops[o], algos[a],
							   n);

					cr_expect(sim >= cm_bound(&c, op_of(ops[o]), groups[g], n * 4.0),
						  "%s %s R=%u n=%llu: %.0f beats the bound %.0f", ops[o],
						  algos[a], groups[g], (unsigned long long)n, sim,
						  cm_bound(&c, op_of(ops[o]), groups[g], n * 4.0));
				}
	for (uint64_t n = 256; n <= (1u << 22); n *= 1024) {
		double ring = timed(base, "switch", 8, 8, "all_reduce", "ring", n);
		double tree = timed(base, "switch", 8, 8, "all_reduce", "tree", n);
		double aut = timed(base, "switch", 8, 8, "all_reduce", "auto", n);

		cr_expect(aut <= (ring < tree ? ring : tree) * 1.05,
			  "n=%llu: auto %.0f, ring %.0f, tree %.0f", (unsigned long long)n, aut, ring,
			  tree);
	}
}

/* ------------------------------------------------------------ links */

/* A point-to-point message (the collective of two members, one way, one
 * chunk) on a ring crosses min(d, R - d) hops cut-through: the time grows
 * by one link latency per hop, not by the serialisation. */
Test(coll_links, a_farther_rank_costs_one_latency_per_hop, .timeout = 120)
{
	char base[256];
	double t[4];

	kb_tmpdir(base, sizeof(base), "coll-hops");
	for (uint32_t d = 1; d <= 3; d++) {
		char dir[400], count[32], stride[32];

		snprintf(dir, sizeof(dir), "%s/d%u", base, d);
		snprintf(stride, sizeof(stride), "stride=%u", d);
		snprintf(count, sizeof(count), "count=2");
		run_coll(dir, "--ranks", "8", "--pes", "1", "op=broadcast", "algo=ring", "n=4096",
			 count, stride, NULL);
		t[d] = sim_cycles(dir);
	}
	cr_expect(fabs((t[2] - t[1]) - 500) < 2, "2 hops: +%.0f cycles, expected one latency",
		  t[2] - t[1]);
	cr_expect(fabs((t[3] - t[2]) - 500) < 2, "3 hops: +%.0f cycles", t[3] - t[2]);
}
