/* fuzz_coord.c — libFuzzer harness: the coordinator's state machine, fed
 * sequences of frames over a real (inproc) socket from its two daemons
 * (right tokens), from strangers (any routing id) and from impostors (a
 * daemon's index with a wrong secret).
 *
 * Input: records of [kind][len][len bytes]. kind % 6: 0/1 raw frame from
 * daemon 0/1; 2 raw frame from a stranger (routing id: first bytes); 3 from
 * an impostor of daemon 0; 4 a well-formed READY and 5 a well-formed DONE
 * (window = first byte) from daemon (len & 1), so sequences reach the
 * windows. Checked beyond "no crash, no leak": a run fed nothing from its
 * daemons ends by the watchdog, whatever strangers and impostors send. An
 * input with daemon frames ends with both daemons reporting an ERROR, so
 * the run ends at once instead of by its 30 ms watchdog (a useful rate). */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "rt/buf.h"
#include "rt/coord.h"
#include "rt/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct run {
	struct rt_coord *coord;
	enum rt_err result;
};

static void *coord_thread(void *arg)
{
	struct run *run = arg;
	struct rt_coord_stats st;

	run->result = rt_coord_run(run->coord, NULL, &st);
	return NULL;
}

static void *dealer(void *ctx, const char *endpoint, const void *id, size_t id_len)
{
	void *s = zmq_socket(ctx, ZMQ_DEALER);
	int linger = 100; /* a stranger's frame is delivered though it closes at once */

	zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
	if (id_len)
		zmq_setsockopt(s, ZMQ_ROUTING_ID, id, id_len > 255 ? 255 : id_len);
	zmq_connect(s, endpoint);
	return s;
}

static void send_ready(void *sock, uint32_t daemon, const char *token, struct rt_buf *buf)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Ready ready = KB__READY__INIT;
	uint32_t component = daemon;

	ready.daemon = daemon;
	ready.n_components = 1;
	ready.components = &component;
	ready.next_local_ps = 1000;
	ready.token.data = (uint8_t *)token;
	ready.token.len = strlen(token);
	sync.body_case = KB__SYNC__BODY_READY;
	sync.ready = &ready;
	if (rt_wire_encode_sync(&sync, buf) == RT_EOK)
		zmq_send(sock, buf->data, buf->len, 0);
}

static void send_done(void *sock, uint64_t window, struct rt_buf *buf)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Done done = KB__DONE__INIT;

	done.window = window;
	done.next_local_ps = UINT64_MAX;
	sync.body_case = KB__SYNC__BODY_DONE;
	sync.done = &done;
	if (rt_wire_encode_sync(&sync, buf) == RT_EOK)
		zmq_send(sock, buf->data, buf->len, 0);
}

static void send_error(void *sock, uint32_t daemon, struct rt_buf *buf)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Error error = KB__ERROR__INIT;

	error.daemon = daemon;
	error.message = (char *)"fuzz: end of input";
	sync.body_case = KB__SYNC__BODY_ERROR;
	sync.error = &error;
	if (rt_wire_encode_sync(&sync, buf) == RT_EOK)
		zmq_send(sock, buf->data, buf->len, 0);
}

static void topology(struct rt_topology *t)
{
	uint32_t a, b;

	rt_topology_init(t);
	rt_topology_add(t, "a", NULL, 0, 0, &a);
	rt_topology_add(t, "b", NULL, 0, 1, &b);
	rt_topology_link(t, a, b, 1000);
	rt_topology_link(t, b, a, 1000);
	rt_topology_place(t, RT_COLOCATE_NONE, NULL);
}

/* Feeds the records; returns whether any came from a real daemon. */
static bool feed(void *ctx, struct rt_coord *coord, const uint8_t *data, size_t size,
		 void **socks)
{
	const char *endpoint = rt_coord_endpoint(coord);
	char impostor[RT_COORD_TOKEN_MAX];
	bool from_daemons = false;
	struct rt_buf buf;

	rt_buf_init(&buf);
	snprintf(impostor, sizeof(impostor), "%s", rt_coord_token(coord, 0));
	impostor[strlen(impostor) - 1] ^= 1; /* one bit off */
	socks[2] = dealer(ctx, endpoint, impostor, strlen(impostor));
	for (size_t at = 0; at + 2 <= size;) {
		uint8_t kind = data[at] % 6, len = data[at + 1];
		const uint8_t *body = data + at + 2;
		size_t n = size - at - 2 < len ? size - at - 2 : len;

		at += 2 + n;
		if (kind <= 1 || kind >= 4)
			from_daemons = true;
		if (kind <= 1) {
			zmq_send(socks[kind], body, n, 0);
		} else if (kind == 2) {
			void *s = dealer(ctx, endpoint, body, n < 8 ? n : 8);

			zmq_send(s, body, n, 0);
			zmq_close(s);
		} else if (kind == 3) {
			zmq_send(socks[2], body, n, 0);
		} else if (kind == 4) {
			send_ready(socks[len & 1], len & 1, rt_coord_token(coord, len & 1), &buf);
		} else {
			send_done(socks[len & 1], n ? body[0] : 0, &buf);
		}
	}
	/* the daemons end the run at once (each reports a failure), so an
	 * input costs its frames, not a watchdog period: what they sent before
	 * is what is being tested */
	if (from_daemons)
		for (uint32_t d = 0; d < 2; d++)
			send_error(socks[d], d, &buf);
	rt_buf_release(&buf);
	return from_daemons;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct rt_job job;
	/* one context for every input: starting its I/O threads per input cost
	 * more than the input (each run binds an endpoint of its own) */
	static void *ctx;
	static unsigned serial;
	struct rt_topology topo;
	struct run run = { 0 };
	void *socks[3] = { 0 };
	char endpoint[64];
	pthread_t thread;
	bool from_daemons;

	if (!ctx)
		ctx = zmq_ctx_new();
	memset(&job, 0, sizeof(job));
	rt_config_defaults(&job.config);
	job.config.watchdog_ms = 30;
	job.quiet = true;
	topology(&topo);
	snprintf(endpoint, sizeof(endpoint), "inproc://fuzz-coord-%u", serial++);
	if (rt_coord_new(&job, &topo, ctx, endpoint, &run.coord))
		abort();
	for (uint32_t i = 0; i < 2; i++) {
		const char *token = rt_coord_token(run.coord, i);

		socks[i] = dealer(ctx, endpoint, token, strlen(token));
	}
	if (pthread_create(&thread, NULL, coord_thread, &run))
		abort();
	from_daemons = feed(ctx, run.coord, data, size, socks);
	pthread_join(thread, NULL);
	if (getenv("FUZZ_COORD_VERBOSE"))
		fprintf(stderr, "fuzz_coord: %s: %s\n", rt_err_msg(run.result), rt_last_error());
	/* strangers and impostors alone can never end a run but by its watchdog */
	if (!from_daemons && run.result != RT_ETIMEOUT)
		abort();
	for (int i = 0; i < 3; i++)
		if (socks[i])
			zmq_close(socks[i]);
	rt_coord_destroy(&run.coord);
	rt_topology_release(&topo);
	return 0;
}
