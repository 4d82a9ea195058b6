/* mesh.c — an agent's messages to and from other hosts (mesh.h, ADR 0066).
 *
 * Over 600 lines on purpose: joining the mesh, sending, holding what
 * arrives until its window and the grant tree (forward, combine, send up)
 * all work on one private struct kb_mesh (the peer table, the held frames,
 * the tree's links); apart, that struct would need a header of its own
 * that only these parts may use. */
#include "mesh.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "rt/buf.h"
#include "rt/coord.h"
#include "rt/event.h"
#include "rt/grow.h"
#include "rt/keys.h"
#include "rt/sock.h"
#include "rt/wire.h"

#define KEY_Z85 41
#define ENDPOINT_MAX 256
#define ZAP_TABLE_WAIT_S 10 /* a neighbour may connect before our table came */

/* Another host, as the coordinator's table gives it. */
struct mesh_host {
	char endpoint[ENDPOINT_MAX];
	char key[KEY_Z85];
	uint8_t raw_key[32];
	void *push;      /* our connection to it (NULL: none yet) */
	bool neighbour;  /* a link joins our components to its */
};

struct kb_mesh {
	void *zctx;
	void *pull;                 /* bound: what other hosts send us */
	char endpoint[ENDPOINT_MAX];
	char public_key[KEY_Z85], secret_key[KEY_Z85];
	const struct rt_topology *topo;
	const uint8_t *host_of_rank;
	uint32_t host, n_hosts;
	struct mesh_host *hosts;
	/* the ZAP handler admits the table's keys, once it is there */
	struct rt_zap *zap;
	atomic_bool closing; /* wakes a ZAP request waiting for the table */
	pthread_mutex_t table_lock;
	pthread_cond_t table_set;
	bool have_table;
	/* Data frames arrived and not yet handed to a window */
	Kb__Sync **held;
	size_t n_held, cap_held;
	uint64_t taken;             /* messages handed to windows so far */
	Kb__Envelope **inbound;     /* kb_mesh_take's array */
	size_t cap_inbound;
	/* the barrier's tree (ADR 0067) */
	uint32_t fanout;            /* 0: flat, the coordinator talks to all */
	uint32_t parent;            /* RT_COORD_TREE_TOP: the coordinator */
	uint32_t first_child, n_children;
	Kb__Sync *grant;            /* from the parent host, not yet taken */
	Kb__Sync **child_done;      /* per child: its DONE of this window */
	bool *child_live;           /* per child: granted this window */
	uint64_t *child_next;       /* per child: its subtree's next time */
	uint64_t *child_sum;        /* ... and expect sum when last granted */
	/* grouping what one window sends, by host */
	Kb__Envelope **group;
	size_t cap_group;
	struct rt_buf frame;
};

/* ------------------------------------------------------------- address */

/* The address this machine reaches `coordinator` from: a UDP socket
 * connected to it (nothing is sent) names the local end the kernel would
 * use. Hosts reach each other where they reach their coordinator. */
static enum rt_err local_address(const char *coordinator, char *ip, size_t cap)
{
	const char *env = getenv("KB_MESH_ADDRESS");
	char host[ENDPOINT_MAX], *colon;
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM }, *res = NULL;
	struct sockaddr_in local;
	socklen_t len = sizeof(local);
	int fd = -1, rc;

	if (env && *env) {
		struct in_addr a;

		if (inet_pton(AF_INET, env, &a) != 1)
			return rt_fail(RT_EUSAGE, "KB_MESH_ADDRESS '%.64s' is not an IPv4 address", env);
		snprintf(ip, cap, "%s", env);
		return RT_EOK;
	}
	snprintf(host, sizeof(host), "%s", strncmp(coordinator, "tcp://", 6) ? coordinator
									       : coordinator + 6);
	colon = strrchr(host, ':');
	if (!colon)
		return rt_fail(RT_EUSAGE, "agent: coordinator address %s has no port", coordinator);
	*colon = '\0';
	rc = getaddrinfo(host, colon + 1, &hints, &res);
	if (!rc)
		fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (rc || fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) ||
	    getsockname(fd, (struct sockaddr *)&local, &len) ||
	    !inet_ntop(AF_INET, &local.sin_addr, ip, (socklen_t)cap)) {
		enum rt_err err = rt_fail(RT_ETRANSPORT, "agent: no local address reaches the "
					  "coordinator at %s (%s): set KB_MESH_ADDRESS", coordinator,
					  rc ? gai_strerror(rc) : strerror(errno));

		if (fd >= 0)
			close(fd);
		if (res)
			freeaddrinfo(res);
		return err;
	}
	close(fd);
	freeaddrinfo(res);
	return RT_EOK;
}

