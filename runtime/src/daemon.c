/* daemon.c — component host and lockstep participant.
 *
 * Over 600 lines on purpose: one participant of the lockstep protocol (set-
 * up, events, frames, a grant's window, the direct calls of an embedded
 * run, the socket), all over the private state of struct rt_daemon (ctx.h);
 * its sections follow one window's path. */
#include "rt/daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "ctx.h"
#include "ff.h"
#include "rt/event.h"
#include "rt/sock.h"
#include "rt/wire.h"

#define ARENA_BYTES (8u << 20)

/* ---------------------------------------------------------------- setup */

static enum rt_err daemon_init(struct rt_daemon *d, const struct rt_daemon_opts *o)
{
	const struct rt_topology *t = o->topo;
	uint32_t n = 0;
	enum rt_err err;

	memset(d, 0, sizeof(*d));
	d->job = o->job;
	d->topo = t;
	d->index = o->index;
	d->label = t->daemons[o->index].label;
	rt_queue_init(&d->queue);
	rt_buf_init(&d->frame);
	err = rt_arena_init(&d->arena, ARENA_BYTES);
	if (err)
		return err;
	d->by_id = calloc(t->n_components, sizeof(*d->by_id));
	d->ctxs = calloc(t->daemons[o->index].n_hosted, sizeof(*d->ctxs));
	if (!d->by_id || !d->ctxs)
		return rt_fail(RT_ENOMEM, "daemon %s: cannot allocate component table", d->label);
	for (uint32_t id = 0; id < t->n_components; id++) {
		if (t->components[id].daemon != o->index)
			continue;
		err = rt_ctx_init(&d->ctxs[n], d, id);
		if (err) /* those before it are counted: daemon_release frees them */
			return err;
		d->by_id[id] = &d->ctxs[n++];
		d->n_local = n;
	}
	return rt_ff_open(d);
}

static void daemon_release(struct rt_daemon *d)
{
	for (uint32_t i = 0; i < d->n_local; i++)
		rt_ctx_release(&d->ctxs[i]);
	free(d->ctxs);
	rt_ff_close(d);
	free(d->by_id);
	rt_queue_release(&d->queue);
	rt_msg_pool_release(&d->pool);
	rt_ctx_free_outbound(d);
	free(d->outbound);
	rt_arena_release(&d->arena);
	rt_buf_release(&d->frame);
	rt_ctx_unmap_memory(d);
	free(d->stat_ptrs);
	free(d->stats);
	free(d->report_ptrs);
	free(d->reports);
}

/* ---------------------------------------------------------------- events */

/* Is the KB_FAULT test hook (see arm_fault) of `kind` due in `window`? */
static bool fault_due(const struct rt_daemon *d, const char *kind, uint64_t window)
{
	return d->fault_kind[0] && !strcmp(d->fault_kind, kind) && window >= d->fault_window;
}

/* The message an event carries: an in-process copy as it is, or packed
 * bytes from another daemon decoded into the arena; both checked the same
 * way and digested by content (rt/msg.h), so colocation changes nothing. */
static enum rt_err event_message(struct rt_daemon *d, const struct rt_event *ev,
				 Kb__Payload **msg, uint64_t *content)
{
	enum rt_err err;

	if (ev->is_local) {
		*msg = ev->msg;
		*content = ev->digest;
		return rt_wire_check_payload(*msg);
	}
	rt_arena_reset(&d->arena);
	err = rt_wire_decode_payload(rt_event_bytes(ev), ev->len, &d->arena, msg);
	if (err && !*msg) {
		/* too big for the arena, or not a payload: an in-process copy has
		 * no size limit, so neither may a decoded message */
		d->heap_msg = kb__payload__unpack(NULL, ev->len, rt_event_bytes(ev));
		if (d->heap_msg) {
			*msg = d->heap_msg;
			err = rt_wire_check_payload(*msg);
		}
	}
	if (!err)
		*content = rt_msg_digest(&(*msg)->base);
	return err;
}

/* The critical path a message carries (rt/path.h): none, or one that
 * sums to its delivery time (the wire check saw its length). */
