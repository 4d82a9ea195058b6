/* llama_bench.c — the Llama-3-70B decoder layer's simulator cost (`make
 * bench`, issue 23), embedded (--colocate all --transport inproc), timing
 * mode, untraced:
 *   1. wall time of one decode layer at TP = 8, batch 8, 8K context,
 *      against the 60 s target (as a ratio);
 *   2. how wall time grows with batch x context: four points from 8K to
 *      256K tokens of context in all, and the exponent of a least-squares
 *      fit of log wall against log (batch x context) (target <= 1.1),
 *      measured in this one run.
 * Spawns the binary at $KB_BIN; prints figures, asserts nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static const char *out_dir(void)
{
	static char dir[64];

	if (!dir[0])
		snprintf(dir, sizeof(dir), "/tmp/kb-llama-bench-%ld", (long)getpid());
	return dir;
}

/* The first "key": number of this bench's run (bench.h). */
static double field(const char *key)
{
	return bench_summary_first(out_dir(), key);
}

/* One decode layer; its wall time in seconds (the whole process), or -1. */
static double layer(unsigned tp, unsigned batch, unsigned seq)
{
	const char *bin = getenv("KB_BIN");
	char cmd[1024];
	double t0;

	snprintf(cmd, sizeof(cmd),
		 "rm -rf %s && %s run llama_decode_step --ranks %u --pes 8 --arg batch=%u "
		 "--arg seq_kv=%u --trace off --colocate all --transport inproc --out %s --quiet",
		 out_dir(), bin ? bin : "build/bin/kernbench", tp, batch, seq, out_dir());
	t0 = bench_now_s();
	if (system(cmd) != 0) {
		fprintf(stderr, "llama_bench: failed: %s\n", cmd);
		return -1;
	}
	return bench_now_s() - t0;
}

int main(void)
{
	static const unsigned pts[4][2] = { { 1, 8192 }, { 4, 8192 }, { 8, 16384 }, { 8, 32768 } };
	double x[4], y[4], sx = 0, sy = 0, sxx = 0, sxy = 0, w, slope;
	char cmd[128];

	w = layer(8, 8, 8192);
	printf("llama-3-70b decode layer, TP=8 x 8 PEs, batch 8, 8K context, timing, embedded:\n"
	       "  wall %.2f s (target 60 s: %.3f of it), simulated %.3f us, %.0f messages\n", w,
	       w / 60.0, field("latency_ps") / 1e6, field("messages"));
	printf("wall time against batch x context (TP=8):\n");
	for (int i = 0; i < 4; i++) {
		w = layer(8, pts[i][0], pts[i][1]);
		x[i] = log((double)pts[i][0] * pts[i][1]);
		y[i] = log(w > 0 ? w : 1e-9);
		printf("  batch %2u x %6u = %7u  wall %7.2f s  simulated %9.3f us\n", pts[i][0],
		       pts[i][1], pts[i][0] * pts[i][1], w, field("latency_ps") / 1e6);
		fflush(stdout);
	}
	for (int i = 0; i < 4; i++) {
		sx += x[i], sy += y[i], sxx += x[i] * x[i], sxy += x[i] * y[i];
	}
	slope = (4 * sxy - sx * sy) / (4 * sxx - sx * sx);
	printf("  exponent of wall in batch x context: %.3f (target <= 1.1: %.3f of it)\n", slope,
	       slope / 1.1);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", out_dir());
	return system(cmd) == 0 ? 0 : 1;
}
