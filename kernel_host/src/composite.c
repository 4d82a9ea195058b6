/* composite.c — the composite builder: validates a tl_composite_desc at
 * emit time (flat-composite design D6), expands prologue recipes, auto-binds the head's
 * `a` to a recipe's primary output and lowers everything to one flat
 * CompositeCmd (flat-composite design D1). */
#include "tl_private.h"

#include <stdlib.h>
#include <string.h>

#define MAX_HANDLES (TL_MAX_PROLOGUE * (TL_RECIPE_MAX_OPERANDS + TL_RECIPE_MAX_SLOTS) + 8)

/* What lowering collects besides the ops: handles to wait on and to mark
 * as written. Handles (not pointers): allocations may move the table. */
struct lowering {
	struct tl_lowered low;
	tl_tensor reads[MAX_HANDLES];
	uint32_t n_reads;
	tl_tensor writes[MAX_HANDLES];
	uint32_t n_writes;
	tl_tensor rw[TL_CMD_MAX_RW];
	tl_tensor primary;  /* a recipe's primary output, or TL_NONE */
	const char *primary_recipe;
	tl_tensor out;
	tl_tensor gemm_out; /* where the head writes: out, or a temporary */
	uint32_t n_epilogue;
	bool accumulated;   /* the GEMM adds into out (TL_ACCUMULATE) */
};

/* A recipe's names bound to handles. */
struct binding {
	const char *name[TL_RECIPE_MAX_OPERANDS + TL_RECIPE_MAX_SLOTS];
	tl_tensor t[TL_RECIPE_MAX_OPERANDS + TL_RECIPE_MAX_SLOTS];
	uint32_t n;
};

static bool is_none(tl_tensor t)
{
	return t.slot == 0;
}

static bool same(tl_tensor a, tl_tensor b)
{
	return a.slot == b.slot && a.gen == b.gen;
}

static const char *const math_names[4][3] = {
	{ NULL },
	{ "src" },
	{ "src_a", "src_b" },
	{ "src_a", "src_b", "src_c" },
};

static struct tl_op *next_op(struct tl *tl, struct tl_site at,
			     struct lowering *lw)
{
	struct tl_op *op;

	if (lw->low.n_ops >= TL_CMD_MAX_OPS)
		tl_abort(tl, at, RT_ECOMPOSITE,
			 "composite has more than %d ops", TL_CMD_MAX_OPS);
	op = &lw->low.ops[lw->low.n_ops++];
	memset(op, 0, sizeof(*op));
	op->scope = KB__SCOPE__SCOPE_KERNEL;
	return op;
}

static void note(tl_tensor *list, uint32_t *n, tl_tensor t)
{
	if (*n < MAX_HANDLES)
		list[(*n)++] = t;
}

/* A MATH operand: TCM only (flat-composite design D6.7). */
static struct tl_rec *tcm_operand(struct tl *tl, struct tl_site at,
				  tl_tensor t, const char *where,
				  const char *name)
{
	struct tl_rec *r = tl_rec_get(tl, at, t, name);

	if (!r->tcm)
		tl_abort(tl, at, RT_ECOMPOSITE,
			 "%s operand '%s' is HBM-resident (tl_ref): prologue and MATH operands must be in TCM; tl_load it first (flat-composite design D6.7)",
			 where, name);
	return r;
}

/* ------------------------------------------------------------ recipes */

static tl_tensor bound(const struct binding *b, const char *name)
{
	uint32_t i;

	for (i = 0; i < b->n; i++)
		if (strcmp(b->name[i], name) == 0)
			return b->t[i];
	return TL_NONE;
}

