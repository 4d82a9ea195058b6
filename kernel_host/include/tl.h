/* tl.h — the kernel API (what kernel authors include).
 *
 * A kernel is a C function
 *
 *     int NAME(struct tl *tl, const struct tl_args *args);
 *
 * run once per PE (a "program"), built into kernbench (kernel_host/kernels/)
 * or compiled into a shared object against this header and run as
 * `kernbench run path/lib.so:NAME`. Return 0 on success.
 *
 * Model. The kernel runs on the PE_CPU. Every call that emits a command
 * (load, store, dot, a math op, a composite, a copy) costs PE_CPU dispatch
 * cycles (FIXED + R * logical_bytes) and returns at once: results are
 * handles whose producing command may still be running. The first call
 * that *consumes* a handle waits for its producer (auto-wait at first use,
 * lazy-load design): loads overlap whatever the kernel issues next.
 *
 * Tensors are 2-D, row-major, `rows x cols` (a vector is 1 x n), of dtype
 * f16, bf16 or f32. Handles live in HBM (tl_ref) or in the PE's TCM scratch
 * (everything else). Compute outputs are f32 by default.
 *
 * Errors. A call given bad arguments (shape mismatch, scratch overflow, a
 * composite breaking an invariant, a handle used after its scratch scope
 * ended) does not return: the run ends with one line naming the kernel,
 * the source file and line of the call, and what to fix.
 *
 * Every function below is a macro over a `*_at` function that takes the
 * caller's file and line (TL_HERE); call the macro. */
#ifndef TL_H
#define TL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kernel ABI this header describes: raised whenever a kernel built
 * against an older tl.h would misbehave with this kernbench (a changed
 * signature, struct or meaning). Every object built against this header
 * records it as the exported symbol tl_abi_version, which the launcher
 * reads from the object's ELF symbol table before a run (it never loads
 * the object itself); a missing or different version is one line, exit 2:
 * rebuild the object against this kernbench's tl.h. */
#define TL_ABI_VERSION 1u
__attribute__((weak, used, visibility("default"))) const uint32_t tl_abi_version =
	TL_ABI_VERSION;

struct tl;      /* the kernel's runtime (one per program), opaque */
struct tl_args; /* the workload's --arg name=value list, opaque */

/* Where a call was made, for error lines. */
struct tl_site {
	const char *file;
	int line;
};
#define TL_HERE ((struct tl_site){ __FILE__, __LINE__ })

/* A tensor handle: a small value, copied freely. The zero value
 * (TL_NONE) means "no tensor". `scope` is the serial number of the scratch
 * scope it was allocated in (0: persistent). */
typedef struct tl_tensor {
	uint32_t slot;
	uint32_t gen;
	uint32_t scope;
} tl_tensor;
#define TL_NONE ((tl_tensor){ 0, 0, 0 })

/* A handle whose value arrives later (load_async, recv_async, composite):
 * tl_wait resolves it. */
typedef struct tl_future {
	tl_tensor t;
} tl_future;

enum tl_dtype { TL_F16 = 0, TL_BF16 = 1, TL_F32 = 2 };
enum tl_dir { TL_LEFT = 0, TL_RIGHT = 1 };     /* IPCQ ring directions */
enum tl_mode { TL_TIMING = 0, TL_DATA = 1 };
/* Placement of an epilogue op in a composite's tile loop (flat-composite design D3).
 * TL_ACCUMULATE, on a GEMM head's only epilogue, an `add` whose `other` is
 * the composite's out (f32, TCM): the GEMM accumulates into out (out +=
 * a·b, in its f32 accumulator, as a matrix engine's accumulator does)
 * instead of writing a temporary that a MATH `add` then adds. */
enum tl_scope { TL_OUTPUT_TILE = 0, TL_K_TILE = 1, TL_ONCE = 2, TL_ACCUMULATE = 3 };

/* ------------------------------------------------------------ identity */
uint32_t tl_program_id(const struct tl *tl);   /* PE index in its rank */
uint32_t tl_num_programs(const struct tl *tl); /* PEs per rank */
uint32_t tl_rank(const struct tl *tl);
uint32_t tl_num_ranks(const struct tl *tl);
enum tl_mode tl_mode(const struct tl *tl);
/* The kernel's clock (PE_CPU time, picoseconds): the time the next
 * command would be issued. */
