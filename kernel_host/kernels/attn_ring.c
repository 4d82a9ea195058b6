/* attn_ring.c — ring_attention over R ranks (--ranks R), each holding its
 * shard of K/V; program p of every rank takes KV heads p, p+P, ... and
 * talks to program p of its ring neighbours. Any R, seq_q and seq_kv.
 *
 * Layout (layout=contiguous|zigzag): contiguous gives rank r keys
 * [r*seq_kv, (r+1)*seq_kv) and, in pass=kv, the r-th of R query chunks;
 * zigzag cuts keys and queries into 2R chunks and gives rank r chunks r
 * and 2R-1-r of each, so every rank has early and late queries and causal
 * work balances. Inputs and outputs stay in logical order either way.
 *
 * pass=kv (prefill): at step s a rank folds the KV runs of rank r-s into
 * the running state of its query blocks, tile by tile, while forwarding
 * each tile to its right neighbour (which folds it at step s+1): the
 * transfer of a block overlaps the compute of the previous one.
 *
 * pass=q (decode): KV stays put. The query blocks go out from rank 0 and
 * every rank computes a partial (m, l, O) over its own shard; the partials
 * come back to rank 0, merged on the way with a log-sum-exp merge, and
 * rank 0 writes o. merge=tree (default) sends both ways round the ring:
 * ranks 1..R/2 are reached to the right and report to the left, the others
 * the other way, so the queries and the merge each take ceil((R-1)/2)
 * hops (the ring's minimum) instead of R-1; merge=chain is the serial
 * chain (queries right from rank 0, partials left from rank R-1). Both are
 * exact.
 *
 * Stats: "ipcq_wait_ps" (kernel time spent waiting for IPCQ receives) and
 * "ipcq_transfer_ps" (modelled transfer time of the messages received). */
#include <stdlib.h>

#include "attn.h"

struct ring {
	uint64_t wait_ps, transfer_ps;
};

static tl_tensor recv_timed(struct tl *tl, struct ring *rg, enum tl_dir dir,
			    uint32_t rows, uint32_t cols, enum tl_dtype dt)
{
	tl_future f = tl_recv_async(tl, dir, rows, cols, dt);
	uint64_t t0 = tl_now_ps(tl);
	tl_tensor t = tl_wait(tl, f);

	rg->wait_ps += tl_now_ps(tl) - t0;
	rg->transfer_ps += tl_ipcq_transfer_ps(tl, (uint64_t)rows * cols * tl_dtype_size(dt));
	return t;
}

/* Ring pass=kv's tiles: from the member on the left, to the one on the
 * right (tag 1: the only traffic of the pass). */
static tl_tensor kv_recv(struct tl *tl, const struct attn *a, struct ring *rg, uint32_t rows,
			 uint32_t cols)
{
	uint32_t from = (a->rank + a->ranks - 1) % a->ranks;
	tl_future f;
	uint64_t t0;
	tl_tensor t;

	if (!a->ring_stride)
		return recv_timed(tl, rg, TL_LEFT, rows, cols, TL_F16);
	f = tl_recv_from_async(tl, a->ring_base + from * a->ring_stride, 1, rows, cols, TL_F16);
	t0 = tl_now_ps(tl);
	t = tl_wait(tl, f);
	rg->wait_ps += tl_now_ps(tl) - t0;
	rg->transfer_ps += tl_ipcq_transfer_ps(tl, (uint64_t)rows * cols * 2);
	return t;
}

static void kv_send(struct tl *tl, const struct attn *a, tl_tensor t)
{
	uint32_t to = (a->rank + 1) % a->ranks;

	if (a->ring_stride)
		tl_send_to(tl, a->ring_base + to * a->ring_stride, 1, t);
	else
		tl_send(tl, TL_RIGHT, t);
}

static void ring_stats(struct tl *tl, const struct ring *rg)
{
	tl_stat_add(tl, "ipcq_wait_ps", rg->wait_ps, "ps", "time the ring steps waited on receives");
	tl_stat_add(tl, "ipcq_transfer_ps", rg->transfer_ps, "ps",
		    "modelled idle-link time of the ring messages received (latency + serialisation)");
}

