/* ff_bench.c — fast-forward (--fast-forward, ADR 0059) side by side with
 * the full run (`make bench`): for each configuration, the wall time of
 * the full run over the fast-forwarded one, the latency error against the
 * full run and the bound the run reported, with the same binary in one
 * bench run. Decode 128K (Llama-3-70B, 1 rank x 8 PEs) in exact and auto
 * mode, a single-rank prefill and a ring prefill (pass=kv, 8 x 8); with
 * FF_BENCH_BIG=1 also the ring prefill of 24K tokens at 64 ranks x 8 PEs
 * (minutes per run). Prints figures, asserts nothing. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define EMBEDDED "--colocate all --transport inproc --trace off --op-log off"

static const char *out_dir(int which)
{
	static char dir[2][64];

	if (!dir[which][0])
		snprintf(dir[which], sizeof(dir[which]), "/tmp/kb-ff-bench-%ld-%d", (long)getpid(),
			 which);
	return dir[which];
}

/* Runs `KB_BIN run ARGS --fast-forward MODE`; its wall time, or -1. */
static double run(const char *args, const char *mode, int which)
{
	const char *bin = getenv("KB_BIN");
	char cmd[2048];
	double t0;

	snprintf(cmd, sizeof(cmd), "rm -rf %s && %s run %s " EMBEDDED " --fast-forward %s --out %s --quiet",
		 out_dir(which), bin ? bin : "build/bin/kernbench", args, mode, out_dir(which));
	t0 = bench_now_s();
	if (system(cmd) != 0) {
		fprintf(stderr, "ff_bench: failed: %s\n", cmd);
		return -1;
	}
	return bench_now_s() - t0;
}

static void row(const char *name, const char *args, const char *mode)
{
	double full = run(args, "off", 0), ff = run(args, mode, 1);
	double lf, la, bound, skipped, simulated;

	if (full < 0 || ff < 0)
		return;
	lf = bench_summary_first(out_dir(0), "latency_ps");
	la = bench_summary_first(out_dir(1), "latency_ps");
	bound = bench_summary_first(out_dir(1), "error_bound_ps");
	skipped = bench_summary_first(out_dir(1), "iterations_skipped");
	simulated = bench_summary_first(out_dir(1), "iterations_simulated");
	printf("  %-34s %-5s full %8.2f s  ff %8.2f s  full/ff %5.2fx  skipped %5.1f%%  "
	       "error %.4f%%  bound %.4f%%\n", name, mode, full, ff, full / ff,
	       skipped + simulated > 0 ? 100.0 * skipped / (skipped + simulated) : 0.0,
	       100.0 * fabs(la - lf) / lf, 100.0 * bound / lf);
}

int main(void)
{
	char cmd[256];

	printf("fast-forward: full run / fast-forwarded run, wall time; latency error and bound "
	       "against the full run\n");
	row("decode 128K (gqa_decode_opt2)", "gqa_decode_opt2 --arg seq_kv=131072", "exact");
	row("decode 128K (gqa_decode_opt2)", "gqa_decode_opt2 --arg seq_kv=131072", "auto");
	row("decode 128K tile 256", "gqa_decode_opt2 --arg seq_kv=131072 --arg tile=256", "exact");
	row("decode 128K tile 256", "gqa_decode_opt2 --arg seq_kv=131072 --arg tile=256", "auto");
	row("prefill 4K (gqa_prefill, 1 x 8)", "gqa_prefill --arg seq_kv=4096", "auto");
	row("ring prefill 16K (8 x 8, pass=kv)",
	    "ring_attention --ranks 8 --pes 8 --arg seq_kv=2048", "auto");
	if (getenv("FF_BENCH_BIG"))
		row("ring prefill 24K (64 x 8, pass=kv)",
		    "ring_attention --ranks 64 --pes 8 --arg seq_kv=384", "auto");
	for (int i = 0; i < 2; i++) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", out_dir(i));
		if (system(cmd) != 0)
			return 1;
	}
	return 0;
}
