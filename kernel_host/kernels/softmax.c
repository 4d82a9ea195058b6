/* softmax.c — row softmax y = softmax(x) with lazy loads.
 *
 * x (rows x cols, f16) is in HBM; y (f16) is written beside it. The rows
 * are processed in blocks; the next block's tl_load is issued before the
 * current block is computed, so its DMA overlaps the MATH work (the load
 * is lazy: it only waits at its first use). Program 0 of rank 0 does the
 * work. Data mode: x is seeded uniform [-1, 1) scaled by 4 (stream 0);
 * x.npy and y.npy are written to the output directory. */
#include <stdlib.h>

#include "kernels.h"
#include "tl_io.h"

int softmax(struct tl *tl, const struct tl_args *args)
{
	uint32_t rows = tl_arg_u32(args, "rows", 64, 1, 65536);
	uint32_t cols = tl_arg_u32(args, "cols", 128, 1, 65536);
	uint32_t block = tl_arg_u32(args, "block", 16, 1, 65536);
	uint64_t x = 0, y = ((2ull * rows * cols) + 63) & ~63ull;
	size_t n = (size_t)rows * cols;

	if (tl_rank(tl) != 0 || tl_program_id(tl) != 0)
		return 0;
	if (rows % block != 0)
		tl_fail(tl, "softmax: --arg rows=%u is not a multiple of --arg block=%u", rows, block);
	if (tl_mode(tl) == TL_DATA) {
		float *v = malloc(n * sizeof(float));

		if (!v)
			tl_fail(tl, "softmax: out of memory generating a %ux%u input", rows, cols);
		tl_random_uniform(tl, 0, v, n);
		for (size_t i = 0; i < n; i++)
			v[i] *= 4.0f;
		tl_hbm_write(tl, x, TL_F16, v, n);
		free(v);
	}
	/* prefetch buffers are persistent (outside the per-block scope) */
	tl_tensor cur = tl_load(tl, x, block, cols, TL_F16);
	tl_tensor next = TL_NONE;
	for (uint32_t r = 0; r < rows; r += block) {
		if (r + block < rows)
			next = tl_load(tl, x + 2ull * (r + block) * cols, block,
				       cols, TL_F16);
		TL_SCRATCH_SCOPE(tl) {
			tl_tensor p = tl_softmax(tl, cur); /* waits for cur */
			tl_store(tl, y + 2ull * r * cols, tl_astype(tl, p, TL_F16));
		}
		cur = next;
	}
	tl_save_npy(tl, "x.npy", x, rows, cols, TL_F16);
	tl_save_npy(tl, "y.npy", y, rows, cols, TL_F16);
	return 0;
}
