/* test_metrics.c — utilisation and the op log's intervals (docs/metrics.md)
 * through real daemons, against figures computed here from the shapes:
 *   - busy_util and throughput_util have the same six resources, with
 *     0 <= throughput <= busy <= 1; bound_engine is the largest throughput;
 *   - a probe's throughput is its bytes (MACs) over peak x latency, with the
 *     bytes counted in the test;
 *   - each DMA record is the interval its channel moved the transfer's
 *     bytes: no two records of one channel overlap, issue_ps <= start_ps,
 *     a channel's records sum to its busy time, and trace.json's DMA slices
 *     are the same intervals. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char *const resources[] = { "dma_read", "dma_write", "gemm", "math", "hbm", "link" };
#define N_RES (sizeof(resources) / sizeof(resources[0]))

static double json_double(const char *json, const char *key)
{
	char v[64];

	cr_assert(kb_json_field(json, key, v, sizeof(v)), "no \"%s\"", key);
	return strtod(v, NULL);
}

static char *summary(const char *dir)
{
	char path[400];
	char *json;

	snprintf(path, sizeof(path), "%s/summary.json", dir);
	json = kb_slurp(path, NULL);
	cr_assert(json, "no %s", path);
	return json;
}

/* Runs `kernbench run ARGS... --colocate all --quiet --out DIR`. */
static void run_in(char *dir, size_t cap, const char *tag, const char *const *args)
{
	kb_tmpdir(dir, cap, tag);
	kb_run_ok(dir, args);
}

/* Both fractions of every resource, bound_engine the largest throughput. */
static void expect_consistent(const char *dir)
{
	char *json = summary(dir), key[64], bound[64];
	double best = -1, bound_util;
	const char *argmax = NULL;

	for (size_t i = 0; i < N_RES; i++) {
		double busy, tp;

		snprintf(key, sizeof(key), "busy_util.%s", resources[i]);
		busy = json_double(json, key);
		snprintf(key, sizeof(key), "throughput_util.%s", resources[i]);
		tp = json_double(json, key);
		cr_expect(tp >= 0 && tp <= busy + 1e-4 && busy <= 1.0 + 1e-4,
			  "%s: %s throughput %.4f, busy %.4f", dir, resources[i], tp, busy);
		if (tp > best) {
			best = tp;
			argmax = resources[i];
		}
	}
	cr_assert(kb_json_field(json, "bound_engine", bound, sizeof(bound)));
	bound_util = json_double(json, "bound_util");
	snprintf(key, sizeof(key), "\"%s\"", argmax);
	cr_expect_str_eq(bound, key, "bound_engine is not the resource closest to its peak");
	cr_expect(fabs(bound_util - best) < 1e-9);
	cr_expect(fabs(json_double(json, "hbm_bw_util") - json_double(json, "throughput_util.hbm")) <
		  1e-9);
	cr_expect(fabs(json_double(json, "dma_read_util") - json_double(json, "busy_util.dma_read")) <
		  1e-9);
	free(json);
}

Test(utilisation, both_fractions_for_every_resource_and_the_bound_is_the_throughput,
     .timeout = 120)
{
	static const char *const decode[] = { "gqa_decode_opt2", "--arg", "seq_kv=2048",
					      "--colocate", "all", NULL };
	static const char *const ring[] = { "ring_attention", "--ranks", "3", "--pes", "2", "--arg",
					    "heads_q=4", "--arg", "heads_kv=2", "--arg", "seq_kv=128",
					    "--set", "links.ipcq_bytes_per_cycle=16", "--colocate",
					    "all", NULL };
	char dir[256];

	run_in(dir, sizeof(dir), "util-decode", decode);
	expect_consistent(dir);
	run_in(dir, sizeof(dir), "util-ring", ring);
	expect_consistent(dir);
}

/* The DMA probe (rows = 128) reads two 128 x 128 f16 tiles and writes a
 * zero f16 tile and their sum, which tl_add makes f32: throughput = bytes /
 * (queues x bytes_per_cycle x cycles), the rates read from the run's own
 * configuration (summary.json's config). */
