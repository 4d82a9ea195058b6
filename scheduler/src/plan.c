/* plan.c — the pure plan builder: one Command in, a list of stages with
 * dependencies out (flat-composite design D3 placement, D4 DMA insertion).
 *
 * A composite with a GEMM at position g becomes
 *   prologue   ops[0..g-1], a MATH chain, once;
 *   tile loop  for each chunk of M tiles, for each N tile j, for each K
 *              tile kk, for each M tile i of the chunk (M innermost, so
 *              consecutive GEMMs use the same B tile and the array keeps
 *              it: stationary_held, a whole GEMM at SCALE-Sim's count):
 *                DMA_READ of each unpinned operand tile (double-buffered;
 *                B's once per pass over the chunk), GEMM (f32 acc over K
 *                tiles, one accumulator per output tile of the chunk),
 *                K_TILE ops; after the last K tile of (i, j) its
 *                OUTPUT_TILE ops and, for an HBM out, a DMA_WRITE;
 *   epilogue   KERNEL ops after g, once.
 * Every DMA_READ waits for the prologue's last stage, so no DMA of a
 * composite starts while its MATH prologue runs (K-before-V, D6.2).
 *
 * The only op vocabulary here is the stage instruction set (npu/isa.h,
 * docs/stages.md): op kinds, arities and shape rules come from its table.
 *
 * Over 600 lines on purpose: one pure builder (placement, DMA insertion,
 * the tile loop and its buffers) over one private plan state; it is tested
 * as a whole (test_sched_plan.c, fuzz_sched_plan.c). */
#include "sched.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define NONE (-1)
#define STAGING_ALIGN 64u
#define MAX_BUFFERS 32 /* gemm.buffers at most */

/* Everything the tile loop needs about the composite's GEMM. */
struct gemm_geom {
	const Kb__OpSpec *op;
	const Kb__TensorRef *out_ref;
	struct sched_view a, b, out; /* whole tensors */
	bool a_dma, b_dma, out_dma;  /* stream through staging */
	uint32_t m, k, n;
	uint32_t tm, tk, tn;         /* tile sizes, clamped to the dims */
	uint32_t nm, nk, nn;         /* tile counts */
	uint32_t chunk;              /* M tiles whose accumulators live at once */
	bool acc_is_out;             /* accumulate in the (TCM f32) out itself */
	bool accumulate;             /* out += A·B: out is the accumulator's start */
	uint32_t nbuf;               /* staging slots per streamed operand and out */
	uint64_t a_slot[MAX_BUFFERS], b_slot[MAX_BUFFERS], out_slot[MAX_BUFFERS];
	uint64_t acc;                /* the chunk's accumulators */
	uint64_t acc_tile;           /* bytes of one tile's accumulator */
};

/* The output tile a per-tile op runs on. */
struct tile_pos {
	uint32_t i0, rows, j0, cols;
	int slot; /* out staging slot */
};

/* Stage indices the tile loop chains on (NONE when absent). */
struct loop_state {
	int64_t prologue_last;
	int64_t compute_last; /* last GEMM or K_TILE op: the next GEMM waits */
	int64_t math_last;    /* last epilogue MATH stage */
	int64_t write_last;   /* last DMA_WRITE */
	int64_t a_user[MAX_BUFFERS], b_user[MAX_BUFFERS]; /* GEMM that last read each slot */
	int64_t out_drain[MAX_BUFFERS]; /* DMA_WRITE that last drained a slot */
	uint32_t a_uses, b_uses, out_uses;
	/* the current pass (one B tile over the chunk's M tiles) */
	bool b_loaded;                /* its B tile is in place */
	struct sched_view b_in;       /* ... there */
	int64_t b_read;               /* its DMA_READ (NONE when in place) */
	int b_slot;
	int tile_slot;                /* out slot of the tile being computed */
};

struct builder {
	const struct rt_config *cfg;
	struct sched_plan *plan;
	uint64_t id;
	const char *what; /* "composite", "dma command", "copy command" */
	uint64_t staging_base;
};

const char *sched_engine_name(Kb__Engine engine)
{
	switch (engine) {
	case KB__ENGINE__ENGINE_DMA_READ:
		return "dma_read";
	case KB__ENGINE__ENGINE_DMA_WRITE:
		return "dma_write";
	case KB__ENGINE__ENGINE_GEMM:
		return "gemm";
	case KB__ENGINE__ENGINE_MATH:
		return "math";
	default:
		return "?";
	}
}

void sched_plan_init(struct sched_plan *plan)
{
	memset(plan, 0, sizeof(*plan));
}

void sched_plan_release(struct sched_plan *plan)
{
	free(plan->stages);
	sched_plan_init(plan);
}

void sched_plan_rebase(struct sched_plan *plan, uint64_t staging_base)
{
	uint64_t old = plan->staging_base;

	for (uint32_t s = 0; s < plan->n_stages; s++) {
		struct sched_stage *st = &plan->stages[s];
		struct sched_view *views[SCHED_MAX_IN + 2] = {&st->out, &st->acc};
		uint32_t n = 2;

		for (uint32_t i = 0; i < st->n_in; i++)
			views[n++] = &st->in[i];
		for (uint32_t i = 0; i < n; i++)
			if (views[i]->staged)
				views[i]->addr = views[i]->addr - old +
						 staging_base;
	}
	plan->staging_base = staging_base;
}

/* ------------------------------------------------------------ stages */

