/* coll.c — collectives over a group of ranks: the public calls, the group
 * and its blocks, the helpers every algorithm uses, the ring algorithms
 * (one way or both ways round the group) and TL_COLL_AUTO's size rule.
 * The latency-optimal algorithms are in coll_tree.c, the collectives over
 * the PEs of a rank in coll_pes.c; docs/kernels.md ("Collectives") gives
 * each algorithm and its α–β formula. ADR 0041.
 *
 * Ring algorithms as chains. A block's partial sum (reduce-scatter) or a
 * block's copy (all-gather, broadcast) travels along a chain of members:
 * rightwards (member i -> i + 1) over L members and leftwards over R - 1 - L.
 * One way round (TL_COLL_RING) every chain is rightwards, L = R - 1; both
 * ways round (TL_COLL_BIDIR) L = ⌊R/2⌋ rightwards and ⌈R/2⌉ - 1 leftwards
 * (two members: half the block each way, both links to the peer; on a
 * switch, whose one port both ways would share, it is the ring). A
 * step is one hop of every chain at once; a member sends at most one
 * message per chain direction, part and chunk in a step. Blocks longer
 * than a chunk are cut into chunks that follow one another down the same
 * chain, so the next chunk's hop overlaps this one's add.
 *
 * Over 600 lines on purpose: the ring algorithms share the chain and step
 * machinery described above with the public calls that choose them; the
 * other algorithms already have their own files. */
#include "coll.h"

#include <stdlib.h>
#include <string.h>

#include "npu/pe.h"
#include "tl_io.h"

#define COLL_CHUNK_BYTES 32768u /* a default message: 8K f32 */

/* ------------------------------------------------------------ blocks */

void tl_coll_block(uint64_t n, uint32_t members, uint32_t index, uint64_t *off, uint64_t *len)
{
	uint64_t base = members ? n / members : n, extra = members ? n % members : 0;

	*len = base + (index < extra);
	*off = index * base + (index < extra ? index : extra);
}

/* The p-th of `parts` parts of [off, off + len). */
static void part_of(uint64_t off, uint64_t len, uint32_t parts, uint32_t p, uint64_t *o,
		    uint64_t *l)
{
	uint64_t po, pl;

	tl_coll_block(len, parts, p, &po, &pl);
	*o = off + po;
	*l = pl;
}

uint64_t coll_chunks(const struct coll *c, uint64_t len)
{
	return (len + c->chunk - 1) / c->chunk;
}

void coll_chunk(const struct coll *c, uint64_t len, uint64_t q, uint64_t *o, uint64_t *n)
{
	*o = q * c->chunk;
	*n = len - *o < c->chunk ? len - *o : c->chunk;
}

uint32_t coll_member(const struct coll *c, int64_t steps)
{
	int64_t m = ((int64_t)c->me + steps) % (int64_t)c->R;

	return (uint32_t)(m < 0 ? m + c->R : m);
}

/* ------------------------------------------------------------ data movement
 * While a schedule is planned (c->planning) these do nothing but list the
 * input chunks coll_own will be asked for. */

void coll_shape(const struct rt_config *cfg, uint64_t n, uint32_t *rows, uint32_t *cols)
{
	uint64_t most = (uint64_t)cfg->dma_queues * cfg->dma_rows_per_queue, q;

	for (q = most < n ? most : n; q > 1 && n % q; q--)
		;
	*rows = (uint32_t)(q ? q : 1);
	*cols = (uint32_t)(n / *rows);
}

tl_tensor coll_shaped(struct tl *tl, struct tl_site at, tl_tensor v, uint64_t n)
{
	struct tl_rec *r = tl_rec_get(tl, at, v, "collective chunk");

	coll_shape(tl->s.cfg, n, &r->rows, &r->cols);
	return v;
}

tl_tensor coll_load(struct coll *c, uint64_t addr, uint64_t n, enum tl_dtype dtype)
{
	uint32_t rows, cols;

	if (c->planning)
		return TL_NONE;
	coll_shape(c->tl->s.cfg, n, &rows, &cols);
	return tl_load_at(c->tl, c->at, addr, rows, cols, dtype);
}

void coll_store(struct coll *c, uint64_t addr, tl_tensor t)
{
	if (!c->planning)
		tl_store_queued(c->tl, c->at, addr, t);
}

tl_tensor coll_load_src(struct coll *c, uint64_t e, uint64_t n)
{
	return coll_load(c, c->src + e * c->esz, n, c->dtype);
}

void coll_store_dst(struct coll *c, uint64_t e, tl_tensor t)
{
	coll_store(c, c->dst + e * c->esz, t);
}

