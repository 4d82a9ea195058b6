/* coll_tree.c — the latency-optimal collectives (TL_COLL_TREE): ⌈log2 R⌉
 * rounds of messages instead of R - 1 ring steps (docs/kernels.md gives
 * their formulas).
 *
 *   all-reduce      recursive doubling: in round k a member swaps its whole
 *                   partial sum with the member 2^k away and adds;
 *   reduce-scatter  recursive halving: in round k it keeps half of what it
 *                   holds, sends the other half to its partner and adds
 *                   what the partner sends of its own half;
 *   all-gather      Bruck's algorithm: in round k it sends the 2^k blocks
 *                   it holds to the member 2^k to its left and receives as
 *                   many from the one 2^k to its right (any R);
 *   broadcast       a binomial tree from the root, chunks pipelined down it.
 *
 * Recursive doubling and halving need a power of two: with R = P2 + rem,
 * the first 2·rem members fold in pairs first (the even one sends all its
 * data to the odd one, which adds) and the odd one hands the even one its
 * result at the end (Thakur, Rabenseifner and Gropp, "Optimization of
 * Collective Communication Operations in MPICH", IJHPCA 19(1), 2005).
 *
 * What a member holds between rounds lives in one TCM tensor (f32 partial
 * sums, or the data's dtype for all-gather), the concatenation of its
 * blocks; data larger than the collective's TCM budget is done in slices
 * (the t-th slice of every block), one after the other. */
#include "coll.h"

#include <string.h>

enum { TAG_FOLD = 16, TAG_ROUND = 17, TAG_UNFOLD = 18, TAG_BRUCK = 19, TAG_BCAST = 20 };

/* What a member holds: slice t of each of n blocks, end to end. */
struct space {
	uint32_t n;
	uint64_t v[COLL_MAX + 1]; /* block j's slice starts at v[j]; v[n] in all */
	uint64_t e[COLL_MAX];     /* ... and at element e[j] of the full buffer */
	tl_tensor acc;            /* [1, v[n]] */
};

/* Slice t (width w) of `n` blocks starting at element off[j], len[j] long. */
static void space_of(struct space *sp, uint32_t n, const uint64_t *off, const uint64_t *len,
		     uint64_t t, uint64_t w)
{
	memset(sp, 0, sizeof(*sp));
	sp->n = n;
	for (uint32_t j = 0; j < n; j++) {
		uint64_t from = t * w, l = len[j] > from ? len[j] - from : 0;

		sp->e[j] = off[j] + from;
		sp->v[j + 1] = sp->v[j] + (l < w ? l : w);
	}
}

/* Slices needed for blocks up to `longest` elements within `budget_elems`
 * held elements in all; sets the width. */
static uint64_t slices(uint64_t longest, uint32_t n, uint64_t budget_elems, uint64_t *w)
{
	uint64_t per = budget_elems / n;

	*w = per ? per : 1;
	if (*w >= longest)
		*w = longest ? longest : 1;
	return longest ? (longest + *w - 1) / *w : 0;
}

static uint64_t longest_block(const struct coll *c)
{
	uint64_t most = 0;

	for (uint32_t j = 0; j < c->R; j++)
		most = c->len[j] > most ? c->len[j] : most;
	return most;
}

/* Columns [a, b) of the held tensor, to read after whatever wrote them. */
static tl_tensor held(struct coll *c, const struct space *sp, uint64_t a, uint64_t b)
{
	return coll_shaped(c->tl, c->at,
			   tl_row_view(c->tl, c->at, sp->acc, a, (uint32_t)(b - a), 0), b - a);
}

/* The chunk of [x, b) starting at x: chunks are counted from a range's
 * start, so both ends of a message cut it alike. */
static uint64_t chunk_end(const struct coll *c, uint64_t x, uint64_t b)
{
	return b - x > c->chunk ? x + c->chunk : b;
}

/* Loads this member's input for [a, b) of the held space into it, as f32
 * when `f32` (reductions) or as the data's dtype. */
