/* llama_steps.c — the kernels of the Llama decoder layer's steps, each on
 * tensors its program step binds (tl_arg_tensor), each splitting its work
 * over the PEs of a rank. Activations are token-major [tokens, features]
 * f16, weights [in, out] f16 (the rank's Megatron shard), the KV cache
 * [batch, kv heads, positions, head_dim] f16 (llama.c lays them out).
 * tl.h and tl_io.h only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "kernels.h"
#include "llama.h"

#define ALIGN4K(x) (((x) + 4095) & ~(uint64_t)4095)
#define TILE 128 /* GEMM output tile: the systolic array's width */

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

static void need(struct tl *tl, const char *name, struct tl_hbm t, uint32_t rows,
		 uint32_t cols)
{
	if (t.rows != rows || t.cols != cols || t.dtype == TL_BF16)
		tl_fail(tl, "tensor %s is %ux%u, expected %ux%u (f16 or f32)", name, t.rows, t.cols,
			rows, cols);
}

/* ------------------------------------------------------------ arguments */

void llama_args(struct tl *tl, const struct tl_args *args, bool prefill, struct llama *m)
{
	uint32_t ranks = tl_num_ranks(tl), r = tl_rank(tl);

	memset(m, 0, sizeof(*m));
	m->prefill = prefill;
	m->hidden = tl_arg_u32(args, "hidden", 8192, 1, 1u << 20);
	m->heads_q = tl_arg_u32(args, "heads_q", 64, 1, 4096);
	m->heads_kv = tl_arg_u32(args, "heads_kv", 8, 1, 4096);
	m->head_dim = tl_arg_u32(args, "head_dim", 128, 2, 1024);
	m->ffn = tl_arg_u32(args, "ffn", 28672, 1, 1u << 22);
	m->layers = tl_arg_u32(args, "layers", 80, 1, 1000);
	m->batch = tl_arg_u32(args, "batch", 1, 1, 4096);
	m->seq = tl_arg_u32(args, "seq_kv", prefill ? 4096 : 8192, 1, 1u << 22);
	m->cp = prefill ? tl_arg_u32(args, "cp", 1, 1, 64) : 1;
	m->tp = tl_arg_u32(args, "tp", ranks / m->cp ? ranks / m->cp : 1, 1, 64);
	m->eps = 1e-5;
	m->theta = tl_arg_u32(args, "rope_theta", 500000, 1, 100000000);
	if (m->tp * m->cp != ranks)
		tl_fail(tl, "tp=%u x cp=%u is not the run's %u ranks (--ranks)", m->tp, m->cp, ranks);
	if (m->heads_q % m->heads_kv || m->heads_kv % m->tp || m->ffn % m->tp || m->head_dim % 2)
		tl_fail(tl, "heads_q=%u must be a multiple of heads_kv=%u, heads_kv and ffn=%u of "
			"tp=%u, head_dim=%u even", m->heads_q, m->heads_kv, m->ffn, m->tp,
			m->head_dim);
	if (m->seq % m->cp)
		tl_fail(tl, "seq_kv=%u is not a multiple of cp=%u", m->seq, m->cp);
	m->t = r % m->tp;
	m->c = r / m->tp;
	m->hq = m->heads_q / m->tp;
	m->hk = m->heads_kv / m->tp;
	m->f = m->ffn / m->tp;
	m->nqkv = (m->hq + 2 * m->hk) * m->head_dim;
	m->seq_local = prefill ? m->seq / m->cp : m->seq;
	m->tokens = prefill ? m->batch * m->seq_local : m->batch;
}

/* ------------------------------------------------------------ setup */

/* RoPE tables of every token row (decode: position seq-1; prefill: the
 * token's place in its sequence) and the rotate-half permutation P, with
 * q·P = rotate_half(q): (q·P)[j] = -q[j + D/2] for j < D/2, q[j - D/2]
 * above. Host data: no simulated time (data mode only). */
