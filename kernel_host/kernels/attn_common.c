/* attn_common.c — arguments, HBM layout, inputs (seeded or --inputs), query
 * blocks and the output writer shared by the attention kernels (attn.h).
 * Only the public headers: tl.h and tl_io.h.
 *
 * Over 600 lines on purpose: what every attention kernel shares (arguments,
 * HBM layout, inputs, the causal mask, query blocks, the output writer)
 * works on the one struct of attn.h and its layout, and may use only the
 * public headers; each section is short and is read with the others. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn.h"

#define ALIGN4K(x) (((x) + 4095) & ~(uint64_t)4095)

/* ------------------------------------------------------------ arguments */

/* Rows per query block when not given: decode takes the whole group;
 * otherwise up to `tile` rows of the longest run of queries a rank owns,
 * or, for short queries, whole heads up to a tile. */
bool attn_window_fits(const struct attn *a, uint64_t q, uint64_t rows, uint64_t cap)
{
	uint64_t per_row = 6ull * a->d + 14, fold = 29ull * a->tile * q;
	uint64_t fixed = 4ull * a->tile * a->d + 4096;

	return fixed + fold + rows * per_row <= cap;
}

static uint32_t default_qblock(const struct attn *a, uint64_t span,
			       bool decode, uint64_t cap)
{
	if (decode)
		return a->g * a->sq;
	/* zigzag: a rank's two query chunks of S/2R rows would each end in a
	 * ragged block (150 rows: 128 + 22, twice), so the chunks are cut in
	 * floor(span/tile) even blocks instead (one of 150): the block count
	 * no longer grows with the raggedness; a tile multiple keeps tile.
	 * Such blocks are longer than a tile: pass=kv sizes its window of
	 * blocks for them (window_blocks, attn_ring.c) */
	if (a->zigzag && !a->pass_q && span > a->tile) {
		uint64_t n = span / a->tile;

		/* ... but never so long that one block alone cannot be folded */
		while ((span + n - 1) / n > a->tile &&
		       !attn_window_fits(a, (span + n - 1) / n, (span + n - 1) / n, cap))
			n++;
		return (uint32_t)((span + n - 1) / n);
	}
	if (span >= a->tile || span != a->sq)
		return span < a->tile ? (uint32_t)(span ? span : 1) : a->tile;
	for (uint32_t k = a->g; k > 1; k--) /* short queries: whole heads */
		if (a->g % k == 0 && (uint64_t)k * a->sq <= a->tile)
			return k * a->sq;
	return a->sq;
}

void attn_init_heads(struct tl *tl, const struct tl_args *args,
		     struct attn *a)
{
	a->ranks = tl_num_ranks(tl);
	a->rank = tl_rank(tl);
	a->pes = tl_num_programs(tl);
	a->pe = tl_program_id(tl);
	a->hq = tl_arg_u32(args, "heads_q", 64, 1, 65536);
	a->hkv = tl_arg_u32(args, "heads_kv", 8, 1, 65536);
	a->d = tl_arg_u32(args, "head_dim", 128, 1, 65536);
	a->scopes = true;
	a->opt = ATTN_OPT2;
	if (a->hq % a->hkv)
		tl_fail(tl, "heads_q=%u is not a multiple of heads_kv=%u", a->hq, a->hkv);
	a->g = a->hq / a->hkv;
	a->scale = 1.0 / sqrt((double)a->d);
}

/* Only the knobs the kernel honours are read: one it is given but never
 * reads makes the launcher fail the run (exit 2) instead of ignoring it. */
