/* attention_bench.c — the attention figures of issues 5, 8 and 12 (`make bench`):
 *   1. bound_util, hbm_bw_util and dma_read_util of gqa_decode_opt2 / opt3
 *      (Llama-3-70B: 64 query heads, 8 KV heads, d 128, 1 rank x 8 PEs) at
 *      seq_kv 1K, 8K, 32K and 128K, with dispatch cycles per tile;
 *   2. ring_attention prefill (pass=kv) ring figures for R = 2, 4, 8:
 *      link busy, waits, the link time on the critical path (queueing,
 *      serialisation, latency) and the hidden fraction;
 *   3. peak scratch at seq_kv 8K and 128K (scratch-scope design: independent of length);
 *   4. wall time of Llama-3-70B decode at 32K with per-engine daemons,
 *      --colocate pe and --colocate all;
 *   5. issue 12, side by side: decode at 8K and 8K+1 keys, the prefetch
 *      sweep against the blocking one, paged decode 8 x 8K, the zigzag
 *      causal ring against the contiguous one, pass=q tree merge against
 *      the chain and against pass=kv for decode at R = 2, 4, 8, 16;
 *   6. the PE-scaling curve of Llama-3-70B decode at 32K, one KV head per
 *      PE, 8 -> 64 PEs, under the default HBM and hbm.model=ideal;
 *   7. the memory model's cost: wall time of `make run`'s job (daemon per
 *      component) and of decode 32K with --colocate pe, each divided by the
 *      same run with hbm.model=ideal, measured side by side;
 *   8. the critical path's cost: wall time with run.critical_path=1 over =0
 *      for make run's job, decode 32K (--colocate all and pe) and a ring.
 * Spawns the binary at $KB_BIN; prints figures, asserts nothing. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

/* The output directory: one per bench process, so benches run side by
 * side (other worktrees, other users) never share it. */
static const char *out_dir(void)
{
	static char dir[64];

	if (!dir[0])
		snprintf(dir, sizeof(dir), "/tmp/kb-attention-bench-%ld", (long)getpid());
	return dir;
}

/* Runs `KB_BIN run ARGS --out DIR --quiet`; false on failure. */
static bool run(const char *args)
{
	const char *bin = getenv("KB_BIN");
	char cmd[2048];

	snprintf(cmd, sizeof(cmd), "rm -rf %s && %s run %s --out %s --quiet", out_dir(),
		 bin ? bin : "build/bin/kernbench", args, out_dir());
	if (system(cmd) != 0) {
		fprintf(stderr, "attention_bench: failed: %s\n", cmd);
		return false;
	}
	return true;
}

/* The first "key": number of this bench's run (bench.h). */
static double field(const char *key)
{
	return bench_summary_first(out_dir(), key);
}

static void decode_utilisation(void)
{
	static const char *const kernels[2] = { "gqa_decode_opt2", "gqa_decode_opt3" };
	static const unsigned seqs[4] = { 1024, 8192, 32768, 131072 };
	char args[512];

	printf("decode (Llama-3-70B, 1 rank x 8 PEs, timing, --colocate all)\n");
	printf("  %-16s %7s %12s %10s %11s %13s %15s\n", "kernel", "seq_kv", "latency_us",
	       "bound_util", "hbm_bw_util", "dma_read_util", "dispatch/tile");
	for (int k = 0; k < 2; k++)
		for (int s = 0; s < 4; s++) {
			snprintf(args, sizeof(args), "%s --colocate all --arg seq_kv=%u",
				 kernels[k], seqs[s]);
			if (!run(args))
				continue;
			printf("  %-16s %7u %12.3f %10.4f %11.4f %13.4f %15.1f\n", kernels[k],
			       seqs[s], field("latency_ps") / 1e6, field("bound_util"),
			       field("hbm_bw_util"), field("dma_read_util"),
			       field("dispatch_cycles") / field("tiles"));
		}
}

/* Prefill blocks big enough that a tile's compute (over the rank's query
 * blocks) exceeds its transfer: 2 query heads on one KV head, 256 queries
 * and 256 keys per rank, 1 PE per rank. causal=0 is the balanced case;
 * with causal=1 the ranks holding early queries idle while waiting for
 * the others (their waits are off the critical path). */