int llama_setup(struct tl *tl, const struct tl_args *args)
{
	struct tl_hbm cs = tl_arg_tensor(args, "cos", TL_IN), sn = tl_arg_tensor(args, "sin", TL_IN);
	struct tl_hbm p = tl_arg_tensor(args, "p", TL_IN);
	struct llama m;
	uint32_t D;
	float *c, *s, *pm;

	llama_args(tl, args, tl_arg_u32(args, "prefill", 0, 0, 1), &m);
	D = m.head_dim;
	need(tl, "cos", cs, m.tokens, D);
	need(tl, "sin", sn, m.tokens, D);
	need(tl, "p", p, D, D);
	if (tl_mode(tl) != TL_DATA || tl_program_id(tl) != 0)
		return 0;
	c = malloc((size_t)m.tokens * D * sizeof(float));
	s = malloc((size_t)m.tokens * D * sizeof(float));
	pm = calloc((size_t)D * D, sizeof(float));
	if (!c || !s || !pm)
		tl_fail(tl, "out of memory for the RoPE tables");
	for (uint32_t t = 0; t < m.tokens; t++) {
		double pos = m.prefill ? (double)m.c * m.seq_local + t % m.seq_local : m.seq - 1.0;

		for (uint32_t j = 0; j < D; j++) {
			double ang = pos * pow(m.theta, -2.0 * (j % (D / 2)) / D);

			c[(size_t)t * D + j] = (float)cos(ang);
			s[(size_t)t * D + j] = (float)sin(ang);
		}
	}
	for (uint32_t j = 0; j < D / 2; j++) {
		pm[(size_t)(j + D / 2) * D + j] = -1.0f;
		pm[(size_t)j * D + j + D / 2] = 1.0f;
	}
	tl_hbm_write(tl, cs.addr, cs.dtype, c, (size_t)m.tokens * D);
	tl_hbm_write(tl, sn.addr, sn.dtype, s, (size_t)m.tokens * D);
	tl_hbm_write(tl, p.addr, p.dtype, pm, (size_t)D * D);
	free(c);
	free(s);
	free(pm);
	return 0;
}

/* ------------------------------------------------------------ RMSNorm */

/* y = (x [+ r]) / rms(x [+ r]) * w over each row; with r, the sum goes to
 * `sum` too (the residual stream). Rows in blocks over the PEs. */
int llama_rmsnorm(struct tl *tl, const struct tl_args *args)
{
	struct tl_hbm x = tl_arg_tensor(args, "x", TL_IN), w = tl_arg_tensor(args, "w", TL_IN);
	struct tl_hbm y = tl_arg_tensor(args, "y", TL_OUT), r = { 0 }, sum = { 0 };
	bool res = tl_arg_has_tensor(args, "r");
	uint32_t P = tl_num_programs(tl), H = x.cols, rb = 16384 / H ? 16384 / H : 1;
	tl_tensor eps;

	if (res) {
		r = tl_arg_tensor(args, "r", TL_IN);
		sum = tl_arg_tensor(args, "sum", TL_OUT);
		need(tl, "r", r, x.rows, H);
		need(tl, "sum", sum, x.rows, H);
	}
	need(tl, "w", w, 1, H);
	need(tl, "y", y, x.rows, H);
	eps = tl_full(tl, 1, 1, TL_F32, 1e-5);
	for (uint32_t r0 = tl_program_id(tl) * rb; r0 < x.rows; r0 += P * rb)
		TL_SCRATCH_SCOPE(tl) {
			uint32_t n = min_u32(rb, x.rows - r0);
			uint64_t off = (uint64_t)r0 * H;
			tl_tensor v = tl_load(tl, x.addr + off * tl_dtype_size(x.dtype), n, H, x.dtype);
			tl_tensor ms, out;

			if (res) {
				v = tl_add(tl, v, tl_load(tl, r.addr + off * tl_dtype_size(r.dtype), n, H,
							  r.dtype));
				tl_store(tl, sum.addr + off * tl_dtype_size(sum.dtype),
					 sum.dtype == TL_F32 ? v : tl_astype(tl, v, sum.dtype));
			}
			ms = tl_scale(tl, tl_sum(tl, tl_mul(tl, v, v), 1), 1.0 / H);
			out = tl_mul(tl, tl_mul(tl, v, tl_unary(tl, "rsqrt", tl_add(tl, ms, eps))),
				     tl_load(tl, w.addr, 1, H, w.dtype));
			tl_store(tl, y.addr + off * tl_dtype_size(y.dtype),
				 y.dtype == TL_F32 ? out : tl_astype(tl, out, y.dtype));
		}
	return 0;
}

/* ------------------------------------------------------------ linear */

/* c = a · w: every PE takes an equal share of the output columns (the
 * weights it streams), in tiles of up to 128 rows x 128 columns, a's rows
 * and w's columns streamed from HBM per tile. */
