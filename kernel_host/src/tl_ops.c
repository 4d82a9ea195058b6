/* tl_ops.c — the kernel-facing ops: loads (lazy and as futures), refs,
 * stores, TCM copies, fills, and the single-op compute commands.
 *
 * Over 600 lines on purpose: every op a kernel calls (loads, refs, stores,
 * copies, fills, single-op compute), each a short function of one shape
 * (check the operands, build one command, emit it) over the helpers of the
 * first two sections; split, the halves would share those helpers through
 * yet another header. */
#include "tl_private.h"

#include <string.h>

/* ------------------------------------------------------------ helpers */

static void check_dims(struct tl *tl, struct tl_site at, const char *what,
		       uint32_t rows, uint32_t cols, enum tl_dtype dtype)
{
	if (rows == 0 || cols == 0)
		tl_abort(tl, at, RT_EKERNEL, "%s: empty shape %ux%u", what,
			 rows, cols);
	if ((unsigned)dtype > TL_F32)
		tl_abort(tl, at, RT_EKERNEL, "%s: unknown dtype %d", what,
			 (int)dtype);
}

static void check_hbm(struct tl *tl, struct tl_site at, const char *what,
		      uint64_t addr, uint64_t bytes)
{
	uint64_t size = tl->s.cfg->hbm_bytes;

	if (addr > size || bytes > size - addr)
		tl_abort(tl, at, RT_EOOB,
			 "%s: HBM bytes [%llu, %llu) outside HBM of %llu bytes",
			 what, (unsigned long long)addr,
			 (unsigned long long)(addr + bytes),
			 (unsigned long long)size);
}

/* ------------------------------------------------------------ instruction set */

const struct rt_isa_op *tl_isa_math(struct tl *tl, struct tl_site at,
				    const char *name, uint32_t arity,
				    const char *api)
{
	const struct rt_isa_op *op = rt_isa_find(name);

	if (!op)
		tl_abort(tl, at, RT_EKERNEL,
			 "%s: unknown op '%s' (the instruction set has %s)", api,
			 name ? name : "(null)", rt_isa_names());
	if (op->engine != RT_ISA_ENGINE_MATH)
		tl_abort(tl, at, RT_EKERNEL, "%s: '%s' is not a MATH op", api,
			 name);
	if (arity && op->arity != arity)
		tl_abort(tl, at, RT_EKERNEL,
			 "%s: op '%s' takes %u input%s, %s gives it %u", api, name,
			 op->arity, op->arity == 1 ? "" : "s", api, arity);
	return op;
}

void tl_isa_shape(struct tl *tl, struct tl_site at, enum rt_err code,
		  const struct rt_isa_op *op, uint32_t n_in,
		  const struct tl_rec *const *in, int64_t axis,
		  uint32_t *rows, uint32_t *cols)
{
	uint32_t r[RT_ISA_MAX_ARITY], c[RT_ISA_MAX_ARITY];

	for (uint32_t i = 0; i < n_in && i < RT_ISA_MAX_ARITY; i++) {
		r[i] = tl_rec_lrows(in[i]);
		c[i] = tl_rec_lcols(in[i]);
	}
	if (rt_isa_out_shape(op, n_in, r, c, axis, rows, cols))
		tl_abort(tl, at, code, "%s", rt_last_error());
}

/* The latest pending command writing HBM bytes [lo, hi), or 0. */
static uint64_t pending_hbm_writer(const struct tl *tl, uint64_t lo,
				   uint64_t hi)
{
	uint64_t best = 0;
	uint32_t i;

	for (i = 0; i < tl->n_pending; i++) {
		const struct tl_cmd *c = &tl->cmds[tl->pending[i]];

		if (c->hbm_lo < c->hbm_hi && c->hbm_lo < hi && lo < c->hbm_hi &&
		    tl->pending[i] > best)
			best = tl->pending[i];
	}
	return best;
}

/* Waits for every pending command touching TCM [lo, hi). */
void tl_wait_tcm_range(struct tl *tl, struct tl_site at, uint64_t lo,
		       uint64_t hi)
{
	uint32_t i;

	for (i = 0; i < tl->n_pending;) {
		uint64_t id = tl->pending[i];
		const struct tl_cmd *c = &tl->cmds[id];

		if (c->tcm_lo < c->tcm_hi && c->tcm_lo < hi && lo < c->tcm_hi) {
			tl_wait_cmd(tl, at, id);
			i = 0; /* the pending list changed */
			continue;
		}
		i++;
	}
}

