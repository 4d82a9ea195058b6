/* attn_decode.c — GQA flash decode and prefill on one rank:
 * gqa_decode_opt2, gqa_decode_opt3 (flat-composite design), gqa_prefill, and
 * gqa_decode_prefetch (the load proposal's D4 double buffer). Program p
 * takes KV heads p, p+P, ...; for each, the rows of the group matrix
 * [G*seq_q, d] are cut into query blocks of qblock rows (the last one may
 * be shorter) that sweep the head's KV tiles (the last one may be
 * narrower).
 *
 * Args: heads_q heads_kv head_dim seq_q seq_kv tile causal qblock;
 * gqa_decode_opt2/opt3 and gqa_prefill also depth group scopes vstream;
 * gqa_prefill and gqa_decode_prefetch also opt=2|3; gqa_decode_prefetch
 * also prefetch=0|1. Any other is never read (the run fails). */
#include "attn.h"

/* The keys of head h on a single rank. */
static struct attn_kv head_kv(const struct attn *a, uint32_t h)
{
	struct attn_kv kv = {
		.k_hbm = attn_kv_addr(a, a->k_addr, h, 0),
		.v_hbm = attn_kv_addr(a, a->v_addr, h, 0),
		.kpos0 = 0, .len = a->skv,
	};
	return kv;
}

static void decode_head(struct tl *tl, const struct attn *a, uint32_t h)
{
	struct attn_block b;
	struct attn_kv kv = head_kv(a, h);

	for (uint32_t r0 = 0; r0 < a->g * a->sq; r0 += a->qblock) {
		if (a->scopes)
			tl_scratch_scope_begin(tl);
		attn_block_begin(tl, a, &b, h, r0, attn_block_rows(a, r0));
		attn_sweep(tl, a, &b, &kv);
		attn_block_finish(tl, a, &b);
		if (a->scopes)
			tl_scratch_scope_end(tl);
	}
}

void attn_heads(struct tl *tl, const struct attn *a)
{
	for (uint32_t h = a->pe; h < a->hkv; h += a->pes)
		decode_head(tl, a, h);
}

static void single_rank_init(struct tl *tl, const struct tl_args *args,
			     bool decode, unsigned knobs, struct attn *a)
{
	if (tl_num_ranks(tl) != 1)
		tl_fail(tl, "runs on one rank (--ranks 1); for several use ring_attention");
	attn_init(tl, args, decode, a);
	attn_knobs(tl, args, knobs, a);
	attn_inputs(tl, a);
	attn_mask_prepare(tl, a);
}

static void save_heads(struct tl *tl, const struct attn *a)
{
	for (uint32_t h = a->pe; h < a->hkv; h += a->pes)
		attn_save_o(tl, a, h, 0, a->g * a->sq);
}

/* Decode and prefill share the loop; they differ in defaults only. The
 * decode kernels fix the fold by name, so they never read opt. */
static int attn_single_rank(struct tl *tl, const struct tl_args *args,
			    bool decode, enum attn_opt opt)
{
	struct attn a;

	single_rank_init(tl, args, decode,
			 ATTN_KNOB_SWEEP | (decode ? 0u : ATTN_KNOB_OPT), &a);
	if (decode)
		a.opt = opt;
	attn_heads(tl, &a);
	save_heads(tl, &a);
	return 0;
}

int gqa_decode_opt2(struct tl *tl, const struct tl_args *args)
{
	return attn_single_rank(tl, args, true, ATTN_OPT2);
}

int gqa_decode_opt3(struct tl *tl, const struct tl_args *args)
{
	return attn_single_rank(tl, args, true, ATTN_OPT3);
}

/* gqa_prefill: query blocks (outer scope: q block and its running state)
 * x KV tiles (inner scope per tile), causal by default; opt=2|3 picks the
 * fold. */
int gqa_prefill(struct tl *tl, const struct tl_args *args)
{
	return attn_single_rank(tl, args, false, ATTN_OPT2);
}

