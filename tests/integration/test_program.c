/* test_program.c — programs of several kernels (`kernbench run FILE.yaml`,
 * tl_program_run): tensors passed between steps through HBM by name, each
 * step's output against fp64 computed here from what the step read, the
 * per-step statistics in summary.json and the report, the steps as named
 * slices in the trace with the collective's messages as flows through the
 * rank links, and bad program files as one line naming file and item. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rt/npy.h"

/* A saved tensor [ranks, rows, cols] as doubles. */
struct mat {
	uint64_t R, rows, cols;
	double *v;
};

static struct mat load(const char *dir, const char *name)
{
	char path[600];
	struct rt_npy n;
	struct mat m;

	snprintf(path, sizeof(path), "%s/%s.npy", dir, name);
	cr_assert_eq(rt_npy_read(path, &n), RT_EOK, "%s: %s", path, rt_last_error());
	cr_assert(n.type == RT_NPY_F32 && n.ndim == 3, "%s", path);
	m = (struct mat){ n.shape[0], n.shape[1], n.shape[2], malloc(n.count * sizeof(double) + 8) };
	for (uint64_t i = 0; i < n.count; i++) {
		float f;

		memcpy(&f, n.data + 4 * i, 4);
		m.v[i] = f;
	}
	rt_npy_release(&n);
	return m;
}

static double at(const struct mat *m, uint64_t r, uint64_t i, uint64_t j)
{
	return m->v[(r * m->rows + i) * m->cols + j];
}

