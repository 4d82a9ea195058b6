/* test_hbm.c — the rank's shared memory through real daemons, checked
 * against independent formulas (issue 8), not goldens:
 *   - a bandwidth probe: aggregate read bandwidth = min(P x dma.bytes_per_cycle,
 *     hbm.bytes_per_cycle) — it grows with the PE count, then saturates at
 *     the HBM peak (within 2%), where hbm_bw_util reads 0.8..1.0;
 *   - constant work per PE: latency = max(one PE's latency, the HBM bound
 *     P x bytes per PE / hbm.bytes_per_cycle);
 *   - hbm.model=ideal keeps every PE at its own channel's rate. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define LOADS 16
#define TILE_BYTES (2u * 128u * 128u) /* one 128 x 128 f16 read */

struct probe {
	double latency_cycles; /* cycle = 1000 ps at the default clock */
	double read_bytes;
	double hbm_bw_util;
	char dir[256];         /* its outputs */
};

/* Runs the probe on P PEs of one rank with the given HBM settings. */
static struct probe run_probe_in(const char *colocate, unsigned pes, const char *model,
				 unsigned hbm_bpc, unsigned channels, unsigned interleave)
{
	char out[256], so[512], p[16], m[64], b[64], c[64], il[64], field[64];
	struct kb_result res;
	struct probe pr;
	char *json;

	kb_tmpdir(out, sizeof(out), "hbm");
	snprintf(so, sizeof(so), "%s/hbm_probe.so:hbm_probe", getenv("KB_PLUGINS"));
	snprintf(p, sizeof(p), "%u", pes);
	snprintf(m, sizeof(m), "hbm.model=%s", model);
	snprintf(b, sizeof(b), "hbm.bytes_per_cycle=%u", hbm_bpc);
	snprintf(c, sizeof(c), "hbm.channels=%u", channels);
	snprintf(il, sizeof(il), "hbm.interleave_bytes=%u", interleave);
	/* one 64 B/cycle queue per channel: the channel these figures are of */
	kb_run(&res, "run", so, "--pes", p, "--colocate", colocate, "--arg", "loads=16",
	       "--set", m, "--set", b, "--set", c, "--set", il, "--set", "dma.queues=1",
	       "--set", "dma.bytes_per_cycle=64", "--out", out, "--quiet", NULL);
	cr_assert_eq(res.status, 0, "probe on %u PEs failed: %s", pes, res.err);
	pr.latency_cycles = (double)kb_summary_u64(out, "latency_ps") / 1000.0;
	snprintf(so, sizeof(so), "%s/summary.json", out);
	json = kb_slurp(so, NULL);
	cr_assert(json);
	pr.read_bytes = (double)kb_json_u64(json, "totals.dma_read_bytes");
	cr_assert(kb_json_field(json, "hbm_bw_util", field, sizeof(field)));
	pr.hbm_bw_util = strtod(field, NULL);
	free(json);
	cr_assert_eq(pr.read_bytes, (double)pes * LOADS * TILE_BYTES);
	snprintf(pr.dir, sizeof(pr.dir), "%s", out);
	return pr;
}

static struct probe run_probe(unsigned pes, const char *model, unsigned hbm_bpc,
			      unsigned channels, unsigned interleave)
{
	return run_probe_in("rank", pes, model, hbm_bpc, channels, interleave);
}

static double within(double got, double want)
{
	return got > want ? (got - want) / want : (want - got) / want;
}

/* dma.bytes_per_cycle is 64: saturation at P = hbm / 64. */
static void bandwidth_sweep(const char *model, unsigned hbm_bpc, unsigned channels,
			    unsigned interleave)
{
	static const unsigned pes[] = { 1, 2, 3, 6, 12 };
	double prev = 0, one = 0;

	for (size_t i = 0; i < sizeof(pes) / sizeof(pes[0]); i++) {
		struct probe pr = run_probe(pes[i], model, hbm_bpc, channels, interleave);
		double bw = pr.read_bytes / pr.latency_cycles;
		double peak = pes[i] * 64.0 < hbm_bpc ? pes[i] * 64.0 : hbm_bpc;
		double hbm_bound = pes[i] * (double)LOADS * TILE_BYTES / hbm_bpc;

		if (i == 0)
			one = pr.latency_cycles;
		cr_expect(bw >= prev * 0.999, "bandwidth fell from %.1f to %.1f at %u PEs", prev, bw,
			  pes[i]);
		prev = bw;
		/* per-PE bound (setup, latency, dispatch included) vs HBM bound */
		cr_expect(within(pr.latency_cycles, one > hbm_bound ? one : hbm_bound) < 0.03,
			  "%u PEs: latency %.0f cycles, max(per-PE %.0f, HBM %.0f)", pes[i],
			  pr.latency_cycles, one, hbm_bound);
		cr_expect(within(bw, peak) < 0.05, "%u PEs: %.1f B/cycle, expected about %.1f",
			  pes[i], bw, peak);
		if (pes[i] * 64.0 >= 2.0 * hbm_bpc) {
			cr_expect(within(bw, hbm_bpc) < 0.02,
				  "%u PEs: %.1f B/cycle does not saturate at hbm.bytes_per_cycle %u",
				  pes[i], bw, hbm_bpc);
			cr_expect(pr.hbm_bw_util >= 0.8 && pr.hbm_bw_util <= 1.0,
				  "%u PEs: hbm_bw_util %.4f outside 0.8..1.0", pes[i], pr.hbm_bw_util);
		}
	}
}