uint64_t tl_now_ps(const struct tl *tl);

/* --arg name=value lookup: `def` when absent. Values are decimal digits
 * only (no sign, 0x or leading zero); one that is not a number, overflows
 * or lies outside [min, max] ends the run with one line naming the
 * argument and its range. An --arg that no lookup asked for fails the run
 * (exit 2) with the list of names the kernel asked for. */
uint32_t tl_arg_u32(const struct tl_args *args, const char *name,
		    uint32_t def, uint32_t min, uint32_t max);
uint64_t tl_arg_u64(const struct tl_args *args, const char *name,
		    uint64_t def);
const char *tl_arg_str(const struct tl_args *args, const char *name,
		       const char *def);

/* ------------------------------------------------------------ memory */

/* HBM -> TCM load, lazy: posts one DMA read and returns at once; the
 * first consumer waits for it (lazy-load design). The buffer is scratch. */
tl_tensor tl_load_at(struct tl *tl, struct tl_site at, uint64_t hbm_addr,
		     uint32_t rows, uint32_t cols, enum tl_dtype dtype);
#define tl_load(tl, addr, rows, cols, dtype) \
	tl_load_at((tl), TL_HERE, (addr), (rows), (cols), (dtype))

/* The same load, as an explicit future (the load_async proposal). */
tl_future tl_load_async_at(struct tl *tl, struct tl_site at,
			   uint64_t hbm_addr, uint32_t rows, uint32_t cols,
			   enum tl_dtype dtype);
#define tl_load_async(tl, addr, rows, cols, dtype) \
	tl_load_async_at((tl), TL_HERE, (addr), (rows), (cols), (dtype))

/* Prefetch into a buffer that outlives the current scratch scope (the load
 * proposal's D4 double buffer across per-tile scopes, scratch-scope design: prefetch
 * buffers belong to the persistent arena). Loads dst's shape and dtype
 * from hbm_addr into dst, a TCM tensor allocated outside the current scope
 * (persistent, or an enclosing scope's), and returns at once; the future
 * resolves to dst. Hazards are the runtime's: the load is issued after
 * every earlier command still reading or writing dst's bytes has finished
 * (the kernel waits at this call if one is pending), and later consumers
 * of dst wait for the load (auto-wait at first use). A scope's end does
 * not wait for it unless dst lies inside the recycled region. */
tl_future tl_load_async_into_at(struct tl *tl, struct tl_site at,
				tl_tensor dst, uint64_t hbm_addr);
#define tl_load_async_into(tl, dst, addr) \
	tl_load_async_into_at((tl), TL_HERE, (dst), (addr))

/* Waits until the future's producer (load, IPCQ receive, composite) has
 * completed; returns its tensor. Also accepts any handle's future. */
tl_tensor tl_wait_at(struct tl *tl, struct tl_site at, tl_future f);
#define tl_wait(tl, f) tl_wait_at((tl), TL_HERE, (f))

/* An HBM-resident, unpinned operand: composites stream it (DMA inserted by
 * the scheduler). No command is emitted. */
tl_tensor tl_ref_at(struct tl *tl, struct tl_site at, uint64_t hbm_addr,
		    uint32_t rows, uint32_t cols, enum tl_dtype dtype);
#define tl_ref(tl, addr, rows, cols, dtype) \
	tl_ref_at((tl), TL_HERE, (addr), (rows), (cols), (dtype))

/* TCM -> HBM store of `t` (its dtype) at hbm_addr: one DMA write. */
void tl_store_at(struct tl *tl, struct tl_site at, uint64_t hbm_addr,
		 tl_tensor t);
#define tl_store(tl, addr, t) tl_store_at((tl), TL_HERE, (addr), (t))

/* A window of a wider row-major matrix in HBM: rows x cols elements whose
 * rows start `row_stride` bytes apart (>= a row; 0: contiguous), e.g.
 * columns [c0, c0 + cols) of an R x C matrix at addr + c0 * size, row
 * stride C * size. One DMA (a 2-D descriptor) like the contiguous forms,
 * timed on the bytes it moves. */
