/* ctx.c — what a component sees: time, sends, timers, memory and outputs.
 *
 * Over 600 lines on purpose: everything a component sees goes through
 * struct rt_ctx and the daemon it lives in: time, sends (local and
 * outbound), timers, the latency table, data-mode memories and outputs
 * (trace, op log, statistics); each section is a few short functions. */
#include "ctx.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rt/job.h"
#include "rt/topology.h"
#include "rt/json.h"

#define FLUSH_BYTES (1u << 20)

/* ---------------------------------------------------------------- lifecycle */

enum rt_err rt_ctx_init(struct rt_ctx *c, struct rt_daemon *d, uint32_t id)
{
	const struct rt_component_desc *desc = &d->topo->components[id];

	memset(c, 0, sizeof(*c));
	c->daemon = d;
	c->id = id;
	c->desc = desc;
	c->digest = RT_HASH_INIT;
	rt_trace_writer_init(&c->oplog);
	rt_buf_init(&c->cpath);
	rt_trace_writer_init(&c->trace);
	c->oplog_on = !d->job->oplog_off;
	c->oplog_dma = !strcmp(desc->ops->name, "dma");
	for (unsigned i = 0; i < 3; i++)
		c->oplog_last[i] = RT_TRACE_NONE;
	c->segments = !d->job->trace_off && d->job->config.critical_path;
	c->tracing = !d->job->trace_off && rt_trace_wanted(&d->job->trace, desc->rank, 0,
							  UINT64_MAX);
	c->state = calloc(1, desc->ops->state_size ? desc->ops->state_size : 1);
	if (!c->state)
		return rt_fail(RT_ENOMEM, "%s: cannot allocate %zu bytes of state", desc->name,
			       desc->ops->state_size);
	return RT_EOK;
}

void rt_ctx_release(struct rt_ctx *c)
{
	free(c->state);
	for (size_t i = 0; i < c->n_stats; i++) {
		free(c->stats[i].name);
		free(c->stats[i].unit);
		free(c->stats[i].description);
	}
	free(c->stats);
	free(c->lat);
	free(c->unfinished);
	rt_trace_writer_release(&c->oplog);
	rt_buf_release(&c->cpath);
	rt_trace_writer_release(&c->trace);
	if (c->cpath_file)
		fclose(c->cpath_file);
}

/* ---------------------------------------------------------------- identity */

uint64_t rt_now(const struct rt_ctx *ctx)
{
	return ctx->daemon->now;
}

uint32_t rt_self(const struct rt_ctx *ctx)
{
	return ctx->id;
}

const struct rt_component_desc *rt_self_desc(const struct rt_ctx *ctx)
{
	return ctx->desc;
}

void rt_note_clock(struct rt_ctx *ctx, uint64_t clock_ps)
{
	ctx->clock_ps = clock_ps;
}

const struct rt_topology *rt_topo(const struct rt_ctx *ctx)
{
	return ctx->daemon->topo;
}

const struct rt_job *rt_job(const struct rt_ctx *ctx)
{
	return ctx->daemon->job;
}

const struct rt_config *rt_cfg(const struct rt_ctx *ctx)
{
	return &ctx->daemon->job->config;
}

/* ---------------------------------------------------------------- tracing */

/* A trace record's name: the field name of the body the message carries
 * ("stage", "hbm_request"), read from the schema, which the runtime does
 * not otherwise know; "message" without one. */
static const char *payload_kind(const Kb__Payload *msg)
{
	const ProtobufCFieldDescriptor *f =
		msg->body_case == KB__PAYLOAD__BODY__NOT_SET
			? NULL
			: protobuf_c_message_descriptor_get_field(&kb__payload__descriptor,
								  (unsigned)msg->body_case);

	return f ? f->name : "message";
}

/* Wanted by --trace-window? (rank and on/off were decided at init) */
bool rt_tracing(const struct rt_ctx *c, uint64_t from, uint64_t to)
{
	return c->tracing && rt_trace_wanted(&c->daemon->job->trace, c->desc->rank, from, to);
}

static enum rt_err trace_put(struct rt_ctx *c, const struct rt_trace_rec *r)
{
	enum rt_err err = rt_trace_put(&c->trace, r);

	if (!err && c->trace.recs.len > FLUSH_BYTES)
		err = rt_ctx_flush(c, false);
	return err;
}

