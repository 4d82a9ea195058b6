/* topology.c — components, links, daemon placement and lookahead. */
#include "rt/topology.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/component.h"
#include "rt/event.h"

void rt_topology_init(struct rt_topology *t)
{
	memset(t, 0, sizeof(*t));
	t->lookahead_ps = RT_TIME_NEVER;
}

void rt_topology_release(struct rt_topology *t)
{
	free(t->components);
	free(t->links);
	free(t->link_start);
	free(t->daemons);
	rt_topology_init(t);
}

enum rt_err rt_topology_add(struct rt_topology *t, const char *name,
			    const struct rt_component_ops *ops, uint32_t rank,
			    uint32_t pe, uint32_t *id)
{
	struct rt_component_desc *c;

	if (t->n_links)
		return rt_fail(RT_EINVAL, "component %s added after links were declared", name);
	if (t->n_components == t->cap_components) {
		uint32_t cap = t->cap_components ? t->cap_components * 2 : 16;
		struct rt_component_desc *grown = realloc(t->components, cap * sizeof(*grown));

		if (!grown)
			return rt_fail(RT_ENOMEM, "cannot grow the topology to %u components", cap);
		t->components = grown;
		t->cap_components = cap;
	}
	c = &t->components[t->n_components];
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->ops = ops;
	c->rank = rank;
	c->pe = pe;
	*id = t->n_components++;
	return RT_EOK;
}

enum rt_err rt_topology_link(struct rt_topology *t, uint32_t src, uint32_t dst,
			     uint64_t latency_ps)
{
	uint32_t n = t->n_components;

	if (src >= n || dst >= n)
		return rt_fail(RT_EINVAL, "link %u -> %u names a missing component", src, dst);
	if (latency_ps == 0)
		return rt_fail(RT_ECONFIG, "link %s -> %s has zero latency (model at least one cycle)",
			       t->components[src].name, t->components[dst].name);
	if (t->n_links == t->cap_links) {
		size_t cap = t->cap_links ? t->cap_links * 2 : 64;
		struct rt_link *grown = realloc(t->links, cap * sizeof(*grown));

		if (!grown)
			return rt_fail(RT_ENOMEM, "cannot grow the topology to %zu links", cap);
		t->links = grown;
		t->cap_links = cap;
	}
	t->links[t->n_links] = (struct rt_link){ src, dst, latency_ps, t->n_links };
	t->n_links++;
	free(t->link_start); /* a new link invalidates the index */
	t->link_start = NULL;
	return RT_EOK;
}

static int link_cmp(const void *a, const void *b)
{
	const struct rt_link *x = a, *y = b;

	if (x->src != y->src)
		return x->src < y->src ? -1 : 1;
	if (x->dst != y->dst)
		return x->dst < y->dst ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq; /* declaration order */
}

static bool same_pair(const struct rt_link *x, const struct rt_link *y)
{
	return x->src == y->src && x->dst == y->dst;
}

/* Sorts the links by (src, dst), keeps the last declaration of a pair (as
 * the matrix it replaces did) and indexes each source's run. */
static enum rt_err index_links(struct rt_topology *t)
{
	size_t kept = 0;

	free(t->link_start);
	t->link_start = calloc((size_t)t->n_components + 1, sizeof(*t->link_start));
	if (!t->link_start)
		return rt_fail(RT_ENOMEM, "cannot index %zu links", t->n_links);
	if (t->n_links)
		qsort(t->links, t->n_links, sizeof(*t->links), link_cmp);
	for (size_t i = 0; i < t->n_links; i++) {
		if (kept && same_pair(&t->links[kept - 1], &t->links[i]))
			kept--;
		t->links[kept++] = t->links[i];
	}
	t->n_links = kept;
	for (size_t i = 0; i < kept; i++)
		t->link_start[t->links[i].src + 1]++;
	for (uint32_t c = 0; c < t->n_components; c++)
		t->link_start[c + 1] += t->link_start[c];
	return RT_EOK;
}