/* ------------------------------------------------------------ slots
 * Every chunk a ring algorithm handles (an "iteration": one hop of one
 * chain, one chunk) gets the next slot of a ring of COLL_SLOTS, two halves
 * of a chunk of f32 each: its input from HBM (loaded COLL_AHEAD
 * iterations ahead) and what it receives, adds and sends. An iteration
 * touches its own slot only, so the next ones' loads never wait for it
 * (the host orders a command after every pending one whose TCM span
 * overlaps). */

/* The `half` (0 input, 1 message) of slot `sl` as 1 x n of `dtype`. */
static tl_tensor slot_view(struct coll *c, uint32_t sl, int half, uint64_t n,
			   enum tl_dtype dtype, uint64_t producer)
{
	tl_tensor v = tl_row_view(c->tl, c->at, c->slot[sl], half * c->chunk, 1, producer);
	struct tl_rec *r = tl_rec_get(c->tl, c->at, v, "collective slot");

	r->dtype = dtype; /* a half holds a chunk of f32: any dtype fits */
	return coll_shaped(c->tl, c->at, v, n);
}

/* Starts loading iteration i's input into its slot's input half (the
 * load waits for what still uses that slot: iteration i - COLL_SLOTS). */
static void issue_own(struct coll *c, uint64_t i)
{
	uint32_t sl = (uint32_t)(i % COLL_SLOTS);
	tl_tensor v;

	if (!c->plan[i].own)
		return;
	v = slot_view(c, sl, 0, c->plan[i].n, c->dtype, 0);
	tl_load_async_into_at(c->tl, c->at, v, c->src + c->plan[i].e * c->esz);
	c->slot_cmd[sl] = tl_rec_get(c->tl, c->at, v, "input chunk")->producer;
}

/* Begins the next iteration (planning: records it). `own`: it reads
 * elements [e, e + n) of src, returned in *in. The slot's index, or
 * COLL_SLOTS while planning. */
static uint32_t iter_begin(struct coll *c, bool own, uint64_t e, uint64_t n, tl_tensor *in)
{
	uint64_t i = c->used;
	uint32_t sl = (uint32_t)(i % COLL_SLOTS);

	if (c->planning) {
		if (c->n_plan == c->cap_plan) {
			uint64_t cap = c->cap_plan ? 2 * c->cap_plan : 256;
			void *p = realloc(c->plan, cap * sizeof(*c->plan));

			if (!p)
				tl_abort(c->tl, c->at, RT_ENOMEM, "collective: out of memory");
			c->plan = p;
			c->cap_plan = cap;
		}
		c->plan[c->n_plan++] = (struct coll_iter){ e, n, own };
		if (in)
			*in = TL_NONE;
		return COLL_SLOTS;
	}
	if (i >= c->n_plan || c->plan[i].own != own || (own && (c->plan[i].e != e ||
								 c->plan[i].n != n)))
		tl_abort(c->tl, c->at, RT_EKERNEL,
			 "collective: iteration %llu is not the planned one (a bug)",
			 (unsigned long long)i);
	/* this one's input, if nothing loaded it ahead (the first ones), and
	 * the next COLL_AHEAD iterations' while this one waits for its data */
	while (c->issued < c->n_plan && c->issued <= i + COLL_AHEAD)
		issue_own(c, c->issued++);
	c->used++;
	if (in)
		*in = own ? slot_view(c, sl, 0, n, c->dtype, c->slot_cmd[sl]) : TL_NONE;
	return sl;
}

/* Ends an iteration (nothing to do yet: the inputs ahead are issued when
 * the next one begins, while it waits for its message). */
static void iter_end(struct coll *c)
{
	(void)c;
}

tl_tensor coll_out_buf(struct coll *c, uint64_t n, enum tl_dtype dtype)
{
	tl_tensor b;
	struct tl_rec *r;

	if (c->planning)
		return TL_NONE;
	b = tl_row_view(c->tl, c->at, c->out_buf[c->out_next], 0, 1, 0);
	c->out_next = (c->out_next + 1) % COLL_OUT_BUFS;
	r = tl_rec_get(c->tl, c->at, b, "output buffer");
	r->dtype = dtype; /* the buffer holds a chunk of f32 */
	return coll_shaped(c->tl, c->at, b, n);
}

void coll_send(struct coll *c, uint32_t m, uint32_t tag, enum tl_route route, tl_tensor t)
{
	if (!c->planning)
		tl_ipcq_send_to(c->tl, c->at, c->rank_of[m], COLL_TAG + tag, route, t);
}

