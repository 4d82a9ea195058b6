/* coord.c — the lockstep coordinator (see coord.h and docs/architecture.md):
 * set-up, layout, teardown and sending; coord_internal.h lists the rest. */
#include "rt/coord.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <zmq.h>

#include "coord_internal.h"
#include "rt/event.h"
#include "rt/grow.h"
#include "rt/sock.h"
#include "rt/wire.h"

/* "kb-dma r0.pe0.dma (pid 123)", or an agent's "host 1 (ranks 2, 3)" */
const char *coord_peer_name(const struct rt_coord *c, uint32_t i, char *buf, size_t cap)
{
	const struct rt_daemon_desc *d = &c->topo->daemons[i];

	/* no pid: an error line must read the same run after run */
	if (c->labels)
		snprintf(buf, cap, "%s", c->labels[i]);
	else
		snprintf(buf, cap, "%s %s", d->name, d->label);
	return buf;
}

/* Every daemon gets an unguessable routing id, "INDEX.SECRET" with 128
 * random bits: a stranger can neither take a daemon's place nor be taken
 * for one, and the index still makes the lookup O(1). */
static enum rt_err make_tokens(struct rt_coord *c)
{
	for (uint32_t i = 0; i < c->n_peers; i++) {
		uint8_t secret[16];
		int used;

		if (getrandom(secret, sizeof(secret), 0) != (ssize_t)sizeof(secret))
			return rt_fail(RT_EIO, "coordinator: no random bytes for the daemon tokens: %s",
				       strerror(errno));
		used = snprintf(c->peers[i].token, sizeof(c->peers[i].token), "%u.", i);
		for (size_t k = 0; k < sizeof(secret); k++)
			used += snprintf(c->peers[i].token + used,
					 sizeof(c->peers[i].token) - (size_t)used, "%02x", secret[k]);
	}
	return RT_EOK;
}

int64_t rt_coord_max_frame(const struct rt_job *job)
{
	uint64_t max = job->max_frame ? job->max_frame : 64ull << 20;

	return max > INT64_MAX ? INT64_MAX : (int64_t)max;
}

/* The barrier's fan-out: RT_COORD_FANOUT, or KB_BARRIER_FANOUT (0: flat). */
static uint32_t barrier_fanout(void)
{
	const char *env = getenv("KB_BARRIER_FANOUT");
	char *end = NULL;
	unsigned long k = env ? strtoul(env, &end, 10) : RT_COORD_FANOUT;

	return env && (end == env || *end || k > 64) ? RT_COORD_FANOUT : (uint32_t)k;
}

/* Who hosts what: one participant per daemon, or the layout's. */
static enum rt_err apply_layout(struct rt_coord *c, const struct rt_coord_layout *lay)
{
	const struct rt_topology *t = c->topo;

	c->n_peers = lay ? lay->n_peers : t->n_daemons;
	c->peers = calloc(c->n_peers ? c->n_peers : 1, sizeof(*c->peers));
	c->peer_of = calloc(t->n_components ? t->n_components : 1, sizeof(*c->peer_of));
	c->cap_round = c->n_peers + 4;
	c->round = calloc(c->cap_round, sizeof(*c->round));
	if (lay && lay->labels)
		c->labels = calloc(c->n_peers ? c->n_peers : 1, sizeof(*c->labels));
	if (!c->peers || !c->peer_of || !c->round || (lay && lay->labels && !c->labels))
		return rt_fail(RT_ENOMEM, "cannot allocate the coordinator");
	c->sub = lay && lay->sub;
	c->fanout = lay && lay->agents ? barrier_fanout() : 0;
	c->ops = !(lay && lay->agents) ? &coord_daemons
		 : c->fanout ? &coord_agents_tree : &coord_agents_flat;
	c->lookahead_ps = lay ? lay->lookahead_ps : t->lookahead_ps;
	c->ready_timeout_ms = lay ? lay->ready_timeout_ms : 0;
	for (uint32_t i = 0; c->labels && i < c->n_peers; i++)
		snprintf(c->labels[i], sizeof(c->labels[i]), "%s", lay->labels[i]);
	for (uint32_t id = 0; id < t->n_components; id++) {
		uint32_t p = lay ? lay->peer_of[id] : t->components[id].daemon;

		c->peer_of[id] = p;
		if (p == RT_COORD_AWAY)
			continue;
		if (p >= c->n_peers)
			return rt_fail(RT_EINVAL, "coordinator: component %u placed on participant %u of %u",
				       id, p, c->n_peers);
		c->peers[p].n_hosted++;
	}
	for (uint32_t i = 0; i < c->n_peers; i++)
		c->peers[i].granted_sum = RT_COORD_TREE_UNSEEN;
	for (uint32_t i = 0; i < c->n_peers; i++)
		/* every host has an agent, even one whose ranks have no component */
		if (c->peers[i].n_hosted || !lay || c->ops->remote) {
			c->peers[i].present = true;
			c->n_present++;
		}
	return RT_EOK;
}