static enum rt_err event_path(struct rt_daemon *d, const struct rt_event *ev,
			      const Kb__Payload *msg, struct rt_delivery *del)
{
	if (!msg->n_path)
		return RT_EOK;
	memcpy(d->path.ps, msg->path, sizeof(d->path.ps));
	if (rt_path_total(&d->path) != ev->key.time_ps)
		return rt_fail(RT_EDECODE,
			       "its critical path sums to %llu ps, not to its delivery time %llu ps",
			       (unsigned long long)rt_path_total(&d->path),
			       (unsigned long long)ev->key.time_ps);
	/* where the path last crossed a message: this one (for drawing it) */
	d->path.tail = msg->path_segment ? RT_PATH_TAIL(ev->key.src, msg->path_segment - 1) : 0;
	d->path.tail_ps = ev->key.time_ps;
	memcpy(d->path.tail_vec, d->path.ps, sizeof(d->path.ps));
	del->path = &d->path;
	return RT_EOK;
}

/* Runs one event on its component; gives a local message's block back to
 * the pool once the handler is done with it. */
static enum rt_err deliver(struct rt_daemon *d, struct rt_event *ev)
{
	struct rt_ctx *c = d->by_id[ev->dst];
	struct rt_delivery del = {
		.time_ps = ev->key.time_ps,
		.is_timer = ev->is_timer,
		.tag = ev->is_timer ? ev->tag : 0,
		.src = ev->key.src,
		.send_ps = ev->send_ps,
	};
	Kb__Payload *msg = NULL;
	uint64_t content = 0;
	enum rt_err err;

	if (ev->is_timer && fault_due(d, "freeze", d->window))
		return RT_EOK; /* test hook: work started here never ends */
	while (fault_due(d, "stall", d->window))
		pause(); /* test hook: an event that never returns */
	d->now = ev->key.time_ps;
	/* a relaxed store is a plain one: another thread may watch the count
	 * (rt_daemon_events) */
	__atomic_store_n(&d->events, d->events + 1, __ATOMIC_RELAXED);
	if (!ev->is_timer) {
		err = event_message(d, ev, &msg, &content);
		if (!err && c->desc->ops->check)
			err = c->desc->ops->check(msg);
		if (err && d->heap_msg) {
			kb__payload__free_unpacked(d->heap_msg, NULL);
			d->heap_msg = NULL;
		}
		if (err)
			return rt_fail(err, "%s: message from %s: %s", c->desc->name,
				       d->topo->components[ev->key.src].name, rt_last_error());
		del.msg = msg;
		rt_ctx_note_delivery(c, ev, msg, content);
		err = event_path(d, ev, msg, &del);
		if (err)
			return rt_fail(err, "%s: message from %s: %s", c->desc->name,
				       d->topo->components[ev->key.src].name, rt_last_error());
	}
	c->last_ps = d->now;
	c->last_off_ps = rt_ff_offset(d->ff);
	c->clock_ps = 0;
	d->delivering = ev;
	d->kept = false;
	err = c->desc->ops->handle(c, c->state, &del);
	d->delivering = NULL;
	if (d->heap_msg) {
		kb__payload__free_unpacked(d->heap_msg, NULL);
		d->heap_msg = NULL;
	}
	if (ev->is_local) { /* back to the pool, unless rt_keep handed it over */
		if (!d->kept)
			rt_msg_pool_put(&d->pool, rt_msg_block(ev->msg));
		ev->msg = NULL;
	}
	if (!err)
		err = rt_ctx_stat_error(c);
	/* components report what went wrong; the daemon says where and when
	 * (a kernel host's own clock may be far past the event's time) */
	if (err)
		return rt_fail(err, "%s at %llu ps: %s", c->desc->name,
			       (unsigned long long)(c->clock_ps > d->now ? c->clock_ps : d->now),
			       rt_last_error());
	return err;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Timing-mode events take nanoseconds: the clock is read every
 * beat_stride of them, a stride that doubles (up to this) while the coarse
 * clock has not moved between reads and falls back to 1 as soon as it has.
 * An event that computes for long (data mode, where the stride stays 1, or
 * a slow plug-in) is thus followed by a read at most BEAT_STRIDE_MAX
 * events late, a millisecond's worth of fast events at most. */
#define BEAT_STRIDE_MAX 64u

/* During a long window (one daemon may run a whole --colocate all job in
 * one), tells the coordinator events are still being executed, so its
 * watchdog measures "no event executed" rather than window length. (Driven
 * by direct calls it has no socket: its caller beats for it.) */
static void heartbeat(struct rt_daemon *d)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Progress progress = KB__PROGRESS__INIT;
	uint64_t every = d->job->config.watchdog_ms / 4, now;

