/* attn.h — shared pieces of the attention kernels (attn_*.c): arguments,
 * the HBM layout, seeded or file inputs, the flash-attention tile fold and
 * the output file. Layout and generator are documented in docs/attention.md.
 *
 * Shapes (fp16 in HBM): q [heads_q, seq_q, d], k and v [heads_kv, S, d]
 * with S = ranks*seq_kv keys in all, o [heads_q, seq_q, d]. Every length
 * is free (no multiple of the tile, of qblock or of the ring size): the
 * last KV tile of a run of keys is computed on its true width and query
 * blocks may be ragged. A rank holds one or two runs of keys (contiguous:
 * rank r holds [r*seq_kv, (r+1)*seq_kv); zigzag: chunks r and 2R-1-r of
 * 2R) in its K/V shard [heads_kv, kv_rows, d], runs one after the other.
 * For KV head h the G = heads_q/heads_kv query heads h*G .. h*G+G-1 form
 * the "group matrix" [G*seq_q, d]: q rows h*G*seq_q .. (h+1)*G*seq_q,
 * contiguous. A query block is a run of rows of a group matrix; its
 * running state (m, l, O) is f32 in TCM. */
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
/* Decode's default KV tiles per scratch scope, and the fewest its default
 * tile is sized to hold (attn_init). */
#define ATTN_DECODE_GROUP 16
#define ATTN_DECODE_MIN_GROUP 4
/* Most running states a sweep splits its tiles over (`splits`). */
#define ATTN_MAX_SPLITS 4
/* Fewest keys per running state worth a split: a split's merge at the
 * sweep's end costs about as much as the overlap of ~1024 keys' P·V with
 * the next softmax saves (trn2, measured: a 1024-key paged sweep takes
 * the same with one state or two, 512 keys 15 % longer with two), so a
 * shorter sweep keeps one state (ADR 0025). */
#define ATTN_SPLIT_MIN_KEYS 1024
/* Runs of keys or queries a rank holds (zigzag: 2). */
#define ATTN_MAX_RUNS 2
/* Largest ring and largest dimension an argument may ask for. */
#define ATTN_MAX_DIM (1u << 24)

enum attn_opt { ATTN_OPT2 = 2, ATTN_OPT3 = 3 };

/* A run of consecutive positions [pos, pos + len). */
struct attn_run {
	uint64_t pos, len;
};

struct attn {
	uint32_t hq, hkv, d, sq, skv, tile, g;
	uint32_t ranks, rank, pes, pe;
	uint32_t qblock;      /* rows per query block (the last may be fewer) */
	uint32_t depth;       /* Q·Kᵀ composites issued ahead of the fold */
	uint32_t group;       /* KV tiles per scratch scope in a sweep */
	uint32_t splits;      /* sweep: running states tiles alternate over */
	uint32_t rot;         /* sweep of rot tiles whose narrow last tile goes
			       * first (0: in order), see attn_flash.c */
	uint32_t qwindow;     /* ring pass=kv: query blocks per ring pass */
	bool causal, scopes, pass_q;
	bool zigzag;          /* ring: rank i holds chunks i and 2R-1-i */
	bool merge_chain;     /* ring pass=q: the serial chain (else tree) */
	bool vstream;         /* sweep: V streamed by the fold (else loaded ahead) */
	bool sweeps;          /* the kernel folds with attn_sweep (reads its knobs) */
	enum attn_opt opt;
	double scale;         /* 1 / sqrt(d) */
	uint64_t p0;          /* absolute position of query 0 */
	uint64_t kv_rows;     /* rows per head of a rank's K/V shard */
	/* this rank's HBM layout (bytes) */
	uint64_t q_addr, k_addr, v_addr, o_addr, rel_addr, cols_addr;
	/* o token-major instead (0: the layout above): query head j at
	 * position p at o_addr + p * o_token_stride + j * d * 2 (a program's
	 * [tokens, heads x d] activations, llama.c) */
	uint64_t o_token_stride;
	/* ring pass=kv over a subgroup of the run's ranks: ring member i is
	 * rank ring_base + i * ring_stride (0: the run's ranks, neighbours
	 * through tl_send / tl_recv; else tl_send_to, a context-parallel group
	 * of a tensor-parallel run, llama.c) */
	uint32_t ring_stride, ring_base;
	tl_tensor cols;       /* [1, tile] f32 0, 1, 2, ...: causal mask, or TL_NONE */
};

/* Tiles of a sweep issued across a group boundary: the first tiles of the
 * next group are issued before this group's scope ends, into buffers of
 * the block, so the read channel keeps streaming while the scope end waits
 * for this group's last folds (without them every group boundary drained
 * the DMA queue: at 32K, 15 drains, all PEs of a rank at once). */
#define ATTN_CROSS_MAX 3

/* Cross-group buffers (n = 0: none). */
struct attn_cross {
	uint32_t n;
	tl_tensor s[ATTN_CROSS_MAX]; /* scores [rows, tile] f32 */
	tl_tensor v[ATTN_CROSS_MAX]; /* V [tile, d] f16 (not with vstream) */
};