/* A message is drawn as a zero-length slice at each end, on the
 * component's track 0, joined by a flow arrow; the launcher pairs the ends
 * by (sender, sequence) and numbers the flows. */
static void trace_flow(struct rt_ctx *c, bool start, const Kb__Payload *msg,
		       uint32_t src, uint64_t seq, uint64_t ts_ps)
{
	struct rt_trace_rec r = { 0 };

	if (!rt_tracing(c, ts_ps, ts_ps) || c->daemon->job->trace.no_flows)
		return;
	r.ts_ps = ts_ps;
	r.seq = seq;
	r.src = src;
	r.name = rt_trace_intern(&c->trace, payload_kind(msg));
	r.cat = r.site = RT_TRACE_NONE;
	r.kind = start ? RT_TRACE_SEND : RT_TRACE_RECV;
	trace_put(c, &r); /* an I/O error resurfaces at the final flush */
}

/* "file:line" as a string id; a kernel's call sites are few and fixed, so
 * a small cache by address spares formatting one per slice. */
static uint16_t site_id(struct rt_ctx *c, const char *file, int line)
{
	size_t n = sizeof(c->sites) / sizeof(c->sites[0]);
	size_t h = ((uintptr_t)file >> 3 ^ (size_t)line * 2654435761u) % n;
	char site[512];

	if (c->sites[h].file == file && c->sites[h].line == line)
		return c->sites[h].id;
	/* the file's name without its directory: __FILE__ depends on how the
	 * kernel was compiled, and the trace must not */
	snprintf(site, sizeof(site), "%s:%d", strrchr(file, '/') ? strrchr(file, '/') + 1 : file,
		 line);
	c->sites[h].file = file;
	c->sites[h].line = line;
	c->sites[h].id = rt_trace_intern(&c->trace, site);
	return c->sites[h].id;
}

enum rt_err rt_trace_slice(struct rt_ctx *ctx, const struct rt_trace_span *sp)
{
	struct rt_trace_rec r = { 0 };

	if (!rt_tracing(ctx, sp->start_ps, sp->end_ps))
		return RT_EOK;
	if (sp->track == 0 || sp->track >= RT_TRACE_TRACKS || sp->end_ps < sp->start_ps)
		return rt_fail(RT_EINVAL, "%s: trace slice on track %u from %llu to %llu ps",
			       ctx->desc->name, sp->track, (unsigned long long)sp->start_ps,
			       (unsigned long long)sp->end_ps);
	rt_trace_name_track(&ctx->trace, sp->track, sp->track_name);
	r.ts_ps = sp->start_ps;
	r.val = sp->end_ps - sp->start_ps;
	r.seq = sp->command;
	r.src = sp->stage;
	r.name = rt_trace_intern(&ctx->trace, sp->name);
	r.cat = rt_trace_intern(&ctx->trace, sp->cat);
	r.site = sp->site_file ? site_id(ctx, sp->site_file, sp->site_line) : RT_TRACE_NONE;
	r.kind = RT_TRACE_SLICE;
	r.track = (uint8_t)sp->track;
	r.flags = (sp->has_command ? RT_TRACE_F_COMMAND : 0) | (sp->has_stage ? RT_TRACE_F_STAGE : 0);
	return trace_put(ctx, &r);
}

enum rt_err rt_trace_counter(struct rt_ctx *ctx, const char *name, uint64_t ts_ps,
			     uint64_t value)
{
	struct rt_trace_rec r = { 0 };

	if (!rt_tracing(ctx, ts_ps, ts_ps))
		return RT_EOK;
	r.ts_ps = ts_ps;
	r.val = value;
	r.name = rt_trace_intern(&ctx->trace, name);
	r.cat = r.site = RT_TRACE_NONE;
	r.kind = RT_TRACE_COUNTER;
	return trace_put(ctx, &r);
}

void rt_ctx_note_delivery(struct rt_ctx *c, const struct rt_event *ev, const Kb__Payload *msg,
			  uint64_t content)
{
	uint64_t h = c->digest;

	h = rt_hash_u64(h, ev->key.time_ps);
	h = rt_hash_u64(h, ev->key.src);
	h = rt_hash_u64(h, ev->key.seq);
	c->digest = rt_hash_u64(h, content);
	c->delivered++;
	if (c->tracing)
		trace_flow(c, false, msg, ev->key.src, ev->key.seq, ev->key.time_ps);
}

/* ---------------------------------------------------------------- sending */