/* max over rank r of |got - ref| / max |ref|. */
static double rel_err(const struct mat *got, uint64_t r, const double *ref)
{
	double num = 0, den = 0;

	for (uint64_t i = 0; i < got->rows * got->cols; i++) {
		double d = fabs(got->v[r * got->rows * got->cols + i] - ref[i]);

		num = d > num ? d : num;
		den = fabs(ref[i]) > den ? fabs(ref[i]) : den;
	}
	return den ? num / den : num;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

/* Three ranks of two PEs: a projection (f32 out), a bias add rounded to
 * f16, a ring all-reduce over the ranks and an add of its result to
 * itself; the bias is one value on every rank (rank_mod 1), x is each
 * rank's own. */
#define M 24
#define K 40
#define N 36
static const char program[] =
	"program:\n"
	"  tensors:\n"
	"    x: {rows: 24, cols: 40, dtype: f16, init: random}\n"
	"    w: {rows: 40, cols: 36, dtype: f16, init: random, scale: 0.2}\n"
	"    bias: {rows: 1, cols: 36, dtype: f32, init: random, offset: 2, rank_mod: 1}\n"
	"    y: {rows: 24, cols: 36, dtype: f32}\n"
	"    z: {rows: 24, cols: 36, dtype: f16}\n"
	"    s: {rows: 24, cols: 36, dtype: f16, init: zeros}\n"
	"    t: {rows: 24, cols: 36, dtype: f32}\n"
	"  steps:\n"
	"    - name: proj\n"
	"      kernel: matmul\n"
	"      args: {block: 16}\n"
	"      tensors: {a: x, b: w, c: y}\n"
	"    - name: bias\n"
	"      kernel: add\n"
	"      tensors: {a: y, b: bias, c: z}\n"
	"    - name: reduce\n"
	"      kernel: coll\n"
	"      args: {op: all_reduce, algo: ring}\n"
	"      tensors: {x: z, y: s}\n"
	"    - name: twice\n"
	"      kernel: add\n"
	"      tensors: {a: s, b: s, c: t}\n";

static void check_outputs(const char *dir, uint32_t R)
{
	struct mat x = load(dir, "x"), w = load(dir, "w"), bias = load(dir, "bias");
	struct mat y = load(dir, "proj.y"), z = load(dir, "bias.z"), s = load(dir, "reduce.s");
	struct mat t = load(dir, "twice.t");
	double ref[M * N], worst[4] = { 0 };

	cr_assert(x.R == R && y.R == R && s.R == R && t.R == R);
	for (uint32_t r = 0; r < R; r++) {
		double e;

		for (uint32_t j = 0; j < N; j++)
			cr_assert(at(&bias, r, 0, j) == at(&bias, 0, 0, j), "bias differs on rank %u", r);
		cr_expect(r == 0 || memcmp(&x.v[r * M * K], x.v, M * K * sizeof(double)),
			  "x is the same on rank %u as on rank 0", r);
		for (uint32_t i = 0; i < M; i++)
			for (uint32_t j = 0; j < N; j++) {
				double a = 0;

				for (uint32_t k = 0; k < K; k++)
					a += at(&x, r, i, k) * at(&w, r, k, j);
				ref[i * N + j] = a;
			}
		e = rel_err(&y, r, ref); /* f32 accumulation of 40 products */
		cr_expect(e < 1e-6, "proj, rank %u: %.3g", r, e);
		worst[0] = e > worst[0] ? e : worst[0];
		for (uint32_t i = 0; i < M * N; i++)
			ref[i] = at(&y, r, i / N, i % N) + at(&bias, r, 0, i % N);
		e = rel_err(&z, r, ref); /* one fp16 rounding */
		cr_expect(e <= 0x1p-11, "bias, rank %u: %.3g", r, e);
		worst[1] = e > worst[1] ? e : worst[1];
		for (uint32_t i = 0; i < M * N; i++) {
			ref[i] = 0;
			for (uint32_t q = 0; q < R; q++)
				ref[i] += at(&z, q, i / N, i % N);
		}
		e = rel_err(&s, r, ref); /* f32 sums, one fp16 rounding */
		cr_expect(e <= 0x1p-11 + 1e-6, "reduce, rank %u: %.3g", r, e);
		worst[2] = e > worst[2] ? e : worst[2];
		for (uint32_t i = 0; i < M * N; i++)
			ref[i] = 2 * at(&s, r, i / N, i % N);
		e = rel_err(&t, r, ref); /* exact in f32 */
		cr_expect(e == 0, "twice, rank %u: %.3g", r, e);
	}
	cr_log_info("program steps: worst relative error proj %.3g, bias %.3g, reduce %.3g",
		    worst[0], worst[1], worst[2]);
	free(x.v), free(w.v), free(bias.v), free(y.v), free(z.v), free(s.v), free(t.v);
}

/* The steps of summary.json, in order, with their statistics. */
static void check_summary(const char *dir)
{
	static const char *const names[] = { "proj", "bias", "reduce", "twice" };
	static const char *const kernels[] = { "matmul", "add", "coll", "add" };
	char path[600], pat[96];
	char *json, *p;
	uint64_t prev_end = 0, latency, sum = 0;

	snprintf(path, sizeof(path), "%s/summary.json", dir);
	json = kb_slurp(path, NULL);
	cr_assert(json);
	latency = kb_json_u64(json, "latency_ps");
	p = strstr(json, "\"steps\": [");
	cr_assert(p, "summary.json has no steps");
	for (int k = 0; k < 4; k++) {
		uint64_t start, end, elapsed, ipcq, commands, busy;
		char *q;

		snprintf(pat, sizeof(pat), "{\"name\": \"%s\", \"kernel\": \"%s\"", names[k], kernels[k]);
		q = strstr(p, pat);
		cr_assert(q, "step %d is not %s (%s)", k, names[k], kernels[k]);
		p = q + 1;
#define FIELD(key, var)                                                             \
	do {                                                                        \
		char *f_ = strstr(q, "\"" key "\": ");                              \
		cr_assert(f_, "step %s has no " key, names[k]);                     \
		var = strtoull(f_ + strlen("\"" key "\": "), NULL, 10);             \
	} while (0)
		FIELD("start_ps", start);
		FIELD("end_ps", end);
		FIELD("elapsed_ps", elapsed);
		FIELD("ipcq_bytes", ipcq);
		FIELD("commands", commands);
		FIELD("gemm", busy);
#undef FIELD
		/* its share: from the previous step's end, so the shares add up */
		cr_expect_eq(elapsed, end - prev_end, "%s", names[k]);
		cr_expect_leq(start, prev_end ? prev_end : 0, "%s starts after the last ended",
			      names[k]);
		sum += elapsed;
		cr_expect_gt(elapsed, 0, "%s", names[k]);
		cr_expect_gt(commands, 0, "%s", names[k]);
		cr_expect(end > prev_end, "step %s ends before the step before it", names[k]);
		cr_expect_leq(end, latency);
		/* only the collective moves IPCQ bytes; only the projection uses GEMM */
		cr_expect((ipcq > 0) == (k == 2), "%s: %llu IPCQ bytes", names[k],
			  (unsigned long long)ipcq);
		cr_expect((busy > 0) == (k == 0), "%s: gemm busy %llu", names[k],
			  (unsigned long long)busy);
		prev_end = end;
	}
	cr_expect_eq(prev_end, latency, "the last step ends the run");
	cr_expect_eq(sum, latency, "the steps' shares add up to the latency");
	free(json);
}

/* Each host's "steps" track has the four steps as named slices; every
 * message into a rank's link component is one flow, as many as the link
 * delivered, at least the ring all-reduce's 2 per PE. */
static void check_trace(const char *dir, uint32_t R, uint32_t P)
{
	char path[600], line[512], name[128];
	FILE *f;
	int step_tids[64], n_step = 0, link_tids[64], n_link = 0;
	uint64_t slices[4] = { 0 }, into_links = 0, ids_s = 0, ids_f = 0;
	static const char *const names[] = { "proj", "bias", "reduce", "twice" };
	char *json;

	snprintf(path, sizeof(path), "%s/trace.json", dir);
	f = fopen(path, "r");
	cr_assert(f, "%s", path);
	while (fgets(line, sizeof(line), f)) {
		int pid, tid;

		if (strstr(line, "\"thread_name\"") &&
		    sscanf(line, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
				 "\"args\":{\"name\":\"%127[^\"]",
			   &pid, &tid, name) == 3) {
			size_t n = strlen(name);

			if (n > 6 && !strcmp(name + n - 6, " steps") && n_step < 64)
				step_tids[n_step++] = tid;
			if (n > 5 && !strcmp(name + n - 5, ".link") && n_link < 64)
				link_tids[n_link++] = tid;
		}
	}
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		int tid;
		char *t = strstr(line, "\"tid\":");

		if (!t)
			continue;
		tid = atoi(t + 6);
		if (strstr(line, "\"ph\":\"X\"") && strstr(line, "\"cat\":\"step\"")) {
			bool on_steps = false;

			for (int i = 0; i < n_step; i++)
				on_steps = on_steps || step_tids[i] == tid;
			cr_expect(on_steps, "a step slice off the steps track: %s", line);
			for (int k = 0; k < 4; k++) {
				char pat[64];

				snprintf(pat, sizeof(pat), "\"name\":\"%s\"", names[k]);
				slices[k] += strstr(line, pat) != NULL;
			}
		}
		ids_s += strstr(line, "\"ph\":\"s\"") != NULL;
		if (strstr(line, "\"ph\":\"f\"")) {
			ids_f++;
			for (int i = 0; i < n_link; i++)
				into_links += link_tids[i] == tid;
		}
	}
	fclose(f);
	cr_expect_eq(n_step, (int)(R * P), "one steps track per host");
	cr_expect_eq(n_link, (int)R, "one link component per rank");
	for (int k = 0; k < 4; k++)
		cr_expect_eq(slices[k], R * P, "step %s: %llu slices", names[k],
			     (unsigned long long)slices[k]);
	snprintf(path, sizeof(path), "%s/summary.json", dir);
	json = kb_slurp(path, NULL);
	cr_expect_eq(ids_s, kb_json_u64(json, "messages"), "every message is a flow");
	cr_expect_eq(ids_f, ids_s);
	cr_expect_eq(into_links, kb_json_u64(json, "by_kind.link.delivered"),
		     "flows into the links: %llu", (unsigned long long)into_links);
	cr_expect_geq(into_links, 2ull * (R - 1) * R * P);
	free(json);
}