static void load_held(struct coll *c, const struct space *sp, uint64_t a, uint64_t b, bool f32)
{
	for (uint32_t j = 0; j < sp->n; j++) {
		uint64_t lo = sp->v[j] > a ? sp->v[j] : a, hi = sp->v[j + 1] < b ? sp->v[j + 1] : b;

		for (uint64_t x = lo, y; x < hi; x = y) {
			tl_tensor dst = held(c, sp, x, y = chunk_end(c, x, hi));
			uint64_t addr = c->src + (sp->e[j] + x - sp->v[j]) * c->esz;

			if (!f32 || c->dtype == TL_F32)
				tl_load_async_into_at(c->tl, c->at, dst, addr);
			else /* MATH copy rounds nothing: f16/bf16 widen exactly */
				TL_SCRATCH_SCOPE(c->tl) {
					tl_composite_at(c->tl, c->at,
							&(struct tl_composite_desc){
								.op = "copy",
								.a = coll_load(c, addr, y - x, c->dtype),
								.out = dst });
				}
		}
	}
}

/* Stores [a, b) of the held space to dst (by block: they need not be
 * next to each other there), converted to the data's dtype; `producer`
 * is what wrote it when the host must wait for it (a receive). */
static void store_held(struct coll *c, const struct space *sp, uint64_t a, uint64_t b,
		       uint64_t producer)
{
	for (uint32_t j = 0; j < sp->n; j++) {
		uint64_t lo = sp->v[j] > a ? sp->v[j] : a, hi = sp->v[j + 1] < b ? sp->v[j + 1] : b;

		for (uint64_t x = lo, y; x < hi; x = y) {
			tl_tensor v = tl_row_view(c->tl, c->at, sp->acc, x,
						  (uint32_t)((y = chunk_end(c, x, hi)) - x), producer);

			v = coll_shaped(c->tl, c->at, v, y - x);
			struct tl_rec *r = tl_rec_get(c->tl, c->at, v, "held data");

			/* rounded into a buffer of the output ring: the store never
			 * holds up the next chunk */
			coll_store_dst(c, sp->e[j] + x - sp->v[j],
				       r->dtype == c->dtype ? v
							    : tl_composite_at(c->tl, c->at,
									      &(struct tl_composite_desc){
										      .op = "copy", .a = v,
										      .out = coll_out_buf(c, y - x, c->dtype) })
								      .t);
		}
	}
}

/* Sends [a, b) of the held space to member m, chunk by chunk, once
 * everything writing it is done. */
static void send_held(struct coll *c, const struct space *sp, uint64_t a, uint64_t b,
		      uint32_t m, uint32_t tag)
{
	for (uint64_t x = a, y; x < b; x = y) {
		tl_tensor v = held(c, sp, x, y = chunk_end(c, x, b));
		struct tl_rec *r = tl_rec_get(c->tl, c->at, v, "held data");

		tl_wait_tcm_range(c->tl, c->at, r->addr, r->addr + tl_rec_bytes(r));
		coll_send(c, m, tag, TL_ROUTE_SHORTEST, v);
	}
}

/* Receives member m's f32 partial sums of [a, b) and adds them in. */
static void add_held(struct coll *c, const struct space *sp, uint64_t a, uint64_t b,
		     uint32_t m, uint32_t tag)
{
	for (uint64_t x = a, y; x < b; x = y)
		TL_SCRATCH_SCOPE(c->tl) {
			tl_tensor v = held(c, sp, x, y = chunk_end(c, x, b));

			coll_add(c, v, coll_recv(c, m, tag, y - x, TL_F32), v);
		}
}

/* Receives member m's [a, b) into the held space; stores it to dst. */
static void take_held(struct coll *c, const struct space *sp, uint64_t a, uint64_t b,
		      uint32_t m, uint32_t tag)
{
	for (uint64_t x = a, y; x < b; x = y) {
		tl_tensor v = held(c, sp, x, y = chunk_end(c, x, b));
		uint64_t cmd;

		tl_ipcq_recv_into(c->tl, c->at, c->rank_of[m], COLL_TAG + tag, v);
		cmd = tl_rec_get(c->tl, c->at, v, "received data")->producer;
		store_held(c, sp, x, y, cmd);
	}
}

/* ---------------------------------------------------------------- folds */