static struct attn_block *blocks_new(struct tl *tl, uint32_t n)
{
	struct attn_block *b = calloc(n ? n : 1, sizeof(*b));

	if (!b)
		tl_fail(tl, "out of memory (%u query blocks)", n);
	return b;
}

/* ------------------------------------------------------------ pass-KV */

/* A query block of pass=kv: group row and rows. */
struct qspan {
	uint32_t row0, rows;
};

/* The query blocks of one KV head on rank `rank`: for each of the G query
 * heads, each run of queries the rank owns cut into qblock rows (the last
 * one shorter). Fills `out` when given; returns how many. */
static uint32_t kv_blocks(const struct attn *a, uint32_t rank,
			  struct qspan *out)
{
	struct attn_run r[ATTN_MAX_RUNS];
	uint32_t nr = attn_q_runs(a, rank, r), n = 0;

	for (uint32_t g = 0; g < a->g; g++)
		for (uint32_t i = 0; i < nr; i++)
			for (uint64_t q = 0; q < r[i].len; q += a->qblock, n++)
				if (out) {
					uint64_t left = r[i].len - q;

					out[n].row0 = (uint32_t)((uint64_t)g * a->sq + r[i].pos + q);
					out[n].rows = (uint32_t)(left < a->qblock ? left : a->qblock);
				}
	return n;
}

/* Folds one KV tile (pinned K, V) into every block that can see it. */
static void fold_tile_all(struct tl *tl, const struct attn *a,
			  struct attn_block *blk, uint32_t nb, tl_tensor k,
			  tl_tensor v, uint64_t kpos, uint32_t width)
{
	struct attn_kv one = { .kpos0 = kpos, .len = width };
	uint32_t done = 0;

	for (uint32_t i = 0; i < nb; i++) {
		if (attn_visible_tiles(a, &blk[i], &one) == 0)
			continue;
		tl_scratch_scope_begin(tl);
		attn_fold(tl, a, &blk[i], attn_scores(tl, a, &blk[i], k, TL_NONE),
			  v, kpos, width, a->opt);
		tl_scratch_scope_end(tl);
		done++;
	}
	tl_stat_add(tl, "tiles", done, "count", "KV tiles folded into the output");
}

/* Step s of a ring pass (after the kernel, with what it needs: this file's
 * call sites keep their lines, which name them in stats.csv). */
static void pass_kv_step(struct tl *tl, const struct attn *a, uint32_t h,
			 struct ring *rg, struct attn_block *blk, uint32_t nb,
			 uint32_t s);

/* Tile t of KV run `run` (its first row `local` on the source rank) at
 * step s: loaded (s = 0) or received, forwarded right unless this is the
 * last step, folded into every block that sees it. */
static void pass_kv_tile(struct tl *tl, const struct attn *a, uint32_t h, struct ring *rg,
			 struct attn_block *blk, uint32_t nb, uint32_t s,
			 const struct attn_run *run, uint64_t local, uint32_t t)
{
	uint32_t w = attn_tile_rows(a, run->len, t);
	uint64_t row = local + (uint64_t)t * a->tile;
	tl_tensor k, v;

	tl_scratch_scope_begin(tl);
	if (s == 0) {
		k = tl_load(tl, attn_kv_addr(a, a->k_addr, h, row), w, a->d, TL_F16);
		v = tl_load(tl, attn_kv_addr(a, a->v_addr, h, row), w, a->d, TL_F16);
	} else {
		k = kv_recv(tl, a, rg, w, a->d);
		v = kv_recv(tl, a, rg, w, a->d);
	}
	if (s + 1 < a->ranks) {
		kv_send(tl, a, k);
		kv_send(tl, a, v);
	}
	fold_tile_all(tl, a, blk, nb, k, v,
		      run->pos + (uint64_t)t * a->tile, w);
	tl_scratch_scope_end(tl);
}

/* One full ring pass of the KV blocks over query blocks [b0, b1) of
 * head h (possibly none: the rank still forwards the tiles), a step at a
 * time. */