tl_tensor tl_load_rows_at(struct tl *tl, struct tl_site at, uint64_t hbm_addr,
			  uint32_t rows, uint32_t cols, uint64_t row_stride,
			  enum tl_dtype dtype);
#define tl_load_rows(tl, addr, rows, cols, stride, dtype) \
	tl_load_rows_at((tl), TL_HERE, (addr), (rows), (cols), (stride), (dtype))
tl_tensor tl_ref_rows_at(struct tl *tl, struct tl_site at, uint64_t hbm_addr,
			 uint32_t rows, uint32_t cols, uint64_t row_stride,
			 enum tl_dtype dtype);
#define tl_ref_rows(tl, addr, rows, cols, stride, dtype) \
	tl_ref_rows_at((tl), TL_HERE, (addr), (rows), (cols), (stride), (dtype))
void tl_store_rows_at(struct tl *tl, struct tl_site at, uint64_t hbm_addr,
		      uint64_t row_stride, tl_tensor t);
#define tl_store_rows(tl, addr, stride, t) \
	tl_store_rows_at((tl), TL_HERE, (addr), (stride), (t))

/* TCM -> TCM copy of src's bytes into dst (same shape and dtype, both
 * TCM): writes running state into a persistent handle (scratch-scope design D3.1). */
void tl_copy_to_at(struct tl *tl, struct tl_site at, tl_tensor dst,
		   tl_tensor src);
#define tl_copy_to(tl, dst, src) tl_copy_to_at((tl), TL_HERE, (dst), (src))

/* A fresh scratch tensor with every element = value (persistent when
 * allocated outside any scope: use for running accumulators). Issued as a
 * MATH `fill` command: one dispatch and PE_MATH time, ready when it
 * completes (consumers wait for it like for a load). */
tl_tensor tl_full_at(struct tl *tl, struct tl_site at, uint32_t rows,
		     uint32_t cols, enum tl_dtype dtype, double value);
#define tl_full(tl, rows, cols, dtype, value) \
	tl_full_at((tl), TL_HERE, (rows), (cols), (dtype), (value))
#define tl_zeros(tl, rows, cols, dtype) \
	tl_full_at((tl), TL_HERE, (rows), (cols), (dtype), 0.0)

/* A fresh scratch tensor whose contents are unspecified (what its bytes
 * last held: deterministic, but not zero): no command, no time. For a
 * buffer that a load (tl_load_async_into), a composite's out or a copy
 * writes whole before anything reads it, as NKI's nl.ndarray allocates
 * SBUF without the MATH work nl.zeros costs. Reading it first is the
 * kernel's bug, never an error the runtime can see. */
tl_tensor tl_empty_at(struct tl *tl, struct tl_site at, uint32_t rows,
		      uint32_t cols, enum tl_dtype dtype);
#define tl_empty(tl, rows, cols, dtype) tl_empty_at((tl), TL_HERE, (rows), (cols), (dtype))

/* ------------------------------------------------------------ compute
 * Each op is one MATH-only (or single-GEMM) composite command; the output
 * is a fresh f32 scratch tensor. Binary ops broadcast NumPy style (a
 * dimension of 1 stretches). */
tl_tensor tl_dot_at(struct tl *tl, struct tl_site at, tl_tensor a,
		    tl_tensor b);
#define tl_dot(tl, a, b) tl_dot_at((tl), TL_HERE, (a), (b))
/* Rows [row0, row0 + rows) of a TCM tensor, as a tensor of their own (no
 * data moves; it waits for what `t` waits for). */
tl_tensor tl_rows_at(struct tl *tl, struct tl_site at, tl_tensor t, uint32_t row0,
		     uint32_t rows);
#define tl_rows(tl, t, row0, rows) tl_rows_at((tl), TL_HERE, (t), (row0), (rows))
/* A transposed view (no data moves). */
tl_tensor tl_trans_at(struct tl *tl, struct tl_site at, tl_tensor t);
#define tl_trans(tl, t) tl_trans_at((tl), TL_HERE, (t))

tl_tensor tl_binary_at(struct tl *tl, struct tl_site at, const char *op,
		       tl_tensor a, tl_tensor b);
