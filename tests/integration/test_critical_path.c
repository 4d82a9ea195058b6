/* test_critical_path.c — summary.json's critical_path (ADR 0030,
 * docs/metrics.md) through real daemons:
 *   - its classes sum to latency_ps exactly, on every kind of workload;
 *   - a counterfactual run with one resource made infinitely fast is never
 *     shorter by more than that resource's classes on the path, and on a
 *     kernel that is one dependent chain it is shorter by that time within
 *     5 % (the speed-ups are config changes: the tests compute nothing from
 *     the model's own formulas);
 *   - the ring's old mislabelling, reproduced and fixed: (a) a send at the
 *     instant the receiver waits, (b) queueing on a shared link, (c)
 *     waits off the path;
 *   - run.critical_path=0 sends no path and changes no timing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* The classes, in summary.json's order. */
static const char *const classes[] = {
	"dispatch",      "doorbell",      "dma_setup", "hbm_data",
	"hbm_queueing",  "hbm_latency",   "gemm",      "math",
	"link_queueing", "link_serialisation", "link_latency", "sender_not_ready",
};
#define N_CLASSES (sizeof(classes) / sizeof(classes[0]))

struct cp_run {
	uint64_t latency;
	uint64_t ps[N_CLASSES];
};

/* Runs `kernbench run WORDS... [--set S]...` (timing, --colocate all) and
 * reads latency_ps and the critical path; asserts the sum. */
static struct cp_run cp_run(const char *words, const char *const *sets)
{
	static char run_w[] = "run", set_w[] = "--set", colo_w[] = "--colocate", all_w[] = "all",
		    quiet_w[] = "--quiet", out_w[] = "--out";
	char dir[256], buf[1024], *argv[96], path[400], key[64];
	size_t n = 0;
	struct kb_result r;
	struct cp_run out = { 0 };
	uint64_t sum = 0;
	char *json;

	kb_tmpdir(dir, sizeof(dir), "cp");
	snprintf(buf, sizeof(buf), "%s", words);
	argv[n++] = (char *)kb_bin();
	argv[n++] = run_w;
	for (char *w = strtok(buf, " "); w && n < 80; w = strtok(NULL, " "))
		argv[n++] = w;
	for (; sets && *sets && n < 88; sets++) {
		argv[n++] = set_w;
		argv[n++] = (char *)*sets;
	}
	argv[n++] = colo_w;
	argv[n++] = all_w;
	argv[n++] = quiet_w;
	argv[n++] = out_w;
	argv[n++] = dir;
	argv[n] = NULL;
	kb_runv(&r, argv);
	cr_assert_eq(r.status, 0, "%s: %s", words, r.err);
	snprintf(path, sizeof(path), "%s/summary.json", dir);
	json = kb_slurp(path, NULL);
	cr_assert(json);
	out.latency = kb_json_u64(json, "latency_ps");
	for (size_t c = 0; c < N_CLASSES; c++) {
		snprintf(key, sizeof(key), "critical_path.%s", classes[c]);
		out.ps[c] = kb_json_u64(json, key);
		sum += out.ps[c];
	}
	free(json);
	cr_assert_eq(sum, out.latency, "%s: the critical path sums to %llu ps, latency %llu ps",
		     words, (unsigned long long)sum, (unsigned long long)out.latency);
	return out;
}

static uint64_t class_ps(const struct cp_run *r, const char *name)
{
	for (size_t c = 0; c < N_CLASSES; c++)
		if (!strcmp(classes[c], name))
			return r->ps[c];
	cr_assert_fail("no class %s", name);
	return 0;
}

/* ---------------------------------------------------------------- sum */