static void pass_kv_window(struct tl *tl, const struct attn *a, uint32_t h,
			   struct ring *rg, const struct qspan *qs,
			   struct attn_block *blk, uint32_t b0, uint32_t b1)
{
	for (uint32_t b = b0; b < b1; b++)
		attn_block_begin(tl, a, &blk[b], h, qs[b].row0, qs[b].rows);
	for (uint32_t s = 0; s < a->ranks; s++)
		pass_kv_step(tl, a, h, rg, blk + b0, b1 - b0, s);
	for (uint32_t b = b0; b < b1; b++)
		attn_block_finish(tl, a, &blk[b]);
}

/* How many query blocks of a->qblock rows a pass=kv window holds at once:
 * up to 512 query rows, fewer when the TCM cannot hold them and the fold
 * of one more (attn_window_fits). Blocks of at most a tile of rows always
 * got 512 rows, and still do. */
static uint32_t window_blocks(struct tl *tl, const struct attn *a)
{
	uint64_t q = a->qblock, rows = q >= 512 ? q : 512 / q * q;

	while (rows > q && !attn_window_fits(a, q, rows, tl_scratch_size(tl)))
		rows -= q;
	return (uint32_t)(rows / q);
}

/* The running state of every query block of a rank may not fit the TCM
 * (Llama-3-70B prefill: G x chunk rows of f32 O), so the blocks go round
 * the ring in windows of `qwindow` blocks (window_blocks by default), each
 * window a full ring pass of the KV blocks (more IPCQ traffic, bounded
 * scratch). Every rank makes as many passes as the rank with the most
 * blocks. */
static void pass_kv_head(struct tl *tl, const struct attn *a, uint32_t h,
			 struct ring *rg)
{
	uint32_t nb = kv_blocks(a, a->rank, NULL), most = 0;
	uint32_t window = a->qwindow ? a->qwindow : window_blocks(tl, a);
	struct qspan *qs = calloc(nb ? nb : 1, sizeof(*qs));
	struct attn_block *blk = blocks_new(tl, nb);

	if (!qs)
		tl_fail(tl, "out of memory (%u query blocks)", nb);
	kv_blocks(a, a->rank, qs);
	for (uint32_t r = 0; r < a->ranks; r++) {
		uint32_t n = kv_blocks(a, r, NULL);

		most = n > most ? n : most;
	}
	for (uint32_t w = 0; w < (most + window - 1) / window; w++) {
		uint32_t b0 = w * window < nb ? w * window : nb;
		uint32_t b1 = nb - b0 < window ? nb : b0 + window;

		TL_SCRATCH_SCOPE(tl) {
			pass_kv_window(tl, a, h, rg, qs, blk, b0, b1);
		}
	}
	free(blk);
	free(qs);
}

void attn_ring_kv(struct tl *tl, const struct attn *a)
{
	struct ring rg = { 0, 0 };

	for (uint32_t h = a->pe; h < a->hkv; h += a->pes)
		TL_SCRATCH_SCOPE(tl) {
			pass_kv_head(tl, a, h, &rg);
		}
	ring_stats(tl, &rg);
}

static void pass_kv(struct tl *tl, const struct attn *a)
{
	struct attn_run r[ATTN_MAX_RUNS];
	uint32_t nr = attn_q_runs(a, a->rank, r);

	attn_ring_kv(tl, a);
	for (uint32_t h = a->pe; h < a->hkv; h += a->pes)
		for (uint32_t g = 0; g < a->g; g++)
			for (uint32_t i = 0; i < nr; i++)
				attn_save_o(tl, a, h, g * a->sq + (uint32_t)r[i].pos,
					    (uint32_t)r[i].len);
}

/* ------------------------------------------------------------ pass-Q */

/* Where a rank's queries come from and its partial goes, in pass=q: the
 * direction towards rank 0 (`up`), and whether it has a child further
 * away (`down`, the other direction). */
struct ring_tree {
	bool has_up, has_down;
	enum tl_dir up, down;
	uint32_t n_children;  /* rank 0: one per side */
};

static struct ring_tree tree_of(const struct attn *a)
{
	struct ring_tree t = { 0 };
	uint32_t R = a->ranks, r = a->rank, half = R / 2;