tl_tensor coll_recv(struct coll *c, uint32_t m, uint32_t tag, uint64_t n, enum tl_dtype dtype)
{
	uint32_t rows, cols;

	if (c->planning)
		return TL_NONE;
	coll_shape(c->tl->s.cfg, n, &rows, &cols);
	return tl_recv_from_async_at(c->tl, c->at, c->rank_of[m], COLL_TAG + tag, rows, cols,
				     dtype).t;
}

/* A receive of n elements of `dtype` into `dst`. */
static tl_tensor recv_into(struct coll *c, uint32_t m, uint32_t tag, tl_tensor dst)
{
	if (c->planning)
		return TL_NONE;
	return tl_ipcq_recv_into(c->tl, c->at, c->rank_of[m], COLL_TAG + tag, dst).t;
}

tl_tensor coll_add(struct coll *c, tl_tensor a, tl_tensor b, tl_tensor out)
{
	if (c->planning)
		return TL_NONE;
	if (!out.slot)
		return tl_binary_at(c->tl, c->at, "add", a, b);
	return tl_composite_at(c->tl, c->at,
			       &(struct tl_composite_desc){ .op = "add", .a = a, .b = b, .out = out })
		.t;
}

tl_tensor coll_as_dtype(struct coll *c, tl_tensor t)
{
	struct tl_rec *r;

	if (c->planning)
		return t;
	r = tl_rec_get(c->tl, c->at, t, "collective data");
	return r->dtype == c->dtype ? t : tl_astype_at(c->tl, c->at, t, c->dtype);
}

/* `t` as `dtype` into `out` (MATH copy rounds to nearest even). */
static tl_tensor convert(struct coll *c, tl_tensor t, tl_tensor out)
{
	if (c->planning)
		return TL_NONE;
	return tl_composite_at(c->tl, c->at, &(struct tl_composite_desc){ .op = "copy", .a = t,
									    .out = out })
		.t;
}

/* Copies elements [e, e + n) of src to dst, chunk by chunk (one member). */
static void copy_range(struct coll *c, uint64_t from, uint64_t to, uint64_t n)
{
	for (uint64_t q = 0, nq = coll_chunks(c, n); q < nq; q++)
		TL_SCRATCH_SCOPE(c->tl) {
			uint64_t o, k;

			coll_chunk(c, n, q, &o, &k);
			coll_store(c, to + o * c->esz, coll_load(c, from + o * c->esz, k, c->dtype));
		}
}

/* ------------------------------------------------------------ ring chains */

/* A block's parts and their chain lengths rightwards (L) and leftwards. */
struct chains {
	uint32_t parts;
	uint32_t left[2];  /* L: members the chain crosses going right */
	uint32_t right[2]; /* R - 1 - L: going left */
	uint32_t steps;    /* the longest chain */
};

static void chains_of(const struct coll *c, struct chains *ch)
{
	uint32_t R = c->R;
	/* both ways round a ring; a switch has one port per rank: no gain */
	bool both = c->algo == TL_COLL_BIDIR && c->ring;

	memset(ch, 0, sizeof(*ch));
	ch->parts = both && R == 2 ? 2 : 1; /* two links to the one peer: a half each */
	ch->left[0] = !both ? R - 1 : R == 2 ? 1 : R / 2; /* even R: rightwards one longer */
	ch->right[0] = R - 1 - ch->left[0];
	if (ch->parts == 2) {
		ch->left[1] = 0;
		ch->right[1] = 1;
	}
	for (uint32_t k = 0; k < ch->parts; k++) {
		if (ch->left[k] > ch->steps)
			ch->steps = ch->left[k];
		if (ch->right[k] > ch->steps)
			ch->steps = ch->right[k];
	}
}

/* Tags: one per chain direction and part (and phase: 0 reduce, 1 spread). */
static uint32_t chain_tag(uint32_t phase, int dir, uint32_t part)
{
	return phase * 4 + part * 2 + (uint32_t)dir;
}

/* Elements of part k, chunk q of block j: [*e, *e + *n) in the full buffer. */
static bool piece(const struct coll *c, const struct chains *ch, uint32_t j, uint32_t k,
		  uint64_t q, uint64_t *e, uint64_t *n)
{
	uint64_t po, pl, o;

	part_of(c->off[j], c->len[j], ch->parts, k, &po, &pl);
	if (q >= coll_chunks(c, pl))
		return false;
	coll_chunk(c, pl, q, &o, n);
	*e = po + o;
	return true;
}

