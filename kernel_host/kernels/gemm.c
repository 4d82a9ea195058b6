/* gemm.c — C = A·B, the first kernel to read.
 *
 * A (m x k) and B (k x n) are f16 in HBM; C (m x n) is f32. Program 0 of
 * rank 0 does the work (other programs return at once). The whole product
 * is one composite whose operands and result are tl_ref handles: the
 * scheduler streams A's and B's tiles from HBM into its staging buffers and
 * C's tiles back (DMA overlapped with the GEMM), M tiles innermost so the
 * array keeps each B tile for all of them (docs/stages.md, "A whole
 * GEMM"). Any size fits: nothing lives in scratch.
 *
 * `--arg blocked=1` is the naive form instead: one composite per block of
 * C's rows into scratch and a tl_store of each, the scope's end waiting for
 * it, so every block's DMA write runs alone (what the ping-pong store of
 * docs/kernels.md improves on).
 *
 * Data mode: A and B are seeded uniform [-1, 1) (streams 0 and 1); a.npy,
 * b.npy and c.npy are written to the output directory. Timing mode moves
 * no bytes, so it generates (and allocates) no tensor data. */
#include <stdlib.h>

#include "kernels.h"
#include "tl_io.h"

#define ALIGN(x) (((x) + 63) & ~(uint64_t)63)

static void make_input(struct tl *tl, uint64_t addr, uint32_t rows,
		       uint32_t cols, uint64_t stream)
{
	size_t n = (size_t)rows * cols;
	float *v;

	if (tl_mode(tl) != TL_DATA)
		return;
	v = malloc(n * sizeof(float));
	if (!v)
		tl_fail(tl, "gemm: out of memory generating a %ux%u input (%zu bytes)",
			rows, cols, n * sizeof(float));
	tl_random_uniform(tl, stream, v, n);
	tl_hbm_write(tl, addr, TL_F16, v, n);
	free(v);
}

int gemm(struct tl *tl, const struct tl_args *args)
{
	uint32_t m = tl_arg_u32(args, "m", 64, 1, 65536);
	uint32_t k = tl_arg_u32(args, "k", 64, 1, 65536);
	uint32_t n = tl_arg_u32(args, "n", 64, 1, 65536);
	uint32_t blocked = tl_arg_u32(args, "blocked", 0, 0, 1);
	uint64_t a = 0, b = ALIGN(a + 2ull * m * k), c = ALIGN(b + 2ull * k * n);
	/* rows per block: keep the f32 block at most 256 KiB (n <= 65536
	 * leaves at least one row) */
	uint32_t block = (uint32_t)(256u * 1024u / (4u * n));

	if (tl_rank(tl) != 0 || tl_program_id(tl) != 0)
		return 0;
	make_input(tl, a, m, k, 0);
	make_input(tl, b, k, n, 1);
	tl_tensor B = tl_ref(tl, b, k, n, TL_F16);
	if (!blocked) {
		tl_tensor A = tl_ref(tl, a, m, k, TL_F16), C = tl_ref(tl, c, m, n, TL_F32);

		tl_composite(tl, &(struct tl_composite_desc){ .op = "gemm", .a = A, .b = B,
							      .out = C });
	}
	for (uint32_t i = 0; blocked && i < m; i += block) {
		uint32_t rows = m - i < block ? m - i : block;

		TL_SCRATCH_SCOPE(tl) {
			tl_tensor A = tl_ref(tl, a + 2ull * i * k, rows, k, TL_F16);
			tl_future f = tl_composite(tl, &(struct tl_composite_desc){
				.op = "gemm", .a = A, .b = B });
			tl_store(tl, c + 4ull * i * n, tl_wait(tl, f));
		}
	}
	tl_save_npy(tl, "a.npy", a, m, k, TL_F16);
	tl_save_npy(tl, "b.npy", b, k, n, TL_F16);
	tl_save_npy(tl, "c.npy", c, m, n, TL_F32);
	return 0;
}
