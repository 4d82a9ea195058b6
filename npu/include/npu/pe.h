/* pe.h — addressing of the components that make up one PE.
 *
 * A PE workload lays out components rank-major, PE-minor, five per PE, so any
 * component can name its peers without a lookup:
 *   id(r, p, unit) = (r * pes + p) * PE_UNITS + unit
 * Links (latencies from config): host <-> sched, sched <-> each engine,
 * host -> its rank's link component -> the hosts of the same PE index on
 * other ranks (IPCQ), PE p <-> PE 0 of the same rank (barriers). */
#ifndef NPU_PE_H
#define NPU_PE_H

#include <stdint.h>

enum pe_unit {
	PE_HOST = 0,  /* kernel host = PE_CPU */
	PE_SCHED = 1, /* PE_SCHEDULER */
	PE_DMA = 2,
	PE_GEMM = 3,
	PE_MATH = 4,
	PE_UNITS = 5,
};

static inline uint32_t pe_component_id(uint32_t pes, uint32_t rank,
				       uint32_t pe, enum pe_unit unit)
{
	return (rank * pes + pe) * PE_UNITS + (uint32_t)unit;
}

/* The rank-level components come after every PE's: first one "link" per
 * rank (its IPCQ links, shared by its PEs: the ring's two outgoing links,
 * or its switch port) whenever there are several ranks, then one "hbm" per
 * rank (its memory system) when the workload has them. Their `pe` in the
 * topology is PE_RANK_LEVEL. */
#define PE_RANK_LEVEL UINT32_MAX

#include <stdbool.h>

/* Cycles `bytes` occupy an IPCQ link of `bytes_per_cycle`
 * (links.ipcq_bytes_per_cycle): the one serialisation rule. */
static inline uint64_t pe_ipcq_cycles(uint64_t bytes_per_cycle, uint64_t bytes)
{
	uint64_t bpc = bytes_per_cycle ? bytes_per_cycle : 1;

	return (bytes + bpc - 1) / bpc;
}

/* Whether each rank has a link component (several ranks). */
static inline bool pe_rank_links(uint32_t ranks)
{
	return ranks > 1;
}

static inline uint32_t pe_link_component_id(uint32_t ranks, uint32_t pes,
					    uint32_t rank)
{
	return ranks * pes * PE_UNITS + rank;
}

static inline uint32_t pe_hbm_component_id(uint32_t ranks, uint32_t pes,
					   uint32_t rank)
{
	return ranks * pes * PE_UNITS + (pe_rank_links(ranks) ? ranks : 0) + rank;
}

/* IPCQ ring directions. */
enum pe_dir { PE_DIR_LEFT = 0, PE_DIR_RIGHT = 1 };

static inline uint32_t pe_ring_neighbour(uint32_t ranks, uint32_t rank,
					 enum pe_dir dir)
{
	return dir == PE_DIR_LEFT ? (rank + ranks - 1) % ranks
				  : (rank + 1) % ranks;
}

/* Ring hops from `from` to `to` going in `dir`. */
static inline uint32_t pe_ring_hops(uint32_t ranks, uint32_t from, uint32_t to,
				    enum pe_dir dir)
{
	return dir == PE_DIR_RIGHT ? (to + ranks - from) % ranks
				   : (from + ranks - to) % ranks;
}

/* The direction a message from `from` to `to` takes on a ring: the
 * shorter way round, rightwards when both are as short. */
static inline enum pe_dir pe_ring_way(uint32_t ranks, uint32_t from, uint32_t to)
{
	return pe_ring_hops(ranks, from, to, PE_DIR_LEFT) <
			       pe_ring_hops(ranks, from, to, PE_DIR_RIGHT)
		       ? PE_DIR_LEFT
		       : PE_DIR_RIGHT;
}

#endif
