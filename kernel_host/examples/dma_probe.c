/* dma_probe.c — a kernel built as a shared object: one DMA write and two DMA
 * reads issued back to back (the Makefile builds kernel_host/examples/NAME.c
 * into build/plugins/NAME.so), so the op log shows the write channel running
 * alongside the read channel while the two reads queue on theirs.
 *
 *   kernbench run build/plugins/dma_probe.so:dma_probe */
#include "tl.h"

int dma_probe(struct tl *tl, const struct tl_args *args);

int dma_probe(struct tl *tl, const struct tl_args *args)
{
	uint32_t rows = tl_arg_u32(args, "rows", 128, 1, 65536);
	uint64_t tile = 2ull * rows * 128;

	if (tl_rank(tl) != 0 || tl_program_id(tl) != 0)
		return 0;
	tl_tensor z = tl_zeros(tl, rows, 128, TL_F16);

	tl_store(tl, 0, z);
	tl_tensor x = tl_load(tl, tile, rows, 128, TL_F16);
	tl_tensor y = tl_load(tl, 2 * tile, rows, 128, TL_F16);

	tl_store(tl, 3 * tile, tl_add(tl, x, y));
	return 0;
}