void attn_knobs(struct tl *tl, const struct tl_args *args, unsigned knobs,
		struct attn *a)
{
	a->sweeps = (knobs & ATTN_KNOB_SWEEP) != 0;
	if (knobs & ATTN_KNOB_SWEEP) {
		a->scopes = tl_arg_u32(args, "scopes", 1, 0, 1) != 0;
		a->group = tl_arg_u32(args, "group", a->group, 1, ATTN_MAX_GROUP);
		a->depth = tl_arg_u32(args, "depth", a->depth, 1, ATTN_MAX_GROUP);
		a->vstream = tl_arg_u32(args, "vstream", 0, 0, 1) != 0;
		a->splits = tl_arg_u32(args, "splits", a->splits, 1, ATTN_MAX_SPLITS);
	}
	if (knobs & ATTN_KNOB_OPT)
		a->opt = tl_arg_u32(args, "opt", 2, 2, 3) == 3 ? ATTN_OPT3 : ATTN_OPT2;
	if (knobs & ATTN_KNOB_QWINDOW) /* 0: fit ~512 rows */
		a->qwindow = tl_arg_u32(args, "qwindow", 0, 0, ATTN_MAX_DIM);
}

/* Chunk j of n equal-as-can-be chunks of `total` positions. */
static struct attn_run chunk(uint64_t total, uint64_t j, uint64_t n)
{
	struct attn_run r = { j * total / n, (j + 1) * total / n - j * total / n };

	return r;
}

uint32_t attn_kv_runs(const struct attn *a, uint32_t rank,
		      struct attn_run *out)
{
	uint64_t S = (uint64_t)a->ranks * a->skv;

	if (!a->zigzag) {
		out[0] = (struct attn_run){ (uint64_t)rank * a->skv, a->skv };
		return 1;
	}
	out[0] = chunk(S, rank, 2ull * a->ranks);
	out[1] = chunk(S, 2ull * a->ranks - 1 - rank, 2ull * a->ranks);
	return 2;
}

uint32_t attn_q_runs(const struct attn *a, uint32_t rank,
		     struct attn_run *out)
{
	if (!a->zigzag) {
		out[0] = chunk(a->sq, rank, a->ranks);
		return 1;
	}
	out[0] = chunk(a->sq, rank, 2ull * a->ranks);
	out[1] = chunk(a->sq, 2ull * a->ranks - 1 - rank, 2ull * a->ranks);
	return 2;
}

/* Longest run of queries any rank owns in pass=kv (the block size bound). */
static uint64_t longest_q_run(const struct attn *a)
{
	struct attn_run r[ATTN_MAX_RUNS];
	uint64_t best = 0;

	if (a->ranks == 1 || a->pass_q)
		return a->sq;
	for (uint32_t rank = 0; rank < a->ranks; rank++)
		for (uint32_t i = 0, n = attn_q_runs(a, rank, r); i < n; i++)
			best = r[i].len > best ? r[i].len : best;
	return best;
}

static void layout(struct attn *a)
{
	struct attn_run r[ATTN_MAX_RUNS];
	uint64_t qo = (uint64_t)a->hq * a->sq * a->d * 2;
	uint64_t kv, per_pe;

	a->kv_rows = 0;
	for (uint32_t rank = 0; rank < a->ranks; rank++) {
		uint64_t rows = 0;

		for (uint32_t i = 0, n = attn_kv_runs(a, rank, r); i < n; i++)
			rows += r[i].len;
		a->kv_rows = rows > a->kv_rows ? rows : a->kv_rows;
	}
	kv = (uint64_t)a->hkv * a->kv_rows * a->d * 2;
	per_pe = ALIGN4K(((uint64_t)a->sq + a->qblock) * 4) + ALIGN4K((uint64_t)a->tile * 4);
	a->q_addr = 0;
	a->k_addr = ALIGN4K(a->q_addr + qo);
	a->v_addr = ALIGN4K(a->k_addr + kv);
	a->o_addr = ALIGN4K(a->v_addr + kv);
	a->rel_addr = ALIGN4K(a->o_addr + qo) + per_pe * a->pe;
	a->cols_addr = a->rel_addr + ALIGN4K(((uint64_t)a->sq + a->qblock) * 4);
}

static void ring_args(struct tl *tl, const struct tl_args *args,
		      struct attn *a)
{
	const char *pass = tl_arg_str(args, "pass", "kv");
	const char *lay = tl_arg_str(args, "layout", "contiguous");
	const char *merge;