static enum rt_err push_stage(struct builder *bd, const struct sched_stage *st,
			      int64_t *index)
{
	struct sched_plan *p = bd->plan;

	if (p->n_stages == p->cap_stages) {
		uint32_t cap = p->cap_stages ? p->cap_stages * 2 : 16;
		struct sched_stage *s = realloc(p->stages, cap * sizeof(*s));

		if (!s)
			return rt_fail(RT_ENOMEM, "%s %llu: no memory for %u stages",
				       bd->what, (unsigned long long)bd->id, cap);
		p->stages = s;
		p->cap_stages = cap;
	}
	p->stages[p->n_stages] = *st;
	*index = p->n_stages++;
	return RT_EOK;
}

/* Adds an earlier stage as a dependency, keeping deps ascending, unique. */
static void add_dep(struct sched_stage *st, int64_t dep)
{
	uint32_t at = st->n_deps;

	if (dep < 0)
		return;
	for (uint32_t i = 0; i < st->n_deps; i++)
		if (st->deps[i] == (uint32_t)dep)
			return;
	assert(st->n_deps < SCHED_MAX_DEPS); /* the builder's own bound */
	while (at > 0 && st->deps[at - 1] > (uint32_t)dep) {
		st->deps[at] = st->deps[at - 1];
		at--;
	}
	st->deps[at] = (uint32_t)dep;
	st->n_deps++;
}

/* ------------------------------------------------------------ views */

/* The whole-tensor view of `t`: leading dims fold into rows. */
static enum rt_err tensor_view(const struct builder *bd, const Kb__TensorRef *t,
			       const char *name, struct sched_view *v)
{
	uint64_t rows = 1;

	if (!t)
		return rt_fail(RT_EDECODE, "%s %llu: tensor %s is missing",
			       bd->what, (unsigned long long)bd->id, name);
	if (t->n_shape == 0 || t->n_shape > 4)
		return rt_fail(RT_EDECODE,
			       "%s %llu: tensor %s has %zu dims, expected 1 to 4",
			       bd->what, (unsigned long long)bd->id, name,
			       t->n_shape);
	for (size_t d = 0; d < t->n_shape; d++)
		if (t->shape[d] == 0)
			return rt_fail(RT_EDECODE,
				       "%s %llu: tensor %s has a zero dim (axis %zu)",
				       bd->what, (unsigned long long)bd->id,
				       name, d);
	if (rt_dtype_bytes(t->dtype) == 0)
		return rt_fail(RT_EDECODE, "%s %llu: tensor %s has unknown dtype %d",
			       bd->what, (unsigned long long)bd->id, name,
			       (int)t->dtype);
	for (size_t d = 0; d + 1 < t->n_shape; d++)
		rows *= t->shape[d];
	if (rows > UINT32_MAX)
		return rt_fail(RT_EDECODE, "%s %llu: tensor %s has too many rows",
			       bd->what, (unsigned long long)bd->id, name);
	if (t->row_stride && t->row_stride < (uint64_t)t->shape[t->n_shape - 1] *
						     rt_dtype_bytes(t->dtype))
		return rt_fail(RT_EDECODE, "%s %llu: tensor %s has a row stride of %llu bytes, "
			       "below its row", bd->what, (unsigned long long)bd->id, name,
			       (unsigned long long)t->row_stride);
	*v = (struct sched_view){
		.space = t->space,
		.addr = t->addr,
		.rows = (uint32_t)rows,
		.cols = t->shape[t->n_shape - 1],
		.row_stride = t->row_stride ? t->row_stride
					    : (uint64_t)t->shape[t->n_shape - 1] *
						      rt_dtype_bytes(t->dtype),
		.dtype = t->dtype,
		.trans = t->trans,
	};
	return RT_EOK;
}

/* Logical dims of a view (the transpose when trans). */
static uint32_t logical_rows(const struct sched_view *v)
{
	return v->trans ? v->cols : v->rows;
}

static uint32_t logical_cols(const struct sched_view *v)
{
	return v->trans ? v->rows : v->cols;
}

/* The stored window holding logical rows [r0, r0+nr) x cols [c0, c0+nc):
 * for a transposed view (e.g. B stored [N,K]) logical (kk, jj) is stored
 * rows jj.., cols kk... */
static struct sched_view tile_of(const struct sched_view *v, uint32_t r0,
				 uint32_t nr, uint32_t c0, uint32_t nc)
{
	struct sched_view t = *v;
	uint64_t eb = rt_dtype_bytes(v->dtype);
	uint32_t sr0 = v->trans ? c0 : r0, sc0 = v->trans ? r0 : c0;

	t.addr = v->addr + sr0 * v->row_stride + sc0 * eb;
	t.rows = v->trans ? nc : nr;
	t.cols = v->trans ? nr : nc;
	return t;
}

/* A contiguous staging buffer at `addr` shaped like stored tile `like`. */
static struct sched_view staging_view(const struct sched_view *like,
				      uint64_t addr, Kb__DType dtype)
{
	return (struct sched_view){
		.space = KB__SPACE__SPACE_TCM,
		.addr = addr,
		.rows = like->rows,
		.cols = like->cols,
		.row_stride = (uint64_t)like->cols * rt_dtype_bytes(dtype),
		.dtype = dtype,
		.trans = like->trans,
		.staged = true,
	};
}

/* ------------------------------------------------------------ validation */

static bool is_gemm(const Kb__OpSpec *op)
{
	const struct rt_isa_op *isa = rt_isa_find(op->kind);

	return isa && isa->engine == RT_ISA_ENGINE_GEMM;
}

