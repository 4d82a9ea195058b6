/* sweep_bench.c — issue 22's sweep figures (`make bench`):
 *   1. 64 points of Llama-3-70B decode at seq_kv 8K (gqa_decode_opt2,
 *      1 rank x 8 PEs, timing; 8 DMA bandwidths x 8 DMA setups) as one
 *      `kernbench sweep` (--jobs = the cores here; results.csv and the
 *      plot included, and again with --plot off), divided by the same 64
 *      points run one after another with `kernbench run ... --colocate all
 *      --trace off` (today's CLI, one daemon process each), in rounds whose
 *      order rotates; the median of the ratios (target: <= 0.6);
 *   2. the wall time of running the finished sweep again (resume: nothing
 *      runs, results.csv is rewritten only if it changed; target < 2 s).
 * Spawns the binary at $KB_BIN; prints figures, asserts nothing. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define ROUNDS 5
#define BANDWIDTHS "16,24,32,40,48,56,64,72"
#define SETUPS "8:64:8"

static const char *bin(void)
{
	return getenv("KB_BIN") ? getenv("KB_BIN") : "build/bin/kernbench";
}

static bool sh(const char *cmd)
{
	if (system(cmd) == 0)
		return true;
	fprintf(stderr, "sweep_bench: failed: %s\n", cmd);
	return false;
}

/* The 64 points one after another, each its own `kernbench run`. */
static double one_by_one(const char *dir)
{
	static const unsigned bw[] = { 16, 24, 32, 40, 48, 56, 64, 72 };
	char cmd[1024];
	double t0 = bench_now_s();

	for (unsigned b = 0; b < 8; b++)
		for (unsigned s = 8; s <= 64; s += 8) {
			snprintf(cmd, sizeof(cmd), "%s run gqa_decode_opt2 --arg seq_kv=8192 --set "
				 "dma.bytes_per_cycle=%u --set dma.setup_cycles=%u --colocate all "
				 "--trace off --quiet --out %s/one/%u-%u", bin(), bw[b], s, dir, bw[b], s);
			if (!sh(cmd))
				return -1;
		}
	return bench_now_s() - t0;
}

static double swept(const char *dir, const char *name, const char *plot)
{
	char cmd[1024];
	double t0 = bench_now_s();

	snprintf(cmd, sizeof(cmd), "%s sweep gqa_decode_opt2 --arg seq_kv=8192 --set "
		 "dma.bytes_per_cycle=" BANDWIDTHS " --set dma.setup_cycles=" SETUPS
		 " --out %s/%s --plot %s --quiet", bin(), dir, name, plot);
	return sh(cmd) ? bench_now_s() - t0 : -1;
}

int main(void)
{
	char dir[64], cmd[256];
	double ratio[ROUNDS], bare[ROUNDS], resume[3], t[3];
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	snprintf(dir, sizeof(dir), "/tmp/kb-sweep-bench-%ld", (long)getpid());
	printf("sweep: 64 points of gqa_decode_opt2 seq_kv 8K (1 rank x 8 PEs), %ld cores\n", cores);
	for (int i = 0; i < ROUNDS; i++) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s", dir, dir);
		if (!sh(cmd))
			return 1;
		/* rotate which goes first: a loaded machine drifts */
		for (int k = 0; k < 3; k++) {
			int which = (i + k) % 3;

			t[which] = which == 0 ? one_by_one(dir)
				 : which == 1 ? swept(dir, "sweep", "on")
					      : swept(dir, "sweep-noplot", "off");
			if (t[which] < 0)
				return 1;
		}
		ratio[i] = t[1] / t[0];
		bare[i] = t[2] / t[0];
		printf("  round %d: one by one %.2f s, sweep %.2f s (%.3f), --plot off %.2f s (%.3f)\n",
		       i + 1, t[0], t[1], ratio[i], t[2], bare[i]);
	}
	for (int i = 0; i < 3; i++)
		resume[i] = swept(dir, "sweep", "on");
	printf("  sweep / one by one (median of %d rounds): %.3f   (target <= 0.6)\n", ROUNDS,
	       bench_median(ratio, ROUNDS));
	printf("  ... with --plot off: %.3f\n", bench_median(bare, ROUNDS));
	printf("  resuming the finished sweep (median of 3): %.3f s   (target < 2 s)\n",
	       bench_median(resume, 3));
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	sh(cmd);
	return 0;
}