int llama_linear(struct tl *tl, const struct tl_args *args)
{
	struct tl_hbm a = tl_arg_tensor(args, "a", TL_IN), w = tl_arg_tensor(args, "w", TL_IN);
	struct tl_hbm c = tl_arg_tensor(args, "c", TL_OUT);
	uint32_t P = tl_num_programs(tl), p = tl_program_id(tl);
	uint32_t ea = tl_dtype_size(a.dtype), ew = tl_dtype_size(w.dtype), ec = tl_dtype_size(c.dtype);
	uint32_t c0 = (uint32_t)((uint64_t)w.cols * p / P), c1 = (uint32_t)((uint64_t)w.cols * (p + 1) / P);

	need(tl, "w", w, a.cols, w.cols);
	need(tl, "c", c, a.rows, w.cols);
	for (uint32_t m0 = 0; m0 < a.rows; m0 += TILE)
		for (uint32_t n0 = c0; n0 < c1; n0 += TILE)
			TL_SCRATCH_SCOPE(tl) {
				uint32_t m = min_u32(TILE, a.rows - m0), n = min_u32(TILE, c1 - n0);
				tl_tensor x = tl_ref(tl, a.addr + (uint64_t)m0 * a.cols * ea, m, a.cols,
						     a.dtype);
				tl_tensor wt = tl_ref_rows(tl, w.addr + (uint64_t)n0 * ew, w.rows, n,
							   (uint64_t)w.cols * ew, w.dtype);
				tl_tensor y = tl_wait(tl, tl_composite(tl, &(struct tl_composite_desc){
								      .op = "gemm", .a = x, .b = wt }));

				tl_store_rows(tl, c.addr + ((uint64_t)m0 * c.cols + n0) * ec,
					      (uint64_t)c.cols * ec,
					      c.dtype == TL_F32 ? y : tl_astype(tl, y, c.dtype));
			}
	return 0;
}

/* a = silu(gate) * up, gate and up the two halves of gu's columns. */
int llama_silu_mul(struct tl *tl, const struct tl_args *args)
{
	struct tl_hbm gu = tl_arg_tensor(args, "gu", TL_IN), a = tl_arg_tensor(args, "y", TL_OUT);
	uint32_t P = tl_num_programs(tl), F = a.cols, mt = (a.rows + TILE - 1) / TILE;
	uint32_t nt = (F + 4 * TILE - 1) / (4 * TILE);

	need(tl, "gu", gu, a.rows, 2 * F);
	for (uint64_t item = tl_program_id(tl); item < (uint64_t)mt * nt; item += P)
		TL_SCRATCH_SCOPE(tl) {
			uint32_t m0 = (uint32_t)(item / nt) * TILE, n0 = (uint32_t)(item % nt) * 4 * TILE;
			uint32_t m = min_u32(TILE, a.rows - m0), n = min_u32(4 * TILE, F - n0);
			uint64_t row = (uint64_t)2 * F * 2, base = gu.addr + (uint64_t)m0 * row;
			tl_tensor g = tl_load_rows(tl, base + (uint64_t)n0 * 2, m, n, row, TL_F16);
			tl_tensor u = tl_load_rows(tl, base + ((uint64_t)F + n0) * 2, m, n, row, TL_F16);

			tl_store_rows(tl, a.addr + ((uint64_t)m0 * F + n0) * 2, (uint64_t)F * 2,
				      tl_astype(tl, tl_mul(tl, tl_unary(tl, "silu", g), u), TL_F16));
		}
	return 0;
}

/* ------------------------------------------------------------ RoPE */

/* rot(x) = x * cos + (x · P) * sin for the heads of one token, x [heads,
 * D] f16 in TCM; rounded back to f16. */
static tl_tensor rotate(struct tl *tl, tl_tensor x, tl_tensor p, tl_tensor cs, tl_tensor sn)
{
	tl_tensor xr = tl_wait(tl, tl_composite(tl, &(struct tl_composite_desc){
						.op = "gemm", .a = x, .b = p }));

	return tl_astype(tl, tl_add(tl, tl_mul(tl, x, cs), tl_mul(tl, xr, sn)), TL_F16);
}

/* Per token row (over the PEs): q and k heads rotated, q back into qkv
 * (decode) or into the attention's head-major q (prefill), the new k and v
 * into the cache at the token's position. */