	a->pass_q = strcmp(pass, "q") == 0;
	if (!a->pass_q && strcmp(pass, "kv") != 0)
		tl_arg_fail(tl, "pass=%s: expected kv or q", pass);
	a->zigzag = strcmp(lay, "zigzag") == 0;
	if (!a->zigzag && strcmp(lay, "contiguous") != 0)
		tl_arg_fail(tl, "layout=%s: expected contiguous or zigzag", lay);
	if (!a->pass_q) /* pass=kv has no merge: never read, so given is an error */
		return;
	merge = tl_arg_str(args, "merge", "tree");
	a->merge_chain = strcmp(merge, "chain") == 0;
	if (!a->merge_chain && strcmp(merge, "tree") != 0)
		tl_arg_fail(tl, "merge=%s: expected tree or chain", merge);
}

/* Decode's sweep holds, per tile in flight, a V tile (f16), its scores
 * and P (f32, one row per query of the block): bytes per key. */
static uint64_t decode_key_bytes(const struct attn *a)
{
	return 2ull * a->d + 8ull * a->g * a->sq;
}

/* The decode default tile: 1024 keys (the vector engine's fixed costs paid
 * once per 1024 keys), halved until ATTN_DECODE_MIN_GROUP tiles plus the
 * `depth` issued ahead fit half the machine's scratch (the rest holds the
 * state, q and the fold's temporaries); never below 16. */
static uint32_t decode_tile(const struct tl *tl, const struct attn *a)
{
	uint64_t budget = tl_scratch_size(tl) / 2;
	uint32_t tile = 1024;

	while (tile > 16 && (uint64_t)(ATTN_DECODE_MIN_GROUP + a->depth) * tile *
				    decode_key_bytes(a) > budget)
		tile /= 2;
	return tile;
}

/* The decode default group: ATTN_DECODE_GROUP tiles per scratch scope, or
 * as many as half the scratch holds beside the `depth` issued ahead (a
 * scope's end waits for its last folds, so fewer, longer scopes stall
 * the sweep less; at least 1). */
static uint32_t decode_group(const struct tl *tl, const struct attn *a)
{
	uint64_t fit = tl_scratch_size(tl) / 2 / ((uint64_t)a->tile * decode_key_bytes(a));

	fit = fit > a->depth ? fit - a->depth : 1;
	return fit < ATTN_DECODE_GROUP ? (uint32_t)fit : ATTN_DECODE_GROUP;
}

void attn_init(struct tl *tl, const struct tl_args *args, bool decode,
	       struct attn *a)
{
	uint64_t all_keys;

	memset(a, 0, sizeof(*a));
	attn_init_heads(tl, args, a);
	if (a->ranks > 1) /* single-rank kernels never read the ring's pass/layout/merge */
		ring_args(tl, args, a);
	/* decode (and the ring's pass=q, a decode over the ranks' shards): few
	 * query rows per KV head, so each fold is a handful of vector
	 * instructions over the tile; tiles of 1024 keys pay their fixed costs
	 * (a vector engine's minimum initiation interval, a DMA's setup) once
	 * per 1024 keys, and two running states overlap one fold's P·V with the
	 * next one's softmax (docs/attention.md, "What bounds decode") */
	decode = decode || a->pass_q;
	a->depth = decode ? 2 : 1;
	a->group = 1; /* decode: sized to the scratch below */
	a->splits = decode ? 2 : 1;
	a->skv = tl_arg_u32(args, "seq_kv", 1024, 1, ATTN_MAX_DIM);
	all_keys = (uint64_t)a->ranks * a->skv;
	/* prefill's default: a query per key (capped at the largest length) */
	a->sq = tl_arg_u32(args, "seq_q",
			   decode || a->pass_q ? 1
			   : all_keys > ATTN_MAX_DIM ? ATTN_MAX_DIM : (uint32_t)all_keys,
			   1, ATTN_MAX_DIM);
	a->tile = tl_arg_u32(args, "tile", decode ? decode_tile(tl, a) : 128, 1, 65536);
	if (decode)
		a->group = decode_group(tl, a);
	a->causal = tl_arg_u32(args, "causal", 1, 0, 1) != 0;
	if ((uint64_t)a->g * a->sq > ATTN_MAX_DIM)
		tl_fail(tl, "a group of %u query heads x seq_q=%u is %llu rows, above %u",
			a->g, a->sq, (unsigned long long)a->g * a->sq, ATTN_MAX_DIM);
	if (a->causal && a->sq > all_keys)
		tl_fail(tl, "causal: seq_q=%u exceeds ranks*seq_kv=%llu", a->sq,
			(unsigned long long)all_keys);
	a->qblock = tl_arg_u32(args, "qblock",
			       default_qblock(a, longest_q_run(a), decode, tl_scratch_size(tl)),
			       1, ATTN_MAX_DIM);
	if (a->qblock > a->g * a->sq) /* a block never spans two KV heads */
		a->qblock = a->g * a->sq;
	a->p0 = (uint64_t)a->ranks * a->skv - (a->causal ? a->sq : 0);
	layout(a);
	attn_tokens(tl, a->sq);
}