#define tl_add(tl, a, b) tl_binary_at((tl), TL_HERE, "add", (a), (b))
#define tl_sub(tl, a, b) tl_binary_at((tl), TL_HERE, "sub", (a), (b))
#define tl_mul(tl, a, b) tl_binary_at((tl), TL_HERE, "mul", (a), (b))
#define tl_div(tl, a, b) tl_binary_at((tl), TL_HERE, "div", (a), (b))
#define tl_maximum(tl, a, b) tl_binary_at((tl), TL_HERE, "max_elem", (a), (b))

tl_tensor tl_unary_at(struct tl *tl, struct tl_site at, const char *op,
		      tl_tensor a);
#define tl_unary(tl, op, a) tl_unary_at((tl), TL_HERE, (op), (a))
#define tl_exp(tl, a) tl_unary_at((tl), TL_HERE, "exp", (a))
#define tl_softmax(tl, a) tl_unary_at((tl), TL_HERE, "softmax", (a))

tl_tensor tl_scale_at(struct tl *tl, struct tl_site at, tl_tensor a,
		      double s);
#define tl_scale(tl, a, s) tl_scale_at((tl), TL_HERE, (a), (s))

/* Reduction along `axis` (1 or -1: across columns -> rows x 1; 0: across
 * rows -> 1 x cols), keeping dims, whatever the shape (a 1 x N row along
 * axis 0 gives N values). op: "rmax" | "rsum"; anything else, or another
 * axis, ends the kernel at the call. */
tl_tensor tl_reduce_at(struct tl *tl, struct tl_site at, const char *op,
		       tl_tensor a, int axis);
#define tl_max(tl, a, axis) tl_reduce_at((tl), TL_HERE, "rmax", (a), (axis))
#define tl_sum(tl, a, axis) tl_reduce_at((tl), TL_HERE, "rsum", (a), (axis))

/* A copy of `a` converted to `dtype` (MATH copy; rounds to nearest even). */
tl_tensor tl_astype_at(struct tl *tl, struct tl_site at, tl_tensor a,
		       enum tl_dtype dtype);
#define tl_astype(tl, a, dtype) tl_astype_at((tl), TL_HERE, (a), (dtype))

/* ------------------------------------------------------------ scratch
 * TCM scratch is a bump cursor reset at kernel entry. A scope records the
 * cursor and rewinds to it at its end (scratch-scope design); scopes nest. Handles
 * allocated inside a scope die with it: using one later is an error.
 * At scope end the host first waits for every pending command that reads
 * or writes the recycled region (so an in-flight load is never recycled
 * under the DMA); keep prefetch buffers outside the scope to overlap. */
void tl_scratch_scope_begin_at(struct tl *tl, struct tl_site at);
void tl_scratch_scope_end_at(struct tl *tl, struct tl_site at);
#define tl_scratch_scope_begin(tl) tl_scratch_scope_begin_at((tl), TL_HERE)
#define tl_scratch_scope_end(tl) tl_scratch_scope_end_at((tl), TL_HERE)
/* Block form:  TL_SCRATCH_SCOPE(tl) { ... }  — do not `break`, `goto` or
 * `return` out of the block (the end would be skipped). */
#define TL_SCRATCH_SCOPE(tl)                                            \
	for (int tl_scope_once_ = (tl_scratch_scope_begin(tl), 1);      \
	     tl_scope_once_; tl_scope_once_ = (tl_scratch_scope_end(tl), 0))

/* ------------------------------------------------------------ loops
 * A loop whose iterations are alike, which timing mode may fast-forward
 * (--fast-forward, ADR 0059): once the run repeats period after period,
 * the runtime skips whole periods and the loop's counter jumps with them.
 *
 *     TL_FOR(tl, j, 0, n) { ...iteration j... }
 *
 * declares `uint32_t j`. Alike means the iteration's work may depend on j
 * only through addresses and positions that do not change its timing: put
 * a ragged last tile, a causal diagonal, or any iteration that does more
 * or less than the others outside the loop (a loop of its own, or plain
 * code), keep what the body accumulates in tl statistics (tl_stat_add),
 * not in C variables (a skipped iteration never runs), and index what
 * one iteration hands the next by iterations run (tl_loop_skipped).
 * The runtime never skips the first periods nor the last GUARD + 1
 * periods, so a loop's drain always runs in detail. Do not `break`, `goto`
 * or `return` out of the body. Loops nest up to TL_LOOP_DEPTH deep. */
