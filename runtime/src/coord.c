/* coord.c — the lockstep coordinator (see coord.h and docs/architecture.md). */
#include "rt/coord.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "rt/buf.h"
#include "rt/daemon.h"
#include "rt/event.h"
#include "rt/sock.h"
#include "rt/trace.h"
#include "rt/wire.h"

/* What arrived of one output file of an agent (FilePart frames). */
struct file_tally {
	char *path;
	uint64_t parts; /* frames, the size-only first one included */
	uint64_t bytes; /* data bytes */
};

struct peer {
	bool present;           /* hosted here: an agent's coordinator leaves
				 * the daemons of other hosts out */
	bool gone;              /* said BYE: its connection may close */
	uint32_t n_hosted;      /* components it hosts */
	uint64_t heard_ms;      /* agents: when it last sent anything */
	uint64_t lost_ms;       /* agents: when a send to it first failed */
	bool ready;
	bool answered;          /* DONE / BYE received this round */
	bool released;          /* SHUTDOWN sent: it may exit now */
	bool assigned;          /* agents: an agent was given this host */
	char token[RT_COORD_TOKEN_MAX]; /* its routing id: "INDEX.SECRET" */
	uint64_t events;        /* last PROGRESS count */
	uint64_t cpu_ns;        /* CPU time at the last liveness sample */
	pid_t pid;
	uint64_t next_local_ps;
	Kb__Envelope **inbound; /* for its next GRANT (borrowed from rounds) */
	size_t n_in;
	size_t cap_in;
	/* agents: the files it shipped, as they arrived (checked at its BYE) */
	struct file_tally *files;
	size_t n_files, cap_files;
	uint64_t parts_taken, bytes_taken; /* over all its files (FileAck) */
	/* agents (ADR 0066): where its neighbours reach it, and what they sent */
	char mesh_endpoint[RT_COORD_MESH_ENDPOINT_MAX];
	char mesh_key[41];      /* its CURVE public key, Z85 */
	uint64_t expect;        /* messages other hosts sent it so far */
	bool fresh;             /* ... some of them in the last round */
	uint64_t granted_sum;   /* tree, a top host: its subtree's expect when
				 * last granted (RT_COORD_TREE_UNSEEN: never) */
};

struct rt_coord {
	const struct rt_job *job;
	const struct rt_topology *topo;
	void *zctx;
	bool own_zctx;
	void *sock;
	struct rt_zap *zap; /* --keys: the handler admitting the run's client key */
	char endpoint[256];
	struct peer *peers;
	uint32_t n_peers;
	Kb__Sync **round;       /* DONE frames of this round: own the envelopes */
	size_t n_round;
	struct rt_buf frame;
	struct rt_trace_writer counters; /* window counter trace records */
	uint64_t last_progress_ms;
	uint64_t progress_start_ms; /* when the run's windows began (--progress) */
	uint64_t progress_ps;       /* latest simulated time a daemon reported */
	bool progress_printed;      /* a plain progress line went out */
	uint64_t recvs;         /* waits for a frame (signals: every 64th) */
	uint64_t cpu_sampled_ms; /* last liveness sample (hooks->cpu_ns) */
	int rcvtimeo_ms;        /* the socket's receive timeout now */
	uint64_t strangers;     /* frames ignored from peers it did not spawn */
	uint64_t strangers_shown;
	uint64_t stranger_note_ms;
	const struct rt_coord_hooks *hooks;
	struct rt_end_reports reports; /* BYE reports, once collected */
	/* layout: who hosts each component (rt_coord_layout) */
	uint32_t *peer_of;      /* per component: participant or RT_COORD_AWAY */
	char (*labels)[RT_COORD_LABEL_MAX]; /* per participant, or NULL: daemons */
	uint32_t n_present;
	bool agents;            /* participants are agents on other hosts */
	bool sub;               /* an agent's: steps to horizons, no counters */
	uint64_t lookahead_ps;
	size_t cap_round;
	uint64_t k;             /* next window number */
	uint64_t next_ps;       /* earliest pending time after the last window */
	uint64_t horizon;       /* sub: end of the current global window */
	Kb__Envelope **away;    /* sub: owned copies for other hosts */
	size_t n_away, cap_away;
	struct rt_coord_stats st;
	struct rt_buf job_bytes;/* agents: the shared job, as Assign carries it */
	uint64_t beat_ms;       /* agents: last heartbeat sent */
	uint32_t fanout;        /* agents: the barrier's tree (0: flat) */
	uint64_t ready_timeout_ms; /* wait this long for READYs (0: watchdog) */
};

#define RECV_SLICE_MS 250 /* longest blocking receive */

static uint64_t wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* This process's CPU time, all threads (ZeroMQ's I/O threads included). */
static double process_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t wall_ms(void)
{
	return wall_us() / 1000;
}

/* "kb-dma r0.pe0.dma (pid 123)", or an agent's "host 1 (ranks 2, 3)" */
static const char *peer_name(const struct rt_coord *c, uint32_t i, char *buf, size_t cap)
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
	const struct rt_config *cfg = &job->config;
	uint64_t tcm = cfg->tcm_scratch_bytes + cfg->tcm_staging_bytes;
	uint64_t max = 64ull << 20;

	/* data mode: a window's DONE carries the IPCQ payloads of a rank's PEs,
	 * each at most a TCM; allow a few per PE */
	if (job->mode == RT_MODE_DATA && tcm < (1ull << 40) / 4 / (cfg->pes ? cfg->pes : 1))
		max += 4 * tcm * cfg->pes;
	return max > INT64_MAX ? INT64_MAX : (int64_t)max;
}

uint32_t rt_coord_tree_parent(uint32_t h, uint32_t fanout)
{
	return h < fanout ? RT_COORD_TREE_TOP : h / fanout - 1;
}

uint32_t rt_coord_tree_first_child(uint32_t h, uint32_t fanout)
{
	uint64_t first = (uint64_t)fanout * (h + 1);

	return first > UINT32_MAX ? UINT32_MAX : (uint32_t)first;
}

uint32_t rt_coord_tree_size(uint32_t h, uint32_t fanout, uint32_t n_hosts)
{
	uint64_t lo = h, hi = h, size = 0;

	/* level by level: the children of hosts lo..hi are k(lo+1)..k(hi+1)+k-1 */
	while (fanout && lo < n_hosts) {
		size += (hi < n_hosts ? hi : n_hosts - 1) - lo + 1;
		lo = (uint64_t)fanout * (lo + 1);
		hi = (uint64_t)fanout * (hi + 1) + fanout - 1;
	}
	return fanout ? (uint32_t)size : 1;
}

uint64_t rt_coord_tree_sum(uint32_t h, uint32_t fanout, uint32_t n_hosts, const uint64_t *v)
{
	uint64_t lo = h, hi = h, sum = 0;

	while (lo < n_hosts) {
		for (uint64_t i = lo; i <= hi && i < n_hosts; i++)
			sum += v[i];
		if (!fanout)
			break;
		lo = (uint64_t)fanout * (lo + 1);
		hi = (uint64_t)fanout * (hi + 1) + fanout - 1;
	}
	return sum;
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
	c->agents = lay && lay->agents;
	c->sub = lay && lay->sub;
	c->fanout = c->agents ? barrier_fanout() : 0;
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
		if (c->peers[i].n_hosted || !lay || c->agents) {
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

	if (c->agents) {
		so.heartbeat_ms = RT_COORD_BEAT_MS;
		so.heartbeat_timeout_ms = 2 * RT_COORD_SILENCE_MS;
	}
	if (rt_sock_open(c->zctx, ZMQ_ROUTER, &so, &c->sock))
		return RT_ETRANSPORT;
	if (make_tokens(c))
		return RT_EIO;
	if (job->keys.on && (c->agents || job->transport != RT_TRANSPORT_INPROC) &&
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
	    (c->agents && rt_buf_append(&c->job_bytes, layout->job_bytes, layout->job_len)))
		return abandon_new(&c, RT_ENOMEM);
	/* an agent's DONE carries the IPCQ payloads of all its ranks */
	if (c->agents && job->config.ranks > 1 && max_frame < INT64_MAX / job->config.ranks)
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

static void free_round(struct rt_coord *c)
{
	for (size_t i = 0; i < c->n_round; i++)
		rt_wire_free_sync(c->round[i]);
	c->n_round = 0;
}

/* Keeps a frame whose envelopes wait in inbound lists until the next
 * GRANTs are sent. */
static enum rt_err keep_in_round(struct rt_coord *c, Kb__Sync *s)
{
	if (c->n_round == c->cap_round) {
		size_t cap = c->cap_round * 2;
		Kb__Sync **grown = realloc(c->round, cap * sizeof(*grown));

		if (!grown)
			return rt_fail(RT_ENOMEM, "coordinator: out of memory");
		c->round = grown;
		c->cap_round = cap;
	}
	c->round[c->n_round++] = s;
	return RT_EOK;
}

static void free_away(struct rt_coord *c)
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
	free_round(c);
	free(c->round);
	free_away(c);
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

static enum rt_err send_to(struct rt_coord *c, uint32_t peer, Kb__Sync *msg)
{
	const char *id = c->peers[peer].token;
	char name[128];
	enum rt_err err = rt_wire_encode_sync(msg, &c->frame);

	if (err)
		return err;
	if (zmq_send(c->sock, id, strlen(id), ZMQ_SNDMORE) < 0 ||
	    zmq_send(c->sock, c->frame.data, c->frame.len, 0) < 0)
		return rt_fail(RT_EPEER, "daemon %s is unreachable: %s",
			       peer_name(c, peer, name, sizeof(name)), zmq_strerror(errno));
	return RT_EOK;
}

static int env_cmp(const void *a, const void *b)
{
	const Kb__Envelope *x = *(Kb__Envelope *const *)a, *y = *(Kb__Envelope *const *)b;
	struct rt_key kx = { x->deliver_ps, x->priority, x->src, x->seq };
	struct rt_key ky = { y->deliver_ps, y->priority, y->src, y->seq };

	return rt_key_cmp(&kx, &ky);
}

static enum rt_err send_grant(struct rt_coord *c, uint32_t i, uint64_t window, uint64_t start,
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
	return send_to(c, i, &sync);
}

static enum rt_err broadcast_shutdown(struct rt_coord *c, bool abort_run)
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
				(void)send_to(c, i, &sync);
			continue;
		}
		c->peers[i].answered = false;
		c->peers[i].released = true;
		err = send_to(c, i, &sync);
		if (err && !first)
			first = err;
	}
	return first;
}

