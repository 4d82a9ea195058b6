/* hbm/hbm.c — the rank's memory component ("hbm", one per rank) and the
 * lookup of its model (built-in name or plug-in .so).
 *
 * A DMA channel sends HbmRequest when it starts a transfer; it arrives after
 * the channel's setup (the link's latency, workloads/pe.c), when the first
 * byte may move. The component hands requests to the model in delivery
 * order — the total event key, the same in every process grouping — keeps
 * one timer at the model's next completion, and answers each finished
 * transfer with HbmDone, sent when its last byte is through and delivered
 * after the link's latency, which is the HBM access latency (pipelined: it
 * holds no bandwidth). A newer timer supersedes older ones (tag =
 * generation).
 *
 * Critical path (rt/path.h): a transfer's bytes start moving when it
 * arrives, or when its channel's previous transfer is through, whichever
 * is later (that one's path then); until its last byte they take its
 * channel's own time (hbm_data) and whatever the sharing added
 * (hbm_queueing); the answer's latency is hbm_latency. */
#include "eng.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "rt/ff.h"
#include "rt/grow.h"
#include "rt/job.h"
#include "npu/payload.h"
#include "npu/pe.h"

/* token = DMA component << 41 | channel << 40 | per-channel transfer id */
#define TOKEN_ID_BITS 40

/* A transfer the model holds: what its critical path needs. */
struct inflight {
	uint64_t token;
	uint64_t arrive_ps;  /* its request arrived (first byte may move) */
	uint64_t wire_ps;    /* its channel's own time for its bytes */
	bool has_path;
	struct rt_path path; /* critical path to arrive_ps */
};

/* One DMA channel of the rank, as the memory sees it. */
struct hbm_stream {
	struct inflight *q;  /* its transfers in flight (unordered) */
	size_t n, cap;
	uint64_t last_end_ps;/* its previous transfer's last byte */
	bool last_has_path;
	struct rt_path last_path; /* ... and the path to then */
};

struct hbm {
	const struct eng_hbm_ops *ops;
	void *state;         /* ops->state_size bytes (owned) */
	void *dl;            /* plug-in handle or NULL (owned) */
	uint32_t pes;
	uint64_t gen;        /* tag of the live timer */
	uint64_t timer_ps;   /* its time, UINT64_MAX when none */
	struct rt_ctx *ctx;  /* of the current call (for done callbacks) */
	enum rt_err err;     /* first failure inside a done callback */
	struct hbm_stream *streams; /* 2 per PE: read, write (owned) */
	uint32_t n_streams;
	uint32_t stat[2];    /* hbm_stats, by handle */
};

static const struct rt_stat_decl hbm_stats[] = {
	RT_STAT_DECL("hbm_bytes", "bytes",
			"bytes the rank's DMA channels moved through its HBM (reads and writes)"),
	RT_STAT_DECL("hbm_transfers", "count", "DMA transfers the rank's memory served"),
};

bool eng_hbm_ideal(const struct rt_config *cfg)
{
	return strcmp(cfg->hbm_model, "ideal") == 0;
}

bool eng_hbm_local(const struct rt_config *cfg)
{
	/* a read and a write channel per PE, each of dma.queues queues of at
	 * most b bytes per cycle */
	return eng_hbm_ideal(cfg) ||
	       (strcmp(cfg->hbm_model, "shared") == 0 &&
		eng_mul_sat(eng_mul_sat(eng_hbm_streams(cfg), cfg->dma_queues ? cfg->dma_queues : 1),
			    cfg->dma_bytes_per_cycle) <= cfg->hbm_bytes_per_cycle);
}

static enum rt_err hbm_load_plugin(const char *path, struct hbm *h)
{
	void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	const struct eng_hbm_ops *ops;

	if (!dl)
		return rt_fail(RT_ENOTFOUND, "hbm model plug-in: %s", dlerror());
	ops = dlsym(dl, ENG_HBM_PLUGIN_SYMBOL);
	if (!ops || ops->abi != ENG_HBM_ABI || !ops->name || !ops->retire || !ops->submit ||
	    !ops->next_done) {
		dlclose(dl);
		return rt_fail(RT_ECONFIG,
			       "hbm model plug-in %s: needs '%s' (const struct eng_hbm_ops, ABI %u, with name, retire, submit and next_done)",
			       path, ENG_HBM_PLUGIN_SYMBOL, ENG_HBM_ABI);
	}
	h->ops = ops;
	h->dl = dl;
	return RT_EOK;
}