#define TL_LOOP_DEPTH 8
uint32_t tl_loop_begin_at(struct tl *tl, struct tl_site at, uint32_t first, uint32_t end,
			  uint64_t key);
bool tl_loop_more(struct tl *tl, uint32_t i);
uint32_t tl_loop_next(struct tl *tl, uint32_t i);
/* Iterations the innermost running TL_FOR has skipped so far (0 without
 * fast-forward). What an iteration hands the next (buffers issued ahead,
 * which of two running states it used) must count iterations run, i - this,
 * not i: the state at the skip stands for the state that many iterations
 * later. */
uint32_t tl_loop_skipped(const struct tl *tl);
#define TL_FOR(tl, i, first, end) TL_FOR_KEY(tl, i, first, end, 0)
/* With a key: a word saying what the iterations do that another PE sees
 * (what they send and receive). --fast-forward auto skips only while
 * every running loop has the same key, so a loop that sends is never
 * skipped beside one that only receives. */
#define TL_FOR_KEY(tl, i, first, end, key)                                            \
	for (uint32_t i = tl_loop_begin_at((tl), TL_HERE, (first), (end), (key));       \
	     tl_loop_more((tl), i); i = tl_loop_next((tl), i))

uint64_t tl_scratch_used(const struct tl *tl); /* cursor, bytes */
uint64_t tl_scratch_peak(const struct tl *tl); /* highest cursor so far */
/* The arena's size (memory.tcm_scratch_bytes): a kernel sizes its tiles
 * to the machine it runs on. */
uint64_t tl_scratch_size(const struct tl *tl);

/* ------------------------------------------------------------ composites
 * One command fusing an optional prologue (named recipes, expanded by the
 * host), a head op ("gemm" or a MATH op) and epilogue ops, lowered to the
 * flat CompositeCmd the scheduler takes (flat-composite design). */
#define TL_MAX_PROLOGUE 2
#define TL_MAX_RECIPE_ARGS 6
#define TL_MAX_EPILOGUE 4

struct tl_named {
	const char *name;
	tl_tensor t;
};

/* A recipe use: {"softmax_merge", {{"s", s}, {"m", m}, {"l", l},
 * {"O", O}}}. */
struct tl_prologue {
	const char *recipe;
	struct tl_named args[TL_MAX_RECIPE_ARGS];
};

/* An op applied to the head's output tile: binary ops take `other`, scale
 * takes `scale`. */
struct tl_epilogue {
	const char *op;
	tl_tensor other;
	double scale;
	enum tl_scope scope; /* default: per output tile */
};

struct tl_composite_desc {
	struct tl_prologue prologue[TL_MAX_PROLOGUE];
	const char *op;   /* "gemm" or a MATH op ("exp", "add", "fma", ...) */
	tl_tensor a, b, c; /* head operands; a GEMM's `a` may be left to a
			      recipe's primary output (auto-bind) */
	tl_tensor out;     /* write-back handle; TL_NONE: fresh f32 scratch */
	double scale;      /* head op "scale" */
	int axis;          /* head reductions, as tl_max / tl_sum (0: over
			      rows, 1 or -1: over columns) */
	struct tl_epilogue epilogue[TL_MAX_EPILOGUE];
};

/* Emits the composite; the future resolves to `out` when it completes. */
tl_future tl_composite_at(struct tl *tl, struct tl_site at,
			  const struct tl_composite_desc *desc);
/* variadic so a compound literal with commas can be passed directly */
#define tl_composite(tl, ...) tl_composite_at((tl), TL_HERE, (__VA_ARGS__))

/* ------------------------------------------------------------ IPCQ
 * Ring messages to the same PE index on the neighbouring rank. The n-th
 * receive from a direction matches the n-th message arriving from it. */
void tl_send_at(struct tl *tl, struct tl_site at, enum tl_dir dir,
		tl_tensor t);