/* Most chunks of any part of any block. */
static uint64_t max_chunks(const struct coll *c, const struct chains *ch)
{
	uint64_t most = 0;

	for (uint32_t j = 0; j < c->R; j++)
		for (uint32_t k = 0; k < ch->parts; k++) {
			uint64_t po, pl, n;

			part_of(c->off[j], c->len[j], ch->parts, k, &po, &pl);
			n = coll_chunks(c, pl);
			most = n > most ? n : most;
		}
	return most;
}


/* One hop of the reduce chains of part k going `dir` (+1 right, -1 left)
 * at step s (s < L), chunk q: what I send is my input of the chain's block
 * plus, after its first hop, the partial the previous member sent me. */
static void reduce_hop(struct coll *c, const struct chains *ch, int dir, uint32_t k,
		       uint32_t s, uint64_t q)
{
	uint32_t len = dir > 0 ? ch->left[k] : ch->right[k];
	uint32_t j = coll_member(c, dir * ((int64_t)len - s));
	uint32_t tag = chain_tag(0, dir > 0, k), sl;
	uint64_t e, n;
	tl_tensor own, x;

	if (s >= len || !piece(c, ch, j, k, q, &e, &n))
		return;
	sl = iter_begin(c, true, e, n, &own);
	x = own;
	if (s > 0 && !c->planning) {
		tl_tensor b = slot_view(c, sl, 1, n, s == 1 ? c->dtype : TL_F32, 0);

		recv_into(c, coll_member(c, -dir), tag, b);
		x = coll_add(c, b, own, slot_view(c, sl, 1, n, TL_F32, 0));
	}
	coll_send(c, coll_member(c, dir), tag, dir > 0 ? TL_ROUTE_RIGHT : TL_ROUTE_LEFT, x);
	iter_end(c);
}

/* My block's part k, chunk q at the end of its chains: my input plus what
 * came from either side, as the dtype (TL_NONE: no such chunk; *mine:
 * there is one). The iteration ends with the caller's sends. */
static tl_tensor reduce_final(struct coll *c, const struct chains *ch, uint32_t k, uint64_t q,
			      uint64_t *e, bool *mine)
{
	uint64_t n;
	uint32_t sl;
	tl_tensor x, sum;

	*mine = piece(c, ch, c->me, k, q, e, &n);
	if (!*mine)
		return TL_NONE;
	sl = iter_begin(c, true, *e, n, &x);
	if (c->planning) /* stands for the result: the spreading hops use it */
		return (tl_tensor){ UINT32_MAX, 0, 0 };
	sum = slot_view(c, sl, 1, n, TL_F32, 0);
	for (int side = 0, half = 1; side < 2; side++) { /* from the left, then the right */
		uint32_t len = side ? ch->right[k] : ch->left[k];
		tl_tensor b;

		if (!len)
			continue;
		/* the first partial lands in the message half, a second one in
		 * the input half, free once the first add has read it */
		b = slot_view(c, sl, half, n, len == 1 ? c->dtype : TL_F32, 0);
		recv_into(c, coll_member(c, side ? 1 : -1), chain_tag(0, !side, k), b);
		x = coll_add(c, b, x, sum);
		half = 0;
	}
	if (c->dtype != TL_F32) /* rounded into the input half, free by now */
		x = convert(c, x, slot_view(c, sl, 0, n, c->dtype, 0));
	return x;
}

/* The owner's step of the spreading chains (all-gather, broadcast,
 * all-reduce's second half) of its block's part k, chunk q: its block
 * (`own`, or its input) goes both ways at once; its own copy in dst
 * (all-gather, broadcast into another buffer) rides with it. */
static void spread_own(struct coll *c, const struct chains *ch, uint32_t k, uint64_t q,
		       tl_tensor own)
{
	uint64_t e, n;
	tl_tensor x = own;

	if (!piece(c, ch, c->me, k, q, &e, &n))
		return;
	if (!own.slot)
		iter_begin(c, true, e, n, &x);
	if (ch->left[k])
		coll_send(c, coll_member(c, 1), chain_tag(1, 1, k), TL_ROUTE_RIGHT, x);
	if (ch->right[k])
		coll_send(c, coll_member(c, -1), chain_tag(1, 0, k), TL_ROUTE_LEFT, x);
	if (!own.slot && c->src != c->dst)
		coll_store_dst(c, e, x);
	if (!own.slot)
		iter_end(c);
}

/* A later hop of the spreading chains going `dir` at step s > 0: store
 * what came from upstream and pass it on while the chain lasts. */
