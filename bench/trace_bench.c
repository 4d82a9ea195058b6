/* trace_bench.c — what tracing costs, measured side by side.
 *
 * Each case runs kernbench with --trace off and traced in each format
 * (json, json.gz, perfetto), best of three wall times, and prints traced ÷
 * untraced (issue target: <= 1.5 for embedded decode 32K and traffic).
 * Figures are printed, never asserted. Needs KB_BIN (set by `make bench`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Best wall time of REPEATS runs, or a negative value if a run failed. */
static double best_run(const char *bin, const char *args, const char *trace, const char *out)
{
	char cmd[1024];
	double best = -1;

	snprintf(cmd, sizeof(cmd), "%s run %s --quiet --out %s %s", bin, args, out, trace);
	for (int i = 0; i < REPEATS; i++) {
		double t0 = now_s(), dt;
		int rc = system(cmd);

		if (rc != 0) {
			fprintf(stderr, "trace_bench: `%s` failed (status %d)\n", cmd, rc);
			return -1;
		}
		dt = now_s() - t0;
		if (best < 0 || dt < best)
			best = dt;
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
	printf("tracing cost: traced wall time / untraced (best of %d; target <= 1.5)\n", REPEATS);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		double base = best_run(bin, cases[c].args, traces[0], out);

		printf("  %s\n    untraced %.3f s", cases[c].what, base);
		for (size_t t = 1; base > 0 && t < sizeof(traces) / sizeof(traces[0]); t++) {
			double traced = best_run(bin, cases[c].args, traces[t], out);

			if (traced < 0)
				failed = 1;
			else
				printf(", %s %.2fx", traces[t] + 15, traced / base);
		}
		failed |= base < 0;
		printf("\n");
	}
	snprintf(rm, sizeof(rm), "rm -rf %s", out);
	if (system(rm) != 0)
		fprintf(stderr, "trace_bench: could not remove %s\n", out);
	return failed;
}