/* ------------------------------------------------------------- ZAP */

/* The host whose mesh key `raw` is, or UINT32_MAX; waits (bounded) for the
 * coordinator's table, which a fast neighbour may beat to this host. */
static uint32_t host_of_key(struct kb_mesh *m, const uint8_t *raw)
{
	struct timespec until;
	uint32_t found = UINT32_MAX;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ZAP_TABLE_WAIT_S;
	pthread_mutex_lock(&m->table_lock);
	while (!m->have_table && !atomic_load(&m->closing))
		if (pthread_cond_timedwait(&m->table_set, &m->table_lock, &until) == ETIMEDOUT)
			break;
	for (uint32_t h = 0; m->have_table && h < m->n_hosts && found == UINT32_MAX; h++)
		if (h != m->host && !memcmp(m->hosts[h].raw_key, raw, 32))
			found = h;
	pthread_mutex_unlock(&m->table_lock);
	return found;
}

/* The mesh's ZAP rule: a key of the table is admitted, and the
 * connection's User-Id is that host's index. */
static bool admit_host(void *arg, const uint8_t key[32], char user[RT_ZAP_USER])
{
	uint32_t host = host_of_key(arg, key);

	if (host == UINT32_MAX)
		return false;
	snprintf(user, RT_ZAP_USER, "%u", host);
	return true;
}

/* ------------------------------------------------------------- sockets */

/* A mesh socket of `type`: no high-water marks, no linger, liveness as on
 * the coordinator's connections (ADR 0019), every option checked. */
static enum rt_err mesh_socket(struct kb_mesh *m, int type, void **out)
{
	const struct rt_sock_opts opts = {
		.who = "agent's mesh socket",
		.max_frame = 1ll << 40,
		.heartbeat_ms = 1000,
		.heartbeat_timeout_ms = 10000,
	};

	return rt_sock_open(m->zctx, type, &opts, out);
}

/* CURVE on a mesh socket: as the server (`server_key` NULL) or as a client
 * of the host whose public key is `server_key`. */
static enum rt_err mesh_curve(struct kb_mesh *m, void *sock, const char *server_key)
{
	const char *who = "agent's mesh socket";
	enum rt_err err;

	if (!server_key) {
		err = RT_SOCK_SET_INT(sock, who, ZMQ_CURVE_SERVER, 1);
		if (!err)
			err = rt_sock_set(sock, who, ZMQ_ZAP_DOMAIN, "ZMQ_ZAP_DOMAIN", "kernbench-mesh", 14);
	} else {
		err = rt_sock_set(sock, who, ZMQ_CURVE_SERVERKEY, "ZMQ_CURVE_SERVERKEY", server_key,
				  KEY_Z85);
		if (!err)
			err = rt_sock_set(sock, who, ZMQ_CURVE_PUBLICKEY, "ZMQ_CURVE_PUBLICKEY",
					  m->public_key, KEY_Z85);
	}
	if (!err)
		err = rt_sock_set(sock, who, ZMQ_CURVE_SECRETKEY, "ZMQ_CURVE_SECRETKEY", m->secret_key,
				  KEY_Z85);
	return err;
}

static enum rt_err bind_pull(struct kb_mesh *m, const char *ip)
{
	char ep[ENDPOINT_MAX];
	size_t len = sizeof(m->endpoint);
	enum rt_err err = mesh_socket(m, ZMQ_PULL, &m->pull);