/* The power-of-two core of R members and how member `me` takes part. */
struct fold {
	uint32_t p2, rem;
	bool extra;  /* an even member of the first 2·rem: folds in, waits */
	bool host;   /* an odd one: takes its even neighbour's data */
	uint32_t v;  /* virtual index in the core (not for extras) */
};

static void fold_of(const struct coll *c, struct fold *f)
{
	f->p2 = 1;
	while (f->p2 * 2 <= c->R)
		f->p2 *= 2;
	f->rem = c->R - f->p2;
	f->extra = c->me < 2 * f->rem && c->me % 2 == 0;
	f->host = c->me < 2 * f->rem && c->me % 2 == 1;
	f->v = c->me < 2 * f->rem ? c->me / 2 : c->me - f->rem;
}

/* The member of virtual index v, and the first member whose block v holds. */
static uint32_t member_of(const struct fold *f, uint32_t v)
{
	return v < f->rem ? 2 * v + 1 : v + f->rem;
}

static uint32_t first_block(const struct fold *f, uint32_t v, uint32_t R)
{
	return v >= f->p2 ? R : v < f->rem ? 2 * v : v + f->rem;
}

/* ---------------------------------------------------------------- all-reduce */

void coll_tree_all_reduce(struct coll *c)
{
	uint64_t e0 = c->off[0], n = c->off[c->R - 1] + c->len[c->R - 1] - e0, w;
	uint64_t nt = slices(n, 1, c->budget / 4, &w);
	struct fold f;

	fold_of(c, &f);
	for (uint64_t t = 0; t < nt; t++)
		TL_SCRATCH_SCOPE(c->tl) {
			struct space sp;
			uint64_t V;

			space_of(&sp, 1, &e0, &n, t, w);
			V = sp.v[1];
			sp.acc = tl_scratch_tensor(c->tl, c->at, 1, (uint32_t)V, TL_F32);
			load_held(c, &sp, 0, V, true);
			if (f.extra) {
				send_held(c, &sp, 0, V, c->me + 1, TAG_FOLD);
				take_held(c, &sp, 0, V, c->me + 1, TAG_UNFOLD);
				continue;
			}
			if (f.host)
				add_held(c, &sp, 0, V, c->me - 1, TAG_FOLD);
			for (uint32_t d = 1; d < f.p2; d *= 2) {
				uint32_t partner = member_of(&f, f.v ^ d);

				send_held(c, &sp, 0, V, partner, TAG_ROUND);
				add_held(c, &sp, 0, V, partner, TAG_ROUND);
			}
			if (f.host) /* before the store: a send waits for what touches its bytes */
				send_held(c, &sp, 0, V, c->me - 1, TAG_UNFOLD);
			store_held(c, &sp, 0, V, 0);
		}
}

/* ---------------------------------------------------------------- reduce-scatter */

void coll_tree_reduce_scatter(struct coll *c)
{
	uint64_t w, nt = slices(longest_block(c), c->R, c->budget / 4, &w);
	struct fold f;

	fold_of(c, &f);
	for (uint64_t t = 0; t < nt; t++)
		TL_SCRATCH_SCOPE(c->tl) {
			struct space sp;
			uint32_t lo = 0, cnt = f.p2;

			space_of(&sp, c->R, c->off, c->len, t, w);
			if (!sp.v[c->R])
				continue;
			sp.acc = tl_scratch_tensor(c->tl, c->at, 1, (uint32_t)sp.v[c->R], TL_F32);
			load_held(c, &sp, 0, sp.v[c->R], true);
			if (f.extra) {
				send_held(c, &sp, 0, sp.v[c->R], c->me + 1, TAG_FOLD);
				take_held(c, &sp, sp.v[c->me], sp.v[c->me + 1], c->me + 1,
					  TAG_UNFOLD);
				continue;
			}
			if (f.host)
				add_held(c, &sp, 0, sp.v[c->R], c->me - 1, TAG_FOLD);
			while (cnt > 1) {
				uint32_t half = cnt / 2, mid = lo + half;
				bool low = f.v < mid;
				uint32_t keep0 = low ? lo : mid, send0 = low ? mid : lo;
				uint32_t partner = member_of(&f, low ? f.v + half : f.v - half);
				uint64_t ka = sp.v[first_block(&f, keep0, c->R)];
				uint64_t kb = sp.v[first_block(&f, keep0 + half, c->R)];
				uint64_t sa = sp.v[first_block(&f, send0, c->R)];
				uint64_t sb = sp.v[first_block(&f, send0 + half, c->R)];

				send_held(c, &sp, sa, sb, partner, TAG_ROUND);
				add_held(c, &sp, ka, kb, partner, TAG_ROUND);
				lo = keep0;
				cnt = half;
			}
			if (f.host) /* before the store: a send waits for what touches its bytes */
				send_held(c, &sp, sp.v[c->me - 1], sp.v[c->me], c->me - 1,
					  TAG_UNFOLD);
			store_held(c, &sp, sp.v[c->me], sp.v[c->me + 1], 0);
		}
}