void rt_coord_abort(struct rt_coord *c)
{
	broadcast_shutdown(c, true);
}

/* ---------------------------------------------------------------- receiving */

/* Bytes from outside, printable: control and non-ASCII bytes as \xHH,
 * at most `max` input bytes, "..." when cut. */
static const char *escape_bytes(const void *data, size_t len, size_t max, char *buf, size_t cap)
{
	const unsigned char *p = data;
	size_t used = 0;

	buf[0] = '\0';
	for (size_t k = 0; k < len && k < max && used + 8 < cap; k++) {
		if (isprint(p[k]))
			buf[used++] = (char)p[k];
		else
			used += (size_t)snprintf(buf + used, cap - used, "\\x%02x", p[k]);
	}
	buf[used] = '\0';
	if (len > max && used + 4 < cap)
		snprintf(buf + used, cap - used, "...");
	return buf;
}

/* Which daemon a routing id belongs to: its whole token must match. */
static bool peer_by_id(const struct rt_coord *c, const zmq_msg_t *id, uint32_t *peer)
{
	const char *p = zmq_msg_data((zmq_msg_t *)id);
	size_t len = zmq_msg_size((zmq_msg_t *)id);
	uint32_t i = 0;
	size_t k = 0;

	while (k < len && k < 9 && p[k] >= '0' && p[k] <= '9')
		i = i * 10 + (uint32_t)(p[k++] - '0');
	if (k == 0 || i >= c->n_peers || len != strlen(c->peers[i].token) ||
	    memcmp(p, c->peers[i].token, len))
		return false;
	*peer = i;
	return true;
}

/* A frame from a process the launcher did not start: ignored, never fatal.
 * The first is described (escaped, truncated); later ones are counted in at
 * most one line per 10 s, so a flood cannot flood the terminal. */
static void note_stranger(struct rt_coord *c, const zmq_msg_t *id, const zmq_msg_t *body)
{
	uint64_t now = wall_ms();
	char who[200], what[200];

	c->strangers++;
	if (c->strangers > 1 && now - c->stranger_note_ms < 10000)
		return;
	c->stranger_note_ms = now;
	if (c->strangers == 1)
		fprintf(stderr, "kernbench: warning: ignored a frame from a process the launcher did "
			"not start (identity '%s', %zu bytes: '%s')\n",
			escape_bytes(zmq_msg_data((zmq_msg_t *)id), zmq_msg_size((zmq_msg_t *)id), 40,
				     who, sizeof(who)),
			zmq_msg_size((zmq_msg_t *)body),
			escape_bytes(zmq_msg_data((zmq_msg_t *)body), zmq_msg_size((zmq_msg_t *)body),
				     40, what, sizeof(what)));
	else
		fprintf(stderr, "kernbench: warning: ignored %llu more frames from strangers\n",
			(unsigned long long)(c->strangers - c->strangers_shown));
	c->strangers_shown = c->strangers;
}

/* ---------------------------------------------------------------- agents */

/* Which host an agent's Hello names: its --index, or the rank its launcher
 * gave it. With mpirun MPMD the coordinator is process 0 and the agents are
 * 1..N, so a world of N + 1 shifts the rank down by one. */
static bool host_of_hello(const struct rt_coord *c, const Kb__Hello *h, uint32_t *host)
{
	uint32_t index = h->index;

	if (h->world_size == c->n_peers + 1) {
		if (index == 0)
			return false;
		index--;
	}
	*host = index;
	return index < c->n_peers;
}

/* The ranks whose components host `host` has, ascending. */
static size_t host_ranks(const struct rt_coord *c, uint32_t host, uint32_t ranks[64])
{
	uint64_t seen = 0;
	size_t n = 0;

	for (uint32_t id = 0; id < c->topo->n_components; id++)
		if (c->peer_of[id] == host && c->topo->components[id].rank < 64)
			seen |= 1ull << c->topo->components[id].rank;
	for (uint32_t r = 0; r < 64; r++)
		if (seen >> r & 1)
			ranks[n++] = r;
	return n;
}

static void reply_to(struct rt_coord *c, const zmq_msg_t *id, Kb__Sync *msg)
{
	if (rt_wire_encode_sync(msg, &c->frame))
		return;
	/* a refusal to a peer that is gone already has no one to tell */
	if (zmq_send(c->sock, zmq_msg_data((zmq_msg_t *)id), zmq_msg_size((zmq_msg_t *)id),
		     ZMQ_SNDMORE) >= 0)
		(void)zmq_send(c->sock, c->frame.data, c->frame.len, 0);
}

static void refuse_hello(struct rt_coord *c, const zmq_msg_t *id, const char *why)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Error error = KB__ERROR__INIT;

	error.message = (char *)why;
	error.usage = true;
	sync.body_case = KB__SYNC__BODY_ERROR;
	sync.error = &error;
	reply_to(c, id, &sync);
}

/* A Hello under a throw-away routing id (only an agents' coordinator reads
 * one): answers Assign with the host's token and the job, or ERROR saying
 * why not. True when the frame was a Hello. With --keys only a holder of
 * the run's client key gets this far (ZAP). */
static bool maybe_hello(struct rt_coord *c, const zmq_msg_t *id, const zmq_msg_t *body)
{
	Kb__Sync *s = NULL, sync = KB__SYNC__INIT;
	Kb__Assign assign = KB__ASSIGN__INIT;
	uint32_t host, ranks[64];
	char why[256];

	if (rt_wire_decode_sync(zmq_msg_data((zmq_msg_t *)body), zmq_msg_size((zmq_msg_t *)body),
				&s))
		return false;
	if (s->body_case != KB__SYNC__BODY_HELLO) {
		rt_wire_free_sync(s);
		return false;
	}
	if (!host_of_hello(c, s->hello, &host)) {
		snprintf(why, sizeof(why), "agent index %u (world size %u) names no host: the hosts "
			 "file has %u (indices 0..%u)", s->hello->index, s->hello->world_size,
			 c->n_peers, c->n_peers - 1);
		refuse_hello(c, id, why);
	} else if (c->peers[host].assigned) {
		snprintf(why, sizeof(why), "%s already has an agent", c->labels ? c->labels[host] : "host");
		refuse_hello(c, id, why);
	} else {
		assign.host = host;
		assign.token.data = (uint8_t *)c->peers[host].token;
		assign.token.len = strlen(c->peers[host].token);
		assign.job.data = (uint8_t *)c->job_bytes.data;
		assign.job.len = c->job_bytes.len;
		assign.ranks = ranks;
		assign.n_ranks = host_ranks(c, host, ranks);
		sync.body_case = KB__SYNC__BODY_ASSIGN;
		sync.assign = &assign;
		reply_to(c, id, &sync);
		c->peers[host].assigned = true;
		c->peers[host].heard_ms = wall_ms(); /* its silence counts from now */
	}
	rt_wire_free_sync(s);
	return true;
}

/* Whether a frame is queued on the socket, unread. */
static bool frames_waiting(struct rt_coord *c)
{
	int events = 0;
	size_t len = sizeof(events);

	return !zmq_getsockopt(c->sock, ZMQ_EVENTS, &events, &len) && (events & ZMQ_POLLIN);
}