	if (!err)
		err = mesh_curve(m, m->pull, NULL);
	if (err)
		return err;
	snprintf(ep, sizeof(ep), "tcp://%s:*", ip);
	if (zmq_bind(m->pull, ep))
		return rt_fail(RT_ETRANSPORT, "agent: cannot bind its mesh socket on %s: %s", ep,
			       zmq_strerror(zmq_errno()));
	if (zmq_getsockopt(m->pull, ZMQ_LAST_ENDPOINT, m->endpoint, &len))
		return rt_fail(RT_ETRANSPORT, "agent: cannot read its mesh socket's endpoint: %s",
			       zmq_strerror(zmq_errno()));
	return RT_EOK;
}

enum rt_err kb_mesh_open(void *zctx, const char *coordinator, const struct rt_topology *topo,
			 const uint8_t *host_of_rank, struct kb_mesh **out)
{
	struct kb_mesh *m = calloc(1, sizeof(*m));
	char ip[64];
	enum rt_err err;

	*out = NULL;
	if (!m)
		return rt_fail(RT_ENOMEM, "agent: out of memory");
	m->zctx = zctx;
	m->topo = topo;
	m->host_of_rank = host_of_rank;
	pthread_mutex_init(&m->table_lock, NULL);
	pthread_cond_init(&m->table_set, NULL);
	atomic_init(&m->closing, false);
	rt_buf_init(&m->frame);
	err = local_address(coordinator, ip, sizeof(ip));
	if (!err && zmq_curve_keypair(m->public_key, m->secret_key))
		err = rt_fail(RT_ETRANSPORT, "agent: cannot draw mesh keys: %s",
			      zmq_strerror(zmq_errno()));
	if (!err)
		err = rt_zap_start(zctx, admit_host, m, &m->zap);
	if (!err)
		err = bind_pull(m, ip);
	if (err) {
		kb_mesh_close(&m);
		return err;
	}
	*out = m;
	return RT_EOK;
}

const char *kb_mesh_endpoint(const struct kb_mesh *m)
{
	return m->endpoint;
}

const char *kb_mesh_key(const struct kb_mesh *m)
{
	return m->public_key;
}

void *kb_mesh_socket(struct kb_mesh *m)
{
	return m->pull;
}

/* The host component `id` lives on (UINT32_MAX: none such). */
static uint32_t host_of_component(const struct kb_mesh *m, uint32_t id)
{
	uint32_t rank;

	if (id >= m->topo->n_components)
		return UINT32_MAX;
	rank = m->topo->components[id].rank;
	return rank < RT_MAX_RANKS ? m->host_of_rank[rank] : UINT32_MAX;
}

/* A PUSH connection to host `h`, CURVE with our key pair and its key. */
static enum rt_err connect_host(struct kb_mesh *m, uint32_t h)
{
	struct mesh_host *p = &m->hosts[h];
	enum rt_err err = mesh_socket(m, ZMQ_PUSH, &p->push);

	if (!err)
		err = mesh_curve(m, p->push, p->key);
	if (err)
		return err;
	if (zmq_connect(p->push, p->endpoint))
		return rt_fail(RT_ETRANSPORT, "agent: cannot connect to host %u's mesh at %s: %s", h,
			       p->endpoint, zmq_strerror(zmq_errno()));
	return RT_EOK;
}

/* The table's rows: one per host, in host order, each with an endpoint
 * and a key (the coordinator checked them; checked again, it is the
 * network's). */
static enum rt_err take_table(struct kb_mesh *m, const Kb__Mesh *table)
{
	m->n_hosts = (uint32_t)table->n_peers;
	m->hosts = calloc(m->n_hosts ? m->n_hosts : 1, sizeof(*m->hosts));
	if (!m->hosts)
		return rt_fail(RT_ENOMEM, "agent: out of memory");
	for (uint32_t h = 0; h < m->n_hosts; h++) {
		const Kb__MeshPeer *row = table->peers[h];
		struct mesh_host *p = &m->hosts[h];

		if (row->host != h || !row->endpoint || strncmp(row->endpoint, "tcp://", 6) ||
		    strlen(row->endpoint) >= sizeof(p->endpoint) || !row->key ||
		    strlen(row->key) != KEY_Z85 - 1 || !zmq_z85_decode(p->raw_key, row->key))
			return rt_fail(RT_EPROTOCOL, "agent: the coordinator's mesh table has a bad "
				       "row %u", h);
		snprintf(p->endpoint, sizeof(p->endpoint), "%s", row->endpoint);
		snprintf(p->key, sizeof(p->key), "%s", row->key);
	}
	return RT_EOK;
}