enum rt_err rt_coord_new(const struct rt_job *job, const struct rt_topology *topo, void *zctx,
			 const char *endpoint, struct rt_coord **out)
{
	return rt_coord_new_layout(job, topo, zctx, endpoint, NULL, out);
}

/* A coordinator that could not be set up: destroyed, its error kept. */
static enum rt_err abandon_new(struct rt_coord **c, enum rt_err code)
{
	struct rt_error kept;

	rt_err_keep(&kept, code);
	rt_coord_destroy(c);
	return rt_err_restore(&kept);
}

/* Its socket: a claimed frame larger than any legal one drops that
 * connection instead of making the coordinator allocate it; a host whose
 * network is down stops answering ZeroMQ's pings: its connection drops,
 * and sends to it fail. Then CURVE, the bind and the endpoint bound. */
static enum rt_err open_router(struct rt_coord *c, const char *endpoint, int64_t max_frame)
{
	struct rt_sock_opts so = { .who = "coordinator", .router_mandatory = true,
				   .max_frame = max_frame };
	const struct rt_job *job = c->job;
	size_t len = sizeof(c->endpoint);

	if (c->ops->remote) {
		so.heartbeat_ms = RT_COORD_BEAT_MS;
		so.heartbeat_timeout_ms = 2 * RT_COORD_SILENCE_MS;
	}
	if (rt_sock_open(c->zctx, ZMQ_ROUTER, &so, &c->sock))
		return RT_ETRANSPORT;
	if (make_tokens(c))
		return RT_EIO;
	if (job->keys.on && (c->ops->remote || job->transport != RT_TRANSPORT_INPROC) &&
	    rt_keys_serve(&job->keys, c->zctx, c->sock, &c->zap))
		return RT_ETRANSPORT;
	if (zmq_bind(c->sock, endpoint) < 0)
		return rt_fail(RT_ETRANSPORT, "coordinator: cannot bind %s: %s", endpoint,
			       zmq_strerror(errno));
	if (zmq_getsockopt(c->sock, ZMQ_LAST_ENDPOINT, c->endpoint, &len) < 0)
		return rt_fail(RT_ETRANSPORT, "coordinator: cannot read the endpoint bound for %s: %s",
			       endpoint, zmq_strerror(zmq_errno()));
	return RT_EOK;
}

enum rt_err rt_coord_new_layout(const struct rt_job *job, const struct rt_topology *topo,
				void *zctx, const char *endpoint,
				const struct rt_coord_layout *layout, struct rt_coord **out)
{
	struct rt_coord *c = calloc(1, sizeof(*c));
	int64_t max_frame = rt_coord_max_frame(job);
	enum rt_err err;

	*out = NULL;
	if (!c)
		return rt_fail(RT_ENOMEM, "cannot allocate the coordinator");
	c->job = job;
	c->topo = topo;
	rt_buf_init(&c->job_bytes);
	if (apply_layout(c, layout) ||
	    (c->ops->remote && rt_buf_append(&c->job_bytes, layout->job_bytes, layout->job_len)))
		return abandon_new(&c, RT_ENOMEM);
	/* an agent's DONE carries the IPCQ payloads of all its ranks */
	if (c->ops->remote && job->config.ranks > 1 && max_frame < INT64_MAX / job->config.ranks)
		max_frame *= job->config.ranks;
	c->zctx = zctx;
	if (!c->zctx) {
		c->zctx = zmq_ctx_new();
		c->own_zctx = true;
	}
	rt_buf_init(&c->frame);
	rt_trace_writer_init(&c->counters);
	err = open_router(c, endpoint, max_frame);
	if (err)
		return abandon_new(&c, err);
	*out = c;
	return RT_EOK;
}

const char *rt_coord_endpoint(const struct rt_coord *c)
{
	return c->endpoint;
}

void rt_coord_set_pid(struct rt_coord *c, uint32_t daemon, pid_t pid)
{
	if (daemon < c->n_peers)
		c->peers[daemon].pid = pid;
}

const char *rt_coord_token(const struct rt_coord *c, uint32_t daemon)
{
	return daemon < c->n_peers ? c->peers[daemon].token : "";
}

bool rt_coord_released(const struct rt_coord *c, uint32_t daemon)
{
	return daemon < c->n_peers && c->peers[daemon].released;
}