static void spread_hop(struct coll *c, const struct chains *ch, int dir, uint32_t k,
		       uint32_t s, uint64_t q)
{
	uint32_t len = dir > 0 ? ch->left[k] : ch->right[k];
	uint32_t owner = coll_member(c, -dir * (int64_t)s);
	uint32_t tag = chain_tag(1, dir > 0, k), sl;
	uint64_t e, n;
	tl_tensor x = TL_NONE;

	if (s > len || !piece(c, ch, owner, k, q, &e, &n))
		return;
	sl = iter_begin(c, false, 0, 0, NULL);
	if (!c->planning)
		x = recv_into(c, coll_member(c, -dir), tag, slot_view(c, sl, 1, n, c->dtype, 0));
	if (s < len)
		coll_send(c, coll_member(c, dir), tag, dir > 0 ? TL_ROUTE_RIGHT : TL_ROUTE_LEFT, x);
	coll_store_dst(c, e, x);
	iter_end(c);
}

/* The reduce half: every chain's hops, step by step, chunk by chunk;
 * all-reduce passes each final chunk straight into the spreading chains. */
static void ring_reduce(struct coll *c, const struct chains *ch)
{
	uint64_t nq = max_chunks(c, ch);

	for (uint32_t s = 0; s <= ch->steps; s++)
		for (uint64_t q = 0; q < nq; q++)
			for (uint32_t k = 0; k < ch->parts; k++) {
				uint64_t e;
				bool mine;
				tl_tensor x;

				reduce_hop(c, ch, 1, k, s, q);
				reduce_hop(c, ch, -1, k, s, q);
				if (s < ch->steps)
					continue;
				x = reduce_final(c, ch, k, q, &e, &mine);
				if (!mine)
					continue;
				if (c->op == COLL_ALL_REDUCE)
					spread_own(c, ch, k, q, x);
				coll_store_dst(c, e, x); /* after the sends */
				iter_end(c);
			}
}

/* The spreading half: step 0 (the owner's sends) unless all-reduce's
 * reduce half did it. */
static void ring_spread(struct coll *c, const struct chains *ch, bool from_step1)
{
	uint64_t nq = max_chunks(c, ch);

	for (uint32_t s = from_step1; s <= ch->steps; s++)
		for (uint64_t q = 0; q < nq; q++)
			for (uint32_t k = 0; k < ch->parts; k++) {
				if (s == 0) {
					spread_own(c, ch, k, q, TL_NONE);
					continue;
				}
				spread_hop(c, ch, 1, k, s, q);
				spread_hop(c, ch, -1, k, s, q);
			}
}

/* The schedule of one ring algorithm (planned, then run). */
static void ring_schedule(struct coll *c, const struct chains *ch)
{
	switch (c->op) {
	case COLL_ALL_REDUCE:
		ring_reduce(c, ch);
		ring_spread(c, ch, true);
		break;
	case COLL_REDUCE_SCATTER:
		ring_reduce(c, ch);
		break;
	case COLL_ALL_GATHER:
	case COLL_BROADCAST: /* the owner's copy of its block rides with step 0 */
		ring_spread(c, ch, false);
		break;
	}
}

/* Plans the schedule (the input chunks it reads, in order), then runs it
 * with the buffer rings in a scratch scope of its own. */
static void ring_run(struct coll *c)
{
	struct chains ch;

	chains_of(c, &ch);
	c->planning = true;
	ring_schedule(c, &ch);
	c->planning = false;
	TL_SCRATCH_SCOPE(c->tl) {
		for (uint32_t i = 0; i < COLL_SLOTS; i++)
			c->slot[i] = tl_scratch_tensor(c->tl, c->at, 1, (uint32_t)(2 * c->chunk),
						       TL_F32);
		ring_schedule(c, &ch);
		tl_wait_all(c->tl, c->at);
	}
	free(c->plan);
	c->plan = NULL;
}

/* ------------------------------------------------------------ size rule */

/* ceil(log2 x) for x >= 1. */
static uint32_t log2_ceil(uint32_t x)
{
	uint32_t k = 0;

	while ((1u << k) < x)
		k++;
	return k;
}

/* The α–β (Hockney) time of `algo` in link cycles, the size rule of
 * TL_COLL_AUTO (docs/kernels.md gives the same formulas): α is the link
 * latency, a message of b bytes adds b / β. On a ring a latency-optimal
 * step to a member d hops away costs d·α and shares each link with d - 1
 * other members' messages; on a switch both ways round share one port. */
static double model_cycles(const struct rt_config *cfg, bool ring, enum coll_op op,
			   enum tl_coll_algo algo, uint32_t R, double S)
{
	double a = (double)cfg->link_ipcq_cycles, b = (double)cfg->ipcq_bytes_per_cycle;
	double blk = S / R, h = (double)(R / 2), t = 0;
	uint32_t K = log2_ceil(R);
	bool pow2 = (R & (R - 1)) == 0;

