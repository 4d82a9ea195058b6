/* dma/queues.c — how a DMA transfer is spread over the queues of its
 * channel (dma.queues, dma.rows_per_queue; engines/README.md "DMA queues").
 *
 * A real DMA splits one transfer into packets, one per engine, each engine
 * moving a group of rows (on Trainium2, the rows of 8 of the 128 SBUF
 * partitions per engine: deploy/configs/machines/trn2.yaml): the rows are
 * cut into consecutive pieces of at least rows_per_queue rows, at most one
 * per queue, as even as the rows allow (pieces differ by one row at most).
 * The split depends only on the transfer's shape and the configuration, so
 * it is the same in every process. */
#include "eng.h"

uint32_t eng_dma_lanes(const struct rt_config *cfg, uint64_t rows, uint64_t *piece_rows)
{
	uint64_t per = cfg->dma_rows_per_queue ? cfg->dma_rows_per_queue : 1;
	uint64_t lanes = eng_ceil_div(rows ? rows : 1, per);

	if (lanes > cfg->dma_queues)
		lanes = cfg->dma_queues;
	if (lanes == 0)
		lanes = 1;
	*piece_rows = eng_ceil_div(rows ? rows : 1, lanes);
	return (uint32_t)lanes;
}