int llama_rope(struct tl *tl, const struct tl_args *args)
{
	struct tl_hbm qkv = tl_arg_tensor(args, "qkv", TL_OUT);
	struct tl_hbm cs = tl_arg_tensor(args, "cos", TL_IN), sn = tl_arg_tensor(args, "sin", TL_IN);
	struct tl_hbm pt = tl_arg_tensor(args, "p", TL_IN);
	struct tl_hbm kc = tl_arg_tensor(args, "k", TL_OUT), vc = tl_arg_tensor(args, "v", TL_OUT);
	struct tl_hbm q = { 0 };
	struct llama m;
	uint32_t D, P = tl_num_programs(tl);
	tl_tensor p;

	llama_args(tl, args, tl_arg_has_tensor(args, "q"), &m);
	D = m.head_dim;
	need(tl, "qkv", qkv, m.tokens, m.nqkv);
	need(tl, "k", kc, m.batch * m.hk * m.seq_local, D);
	need(tl, "v", vc, m.batch * m.hk * m.seq_local, D);
	if (m.prefill) {
		q = tl_arg_tensor(args, "q", TL_OUT);
		need(tl, "q", q, m.batch * m.hq * m.seq, D);
	}
	p = tl_load(tl, pt.addr, D, D, pt.dtype);
	for (uint32_t t = tl_program_id(tl); t < m.tokens; t += P)
		TL_SCRATCH_SCOPE(tl) {
			uint32_t b = t / (m.prefill ? m.seq_local : 1);
			uint32_t lp = m.prefill ? t % m.seq_local : m.seq - 1; /* in the cache */
			uint64_t row = qkv.addr + (uint64_t)t * m.nqkv * 2, dd = (uint64_t)D * 2;
			tl_tensor c = tl_load(tl, cs.addr + (uint64_t)t * D * 4, 1, D, TL_F32);
			tl_tensor s = tl_load(tl, sn.addr + (uint64_t)t * D * 4, 1, D, TL_F32);
			tl_tensor qh = rotate(tl, tl_load(tl, row, m.hq, D, TL_F16), p, c, s);
			tl_tensor kh = rotate(tl, tl_load(tl, row + m.hq * dd, m.hk, D, TL_F16), p, c, s);
			tl_tensor vh = tl_load(tl, row + (uint64_t)(m.hq + m.hk) * dd, m.hk, D, TL_F16);
			uint64_t kv_row = ((uint64_t)b * m.hk * m.seq_local + lp) * dd;

			if (m.prefill) /* q rows of head j are seq apart */
				tl_store_rows(tl, q.addr + (((uint64_t)b * m.hq) * m.seq + m.c * m.seq_local +
							  lp) * dd,
					      (uint64_t)m.seq * dd, qh);
			else
				tl_store(tl, row, qh);
			tl_store_rows(tl, kc.addr + kv_row, (uint64_t)m.seq_local * dd, kh);
			tl_store_rows(tl, vc.addr + kv_row, (uint64_t)m.seq_local * dd, vh);
		}
	return 0;
}

/* ------------------------------------------------------------ attention */

/* The attention code's description of one sequence's heads on this rank. */
static void attn_of(const struct llama *m, struct tl *tl, struct attn *a)
{
	memset(a, 0, sizeof(*a));
	a->hq = m->hq;
	a->hkv = m->hk;
	a->d = m->head_dim;
	a->g = m->hq / m->hk;
	a->tile = 128;
	a->scale = 1.0 / sqrt((double)m->head_dim);
	a->opt = ATTN_OPT2;
	a->scopes = true;
	a->sweeps = true;
	a->pes = tl_num_programs(tl);
	a->pe = tl_program_id(tl);
	a->ranks = m->cp;
	a->rank = m->c;
	if (m->tp > 1) { /* the context-parallel ring of this TP shard */
		a->ring_stride = m->tp;
		a->ring_base = tl_rank(tl) % m->tp;
	}
	a->cols = TL_NONE;
}

/* Decode: (sequence, KV head) items over the PEs, each the G query rows
 * of the group (contiguous in qkv) swept over that head's cache. */
static void attend_decode(struct tl *tl, const struct llama *m, struct tl_hbm qkv,
			  struct tl_hbm kc, struct tl_hbm vc, struct tl_hbm o)
{
	struct attn a;
	uint32_t P = tl_num_programs(tl), D = m->head_dim;

	attn_of(m, tl, &a);
	a.sq = 1;
	a.skv = m->seq;
	a.qblock = a.g;
	a.depth = 2;
	a.group = 16;
	a.kv_rows = m->seq;
	for (uint32_t it = tl_program_id(tl); it < m->batch * m->hk; it += P)
		TL_SCRATCH_SCOPE(tl) {
			uint32_t b = it / m->hk, h = it % m->hk;
			uint64_t kv = (uint64_t)it * m->seq * D * 2;
			struct attn_kv keys = { .k_hbm = kc.addr + kv, .v_hbm = vc.addr + kv,
						.kpos0 = 0, .len = m->seq };
			struct attn_block blk;
			uint64_t qcol = ((uint64_t)b * m->nqkv + (uint64_t)h * a.g * D) * 2;

			attn_block_open(tl, &a, &blk, h, 0, a.g);
			attn_block_take_q(tl, &a, &blk,
					  tl_load(tl, qkv.addr + qcol, a.g, D, TL_F16));
			attn_sweep(tl, &a, &blk, &keys);
			blk.o_hbm = o.addr + ((uint64_t)b * m->hq * D + (uint64_t)h * a.g * D) * 2;
			attn_block_finish(tl, &a, &blk);
		}
}

