/* coord_agents.c — the coordinator's side of runs across hosts: Hello and
 * Assign, heartbeats and lost hosts, the agents' mesh, the files they
 * ship, the barrier tree (ADRs 0019, 0050, 0066, 0067). */
#include "rt/coord.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "coord_internal.h"
#include "rt/clock.h"
#include "rt/sock.h"
#include "rt/wire.h"

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
static bool coord_maybe_hello(struct rt_coord *c, const zmq_msg_t *id, const zmq_msg_t *body)
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
		c->peers[host].heard_ms = rt_mono_ms(); /* its silence counts from now */
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
static enum rt_err coord_keep_agents(struct rt_coord *c)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Progress progress = KB__PROGRESS__INIT;
	uint64_t now = rt_mono_ms();
	unsigned silence;
	char name[128];

	if (now - c->beat_ms < RT_COORD_BEAT_MS)
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
				       coord_peer_name(c, i, name, sizeof(name)), silence / 1000);
		if (!p->ready)
			continue; /* still starting: beats go to ready hosts */
		/* after SHUTDOWN an agent closes once it sent its files and BYE,
		 * which may still be queued here (behind another host's files):
		 * then only silence counts. Before, a closed connection is a dead
		 * agent (one that fails waits for our answer to its ERROR), fatal
		 * once nothing came from it for two beats. */
		if (coord_send_to(c, i, &sync) == RT_EOK || p->released)
			p->lost_ms = 0;
		else if (!p->lost_ms)
			p->lost_ms = now;
		else if (now - p->heard_ms > 2 * RT_COORD_BEAT_MS)
			return rt_fail(RT_EPEER, "%s is gone: its agent's connection dropped (agent "
				       "killed, host down or network cut)",
				       coord_peer_name(c, i, name, sizeof(name)));
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
	if (!c || !c->ops->remote)
		return 0;
	progress.events = rt_mono_ms();
	sync.body_case = KB__SYNC__BODY_PROGRESS;
	sync.progress = &progress;
	for (uint32_t i = 0; i < c->n_peers; i++) {
		struct peer *p = &c->peers[i];

		if (!p->ready || p->gone || p->released)
			continue;
		/* a connection that dropped refuses the beat at once */
		if (!p->lost_ms && coord_send_to(c, i, &sync) == RT_EOK)
			continue;
		if (used < cap)
			used += (size_t)snprintf(buf + used, cap - used, "%s%s", lost ? ", " : "",
						 coord_peer_name(c, i, name, sizeof(name)));
		lost++;
	}
	return lost;
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
static enum rt_err coord_take_mesh_address(struct rt_coord *c, uint32_t i, const Kb__Ready *r)
{
	char name[128];
	const char *ep = r->mesh_endpoint ? r->mesh_endpoint : "";
	const char *key = r->mesh_key ? r->mesh_key : "";
	uint8_t raw[32];

	if (!mesh_endpoint_ok(ep) || strlen(key) != 40 || !zmq_z85_decode(raw, key))
		return rt_fail(RT_EPROTOCOL, "%s sent READY without a usable mesh endpoint and key "
			       "(tcp://ADDRESS:PORT and a 40-character Z85 key)",
			       coord_peer_name(c, i, name, sizeof(name)));
	snprintf(c->peers[i].mesh_endpoint, sizeof(c->peers[i].mesh_endpoint), "%s", ep);
	snprintf(c->peers[i].mesh_key, sizeof(c->peers[i].mesh_key), "%s", key);
	return RT_EOK;
}

/* Every agent learns where every host's mesh socket is and its key
 * (ADR 0066), before the first GRANT: the messages of a window go
 * agent to agent, only the barrier comes here. */
static enum rt_err coord_send_mesh(struct rt_coord *c)
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
		err = coord_send_to(c, i, &sync);
	free(rows);
	free(ptrs);
	return err ? coord_explain_unreachable(c, err) : RT_EOK;
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
static void coord_ack_files(struct rt_coord *c, uint32_t i, bool bye)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__FileAck ack = KB__FILE_ACK__INIT;

	ack.parts = c->peers[i].parts_taken;
	ack.bytes = c->peers[i].bytes_taken;
	ack.bye = bye;
	sync.body_case = KB__SYNC__BODY_FILE_ACK;
	sync.file_ack = &ack;
	coord_send_to(c, i, &sync);
}

/* An agent's output file piece: written by the hook, counted, credited. */
static enum rt_err coord_take_file_part(struct rt_coord *c, uint32_t i, const Kb__FilePart *part)
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
	coord_ack_files(c, i, false);
	return RT_EOK;
}