void coord_free_round(struct rt_coord *c)
{
	for (size_t i = 0; i < c->n_round; i++)
		rt_wire_free_sync(c->round[i]);
	c->n_round = 0;
}

/* Keeps a frame whose envelopes wait in inbound lists until the next
 * GRANTs are sent. */
enum rt_err coord_keep_in_round(struct rt_coord *c, Kb__Sync *s)
{
	if (!RT_GROW(c->round, c->cap_round, c->n_round, 64))
		return rt_fail(RT_ENOMEM, "coordinator: out of memory");
	c->round[c->n_round++] = s;
	return RT_EOK;
}

void coord_free_away(struct rt_coord *c)
{
	for (size_t i = 0; i < c->n_away; i++)
		free(c->away[i]);
	c->n_away = 0;
}

void rt_coord_destroy(struct rt_coord **cp)
{
	struct rt_coord *c = *cp;

	if (!c)
		return;
	coord_free_round(c);
	free(c->round);
	coord_free_away(c);
	free(c->away);
	free(c->peer_of);
	free(c->labels);
	rt_buf_release(&c->job_bytes);
	rt_end_reports_release(&c->reports);
	for (uint32_t i = 0; c->peers && i < c->n_peers; i++) {
		free(c->peers[i].inbound);
		for (size_t k = 0; k < c->peers[i].n_files; k++)
			free(c->peers[i].files[k].path);
		free(c->peers[i].files);
	}
	free(c->peers);
	if (c->sock)
		zmq_close(c->sock);
	rt_zap_destroy(&c->zap);
	if (c->own_zctx && c->zctx)
		zmq_ctx_term(c->zctx);
	rt_buf_release(&c->frame);
	rt_trace_writer_release(&c->counters);
	free(c);
	*cp = NULL;
}

/* ---------------------------------------------------------------- sending */

enum rt_err coord_send_to(struct rt_coord *c, uint32_t peer, Kb__Sync *msg)
{
	const char *id = c->peers[peer].token;
	char name[128];
	enum rt_err err = rt_wire_encode_sync(msg, &c->frame);

	if (err)
		return err;
	if (zmq_send(c->sock, id, strlen(id), ZMQ_SNDMORE) < 0 ||
	    zmq_send(c->sock, c->frame.data, c->frame.len, 0) < 0)
		return rt_fail(RT_EPEER, "daemon %s is unreachable: %s",
			       coord_peer_name(c, peer, name, sizeof(name)), zmq_strerror(errno));
	return RT_EOK;
}

static int env_cmp(const void *a, const void *b)
{
	const Kb__Envelope *x = *(Kb__Envelope *const *)a, *y = *(Kb__Envelope *const *)b;
	struct rt_key kx = { x->deliver_ps, x->priority, x->src, x->seq };
	struct rt_key ky = { y->deliver_ps, y->priority, y->src, y->seq };

	return rt_key_cmp(&kx, &ky);
}

enum rt_err coord_send_grant(struct rt_coord *c, uint32_t i, uint64_t window, uint64_t start,
			      uint64_t end)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Grant grant = KB__GRANT__INIT;
	struct peer *p = &c->peers[i];

	if (p->n_in)
		qsort(p->inbound, p->n_in, sizeof(*p->inbound), env_cmp);
	grant.window = window;
	grant.start_ps = start;
	grant.end_ps = end;
	grant.n_inbound = p->n_in;
	grant.inbound = p->inbound;
	grant.expect = p->expect;
	sync.body_case = KB__SYNC__BODY_GRANT;
	sync.grant = &grant;
	p->n_in = 0;
	p->fresh = false;
	p->answered = false;
	return coord_send_to(c, i, &sync);
}

enum rt_err coord_broadcast_shutdown(struct rt_coord *c, bool abort_run)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Shutdown shutdown = KB__SHUTDOWN__INIT;
	enum rt_err first = RT_EOK;

	shutdown.abort = abort_run;
	sync.body_case = KB__SYNC__BODY_SHUTDOWN;
	sync.shutdown = &shutdown;
	for (uint32_t i = 0; i < c->n_peers; i++) {
		enum rt_err err;

		/* a daemon that failed before READY waits for this word too
		 * (send_error): tell it if it is connected, else it waits out
		 * its 5 s and its thread holds up the teardown */
		if (!c->peers[i].ready) {
			if (abort_run)
				(void)coord_send_to(c, i, &sync);
			continue;
		}
		c->peers[i].answered = false;
		c->peers[i].released = true;
		err = coord_send_to(c, i, &sync);
		if (err && !first)
			first = err;
	}
	return first;
}

void rt_coord_abort(struct rt_coord *c)
{
	coord_broadcast_shutdown(c, true);
}
