/* topology.c — components, links, daemon placement and lookahead. */
#include "rt/topology.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt/buf.h"
#include "rt/component.h"
#include "rt/event.h"
#include "rt/grow.h"

void rt_topology_init(struct rt_topology *t)
{
	memset(t, 0, sizeof(*t));
	t->lookahead_ps = RT_TIME_NEVER;
}

void rt_topology_release(struct rt_topology *t)
{
	free(t->components);
	if (t->map) { /* links, their index and the daemons are in the map */
		munmap(t->map, t->map_len);
	} else {
		free(t->links);
		free(t->link_start);
		free(t->daemons);
	}
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
	if (!RT_GROW(t->links, t->cap_links, t->n_links, 64))
		return rt_fail(RT_ENOMEM, "cannot grow the topology to %zu links", t->n_links + 1);
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
			  enum rt_colocate how, const uint8_t *host_of_rank)
{
	switch (how) {
	case RT_COLOCATE_PE:
		return ((uint64_t)c->rank << 32) | c->pe;
	case RT_COLOCATE_RANK:
		return c->rank;
	case RT_COLOCATE_HOST:
		return host_of_rank && c->rank < RT_MAX_RANKS ? host_of_rank[c->rank] : 0;
	case RT_COLOCATE_ALL:
		return 0;
	default:
		return id;
	}
}

static void name_daemon(struct rt_daemon_desc *d, const struct rt_component_desc *c,
			enum rt_colocate how, uint64_t key)
{
	switch (how) {
	case RT_COLOCATE_PE:
		/* a rank-level component (pe = UINT32_MAX, npu/pe.h) is its own group */
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
	case RT_COLOCATE_HOST:
		snprintf(d->name, sizeof(d->name), "kb-host");
		snprintf(d->label, sizeof(d->label), "h%u", (unsigned)key);
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

static enum rt_err assign_daemons(struct rt_topology *t, enum rt_colocate how,
				  const uint8_t *host_of_rank)
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
		uint64_t key = group_key(c, i, how, host_of_rank);
		uint32_t d = 0;

		while (d < t->n_daemons && keys[d] != key)
			d++;
		if (d == t->n_daemons) {
			keys[d] = key;
			name_daemon(&t->daemons[d], c, how, key);
			t->n_daemons++;
		}
		c->daemon = d;
		t->daemons[d].n_hosted++;
	}
	free(keys);
	return RT_EOK;
}

enum rt_err rt_topology_place(struct rt_topology *t, enum rt_colocate how,
			      const uint8_t *host_of_rank)
{
	uint32_t n = t->n_components;
	enum rt_err err;

	if (n == 0)
		return rt_fail(RT_ECONFIG, "the workload has no components");
	err = assign_daemons(t, how, host_of_rank);
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

/* By enum rt_colocate value. */
static const char *const colocate_names[] = { "none", "pe", "rank", "host", "all" };
#define N_COLOCATE (sizeof(colocate_names) / sizeof(colocate_names[0]))

enum rt_err rt_colocate_parse(const char *s, enum rt_colocate *out)
{
	for (size_t i = 0; i < N_COLOCATE; i++)
		if (!strcmp(s, colocate_names[i])) {
			*out = (enum rt_colocate)i;
			return RT_EOK;
		}
	return rt_fail(RT_EUSAGE, "--colocate '%s': expected none, pe, rank, host or all", s);
}

const char *rt_colocate_name(enum rt_colocate c)
{
	return (unsigned)c < N_COLOCATE ? colocate_names[c] : "?";
}

/* ---------------------------------------------------------------- sharing */

/* The shared file's layout after the header: components (ops as an offset
 * from an anchor in the same image), daemons, link_start, links; each
 * table 8-aligned, offsets from the header's start. */
struct topo_header {
	uint64_t magic;
	uint64_t shared;        /* 0: build it yourself */
	uint64_t n_components;
	uint64_t n_daemons;
	uint64_t n_links;
	uint64_t lookahead_ps;
	uint64_t off_daemons;
	uint64_t off_link_start;
	uint64_t off_links;
	uint64_t total;
	uint64_t checksum;      /* rt_hash of header (checksum 0), components, daemons */
};

struct topo_comp {
	char name[RT_NAME_MAX];
	int64_t ops_off;        /* ops - anchor: the same in every process */
	uint32_t rank;
	uint32_t pe;
	uint32_t daemon;
	uint32_t pad;
};

#define TOPO_MAGIC 0x6b62746f706f3031ULL /* "kbtopo01" */

static uintptr_t ops_anchor(void)
{
	return (uintptr_t)&rt_topology_init;
}

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* Is every ops table in the image the anchor is in? (a table from a
 * shared object loaded elsewhere would not be where the offset says) */
static bool ops_in_image(const struct rt_topology *t)
{
	Dl_info anchor, info;

	if (!dladdr((void *)ops_anchor(), &anchor))
		return false;
	for (uint32_t i = 0; i < t->n_components; i++)
		if (!t->components[i].ops || !dladdr(t->components[i].ops, &info) ||
		    info.dli_fbase != anchor.dli_fbase)
			return false;
	return true;
}

static bool write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w <= 0)
			return false;
		c += w;
		n -= (size_t)w;
	}
	return true;
}