static void bind_operands(struct tl *tl, struct tl_site at,
			  const struct tl_recipe *rc,
			  const struct tl_prologue *p, struct binding *b)
{
	uint32_t i, j;

	for (i = 0; i < TL_MAX_RECIPE_ARGS && p->args[i].name; i++) {
		for (j = 0; j < TL_RECIPE_MAX_OPERANDS && rc->operands[j].name; j++)
			if (strcmp(rc->operands[j].name, p->args[i].name) == 0)
				break;
		if (j == TL_RECIPE_MAX_OPERANDS || !rc->operands[j].name)
			tl_abort(tl, at, RT_ECOMPOSITE,
				 "recipe %s has no operand '%s'", rc->name,
				 p->args[i].name);
	}
	for (j = 0; j < TL_RECIPE_MAX_OPERANDS && rc->operands[j].name; j++) {
		const char *name = rc->operands[j].name;

		for (i = 0; i < TL_MAX_RECIPE_ARGS && p->args[i].name; i++)
			if (strcmp(p->args[i].name, name) == 0)
				break;
		if (i == TL_MAX_RECIPE_ARGS || !p->args[i].name)
			tl_abort(tl, at, RT_ECOMPOSITE,
				 "recipe %s needs operand '%s' (%s)", rc->name,
				 name, rc->operands[j].rw ? "RW" : "R");
		tcm_operand(tl, at, p->args[i].t, rc->name, name);
		b->name[b->n] = name;
		b->t[b->n++] = p->args[i].t;
	}
}

static void check_operand_shapes(struct tl *tl, struct tl_site at,
				 const struct tl_recipe *rc,
				 const struct binding *b)
{
	uint32_t j;

	for (j = 0; j < TL_RECIPE_MAX_OPERANDS && rc->operands[j].name; j++) {
		const struct tl_recipe_operand *o = &rc->operands[j];
		struct tl_rec *r = tl_rec_get(tl, at, bound(b, o->name), o->name);
		uint32_t rows = tl_rec_lrows(r), cols = tl_rec_lcols(r);
		const char *ref = o->column_of ? o->column_of : o->rows_of;
		uint32_t want;

		if (!ref)
			continue;
		want = tl_rec_lrows(tl_rec_get(tl, at, bound(b, ref), ref));
		if (rows != want || (o->column_of && cols != 1))
			tl_abort(tl, at, RT_ECOMPOSITE,
				 "recipe %s operand '%s' is %ux%u, expected %u x %s",
				 rc->name, o->name, rows, cols, want,
				 o->column_of ? "1" : "any");
	}
}

static void alloc_slots(struct tl *tl, struct tl_site at,
			const struct tl_recipe *rc, struct binding *b,
			struct lowering *lw)
{
	uint32_t j;

	for (j = 0; j < TL_RECIPE_MAX_SLOTS && rc->slots[j].name; j++) {
		const struct tl_recipe_slot *s = &rc->slots[j];
		struct tl_rec *like = tl_rec_get(tl, at, bound(b, s->like), s->like);
		uint32_t rows = tl_rec_lrows(like);
		uint32_t cols = s->column ? 1 : tl_rec_lcols(like);
		enum tl_dtype dt = s->like_dtype ? like->dtype : TL_F32;
		tl_tensor t = tl_scratch_tensor(tl, at, rows, cols, dt);

		b->name[b->n] = s->name;
		b->t[b->n++] = t;
		note(lw->writes, &lw->n_writes, t);
	}
}

static void expand_steps(struct tl *tl, struct tl_site at,
			 const struct tl_recipe *rc, const struct binding *b,
			 struct lowering *lw)
{
	uint32_t j, k;

	for (j = 0; j < TL_RECIPE_MAX_STEPS && rc->steps[j].kind; j++) {
		const struct tl_recipe_step *st = &rc->steps[j];
		const struct rt_isa_op *isa = tl_isa_math(tl, at, st->kind, 0,
							  rc->name);
		struct tl_op *op = next_op(tl, at, lw);
		uint32_t arity = isa->arity;

		op->kind = isa->name;
		for (k = 0; k < arity; k++)
			tl_op_operand(op, math_names[arity][k],
				      tl_rec_get(tl, at, bound(b, st->src[k]),
						 st->src[k]));
		if (st->has_axis)
			tl_op_extra_i(op, "axis", st->axis);
		op->has_out = true;
		op->out = tl_tref_of(tl_rec_get(tl, at, bound(b, st->dst), st->dst));
	}
}

