/* agent_windows.c — the agent's window loop (agent_state.h): READY, the
 * mesh table of the other hosts, each GRANT [T, T + Lg) run as local
 * windows over this host's daemons (kb_local_step_frames), what goes to
 * other hosts sent host to host (mesh.h, ADR 0066) and counted in DONE,
 * the barrier as a chain or a tree.
 *
 * May use: agent_state.h, launch (kb_local), mesh, the runtime. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "agent_state.h"
#include "launch.h"
#include "mesh.h"
#include "rt/buf.h"
#include "rt/clock.h"
#include "rt/daemon.h"
#include "rt/event.h"
#include "rt/sock.h"
#include "rt/wire.h"

/* ---------------------------------------------------------------- protocol */

enum rt_err kb_agent_send_ready(struct agent *a)
{
	const struct rt_topology *t = kb_local_topology(a->local);
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Ready ready = KB__READY__INIT;
	uint32_t *ids = calloc(t->n_components ? t->n_components : 1, sizeof(*ids));
	enum rt_err err;

	if (!ids)
		return rt_fail(RT_ENOMEM, "%s: out of memory", a->label);
	for (uint32_t id = 0; id < t->n_components; id++)
		if (t->components[id].rank < a->job->config.ranks &&
		    a->rank_here[t->components[id].rank])
			ids[ready.n_components++] = id;
	ready.daemon = a->host;
	ready.components = ids;
	ready.next_local_ps = kb_local_next_ps(a->local);
	ready.pid = getpid();
	ready.token.data = (uint8_t *)a->token;
	ready.token.len = strlen(a->token);
	ready.mesh_endpoint = (char *)kb_mesh_endpoint(a->mesh);
	ready.mesh_key = (char *)kb_mesh_key(a->mesh);
	sync.body_case = KB__SYNC__BODY_READY;
	sync.ready = &ready;
	err = kb_agent_send_up(a, &sync);
	free(ids);
	return err;
}

/* The coordinator's table of every host's mesh endpoint and key. */
enum rt_err kb_agent_on_mesh(struct agent *a, const Kb__Mesh *table)
{
	enum rt_err err = kb_mesh_join(a->mesh, a->host, table);

	free(a->sent_to);
	a->sent_to = err ? NULL : calloc(table->n_peers ? table->n_peers : 1, sizeof(*a->sent_to));
	if (!err && !a->sent_to)
		err = rt_fail(RT_ENOMEM, "%s: out of memory", a->label);
	return err ? rt_fail(err, "%s: %s", a->label, rt_last_error()) : RT_EOK;
}

static enum rt_err wait_hosts(struct agent *a, enum rt_err (*ready)(struct agent *a, bool *done),
			      Kb__Sync **from_coord);

/* wait_hosts' test while a window waits for its messages: every message
 * other hosts sent this host before a->await.window has arrived (their
 * count, summed by the coordinator, is a->await.expect). More is a
 * protocol error; no new one for run.watchdog_ms while some are missing
 * ends the run here. */
static enum rt_err messages_in(struct agent *a, bool *done)
{
	struct mesh_wait *w = &a->await;
	uint64_t arrived = kb_mesh_arrived_before(a->mesh, w->window), now = rt_mono_ms();

	*done = arrived == w->expect;
	if (arrived > w->expect)
		return rt_fail(RT_EPROTOCOL, "%s: %llu messages from other hosts arrived before "
			       "window %llu, they sent %llu", a->label, (unsigned long long)arrived,
			       (unsigned long long)w->window, (unsigned long long)w->expect);
	if (arrived != w->had || !w->moved_ms) {
		w->had = arrived;
		w->moved_ms = now;
	} else if (!*done && now - w->moved_ms >= a->job->config.watchdog_ms) {
		return rt_fail(RT_ETIMEOUT, "%s: window %llu waits for %llu messages from other "
			       "hosts, %llu arrived, none for %llu ms (watchdog)", a->label,
			       (unsigned long long)w->window, (unsigned long long)w->expect,
			       (unsigned long long)arrived, (unsigned long long)(now - w->moved_ms));
	}
	return RT_EOK;
}

