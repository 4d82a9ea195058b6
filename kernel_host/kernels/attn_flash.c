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
	/* b->q is scaled by 1/sqrt(d) already (attn_block_take_q): a Q·Kᵀ is
	 * a GEMM alone, with no vector instruction per tile behind it */
	(void)a;
	return tl_composite(tl, &(struct tl_composite_desc){
		.op = "gemm", .a = b->q, .b = tl_trans(tl, k), .out = out }).t;
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
 * P·V with `a` bound to the recipe's P, added into O. The add is the GEMM's
 * own accumulation into O (TL_ACCUMULATE), as a matrix engine accumulates
 * into its output buffer: no vector pass after the GEMM, so the next
 * fold's softmax is not queued behind this fold's P·V on PE_MATH. */
static void fold_opt2(struct tl *tl, const struct attn_block *b, tl_tensor s,
		      tl_tensor v)
{
	tl_composite(tl, &(struct tl_composite_desc){
		.prologue = { { "softmax_merge",
				{ { "s", s }, { "m", b->m }, { "l", b->l }, { "O", b->o } } } },
		.op = "gemm", .b = v, .out = b->o,
		.epilogue = { { .op = "add", .other = b->o, .scope = TL_ACCUMULATE } } });
}

/* The fold waits on the host for its tile's scores. Issued while their
 * Q·Kᵀ still runs, it would be dispatched at once and the scheduler would
 * hold it behind *every* earlier command (strict FIFO: it reads what a
 * running command writes), the loads issued ahead included, with
 * everything behind it waiting too; waiting here blocks only the kernel,
 * as settle_state does for the running state. */
void attn_fold(struct tl *tl, const struct attn *a,
	       const struct attn_block *b, tl_tensor s, tl_tensor v,
	       uint64_t kpos, uint32_t width, enum attn_opt opt)
{
	tl_wait(tl, (tl_future){ s });
	if (a->cols.slot && kpos + width - 1 > b->pos_lo)
		s = mask_scores(tl, a, b, s, kpos, width);
	if (opt == ATTN_OPT2)
		fold_opt2(tl, b, s, v);
	else
		fold_opt3(tl, b, s, v);
}

/* The tile at position j of the sweep: in order, or with a->rot tiles
 * the narrow last one first (sweep_order). */
static uint32_t tile_of(const struct attn *a, uint32_t j)
{
	return a->rot ? (j + a->rot - 1) % a->rot : j;
}

/* Keys of the tile at sweep position j. */
static uint32_t pos_rows(const struct attn *a, const struct attn_kv *kv, uint32_t j)
{
	return attn_tile_rows(a, kv->len, tile_of(a, j));
}

static uint64_t tile_addr(const struct attn *a, const struct attn_kv *kv,
			  bool value, uint32_t j)
{
	const uint64_t *page = value ? kv->v_page : kv->k_page;

	j = tile_of(a, j);

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
	tl_tensor k = tl_ref(tl, tile_addr(a, kv, false, j), pos_rows(a, kv, j), a->d, TL_F16);

	return attn_scores(tl, a, b, k, TL_NONE);
}

/* Tile j's V: a lazy load into TCM (a standalone DMA the scheduler admits
 * at once), or, vstream=1, a tl_ref the fold's composite streams. */
static tl_tensor issue_v(struct tl *tl, const struct attn *a,
			 const struct attn_kv *kv, uint32_t j)
{
	uint32_t w = pos_rows(a, kv, j);

	if (a->vstream)
		return tl_ref(tl, tile_addr(a, kv, true, j), w, a->d, TL_F16);
	return tl_load(tl, tile_addr(a, kv, true, j), w, a->d, TL_F16);
}

/* The running state tile j folds into: state j % splits (state 0 is the
 * block's m, l, o). With two or more, consecutive folds share nothing:
 * one's P·V runs on PE_GEMM while the next one's softmax runs on PE_MATH,
 * as split-K flash decoding overlaps them; the states are merged at the
 * sweep's end (merge_splits). */
static struct attn_block split_state(const struct attn *a, const struct attn_block *b,
				     uint32_t j)
{
	struct attn_block st = *b;
	uint32_t i = a->splits > 1 ? j % a->splits : 0;

	st.m = b->sm[i];
	st.l = b->sl[i];
	st.o = b->so[i];
	return st;
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
	return t >= j1 && t < n && t - j1 < x->n && pos_rows(a, kv, t) == a->tile;
}

/* Issues tiles *next .. last (counted as run: the tile is `off`, the tiles
 * skipped, further): in this scope, then the next group's first ones. */