	if (!d->sock)
		return;
	/* a run that shows its progress hears from its daemons every second */
	if (!d->job->quiet && d->job->progress != RT_PROGRESS_OFF && every > 1000)
		every = 1000;
	now = mono_ms();
	if (d->job->mode == RT_MODE_DATA || now != d->read_ms)
		d->beat_stride = 1;
	else if (d->beat_stride < BEAT_STRIDE_MAX)
		d->beat_stride = d->beat_stride ? d->beat_stride * 2 : 1;
	d->read_ms = now;
	if (now - d->beat_ms < (every ? every : 1))
		return;
	d->beat_ms = now;
	progress.events = d->events;
	progress.now_ps = d->now;
	sync.body_case = KB__SYNC__BODY_PROGRESS;
	sync.progress = &progress;
	/* a beat that cannot be sent is missed like a late one: the watchdog
	 * reads the CPU clock too, and the next send says what broke */
	if (rt_wire_encode_sync(&sync, &d->frame) == RT_EOK)
		(void)zmq_send(d->sock, d->frame.data, d->frame.len, 0);
}

static enum rt_err run_until(struct rt_daemon *d, uint64_t end)
{
	const struct rt_event *next;
	struct rt_event ev;
	enum rt_err err = RT_EOK;

	d->window_end = end;
	while (!err && (next = rt_queue_peek(&d->queue)) && next->key.time_ps < end) {
		rt_queue_pop(&d->queue, &ev);
		if (d->ff)
			rt_ff_note_event(d->ff, &ev);
		err = deliver(d, &ev);
		rt_event_release(&ev);
		if (!err && d->ff && rt_ff_due(d->ff))
			err = rt_ff_after_event(d);
		/* one event may compute for seconds (data mode): a clock read
		 * follows it within beat_stride events (BEAT_STRIDE_MAX) */
		if (++d->beat_count >= d->beat_stride) {
			d->beat_count = 0;
			heartbeat(d);
		}
	}
	return err;
}

static uint64_t next_local(const struct rt_daemon *d)
{
	const struct rt_event *next = rt_queue_peek(&d->queue);

	return next ? next->key.time_ps : RT_TIME_NEVER;
}

/* ---------------------------------------------------------------- frames */

static enum rt_err send_frame(struct rt_daemon *d, Kb__Sync *msg)
{
	enum rt_err err = rt_wire_encode_sync(msg, &d->frame);

	if (err)
		return err;
	if (zmq_send(d->sock, d->frame.data, d->frame.len, 0) < 0)
		return rt_fail(RT_ETRANSPORT, "daemon %s: send to coordinator failed: %s",
			       d->label, zmq_strerror(errno));
	return RT_EOK;
}

/* Test hook (tests/README.md): KB_FAULT="kind@label[:window]" makes the
 * named daemon misbehave from that window on (the first one it is granted),
 * so failure handling is tested with real daemons and sockets. kinds: hang,
 * garbage, truncate, schema, crash, early, freeze (its timers never fire,
 * so an engine never finishes a stage), stall (an event that never
 * returns), exit. Read once, at start-up. Only the
 * test build (kernbench-test, -DKB_TEST_BUILD) reads it: a release binary
 * never misbehaves because of its environment. */
#ifndef KB_TEST_BUILD
static void arm_fault(struct rt_daemon *d)
{
	(void)d;
}
#else
static void arm_fault(struct rt_daemon *d)
{
	const char *spec = getenv("KB_FAULT");
	const char *at = spec ? strchr(spec, '@') : NULL;
	const char *colon;
	size_t label_len;

	if (!at || (size_t)(at - spec) >= sizeof(d->fault_kind))
		return;
	colon = strchr(at + 1, ':');
	label_len = colon ? (size_t)(colon - at - 1) : strlen(at + 1);
	if (label_len != strlen(d->label) || strncmp(at + 1, d->label, label_len))
		return;
	snprintf(d->fault_kind, sizeof(d->fault_kind), "%.*s", (int)(at - spec), spec);
	d->fault_window = colon ? strtoull(colon + 1, NULL, 10) : 0;
}
#endif