static void ring_hidden(void)
{
	static const unsigned ranks[3] = { 2, 4, 8 };
	char args[512];

	printf("ring_attention pass=kv prefill (1 PE/rank, heads_q=2 heads_kv=1, seq_kv=256/rank, seq_q=R*256)\n");
	printf("  %6s %5s %11s %11s %9s %9s %9s %9s %9s %8s\n", "causal", "ranks", "latency_us",
	       "transfer_us", "wait_us", "exposed", "queueing", "serial.", "link_lat", "hidden");
	for (int c = 0; c < 2; c++)
		for (int r = 0; r < 3; r++) {
			snprintf(args, sizeof(args),
				 "ring_attention --ranks %u --pes 1 --colocate all --arg heads_q=2 "
				 "--arg heads_kv=1 --arg seq_kv=256 --arg seq_q=%u --arg pass=kv "
				 "--arg causal=%d",
				 ranks[r], ranks[r] * 256, c);
			if (!run(args))
				continue;
			printf("  %6d %5u %11.3f %11.3f %9.3f %9.3f %9.3f %9.3f %9.3f %7.1f%%\n", c,
			       ranks[r], field("latency_ps") / 1e6, field("ipcq_transfer_ps") / 1e6,
			       field("ipcq_wait_ps") / 1e6, field("ipcq_exposed_ps") / 1e6,
			       field("link_queueing") / 1e6, field("link_serialisation") / 1e6,
			       field("link_latency") / 1e6, 100.0 * field("ipcq_hidden_fraction"));
		}
	printf("  (transfer = link busy time over every link; exposed = link time on the\n"
	       "   critical path = queueing + serialisation + link latency there (us);\n"
	       "   hidden = 1 - the path's link busy time / transfer; docs/metrics.md)\n");
}

static void wall_times(void)
{
	static const char *const colo[3] = { "none", "pe", "all" };
	char args[512];

	printf("simulator speed: gqa_decode_opt2 seq_kv=32768, 1 rank x 8 PEs, timing\n");
	for (int c = 0; c < 3; c++) {
		snprintf(args, sizeof(args),
			 "gqa_decode_opt2 --colocate %s --arg seq_kv=32768", colo[c]);
		if (!run(args))
			continue;
		printf("  --colocate %-5s daemons %3.0f  windows %7.0f  wall %8.3f s\n",
		       colo[c], field("daemons"), field("windows"), field("wall_s"));
	}
}

/* scratch-scope design at scale: with scratch scopes, 128K keys per rank need no more
 * scratch than 8K (one daemon, so the sweep takes seconds, not minutes). */
static void long_context(void)
{
	static const unsigned seq[2] = { 8192, 131072 };
	char args[512];

	printf("long context: gqa_decode_opt2, 1 rank x 8 PEs, timing, --colocate all\n");
	for (int i = 0; i < 2; i++) {
		snprintf(args, sizeof(args), "gqa_decode_opt2 --colocate all --arg seq_kv=%u", seq[i]);
		if (!run(args))
			continue;
		printf("  seq_kv %6u  latency %10.3f us  peak scratch %8.0f bytes  wall %6.3f s\n",
		       seq[i], field("latency_ps") / 1e6, field("peak_scratch_bytes"),
		       field("wall_s"));
	}
}

/* One run's latency (us), or -1 when it failed. */
static double latency_us(const char *args)
{
	return run(args) ? field("latency_ps") / 1e6 : -1;
}

static void pair(const char *what, const char *a, const char *b)
{
	double la = latency_us(a), ua = field("bound_util");
	double lb = latency_us(b), ub = field("bound_util");

	printf("  %-38s %10.2f %10.2f %7.3f   bound_util %.4f / %.4f\n", what, la, lb,
	       la > 0 ? lb / la : -1, ua, ub);
}

