/* llama.c — llama_decode_step and llama_prefill_step: one Llama decoder
 * layer as a program of kernels (llama_steps.c, prog_ops.c), its tensors
 * in HBM (every rank its Megatron shard), tensor parallel over tp ranks
 * and, prefill, context parallel over cp ranks (ring attention).
 *
 *   setup        RoPE tables and the rotate-half permutation (host data)
 *   attn_norm    xn = RMSNorm(x) * w_attn_norm
 *   qkv          qkv = xn · w_qkv (this rank's q, k and v heads)
 *   rope         RoPE on q and k; k, v into the cache at their positions
 *   attention    o = softmax(q kᵀ / sqrt(d)) v over the cache (decode: the
 *                decode kernels' sweep; prefill: causal, gqa_prefill's
 *                blocks, or ring attention's pass=kv with cp > 1)
 *   o_proj       y1 = o · w_o (a partial sum per rank)
 *   attn_reduce  y1 = all-reduce(y1) over the tp ranks
 *   ffn_norm     h = x + y1; hn = RMSNorm(h) * w_ffn_norm
 *   gate_up      gu = hn · w_gu ([gate | up], this rank's ffn / tp columns each)
 *   silu_mul     a = silu(gate) * up
 *   down         y2 = a · w_down
 *   ffn_reduce   y2 = all-reduce(y2)
 *   residual     out = h + y2
 *
 * Data mode writes every tensor the steps write (STEP.TENSOR.npy) and the
 * initialised ones (x, weights, the cache), float32 [ranks, rows, cols]:
 * tests/integration/test_llama.c checks each step and the layer against
 * an fp64 reference. The per-token latency of the whole model is layers x
 * the layer's latency (summary.json model_latency_ps; docs/model-step.md
 * says what that leaves out), and the run reports the memory roofline of
 * the layer: (this rank's weight bytes + KV bytes read) / HBM bandwidth. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "llama.h"

#define ALIGN4K(x) (((x) + 4095) & ~(uint64_t)4095)

/* A program under construction. */
struct build {
	struct tl_prog_tensor t[32];
	struct tl_prog_step s[16];
	uint32_t nt, ns;
	char tp[12];   /* the all-reduces' group= */
};

static void tensor(struct build *b, const char *name, uint32_t rows, uint32_t cols,
		   enum tl_dtype dtype, enum tl_init init, double scale, double offset)
{
	b->t[b->nt++] = (struct tl_prog_tensor){ name, rows, cols, dtype, init, scale, offset, 0, 0 };
}

/* The last tensor's random values depend on the rank through (rank /
 * div) % mod (struct tl_prog_tensor). */
static void vary(struct build *b, uint32_t div, uint32_t mod)
{
	b->t[b->nt - 1].rank_div = div;
	b->t[b->nt - 1].rank_mod = mod;
}

static struct tl_prog_step *step(struct build *b, const char *name, tl_kernel_fn fn,
				 const char *kernel)
{
	struct tl_prog_step *s = &b->s[b->ns++];

	memset(s, 0, sizeof(*s));
	s->name = name;
	s->kernel = fn;
	s->kernel_name = kernel;
	return s;
}

static void bind(struct tl_prog_step *s, const char *param, const char *tensor_name)
{
	uint32_t k = 0;

	while (s->binds[k][0])
		k++;
	s->binds[k][0] = param;
	s->binds[k][1] = tensor_name;
}

static void arg(struct tl_prog_step *s, const char *name, const char *value)
{
	uint32_t k = 0;

	while (s->args[k][0])
		k++;
	s->args[k][0] = name;
	s->args[k][1] = value;
}

/* Weights uniform in [-s, s) with s = sqrt(3 / fan_in): unit variance in,
 * unit variance out, so the activations stay O(1) at any size. */
static double fan(uint32_t in)
{
	return sqrt(3.0 / in);
}