/* A query block: rows [row0, row0+rows) of KV head `head`'s group matrix. */
struct attn_block {
	uint32_t head, row0, rows;
	uint64_t pos_lo, pos_hi; /* absolute positions of its first and last query */
	uint64_t o_hbm;       /* where its output rows go */
	tl_tensor q, m, l, o; /* q f16 [rows, d]; m, l [rows, 1]; o [rows, d] */
	/* the sweep's other running states (splits > 1): tile j folds into
	 * state j % splits, state 0 being (m, l, o); merged at the sweep's end */
	tl_tensor sm[ATTN_MAX_SPLITS], sl[ATTN_MAX_SPLITS], so[ATTN_MAX_SPLITS];
	uint32_t stale;       /* states 1 .. stale-1 hold a merged sweep's values:
			       * the next sweep resets them first (a block's
			       * last sweep leaves them, so its end pays nothing) */
	tl_tensor rel;        /* [rows, 1] f32 query position - p0 (causal) */
	struct attn_cross x;  /* sweeps of more than one group */
};

/* Keys a sweep reads: `len` keys from absolute position kpos0, in tiles of
 * a->tile (the last one narrower), K/V tile j at k_hbm/v_hbm + j*tile rows
 * or, paged, at k_page[j]/v_page[j]. */
struct attn_kv {
	uint64_t k_hbm, v_hbm;
	const uint64_t *k_page, *v_page;
	uint64_t kpos0, len;
};

/* Reads the arguments (defaults: the Llama-3-70B shape), checks them and
 * lays out HBM; `decode` picks the decode defaults (one query block per
 * group, depth 2). Fails the run with a clear line on bad arguments. */
void attn_init(struct tl *tl, const struct tl_args *args, bool decode,
	       struct attn *a);
/* Reports the step's query tokens on this rank (the "tokens" statistic,
 * from PE 0; energy per token divides by the sum over ranks). */
void attn_tokens(struct tl *tl, uint64_t tokens);
/* The shape arguments only (heads_q, heads_kv, head_dim), for kernels
 * with their own layout (gqa_decode_paged). */
void attn_init_heads(struct tl *tl, const struct tl_args *args,
		     struct attn *a);
/* Tuning arguments, read only by the kernels that honour them. */
enum attn_knob {
	ATTN_KNOB_SWEEP = 1u,   /* scopes group depth vstream (attn_sweep) */
	ATTN_KNOB_OPT = 2u,     /* opt=2|3, the fold */
	ATTN_KNOB_QWINDOW = 4u, /* query blocks per ring pass (pass=kv) */
};
/* Reads the knobs in `knobs` (an or of enum attn_knob); the others keep
 * attn_init's defaults. */
void attn_knobs(struct tl *tl, const struct tl_args *args, unsigned knobs,
		struct attn *a);
/* Data mode: puts this PE's q, k, v slices into HBM (from --inputs or the
 * seeded generator); rank 0 program 0 also writes q.npy, k.npy, v.npy. */
void attn_inputs(struct tl *tl, const struct attn *a);
/* Loads the causal mask's column indices when some tile needs masking. */
void attn_mask_prepare(struct tl *tl, struct attn *a);

/* Runs of keys rank `rank` holds (returns how many), in shard order. */
uint32_t attn_kv_runs(const struct attn *a, uint32_t rank,
		      struct attn_run *out);
/* Runs of query positions (relative to query 0) rank `rank` owns in
 * ring pass=kv. */
uint32_t attn_q_runs(const struct attn *a, uint32_t rank,
		     struct attn_run *out);
/* Number of tiles of `len` keys. */
uint32_t attn_tiles(const struct attn *a, uint64_t len);
/* Keys in tile j of `len` keys. */
uint32_t attn_tile_rows(const struct attn *a, uint64_t len, uint32_t j);

/* Sets up a block: allocates its running state (and cross-group buffers)
 * in the current scope, then loads its q above them. */
void attn_block_begin(struct tl *tl, const struct attn *a,
		      struct attn_block *b, uint32_t head, uint32_t row0,
		      uint32_t rows);
/* The same in two steps, for a q that comes from elsewhere (received,
 * loaded from a table): open allocates the state; take_q sets q — which
 * must be allocated after open, above the state (attn_common.c says why)
 * — and loads the causal row positions. */
void attn_block_open(struct tl *tl, const struct attn *a, struct attn_block *b,
		     uint32_t head, uint32_t row0, uint32_t rows);
void attn_block_take_q(struct tl *tl, const struct attn *a, struct attn_block *b,
		       tl_tensor q);
/* Whether a pass=kv window of `rows` query rows in blocks of `q` fits a
 * TCM scratch of `cap` bytes with the fold of one block. What a window
 * needs, measured on the opt2 fold (tile 128, head_dim 128: 782 bytes per
 * query row of state, 3606 per row of the block being folded, 65 KB for
 * the K and V tiles in flight) and written in the shapes' terms: per
 * query row its state (O in f32 and q in f16: 6 x head_dim, m, l and rel:
 * 12 bytes; 14 with room), per row of the folded block the scores and the
 * softmax-merge recipe's temporaries (about 28.2 bytes per key of the
 * tile: 29 with room), and the two K/V tiles with 4 KiB to spare. */