static bool hbm_touches(const struct tl_cmd *c, uint64_t lo, uint64_t hi)
{
	return (c->hbm_lo < c->hbm_hi && c->hbm_lo < hi && lo < c->hbm_hi) ||
	       (c->hbm_rlo < c->hbm_rhi && c->hbm_rlo < hi && lo < c->hbm_rhi);
}

void tl_wait_hbm_range(struct tl *tl, struct tl_site at, uint64_t lo,
		       uint64_t hi)
{
	uint32_t i;

	for (i = 0; i < tl->n_pending;) {
		uint64_t id = tl->pending[i];

		if (hbm_touches(&tl->cmds[id], lo, hi)) {
			tl_wait_cmd(tl, at, id);
			i = 0; /* the pending list changed */
			continue;
		}
		i++;
	}
}

static struct tl_tref hbm_tref(uint64_t addr, uint32_t rows, uint32_t cols,
			       uint64_t stride, enum tl_dtype dtype)
{
	struct tl_tref t = { .tcm = false, .pinned = false, .addr = addr,
			     .rows = rows, .cols = cols, .dtype = dtype, .row_stride = stride };
	return t;
}

/* HBM bytes from the first element of rows x cols, rows `stride` apart
 * (0: contiguous), to the end of the last row. */
static uint64_t hbm_span(uint32_t rows, uint32_t cols, uint64_t stride, enum tl_dtype dtype)
{
	uint64_t row = (uint64_t)cols * tl_dtype_size(dtype);

	return stride ? (uint64_t)(rows - 1) * stride + row : rows * row;
}

static void check_stride(struct tl *tl, struct tl_site at, const char *what, uint32_t cols,
			 uint64_t stride, enum tl_dtype dtype)
{
	if (stride && stride < (uint64_t)cols * tl_dtype_size(dtype))
		tl_abort(tl, at, RT_EKERNEL,
			 "%s: a row stride of %llu bytes is below a row of %u elements (%llu bytes)",
			 what, (unsigned long long)stride, cols,
			 (unsigned long long)cols * tl_dtype_size(dtype));
}

static void emit_dma(struct tl *tl, struct tl_site at, uint64_t id,
		     bool write, const struct tl_tref *src,
		     const struct tl_tref *dst)
{
	Kb__DmaCmd dma = KB__DMA_CMD__INIT;
	Kb__Command cmd = KB__COMMAND__INIT;
	struct tl_wire_tref ws, wd;

	tl_wire_tref(&ws, src);
	tl_wire_tref(&wd, dst);
	dma.id = id;
	dma.write = write;
	dma.src = &ws.ref;
	dma.dst = &wd.ref;
	cmd.body_case = KB__COMMAND__BODY_DMA;
	cmd.dma = &dma;
	tl_emit(tl, at, &cmd);
}

/* ------------------------------------------------------------ memory */

/* One DMA read of r's shape from hbm_addr into r (TCM); r's consumers
 * wait for it (lazy, lazy-load design D2). */
static void emit_load(struct tl *tl, struct tl_site at, struct tl_rec *r,
		      uint64_t hbm_addr, uint64_t stride)
{
	uint64_t bytes = tl_rec_bytes(r);
	uint64_t id = tl_cmd_new(tl, at, TL_CMD_DMA);
	struct tl_tref src = hbm_tref(hbm_addr, r->rows, r->cols, stride, r->dtype);
	struct tl_tref dst = tl_tref_of(r);

	tl->cmds[id].load = true;
	tl_cmd_touch_tcm(tl, id, r->addr, bytes);
	tl_cmd_read_hbm(tl, id, hbm_addr, hbm_span(r->rows, r->cols, stride, r->dtype));
	emit_dma(tl, at, id, false, &src, &dst);
	r->producer = id;
}

