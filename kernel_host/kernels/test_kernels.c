/* test_kernels.c — kernels the integration tests run through real daemons
 * (tests/integration/test_tl_*.c). Each writes its inputs and results as
 * .npy (data mode) so the test can compare them with an fp64 reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "tl_io.h"

#define MB (1ull << 20)

/* Seeded uniform [-1, 1) x scale into HBM at addr (data mode). */
static void make(struct tl *tl, uint64_t addr, uint32_t rows, uint32_t cols,
		 enum tl_dtype dt, uint64_t stream, float scale)
{
	size_t n = (size_t)rows * cols;
	float *v;

	if (tl_mode(tl) != TL_DATA)
		return; /* timing mode moves no bytes */
	v = malloc(n * sizeof(float));
	if (!v)
		tl_fail(tl, "out of memory generating a %ux%u input", rows, cols);
	tl_random_uniform(tl, stream, v, n);
	for (size_t i = 0; i < n; i++)
		v[i] *= scale;
	tl_hbm_write(tl, addr, dt, v, n);
	free(v);
}

static bool first_program(const struct tl *tl)
{
	return tl_rank(tl) == 0 && tl_program_id(tl) == 0;
}

/* lazy-load design test 1/5: a load, then an independent GEMM, then the load's
 * first use. part=none|load|gemm|both; serial=1 waits for the load at once
 * (the blocking model). The GEMM's operands are staged in TCM first (in
 * every part, so the preamble is common) so the GEMM does not share the
 * DMA read channel with the load. */
int test_overlap(struct tl *tl, const struct tl_args *args)
{
	const char *part = tl_arg_str(args, "part", "both");
	bool serial = tl_arg_u32(args, "serial", 0, 0, 1);
	uint32_t rows = tl_arg_u32(args, "rows", 32, 1, 4096);
	uint32_t g = tl_arg_u32(args, "g", 128, 1, 512);
	bool load = part[0] == 'l' || part[0] == 'b';
	bool gemm = part[0] == 'g' || part[0] == 'b';
	tl_tensor x = TL_NONE;

	if (!first_program(tl))
		return 0;
	tl_tensor a = tl_wait(tl, tl_load_async(tl, 4 * MB, g, g, TL_F16));
	tl_tensor b = tl_wait(tl, tl_load_async(tl, 5 * MB, g, g, TL_F16));
	if (load) {
		x = tl_load(tl, 0, rows, 256, TL_F16);
		if (serial)
			tl_wait(tl, (tl_future){ x });
	}
	if (gemm)
		tl_wait(tl, tl_composite(tl, &(struct tl_composite_desc){
			.op = "gemm", .a = a, .b = b }));
	if (load)
		tl_wait(tl, (tl_future){ tl_scale(tl, x, 1.0) });
	return 0;
}

/* lazy-load design tests 2-4 and the load_async proposal's 2-4: lazy, async and
 * blocking loads of two addresses return the right, independent bytes. */
int test_loads(struct tl *tl, const struct tl_args *args)
{
	const uint32_t r = 32, c = 64;
	const uint64_t x0 = 0, x1 = MB, y0 = 2 * MB, y1 = 3 * MB, y2 = 4 * MB;

	(void)args;
	if (!first_program(tl))
		return 0;
	make(tl, x0, r, c, TL_F16, 0, 1.0f);
	make(tl, x1, r, c, TL_F16, 1, 1.0f);
	tl_tensor t0 = tl_load(tl, x0, r, c, TL_F16);         /* lazy */
	tl_future f1 = tl_load_async(tl, x1, r, c, TL_F16);   /* future */
	tl_store(tl, y1, tl_wait(tl, f1));                    /* resolve 2nd first */
	tl_store(tl, y0, t0);                                 /* auto-wait */
	tl_tensor t2 = tl_wait(tl, tl_load_async(tl, x0, r, c, TL_F16)); /* blocking */
	tl_store(tl, y2, t2);
	tl_save_npy(tl, "x0.npy", x0, r, c, TL_F16);
	tl_save_npy(tl, "x1.npy", x1, r, c, TL_F16);
	tl_save_npy(tl, "y0.npy", y0, r, c, TL_F16);
	tl_save_npy(tl, "y1.npy", y1, r, c, TL_F16);
	tl_save_npy(tl, "y2.npy", y2, r, c, TL_F16);
	return 0;
}