/* An agent's BYE lists every file it shipped: each must have arrived
 * whole (as many pieces and bytes as it sent), and nothing else. */
static enum rt_err coord_check_files(struct rt_coord *c, uint32_t i, const Kb__Bye *bye)
{
	struct peer *p = &c->peers[i];
	char name[128];
	size_t listed = 0;

	coord_peer_name(c, i, name, sizeof(name));
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

/* An agent's DONE (ADR 0066): its messages went to their hosts over the
 * mesh; here only how many each host is to receive, and the earliest of
 * their delivery times (a pending time of the run until they arrive). */
static enum rt_err count_mesh(struct rt_coord *c, uint32_t from, const Kb__Done *done,
			      uint64_t end, uint64_t *min_deliver, uint64_t *routed)
{
	char name[128];

	if (done->n_outbound || done->n_sent_to > c->n_peers ||
	    (from < done->n_sent_to && done->sent_to[from]))
		return rt_fail(RT_EPROTOCOL, "%s sent messages through the coordinator or to "
			       "itself (they go agent to agent)", coord_peer_name(c, from, name, sizeof(name)));
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
			      uint64_t end, uint64_t *min_deliver, uint64_t *routed)
{
	char name[128];
	uint32_t hosts = rt_coord_tree_size(from, c->fanout, c->n_peers);

	if (done->hosts != hosts || done->ran > hosts)
		return rt_fail(RT_EPROTOCOL, "%s answered for %u hosts of the barrier's tree, its "
			       "subtree has %u", coord_peer_name(c, from, name, sizeof(name)), done->hosts,
			       hosts);
	if (done->n_outbound || done->n_sent_to > c->n_peers)
		return rt_fail(RT_EPROTOCOL, "%s sent messages through the coordinator (they go "
			       "agent to agent)", coord_peer_name(c, from, name, sizeof(name)));
	for (size_t h = 0; h < done->n_sent_to; h++)
		c->peers[h].expect += done->sent_to[h];
	for (size_t h = 0; h < done->n_sent_to; h++)
		*routed += done->sent_to[h];
	if (done->next_sent_ps < *min_deliver)
		*min_deliver = done->next_sent_ps;
	return RT_EOK;
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
		err = coord_send_to(c, i, &sync);
		(*granted)++;
	}
	free(expect);
	return err ? coord_explain_unreachable(c, err) : RT_EOK;
}

/* Between SHUTDOWN and an agent's BYE come its output files. */
static enum rt_err file_before_bye(struct rt_coord *c, uint32_t i, const Kb__Sync *s, bool *taken)
{
	*taken = s->body_case == KB__SYNC__BODY_FILE_PART && c->hooks && c->hooks->on_file;
	return *taken ? coord_take_file_part(c, i, s->file_part) : RT_EOK;
}

/* Its BYE lists them all, and then it may exit (ADR 0050). */
static enum rt_err files_at_bye(struct rt_coord *c, uint32_t i, const Kb__Bye *bye)
{
	enum rt_err err = coord_check_files(c, i, bye);

	if (!err)
		coord_ack_files(c, i, true);
	return err;
}

/* Every agent waits for its BYE's ack, queued now: closing the socket must
 * deliver them (they are alive, so this takes a round trip), where a
 * failed run's socket drops what it still holds. */
static enum rt_err linger_for_acks(struct rt_coord *c)
{
	return RT_SOCK_SET_INT(c->sock, "coordinator", ZMQ_LINGER, RT_COORD_SILENCE_MS)
		       ? RT_ETRANSPORT
		       : RT_EOK;
}

/* One agent per host: Hello and Assign, heartbeats, the mesh, their
 * files; a window goes to every host with work (flat) or to the top hosts
 * of the barrier's tree (ADR 0067). */
#define AGENTS_COMMON                                                                      \
	.remote = true, .named_waiting = 8, .stranger = coord_maybe_hello,                  \
	.keep_alive = coord_keep_agents, .ready = coord_take_mesh_address,                  \
	.all_ready = coord_send_mesh, .before_bye = file_before_bye, .bye = files_at_bye, \
	.all_bye = linger_for_acks

const struct coord_peers coord_agents_flat = { AGENTS_COMMON, .grant = coord_grant_flat,
					       .done = count_mesh };
const struct coord_peers coord_agents_tree = { AGENTS_COMMON, .grant = grant_tree,
					       .done = count_tree };