/* Reduction axis of an op (-1 when absent, as the engines read it). */
static int64_t op_axis(const Kb__OpSpec *op)
{
	for (size_t i = 0; i < op->n_extras; i++) {
		const Kb__Extra *e = op->extras[i];

		if (e && strcmp(e->name, "axis") == 0 &&
		    e->value_case != KB__EXTRA__VALUE__NOT_SET)
			return rt_isa_extra_int(e);
	}
	return -1;
}

static bool has_extra(const Kb__OpSpec *op, const char *name)
{
	for (size_t i = 0; i < op->n_extras; i++)
		if (op->extras[i] && strcmp(op->extras[i]->name, name) == 0 &&
		    op->extras[i]->value_case != KB__EXTRA__VALUE__NOT_SET)
			return true;
	return false;
}

/* The op's whole tensors obey its shape rule (per-tile stages are slices
 * of these, so the engines' per-stage check then holds too). */
static enum rt_err check_math_shapes(const struct builder *bd, size_t pos,
				     const Kb__OpSpec *op,
				     const struct rt_isa_op *isa)
{
	uint32_t rows[RT_ISA_MAX_ARITY], cols[RT_ISA_MAX_ARITY], r, c;
	struct sched_view v;
	enum rt_err err;

	for (size_t i = 0; i < op->n_operands; i++) {
		err = tensor_view(bd, op->operands[i]->tensor,
				  op->operands[i]->name, &v);
		if (err)
			return err;
		rows[i] = logical_rows(&v);
		cols[i] = logical_cols(&v);
	}
	if ((err = tensor_view(bd, op->out, "out", &v)))
		return err;
	r = logical_rows(&v); /* stands for an op without inputs */
	c = logical_cols(&v);
	if (rt_isa_out_shape(isa, (uint32_t)op->n_operands, rows, cols,
			     op_axis(op), &r, &c))
		return rt_fail(RT_EDECODE, "%s %llu: op %zu (%s): %s", bd->what,
			       (unsigned long long)bd->id, pos, op->kind,
			       rt_last_error());
	if (logical_rows(&v) != r || logical_cols(&v) != c)
		return rt_fail(RT_EDECODE,
			       "%s %llu: op %zu (%s) out is %ux%u, its inputs make %ux%u",
			       bd->what, (unsigned long long)bd->id, pos,
			       op->kind, logical_rows(&v), logical_cols(&v), r,
			       c);
	return RT_EOK;
}

static enum rt_err check_math_op(const struct builder *bd, size_t pos,
				 const Kb__OpSpec *op)
{
	const struct rt_isa_op *m = rt_isa_find(op->kind);

	if (!m || m->engine != RT_ISA_ENGINE_MATH)
		return rt_fail(RT_EDECODE,
			       "%s %llu: op %zu has unknown MATH op kind \"%s\" "
			       "(expected one of %s)",
			       bd->what, (unsigned long long)bd->id, pos,
			       op->kind ? op->kind : "", rt_isa_names());
	if (op->n_operands != m->arity)
		return rt_fail(RT_EDECODE,
			       "%s %llu: op %zu (%s) has %zu operands, expected %u",
			       bd->what, (unsigned long long)bd->id, pos,
			       op->kind, op->n_operands, m->arity);
	for (size_t i = 0; i < op->n_operands; i++)
		if (!op->operands[i] || !op->operands[i]->tensor)
			return rt_fail(RT_EDECODE,
				       "%s %llu: op %zu (%s) operand %zu has no tensor",
				       bd->what, (unsigned long long)bd->id,
				       pos, op->kind, i);
	if (!op->out)
		return rt_fail(RT_EDECODE, "%s %llu: op %zu (%s) has no out",
			       bd->what, (unsigned long long)bd->id, pos,
			       op->kind);
	if (m->extra && !has_extra(op, m->extra))
		return rt_fail(RT_EDECODE, "%s %llu: op %zu (%s) needs extra '%s'",
			       bd->what, (unsigned long long)bd->id, pos,
			       op->kind, m->extra);
	return check_math_shapes(bd, pos, op, m);
}

/* Finds the GEMM (at most one, D6.1) and checks every MATH op and the
 * size cap. *g is the GEMM's position or NONE. */
static enum rt_err check_composite(const struct builder *bd,
				   const Kb__CompositeCmd *c, int64_t *g)
{
	uint64_t bytes = rt_composite_logical_bytes(c);
	uint64_t cap = bd->cfg->max_composite_logical_bytes;
	enum rt_err err;

	if (c->n_ops == 0)
		return rt_fail(RT_EDECODE, "composite %llu has no ops",
			       (unsigned long long)bd->id);
	/* Reject, never segment: a composite is one atomic recipe, and
	 * splitting it would expose half-updated state (m, l, O). */
	if (cap != 0 && bytes > cap)
		return rt_fail(RT_ECOMPOSITE,
			       "composite %llu is %llu logical bytes, above "
			       "max_composite_logical_bytes %llu (split it in the "
			       "kernel; the scheduler does not segment composites)",
			       (unsigned long long)bd->id,
			       (unsigned long long)bytes,
			       (unsigned long long)cap);
	*g = NONE;
	for (size_t i = 0; i < c->n_ops; i++) {
		if (!c->ops[i])
			return rt_fail(RT_EDECODE, "composite %llu: op %zu is empty",
				       (unsigned long long)bd->id, i);
		if (!is_gemm(c->ops[i])) {
			err = check_math_op(bd, i, c->ops[i]);
			if (err)
				return err;
			continue;
		}
		if (*g != NONE)
			return rt_fail(RT_ECOMPOSITE,
				       "composite %llu has two GEMM ops (positions "
				       "%lld and %zu); at most one is allowed (flat-composite design D6.1)",
				       (unsigned long long)bd->id,
				       (long long)*g, i);
		*g = (int64_t)i;
	}
	for (int64_t i = 0; i < *g; i++)
		if (c->ops[i]->scope != KB__SCOPE__SCOPE_KERNEL)
			return rt_fail(RT_ECOMPOSITE,
				       "composite %llu: op %lld (%s) before the GEMM "
				       "has a tile scope; only KERNEL runs there",
				       (unsigned long long)bd->id, (long long)i,
				       c->ops[i]->kind);
	return RT_EOK;
}