/* This host's place in the barrier's tree: its parent and children are
 * neighbours too (GRANTs come down, DONEs go up over the mesh). */
static enum rt_err take_tree(struct kb_mesh *m, uint32_t fanout)
{
	uint32_t first;

	if (fanout > 64)
		return rt_fail(RT_EPROTOCOL, "agent: the coordinator's barrier fan-out %u is over 64",
			       fanout);
	m->fanout = fanout;
	if (!fanout)
		return RT_EOK;
	m->parent = rt_coord_tree_parent(m->host, fanout);
	first = rt_coord_tree_first_child(m->host, fanout);
	m->first_child = first;
	m->n_children = first >= m->n_hosts ? 0 : m->n_hosts - first < fanout ? m->n_hosts - first
									       : fanout;
	m->child_done = calloc(fanout, sizeof(*m->child_done));
	m->child_live = calloc(fanout, sizeof(*m->child_live));
	m->child_next = calloc(fanout, sizeof(*m->child_next));
	m->child_sum = calloc(fanout, sizeof(*m->child_sum));
	if (!m->child_done || !m->child_live || !m->child_next || !m->child_sum)
		return rt_fail(RT_ENOMEM, "agent: out of memory");
	for (uint32_t j = 0; j < fanout; j++)
		m->child_sum[j] = RT_COORD_TREE_UNSEEN;
	if (m->parent != RT_COORD_TREE_TOP)
		m->hosts[m->parent].neighbour = true;
	for (uint32_t j = 0; j < m->n_children; j++)
		m->hosts[first + j].neighbour = true;
	return RT_EOK;
}

enum rt_err kb_mesh_join(struct kb_mesh *m, uint32_t host, const Kb__Mesh *table)
{
	const struct rt_topology *t = m->topo;
	enum rt_err err;

	if (m->hosts)
		return rt_fail(RT_EPROTOCOL, "agent: a second mesh table from the coordinator");
	m->host = host;
	pthread_mutex_lock(&m->table_lock);
	err = take_table(m, table);
	if (!err && host >= m->n_hosts)
		err = rt_fail(RT_EPROTOCOL, "agent: the mesh table has %u hosts, this is host %u",
			      m->n_hosts, host);
	m->have_table = !err;
	pthread_cond_broadcast(&m->table_set);
	pthread_mutex_unlock(&m->table_lock);
	if (!err)
		err = take_tree(m, table->fanout);
	for (size_t k = 0; !err && k < t->n_links; k++) {
		uint32_t from = host_of_component(m, t->links[k].src);
		uint32_t to = host_of_component(m, t->links[k].dst);

		if (from == host && to != host && to < m->n_hosts)
			m->hosts[to].neighbour = true;
	}
	for (uint32_t h = 0; !err && h < m->n_hosts; h++)
		if (m->hosts[h].neighbour)
			err = connect_host(m, h);
	return err;
}

/* ------------------------------------------------------------- sending */

static enum rt_err send_sync(struct kb_mesh *m, uint32_t h, Kb__Sync *msg);

static enum rt_err send_group(struct kb_mesh *m, uint32_t h, uint64_t window, size_t n)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Data data = KB__DATA__INIT;

	data.host = m->host;
	data.window = window;
	data.n_envelopes = n;
	data.envelopes = m->group;
	sync.body_case = KB__SYNC__BODY_DATA;
	sync.data = &data;
	return send_sync(m, h, &sync);
}

