/* prog_ops.c — small kernels for programs, working on bound tensors
 * (tl_arg_tensor): `matmul` (c = a · b), `add` (c = a + b) and `coll`
 * (a collective from x to y). Each splits its work over the PEs of a rank
 * in blocks; all use tl.h alone, and none holds more than a block in
 * scratch, whatever the tensors' size.
 *
 *   matmul  a [M, K], b [K, N] -> c [M, N]; output tiles of `block` (128)
 *           rows x 128 columns over the PEs, a and b streamed from HBM
 *   add     a, b [M, N] (b may be 1 x N: broadcast) -> c [M, N], in
 *           blocks of 16 rows x 2048 columns over the PEs
 *   coll    op=all_reduce|reduce_scatter|all_gather|broadcast of x into y
 *           (y may be x) with algo=auto|ring|bidir|tree, span=ranks|split|pes
 *           (default split: over the ranks, the data split over the PEs),
 *           group=G (the G consecutive ranks holding this one; default
 *           every rank), root= (broadcast, within the group) */
#include <string.h>

#include "kernels.h"
#include "tl_io.h"

static void check_shape(struct tl *tl, const char *what, struct tl_hbm t, uint32_t rows,
			uint32_t cols)
{
	if (t.rows != rows || t.cols != cols)
		tl_fail(tl, "tensor %s is %ux%u, expected %ux%u", what, t.rows, t.cols, rows, cols);
}

/* Output tiles of `block` rows x TILE_N columns, dealt out to the PEs in
 * turn; a's rows and b's column window streamed from HBM by the GEMM (any
 * K: nothing of a or b is held in scratch). */
#define TILE_N 128u
int matmul(struct tl *tl, const struct tl_args *args)
{
	struct tl_hbm a = tl_arg_tensor(args, "a", TL_IN), b = tl_arg_tensor(args, "b", TL_IN);
	struct tl_hbm c = tl_arg_tensor(args, "c", TL_OUT);
	uint32_t block = tl_arg_u32(args, "block", 128, 1, 4096);
	uint32_t P = tl_num_programs(tl);
	uint32_t ea = tl_dtype_size(a.dtype), eb = tl_dtype_size(b.dtype), ec = tl_dtype_size(c.dtype);
	uint64_t mt = (a.rows + block - 1) / block, nt = (b.cols + TILE_N - 1) / TILE_N;

	check_shape(tl, "b", b, a.cols, b.cols);
	check_shape(tl, "c", c, a.rows, b.cols);
	for (uint64_t item = tl_program_id(tl); item < mt * nt; item += P)
		TL_SCRATCH_SCOPE(tl) {
			uint32_t r0 = (uint32_t)(item / nt) * block, n0 = (uint32_t)(item % nt) * TILE_N;
			uint32_t m = a.rows - r0 < block ? a.rows - r0 : block;
			uint32_t n = b.cols - n0 < TILE_N ? b.cols - n0 : TILE_N;
			tl_tensor x = tl_ref(tl, a.addr + (uint64_t)r0 * a.cols * ea, m, a.cols, a.dtype);
			tl_tensor w = tl_ref_rows(tl, b.addr + (uint64_t)n0 * eb, b.rows, n,
						  (uint64_t)b.cols * eb, b.dtype);
			tl_tensor y = tl_wait(tl, tl_composite(tl, &(struct tl_composite_desc){
							      .op = "gemm", .a = x, .b = w }));

			tl_store_rows(tl, c.addr + ((uint64_t)r0 * c.cols + n0) * ec,
				      (uint64_t)c.cols * ec,
				      c.dtype == TL_F32 ? y : tl_astype(tl, y, c.dtype));
		}
	return 0;
}

/* Blocks of up to 16 rows x 2048 columns (at most ~320 KiB of scratch
 * with the f32 sum), dealt out to the PEs in turn. */