	if (algo == TL_COLL_BIDIR && !ring) /* one port: both ways is the ring */
		algo = TL_COLL_RING;
	if (algo == TL_COLL_RING)
		t = (R - 1) * (a + blk / b);
	else if (algo == TL_COLL_BIDIR)
		t = h * (a + (ring ? 1.0 : 2.0) * blk / b);
	else /* tree: recursive doubling / halving, Bruck, binomial */
		for (uint32_t k = 0; k < K; k++) {
			double d = ring ? (double)((1u << k) < R - (1u << k) ? (1u << k)
									  : R - (1u << k))
					: 1.0;
			/* a round's bytes are sent only once the last round's are
			 * in and added (stored): reduce-scatter and all-gather,
			 * whose Hockney bandwidth term equals the ring's, pay it
			 * twice against the ring's pipelined chunks */
			double bytes = op == COLL_ALL_REDUCE || op == COLL_BROADCAST ? S
				       : op == COLL_REDUCE_SCATTER ? 2 * S / (2u << k)
								   : 2 * blk * (1u << k);
			t += d * (a + bytes / b);
		}
	if (op == COLL_ALL_REDUCE && algo != TL_COLL_TREE)
		t *= 2;
	if (op == COLL_BROADCAST && algo != TL_COLL_TREE) /* a pipelined chain */
		t = t / (R - 1 > 0 ? R - 1 : 1) * (algo == TL_COLL_RING ? R - 1 : h) + S / b;
	if (algo == TL_COLL_TREE && !pow2 && op != COLL_ALL_GATHER && op != COLL_BROADCAST)
		t += 2 * (a + S / b); /* the fold in and out */
	return t;
}

static const char *const op_names[] = {
	[COLL_ALL_REDUCE] = "all_reduce",
	[COLL_REDUCE_SCATTER] = "reduce_scatter",
	[COLL_ALL_GATHER] = "all_gather",
	[COLL_BROADCAST] = "broadcast",
};

static enum tl_coll_algo pick(const struct rt_config *cfg, enum coll_op op, uint32_t R,
			      uint64_t n, uint32_t esz)
{
	bool ring = rt_config_topology(cfg) == RT_TOPOLOGY_RING;
	double S = (double)n * (op == COLL_ALL_REDUCE || op == COLL_REDUCE_SCATTER ? 4 : esz);
	enum tl_coll_algo best = TL_COLL_RING;
	double best_t = model_cycles(cfg, ring, op, TL_COLL_RING, R, S);

	for (enum tl_coll_algo a = TL_COLL_BIDIR; a <= TL_COLL_TREE; a++) {
		double t = model_cycles(cfg, ring, op, a, R, S);

		if (t < best_t) {
			best_t = t;
			best = a;
		}
	}
	return best;
}

/* ------------------------------------------------------------ calls */

static const struct tl_coll defaults;

/* The group's members and my index; false when this rank is not one. */
static void group_of(struct coll *c, const struct tl_coll *d)
{
	struct tl *tl = c->tl;
	uint32_t stride = d->stride ? d->stride : 1, ranks = tl->s.ranks;
	uint32_t count = d->count;
	bool mine = false;

	if (d->first >= ranks)
		tl_abort(tl, c->at, RT_EKERNEL, "%s: group starts at rank %u, the run has %u",
			 op_names[c->op], d->first, ranks);
	if (!count)
		count = (ranks - d->first + stride - 1) / stride;
	if (count > COLL_MAX || (uint64_t)d->first + (uint64_t)(count - 1) * stride >= ranks)
		tl_abort(tl, c->at, RT_EKERNEL,
			 "%s: a group of %u ranks from %u every %u does not fit in the run's %u ranks",
			 op_names[c->op], count, d->first, stride, ranks);
	c->R = count;
	for (uint32_t i = 0; i < count; i++) {
		c->rank_of[i] = d->first + i * stride;
		if (c->rank_of[i] == tl->s.rank) {
			c->me = i;
			mine = true;
		}
	}
	if (!mine)
		tl_abort(tl, c->at, RT_EKERNEL,
			 "%s: rank %u is not in the group (%u ranks from %u every %u)",
			 op_names[c->op], tl->s.rank, count, d->first, stride);
}

/* Blocks of the n elements; with TL_SPAN_SPLIT this PE's part of each
 * (all-reduce and broadcast: of the whole buffer, cut into blocks). */