void attn_tokens(struct tl *tl, uint64_t tokens)
{
	if (tl_program_id(tl) == 0) /* the rank's PEs share its queries' tokens */
		tl_stat_add(tl, "tokens", tokens, "tokens",
			    "query tokens the step computes on this rank (decode: one per sequence); energy per token divides by their sum");
}

uint64_t attn_kv_addr(const struct attn *a, uint64_t base, uint32_t head,
		      uint64_t row)
{
	return base + (((uint64_t)head * a->kv_rows + row) * a->d) * 2;
}

uint32_t attn_tiles(const struct attn *a, uint64_t len)
{
	return (uint32_t)((len + a->tile - 1) / a->tile);
}

uint32_t attn_tile_rows(const struct attn *a, uint64_t len, uint32_t j)
{
	uint64_t left = len - (uint64_t)j * a->tile;

	return left < a->tile ? (uint32_t)left : a->tile;
}

/* ------------------------------------------------------------ inputs */

/* Generated inputs come from attn_gen.c (attn_normal_fill, attn_npy_rows). */

/* An input tensor with its shape: loaded whole from --inputs, or (data
 * mode) generated a row range at a time, where it is placed. */
struct attn_src {
	bool lazy;           /* generated where placed */
	uint64_t seed;       /* lazy: the stream (seed, which) */
	uint32_t which;
	const char *npy;     /* lazy: the .npy its placed rows go to, or NULL */
	struct tl_npy file;  /* loaded from --inputs */
	uint64_t shape[3];
};

static float src_at(const struct attn_src *s, uint64_t i)
{
	uint16_t h;

	memcpy(&h, (const uint8_t *)s->file.data + 2 * i, 2);
	return tl_f16_to_f32(h);
}

static void src_release(struct attn_src *s)
{
	tl_npy_release(&s->file);
	memset(s, 0, sizeof(*s));
}

static void src_load(struct tl *tl, const char *dir, const char *name,
		     struct attn_src *s)
{
	char path[1200];
	const struct tl_npy *n = &s->file;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	tl_npy_read_max(tl, path, 2 * s->shape[0] * s->shape[1] * s->shape[2], &s->file);
	if (n->type != TL_NPY_F16 || n->ndim != 3 || n->shape[0] != s->shape[0] ||
	    n->shape[1] != s->shape[1] || n->shape[2] != s->shape[2])
		tl_fail(tl, "input %s: expected float16 (%llu, %llu, %llu), got %s with %u dims (%llu, %llu, %llu)",
			path, (unsigned long long)s->shape[0],
			(unsigned long long)s->shape[1], (unsigned long long)s->shape[2],
			tl_npy_type_name(n->type), n->ndim,
			(unsigned long long)(n->ndim > 0 ? n->shape[0] : 0),
			(unsigned long long)(n->ndim > 1 ? n->shape[1] : 0),
			(unsigned long long)(n->ndim > 2 ? n->shape[2] : 0));
	if (tl_rank(tl) == 0 && tl_program_id(tl) == 0) /* every PE reads the same file */
		tl_stat_add(tl, "nonfinite_inputs", tl_nonfinite(n->type, n->data, n->count),
			    "elements", "NaN or infinite elements read from --inputs");
}