enum rt_err kb_mesh_send(struct kb_mesh *m, uint64_t window, Kb__Envelope *const *envelopes,
			 size_t n, uint64_t *sent_to, uint64_t *first_deliver)
{
	enum rt_err err = RT_EOK;

	*first_deliver = RT_TIME_NEVER;
	memset(sent_to, 0, m->n_hosts * sizeof(*sent_to));
	for (size_t k = 0; k < n; k++) {
		uint32_t h = host_of_component(m, envelopes[k]->dst);

		if (h >= m->n_hosts || h == m->host)
			return rt_fail(RT_EPROTOCOL, "agent: a message for component %u, on no other "
				       "host", envelopes[k]->dst);
		sent_to[h]++;
		if (envelopes[k]->deliver_ps < *first_deliver)
			*first_deliver = envelopes[k]->deliver_ps;
	}
	if (!RT_GROW_TO(m->group, m->cap_group, n, 16))
		return rt_fail(RT_ENOMEM, "agent: out of memory");
	/* one frame per host, its messages in the order they were sent */
	for (uint32_t h = 0; h < m->n_hosts && !err; h++) {
		size_t in_group = 0;

		if (!sent_to[h])
			continue;
		for (size_t k = 0; k < n; k++)
			if (host_of_component(m, envelopes[k]->dst) == h)
				m->group[in_group++] = envelopes[k];
		err = send_group(m, h, window, in_group);
	}
	return err;
}

/* ------------------------------------------------------------- receiving */

static enum rt_err hold(struct kb_mesh *m, Kb__Sync *s)
{
	if (!RT_GROW(m->held, m->cap_held, m->n_held, 16))
		return rt_fail(RT_ENOMEM, "agent: out of memory");
	m->held[m->n_held++] = s;
	return RT_EOK;
}

/* A Data frame from host `from` (its connection's key said so): it names
 * that host, and every message goes from one of its components to one of
 * ours. */
static enum rt_err check_data(const struct kb_mesh *m, uint32_t from, const Kb__Sync *s)
{
	if (s->data->host != from)
		return rt_fail(RT_EPROTOCOL, "host %u sent a Data frame in host %u's name", from,
			       s->data->host);
	for (size_t k = 0; k < s->data->n_envelopes; k++) {
		const Kb__Envelope *e = s->data->envelopes[k];

		if (host_of_component(m, e->src) != from || host_of_component(m, e->dst) != m->host)
			return rt_fail(RT_EPROTOCOL, "host %u sent a message %u -> %u it may not send",
				       from, e->src, e->dst);
	}
	return RT_EOK;
}

/* A barrier frame from host `from`: a GRANT from our parent (it forwards
 * the coordinator's unchanged), or a child's DONE; kept until asked for. */
static enum rt_err hold_barrier(struct kb_mesh *m, uint32_t from, Kb__Sync *s)
{
	if (s->body_case == KB__SYNC__BODY_GRANT && m->fanout && from == m->parent) {
		if (m->grant || s->grant->n_inbound || s->grant->n_expect_all != m->n_hosts)
			return rt_fail(RT_EPROTOCOL, "host %u (this host's parent in the barrier) sent "
				       "a second or malformed GRANT", from);
		m->grant = s;
		return RT_EOK;
	}
	if (s->body_case == KB__SYNC__BODY_DONE && m->fanout && from >= m->first_child &&
	    from - m->first_child < m->n_children) {
		uint32_t j = from - m->first_child;

		if (m->child_done[j] || !m->child_live[j] || s->done->n_outbound ||
		    s->done->n_sent_to > m->n_hosts)
			return rt_fail(RT_EPROTOCOL, "host %u (a child in the barrier) sent a second or "
				       "malformed DONE", from);
		m->child_done[j] = s;
		return RT_EOK;
	}
	return rt_fail(RT_EPROTOCOL, "host %u sent this host's mesh a frame of type %d it may not "
		       "send", from, s->body_case);
}

/* One frame already arrived, if any: *got says whether one was taken. */
static enum rt_err take_one(struct kb_mesh *m, bool *got)
{
	zmq_msg_t msg;
	const char *user;
	char *end = NULL;
	unsigned long from;
	Kb__Sync *s = NULL;
	enum rt_err err;