static void blocks_of(struct coll *c, const struct tl_coll *d, uint64_t n)
{
	uint32_t P = c->tl->s.pes, p = c->tl->s.pe;
	bool split = d->span == TL_SPAN_SPLIT && P > 1;
	uint64_t base = 0, total = n;

	if (split && (c->op == COLL_ALL_REDUCE || c->op == COLL_BROADCAST))
		tl_coll_block(n, P, p, &base, &total);
	for (uint32_t j = 0; j < c->R; j++) {
		tl_coll_block(total, c->R, j, &c->off[j], &c->len[j]);
		c->off[j] += base;
		if (split && (c->op == COLL_REDUCE_SCATTER || c->op == COLL_ALL_GATHER))
			part_of(c->off[j], c->len[j], P, p, &c->off[j], &c->len[j]);
	}
}

static void check_call(struct coll *c, const struct tl_coll *d)
{
	struct tl *tl = c->tl;

	if ((unsigned)c->dtype > TL_F32)
		tl_abort(tl, c->at, RT_EKERNEL, "%s: unknown dtype %d", op_names[c->op],
			 (int)c->dtype);
	if ((unsigned)d->algo > TL_COLL_TREE || (unsigned)d->span > TL_SPAN_PES)
		tl_abort(tl, c->at, RT_EKERNEL, "%s: unknown algorithm %d or span %d",
			 op_names[c->op], (int)d->algo, (int)d->span);
	if (d->chunk_bytes && d->chunk_bytes < 4)
		tl_abort(tl, c->at, RT_EKERNEL, "%s: chunk_bytes %u holds no f32 element",
			 op_names[c->op], d->chunk_bytes);
}

/* `n` elements at HBM byte `addr` fit in HBM. */
static void check_hbm(struct coll *c, const char *what, uint64_t addr, uint64_t n)
{
	uint64_t hbm = c->tl->s.cfg->hbm_bytes;

	if (n > hbm / c->esz || addr > hbm - n * c->esz)
		tl_abort(c->tl, c->at, RT_EOOB,
			 "%s: %s of %llu elements at %llu is outside HBM of %llu bytes",
			 op_names[c->op], what, (unsigned long long)n, (unsigned long long)addr,
			 (unsigned long long)hbm);
}

enum tl_coll_algo tl_coll_pick(const struct tl *tl, const struct tl_coll *c, const char *op,
			       uint64_t n, enum tl_dtype dtype)
{
	uint32_t R = tl->s.ranks, stride;
	enum coll_op o = COLL_ALL_REDUCE;

	for (uint32_t i = 0; i < 4; i++)
		if (op && !strcmp(op, op_names[i]))
			o = (enum coll_op)i;
	if (!c)
		c = &defaults;
	if (c->algo != TL_COLL_AUTO)
		return c->algo;
	stride = c->stride ? c->stride : 1;
	if (c->count)
		R = c->count;
	else if (c->first < R)
		R = (R - c->first + stride - 1) / stride;
	return pick(tl->s.cfg, o, R ? R : 1, n, tl_dtype_size(dtype));
}

/* Messages of at most COLL_CHUNK_BYTES, or what 40 chunks of f32 in the
 * free scratch allow (the ring algorithms' slots: 2 x COLL_SLOTS; the tree
 * algorithms' output ring and temporaries, and what they hold: the rest). */
static void chunk_of(struct coll *c, const struct tl_coll *d)
{
	uint64_t free = c->tl->s.cfg->tcm_scratch_bytes - c->tl->cursor;
	uint64_t most = free / (40 * 4);

	c->chunk = d->chunk_bytes ? d->chunk_bytes / 4 : COLL_CHUNK_BYTES / 4;
	if (c->chunk > most)
		c->chunk = most;
	if (c->chunk < 16)
		tl_abort(c->tl, c->at, RT_ESCRATCH,
			 "%s needs at least %u bytes of free scratch, %llu are left; call it outside "
			 "the scopes holding the rest", op_names[c->op], 40 * 16 * 4,
			 (unsigned long long)free);
	c->budget = free - 24 * c->chunk * 4;
}

