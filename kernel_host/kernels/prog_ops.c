/* prog_ops.c — small kernels for programs, working on bound tensors
 * (tl_arg_tensor): `matmul` (c = a · b), `add` (c = a + b) and `coll`
 * (a collective from x to y). Each splits its work over the PEs of a rank
 * by rows; all use tl.h alone.
 *
 *   matmul  a [M, K], b [K, N] -> c [M, N]; rows of a and c in blocks of
 *           `block` (128) over the PEs, b streamed from HBM per block
 *   add     a, b [M, N] (b may be 1 x N: broadcast) -> c [M, N]
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

int matmul(struct tl *tl, const struct tl_args *args)
{
	struct tl_hbm a = tl_arg_tensor(args, "a", TL_IN), b = tl_arg_tensor(args, "b", TL_IN);
	struct tl_hbm c = tl_arg_tensor(args, "c", TL_OUT);
	uint32_t block = tl_arg_u32(args, "block", 128, 1, 65536);
	uint32_t P = tl_num_programs(tl), p = tl_program_id(tl);
	uint32_t ea = tl_dtype_size(a.dtype), eb = tl_dtype_size(b.dtype), ec = tl_dtype_size(c.dtype);

	check_shape(tl, "b", b, a.cols, b.cols);
	check_shape(tl, "c", c, a.rows, b.cols);
	for (uint32_t r0 = p * block; r0 < a.rows; r0 += P * block)
		TL_SCRATCH_SCOPE(tl) {
			uint32_t m = a.rows - r0 < block ? a.rows - r0 : block;
			tl_tensor x = tl_load(tl, a.addr + (uint64_t)r0 * a.cols * ea, m, a.cols,
					      a.dtype);
			tl_tensor w = tl_ref(tl, b.addr, b.rows, b.cols, b.dtype);
			tl_tensor y = tl_wait(tl, tl_composite(tl, &(struct tl_composite_desc){
							      .op = "gemm", .a = x, .b = w }));

			(void)eb;
			tl_store(tl, c.addr + (uint64_t)r0 * c.cols * ec,
				 c.dtype == TL_F32 ? y : tl_astype(tl, y, c.dtype));
		}
	return 0;
}

int add(struct tl *tl, const struct tl_args *args)
{
	struct tl_hbm a = tl_arg_tensor(args, "a", TL_IN), b = tl_arg_tensor(args, "b", TL_IN);
	struct tl_hbm c = tl_arg_tensor(args, "c", TL_OUT);
	uint32_t P = tl_num_programs(tl), p = tl_program_id(tl), rows = 16;

	check_shape(tl, "c", c, a.rows, a.cols);
	if (b.cols != a.cols || (b.rows != a.rows && b.rows != 1))
		tl_fail(tl, "tensor b is %ux%u, expected %ux%u or 1x%u", b.rows, b.cols, a.rows,
			a.cols, a.cols);
	for (uint32_t r0 = p * rows; r0 < a.rows; r0 += P * rows)
		TL_SCRATCH_SCOPE(tl) {
			uint32_t m = a.rows - r0 < rows ? a.rows - r0 : rows;
			tl_tensor x = tl_load(tl, a.addr + (uint64_t)r0 * a.cols * tl_dtype_size(a.dtype),
					      m, a.cols, a.dtype);
			tl_tensor y = b.rows == 1
					      ? tl_load(tl, b.addr, 1, b.cols, b.dtype)
					      : tl_load(tl, b.addr + (uint64_t)r0 * b.cols *
									 tl_dtype_size(b.dtype),
							m, b.cols, b.dtype);
			tl_tensor s = tl_add(tl, x, y);

			tl_store(tl, c.addr + (uint64_t)r0 * c.cols * tl_dtype_size(c.dtype),
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