static const char *const workloads[] = {
	"gqa_decode_opt2 --arg seq_kv=2048",
	"gqa_decode_opt3 --pes 2 --arg heads_q=16 --arg heads_kv=2 --arg seq_kv=1024",
	"gqa_decode_prefetch --pes 2 --arg heads_q=16 --arg heads_kv=2 --arg seq_kv=1024",
	"gqa_decode_paged --pes 4 --arg batch=4 --arg lens=300,1,1000,129 --arg page=128",
	"gqa_prefill --pes 2 --arg heads_q=4 --arg heads_kv=2 --arg head_dim=64 --arg tile=64 "
	"--arg seq_q=128 --arg seq_kv=128",
	"gemm --arg m=200 --arg k=300 --arg n=77",
	"softmax --arg rows=64 --arg cols=300",
	"ring_attention --ranks 4 --pes 1 --arg heads_q=2 --arg heads_kv=1 --arg seq_kv=256",
	"ring_attention --ranks 3 --pes 2 --arg heads_q=4 --arg heads_kv=2 --arg seq_kv=128 "
	"--arg layout=zigzag",
	"ring_attention --ranks 5 --pes 1 --arg heads_q=8 --arg heads_kv=1 --arg seq_kv=256 "
	"--arg pass=q --arg merge=chain",
	"test_chain --ranks 3 --pes 1",
	"gqa_decode_opt2 --pes 16 --arg heads_kv=16 --arg heads_q=128 --arg seq_kv=512 "
	"--set hbm.bytes_per_cycle=512",
	"gqa_decode_opt2 --pes 4 --arg heads_kv=4 --arg heads_q=32 --arg seq_kv=512 "
	"--set hbm.bytes_per_cycle=300 --set hbm.model=interleaved",
	"gqa_decode_opt2 --arg seq_kv=1024 --set dma.queues=16 --set dma.rows_per_queue=8",
};

Test(critical_path, sums_to_the_latency_on_every_workload, .timeout = 240)
{
	char probe[600];

	for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++)
		cp_run(workloads[i], NULL);
	snprintf(probe, sizeof(probe), "%s/dma_probe.so:dma_probe", getenv("KB_PLUGINS"));
	cp_run(probe, NULL);
	snprintf(probe, sizeof(probe), "%s/ipcq_probe.so:ipcq_probe --ranks 3 --pes 4",
		 getenv("KB_PLUGINS"));
	cp_run(probe, NULL);
	snprintf(probe, sizeof(probe), "%s/hbm_probe.so:hbm_probe --pes 4 --set "
		 "hbm.bytes_per_cycle=100", getenv("KB_PLUGINS"));
	cp_run(probe, NULL);
}

/* ---------------------------------------------------------------- counterfactuals */

/* One resource made infinitely fast, and the classes it can save. */
struct speedup {
	const char *name;
	const char *sets[6];
	const char *classes[2];
};

static const struct speedup speedups[] = {
	{ "dispatch", { "dispatch.fixed_cycles=0", "dispatch.cycles_per_kib=0" },
	  { "dispatch" } },
	{ "dma setup", { "dma.setup_cycles=0" }, { "dma_setup" } },
	{ "dma and hbm bandwidth", { "dma.bytes_per_cycle=1048576", "hbm.bytes_per_cycle=1048576" },
	  { "hbm_data", "hbm_queueing" } },
	{ "hbm latency", { "hbm.latency_cycles=0" }, { "hbm_latency" } },
	{ "gemm",
	  { "gemm.model=roofline", "gemm.setup_cycles=0", "gemm.macs_per_cycle=4294967296",
	    "gemm.bytes_per_cycle=1048576" },
	  { "gemm" } },
	{ "math",
	  { "math.lanes=65536", "math.setup_cycles=0", "math.cycles_per_elem=0",
	    "math.exp_cycles_per_elem=0", "math.reduce_cycles_per_elem=0" },
	  { "math" } },
	{ "link latency", { "links.ipcq_cycles=1" }, { "link_latency" } },
	{ "link bandwidth", { "links.ipcq_bytes_per_cycle=1048576" },
	  { "link_serialisation", "link_queueing" } },
};
#define N_SPEEDUPS (sizeof(speedups) / sizeof(speedups[0]))

