/* coord_windows.c — the coordinator's window loop (grant, route, collect,
 * progress) and its run API (rt_coord_run, _start, _step, _finish). */
#include "rt/coord.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "coord_internal.h"
#include "rt/clock.h"
#include "rt/event.h"
#include "rt/grow.h"
#include "rt/wire.h"

/* ---------------------------------------------------------------- windows */

/* This process's CPU time, all threads (ZeroMQ's I/O threads included). */
static double process_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}


/* Queues `e` (borrowed) for p's next GRANT. */
static enum rt_err push_inbound(struct peer *p, Kb__Envelope *e)
{
	if (!RT_GROW(p->inbound, p->cap_in, p->n_in, 64))
		return rt_fail(RT_ENOMEM, "coordinator: inbound queue cannot grow");
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
			       coord_peer_name(c, from, name, sizeof(name)),
			       (unsigned long long)e->deliver_ps, (unsigned long long)c->horizon);
	if (!RT_GROW(c->away, c->cap_away, c->n_away, 64))
		return rt_fail(RT_ENOMEM, "coordinator: outbound queue cannot grow");
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
				       coord_peer_name(c, from, name, sizeof(name)), e->src, e->dst);
		if (e->deliver_ps < end)
			return rt_fail(RT_EPROTOCOL,
				       "daemon %s sent a message due at %llu ps inside the window ending %llu ps",
				       coord_peer_name(c, from, name, sizeof(name)),
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

/* This host's daemons: granted flat, their messages routed here. */
const struct coord_peers coord_daemons = {
	.named_waiting = 3,
	.grant = coord_grant_flat,
	.done = route,
};

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
		enum rt_err err = coord_recv_from_any(c, &i, &s, WAIT_DONE, k);

		if (err)
			return err;
		if (s->body_case != KB__SYNC__BODY_DONE || c->peers[i].answered)
			err = coord_frame_error(c, i, s, "one DONE", WAIT_DONE);
		else if (s->done->window != k)
			err = rt_fail(RT_EPROTOCOL, "daemon %s answered window %llu during window %llu",
				      coord_peer_name(c, i, name, sizeof(name)),
				      (unsigned long long)s->done->window, (unsigned long long)k);
		else
			err = c->ops->done(c, i, s->done, end, &min_time, routed_now);
		if (err) {
			rt_wire_free_sync(s);
			return err;
		}
		err = coord_keep_in_round(c, s); /* keeps routed envelopes alive */
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
enum rt_err coord_explain_unreachable(struct rt_coord *c, enum rt_err err)
{
	uint64_t deadline = rt_mono_ms() + 1000;
	struct rt_error kept;

	if (!c->hooks || c->hooks->fd < 0)
		return err;
	rt_err_keep(&kept, err);
	while (rt_mono_ms() < deadline) {
		zmq_pollitem_t item = { .fd = c->hooks->fd, .events = ZMQ_POLLIN };
		enum rt_err why;

		if (zmq_poll(&item, 1, 50) > 0 && (why = c->hooks->on_fd(c->hooks->arg)))
			return coord_explain_failure(c, why);
	}
	return rt_err_restore(&kept);
}

/* A daemon with no message to receive and nothing due before `end` would
 * run no event in the window: it is left out (no GRANT, no DONE), which
 * saves two messages per idle daemon per window and changes nothing else.
 * Anyone with routed messages is granted, so every inbound list is flushed
 * in the next GRANT (its envelopes live in the previous round's frames). */
enum rt_err coord_grant_flat(struct rt_coord *c, uint64_t k, uint64_t start, uint64_t end,
			     uint32_t *granted)
{
	enum rt_err err = RT_EOK;

	for (uint32_t i = 0; i < c->n_peers && !err; i++) {
		struct peer *p = &c->peers[i];

		if (!p->present || (!p->n_in && !p->fresh && p->next_local_ps >= end)) {
			p->answered = true;
			continue;
		}
		err = coord_send_grant(c, i, k, start, end);
		(*granted)++;
	}
	return err ? coord_explain_unreachable(c, err) : RT_EOK;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > RT_TIME_NEVER - b ? RT_TIME_NEVER : a + b;
}

/* --progress: a bar redrawn at most once a second on a terminal, or a
 * line every RT_PROGRESS_EVERY_S seconds (auto: only once the run has
 * gone on for RT_PROGRESS_QUIET_S) when stderr is a log. `t` is the
 * simulated time reached, from window starts or daemons' heartbeats. */
void coord_show_progress(struct rt_coord *c, uint64_t k, uint64_t t, bool final)
{
	uint64_t now = rt_mono_ms();
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
	uint64_t started_us = rt_mono_us();
	double started_cpu = c->sub ? 0 : process_cpu_s();

	for (; t < horizon && !err; c->k++) {
		uint64_t end = sat_add(t, c->lookahead_ps), next = RT_TIME_NEVER, routed_now = 0;
		uint32_t granted = 0;

		if (end > horizon)
			end = horizon;
		note_window(c, c->k, t);
		err = c->ops->grant(c, c->k, t, end, &granted);
		coord_free_round(c);
		if (!err)
			err = collect_done(c, c->k, end, granted, &next, &routed_now);
		st->windows++;
		st->grants += granted;
		st->routed += err ? 0 : routed_now;
		st->last_window_ps = t;
		coord_show_progress(c, st->windows, t, false);
		/* skip ahead over idle time, but never shorter than a lookahead */
		t = next == RT_TIME_NEVER ? next : (next > end ? next : end);
	}
	c->next_ps = t;
	st->windows_wall_s += (double)(rt_mono_us() - started_us) * 1e-6;
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

enum rt_err rt_coord_run(struct rt_coord *c, const struct rt_coord_hooks *hooks,
			 struct rt_coord_stats *st)
{
	enum rt_err err = rt_coord_start(c, hooks);

	if (!err) {
		err = run_windows(c, first_event(c), RT_TIME_NEVER);
		coord_show_progress(c, c->st.windows, c->st.last_window_ps, true);
	}
	coord_free_round(c);
	if (!err)
		err = rt_coord_finish(c);
	*st = c->st;
	return err;
}

enum rt_err rt_coord_start(struct rt_coord *c, const struct rt_coord_hooks *hooks)
{
	memset(&c->st, 0, sizeof(c->st));
	c->hooks = hooks;
	return coord_handshake(c);
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

	coord_free_away(c);
	/* the frames' envelopes wait in inbound lists until they are granted */
	for (size_t k = 0; k < n_frames; k++) {
		if (!err)
			err = coord_keep_in_round(c, frames[k]);
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
	enum rt_err err = coord_broadcast_shutdown(c, false);

	if (!err)
		err = coord_collect_bye(c);
	if (!err)
		err = write_counters(c);
	return err;
}

const struct rt_coord_stats *rt_coord_stats(const struct rt_coord *c)
{
	return &c->st;
}