/* The layer's tensors and steps (pes: PEs per rank, for the mask tables). */
static void layer(struct build *b, const struct llama *m, uint32_t pes)
{
	uint32_t H = m->hidden, T = m->tokens, D = m->head_dim;
	uint32_t kv = m->batch * m->hk * m->seq_local;
	struct tl_prog_step *s;

	snprintf(b->tp, sizeof(b->tp), "%u", m->tp);
	/* rank r = c * tp + t holds context shard c and tensor shard t: the
	 * input is the same within a TP group, a weight shard the same in
	 * every context shard, a norm weight the same everywhere */
	tensor(b, "x", T, H, TL_F16, TL_INIT_RANDOM, 1, 0);
	vary(b, m->tp, m->cp);
	tensor(b, "w_attn_norm", 1, H, TL_F16, TL_INIT_RANDOM, 0.1, 1);
	vary(b, 1, 1);
	tensor(b, "w_qkv", H, m->nqkv, TL_F16, TL_INIT_RANDOM, fan(H), 0);
	vary(b, 1, m->tp);
	tensor(b, "w_o", m->hq * D, H, TL_F16, TL_INIT_RANDOM, fan(m->hq * D), 0);
	vary(b, 1, m->tp);
	tensor(b, "w_ffn_norm", 1, H, TL_F16, TL_INIT_RANDOM, 0.1, 1);
	vary(b, 1, 1);
	tensor(b, "w_gu", H, 2 * m->f, TL_F16, TL_INIT_RANDOM, fan(H), 0);
	vary(b, 1, m->tp);
	tensor(b, "w_down", m->f, H, TL_F16, TL_INIT_RANDOM, fan(m->f), 0);
	vary(b, 1, m->tp);
	/* decode: the cache holds seq-1 past positions (random) and gets this
	 * token's; prefill: it is filled by the step */
	tensor(b, "k_cache", kv, D, TL_F16, m->prefill ? TL_INIT_ZEROS : TL_INIT_RANDOM, 1, 0);
	tensor(b, "v_cache", kv, D, TL_F16, m->prefill ? TL_INIT_ZEROS : TL_INIT_RANDOM, 1, 0);
	tensor(b, "rope_cos", T, D, TL_F32, TL_INIT_NONE, 0, 0);
	tensor(b, "rope_sin", T, D, TL_F32, TL_INIT_NONE, 0, 0);
	tensor(b, "rope_p", D, D, TL_F16, TL_INIT_NONE, 0, 0);
	tensor(b, "xn", T, H, TL_F16, TL_INIT_NONE, 0, 0);
	tensor(b, "qkv", T, m->nqkv, TL_F16, TL_INIT_NONE, 0, 0);
	if (m->prefill) {
		tensor(b, "q", m->batch * m->hq * m->seq, D, TL_F16, TL_INIT_NONE, 0, 0);
		/* the causal mask's tables, a region per PE (attn.h) */
		tensor(b, "ws", pes,
		       (uint32_t)((ALIGN4K(((uint64_t)m->seq + 128) * 4) + ALIGN4K(128 * 4)) / 4),
		       TL_F32, TL_INIT_NONE, 0, 0);
	}
	tensor(b, "o", T, m->hq * D, TL_F16, TL_INIT_NONE, 0, 0);
	tensor(b, "y1", T, H, TL_F16, TL_INIT_NONE, 0, 0);
	tensor(b, "h", T, H, TL_F16, TL_INIT_NONE, 0, 0);
	tensor(b, "hn", T, H, TL_F16, TL_INIT_NONE, 0, 0);
	tensor(b, "gu", T, 2 * m->f, TL_F16, TL_INIT_NONE, 0, 0);
	tensor(b, "a", T, m->f, TL_F16, TL_INIT_NONE, 0, 0);
	tensor(b, "y2", T, H, TL_F16, TL_INIT_NONE, 0, 0);
	tensor(b, "out", T, H, TL_F16, TL_INIT_NONE, 0, 0);

	s = step(b, "setup", llama_setup, "llama_setup");
	arg(s, "prefill", m->prefill ? "1" : "0");
	bind(s, "cos", "rope_cos"), bind(s, "sin", "rope_sin"), bind(s, "p", "rope_p");
	s = step(b, "attn_norm", llama_rmsnorm, "llama_rmsnorm");
	bind(s, "x", "x"), bind(s, "w", "w_attn_norm"), bind(s, "y", "xn");
	s = step(b, "qkv", llama_linear, "llama_linear");
	bind(s, "a", "xn"), bind(s, "w", "w_qkv"), bind(s, "c", "qkv");
	s = step(b, "rope", llama_rope, "llama_rope");
	bind(s, "qkv", "qkv"), bind(s, "cos", "rope_cos"), bind(s, "sin", "rope_sin");
	bind(s, "p", "rope_p"), bind(s, "k", "k_cache"), bind(s, "v", "v_cache");
	if (m->prefill)
		bind(s, "q", "q");
	s = step(b, "attention", llama_attention, "llama_attention");
	bind(s, "k", "k_cache"), bind(s, "v", "v_cache"), bind(s, "o", "o");
	if (m->prefill)
		bind(s, "q", "q"), bind(s, "ws", "ws");
	else
		bind(s, "qkv", "qkv");
	s = step(b, "o_proj", llama_linear, "llama_linear");
	bind(s, "a", "o"), bind(s, "w", "w_o"), bind(s, "c", "y1");
	if (m->tp > 1) {
		s = step(b, "attn_reduce", coll, "coll");
		arg(s, "group", b->tp);
		bind(s, "x", "y1"), bind(s, "y", "y1");
	}
	s = step(b, "ffn_norm", llama_rmsnorm, "llama_rmsnorm");
	bind(s, "x", "x"), bind(s, "r", "y1"), bind(s, "w", "w_ffn_norm");
	bind(s, "sum", "h"), bind(s, "y", "hn");
	s = step(b, "gate_up", llama_linear, "llama_linear");
	bind(s, "a", "hn"), bind(s, "w", "w_gu"), bind(s, "c", "gu");
	s = step(b, "silu_mul", llama_silu_mul, "llama_silu_mul");
	bind(s, "gu", "gu"), bind(s, "y", "a");
	s = step(b, "down", llama_linear, "llama_linear");
	bind(s, "a", "a"), bind(s, "w", "w_down"), bind(s, "c", "y2");
	if (m->tp > 1) {
		s = step(b, "ffn_reduce", coll, "coll");
		arg(s, "group", b->tp);
		bind(s, "x", "y2"), bind(s, "y", "y2");
	}
	s = step(b, "residual", add, "add");
	bind(s, "a", "h"), bind(s, "b", "y2"), bind(s, "c", "out");
}

