/* trace_bench.c — what tracing costs, measured side by side.
 *
 * Each case runs kernbench with --trace off and traced in each format
 * (json, json.gz, perfetto), best of three, and prints traced ÷ untraced
 * wall time and, in brackets, traced ÷ untraced CPU time (user + system of
 * the run's processes: less sensitive to other load on a shared machine).
 * Issue target: <= 1.5 for embedded decode 32K and traffic.
 * Figures are printed, never asserted. Needs KB_BIN (set by `make bench`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define REPEATS 3

struct bench_case {
	const char *what;
	const char *args;
};

static const struct bench_case cases[] = {
	{ "embedded decode 32K (gqa_decode_opt2, --colocate all)",
	  "gqa_decode_opt2 --arg seq_kv=32768 --colocate all --transport inproc" },
	{ "traffic over ipc (8 daemons, 20 000 messages)",
	  "traffic --arg components=8 --arg messages=20000" },
	{ "embedded traffic (16 components, 200 000 messages)",
	  "traffic --colocate all --transport inproc --arg components=16 --arg messages=200000" },
};

static const char *const traces[] = { "--trace off", "--trace-format json",
				      "--trace-format json.gz", "--trace-format perfetto" };

/* Best wall time of REPEATS runs (best CPU time into *cpu), or a negative
 * value if a run failed. */
static double best_run(const char *bin, const char *args, const char *trace, const char *out,
		       double *cpu)
{
	char cmd[1024];
	double best = -1;

	*cpu = -1;
	snprintf(cmd, sizeof(cmd), "%s run %s --quiet --out %s %s", bin, args, out, trace);
	for (int i = 0; i < REPEATS; i++) {
		double c0 = bench_children_cpu_s(), t0 = bench_now_s(), dt, dc;
		int rc = system(cmd);

		if (rc != 0) {
			fprintf(stderr, "trace_bench: `%s` failed (status %d)\n", cmd, rc);
			return -1;
		}
		dt = bench_now_s() - t0;
		dc = bench_children_cpu_s() - c0;
		if (best < 0 || dt < best)
			best = dt;
		if (*cpu < 0 || dc < *cpu)
			*cpu = dc;
	}
	return best;
}

int main(void)
{
	const char *bin = getenv("KB_BIN");
	char out[] = "/tmp/kb-trace-bench-XXXXXX", rm[64];
	int failed = 0;

	if (!bin) {
		fprintf(stderr, "trace_bench: set KB_BIN to the kernbench binary\n");
		return 1;
	}
	if (!mkdtemp(out)) {
		perror("trace_bench: mkdtemp");
		return 1;
	}
	printf("tracing cost: traced / untraced wall time [CPU time] (best of %d; target <= 1.5)\n",
	       REPEATS);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		double base_cpu, base = best_run(bin, cases[c].args, traces[0], out, &base_cpu);

		printf("  %s\n    untraced %.3f s [%.3f s CPU]", cases[c].what, base, base_cpu);
		for (size_t t = 1; base > 0 && t < sizeof(traces) / sizeof(traces[0]); t++) {
			double cpu, traced = best_run(bin, cases[c].args, traces[t], out, &cpu);

			if (traced < 0)
				failed = 1;
			else
				printf(", %s %.2fx [%.2fx]", traces[t] + 15, traced / base,
				       base_cpu > 0 ? cpu / base_cpu : 0.0);
		}
		failed |= base < 0;
		printf("\n");
	}
	snprintf(rm, sizeof(rm), "rm -rf %s", out);
	if (system(rm) != 0)
		fprintf(stderr, "trace_bench: could not remove %s\n", out);
	return failed;
}