/* Each PE writes the rows it places into the one file (as o.npy is
 * written): rank 0's PEs place all of q, and the ranks' runs and the PEs'
 * heads partition K and V, so every row is written, with the bytes whole
 * tensors gave (rank 0 / PE 0 used to generate them all again). */

/* Rows [row, row + n) of `s` (fp16 values, widened) into its .npy. */
static void src_to_npy(struct tl *tl, const struct attn_src *s, uint64_t row, uint64_t n,
		       const float *f)
{
	uint64_t count = n * s->shape[2];
	uint16_t *bits = malloc((size_t)count * sizeof(uint16_t));

	if (!bits)
		tl_fail(tl, "out of memory writing %s", s->npy);
	for (uint64_t i = 0; i < count; i++)
		bits[i] = tl_f32_to_f16(f[i]);
	attn_npy_rows(tl, s->npy, s->shape, row, n, bits);
	free(bits);
}

/* Copies rows [r0, r0+nr) of head h (each row d elements) to HBM, and
 * into the tensor's .npy when this PE writes it. */
static void src_to_hbm(struct tl *tl, const struct attn_src *s, uint32_t h,
		       uint64_t r0, uint64_t nr, uint64_t addr)
{
	uint64_t d = s->shape[2], n = nr * d;
	uint64_t first = (h * s->shape[1] + r0) * d;
	float *f;

	if (n == 0)
		return;
	f = malloc((size_t)n * sizeof(float));
	if (!f)
		tl_fail(tl, "out of memory loading inputs");
	if (s->lazy) /* only this PE's rows are generated */
		attn_normal_fill(s->seed, s->which, first, n, f);
	for (uint64_t i = 0; !s->lazy && i < n; i++)
		f[i] = src_at(s, first + i);
	tl_hbm_write(tl, addr, TL_F16, f, (size_t)n);
	if (s->npy)
		src_to_npy(tl, s, first / d, nr, f);
	free(f);
}

/* Opens input `which`: loaded from --inputs (rank 0 / PE 0 writes it back
 * whole), or in data mode generated where placed, each PE writing its
 * rows into the .npy (q: rank 0's PEs only, every rank places all of q).
 * Timing mode opens only files, to check them: it moves no bytes. */
static void src_open(struct tl *tl, const struct attn *a, const char *dir,
		     uint32_t which, struct attn_src *s)
{
	static const char *const names[3] = { "q.npy", "k.npy", "v.npy" };

	memset(s, 0, sizeof(*s));
	s->shape[0] = which == 0 ? a->hq : a->hkv;
	s->shape[1] = which == 0 ? a->sq : (uint64_t)a->ranks * a->skv;
	s->shape[2] = a->d;
	if (dir[0]) {
		src_load(tl, dir, names[which], s);
	} else if (tl_mode(tl) == TL_DATA) {
		s->lazy = true;
		s->seed = tl_seed(tl);
		s->which = which;
		s->npy = which == 0 && a->rank ? NULL : names[which];
	}
}

/* This PE's rows of tensor `which` into HBM: q's group rows, or the
 * rank's runs of K/V one after the other in its shard. */
static void src_place(struct tl *tl, const struct attn *a, uint32_t which,
		      const struct attn_src *s)
{
	struct attn_run r[ATTN_MAX_RUNS];
	uint32_t n = attn_kv_runs(a, a->rank, r);

	for (uint32_t h = a->pe; h < a->hkv; h += a->pes) {
		uint64_t local = 0;

		if (which == 0) {
			src_to_hbm(tl, s, h * a->g, 0, (uint64_t)a->g * a->sq,
				   attn_q_addr(a, h, 0));
			continue;
		}
		for (uint32_t i = 0; i < n; local += r[i].len, i++)
			src_to_hbm(tl, s, h, r[i].pos, r[i].len,
				   attn_kv_addr(a, which == 1 ? a->k_addr : a->v_addr, h, local));
	}
}