/* tl_load_async_into's hazards, and tl_hbm_write ordered after a lazy
 * load (issue 9 defect 7). A persistent buffer is loaded inside a scope
 * with x0, read (y0), reloaded at once with x1 (the load must wait for the
 * reader) and stored after the scope (y1: x1, the buffer outlived the
 * scope). Then a lazy load of x0 is followed by a host write of new bytes
 * to x0: the load returns the old bytes (y2), as a blocking load would. */
int test_load_into(struct tl *tl, const struct tl_args *args)
{
	const uint32_t r = 32, c = 64;
	const uint64_t x0 = 0, x1 = MB, y0 = 2 * MB, y1 = 3 * MB, y2 = 4 * MB;
	tl_tensor buf, t;

	(void)args;
	if (!first_program(tl))
		return 0;
	make(tl, x0, r, c, TL_F16, 0, 1.0f);
	make(tl, x1, r, c, TL_F16, 1, 1.0f);
	tl_save_npy(tl, "x0.npy", x0, r, c, TL_F16);
	tl_save_npy(tl, "x1.npy", x1, r, c, TL_F16);
	buf = tl_zeros(tl, r, c, TL_F16);
	TL_SCRATCH_SCOPE(tl) {
		tl_load_async_into(tl, buf, x0);
		tl_tensor read = tl_astype(tl, tl_scale(tl, buf, 1.0), TL_F16);

		tl_load_async_into(tl, buf, x1);
		tl_store(tl, y0, read);
	}
	tl_store(tl, y1, buf);
	t = tl_load(tl, x0, r, c, TL_F16);
	make(tl, x0, r, c, TL_F16, 2, 1.0f); /* new bytes under the lazy load */
	tl_store(tl, y2, t);
	tl_save_npy(tl, "x0new.npy", x0, r, c, TL_F16);
	tl_save_npy(tl, "y0.npy", y0, r, c, TL_F16);
	tl_save_npy(tl, "y1.npy", y1, r, c, TL_F16);
	tl_save_npy(tl, "y2.npy", y2, r, c, TL_F16);
	return 0;
}

/* One flash-decode tile, opt3 style: separate commands. */
static void flash_tile_opt3(struct tl *tl, tl_tensor s, tl_tensor v,
			    tl_tensor m, tl_tensor l, tl_tensor o)
{
	tl_tensor m_new = tl_maximum(tl, m, tl_max(tl, s, -1));
	tl_tensor corr = tl_exp(tl, tl_sub(tl, m, m_new));
	tl_tensor p = tl_exp(tl, tl_sub(tl, s, m_new));
	tl_tensor l_new = tl_add(tl, tl_mul(tl, l, corr), tl_sum(tl, p, -1));
	tl_tensor o_new = tl_add(tl, tl_mul(tl, o, corr), tl_dot(tl, p, v));

	tl_copy_to(tl, m, m_new);
	tl_copy_to(tl, l, l_new);
	tl_copy_to(tl, o, o_new);
}

/* scratch-scope design tests 1-4, flat-composite design tests 6/7 through daemons: a flash-decode
 * sweep over `tiles` K/V tiles of G x TILE scores. opt=2: one composite
 * per tile (softmax_merge prologue + P·V + add); opt=3: separate ops.
 * scoped=0 leaves every tile's scratch allocated. Writes s.npy (all
 * scores, G x tiles*TILE), v.npy (tiles*TILE x D) and the final running
 * state m.npy, l.npy, o.npy (O before the division by l). */