Test(utilisation, throughput_is_bytes_over_peak_and_latency, .timeout = 60)
{
	const char *plugins = getenv("KB_PLUGINS");
	char probe[600], dir[256];
	const char *args[] = { probe, "--set", "dma.queues=2", "--set", "dma.rows_per_queue=16",
			       "--colocate", "all", NULL };
	double cycles, peak, read_bytes = 2.0 * 2 * 128 * 128, write_bytes = (2.0 + 4.0) * 128 * 128;
	char *json;

	snprintf(probe, sizeof(probe), "%s/dma_probe.so:dma_probe", plugins);
	run_in(dir, sizeof(dir), "util-probe", args);
	json = summary(dir);
	cycles = (double)kb_json_u64(json, "latency_ps") * (double)kb_json_u64(json, "config.machine.clock_mhz") /
		 1e6;
	peak = 2.0 * (double)kb_json_u64(json, "config.dma.bytes_per_cycle") * cycles;
	cr_expect(fabs(json_double(json, "throughput_util.dma_read") - read_bytes / peak) < 1e-4,
		  "dma_read throughput %.4f, expected %.4f",
		  json_double(json, "throughput_util.dma_read"), read_bytes / peak);
	cr_expect(fabs(json_double(json, "throughput_util.dma_write") - write_bytes / peak) < 1e-4,
		  "dma_write throughput %.4f, expected %.4f",
		  json_double(json, "throughput_util.dma_write"), write_bytes / peak);
	free(json);
}

/* A 256 x 256 x 256 GEMM: 2^24 MACs over the array's peak (R x C MACs per
 * PE cycle; the tensor engine's array at its own clock). */
static void expect_gemm_throughput(const char *model)
{
	char set[64], dir[256];
	const char *args[] = { "gemm", "--arg", "m=256", "--arg", "k=256", "--arg", "n=256",
			       "--set", set, "--colocate", "all", NULL };
	char *json;
	double cycles, peak, want;

	snprintf(set, sizeof(set), "gemm.model=%s", model);
	run_in(dir, sizeof(dir), "util-gemm", args);
	json = summary(dir);
	cycles = (double)kb_json_u64(json, "latency_ps") * (double)kb_json_u64(json, "config.machine.clock_mhz") /
		 1e6;
	peak = (double)kb_json_u64(json, "config.gemm.array_rows") *
	       (double)kb_json_u64(json, "config.gemm.array_cols");
	if (!strcmp(model, "tensor_engine") && kb_json_u64(json, "config.gemm.clock_mhz"))
		peak *= (double)kb_json_u64(json, "config.gemm.clock_mhz") /
			(double)kb_json_u64(json, "config.machine.clock_mhz");
	want = 256.0 * 256 * 256 / (peak * cycles);
	cr_expect(fabs(json_double(json, "throughput_util.gemm") - want) < 1e-4,
		  "%s: gemm throughput %.4f, expected %.4f", model,
		  json_double(json, "throughput_util.gemm"), want);
	free(json);
}

Test(utilisation, gemm_throughput_is_macs_over_the_array, .timeout = 60)
{
	expect_gemm_throughput("systolic");
	expect_gemm_throughput("tensor_engine");
}

/* ---------------------------------------------------------------- op log */

struct rec {
	uint64_t start, end, issue;
	unsigned rank, pe;
	char engine[16];
};

static int rec_cmp(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;
	int c = x->rank != y->rank ? (x->rank < y->rank ? -1 : 1)
		: x->pe != y->pe   ? (x->pe < y->pe ? -1 : 1)
				   : strcmp(x->engine, y->engine);

	return c ? c : x->start < y->start ? -1 : x->start > y->start;
}

/* Every record of DIR's op log (caller frees). */
static struct rec *read_records(const char *dir, size_t *n_out)
{
	char path[400], v[64];
	char *text, *line, *save = NULL;
	size_t n = 0, cap = 1024;
	struct rec *recs = malloc(cap * sizeof(*recs));

	snprintf(path, sizeof(path), "%s/op_log.jsonl", dir);
	text = kb_slurp(path, NULL);
	cr_assert(text && recs);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct rec *r;