	*got = false;
	zmq_msg_init(&msg);
	if (zmq_msg_recv(&msg, m->pull, ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(&msg);
		return RT_EOK;
	}
	*got = true;
	user = zmq_msg_gets(&msg, "User-Id");
	from = user ? strtoul(user, &end, 10) : ULONG_MAX;
	if (!user || end == user || *end || from >= m->n_hosts) {
		zmq_msg_close(&msg);
		return rt_fail(RT_EPROTOCOL, "agent: a mesh frame from no known host");
	}
	err = rt_wire_decode_sync(zmq_msg_data(&msg), zmq_msg_size(&msg), &s);
	zmq_msg_close(&msg);
	if (err)
		return rt_fail(err, "host %lu sent a bad mesh frame: %s", from, rt_last_error());
	if (s->body_case != KB__SYNC__BODY_DATA) {
		err = hold_barrier(m, (uint32_t)from, s);
		if (err)
			rt_wire_free_sync(s);
		return err;
	}
	err = check_data(m, (uint32_t)from, s);
	if (!err)
		err = hold(m, s);
	if (err)
		rt_wire_free_sync(s);
	return err;
}

enum rt_err kb_mesh_drain(struct kb_mesh *m)
{
	bool got = true;
	enum rt_err err = RT_EOK;

	while (!err && got)
		err = take_one(m, &got);
	return err;
}

uint64_t kb_mesh_arrived_before(const struct kb_mesh *m, uint64_t window)
{
	uint64_t n = m->taken;

	for (size_t k = 0; k < m->n_held; k++)
		if (m->held[k]->data->window < window)
			n += m->held[k]->data->n_envelopes;
	return n;
}

enum rt_err kb_mesh_take(struct kb_mesh *m, uint64_t window, Kb__Sync ***frames,
			 size_t *n_frames, Kb__Envelope ***inbound, size_t *n_inbound)
{
	size_t n_env = 0, kept = 0, out = 0;
	Kb__Sync **taken;

	for (size_t k = 0; k < m->n_held; k++)
		if (m->held[k]->data->window < window)
			n_env += m->held[k]->data->n_envelopes;
	if (!RT_GROW_TO(m->inbound, m->cap_inbound, n_env, 16))
		return rt_fail(RT_ENOMEM, "agent: out of memory");
	taken = calloc(m->n_held ? m->n_held : 1, sizeof(*taken));
	if (!taken)
		return rt_fail(RT_ENOMEM, "agent: out of memory");
	*n_inbound = 0;
	for (size_t k = 0; k < m->n_held; k++) {
		Kb__Sync *s = m->held[k];

		if (s->data->window >= window) {
			m->held[kept++] = s; /* a later window's: keep it */
			continue;
		}
		for (size_t e = 0; e < s->data->n_envelopes; e++)
			m->inbound[(*n_inbound)++] = s->data->envelopes[e];
		taken[out++] = s;
	}
	m->n_held = kept;
	m->taken += *n_inbound;
	*frames = taken;
	*n_frames = out;
	*inbound = m->inbound;
	return RT_EOK;
}

void kb_mesh_close(struct kb_mesh **mp)
{
	struct kb_mesh *m = *mp;

	if (!m)
		return;
	pthread_mutex_lock(&m->table_lock);
	atomic_store(&m->closing, true);
	pthread_cond_broadcast(&m->table_set);
	pthread_mutex_unlock(&m->table_lock);
	rt_zap_destroy(&m->zap);
	for (uint32_t h = 0; m->hosts && h < m->n_hosts; h++)
		if (m->hosts[h].push)
			zmq_close(m->hosts[h].push);
	if (m->pull)
		zmq_close(m->pull);
	for (size_t k = 0; k < m->n_held; k++)
		rt_wire_free_sync(m->held[k]);
	free(m->held);
	rt_wire_free_sync(m->grant);
	for (uint32_t j = 0; m->child_done && j < m->fanout; j++)
		rt_wire_free_sync(m->child_done[j]);
	free(m->child_done);
	free(m->child_live);
	free(m->child_next);
	free(m->child_sum);
	free(m->inbound);
	free(m->group);
	free(m->hosts);
	rt_buf_release(&m->frame);
	pthread_mutex_destroy(&m->table_lock);
	pthread_cond_destroy(&m->table_set);
	memset(m->secret_key, 0, sizeof(m->secret_key));
	free(m);
	*mp = NULL;
}

/* ------------------------------------------------------------- tree */

uint32_t kb_mesh_fanout(const struct kb_mesh *m)
{
	return m->fanout;
}

uint32_t kb_mesh_parent(const struct kb_mesh *m)
{
	return m->parent;
}

Kb__Sync *kb_mesh_take_grant(struct kb_mesh *m)
{
	Kb__Sync *s = m->grant;

	m->grant = NULL;
	return s;
}

/* Encodes `msg` and sends it to host `h` over the mesh. */
static enum rt_err send_sync(struct kb_mesh *m, uint32_t h, Kb__Sync *msg)
{
	enum rt_err err;