/* ------------------------------------------------------------ MATH stages */

static bool same_tensor(const Kb__TensorRef *t, const Kb__TensorRef *u)
{
	return t->space == u->space && t->addr == u->addr;
}

/* View of one tensor of a per-tile op: tensors shaped like the GEMM out
 * are sliced to the tile (the GEMM's HBM out lives in its staging slot); a
 * row (1 x N) or column (M x 1) that broadcasts over the out is sliced to
 * the tile's columns or rows; anything else is used whole. */
static enum rt_err epilogue_view(const struct builder *bd,
				 const struct gemm_geom *gm,
				 const struct tile_pos *tile,
				 const Kb__TensorRef *t, const char *name,
				 struct sched_view *v)
{
	enum rt_err err = tensor_view(bd, t, name, v);

	if (err || !tile)
		return err;
	if (!v->trans && v->rows == gm->m && v->cols == gm->n) {
		*v = tile_of(v, tile->i0, tile->rows, tile->j0, tile->cols);
		if (gm->out_dma && same_tensor(t, gm->out_ref))
			*v = staging_view(v, gm->out_slot[tile->slot],
					  v->dtype);
	} else if (logical_rows(v) == 1 && logical_cols(v) == gm->n) {
		*v = tile_of(v, 0, 1, tile->j0, tile->cols);
	} else if (logical_cols(v) == 1 && logical_rows(v) == gm->m) {
		*v = tile_of(v, tile->i0, tile->rows, 0, 1);
	}
	return RT_EOK;
}

/* A MATH stage for `op`, on the whole tensors or (tile != NULL) a tile. */
static enum rt_err math_stage(const struct builder *bd, const Kb__OpSpec *op,
			      const struct gemm_geom *gm,
			      const struct tile_pos *tile,
			      struct sched_stage *st)
{
	enum rt_err err;

	*st = (struct sched_stage){
		.engine = KB__ENGINE__ENGINE_MATH,
		.op_kind = "math",
		.op_name = op->kind,
		.n_in = (uint32_t)op->n_operands,
		.op = op,
	};
	for (size_t i = 0; i < op->n_operands; i++) {
		err = epilogue_view(bd, gm, tile, op->operands[i]->tensor,
				    op->operands[i]->name, &st->in[i]);
		if (err)
			return err;
	}
	return epilogue_view(bd, gm, tile, op->out, "out", &st->out);
}

/* Appends ops[from..to) as a chain of whole-tensor MATH stages, the first
 * waiting for `after` and the extra dependencies; returns the last. */
static enum rt_err math_chain(struct builder *bd, const Kb__CompositeCmd *c,
			      size_t from, size_t to, int64_t after,
			      const int64_t *also, size_t n_also,
			      int64_t *last)
{
	struct sched_stage st;
	enum rt_err err;

	*last = after;
	for (size_t i = from; i < to; i++) {
		err = math_stage(bd, c->ops[i], NULL, NULL, &st);
		if (err)
			return err;
		add_dep(&st, *last);
		for (size_t j = 0; i == from && j < n_also; j++)
			add_dep(&st, also[j]);
		err = push_stage(bd, &st, last);
		if (err)
			return err;
	}
	return RT_EOK;
}

/* ------------------------------------------------------------ GEMM setup */

static const Kb__TensorRef *find_operand(const Kb__OpSpec *op,
					 const char *name)
{
	for (size_t i = 0; i < op->n_operands; i++)
		if (op->operands[i] && strcmp(op->operands[i]->name, name) == 0)
			return op->operands[i]->tensor;
	return NULL;
}

/* Checks extra `name` (if given) against the dim derived from shapes. */
static enum rt_err check_dim_extra(const struct builder *bd,
				   const Kb__OpSpec *op, const char *name,
				   uint32_t derived)
{
	for (size_t i = 0; i < op->n_extras; i++) {
		const Kb__Extra *e = op->extras[i];

		if (!e || strcmp(e->name, name) != 0)
			continue;
		if (e->value_case != KB__EXTRA__VALUE_I || e->i != derived)
			return rt_fail(RT_EDECODE,
				       "composite %llu: gemm extra %s = %lld does "
				       "not match the operand shapes (%u)",
				       (unsigned long long)bd->id, name,
				       e->value_case == KB__EXTRA__VALUE_I
					       ? (long long)e->i : -1LL,
				       derived);
	}
	return RT_EOK;
}

static enum rt_err gemm_shapes(const struct builder *bd, struct gemm_geom *gm)
{
	const Kb__OpSpec *op = gm->op;
	enum rt_err err;

