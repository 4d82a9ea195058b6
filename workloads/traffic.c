/* traffic.c — the synthetic `traffic` workload: K components pass M
 * messages to seeded random destinations over links with seeded random
 * latencies. It exercises the lockstep core alone (a test fixture and the
 * sync benchmark); it knows nothing of PEs. `--ranks R` splits the
 * components into R contiguous blocks, one per rank (one component per
 * rank when there are fewer), so a run can span hosts (`--hosts`) with
 * only the lockstep core between them.
 *
 * Each component starts `tokens` tokens; a token hops `hops` times, each hop
 * a message to a random other component after a random processing delay.
 * Every random draw comes from a splitmix64 stream seeded by (seed, id). */
#include <stdio.h>
#include <string.h>

#include "rt/buf.h"
#include "rt/component.h"
#include "rt/rand.h"
#include "workloads.h"

#define MIN_LATENCY_PS 1000
#define LATENCY_SPAN_PS 4001
#define MAX_DELAY_PS 500

struct traffic_state {
	uint64_t rng;        /* splitmix64 state */
	uint32_t n;          /* components */
	uint32_t hops;       /* hops per token */
	uint32_t tokens;     /* tokens started here */
	uint32_t sent_stat;  /* sent_decl, by handle */
};

static const struct rt_stat_decl sent_decl = RT_STAT_DECL("sent", "messages",
		"messages this component sent");

struct traffic_shape {
	uint64_t components;
	uint64_t messages;
	uint64_t tokens;
};

static enum rt_err traffic_shape(const struct rt_job *job, struct traffic_shape *s)
{
	enum rt_err err = RT_EOK;

	for (uint32_t i = 0; i < job->n_args; i++)
		if (strcmp(job->args[i].name, "components") && strcmp(job->args[i].name, "messages") &&
		    strcmp(job->args[i].name, "tokens"))
			return rt_fail(RT_EUSAGE, "traffic: unknown --arg %s (expected components, "
				       "messages or tokens)", job->args[i].name);
	/* hops per token must fit 32 bits, so messages stays below 2^32 */
	err = rt_job_arg_u64(job, "components", 8, 2, 4096, &s->components);
	if (!err)
		err = rt_job_arg_u64(job, "messages", 10000, 1, UINT32_MAX, &s->messages);
	if (!err)
		err = rt_job_arg_u64(job, "tokens", 4, 1, 1024, &s->tokens);
	if (err)
		return err;
	return RT_EOK;
}

static enum rt_err send_hop(struct rt_ctx *ctx, struct traffic_state *st, uint32_t origin,
			    uint32_t hops_left, uint64_t value)
{
	Kb__Payload p = KB__PAYLOAD__INIT;
	Kb__Traffic t = KB__TRAFFIC__INIT;
	uint32_t self = rt_self(ctx);
	uint32_t dst = (uint32_t)(rt_splitmix64(&st->rng) % (st->n - 1));
	uint64_t delay = rt_splitmix64(&st->rng) % (MAX_DELAY_PS + 1);

	if (dst >= self)
		dst++; /* any component but this one */
	t.origin = origin;
	t.hops_left = hops_left;
	t.value = value;
	p.body_case = KB__PAYLOAD__BODY_TRAFFIC;
	p.traffic = &t;
	rt_stat_add_h(ctx, st->sent_stat, 1);
	return rt_send(ctx, dst, rt_now(ctx) + delay, 0, &p);
}

static enum rt_err traffic_init(struct rt_ctx *ctx, void *state)
{
	struct traffic_state *st = state;
	const struct rt_job *job = rt_job(ctx);
	struct traffic_shape shape;
	enum rt_err err = traffic_shape(job, &shape);
	uint64_t per_token;

	if (err)
		return err;
	st->sent_stat = rt_stat_declare(ctx, &sent_decl);
	st->rng = job->seed ^ (0x5851f42d4c957f2dULL * (rt_self(ctx) + 1));
	st->n = (uint32_t)shape.components;
	st->tokens = (uint32_t)shape.tokens;
	per_token = shape.messages / (shape.components * shape.tokens);
	st->hops = per_token ? (uint32_t)per_token : 1;
	for (uint32_t i = 0; i < st->tokens && !err; i++)
		err = rt_timer(ctx, rt_splitmix64(&st->rng) % 1000, i);
	return err;
}

static enum rt_err traffic_handle(struct rt_ctx *ctx, void *state, const struct rt_delivery *d)
{
	struct traffic_state *st = state;
	const Kb__Traffic *t;

	if (d->is_timer)
		return send_hop(ctx, st, rt_self(ctx), st->hops - 1, d->tag);
	if (d->msg->body_case != KB__PAYLOAD__BODY_TRAFFIC)
		return rt_fail(RT_EPROTOCOL, "traffic component got a non-traffic message");
	t = d->msg->traffic;
	if (!t->hops_left)
		return RT_EOK;
	return send_hop(ctx, st, t->origin, t->hops_left - 1,
			rt_hash_u64(t->value, d->time_ps));
}

static const struct rt_component_ops traffic_ops = {
	.name = "traffic",
	.state_size = sizeof(struct traffic_state),
	.init = traffic_init,
	.handle = traffic_handle,
};

enum rt_err kb_traffic_build(const struct rt_job *job, struct rt_topology *topo)
{
	struct traffic_shape shape;
	enum rt_err err = traffic_shape(job, &shape);
	uint64_t seed = job->seed;
	uint64_t ranks = job->config.ranks ? job->config.ranks : 1;

	if (ranks > shape.components)
		ranks = shape.components; /* the ranks past them hold none */
	for (uint32_t i = 0; !err && i < shape.components; i++) {
		char name[RT_NAME_MAX];
		uint32_t rank = (uint32_t)(i * ranks / shape.components);
		uint32_t first = (uint32_t)((rank * shape.components + ranks - 1) / ranks);
		uint32_t id;

		snprintf(name, sizeof(name), "t%03u", i);
		err = rt_topology_add(topo, name, &traffic_ops, rank, i - first, &id);
	}
	for (uint32_t s = 0; !err && s < shape.components; s++)
		for (uint32_t d = 0; !err && d < shape.components; d++) {
			uint64_t h = rt_hash_u64(rt_hash_u64(rt_hash_u64(RT_HASH_INIT, seed), s), d);

			if (s != d)
				err = rt_topology_link(topo, s, d, MIN_LATENCY_PS + h % LATENCY_SPAN_PS);
		}
	return err;
}