		if (n == cap)
			cr_assert(recs = realloc(recs, (cap *= 2) * sizeof(*recs)));
		r = &recs[n++];
		r->start = kb_json_u64(line, "start_ps");
		r->end = kb_json_u64(line, "end_ps");
		r->issue = kb_json_u64(line, "issue_ps");
		r->rank = (unsigned)kb_json_u64(line, "rank");
		r->pe = (unsigned)kb_json_u64(line, "pe");
		cr_assert(kb_json_field(line, "engine", v, sizeof(v)));
		snprintf(r->engine, sizeof(r->engine), "%.*s", (int)strlen(v) - 2, v + 1);
	}
	free(text);
	*n_out = n;
	return recs;
}

static bool same_unit(const struct rec *a, const struct rec *b)
{
	return a->rank == b->rank && a->pe == b->pe && !strcmp(a->engine, b->engine);
}

/* No two records of one channel or engine overlap, each starts after it
 * was issued, and the busiest PE's records of each engine sum to its busy
 * time in summary.json. */
static void expect_intervals(const char *dir)
{
	static const char *const engines[] = { "dma_read", "dma_write", "gemm", "math" };
	size_t n;
	struct rec *r = read_records(dir, &n);
	char *json = summary(dir);
	uint64_t latency = kb_json_u64(json, "latency_ps"), busy = 0;
	double most[4] = { 0 };

	qsort(r, n, sizeof(*r), rec_cmp);
	for (size_t i = 0; i < n; i++) {
		cr_expect_leq(r[i].issue, r[i].start, "%s r%u.pe%u %s: issued at %llu, started %llu",
			      dir, r[i].rank, r[i].pe, r[i].engine, (unsigned long long)r[i].issue,
			      (unsigned long long)r[i].start);
		cr_expect_leq(r[i].start, r[i].end);
		if (i && same_unit(&r[i - 1], &r[i]))
			cr_expect_leq(r[i - 1].end, r[i].start,
				      "%s r%u.pe%u %s: records overlap (%llu > %llu)", dir, r[i].rank,
				      r[i].pe, r[i].engine, (unsigned long long)r[i - 1].end,
				      (unsigned long long)r[i].start);
		busy += r[i].end - r[i].start;
		if (i + 1 < n && same_unit(&r[i], &r[i + 1]))
			continue;
		for (int e = 0; e < 4; e++) /* the unit's last record: its busy time */
			if (!strcmp(r[i].engine, engines[e]) && (double)busy / (double)latency > most[e])
				most[e] = (double)busy / (double)latency;
		busy = 0;
	}
	for (int e = 0; e < 4; e++) {
		char key[64];

		snprintf(key, sizeof(key), "busy_util.%s", engines[e]);
		cr_expect(fabs(json_double(json, key) - most[e]) <= 1e-4, "%s: %s %.4f, records %.4f",
			  dir, key, json_double(json, key), most[e]);
	}
	free(json);
	free(r);
}

/* A track's slices in trace.json ("r0.pe3.dma dma_read"): count, total
 * ps, and whether two overlapped. */
struct track_sum {
	char name[48];
	unsigned pid, tid;
	uint64_t n, ps, last_end;
	bool overlap;
};

/* "key": microseconds with six decimals, as exact ps. */
static uint64_t us_ps(const char *line, const char *key)
{
	const char *p = strstr(line, key);
	unsigned long long whole = 0, frac = 0;

	cr_assert(p && sscanf(p + strlen(key), "%llu.%6llu", &whole, &frac) == 2, "%s", line);
	return whole * 1000000ull + frac;
}

/* The DMA tracks' slices of DIR/trace.json are the op log's records: the
 * same count and total on every channel, never overlapping. */