static void lower_prologue(struct tl *tl, struct tl_site at,
			   const struct tl_prologue *p, struct lowering *lw)
{
	const struct tl_recipe *rc = tl_recipe_find(p->recipe);
	struct binding b;
	uint32_t j;

	if (!rc)
		tl_abort(tl, at, RT_ECOMPOSITE, "unknown prologue recipe '%s'",
			 p->recipe);
	memset(&b, 0, sizeof(b));
	bind_operands(tl, at, rc, p, &b);
	check_operand_shapes(tl, at, rc, &b);
	alloc_slots(tl, at, rc, &b, lw);
	expand_steps(tl, at, rc, &b, lw);
	for (j = 0; j < TL_RECIPE_MAX_OPERANDS && rc->operands[j].name; j++) {
		tl_tensor t = bound(&b, rc->operands[j].name);

		note(lw->reads, &lw->n_reads, t);
		if (!rc->operands[j].rw)
			continue;
		if (lw->low.n_rw >= TL_CMD_MAX_RW)
			tl_abort(tl, at, RT_ECOMPOSITE,
				 "composite has more than %d RW handles",
				 TL_CMD_MAX_RW);
		lw->rw[lw->low.n_rw] = t;
		lw->low.rw[lw->low.n_rw++] =
			tl_tref_of(tl_rec_get(tl, at, t, rc->operands[j].name));
		note(lw->writes, &lw->n_writes, t);
	}
	if (rc->primary_out) {
		if (!is_none(lw->primary))
			tl_abort(tl, at, RT_ECOMPOSITE,
				 "two prologue recipes declare a primary output (%s and %s)",
				 lw->primary_recipe, rc->name);
		lw->primary = bound(&b, rc->primary_out);
		lw->primary_recipe = rc->name;
	}
}

/* ------------------------------------------------------------ head */

/* The head's `a`: explicit, or auto-bound to the primary output (D5.5);
 * both is ambiguous (D6.6). */
static tl_tensor head_a(struct tl *tl, struct tl_site at,
			const struct tl_composite_desc *d,
			const struct lowering *lw)
{
	if (!is_none(lw->primary) && !is_none(d->a))
		tl_abort(tl, at, RT_ECOMPOSITE,
			 "composite gives `a` explicitly while prologue recipe %s declares a primary output that binds to it; omit `a` or the recipe (flat-composite design D6.6)",
			 lw->primary_recipe);
	if (!is_none(lw->primary))
		return lw->primary;
	if (is_none(d->a))
		tl_abort(tl, at, RT_ECOMPOSITE, "composite head %s needs `a`",
			 d->op);
	return d->a;
}

/* The write-back handle: given, or fresh f32 scratch of rows x cols. */
/* A GEMM alone (no prologue, no epilogue) may write a tl_ref: the
 * scheduler stages its out tiles and streams them to HBM (DMA_WRITE). */
static bool streams_out(const struct tl_composite_desc *d, bool gemm_head)
{
	return gemm_head && !d->prologue[0].recipe && !d->epilogue[0].op;
}

static tl_tensor head_out(struct tl *tl, struct tl_site at,
			  const struct tl_composite_desc *d, uint32_t rows,
			  uint32_t cols, bool gemm_head)
{
	struct tl_rec *r;

	if (is_none(d->out))
		return tl_scratch_tensor(tl, at, rows, cols, TL_F32);
	r = tl_rec_get(tl, at, d->out, "composite out");
	if (r->trans || (!r->tcm && !streams_out(d, gemm_head)))
		tl_abort(tl, at, RT_ECOMPOSITE,
			 "composite out must be a TCM tensor (not a transposed view; a tl_ref only "
			 "for a GEMM without prologue or epilogue, streamed to HBM)");
	if (tl_rec_lrows(r) != rows || tl_rec_lcols(r) != cols)
		tl_abort(tl, at, RT_ECOMPOSITE,
			 "composite out is %ux%u, the head produces %ux%u",
			 tl_rec_lrows(r), tl_rec_lcols(r), rows, cols);
	return d->out;
}

