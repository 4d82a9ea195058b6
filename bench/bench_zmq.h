/* bench_zmq.h — the bare ZeroMQ lockstep round the sync benches measure a
 * window against. A participant (bench_bare_peer) is a DEALER named
 * "pINDEX" that says "ready", then answers every frame with "done" until
 * one starting with 'q'; the caller made its socket and set what else it
 * needs (CURVE keys), and the process exits after. The coordinator is a
 * ROUTER running bench_bare_rounds. */
#ifndef KB_BENCH_ZMQ_H
#define KB_BENCH_ZMQ_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "bench.h"

static inline void bench_bare_peer(void *ctx, void *s, int index, const char *endpoint)
{
	char id[16], buf[64];
	int zero = 0;

	snprintf(id, sizeof(id), "p%d", index);
	zmq_setsockopt(s, ZMQ_ROUTING_ID, id, strlen(id));
	zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_RCVHWM, &zero, sizeof(zero));
	zmq_connect(s, endpoint);
	zmq_send(s, "ready", 5, 0);
	for (;;) {
		int n = zmq_recv(s, buf, sizeof(buf), 0);

		if (n <= 0 || buf[0] == 'q')
			break;
		zmq_send(s, "done", 4, 0);
	}
	zmq_close(s);
	zmq_ctx_term(ctx);
	_exit(0);
}

/* The coordinator's ROUTER: unroutable sends fail, no high-water marks. */
static inline void *bench_router(void *ctx)
{
	void *router = zmq_socket(ctx, ZMQ_ROUTER);
	int one = 1, zero = 0;

	zmq_setsockopt(router, ZMQ_ROUTER_MANDATORY, &one, sizeof(one));
	zmq_setsockopt(router, ZMQ_SNDHWM, &zero, sizeof(zero));
	zmq_setsockopt(router, ZMQ_RCVHWM, &zero, sizeof(zero));
	return router;
}

static inline void bench_send_to(void *router, int index, const char *what)
{
	char id[16];

	snprintf(id, sizeof(id), "p%d", index);
	zmq_send(router, id, strlen(id), ZMQ_SNDMORE);
	zmq_send(router, what, strlen(what), 0);
}

static inline void bench_recv_any(void *router)
{
	char id[16], buf[64];

	zmq_recv(router, id, sizeof(id), 0);
	zmq_recv(router, buf, sizeof(buf), 0);
}

/* The coordinator's side: waits for the "ready" of peers p[first] ..
 * p[first + n - 1], runs `warmup` then `rounds` lockstep rounds (a grant to
 * each, a reply from each), tells them to quit; µs per measured round. */
static inline double bench_bare_rounds(void *router, int first, int n, int warmup, int rounds)
{
	double start = 0, us;

	for (int i = 0; i < n; i++)
		bench_recv_any(router);
	for (int r = -warmup; r < rounds; r++) {
		if (r == 0)
			start = bench_now_s();
		for (int i = 0; i < n; i++)
			bench_send_to(router, first + i, "grant");
		for (int i = 0; i < n; i++)
			bench_recv_any(router);
	}
	us = (bench_now_s() - start) * 1e6 / rounds;
	for (int i = 0; i < n; i++)
		bench_send_to(router, first + i, "q");
	return us;
}

#endif