static enum rt_err hbm_find(const char *name, struct hbm *h)
{
	if (eng_is_plugin_path(name))
		return hbm_load_plugin(name, h);
	if (strcmp(name, eng_hbm_shared_model.name) == 0) {
		h->ops = &eng_hbm_shared_model;
		return RT_EOK;
	}
	if (strcmp(name, eng_hbm_interleaved_model.name) == 0) {
		h->ops = &eng_hbm_interleaved_model;
		return RT_EOK;
	}
	return rt_fail(RT_ENOTFOUND,
		       "hbm.model '%s' is not built in (shared, interleaved, ideal) and is not a plug-in path (needs a '/' or a .so suffix)",
		       name);
}

enum rt_err eng_hbm_check(const char *name)
{
	struct stat st;

	if (eng_is_plugin_path(name)) {
		if (stat(name, &st) || !S_ISREG(st.st_mode))
			return rt_fail(RT_EINVAL, "hbm.model=%.200s: not a regular file", name);
		return RT_EOK;
	}
	if (!strcmp(name, eng_hbm_shared_model.name) ||
	    !strcmp(name, eng_hbm_interleaved_model.name) || !strcmp(name, "ideal"))
		return RT_EOK;
	return rt_fail(RT_EINVAL, "hbm.model '%.60s' is not built in (shared, interleaved, ideal) "
		       "and is not a plug-in path (needs a '/' or a .so suffix)", name);
}

enum rt_err eng_hbm_plugin_check(const char *name)
{
	struct hbm h = { 0 };
	enum rt_err err = hbm_find(name, &h);

	if (h.dl)
		dlclose(h.dl);
	return err;
}

static enum rt_err hbm_init(struct rt_ctx *ctx, void *state)
{
	const struct rt_config *cfg = rt_cfg(ctx);
	struct hbm *h = state;
	enum rt_err err = hbm_find(cfg->hbm_model, h);

	if (err)
		return err; /* the daemon names this component */
	rt_stat_declare_all(ctx, hbm_stats, 2, h->stat);
	h->pes = cfg->pes;
	h->timer_ps = UINT64_MAX;
	h->n_streams = 2 * cfg->pes;
	h->streams = calloc(h->n_streams, sizeof(*h->streams));
	if (!h->streams)
		return rt_fail(RT_ENOMEM, "rank memory: no memory for %u channels", h->n_streams);
	h->state = calloc(1, h->ops->state_size ? h->ops->state_size : 1);
	if (!h->state)
		return rt_fail(RT_ENOMEM, "hbm model '%s': no memory for state", h->ops->name);
	return h->ops->init ? h->ops->init(h->state, cfg) : RT_EOK;
}

/* The stream (DMA channel of the rank) a token's transfer moves on. */
static struct hbm_stream *token_stream(const struct hbm *h, uint64_t token)
{
	uint32_t src = (uint32_t)(token >> (TOKEN_ID_BITS + 1));
	uint32_t idx = 2 * ((src / PE_UNITS) % h->pes) + ((uint32_t)(token >> TOKEN_ID_BITS) & 1u);

	return idx < h->n_streams ? &h->streams[idx] : NULL;
}

/* Takes the transfer `token` out of its stream and makes the critical
 * path to its last byte at end_ps (false: no path known). */