/* Packs `msg` straight into a new envelope for another daemon. */
static enum rt_err push_outbound(struct rt_daemon *d, const struct rt_key *key, uint32_t dst,
				 uint64_t send_ps, const Kb__Payload *msg, size_t len)
{
	Kb__Envelope *e;

	if (d->n_out == d->cap_out) {
		size_t cap = d->cap_out ? d->cap_out * 2 : 64;
		Kb__Envelope **grown = realloc(d->outbound, cap * sizeof(*grown));

		if (!grown)
			return rt_fail(RT_ENOMEM, "outbound buffer cannot grow to %zu", cap);
		d->outbound = grown;
		d->cap_out = cap;
	}
	e = malloc(sizeof(*e) + len);
	if (!e)
		return rt_fail(RT_ENOMEM, "cannot buffer a %zu-byte message", len);
	kb__envelope__init(e);
	e->deliver_ps = key->time_ps;
	e->priority = key->priority;
	e->src = key->src;
	e->seq = key->seq;
	e->dst = dst;
	e->send_ps = send_ps;
	e->payload.len = len;
	e->payload.data = (uint8_t *)(e + 1);
	kb__payload__pack(msg, e->payload.data);
	d->outbound[d->n_out++] = e;
	return RT_EOK;
}

/* Hands `msg` to a component of this daemon without packing it: an
 * in-process copy, exactly what decoding its packed bytes would give, and
 * its content digest (rt/msg.h; ADR 0017). */
static enum rt_err push_local(struct rt_daemon *d, const struct rt_key *key, uint32_t dst,
			      uint64_t send_ps, const Kb__Payload *msg)
{
	struct rt_event ev = { .dst = dst, .send_ps = send_ps, .is_local = true };
	void *block = rt_msg_pool_get(&d->pool, RT_MSG_SMALL);
	size_t need = 0;
	enum rt_err err;

	if (block && !(ev.msg = rt_msg_copy(&msg->base, block, RT_MSG_SMALL, &need, &ev.digest))) {
		rt_msg_pool_put(&d->pool, block); /* a big one: copy again, into its size */
		block = rt_msg_pool_get(&d->pool, need);
		if (block)
			ev.msg = rt_msg_copy(&msg->base, block, need, &need, &ev.digest);
	}
	if (!block)
		return rt_fail(RT_ENOMEM, "cannot allocate a %zu-byte message", need);
	/* field by field, not *key: the key was just stored a field at a time,
	 * and a wide load of it waits for all those stores (a failed store
	 * forward was 7 % of embedded traffic's CPU) */
	ev.key.time_ps = key->time_ps;
	ev.key.priority = key->priority;
	ev.key.src = key->src;
	ev.key.seq = key->seq;
	err = rt_queue_push(&d->queue, &ev);
	if (err)
		rt_event_release(&ev);
	return err;
}

void *rt_keep(struct rt_ctx *ctx, const ProtobufCMessage *msg)
{
	struct rt_daemon *d = ctx->daemon;
	const struct rt_event *ev = d->delivering;

	/* the delivered in-process copy itself, handed over once */
	if (ev && ev->is_local && !d->kept && rt_msg_in_block(rt_msg_block(ev->msg), msg)) {
		d->kept = true;
		return (void *)msg;
	}
	return rt_msg_dup(msg);
}

void rt_ctx_free_outbound(struct rt_daemon *d)
{
	for (size_t i = 0; i < d->n_out; i++)
		free(d->outbound[i]);
	d->n_out = 0;
}

/* Destinations a link table may span per link of its source: denser
 * sources get a table, sparse ones (a few links to far-apart ids) search. */
#define LAT_SPAN_PER_LINK 8u
#define LAT_SPAN_MAX 4096u

/* Builds ctx's table of latencies by destination from the topology's own
 * answers (so they cannot differ), once it is placed; false when it is
 * not yet placed or when ctx's links are too sparse or memory is short. */
static bool build_lat(struct rt_ctx *ctx)
{
	const struct rt_topology *t = ctx->daemon->topo;
	size_t lo, hi;
	uint32_t first, last;

	if (!t->link_start)
		return false; /* not placed: the latest declaration wins, search */
	lo = t->link_start[ctx->id];
	hi = t->link_start[ctx->id + 1];
	ctx->lat_search = true;
	if (lo == hi)
		return false;
	first = t->links[lo].dst;
	last = t->links[hi - 1].dst;
	if (last - first + 1 > LAT_SPAN_MAX || last - first + 1 > (hi - lo) * LAT_SPAN_PER_LINK)
		return false;
	ctx->lat = calloc(last - first + 1, sizeof(*ctx->lat));
	if (!ctx->lat)
		return false;
	ctx->lat_lo = first;
	ctx->lat_n = last - first + 1;
	for (size_t i = lo; i < hi; i++)
		ctx->lat[t->links[i].dst - first] =
			rt_topology_latency(t, ctx->id, t->links[i].dst);
	ctx->lat_search = false;
	return true;
}

