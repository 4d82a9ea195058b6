/* test_pe.c — the PE hardware model through real daemons: per-engine
 * daemons vs one daemon, channel overlap in the op log, model swap by
 * plug-in, and out-of-bounds addresses. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

struct rec {
	uint64_t start, end, bytes;
	char engine[16], op_name[24];
	uint64_t composite;
	unsigned stage;
};

static size_t read_oplog(const char *dir, struct rec *out, size_t cap)
{
	char path[600];
	char *text, *line;
	size_t n = 0;

	snprintf(path, sizeof(path), "%s/op_log.jsonl", dir);
	text = kb_slurp(path, NULL);
	cr_assert(text, "no op log in %s", dir);
	for (line = strtok(text, "\n"); line && n < cap; line = strtok(NULL, "\n")) {
		struct rec *r = &out[n++];

		cr_assert_eq(sscanf(line,
				    "{\"start_ps\":%lu,\"end_ps\":%lu,\"rank\":%*u,\"pe\":%*u,"
				    "\"engine\":\"%15[^\"]\",\"op_kind\":\"%*[^\"]\",\"op_name\":\"%23[^\"]\","
				    "\"bytes\":%lu,\"elements\":%*u,\"composite\":%lu,\"stage\":%u}",
				    &r->start, &r->end, r->engine, r->op_name, &r->bytes, &r->composite,
				    &r->stage),
			     7, "unparsable op log line: %s", line);
	}
	free(text);
	return n;
}

static void run_gemm(const char *dir, const char *colocate, const char *model)
{
	struct kb_result r;
	char set[600];

	snprintf(set, sizeof(set), "gemm.model=%s", model);
	/* one transfer at a time per DMA channel: reads serialise */
	kb_run(&r, "run", "gemm", "--quiet", "--mode", "data", "--out", dir, "--colocate", colocate,
	       "--set", set, "--set", "dma.outstanding=1", "--arg", "m=256", "--arg", "k=256",
	       "--arg", "n=256", NULL);
	cr_assert_eq(r.status, 0, "gemm (%s, %s) failed: %s", colocate, model, r.err);
}

Test(pe_model, per_engine_daemons_and_one_daemon_give_identical_outputs, .timeout = 120)
{
	char base[256], a[600], b[600], fa[700], fb[700];

	kb_tmpdir(base, sizeof(base), "pe-coloc");
	snprintf(a, sizeof(a), "%s/none", base);
	snprintf(b, sizeof(b), "%s/all", base);
	run_gemm(a, "none", "systolic");
	run_gemm(b, "all", "systolic");
	char *sa, *sb;

	snprintf(fa, sizeof(fa), "%s/summary.json", a);
	snprintf(fb, sizeof(fb), "%s/summary.json", b);
	sa = kb_slurp(fa, NULL);
	sb = kb_slurp(fb, NULL);
	cr_assert(sa && sb && strstr(sa, "\"transport\"") && strstr(sb, "\"transport\""));
	cr_expect_eq(strstr(sa, "\"transport\"") - sa, strstr(sb, "\"transport\"") - sb);
	cr_expect_eq(memcmp(sa, sb, (size_t)(strstr(sa, "\"transport\"") - sa)), 0,
		     "summary.json differs above \"transport\"");
	free(sa);
	free(sb);
	for (const char *const *f = (const char *const[]){ "op_log.jsonl", "trace.json", "c.npy",
							    NULL };
	     *f; f++) {
		snprintf(fa, sizeof(fa), "%s/%s", a, *f);
		snprintf(fb, sizeof(fb), "%s/%s", b, *f);
		cr_expect(kb_same_file(fa, fb), "%s differs between --colocate none and all", *f);
	}
}

static bool overlaps(const struct rec *x, const struct rec *y)
{
	return x->start < y->end && y->start < x->end;
}

static size_t count_overlaps(const struct rec *recs, size_t n, const char *a, const char *b)
{
	size_t hits = 0;

	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			hits += i != j && !strcmp(recs[i].engine, a) && !strcmp(recs[j].engine, b) &&
				overlaps(&recs[i], &recs[j]);
	return hits;
}

