/* attn.h — shared pieces of the attention kernels (attn_*.c): arguments,
 * the HBM layout, seeded or file inputs, the flash-attention tile fold and
 * the output file. Layout and generator are documented in docs/attention.md.
 *
 * Shapes (fp16 in HBM): q [heads_q, seq_q, d], k and v [heads_kv,
 * ranks*seq_kv, d] of which rank r holds rows [r*seq_kv, (r+1)*seq_kv) of
 * every head, o [heads_q, seq_q, d]. For KV head h the G = heads_q/heads_kv
 * query heads h*G .. h*G+G-1 form the "group matrix" [G*seq_q, d]: q rows
 * h*G*seq_q .. (h+1)*G*seq_q, contiguous. A query block is a run of rows of
 * a group matrix; its running state (m, l, O) is f32 in TCM. */
#ifndef ATTN_H
#define ATTN_H

#include <stdbool.h>
#include <stdint.h>

#include "tl.h"
#include "tl_io.h"

/* Big negative used for masked scores and the initial running max. */
#define ATTN_NEG 1e30
/* Largest number of KV tiles per scratch scope in a sweep. */
#define ATTN_MAX_GROUP 64

enum attn_opt { ATTN_OPT2 = 2, ATTN_OPT3 = 3 };

struct attn {
	uint32_t hq, hkv, d, sq, skv, tile, g;
	uint32_t ranks, rank, pes, pe;
	uint32_t qblock;      /* rows per query block */
	uint32_t depth;       /* Q·Kᵀ composites issued ahead of the fold */
	uint32_t group;       /* KV tiles per scratch scope in a sweep */
	uint32_t qwindow;     /* ring pass=kv: query blocks per ring pass */
	bool causal, scopes, pass_q;
	enum attn_opt opt;
	double scale;         /* 1 / sqrt(d) */
	uint64_t p0;          /* absolute position of query 0 */
	/* this rank's HBM layout (bytes) */
	uint64_t q_addr, k_addr, v_addr, o_addr, mask_addr;
	tl_tensor mask_d;     /* [qblock, tile] f32: c - rel(row), or TL_NONE */
};

/* A query block: rows [row0, row0+rows) of KV head `head`'s group matrix. */
struct attn_block {
	uint32_t head, row0, rows;
	uint64_t pos0;        /* absolute position of its first row */
	uint32_t span;        /* positions covered: rows or seq_q */
	tl_tensor q, m, l, o; /* q f16 [rows, d]; m, l [rows, 1]; o [rows, d] */
};

/* Reads the arguments (defaults: the Llama-3-70B shape), checks them and
 * lays out HBM; `decode` picks the decode defaults (one query block per
 * group, depth 2). Fails the run with a clear line on bad arguments. */
void attn_init(struct tl *tl, const struct tl_args *args, bool decode,
	       struct attn *a);
/* Data mode: puts this PE's q, k, v slices into HBM (from --inputs or the
 * seeded generator); rank 0 program 0 also writes q.npy, k.npy, v.npy. */
void attn_inputs(struct tl *tl, const struct attn *a);
/* Loads the causal helper matrix when some tile needs masking. */
void attn_mask_prepare(struct tl *tl, struct attn *a);

/* Sets up a block: loads its q (or takes `q` when given) and allocates
 * its running state in the current scope. */
void attn_block_begin(struct tl *tl, const struct attn *a,
		      struct attn_block *b, uint32_t head, uint32_t row0,
		      uint32_t rows);
void attn_block_with_q(struct tl *tl, const struct attn *a,
		       struct attn_block *b, uint32_t head, uint32_t row0,
		       uint32_t rows, tl_tensor q);
/* HBM address of a block's q rows. */
uint64_t attn_q_addr(const struct attn *a, uint32_t head, uint32_t row0);
/* Number of leading KV tiles of a range starting at absolute position kpos0
 * (n tiles) that are not entirely in the future of the block. */
uint32_t attn_visible_tiles(const struct attn *a, const struct attn_block *b,
			    uint64_t kpos0, uint32_t n);
/* Scores of one tile: Q·Kᵀ·scale into `out` (TL_NONE: fresh scratch),
 * returned; one composite, K streamed when it is a tl_ref, read in place
 * when pinned. */
tl_tensor attn_scores(struct tl *tl, const struct attn *a,
		      const struct attn_block *b, tl_tensor k, tl_tensor out);
/* Folds one tile (scores s, values v) into the block's running state: the
 * causal mask when the tile straddles the diagonal, then opt2 (one
 * softmax_merge + P·V composite) or opt3 (separate ops + a P·V composite).
 * Allocates in the current scope. Counts the "tiles" statistic. */
void attn_fold(struct tl *tl, const struct attn *a,
	       const struct attn_block *b, tl_tensor s, tl_tensor v,
	       uint64_t kpos, enum attn_opt opt);
/* Streams `n` KV tiles from this rank's HBM (tile 0 at absolute position
 * kpos0) through the block: Q·Kᵀ issued `depth` tiles ahead into a ring of
 * persistent score buffers, the folds inside a scratch scope per `group`
 * tiles (unless scopes=0). */
void attn_sweep(struct tl *tl, const struct attn *a,
		const struct attn_block *b, uint64_t k_hbm, uint64_t v_hbm,
		uint64_t kpos0, uint32_t n);
/* LSE merge of a partial state (m2, l2, o2) into the block's state. */
void attn_merge(struct tl *tl, const struct attn_block *b, tl_tensor m2,
		tl_tensor l2, tl_tensor o2);
/* O / l as fp16 into o in HBM. */
void attn_block_finish(struct tl *tl, const struct attn *a,
		       const struct attn_block *b);
/* Data mode, after the last block: rows [row0, row0+rows) of head `head`'s
 * group in o (HBM) into o.npy (every program writes its own rows). */
void attn_save_o(struct tl *tl, const struct attn *a, uint32_t head,
		 uint32_t row0, uint32_t rows);

/* HBM address of K/V row `row` of head `head` in this rank's shard. */
uint64_t attn_kv_addr(const struct attn *a, uint64_t base, uint32_t head,
		      uint64_t row);

/* The generator of seeded inputs: element `index` of tensor `which`
 * (0 q, 1 k, 2 v, in its full row-major layout), standard normal rounded
 * to fp16 (returned widened). */
float attn_normal(uint64_t seed, uint32_t which, uint64_t index);

int gqa_decode_opt2(struct tl *tl, const struct tl_args *args);
int gqa_decode_opt3(struct tl *tl, const struct tl_args *args);
int gqa_prefill(struct tl *tl, const struct tl_args *args);
int ring_attention(struct tl *tl, const struct tl_args *args);

#endif