/* Agents: a heartbeat to every ready host every RT_COORD_BEAT_MS (a send to
 * one whose connection dropped fails at once), and a host that sent nothing
 * for RT_COORD_SILENCE_MS since its Assign is gone (an agent beats while it
 * starts its daemons, too). */
static enum rt_err keep_agents(struct rt_coord *c)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Progress progress = KB__PROGRESS__INIT;
	uint64_t now = wall_ms();
	unsigned silence;
	char name[128];

	if (!c->agents || now - c->beat_ms < RT_COORD_BEAT_MS)
		return RT_EOK;
	c->beat_ms = now;
	progress.events = now;
	sync.body_case = KB__SYNC__BODY_PROGRESS;
	sync.progress = &progress;
	for (uint32_t i = 0; i < c->n_peers; i++) {
		struct peer *p = &c->peers[i];

		if (!(p->ready || p->assigned) || p->gone)
			continue;
		/* sending its files, an agent may wait its turn behind another's */
		silence = (p->released ? 2u : 1u) * RT_COORD_SILENCE_MS;
		/* silence is what did not arrive, not what this process has not
		 * read yet: busy writing another host's files on a loaded
		 * machine, it may be behind on its queue */
		if (now - p->heard_ms > silence && !frames_waiting(c))
			return rt_fail(RT_EPEER, "%s is gone: nothing from its agent for %u s (agent "
				       "killed, host down or network cut)",
				       peer_name(c, i, name, sizeof(name)), silence / 1000);
		if (!p->ready)
			continue; /* still starting: beats go to ready hosts */
		/* after SHUTDOWN an agent closes once it sent its files and BYE,
		 * which may still be queued here (behind another host's files):
		 * then only silence counts. Before, a closed connection is a dead
		 * agent (one that fails waits for our answer to its ERROR), fatal
		 * once nothing came from it for two beats. */
		if (send_to(c, i, &sync) == RT_EOK || p->released)
			p->lost_ms = 0;
		else if (!p->lost_ms)
			p->lost_ms = now;
		else if (now - p->heard_ms > 2 * RT_COORD_BEAT_MS)
			return rt_fail(RT_EPEER, "%s is gone: its agent's connection dropped (agent "
				       "killed, host down or network cut)",
				       peer_name(c, i, name, sizeof(name)));
	}
	return RT_EOK;
}

size_t rt_coord_lost_hosts(struct rt_coord *c, char *buf, size_t cap)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Progress progress = KB__PROGRESS__INIT;
	size_t lost = 0, used = 0;
	char name[128];

	if (cap)
		buf[0] = '\0';
	if (!c || !c->agents)
		return 0;
	progress.events = wall_ms();
	sync.body_case = KB__SYNC__BODY_PROGRESS;
	sync.progress = &progress;
	for (uint32_t i = 0; i < c->n_peers; i++) {
		struct peer *p = &c->peers[i];

		if (!p->ready || p->gone || p->released)
			continue;
		/* a connection that dropped refuses the beat at once */
		if (!p->lost_ms && send_to(c, i, &sync) == RT_EOK)
			continue;
		if (used < cap)
			used += (size_t)snprintf(buf + used, cap - used, "%s%s", lost ? ", " : "",
						 peer_name(c, i, name, sizeof(name)));
		lost++;
	}
	return lost;
}

/* What a received frame turned out to be. */
enum taken { TAKEN_NOTHING, TAKEN_IGNORED, TAKEN_PROGRESS, TAKEN_FRAME };

/* Takes the rest of a frame whose identity part is in `id` and decodes it.
 * TAKEN_FRAME: *peer sent *out (caller frees). A stranger's frame is
 * ignored and a PROGRESS heartbeat is consumed here. */
static void show_progress(struct rt_coord *c, uint64_t k, uint64_t t, bool final);

static enum rt_err finish_recv(struct rt_coord *c, zmq_msg_t *id, uint32_t *peer, Kb__Sync **out,
			       enum taken *taken)
{
	zmq_msg_t body;
	char name[128];
	enum rt_err err = RT_EOK;
	int more = 0;
	size_t more_len = sizeof(more);

	*out = NULL;
	*taken = TAKEN_NOTHING;
	zmq_msg_init(&body);
	/* a part that cannot be read is an empty body, which no decoder takes */
	if (zmq_getsockopt(c->sock, ZMQ_RCVMORE, &more, &more_len) == 0 && more)
		(void)zmq_msg_recv(&body, c->sock, 0);
	for (;;) { /* a stranger may send more parts: drop them */
		zmq_msg_t extra;

		more_len = sizeof(more);
		if (zmq_getsockopt(c->sock, ZMQ_RCVMORE, &more, &more_len) < 0 || !more)
			break;
		zmq_msg_init(&extra);
		more = zmq_msg_recv(&extra, c->sock, 0);
		zmq_msg_close(&extra);
		if (more < 0)
			break;
	}
	*taken = TAKEN_IGNORED;
	if (!peer_by_id(c, id, peer)) {
		if (!c->agents || !maybe_hello(c, id, &body))
			note_stranger(c, id, &body);
	} else {
		c->peers[*peer].heard_ms = wall_ms();
		err = rt_wire_decode_sync(zmq_msg_data(&body), zmq_msg_size(&body), out);
		if (err)
			err = rt_fail(err, "daemon %s sent a bad frame: %s",
				      peer_name(c, *peer, name, sizeof(name)), rt_last_error());
		else if ((*out)->body_case == KB__SYNC__BODY_PROGRESS) {
			/* counts as progress only if its count moved on */
			if ((*out)->progress->events > c->peers[*peer].events) {
				c->peers[*peer].events = (*out)->progress->events;
				*taken = TAKEN_PROGRESS;
			}
			/* inside a long window: how far its simulation got */
			if ((*out)->progress->now_ps > c->progress_ps) {
				c->progress_ps = (*out)->progress->now_ps;
				show_progress(c, c->st.windows + 1, c->progress_ps, false);
			}
			rt_wire_free_sync(*out);
			*out = NULL;
		} else {
			*taken = TAKEN_FRAME;
		}
	}
	zmq_msg_close(id);
	zmq_msg_close(&body);
	return err;
}

/* Receives one frame within `wait_ms` (0: only one already queued);
 * TAKEN_NOTHING when none came. */
static enum rt_err take_frame(struct rt_coord *c, int wait_ms, uint32_t *peer, Kb__Sync **out,
			      enum taken *taken)
{
	zmq_msg_t id;

	*taken = TAKEN_NOTHING;
	*out = NULL;
	if (wait_ms && wait_ms != c->rcvtimeo_ms) {
		if (RT_SOCK_SET_INT(c->sock, "coordinator", ZMQ_RCVTIMEO, wait_ms))
			return RT_ETRANSPORT;
		c->rcvtimeo_ms = wait_ms;
	}
	zmq_msg_init(&id);
	if (zmq_msg_recv(&id, c->sock, wait_ms ? 0 : ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(&id);
		return RT_EOK;
	}
	return finish_recv(c, &id, peer, out, taken);
}

/* An error text a daemon sent, printable and bounded. */
static enum rt_err peer_error(const Kb__Error *e, const char *fallback)
{
	char line[RT_ERR_LINE];

	enum rt_err code = e->usage ? RT_EUSAGE : RT_EPEER;

	if (!e->message || !e->message[0])
		return rt_fail(code, "%s", fallback);
	return rt_fail(code, "%s", escape_bytes(e->message, strlen(e->message), 600, line,
						    sizeof(line)));
}

/* A daemon died or a signal came: a frame it sent just before (ERROR, or
 * garbage) usually says more, so look through what is queued (briefly)
 * before giving up. Frames from healthy daemons are passed over. */
static enum rt_err explain_failure(struct rt_coord *c, enum rt_err err)
{
	uint64_t deadline = wall_ms() + 300;
	struct rt_error kept;

	if (err == RT_EINTERRUPTED)
		return err;
	rt_err_keep(&kept, err);
	while (wall_ms() < deadline) {
		zmq_pollitem_t item = { .socket = c->sock, .events = ZMQ_POLLIN };
		Kb__Sync *s = NULL;
		uint32_t peer;
		enum taken taken;
		enum rt_err got;

		if (zmq_poll(&item, 1, (long)(deadline - wall_ms())) <= 0)
			break;
		got = take_frame(c, 0, &peer, &s, &taken);
		if (got)
			return got;
		if (taken != TAKEN_FRAME)
			continue;
		if (s->body_case == KB__SYNC__BODY_ERROR) {
			got = peer_error(s->error, kept.line);
			rt_wire_free_sync(s);
			return got;
		}
		rt_wire_free_sync(s);
	}
	return rt_err_restore(&kept);
}

/* What the coordinator is waiting for, named only if the watchdog fires. */
enum wait_for { WAIT_READY, WAIT_DONE, WAIT_BYE };

static void describe_wait(const struct rt_coord *c, enum wait_for what, uint64_t window,
			  char *buf, size_t cap);

static enum rt_err watchdog_fired(const struct rt_coord *c, enum wait_for what, uint64_t window)
{
	char waiting_for[512];