void attn_inputs(struct tl *tl, const struct attn *a)
{
	static const char *const names[3] = { "q.npy", "k.npy", "v.npy" };
	char dir[1024];
	struct attn_src s;

	if (!tl_inputs_dir(tl, dir, sizeof(dir)))
		tl_fail(tl, "--inputs path is too long");
	if (tl_mode(tl) != TL_DATA) {
		/* timing mode moves no bytes, but bad inputs still fail */
		for (uint32_t w = 0; dir[0] && w < 3; w++) {
			src_open(tl, a, dir, w, &s);
			src_release(&s);
		}
		return;
	}
	for (uint32_t w = 0; w < 3; w++) {
		src_open(tl, a, dir, w, &s);
		src_place(tl, a, w, &s);
		if (!s.lazy && a->rank == 0 && a->pe == 0) /* --inputs: written back whole */
			tl_npy_write(tl, names[w], TL_NPY_F16, s.shape, 3, s.file.data);
		src_release(&s);
	}
}

/* ------------------------------------------------------------ mask */

/* The causal mask needs, per block, each row's position relative to query
 * 0 (rel table: i mod seq_q, loaded from the block's first row) and the
 * column index of each key in a tile (0, 1, ..., tile-1). */
void attn_mask_prepare(struct tl *tl, struct attn *a)
{
	uint64_t nrel = (uint64_t)a->sq + a->qblock;
	float *m;

	a->cols = TL_NONE;
	if (!a->causal || a->sq == 1)
		return; /* one query per head sits after every key */
	m = malloc((size_t)(nrel > a->tile ? nrel : a->tile) * sizeof(float));
	if (!m)
		tl_fail(tl, "out of memory (mask)");
	for (uint64_t i = 0; i < nrel; i++)
		m[i] = (float)(i % a->sq);
	tl_hbm_write(tl, a->rel_addr, TL_F32, m, (size_t)nrel);
	for (uint32_t c = 0; c < a->tile; c++)
		m[c] = (float)c;
	tl_hbm_write(tl, a->cols_addr, TL_F32, m, a->tile);
	free(m);
	a->cols = tl_load(tl, a->cols_addr, 1, a->tile, TL_F32);
}

/* ------------------------------------------------------------ blocks */

uint64_t attn_q_addr(const struct attn *a, uint32_t head, uint32_t row0)
{
	return a->q_addr + ((uint64_t)head * a->g * a->sq + row0) * a->d * 2;
}

uint32_t attn_block_rows(const struct attn *a, uint32_t row0)
{
	uint32_t left = a->g * a->sq - row0;

	return left < a->qblock ? left : a->qblock;
}

/* Position and output fields of a block (no allocation). */
static void block_place(const struct attn *a, struct attn_block *b,
			uint32_t head, uint32_t row0, uint32_t rows)
{
	uint32_t rr = row0 % a->sq;

	b->head = head;
	b->row0 = row0;
	b->rows = rows;
	/* a block crossing a head boundary holds queries of every position */
	b->pos_lo = a->p0 + (rr + (uint64_t)rows <= a->sq ? rr : 0);
	b->pos_hi = a->p0 + (rr + (uint64_t)rows <= a->sq ? rr + rows - 1 : a->sq - 1);
	b->o_hbm = a->o_addr + ((uint64_t)head * a->g * a->sq + row0) * a->d * 2;
}

/* The running state (m, l, O) at the current top of scratch, and the
 * cross-group buffers when a sweep of skv keys has more than one group. */
static void block_state(struct tl *tl, const struct attn *a,
			struct attn_block *b)
{
	struct attn_cross *x = &b->x;

