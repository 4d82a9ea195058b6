/* memory.h — the NPU's memories as the run's shared memories (rt_memory):
 * one HBM per rank, one TCM (kernel scratch, then scheduler staging) per
 * PE, numbered here; and the largest frame a participant may send, which
 * data mode's memories size. The runtime knows only numbered memories. */
#ifndef NPU_MEMORY_H
#define NPU_MEMORY_H

#include <stdint.h>

#include "rt/component.h"
#include "rt/config.h"
#include "rt/job.h"

#define NPU_MAX_RANKS 64
#define NPU_MAX_PES 64
#define NPU_MEMORIES (NPU_MAX_RANKS + NPU_MAX_RANKS * NPU_MAX_PES)

static inline uint32_t npu_hbm_memory(uint32_t rank)
{
	return rank;
}

static inline uint32_t npu_tcm_memory(uint32_t rank, uint32_t pe)
{
	return NPU_MAX_RANKS + rank * NPU_MAX_PES + pe;
}

/* A PE's TCM: scratch then staging. */
uint64_t npu_tcm_bytes(const struct rt_config *cfg);
/* Base of the HBM of `rank` and its size in *size: NULL in timing mode or
 * for a rank this host does not hold. */
uint8_t *npu_hbm(struct rt_ctx *ctx, uint32_t rank, uint64_t *size);
/* Base of the TCM of (rank, pe) and its size, likewise. */
uint8_t *npu_tcm(struct rt_ctx *ctx, uint32_t rank, uint32_t pe, uint64_t *size);
/* The largest frame one host's daemon may legally send for `job`: 64 MiB,
 * and in data mode a few TCMs per PE of a rank (a window's DONE carries
 * the IPCQ payloads of a rank's PEs, each at most a TCM). */
uint64_t npu_max_frame(const struct rt_job *job);

#endif