/* Runs `words` with every speed-up; checks saved <= path time of its
 * classes (+ `slack` x latency), and with `chain` saved >= 95 % of it. */
static void counterfactuals_within(const char *words, const char *const *base_sets, bool chain,
				   double slack)
{
	const char *sets[16];
	struct cp_run base = cp_run(words, base_sets);
	size_t nb = 0;

	while (base_sets && base_sets[nb])
		sets[nb] = base_sets[nb], nb++;
	for (size_t i = 0; i < N_SPEEDUPS; i++) {
		const struct speedup *s = &speedups[i];
		struct cp_run fast;
		uint64_t on_path = 0, saved;
		size_t n = nb;

		for (size_t k = 0; k < 6 && s->sets[k]; k++)
			sets[n++] = s->sets[k];
		sets[n] = NULL;
		for (size_t k = 0; k < 2 && s->classes[k]; k++)
			on_path += class_ps(&base, s->classes[k]);
		fast = cp_run(words, sets);
		cr_assert_leq(fast.latency, base.latency, "%s: %s made it slower", words, s->name);
		saved = base.latency - fast.latency;
		cr_expect_leq((double)saved, (double)on_path + slack * (double)base.latency,
			      "%s: infinitely fast %s saved %llu ps, the path spent only %llu ps on "
			      "it", words, s->name, (unsigned long long)saved,
			      (unsigned long long)on_path);
		if (chain)
			cr_expect_geq((double)saved, 0.95 * (double)on_path,
				      "%s (one chain): infinitely fast %s saved %llu ps of the %llu ps "
				      "the path spent on it", words, s->name,
				      (unsigned long long)saved, (unsigned long long)on_path);
	}
}

static void counterfactuals(const char *words, const char *const *base_sets, bool chain)
{
	counterfactuals_within(words, base_sets, chain, 0.0);
}

Test(counterfactual, a_single_chain_saves_each_class_within_5_percent, .timeout = 240)
{
	counterfactuals("test_chain --pes 1 --arg steps=4", NULL, true);
	counterfactuals("test_chain --ranks 3 --pes 1 --arg steps=3 --arg rows=32", NULL, true);
}

Test(counterfactual, a_chain_on_a_wider_dma_saves_each_class_within_5_percent, .timeout = 240)
{
	static const char *const wide[] = { "dma.queues=4", "dma.rows_per_queue=8", NULL };

	counterfactuals("test_chain --ranks 2 --pes 1 --arg steps=3 --arg rows=128", wide, true);
}

Test(counterfactual, never_saves_more_than_the_path_spent, .timeout = 600)
{
	static const char *const shared_slow[] = { "links.ipcq_bytes_per_cycle=32", NULL };
	static const char *const small_hbm[] = { "hbm.bytes_per_cycle=400", NULL };
	char probe[600];

	counterfactuals("gqa_decode_opt2 --arg seq_kv=1024", NULL, false);
	counterfactuals("gemm --arg m=256 --arg k=384 --arg n=200", NULL, false);
	counterfactuals("ring_attention --ranks 4 --pes 1 --arg heads_q=2 --arg heads_kv=1 "
			"--arg seq_kv=256",
			NULL, false);
	/* several PEs per rank share the rank's HBM (fair share among the
	 * channels moving bytes) and its link (first come first served): a
	 * speed-up moves the other PEs' transfers, and with them the share
	 * and the order each transfer gets, so the run is not quite max-plus
	 * (measured: infinitely fast MATH saves 0.4 % of the latency more
	 * than the path's MATH on this 3 x 4 ring; with hbm.model=ideal, none) */
	counterfactuals_within("ring_attention --ranks 3 --pes 4 --arg heads_q=8 --arg heads_kv=4 "
			       "--arg seq_kv=128 --arg causal=0",
			       shared_slow, false, 0.01);
	counterfactuals("ring_attention --ranks 2 --pes 4 --arg heads_q=16 --arg heads_kv=4 "
			"--arg seq_kv=256",
			NULL, false);
	counterfactuals("ring_attention --ranks 4 --pes 1 --arg heads_q=8 --arg heads_kv=1 "
			"--arg seq_kv=512 --arg pass=q",
			NULL, false);
	counterfactuals("gqa_decode_opt2 --pes 8 --arg seq_kv=512", small_hbm, false);
	snprintf(probe, sizeof(probe), "%s/dma_probe.so:dma_probe", getenv("KB_PLUGINS"));
	counterfactuals(probe, NULL, false);
}

