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

/* s + bias where bias = -NEG * max(c - (rel(row) + p0 - kpos), 0): the
 * keys a row may not see (kpos + c > p0 + rel) get a score far below any
 * real one, so exp() makes them exactly 0. c is the key's column in the
 * tile (a narrower last tile takes a prefix of the column indices). */
static tl_tensor mask_scores(struct tl *tl, const struct attn *a,
			     const struct attn_block *b, tl_tensor s,
			     uint64_t kpos, uint32_t width)
{
	tl_tensor cols = width == a->tile ? a->cols
					  : tl_load(tl, a->cols_addr, 1, width, TL_F32);
	double delta = (double)a->p0 - (double)kpos;
	tl_tensor lim = tl_add(tl, b->rel, tl_full(tl, 1, 1, TL_F32, delta));
	tl_tensor over = tl_sub(tl, cols, lim);
	tl_tensor pos = tl_maximum(tl, over, tl_zeros(tl, 1, 1, TL_F32));

	return tl_add(tl, s, tl_scale(tl, pos, -ATTN_NEG));
}

/* opt3: the online-softmax update as separate commands, then P·V as a
 * composite, folded into O by its add epilogue. Each command waits for its
 * inputs when issued, so independent ones are issued before the ones that
 * need them. m and l are updated before P·V: engines take stages in
 * program order, and MATH commands behind the P·V composite would wait on
 * the MATH engine for its add epilogue, i.e. for the whole GEMM. */
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

	tl_copy_to(tl, b->m, m_new);
	tl_copy_to(tl, b->l, tl_add(tl, l_scaled, tl_sum(tl, p, -1)));
	tl_composite(tl, &(struct tl_composite_desc){
		.op = "gemm", .a = p, .b = v, .out = b->o,
		.epilogue = { { .op = "add", .other = o_scaled } } });
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
	       uint64_t kpos, uint32_t width, enum attn_opt opt)
{
	if (a->cols.slot && kpos + width - 1 > b->pos_lo)
		s = mask_scores(tl, a, b, s, kpos, width);
	if (opt == ATTN_OPT2)
		fold_opt2(tl, b, s, v);
	else
		fold_opt3(tl, b, s, v);
}

static uint64_t tile_addr(const struct attn *a, const struct attn_kv *kv,
			  bool value, uint32_t j)
{
	const uint64_t *page = value ? kv->v_page : kv->k_page;

	if (page)
		return page[j];
	return (value ? kv->v_hbm : kv->k_hbm) + (uint64_t)j * a->tile * a->d * 2;
}

/* Issues tile j's Q·Kᵀ on its true width; its scores land in fresh
 * scratch. */
static tl_tensor issue_scores(struct tl *tl, const struct attn *a,
			      const struct attn_block *b,
			      const struct attn_kv *kv, uint32_t j)
{
	tl_tensor k = tl_ref(tl, tile_addr(a, kv, false, j),
			     attn_tile_rows(a, kv->len, j), a->d, TL_F16);

	return attn_scores(tl, a, b, k, TL_NONE);
}

/* Tile j's V: a lazy load into TCM (a standalone DMA the scheduler admits
 * at once), or, vstream=1, a tl_ref the fold's composite streams. */
static tl_tensor issue_v(struct tl *tl, const struct attn *a,
			 const struct attn_kv *kv, uint32_t j)
{
	uint32_t w = attn_tile_rows(a, kv->len, j);

	if (a->vstream)
		return tl_ref(tl, tile_addr(a, kv, true, j), w, a->d, TL_F16);
	return tl_load(tl, tile_addr(a, kv, true, j), w, a->d, TL_F16);
}

/* Waits on the host for the previous fold's running state (m, l, O).
 * The next fold shares them, so the scheduler would hold it until *every*
 * earlier command has completed (strict FIFO, flat-composite design D6.3)
 * — the loads issued ahead included — and everything behind it would wait
 * too: the read channel would drain once per tile (setup + HBM latency
 * exposed per tile). Waiting here blocks only the kernel, at the point a
 * real kernel would wait, and the next loads are admitted at once. */
static void settle_state(struct tl *tl, const struct attn_block *b)
{
	tl_wait(tl, (tl_future){ b->m });
	tl_wait(tl, (tl_future){ b->l });
	tl_wait(tl, (tl_future){ b->o });
}

/* Issues tile j: its Q·Kᵀ into fresh scratch, V's load (or its ref). */
static void issue_tile(struct tl *tl, const struct attn *a,
		       const struct attn_block *b, const struct attn_kv *kv,
		       uint32_t j, tl_tensor *s, tl_tensor *v)
{
	*s = issue_scores(tl, a, b, kv, j);
	*v = issue_v(tl, a, kv, j);
}

/* Issues full-width tile j of the next group into cross buffer i. */
static void issue_cross(struct tl *tl, const struct attn *a,
			const struct attn_block *b, const struct attn_kv *kv,
			const struct attn_cross *x, uint32_t i, uint32_t j)
{
	tl_tensor k = tl_ref(tl, tile_addr(a, kv, false, j), a->tile, a->d, TL_F16);

	attn_scores(tl, a, b, k, x->s[i]);
	if (!a->vstream)
		tl_load_async_into(tl, x->v[i], tile_addr(a, kv, true, j));
}

/* The tile of the next group issued ahead into cross buffer i, if any:
 * the next group starts at j1 and its first x->n full tiles cross. */