uint64_t rt_topology_latency(const struct rt_topology *t, uint32_t src, uint32_t dst)
{
	size_t lo, hi;

	if (src >= t->n_components || dst >= t->n_components)
		return 0;
	if (!t->link_start) { /* not placed yet: the latest declaration */
		for (size_t i = t->n_links; i-- > 0;)
			if (t->links[i].src == src && t->links[i].dst == dst)
				return t->links[i].latency_ps;
		return 0;
	}
	lo = t->link_start[src];
	hi = t->link_start[src + 1];
	if (lo < hi && dst >= t->links[lo].dst) {
		/* a source linked to a dense range of destinations (all but
		 * itself, as in traffic) finds dst where it would be, or one
		 * before: no search */
		size_t guess = lo + (dst - t->links[lo].dst);

		if (guess < hi && t->links[guess].dst == dst)
			return t->links[guess].latency_ps;
		if (guess > lo && guess - 1 < hi && t->links[guess - 1].dst == dst)
			return t->links[guess - 1].latency_ps;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->links[mid].dst == dst)
			return t->links[mid].latency_ps;
		if (t->links[mid].dst < dst)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* The daemon key of a component under a policy: components with equal keys
 * share a daemon. Daemons are numbered by first appearance, so numbering
 * follows component order and is the same in every process. */
static uint64_t group_key(const struct rt_component_desc *c, uint32_t id,
			  enum rt_colocate how)
{
	switch (how) {
	case RT_COLOCATE_PE:
		return ((uint64_t)c->rank << 32) | c->pe;
	case RT_COLOCATE_RANK:
		return c->rank;
	case RT_COLOCATE_ALL:
		return 0;
	default:
		return id;
	}
}

static void name_daemon(struct rt_daemon_desc *d, const struct rt_component_desc *c,
			enum rt_colocate how)
{
	switch (how) {
	case RT_COLOCATE_PE:
		/* a rank-level component (pe = UINT32_MAX, rt/pe.h) is its own group */
		snprintf(d->name, sizeof(d->name), "kb-%s", c->pe == UINT32_MAX ? "rank" : "pe");
		if (c->pe == UINT32_MAX)
			snprintf(d->label, sizeof(d->label), "r%u", c->rank);
		else
			snprintf(d->label, sizeof(d->label), "r%u.pe%u", c->rank, c->pe);
		break;
	case RT_COLOCATE_RANK:
		snprintf(d->name, sizeof(d->name), "kb-rank");
		snprintf(d->label, sizeof(d->label), "r%u", c->rank);
		break;
	case RT_COLOCATE_ALL:
		snprintf(d->name, sizeof(d->name), "kb-all");
		snprintf(d->label, sizeof(d->label), "all");
		break;
	default:
		snprintf(d->name, sizeof(d->name), "kb-%.30s", c->ops ? c->ops->name : "comp");
		snprintf(d->label, sizeof(d->label), "%s", c->name);
		break;
	}
}

static enum rt_err assign_daemons(struct rt_topology *t, enum rt_colocate how)
{
	uint64_t *keys = calloc(t->n_components, sizeof(*keys));

	free(t->daemons);
	t->daemons = calloc(t->n_components, sizeof(*t->daemons));
	if (!keys || !t->daemons) {
		free(keys);
		return rt_fail(RT_ENOMEM, "cannot place %u components", t->n_components);
	}
	t->n_daemons = 0;
	for (uint32_t i = 0; i < t->n_components; i++) {
		struct rt_component_desc *c = &t->components[i];
		uint64_t key = group_key(c, i, how);
		uint32_t d = 0;

		while (d < t->n_daemons && keys[d] != key)
			d++;
		if (d == t->n_daemons) {
			keys[d] = key;
			name_daemon(&t->daemons[d], c, how);
			t->n_daemons++;
		}
		c->daemon = d;
		t->daemons[d].n_hosted++;
	}
	free(keys);
	return RT_EOK;
}

enum rt_err rt_topology_place(struct rt_topology *t, enum rt_colocate how)
{
	uint32_t n = t->n_components;
	enum rt_err err;

	if (n == 0)
		return rt_fail(RT_ECONFIG, "the workload has no components");
	err = assign_daemons(t, how);
	if (err)
		return err;
	err = index_links(t);
	if (err)
		return err;
	t->lookahead_ps = RT_TIME_NEVER;
	for (size_t i = 0; i < t->n_links; i++) {
		const struct rt_link *l = &t->links[i];

		if (t->components[l->src].daemon != t->components[l->dst].daemon &&
		    l->latency_ps < t->lookahead_ps)
			t->lookahead_ps = l->latency_ps;
	}
	return RT_EOK;
}

enum rt_err rt_colocate_parse(const char *s, enum rt_colocate *out)
{
	static const char *const names[] = { "none", "pe", "rank", "all" };

	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i])) {
			*out = (enum rt_colocate)i;
			return RT_EOK;
		}
	return rt_fail(RT_EINVAL, "--colocate '%s': expected none, pe, rank or all", s);
}

const char *rt_colocate_name(enum rt_colocate c)
{
	static const char *const names[] = { "none", "pe", "rank", "all" };

	return (unsigned)c < 4 ? names[c] : "?";
}