tl_tensor tl_load_rows_at(struct tl *tl, struct tl_site at, uint64_t hbm_addr, uint32_t rows,
			  uint32_t cols, uint64_t row_stride, enum tl_dtype dtype)
{
	uint64_t bytes;
	tl_tensor t;

	check_dims(tl, at, "tl_load", rows, cols, dtype);
	check_stride(tl, at, "tl_load_rows", cols, row_stride, dtype);
	bytes = hbm_span(rows, cols, row_stride, dtype);
	check_hbm(tl, at, "tl_load", hbm_addr, bytes);
	/* a read must not overtake a pending store of the same bytes */
	tl_wait_cmd(tl, at, pending_hbm_writer(tl, hbm_addr, hbm_addr + bytes));
	t = tl_scratch_tensor(tl, at, rows, cols, dtype);
	emit_load(tl, at, &tl->slots[t.slot], hbm_addr, row_stride);
	return t;
}

tl_tensor tl_load_at(struct tl *tl, struct tl_site at, uint64_t hbm_addr,
		     uint32_t rows, uint32_t cols, enum tl_dtype dtype)
{
	return tl_load_rows_at(tl, at, hbm_addr, rows, cols, 0, dtype);
}

tl_future tl_load_async_at(struct tl *tl, struct tl_site at,
			   uint64_t hbm_addr, uint32_t rows, uint32_t cols,
			   enum tl_dtype dtype)
{
	tl_future f = { tl_load_at(tl, at, hbm_addr, rows, cols, dtype) };
	return f;
}

tl_future tl_load_async_into_at(struct tl *tl, struct tl_site at,
				tl_tensor dst, uint64_t hbm_addr)
{
	struct tl_rec *r = tl_rec_get(tl, at, dst, "tl_load_async_into dst");
	uint64_t bytes;

	if (!r->tcm)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_load_async_into dst is HBM-resident (tl_ref); load into a TCM tensor allocated outside the tile scope (e.g. tl_zeros)");
	if (r->trans)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_load_async_into dst is a transposed view; load into the tensor itself");
	bytes = tl_rec_bytes(r);
	check_hbm(tl, at, "tl_load_async_into", hbm_addr, bytes);
	/* RAW on the HBM bytes, WAR/WAW on dst: earlier commands first */
	tl_wait_cmd(tl, at, pending_hbm_writer(tl, hbm_addr, hbm_addr + bytes));
	tl_wait_tcm_range(tl, at, r->addr, r->addr + bytes);
	emit_load(tl, at, r, hbm_addr, 0);
	return (tl_future){ dst };
}

tl_tensor tl_wait_at(struct tl *tl, struct tl_site at, tl_future f)
{
	tl_wait_tensor(tl, at, f.t);
	return f.t;
}

tl_tensor tl_row_view(struct tl *tl, struct tl_site at, tl_tensor t, uint64_t col,
		      uint32_t cols, uint64_t producer)
{
	struct tl_rec *r = tl_rec_get(tl, at, t, "view source"), *v;
	struct tl_rec copy = *r;
	tl_tensor view;
	uint32_t gen, scope;

	if (!copy.tcm || copy.trans || copy.rows != 1 || cols == 0 || col + cols > copy.cols)
		tl_abort(tl, at, RT_EKERNEL, "view of columns [%llu, %llu) of a %ux%u tensor",
			 (unsigned long long)col, (unsigned long long)(col + cols), copy.rows,
			 copy.cols);
	view = tl_rec_new(tl, at, &v);
	gen = v->gen;
	scope = v->scope;
	*v = copy;
	v->gen = gen;
	v->scope = scope;
	v->addr = copy.addr + col * tl_dtype_size(copy.dtype);
	v->cols = cols;
	v->producer = producer;
	return view;
}

tl_tensor tl_rows_at(struct tl *tl, struct tl_site at, tl_tensor t, uint32_t row0,
		     uint32_t rows)
{
	struct tl_rec *r = tl_rec_get(tl, at, t, "tl_rows source"), *v;
	struct tl_rec copy = *r;
	tl_tensor view;
	uint32_t gen, scope;

	if (!copy.tcm || copy.trans || rows == 0 || row0 > copy.rows || rows > copy.rows - row0)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_rows: rows [%u, %u) of a %ux%u%s tensor (it needs a TCM tensor, not a "
			 "tl_ref or a transposed view)", row0, row0 + rows, copy.rows, copy.cols,
			 copy.tcm ? "" : " HBM");
	view = tl_rec_new(tl, at, &v);
	gen = v->gen;
	scope = v->scope;
	*v = copy;
	v->gen = gen;
	v->scope = scope;
	v->addr = copy.addr + (uint64_t)row0 * copy.cols * tl_dtype_size(copy.dtype);
	v->rows = rows;
	return view;
}