Test(hbm, read_bandwidth_saturates_at_the_rank_peak, .timeout = 120)
{
	bandwidth_sweep("shared", 160, 8, 512);
}

Test(hbm, saturation_holds_for_other_channel_counts, .timeout = 120)
{
	bandwidth_sweep("shared", 250, 48, 256);
}

Test(hbm, interleaved_model_saturates_at_the_rank_peak, .timeout = 120)
{
	bandwidth_sweep("interleaved", 250, 48, 256);
}

/* When the rank's channels together cannot exceed the HBM (2 x 4 x 64 <=
 * 512) the DMA times transfers itself; one byte per cycle less and the
 * memory component arbitrates — with reads alone (4 x 64 = 256) nothing
 * saturates, so both give the same latency to the picosecond. */
Test(hbm, local_timing_equals_the_memory_component_when_unsaturated, .timeout = 60)
{
	struct probe local = run_probe(4, "shared", 512, 8, 512);
	struct probe comp = run_probe(4, "shared", 511, 8, 512);

	cr_expect_eq(local.latency_cycles, comp.latency_cycles);
}

/* Arbitration does not depend on process grouping: a saturated rank gives
 * byte-identical op logs with a daemon per component and with one daemon. */
Test(hbm, contention_is_the_same_in_every_process_grouping, .timeout = 120)
{
	struct probe none = run_probe_in("none", 3, "shared", 100, 8, 512);
	struct probe all = run_probe_in("all", 3, "shared", 100, 8, 512);
	char a[300], b[300];

	snprintf(a, sizeof(a), "%s/op_log.jsonl", none.dir);
	snprintf(b, sizeof(b), "%s/op_log.jsonl", all.dir);
	cr_expect(kb_same_file(a, b), "op logs differ between --colocate none and all");
	cr_expect_eq(none.latency_cycles, all.latency_cycles);
	cr_expect(within(none.read_bytes / none.latency_cycles, 100) < 0.05);
}

/* The ideal model has no shared limit: 12 PEs read at 12 x 64 B/cycle. */
Test(hbm, ideal_model_has_no_shared_limit, .timeout = 60)
{
	struct probe one = run_probe(1, "ideal", 160, 8, 512);
	struct probe many = run_probe(12, "ideal", 160, 8, 512);

	cr_expect_eq(many.latency_cycles, one.latency_cycles);
	cr_expect(within(many.read_bytes / many.latency_cycles, 12 * 64.0) < 0.03);
}

/* ---------------------------------------------------------------- DMA queues */

/* The probe with `queues` DMA queues per channel of `bpc` B/cycle each,
 * 8 rows per queue, each PE reading `loads` tiles of `rows` x 128 f16,
 * against an HBM of `hbm_bpc`: latency in cycles, *bytes the bytes read. */