/* The latency of ctx's link to dst (0: none), looked up in its table. */
static uint64_t link_latency(struct rt_ctx *ctx, uint32_t dst)
{
	uint32_t k;

	if (!ctx->lat && (ctx->lat_search || !build_lat(ctx)))
		return rt_topology_latency(ctx->daemon->topo, ctx->id, dst);
	k = dst - ctx->lat_lo;
	return k < ctx->lat_n ? ctx->lat[k] : 0;
}

/* The delivery key of a message from `ctx` to `dst`, checked. */
static enum rt_err send_key(struct rt_ctx *ctx, uint32_t dst, uint64_t send_ps,
			    uint64_t extra_ps, uint32_t priority, struct rt_key *key)
{
	struct rt_daemon *d = ctx->daemon;
	uint64_t latency = link_latency(ctx, dst);

	if (!latency)
		return rt_fail(RT_EINVAL, "%s has no link to component %u", ctx->desc->name, dst);
	if (send_ps < d->now)
		return rt_fail(RT_EINVAL, "%s sends at %llu ps, before now (%llu ps)",
			       ctx->desc->name, (unsigned long long)send_ps,
			       (unsigned long long)d->now);
	key->time_ps = send_ps + latency + extra_ps;
	key->priority = priority;
	key->src = ctx->id;
	key->seq = 0; /* taken when the message goes */
	return RT_EOK;
}

/* Sends `msg` under `key` (its seq taken here). */
static enum rt_err send_keyed(struct rt_ctx *ctx, uint32_t dst, uint64_t send_ps,
			      struct rt_key *key, const Kb__Payload *msg)
{
	struct rt_daemon *d = ctx->daemon;

	key->seq = ctx->seq++;
	if (ctx->tracing)
		trace_flow(ctx, true, msg, key->src, key->seq, send_ps);
	if (d->by_id[dst])
		return push_local(d, key, dst, send_ps, msg);
	/* conservative lockstep: nothing crossing daemons may land inside the
	 * window being run (lookahead guarantees it; check anyway) */
	if (key->time_ps < d->window_end)
		return rt_fail(RT_EPROTOCOL,
			       "%s -> %s: message due at %llu ps falls inside the current window (ends %llu ps)",
			       ctx->desc->name, d->topo->components[dst].name,
			       (unsigned long long)key->time_ps, (unsigned long long)d->window_end);
	return push_outbound(d, key, dst, send_ps, msg, kb__payload__get_packed_size(msg));
}

enum rt_err rt_send_delayed(struct rt_ctx *ctx, uint32_t dst, uint64_t send_ps,
			    uint64_t extra_ps, uint32_t priority, const Kb__Payload *msg)
{
	struct rt_key key;
	enum rt_err err = send_key(ctx, dst, send_ps, extra_ps, priority, &key);

	return err ? err : send_keyed(ctx, dst, send_ps, &key, msg);
}

/* Writes the segment `path` adds up to end_ps (trace on); 1 + its index,
 * or 0 when none is written. A failed write shows at the next flush. */
static uint64_t segment(struct rt_ctx *ctx, const struct rt_path *path, uint64_t end_ps)
{
	struct rt_path_seg seg;

	if (!ctx->segments)
		return 0;
	_Static_assert(sizeof(seg) == RT_PATH_SEG_BYTES, "segment records are 32 bytes");
	rt_path_segment(path, end_ps, &seg);
	if (rt_buf_append(&ctx->cpath, &seg, sizeof(seg)))
		return 0;
	if (ctx->cpath.len > FLUSH_BYTES)
		rt_ctx_flush(ctx, false);
	return ++ctx->n_segments;
}