tl_tensor tl_ref_rows_at(struct tl *tl, struct tl_site at, uint64_t hbm_addr, uint32_t rows,
			 uint32_t cols, uint64_t row_stride, enum tl_dtype dtype)
{
	struct tl_rec *r;
	uint64_t bytes;
	tl_tensor t;

	check_dims(tl, at, "tl_ref", rows, cols, dtype);
	check_stride(tl, at, "tl_ref_rows", cols, row_stride, dtype);
	bytes = hbm_span(rows, cols, row_stride, dtype);
	check_hbm(tl, at, "tl_ref", hbm_addr, bytes);
	t = tl_rec_new(tl, at, &r);
	r->addr = hbm_addr;
	r->rows = rows;
	r->cols = cols;
	r->dtype = dtype;
	r->row_stride = row_stride;
	r->producer = pending_hbm_writer(tl, hbm_addr, hbm_addr + bytes);
	return t;
}

tl_tensor tl_ref_at(struct tl *tl, struct tl_site at, uint64_t hbm_addr,
		    uint32_t rows, uint32_t cols, enum tl_dtype dtype)
{
	return tl_ref_rows_at(tl, at, hbm_addr, rows, cols, 0, dtype);
}

static void store(struct tl *tl, struct tl_site at, uint64_t hbm_addr, uint64_t stride,
		  tl_tensor t, bool wait);

void tl_store_at(struct tl *tl, struct tl_site at, uint64_t hbm_addr,
		 tl_tensor t)
{
	store(tl, at, hbm_addr, 0, t, true);
}

void tl_store_rows_at(struct tl *tl, struct tl_site at, uint64_t hbm_addr, uint64_t row_stride,
		      tl_tensor t)
{
	store(tl, at, hbm_addr, row_stride, t, true);
}

void tl_store_queued(struct tl *tl, struct tl_site at, uint64_t hbm_addr, tl_tensor t)
{
	store(tl, at, hbm_addr, 0, t, false);
}

static void store(struct tl *tl, struct tl_site at, uint64_t hbm_addr, uint64_t stride,
		  tl_tensor t, bool wait)
{
	struct tl_rec *r = tl_rec_get(tl, at, t, "tl_store source");
	struct tl_tref src, dst;
	uint64_t bytes, id;

	if (!r->tcm)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_store source is HBM-resident (tl_ref); store a TCM tensor");
	if (r->trans)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_store of a transposed view; store the tensor itself");
	check_stride(tl, at, "tl_store_rows", r->cols, stride, r->dtype);
	bytes = hbm_span(r->rows, r->cols, stride, r->dtype);
	check_hbm(tl, at, "tl_store", hbm_addr, bytes);
	/* a plain store waits as every operand does (tl_wait_operand); a
	 * queued one leaves the ordering to the scheduler except after a
	 * receive, which is the host's own */
	if (wait)
		tl_wait_operand(tl, at, r->producer);
	else if (r->producer && tl->cmds[r->producer].kind == TL_CMD_RECV)
		tl_wait_cmd(tl, at, r->producer);
	id = tl_cmd_new(tl, at, TL_CMD_DMA);
	tl_cmd_touch_tcm(tl, id, r->addr, tl_rec_bytes(r));
	tl->cmds[id].hbm_lo = hbm_addr;
	tl->cmds[id].hbm_hi = hbm_addr + bytes;
	src = tl_tref_of(r);
	dst = hbm_tref(hbm_addr, r->rows, r->cols, stride, r->dtype);
	emit_dma(tl, at, id, true, &src, &dst);
}