static double queue_probe(unsigned pes, unsigned loads, unsigned queues, unsigned rows,
			  unsigned bpc, unsigned hbm_bpc, double *bytes)
{
	char out[256], so[512], a[6][64], *json;
	struct kb_result res;
	double latency;

	kb_tmpdir(out, sizeof(out), "hbmq");
	snprintf(so, sizeof(so), "%s/hbm_probe.so:hbm_probe", getenv("KB_PLUGINS"));
	snprintf(a[0], sizeof(a[0]), "%u", pes);
	snprintf(a[1], sizeof(a[1]), "dma.queues=%u", queues);
	snprintf(a[2], sizeof(a[2]), "dma.bytes_per_cycle=%u", bpc);
	snprintf(a[3], sizeof(a[3]), "hbm.bytes_per_cycle=%u", hbm_bpc);
	snprintf(a[4], sizeof(a[4]), "rows=%u", rows);
	snprintf(a[5], sizeof(a[5]), "loads=%u", loads);
	kb_run(&res, "run", so, "--pes", a[0], "--colocate", "rank", "--arg", a[5],
	       "--arg", a[4], "--set", a[1], "--set", "dma.rows_per_queue=8", "--set", a[2],
	       "--set", a[3], "--set", "hbm.model=shared", "--out", out, "--quiet", NULL);
	cr_assert_eq(res.status, 0, "queue probe on %u PEs failed: %s", pes, res.err);
	latency = (double)kb_summary_u64(out, "latency_ps") / 1000.0;
	snprintf(so, sizeof(so), "%s/summary.json", out);
	json = kb_slurp(so, NULL);
	cr_assert(json);
	*bytes = (double)kb_json_u64(json, "totals.dma_read_bytes");
	free(json);
	cr_assert_eq(*bytes, (double)pes * loads * 2.0 * rows * 128);
	return latency;
}

/* A transfer of r rows is spread over min(queues, ceil(r / 8)) queues, so
 * one PE reads at that many times the queue's rate (its largest piece
 * decides), and a few PEs saturate the rank: the streaming rate (bytes and
 * cycles that 24 loads add over 8, so the first setup and the last HBM
 * latency cancel) is min(P x lanes x b, HBM), within 1 %. */
Test(dma_queues, a_transfer_moves_on_its_lanes_and_few_pes_saturate_the_rank, .timeout = 240)
{
	static const struct { unsigned pes, queues, rows, bpc, hbm; } c[] = {
		{ 1, 16, 128, 27, 2900 },  /* 16 lanes: 432 B/cycle */
		{ 4, 16, 128, 27, 2900 },  /* 1728 */
		{ 8, 16, 128, 27, 2900 },  /* 3456 > 2900: saturated */
		{ 1, 16, 8, 27, 2900 },    /* 8 rows: one lane */
		{ 2, 4, 64, 50, 300 },     /* 4 lanes of 8 rows, 2 x 200 > 300 */
		{ 3, 3, 40, 20, 10000 },   /* 40 rows over 3 queues (14, 13, 13 rows) */
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		unsigned lanes = (c[i].rows + 7) / 8 < c[i].queues ? (c[i].rows + 7) / 8 : c[i].queues;
		double piece = (c[i].rows + lanes - 1) / lanes;
		double per_pe = (double)c[i].bpc * c[i].rows / piece;
		double want = c[i].pes * per_pe < c[i].hbm ? c[i].pes * per_pe : c[i].hbm;
		double b8, b32, l8 = queue_probe(c[i].pes, 8, c[i].queues, c[i].rows, c[i].bpc,
						 c[i].hbm, &b8);
		double l32 = queue_probe(c[i].pes, 24, c[i].queues, c[i].rows, c[i].bpc, c[i].hbm,
					 &b32);
		double bw = (b32 - b8) / (l32 - l8);

		cr_expect(within(bw, want) < 0.01,
			  "%u PEs, %u queues, %u rows, %u B/cycle, HBM %u: %.1f B/cycle, expected %.1f",
			  c[i].pes, c[i].queues, c[i].rows, c[i].bpc, c[i].hbm, bw, want);
	}
}

/* ---------------------------------------------------------------- ring links */

/* Latency of ipcq_probe (every PE sends one tile right at once). */
static uint64_t ipcq_probe_ps(unsigned ranks, unsigned pes, unsigned bpc, unsigned rows,
			      const char *colocate)
{
	char out[256], so[512], r[16], p[16], b[64], a[64];
	struct kb_result res;

	kb_tmpdir(out, sizeof(out), "ipcq");
	snprintf(so, sizeof(so), "%s/ipcq_probe.so:ipcq_probe", getenv("KB_PLUGINS"));
	snprintf(r, sizeof(r), "%u", ranks);
	snprintf(p, sizeof(p), "%u", pes);
	snprintf(b, sizeof(b), "links.ipcq_bytes_per_cycle=%u", bpc);
	snprintf(a, sizeof(a), "rows=%u", rows);
	kb_run(&res, "run", so, "--ranks", r, "--pes", p, "--colocate", colocate, "--set", b,
	       "--arg", a, "--out", out, "--quiet", NULL);
	cr_assert_eq(res.status, 0, "ipcq probe %u x %u failed: %s", ranks, pes, res.err);
	return kb_summary_u64(out, "latency_ps");
}