/* Waits until the messages of windows before `window` arrived: a host
 * that died meanwhile is named by the coordinator, whose SHUTDOWN ends
 * the wait. */
static enum rt_err wait_mesh(struct agent *a, uint64_t window, uint64_t expect)
{
	a->await = (struct mesh_wait){ .window = window, .expect = expect };
	return wait_hosts(a, messages_in, NULL);
}

/* Runs the GRANT's window (taken) over this host's daemons with what other
 * hosts sent it before, then sends what goes to other hosts to them
 * directly; `done` gets the window, its next times and the counts. */
static enum rt_err run_granted(struct agent *a, Kb__Sync **grant_p, uint64_t expect,
			       Kb__Done *done)
{
	Kb__Grant g = *(*grant_p)->grant;
	Kb__Sync **data = NULL, **frames = NULL;
	Kb__Envelope **inbound = NULL;
	size_t n_data = 0, n_inbound = 0;
	struct rt_coord_away away;
	enum rt_err err, verdict;

	if (!a->sent_to || g.n_inbound) {
		rt_wire_free_sync(*grant_p);
		*grant_p = NULL;
		return rt_fail(RT_EPROTOCOL, "%s: a GRANT before the mesh table, or with messages "
			       "(they come from other hosts directly)", a->label);
	}
	err = wait_mesh(a, g.window, expect);
	if (!err)
		err = kb_mesh_take(a->mesh, g.window, &data, &n_data, &inbound, &n_inbound);
	if (!err && !(frames = malloc((n_data + 1) * sizeof(*frames))))
		err = rt_fail(RT_ENOMEM, "%s: out of memory", a->label);
	if (err) {
		for (size_t k = 0; k < n_data; k++)
			rt_wire_free_sync(data[k]);
		free(data);
		return err;
	}
	frames[0] = *grant_p;
	*grant_p = NULL;
	memcpy(frames + 1, data, n_data * sizeof(*data));
	free(data);
	g.inbound = inbound;
	g.n_inbound = n_inbound;
	kb_agent_lend_socket(a);
	err = kb_local_step_frames(a->local, &g, frames, n_data + 1, &away);
	verdict = kb_agent_take_socket(a);
	free(frames);
	if (!err)
		err = verdict;
	if (!err)
		err = kb_mesh_send(a->mesh, g.window, away.envelopes, away.n, a->sent_to,
				   &done->next_sent_ps);
	done->window = g.window;
	done->next_local_ps = away.next_ps;
	done->n_sent_to = a->n_hosts;
	done->sent_to = a->sent_to;
	a->next_local_ps = away.next_ps;
	return err;
}

/* The flat barrier: the window, then DONE (counts and times only) to the
 * coordinator. */
enum rt_err kb_agent_on_grant(struct agent *a, Kb__Sync **grant_p)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Done done = KB__DONE__INIT;
	enum rt_err err = run_granted(a, grant_p, (*grant_p)->grant->expect, &done);

	if (err)
		return err;
	sync.body_case = KB__SYNC__BODY_DONE;
	sync.done = &done;
	return kb_agent_send_up(a, &sync);
}

/* Waits for what the mesh brings (`ready` says when it is enough),
 * beating and listening to the coordinator meanwhile; a frame from the
 * coordinator that is not a heartbeat (SHUTDOWN) returns in *from_coord
 * when the caller takes one, else it ends the wait as keep_up does. */