void tl_copy_to_at(struct tl *tl, struct tl_site at, tl_tensor dst,
		   tl_tensor src)
{
	struct tl_rec *rd = tl_rec_get(tl, at, dst, "tl_copy_to dst");
	struct tl_rec *rs = tl_rec_get(tl, at, src, "tl_copy_to src");
	Kb__CopyCmd copy = KB__COPY_CMD__INIT;
	Kb__Command cmd = KB__COMMAND__INIT;
	struct tl_wire_tref ws, wd;
	struct tl_tref ts, td;
	uint64_t id;

	if (!rd->tcm || !rs->tcm)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_copy_to needs TCM tensors (dst %s, src %s)",
			 rd->tcm ? "tcm" : "hbm", rs->tcm ? "tcm" : "hbm");
	if (tl_rec_lrows(rd) != tl_rec_lrows(rs) ||
	    tl_rec_lcols(rd) != tl_rec_lcols(rs) || rd->trans != rs->trans)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_copy_to shape mismatch: dst %ux%u, src %ux%u",
			 tl_rec_lrows(rd), tl_rec_lcols(rd), tl_rec_lrows(rs),
			 tl_rec_lcols(rs));
	if (rd->dtype != rs->dtype)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_copy_to dtype mismatch: dst %u, src %u (use tl_astype)",
			 (unsigned)rd->dtype, (unsigned)rs->dtype);
	tl_wait_operand(tl, at, rs->producer);
	tl_wait_tcm_range(tl, at, rd->addr, rd->addr + tl_rec_bytes(rd));
	id = tl_cmd_new(tl, at, TL_CMD_COPY);
	tl_cmd_touch_tcm(tl, id, rs->addr, tl_rec_bytes(rs));
	tl_cmd_touch_tcm(tl, id, rd->addr, tl_rec_bytes(rd));
	ts = tl_tref_of(rs);
	td = tl_tref_of(rd);
	tl_wire_tref(&ws, &ts);
	tl_wire_tref(&wd, &td);
	copy.id = id;
	copy.src = &ws.ref;
	copy.dst = &wd.ref;
	cmd.body_case = KB__COMMAND__BODY_COPY;
	cmd.copy = &copy;
	tl_emit(tl, at, &cmd);
	rd->producer = id;
}

/* ------------------------------------------------------------ compute */

void tl_op_operand(struct tl_op *op, const char *name, const struct tl_rec *r)
{
	op->operand_name[op->n_operands] = name;
	op->operand[op->n_operands] = tl_tref_of(r);
	op->n_operands++;
}

void tl_op_extra_i(struct tl_op *op, const char *name, int64_t v)
{
	struct tl_extra *e = &op->extra[op->n_extras++];

	e->name = name;
	e->is_f = false;
	e->i = v;
}

void tl_op_extra_f(struct tl_op *op, const char *name, double v)
{
	struct tl_extra *e = &op->extra[op->n_extras++];

	e->name = name;
	e->is_f = true;
	e->f = v;
}

static void touch_tref(struct tl *tl, uint64_t id, const struct tl_tref *t)
{
	uint64_t bytes = (uint64_t)t->rows * t->cols * tl_dtype_size(t->dtype);

	if (t->tcm)
		tl_cmd_touch_tcm(tl, id, t->addr, bytes);
	else /* a streamed tl_ref: the composite reads these HBM bytes */
		tl_cmd_read_hbm(tl, id, t->addr,
				hbm_span(t->rows, t->cols, t->row_stride, t->dtype));
}

uint64_t tl_issue_lowered(struct tl *tl, struct tl_site at,
			  const struct tl_lowered *low)
{
	uint64_t bytes = tl_lowered_logical_bytes(low);
	uint64_t cap = tl->s.cfg->max_composite_logical_bytes;
	uint64_t id;
	uint32_t i, j;

	if (cap && bytes > cap)
		tl_abort(tl, at, RT_ECOMPOSITE,
			 "composite of %u ops is %llu logical bytes, above the cap of %llu (dispatch.max_composite_logical_bytes); split it",
			 low->n_ops, (unsigned long long)bytes,
			 (unsigned long long)cap);
	id = tl_cmd_new(tl, at, TL_CMD_COMPOSITE);
	for (i = 0; i < low->n_ops; i++) {
		const struct tl_tref *o = &low->ops[i].out;

		for (j = 0; j < low->ops[i].n_operands; j++)
			touch_tref(tl, id, &low->ops[i].operand[j]);
		if (low->ops[i].has_out && o->tcm)
			touch_tref(tl, id, o);
		else if (low->ops[i].has_out) { /* a streamed HBM out: written */
			tl->cmds[id].hbm_lo = o->addr;
			tl->cmds[id].hbm_hi = o->addr + (uint64_t)o->rows * o->cols *
							     tl_dtype_size(o->dtype);
		}
	}
	for (i = 0; i < low->n_rw; i++)
		touch_tref(tl, id, &low->rw[i]);
	tl_emit_composite(tl, at, id, low);
	return id;
}