	describe_wait(c, what, window, waiting_for, sizeof(waiting_for));
	if (what == WAIT_READY && c->agents)
		return rt_fail(RT_ETIMEOUT, "no agent joined for %s within %llu s (start `kernbench "
			       "agent --coordinator %s` there)", waiting_for,
			       (unsigned long long)(c->ready_timeout_ms / 1000), c->endpoint);
	return rt_fail(RT_ETIMEOUT, "%s did not answer within %llu ms (watchdog; "
		       "set run.watchdog_ms to change)", waiting_for,
		       (unsigned long long)c->job->config.watchdog_ms);
}

#define LIVE_SAMPLE_MS 250 /* how often the waited-for daemons' CPU clocks are read */
#define LIVE_CPU_SHARE 100 /* alive: at least 1/100 of a core since the last read */

/* Whether a daemon this wait is for consumed CPU since the last sample at
 * more than 1% of a core (ADR 0035). Computing inside one long event (a
 * data-mode kernel start can take minutes on a loaded machine) is
 * progress; a stopped, blocked or deadlocked daemon uses next to nothing
 * (its receive timeouts cost microseconds a second). Each waited daemon's
 * clock is re-read at every sample, so a trickle never adds up. */
static bool peers_computing(struct rt_coord *c, enum wait_for what)
{
	uint64_t now = wall_ms(), since = now - c->cpu_sampled_ms;
	bool computing = false;

	if (!c->hooks || !c->hooks->cpu_ns || since < LIVE_SAMPLE_MS)
		return false;
	c->cpu_sampled_ms = now;
	for (uint32_t i = 0; i < c->n_peers; i++) {
		struct peer *p = &c->peers[i];
		uint64_t cpu;

		if (!p->present || (what == WAIT_READY ? p->ready : p->answered))
			continue;
		cpu = c->hooks->cpu_ns(c->hooks->arg, i);
		if (cpu == RT_COORD_CPU_UNKNOWN)
			continue;
		if (p->cpu_ns && cpu > p->cpu_ns &&
		    cpu - p->cpu_ns >= since * (1000000 / LIVE_CPU_SHARE))
			computing = true;
		p->cpu_ns = cpu;
	}
	return computing;
}

/* Waits for one frame from a daemon; keeps an eye on the hooks and the
 * watchdog. A blocking receive, not a poll: the fewest system calls on the
 * path of every window. Signals and ended children (hooks->fd) are looked
 * at after every idle slice (RECV_SLICE_MS) and every 64 waits, heartbeats
 * (keep_agents, tick) between frames. The watchdog counts only time this
 * process could run without any daemon making progress: a PROGRESS
 * heartbeat with more events, or CPU a waited-for daemon consumed
 * (peers_computing), resets it, and a receive that returns late (the
 * process was stopped, e.g. Ctrl-Z) counts only what it asked for. Strangers' frames
 * neither count nor end the run. On success *peer is the sender and *out
 * its decoded frame (caller frees). */
static enum rt_err recv_from_any(struct rt_coord *c, uint32_t *peer, Kb__Sync **out,
				 enum wait_for what, uint64_t window)
{
	uint64_t budget = what == WAIT_READY && c->ready_timeout_ms ? c->ready_timeout_ms
								     : c->job->config.watchdog_ms;
	uint64_t idle = 0;
	enum taken taken = TAKEN_NOTHING;
	bool watch = false;
	enum rt_err err;

	for (;;) {
		uint64_t slice, started, took;

		if (idle >= budget)
			return watchdog_fired(c, what, window);
		err = keep_agents(c);
		if (!err && c->hooks && c->hooks->tick)
			err = c->hooks->tick(c->hooks->arg);
		if (err)
			return err;
		if ((watch || !(++c->recvs % 64)) && c->hooks && c->hooks->fd >= 0) {
			err = c->hooks->on_fd(c->hooks->arg);
			if (err)
				return explain_failure(c, err);
		}
		slice = budget - idle < RECV_SLICE_MS ? budget - idle : RECV_SLICE_MS;
		started = wall_ms();
		err = take_frame(c, (int)slice, peer, out, &taken);
		if (err || taken == TAKEN_FRAME)
			return err;
		watch = taken == TAKEN_NOTHING;
		/* an agent's heartbeat while others are missing is no progress;
		 * a daemon computing in a long event is (liveness, ADR 0035) */
		if ((taken == TAKEN_PROGRESS && !(c->agents && what == WAIT_READY)) ||
		    peers_computing(c, what)) {
			idle = 0;
			started = wall_ms();
		}
		took = wall_ms() - started;
		idle += took < slice ? took : slice;
	}
}

/* Whether `s` is a usable mesh endpoint: "tcp://" and printable, no
 * space, shorter than the field. */
static bool mesh_endpoint_ok(const char *s)
{
	size_t len = strlen(s);

	if (strncmp(s, "tcp://", 6) || len <= 6 || len >= RT_COORD_MESH_ENDPOINT_MAX)
		return false;
	for (size_t k = 0; k < len; k++)
		if (!isgraph((unsigned char)s[k]))
			return false;
	return true;
}

/* An agent's READY says where its neighbours send it messages and the
 * CURVE public key its mesh socket serves with (ADR 0066). */
static enum rt_err take_mesh_address(struct rt_coord *c, uint32_t i, const Kb__Ready *r)
{
	char name[128];
	const char *ep = r->mesh_endpoint ? r->mesh_endpoint : "";
	const char *key = r->mesh_key ? r->mesh_key : "";
	uint8_t raw[32];

	if (!mesh_endpoint_ok(ep) || strlen(key) != 40 || !zmq_z85_decode(raw, key))
		return rt_fail(RT_EPROTOCOL, "%s sent READY without a usable mesh endpoint and key "
			       "(tcp://ADDRESS:PORT and a 40-character Z85 key)",
			       peer_name(c, i, name, sizeof(name)));
	snprintf(c->peers[i].mesh_endpoint, sizeof(c->peers[i].mesh_endpoint), "%s", ep);
	snprintf(c->peers[i].mesh_key, sizeof(c->peers[i].mesh_key), "%s", key);
	return RT_EOK;
}

static enum rt_err check_ready(struct rt_coord *c, uint32_t i, const Kb__Ready *r)
{
	const struct rt_topology *t = c->topo;
	size_t k = 0;
	char name[128];

	for (uint32_t id = 0; id < t->n_components; id++) {
		if (c->peer_of[id] != i)
			continue;
		if (k >= r->n_components || r->components[k] != id)
			return rt_fail(RT_EPROTOCOL, "daemon %s announced components that do not match "
				       "the topology (component %u missing)",
				       peer_name(c, i, name, sizeof(name)), id);
		k++;
	}
	if (k != r->n_components || r->daemon != i)
		return rt_fail(RT_EPROTOCOL, "daemon %s announced a different daemon or components",
			       peer_name(c, i, name, sizeof(name)));
	/* the routing id already matched; READY must carry the token too */
	if (r->token.len != strlen(c->peers[i].token) ||
	    memcmp(r->token.data, c->peers[i].token, r->token.len))
		return rt_fail(RT_EPROTOCOL, "daemon %s sent READY without its token",
			       peer_name(c, i, name, sizeof(name)));
	if (!c->peers[i].present)
		return rt_fail(RT_EPROTOCOL, "daemon %s is not hosted here",
			       peer_name(c, i, name, sizeof(name)));
	if (c->agents && take_mesh_address(c, i, r))
		return RT_EPROTOCOL;
	c->peers[i].ready = true;
	c->peers[i].next_local_ps = r->next_local_ps;
	if (r->pid)
		c->peers[i].pid = r->pid;
	return RT_EOK;
}

/* Names the daemons that have not answered yet, for the watchdog. */
static void describe_wait(const struct rt_coord *c, enum wait_for what, uint64_t window,
			  char *buf, size_t cap)
{
	size_t used;
	char name[128];
	int shown = 0;

	if (what == WAIT_DONE)
		used = (size_t)snprintf(buf, cap, "window %llu: ", (unsigned long long)window);
	else
		used = (size_t)snprintf(buf, cap, "%s", what == WAIT_BYE ? "shutdown: " : "");
	for (uint32_t i = 0; i < c->n_peers && used < cap; i++) {
		bool waiting = what == WAIT_READY ? !c->peers[i].ready : !c->peers[i].answered;

		if (!waiting || !c->peers[i].present)
			continue;
		if (shown++ == (c->agents ? 8 : 3)) {
			snprintf(buf + used, cap - used, ", ...");
			break;
		}
		used += (size_t)snprintf(buf + used, cap - used, "%s%s%s", shown > 1 ? ", " : "",
					 c->labels ? "" : "daemon ",
					 peer_name(c, i, name, sizeof(name)));
	}
}

#define GATHER_MS 5000 /* how long the others of a round may take to answer */

/* Whether participant `i` is still to answer the round `what` waits for. */
static bool awaited(const struct rt_coord *c, uint32_t i, enum wait_for what)
{
	const struct peer *p = &c->peers[i];

	return p->present && (what == WAIT_READY ? !p->ready : !p->answered);
}

/* What woke a gather: a frame, a stop signal, other news on the hooks'
 * fd (a daemon that ended after its ERROR), or nothing in time. */
enum wake { WAKE_FRAME, WAKE_STOP, WAKE_OTHER, WAKE_NONE };

/* Waits up to `ms` for a frame while gathering. A stop signal ends the
 * gather at once, its line in *stop: the engine that sent it (mpirun,
 * Slurm) may kill this process a second later, and a host that died
 * never answers. */
static enum wake gather_wait(struct rt_coord *c, uint64_t ms, enum rt_err *stop)
{
	zmq_pollitem_t items[2] = { { .socket = c->sock, .events = ZMQ_POLLIN },
				    { .fd = c->hooks ? c->hooks->fd : -1, .events = ZMQ_POLLIN } };
	int n = c->hooks && c->hooks->fd >= 0 ? 2 : 1;