static enum rt_err inject_faults(struct rt_daemon *d, uint64_t window)
{
	static const char garbage[] = "\xff\x01 this is not a frame \x07";

	if (fault_due(d, "hang", window))
		for (;;)
			pause();
	if (fault_due(d, "exit", window))
		exit(0); /* a daemon that leaves early, whatever its status */
	if (fault_due(d, "crash", window)) {
		setrlimit(RLIMIT_CORE, &(struct rlimit){ 0, 0 }); /* no core file left behind */
		abort();
	}
	if (fault_due(d, "garbage", window)) {
		(void)zmq_send(d->sock, garbage, sizeof(garbage) - 1, 0); /* test hook */
		return RT_EINTERRUPTED;
	}
	if (fault_due(d, "truncate", window)) {
		(void)zmq_send(d->sock, d->frame.data, d->frame.len / 2, 0); /* test hook */
		return RT_EINTERRUPTED;
	}
	return RT_EOK;
}

static enum rt_err send_ready(struct rt_daemon *d)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Ready ready = KB__READY__INIT;
	uint32_t *ids = calloc(d->n_local ? d->n_local : 1, sizeof(*ids));
	enum rt_err err;

	if (!ids)
		return rt_fail(RT_ENOMEM, "daemon %s: out of memory", d->label);
	for (uint32_t i = 0; i < d->n_local; i++)
		ids[i] = d->ctxs[i].id;
	ready.daemon = d->index;
	ready.n_components = d->n_local;
	ready.components = ids;
	ready.next_local_ps = next_local(d);
	ready.pid = getpid();
	ready.token.data = (uint8_t *)d->token;
	ready.token.len = strlen(d->token);
	sync.body_case = KB__SYNC__BODY_READY;
	sync.ready = &ready;
	err = rt_wire_encode_sync(&sync, &d->frame);
	free(ids);
	if (err)
		return err;
	if (fault_due(d, "schema", 0))
		d->frame.data[1] ^= 0x7f; /* field 1 is schema_version: corrupt it */
	if (zmq_send(d->sock, d->frame.data, d->frame.len, 0) < 0)
		return rt_fail(RT_ETRANSPORT, "daemon %s: cannot send READY: %s", d->label,
			       zmq_strerror(errno));
	return RT_EOK;
}

static enum rt_err send_done(struct rt_daemon *d, uint64_t window)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Done done = KB__DONE__INIT;
	enum rt_err err;

	if (fault_due(d, "early", window) && d->n_out)
		d->outbound[0]->deliver_ps = d->window_end - 1; /* breaks the lookahead promise */
	done.window = window;
	done.next_local_ps = next_local(d);
	done.n_outbound = d->n_out;
	done.outbound = d->outbound;
	sync.body_case = KB__SYNC__BODY_DONE;
	sync.done = &done;
	err = rt_wire_encode_sync(&sync, &d->frame);
	rt_ctx_free_outbound(d);
	if (err)
		return err;
	err = inject_faults(d, window);
	if (err)
		return err;
	if (zmq_send(d->sock, d->frame.data, d->frame.len, 0) < 0)
		return rt_fail(RT_ETRANSPORT, "daemon %s: cannot send DONE: %s", d->label,
			       zmq_strerror(errno));
	return RT_EOK;
}

/* Reports a failure and waits (briefly) for the coordinator's SHUTDOWN, so
 * the launcher hears the reason before it sees this process exit. */
static void send_error(struct rt_daemon *d, enum rt_err code)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Error error = KB__ERROR__INIT;
	struct rt_error kept;

	rt_err_keep(&kept, code);
	error.daemon = d->index;
	error.component = (char *)d->label;
	error.message = kept.line;
	error.usage = code == RT_EUSAGE;
	sync.body_case = KB__SYNC__BODY_ERROR;
	sync.error = &error;
	if (send_frame(d, &sync) == RT_EOK) {
		zmq_pollitem_t item = { .socket = d->sock, .events = ZMQ_POLLIN };

		(void)zmq_poll(&item, 1, 5000); /* SHUTDOWN, or the time to give up */
	}
	rt_err_restore(&kept);
}