/* ---------------------------------------------------------------- ring labels */

static uint64_t link_busy_on_path(const struct cp_run *r)
{
	return class_ps(r, "link_serialisation") + class_ps(r, "link_queueing");
}

/* (a) Every PE sends, then waits for its left neighbour's tile, which was
 * sent at the same instant: the link is the critical path. The old split
 * called the whole wait imbalance (exposed 0). Now the link's time is on the
 * path, nothing is "not ready", and a faster link saves it. */
Test(ring_labels, a_send_at_the_instant_of_the_wait_is_link_time, .timeout = 120)
{
	static const char *const fast[] = { "links.ipcq_bytes_per_cycle=1048576", NULL };
	static const char *const near[] = { "links.ipcq_cycles=1", NULL };
	char probe[600];

	for (unsigned ranks = 2; ranks <= 4; ranks += 2) {
		struct cp_run base, f, l;

		snprintf(probe, sizeof(probe), "%s/ipcq_probe.so:ipcq_probe --ranks %u --pes 1",
			 getenv("KB_PLUGINS"), ranks);
		base = cp_run(probe, NULL);
		f = cp_run(probe, fast);
		l = cp_run(probe, near);
		cr_expect_eq(class_ps(&base, "sender_not_ready"), 0);
		cr_expect_gt(class_ps(&base, "link_serialisation"), 0, "R=%u: no serialisation on the "
			     "path", ranks);
		cr_expect_geq((double)(base.latency - f.latency),
			      0.95 * (double)link_busy_on_path(&base), "R=%u", ranks);
		cr_expect_leq(base.latency - f.latency, link_busy_on_path(&base), "R=%u", ranks);
		cr_expect_geq((double)(base.latency - l.latency),
			      0.95 * (double)class_ps(&base, "link_latency"), "R=%u", ranks);
	}
}

/* (b) P PEs of a rank send at once on the rank's one link: the last tile
 * waits P - 1 serialisations behind the others — link queueing, which the
 * old split called imbalance. A faster link saves it all; nothing on the
 * path is "not ready". */
Test(ring_labels, queueing_on_a_shared_link_is_link_queueing, .timeout = 120)
{
	static const char *const fast[] = { "links.ipcq_bytes_per_cycle=1048576", NULL };
	char probe[600];

	for (unsigned pes = 2; pes <= 8; pes *= 2) {
		struct cp_run base, f;
		uint64_t q, s;

		snprintf(probe, sizeof(probe), "%s/ipcq_probe.so:ipcq_probe --ranks 3 --pes %u",
			 getenv("KB_PLUGINS"), pes);
		base = cp_run(probe, NULL);
		f = cp_run(probe, fast);
		q = class_ps(&base, "link_queueing");
		s = class_ps(&base, "link_serialisation");
		cr_expect_eq(class_ps(&base, "sender_not_ready"), 0);
		cr_expect_eq(q, (pes - 1) * s, "P=%u: queueing %llu, serialisation %llu", pes,
			     (unsigned long long)q, (unsigned long long)s);
		cr_expect_geq((double)(base.latency - f.latency), 0.95 * (double)(q + s), "P=%u",
			      pes);
		cr_expect_leq(base.latency - f.latency, q + s, "P=%u", pes);
	}
}

/* (b') A balanced ring of several PEs per rank on a slow link: the path's
 * link time is mostly queueing, and it bounds what a faster link saves. */
