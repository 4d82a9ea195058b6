/* attn_ring.c — ring_attention over R ranks (--ranks R), each holding its
 * shard of K/V; program p of every rank takes KV heads p, p+P, ... and
 * talks to program p of its ring neighbours.
 *
 * pass=kv (prefill): the queries of each head are split into R chunks by
 * position, rank r owning chunk r. At step s a rank folds the KV block of
 * rank r-s into the running state of its chunk, tile by tile, while
 * forwarding each tile to its right neighbour (which folds it at step s+1):
 * the transfer of a block overlaps the compute of the previous one.
 *
 * pass=q (decode): KV stays put. The query blocks travel right along the
 * ring from rank 0; every rank computes a partial (m, l, O) over its own
 * shard; the partials travel left from rank R-1 to rank 0, each rank
 * merging its own with a log-sum-exp merge, and rank 0 writes o. Both are
 * exact.
 *
 * Stats: "ipcq_wait_ps" (kernel time spent waiting for IPCQ receives) and
 * "ipcq_transfer_ps" (modelled transfer time of the messages received), so
 * the hidden fraction of communication is 1 - wait / transfer. */
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

static void ring_stats(struct tl *tl, const struct ring *rg)
{
	tl_stat_add(tl, "ipcq_wait_ps", rg->wait_ps);
	tl_stat_add(tl, "ipcq_transfer_ps", rg->transfer_ps);
}

static struct attn_block *blocks_new(struct tl *tl, uint32_t n)
{
	struct attn_block *b = calloc(n ? n : 1, sizeof(*b));

	if (!b)
		tl_fail(tl, "out of memory (%u query blocks)", n);
	return b;
}

/* ------------------------------------------------------------ pass-KV */

/* Folds one KV tile (pinned K, V) into every block that can see it. */
static void fold_tile_all(struct tl *tl, const struct attn *a,
			  struct attn_block *blk, uint32_t nb, tl_tensor k,
			  tl_tensor v, uint64_t kpos)
{
	uint32_t done = 0;

	for (uint32_t i = 0; i < nb; i++) {
		if (attn_visible_tiles(a, &blk[i], kpos, 1) == 0)
			continue;
		tl_scratch_scope_begin(tl);
		attn_fold(tl, a, &blk[i], attn_scores(tl, a, &blk[i], k, TL_NONE),
			  v, kpos, a->opt);
		tl_scratch_scope_end(tl);
		done++;
	}
	tl_stat_add(tl, "tiles", done);
}

/* One full ring pass of the KV blocks over query blocks [b0, b1) of head h. */
static void pass_kv_window(struct tl *tl, const struct attn *a, uint32_t h, struct ring *rg,
			   struct attn_block *blk, uint32_t b0, uint32_t b1)
{
	uint32_t chunk = a->sq / a->ranks, per = chunk / a->qblock;
	uint32_t ntiles = a->skv / a->tile;
	uint64_t tile_bytes = (uint64_t)a->tile * a->d * 2;

	for (uint32_t b = b0; b < b1; b++)
		attn_block_begin(tl, a, &blk[b], h,
				 (b / per) * a->sq + a->rank * chunk + (b % per) * a->qblock,
				 a->qblock);
	for (uint32_t s = 0; s < a->ranks; s++) {
		uint32_t src = (a->rank + a->ranks - s) % a->ranks;

		for (uint32_t t = 0; t < ntiles; t++) {
			tl_tensor k, v;

			tl_scratch_scope_begin(tl);
			if (s == 0) {
				k = tl_load(tl, attn_kv_addr(a, a->k_addr, h, 0) + t * tile_bytes,
					    a->tile, a->d, TL_F16);
				v = tl_load(tl, attn_kv_addr(a, a->v_addr, h, 0) + t * tile_bytes,
					    a->tile, a->d, TL_F16);
			} else {
				k = recv_timed(tl, rg, TL_LEFT, a->tile, a->d, TL_F16);
				v = recv_timed(tl, rg, TL_LEFT, a->tile, a->d, TL_F16);
			}
			if (s + 1 < a->ranks) {
				tl_send(tl, TL_RIGHT, k);
				tl_send(tl, TL_RIGHT, v);
			}
			fold_tile_all(tl, a, blk + b0, b1 - b0, k, v,
				      (uint64_t)src * a->skv + (uint64_t)t * a->tile);
			tl_scratch_scope_end(tl);
		}
	}
	for (uint32_t b = b0; b < b1; b++)
		attn_block_finish(tl, a, &blk[b]);
}