#define tl_send(tl, dir, t) tl_send_at((tl), TL_HERE, (dir), (t))
tl_future tl_recv_async_at(struct tl *tl, struct tl_site at, enum tl_dir dir,
			   uint32_t rows, uint32_t cols, enum tl_dtype dtype);
#define tl_recv_async(tl, dir, rows, cols, dtype) \
	tl_recv_async_at((tl), TL_HERE, (dir), (rows), (cols), (dtype))

/* Point-to-point: a message to the same PE index on any other rank, over
 * as many links as links.topology takes (a ring forwards it hop by hop the
 * shorter way; a switch crosses two ports). The n-th receive of (rank,
 * tag) matches the n-th message that rank sent this PE with that tag;
 * tags keep independent streams apart. One dispatch per send. */
void tl_send_to_at(struct tl *tl, struct tl_site at, uint32_t rank, uint32_t tag,
		   tl_tensor t);
#define tl_send_to(tl, rank, tag, t) tl_send_to_at((tl), TL_HERE, (rank), (tag), (t))
tl_future tl_recv_from_async_at(struct tl *tl, struct tl_site at, uint32_t rank,
				uint32_t tag, uint32_t rows, uint32_t cols,
				enum tl_dtype dtype);
#define tl_recv_from_async(tl, rank, tag, rows, cols, dtype) \
	tl_recv_from_async_at((tl), TL_HERE, (rank), (tag), (rows), (cols), (dtype))

/* Waits until every PE of this rank has called tl_barrier as many times
 * (links.pe_sync_cycles each way through PE 0; free with one PE). Orders
 * what the other PEs wrote to HBM before it ahead of what this PE reads
 * after it. */
void tl_barrier_at(struct tl *tl, struct tl_site at);
#define tl_barrier(tl) tl_barrier_at((tl), TL_HERE)

/* ------------------------------------------------------------ collectives
 * All-reduce (sum, f32 partial sums), reduce-scatter, all-gather and
 * broadcast of HBM buffers, built on the IPCQ messages and DMA above
 * (docs/kernels.md, "Collectives", gives every algorithm and its α–β
 * formula). Every member calls the same collective with the same
 * description, n and dtype; the call returns when this PE's part of the
 * result is in HBM. Buffers are `n` elements of `dtype` (f16, bf16, f32)
 * at HBM byte addresses; any n.
 *
 * Blocks: reduce-scatter and all-gather cut the n elements into one block
 * per member, block i = tl_coll_block(n, members, i): the first n mod
 * members blocks one element longer. Reduce-scatter leaves the sum of
 * block i at dst of member i; all-gather takes block i from src of member
 * i and leaves all n elements at every member's dst.
 *
 * Spans (tl_coll.span):
 *   TL_SPAN_RANKS  the PEs with this PE index on the group's ranks, each
 *                  with its own buffers;
 *   TL_SPAN_SPLIT  the same group, every PE of each rank calling with the
 *                  same buffers: PE p moves the p-th part of each block
 *                  (of the buffer, for all-reduce and broadcast), so the
 *                  rank's PEs drive its links together;
 *   TL_SPAN_PES    the PEs of this rank, through its shared HBM: PE p's
 *                  input is at src + p * pe_stride (0: n elements), the
 *                  result is one buffer at dst shared by all (reduce-
 *                  scatter: block p of it is PE p's; all-gather: PE p
 *                  writes block p of it), ordered by tl_barrier.
 * Messages of collectives use tags from 2^31 up: keep the tags of
 * tl_send_to below. */
enum tl_coll_algo {
	TL_COLL_AUTO = 0,  /* the smallest α–β time for the size (docs/kernels.md) */
	TL_COLL_RING = 1,  /* one way round the group's ring */
	TL_COLL_BIDIR = 2, /* both ways round it: half the steps */
	TL_COLL_TREE = 3,  /* latency-optimal: recursive doubling / halving,
			      Bruck's all-gather, binomial broadcast */
};
enum tl_coll_span { TL_SPAN_RANKS = 0, TL_SPAN_SPLIT = 1, TL_SPAN_PES = 2 };