/* Prefill: per sequence, causal attention of its prompt on the attention
 * code's head-major layout (q [hq, seq, d], K/V [hk, keys, d]), the
 * output token-major into o; one rank (attn_heads) or ring attention's
 * pass=kv over the cp ranks (attn_ring_kv). */
static void attend_prefill(struct tl *tl, const struct llama *m, const struct tl_args *args,
			   struct tl_hbm q, struct tl_hbm kc, struct tl_hbm vc, struct tl_hbm o)
{
	struct tl_hbm ws = tl_arg_tensor(args, "ws", TL_IN);
	uint64_t dd = (uint64_t)m->head_dim * 2, per_pe;
	struct attn a;

	attn_of(m, tl, &a);
	a.sq = m->seq;
	a.skv = m->seq_local;
	a.kv_rows = m->seq_local;
	a.causal = true;
	a.depth = 1;
	a.group = 1;
	a.p0 = 0;
	a.qblock = m->seq_local < a.tile ? m->seq_local : a.tile;
	/* ring pass=kv: ~256 query rows of running state per pass, so the
	 * masked folds' temporaries fit the scratch beside them */
	a.qwindow = a.qblock >= 256 ? 1 : 256 / a.qblock;
	a.o_token_stride = (uint64_t)m->hq * dd;
	per_pe = ALIGN4K(((uint64_t)a.sq + a.qblock) * 4) + ALIGN4K((uint64_t)a.tile * 4);
	if ((uint64_t)ws.rows * ws.cols * tl_dtype_size(ws.dtype) < per_pe * a.pes)
		tl_fail(tl, "tensor ws holds %llu bytes, the mask tables need %llu",
			(unsigned long long)ws.rows * ws.cols * tl_dtype_size(ws.dtype),
			(unsigned long long)per_pe * a.pes);
	a.rel_addr = ws.addr + per_pe * a.pe;
	a.cols_addr = a.rel_addr + ALIGN4K(((uint64_t)a.sq + a.qblock) * 4);
	attn_mask_prepare(tl, &a);
	for (uint32_t b = 0; b < m->batch; b++) {
		a.q_addr = q.addr + (uint64_t)b * m->hq * m->seq * dd;
		a.k_addr = kc.addr + (uint64_t)b * m->hk * m->seq_local * dd;
		a.v_addr = vc.addr + (uint64_t)b * m->hk * m->seq_local * dd;
		/* position p of this rank's tokens -> its row b * seq_local + p - c * seq_local */
		a.o_addr = o.addr + ((uint64_t)b * m->seq_local - (uint64_t)m->c * m->seq_local) *
					    a.o_token_stride;
		if (m->cp > 1)
			attn_ring_kv(tl, &a);
		else
			attn_heads(tl, &a);
	}
}

int llama_attention(struct tl *tl, const struct tl_args *args)
{
	struct tl_hbm kc = tl_arg_tensor(args, "k", TL_IN), vc = tl_arg_tensor(args, "v", TL_IN);
	struct tl_hbm o = tl_arg_tensor(args, "o", TL_OUT);
	bool prefill = tl_arg_has_tensor(args, "q");
	struct llama m;

	llama_args(tl, args, prefill, &m);
	need(tl, "k", kc, m.batch * m.hk * m.seq_local, m.head_dim);
	need(tl, "v", vc, m.batch * m.hk * m.seq_local, m.head_dim);
	need(tl, "o", o, m.tokens, m.hq * m.head_dim);
	if (prefill) {
		struct tl_hbm q = tl_arg_tensor(args, "q", TL_IN);

		need(tl, "q", q, m.batch * m.hq * m.seq, m.head_dim);
		attend_prefill(tl, &m, args, q, kc, vc, o);
	} else {
		struct tl_hbm qkv = tl_arg_tensor(args, "qkv", TL_IN);

		need(tl, "qkv", qkv, m.tokens, m.nqkv);
		attend_decode(tl, &m, qkv, kc, vc, o);
	}
	return 0;
}