/* BYE carries every hosted component's end-of-run report: its delivery
 * count and digest, statistics, and what it left unfinished. `bye` points
 * into the daemon. */
static enum rt_err fill_bye(struct rt_daemon *d, Kb__Bye *bye)
{
	size_t n_stats = 0, at = 0;

	for (uint32_t i = 0; i < d->n_local; i++)
		n_stats += d->ctxs[i].n_stats;
	d->reports = calloc(d->n_local + 1, sizeof(*d->reports));
	d->report_ptrs = calloc(d->n_local + 1, sizeof(*d->report_ptrs));
	d->stats = calloc(n_stats + 1, sizeof(*d->stats));
	d->stat_ptrs = calloc(n_stats + 1, sizeof(*d->stat_ptrs));
	if (!d->reports || !d->report_ptrs || !d->stats || !d->stat_ptrs)
		return rt_fail(RT_ENOMEM, "daemon %s: cannot build its end-of-run report", d->label);
	for (uint32_t i = 0; i < d->n_local; i++) {
		rt_ctx_report(&d->ctxs[i], &d->reports[i], d->stats + at, d->stat_ptrs + at);
		at += d->ctxs[i].n_stats;
		d->report_ptrs[i] = &d->reports[i];
	}
	bye->daemon = d->index;
	bye->n_reports = d->n_local;
	bye->reports = d->report_ptrs;
	return RT_EOK;
}

/* ---------------------------------------------------------------- grant */

static enum rt_err accept_inbound(struct rt_daemon *d, const Kb__Grant *g)
{
	for (size_t i = 0; i < g->n_inbound; i++) {
		const Kb__Envelope *e = g->inbound[i];
		struct rt_event ev = { 0 };
		enum rt_err err;

		if (e->dst >= d->topo->n_components || !d->by_id[e->dst])
			return rt_fail(RT_EPROTOCOL,
				       "daemon %s: GRANT %llu routed a message for component %u, which it does not host",
				       d->label, (unsigned long long)g->window, e->dst);
		if (e->deliver_ps < g->start_ps)
			return rt_fail(RT_EPROTOCOL,
				       "daemon %s: message %u.%llu promised for %llu ps arrived in window %llu starting %llu ps",
				       d->label, e->src, (unsigned long long)e->seq,
				       (unsigned long long)e->deliver_ps, (unsigned long long)g->window,
				       (unsigned long long)g->start_ps);
		ev.key.time_ps = e->deliver_ps;
		ev.key.priority = e->priority;
		ev.key.src = e->src;
		ev.key.seq = e->seq;
		ev.dst = e->dst;
		ev.send_ps = e->send_ps;
		err = rt_event_set_bytes(&ev, e->payload.data, e->payload.len);
		if (!err)
			err = rt_queue_push(&d->queue, &ev);
		if (err) {
			rt_event_release(&ev);
			return err;
		}
	}
	return RT_EOK;
}

/* Runs a GRANT's window; what it sends other daemons is in d->outbound. */
static enum rt_err run_window(struct rt_daemon *d, const Kb__Grant *g)
{
	enum rt_err err;

	/* windows only move forward; an idle daemon is not granted every one */
	if (g->window < d->window || g->start_ps < d->window_end)
		return rt_fail(RT_EPROTOCOL, "daemon %s: got GRANT for window %llu [%llu ps) after "
			       "window %llu ended at %llu ps",
			       d->label, (unsigned long long)g->window,
			       (unsigned long long)g->start_ps, (unsigned long long)d->window,
			       (unsigned long long)d->window_end);
	d->window = g->window;
	rt_ctx_free_outbound(d);
	err = accept_inbound(d, g);
	return err ? err : run_until(d, g->end_ps);
}

static enum rt_err on_grant(struct rt_daemon *d, const Kb__Grant *g)
{
	enum rt_err err = run_window(d, g);

	if (!err)
		err = send_done(d, d->window);
	d->window++;
	return err;
}