	gm->out_ref = op->out;
	if ((err = tensor_view(bd, find_operand(op, "a"), "gemm a", &gm->a)) ||
	    (err = tensor_view(bd, find_operand(op, "b"), "gemm b", &gm->b)) ||
	    (err = tensor_view(bd, op->out, "gemm out", &gm->out)))
		return err;
	gm->m = logical_rows(&gm->a);
	gm->k = logical_cols(&gm->a);
	gm->n = logical_cols(&gm->b);
	if (logical_rows(&gm->b) != gm->k || gm->out.trans ||
	    gm->out.rows != gm->m || gm->out.cols != gm->n)
		return rt_fail(RT_EDECODE,
			       "composite %llu: gemm shapes do not agree: a %ux%u, "
			       "b %ux%u, out %ux%u (expected MxK, KxN, MxN)",
			       (unsigned long long)bd->id, gm->m, gm->k,
			       logical_rows(&gm->b), gm->n, gm->out.rows,
			       gm->out.cols);
	if ((err = check_dim_extra(bd, op, "m", gm->m)) ||
	    (err = check_dim_extra(bd, op, "k", gm->k)) ||
	    (err = check_dim_extra(bd, op, "n", gm->n)))
		return err;
	return RT_EOK;
}

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

static uint64_t align_up(uint64_t x)
{
	return (x + STAGING_ALIGN - 1) / STAGING_ALIGN * STAGING_ALIGN;
}

/* Places `n` slots of `bytes` each at *off (when `used`). */
static void place_slots(bool used, uint32_t n, uint64_t bytes, uint64_t *off,
			uint64_t slot[MAX_BUFFERS])
{
	for (uint32_t s = 0; used && s < n; s++) {
		slot[s] = *off;
		*off = align_up(*off + bytes);
	}
}

static bool has_k_tile_ops(const Kb__CompositeCmd *c)
{
	for (size_t i = 0; i < c->n_ops; i++)
		if (c->ops[i]->scope == KB__SCOPE__SCOPE_K_TILE)
			return true;
	return false;
}

/* True when the GEMM may accumulate over K in its out tiles themselves:
 * an f32 TCM out (not staged), no K_TILE op reading it between K steps,
 * and no operand sharing its bytes. */
static bool acc_in_out(const struct gemm_geom *gm, const Kb__CompositeCmd *c)
{
	uint64_t lo = gm->out.addr, hi = lo + (uint64_t)gm->out.rows * gm->out.row_stride;
	const struct sched_view *in[2] = { &gm->a, &gm->b };

	if (gm->out_dma || gm->out.dtype != KB__DTYPE__DTYPE_F32 || gm->out.trans ||
	    gm->out.space != KB__SPACE__SPACE_TCM || has_k_tile_ops(c))
		return false;
	for (int i = 0; i < 2; i++) {
		uint64_t a = in[i]->addr, b = a + (uint64_t)in[i]->rows * in[i]->row_stride;

		if (in[i]->space == KB__SPACE__SPACE_TCM && a < hi && lo < b)
			return false;
	}
	return true;
}

/* Tiles the GEMM and lays out its staging: 2 slots per streamed operand,
 * 2 out slots for an HBM out, and when K spans several tiles an f32
 * accumulator per output tile of a chunk of M tiles (as many as the
 * region holds) unless the out itself can accumulate. */
static enum rt_err gemm_layout(struct builder *bd, struct gemm_geom *gm,
			       const Kb__CompositeCmd *c)
{
	const struct rt_config *cfg = bd->cfg;
	uint64_t off = bd->staging_base, region = cfg->tcm_staging_bytes / 2;
	uint64_t a_bytes, b_bytes, out_bytes, acc_bytes, need;

	if (!cfg->gemm_tile_m || !cfg->gemm_tile_n || !cfg->gemm_tile_k)
		return rt_fail(RT_ECONFIG, "composite %llu: gemm tile sizes must "
			       "be nonzero (gemm.tile_m/n/k)",
			       (unsigned long long)bd->id);
	/* a stage's B tile is at most one fold of the array (gemm.array_rows x
	 * gemm.array_cols), so the M tiles can stream through each fold */
	gm->tm = min_u32(cfg->gemm_tile_m, gm->m);
	gm->tk = min_u32(min_u32(cfg->gemm_tile_k, cfg->gemm_array_rows ? cfg->gemm_array_rows
								    : UINT32_MAX), gm->k);
	gm->tn = min_u32(min_u32(cfg->gemm_tile_n, cfg->gemm_array_cols ? cfg->gemm_array_cols
								    : UINT32_MAX), gm->n);
	gm->nm = (gm->m + gm->tm - 1) / gm->tm;
	gm->nk = (gm->k + gm->tk - 1) / gm->tk;
	gm->nn = (gm->n + gm->tn - 1) / gm->tn;
	gm->a_dma = !find_operand(gm->op, "a")->pinned &&
		    gm->a.space == KB__SPACE__SPACE_HBM;
	gm->b_dma = !find_operand(gm->op, "b")->pinned &&
		    gm->b.space == KB__SPACE__SPACE_HBM;
	gm->out_dma = gm->out.space == KB__SPACE__SPACE_HBM;
	a_bytes = (uint64_t)gm->tm * gm->tk * rt_dtype_bytes(gm->a.dtype);
	b_bytes = (uint64_t)gm->tk * gm->tn * rt_dtype_bytes(gm->b.dtype);
	out_bytes = (uint64_t)gm->tm * gm->tn * rt_dtype_bytes(gm->out.dtype);
	gm->accumulate = has_extra(gm->op, "accumulate") && gm->out.space == KB__SPACE__SPACE_TCM &&
			 gm->out.dtype == KB__DTYPE__DTYPE_F32 && !gm->out.trans;
	if (has_extra(gm->op, "accumulate") && !gm->accumulate)
		return rt_fail(RT_EDECODE, "composite %llu: an accumulating gemm needs an f32 TCM out",
			       (unsigned long long)bd->id);
	gm->acc_is_out = gm->accumulate || (gm->nk > 1 && acc_in_out(gm, c));
	gm->acc_tile = gm->nk > 1 && !gm->acc_is_out ? align_up((uint64_t)gm->tm * gm->tn * 4u) : 0;
	gm->nbuf = cfg->gemm_buffers < 2 ? 2 : cfg->gemm_buffers > MAX_BUFFERS ? MAX_BUFFERS
										: cfg->gemm_buffers;
	place_slots(gm->a_dma, gm->nbuf, a_bytes, &off, gm->a_slot);
	place_slots(gm->b_dma, gm->nbuf, b_bytes, &off, gm->b_slot);
	place_slots(gm->out_dma, gm->nbuf, out_bytes, &off, gm->out_slot);
	gm->acc = off;
	/* as many M tiles' accumulators as the region holds (at least one);
	 * ops inside the accumulation see one output tile's K steps in a row,
	 * as they always did */
	gm->chunk = has_k_tile_ops(c) ? 1 : gm->nm;
	if (gm->acc_tile) {
		uint64_t used = off - bd->staging_base, room = used < region ? region - used : 0;

		if (room / gm->acc_tile < gm->chunk)
			gm->chunk = room / gm->acc_tile ? (uint32_t)(room / gm->acc_tile) : 1;
	}
	acc_bytes = gm->acc_tile * gm->chunk;
	off += acc_bytes;
	need = off - bd->staging_base;
	if (need > region)
		return rt_fail(RT_ESCRATCH,
			       "composite %llu needs %llu staging bytes (a 2x%llu, "
			       "b 2x%llu, out 2x%llu, acc %llu) but a staging region "
			       "holds %llu (tcm_staging_bytes / 2); lower the gemm "
			       "tile sizes or raise tcm_staging_bytes",
			       (unsigned long long)bd->id,
			       (unsigned long long)need,
			       (unsigned long long)(gm->a_dma ? a_bytes : 0),
			       (unsigned long long)(gm->b_dma ? b_bytes : 0),
			       (unsigned long long)(gm->out_dma ? out_bytes : 0),
			       (unsigned long long)acc_bytes,
			       (unsigned long long)region);
	bd->plan->staging_bytes = need;
	return RT_EOK;
}