	x->n = 0;
	if (a->sweeps && a->scopes && attn_tiles(a, a->skv) > a->group) {
		x->n = a->depth < ATTN_CROSS_MAX ? a->depth : ATTN_CROSS_MAX;
		if (x->n > a->group)
			x->n = a->group;
	}
	/* written whole (a load, a Q·Kᵀ's out) before anything reads them: no
	 * fill (a 1024 x 128 f16 fill is ~1.1 us of PE_MATH the first fold
	 * would wait behind, engines taking stages in order) */
	for (uint32_t i = 0; i < x->n && !a->vstream; i++)
		x->v[i] = tl_empty(tl, a->tile, a->d, TL_F16);
	for (uint32_t i = x->n; i-- > 0;) /* s[1] below s[0], see below */
		x->s[i] = tl_empty(tl, b->rows, a->tile, TL_F32);
	b->m = tl_full(tl, b->rows, 1, TL_F32, -ATTN_NEG);
	b->l = tl_zeros(tl, b->rows, 1, TL_F32);
	b->o = tl_zeros(tl, b->rows, a->d, TL_F32);
	b->sm[0] = b->m;
	b->sl[0] = b->l;
	b->so[0] = b->o;
	for (uint32_t i = 1; a->sweeps && i < a->splits; i++) {
		b->sm[i] = tl_full(tl, b->rows, 1, TL_F32, -ATTN_NEG);
		b->sl[i] = tl_zeros(tl, b->rows, 1, TL_F32);
		b->so[i] = tl_zeros(tl, b->rows, a->d, TL_F32);
	}
}

static void block_rel(struct tl *tl, const struct attn *a,
		      struct attn_block *b)
{
	b->rel = a->cols.slot ? tl_load(tl, a->rel_addr + (uint64_t)(b->row0 % a->sq) * 4,
					b->rows, 1, TL_F32)
			      : TL_NONE;
}

/* Cross V buffers, cross score buffers, the state, q, from the bottom up:
 * the host orders a command after every pending command whose TCM span
 * (the bounding interval of what it touches) overlaps its output. A Q·Kᵀ
 * touches q and its scores (fresh, above everything, or a cross buffer), a
 * fold m (or a cross buffer) and its temporaries at the top; a buffer
 * between would make each fold or cross-group load wait for the Q·Kᵀs and
 * folds in flight. Cross score buffers go downwards in issue order so the
 * Q·Kᵀ into s[1] is not inside the span of the one into s[0]. */
void attn_block_open(struct tl *tl, const struct attn *a, struct attn_block *b,
		     uint32_t head, uint32_t row0, uint32_t rows)
{
	block_place(a, b, head, row0, rows);
	block_state(tl, a, b);
	b->stale = 0;
	b->q = TL_NONE;
	b->rel = TL_NONE;
}

/* q, scaled once by 1/sqrt(d) into f16 (the scores' scale, applied to
 * q instead of to every tile of scores, as flash-attention kernels do). */
void attn_block_take_q(struct tl *tl, const struct attn *a, struct attn_block *b,
		       tl_tensor q)
{
	tl_tensor qs = tl_empty(tl, b->rows, a->d, TL_F16); /* the scale's out */

	b->q = tl_composite(tl, &(struct tl_composite_desc){
		.op = "scale", .a = q, .scale = a->scale, .out = qs }).t;
	block_rel(tl, a, b);
}

void attn_block_begin(struct tl *tl, const struct attn *a,
		      struct attn_block *b, uint32_t head, uint32_t row0,
		      uint32_t rows)
{
	attn_block_open(tl, a, b, head, row0, rows);
	attn_block_take_q(tl, a, b,
			  tl_load(tl, attn_q_addr(a, head, row0), rows, a->d, TL_F16));
}

uint32_t attn_visible_tiles(const struct attn *a, const struct attn_block *b,
			    const struct attn_kv *kv)
{
	uint32_t n = attn_tiles(a, kv->len);
	uint64_t vis;

	if (!a->causal)
		return n;
	if (kv->kpos0 > b->pos_hi)
		return 0;
	vis = (b->pos_hi - kv->kpos0) / a->tile + 1;
	return vis < n ? (uint32_t)vis : n;
}

/* ------------------------------------------------------------ output */