struct tl_coll {
	/* the group: ranks first + i * stride for i < count (count 0: every
	 * rank from first on; stride 0: 1); members are numbered by i */
	uint32_t first, count, stride;
	enum tl_coll_algo algo;
	enum tl_coll_span span;
	uint32_t root;         /* broadcast: the root's member index (PES: PE) */
	uint64_t pe_stride;    /* TL_SPAN_PES: bytes between the PEs' inputs */
	uint32_t chunk_bytes;  /* most bytes in one message (0: 65536) */
};

/* `c` may be NULL: every rank, TL_COLL_AUTO, TL_SPAN_RANKS. */
void tl_all_reduce_at(struct tl *tl, struct tl_site at, const struct tl_coll *c,
		      uint64_t dst, uint64_t src, uint64_t n, enum tl_dtype dtype);
#define tl_all_reduce(tl, c, dst, src, n, dtype) \
	tl_all_reduce_at((tl), TL_HERE, (c), (dst), (src), (n), (dtype))
void tl_reduce_scatter_at(struct tl *tl, struct tl_site at, const struct tl_coll *c,
			  uint64_t dst, uint64_t src, uint64_t n, enum tl_dtype dtype);
#define tl_reduce_scatter(tl, c, dst, src, n, dtype) \
	tl_reduce_scatter_at((tl), TL_HERE, (c), (dst), (src), (n), (dtype))
void tl_all_gather_at(struct tl *tl, struct tl_site at, const struct tl_coll *c,
		      uint64_t dst, uint64_t src, uint64_t n, enum tl_dtype dtype);
#define tl_all_gather(tl, c, dst, src, n, dtype) \
	tl_all_gather_at((tl), TL_HERE, (c), (dst), (src), (n), (dtype))
/* The root's src to every member's dst (the root's too, unless equal). */
void tl_broadcast_at(struct tl *tl, struct tl_site at, const struct tl_coll *c,
		     uint64_t dst, uint64_t src, uint64_t n, enum tl_dtype dtype);
#define tl_broadcast(tl, c, dst, src, n, dtype) \
	tl_broadcast_at((tl), TL_HERE, (c), (dst), (src), (n), (dtype))
/* Block `index` of n elements cut for `members`: [*off, *off + *len). */
void tl_coll_block(uint64_t n, uint32_t members, uint32_t index, uint64_t *off,
		   uint64_t *len);
/* The algorithm TL_COLL_AUTO picks for this call (never TL_COLL_AUTO). */
enum tl_coll_algo tl_coll_pick(const struct tl *tl, const struct tl_coll *c,
			       const char *op, uint64_t n, enum tl_dtype dtype);

/* ------------------------------------------------------------ programs
 * A program is an ordered list of steps, each a kernel with its own
 * arguments and tensor bindings, run one after the other by every PE
 * (docs/kernels.md, "Programs"). Its tensors live in HBM, the same
 * addresses on every rank (each rank its own copy, of the declared
 * shape); steps pass them on by name. A step starts on a rank once every
 * PE of the rank has finished the one before (tl_barrier), so a step may
 * read what any PE of its rank wrote before. Each step gets its own
 * statistics in summary.json and a slice named after it in the trace; in
 * data mode the tensors a step writes (TL_OUT) are saved after it as
 * STEP.TENSOR.npy and the initialised ones before the first as
 * TENSOR.npy, float32 [ranks, rows, cols]. */
typedef int (*tl_kernel_fn)(struct tl *tl, const struct tl_args *args);

/* A tensor the program binds to a step's parameter: rows x cols of dtype
 * at HBM byte address addr, row-major. */
struct tl_hbm {
	uint64_t addr;
	uint32_t rows, cols;
	enum tl_dtype dtype;
};
enum tl_access { TL_IN = 0, TL_OUT = 1 };

/* The tensor bound to parameter `name` of this step; TL_OUT: the step
 * writes it. A kernel asking for one the step does not bind (or run
 * outside a program) ends the run with one line naming both. */
struct tl_hbm tl_arg_tensor(const struct tl_args *args, const char *name,
			    enum tl_access access);
/* Whether the step binds a tensor to `name`. */
bool tl_arg_has_tensor(const struct tl_args *args, const char *name);

enum tl_init { TL_INIT_NONE = 0, TL_INIT_ZEROS, TL_INIT_RANDOM };