/* ------------------------------------------------------------ prefetch */

/* Two K and two V buffers [tile, d] in the persistent arena. */
struct prefetch_bufs {
	tl_tensor k[2], v[2];
};

/* Tile j's K and V into buffer j % 2 (tl_load_async_into waits for the
 * commands of tile j - 2 still reading it, if any). */
static void prefetch_tile(struct tl *tl, const struct attn *a,
			  const struct attn_kv *kv,
			  const struct prefetch_bufs *pb, uint32_t j)
{
	uint64_t off = (uint64_t)j * a->tile * a->d * 2;

	tl_load_async_into(tl, pb->k[j % 2], kv->k_hbm + off);
	tl_load_async_into(tl, pb->v[j % 2], kv->v_hbm + off);
}

/* The D4 sweep: a scratch scope per tile; tile j+1 is loaded into the
 * other persistent buffer pair while tile j is computed. prefetch=0: the
 * blocking sweep (each load waited for at once, inside the tile's scope).
 * A narrower last tile is loaded on its own (blocking). */
static void sweep_prefetch(struct tl *tl, const struct attn *a,
			   const struct attn_block *b, const struct attn_kv *kv,
			   const struct prefetch_bufs *pb, bool prefetch)
{
	uint32_t n = attn_visible_tiles(a, b, kv);

	if (prefetch && n > 0 && attn_tile_rows(a, kv->len, 0) == a->tile)
		prefetch_tile(tl, a, kv, pb, 0);
	for (uint32_t j = 0; j < n; j++)
		TL_SCRATCH_SCOPE(tl) {
			uint32_t w = attn_tile_rows(a, kv->len, j);
			uint64_t off = (uint64_t)j * a->tile * a->d * 2;
			tl_tensor k, v;

			if (prefetch && j + 1 < n &&
			    attn_tile_rows(a, kv->len, j + 1) == a->tile)
				prefetch_tile(tl, a, kv, pb, j + 1);
			if (prefetch && w == a->tile) {
				k = pb->k[j % 2];
				v = pb->v[j % 2];
			} else {
				k = tl_wait(tl, tl_load_async(tl, kv->k_hbm + off, w, a->d, TL_F16));
				v = tl_wait(tl, tl_load_async(tl, kv->v_hbm + off, w, a->d, TL_F16));
			}
			attn_fold(tl, a, b, attn_scores(tl, a, b, k, TL_NONE), v,
				  kv->kpos0 + off / ((uint64_t)a->d * 2), w, a->opt);
		}
	tl_stat_add(tl, "tiles", n, "count", "KV tiles folded into the output");
}

int gqa_decode_prefetch(struct tl *tl, const struct tl_args *args)
{
	bool prefetch = tl_arg_u32(args, "prefetch", 1, 0, 1) != 0;
	struct prefetch_bufs pb;
	struct attn a;

	/* its own sweep: opt only (no group, depth, vstream or scopes) */
	single_rank_init(tl, args, true, ATTN_KNOB_OPT, &a);
	for (int i = 0; i < 2; i++) {
		pb.k[i] = tl_empty(tl, a.tile, a.d, TL_F16); /* loaded into whole */
		pb.v[i] = tl_empty(tl, a.tile, a.d, TL_F16);
	}
	for (uint32_t h = a.pe; h < a.hkv; h += a.pes) {
		struct attn_kv kv = head_kv(&a, h);

		for (uint32_t r0 = 0; r0 < a.g * a.sq; r0 += a.qblock)
			TL_SCRATCH_SCOPE(tl) {
				struct attn_block b;

				attn_block_begin(tl, &a, &b, h, r0, attn_block_rows(&a, r0));
				sweep_prefetch(tl, &a, &b, &kv, &pb, prefetch);
				attn_block_finish(tl, &a, &b);
			}
	}
	save_heads(tl, &a);
	return 0;
}