static void real_shapes(void)
{
	static const unsigned ranks[4] = { 2, 4, 8, 16 };
	char a[512], b[512], c[512];

	printf("issue 12 (timing, --colocate all)       latency_us: first   second  ratio\n");
	pair("decode opt2 8K / 8K+1 (Llama, 8 PEs)",
	     "gqa_decode_opt2 --colocate all --arg seq_kv=8192",
	     "gqa_decode_opt2 --colocate all --arg seq_kv=8193");
	pair("decode 8K blocking / prefetch",
	     "gqa_decode_prefetch --colocate all --arg seq_kv=8192 --arg prefetch=0",
	     "gqa_decode_prefetch --colocate all --arg seq_kv=8192");
	pair("decode 8K streamed V / V loaded ahead",
	     "gqa_decode_opt2 --colocate all --arg seq_kv=8192 --arg vstream=1",
	     "gqa_decode_opt2 --colocate all --arg seq_kv=8192");
	pair("paged 8 x 8K, page 128 / one 64K sequence",
	     "gqa_decode_paged --colocate all --arg batch=8 --arg lens=8192 --arg page=128",
	     "gqa_decode_paged --colocate all --arg batch=1 --arg lens=65536 --arg page=128");
	pair("ring R=8 causal contiguous / zigzag",
	     "ring_attention --ranks 8 --pes 1 --colocate all --arg heads_q=8 --arg heads_kv=1 --arg seq_kv=256 --arg pass=kv",
	     "ring_attention --ranks 8 --pes 1 --colocate all --arg heads_q=8 --arg heads_kv=1 --arg seq_kv=256 --arg pass=kv --arg layout=zigzag");
	printf("  decode over R ranks (heads 8/1, 1024 keys per rank): pass=kv, pass=q chain, pass=q tree (us)\n");
	for (int i = 0; i < 4; i++) {
		snprintf(a, sizeof(a), "ring_attention --ranks %u --pes 1 --colocate all --arg heads_q=8 --arg heads_kv=1 --arg seq_kv=1024 --arg pass=kv --arg seq_q=1",
			 ranks[i]);
		snprintf(b, sizeof(b), "ring_attention --ranks %u --pes 1 --colocate all --arg heads_q=8 --arg heads_kv=1 --arg seq_kv=1024 --arg pass=q --arg merge=chain",
			 ranks[i]);
		snprintf(c, sizeof(c), "ring_attention --ranks %u --pes 1 --colocate all --arg heads_q=8 --arg heads_kv=1 --arg seq_kv=1024 --arg pass=q",
			 ranks[i]);
		printf("  R=%-3u %10.2f %10.2f %10.2f\n", ranks[i], latency_us(a), latency_us(b),
		       latency_us(c));
	}
}

/* Llama-3-70B decode with one KV head per PE (heads_kv = P, G = 8): the
 * work per PE is constant, so latency stays flat until the PEs together
 * outrun the rank's HBM. */
static void pe_scaling(void)
{
	static const unsigned pes[] = { 8, 16, 32, 48, 56, 64 };
	static const char *const models[2] = { "shared", "ideal" };
	char args[512];

	printf("PE scaling: gqa_decode_opt2 seq_kv=32768, heads_kv=P, heads_q=8P, 1 rank, --colocate all\n");
	printf("  %4s %-7s %12s %11s %13s\n", "PEs", "hbm", "latency_us", "hbm_bw_util",
	       "dma_read_util");
	for (size_t i = 0; i < sizeof(pes) / sizeof(pes[0]); i++)
		for (int m = 0; m < 2; m++) {
			snprintf(args, sizeof(args),
				 "gqa_decode_opt2 --pes %u --colocate all --arg seq_kv=32768 "
				 "--arg heads_kv=%u --arg heads_q=%u --set hbm.model=%s",
				 pes[i], pes[i], 8 * pes[i], models[m]);
			if (!run(args))
				continue;
			printf("  %4u %-7s %12.3f %11.4f %13.4f\n", pes[i], models[m],
			       field("latency_ps") / 1e6, field("hbm_bw_util"), field("dma_read_util"));
		}
}

/* Wall time of one run, -1 on failure. */
static double wall_of(const char *args)
{
	return run(args) ? field("wall_s") : -1.0;
}

/* Shortest wall time of `reps` runs of `a` and of `b`, alternated so a
 * load change on the shared machine hits both; -1 on a failure. */
static void wall_pair(const char *a, const char *b, int reps, double *wa, double *wb)
{
	*wa = *wb = -1;
	for (int r = 0; r < reps; r++) {
		double x = wall_of(a), y = wall_of(b);

		if (x < 0 || y < 0) {
			*wa = *wb = -1;
			return;
		}
		*wa = *wa < 0 || x < *wa ? x : *wa;
		*wb = *wb < 0 || y < *wb ? y : *wb;
	}
}

/* The memory model must not make runs slow: each ratio <= 1.3 is the goal.
 * Each job and its hbm.model=ideal twin run side by side, 3 times each,
 * alternated; the shortest of each is compared. */