static bool epilogue_reads(const struct tl_composite_desc *d, tl_tensor t)
{
	uint32_t i;

	for (i = 0; i < TL_MAX_EPILOGUE && d->epilogue[i].op; i++)
		if (same(d->epilogue[i].other, t))
			return true;
	return false;
}

/* The epilogue asks the GEMM to accumulate into its out (TL_ACCUMULATE):
 * one `add` of the out itself, f32 in TCM. */
static bool accumulates(struct tl *tl, struct tl_site at, const struct tl_composite_desc *d)
{
	const struct tl_rec *ro;

	if (d->epilogue[0].scope != TL_ACCUMULATE)
		return false;
	ro = is_none(d->out) ? NULL : tl_rec_get(tl, at, d->out, "composite out");
	if (!d->epilogue[0].op || strcmp(d->epilogue[0].op, "add") || d->epilogue[1].op ||
	    !ro || !same(d->epilogue[0].other, d->out) || !ro->tcm || ro->dtype != TL_F32)
		tl_abort(tl, at, RT_ECOMPOSITE,
			 "TL_ACCUMULATE is a GEMM head's only epilogue: `add` with other = the "
			 "composite's out, an f32 TCM tensor (out += a·b)");
	return true;
}

static void lower_gemm(struct tl *tl, struct tl_site at,
		       const struct tl_composite_desc *d, struct lowering *lw)
{
	bool acc = accumulates(tl, at, d);
	tl_tensor a = head_a(tl, at, d, lw);
	struct tl_rec *ra = tl_rec_get(tl, at, a, "gemm a");
	struct tl_rec *rb = tl_rec_get(tl, at, d->b, "gemm b");
	uint32_t m = tl_rec_lrows(ra), k = tl_rec_lcols(ra);
	uint32_t n = tl_rec_lcols(rb);
	struct tl_op *op;

	if (tl_rec_lrows(rb) != k)
		tl_abort(tl, at, RT_ECOMPOSITE,
			 "gemm shape mismatch: a is %ux%u, b is %ux%u", m, k,
			 tl_rec_lrows(rb), n);
	lw->out = head_out(tl, at, d, m, n, true);
	lw->gemm_out = lw->out;
	if (!acc && epilogue_reads(d, lw->out)) {
		/* out is also an epilogue input (O = O + P·V): the GEMM writes
		 * a temporary so the epilogue reads the old out */
		lw->gemm_out = tl_scratch_tensor(tl, at, m, n, TL_F32);
		note(lw->writes, &lw->n_writes, lw->gemm_out);
	}
	op = next_op(tl, at, lw);
	op->kind = rt_isa_get(RT_ISA_GEMM)->name;
	tl_op_operand(op, "a", tl_rec_get(tl, at, a, "gemm a"));
	tl_op_operand(op, "b", tl_rec_get(tl, at, d->b, "gemm b"));
	tl_op_extra_i(op, "m", m);
	tl_op_extra_i(op, "k", k);
	tl_op_extra_i(op, "n", n);
	if (acc) { /* out += a·b: the GEMM reads out too */
		tl_op_extra_i(op, "accumulate", 1);
		note(lw->reads, &lw->n_reads, lw->out);
		lw->accumulated = true;
	}
	op->has_out = true;
	op->out = tl_tref_of(tl_rec_get(tl, at, lw->gemm_out, "gemm out"));
	note(lw->reads, &lw->n_reads, a);
	note(lw->reads, &lw->n_reads, d->b);
}

