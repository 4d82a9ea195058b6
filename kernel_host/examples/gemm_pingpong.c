/* gemm_pingpong.c — the built-in gemm kernel (kernel_host/kernels/gemm.c)
 * with a ping-pong store: two persistent f32 result blocks used in turn, so
 * the DMA write of block i overlaps the GEMM of block i+1 instead of the
 * kernel waiting for it at each scope end. Same inputs, same c.npy; see
 * "Pipelining" in docs/kernels.md for the measured gain.
 *
 *   kernbench run BUILD/plugins/gemm_pingpong.so:gemm_pingpong --arg m= k= n=
 * m must be a multiple of the block (256 KiB / (4 n) rows). */
#include <stdlib.h>

#include "tl.h"

#define ALIGN(x) (((x) + 63) & ~(uint64_t)63)

static void make_input(struct tl *tl, uint64_t addr, uint32_t rows, uint32_t cols,
		       uint64_t stream)
{
	size_t n = (size_t)rows * cols;
	float *v = malloc(n * sizeof(float));

	if (!v)
		return;
	tl_random_uniform(tl, stream, v, n);
	tl_hbm_write(tl, addr, TL_F16, v, n);
	free(v);
}

int gemm_pingpong(struct tl *tl, const struct tl_args *args);

int gemm_pingpong(struct tl *tl, const struct tl_args *args)
{
	uint32_t m = tl_arg_u32(args, "m", 64, 1, 65536);
	uint32_t k = tl_arg_u32(args, "k", 64, 1, 65536);
	uint32_t n = tl_arg_u32(args, "n", 64, 1, 65536);
	uint64_t a = 0, b = ALIGN(a + 2ull * m * k), c = ALIGN(b + 2ull * k * n);
	uint32_t block = (uint32_t)(256u * 1024u / (4u * n));
	tl_tensor out[2];

	if (tl_rank(tl) != 0 || tl_program_id(tl) != 0)
		return 0;
	if (block == 0 || block > m)
		block = m;
	if (m % block)
		return 1; /* m must be a multiple of the block */
	make_input(tl, a, m, k, 0);
	make_input(tl, b, k, n, 1);
	tl_tensor B = tl_ref(tl, b, k, n, TL_F16);
	/* persistent, outside any scope: the ping and the pong */
	out[0] = tl_zeros(tl, block, n, TL_F32);
	out[1] = tl_zeros(tl, block, n, TL_F32);
	for (uint32_t i = 0, j = 0; i < m; i += block, j ^= 1) {
		tl_tensor A = tl_ref(tl, a + 2ull * i * k, block, k, TL_F16);

		/* writing out[j] waits (strict FIFO) for the store that last read
		 * it, two blocks ago; the store just issued reads out[j^1] */
		tl_future f = tl_composite(tl, &(struct tl_composite_desc){
			.op = "gemm", .a = A, .b = B, .out = out[j] });
		tl_store(tl, c + 4ull * i * n, tl_wait(tl, f));
	}
	tl_save_npy(tl, "a.npy", a, m, k, TL_F16);
	tl_save_npy(tl, "b.npy", b, k, n, TL_F16);
	tl_save_npy(tl, "c.npy", c, m, n, TL_F32);
	return 0;
}