	if (!m->hosts[h].push && (err = connect_host(m, h)))
		return err;
	err = rt_wire_encode_sync(msg, &m->frame);
	if (!err && zmq_send(m->hosts[h].push, m->frame.data, m->frame.len, 0) < 0)
		err = rt_fail(RT_ETRANSPORT, "agent: cannot send to host %u: %s", h,
			      zmq_strerror(errno));
	return err;
}

enum rt_err kb_mesh_forward(struct kb_mesh *m, Kb__Sync *grant)
{
	const Kb__Grant *g = grant->grant;
	enum rt_err err = RT_EOK;

	/* a child whose subtree has no event before the end and was sent
	 * nothing since it was last granted is left out (its last DONE still
	 * speaks for it), as the flat barrier leaves out an idle host */
	for (uint32_t j = 0; j < m->n_children && !err; j++) {
		uint64_t sum = rt_coord_tree_sum(m->first_child + j, m->fanout, m->n_hosts,
						 g->expect_all);

		m->child_live[j] = m->child_sum[j] == RT_COORD_TREE_UNSEEN ||
				   m->child_sum[j] != sum || m->child_next[j] < g->end_ps;
		if (!m->child_live[j])
			continue;
		m->child_sum[j] = sum;
		err = send_sync(m, m->first_child + j, grant);
	}
	return err;
}

bool kb_mesh_children_done(const struct kb_mesh *m)
{
	for (uint32_t j = 0; j < m->n_children; j++)
		if (m->child_live[j] && !m->child_done[j])
			return false;
	return true;
}

/* A child left out of the window: what it last said, nothing sent. */
static void combine_idle(struct kb_mesh *m, uint32_t j, Kb__Done *acc)
{
	if (m->child_next[j] < acc->next_local_ps)
		acc->next_local_ps = m->child_next[j];
	acc->hosts += rt_coord_tree_size(m->first_child + j, m->fanout, m->n_hosts);
}

enum rt_err kb_mesh_combine(struct kb_mesh *m, Kb__Done *acc)
{
	enum rt_err err = RT_EOK;

	for (uint32_t j = 0; j < m->n_children; j++) {
		Kb__Sync *s = m->child_done[j];
		const Kb__Done *d;

		if (!m->child_live[j]) {
			combine_idle(m, j, acc);
			continue;
		}
		d = s->done;
		m->child_done[j] = NULL;
		m->child_next[j] = d->next_local_ps;
		if (!err && d->window != acc->window)
			err = rt_fail(RT_EPROTOCOL, "host %u answered window %llu during window %llu",
				      m->first_child + j, (unsigned long long)d->window,
				      (unsigned long long)acc->window);
		for (size_t h = 0; !err && h < d->n_sent_to; h++)
			acc->sent_to[h] += d->sent_to[h];
		if (d->next_local_ps < acc->next_local_ps)
			acc->next_local_ps = d->next_local_ps;
		if (d->next_sent_ps < acc->next_sent_ps)
			acc->next_sent_ps = d->next_sent_ps;
		acc->hosts += d->hosts;
		acc->ran += d->ran;
		rt_wire_free_sync(s);
	}
	return err;
}

enum rt_err kb_mesh_send_up(struct kb_mesh *m, Kb__Sync *done)
{
	return send_sync(m, m->parent, done);
}
