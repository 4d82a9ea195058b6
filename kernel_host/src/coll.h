/* coll.h — the collectives' internal state (coll.c, coll_tree.c,
 * coll_pes.c). A collective is lowered, on every PE that takes part, to a
 * schedule of tl_* calls: loads of this PE's input from HBM, point-to-point
 * IPCQ messages (tl_ipcq_send_to / tl_recv_from_async), MATH adds into f32
 * partial sums and stores of the result to HBM. Both ends of every message
 * derive its size from the same block table and chunking, so nothing but
 * data travels. docs/kernels.md ("Collectives") gives every algorithm and
 * its α–β formula. */
#ifndef TL_COLL_H
#define TL_COLL_H

#include "tl_private.h"

#define COLL_MAX 64 /* members of a group: RT_MAX_RANKS, or PEs of a rank */
#define COLL_AHEAD 2    /* iterations whose input loads ahead of the current */
#define COLL_SLOTS 4    /* COLL_AHEAD + the current + one still storing */
#define COLL_OUT_BUFS 3

/* Message tags of the collectives: above every tag a kernel may use
 * (docs/kernels.md: user tags stay below 2^31). Each collective of a
 * kernel uses the same few tags; FIFO matching per (rank, tag) keeps
 * consecutive collectives apart, since each consumes all it is sent. */
#define COLL_TAG 0x80000000u

enum coll_op { COLL_ALL_REDUCE, COLL_REDUCE_SCATTER, COLL_ALL_GATHER, COLL_BROADCAST };

/* One iteration of a ring schedule: it reads src [e, e + n) if `own`. */
struct coll_iter {
	uint64_t e, n;
	bool own;
};

/* One call of a collective on one PE. */
struct coll {
	struct tl *tl;
	struct tl_site at;
	enum coll_op op;
	enum tl_coll_algo algo;
	uint32_t R;                 /* members */
	uint32_t me;                /* my member index */
	uint32_t root;              /* broadcast: the root's member index */
	uint32_t rank_of[COLL_MAX]; /* member -> rank */
	/* block j of the buffers: `len[j]` elements from element `off[j]` of
	 * the operation's full-size buffer (RS: src, AG: dst, AR: both) */
	uint64_t off[COLL_MAX], len[COLL_MAX];
	/* HBM byte addresses of element 0 of the full-size buffers (RS's dst
	 * and AG's src hold only my block: these are their bases) */
	uint64_t src, dst;
	enum tl_dtype dtype;
	uint32_t esz;               /* bytes per element of dtype */
	uint64_t chunk;             /* most elements in one message */
	uint64_t budget;            /* TCM bytes an algorithm may hold across steps */
	bool ring;                  /* links.topology = ring */

	/* The ring algorithms plan their schedule first (`planning`: a dry
	 * run that lists every iteration — one hop of one chain for one
	 * chunk — and the input it reads), then run it, loading inputs
	 * COLL_AHEAD iterations ahead into a ring of slots (coll.c). */
	bool planning;
	struct coll_iter *plan;
	uint64_t n_plan, cap_plan, issued, used;
	tl_tensor slot[COLL_SLOTS];
	uint64_t slot_cmd[COLL_SLOTS];
	/* results the tree algorithms round to the dtype before storing */
	tl_tensor out_buf[COLL_OUT_BUFS];
	uint32_t out_next;
};

/* ---- coll.c: helpers the algorithms share */
/* Chunks of a piece of `len` elements, and chunk q's [*o, *o + *n). */
uint64_t coll_chunks(const struct coll *c, uint64_t len);
void coll_chunk(const struct coll *c, uint64_t len, uint64_t q, uint64_t *o, uint64_t *n);
/* Elements [e, e + n) of the full-size source or destination buffer. */
tl_tensor coll_load_src(struct coll *c, uint64_t e, uint64_t n);
/* The shape every chunk of n elements takes in TCM, rows x cols = n:
 * as many rows as the DMA spreads over its queues (up to dma.queues x
 * dma.rows_per_queue, the largest that divides n), so a chunk's loads and
 * stores move at the channel's rate, not one queue's (ADR 0041). */
void coll_shape(const struct rt_config *cfg, uint64_t n, uint32_t *rows, uint32_t *cols);
/* View `v` (a row view of n elements) reshaped as coll_shape says. */
tl_tensor coll_shaped(struct tl *tl, struct tl_site at, tl_tensor v, uint64_t n);
/* A buffer of n elements of `dtype` for a result or a received chunk. */
tl_tensor coll_out_buf(struct coll *c, uint64_t n, enum tl_dtype dtype);
void coll_store_dst(struct coll *c, uint64_t e, tl_tensor t);
tl_tensor coll_load(struct coll *c, uint64_t addr, uint64_t n, enum tl_dtype dtype);
void coll_store(struct coll *c, uint64_t addr, tl_tensor t);
/* A message of `t` to member `m` with tag COLL_TAG + tag. */
void coll_send(struct coll *c, uint32_t m, uint32_t tag, enum tl_route route, tl_tensor t);
tl_tensor coll_recv(struct coll *c, uint32_t m, uint32_t tag, uint64_t n, enum tl_dtype dtype);
/* a + b into a fresh f32 tensor; into `out` (may alias a or b) if given. */
tl_tensor coll_add(struct coll *c, tl_tensor a, tl_tensor b, tl_tensor out);
/* `t` as the collective's dtype (itself when it is one already). */
tl_tensor coll_as_dtype(struct coll *c, tl_tensor t);
/* Member `m` in ring steps from me (positive: rightwards), modulo R. */
uint32_t coll_member(const struct coll *c, int64_t steps);

/* ---- coll_tree.c: the latency-optimal algorithms */
void coll_tree_all_reduce(struct coll *c);     /* recursive doubling */
void coll_tree_reduce_scatter(struct coll *c); /* recursive halving */
void coll_tree_all_gather(struct coll *c);     /* Bruck */
void coll_tree_broadcast(struct coll *c);      /* binomial tree */

/* ---- coll_pes.c: over the PEs of a rank, through its HBM */
void coll_pes_run(struct tl *tl, struct tl_site at, enum coll_op op,
		  const struct tl_coll *desc, uint64_t dst, uint64_t src, uint64_t n,
		  enum tl_dtype dtype);

#endif
