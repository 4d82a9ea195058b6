/* memory.c — the NPU's memories over the runtime's numbered shared
 * memories (npu/memory.h). */
#include "npu/memory.h"

_Static_assert(NPU_MEMORIES <= RT_MAX_MEMORIES, "raise RT_MAX_MEMORIES");

uint64_t npu_tcm_bytes(const struct rt_config *cfg)
{
	return cfg->tcm_scratch_bytes + cfg->tcm_staging_bytes;
}

uint8_t *npu_hbm(struct rt_ctx *ctx, uint32_t rank, uint64_t *size)
{
	const struct rt_job *job = rt_job(ctx);

	*size = job->config.hbm_bytes;
	if (job->mode != RT_MODE_DATA || rank >= job->config.ranks || rank >= NPU_MAX_RANKS)
		return NULL;
	return rt_memory(ctx, npu_hbm_memory(rank), *size);
}

uint8_t *npu_tcm(struct rt_ctx *ctx, uint32_t rank, uint32_t pe, uint64_t *size)
{
	const struct rt_job *job = rt_job(ctx);

	*size = npu_tcm_bytes(&job->config);
	if (job->mode != RT_MODE_DATA || rank >= job->config.ranks || pe >= job->config.pes ||
	    rank >= NPU_MAX_RANKS || pe >= NPU_MAX_PES)
		return NULL;
	return rt_memory(ctx, npu_tcm_memory(rank, pe), *size);
}

uint64_t npu_max_frame(const struct rt_job *job)
{
	const struct rt_config *cfg = &job->config;
	uint64_t tcm = npu_tcm_bytes(cfg);
	uint64_t max = 64ull << 20;

	if (job->mode == RT_MODE_DATA && tcm < (1ull << 40) / 4 / (cfg->pes ? cfg->pes : 1))
		max += 4 * tcm * cfg->pes;
	return max > INT64_MAX ? INT64_MAX : max;
}