/* The running state of every query block of a rank's chunk may not fit the
 * TCM (Llama-3-70B prefill: G x chunk rows of f32 O), so the chunk's blocks
 * go round the ring in windows of `qwindow` blocks, each window a full ring
 * pass of the KV blocks (more IPCQ traffic, bounded scratch). */
static void pass_kv_head(struct tl *tl, const struct attn *a, uint32_t h,
			 struct ring *rg)
{
	uint32_t nb = a->g * (a->sq / a->ranks / a->qblock);
	uint32_t window = a->qwindow ? a->qwindow : a->qblock >= 512 ? 1 : 512 / a->qblock;
	struct attn_block *blk = blocks_new(tl, nb);

	for (uint32_t b0 = 0; b0 < nb; b0 += window)
		TL_SCRATCH_SCOPE(tl) {
			pass_kv_window(tl, a, h, rg, blk, b0, nb - b0 < window ? nb : b0 + window);
		}
	free(blk);
}

static void pass_kv(struct tl *tl, const struct attn *a, struct ring *rg)
{
	uint32_t chunk = a->sq / a->ranks;

	for (uint32_t h = a->pe; h < a->hkv; h += a->pes) {
		tl_scratch_scope_begin(tl);
		pass_kv_head(tl, a, h, rg);
		tl_scratch_scope_end(tl);
	}
	for (uint32_t h = a->pe; h < a->hkv; h += a->pes)
		for (uint32_t g = 0; g < a->g; g++)
			attn_save_o(tl, a, h, g * a->sq + a->rank * chunk, chunk);
}

/* ------------------------------------------------------------ pass-Q */

/* Rank R-1 starts the chain; each rank merges what comes from its right
 * into its own partial and passes it left; rank 0 finishes. */
static void merge_chain(struct tl *tl, const struct attn *a,
			struct attn_block *b, struct ring *rg)
{
	if (a->rank + 1 < a->ranks)
		TL_SCRATCH_SCOPE(tl) {
			tl_tensor m2 = recv_timed(tl, rg, TL_RIGHT, b->rows, 1, TL_F32);
			tl_tensor l2 = recv_timed(tl, rg, TL_RIGHT, b->rows, 1, TL_F32);
			tl_tensor o2 = recv_timed(tl, rg, TL_RIGHT, b->rows, a->d, TL_F32);

			attn_merge(tl, b, m2, l2, o2);
		}
	if (a->rank > 0) {
		tl_send(tl, TL_LEFT, b->m);
		tl_send(tl, TL_LEFT, b->l);
		tl_send(tl, TL_LEFT, b->o);
	} else {
		attn_block_finish(tl, a, b);
	}
}

static void pass_q(struct tl *tl, const struct attn *a, struct ring *rg)
{
	uint32_t per = a->g * a->sq / a->qblock, nh = 0, nb, i = 0;
	struct attn_block *blk;

	for (uint32_t h = a->pe; h < a->hkv; h += a->pes)
		nh++;
	nb = nh * per;
	blk = blocks_new(tl, nb);
	/* the queries first: forwarded at once so the next rank can start */
	for (uint32_t h = a->pe; h < a->hkv; h += a->pes)
		for (uint32_t r0 = 0; r0 < a->g * a->sq; r0 += a->qblock, i++) {
			tl_tensor q = a->rank == 0
				? tl_load(tl, attn_q_addr(a, h, r0), a->qblock, a->d, TL_F16)
				: recv_timed(tl, rg, TL_LEFT, a->qblock, a->d, TL_F16);

			if (a->rank + 1 < a->ranks)
				tl_send(tl, TL_RIGHT, q);
			attn_block_with_q(tl, a, &blk[i], h, r0, a->qblock, q);
		}
	for (i = 0; i < nb; i++)
		TL_SCRATCH_SCOPE(tl) {
			uint32_t h = blk[i].head;

			attn_sweep(tl, a, &blk[i], attn_kv_addr(a, a->k_addr, h, 0),
				   attn_kv_addr(a, a->v_addr, h, 0),
				   (uint64_t)a->rank * a->skv, a->skv / a->tile);
		}
	for (i = 0; i < nb; i++)
		merge_chain(tl, a, &blk[i], rg);
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
	if (a.ranks < 2)
		tl_fail(tl, "ring_attention needs --ranks 2 or more (gqa_prefill and gqa_decode_* run on one rank)");
	attn_inputs(tl, &a);
	attn_mask_prepare(tl, &a);
	if (a.pass_q)
		pass_q(tl, &a, &rg);
	else
		pass_kv(tl, &a, &rg);
	ring_stats(tl, &rg);
	return 0;
}
