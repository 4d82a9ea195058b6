/* sync_bench.c — what the lockstep core costs, measured side by side.
 *
 * 1. Window cost: a bare ZeroMQ lockstep round (a ROUTER coordinator and N
 *    DEALER processes exchanging one small frame each way, nothing else)
 *    against kernbench `traffic` with N daemons over ipc; prints kernbench
 *    µs/window ÷ bare µs/round for N = 5, 10, 40 (target <= 1.5).
 * 2. Embedded speed: `traffic --colocate all --transport inproc` (one
 *    daemon, no windows) delivered messages per second against a bare
 *    binary-heap event loop running the same traffic pattern in this
 *    process (target >= 25%).
 * 3. Embedded against SystemC 2.3: the same traffic (16 components, one
 *    token each, trace off) as SC_THREADs that wait() on an event per
 *    message (bench/systemc_traffic.cpp, built by `make bench`), five runs
 *    of each, alternated; prints the medians and embedded / SystemC
 *    (target >= 1.0).
 * Figures are printed, never asserted. Needs KB_BIN and KB_SYSTEMC_BIN (set
 * by `make bench`). */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "rt/event.h"
#include "rt/rand.h"
#include "bench.h"
#include "bench_zmq.h"

/* ---------------------------------------------------------------- bare round */

static void participant(const char *endpoint, int index)
{
	void *ctx = zmq_ctx_new();

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	bench_bare_peer(ctx, zmq_socket(ctx, ZMQ_DEALER), index, endpoint);
}

/* µs per round of a bare coordinator + n participants over ipc. */
static double bare_round_us(int n, int rounds)
{
	void *ctx = zmq_ctx_new();
	void *router = bench_router(ctx);
	char endpoint[64];
	pid_t pids[64];
	double us;

	snprintf(endpoint, sizeof(endpoint), "ipc:///tmp/kb-bench-%d", (int)getpid());
	zmq_bind(router, endpoint);
	for (int i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			participant(endpoint, i);
	}
	us = bench_bare_rounds(router, 0, n, rounds / 10, rounds);
	for (int i = 0; i < n; i++)
		waitpid(pids[i], NULL, 0);
	zmq_close(router);
	zmq_ctx_term(ctx);
	unlink(endpoint + 6);
	return us;
}

/* ---------------------------------------------------------------- kernbench */