struct tl_prog_tensor {
	const char *name;
	uint32_t rows, cols;
	enum tl_dtype dtype;
	enum tl_init init;    /* data mode, before the first step */
	double scale, offset; /* random: offset + scale * uniform[-1, 1) */
	/* random values depend on the rank only through (rank / rank_div) %
	 * rank_mod (0: 1 and the run's ranks, every rank its own): rank_mod 1
	 * is one value everywhere (a replicated weight), rank_div = TP degree
	 * the same activations within a tensor-parallel group */
	uint32_t rank_div, rank_mod;
};
#define TL_PROG_MAX_ARGS 24
#define TL_PROG_MAX_BINDS 24
struct tl_prog_step {
	const char *name;
	tl_kernel_fn kernel;    /* the step's kernel, or NULL: by name */
	const char *kernel_name;/* a built-in or path/lib.so:NAME (error lines) */
	const char *args[TL_PROG_MAX_ARGS][2];  /* name, value; NULL-ended */
	const char *binds[TL_PROG_MAX_BINDS][2];/* parameter, tensor; NULL-ended */
};
struct tl_program {
	const struct tl_prog_tensor *tensors;
	uint32_t n_tensors;
	const struct tl_prog_step *steps;
	uint32_t n_steps;
};
/* Places the tensors in HBM (4 KiB aligned, in order, from address 0),
 * initialises them (data mode) and runs every step; returns 0 or ends the
 * run naming the step that failed. */
int tl_program_run_at(struct tl *tl, struct tl_site at, const struct tl_program *p);
#define tl_program_run(tl, p) tl_program_run_at((tl), TL_HERE, (p))

/* ------------------------------------------------------------ host data
 * Data mode only (in timing mode these do nothing and return false). They
 * cost no simulated time: they are how a kernel creates its inputs and
 * checks its outputs, not part of the modelled program. */

/* Waits for t's producer, then converts its elements to floats
 * (rows*cols written to out, n its capacity). */
bool tl_read_at(struct tl *tl, struct tl_site at, tl_tensor t, float *out,
		size_t n);
#define tl_read(tl, t, out, n) tl_read_at((tl), TL_HERE, (t), (out), (n))
/* Writes n floats into HBM at addr, converted to dtype. Ordered after
 * this program's pending commands that read or write those HBM bytes (an
 * in-flight lazy tl_load, a composite streaming a tl_ref, a tl_store): it
 * waits for them first, so a load issued before the write returns the old
 * bytes, as a blocking load would. */
bool tl_hbm_write_at(struct tl *tl, struct tl_site at, uint64_t addr,
		     enum tl_dtype dtype, const float *src, size_t n);
#define tl_hbm_write(tl, addr, dtype, src, n) \
	tl_hbm_write_at((tl), TL_HERE, (addr), (dtype), (src), (n))
/* Waits for every pending command, then reads n elements from HBM. */
bool tl_hbm_read_at(struct tl *tl, struct tl_site at, uint64_t addr,
		    enum tl_dtype dtype, float *dst, size_t n);
#define tl_hbm_read(tl, addr, dtype, dst, n) \
	tl_hbm_read_at((tl), TL_HERE, (addr), (dtype), (dst), (n))
/* Waits for every pending command, then writes the rows x cols HBM tensor
 * at addr as `file` (.npy) in the run's output directory. `file` is a
 * plain file name: no '/', no control byte, not starting with '.' and not
 * one of the run's own results (summary.json, stats.csv, op_log.jsonl,
 * trace.json, ...); anything else ends the run with one line naming the tensor. */
bool tl_save_npy_at(struct tl *tl, struct tl_site at, const char *file,
		    uint64_t addr, uint32_t rows, uint32_t cols,
		    enum tl_dtype dtype);
#define tl_save_npy(tl, file, addr, rows, cols, dtype) \
	tl_save_npy_at((tl), TL_HERE, (file), (addr), (rows), (cols), (dtype))

/* Deterministic uniform floats in [-1, 1): a splitmix64 stream seeded by
 * (run seed, rank, program, stream). Works in both modes. */
void tl_random_uniform(const struct tl *tl, uint64_t stream, float *out,
		       size_t n);

/* Size in bytes of one element. */
uint32_t tl_dtype_size(enum tl_dtype dtype);

#endif