/* MATH operands are TCM-only (flat-composite design D6.7). */
static struct tl_rec *math_input(struct tl *tl, struct tl_site at,
				 tl_tensor t, const char *op)
{
	struct tl_rec *r = tl_rec_get(tl, at, t, op);

	if (!r->tcm)
		tl_abort(tl, at, RT_ECOMPOSITE,
			 "%s operand is HBM-resident (tl_ref): MATH operands must be in TCM; tl_load it first (flat-composite design D6.7)",
			 op);
	tl_wait_operand(tl, at, r->producer);
	return r;
}

/* Issues a one-op MATH composite writing a fresh f32 rows x cols tensor. */
static tl_tensor math_single(struct tl *tl, struct tl_site at,
			     struct tl_lowered *low, uint32_t rows,
			     uint32_t cols, enum tl_dtype dtype)
{
	tl_tensor out = tl_scratch_tensor(tl, at, rows, cols, dtype);
	struct tl_rec *ro = &tl->slots[out.slot];

	low->n_ops = 1;
	low->ops[0].scope = KB__SCOPE__SCOPE_KERNEL;
	low->ops[0].has_out = true;
	low->ops[0].out = tl_tref_of(ro);
	ro->producer = tl_issue_lowered(tl, at, low);
	return out;
}

/* A fill is a MATH `fill` command (no inputs, extra `value`): it pays its
 * dispatch and PE_MATH time like any other op, and its result is ready when
 * the command completes (consumers wait for it as for any producer). */
tl_tensor tl_full_at(struct tl *tl, struct tl_site at, uint32_t rows,
		     uint32_t cols, enum tl_dtype dtype, double value)
{
	struct tl_lowered low;

	check_dims(tl, at, "tl_full", rows, cols, dtype);
	memset(&low, 0, sizeof(low));
	low.ops[0].kind = rt_isa_get(RT_ISA_FILL)->name;
	tl_op_extra_f(&low.ops[0], "value", value);
	return math_single(tl, at, &low, rows, cols, dtype);
}

/* An allocation alone: the tensor has no producer, so nothing waits for
 * it; a command writing it is ordered after every pending command whose
 * span overlaps its bytes, as for any output. */
tl_tensor tl_empty_at(struct tl *tl, struct tl_site at, uint32_t rows,
		      uint32_t cols, enum tl_dtype dtype)
{
	check_dims(tl, at, "tl_empty", rows, cols, dtype);
	return tl_scratch_tensor(tl, at, rows, cols, dtype);
}

tl_tensor tl_dot_at(struct tl *tl, struct tl_site at, tl_tensor a,
		    tl_tensor b)
{
	struct tl_rec *ra = tl_rec_get(tl, at, a, "tl_dot a");
	struct tl_rec *rb = tl_rec_get(tl, at, b, "tl_dot b");
	struct tl_lowered low;
	uint32_t m = tl_rec_lrows(ra), k = tl_rec_lcols(ra);
	uint32_t n = tl_rec_lcols(rb);

	if (tl_rec_lrows(rb) != k)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_dot shape mismatch: a is %ux%u, b is %ux%u", m, k,
			 tl_rec_lrows(rb), n);
	tl_wait_operand(tl, at, ra->producer);
	tl_wait_operand(tl, at, rb->producer);
	memset(&low, 0, sizeof(low));
	low.ops[0].kind = rt_isa_get(RT_ISA_GEMM)->name;
	tl_op_operand(&low.ops[0], "a", ra);
	tl_op_operand(&low.ops[0], "b", rb);
	tl_op_extra_i(&low.ops[0], "m", m);
	tl_op_extra_i(&low.ops[0], "k", k);
	tl_op_extra_i(&low.ops[0], "n", n);
	return math_single(tl, at, &low, m, n, TL_F32);
}