static enum rt_err write_tables(const struct rt_topology *t, int fd, struct topo_header *h,
				struct topo_comp *comps)
{
	static const uint8_t zeros[8];
	size_t comp_bytes = (size_t)t->n_components * sizeof(*comps);
	size_t daemon_bytes = (size_t)t->n_daemons * sizeof(*t->daemons);
	size_t start_bytes = ((size_t)t->n_components + 1) * sizeof(*t->link_start);

	h->off_daemons = sizeof(*h) + comp_bytes;
	h->off_link_start = align8(h->off_daemons + daemon_bytes);
	h->off_links = align8(h->off_link_start + start_bytes);
	h->total = h->off_links + t->n_links * sizeof(*t->links);
	h->checksum = rt_hash(rt_hash(rt_hash(RT_HASH_INIT, h, sizeof(*h)), comps, comp_bytes),
			      t->daemons, daemon_bytes);
	if (!write_all(fd, h, sizeof(*h)) || !write_all(fd, comps, comp_bytes) ||
	    !write_all(fd, t->daemons, daemon_bytes) ||
	    !write_all(fd, zeros, h->off_link_start - h->off_daemons - daemon_bytes) ||
	    !write_all(fd, t->link_start, start_bytes) ||
	    !write_all(fd, zeros, h->off_links - h->off_link_start - start_bytes) ||
	    !write_all(fd, t->links, t->n_links * sizeof(*t->links)))
		return rt_fail(RT_EIO, "cannot write the topology for the daemons");
	return RT_EOK;
}

enum rt_err rt_topology_write(const struct rt_topology *t, int fd)
{
	struct topo_header h = { .magic = TOPO_MAGIC };
	struct topo_comp *comps;
	enum rt_err err;

	if (!t->link_start || !t->daemons || !ops_in_image(t))
		return write_all(fd, &h, sizeof(h)) ? RT_EOK
						      : rt_fail(RT_EIO, "cannot write the topology header");
	comps = calloc(t->n_components, sizeof(*comps));
	if (!comps)
		return rt_fail(RT_ENOMEM, "cannot share a topology of %u components", t->n_components);
	for (uint32_t i = 0; i < t->n_components; i++) {
		const struct rt_component_desc *c = &t->components[i];

		memcpy(comps[i].name, c->name, sizeof(c->name));
		comps[i].ops_off = (int64_t)((uintptr_t)c->ops - ops_anchor());
		comps[i].rank = c->rank;
		comps[i].pe = c->pe;
		comps[i].daemon = c->daemon;
	}
	h.shared = 1;
	h.n_components = t->n_components;
	h.n_daemons = t->n_daemons;
	h.n_links = t->n_links;
	h.lookahead_ps = t->lookahead_ps;
	err = write_tables(t, fd, &h, comps);
	free(comps);
	return err;
}

/* The shape checks that keep a damaged file from sending a daemon out of
 * bounds: sizes add up (checked before any product can overflow), daemon
 * numbers and each source's link run are in range. */