static void issue_ahead(struct tl *tl, const struct attn *a,
			const struct attn_block *b, const struct attn_kv *kv,
			const struct attn_cross *x, uint32_t j0, uint32_t j1,
			uint32_t n, uint32_t last, uint32_t *next, tl_tensor *s,
			tl_tensor *v, uint32_t off)
{
	for (; *next <= last && *next + off < j1; (*next)++)
		issue_tile(tl, a, b, kv, *next + off, &s[*next - j0], &v[*next - j0]);
	for (; *next <= last && crosses(a, kv, x, j1, n, *next + off); (*next)++)
		issue_cross(tl, a, b, kv, x, *next + off - j1, *next + off);
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
			uint32_t n, uint32_t skipped)
{
	tl_tensor s[ATTN_MAX_GROUP], v[ATTN_MAX_GROUP];
	uint32_t next = j0; /* first tile not issued yet */

	for (; j0 > 0 && next < j1 && crosses(a, kv, x, j0, n, next); next++) {
		s[next - j0] = x->s[next - j0];
		v[next - j0] = a->vstream ? issue_v(tl, a, kv, next) : x->v[next - j0];
	}
	issue_ahead(tl, a, b, kv, x, j0, j1, n, j0 + a->depth - 1, &next, s, v, 0);
	TL_FOR(tl, j, j0, j1) { /* alike tiles; vj counts tiles run (ADR 0061) */
		uint32_t off = tl_loop_skipped(tl), vj = j - off;
		struct attn_block st = split_state(a, b, vj - skipped);
		settle_state(tl, &st);
		attn_fold(tl, a, &st, s[vj - j0], v[vj - j0],
			  kv->kpos0 + (uint64_t)tile_of(a, j) * a->tile, pos_rows(a, kv, j), a->opt);
		issue_ahead(tl, a, b, kv, x, j0, j1, n, vj + a->depth, &next, s, v, off);
	}
}

/* Merges the other running states into (m, l, o) (log-sum-exp, as the
 * ring merges partials); they are reset only if the block sweeps again
 * (reset_splits). */
static void merge_splits(struct tl *tl, struct attn_block *b, uint32_t used)
{
	for (uint32_t i = 1; i < used; i++)
		attn_merge(tl, b, b->sm[i], b->sl[i], b->so[i]);
	if (used > b->stale)
		b->stale = used;
}

/* The states an earlier sweep merged, back to (-inf, 0, 0). */
static void reset_splits(struct tl *tl, const struct attn *a, struct attn_block *b)
{
	for (uint32_t i = 1; i < b->stale; i++) {
		tl_copy_to(tl, b->sm[i], tl_full(tl, b->rows, 1, TL_F32, -ATTN_NEG));
		tl_copy_to(tl, b->sl[i], tl_zeros(tl, b->rows, 1, TL_F32));
		tl_copy_to(tl, b->so[i], tl_zeros(tl, b->rows, a->d, TL_F32));
	}
	b->stale = 0;
}

/* The running states a sweep of n tiles uses: `splits`, fewer when the
 * sweep is too short for each to hold ATTN_SPLIT_MIN_KEYS keys (the
 * merge would cost more than the overlap saves), never more than n. */
static uint32_t sweep_states(const struct attn *a, const struct attn_kv *kv, uint32_t n)
{
	uint64_t keys = (uint64_t)n * a->tile < kv->len ? (uint64_t)n * a->tile : kv->len;
	uint64_t fit = keys / ATTN_SPLIT_MIN_KEYS;
	uint32_t used = a->splits < n ? a->splits : n;

	if (fit < used)
		used = fit ? (uint32_t)fit : 1;
	return used;
}

/* A narrow last tile (a remainder of a few keys) costs nearly a full
 * tile's fixed work — a Q·Kᵀ, a softmax of a dozen vector instructions at
 * their minimum initiation interval, a P·V — and last, nothing hides it:
 * the sweep ends with it. Folded first, it runs while the first full
 * tile's K is still on the wire (the DMA bounds decode), so its cost
 * hides; the online softmax is order-free. Not when it needs the causal
 * mask (a row might see none of it first), nor when the sweep stops short
 * of the last tile. Returns the rotation (a->rot) for n visible tiles. */
static uint32_t sweep_order(const struct attn *a, const struct attn_block *b,
			    const struct attn_kv *kv, uint32_t n)
{
	uint32_t w;

	if (n < 2 || n != attn_tiles(a, kv->len))
		return 0;
	w = attn_tile_rows(a, kv->len, n - 1);
	if (w == a->tile)
		return 0;
	if (a->cols.slot && kv->kpos0 + (uint64_t)(n - 1) * a->tile + w - 1 > b->pos_lo)
		return 0;
	return n;
}

void attn_sweep(struct tl *tl, const struct attn *a0,
		struct attn_block *b, const struct attn_kv *kv)
{
	uint32_t n = attn_visible_tiles(a0, b, kv);
	struct attn_cross x = b->x;
	struct attn at = *a0, *a = &at;

	at.splits = sweep_states(a0, kv, n);
	at.rot = sweep_order(a0, b, kv, n);
	if (at.splits > 1)
		reset_splits(tl, a, b);
	if (!a->scopes || n <= a->group)
		x.n = 0; /* no group boundary */
	TL_FOR(tl, gi, 0, (n + a->group - 1) / a->group) { /* the last: in the drain */
		uint32_t j = gi * a->group, end = n - j < a->group ? n : j + a->group;

		scope_begin(tl, a);
		sweep_group(tl, a, b, kv, &x, j, end, n, tl_loop_skipped(tl) * a->group);
		scope_end(tl, a);
	}
	merge_splits(tl, b, a->splits);
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