Test(pe_model, dma_read_overlaps_a_dma_write, .timeout = 60)
{
	static struct rec recs[64];
	char dir[256], probe[600];
	const char *plugins = getenv("KB_PLUGINS");
	struct kb_result r;
	size_t n;

	snprintf(probe, sizeof(probe), "%s/dma_probe.so:dma_probe", plugins ? plugins : "build/plugins");
	kb_tmpdir(dir, sizeof(dir), "pe-probe");
	kb_run(&r, "run", probe, "--quiet", "--set", "dma.outstanding=1", "--out", dir, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	n = read_oplog(dir, recs, 64);
	cr_expect_gt(count_overlaps(recs, n, "dma_read", "dma_write"), 0,
		     "the read channel never ran alongside the write channel");
	cr_expect_eq(count_overlaps(recs, n, "dma_read", "dma_read"), 0, "two reads overlap");
}

Test(pe_model, dma_reads_serialise_and_overlap_gemm, .timeout = 120)
{
	static struct rec recs[4096];
	char dir[256];
	size_t n, reads = 0, read_gemm_overlap = 0;

	kb_tmpdir(dir, sizeof(dir), "pe-overlap");
	run_gemm(dir, "pe", "systolic");
	n = read_oplog(dir, recs, 4096);
	cr_assert_gt(n, 10);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(recs[i].engine, "dma_read"))
			continue;
		reads++;
		for (size_t j = 0; j < n; j++) {
			if (i == j)
				continue;
			if (!strcmp(recs[j].engine, "dma_read"))
				cr_expect_not(overlaps(&recs[i], &recs[j]),
					      "two reads overlap on the one read channel");
			if (!strcmp(recs[j].engine, "gemm") && overlaps(&recs[i], &recs[j]))
				read_gemm_overlap++;
		}
	}
	/* 256^3 in 128 tiles, M innermost: A's tile per GEMM (2 x 2 x 2 = 8)
	 * and B's once per (N, K) pass over both M tiles (2 x 2 = 4) */
	cr_expect_eq(reads, 8 + 4, "256^3 in 128 tiles streams 12 operand tiles, got %zu", reads);
	cr_expect_gt(read_gemm_overlap, 0, "no DMA read ever overlaps a GEMM");
}

Test(pe_model, plugin_gemm_model_changes_only_gemm_stage_durations, .timeout = 120)
{
	static struct rec base_recs[4096], plug_recs[4096];
	char base[256], a[600], b[600], plugin[600];
	const char *dir = getenv("KB_PLUGINS");
	size_t na, nb;

	snprintf(plugin, sizeof(plugin), "%s/gemm_fixed.so", dir ? dir : "build/plugins");
	kb_tmpdir(base, sizeof(base), "pe-plugin");
	snprintf(a, sizeof(a), "%s/systolic", base);
	snprintf(b, sizeof(b), "%s/plugin", base);
	run_gemm(a, "none", "systolic");
	run_gemm(b, "none", plugin);
	na = read_oplog(a, base_recs, 4096);
	nb = read_oplog(b, plug_recs, 4096);
	cr_assert_eq(na, nb, "the plug-in changed the number of stages");
	for (size_t i = 0; i < na; i++) {
		const struct rec *x = NULL, *y = &plug_recs[i];

		/* same stage, found by identity (order may shift with timing) */
		for (size_t j = 0; j < na && !x; j++)
			if (base_recs[j].composite == y->composite && base_recs[j].stage == y->stage)
				x = &base_recs[j];
		cr_assert(x, "stage %lu.%u only exists with the plug-in", y->composite, y->stage);
		cr_expect_str_eq(x->engine, y->engine);
		cr_expect_str_eq(x->op_name, y->op_name);
		cr_expect_eq(x->bytes, y->bytes);
		if (!strcmp(y->engine, "gemm"))
			cr_expect_eq(y->end - y->start, 1000u * 1000u, "plug-in GEMM takes 1000 cycles");
		else
			cr_expect_eq(y->end - y->start, x->end - x->start,
				     "%s stage duration changed with the GEMM model", y->engine);
	}
	snprintf(a, sizeof(a), "%s/systolic/c.npy", base);
	snprintf(b, sizeof(b), "%s/plugin/c.npy", base);
	cr_expect(kb_same_file(a, b), "the plug-in changed the numbers");
}