	if (zmq_poll(items, n, (long)ms) <= 0)
		return WAKE_NONE;
	if (items[0].revents & ZMQ_POLLIN)
		return WAKE_FRAME;
	*stop = c->hooks->on_fd(c->hooks->arg);
	return *stop == RT_EINTERRUPTED ? WAKE_STOP : WAKE_OTHER;
}

/* Participant `first` reported a failure (`e`). Several often fail at once
 * (every kernel host refusing the same --arg), and which frame comes first
 * depends on the machine: so the others of the round are heard out (each
 * answers DONE, READY or ERROR; at most GATHER_MS, or until something else
 * ends the wait) and the line is the failure of the lowest participant,
 * with how many others failed: the same text run after run. */
static enum rt_err gather_failures(struct rt_coord *c, uint32_t first, const Kb__Error *e,
				   enum wait_for what)
{
	bool *settled = calloc(c->n_peers ? c->n_peers : 1, sizeof(*settled));
	/* no longer than a silence the watchdog would tolerate */
	uint64_t deadline = wall_ms() + (c->job->config.watchdog_ms < GATHER_MS
						 ? c->job->config.watchdog_ms : GATHER_MS);
	uint32_t lowest = first, more = 0;
	char name[128];
	enum rt_err err, stop = RT_EOK;
	enum wake wake = WAKE_NONE;
	Kb__Sync *kept = NULL;

	err = peer_error(e, peer_name(c, first, name, sizeof(name)));
	if (!settled)
		return err;
	settled[first] = true;
	for (;;) {
		bool waiting = false;
		Kb__Sync *s = NULL;
		uint32_t i;
		enum taken taken;
		uint64_t now = wall_ms();

		for (uint32_t k = 0; k < c->n_peers && !waiting; k++)
			waiting = awaited(c, k, what) && !settled[k];
		if (!waiting || now >= deadline)
			break;
		wake = gather_wait(c, deadline - now, &stop);
		if (wake == WAKE_OTHER)
			continue;
		if (wake != WAKE_FRAME || take_frame(c, 0, &i, &s, &taken))
			break;
		if (taken != TAKEN_FRAME)
			continue;
		settled[i] = true;
		if (s->body_case == KB__SYNC__BODY_ERROR) {
			more++;
			if (i < lowest) {
				lowest = i;
				rt_wire_free_sync(kept);
				kept = s;
				continue;
			}
		}
		rt_wire_free_sync(s);
	}
	if (wake == WAKE_STOP)
		err = stop;
	else /* again: news on the hooks' fd may have set the line since */
		err = peer_error(kept ? kept->error : e, peer_name(c, lowest, name, sizeof(name)));
	if (more && wake != WAKE_STOP) /* rt_fail formats aside: it may quote the last line */
		err = rt_fail(err, "%s (and %u more daemon%s failed)", rt_last_error(), more,
			      more == 1 ? "" : "s");
	rt_wire_free_sync(kept);
	free(settled);
	return err;
}

static enum rt_err frame_error(struct rt_coord *c, uint32_t i, Kb__Sync *s, const char *expected,
			       enum wait_for what)
{
	char name[128];

	peer_name(c, i, name, sizeof(name));
	if (s->body_case == KB__SYNC__BODY_ERROR)
		return gather_failures(c, i, s->error, what);
	return rt_fail(RT_EPROTOCOL, "daemon %s sent frame type %d, expected %s", name,
		       s->body_case, expected);
}

static enum rt_err explain_unreachable(struct rt_coord *c, enum rt_err err);

/* Every agent learns where every host's mesh socket is and its key
 * (ADR 0066), before the first GRANT: the messages of a window go
 * agent to agent, only the barrier comes here. */
static enum rt_err send_mesh(struct rt_coord *c)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Mesh mesh = KB__MESH__INIT;
	Kb__MeshPeer *rows = calloc(c->n_peers ? c->n_peers : 1, sizeof(*rows));
	Kb__MeshPeer **ptrs = calloc(c->n_peers ? c->n_peers : 1, sizeof(*ptrs));
	enum rt_err err = RT_EOK;

	if (!rows || !ptrs)
		err = rt_fail(RT_ENOMEM, "coordinator: out of memory");
	for (uint32_t i = 0; !err && i < c->n_peers; i++) {
		kb__mesh_peer__init(&rows[i]);
		rows[i].host = i;
		rows[i].endpoint = c->peers[i].mesh_endpoint;
		rows[i].key = c->peers[i].mesh_key;
		ptrs[i] = &rows[i];
	}
	mesh.n_peers = c->n_peers;
	mesh.peers = ptrs;
	mesh.fanout = c->fanout;
	sync.body_case = KB__SYNC__BODY_MESH;
	sync.mesh = &mesh;
	for (uint32_t i = 0; !err && i < c->n_peers; i++)
		err = send_to(c, i, &sync);
	free(rows);
	free(ptrs);
	return err ? explain_unreachable(c, err) : RT_EOK;
}

static enum rt_err handshake(struct rt_coord *c)
{
	uint32_t ready = 0;

	while (ready < c->n_present) {
		Kb__Sync *s = NULL;
		uint32_t i;
		enum rt_err err = recv_from_any(c, &i, &s, WAIT_READY, 0);

		if (err)
			return err;
		if (s->body_case != KB__SYNC__BODY_READY || c->peers[i].ready)
			err = frame_error(c, i, s, "READY once", WAIT_READY);
		else
			err = check_ready(c, i, s->ready);
		rt_wire_free_sync(s);
		if (err)
			return err;
		ready++;
	}
	return c->agents ? send_mesh(c) : RT_EOK;
}

/* ---------------------------------------------------------------- windows */

/* Queues `e` (borrowed) for p's next GRANT. */
static enum rt_err push_inbound(struct peer *p, Kb__Envelope *e)
{
	if (p->n_in == p->cap_in) {
		size_t cap = p->cap_in ? p->cap_in * 2 : 64;
		Kb__Envelope **grown = realloc(p->inbound, cap * sizeof(*grown));

		if (!grown)
			return rt_fail(RT_ENOMEM, "coordinator: inbound queue cannot grow");
		p->inbound = grown;
		p->cap_in = cap;
	}
	p->inbound[p->n_in++] = e;
	return RT_EOK;
}

/* An agent's coordinator: a message for another host waits (copied) for
 * the agent's DONE. Crossing hosts takes at least the global lookahead, so
 * it is due at or after the global window's end. */
static enum rt_err send_away(struct rt_coord *c, uint32_t from, const Kb__Envelope *e)
{
	Kb__Envelope *copy;
	char name[128];

	if (e->deliver_ps < c->horizon)
		return rt_fail(RT_EPROTOCOL, "daemon %s sent a message to another host due at %llu ps, "
			       "inside the global window ending %llu ps",
			       peer_name(c, from, name, sizeof(name)),
			       (unsigned long long)e->deliver_ps, (unsigned long long)c->horizon);
	if (c->n_away == c->cap_away) {
		size_t cap = c->cap_away ? c->cap_away * 2 : 64;
		Kb__Envelope **grown = realloc(c->away, cap * sizeof(*grown));

		if (!grown)
			return rt_fail(RT_ENOMEM, "coordinator: outbound queue cannot grow");
		c->away = grown;
		c->cap_away = cap;
	}
	copy = malloc(sizeof(*copy) + e->payload.len);
	if (!copy)
		return rt_fail(RT_ENOMEM, "coordinator: outbound queue cannot grow");
	*copy = *e;
	copy->base.unknown_fields = NULL;
	copy->base.n_unknown_fields = 0;
	copy->payload.data = (uint8_t *)(copy + 1);
	if (e->payload.len)
		memcpy(copy->payload.data, e->payload.data, e->payload.len);
	c->away[c->n_away++] = copy;
	return RT_EOK;
}