/* Sets up one call: group, blocks, buffers, chunking, the algorithm. */
static void setup(struct coll *c, const struct tl_coll *d, uint64_t dst, uint64_t src,
		  uint64_t n)
{
	struct tl *tl = c->tl;
	uint64_t blk0, blen;

	c->esz = tl_dtype_size(c->dtype);
	c->ring = rt_config_topology(tl->s.cfg) == RT_TOPOLOGY_RING;
	check_call(c, d);
	group_of(c, d);
	blocks_of(c, d, n);
	/* reduce-scatter's dst and all-gather's src hold only my block: their
	 * base is where element 0 of the full-size buffer would be */
	tl_coll_block(n, c->R, c->me, &blk0, &blen);
	check_hbm(c, "src", src, c->op == COLL_ALL_GATHER ? blen : n);
	check_hbm(c, "dst", dst, c->op == COLL_REDUCE_SCATTER ? blen : n);
	c->src = c->op == COLL_ALL_GATHER ? src - blk0 * c->esz : src;
	c->dst = c->op == COLL_REDUCE_SCATTER ? dst - blk0 * c->esz : dst;
	chunk_of(c, d);
	c->root = d->root;
	if (c->op == COLL_BROADCAST) {
		uint32_t P = d->span == TL_SPAN_SPLIT ? tl->s.pes : 1;

		if (d->root >= c->R)
			tl_abort(tl, c->at, RT_EKERNEL, "broadcast: root %u of a group of %u",
				 d->root, c->R);
		/* one block, the root's (this PE's part of the buffer) */
		for (uint32_t j = 0; j < c->R; j++)
			c->off[j] = c->len[j] = 0;
		tl_coll_block(n, P, P > 1 ? tl->s.pe : 0, &c->off[d->root], &c->len[d->root]);
	}
	c->algo = d->algo != TL_COLL_AUTO ? d->algo : pick(tl->s.cfg, c->op, c->R, n, c->esz);
}

static void run(struct tl *tl, struct tl_site at, enum coll_op op, const struct tl_coll *d,
		uint64_t dst, uint64_t src, uint64_t n, enum tl_dtype dtype)
{
	struct coll *c;
	uint64_t start = tl->clock_ps;

	if (!d)
		d = &defaults;
	if (d->span == TL_SPAN_PES) {
		coll_pes_run(tl, at, op, d, dst, src, n, dtype);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		tl_abort(tl, at, RT_ENOMEM, "%s: out of memory", op_names[op]);
	c->tl = tl;
	c->at = at;
	c->op = op;
	c->dtype = dtype;
	setup(c, d, dst, src, n);
	tl_scratch_scope_begin_at(tl, at);
	if (c->algo == TL_COLL_TREE) /* rounding before stores */
		for (uint32_t i = 0; i < COLL_OUT_BUFS; i++)
			c->out_buf[i] = tl_scratch_tensor(tl, at, 1, (uint32_t)c->chunk, TL_F32);
	if (c->R == 1) { /* a group of one: the result is the input */
		uint32_t j = op == COLL_BROADCAST ? c->root : 0;

		if (op != COLL_BROADCAST || c->src != c->dst)
			copy_range(c, c->src + c->off[j] * c->esz, c->dst + c->off[j] * c->esz,
				   c->len[j]);
	} else if (c->algo == TL_COLL_TREE) {
		if (op == COLL_ALL_REDUCE)
			coll_tree_all_reduce(c);
		else if (op == COLL_REDUCE_SCATTER)
			coll_tree_reduce_scatter(c);
		else if (op == COLL_ALL_GATHER)
			coll_tree_all_gather(c);
		else
			coll_tree_broadcast(c);
	} else {
		ring_run(c);
	}
	tl_wait_all(tl, at); /* the result is in HBM */
	tl_scratch_scope_end_at(tl, at);
	tl_stat(tl, TL_ST_COLLECTIVE_PS, tl->clock_ps - start);
	tl_stat(tl, TL_ST_COLLECTIVES, 1);
	free(c);
}

void tl_all_reduce_at(struct tl *tl, struct tl_site at, const struct tl_coll *c, uint64_t dst,
		      uint64_t src, uint64_t n, enum tl_dtype dtype)
{
	run(tl, at, COLL_ALL_REDUCE, c, dst, src, n, dtype);
}

void tl_reduce_scatter_at(struct tl *tl, struct tl_site at, const struct tl_coll *c,
			  uint64_t dst, uint64_t src, uint64_t n, enum tl_dtype dtype)
{
	run(tl, at, COLL_REDUCE_SCATTER, c, dst, src, n, dtype);
}

void tl_all_gather_at(struct tl *tl, struct tl_site at, const struct tl_coll *c, uint64_t dst,
		      uint64_t src, uint64_t n, enum tl_dtype dtype)
{
	run(tl, at, COLL_ALL_GATHER, c, dst, src, n, dtype);
}

void tl_broadcast_at(struct tl *tl, struct tl_site at, const struct tl_coll *c, uint64_t dst,
		     uint64_t src, uint64_t n, enum tl_dtype dtype)
{
	run(tl, at, COLL_BROADCAST, c, dst, src, n, dtype);
}