static bool crosses(const struct attn *a, const struct attn_kv *kv,
		    const struct attn_cross *x, uint32_t j1, uint32_t n, uint32_t t)
{
	return t >= j1 && t < n && t - j1 < x->n && attn_tile_rows(a, kv->len, t) == a->tile;
}

/* Issues tiles *next .. last: in this group's scope, then the next
 * group's first tiles into the cross buffers. */
static void issue_ahead(struct tl *tl, const struct attn *a,
			const struct attn_block *b, const struct attn_kv *kv,
			const struct attn_cross *x, uint32_t j0, uint32_t j1,
			uint32_t n, uint32_t last, uint32_t *next, tl_tensor *s,
			tl_tensor *v)
{
	for (; *next <= last && *next < j1; (*next)++)
		issue_tile(tl, a, b, kv, *next, &s[*next - j0], &v[*next - j0]);
	for (; *next <= last && crosses(a, kv, x, j1, n, *next); (*next)++)
		issue_cross(tl, a, b, kv, x, *next - j1, *next);
}

/* Tiles [j0, j1) of n in one scratch scope. Q·Kᵀ and V's load run `depth`
 * tiles ahead of the fold, so the next tiles' DMA overlaps this tile's
 * softmax and P·V; near the group's end they run on into the next group's
 * first tiles (cross buffers, attn.h), one tile further after the last
 * fold, so the read channel still has a tile to stream while the scope's
 * end waits for the last fold and the next group's first loads are issued.
 * Each fold is issued before the loads that run ahead of it: engines take
 * their stages in program order, so a fold issued behind a Q·Kᵀ would wait
 * on the MATH engine for that Q·Kᵀ's scale, i.e. for its K tile.
 * The scores are allocated at the top of scratch when issued: the host
 * orders commands by the TCM span each touches, and a fresh buffer above
 * every earlier allocation overlaps no pending command, so issuing ahead
 * never waits for the fold in flight. Each fold first waits on the host for
 * the previous one (settle_state). */
static void sweep_group(struct tl *tl, const struct attn *a,
			const struct attn_block *b, const struct attn_kv *kv,
			const struct attn_cross *x, uint32_t j0, uint32_t j1,
			uint32_t n)
{
	tl_tensor s[ATTN_MAX_GROUP], v[ATTN_MAX_GROUP];
	uint32_t next = j0; /* first tile not issued yet */

	for (; j0 > 0 && next < j1 && crosses(a, kv, x, j0, n, next); next++) {
		s[next - j0] = x->s[next - j0];
		v[next - j0] = a->vstream ? issue_v(tl, a, kv, next) : x->v[next - j0];
	}
	issue_ahead(tl, a, b, kv, x, j0, j1, n, j0 + a->depth - 1, &next, s, v);
	for (uint32_t j = j0; j < j1; j++) {
		settle_state(tl, b);
		attn_fold(tl, a, b, s[j - j0], v[j - j0], kv->kpos0 + (uint64_t)j * a->tile,
			  attn_tile_rows(a, kv->len, j), a->opt);
		issue_ahead(tl, a, b, kv, x, j0, j1, n, j + a->depth, &next, s, v);
	}
}

void attn_sweep(struct tl *tl, const struct attn *a,
		const struct attn_block *b, const struct attn_kv *kv)
{
	uint32_t n = attn_visible_tiles(a, b, kv);
	struct attn_cross x = b->x;

	if (!a->scopes || n <= a->group)
		x.n = 0; /* no group boundary */
	for (uint32_t j = 0; j < n; j += a->group) {
		uint32_t end = n - j < a->group ? n : j + a->group;

		scope_begin(tl, a);
		sweep_group(tl, a, b, kv, &x, j, end, n);
		scope_end(tl, a);
	}
	tl_stat_add(tl, "tiles", n, "count", "KV tiles folded into the output");
}

/* exp(x - m) as one composite (sub head, exp epilogue). */
static tl_tensor exp_diff(struct tl *tl, tl_tensor x, tl_tensor m)
{
	return tl_composite(tl, &(struct tl_composite_desc){
		.op = "sub", .a = x, .b = m,
		.epilogue = { { .op = "exp" } } }).t;
}

/* x = x * c1 + y * c2, written into x (fma head: x*c1 + (y*c2)). */
static void scale_add_into(struct tl *tl, tl_tensor x, tl_tensor c1,
			   tl_tensor y, tl_tensor c2)
{
	tl_tensor yc = tl_mul(tl, y, c2);

	tl_composite(tl, &(struct tl_composite_desc){
		.op = "fma", .a = x, .b = c1, .c = yc, .out = x });
}

/* Eight commands: on the critical path of every ring hop of pass=q, so
 * fused where a composite can (exp after sub) and written in place. */
void attn_merge(struct tl *tl, const struct attn_block *b, tl_tensor m2,
		tl_tensor l2, tl_tensor o2)
{
	tl_tensor m_new = tl_maximum(tl, b->m, m2);
	tl_tensor c2 = exp_diff(tl, m2, m_new);
	tl_tensor c1 = exp_diff(tl, b->m, m_new);

	scale_add_into(tl, b->l, c1, l2, c2);
	scale_add_into(tl, b->o, c1, o2, c2);
	tl_copy_to(tl, b->m, m_new);
}
