/* coll_model.h — the α–β model of the collectives (docs/kernels.md,
 * "Collectives: timing"), computed from the configuration, independent of
 * the simulator's code: what tests/integration/test_collectives.c checks
 * the simulated times against and bench/coll_bench.c tabulates.
 *
 * The terms, in cycles of the PE clock (all from the configuration,
 * cm_from_config):
 *   α        links.ipcq_cycles (ring: per hop; a switch adds the two
 *            doorbells, host -> port and port -> host)
 *   β        links.ipcq_bytes_per_cycle; ser(b) = ceil(b / β)
 *   d(b)     dispatch of a command of b logical bytes: fixed + ceil(b *
 *            cycles_per_kib / 1024); a send, load or store is 28 bytes, an
 *            add 40
 *   γ(m)     the add of m f32 elements: d(40) + 4 doorbells + math.setup +
 *            ceil(m / lanes) * cycles_per_elem
 *   dma(m)   a DMA of m elements: 4 doorbells + dma.setup + ceil(p · b /
 *            dma rate) + hbm.latency, where the chunk is q rows of b bytes
 *            (q the largest divisor of m up to dma.queues ·
 *            dma.rows_per_queue, as kernel_host/src/coll.c shapes it) and a
 *            queue moves p = ceil(q / min(queues, ceil(q / rows_per_queue)))
 *            of them
 * Static inline: a header for one test and one bench. */
#ifndef KB_COLL_MODEL_H
#define KB_COLL_MODEL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "rt/config.h"

struct cm_cfg {
	double alpha, beta;          /* cycles; bytes / cycle */
	uint64_t dfix, dkib;         /* dispatch */
	uint64_t dma_setup, dma_bpc, hbm_lat, dma_queues, dma_rpq;
	uint64_t lanes, msetup, cpe; /* MATH */
	uint64_t db;                 /* doorbell cycles */
	bool sw;                     /* links.topology = switch */
	uint64_t chunk;              /* elements per message */
};

/* The terms from a configuration, with `sw` for its topology and the
 * collective's chunk for a PE with `free_scratch` bytes free (0: all of
 * memory.tcm_scratch_bytes): min(8192, free / 160) elements. A doorbell
 * (db) is links.host_sched_cycles; the 4 of a command are a round trip
 * host -> scheduler -> engine and back, both links each way (taken as
 * 4 db when the two links differ: 2 host_sched + 2 sched_engine). */
static inline struct cm_cfg cm_from_config(const struct rt_config *r, bool sw,
					   uint64_t free_scratch)
{
	struct cm_cfg c;

	c.alpha = (double)r->link_ipcq_cycles;
	c.beta = (double)r->ipcq_bytes_per_cycle;
	c.dfix = r->dispatch_fixed_cycles;
	c.dkib = r->dispatch_cycles_per_kib;
	c.dma_setup = r->dma_setup_cycles + 2 * (r->link_sched_engine_cycles -
						 r->link_host_sched_cycles);
	c.dma_bpc = r->dma_bytes_per_cycle;
	c.hbm_lat = r->hbm_latency_cycles;
	c.dma_queues = r->dma_queues;
	c.dma_rpq = r->dma_rows_per_queue;
	c.lanes = r->math_lanes;
	c.msetup = r->math_setup_cycles + 2 * (r->link_sched_engine_cycles -
					       r->link_host_sched_cycles);
	c.cpe = r->math_cycles_per_elem;
	c.db = r->link_host_sched_cycles;
	c.sw = sw;
	c.chunk = 8192;
	if (!free_scratch)
		free_scratch = r->tcm_scratch_bytes;
	if (free_scratch / 160 < c.chunk)
		c.chunk = free_scratch / 160;
	return c;
}

/* The same from the default configuration (docs/config.md). */
static inline struct cm_cfg cm_defaults(bool sw, uint64_t free_scratch)
{
	struct rt_config r;

	rt_config_defaults(&r);
	return cm_from_config(&r, sw, free_scratch);
}