int test_flash(struct tl *tl, const struct tl_args *args)
{
	uint32_t tiles = tl_arg_u32(args, "tiles", 4, 1, 65536);
	uint32_t G = tl_arg_u32(args, "g", 8, 1, 4096);
	uint32_t T = tl_arg_u32(args, "tile", 32, 1, 4096);
	uint32_t D = tl_arg_u32(args, "d", 64, 1, 4096);
	bool scoped = tl_arg_u32(args, "scoped", 1, 0, 1);
	bool opt2 = tl_arg_u32(args, "opt", 2, 2, 3) == 2;
	uint64_t s_addr = 0, v_addr = 64 * MB, o_addr = 128 * MB, l_addr = 129 * MB;
	uint64_t m_addr = 130 * MB;

	if (!first_program(tl))
		return 0;
	/* scores stored tile-major: tile j is a contiguous G x T block */
	make(tl, s_addr, G, tiles * T, TL_F32, 0, 3.0f);
	make(tl, v_addr, tiles * T, D, TL_F16, 1, 1.0f);
	tl_tensor m = tl_full(tl, G, 1, TL_F32, -1e30);
	tl_tensor l = tl_zeros(tl, G, 1, TL_F32);
	tl_tensor o = tl_zeros(tl, G, D, TL_F32);
	for (uint32_t j = 0; j < tiles; j++) {
		if (scoped)
			tl_scratch_scope_begin(tl);
		tl_tensor s = tl_load(tl, s_addr + 4ull * G * T * j, G, T, TL_F32);
		tl_tensor v = tl_ref(tl, v_addr + 2ull * T * D * j, T, D, TL_F16);
		if (opt2)
			tl_composite(tl, &(struct tl_composite_desc){
				.prologue = { { "softmax_merge",
						{ { "s", s }, { "m", m }, { "l", l }, { "O", o } } } },
				.op = "gemm", .b = v, .out = o,
				.epilogue = { { .op = "add", .other = o } } });
		else
			flash_tile_opt3(tl, s, v, m, l, o);
		if (scoped)
			tl_scratch_scope_end(tl);
	}
	tl_store(tl, o_addr, o);
	tl_store(tl, l_addr, l);
	tl_store(tl, m_addr, m);
	tl_save_npy(tl, "s.npy", s_addr, G, tiles * T, TL_F32);
	tl_save_npy(tl, "v.npy", v_addr, tiles * T, D, TL_F16);
	tl_save_npy(tl, "o.npy", o_addr, G, D, TL_F32);
	tl_save_npy(tl, "l.npy", l_addr, G, 1, TL_F32);
	tl_save_npy(tl, "m.npy", m_addr, G, 1, TL_F32);
	return 0;
}

/* Numerics of every tl op: results stored as f32 npys named after the op. */
int test_ops(struct tl *tl, const struct tl_args *args)
{
	const uint32_t R = 16, C = 32;
	const uint64_t a_addr = 0, b_addr = MB, r_addr = 2 * MB, w_addr = 3 * MB;
	uint64_t out = 8 * MB;
	struct named { const char *name; tl_tensor t; } res[16];
	int n = 0;

	(void)args;
	if (!first_program(tl))
		return 0;
	make(tl, a_addr, R, C, TL_F16, 0, 2.0f);
	make(tl, b_addr, R, C, TL_F16, 1, 2.0f);
	make(tl, r_addr, 1, C, TL_F16, 2, 2.0f);
	make(tl, w_addr, C, R, TL_F16, 3, 1.0f);
	tl_tensor a = tl_load(tl, a_addr, R, C, TL_F16);
	tl_tensor b = tl_load(tl, b_addr, R, C, TL_F16);
	tl_tensor row = tl_load(tl, r_addr, 1, C, TL_F16);
	tl_tensor w = tl_load(tl, w_addr, C, R, TL_F16);
	res[n++] = (struct named){ "add", tl_add(tl, a, b) };
	res[n++] = (struct named){ "sub", tl_sub(tl, a, row) };
	res[n++] = (struct named){ "mul", tl_mul(tl, a, row) };
	res[n++] = (struct named){ "div", tl_div(tl, a, tl_full(tl, 1, C, TL_F32, 4.0)) };
	res[n++] = (struct named){ "maximum", tl_maximum(tl, a, b) };
	res[n++] = (struct named){ "exp", tl_exp(tl, a) };
	res[n++] = (struct named){ "scale", tl_scale(tl, a, 0.5) };
	res[n++] = (struct named){ "rmax", tl_max(tl, a, -1) };
	res[n++] = (struct named){ "rsum0", tl_sum(tl, a, 0) };
	res[n++] = (struct named){ "softmax", tl_softmax(tl, a) };
	res[n++] = (struct named){ "dot", tl_dot(tl, a, w) };
	res[n++] = (struct named){ "dot_trans", tl_dot(tl, a, tl_trans(tl, b)) };
	res[n++] = (struct named){ "astype", tl_astype(tl, tl_astype(tl, a, TL_F16), TL_F32) };
	for (int i = 0; i < n; i++) {
		char file[32];

		tl_store(tl, out, res[i].t);
		snprintf(file, sizeof(file), "%s.npy", res[i].name);
		/* shapes: the op's logical result */
		uint32_t rows = i == 8 ? 1 : R;
		uint32_t cols = i == 7 ? 1 : (i == 10 || i == 11) ? R : C;
		tl_save_npy(tl, file, out, rows, cols, TL_F32);
		out += MB;
	}
	tl_save_npy(tl, "a.npy", a_addr, R, C, TL_F16);
	tl_save_npy(tl, "b.npy", b_addr, R, C, TL_F16);
	tl_save_npy(tl, "row.npy", r_addr, 1, C, TL_F16);
	tl_save_npy(tl, "w.npy", w_addr, C, R, TL_F16);
	return 0;
}