Test(pe_model, out_of_bounds_address_is_a_clear_error, .timeout = 60)
{
	struct kb_result r;
	char dir[256];

	kb_tmpdir(dir, sizeof(dir), "pe-oob");
	kb_run(&r, "run", "gemm", "--quiet", "--out", dir, "--set", "memory.hbm_bytes=16384", "--arg",
	       "m=64", "--arg", "k=64", "--arg", "n=64", NULL);
	cr_expect_eq(r.status, 1);
	cr_expect(strstr(r.err, "out of bounds") || strstr(r.err, "outside"), "%s", r.err);
	cr_expect(strstr(r.err, "HBM"), "the error does not name the space: %s", r.err);
	cr_expect_eq(strchr(r.err, '\n') - r.err + 1, (long)strlen(r.err), "not one line: %s", r.err);
}

Test(pe_model, missing_model_plugin_is_one_clear_line, .timeout = 60)
{
	struct kb_result r;
	char dir[256];

	kb_tmpdir(dir, sizeof(dir), "pe-badmodel");
	kb_run(&r, "run", "gemm", "--quiet", "--out", dir, "--set", "gemm.model=/nonexistent/m.so", NULL);
	/* found before any daemon starts, as a missing kernel object is: exit 2 */
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "/nonexistent/m.so") && strstr(r.err, "gemm"), "%s", r.err);
	cr_expect_eq(strchr(r.err, '\n') - r.err + 1, (long)strlen(r.err), "not one line: %s", r.err);
}

/* A 2-rank x 2-PE ring workload in data mode over one transport and
 * grouping, into `dir`. */
static void run_ring(const char *dir, const char *transport, const char *colocate)
{
	struct kb_result r;

	kb_run(&r, "run", "ring_attention", "--quiet", "--mode", "data", "--out", dir, "--ranks",
	       "2", "--pes", "2", "--transport", transport, "--colocate", colocate, "--seed", "7",
	       "--arg", "heads_q=4", "--arg", "heads_kv=2", "--arg", "head_dim=32", "--arg",
	       "tile=16", "--arg", "seq_kv=40", "--arg", "pass=kv", NULL);
	cr_assert_eq(r.status, 0, "ring over %s, --colocate %s failed: %s", transport, colocate,
		     r.err);
}

/* PE and ring workloads give the same bytes over tcp and inproc and with
 * --colocate rank and pe as over ipc with a daemon per component. */
Test(pe_model, ring_workload_is_identical_over_every_transport_and_grouping, .timeout = 240)
{
	static const char *const ways[][2] = { { "tcp", "none" }, { "ipc", "rank" },
					       { "tcp", "pe" }, { "inproc", "all" } };
	static const char *const files[] = { "op_log.jsonl", "trace.json", "o.npy", "q.npy" };
	char base[256], ref[600], dir[600], fa[700], fb[700];

	kb_tmpdir(base, sizeof(base), "pe-ways");
	snprintf(ref, sizeof(ref), "%s/ipc-none", base);
	run_ring(ref, "ipc", "none");
	for (size_t w = 0; w < sizeof(ways) / sizeof(ways[0]); w++) {
		snprintf(dir, sizeof(dir), "%s/%s-%s", base, ways[w][0], ways[w][1]);
		run_ring(dir, ways[w][0], ways[w][1]);
		cr_expect_eq(kb_summary_u64(dir, "latency_ps"), kb_summary_u64(ref, "latency_ps"),
			     "latency differs over %s --colocate %s", ways[w][0], ways[w][1]);
		for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
			snprintf(fa, sizeof(fa), "%s/%s", ref, files[f]);
			snprintf(fb, sizeof(fb), "%s/%s", dir, files[f]);
			cr_expect(kb_same_file(fa, fb), "%s differs over %s --colocate %s", files[f],
				  ways[w][0], ways[w][1]);
		}
	}
}