enum rt_err rt_send_path(struct rt_ctx *ctx, uint32_t dst, uint64_t send_ps,
			 uint64_t extra_ps, uint32_t priority, const Kb__Payload *msg,
			 const struct rt_path *arrival)
{
	struct rt_key key;
	Kb__Payload with = *msg; /* the same body, with the path beside it */
	enum rt_err err = send_key(ctx, dst, send_ps, extra_ps, priority, &key);

	if (err || !arrival || !rt_paths_on(ctx))
		return err ? err : send_keyed(ctx, dst, send_ps, &key, msg);
	if (rt_path_total(arrival) != key.time_ps)
		return rt_fail(RT_EINVAL,
			       "%s -> %s: the message's critical path sums to %llu ps, not to its "
			       "delivery time %llu ps",
			       ctx->desc->name, ctx->daemon->topo->components[dst].name,
			       (unsigned long long)rt_path_total(arrival),
			       (unsigned long long)key.time_ps);
	with.n_path = RT_PATH_CLASSES;
	with.path = (uint64_t *)arrival->ps; /* only read: packed or copied */
	with.path_segment = segment(ctx, arrival, key.time_ps);
	return send_keyed(ctx, dst, send_ps, &key, &with);
}

uint64_t rt_latency_to(const struct rt_ctx *ctx, uint32_t dst)
{
	return rt_topology_latency(ctx->daemon->topo, ctx->id, dst);
}

bool rt_paths_on(const struct rt_ctx *ctx)
{
	return ctx->daemon->job->config.critical_path != 0;
}

void rt_path_report(struct rt_ctx *ctx, const struct rt_path *path)
{
	ctx->end_path = *path;
	rt_ff_offset_path(ctx->daemon->ff, &ctx->end_path);
	ctx->has_end_path = true;
	ctx->end_segment = segment(ctx, &ctx->end_path, rt_path_total(&ctx->end_path));
}

enum rt_err rt_send(struct rt_ctx *ctx, uint32_t dst, uint64_t send_ps, uint32_t priority,
		    const Kb__Payload *msg)
{
	return rt_send_delayed(ctx, dst, send_ps, 0, priority, msg);
}

enum rt_err rt_timer(struct rt_ctx *ctx, uint64_t at_ps, uint64_t tag)
{
	struct rt_daemon *d = ctx->daemon;
	struct rt_event ev = { 0 };

	if (at_ps < d->now)
		return rt_fail(RT_EINVAL, "%s sets a timer at %llu ps, before now (%llu ps)",
			       ctx->desc->name, (unsigned long long)at_ps,
			       (unsigned long long)d->now);
	ev.key.time_ps = at_ps;
	ev.key.src = ctx->id;
	ev.key.seq = ctx->seq++;
	ev.dst = ctx->id;
	ev.is_timer = true;
	ev.tag = tag;
	return rt_queue_push(&d->queue, &ev);
}

/* ---------------------------------------------------------------- memory */