static bool transfer_path(struct hbm *h, uint64_t token, uint64_t end_ps, struct rt_path *out)
{
	struct hbm_stream *st = token_stream(h, token);
	struct inflight x;
	uint64_t from, own;
	size_t i = 0;

	while (st && i < st->n && st->q[i].token != token)
		i++;
	if (!st || i == st->n)
		return false;
	x = st->q[i];
	st->q[i] = st->q[--st->n];
	from = x.arrive_ps;
	*out = x.path;
	/* behind the channel's previous bytes (a model that lets a transfer
	 * overtake the one ahead of it keeps its own start) */
	if (st->last_end_ps > from && st->last_end_ps <= end_ps) {
		from = st->last_end_ps;
		*out = st->last_path;
		x.has_path = x.has_path && st->last_has_path;
	}
	own = end_ps - from < x.wire_ps ? end_ps - from : x.wire_ps;
	rt_path_add(out, RT_PATH_HBM_DATA, own);
	rt_path_add(out, RT_PATH_HBM_QUEUEING, end_ps - from - own);
	if (end_ps >= st->last_end_ps) {
		st->last_end_ps = end_ps;
		st->last_path = *out;
		st->last_has_path = x.has_path;
	}
	return x.has_path;
}

/* A finished transfer: HbmDone leaves at end_ps (>= now), lands after the
 * HBM latency. */
static void hbm_answer(void *arg, uint64_t token, uint64_t end_ps)
{
	struct hbm *h = arg;
	Kb__HbmDone done = KB__HBM_DONE__INIT;
	Kb__Payload msg = KB__PAYLOAD__INIT;
	uint32_t dst = (uint32_t)(token >> (TOKEN_ID_BITS + 1));
	uint64_t now = rt_now(h->ctx), lat;
	struct rt_path path;
	bool has_path;
	enum rt_err err;

	if (end_ps < now)
		end_ps = now;
	lat = rt_topology_latency(rt_topo(h->ctx), rt_self(h->ctx), dst);
	has_path = transfer_path(h, token, end_ps, &path);
	done.id = token & ((1ull << TOKEN_ID_BITS) - 1);
	done.channel = (uint32_t)(token >> TOKEN_ID_BITS) & 1u;
	done.done_ps = end_ps + lat;
	msg.body_case = KB__PAYLOAD__BODY_HBM_DONE;
	msg.hbm_done = &done;
	rt_path_add(&path, RT_PATH_HBM_LATENCY, lat);
	err = has_path ? rt_send_path(h->ctx, dst, end_ps, 0, 0, &msg, &path)
		       : rt_send(h->ctx, dst, end_ps, 0, &msg);
	if (err && !h->err)
		h->err = err;
}

/* Keeps one live timer at the model's next completion. */
static enum rt_err hbm_rearm(struct rt_ctx *ctx, struct hbm *h)
{
	uint64_t next = h->ops->next_done(h->state), now = rt_now(ctx);

	if (next == UINT64_MAX || next == h->timer_ps)
		return RT_EOK;
	h->timer_ps = next > now ? next : now;
	return rt_timer(ctx, h->timer_ps, ++h->gen);
}

/* Keeps what the critical path of transfer `a` will need. */
static enum rt_err remember(struct hbm *h, const struct eng_hbm_access *a,
			    const Kb__HbmRequest *r, const struct rt_path *path)
{
	struct hbm_stream *st = token_stream(h, a->token);
	struct inflight *x;

	if (!st)
		return rt_fail(RT_EPROTOCOL, "HbmRequest for stream %u of %u", a->stream,
			       h->n_streams);
	if (!RT_GROW(st->q, st->cap, st->n, 8))
		return rt_fail(RT_ENOMEM, "rank memory: out of memory");
	x = &st->q[st->n++];
	x->token = a->token;
	x->arrive_ps = a->issue_ps;
	x->wire_ps = r->wire_end_ps > r->issue_ps ? r->wire_end_ps - r->issue_ps : 0;
	x->has_path = path != NULL;
	if (path)
		x->path = *path;
	return RT_EOK;
}

static enum rt_err hbm_submit(struct rt_ctx *ctx, struct hbm *h, const struct rt_delivery *d)
{
	const Kb__HbmRequest *r = d->msg->hbm_request;
	struct eng_hbm_access a;
	enum rt_err err;

