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
 * 5. Traced / untraced CPU and wall time for json.gz and perfetto on
 *    embedded decode 32K and embedded traffic (16 components, 200 000
 *    messages). Target <= 1.5. (bench/trace_bench.c has every format and
 *    a run over ipc.)
 * Last, every target side by side with its goal. Figures are printed,
 * never asserted. Needs KB_BIN and KB_SYSTEMC_BIN (set by `make bench`);
 * KB_BENCH_TMP picks the folder the runs write in (default /tmp: part
 * files are created and removed by the hundred per traced run, which some
 * file systems make costly; see docs/metrics.md). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define REPEATS 3
#define MAX_TARGETS 16

static const char *bin;
static char out[400];

/* The targets as measured, printed together at the end. */
struct target {
	char what[96];
	double value, goal;
	const char *op; /* "<=", "<" or ">=": how value must compare with goal */
	const char *unit;
};

static struct target targets[MAX_TARGETS];
static int n_targets;

static void target(const char *what, double value, const char *op, double goal, const char *unit)
{
	if (n_targets < MAX_TARGETS)
		targets[n_targets++] = (struct target){ .value = value, .goal = goal, .op = op,
							.unit = unit };
	snprintf(targets[n_targets - 1].what, sizeof(targets[0].what), "%s", what);
}

/* Best CPU seconds of REPEATS runs of `cmd` (best wall time into *wall
 * when asked); -1 if one failed. */
static double best_cpu_wall(const char *cmd, double *wall)
{
	double best = -1, best_wall = -1;

	for (int i = 0; i < REPEATS; i++) {
		double c0 = bench_children_cpu_s(), t0 = bench_now_s(), dc, dt;

		if (system(cmd) != 0) {
			fprintf(stderr, "lean_bench: `%s` failed\n", cmd);
			return -1;
		}
		dt = bench_now_s() - t0;
		dc = bench_children_cpu_s() - c0;
		best = best < 0 || dc < best ? dc : best;
		best_wall = best_wall < 0 || dt < best_wall ? dt : best_wall;
	}
	if (wall)
		*wall = best_wall;
	return best;
}

static double best_cpu(const char *cmd)
{
	return best_cpu_wall(cmd, NULL);
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
	target("embedded decode 32K, CPU per message (whole run)", c32 / m32 * 1e6, "<=", 1,
	       "us");
	target("embedded decode 32K, CPU per message (marginal)", (c32 - c1) / (m32 - m1) * 1e6,
	       "<=", 1, "us");
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
	target("embedded traffic / SystemC, messages per CPU second",
	       (delivered / kb_cpu) / ((double)messages / sc_cpu), ">=", 2, "x");
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
	target("make run: input generation, share of CPU", 100.0 * (seeded - read_back) / seeded,
	       "<", 20, "%");
	return 0;
}

/* Traced / untraced, CPU and wall, for the two formats the issue names. */
static int trace_cost(void)
{
	static const struct {
		const char *what, *args;
	} cases[] = {
		{ "embedded decode 32K", "gqa_decode_opt2 --arg seq_kv=32768 --colocate all "
					 "--transport inproc" },
		{ "embedded traffic", "traffic --colocate all --transport inproc --arg components=16 "
				      "--arg messages=200000" },
	};
	static const char *const formats[] = { "json.gz", "perfetto" };
	char cmd[2048], dir[600], what[96];
	int failed = 0;

	snprintf(dir, sizeof(dir), "%s/trace", out);
	printf("\ntraced / untraced, CPU [wall] (best of %d; target <= 1.5)\n", REPEATS);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		double base_wall, base;

		snprintf(cmd, sizeof(cmd), "%s run %s --trace off --quiet --out %s", bin,
			 cases[c].args, dir);
		base = best_cpu_wall(cmd, &base_wall);
		if (base <= 0) {
			failed = 1;
			continue;
		}
		printf("  %-20s untraced %.3f s CPU [%.3f s]", cases[c].what, base, base_wall);
		for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
			double wall, cpu;

			snprintf(cmd, sizeof(cmd), "%s run %s --trace-format %s --quiet --out %s", bin,
				 cases[c].args, formats[f], dir);
			cpu = best_cpu_wall(cmd, &wall);
			if (cpu < 0) {
				failed = 1;
				continue;
			}
			printf(", %s %.2fx [%.2fx]", formats[f], cpu / base, wall / base_wall);
			snprintf(what, sizeof(what), "%s, %s traced / untraced CPU", cases[c].what,
				 formats[f]);
			target(what, cpu / base, "<=", 1.5, "x");
		}
		printf("\n");
	}
	return failed;
}

static void print_targets(void)
{
	printf("\nissue 24 targets, measured | goal\n");
	for (int i = 0; i < n_targets; i++) {
		const struct target *t = &targets[i];
		bool met = !strcmp(t->op, "<=") ? t->value <= t->goal
			 : !strcmp(t->op, "<") ? t->value < t->goal : t->value >= t->goal;

		printf("  %-58s %8.2f %-2s | %-2s %5.2f %-2s %s\n", t->what, t->value, t->unit,
		       t->op, t->goal, t->unit, met ? "met" : "NOT met");
	}
}

int main(void)
{
	char rm[640];
	int failed;

	bin = getenv("KB_BIN");
	if (!bin) {
		fprintf(stderr, "lean_bench: set KB_BIN to the kernbench binary\n");
		return 1;
	}
	snprintf(out, sizeof(out), "%s/kb-lean-bench-XXXXXX",
		 getenv("KB_BENCH_TMP") ? getenv("KB_BENCH_TMP") : "/tmp");
	if (!mkdtemp(out)) {
		perror("lean_bench: mkdtemp");
		return 1;
	}
	failed = per_message();
	failed |= versus_systemc();
	failed |= oplog_cost();
	failed |= input_generation();
	failed |= trace_cost();
	print_targets();
	snprintf(rm, sizeof(rm), "rm -rf %s", out);
	if (system(rm) != 0)
		fprintf(stderr, "lean_bench: could not remove %s\n", out);
	return failed;
}