static bool header_sane(const struct topo_header *h, uint64_t file_left)
{
	return h->total <= file_left && h->n_components && h->n_components <= UINT32_MAX &&
	       h->n_daemons && h->n_daemons <= h->n_components &&
	       h->n_links <= file_left / sizeof(struct rt_link) &&
	       h->off_daemons == sizeof(*h) + h->n_components * sizeof(struct topo_comp) &&
	       h->off_link_start >= h->off_daemons + h->n_daemons * sizeof(struct rt_daemon_desc) &&
	       h->off_link_start <= file_left && h->off_links <= file_left &&
	       h->off_links >= h->off_link_start + (h->n_components + 1) * sizeof(size_t) &&
	       h->total == h->off_links + h->n_links * sizeof(struct rt_link) &&
	       h->off_link_start % 8 == 0 && h->off_links % 8 == 0;
}

static bool tables_sane(const struct topo_header *h, const struct topo_comp *comps,
			const size_t *link_start)
{
	for (uint64_t i = 0; i < h->n_components; i++)
		if (comps[i].daemon >= h->n_daemons || link_start[i] > link_start[i + 1])
			return false;
	return link_start[0] == 0 && link_start[h->n_components] == h->n_links;
}

static enum rt_err adopt_tables(struct rt_topology *t, const struct topo_header *h,
				const uint8_t *base)
{
	const struct topo_comp *comps = (const void *)(base + sizeof(*h));

	t->components = calloc(h->n_components, sizeof(*t->components));
	if (!t->components)
		return rt_fail(RT_ENOMEM, "cannot hold a topology of %llu components",
			       (unsigned long long)h->n_components);
	for (uint64_t i = 0; i < h->n_components; i++) {
		struct rt_component_desc *c = &t->components[i];

		memcpy(c->name, comps[i].name, sizeof(c->name));
		c->name[sizeof(c->name) - 1] = '\0';
		c->ops = (const struct rt_component_ops *)(ops_anchor() + (uintptr_t)comps[i].ops_off);
		c->rank = comps[i].rank;
		c->pe = comps[i].pe;
		c->daemon = comps[i].daemon;
	}
	t->n_components = t->cap_components = (uint32_t)h->n_components;
	t->n_daemons = (uint32_t)h->n_daemons;
	t->daemons = (struct rt_daemon_desc *)(base + h->off_daemons);
	t->link_start = (size_t *)(base + h->off_link_start);
	t->links = (struct rt_link *)(base + h->off_links);
	t->n_links = t->cap_links = h->n_links;
	t->lookahead_ps = h->lookahead_ps;
	return RT_EOK;
}

/* Checksum and shape of a mapped, header-checked file. */
static bool tables_ok(const struct topo_header *h, const uint8_t *base)
{
	struct topo_header check = *h;
	const struct topo_comp *comps = (const void *)(base + sizeof(*h));
	uint64_t sum;

	check.checksum = 0;
	sum = rt_hash(rt_hash(RT_HASH_INIT, &check, sizeof(check)), comps,
		      h->n_components * sizeof(*comps));
	sum = rt_hash(sum, base + h->off_daemons, h->n_daemons * sizeof(struct rt_daemon_desc));
	return sum == h->checksum && tables_sane(h, comps, (const size_t *)(base + h->off_link_start));
}

enum rt_err rt_topology_map(int fd, uint64_t offset, struct rt_topology *t)
{
	struct topo_header h;
	struct stat st;
	uint8_t *map;
	size_t len;
	enum rt_err err;

	rt_topology_init(t);
	if (pread(fd, &h, sizeof(h), (off_t)offset) != (ssize_t)sizeof(h) || h.magic != TOPO_MAGIC ||
	    fstat(fd, &st))
		return rt_fail(RT_EDECODE, "daemon: the job file holds no topology");
	if (!h.shared)
		return RT_ENOTFOUND;
	if ((uint64_t)st.st_size < offset)
		return rt_fail(RT_EDECODE, "daemon: the shared topology is truncated");
	if (!header_sane(&h, (uint64_t)st.st_size - offset))
		return rt_fail(RT_EDECODE, "daemon: the shared topology is corrupt");
	len = (size_t)(offset + h.total);
	map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return rt_fail(RT_EIO, "daemon: cannot map the shared topology");
	err = tables_ok(&h, map + offset) ? adopt_tables(t, &h, map + offset)
					  : rt_fail(RT_EDECODE, "daemon: the shared topology is corrupt");
	if (err) {
		munmap(map, len);
		rt_topology_init(t);
		return err;
	}
	t->map = map;
	t->map_len = len;
	return RT_EOK;
}