/* Writes rows [row, row+n) (fp16 bits) of a [shape0*shape1, d] tensor into
 * DIR/file. Every program writes its own rows into the one file: all write
 * the same header and size, none truncates another's rows. */
static void file_rows(struct tl *tl, const char *file, const uint64_t shape[3],
		      uint64_t row, uint64_t n, const uint16_t *bits)
{
	char path[1200], hdr[160];
	int len, fd;
	uint64_t total, rowb = shape[2] * 2;
	size_t pad;

	if (!tl_output_file(tl, file, path, sizeof(path)))
		return;
	len = snprintf(hdr + 10, sizeof(hdr) - 10,
		       "{'descr': '<f2', 'fortran_order': False, 'shape': (%llu, %llu, %llu), }",
		       (unsigned long long)shape[0], (unsigned long long)shape[1],
		       (unsigned long long)shape[2]);
	pad = ((size_t)10 + (size_t)len + 1 + 63) / 64 * 64;
	memcpy(hdr, "\x93NUMPY\x01\x00", 8);
	hdr[8] = (char)((pad - 10) & 0xff);
	hdr[9] = (char)((pad - 10) >> 8);
	memset(hdr + 10 + len, ' ', pad - 10 - (size_t)len - 1);
	hdr[pad - 1] = '\n';
	total = pad + shape[0] * shape[1] * rowb;
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		tl_fail(tl, "cannot open %s for writing", path);
	if (pwrite(fd, hdr, pad, 0) != (ssize_t)pad || ftruncate(fd, (off_t)total) ||
	    pwrite(fd, bits, n * rowb, (off_t)(pad + row * rowb)) != (ssize_t)(n * rowb)) {
		close(fd);
		tl_fail(tl, "cannot write %s", path);
	}
	close(fd);
	tl_stat_add(tl, "nonfinite_outputs", tl_nonfinite(TL_NPY_F16, bits, n * shape[2]), "elements",
		    "NaN or infinite elements written to .npy outputs");
}

void attn_block_finish(struct tl *tl, const struct attn *a,
		       const struct attn_block *b)
{
	tl_tensor o = tl_astype(tl, tl_div(tl, b->o, b->l), TL_F16);

	if (!a->o_token_stride) {
		tl_store(tl, b->o_hbm, o);
		return;
	}
	/* token-major: one strided store per query head the block holds */
	for (uint32_t r = 0; r < b->rows;) {
		uint32_t row = b->row0 + r, p = row % a->sq, qh = b->head * a->g + row / a->sq;
		uint32_t n = a->sq - p < b->rows - r ? a->sq - p : b->rows - r;

		tl_store_rows(tl, a->o_addr + (uint64_t)p * a->o_token_stride + (uint64_t)qh * a->d * 2,
			      a->o_token_stride, tl_rows(tl, o, r, n));
		r += n;
	}
}

void attn_save_rows(struct tl *tl, const struct attn *a, const char *file,
		    const uint64_t shape[3], uint64_t row, uint64_t n,
		    uint64_t o_hbm)
{
	uint64_t count = n * a->d;
	float *f;
	uint16_t *bits;

	if (tl_mode(tl) != TL_DATA || n == 0)
		return;
	f = malloc((size_t)count * sizeof(float));
	bits = malloc((size_t)count * sizeof(uint16_t));
	if (!f || !bits) {
		free(f);
		free(bits);
		tl_fail(tl, "out of memory writing %s", file);
	}
	tl_hbm_read(tl, o_hbm, TL_F16, f, (size_t)count);
	for (uint64_t i = 0; i < count; i++)
		bits[i] = tl_f32_to_f16(f[i]);
	file_rows(tl, file, shape, row, n, bits);
	free(f);
	free(bits);
}

void attn_save_o(struct tl *tl, const struct attn *a, uint32_t head,
		 uint32_t row0, uint32_t rows)
{
	uint64_t shape[3] = { a->hq, a->sq, a->d };
	uint64_t row = (uint64_t)head * a->g * a->sq + row0;

	attn_save_rows(tl, a, "o.npy", shape, row, rows,
		       a->o_addr + row * a->d * 2);
}