static void hbm_cost(void)
{
	static const char *const jobs[3] = {
		"gqa_decode_opt2 --mode data --arg seq_kv=8192",
		"gqa_decode_opt2 --colocate pe --arg seq_kv=32768",
		"gqa_decode_opt2 --colocate pe --pes 32 --arg heads_kv=32 --arg heads_q=256 "
		"--arg seq_kv=8192",
	};
	static const char *const names[3] = {
		"make run's job (daemon per component)", "decode 32K --colocate pe",
		"decode 8K, 32 PEs, --colocate pe (arbitrated)" };
	char args[512];

	printf("memory model cost: wall time with the default HBM / with hbm.model=ideal\n");
	printf("  (shortest of 3 alternated runs each; 8 PEs cannot saturate the default\n"
	       "   HBM: no memory component, no messages; with 32 PEs the rank's memory\n"
	       "   component arbitrates every transfer)\n");
	for (int j = 0; j < 3; j++) {
		double shared, ideal;

		snprintf(args, sizeof(args), "%s --set hbm.model=ideal", jobs[j]);
		wall_pair(jobs[j], args, 3, &shared, &ideal);
		if (shared > 0 && ideal > 0)
			printf("  %-46s %7.3f s / %7.3f s = %.2fx\n", names[j], shared, ideal,
			       shared / ideal);
	}
}

/* CPU seconds (user + system) the run of `args` took, the launcher and its
 * daemons (every child is waited for); -1 on a failure. Less sensitive
 * than wall time to a loaded machine. */
static double cpu_of(const char *args)
{
	struct rusage a, b;

	getrusage(RUSAGE_CHILDREN, &a);
	if (!run(args))
		return -1.0;
	getrusage(RUSAGE_CHILDREN, &b);
	return (double)(b.ru_utime.tv_sec - a.ru_utime.tv_sec + b.ru_stime.tv_sec - a.ru_stime.tv_sec) +
	       (double)(b.ru_utime.tv_usec - a.ru_utime.tv_usec + b.ru_stime.tv_usec -
			a.ru_stime.tv_usec) / 1e6;
}

/* What carrying the critical path costs (ADR 0030): each job with
 * run.critical_path=1 (the default) and =0, 5 alternated runs each, the
 * shortest wall and CPU time compared. With a daemon per component every
 * message is packed with its path; with --colocate all every in-process
 * copy carries it; with the trace on every send also writes a segment
 * record. */
static void path_cost(void)
{
	static const char *const jobs[4] = {
		"gqa_decode_opt2 --arg seq_kv=8192",
		"gqa_decode_opt2 --colocate all --arg seq_kv=32768",
		"gqa_decode_opt2 --colocate pe --arg seq_kv=32768",
		"ring_attention --ranks 4 --pes 2 --colocate rank --arg heads_q=8 --arg heads_kv=2 "
		"--arg seq_kv=1024",
	};
	static const char *const names[4] = {
		"make run's job, timing (daemon per component)", "decode 32K --colocate all",
		"decode 32K --colocate pe", "ring 4 x 2 PEs --colocate rank" };
	char args[512];

	printf("critical-path cost: with paths / without (run.critical_path=0), trace on\n");
	printf("  (shortest of 5 alternated runs each: wall time, then CPU time of the\n"
	       "   launcher and its daemons)\n");
	for (int j = 0; j < 4; j++) {
		double won = -1, woff = -1, con = -1, coff = -1;

		snprintf(args, sizeof(args), "%s --set run.critical_path=0", jobs[j]);
		for (int r = 0; r < 5; r++) {
			double c1 = cpu_of(jobs[j]), w1 = field("wall_s");
			double c2 = cpu_of(args), w2 = field("wall_s");

			if (c1 < 0 || c2 < 0)
				break;
			won = won < 0 || w1 < won ? w1 : won;
			woff = woff < 0 || w2 < woff ? w2 : woff;
			con = con < 0 || c1 < con ? c1 : con;
			coff = coff < 0 || c2 < coff ? c2 : coff;
		}
		if (won > 0 && woff > 0 && con > 0 && coff > 0)
			printf("  %-46s wall %6.3f / %6.3f s = %.3fx   CPU %6.3f / %6.3f s = %.3fx\n",
			       names[j], won, woff, won / woff, con, coff, con / coff);
	}
}

/* Every section by default; `attention_bench NAME...` runs only those. */
int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} sections[] = {
		{ "decode_utilisation", decode_utilisation }, { "ring_hidden", ring_hidden },
		{ "long_context", long_context },             { "wall_times", wall_times },
		{ "real_shapes", real_shapes },               { "pe_scaling", pe_scaling },
		{ "hbm_cost", hbm_cost },                     { "path_cost", path_cost },
	};
	char cmd_rm[128];

	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
		bool want = argc < 2;

		for (int a = 1; a < argc; a++)
			want = want || strcmp(argv[a], sections[i].name) == 0;
		if (want)
			sections[i].fn();
	}
	snprintf(cmd_rm, sizeof(cmd_rm), "rm -rf %s", out_dir());
	return system(cmd_rm) == 0 ? 0 : 1;
}