/* Lets every initialised component release what it holds, and keeps what
 * each says it left unfinished (for its report; ignored after a failure). */
static enum rt_err fini_components(struct rt_daemon *d)
{
	enum rt_err err = RT_EOK;

	for (uint32_t i = 0; i < d->n_inited; i++) {
		struct rt_ctx *c = &d->ctxs[i];
		enum rt_err undone;

		d->now = c->last_ps;
		rt_fail(RT_EOK, "%s", "");
		undone = c->desc->ops->fini ? c->desc->ops->fini(c, c->state) : RT_EOK;
		if (undone && !c->unfinished &&
		    asprintf(&c->unfinished, "%s: %s", c->desc->name,
			     rt_last_error()[0] ? rt_last_error() : rt_err_msg(undone)) < 0) {
			c->unfinished = NULL;
			err = rt_fail(RT_ENOMEM, "daemon %s: out of memory", d->label);
		}
		if (!err)
			err = rt_ctx_stat_error(c);
	}
	d->n_inited = 0;
	return err;
}

static enum rt_err finish(struct rt_daemon *d)
{
	Kb__Sync sync = KB__SYNC__INIT;
	Kb__Bye bye = KB__BYE__INIT;
	enum rt_err err = rt_daemon_finish(d, &bye);

	sync.body_case = KB__SYNC__BODY_BYE;
	sync.bye = &bye;
	return err ? err : send_frame(d, &sync);
}

/* Waits for the next frame (a blocking receive with a 1 s timeout: no poll
 * call on the hot path); gives up when the launcher is gone. */
static enum rt_err recv_frame(struct rt_daemon *d, Kb__Sync **out)
{
	pid_t parent = getppid();
	zmq_msg_t msg;
	enum rt_err err;

	zmq_msg_init(&msg);
	while (zmq_msg_recv(&msg, d->sock, 0) < 0) {
		if (errno != EAGAIN && errno != EINTR) {
			zmq_msg_close(&msg);
			return rt_fail(RT_ETRANSPORT, "daemon %s: receive failed: %s", d->label,
				       zmq_strerror(errno));
		}
		if (!d->threaded && getppid() != parent) {
			zmq_msg_close(&msg);
			return rt_fail(RT_EPEER, "daemon %s: launcher is gone", d->label);
		}
	}
	err = rt_wire_decode_sync(zmq_msg_data(&msg), zmq_msg_size(&msg), out);
	zmq_msg_close(&msg);
	if (err)
		return rt_fail(err, "daemon %s: bad frame from coordinator: %s", d->label,
			       rt_last_error());
	return RT_EOK;
}

/* The participant loop: GRANT -> run -> DONE until SHUTDOWN. */
static enum rt_err participate(struct rt_daemon *d)
{
	enum rt_err err = send_ready(d);

	while (!err) {
		Kb__Sync *sync = NULL;

		err = recv_frame(d, &sync);
		if (err)
			break;
		if (sync->body_case == KB__SYNC__BODY_GRANT) {
			err = on_grant(d, sync->grant);
		} else if (sync->body_case == KB__SYNC__BODY_SHUTDOWN) {
			bool abort_run = sync->shutdown->abort;

			rt_wire_free_sync(sync);
			return abort_run ? RT_EINTERRUPTED : finish(d);
		} else {
			err = rt_fail(RT_EPROTOCOL, "daemon %s: unexpected frame %d from coordinator",
				      d->label, sync->body_case);
		}
		rt_wire_free_sync(sync);
	}
	return err;
}

static enum rt_err open_socket(struct rt_daemon *d, const struct rt_daemon_opts *o)
{
	char who[96];
	struct rt_sock_opts so = { .who = who, .linger_ms = 5000, /* BYE reaches the coordinator */
				   .rcvtimeo_ms = 1000 };
	enum rt_err err;

