/* coord_recv.c — the coordinator's receiving side: frames and strangers,
 * liveness and the watchdog, failures heard out, the READY handshake. */
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
	uint64_t now = rt_mono_ms();
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

/* What a received frame turned out to be. */
enum taken { TAKEN_NOTHING, TAKEN_IGNORED, TAKEN_PROGRESS, TAKEN_FRAME };

/* Takes the rest of a frame whose identity part is in `id` and decodes it.
 * TAKEN_FRAME: *peer sent *out (caller frees). A stranger's frame is
 * ignored and a PROGRESS heartbeat is consumed here. */
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
		if (!c->ops->stranger || !c->ops->stranger(c, id, &body))
			note_stranger(c, id, &body);
	} else {
		c->peers[*peer].heard_ms = rt_mono_ms();
		err = rt_wire_decode_sync(zmq_msg_data(&body), zmq_msg_size(&body), out);
		if (err)
			err = rt_fail(err, "daemon %s sent a bad frame: %s",
				      coord_peer_name(c, *peer, name, sizeof(name)), rt_last_error());
		else if ((*out)->body_case == KB__SYNC__BODY_PROGRESS) {
			/* counts as progress only if its count moved on */
			if ((*out)->progress->events > c->peers[*peer].events) {
				c->peers[*peer].events = (*out)->progress->events;
				*taken = TAKEN_PROGRESS;
			}
			/* inside a long window: how far its simulation got */
			if ((*out)->progress->now_ps > c->progress_ps) {
				c->progress_ps = (*out)->progress->now_ps;
				coord_show_progress(c, c->st.windows + 1, c->progress_ps, false);
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
enum rt_err coord_explain_failure(struct rt_coord *c, enum rt_err err)
{
	uint64_t deadline = rt_mono_ms() + 300;
	struct rt_error kept;

	if (err == RT_EINTERRUPTED)
		return err;
	rt_err_keep(&kept, err);
	while (rt_mono_ms() < deadline) {
		zmq_pollitem_t item = { .socket = c->sock, .events = ZMQ_POLLIN };
		Kb__Sync *s = NULL;
		uint32_t peer;
		enum taken taken;
		enum rt_err got;

		if (zmq_poll(&item, 1, (long)(deadline - rt_mono_ms())) <= 0)
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

static void describe_wait(const struct rt_coord *c, enum wait_for what, uint64_t window,
			  char *buf, size_t cap);

static enum rt_err watchdog_fired(const struct rt_coord *c, enum wait_for what, uint64_t window)
{
	char waiting_for[512];

	describe_wait(c, what, window, waiting_for, sizeof(waiting_for));
	if (what == WAIT_READY && c->ops->remote)
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
	uint64_t now = rt_mono_ms(), since = now - c->cpu_sampled_ms;
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
 * (the participants' keep_alive, tick) between frames. The watchdog counts only time this
 * process could run without any daemon making progress: a PROGRESS
 * heartbeat with more events, or CPU a waited-for daemon consumed
 * (peers_computing), resets it, and a receive that returns late (the
 * process was stopped, e.g. Ctrl-Z) counts only what it asked for. Strangers' frames
 * neither count nor end the run. On success *peer is the sender and *out
 * its decoded frame (caller frees). */
enum rt_err coord_recv_from_any(struct rt_coord *c, uint32_t *peer, Kb__Sync **out,
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
		err = c->ops->keep_alive ? c->ops->keep_alive(c) : RT_EOK;
		if (!err && c->hooks && c->hooks->tick)
			err = c->hooks->tick(c->hooks->arg);
		if (err)
			return err;
		if ((watch || !(++c->recvs % 64)) && c->hooks && c->hooks->fd >= 0) {
			err = c->hooks->on_fd(c->hooks->arg);
			if (err)
				return coord_explain_failure(c, err);
		}
		slice = budget - idle < RECV_SLICE_MS ? budget - idle : RECV_SLICE_MS;
		started = rt_mono_ms();
		err = take_frame(c, (int)slice, peer, out, &taken);
		if (err || taken == TAKEN_FRAME)
			return err;
		watch = taken == TAKEN_NOTHING;
		/* an agent's heartbeat while others are missing is no progress;
		 * a daemon computing in a long event is (liveness, ADR 0035) */
		if ((taken == TAKEN_PROGRESS && !(c->ops->remote && what == WAIT_READY)) ||
		    peers_computing(c, what)) {
			idle = 0;
			started = rt_mono_ms();
		}
		took = rt_mono_ms() - started;
		idle += took < slice ? took : slice;
	}
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
				       coord_peer_name(c, i, name, sizeof(name)), id);
		k++;
	}
	if (k != r->n_components || r->daemon != i)
		return rt_fail(RT_EPROTOCOL, "daemon %s announced a different daemon or components",
			       coord_peer_name(c, i, name, sizeof(name)));
	/* the routing id already matched; READY must carry the token too */
	if (r->token.len != strlen(c->peers[i].token) ||
	    memcmp(r->token.data, c->peers[i].token, r->token.len))
		return rt_fail(RT_EPROTOCOL, "daemon %s sent READY without its token",
			       coord_peer_name(c, i, name, sizeof(name)));
	if (!c->peers[i].present)
		return rt_fail(RT_EPROTOCOL, "daemon %s is not hosted here",
			       coord_peer_name(c, i, name, sizeof(name)));
	if (c->ops->ready && c->ops->ready(c, i, r))
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
	unsigned shown = 0;

	if (what == WAIT_DONE)
		used = (size_t)snprintf(buf, cap, "window %llu: ", (unsigned long long)window);
	else
		used = (size_t)snprintf(buf, cap, "%s", what == WAIT_BYE ? "shutdown: " : "");
	for (uint32_t i = 0; i < c->n_peers && used < cap; i++) {
		bool waiting = what == WAIT_READY ? !c->peers[i].ready : !c->peers[i].answered;

		if (!waiting || !c->peers[i].present)
			continue;
		if (shown++ == c->ops->named_waiting) {
			snprintf(buf + used, cap - used, ", ...");
			break;
		}
		used += (size_t)snprintf(buf + used, cap - used, "%s%s%s", shown > 1 ? ", " : "",
					 c->labels ? "" : "daemon ",
					 coord_peer_name(c, i, name, sizeof(name)));
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
	uint64_t deadline = rt_mono_ms() + (c->job->config.watchdog_ms < GATHER_MS
						 ? c->job->config.watchdog_ms : GATHER_MS);
	uint32_t lowest = first, more = 0;
	char name[128];
	enum rt_err err, stop = RT_EOK;
	enum wake wake = WAKE_NONE;
	Kb__Sync *kept = NULL;

	err = peer_error(e, coord_peer_name(c, first, name, sizeof(name)));
	if (!settled)
		return err;
	settled[first] = true;
	for (;;) {
		bool waiting = false;
		Kb__Sync *s = NULL;
		uint32_t i;
		enum taken taken;
		uint64_t now = rt_mono_ms();

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
		err = peer_error(kept ? kept->error : e, coord_peer_name(c, lowest, name, sizeof(name)));
	if (more && wake != WAKE_STOP) /* rt_fail formats aside: it may quote the last line */
		err = rt_fail(err, "%s (and %u more daemon%s failed)", rt_last_error(), more,
			      more == 1 ? "" : "s");
	rt_wire_free_sync(kept);
	free(settled);
	return err;
}

enum rt_err coord_frame_error(struct rt_coord *c, uint32_t i, Kb__Sync *s, const char *expected,
			       enum wait_for what)
{
	char name[128];

	coord_peer_name(c, i, name, sizeof(name));
	if (s->body_case == KB__SYNC__BODY_ERROR)
		return gather_failures(c, i, s->error, what);
	return rt_fail(RT_EPROTOCOL, "daemon %s sent frame type %d, expected %s", name,
		       s->body_case, expected);
}


enum rt_err coord_handshake(struct rt_coord *c)
{
	uint32_t ready = 0;

	while (ready < c->n_present) {
		Kb__Sync *s = NULL;
		uint32_t i;
		enum rt_err err = coord_recv_from_any(c, &i, &s, WAIT_READY, 0);

		if (err)
			return err;
		if (s->body_case != KB__SYNC__BODY_READY || c->peers[i].ready)
			err = coord_frame_error(c, i, s, "READY once", WAIT_READY);
		else
			err = check_ready(c, i, s->ready);
		rt_wire_free_sync(s);
		if (err)
			return err;
		ready++;
	}
	return c->ops->all_ready ? c->ops->all_ready(c) : RT_EOK;
}