/* ------------------------------------------------------------ tile loop */

/* The GEMM input for a logical tile: a DMA_READ into the next staging slot
 * (after the prologue and after the GEMM gemm.buffers uses back freed the
 * slot), or the tensor's own tile in place. */
static enum rt_err gemm_input(struct builder *bd, const struct gemm_geom *gm,
			      const struct sched_view *whole,
			      bool dma, const uint64_t slot_addr[MAX_BUFFERS],
			      int64_t user[MAX_BUFFERS], uint32_t *uses,
			      const struct loop_state *ls, uint32_t r0,
			      uint32_t nr, uint32_t c0, uint32_t nc,
			      struct sched_view *in, int64_t *read, int *slot)
{
	struct sched_view tile = tile_of(whole, r0, nr, c0, nc);
	struct sched_stage st;

	*read = NONE;
	*slot = 0;
	*in = tile;
	if (!dma)
		return RT_EOK;
	*slot = (int)(*uses % gm->nbuf);
	(*uses)++;
	*in = staging_view(&tile, slot_addr[*slot], tile.dtype);
	st = (struct sched_stage){
		.engine = KB__ENGINE__ENGINE_DMA_READ,
		.op_kind = "memory",
		.op_name = "dma_read",
		.n_in = 1,
	};
	st.in[0] = tile;
	st.in[0].trans = false; /* DMA moves the stored layout */
	st.out = *in;
	st.out.trans = false;
	add_dep(&st, ls->prologue_last);
	add_dep(&st, user[*slot]);
	return push_stage(bd, &st, read);
}

/* Per-tile ops of `scope` after the GEMM, each after the previous. */
static enum rt_err tile_ops(struct builder *bd, const Kb__CompositeCmd *c,
			    size_t g, Kb__Scope scope,
			    const struct gemm_geom *gm,
			    const struct tile_pos *tile, struct loop_state *ls)
{
	struct sched_stage st;
	enum rt_err err;
	int64_t idx;

	for (size_t i = g + 1; i < c->n_ops; i++) {
		if (c->ops[i]->scope != scope)
			continue;
		err = math_stage(bd, c->ops[i], gm, tile, &st);
		if (err)
			return err;
		add_dep(&st, ls->compute_last);
		add_dep(&st, ls->math_last);
		err = push_stage(bd, &st, &idx);
		if (err)
			return err;
		ls->math_last = idx;
		if (scope == KB__SCOPE__SCOPE_K_TILE)
			ls->compute_last = idx;
	}
	return RT_EOK;
}

/* B's tile for the current pass: a DMA_READ into the next B slot at the
 * pass's first stage, the same slot (or the tensor's own tile) after. */
static enum rt_err pass_b(struct builder *bd, const struct gemm_geom *gm,
			  struct loop_state *ls, uint32_t k0, uint32_t nk,
			  const struct tile_pos *tile)
{
	if (ls->b_loaded)
		return RT_EOK;
	ls->b_loaded = true;
	return gemm_input(bd, gm, &gm->b, gm->b_dma, gm->b_slot, ls->b_user, &ls->b_uses, ls,
			  k0, nk, tile->j0, tile->cols, &ls->b_in, &ls->b_read, &ls->b_slot);
}

/* One K step of output tile `tile` (the `at`-th M tile of its chunk):
 * operand DMAs, the GEMM, K_TILE ops. */
