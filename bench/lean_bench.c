/* lean_bench.c — what the embedded engine costs per message, and what its
 * outputs and inputs add, side by side in one run against one binary
 * (issue 24). All figures are CPU time (user + system of the launcher and
 * its daemons, from RUSAGE_CHILDREN), best of REPEATS: on a shared machine
 * wall time moves with other load far more.
 *
 * 1. Embedded decode 32K (gqa_decode_opt2, --colocate all --transport
 *    inproc, trace off): CPU per message, whole run and marginal (the CPU
 *    of 32K minus that of 1K, over the messages between them: start-up,
 *    file creation and the merge's fixed part left out). Target <= 1 us.
 * 2. Embedded traffic against SystemC 2.3 (16 components, 4 M messages, one
 *    token each, trace off; bench/systemc_traffic.cpp): messages per CPU
 *    second of each and the ratio. Target >= 2.
 * 3. Op log on / off on decode 32K (CPU ratio).
 * 4. make run's job (gqa_decode_opt2 --mode data --arg seq_kv=8192): CPU
 *    with seeded inputs and with the same inputs read back from the .npy
 *    files it wrote (--inputs): the difference is what generating them
 *    costs, printed as a share of the run. Target < 20 %.
 * Traced / untraced per format is bench/trace_bench.c. Figures are printed,
 * never asserted. Needs KB_BIN and KB_SYSTEMC_BIN (set by `make bench`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define REPEATS 3

static const char *bin;
static char out[] = "/tmp/kb-lean-bench-XXXXXX";

/* Best CPU seconds of REPEATS runs of `cmd`; -1 if one failed. */
static double best_cpu(const char *cmd)
{
	double best = -1;

	for (int i = 0; i < REPEATS; i++) {
		double c0 = bench_children_cpu_s(), dc;

		if (system(cmd) != 0) {
			fprintf(stderr, "lean_bench: `%s` failed\n", cmd);
			return -1;
		}
		dc = bench_children_cpu_s() - c0;
		best = best < 0 || dc < best ? dc : best;
	}
	return best;
}

/* Best CPU of `kernbench run ARGS`, and its summary's messages. */
static double run_cpu(const char *args, const char *dir, double *messages)
{
	char cmd[2048];
	double cpu;

	snprintf(cmd, sizeof(cmd), "%s run %s --quiet --out %s", bin, args, dir);
	cpu = best_cpu(cmd);
	if (messages)
		*messages = bench_summary_number(dir, "messages");
	return cpu;
}

static int per_message(void)
{
	static const char *const base = "gqa_decode_opt2 --colocate all --transport inproc "
					"--trace off --arg seq_kv=";
	char args[512], dir[600];
	double m32, m1, c32, c1;

	snprintf(dir, sizeof(dir), "%s/decode", out);
	snprintf(args, sizeof(args), "%s32768", base);
	c32 = run_cpu(args, dir, &m32);
	snprintf(args, sizeof(args), "%s1024", base);
	c1 = run_cpu(args, dir, &m1);
	if (c32 < 0 || c1 < 0 || m32 <= m1)
		return 1;
	printf("embedded decode 32K (gqa_decode_opt2 --colocate all --transport inproc, "
	       "trace off; best of %d)\n", REPEATS);
	printf("  %.0f messages, %.3f s CPU: %.2f us CPU per message (whole run)\n", m32, c32,
	       c32 / m32 * 1e6);
	printf("  marginal over seq_kv=1024 (%.0f messages, %.3f s): %.2f us CPU per message "
	       "(target <= 1)\n", m1, c1, (c32 - c1) / (m32 - m1) * 1e6);
	return 0;
}

static int versus_systemc(void)
{
	const char *sc = getenv("KB_SYSTEMC_BIN");
	char cmd[2048], dir[600], args[512];
	long messages = 4000000;
	double sc_cpu, kb_cpu, delivered;

	snprintf(cmd, sizeof(cmd),
		 "SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 %s 16 %ld 1 >/dev/null",
		 sc ? sc : "build/bench/systemc_traffic", messages);
	sc_cpu = best_cpu(cmd);
	snprintf(dir, sizeof(dir), "%s/traffic", out);
	snprintf(args, sizeof(args), "traffic --colocate all --transport inproc --trace off "
		 "--arg components=16 --arg messages=%ld --arg tokens=1", messages);
	kb_cpu = run_cpu(args, dir, &delivered);
	if (sc_cpu <= 0 || kb_cpu <= 0)
		return 1;
	printf("\nembedded traffic vs SystemC 2.3 (16 components, %ld messages, 1 token each, "
	       "trace off; CPU, best of %d)\n", messages, REPEATS);
	printf("  SystemC SC_THREAD     %12.0f messages per CPU second\n", (double)messages / sc_cpu);
	printf("  kernbench embedded    %12.0f messages per CPU second (whole run)\n",
	       delivered / kb_cpu);
	printf("  ratio                 %12.2f  (embedded / SystemC; target >= 2)\n",
	       (delivered / kb_cpu) / ((double)messages / sc_cpu));
	return 0;
}

static int oplog_cost(void)
{
	static const char *const args = "gqa_decode_opt2 --colocate all --transport inproc "
					"--trace off --arg seq_kv=32768 --op-log ";
	char a[512], dir[600];
	double on, off;

	snprintf(dir, sizeof(dir), "%s/oplog", out);
	snprintf(a, sizeof(a), "%son", args);
	on = run_cpu(a, dir, NULL);
	snprintf(a, sizeof(a), "%soff", args);
	off = run_cpu(a, dir, NULL);
	if (on < 0 || off <= 0)
		return 1;
	printf("\nop log on / off, embedded decode 32K: %.3f s / %.3f s CPU = %.2fx\n", on, off,
	       on / off);
	return 0;
}

static int input_generation(void)
{
	static const char *const job = "gqa_decode_opt2 --mode data --arg seq_kv=8192";
	char a[1400], gen_dir[600], read_dir[600];
	double seeded, read_back;

	snprintf(gen_dir, sizeof(gen_dir), "%s/run", out);
	snprintf(read_dir, sizeof(read_dir), "%s/run-inputs", out);
	seeded = run_cpu(job, gen_dir, NULL);
	snprintf(a, sizeof(a), "%s --inputs %s", job, gen_dir); /* its q/k/v.npy */
	read_back = run_cpu(a, read_dir, NULL);
	if (seeded <= 0 || read_back < 0)
		return 1;
	printf("\nmake run's job (%s, daemon per component): %.3f s CPU seeded, %.3f s reading the "
	       "same inputs back\n  generating the inputs: %.1f %% of the run's CPU (target < 20 %%)\n",
	       job, seeded, read_back, 100.0 * (seeded - read_back) / seeded);
	return 0;
}

int main(void)
{
	char rm[96];
	int failed;

	bin = getenv("KB_BIN");
	if (!bin) {
		fprintf(stderr, "lean_bench: set KB_BIN to the kernbench binary\n");
		return 1;
	}
	if (!mkdtemp(out)) {
		perror("lean_bench: mkdtemp");
		return 1;
	}
	failed = per_message();
	failed |= versus_systemc();
	failed |= oplog_cost();
	failed |= input_generation();
	snprintf(rm, sizeof(rm), "rm -rf %s", out);
	if (system(rm) != 0)
		fprintf(stderr, "lean_bench: could not remove %s\n", out);
	return failed;
}
