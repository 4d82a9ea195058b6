/* coll_bench.c — the collectives against the α–β model (`make bench`):
 * every op and algorithm of tl.h's collectives for groups of 2, 3, 4 and 8
 * ranks (8 PEs each, span=split, f32) from 1 KiB to 16 MiB, and a 256 MiB
 * all-reduce, on the default ring topology; the tree all-reduce on a
 * switch; TL_COLL_AUTO against the fastest of the three. Each line is
 * the simulated time in cycles next to the formula of
 * tests/integration/coll_model.h (docs/kernels.md, "Collectives: timing"),
 * where it has one, and the textbook Hockney time, as ratios. Spawns the
 * binary at $KB_BIN; prints figures, asserts nothing. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#include "../tests/integration/coll_model.h"

static const char *out_dir(void)
{
	static char dir[64];

	if (!dir[0])
		snprintf(dir, sizeof(dir), "/tmp/kb-coll-bench-%ld", (long)getpid());
	return dir;
}

/* The first "key": number of this bench's run (bench.h). */
static double field(const char *key)
{
	return bench_summary_first(out_dir(), key);
}

/* One collective, timed: its end in cycles (1 GHz default clock: the
 * summary's ps / 1000), or -1. */
static double timed(const char *topo, const char *op, const char *algo, unsigned R, unsigned P,
		    unsigned long long n)
{
	const char *bin = getenv("KB_BIN");
	char cmd[1024];

	snprintf(cmd, sizeof(cmd),
		 "rm -rf %s && %s run collective --ranks %u --pes %u --set links.topology=%s "
		 "--arg op=%s --arg algo=%s --arg n=%llu --arg span=%s --trace off --colocate all "
		 "--transport inproc --out %s --quiet",
		 out_dir(), bin ? bin : "build/bin/kernbench", R, P, topo, op, algo, n,
		 P > 1 ? "split" : "ranks", out_dir());
	if (system(cmd) != 0) {
		fprintf(stderr, "coll_bench: failed: %s\n", cmd);
		return -1;
	}
	return field("collective_end_ps") / 1000.0;
}

static const char *const ops[] = { "all_reduce", "reduce_scatter", "all_gather", "broadcast" };
static const char *const algos[] = { "ring", "bidir", "tree" };

static void size_name(unsigned long long bytes, char *out, size_t cap)
{
	if (bytes >= 1u << 20)
		snprintf(out, cap, "%llu MiB", bytes >> 20);
	else
		snprintf(out, cap, "%llu KiB", bytes >> 10);
}

/* One line: simulated, the model's formula (ring, bidir; tree all-reduce
 * on a switch) and Hockney. */
static void line(const char *topo, int o, int a, unsigned R, unsigned long long bytes)
{
	bool sw = !strcmp(topo, "switch");
	struct cm_cfg c = cm_defaults(sw, 0);
	unsigned long long n = bytes / 4;
	double sim = timed(topo, ops[o], algos[a], R, 8, n), f = -1;
	double h = cm_hockney(&c, (enum cm_op)o, (enum cm_algo)(a + 1), R, (double)bytes);
	double bound = cm_bound(&c, (enum cm_op)o, R, (double)bytes);
	char size[32], fs[32] = "-", fr[32] = "-";

	if (a < 2)
		f = cm_ring(&c, (enum cm_op)o, a == 1, R, n, 4, 8);
	else if (o == CM_AR && sw && !(R & (R - 1)))
		f = cm_tree_ar(&c, R, n, 4, 8);
	if (f > 0) {
		snprintf(fs, sizeof(fs), "%.0f", f);
		snprintf(fr, sizeof(fr), "%.3f", sim / f);
	}
	size_name(bytes, size, sizeof(size));
	printf("  %-6s %-14s %-5s R=%-2u %8s  sim %10.0f  formula %10s (%6s)  hockney %10.0f "
	       "(%.3f)  bound %s\n", topo, ops[o], algos[a], R, size, sim, fs, fr, h, sim / h,
	       sim >= bound ? "ok" : "BEATEN");
	fflush(stdout);
}

/* TL_COLL_AUTO's time against the fastest of the three, R = 8. */
static void auto_line(const char *topo, int o, unsigned long long bytes)
{
	double best = -1, t;
	const char *who = "?";
	char size[32];

	for (int a = 0; a < 3; a++) {
		t = timed(topo, ops[o], algos[a], 8, 8, bytes / 4);
		if (best < 0 || t < best) {
			best = t;
			who = algos[a];
		}
	}
	t = timed(topo, ops[o], "auto", 8, 8, bytes / 4);
	size_name(bytes, size, sizeof(size));
	printf("  %-6s %-14s R=8 %8s  auto %10.0f  fastest %-5s %10.0f  (%.3f)\n", topo, ops[o],
	       size, t, who, best, t / best);
	fflush(stdout);
}

int main(void)
{
	static const unsigned groups[] = { 2, 3, 4, 8 };
	static const unsigned long long sizes[] = { 1u << 10, 64u << 10, 1u << 20, 16u << 20 };
	struct cm_cfg c = cm_defaults(false, 0);
	char cmd[128];

	printf("collectives vs the alpha-beta model: cycles, 8 PEs per rank (span=split), f32;\n"
	       "alpha = %.0f cycles, beta = %.0f bytes/cycle (links.ipcq_cycles, "
	       "links.ipcq_bytes_per_cycle)\n", c.alpha, c.beta);
	for (int o = 0; o < 4; o++)
		for (int a = 0; a < 3; a++)
			for (size_t g = 0; g < 4; g++)
				for (size_t s = 0; s < 4; s++)
					line("ring", o, a, groups[g], sizes[s]);
	for (int a = 0; a < 3; a++)
		line("ring", 0, a, 8, 256ull << 20);
	for (unsigned R = 2; R <= 16; R *= 2)
		for (size_t s = 0; s < 3; s++)
			line("switch", 0, 2, R, sizes[s]);
	printf("TL_COLL_AUTO against the fastest algorithm:\n");
	for (int t = 0; t < 2; t++)
		for (int o = 0; o < 4; o++)
			for (size_t s = 0; s < 4; s += 1)
				auto_line(t ? "switch" : "ring", o, sizes[s]);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", out_dir());
	return system(cmd) == 0 ? 0 : 1;
}