static enum rt_err k_step(struct builder *bd, const Kb__CompositeCmd *c,
			  size_t g, const struct gemm_geom *gm,
			  const struct tile_pos *tile, uint32_t kk, uint32_t at,
			  struct loop_state *ls)
{
	uint32_t k0 = kk * gm->tk, nk = min_u32(gm->tk, gm->k - k0);
	bool held = ls->b_loaded; /* an earlier stage of this pass used this B */
	struct sched_stage st = {
		.engine = KB__ENGINE__ENGINE_GEMM,
		.op_kind = "gemm",
		.op_name = "gemm",
		.n_in = 2,
		.has_acc = gm->nk > 1 || gm->accumulate,
		.first = kk == 0 && !gm->accumulate, /* accumulating: start from out */
		.last = kk == gm->nk - 1,
		.stationary_held = held,
	};
	int64_t a_read, idx;
	int a_slot;
	enum rt_err err;
	struct sched_view out_tile = tile_of(&gm->out, tile->i0, tile->rows,
					     tile->j0, tile->cols);

	err = gemm_input(bd, gm, &gm->a, gm->a_dma, gm->a_slot, ls->a_user,
			 &ls->a_uses, ls, tile->i0, tile->rows, k0, nk,
			 &st.in[0], &a_read, &a_slot);
	if (!err)
		err = pass_b(bd, gm, ls, k0, nk, tile);
	if (err)
		return err;
	st.in[1] = ls->b_in;
	st.out = gm->out_dma ? staging_view(&out_tile, gm->out_slot[tile->slot],
					    gm->out.dtype)
			     : out_tile;
	if (st.has_acc && gm->acc_is_out) {
		st.acc = out_tile;
	} else if (st.has_acc) {
		st.acc = staging_view(&out_tile, gm->acc + at * gm->acc_tile, KB__DTYPE__DTYPE_F32);
		st.acc.trans = false;
	}
	add_dep(&st, a_read);
	add_dep(&st, held ? NONE : ls->b_read);
	/* after the previous GEMM by the engine's own order (in-order issue,
	 * docs/stages.md), so it can queue behind it; after a MATH stage
	 * (K_TILE op, prologue) by a dependency */
	if (ls->compute_last != NONE &&
	    bd->plan->stages[ls->compute_last].engine != KB__ENGINE__ENGINE_GEMM)
		add_dep(&st, ls->compute_last);
	if (st.last && gm->out_dma)
		add_dep(&st, ls->out_drain[tile->slot]);
	if ((err = push_stage(bd, &st, &idx)))
		return err;
	if (gm->a_dma)
		ls->a_user[a_slot] = idx;
	if (gm->b_dma)
		ls->b_user[ls->b_slot] = idx;
	ls->compute_last = idx;
	return tile_ops(bd, c, g, KB__SCOPE__SCOPE_K_TILE, gm, tile, ls);
}

/* Stores a finished output tile from its staging slot to HBM. */
static enum rt_err drain_tile(struct builder *bd, const struct gemm_geom *gm,
			      const struct tile_pos *tile, struct loop_state *ls)
{
	struct sched_view out_tile = tile_of(&gm->out, tile->i0, tile->rows,
					     tile->j0, tile->cols);
	struct sched_stage st = {
		.engine = KB__ENGINE__ENGINE_DMA_WRITE,
		.op_kind = "memory",
		.op_name = "dma_write",
		.n_in = 1,
		.out = out_tile,
	};
	enum rt_err err;
	int64_t idx;

	st.in[0] = staging_view(&out_tile, gm->out_slot[tile->slot],
				gm->out.dtype);
	add_dep(&st, ls->compute_last);
	add_dep(&st, ls->math_last);
	/* not on the previous drain: each writes its own tile, and the write
	 * channel keeps dma.outstanding of them in flight, retiring them in
	 * order (the last one ends the command) */
	if ((err = push_stage(bd, &st, &idx)))
		return err;
	ls->out_drain[tile->slot] = idx;
	ls->write_last = idx;
	return RT_EOK;
}

/* The output tile (i, j). Its out slot is taken at its last K step, so
 * slots alternate between drains; with one M tile per chunk (the tile's K
 * steps in a row) at its first, so ops between them see it too. */
static struct tile_pos tile_at(const struct gemm_geom *gm, uint32_t i, uint32_t j,
			       uint32_t kk, struct loop_state *ls)
{
	struct tile_pos t = {
		.i0 = i * gm->tm,
		.rows = min_u32(gm->tm, gm->m - i * gm->tm),
		.j0 = j * gm->tn,
		.cols = min_u32(gm->tn, gm->n - j * gm->tn),
		.slot = ls->tile_slot,
	};

	if (gm->chunk == 1 ? kk == 0 : kk == gm->nk - 1)
		t.slot = ls->tile_slot = (int)(ls->out_uses++ % gm->nbuf);
	return t;
}

/* Chunks of M tiles; within one, per N tile and K tile a pass over the
 * chunk's M tiles with one B tile (M innermost). */
static enum rt_err tile_loop(struct builder *bd, const Kb__CompositeCmd *c,
			     size_t g, const struct gemm_geom *gm,
			     struct loop_state *ls)
{
	enum rt_err err;