static inline uint64_t cm_cdiv(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

static inline double cm_d(const struct cm_cfg *c, uint64_t bytes)
{
	return (double)(c->dfix + cm_cdiv(bytes * c->dkib, 1024));
}

static inline double cm_ser(const struct cm_cfg *c, uint64_t bytes)
{
	return (double)cm_cdiv(bytes, (uint64_t)c->beta);
}

static inline double cm_madd(const struct cm_cfg *c, uint64_t m)
{
	return (double)(c->msetup + cm_cdiv(m, c->lanes) * c->cpe);
}

static inline double cm_gamma(const struct cm_cfg *c, uint64_t m)
{
	return cm_d(c, 40) + 4.0 * c->db + cm_madd(c, m);
}

/* The rows of a chunk of m elements (kernel_host/src/coll.c coll_shape). */
static inline uint64_t cm_dma_rows(const struct cm_cfg *c, uint64_t m)
{
	uint64_t most = c->dma_queues * c->dma_rpq, q;

	for (q = most < m ? most : m; q > 1 && m % q; q--)
		;
	return q ? q : 1;
}

/* The DMA queues a chunk of m elements spreads over. */
static inline uint64_t cm_dma_lanes(const struct cm_cfg *c, uint64_t m)
{
	uint64_t lanes = cm_cdiv(cm_dma_rows(c, m), c->dma_rpq);

	return lanes > c->dma_queues ? c->dma_queues : lanes;
}

/* The cycles a DMA of m elements of esz bytes moves its bytes in (the
 * busiest queue's share). */
static inline double cm_dma_data(const struct cm_cfg *c, uint64_t m, uint64_t esz)
{
	uint64_t q = cm_dma_rows(c, m), lanes = cm_dma_lanes(c, m);

	return (double)cm_cdiv(cm_cdiv(q, lanes) * (m / q) * esz, c->dma_bpc);
}

static inline double cm_dma(const struct cm_cfg *c, uint64_t m, uint64_t esz)
{
	return 4.0 * c->db + c->dma_setup + cm_dma_data(c, m, esz) + c->hbm_lat;
}

/* The largest of `members` blocks of n. */
static inline uint64_t cm_block(uint64_t n, uint64_t members)
{
	return cm_cdiv(n, members);
}

enum cm_op { CM_AR, CM_RS, CM_AG, CM_BC };
enum cm_algo { CM_RING = 1, CM_BIDIR = 2, CM_TREE = 3 };

/* The ring algorithms (coll.c): chains of L hops; per step a link carries
 * its PEs' chunks of one block part (W), a chunk's hop takes ser + α +
 * the receiver's processing o before it goes on; steps overlap only
 * through the chunks:
 *   T = entry + Σ over hops but the last of max(W, ser(m) + α + o)
 *       + W + α + last + exit
 * entry = d(28) + dma(m) + d(28) (the first chunk loaded and sent), exit =
 * d(28) + dma(m) (the last stored), o = γ(m) + d(28) where the receiver
 * adds, d(28) where it forwards; a broadcast's hops use a link each:
 * T = entry + (L - 1)(ser(m) + α + d(28)) + W + α + exit. Both ways round:
 * the second direction ends one dispatch later when the two last stores
 * have DMA queues of their own; otherwise it lags one hop's processing and
 * its last store queues behind the first's. */
static inline double cm_ring(const struct cm_cfg *c, enum cm_op op, bool bidir, uint32_t R,
			     uint64_t n, uint32_t esz, uint32_t P)
{
	double a = c->alpha + (c->sw ? 2.0 * c->db : 0.0), T, W_r, W_s;
	uint64_t blk, part, m, last, nchunks;
	uint32_t L, h;
	bool both = bidir && !c->sw;

	if (op == CM_AR || op == CM_BC) {
		uint64_t nn = cm_block(n, P);

		blk = op == CM_BC ? nn : cm_block(nn, R);
	} else {
		blk = cm_block(cm_block(n, R), P);
	}
	L = !both ? R - 1 : R == 2 ? 1 : R / 2;
	h = both ? 2 : 1;
	part = both && R == 2 ? cm_cdiv(blk, 2) : blk;
	if (!part)
		return 0;
	m = part < c->chunk ? part : c->chunk;
	nchunks = cm_cdiv(part, c->chunk);
	last = part - (nchunks - 1) * c->chunk;
	W_r = P * ((nchunks - 1) * cm_ser(c, m * 4) + cm_ser(c, last * 4));
	W_s = P * ((nchunks - 1) * cm_ser(c, m * esz) + cm_ser(c, last * esz));
	T = cm_d(c, 28) + cm_dma(c, m, esz) + cm_d(c, 28);
	if (op == CM_BC)
		return T + (L - 1) * (cm_ser(c, m * esz) + a + cm_d(c, 28)) + W_s + a +
		       cm_d(c, 28) + cm_dma(c, last, esz) + (h - 1) * cm_d(c, 28);
	{
		uint32_t nh = (op == CM_AR ? 2 : 1) * L, k;
		double o_r = cm_gamma(c, m) + cm_d(c, 28), lag;

		for (k = 0; k + 1 < nh; k++) {
			bool reduce = op == CM_RS || (op == CM_AR && k < L);
			/* the first hop of a reduce carries the input's dtype */
			double w = reduce ? (k == 0 ? W_s : W_r) : W_s;
			double sr = cm_ser(c, m * (reduce && k ? 4 : esz));
			double o = reduce ? o_r : cm_d(c, 28);

			T += w > sr + a + o ? w : sr + a + o;
		}
		{
			bool reduce = op == CM_RS;

			T += (reduce ? (nh == 1 ? W_s : W_r) : W_s) + a +
			     (reduce ? cm_gamma(c, last) : 0) + cm_d(c, 28) +
			     cm_dma(c, last, esz);
			lag = op == CM_AG ? cm_d(c, 28) : o_r;
		}
		/* the second direction's last store queues behind the first's
		 * only when the two cannot have DMA queues of their own */
		if (h > 1 && 2 * cm_dma_lanes(c, last) > c->dma_queues)
			T += lag + cm_dma_data(c, last, esz);
		else if (h > 1)
			T += cm_d(c, 28);
	}
	return T;
}

/* Recursive doubling all-reduce (coll_tree.c), R a power of two, every
 * PE's data one message: log2 R rounds, the P PEs' messages of a round
 * sharing a port (W), an add and a send between rounds; like the ring's
 * chunks, one PE's next round overlaps the others' messages:
 *   T = d(28) + dma(V) + d(28) + (K - 1) max(W, ser(V) + α + γ(V) + d(28))
 *       + W + α + γ(V) + d(28) + dma(V) */
static inline double cm_tree_ar(const struct cm_cfg *c, uint32_t R, uint64_t n, uint32_t esz,
				uint32_t P)
{
	double a = c->alpha + (c->sw ? 2.0 * c->db : 0.0);
	uint64_t V = cm_block(n, P);
	uint32_t K = 0;
	double W = P * cm_ser(c, V * 4), hop = cm_ser(c, V * 4) + a + cm_gamma(c, V) + cm_d(c, 28);

	while ((1u << K) < R)
		K++;
	return cm_d(c, 28) + cm_dma(c, V, esz) + cm_d(c, 28) + (K - 1) * (W > hop ? W : hop) + W +
	       a + cm_gamma(c, V) + cm_d(c, 28) + cm_dma(c, V, esz);
}

/* The textbook α–β (Hockney) times, α = links.ipcq_cycles and β the link
 * (Thakur, Rabenseifner and Gropp, IJHPCA 19(1), 2005): S bytes of data,
 * f32 partial sums for reductions. */
static inline double cm_hockney(const struct cm_cfg *c, enum cm_op op, enum cm_algo algo,
				uint32_t R, double S)
{
	double a = c->alpha, b = c->beta;
	uint32_t K = 0, h = R / 2;

	while ((1u << K) < R)
		K++;
	if (algo == CM_TREE)
		return op == CM_AR || op == CM_BC ? K * (a + S / b)
						  : K * a + (R - 1.0) / R * S / b;
	if (algo == CM_BIDIR && !c->sw)
		R = h + 1; /* the longest chain is R/2 hops */
	if (op == CM_BC)
		return (R - 1) * a + S / b;
	return (op == CM_AR ? 2.0 : 1.0) * (R - 1) * (a + S / (algo == CM_BIDIR && !c->sw
								  ? 2.0 * h
								  : (double)R) / b);
}

/* What no algorithm can beat on these links: the data every member must
 * receive over its links (all-reduce: 2 (R-1)/R S; reduce-scatter,
 * all-gather: (R-1)/R S; broadcast: S, split over the links a rank has)
 * and one hop's latency per log2 R doubling of the members reached. */
static inline double cm_bound(const struct cm_cfg *c, enum cm_op op, uint32_t R, double S)
{
	double links = c->sw ? 1.0 : 2.0; /* a ring: a link each way (two to one peer at R = 2) */
	double bytes = op == CM_AR ? 2.0 * (R - 1) / R * S : op == CM_BC ? S : (R - 1.0) / R * S;
	double bw = bytes / (links * c->beta), lat;
	uint32_t K = 0;

	while ((1u << K) < R)
		K++;
	lat = K * c->alpha;
	return bw > lat ? bw : lat;
}

#endif
