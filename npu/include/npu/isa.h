/* isa.h — the stage instruction set: every op a composite may carry (and
 * every op_name a GEMM or MATH stage may have), described once.
 *
 * The kernel host validates against it at emit time (so a bad op is an
 * error at the kernel's file:line), the scheduler plans from it, the engines
 * check and time stages from it, and rt_dispatch_cycles is the one place
 * the PE_CPU dispatch cost (dispatch-cost design) is computed.
 *
 * Adding an elementwise MATH op is one X() line below, its arithmetic
 * included; a new reduction or row-wise op is one line too when it fits the
 * engine's existing families (rmax/rsum, softmax). */
#ifndef NPU_ISA_H
#define NPU_ISA_H

#include <stdbool.h>
#include <stdint.h>

#include "kernbench.pb-c.h"
#include "rt/config.h"
#include "rt/err.h"

/* Which engine runs an op. */
enum rt_isa_engine { RT_ISA_ENGINE_GEMM, RT_ISA_ENGINE_MATH };

/* Latency class: which per-element figure an engine model charges.
 * SOFTMAX is the fused row softmax, charged as its parts (docs/stages.md). */
enum rt_isa_lat {
	RT_ISA_LAT_SIMPLE,         /* math.cycles_per_elem */
	RT_ISA_LAT_TRANSCENDENTAL, /* math.exp_cycles_per_elem */
	RT_ISA_LAT_REDUCE,         /* math.reduce_cycles_per_elem */
	RT_ISA_LAT_SOFTMAX,        /* rmax + exp_diff + rsum + div */
	RT_ISA_LAT_MAC,            /* the GEMM model */
	RT_ISA_LAT_COUNT
};

/* How the output shape follows from the inputs. */
enum rt_isa_shape {
	RT_ISA_SHAPE_BCAST,  /* NumPy 2-D broadcast of all inputs */
	RT_ISA_SHAPE_REDUCE, /* in0 reduced along extra `axis` (-1/1: rows x 1,
				0: 1 x cols) */
	RT_ISA_SHAPE_SAME,   /* shape of in0 (row-wise ops) */
	RT_ISA_SHAPE_MATMUL, /* in0 M x K, in1 K x N -> M x N */
	RT_ISA_SHAPE_OUT,    /* no inputs: the out's own shape (fill) */
};

/* X(ID, name, engine, arity, latency class, shape rule, required extra
 *   (NULL: none), extras the kernel host emits with it, arithmetic)
 * The extras count makes the op's logical bytes (rt_isa_op_logical_bytes).
 * The arithmetic of an elementwise (BCAST or OUT) op is one f32 expression
 * of its inputs a, b, c and its float extra x; only the MATH engine's data
 * kernel expands it (engines/src/math/kernel.c, which also defines
 * max_nan: NaN-propagating max). Other rules write `0` there: the engine
 * computes reductions, softmax and GEMM by their shape family. */
#define RT_ISA_OPS(X)                                                        \
	X(COPY, "copy", MATH, 1, SIMPLE, BCAST, NULL, 0, a)                  \
	X(EXP, "exp", MATH, 1, TRANSCENDENTAL, BCAST, NULL, 0, expf(a))      \
	X(SCALE, "scale", MATH, 1, SIMPLE, BCAST, "scale", 1, a * x)         \
	X(ADD, "add", MATH, 2, SIMPLE, BCAST, NULL, 0, a + b)                \
	X(SUB, "sub", MATH, 2, SIMPLE, BCAST, NULL, 0, a - b)                \
	X(MUL, "mul", MATH, 2, SIMPLE, BCAST, NULL, 0, a * b)                \
	X(DIV, "div", MATH, 2, SIMPLE, BCAST, NULL, 0, a / b)                \
	X(MAX_ELEM, "max_elem", MATH, 2, SIMPLE, BCAST, NULL, 0,             \
	  max_nan(a, b))                                                     \
	X(EXP_DIFF, "exp_diff", MATH, 2, TRANSCENDENTAL, BCAST, NULL, 0,     \
	  expf(a - b))                                                       \
	X(MUL_BCAST, "mul_bcast", MATH, 2, SIMPLE, BCAST, NULL, 0, a * b)    \
	X(FMA, "fma", MATH, 3, SIMPLE, BCAST, NULL, 0, fmaf(a, b, c))        \
	X(RSQRT, "rsqrt", MATH, 1, TRANSCENDENTAL, BCAST, NULL, 0,           \
	  1.0f / sqrtf(a))                                                   \
	X(SILU, "silu", MATH, 1, TRANSCENDENTAL, BCAST, NULL, 0,             \
	  a / (1.0f + expf(-a)))                                             \
	X(RMAX, "rmax", MATH, 1, REDUCE, REDUCE, NULL, 1, 0)                 \
	X(RSUM, "rsum", MATH, 1, REDUCE, REDUCE, NULL, 1, 0)                 \
	X(SOFTMAX, "softmax", MATH, 1, SOFTMAX, SAME, NULL, 0, 0)            \
	X(FILL, "fill", MATH, 0, SIMPLE, OUT, "value", 1, x)                 \
	X(GEMM, "gemm", GEMM, 2, MAC, MATMUL, NULL, 3, 0)