static void lower_math_head(struct tl *tl, struct tl_site at,
			    const struct tl_composite_desc *d,
			    struct lowering *lw)
{
	static const char *const names[3] = { "a", "b", "c" };
	const struct rt_isa_op *isa = tl_isa_math(tl, at, d->op, 0,
						  "composite head");
	tl_tensor in[3] = { head_a(tl, at, d, lw), d->b, d->c };
	const struct tl_rec *rin[3];
	bool reduce = isa->shape == RT_ISA_SHAPE_REDUCE;
	uint32_t k, rows, cols;
	struct tl_op *op;

	for (k = 0; k < isa->arity; k++) {
		rin[k] = tcm_operand(tl, at, in[k], d->op, names[k]);
		note(lw->reads, &lw->n_reads, in[k]);
	}
	tl_isa_shape(tl, at, RT_ECOMPOSITE, isa, isa->arity, rin, d->axis,
		     &rows, &cols);
	lw->out = head_out(tl, at, d, rows, cols, false);
	op = next_op(tl, at, lw);
	op->kind = isa->name;
	for (k = 0; k < isa->arity; k++)
		tl_op_operand(op, math_names[isa->arity][k],
			      tl_rec_get(tl, at, in[k], d->op));
	if (isa->id == RT_ISA_SCALE)
		tl_op_extra_f(op, "scale", d->scale);
	if (reduce)
		tl_op_extra_i(op, "axis", d->axis);
	op->has_out = true;
	op->out = tl_tref_of(tl_rec_get(tl, at, lw->out, "composite out"));
}

/* ------------------------------------------------------------ epilogue */

static int epilogue_scope(enum tl_scope s, bool gemm_head)
{
	if (!gemm_head)
		return KB__SCOPE__SCOPE_KERNEL;
	switch (s) {
	case TL_K_TILE:
		return KB__SCOPE__SCOPE_K_TILE;
	case TL_ONCE:
		return KB__SCOPE__SCOPE_KERNEL;
	default:
		return KB__SCOPE__SCOPE_OUTPUT_TILE;
	}
}

static void lower_epilogue(struct tl *tl, struct tl_site at,
			   const struct tl_epilogue *e, bool gemm_head,
			   struct lowering *lw)
{
	const struct rt_isa_op *isa = rt_isa_find(e->op);
	struct tl_op *op;
	const struct tl_rec *ro = tl_rec_get(tl, at, lw->out, "composite out");
	/* the first epilogue op reads the head's result, later ones out */
	tl_tensor in = lw->n_epilogue++ == 0 && !is_none(lw->gemm_out)
			       ? lw->gemm_out : lw->out;
	const struct tl_rec *rin[2] = { tl_rec_get(tl, at, in, "epilogue input") };
	uint32_t rows, cols;

	if (isa && isa->engine == RT_ISA_ENGINE_GEMM) {
		/* rejected by the GEMM count (D6.1), which names both */
		op = next_op(tl, at, lw);
		op->kind = isa->name;
		return;
	}
	isa = tl_isa_math(tl, at, e->op, 0, "composite epilogue");
	if (isa->arity > 2 || isa->shape == RT_ISA_SHAPE_REDUCE)
		tl_abort(tl, at, RT_ECOMPOSITE,
			 "composite epilogue op '%s' cannot run as an epilogue (it takes the head's result and at most one `other`, elementwise)",
			 e->op);
	if (isa->arity == 2)
		rin[1] = tcm_operand(tl, at, e->other, e->op, "other");
	tl_isa_shape(tl, at, RT_ECOMPOSITE, isa, isa->arity, rin, -1, &rows,
		     &cols);
	if (rows != tl_rec_lrows(ro) || cols != tl_rec_lcols(ro))
		tl_abort(tl, at, RT_ECOMPOSITE,
			 "composite epilogue op '%s' makes %ux%u, the composite out is %ux%u",
			 e->op, rows, cols, tl_rec_lrows(ro), tl_rec_lcols(ro));
	op = next_op(tl, at, lw);
	op->kind = isa->name;
	op->scope = epilogue_scope(e->scope, gemm_head);
	op->has_out = true;
	op->out = tl_tref_of(ro);
	/* src_a: the head's output tile; other: the second input */
	tl_op_operand(op, isa->arity == 1 ? "src" : "src_a", rin[0]);
	if (isa->arity == 2) {
		tl_op_operand(op, "other", rin[1]);
		note(lw->reads, &lw->n_reads, e->other);
	}
	if (isa->id == RT_ISA_SCALE)
		tl_op_extra_f(op, "scale", e->scale);
}