/* P PEs of a rank sending at once over its one link take P serialisations:
 * latency(P) - latency(1) = (P - 1) x ceil(bytes / link bytes per cycle)
 * cycles, whatever the process grouping. */
static void link_shared(unsigned ranks, unsigned bpc, unsigned rows)
{
	static const unsigned pes[] = { 2, 3, 5 };
	uint64_t ser = ((uint64_t)rows * 128 * 2 + bpc - 1) / bpc * 1000;
	uint64_t one = ipcq_probe_ps(ranks, 1, bpc, rows, "all");

	for (size_t i = 0; i < sizeof(pes) / sizeof(pes[0]); i++) {
		uint64_t many = ipcq_probe_ps(ranks, pes[i], bpc, rows, i ? "all" : "none");

		cr_expect_eq(many - one, (pes[i] - 1) * ser,
			     "%u ranks x %u PEs at %u B/cycle: %llu ps more than one PE, expected %llu",
			     ranks, pes[i], bpc, (unsigned long long)(many - one),
			     (unsigned long long)((pes[i] - 1) * ser));
	}
}

Test(ipcq_link, pes_of_a_rank_share_its_link, .timeout = 120)
{
	link_shared(2, 4, 64);
}

Test(ipcq_link, sharing_holds_for_other_ring_sizes_and_widths, .timeout = 120)
{
	link_shared(3, 24, 32);
}

/* ---------------------------------------------------------------- ring figures */

struct ring_figs {
	double hidden;
	uint64_t latency, transfer, wait, exposed;
	uint64_t queueing, serialisation, link_latency; /* on the critical path */
};

static struct ring_figs ring_run(unsigned ranks, unsigned pes, unsigned bpc, int causal)
{
	char out[256], r[16], p[16], b[64], hq[32], hk[32], sq[32], c[32], field[64], path[300];
	struct kb_result res;
	struct ring_figs f;
	char *json;

	kb_tmpdir(out, sizeof(out), "ring");
	snprintf(r, sizeof(r), "%u", ranks);
	snprintf(p, sizeof(p), "%u", pes);
	snprintf(b, sizeof(b), "links.ipcq_bytes_per_cycle=%u", bpc);
	snprintf(hq, sizeof(hq), "heads_q=%u", 2 * pes);
	snprintf(hk, sizeof(hk), "heads_kv=%u", pes);
	snprintf(sq, sizeof(sq), "seq_q=%u", 256 * ranks);
	snprintf(c, sizeof(c), "causal=%d", causal);
	kb_run(&res, "run", "ring_attention", "--ranks", r, "--pes", p, "--colocate", "all",
	       "--set", b, "--arg", hq, "--arg", hk, "--arg", "seq_kv=256", "--arg", sq, "--arg",
	       "pass=kv", "--arg", c, "--out", out, "--quiet", NULL);
	cr_assert_eq(res.status, 0, "ring %u x %u failed: %s", ranks, pes, res.err);
	snprintf(path, sizeof(path), "%s/summary.json", out);
	json = kb_slurp(path, NULL);
	cr_assert(json);
	cr_assert(kb_json_field(json, "ipcq_hidden_fraction", field, sizeof(field)));
	f.hidden = strtod(field, NULL);
	f.latency = kb_json_u64(json, "latency_ps");
	f.transfer = kb_json_u64(json, "ipcq_transfer_ps");
	f.wait = kb_json_u64(json, "ipcq_wait_ps");
	f.exposed = kb_json_u64(json, "ipcq_exposed_ps");
	f.queueing = kb_json_u64(json, "critical_path.link_queueing");
	f.serialisation = kb_json_u64(json, "critical_path.link_serialisation");
	f.link_latency = kb_json_u64(json, "critical_path.link_latency");
	free(json);
	/* exposed communication is the link time on the critical path; the
	 * link-busy part of it lies inside the links' busy time, and the
	 * fraction is computed from them, unclamped */
	cr_expect_eq(f.exposed, f.queueing + f.serialisation + f.link_latency);
	cr_expect_leq(f.queueing + f.serialisation, f.transfer);
	cr_expect_leq(f.exposed, f.latency);
	cr_expect(within(f.hidden, 1.0 - (double)(f.queueing + f.serialisation) /
					   (double)f.transfer) < 1e-3 ||
		  f.queueing + f.serialisation == 0);
	return f;
}

/* Causal ring prefill: ranks with early queries wait for the others. Those
 * waits are off the critical path (it runs through the late ranks' folds),
 * so little link time is exposed and hidden stays high. */