/* IPCQ: every rank sends its rank-valued tile right and receives one from
 * the left; rank r stores what it got at HBM 0 and writes recv_r.npy. */
int test_ipcq(struct tl *tl, const struct tl_args *args)
{
	char file[32];

	(void)args;
	if (tl_program_id(tl) != 0)
		return 0;
	tl_future f = tl_recv_async(tl, TL_LEFT, 4, 8, TL_F32);
	tl_tensor mine = tl_full(tl, 4, 8, TL_F32, (double)tl_rank(tl) + 1.0);
	tl_send(tl, TL_RIGHT, mine);
	tl_store(tl, 0, tl_wait(tl, f));
	snprintf(file, sizeof(file), "recv_%u.npy", tl_rank(tl));
	tl_save_npy(tl, file, 0, 4, 8, TL_F32);
	return 0;
}

/* Reductions along an axis: seeded x (rows x cols, f16) reduced by tl_sum
 * (or tl_max with max=1) along axis=0|1; x.npy and y.npy (f32). */
int test_reduce(struct tl *tl, const struct tl_args *args)
{
	uint32_t rows = tl_arg_u32(args, "rows", 1, 1, 65536);
	uint32_t cols = tl_arg_u32(args, "cols", 5, 1, 65536);
	int axis = (int)tl_arg_u32(args, "axis", 0, 0, 1);
	bool max = tl_arg_u32(args, "max", 0, 0, 1);

	if (!first_program(tl))
		return 0;
	make(tl, 0, rows, cols, TL_F16, 4, 2.0f);
	tl_tensor x = tl_load(tl, 0, rows, cols, TL_F16);
	tl_tensor y = max ? tl_max(tl, x, axis) : tl_sum(tl, x, axis);
	tl_store(tl, MB, y);
	tl_save_npy(tl, "x.npy", 0, rows, cols, TL_F16);
	tl_save_npy(tl, "y.npy", MB, axis == 0 ? 1 : rows, axis == 0 ? cols : 1,
		    TL_F32);
	return 0;
}

/* A DMA-bound sweep: n lazy loads of rows x cols f16, back to back, nothing
 * else; the kernel ends when the last lands. */
int test_dma_sweep(struct tl *tl, const struct tl_args *args)
{
	uint32_t n = tl_arg_u32(args, "n", 16, 1, 65536);
	uint32_t rows = tl_arg_u32(args, "rows", 32, 1, 65536);
	uint32_t cols = tl_arg_u32(args, "cols", 64, 1, 65536);

	if (!first_program(tl))
		return 0;
	for (uint32_t i = 0; i < n; i++)
		tl_load(tl, (uint64_t)i * rows * cols * 2, rows, cols, TL_F16);
	return 0;
}

/* Recursion without end: the kernel overflows its stack (the guard page
 * below its coroutine stack). What the launcher says about it is tested
 * (tests/hostile/test_inproc.c). */
static unsigned recurse(volatile unsigned char *up, unsigned depth, unsigned limit)
{
	volatile unsigned char frame[512];

	frame[0] = (unsigned char)depth;
	frame[511] = up ? up[0] : 0;
	if (depth == limit)
		return frame[0];
	return recurse(frame, depth + 1, limit) + frame[511];
}

int test_overflow(struct tl *tl, const struct tl_args *args)
{
	if (tl_program_id(tl) || tl_rank(tl))
		return 0;
	/* a gigabyte of frames: far past any kernel stack */
	return (int)recurse(NULL, 0, tl_arg_u32(args, "depth", 2000000, 1, 4000000));
}

/* Critical-path probe (tests/integration/test_critical_path.c): one
 * dependent chain of `steps` rounds on program 0 of every rank; each round
 * loads a rows x 128 tile (DMA read), takes its exp (MATH), multiplies it by
 * a pinned 128 x 128 weight (GEMM) and stores the product (DMA write), each
 * command waiting for the one before. With --ranks 2 or more (ring=1) each
 * round also passes the product round the ring: send right, then receive
 * from the left, so the chain runs through the links as well. Making one
 * resource infinitely fast saves the time that resource spent on the chain. */