enum rt_isa_id {
#define RT_ISA_ENUM(id, ...) RT_ISA_##id,
	RT_ISA_OPS(RT_ISA_ENUM)
#undef RT_ISA_ENUM
	RT_ISA_COUNT
};

#define RT_ISA_MAX_ARITY 3 /* most inputs of one op (fma); fill has none */

/* The fused row softmax costs what its parts cost (docs/stages.md): these
 * four passes over in0's elements, each with its own setup, exactly as if
 * the four ops had been issued one by one. */
#define RT_ISA_SOFTMAX_PARTS \
	{ RT_ISA_RMAX, RT_ISA_EXP_DIFF, RT_ISA_RSUM, RT_ISA_DIV }

/* One row of the table. */
struct rt_isa_op {
	enum rt_isa_id id;
	const char *name;
	enum rt_isa_engine engine;
	uint32_t arity;           /* input tensors */
	enum rt_isa_lat lat;
	enum rt_isa_shape shape;
	const char *extra;        /* extra the op cannot run without, or NULL */
	uint32_t n_extras;        /* extras the kernel host emits */
};

/* The op called `name`, or NULL. */
const struct rt_isa_op *rt_isa_find(const char *name);
/* The op `id` (a valid id: programmer error otherwise). */
const struct rt_isa_op *rt_isa_get(enum rt_isa_id id);
/* "copy, exp, ..., gemm": every op name, for error lines. */
const char *rt_isa_names(void);

/* The output shape of `op` on inputs rows[i] x cols[i] (i < n_in; n_in must
 * equal op->arity) with reduction axis `axis` (-1, 0 or 1; ignored unless
 * the op reduces). An op without inputs (rule OUT) leaves *out_rows and
 * *out_cols as the caller set them: the out's own dims. RT_EINVAL with a one-line detail (no prefix: the caller
 * adds where) when the arity is wrong, shapes do not broadcast, inner dims
 * differ or the axis is bad. */
enum rt_err rt_isa_out_shape(const struct rt_isa_op *op, uint32_t n_in,
			     const uint32_t *rows, const uint32_t *cols,
			     int64_t axis, uint32_t *out_rows,
			     uint32_t *out_cols);
/* The integer value of a set extra (an f extra truncated toward zero;
 * beyond int64 or NaN saturates to INT64_MAX / INT64_MIN, so a garbage
 * float from the wire reads as an out-of-range value, never as UB). */
int64_t rt_isa_extra_int(const Kb__Extra *e);
/* Whether a reduction along `axis` reduces over rows (axis 0: each output
 * element is a column's reduction) rather than over columns (-1 or 1). */
bool rt_isa_reduces_rows(int64_t axis);

/* ------------------------------------------------------------ dispatch
 *
 * Logical bytes (dispatch-cost design D2, as built here):
 *   op       = 4 (kind + scope) + 12 per tensor (each operand and the out:
 *              8-byte address + 4-byte size) + 4 per extra
 *   composite = sum over its ops + 12 per rw_handle
 *   move (DMA, copy, IPCQ send) = 4 + 2 * 12 = 28
 * Dispatch cycles = dispatch.fixed_cycles
 *                 + ceil(logical_bytes * dispatch.cycles_per_kib / 1024). */
#define RT_ISA_OP_HEADER_BYTES 4u
#define RT_ISA_TENSOR_BYTES 12u
#define RT_ISA_EXTRA_BYTES 4u
#define RT_ISA_MOVE_LOGICAL_BYTES \
	(RT_ISA_OP_HEADER_BYTES + 2u * RT_ISA_TENSOR_BYTES)

/* Logical bytes of one op with `tensors` tensors and `extras` extras. */
uint64_t rt_isa_logical_bytes(uint64_t tensors, uint64_t extras);
/* Logical bytes of `op` as the kernel host emits it (arity + out). */
uint64_t rt_isa_op_logical_bytes(const struct rt_isa_op *op);
/* The same rule on the wire forms: one OpSpec (its operands, out and
 * extras as they are), a composite (its ops + its rw_handles), any command
 * (0 for one with no body). */
uint64_t rt_opspec_logical_bytes(const Kb__OpSpec *op);
uint64_t rt_composite_logical_bytes(const Kb__CompositeCmd *c);
uint64_t rt_command_logical_bytes(const Kb__Command *c);
/* The PE_CPU cycles to dispatch a command of `logical_bytes`: the one
 * place this formula lives. */
uint64_t rt_dispatch_cycles(const struct rt_config *cfg,
			    uint64_t logical_bytes);

#endif