static enum rt_err route(struct rt_coord *c, uint32_t from, const Kb__Done *done, uint64_t end,
			 uint64_t *min_deliver, uint64_t *routed)
{
	const struct rt_topology *t = c->topo;
	char name[128];

	for (size_t k = 0; k < done->n_outbound; k++) {
		Kb__Envelope *e = done->outbound[k];
		struct peer *p;

		if (e->src >= t->n_components || e->dst >= t->n_components ||
		    c->peer_of[e->src] != from || c->peer_of[e->dst] == from)
			return rt_fail(RT_EPROTOCOL, "daemon %s routed a message %u -> %u it may not send",
				       peer_name(c, from, name, sizeof(name)), e->src, e->dst);
		if (e->deliver_ps < end)
			return rt_fail(RT_EPROTOCOL,
				       "daemon %s sent a message due at %llu ps inside the window ending %llu ps",
				       peer_name(c, from, name, sizeof(name)),
				       (unsigned long long)e->deliver_ps, (unsigned long long)end);
		if (c->peer_of[e->dst] == RT_COORD_AWAY) {
			enum rt_err err = send_away(c, from, e);

			if (err)
				return err;
			(*routed)++;
			continue;
		}
		p = &c->peers[c->peer_of[e->dst]];
		if (push_inbound(p, e))
			return RT_ENOMEM;
		if (e->deliver_ps < *min_deliver)
			*min_deliver = e->deliver_ps;
		(*routed)++;
	}
	return RT_EOK;
}

/* An agent's DONE (ADR 0066): its messages went to their hosts over the
 * mesh; here only how many each host is to receive, and the earliest of
 * their delivery times (a pending time of the run until they arrive). */
static enum rt_err count_mesh(struct rt_coord *c, uint32_t from, const Kb__Done *done,
			      uint64_t *min_deliver, uint64_t *routed)
{
	char name[128];

	if (done->n_outbound || done->n_sent_to > c->n_peers ||
	    (from < done->n_sent_to && done->sent_to[from]))
		return rt_fail(RT_EPROTOCOL, "%s sent messages through the coordinator or to "
			       "itself (they go agent to agent)", peer_name(c, from, name, sizeof(name)));
	for (size_t h = 0; h < done->n_sent_to; h++) {
		uint64_t n = done->sent_to[h];

		if (!n)
			continue;
		c->peers[h].expect += n;
		c->peers[h].fresh = true;
		*routed += n;
	}
	if (done->next_sent_ps < *min_deliver)
		*min_deliver = done->next_sent_ps;
	return RT_EOK;
}

/* A top host's DONE in the tree barrier (ADR 0067): its subtree's counts
 * and earliest times, combined on the way up. */
static enum rt_err count_tree(struct rt_coord *c, uint32_t from, const Kb__Done *done,
			      uint64_t *min_deliver, uint64_t *routed)
{
	char name[128];
	uint32_t hosts = rt_coord_tree_size(from, c->fanout, c->n_peers);

	if (done->hosts != hosts || done->ran > hosts)
		return rt_fail(RT_EPROTOCOL, "%s answered for %u hosts of the barrier's tree, its "
			       "subtree has %u", peer_name(c, from, name, sizeof(name)), done->hosts,
			       hosts);
	if (done->n_outbound || done->n_sent_to > c->n_peers)
		return rt_fail(RT_EPROTOCOL, "%s sent messages through the coordinator (they go "
			       "agent to agent)", peer_name(c, from, name, sizeof(name)));
	for (size_t h = 0; h < done->n_sent_to; h++)
		c->peers[h].expect += done->sent_to[h];
	for (size_t h = 0; h < done->n_sent_to; h++)
		*routed += done->sent_to[h];
	if (done->next_sent_ps < *min_deliver)
		*min_deliver = done->next_sent_ps;
	return RT_EOK;
}

/* Collects every DONE of window k; returns the earliest pending time. */
static enum rt_err collect_done(struct rt_coord *c, uint64_t k, uint64_t end, uint32_t granted,
				uint64_t *next, uint64_t *routed_now)
{
	uint64_t min_time = RT_TIME_NEVER;

	*routed_now = 0;
	for (uint32_t got = 0; got < granted;) {
		char name[128];
		Kb__Sync *s = NULL;
		uint32_t i;
		enum rt_err err = recv_from_any(c, &i, &s, WAIT_DONE, k);

		if (err)
			return err;
		if (s->body_case != KB__SYNC__BODY_DONE || c->peers[i].answered)
			err = frame_error(c, i, s, "one DONE", WAIT_DONE);
		else if (s->done->window != k)
			err = rt_fail(RT_EPROTOCOL, "daemon %s answered window %llu during window %llu",
				      peer_name(c, i, name, sizeof(name)),
				      (unsigned long long)s->done->window, (unsigned long long)k);
		else if (c->fanout)
			err = count_tree(c, i, s->done, &min_time, routed_now);
		else if (c->agents)
			err = count_mesh(c, i, s->done, &min_time, routed_now);
		else
			err = route(c, i, s->done, end, &min_time, routed_now);
		if (err) {
			rt_wire_free_sync(s);
			return err;
		}
		err = keep_in_round(c, s); /* keeps routed envelopes alive */
		if (err) {
			rt_wire_free_sync(s);
			return err;
		}
		c->peers[i].answered = true;
		c->peers[i].next_local_ps = s->done->next_local_ps;
		got++;
	}
	/* daemons left out of this window keep the next time they reported;
	 * with the tree, the top hosts' DONEs speak for their subtrees */
	for (uint32_t i = 0; i < (c->fanout && c->fanout < c->n_peers ? c->fanout : c->n_peers); i++)
		if (c->peers[i].present && c->peers[i].next_local_ps < min_time)
			min_time = c->peers[i].next_local_ps;
	*next = min_time;
	return RT_EOK;
}

/* A participant we could not send to: a daemon that died closes its
 * socket before its parent hears of it, so wait (briefly) for the hooks'
 * descriptor to say why (the launcher's signalfd: "killed by signal 9")
 * before reporting the bare transport error. */
static enum rt_err explain_unreachable(struct rt_coord *c, enum rt_err err)
{
	uint64_t deadline = wall_ms() + 1000;
	struct rt_error kept;

	if (!c->hooks || c->hooks->fd < 0)
		return err;
	rt_err_keep(&kept, err);
	while (wall_ms() < deadline) {
		zmq_pollitem_t item = { .fd = c->hooks->fd, .events = ZMQ_POLLIN };
		enum rt_err why;

		if (zmq_poll(&item, 1, 50) > 0 && (why = c->hooks->on_fd(c->hooks->arg)))
			return explain_failure(c, why);
	}
	return rt_err_restore(&kept);
}

/* The tree barrier (ADR 0067): the window goes to the top hosts, with every
 * host's count of messages to wait for, and on down the tree; each host
 * decides itself whether it has anything to run. */
static enum rt_err grant_tree(struct rt_coord *c, uint64_t k, uint64_t start, uint64_t end,
			      uint32_t *granted)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Grant grant = KB__GRANT__INIT;
	uint64_t *expect = calloc(c->n_peers ? c->n_peers : 1, sizeof(*expect));
	enum rt_err err = expect ? RT_EOK : rt_fail(RT_ENOMEM, "coordinator: out of memory");

	for (uint32_t i = 0; expect && i < c->n_peers; i++) {
		expect[i] = c->peers[i].expect;
		c->peers[i].answered = true;
	}
	/* a top host whose subtree has no event before the end and was sent
	 * nothing since it was last granted is left out, as the flat barrier
	 * leaves out an idle host: its last DONE still speaks for it */
	grant.window = k;
	grant.start_ps = start;
	grant.end_ps = end;
	grant.n_expect_all = c->n_peers;
	grant.expect_all = expect;
	sync.body_case = KB__SYNC__BODY_GRANT;
	sync.grant = &grant;
	for (uint32_t i = 0; !err && i < c->n_peers && i < c->fanout; i++) {
		struct peer *p = &c->peers[i];
		uint64_t sum = rt_coord_tree_sum(i, c->fanout, c->n_peers, expect);

		if (p->granted_sum != RT_COORD_TREE_UNSEEN && p->granted_sum == sum &&
		    p->next_local_ps >= end)
			continue;
		p->granted_sum = sum;
		p->answered = false;
		err = send_to(c, i, &sync);
		(*granted)++;
	}
	free(expect);
	return err ? explain_unreachable(c, err) : RT_EOK;
}

/* A daemon with no message to receive and nothing due before `end` would
 * run no event in the window: it is left out (no GRANT, no DONE), which
 * saves two messages per idle daemon per window and changes nothing else.
 * Anyone with routed messages is granted, so every inbound list is flushed
 * in the next GRANT (its envelopes live in the previous round's frames). */