	snprintf(who, sizeof(who), "daemon %s", d->label);
	d->zctx = o->zmq_ctx;
	if (!d->zctx) {
		d->zctx = zmq_ctx_new();
		d->own_zctx = true;
	}
	d->threaded = o->zmq_ctx != NULL;
	d->token = o->token ? o->token : "";
	if (!d->token[0])
		return rt_fail(RT_EINVAL, "daemon %s: no valid token from the launcher", d->label);
	so.routing_id = d->token;
	err = rt_sock_open(d->zctx, ZMQ_DEALER, &so, &d->sock);
	if (err)
		return err;
	/* --keys: CURVE client; the keys came in the sealed job memfd */
	if (o->job->keys.on && o->job->transport != RT_TRANSPORT_INPROC &&
	    rt_keys_client(&o->job->keys, d->sock))
		return RT_ETRANSPORT;
	if (zmq_connect(d->sock, o->endpoint) < 0)
		return rt_fail(RT_ETRANSPORT, "daemon %s: cannot connect to %s: %s", d->label,
			       o->endpoint, zmq_strerror(errno));
	return RT_EOK;
}

static void close_socket(struct rt_daemon *d)
{
	if (d->sock)
		zmq_close(d->sock);
	if (d->own_zctx && d->zctx)
		zmq_ctx_term(d->zctx);
}

static enum rt_err init_components(struct rt_daemon *d)
{
	for (uint32_t i = 0; i < d->n_local; i++) {
		struct rt_ctx *c = &d->ctxs[i];
		enum rt_err err = c->desc->ops->init ? c->desc->ops->init(c, c->state) : RT_EOK;

		d->n_inited = i + 1; /* a failed init may hold resources too */
		if (!err)
			err = rt_ctx_stat_error(c);
		if (err)
			return rt_fail(err, "%s: init failed: %s", c->desc->name, rt_last_error());
	}
	return RT_EOK;
}

/* ---------------------------------------------------------------- direct calls */

/* A daemon with its tables and its test hook armed; no socket, and its
 * components' init not run yet. *out is set whenever memory was had. */
static enum rt_err daemon_new(const struct rt_daemon_opts *o, struct rt_daemon **out)
{
	struct rt_daemon *d = calloc(1, sizeof(*d));
	enum rt_err err;

	*out = d;
	if (!d)
		return rt_fail(RT_ENOMEM, "cannot allocate a daemon");
	err = daemon_init(d, o);
	if (!err)
		arm_fault(d);
	return err;
}

enum rt_err rt_daemon_open(const struct rt_daemon_opts *o, struct rt_daemon **out)
{
	enum rt_err err = daemon_new(o, out);

	if (!err)
		err = init_components(*out);
	if (err)
		rt_daemon_close(out);
	return err;
}

uint64_t rt_daemon_next_ps(const struct rt_daemon *d)
{
	return next_local(d);
}

uint64_t rt_daemon_events(const struct rt_daemon *d)
{
	return __atomic_load_n(&d->events, __ATOMIC_RELAXED);
}

enum rt_err rt_daemon_window(struct rt_daemon *d, const Kb__Grant *g, Kb__Envelope ***out,
			     size_t *n_out)
{
	enum rt_err err = run_window(d, g);

	d->window++;
	*out = d->outbound;
	*n_out = err ? 0 : d->n_out;
	return err;
}

enum rt_err rt_daemon_finish(struct rt_daemon *d, Kb__Bye *bye)
{
	enum rt_err err = fini_components(d);

	for (uint32_t i = 0; i < d->n_local && !err; i++)
		err = rt_ctx_flush(&d->ctxs[i], true);
	if (!err)
		err = rt_ff_write_part(d);
	return err ? err : fill_bye(d, bye);
}

void rt_daemon_close(struct rt_daemon **dp)
{
	struct rt_daemon *d = *dp;

	if (!d)
		return;
	fini_components(d);
	daemon_release(d);
	free(d);
	*dp = NULL;
}

/* ---------------------------------------------------------------- socket */

enum rt_err rt_daemon_run(const struct rt_daemon_opts *o)
{
	struct rt_daemon *d;
	enum rt_err err = daemon_new(o, &d);

	if (!d)
		return err;
	if (!err)
		err = open_socket(d, o);
	if (!err) {
		err = init_components(d);
		if (!err)
			err = participate(d);
		/* an aborted run or a dead link has no one to tell */
		if (err && err != RT_EINTERRUPTED && err != RT_ETRANSPORT)
			send_error(d, err);
	}
	fini_components(d);
	close_socket(d);
	rt_daemon_close(&d);
	return err;
}
