/* attn_decode.c — GQA flash decode on one rank: gqa_decode_opt2 and
 * gqa_decode_opt3 (flat-composite design). Program p takes KV heads p, p+P, ...; for
 * each, the G query heads sharing it form one query block [G*seq_q, d]
 * that sweeps the head's KV tiles (attn_sweep: Q·Kᵀ issued `depth` tiles
 * ahead, per-tile work in a scratch scope, running (m, l, O) persistent).
 *
 * Args: heads_q heads_kv head_dim seq_q seq_kv tile causal depth scopes
 * qblock. */
#include "attn.h"

static void decode_head(struct tl *tl, const struct attn *a, uint32_t h)
{
	struct attn_block b;
	uint32_t rows = a->g * a->sq;

	for (uint32_t r0 = 0; r0 < rows; r0 += a->qblock) {
		if (a->scopes)
			tl_scratch_scope_begin(tl);
		attn_block_begin(tl, a, &b, h, r0, a->qblock);
		attn_sweep(tl, a, &b, attn_kv_addr(a, a->k_addr, h, 0),
			   attn_kv_addr(a, a->v_addr, h, 0), 0, a->skv / a->tile);
		attn_block_finish(tl, a, &b);
		if (a->scopes)
			tl_scratch_scope_end(tl);
	}
}

/* Decode and prefill share the loop; they differ in defaults only. */
static int attn_single_rank(struct tl *tl, const struct tl_args *args,
			    bool decode, enum attn_opt opt)
{
	struct attn a;

	if (tl_num_ranks(tl) != 1)
		tl_fail(tl, "runs on one rank (--ranks 1); for several use ring_attention");
	attn_init(tl, args, decode, &a);
	if (decode)
		a.opt = opt;
	attn_inputs(tl, &a);
	attn_mask_prepare(tl, &a);
	for (uint32_t h = a.pe; h < a.hkv; h += a.pes)
		decode_head(tl, &a, h);
	for (uint32_t h = a.pe; h < a.hkv; h += a.pes)
		attn_save_o(tl, &a, h, 0, a.g * a.sq);
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