static enum rt_err grant_window(struct rt_coord *c, uint64_t k, uint64_t start, uint64_t end,
				uint32_t *granted)
{
	enum rt_err err = RT_EOK;

	*granted = 0;
	if (c->fanout)
		return grant_tree(c, k, start, end, granted);
	for (uint32_t i = 0; i < c->n_peers && !err; i++) {
		struct peer *p = &c->peers[i];

		if (!p->present || (!p->n_in && !p->fresh && p->next_local_ps >= end)) {
			p->answered = true;
			continue;
		}
		err = send_grant(c, i, k, start, end);
		(*granted)++;
	}
	return err ? explain_unreachable(c, err) : RT_EOK;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > RT_TIME_NEVER - b ? RT_TIME_NEVER : a + b;
}

/* --progress: a bar redrawn at most once a second on a terminal, or a
 * line every RT_PROGRESS_EVERY_S seconds (auto: only once the run has
 * gone on for RT_PROGRESS_QUIET_S) when stderr is a log. `t` is the
 * simulated time reached, from window starts or daemons' heartbeats. */
static void show_progress(struct rt_coord *c, uint64_t k, uint64_t t, bool final)
{
	uint64_t now = wall_ms();
	enum rt_progress mode = c->job->progress;
	bool bar = mode == RT_PROGRESS_BAR || (mode == RT_PROGRESS_AUTO && isatty(STDERR_FILENO));

	if (c->sub || c->job->quiet || mode == RT_PROGRESS_OFF)
		return;
	if (!c->progress_start_ms)
		c->progress_start_ms = now;
	if (t < c->progress_ps)
		t = c->progress_ps;
	if (bar) {
		if (!final && now - c->last_progress_ms < 1000)
			return;
		c->last_progress_ms = now;
		fprintf(stderr, "\rkernbench: simulated %llu.%06llu us, window %llu%s",
			(unsigned long long)(t / 1000000), (unsigned long long)(t % 1000000),
			(unsigned long long)k, final ? "\n" : "");
		return;
	}
	if (mode == RT_PROGRESS_AUTO && now - c->progress_start_ms < RT_PROGRESS_QUIET_S * 1000)
		return; /* a short run in a log says nothing */
	if (final ? !c->progress_printed && mode == RT_PROGRESS_AUTO
		  : now - (c->progress_printed ? c->last_progress_ms : c->progress_start_ms) <
			    RT_PROGRESS_EVERY_S * 1000)
		return;
	c->last_progress_ms = now;
	c->progress_printed = true;
	if (final) /* the report gives the simulated time it ended at */
		fprintf(stderr, "kernbench: progress: done, %llu window%s, %.1f s\n",
			(unsigned long long)k, k == 1 ? "" : "s",
			(double)(now - c->progress_start_ms) / 1000.0);
	else
		fprintf(stderr, "kernbench: progress: simulated %llu.%06llu us, window %llu, %.0f s\n",
			(unsigned long long)(t / 1000000), (unsigned long long)(t % 1000000),
			(unsigned long long)k, (double)(now - c->progress_start_ms) / 1000.0);
}

static void note_window(struct rt_coord *c, uint64_t k, uint64_t t)
{
	struct rt_trace_rec r = { 0 };

	if (c->sub || !c->job->trace_windows || c->job->trace_off ||
	    !rt_trace_wanted(&c->job->trace, 0, t, t))
		return;
	r.ts_ps = t;
	r.val = k;
	r.name = rt_trace_intern(&c->counters, "window");
	r.cat = r.site = RT_TRACE_NONE;
	r.kind = RT_TRACE_COUNTER;
	rt_trace_put(&c->counters, &r); /* out of memory: a counter less */
}

static enum rt_err write_counters(struct rt_coord *c)
{
	char dir[RT_PATH_MAX + 16];

	if (c->sub)
		return RT_EOK; /* the coordinator of the run writes the counters */
	snprintf(dir, sizeof(dir), "%s/%s", c->job->out_dir, RT_PARTS_DIR);
	return rt_trace_flush(&c->counters, dir, "coord", true);
}

/* Runs windows from `t` while anything is pending before `horizon`
 * (RT_TIME_NEVER: to the end of the run). Each window is
 * [t, min(t + L, horizon)); c->next_ps is then the earliest pending time. */
static enum rt_err run_windows(struct rt_coord *c, uint64_t t, uint64_t horizon)
{
	struct rt_coord_stats *st = &c->st;
	enum rt_err err = RT_EOK;
	uint64_t started_us = wall_us();
	double started_cpu = c->sub ? 0 : process_cpu_s();

	for (; t < horizon && !err; c->k++) {
		uint64_t end = sat_add(t, c->lookahead_ps), next = RT_TIME_NEVER, routed_now = 0;
		uint32_t granted = 0;

		if (end > horizon)
			end = horizon;
		note_window(c, c->k, t);
		err = grant_window(c, c->k, t, end, &granted);
		free_round(c);
		if (!err)
			err = collect_done(c, c->k, end, granted, &next, &routed_now);
		st->windows++;
		st->grants += granted;
		st->routed += err ? 0 : routed_now;
		st->last_window_ps = t;
		show_progress(c, st->windows, t, false);
		/* skip ahead over idle time, but never shorter than a lookahead */
		t = next == RT_TIME_NEVER ? next : (next > end ? next : end);
	}
	c->next_ps = t;
	st->windows_wall_s += (double)(wall_us() - started_us) * 1e-6;
	if (!c->sub)
		st->windows_cpu_s += process_cpu_s() - started_cpu;
	return err;
}

static uint64_t first_event(const struct rt_coord *c)
{
	uint64_t t = RT_TIME_NEVER;

	for (uint32_t i = 0; i < c->n_peers; i++)
		if (c->peers[i].present && c->peers[i].next_local_ps < t)
			t = c->peers[i].next_local_ps;
	return t;
}

void rt_end_reports_release(struct rt_end_reports *r)
{
	for (uint32_t i = 0; r->byes && i < r->n_byes; i++)
		rt_wire_free_sync(r->byes[i]);
	free(r->byes);
	free(r->by_id);
	memset(r, 0, sizeof(*r));
}

void rt_coord_take_reports(struct rt_coord *c, struct rt_end_reports *out)
{
	*out = c->reports;
	memset(&c->reports, 0, sizeof(c->reports));
}

/* Indexes the reports of daemon `i`'s BYE, which must cover exactly the
 * components it hosts. */
static enum rt_err index_reports(struct rt_coord *c, uint32_t i, const Kb__Bye *bye)
{
	const struct rt_topology *t = c->topo;
	char name[128];
	uint32_t hosted = c->peers[i].n_hosted;

	for (size_t k = 0; k < bye->n_reports; k++) {
		uint32_t id = bye->reports[k]->component;

		if (id >= t->n_components || c->peer_of[id] != i ||
		    c->reports.by_id[id])
			return rt_fail(RT_EPROTOCOL, "daemon %s reported on component %u, "
				       "which it does not host (or twice)",
				       peer_name(c, i, name, sizeof(name)), id);
		c->reports.by_id[id] = bye->reports[k];
	}
	if (hosted != bye->n_reports)
		return rt_fail(RT_EPROTOCOL, "daemon %s reported on %zu components, it hosts %u",
			       peer_name(c, i, name, sizeof(name)), bye->n_reports, hosted);
	return RT_EOK;
}

/* One line naming every component that left work unfinished, in component
 * order (the first few in full; the line has to fit an error message). */
static enum rt_err check_unfinished(struct rt_coord *c)
{
	struct rt_buf line;
	uint32_t shown = 0, more = 0;
	enum rt_err err = RT_EOK;

	rt_buf_init(&line);
	for (uint32_t id = 0; id < c->reports.n_components; id++) {
		/* an agent's coordinator has no report of other hosts' components */
		const char *what = c->reports.by_id[id] ? c->reports.by_id[id]->unfinished : NULL;

		if (!what || !*what)
			continue;
		if (line.len + strlen(what) > 760 && shown) {
			more++;
			continue;
		}
		rt_buf_printf(&line, "%s%s", shown++ ? "; " : "", what);
	}
	if (more)
		rt_buf_printf(&line, "; and %u more unfinished component%s", more,
			      more > 1 ? "s" : "");
	if (shown)
		err = rt_fail(RT_EUNFINISHED, "%s", line.data);
	rt_buf_release(&line);
	return err;
}

/* The tally of `path` among what agent `p` shipped (files arrive one after
 * another: the last one first), added if new. NULL: out of memory. */
static struct file_tally *tally_of(struct peer *p, const char *path)
{
	struct file_tally *f;