Test(program, yaml_steps_pass_tensors_by_name_and_match_fp64, .timeout = 300)
{
	char dir[256], file[400], out[400];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "prog");
	snprintf(file, sizeof(file), "%s/chain.yaml", dir);
	snprintf(out, sizeof(out), "%s/run", dir);
	write_file(file, program);
	kb_run(&r, "run", file, "--ranks", "3", "--pes", "2", "--mode", "data", "--out", out, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	/* the report's step table */
	cr_expect(strstr(r.out, "step ") && strstr(r.out, "  proj ") && strstr(r.out, "  reduce "),
		  "no step table in the report:\n%s", r.out);
	check_outputs(out, 3);
	check_summary(out);
	check_trace(out, 3, 2);
}

/* The same program in timing mode: the same step boundaries (data mode
 * costs no simulated time), in any process grouping. */
Test(program, timing_mode_and_groupings_give_the_same_steps, .timeout = 300)
{
	char dir[256], file[400], a[400], b[400], c[400];
	struct kb_result r;
	char *sa, *sb;

	kb_tmpdir(dir, sizeof(dir), "prog-modes");
	snprintf(file, sizeof(file), "%s/chain.yaml", dir);
	write_file(file, program);
	snprintf(a, sizeof(a), "%s/data", dir);
	snprintf(b, sizeof(b), "%s/timing", dir);
	snprintf(c, sizeof(c), "%s/pe", dir);
	kb_run(&r, "run", file, "--ranks", "2", "--pes", "2", "--mode", "data", "--quiet", "--out", a,
	       NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	kb_run(&r, "run", file, "--ranks", "2", "--pes", "2", "--quiet", "--out", b, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	kb_run(&r, "run", file, "--ranks", "2", "--pes", "2", "--quiet", "--colocate", "pe",
	       "--out", c, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	sa = kb_summary_field(a, "steps");
	sb = kb_summary_field(b, "steps");
	cr_assert(sa && sb);
	cr_expect_str_eq(sa, sb);
	free(sa);
	kb_expect_same_run(b, c, false);
	free(sb);
}

/* A bad program file: one line naming the file and the item, exit 2,
 * nothing run. */
Test(program, bad_files_are_one_line, .timeout = 120)
{
	static const struct {
		const char *text, *expect;
	} cases[] = {
		{ "program:\n  tensors:\n    x: {cols: 4}\n  steps: [{name: a, kernel: add}]\n",
		  "tensor 'x': rows and cols are required" },
		{ "program:\n  tensors:\n    x: {rows: 4, cols: 4, dtype: f64}\n"
		  "  steps: [{name: a, kernel: add}]\n", "dtype must be" },
		{ "program:\n  tensors:\n    x: {rows: 4, cols: 4, sclae: 1}\n"
		  "  steps: [{name: a, kernel: add}]\n", "unknown key 'sclae'" },
		{ "program:\n  tensors:\n    x: {rows: 4, cols: 4}\n"
		  "  steps: [{name: a, kernel: add, tensors: {a: y}}]\n",
		  "tensor 'y' (for 'a') is not declared" },
		{ "program:\n  steps: [{name: a, kernel: no_such_kernel}]\n", "unknown kernel" },
		{ "program:\n  tensors:\n    x: {rows: 4, cols: 4}\n"
		  "  steps: [{name: a, kernel: add}, {name: a, kernel: add}]\n", "named twice" },
		{ "program:\n  steps: [\n", "YAML error" },
		{ "steps: []\n", "expected a top-level 'program:'" },
	};
	char dir[256], file[400], out[400];

	kb_tmpdir(dir, sizeof(dir), "prog-bad");
	snprintf(file, sizeof(file), "%s/bad.yaml", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kb_result r;

		write_file(file, cases[i].text);
		kb_run(&r, "run", file, "--out", out, "--quiet", NULL);
		cr_expect_eq(r.status, 2, "case %zu: exit %d", i, r.status);
		cr_expect(strstr(r.err, cases[i].expect) && strstr(r.err, "bad.yaml"),
			  "case %zu: %s", i, r.err);
		cr_expect_eq(kb_count_lines(r.err), 1, "case %zu: %s", i, r.err);
	}
	/* a step asking for a tensor it does not bind fails the run, naming it */
	{
		struct kb_result r;

		write_file(file, "program:\n  tensors:\n    x: {rows: 4, cols: 4}\n"
				 "  steps: [{name: first, kernel: add, tensors: {a: x, b: x}}]\n");
		kb_run(&r, "run", file, "--out", out, "--quiet", NULL);
		cr_expect_neq(r.status, 0);
		cr_expect(strstr(r.err, "first") && strstr(r.err, "'c'"), "%s", r.err);
	}
}