	if (a->merge_chain) { /* 0 -> 1 -> ... -> R-1 */
		t.has_up = r > 0;
		t.up = TL_LEFT;
		t.has_down = r + 1 < R;
		t.down = TL_RIGHT;
		return t;
	}
	if (r == 0)
		return t;
	t.has_up = true;
	if (r <= half) { /* reached going right */
		t.up = TL_LEFT;
		t.down = TL_RIGHT;
		t.has_down = r + 1 <= half;
	} else {          /* reached going left (wrapping) */
		t.up = TL_RIGHT;
		t.down = TL_LEFT;
		t.has_down = r - 1 > half;
	}
	return t;
}

/* Directions rank 0 talks to: right, and left when the ring has a left
 * half (tree), or right only (chain). */
static uint32_t root_dirs(const struct attn *a, enum tl_dir *dirs)
{
	uint32_t n = 0;

	if (a->ranks > 1)
		dirs[n++] = TL_RIGHT;
	if (!a->merge_chain && a->ranks > 2)
		dirs[n++] = TL_LEFT;
	return n;
}

/* Receives a partial (m, l, O) from `dir` and merges it into the block. */
static void merge_from(struct tl *tl, const struct attn *a,
		       struct attn_block *b, struct ring *rg, enum tl_dir dir)
{
	TL_SCRATCH_SCOPE(tl) {
		tl_tensor m2 = recv_timed(tl, rg, dir, b->rows, 1, TL_F32);
		tl_tensor l2 = recv_timed(tl, rg, dir, b->rows, 1, TL_F32);
		tl_tensor o2 = recv_timed(tl, rg, dir, b->rows, a->d, TL_F32);

		attn_merge(tl, b, m2, l2, o2);
	}
}

/* Children first (merged into this rank's partial), then up; rank 0
 * merges one partial per side and finishes. */
static void merge_up(struct tl *tl, const struct attn *a,
		     struct attn_block *b, struct ring *rg)
{
	struct ring_tree t = tree_of(a);
	enum tl_dir dirs[2];

	if (a->rank == 0) {
		for (uint32_t i = 0, n = root_dirs(a, dirs); i < n; i++)
			merge_from(tl, a, b, rg, dirs[i]);
		attn_block_finish(tl, a, b);
		return;
	}
	if (t.has_down)
		merge_from(tl, a, b, rg, t.down);
	tl_send(tl, t.up, b->m);
	tl_send(tl, t.up, b->l);
	tl_send(tl, t.up, b->o);
}

/* A query block's q: loaded on rank 0, received from up elsewhere, then
 * forwarded down at once so the next rank can start. */
static tl_tensor q_down(struct tl *tl, const struct attn *a, struct ring *rg,
			uint32_t h, uint32_t r0, uint32_t rows)
{
	struct ring_tree t = tree_of(a);
	enum tl_dir dirs[2];
	tl_tensor q;

	if (a->rank == 0) {
		q = tl_load(tl, attn_q_addr(a, h, r0), rows, a->d, TL_F16);
		for (uint32_t i = 0, n = root_dirs(a, dirs); i < n; i++)
			tl_send(tl, dirs[i], q);
		return q;
	}
	q = recv_timed(tl, rg, t.up, rows, a->d, TL_F16);
	if (t.has_down)
		tl_send(tl, t.down, q);
	return q;
}

static void pass_q(struct tl *tl, const struct attn *a, struct ring *rg)
{
	struct attn_run r[ATTN_MAX_RUNS];
	uint32_t nr = attn_kv_runs(a, a->rank, r), nb = 0, i = 0;
	struct attn_block *blk;

	for (uint32_t h = a->pe; h < a->hkv; h += a->pes)
		for (uint32_t r0 = 0; r0 < a->g * a->sq; r0 += a->qblock)
			nb++;
	blk = blocks_new(tl, nb);
	for (uint32_t h = a->pe; h < a->hkv; h += a->pes)
		for (uint32_t r0 = 0; r0 < a->g * a->sq; r0 += a->qblock, i++) {
			uint32_t rows = attn_block_rows(a, r0);

			attn_block_open(tl, a, &blk[i], h, r0, rows);
			attn_block_take_q(tl, a, &blk[i], q_down(tl, a, rg, h, r0, rows));
		}
	for (i = 0; i < nb; i++) {
		uint64_t local = 0;

		for (uint32_t k = 0; k < nr; local += r[k].len, k++)
			TL_SCRATCH_SCOPE(tl) {
				uint32_t h = blk[i].head;
				struct attn_kv kv = {
					.k_hbm = attn_kv_addr(a, a->k_addr, h, local),
					.v_hbm = attn_kv_addr(a, a->v_addr, h, local),
					.kpos0 = r[k].pos, .len = r[k].len,
				};

				attn_sweep(tl, a, &blk[i], &kv);
			}
	}
	for (i = 0; i < nb; i++)
		merge_up(tl, a, &blk[i], rg);
	free(blk);
	if (a->rank == 0)
		for (uint32_t h = a->pe; h < a->hkv; h += a->pes)
			attn_save_o(tl, a, h, 0, a->g * a->sq);
}