	if (p->n_files && !strcmp(p->files[p->n_files - 1].path, path))
		return &p->files[p->n_files - 1];
	for (size_t k = 0; k < p->n_files; k++)
		if (!strcmp(p->files[k].path, path))
			return &p->files[k];
	if (p->n_files == p->cap_files) {
		size_t cap = p->cap_files ? p->cap_files * 2 : 16;
		struct file_tally *grown = realloc(p->files, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		p->files = grown;
		p->cap_files = cap;
	}
	f = &p->files[p->n_files];
	*f = (struct file_tally){ .path = strdup(path) };
	if (!f->path)
		return NULL;
	p->n_files++;
	return f;
}

/* FileAck to agent `i`: what of its files was written so far (its credit
 * to send more), or, with `bye`, that its BYE was taken and it may exit.
 * A send that fails is no error here: an agent that is gone is found by
 * the silence rule, and one that left after its BYE needs nothing more. */
static void ack_files(struct rt_coord *c, uint32_t i, bool bye)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__FileAck ack = KB__FILE_ACK__INIT;

	ack.parts = c->peers[i].parts_taken;
	ack.bytes = c->peers[i].bytes_taken;
	ack.bye = bye;
	sync.body_case = KB__SYNC__BODY_FILE_ACK;
	sync.file_ack = &ack;
	send_to(c, i, &sync);
}

/* An agent's output file piece: written by the hook, counted, credited. */
static enum rt_err take_file_part(struct rt_coord *c, uint32_t i, const Kb__FilePart *part)
{
	struct peer *p = &c->peers[i];
	struct file_tally *f = tally_of(p, part->path);
	enum rt_err err;

	if (!f)
		return rt_fail(RT_ENOMEM, "coordinator: out of memory");
	err = c->hooks->on_file(c->hooks->arg, i, part);
	if (err)
		return err;
	f->parts++;
	f->bytes += part->data.len;
	p->parts_taken++;
	p->bytes_taken += part->data.len;
	ack_files(c, i, false);
	return RT_EOK;
}

/* An agent's BYE lists every file it shipped: each must have arrived
 * whole (as many pieces and bytes as it sent), and nothing else. */
static enum rt_err check_files(struct rt_coord *c, uint32_t i, const Kb__Bye *bye)
{
	struct peer *p = &c->peers[i];
	char name[128];
	size_t listed = 0;

	if (!c->agents)
		return RT_EOK;
	peer_name(c, i, name, sizeof(name));
	for (size_t k = 0; k < bye->n_files; k++) {
		const Kb__FileSent *sent = bye->files[k];
		const struct file_tally *f = NULL;

		for (size_t j = 0; j < p->n_files && !f; j++)
			if (!strcmp(p->files[j].path, sent->path))
				f = &p->files[j];
		if (!f || f->parts != sent->parts || f->bytes != sent->bytes)
			return rt_fail(RT_EPEER, "%s: output file %s arrived incomplete: its agent sent "
				       "%llu pieces (%llu bytes), %llu (%llu bytes) arrived", name,
				       sent->path, (unsigned long long)sent->parts,
				       (unsigned long long)sent->bytes,
				       (unsigned long long)(f ? f->parts : 0),
				       (unsigned long long)(f ? f->bytes : 0));
		listed++;
	}
	if (listed != p->n_files) {
		for (size_t j = 0; j < p->n_files; j++) {
			bool found = false;

			for (size_t k = 0; k < bye->n_files && !found; k++)
				found = !strcmp(p->files[j].path, bye->files[k]->path);
			if (!found)
				return rt_fail(RT_EPEER, "%s: output file %s arrived but its agent's BYE "
					       "does not list it", name, p->files[j].path);
		}
		return rt_fail(RT_EPEER, "%s: its agent's BYE lists a file twice", name);
	}
	return RT_EOK;
}

static enum rt_err collect_bye(struct rt_coord *c)
{
	struct rt_end_reports *r = &c->reports;

	r->byes = calloc(c->n_peers, sizeof(*r->byes));
	r->by_id = calloc(c->topo->n_components ? c->topo->n_components : 1, sizeof(*r->by_id));
	if (!r->byes || !r->by_id)
		return rt_fail(RT_ENOMEM, "coordinator: out of memory");
	r->n_components = c->topo->n_components;
	for (uint32_t got = 0; got < c->n_present;) {
		Kb__Sync *s = NULL;
		uint32_t i;
		enum rt_err err = recv_from_any(c, &i, &s, WAIT_BYE, 0);

		if (err)
			return err;
		if (s->body_case == KB__SYNC__BODY_FILE_PART && c->agents && !c->peers[i].answered &&
		    c->hooks && c->hooks->on_file) {
			err = take_file_part(c, i, s->file_part);
			rt_wire_free_sync(s);
			if (err)
				return err;
			continue;
		}
		if (s->body_case != KB__SYNC__BODY_BYE || c->peers[i].answered)
			err = frame_error(c, i, s, "BYE", WAIT_BYE);
		else
			err = index_reports(c, i, s->bye);
		if (!err && s->body_case == KB__SYNC__BODY_BYE)
			err = check_files(c, i, s->bye);
		r->byes[r->n_byes++] = s; /* the index points into it */
		if (err)
			return err;
		c->peers[i].answered = true;
		c->peers[i].gone = true;
		/* everything it sent is written: it may exit (ADR 0050) */
		if (c->agents)
			ack_files(c, i, true);
		got++;
	}
	/* every agent waits for its BYE's ack, queued now: closing the socket
	 * must deliver them (they are alive, so this takes a round trip),
	 * where a failed run's socket drops what it still holds */
	if (c->agents && RT_SOCK_SET_INT(c->sock, "coordinator", ZMQ_LINGER, RT_COORD_SILENCE_MS))
		return RT_ETRANSPORT;
	return check_unfinished(c);
}

enum rt_err rt_coord_run(struct rt_coord *c, const struct rt_coord_hooks *hooks,
			 struct rt_coord_stats *st)
{
	enum rt_err err = rt_coord_start(c, hooks);

	if (!err) {
		err = run_windows(c, first_event(c), RT_TIME_NEVER);
		show_progress(c, c->st.windows, c->st.last_window_ps, true);
	}
	free_round(c);
	if (!err)
		err = rt_coord_finish(c);
	*st = c->st;
	return err;
}

enum rt_err rt_coord_start(struct rt_coord *c, const struct rt_coord_hooks *hooks)
{
	memset(&c->st, 0, sizeof(c->st));
	c->hooks = hooks;
	return handshake(c);
}

uint64_t rt_coord_next_ps(const struct rt_coord *c)
{
	uint64_t t = first_event(c);

	for (uint32_t i = 0; i < c->n_peers; i++)
		for (size_t k = 0; k < c->peers[i].n_in; k++)
			if (c->peers[i].inbound[k]->deliver_ps < t)
				t = c->peers[i].inbound[k]->deliver_ps;
	return t;
}

enum rt_err rt_coord_step(struct rt_coord *c, Kb__Sync **grant_p, struct rt_coord_away *out)
{
	Kb__Sync *s = *grant_p;

	*grant_p = NULL;
	return rt_coord_step_frames(c, s->grant, &s, 1, out);
}

enum rt_err rt_coord_step_frames(struct rt_coord *c, const Kb__Grant *g, Kb__Sync **frames,
				 size_t n_frames, struct rt_coord_away *out)
{
	const struct rt_topology *t = c->topo;
	uint64_t from;
	enum rt_err err = RT_EOK;

	free_away(c);
	/* the frames' envelopes wait in inbound lists until they are granted */
	for (size_t k = 0; k < n_frames; k++) {
		if (!err)
			err = keep_in_round(c, frames[k]);
		if (err)
			rt_wire_free_sync(frames[k]);
	}
	if (err)
		return err;
	for (size_t k = 0; k < g->n_inbound; k++) {
		Kb__Envelope *e = g->inbound[k];
		struct peer *p;

		if (e->dst >= t->n_components || c->peer_of[e->dst] == RT_COORD_AWAY ||
		    e->deliver_ps < g->start_ps)
			return rt_fail(RT_EPROTOCOL, "a message for component %u due at %llu ps came "
				       "for the window from %llu ps: not for this host or too early",
				       e->dst, (unsigned long long)e->deliver_ps,
				       (unsigned long long)g->start_ps);
		p = &c->peers[c->peer_of[e->dst]];
		if (push_inbound(p, e))
			return RT_ENOMEM;
	}
	c->horizon = g->end_ps;
	from = rt_coord_next_ps(c);
	err = run_windows(c, from > g->start_ps ? from : g->start_ps, g->end_ps);
	out->envelopes = c->away;
	out->n = c->n_away;
	out->next_ps = rt_coord_next_ps(c);
	return err;
}

enum rt_err rt_coord_finish(struct rt_coord *c)
{
	enum rt_err err = broadcast_shutdown(c, false);

	if (!err)
		err = collect_bye(c);
	if (!err)
		err = write_counters(c);
	return err;
}

const struct rt_coord_stats *rt_coord_stats(const struct rt_coord *c)
{
	return &c->st;
}