int add(struct tl *tl, const struct tl_args *args)
{
	struct tl_hbm a = tl_arg_tensor(args, "a", TL_IN), b = tl_arg_tensor(args, "b", TL_IN);
	struct tl_hbm c = tl_arg_tensor(args, "c", TL_OUT);
	uint32_t P = tl_num_programs(tl), rows = 16, cols = 2048;
	uint32_t ea = tl_dtype_size(a.dtype), eb = tl_dtype_size(b.dtype), ec = tl_dtype_size(c.dtype);
	uint64_t mt = (a.rows + rows - 1) / rows, nt = (a.cols + cols - 1) / cols;

	check_shape(tl, "c", c, a.rows, a.cols);
	if (b.cols != a.cols || (b.rows != a.rows && b.rows != 1))
		tl_fail(tl, "tensor b is %ux%u, expected %ux%u or 1x%u", b.rows, b.cols, a.rows,
			a.cols, a.cols);
	for (uint64_t item = tl_program_id(tl); item < mt * nt; item += P)
		TL_SCRATCH_SCOPE(tl) {
			uint32_t r0 = (uint32_t)(item / nt) * rows, c0 = (uint32_t)(item % nt) * cols;
			uint32_t m = a.rows - r0 < rows ? a.rows - r0 : rows;
			uint32_t n = a.cols - c0 < cols ? a.cols - c0 : cols;
			tl_tensor x = tl_load_rows(tl, a.addr + ((uint64_t)r0 * a.cols + c0) * ea, m, n,
						   (uint64_t)a.cols * ea, a.dtype);
			tl_tensor y = b.rows == 1 ? tl_load(tl, b.addr + (uint64_t)c0 * eb, 1, n, b.dtype)
						  : tl_load_rows(tl, b.addr + ((uint64_t)r0 * b.cols + c0) *
									      eb,
								 m, n, (uint64_t)b.cols * eb, b.dtype);
			tl_tensor s = tl_add(tl, x, y);

			tl_store_rows(tl, c.addr + ((uint64_t)r0 * c.cols + c0) * ec,
				      (uint64_t)c.cols * ec,
				      c.dtype == TL_F32 ? s : tl_astype(tl, s, c.dtype));
		}
	return 0;
}

int coll(struct tl *tl, const struct tl_args *args)
{
	static const char *const ops[] = { "all_reduce", "reduce_scatter", "all_gather",
					   "broadcast" };
	static const char *const algos[] = { "auto", "ring", "bidir", "tree" };
	static const char *const spans[] = { "ranks", "split", "pes" };
	struct tl_hbm x = tl_arg_tensor(args, "x", TL_IN), y = tl_arg_tensor(args, "y", TL_OUT);
	const char *op = tl_arg_str(args, "op", "all_reduce");
	const char *algo = tl_arg_str(args, "algo", "auto");
	const char *span = tl_arg_str(args, "span", "split");
	uint32_t R = tl_num_ranks(tl), g = tl_arg_u32(args, "group", R, 1, R);
	struct tl_coll c = { 0 };
	uint64_t n = (uint64_t)x.rows * x.cols;
	int o = -1, a = -1, sp = -1;

	for (int i = 0; i < 4; i++) {
		o = !strcmp(op, ops[i]) ? i : o;
		a = !strcmp(algo, algos[i]) ? i : a;
		sp = i < 3 && !strcmp(span, spans[i]) ? i : sp;
	}
	if (o < 0 || a < 0 || sp < 0)
		tl_fail(tl, "op=%s algo=%s span=%s: expected op all_reduce|reduce_scatter|all_gather|"
			"broadcast, algo auto|ring|bidir|tree, span ranks|split|pes", op, algo, span);
	if (R % g)
		tl_fail(tl, "group=%u does not divide the run's %u ranks", g, R);
	c.algo = (enum tl_coll_algo)a;
	c.span = (enum tl_coll_span)sp;
	c.first = tl_rank(tl) - tl_rank(tl) % g;
	c.count = g;
	c.stride = 1;
	c.root = tl_arg_u32(args, "root", 0, 0, g - 1);
	if (x.dtype != y.dtype)
		tl_fail(tl, "tensors x and y differ in dtype");
	if (o == 0)
		tl_all_reduce(tl, &c, y.addr, x.addr, n, x.dtype);
	else if (o == 1)
		tl_reduce_scatter(tl, &c, y.addr, x.addr, n, x.dtype);
	else if (o == 2)
		tl_all_gather(tl, &c, y.addr, x.addr, (uint64_t)y.rows * y.cols, x.dtype);
	else
		tl_broadcast(tl, &c, y.addr, x.addr, n, x.dtype);
	return 0;
}