static uint8_t *map_fd(int fd, uint64_t size)
{
	void *p;

	if (fd < 0)
		return NULL;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

uint8_t *rt_memory(struct rt_ctx *ctx, uint32_t index, uint64_t bytes)
{
	struct rt_daemon *d = ctx->daemon;

	if (index >= RT_MAX_MEMORIES || d->job->memory_fds[index] < 0)
		return NULL;
	if (!d->memory[index]) {
		d->memory[index] = map_fd(d->job->memory_fds[index], bytes);
		d->memory_bytes[index] = d->memory[index] ? bytes : 0;
	}
	return d->memory[index];
}

void rt_ctx_unmap_memory(struct rt_daemon *d)
{
	for (size_t i = 0; i < RT_MAX_MEMORIES; i++)
		if (d->memory[i])
			munmap(d->memory[i], d->memory_bytes[i]);
}

/* ---------------------------------------------------------------- outputs */

enum rt_err rt_output_path(struct rt_ctx *ctx, const char *file, char *path, size_t cap)
{
	int n = snprintf(path, cap, "%s/%s", ctx->daemon->job->out_dir, file);

	if (n < 0 || (size_t)n >= cap)
		return rt_fail(RT_EINVAL, "output path %s/%s is too long", ctx->daemon->job->out_dir,
			       file);
	return RT_EOK;
}

/* The op log string id of `s` (content compared: a stage's strings live in
 * a message that is recycled), trying the field's last id first. */
static enum rt_err oplog_str(struct rt_ctx *ctx, unsigned field, const char *s, uint16_t *id)
{
	uint16_t last = ctx->oplog_last[field];

	s = s ? s : "";
	if (last != RT_TRACE_NONE && !strcmp(ctx->oplog.names[last], s)) {
		*id = last;
		return RT_EOK;
	}
	*id = rt_trace_intern(&ctx->oplog, s);
	if (*id == RT_TRACE_NONE)
		return rt_fail(RT_ENOMEM, "%s: op log string table full (%u distinct names) or "
			       "out of memory", ctx->desc->name, (unsigned)RT_TRACE_MAX_NAMES);
	ctx->oplog_last[field] = *id;
	return RT_EOK;
}

/* A fixed record, formatted by the launcher at the end (ADR 0055). */
enum rt_err rt_oplog(struct rt_ctx *ctx, const struct rt_oplog_rec *r)
{
	uint64_t off = rt_ff_offset(ctx->daemon->ff); /* later by what was skipped */
	struct rt_oplog_bin b = {
		.start_ps = r->start_ps + off,
		.end_ps = r->end_ps + off,
		.issue_ps = r->issue_ps + off,
		.seq = ctx->oplog_seq++,
		.bytes = r->bytes,
		.elements = r->elements,
		.command = r->command,
		.comp = ctx->id,
		.stage = r->stage,
	};
	enum rt_err err;

	if (!ctx->oplog_on && !ctx->oplog_dma)
		return RT_EOK;
	err = oplog_str(ctx, 0, r->engine, &b.engine);
	if (!err)
		err = oplog_str(ctx, 1, r->op_kind, &b.op_kind);
	if (!err)
		err = oplog_str(ctx, 2, r->op_name, &b.op_name);
	if (!err)
		err = rt_buf_append(&ctx->oplog.recs, &b, sizeof(b));
	if (err)
		return err;
	return ctx->oplog.recs.len > FLUSH_BYTES ? rt_ctx_flush(ctx, false) : RT_EOK;
}

/* Copies `name` for an error line: non-printable bytes as \xNN, at most
 * about 60 bytes shown. */
static void printable_name(const char *name, char *out, size_t cap)
{
	size_t used = 0;

	for (; *name && used + 8 < cap; name++) {
		unsigned char c = (unsigned char)*name;

		if (used >= 60) {
			snprintf(out + used, cap - used, "...");
			return;
		}
		used += (size_t)snprintf(out + used, cap - used, c < 0x20 || c > 0x7e ? "\\x%02x" : "%c",
					 c);
	}
	out[used] = '\0';
}

/* The files a run writes itself, and what `kernbench plot` adds. */
static const char *const run_files[] = {
	"summary.json", "op_log.jsonl", "trace.json", "trace.json.gz", "trace.pftrace",
	"critical_path.jsonl", "stats.csv", "timeline.png", "timeline.svg", "utilisation.png",
	"utilisation.svg", "utilisation.json",
};

const char *rt_output_name_check(const char *name)
{
	static _Thread_local char why[256];
	char shown[80];
	size_t len = name ? strlen(name) : 0;
	const char *what = NULL;

	if (!len)
		return "output file name is empty";
	for (size_t i = 0; i < len && !what; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			what = "has a control byte";
		else if (name[i] == '/')
			what = "has a '/' (it must be a file in the output folder itself)";
	if (!what && name[0] == '.')
		what = "starts with '.' (., .. and the folder's own .kernbench-* and .parts files)";
	if (!what && len > 255)
		what = "is longer than 255 bytes";
	for (size_t i = 0; !what && i < sizeof(run_files) / sizeof(run_files[0]); i++)
		if (!strcmp(name, run_files[i]))
			what = "is one of the run's own results";
	if (!what)
		return NULL;
	printable_name(name, shown, sizeof(shown));
	snprintf(why, sizeof(why), "output file name \"%s\" %s", shown, what);
	return why;
}

const char *rt_stat_name_check(const char *name)
{
	static _Thread_local char why[192];
	char shown[80];
	size_t len = 0;

	if (!name || !*name)
		return "statistic name is empty";
	/* the runtime reports these itself, for every component */
	if (!strcmp(name, "delivered") || !strcmp(name, "last_ps")) {
		printable_name(name, shown, sizeof(shown));
		snprintf(why, sizeof(why), "statistic name \"%s\" is reserved (the runtime counts it)",
			 shown);
		return why;
	}
	for (; name[len]; len++) {
		unsigned char c = (unsigned char)name[len];

		if (c < 0x20 || c > 0x7e) {
			printable_name(name, shown, sizeof(shown));
			snprintf(why, sizeof(why), "statistic name \"%s\" has a non-printable byte 0x%02x "
				 "(printable ASCII only)", shown, c);
			return why;
		}
		if (len == RT_STAT_NAME_MAX) {
			printable_name(name, shown, sizeof(shown));
			snprintf(why, sizeof(why), "statistic name \"%s\" is longer than %d bytes", shown,
				 RT_STAT_NAME_MAX);
			return why;
		}
	}
	return NULL;
}

/* Remembers the first bad statistic call; the daemon fails the run with it
 * once the handler returns (a void call cannot report it itself). */
static void stat_fail(struct rt_ctx *ctx, enum rt_err code, const char *line)
{
	if (ctx->stat_err)
		return;
	ctx->stat_err = code;
	snprintf(ctx->stat_err_line, sizeof(ctx->stat_err_line), "%s", line);
}

/* NULL if a unit or description `text` is printable and at most `max`
 * bytes; else why not (into `why`). */
static const char *stat_text_check(const char *name, const char *what, const char *text,
				   size_t max, char *why, size_t cap)
{
	char shown[80];
	size_t len = 0;

	for (; text[len]; len++) {
		unsigned char c = (unsigned char)text[len];

		if (c < 0x20 || c > 0x7e || len == max) {
			printable_name(name, shown, sizeof(shown));
			snprintf(why, cap, "statistic \"%s\": its %s %s", shown, what,
				 len == max ? "is too long" : "has a non-printable byte");
			return why;
		}
	}
	return NULL;
}

/* The index of statistic `name`, or n_stats when there is none. */
static size_t stat_index(const struct rt_ctx *ctx, const char *name)
{
	size_t i = 0;

	while (i < ctx->n_stats && strcmp(ctx->stats[i].name, name))
		i++;
	return i;
}

/* Appends a new statistic (every string already checked). */
static uint32_t stat_append(struct rt_ctx *ctx, const struct rt_stat_decl *d)
{
	struct rt_stat *s;

	if (ctx->n_stats == ctx->cap_stats) {
		size_t cap = ctx->cap_stats ? ctx->cap_stats * 2 : 16;
		struct rt_stat *grown = realloc(ctx->stats, cap * sizeof(*grown));

		if (!grown)
			goto out_nomem;
		ctx->stats = grown;
		ctx->cap_stats = cap;
	}
	s = &ctx->stats[ctx->n_stats];
	s->name = strdup(d->name);
	s->unit = strdup(d->unit ? d->unit : "");
	s->description = strdup(d->description ? d->description : "");
	if (!s->name || !s->unit || !s->description) {
		free(s->name);
		free(s->unit);
		free(s->description);
		goto out_nomem;
	}
	s->value = 0;
	s->is_max = d->merge == RT_STAT_MAX;
	s->per_instance = d->per_instance;
	return (uint32_t)ctx->n_stats++;
out_nomem:
	stat_fail(ctx, RT_ENOMEM, "out of memory for statistics");
	return RT_STAT_NONE;
}

uint32_t rt_stat_declare(struct rt_ctx *ctx, const struct rt_stat_decl *d)
{
	char why[256];
	const char *bad = d->name ? rt_stat_name_check(d->name) : "statistic name is empty";
	size_t i;

	if (!bad && d->unit)
		bad = stat_text_check(d->name, "unit", d->unit, RT_STAT_UNIT_MAX, why, sizeof(why));
	if (!bad && d->description)
		bad = stat_text_check(d->name, "description", d->description, RT_STAT_DESC_MAX, why,
				      sizeof(why));
	if (bad) {
		stat_fail(ctx, RT_EINVAL, bad);
		return RT_STAT_NONE;
	}
	i = stat_index(ctx, d->name);
	if (i == ctx->n_stats)
		return stat_append(ctx, d);
	if (ctx->stats[i].is_max != (d->merge == RT_STAT_MAX)) {
		snprintf(why, sizeof(why), "statistic \"%s\" is both summed and maxed", d->name);
		stat_fail(ctx, RT_EINVAL, why);
		return RT_STAT_NONE;
	}
	return (uint32_t)i;
}

void rt_stat_declare_all(struct rt_ctx *ctx, const struct rt_stat_decl *decls, size_t n,
			 uint32_t *handles)
{
	for (size_t i = 0; i < n; i++)
		handles[i] = rt_stat_declare(ctx, &decls[i]);
}

void rt_stat_add_h(struct rt_ctx *ctx, uint32_t h, uint64_t value)
{
	if (h < ctx->n_stats)
		ctx->stats[h].value += value;
}

void rt_stat_max_h(struct rt_ctx *ctx, uint32_t h, uint64_t value)
{
	if (h < ctx->n_stats && value > ctx->stats[h].value)
		ctx->stats[h].value = value;
}

/* The statistic `name`, declared on first use. Only a new name is
 * checked: every stored one passed the check, so the per-call cost of a
 * known statistic is one lookup. */
static uint32_t find_stat(struct rt_ctx *ctx, const char *name, bool is_max)
{
	struct rt_stat_decl d = { .name = name, .merge = is_max ? RT_STAT_MAX : RT_STAT_SUM };
	size_t i = name ? stat_index(ctx, name) : ctx->n_stats;

	if (i < ctx->n_stats && ctx->stats[i].is_max == is_max)
		return (uint32_t)i;
	return rt_stat_declare(ctx, &d);
}

void rt_stat_add(struct rt_ctx *ctx, const char *name, uint64_t value)
{
	rt_stat_add_h(ctx, find_stat(ctx, name, false), value);
}

void rt_stat_max(struct rt_ctx *ctx, const char *name, uint64_t value)
{
	rt_stat_max_h(ctx, find_stat(ctx, name, true), value);
}

enum rt_err rt_ctx_stat_error(const struct rt_ctx *c)
{
	return c->stat_err ? rt_fail(c->stat_err, "%s", c->stat_err_line) : RT_EOK;
}

void rt_ctx_report(const struct rt_ctx *c, Kb__ComponentReport *r, Kb__Stat *stats,
		   Kb__Stat **stat_ptrs)
{
	kb__component_report__init(r);
	r->component = c->id;
	r->delivered = c->delivered;
	r->digest = c->digest;
	r->last_ps = c->last_ps + c->last_off_ps;
	for (size_t i = 0; i < c->n_stats; i++) {
		kb__stat__init(&stats[i]);
		stats[i].name = c->stats[i].name;
		stats[i].value = c->stats[i].value;
		stats[i].is_max = c->stats[i].is_max;
		stats[i].unit = c->stats[i].unit;
		stats[i].description = c->stats[i].description;
		stats[i].per_instance = c->stats[i].per_instance;
		stat_ptrs[i] = &stats[i];
	}
	r->n_stats = c->n_stats;
	r->stats = stat_ptrs;
	r->unfinished = c->unfinished ? c->unfinished : (char *)"";
	if (c->has_end_path) {
		r->n_path = RT_PATH_CLASSES;
		r->path = (uint64_t *)c->end_path.ps;
		r->path_segment = c->end_segment;
	}
}

static enum rt_err append_part(struct rt_ctx *c, FILE **f, struct rt_buf *b, const char *ext)
{
	char path[RT_PATH_MAX + 64];

	if (!b->len)
		return RT_EOK;
	if (!*f) {
		snprintf(path, sizeof(path), "%s/%s/%u.%s", c->daemon->job->out_dir, RT_PARTS_DIR,
			 c->id, ext);
		*f = fopen(path, "w");
		if (!*f)
			return rt_fail(RT_EIO, "%s: cannot create %s: %s", c->desc->name, path,
				       strerror(errno));
	}
	if (fwrite(b->data, 1, b->len, *f) != b->len)
		return rt_fail(RT_EIO, "%s: cannot write its %s part: %s", c->desc->name, ext,
			       strerror(errno));
	rt_buf_reset(b);
	return RT_EOK;
}

enum rt_err rt_ctx_flush(struct rt_ctx *c, bool final)
{
	enum rt_err err = append_part(c, &c->cpath_file, &c->cpath, "cpath");
	char dir[RT_PATH_MAX + 16], stem[16];

	snprintf(dir, sizeof(dir), "%s/%s", c->daemon->job->out_dir, RT_PARTS_DIR);
	snprintf(stem, sizeof(stem), "%u", c->id);
	if (!err)
		err = rt_trace_flush_as(&c->oplog, dir, stem, "oplog", final);
	if (!err)
		err = rt_trace_flush(&c->trace, dir, stem, final);
	if (err || !final)
		return err;
	if (c->cpath_file && fclose(c->cpath_file) && !err)
		err = rt_fail(RT_EIO, "%s: cannot close its critical path part", c->desc->name);
	c->cpath_file = NULL;
	return err;
}