Test(ring_figures, causal_imbalance_is_not_exposed_communication, .timeout = 120)
{
	struct ring_figs a = ring_run(4, 1, 160, 1);
	struct ring_figs b = ring_run(4, 4, 640, 1);

	cr_expect_gt(a.wait, 10 * a.exposed, "waits %llu, exposed %llu: the waits are not the link",
		     (unsigned long long)a.wait, (unsigned long long)a.exposed);
	cr_expect_geq(a.hidden, 0.9, "R=4 P=1 causal: hidden %.4f", a.hidden);
	cr_expect_geq(b.hidden, 0.9, "R=4 P=4 causal: hidden %.4f", b.hidden);
}

/* A link slower than the compute: the critical path is its transfers. All
 * R links move bytes at once, and the path runs through one of them at a
 * time, so at most 1/R of their busy time is on it: hidden ~ 1 - 1/R. */
static void expect_link_bound(const struct ring_figs *f, unsigned ranks, const char *what)
{
	double bound = 1.0 - 1.0 / ranks;

	cr_expect_gt(f->exposed, f->latency / 2, "%s: link time %llu of %llu ps on the path", what,
		     (unsigned long long)f->exposed, (unsigned long long)f->latency);
	cr_expect_leq(f->hidden, bound + 0.05, "%s: hidden %.4f, expected about %.4f", what,
		      f->hidden, bound);
}

Test(ring_figures, slow_link_is_exposed, .timeout = 120)
{
	struct ring_figs a = ring_run(4, 2, 4, 0);
	struct ring_figs b = ring_run(2, 1, 2, 1);

	expect_link_bound(&a, 4, "R=4 P=2 at 4 B/cycle");
	expect_link_bound(&b, 2, "R=2 P=1 at 2 B/cycle");
}

/* Over several ring sizes: a causal ring (the critical path runs through
 * the late ranks, which fold most) reports hidden >= 0.9, and a link 160x
 * slower than the default (1 B/cycle, every tile's transfer longer than its
 * fold) has its link time as most of the critical path. */
Test(ring_figures, bounds_hold_for_every_ring_size, .timeout = 240)
{
	static const unsigned causal_r[] = { 2, 3, 4, 5, 8 };
	static const unsigned slow_r[] = { 2, 4, 8 };

	for (size_t i = 0; i < sizeof(causal_r) / sizeof(causal_r[0]); i++) {
		struct ring_figs f = ring_run(causal_r[i], 1, 160, 1);

		cr_expect_geq(f.hidden, 0.9, "causal R=%u: hidden %.4f (exposed %llu of %llu)",
			      causal_r[i], f.hidden, (unsigned long long)f.exposed,
			      (unsigned long long)f.transfer);
	}
	for (size_t i = 0; i < sizeof(slow_r) / sizeof(slow_r[0]); i++) {
		struct ring_figs f = ring_run(slow_r[i], 1, 1, 0);

		char what[64];

		snprintf(what, sizeof(what), "R=%u at 1 B/cycle", slow_r[i]);
		expect_link_bound(&f, slow_r[i], what);
	}
}

/* ---------------------------------------------------------------- plug-in */

/* A model from a shared object (engines/plugins/hbm_pool.c: one FCFS pool
 * at hbm.bytes_per_cycle) saturates at the same peak; a bad path is one
 * clear line and a failed run. */
Test(hbm, plugin_model_is_loaded_and_bad_paths_are_named, .timeout = 60)
{
	char model[512], so[512], out[256];
	struct kb_result res;
	struct probe pr;

	snprintf(model, sizeof(model), "%s/hbm_pool.so", getenv("KB_PLUGINS"));
	pr = run_probe(4, model, 100, 8, 512);
	cr_expect(within(pr.read_bytes / pr.latency_cycles, 100) < 0.02,
		  "pool plug-in: %.1f B/cycle", pr.read_bytes / pr.latency_cycles);
	kb_tmpdir(out, sizeof(out), "hbm-bad");
	snprintf(so, sizeof(so), "%s/hbm_probe.so:hbm_probe", getenv("KB_PLUGINS"));
	kb_run(&res, "run", so, "--pes", "4", "--set", "hbm.bytes_per_cycle=100", "--set",
	       "hbm.model=/nonexistent/hbm.so", "--colocate", "all", "--out", out, "--quiet",
	       NULL);
	cr_expect_eq(res.status, 2, "%s", res.err); /* the launcher checks the path first */
	cr_expect(strstr(res.err, "hbm") && strstr(res.err, "/nonexistent/hbm.so"), "stderr: %s",
		  res.err);
}
