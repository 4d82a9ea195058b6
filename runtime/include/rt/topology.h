/* topology.h — which components exist, how they are linked, which daemon
 * hosts each, and the lookahead that follows.
 *
 * A workload builds the topology deterministically from the job, so the
 * launcher and every daemon arrive at the same one independently. */
#ifndef RT_TOPOLOGY_H
#define RT_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>

#include "rt/err.h"

struct rt_component_ops;

#define RT_NAME_MAX 40
#define RT_MAX_RANKS 64 /* machine.ranks at most */

enum rt_colocate {
	RT_COLOCATE_NONE, /* one component per daemon */
	RT_COLOCATE_PE,   /* one daemon per PE */
	RT_COLOCATE_RANK, /* one daemon per rank */
	RT_COLOCATE_HOST, /* one daemon per host (--hosts; else the whole run) */
	RT_COLOCATE_ALL,  /* one daemon */
};

struct rt_component_desc {
	char name[RT_NAME_MAX];              /* "r0.pe3.dma", "t07" */
	const struct rt_component_ops *ops;  /* behaviour */
	uint32_t rank;                       /* placement */
	uint32_t pe;
	uint32_t daemon;                     /* hosting daemon index */
};

struct rt_daemon_desc {
	char name[RT_NAME_MAX]; /* process name: "kb-dma", "kb-pe", "kb-all" */
	char label[RT_NAME_MAX];/* what errors call it: "r0.pe3.dma" */
	uint32_t n_hosted;      /* components it hosts (scan for daemon == i) */
};

/* One one-way link. */
struct rt_link {
	uint32_t src;
	uint32_t dst;
	uint64_t latency_ps;
	size_t seq;         /* declaration order: a later one of a pair wins */
};

struct rt_topology {
	uint32_t n_components;
	uint32_t cap_components;
	struct rt_component_desc *components;
	/* Links as a list, not an n x n matrix: a component has a handful of
	 * links, and a dense table is gigabytes at 64 x 64 PEs. Placing sorts
	 * them by (src, dst) and indexes each source's run in link_start. */
	struct rt_link *links;
	size_t n_links;
	size_t cap_links;
	size_t *link_start;        /* n_components + 1 offsets, after placing */
	uint32_t n_daemons;
	struct rt_daemon_desc *daemons;
	uint64_t lookahead_ps;     /* min latency of a daemon-crossing link,
				      RT_TIME_NEVER if no link crosses */
	void *map;                 /* adopted from the launcher: the shared
				      file (links, daemons live in it) */
	size_t map_len;
};

void rt_topology_init(struct rt_topology *t);
void rt_topology_release(struct rt_topology *t);

/* Adds a component; its id is the return value via *id. */
enum rt_err rt_topology_add(struct rt_topology *t, const char *name,
			    const struct rt_component_ops *ops, uint32_t rank,
			    uint32_t pe, uint32_t *id);
/* Declares a one-way link src -> dst with latency >= 1 ps. Call after all
 * components are added. */
enum rt_err rt_topology_link(struct rt_topology *t, uint32_t src,
			     uint32_t dst, uint64_t latency_ps);
/* Assigns daemons by the colocation policy and computes the lookahead.
 * `host_of_rank` (RT_MAX_RANKS entries, NULL: one host) is what
 * RT_COLOCATE_HOST groups by. RT_ECONFIG if a crossing link has zero
 * latency. */
enum rt_err rt_topology_place(struct rt_topology *t, enum rt_colocate how,
			      const uint8_t *host_of_rank);

/* Latency of src -> dst, 0 if not linked (a binary search once placed). */
uint64_t rt_topology_latency(const struct rt_topology *t, uint32_t src,
			     uint32_t dst);

/* Sharing with daemon processes (rt_job_share carries it): the launcher
 * builds and places the topology once; a daemon maps the links, their
 * index and the daemon table read-only from the sealed job file (one copy
 * in memory for all daemons) and copies only the component table, instead
 * of running the workload's build and sorting every link itself.
 * Writes `t` (placed) at fd's current offset: header, then the tables.
 * If a component's ops table is not in the executable's own image (only
 * those are at the same place in every process of the binary), writes a
 * header that says "not shared", and daemons build their own. */
enum rt_err rt_topology_write(const struct rt_topology *t, int fd);
/* Daemon: maps the topology written at `offset` of `fd`. RT_ENOTFOUND if
 * the launcher did not share one (build it instead), RT_EDECODE if the
 * file is not one. Release with rt_topology_release. */
enum rt_err rt_topology_map(int fd, uint64_t offset, struct rt_topology *t);

/* Parses "none|pe|rank|all". */
enum rt_err rt_colocate_parse(const char *s, enum rt_colocate *out);
const char *rt_colocate_name(enum rt_colocate c);

#endif