/* ------------------------------------------------------------ emit */

static void check_gemm_count(struct tl *tl, struct tl_site at,
			     const struct tl_lowered *low)
{
	uint32_t i, n = 0;

	for (i = 0; i < low->n_ops; i++) {
		const struct rt_isa_op *isa = rt_isa_find(low->ops[i].kind);

		n += isa && isa->engine == RT_ISA_ENGINE_GEMM;
	}
	if (n > 1)
		tl_abort(tl, at, RT_ECOMPOSITE,
			 "composite has %u GEMM ops; at most one is allowed (flat-composite design D6.1)",
			 n);
}

static bool in_rw(const struct lowering *lw, tl_tensor t)
{
	uint32_t i;

	for (i = 0; i < lw->low.n_rw; i++)
		if (same(lw->rw[i], t))
			return true;
	return false;
}

/* Auto-wait at first use (lazy-load design D2): inputs that a pending
 * load or receive produces. Inputs of earlier commands the scheduler runs
 * (composites, fills, copies) are ordered by its strict FIFO (D6.3): the
 * composite is dispatched at once. */
static void wait_inputs(struct tl *tl, struct tl_site at,
			const struct lowering *lw)
{
	uint32_t i;

	for (i = 0; i < lw->n_reads; i++)
		tl_wait_operand(tl, at, tl_rec_get(tl, at, lw->reads[i], "operand")->producer);
	if (!in_rw(lw, lw->out)) {
		struct tl_rec *r = tl_rec_get(tl, at, lw->out, "composite out");

		/* a streamed HBM out is ordered by the scheduler (its hazards
		 * cover HBM); TCM spans are the host's to keep apart */
		if (r->tcm)
			tl_wait_tcm_range(tl, at, r->addr, r->addr + tl_rec_bytes(r));
	}
}

tl_future tl_composite_at(struct tl *tl, struct tl_site at,
			  const struct tl_composite_desc *d)
{
	struct lowering *lw = tl->lowering_buf;
	bool gemm_head;
	uint64_t id;
	uint32_t i;
	tl_future f;

	if (!d || !d->op)
		tl_abort(tl, at, RT_ECOMPOSITE,
			 "composite needs a head op (\"gemm\" or a MATH op)");
	if (!lw)
		lw = tl->lowering_buf = calloc(1, sizeof(*lw));
	if (!lw)
		tl_abort(tl, at, RT_ENOMEM, "out of memory (composite)");
	memset(lw, 0, sizeof(*lw));
	for (i = 0; i < TL_MAX_PROLOGUE && d->prologue[i].recipe; i++)
		lower_prologue(tl, at, &d->prologue[i], lw);
	gemm_head = rt_isa_find(d->op) &&
		    rt_isa_find(d->op)->engine == RT_ISA_ENGINE_GEMM;
	if (gemm_head)
		lower_gemm(tl, at, d, lw);
	else
		lower_math_head(tl, at, d, lw);
	for (i = 0; !lw->accumulated && i < TL_MAX_EPILOGUE && d->epilogue[i].op; i++)
		lower_epilogue(tl, at, &d->epilogue[i], gemm_head, lw);
	check_gemm_count(tl, at, &lw->low);
	wait_inputs(tl, at, lw);
	id = tl_issue_lowered(tl, at, &lw->low);
	for (i = 0; i < lw->n_writes; i++)
		tl_rec_get(tl, at, lw->writes[i], "written")->producer = id;
	tl_rec_get(tl, at, lw->out, "composite out")->producer = id;
	f.t = lw->out;
	return f;
}