int test_chain(struct tl *tl, const struct tl_args *args)
{
	uint32_t steps = tl_arg_u32(args, "steps", 4, 1, 4096);
	uint32_t rows = tl_arg_u32(args, "rows", 64, 1, 1024);
	bool ring = tl_arg_u32(args, "ring", tl_num_ranks(tl) > 1, 0, 1) && tl_num_ranks(tl) > 1;
	uint64_t tile = (uint64_t)rows * 128 * 2, w_at = 8 * MB;
	tl_tensor w, x, y;

	if (tl_program_id(tl) != 0)
		return 0;
	w = tl_wait(tl, tl_load_async(tl, w_at, 128, 128, TL_F16));
	for (uint32_t i = 0; i < steps; i++) {
		tl_scratch_scope_begin(tl);
		x = tl_wait(tl, tl_load_async(tl, (uint64_t)(i % 16) * tile, rows, 128, TL_F16));
		y = tl_exp(tl, x);
		tl_wait(tl, (tl_future){ y });
		y = tl_dot(tl, y, w);
		tl_wait(tl, (tl_future){ y });
		if (ring) {
			tl_send(tl, TL_RIGHT, y);
			y = tl_wait(tl, tl_recv_async(tl, TL_LEFT, rows, 128, TL_F32));
		}
		tl_store(tl, 16 * MB + (uint64_t)(i % 16) * tile, y);
		tl_scratch_scope_end(tl);
	}
	return 0;
}

/* Issue 18 item 8: a command reading the output of an earlier command
 * still running on the same PE is dispatched at once (the scheduler's
 * strict FIFO orders it); only a load's first use waits on the host
 * (lazy-load design D2). A fill of rows x cols (long on PE_MATH), then a
 * consumer of it: the kernel clock around each dispatch goes to
 * summary.json (fill_dispatch_ps, use_dispatch_ps), and
 * producer_running_at_use is 1 when the producer had not completed when
 * the consumer's dispatch ended (seen from the host: the producer's own
 * tl_wait afterwards advances the clock). use=load reads a lazy load
 * instead of the fill. Data mode writes y.npy: exp(2) everywhere (exp
 * consumers), 4 x cols (dot), 2 (store), exp of the input (use=load). */
int test_no_wait(struct tl *tl, const struct tl_args *args)
{
	uint32_t rows = tl_arg_u32(args, "rows", 256, 1, 4096);
	uint32_t cols = tl_arg_u32(args, "cols", 256, 1, 4096);
	const char *use = tl_arg_str(args, "use", "composite");
	uint64_t t0, t1, t2, t3;
	tl_tensor x, y = TL_NONE;

	if (!first_program(tl))
		return 0;
	make(tl, 0, rows, cols, TL_F32, 0, 1.0f);
	t0 = tl_now_ps(tl);
	if (!strcmp(use, "load"))
		x = tl_load(tl, 0, rows, cols, TL_F32);
	else
		x = tl_full(tl, rows, cols, TL_F32, 2.0);
	t1 = tl_now_ps(tl);
	if (!strcmp(use, "composite") || !strcmp(use, "load"))
		y = tl_composite(tl, &(struct tl_composite_desc){
			.op = "exp", .a = x }).t;
	else if (!strcmp(use, "math"))
		y = tl_exp(tl, x);
	else if (!strcmp(use, "dot"))
		y = tl_dot(tl, x, tl_trans(tl, x));
	else if (!strcmp(use, "store"))
		tl_store(tl, 64 * MB, x);
	else
		tl_fail(tl, "test_no_wait: use=%s is not composite, dot, math, store or load", use);
	t2 = tl_now_ps(tl);
	tl_wait(tl, (tl_future){ x });
	t3 = tl_now_ps(tl);
	tl_stat_add(tl, "fill_dispatch_ps", t1 - t0);
	tl_stat_add(tl, "use_dispatch_ps", t2 - t1);
	tl_stat_add(tl, "producer_running_at_use", t3 > t2);
	if (y.slot)
		tl_store(tl, 64 * MB, y);
	tl_save_npy(tl, "y.npy", 64 * MB, rows, !strcmp(use, "dot") ? rows : cols, TL_F32);
	return 0;
}