Test(ring_labels, a_balanced_ring_on_a_slow_shared_link_queues, .timeout = 120)
{
	static const char *const slow[] = { "links.ipcq_bytes_per_cycle=32", NULL };
	static const char *const fast[] = { "links.ipcq_bytes_per_cycle=1048576", NULL };
	const char *ring = "ring_attention --ranks 3 --pes 8 --arg heads_q=8 --arg heads_kv=8 "
			   "--arg seq_kv=256 --arg causal=0";
	struct cp_run base = cp_run(ring, slow), f = cp_run(ring, fast);

	cr_expect_eq(class_ps(&base, "sender_not_ready"), 0);
	cr_expect_gt(class_ps(&base, "link_queueing"), base.latency / 2);
	cr_expect_gt(base.latency - f.latency, 0);
	cr_expect_leq(base.latency - f.latency, link_busy_on_path(&base));
}

/* (c) A contiguous causal ring: the ranks holding early queries wait for
 * the others, and those waits are off the critical path. Wherever its
 * latency does not depend on the link's bandwidth (the same as with a
 * 2^20 B/cycle link), no link bandwidth may be on the path — the old split
 * reported 23.7 us exposed there. At least two of the widths tried must be
 * such, or the test would check nothing. */
Test(ring_labels, waits_off_the_path_are_not_exposed, .timeout = 120)
{
	static const char *const bw[5][2] = { { "links.ipcq_bytes_per_cycle=1048576" },
					     { "links.ipcq_bytes_per_cycle=640" },
					     { "links.ipcq_bytes_per_cycle=160" },
					     { "links.ipcq_bytes_per_cycle=64" },
					     { "links.ipcq_bytes_per_cycle=8" } };
	const char *ring = "ring_attention --ranks 4 --pes 1 --arg heads_q=8 --arg heads_kv=1 "
			   "--arg seq_kv=256";
	struct cp_run fastest = cp_run(ring, bw[0]);
	int unaffected = 0;

	for (int i = 1; i < 5; i++) {
		struct cp_run r = cp_run(ring, bw[i]);

		cr_expect_eq(class_ps(&r, "sender_not_ready"), 0);
		cr_expect_leq(r.latency - fastest.latency, link_busy_on_path(&r),
			      "%s: the link cost %llu ps, the path has %llu ps of it", bw[i][0],
			      (unsigned long long)(r.latency - fastest.latency),
			      (unsigned long long)link_busy_on_path(&r));
		if (r.latency != fastest.latency)
			continue;
		unaffected++;
		cr_expect_eq(link_busy_on_path(&r), 0, "%s: %llu ps of link bandwidth on the path",
			     bw[i][0], (unsigned long long)link_busy_on_path(&r));
	}
	cr_expect_geq(unaffected, 2, "the ring depends on its link at almost every width");
}

/* ---------------------------------------------------------------- off */

Test(critical_path, off_sends_no_path_and_changes_no_timing, .timeout = 120)
{
	char on[256], off[256], a[400], b[400];
	const char *const base[] = { "ring_attention", "--ranks", "3", "--pes", "2", "--arg",
				     "heads_q=4", "--arg", "heads_kv=2", "--arg", "seq_kv=128", NULL };
	const char *extra[16];
	char *json;
	size_t n = 0;

	kb_tmpdir(on, sizeof(on), "cp-on");
	kb_tmpdir(off, sizeof(off), "cp-off");
	kb_run_ok(on, base);
	while (base[n])
		extra[n] = base[n], n++;
	extra[n++] = "--set";
	extra[n++] = "run.critical_path=0";
	extra[n] = NULL;
	kb_run_ok(off, extra);
	snprintf(a, sizeof(a), "%s/op_log.jsonl", on);
	snprintf(b, sizeof(b), "%s/op_log.jsonl", off);
	cr_expect(kb_same_file(a, b), "the op log changed without paths");
	cr_expect_eq(kb_summary_u64(on, "latency_ps"), kb_summary_u64(off, "latency_ps"));
	cr_expect_eq(kb_summary_u64(on, "messages"), kb_summary_u64(off, "messages"));
	snprintf(b, sizeof(b), "%s/summary.json", off);
	json = kb_slurp(b, NULL);
	cr_assert(json);
	cr_expect(strstr(json, "\"critical_path\": null"), "critical_path is not null when off");
	cr_expect(strstr(json, "\"ipcq_exposed_ps\": null"));
	free(json);
}