tl_tensor tl_trans_at(struct tl *tl, struct tl_site at, tl_tensor t)
{
	struct tl_rec *r = tl_rec_get(tl, at, t, "tl_trans source"), *v;
	struct tl_rec copy = *r;
	tl_tensor view = tl_rec_new(tl, at, &v);
	uint32_t gen = v->gen, scope = v->scope;

	*v = copy;
	v->gen = gen;
	v->scope = scope;
	v->trans = !copy.trans;
	return view;
}

tl_tensor tl_binary_at(struct tl *tl, struct tl_site at, const char *op,
		       tl_tensor a, tl_tensor b)
{
	const struct rt_isa_op *isa = tl_isa_math(tl, at, op, 2, "tl_binary");
	const struct tl_rec *in[2] = { math_input(tl, at, a, op),
				       math_input(tl, at, b, op) };
	struct tl_lowered low;
	uint32_t rows, cols;

	tl_isa_shape(tl, at, RT_EKERNEL, isa, 2, in, -1, &rows, &cols);
	memset(&low, 0, sizeof(low));
	low.ops[0].kind = isa->name;
	tl_op_operand(&low.ops[0], "src_a", in[0]);
	tl_op_operand(&low.ops[0], "src_b", in[1]);
	return math_single(tl, at, &low, rows, cols, TL_F32);
}

tl_tensor tl_unary_at(struct tl *tl, struct tl_site at, const char *op,
		      tl_tensor a)
{
	const struct rt_isa_op *isa = tl_isa_math(tl, at, op, 1, "tl_unary");
	const struct tl_rec *ra = math_input(tl, at, a, op);
	struct tl_lowered low;
	uint32_t rows, cols;

	if (isa->extra || isa->shape == RT_ISA_SHAPE_REDUCE)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_unary: op '%s' needs %s; use %s", op,
			 isa->extra ? "an extra" : "an axis",
			 isa->extra ? "tl_scale" : "tl_max or tl_sum");
	tl_isa_shape(tl, at, RT_EKERNEL, isa, 1, &ra, -1, &rows, &cols);
	memset(&low, 0, sizeof(low));
	low.ops[0].kind = isa->name;
	tl_op_operand(&low.ops[0], "src", ra);
	return math_single(tl, at, &low, rows, cols, TL_F32);
}

tl_tensor tl_scale_at(struct tl *tl, struct tl_site at, tl_tensor a,
		      double s)
{
	struct tl_rec *ra = math_input(tl, at, a, "scale");
	struct tl_lowered low;

	memset(&low, 0, sizeof(low));
	low.ops[0].kind = rt_isa_get(RT_ISA_SCALE)->name;
	tl_op_operand(&low.ops[0], "src", ra);
	tl_op_extra_f(&low.ops[0], "scale", s);
	return math_single(tl, at, &low, tl_rec_lrows(ra), tl_rec_lcols(ra),
			   TL_F32);
}

tl_tensor tl_reduce_at(struct tl *tl, struct tl_site at, const char *op,
		       tl_tensor a, int axis)
{
	const struct rt_isa_op *isa = tl_isa_math(tl, at, op, 1, "tl_reduce");
	const struct tl_rec *ra = math_input(tl, at, a, op);
	struct tl_lowered low;
	uint32_t rows, cols;

	if (isa->shape != RT_ISA_SHAPE_REDUCE)
		tl_abort(tl, at, RT_EKERNEL, "tl_reduce: op '%s' is not a reduction",
			 op);
	tl_isa_shape(tl, at, RT_EKERNEL, isa, 1, &ra, axis, &rows, &cols);
	memset(&low, 0, sizeof(low));
	low.ops[0].kind = isa->name;
	tl_op_operand(&low.ops[0], "src", ra);
	tl_op_extra_i(&low.ops[0], "axis", axis);
	return math_single(tl, at, &low, rows, cols, TL_F32);
}

tl_tensor tl_astype_at(struct tl *tl, struct tl_site at, tl_tensor a,
		       enum tl_dtype dtype)
{
	struct tl_rec *ra = math_input(tl, at, a, "copy");
	struct tl_lowered low;

	check_dims(tl, at, "tl_astype", 1, 1, dtype);
	memset(&low, 0, sizeof(low));
	low.ops[0].kind = rt_isa_get(RT_ISA_COPY)->name;
	tl_op_operand(&low.ops[0], "src", ra);
	return math_single(tl, at, &low, tl_rec_lrows(ra), tl_rec_lcols(ra),
			   dtype);
}
