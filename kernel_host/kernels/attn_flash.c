/* attn_flash.c — the flash-attention tile loop shared by every attention
 * kernel: scores, the causal mask, the online-softmax fold (opt2 and opt3),
 * the software-pipelined sweep over HBM tiles and the log-sum-exp merge. */
#include "attn.h"


static void scope_begin(struct tl *tl, const struct attn *a)
{
	if (a->scopes)
		tl_scratch_scope_begin(tl);
}

static void scope_end(struct tl *tl, const struct attn *a)
{
	if (a->scopes)
		tl_scratch_scope_end(tl);
}

tl_tensor attn_scores(struct tl *tl, const struct attn *a,
		      const struct attn_block *b, tl_tensor k, tl_tensor out)
{
	return tl_composite(tl, &(struct tl_composite_desc){
		.op = "gemm", .a = b->q, .b = tl_trans(tl, k), .out = out,
		.epilogue = { { .op = "scale", .scale = a->scale } } }).t;
}

/* s + bias where bias = -NEG * max(c - rel(row) - delta, 0): the keys a
 * row may not see (c - rel > delta, delta = pos0 - kpos) get a score far
 * below any real one, so exp() makes them exactly 0. */
static tl_tensor mask_scores(struct tl *tl, const struct attn *a,
			     const struct attn_block *b, tl_tensor s,
			     uint64_t kpos)
{
	double delta = (double)b->pos0 - (double)kpos;
	tl_tensor over = tl_sub(tl, a->mask_d, tl_full(tl, 1, 1, TL_F32, delta));
	tl_tensor pos = tl_maximum(tl, over, tl_zeros(tl, 1, 1, TL_F32));

	return tl_add(tl, s, tl_scale(tl, pos, -ATTN_NEG));
}

/* opt3: the online-softmax update as separate commands, then P·V as a
 * composite streaming V, folded into O by its add epilogue. Each command
 * waits for its inputs when issued, so independent ones are issued before
 * the ones that need them, and the P·V composite (V's DMA) as early as its
 * inputs allow. */
static void fold_opt3(struct tl *tl, const struct attn_block *b, tl_tensor s,
		      tl_tensor v)
{
	tl_tensor m_new = tl_maximum(tl, b->m, tl_max(tl, s, -1));
	tl_tensor d_old = tl_sub(tl, b->m, m_new);
	tl_tensor d_s = tl_sub(tl, s, m_new);
	tl_tensor corr = tl_exp(tl, d_old);
	tl_tensor p = tl_exp(tl, d_s);
	tl_tensor o_scaled = tl_mul(tl, b->o, corr);
	tl_tensor l_scaled = tl_mul(tl, b->l, corr);

	tl_composite(tl, &(struct tl_composite_desc){
		.op = "gemm", .a = p, .b = v, .out = b->o,
		.epilogue = { { .op = "add", .other = o_scaled } } });
	tl_copy_to(tl, b->m, m_new);
	tl_copy_to(tl, b->l, tl_add(tl, l_scaled, tl_sum(tl, p, -1)));
}

/* opt2 (flat-composite design): one composite — softmax_merge prologue on (m, l, O),
 * P·V with `a` bound to the recipe's P, add epilogue into O. */
static void fold_opt2(struct tl *tl, const struct attn_block *b, tl_tensor s,
		      tl_tensor v)
{
	tl_composite(tl, &(struct tl_composite_desc){
		.prologue = { { "softmax_merge",
				{ { "s", s }, { "m", b->m }, { "l", b->l }, { "O", b->o } } } },
		.op = "gemm", .b = v, .out = b->o,
		.epilogue = { { .op = "add", .other = b->o } } });
}

void attn_fold(struct tl *tl, const struct attn *a,
	       const struct attn_block *b, tl_tensor s, tl_tensor v,
	       uint64_t kpos, enum attn_opt opt)
{
	if (a->causal && kpos + a->tile - 1 > b->pos0)
		s = mask_scores(tl, a, b, s, kpos);
	if (opt == ATTN_OPT2)
		fold_opt2(tl, b, s, v);
	else
		fold_opt3(tl, b, s, v);
}

/* Issues tile j's Q·Kᵀ; its scores land in fresh scratch. */
static tl_tensor issue_scores(struct tl *tl, const struct attn *a,
			      const struct attn_block *b, uint64_t k_hbm,
			      uint32_t j)
{
	tl_tensor k = tl_ref(tl, k_hbm + (uint64_t)j * a->tile * a->d * 2,
			     a->tile, a->d, TL_F16);

	return attn_scores(tl, a, b, k, TL_NONE);
}

/* Tiles [j0, j1) in one scratch scope. Q·Kᵀ runs `depth` tiles ahead of
 * the fold (within the group), so the next K tiles' DMA overlaps this
 * tile's softmax and P·V. The scores are allocated at the top of scratch
 * when issued: the host orders commands by the TCM span each touches, and
 * a fresh buffer above every earlier allocation overlaps no pending
 * command, so issuing ahead never waits for the fold in flight. */
static void sweep_group(struct tl *tl, const struct attn *a,
			const struct attn_block *b, uint64_t k_hbm,
			uint64_t v_hbm, uint64_t kpos0, uint32_t j0,
			uint32_t j1)
{
	tl_tensor s[ATTN_MAX_GROUP];
	uint32_t depth = a->depth, j;

	for (j = j0; j < j1 && j < j0 + depth; j++)
		s[j - j0] = issue_scores(tl, a, b, k_hbm, j);
	for (j = j0; j < j1; j++) {
		if (j + depth < j1)
			s[j + depth - j0] = issue_scores(tl, a, b, k_hbm, j + depth);
		tl_tensor v = tl_ref(tl, v_hbm + (uint64_t)j * a->tile * a->d * 2,
				     a->tile, a->d, TL_F16);
		attn_fold(tl, a, b, s[j - j0], v, kpos0 + (uint64_t)j * a->tile,
			  a->opt);
	}
}

void attn_sweep(struct tl *tl, const struct attn *a,
		const struct attn_block *b, uint64_t k_hbm, uint64_t v_hbm,
		uint64_t kpos0, uint32_t n)
{
	n = attn_visible_tiles(a, b, kpos0, n);
	for (uint32_t j = 0; j < n; j += a->group) {
		uint32_t end = n - j < a->group ? n : j + a->group;

		scope_begin(tl, a);
		sweep_group(tl, a, b, k_hbm, v_hbm, kpos0, j, end);
		scope_end(tl, a);
	}
	tl_stat_add(tl, "tiles", n);
}

void attn_merge(struct tl *tl, const struct attn_block *b, tl_tensor m2,
		tl_tensor l2, tl_tensor o2)
{
	tl_tensor m_new = tl_maximum(tl, b->m, m2);
	tl_tensor c1 = tl_exp(tl, tl_sub(tl, b->m, m_new));
	tl_tensor c2 = tl_exp(tl, tl_sub(tl, m2, m_new));
	tl_tensor l_new = tl_add(tl, tl_mul(tl, b->l, c1), tl_mul(tl, l2, c2));
	tl_tensor o_new = tl_add(tl, tl_mul(tl, b->o, c1), tl_mul(tl, o2, c2));

	tl_copy_to(tl, b->m, m_new);
	tl_copy_to(tl, b->l, l_new);
	tl_copy_to(tl, b->o, o_new);
}