/* Runs traffic; returns windows and the window loop's wall time. */
static int run_traffic(int n, long messages, int tokens, const char *transport,
		       const char *colocate, double *windows, double *loop_s, double *delivered,
		       double *grants)
{
	const char *bin = getenv("KB_BIN");
	char cmd[1024], dir[64];

	snprintf(dir, sizeof(dir), "/tmp/kb-bench-out-%d", (int)getpid());
	snprintf(cmd, sizeof(cmd),
		 "%s run traffic --quiet --trace off --out %s --transport %s --colocate %s "
		 "--arg components=%d --arg messages=%ld --arg tokens=%d",
		 bin ? bin : "build/bin/kernbench", dir, transport, colocate, n, messages, tokens);
	if (system(cmd) != 0)
		return -1;
	*windows = bench_summary_number(dir, "windows");
	*loop_s = bench_summary_number(dir, "windows_wall_s");
	*delivered = bench_summary_number(dir, "messages");
	*grants = bench_summary_number(dir, "grants");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- bare heap */

struct ev {
	uint64_t t;
	uint32_t dst;
	uint32_t seq;
};

static bool ev_less(const struct ev *a, const struct ev *b)
{
	return a->t != b->t ? a->t < b->t : a->seq < b->seq;
}

static void push(struct ev *h, size_t *n, struct ev e)
{
	size_t i = (*n)++;

	while (i && ev_less(&e, &h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = e;
}

static struct ev pop(struct ev *h, size_t *n)
{
	struct ev top = h[0], last = h[--*n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= *n)
			break;
		if (c + 1 < *n && ev_less(&h[c + 1], &h[c]))
			c++;
		if (!ev_less(&h[c], &last))
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n)
		h[i] = last;
	return top;
}

/* Same traffic pattern in a plain heap loop: random destination, random
 * link latency and processing delay, a digest per delivery. */
static double bare_heap_rate(int n, long messages)
{
	struct ev *heap = malloc(sizeof(*heap) * (size_t)(n + 1));
	uint64_t *lat = malloc(sizeof(*lat) * (size_t)n * (size_t)n), rng = 1, digest = 0;
	size_t count = 0;
	uint32_t seq = 0;
	double start;

	for (int i = 0; i < n * n; i++)
		lat[i] = 1000 + rt_splitmix64(&rng) % 4001;
	for (int i = 0; i < n; i++)
		push(heap, &count, (struct ev){ rt_splitmix64(&rng) % 1000, (uint32_t)i, seq++ });
	start = bench_now_s();
	for (long m = 0; m < messages; m++) {
		struct ev e = pop(heap, &count);
		uint32_t dst = (uint32_t)(rt_splitmix64(&rng) % (uint64_t)(n - 1));

		digest = (digest ^ e.t ^ e.dst) * 0x100000001b3ULL;
		dst += dst >= e.dst;
		push(heap, &count, (struct ev){ e.t + lat[e.dst * (uint32_t)n + dst] + rt_splitmix64(&rng) % 501,
						dst, seq++ });
	}
	double rate = (double)messages / (bench_now_s() - start);

	if (digest == 42)
		puts("(digest collision)"); /* keeps the digest live */
	free(heap);
	free(lat);
	return rate;
}

/* The same loop on kernbench's own event queue (rt/event.h: 64-byte
 * events, the full total key), to show what the queue alone costs. */
static double rt_queue_rate(int n, long messages)
{
	struct rt_queue q;
	struct rt_event ev = { 0 };
	uint64_t *lat = malloc(sizeof(*lat) * (size_t)n * (size_t)n), rng = 1, digest = 0;
	uint64_t seq = 0;
	double start;

	rt_queue_init(&q);
	for (int i = 0; i < n * n; i++)
		lat[i] = 1000 + rt_splitmix64(&rng) % 4001;
	for (int i = 0; i < n; i++) {
		ev.key = (struct rt_key){ rt_splitmix64(&rng) % 1000, 0, (uint32_t)i, seq++ };
		ev.dst = (uint32_t)i;
		rt_queue_push(&q, &ev);
	}
	start = bench_now_s();
	for (long m = 0; m < messages; m++) {
		struct rt_event e;
		uint32_t dst = (uint32_t)(rt_splitmix64(&rng) % (uint64_t)(n - 1));

		rt_queue_pop(&q, &e);
		digest = (digest ^ e.key.time_ps ^ e.dst) * 0x100000001b3ULL;
		dst += dst >= e.dst;
		ev.key = (struct rt_key){ e.key.time_ps + lat[e.dst * (uint32_t)n + dst] +
						  rt_splitmix64(&rng) % 501,
					  0, e.dst, seq++ };
		ev.dst = dst;
		rt_queue_push(&q, &ev);
	}
	double rate = (double)messages / (bench_now_s() - start);

	if (digest == 42)
		puts("(digest collision)");
	rt_queue_release(&q);
	free(lat);
	return rate;
}

/* ---------------------------------------------------------------- SystemC */

/* Messages/s of bench/systemc_traffic.cpp; -1 if it did not run. */
static double systemc_rate(int n, long messages, int tokens)
{
	const char *bin = getenv("KB_SYSTEMC_BIN");
	char cmd[1024], line[512];
	double rate = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 %s %d %ld %d",
		 bin ? bin : "build/bench/systemc_traffic", n, messages, tokens);
	p = popen(cmd, "r");
	while (p && fgets(line, sizeof(line), p)) {
		const char *at = strstr(line, " rate=");

		if (at)
			rate = strtod(at + 6, NULL);
	}
	if (p && pclose(p) != 0)
		rate = -1;
	return rate;
}

/* Embedded kernbench and SystemC on the same traffic, alternated so a
 * loaded machine slows both alike; medians of `runs`. */
static int embedded_vs_systemc(int n, long messages, int runs)
{
	double kb[9], sc[9];

	for (int r = 0; r < runs; r++) {
		double windows, loop_s, delivered, grants;

		sc[r] = systemc_rate(n, messages, 1);
		if (sc[r] <= 0 || run_traffic(n, messages, 1, "inproc", "all", &windows, &loop_s,
					      &delivered, &grants))
			return 1;
		kb[r] = delivered / loop_s;
	}
	printf("\nembedded vs SystemC 2.3 (%d components, %ld messages, 1 token each, trace off; "
	       "median of %d alternated runs)\n", n, messages, runs);
	printf("  SystemC SC_THREAD     %12.0f messages/s  (a wait() resume per message)\n",
	       bench_median(sc, runs));
	printf("  kernbench embedded    %12.0f messages/s  (--colocate all --transport inproc)\n",
	       bench_median(kb, runs));
	printf("  ratio                 %12.2f  (embedded / SystemC; target >= 1.0)\n",
	       bench_median(kb, runs) / bench_median(sc, runs));
	return 0;
}

int main(int argc, char **argv)
{
	static const int sizes[] = { 5, 10, 40 };
	/* `sync_bench systemc`: only the embedded-vs-SystemC comparison */
	bool only_systemc = argc > 1 && !strcmp(argv[1], "systemc");

	if (only_systemc)
		return embedded_vs_systemc(16, 2000000, 5);

	printf("window cost over ipc (kernbench traffic vs a bare ZeroMQ lockstep round)\n");
	printf("  %4s  %14s  %18s  %8s  %s\n", "N", "bare us/round", "kernbench us/window", "ratio",
	       "(daemons granted per window: idle ones are left out)");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int n = sizes[i];
		double bare = bare_round_us(n, n >= 40 ? 1000 : 3000);
		double windows, loop_s, delivered, grants;

		/* the default 4 tokens per component keep most daemons busy */
		if (run_traffic(n, n < 40 ? 20000L : 40000L, 4, "ipc", "none", &windows, &loop_s, &delivered, &grants) ||
		    windows <= 0) {
			printf("  %4d  kernbench run failed\n", n);
			return 1;
		}
		printf("  %4d  %14.1f  %18.1f  %8.2f  (%.0f windows, %.1f of %d daemons each)\n", n,
		       bare, loop_s * 1e6 / windows, loop_s * 1e6 / windows / bare, windows,
		       grants / windows, n);
	}
	{
		long messages = 2000000;
		double windows, loop_s, delivered, grants;
		double bare = bare_heap_rate(16, messages);
		double queue = rt_queue_rate(16, messages);

		if (run_traffic(16, messages, 1, "inproc", "all", &windows, &loop_s, &delivered, &grants))
			return 1;
		printf("\nembedded speed (16 components, --colocate all --transport inproc, trace off)\n");
		printf("  bare heap loop      %12.0f messages/s\n", bare);
		printf("  same on rt_queue    %12.0f messages/s  (kernbench's event queue alone)\n",
		       queue);
		printf("  kernbench embedded  %12.0f messages/s  (%.0f windows)\n", delivered / loop_s,
		       windows);
		printf("  ratio               %12.1f%%  (of the bare heap loop; target 25%%)\n",
		       100.0 * delivered / loop_s / bare);
	}
	if (embedded_vs_systemc(16, 2000000, 5)) {
		printf("  embedded vs SystemC: a run failed\n");
		return 1;
	}
	return 0;
}