/* What the layer must read from HBM at least, per rank: its weight shards
 * and the KV cache it attends over (decode), in bytes. */
static uint64_t roofline_bytes(const struct llama *m)
{
	uint64_t H = m->hidden, D = m->head_dim;
	uint64_t w = H * m->nqkv + (uint64_t)m->hq * D * H + H * 2 * m->f + (uint64_t)m->f * H;
	uint64_t kv = m->prefill ? 0 : 2ull * m->batch * m->hk * m->seq * D;

	return 2 * (w + kv + 2 * H); /* f16; the norms' weights */
}

static int run_layer(struct tl *tl, const struct tl_args *args, bool prefill)
{
	struct build *b = calloc(1, sizeof(*b));
	struct tl_program prog;
	struct llama m;

	if (!b)
		tl_fail(tl, "out of memory");
	llama_args(tl, args, prefill, &m);
	layer(b, &m, tl_num_programs(tl));
	prog = (struct tl_program){ b->t, b->nt, b->s, b->ns };
	tl_program_run(tl, &prog);
	if (tl_rank(tl) == 0 && tl_program_id(tl) == 0) {
		tl_stat_max(tl, "model_layers", m.layers);
		tl_stat_max(tl, "roofline_bytes", roofline_bytes(&m));
	}
	free(b);
	return 0;
}

int llama_decode_step(struct tl *tl, const struct tl_args *args)
{
	return run_layer(tl, args, false);
}

int llama_prefill_step(struct tl *tl, const struct tl_args *args)
{
	return run_layer(tl, args, true);
}
