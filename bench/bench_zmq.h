/* bench_zmq.h — the bare ZeroMQ participant the sync benches measure a
 * window against: a DEALER named "pINDEX" that says "ready", then answers
 * every frame with "done" until one starting with 'q'. The caller made the
 * socket and set what else it needs (CURVE keys); this process then exits. */
#ifndef KB_BENCH_ZMQ_H
#define KB_BENCH_ZMQ_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

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

#endif