static void expect_trace_matches(const char *dir)
{
	static const char slice[] = "{\"ph\":\"X\",\"name\":\"dma_";
	static struct track_sum tr[256];
	size_t n_tr = 0, n;
	char path[400], *text, *line, *save = NULL;
	struct rec *r;

	memset(tr, 0, sizeof(tr));
	snprintf(path, sizeof(path), "%s/trace.json", dir);
	text = kb_slurp(path, NULL);
	cr_assert(text, "no %s", path);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned pid, tid;
		const char *q;

		if ((q = strstr(line, "\"thread_name\",\"pid\":")) &&
		    sscanf(q, "\"thread_name\",\"pid\":%u,\"tid\":%u", &pid, &tid) == 2 &&
		    strstr(line, " dma_") && n_tr < 256) {
			q = strstr(line, "{\"name\":\"") + 9;
			snprintf(tr[n_tr].name, sizeof(tr[n_tr].name), "%.*s",
				 (int)(strchr(q, '"') - q), q);
			tr[n_tr].pid = pid;
			tr[n_tr++].tid = tid;
		} else if (!strncmp(line, slice, sizeof(slice) - 1) &&
			   (q = strstr(line, "\"pid\":")) &&
			   sscanf(q, "\"pid\":%u,\"tid\":%u", &pid, &tid) == 2) {
			uint64_t ts = us_ps(line, "\"ts\":"), dur = us_ps(line, "\"dur\":");

			for (size_t i = 0; i < n_tr; i++)
				if (tr[i].pid == pid && tr[i].tid == tid) {
					tr[i].overlap |= tr[i].n && ts < tr[i].last_end;
					tr[i].n++;
					tr[i].ps += dur;
					tr[i].last_end = ts + dur;
				}
		}
	}
	free(text);
	r = read_records(dir, &n);
	cr_assert_gt(n_tr, 0, "%s: no DMA track in the trace", dir);
	for (size_t i = 0; i < n_tr; i++) {
		uint64_t count = 0, ps = 0;
		char want[48];

		for (size_t k = 0; k < n; k++) {
			snprintf(want, sizeof(want), "r%u.pe%u.dma %s", r[k].rank, r[k].pe, r[k].engine);
			if (!strcmp(want, tr[i].name)) {
				count++;
				ps += r[k].end - r[k].start;
			}
		}
		cr_expect_eq(tr[i].n, count, "%s: %s has %llu slices, %llu records", dir, tr[i].name,
			     (unsigned long long)tr[i].n, (unsigned long long)count);
		cr_expect_eq(tr[i].ps, ps, "%s: %s slices cover %llu ps, records %llu ps", dir,
			     tr[i].name, (unsigned long long)tr[i].ps, (unsigned long long)ps);
		cr_expect_not(tr[i].overlap, "%s: slices of %s overlap", dir, tr[i].name);
	}
	free(r);
}

Test(op_log, dma_records_are_data_movement_and_never_overlap, .timeout = 180)
{
	static const char *const make_run[] = { "gqa_decode_opt2", "--arg", "seq_kv=8192",
						"--colocate", "all", NULL };
	static const char *const shared[] = { "gqa_decode_opt2", "--pes", "16", "--arg",
					      "heads_kv=16", "--arg", "heads_q=128", "--arg",
					      "seq_kv=512", "--set", "hbm.bytes_per_cycle=512",
					      "--colocate", "all", NULL };
	static const char *const queues[] = { "gqa_decode_opt2", "--arg", "seq_kv=1024", "--set",
					      "dma.queues=16", "--set", "dma.rows_per_queue=8",
					      "--set", "hbm.model=interleaved", "--colocate", "all",
					      NULL };
	const char *plugins = getenv("KB_PLUGINS");
	char probe[600], dir[256];
	const char *probe_args[] = { probe, "--pes", "4", "--set", "hbm.bytes_per_cycle=100",
				     "--colocate", "all", NULL };

	run_in(dir, sizeof(dir), "oplog-run", make_run);
	expect_intervals(dir);
	expect_trace_matches(dir);
	run_in(dir, sizeof(dir), "oplog-shared", shared);
	expect_intervals(dir);
	expect_trace_matches(dir);
	run_in(dir, sizeof(dir), "oplog-queues", queues);
	expect_intervals(dir);
	snprintf(probe, sizeof(probe), "%s/hbm_probe.so:hbm_probe", plugins);
	run_in(dir, sizeof(dir), "oplog-probe", probe_args);
	expect_intervals(dir);
}