	if (r->channel > 1 || r->id >> TOKEN_ID_BITS)
		return rt_fail(RT_EPROTOCOL, "HbmRequest from component %u: channel %u, id %llu",
			       d->src, r->channel, (unsigned long long)r->id);
	a.token = ((uint64_t)d->src << (TOKEN_ID_BITS + 1)) |
		  ((uint64_t)r->channel << TOKEN_ID_BITS) | r->id;
	a.stream = 2 * ((d->src / PE_UNITS) % h->pes) + r->channel;
	a.addr = r->addr;
	a.bytes = r->bytes;
	/* a request without lanes (one queue) moves all its bytes on one */
	a.lanes = r->lanes ? r->lanes : 1;
	a.lane_bytes = r->lane_bytes && r->lane_bytes <= r->bytes ? r->lane_bytes : r->bytes;
	a.issue_ps = d->time_ps;
	a.wire_end_ps = r->wire_end_ps;
	rt_stat_add_h(ctx, h->stat[0], r->bytes);
	rt_stat_add_h(ctx, h->stat[1], 1);
	err = remember(h, &a, r, d->path);
	return err ? err : h->ops->submit(h->state, d->time_ps, &a);
}

static enum rt_err hbm_handle(struct rt_ctx *ctx, void *state, const struct rt_delivery *d)
{
	struct hbm *h = state;
	enum rt_err err;

	if (d->is_timer && d->tag != h->gen)
		return RT_EOK; /* superseded */
	if (!d->is_timer && (!d->msg || d->msg->body_case != KB__PAYLOAD__BODY_HBM_REQUEST))
		return rt_fail(RT_EPROTOCOL,
			       "expected an HbmRequest from component %u, got payload body %d",
			       d->src, d->msg ? (int)d->msg->body_case : -1);
	if (d->is_timer)
		h->timer_ps = UINT64_MAX;
	h->ctx = ctx;
	h->err = RT_EOK;
	err = h->ops->retire(h->state, d->time_ps, hbm_answer, h);
	if (!err)
		err = h->err;
	if (!err && !d->is_timer)
		err = hbm_submit(ctx, h, d);
	return err ? err : hbm_rearm(ctx, h);
}

static enum rt_err hbm_fini(struct rt_ctx *ctx, void *state)
{
	struct hbm *h = state;
	enum rt_err undone = RT_EOK;

	(void)ctx;
	if (h->ops && h->state && h->ops->next_done(h->state) != UINT64_MAX)
		undone = rt_fail(RT_EUNFINISHED,
				 "rank memory did not finish: transfers still in flight");
	if (h->ops && h->ops->fini && h->state)
		h->ops->fini(h->state);
	free(h->state);
	for (uint32_t i = 0; h->streams && i < h->n_streams; i++)
		free(h->streams[i].q);
	free(h->streams);
	if (h->dl)
		dlclose(h->dl);
	memset(h, 0, sizeof(*h));
	return undone;
}

/* Fast-forward (ADR 0059): the transfers in flight per stream (an
 * order-free sum), the live timer and the model's own state, relative to
 * t. A plug-in model cannot say: then the time itself, which never
 * repeats. */
static uint64_t hbm_digest(const struct rt_ctx *ctx, const void *state, uint64_t t)
{
	const struct hbm *h = state;
	uint64_t d = h->timer_ps == UINT64_MAX ? UINT64_MAX : rt_ff_rel(h->timer_ps, t);
	(void)ctx;
	if (h->dl || !h->ops->digest)
		return rt_ff_mix(0x68626d, t); /* the absolute time: never repeats */
	d = rt_ff_mix(d, h->ops->digest(h->state, t));
	for (uint32_t i = 0; i < h->n_streams; i++) {
		const struct hbm_stream *s = &h->streams[i];
		uint64_t sum = 0;

		for (size_t k = 0; k < s->n; k++)
			sum += rt_ff_mix(rt_ff_rel(s->q[k].arrive_ps, t), rt_ff_rel(s->q[k].wire_ps, t));
		d = rt_ff_mix(d, rt_ff_mix(((uint64_t)s->n << 1) ^ sum, rt_ff_rel(s->last_end_ps, t)));
	}
	return d;
}

const struct rt_component_ops eng_hbm_ops = {
	.name = "hbm",
	.state_size = sizeof(struct hbm),
	.init = hbm_init,
	.handle = hbm_handle,
	.fini = hbm_fini,
	.ff_digest = hbm_digest,
	.check = npu_check_payload,
};