static enum rt_err wait_hosts(struct agent *a, enum rt_err (*ready)(struct agent *a, bool *done),
			      Kb__Sync **from_coord)
{
	for (;;) {
		zmq_pollitem_t items[2] = { { kb_mesh_socket(a->mesh), 0, ZMQ_POLLIN, 0 },
					    { a->sock, 0, ZMQ_POLLIN, 0 } };
		enum rt_err err = kb_mesh_drain(a->mesh);
		bool done = false;

		if (err)
			return rt_fail(err, "%s: %s", a->label, rt_last_error());
		err = ready(a, &done);
		if (err || done)
			return err;
		if (zmq_poll(items, 2, WATCH_MS) < 0 && errno != EINTR)
			return rt_fail(RT_ETRANSPORT, "%s: cannot wait for other hosts: %s", a->label,
				       zmq_strerror(errno));
		if (from_coord) {
			err = kb_agent_recv_up(a, 0, from_coord);
			if (!err && *from_coord && (*from_coord)->body_case != KB__SYNC__BODY_PROGRESS)
				return RT_EOK;
			rt_wire_free_sync(*from_coord);
			*from_coord = NULL;
			if (!err)
				err = kb_agent_beat_up(a);
		} else {
			err = kb_agent_keep_up(a);
		}
		if (!err && rt_mono_ms() - a->watched_ms >= WATCH_MS) {
			a->watched_ms = rt_mono_ms();
			err = kb_local_watch(a->local);
		}
		if (err)
			return err;
	}
}

static enum rt_err children_done(struct agent *a, bool *done)
{
	*done = kb_mesh_children_done(a->mesh);
	return RT_EOK;
}

static enum rt_err grant_came(struct agent *a, bool *done)
{
	*done = (a->tree_grant = kb_mesh_take_grant(a->mesh)) != NULL;
	return RT_EOK;
}

/* The tree barrier (ADR 0067): the GRANT goes on to this host's children
 * first, so they run beside it; this host runs the window only if it has
 * an event before its end or messages were sent to it (as the flat
 * coordinator grants only those); then its children's DONEs and its own,
 * combined, go to its parent (a host, or the coordinator). */
enum rt_err kb_agent_on_tree_grant(struct agent *a, Kb__Sync **grant_p)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Done done = KB__DONE__INIT;
	const Kb__Grant *g = (*grant_p)->grant;
	uint64_t expect = a->host < g->n_expect_all ? g->expect_all[a->host] : 0;
	bool run = a->next_local_ps < g->end_ps || expect != a->expect_seen;
	enum rt_err err = g->n_expect_all == a->n_hosts
				  ? kb_mesh_forward(a->mesh, *grant_p)
				  : rt_fail(RT_EPROTOCOL, "%s: a GRANT for %zu hosts, the run has %u",
					    a->label, g->n_expect_all, a->n_hosts);

	done.window = g->window;
	done.next_local_ps = a->next_local_ps;
	done.next_sent_ps = RT_TIME_NEVER;
	done.n_sent_to = a->n_hosts;
	done.sent_to = a->sent_to;
	done.hosts = 1;
	done.ran = run;
	memset(a->sent_to, 0, a->n_hosts * sizeof(*a->sent_to));
	if (!err && run) {
		a->expect_seen = expect;
		err = run_granted(a, grant_p, expect, &done);
	}
	rt_wire_free_sync(*grant_p);
	*grant_p = NULL;
	if (!err)
		err = wait_hosts(a, children_done, NULL);
	if (!err)
		err = kb_mesh_combine(a->mesh, &done);
	if (err)
		return err;
	sync.body_case = KB__SYNC__BODY_DONE;
	sync.done = &done;
	if (kb_mesh_parent(a->mesh) == RT_COORD_TREE_TOP)
		return kb_agent_send_up(a, &sync);
	return kb_mesh_send_up(a->mesh, &sync);
}

/* The next frame that moves this host on: the coordinator's (its GRANT,
 * or SHUTDOWN for every host), or, below the top of the tree, the GRANT
 * its parent forwards. */
enum rt_err kb_agent_wait_next(struct agent *a, Kb__Sync **out)
{
	enum rt_err err;

	if (!a->mesh || !kb_mesh_fanout(a->mesh) || kb_mesh_parent(a->mesh) == RT_COORD_TREE_TOP)
		return kb_agent_wait_up(a, out);
	*out = NULL;
	err = wait_hosts(a, grant_came, out);
	if (!err && !*out) {
		*out = a->tree_grant;
		a->tree_grant = NULL;
	}
	return err;
}