/* ---------------------------------------------------------------- segments */

/* critical_path.jsonl (a traced run): the path's segments in time order,
 * each ending where the next begins, from 0 to latency_ps, each on a
 * component of the run with a class of the split; none with --trace off.
 * kernbench plot draws them as the timeline's top lane. */
static void expect_segments(const char *dir, const char *what)
{
	char path[400], v[128];
	char *text, *line, *save = NULL;
	uint64_t at = 0, latency = kb_summary_u64(dir, "latency_ps"), n = 0;

	snprintf(path, sizeof(path), "%s/critical_path.jsonl", dir);
	text = kb_slurp(path, NULL);
	cr_assert(text, "%s: no critical_path.jsonl", what);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
		uint64_t start = kb_json_u64(line, "start_ps"), end = kb_json_u64(line, "end_ps");
		bool known = false;

		cr_expect_eq(start, at, "%s: segment %llu starts at %llu, the last ended at %llu",
			     what, (unsigned long long)n, (unsigned long long)start,
			     (unsigned long long)at);
		cr_expect_leq(start, end);
		cr_assert(kb_json_field(line, "class", v, sizeof(v)), "%s: %s", what, line);
		for (size_t c = 0; c < N_CLASSES; c++) {
			char quoted[64];

			snprintf(quoted, sizeof(quoted), "\"%s\"", classes[c]);
			known = known || !strcmp(v, quoted);
		}
		cr_expect(known, "%s: class %s", what, v);
		cr_assert(kb_json_field(line, "component", v, sizeof(v)), "%s: %s", what, line);
		at = end;
	}
	cr_expect_gt(n, 0);
	cr_expect_eq(at, latency, "%s: the segments end at %llu, latency %llu", what,
		     (unsigned long long)at, (unsigned long long)latency);
	free(text);
}

Test(critical_path, segments_tile_the_run_in_critical_path_jsonl, .timeout = 180)
{
	static const char *const ring[] = { "ring_attention", "--ranks", "3", "--pes", "4",
					    "--arg", "heads_q=8", "--arg", "heads_kv=4", "--arg",
					    "seq_kv=128", "--set", "links.ipcq_bytes_per_cycle=32",
					    "--colocate", "none", NULL };
	static const char *const shared[] = { "gqa_decode_opt2", "--pes", "16", "--arg",
					      "heads_kv=16", "--arg", "heads_q=128", "--arg",
					      "seq_kv=512", "--set", "hbm.bytes_per_cycle=512",
					      "--colocate", "all", NULL };
	static const char *const untraced[] = { "gemm", "--trace", "off", NULL };
	char dir[256], path[400];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "cp-seg-ring");
	kb_run_ok(dir, ring);
	expect_segments(dir, "ring 3 x 4 at 32 B/cycle");
	kb_run(&r, "plot", dir, NULL);
	cr_expect_eq(r.status, 0, "plot: %s", r.err);
	kb_tmpdir(dir, sizeof(dir), "cp-seg-hbm");
	kb_run_ok(dir, shared);
	expect_segments(dir, "decode 16 PEs, shared HBM");
	kb_tmpdir(dir, sizeof(dir), "cp-seg-off");
	kb_run_ok(dir, untraced);
	snprintf(path, sizeof(path), "%s/critical_path.jsonl", dir);
	cr_expect(access(path, F_OK) != 0, "--trace off wrote critical_path.jsonl");
}