int ring_attention(struct tl *tl, const struct tl_args *args)
{
	struct attn a;
	struct ring rg = { 0, 0 };

	attn_init(tl, args, false, &a);
	/* pass=q sweeps with attn_sweep; pass=kv folds tile by tile as they
	 * arrive (a scope per tile) and windows its query blocks */
	attn_knobs(tl, args, ATTN_KNOB_OPT |
		   (a.pass_q ? ATTN_KNOB_SWEEP : ATTN_KNOB_QWINDOW), &a);
	if (a.ranks < 2)
		tl_fail(tl, "ring_attention needs --ranks 2 or more (gqa_prefill and gqa_decode_* run on one rank)");
	attn_inputs(tl, &a);
	attn_mask_prepare(tl, &a);
	if (a.pass_q) {
		pass_q(tl, &a, &rg);
		ring_stats(tl, &rg);
	} else {
		pass_kv(tl, &a);
	}
	return 0;
}

/* Whether every tile of `run` is alike for the blocks: each block sees all
 * of the run unmasked or none of it (not on a causal diagonal). */
static bool run_alike(const struct attn *a, const struct attn_block *blk, uint32_t nb,
		      const struct attn_run *run)
{
	if (!a->causal)
		return true;
	for (uint32_t i = 0; i < nb; i++)
		if (run->pos <= blk[i].pos_hi && run->pos + run->len - 1 > blk[i].pos_lo)
			return false;
	return true;
}

/* Step s of a ring pass: the KV runs of rank `src`, tile by tile. A run
 * whose tiles are alike is a TL_FOR (fast-forward may skip some) but for
 * a narrower last tile. */
static void pass_kv_step(struct tl *tl, const struct attn *a, uint32_t h,
			 struct ring *rg, struct attn_block *blk, uint32_t nb,
			 uint32_t s)
{
	uint32_t src = (a->rank + a->ranks - s) % a->ranks;
	struct attn_run r[ATTN_MAX_RUNS];
	uint32_t nr = attn_kv_runs(a, src, r);
	uint64_t local = 0;

	for (uint32_t i = 0; i < nr; local += r[i].len, i++) {
		uint32_t n = attn_tiles(a, r[i].len), t = 0;

		if (run_alike(a, blk, nb, &r[i])) {
			uint32_t full = attn_tile_rows(a, r[i].len, n - 1) == a->tile ? n : n - 1;
			uint32_t seen = 0;
			struct ring last = { 0, 0 }; /* the last tile's share of rg */

			/* key: whether its tiles are forwarded, loaded, received */
			TL_FOR_KEY(tl, j, 0, full, (s + 1 < a->ranks) | (uint64_t)(s == 0) << 1) {
				struct ring before;

				/* tiles skipped since (tl_loop_skipped): their waits
				 * are the last tile's */
				rg->wait_ps += (tl_loop_skipped(tl) - seen) * last.wait_ps;
				rg->transfer_ps += (tl_loop_skipped(tl) - seen) * last.transfer_ps;
				seen = tl_loop_skipped(tl);
				before = *rg;
				pass_kv_tile(tl, a, h, rg, blk, nb, s, &r[i], local, j);
				last.wait_ps = rg->wait_ps - before.wait_ps;
				last.transfer_ps = rg->transfer_ps - before.transfer_ps;
			}
			t = full;
		}
		for (; t < n; t++)
			pass_kv_tile(tl, a, h, rg, blk, nb, s, &r[i], local, t);
	}
}