/* ---------------------------------------------------------------- all-gather */

/* Blocks [from, from + cnt) mod R as at most two ranges of the held space. */
static uint32_t ring_ranges(const struct coll *c, const struct space *sp, uint32_t from,
			    uint32_t cnt, uint64_t a[2], uint64_t b[2])
{
	uint32_t end = from + cnt;

	if (end <= c->R) {
		a[0] = sp->v[from];
		b[0] = sp->v[end];
		return 1;
	}
	a[0] = sp->v[from];
	b[0] = sp->v[c->R];
	a[1] = 0;
	b[1] = sp->v[end - c->R];
	return 2;
}

void coll_tree_all_gather(struct coll *c)
{
	uint64_t w, nt = slices(longest_block(c), c->R, c->budget / c->esz, &w);

	for (uint64_t t = 0; t < nt; t++)
		TL_SCRATCH_SCOPE(c->tl) {
			struct space sp;

			space_of(&sp, c->R, c->off, c->len, t, w);
			if (!sp.v[c->R])
				continue;
			sp.acc = tl_scratch_tensor(c->tl, c->at, 1, (uint32_t)sp.v[c->R], c->dtype);
			load_held(c, &sp, sp.v[c->me], sp.v[c->me + 1], false);
			store_held(c, &sp, sp.v[c->me], sp.v[c->me + 1], 0);
			for (uint32_t d = 1; d < c->R; d *= 2) {
				uint32_t cnt = d < c->R - d ? d : c->R - d;
				uint64_t a[2], b[2];
				uint32_t k = ring_ranges(c, &sp, c->me, cnt, a, b);

				for (uint32_t i = 0; i < k; i++)
					send_held(c, &sp, a[i], b[i], coll_member(c, -(int64_t)d),
						  TAG_BRUCK);
				k = ring_ranges(c, &sp, coll_member(c, d), cnt, a, b);
				for (uint32_t i = 0; i < k; i++)
					take_held(c, &sp, a[i], b[i], coll_member(c, d), TAG_BRUCK);
			}
		}
}

/* ---------------------------------------------------------------- broadcast */

void coll_tree_broadcast(struct coll *c)
{
	uint32_t vr = (c->me + c->R - c->root) % c->R, low = 1;
	uint64_t n = c->len[c->root], e0 = c->off[c->root];
	bool copy = vr != 0 || c->src != c->dst;

	while (vr && !(vr & low))
		low <<= 1;
	if (!vr)
		while (low < c->R)
			low <<= 1;
	for (uint64_t q = 0, nq = coll_chunks(c, n); q < nq; q++)
		TL_SCRATCH_SCOPE(c->tl) {
			uint64_t o, k;
			tl_tensor x;

			coll_chunk(c, n, q, &o, &k);
			x = vr ? coll_recv(c, (vr - low + c->root) % c->R, TAG_BCAST, k, c->dtype)
			       : coll_load_src(c, e0 + o, k);
			for (uint32_t m = low / 2; m >= 1; m /= 2)
				if (vr + m < c->R)
					coll_send(c, (vr + m + c->root) % c->R, TAG_BCAST,
						  TL_ROUTE_SHORTEST, x);
			if (copy)
				coll_store_dst(c, e0 + o, x);
		}
}