bool attn_window_fits(const struct attn *a, uint64_t q, uint64_t rows, uint64_t cap);
/* Rows of the block starting at group row `row0` (qblock, or what is left
 * of the group). */
uint32_t attn_block_rows(const struct attn *a, uint32_t row0);
/* HBM address of a block's q rows. */
uint64_t attn_q_addr(const struct attn *a, uint32_t head, uint32_t row0);
/* Number of leading tiles of `kv` that are not entirely in the future of
 * the block. */
uint32_t attn_visible_tiles(const struct attn *a, const struct attn_block *b,
			    const struct attn_kv *kv);
/* Scores of one tile: Q·Kᵀ·scale into `out` (TL_NONE: fresh scratch),
 * returned; one composite, K streamed when it is a tl_ref, read in place
 * when pinned. */
tl_tensor attn_scores(struct tl *tl, const struct attn *a,
		      const struct attn_block *b, tl_tensor k, tl_tensor out);
/* Folds one tile (scores s [rows, width], values v [width, d]) into the
 * block's running state: the causal mask when the tile straddles the
 * diagonal, then opt2 (one softmax_merge + P·V composite) or opt3
 * (separate ops + a P·V composite). Allocates in the current scope. */
void attn_fold(struct tl *tl, const struct attn *a,
	       const struct attn_block *b, tl_tensor s, tl_tensor v,
	       uint64_t kpos, uint32_t width, enum attn_opt opt);
/* Streams the visible tiles of `kv` through the block: Q·Kᵀ issued
 * `depth` tiles ahead into fresh score buffers, the folds inside a scratch
 * scope per `group` tiles (unless scopes=0). Counts the "tiles" stat. */
void attn_sweep(struct tl *tl, const struct attn *a,
		struct attn_block *b, const struct attn_kv *kv);
/* LSE merge of a partial state (m2, l2, o2) into the block's state. */
void attn_merge(struct tl *tl, const struct attn_block *b, tl_tensor m2,
		tl_tensor l2, tl_tensor o2);
/* O / l as fp16 into the block's output rows in HBM. */
void attn_block_finish(struct tl *tl, const struct attn *a,
		       const struct attn_block *b);
/* Data mode, after the last block: rows [row0, row0+rows) of head `head`'s
 * group in o (HBM) into o.npy (every program writes its own rows). */
void attn_save_o(struct tl *tl, const struct attn *a, uint32_t head,
		 uint32_t row0, uint32_t rows);
/* Data mode: `n` rows of d fp16 values at HBM o_hbm into rows [row,
 * row+n) of the [shape0, shape1, d] file `file` every program shares. */
void attn_save_rows(struct tl *tl, const struct attn *a, const char *file,
		    const uint64_t shape[3], uint64_t row, uint64_t n,
		    uint64_t o_hbm);

/* HBM address of K/V shard row `row` of head `head`. */
uint64_t attn_kv_addr(const struct attn *a, uint64_t base, uint32_t head,
		      uint64_t row);

/* The generator of seeded inputs: element `index` of tensor `which`
 * (0 q, 1 k, 2 v, in its full row-major layout), standard normal rounded
 * to fp16 (returned widened). */
float attn_normal(uint64_t seed, uint32_t which, uint64_t index);
/* Elements [first, first + n) of the same tensor into out[0, n), the bytes
 * attn_normal gives one at a time, at a fraction of its cost: the stream's
 * base is mixed once, and the two elements of a Box-Muller pair share
 * their uniforms, logarithm and square root. */
void attn_normal_fill(uint64_t seed, uint32_t which, uint64_t first, uint64_t n, float *out);
/* Writes rows [row, row + n) (fp16 bits, shape[2] elements each) of a
 * (shape[0], shape[1], shape[2]) float16 tensor into the run's output
 * `file`, leaving the other rows to the PEs that write them (nothing when
 * the run has no output directory). */
void attn_npy_rows(struct tl *tl, const char *file, const uint64_t shape[3], uint64_t row,
		   uint64_t n, const uint16_t *bits);
/* splitmix64's output function (a kernel sees only the tl API, so the
 * attention kernels keep their own copy). */
uint64_t attn_mix(uint64_t z);

/* The attention of this PE's KV heads on the layout `a` describes (its
 * addresses may point anywhere): one rank, every query block swept over
 * the head's keys (what gqa_prefill and gqa_decode_* run), or pass=kv of
 * ring attention over the run's ranks (what ring_attention runs). Neither
 * reads inputs or writes files. */
void attn_heads(struct tl *tl, const struct attn *a);
void attn_ring_kv(struct tl *tl, const struct attn *a);

int gqa_decode_opt2(struct tl *tl, const struct tl_args *args);
int gqa_decode_opt3(struct tl *tl, const struct tl_args *args);
int gqa_decode_prefetch(struct tl *tl, const struct tl_args *args);
int gqa_decode_paged(struct tl *tl, const struct tl_args *args);
int gqa_prefill(struct tl *tl, const struct tl_args *args);
int ring_attention(struct tl *tl, const struct tl_args *args);

#endif