	for (uint32_t c0 = 0; c0 < gm->nm; c0 += gm->chunk) {
		uint32_t c1 = c0 + gm->chunk < gm->nm ? c0 + gm->chunk : gm->nm;

		for (uint32_t j = 0; j < gm->nn; j++) {
			for (uint32_t kk = 0; kk < gm->nk; kk++) {
				bool last = kk == gm->nk - 1;

				ls->b_loaded = false;
				ls->b_read = NONE;
				for (uint32_t i = c0; i < c1; i++) {
					struct tile_pos tile = tile_at(gm, i, j, kk, ls);

					err = k_step(bd, c, g, gm, &tile, kk, i - c0, ls);
					if (!err && last)
						err = tile_ops(bd, c, g, KB__SCOPE__SCOPE_OUTPUT_TILE,
							       gm, &tile, ls);
					if (!err && last && gm->out_dma)
						err = drain_tile(bd, gm, &tile, ls);
					if (err)
						return err;
				}
			}
		}
	}
	return RT_EOK;
}

/* ------------------------------------------------------------ commands */

static enum rt_err build_gemm_composite(struct builder *bd,
					const Kb__CompositeCmd *c, size_t g)
{
	struct gemm_geom gm = {.op = c->ops[g]};
	struct loop_state ls = {
		.prologue_last = NONE, .math_last = NONE, .write_last = NONE,
	};
	int64_t tail[2], last;
	enum rt_err err;

	for (int i = 0; i < MAX_BUFFERS; i++)
		ls.a_user[i] = ls.b_user[i] = ls.out_drain[i] = NONE;
	if ((err = gemm_shapes(bd, &gm)) || (err = gemm_layout(bd, &gm, c)))
		return err;
	err = math_chain(bd, c, 0, g, NONE, NULL, 0, &ls.prologue_last);
	if (err)
		return err;
	ls.compute_last = ls.prologue_last;
	if ((err = tile_loop(bd, c, g, &gm, &ls)))
		return err;
	/* KERNEL ops after the GEMM: once, after the whole loop. */
	tail[0] = ls.math_last;
	tail[1] = ls.write_last;
	for (size_t i = g + 1; i < c->n_ops; i++) {
		if (c->ops[i]->scope != KB__SCOPE__SCOPE_KERNEL)
			continue;
		err = math_chain(bd, c, i, i + 1, ls.compute_last, tail, 2,
				 &last);
		if (err)
			return err;
		ls.compute_last = last;
	}
	return RT_EOK;
}

static enum rt_err build_composite(struct builder *bd,
				   const Kb__CompositeCmd *c)
{
	int64_t g = NONE, last;
	enum rt_err err = check_composite(bd, c, &g);

	if (err)
		return err;
	if (g == NONE)
		return math_chain(bd, c, 0, c->n_ops, NONE, NULL, 0, &last);
	return build_gemm_composite(bd, c, (size_t)g);
}

/* One stage moving `src` to `dst` on `engine`. */
static enum rt_err move_stage(struct builder *bd, Kb__Engine engine,
			      const Kb__TensorRef *src,
			      const Kb__TensorRef *dst)
{
	struct sched_stage st = {.engine = engine, .n_in = 1};
	enum rt_err err;
	int64_t idx;

	if ((err = tensor_view(bd, src, "src", &st.in[0])) ||
	    (err = tensor_view(bd, dst, "dst", &st.out)))
		return err;
	if (st.in[0].rows != st.out.rows || st.in[0].cols != st.out.cols)
		return rt_fail(RT_EDECODE,
			       "%s %llu: src %ux%u and dst %ux%u differ",
			       bd->what, (unsigned long long)bd->id,
			       st.in[0].rows, st.in[0].cols, st.out.rows,
			       st.out.cols);
	st.op_kind = engine == KB__ENGINE__ENGINE_MATH ? "math" : "memory";
	st.op_name = engine == KB__ENGINE__ENGINE_MATH ? "copy"
						       : sched_engine_name(engine);
	return push_stage(bd, &st, &idx);
}

/* A copy crossing HBM -> TCM or TCM -> HBM is a DMA; others a MATH copy. */
static Kb__Engine copy_engine(const Kb__CopyCmd *c)
{
	if (c->src && c->dst && c->src->space != c->dst->space)
		return c->src->space == KB__SPACE__SPACE_HBM
			       ? KB__ENGINE__ENGINE_DMA_READ
			       : KB__ENGINE__ENGINE_DMA_WRITE;
	return KB__ENGINE__ENGINE_MATH;
}

enum rt_err sched_plan_build(const Kb__Command *cmd,
			     const struct rt_config *cfg,
			     uint64_t staging_base, struct sched_plan *plan)
{
	struct builder bd = {.cfg = cfg, .plan = plan,
			     .staging_base = staging_base};

	plan->n_stages = 0;
	plan->staging_bytes = 0;
	plan->staging_base = staging_base;
	switch (cmd->body_case) {
	case KB__COMMAND__BODY_COMPOSITE:
		bd.what = "composite";
		plan->command = bd.id = cmd->composite->id;
		return build_composite(&bd, cmd->composite);
	case KB__COMMAND__BODY_DMA:
		bd.what = "dma command";
		plan->command = bd.id = cmd->dma->id;
		return move_stage(&bd, cmd->dma->write
					       ? KB__ENGINE__ENGINE_DMA_WRITE
					       : KB__ENGINE__ENGINE_DMA_READ,
				  cmd->dma->src, cmd->dma->dst);
	case KB__COMMAND__BODY_COPY:
		bd.what = "copy command";
		plan->command = bd.id = cmd->copy->id;
		return move_stage(&bd, copy_engine(cmd->copy), cmd->copy->src,
				  cmd->copy->dst);
	default:
		return rt_fail(RT_EDECODE, "command has no body (composite, "
			       "dma or copy expected)");
	}
}
