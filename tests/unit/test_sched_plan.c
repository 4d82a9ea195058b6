/* test_sched_plan.c — the scheduler's pure parts: dispatch cost, the plan
 * builder (flat-composite design D3/D4 and test requirements 1, 3, 5, 8, 9) and its
 * golden stage sequence. Commands are built by hand, as the host would. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched.h"

#define MIB (1024u * 1024u)
#define HBM_A 0x0u
#define HBM_B 0x100000u
#define HBM_C 0x200000u

/* Storage for one hand-built Command. */
struct tb {
	Kb__TensorRef t[64];
	uint32_t shapes[64][2];
	int nt;
	Kb__Operand o[64];
	int no;
	Kb__Operand *opnd[24][4];
	Kb__Extra e[32];
	int ne;
	Kb__Extra *ext[24][4];
	Kb__OpSpec ops[24];
	Kb__OpSpec *op_ptrs[24];
	Kb__TensorRef *rw[8];
	Kb__CompositeCmd comp;
	Kb__Command cmd;
};

static struct tb *tb_new(void)
{
	struct tb *b = calloc(1, sizeof(*b));

	cr_assert_not_null(b);
	kb__composite_cmd__init(&b->comp);
	kb__command__init(&b->cmd);
	b->comp.ops = b->op_ptrs;
	b->comp.rw_handles = b->rw;
	b->cmd.body_case = KB__COMMAND__BODY_COMPOSITE;
	b->cmd.composite = &b->comp;
	return b;
}

static Kb__TensorRef *tensor(struct tb *b, Kb__Space space, uint64_t addr,
			     uint32_t rows, uint32_t cols, bool pinned)
{
	Kb__TensorRef *t = &b->t[b->nt];

	kb__tensor_ref__init(t);
	b->shapes[b->nt][0] = rows;
	b->shapes[b->nt][1] = cols;
	t->shape = b->shapes[b->nt++];
	t->n_shape = 2;
	t->space = space;
	t->addr = addr;
	t->pinned = pinned;
	t->dtype = KB__DTYPE__DTYPE_F16;
	return t;
}

/* TCM scratch tensors are pinned; HBM ones (tl_ref) are not. */
static Kb__TensorRef *tcm(struct tb *b, uint64_t addr, uint32_t r, uint32_t c)
{
	return tensor(b, KB__SPACE__SPACE_TCM, addr, r, c, true);
}

static Kb__TensorRef *hbm(struct tb *b, uint64_t addr, uint32_t r, uint32_t c)
{
	return tensor(b, KB__SPACE__SPACE_HBM, addr, r, c, false);
}

/* Appends an op: `n` (name, tensor) operand pairs follow. */
static Kb__OpSpec *op(struct tb *b, const char *kind, Kb__Scope scope,
		      Kb__TensorRef *out, int n, ...)
{
	size_t i = b->comp.n_ops;
	Kb__OpSpec *o = &b->ops[i];
	va_list ap;

	kb__op_spec__init(o);
	o->kind = (char *)kind;
	o->scope = scope;
	o->out = out;
	o->operands = b->opnd[i];
	o->extras = b->ext[i];
	va_start(ap, n);
	for (int k = 0; k < n; k++) {
		Kb__Operand *x = &b->o[b->no++];

		kb__operand__init(x);
		x->name = va_arg(ap, char *);
		x->tensor = va_arg(ap, Kb__TensorRef *);
		o->operands[o->n_operands++] = x;
	}
	va_end(ap);
	b->op_ptrs[b->comp.n_ops++] = o;
	return o;
}

static void extra_i(struct tb *b, Kb__OpSpec *o, const char *name, int64_t v)
{
	Kb__Extra *e = &b->e[b->ne++];

	kb__extra__init(e);
	e->name = (char *)name;
	e->value_case = KB__EXTRA__VALUE_I;
	e->i = v;
	o->extras[o->n_extras++] = e;
}

static void rw(struct tb *b, Kb__TensorRef *t)
{
	b->rw[b->comp.n_rw_handles++] = t;
}

static struct rt_config test_cfg(void)
{
	struct rt_config c;

	memset(&c, 0, sizeof(c));
	c.ranks = 1;
	c.pes = 1;
	c.tcm_scratch_bytes = MIB;
	c.tcm_staging_bytes = MIB / 2; /* two regions of 256 KiB */
	c.gemm_tile_m = c.gemm_tile_n = c.gemm_tile_k = 128;
	c.dispatch_fixed_cycles = 40;
	c.dispatch_cycles_per_kib = 64;
	c.max_composite_logical_bytes = 1024;
	return c;
}

/* gemm(a, b -> out) at KERNEL scope with m/k/n extras. */
static Kb__OpSpec *gemm(struct tb *b, Kb__TensorRef *a, Kb__TensorRef *bb,
			Kb__TensorRef *out)
{
	Kb__OpSpec *g = op(b, "gemm", KB__SCOPE__SCOPE_KERNEL, out, 2, "a", a,
			   "b", bb);
	uint32_t k = a->trans ? a->shape[0] : a->shape[1];

	extra_i(b, g, "m", out->shape[0]);
	extra_i(b, g, "k", k);
	extra_i(b, g, "n", out->shape[1]);
	return g;
}

static uint32_t count_engine(const struct sched_plan *p, Kb__Engine e)
{
	uint32_t n = 0;

	for (uint32_t s = 0; s < p->n_stages; s++)
		n += p->stages[s].engine == e;
	return n;
}

/* reach[s]: stage s waits, directly or not, for stage `on`. */
static bool depends_on(const struct sched_plan *p, uint32_t s, uint32_t on)
{
	for (uint32_t d = 0; d < p->stages[s].n_deps; d++)
		if (p->stages[s].deps[d] == on ||
		    depends_on(p, p->stages[s].deps[d], on))
			return true;
	return false;
}

/* The flat-composite design decode opt2 "#2" composite, as the host lowers it: the 8
 * softmax_merge MATH micro-ops, gemm(P, V -> O_j), add(O_j, O -> O). The
 * scheduler never sees the recipe name. `v_rows` = KV tile length. */
static struct tb *opt2_second(uint32_t v_rows)
{
	const uint32_t G = 8, D = 128, T = v_rows;
	struct tb *b = tb_new();
	Kb__TensorRef *s = tcm(b, 0x0000, G, T), *m = tcm(b, 0x10000, G, 1),
		      *l = tcm(b, 0x10100, G, 1), *O = tcm(b, 0x10200, G, D),
		      *m_loc = tcm(b, 0x20000, G, 1),
		      *m_new = tcm(b, 0x20100, G, 1),
		      *corr = tcm(b, 0x20200, G, 1),
		      *P = tcm(b, 0x21000, G, T), *l_loc = tcm(b, 0x30000, G, 1),
		      *O_j = tcm(b, 0x31000, G, D), *V = hbm(b, HBM_B, T, D);
	Kb__OpSpec *o;

	o = op(b, "rmax", KB__SCOPE__SCOPE_KERNEL, m_loc, 1, "src", s);
	extra_i(b, o, "axis", -1);
	op(b, "max_elem", KB__SCOPE__SCOPE_KERNEL, m_new, 2, "src_a", m,
	   "src_b", m_loc);
	op(b, "exp_diff", KB__SCOPE__SCOPE_KERNEL, corr, 2, "src_a", m,
	   "src_b", m_new);
	op(b, "exp_diff", KB__SCOPE__SCOPE_KERNEL, P, 2, "src_a", s, "src_b",
	   m_new);
	o = op(b, "rsum", KB__SCOPE__SCOPE_KERNEL, l_loc, 1, "src", P);
	extra_i(b, o, "axis", -1);
	op(b, "fma", KB__SCOPE__SCOPE_KERNEL, l, 3, "src_a", l, "src_b", corr,
	   "src_c", l_loc);
	op(b, "mul_bcast", KB__SCOPE__SCOPE_KERNEL, O, 2, "src_a", O, "src_b",
	   corr);
	op(b, "copy", KB__SCOPE__SCOPE_KERNEL, m, 1, "src", m_new);
	gemm(b, P, V, O_j);
	op(b, "add", KB__SCOPE__SCOPE_OUTPUT_TILE, O, 2, "src", O_j, "other", O);
	rw(b, m);
	rw(b, l);
	rw(b, O);
	b->comp.id = 2;
	return b;
}

/* ------------------------------------------------------------ cost */

Test(sched_cost, dispatch_cycles_are_fixed_plus_rounded_up_rate, .timeout = 10)
{
	struct rt_config c = test_cfg();

	cr_expect_eq(rt_dispatch_cycles(&c, 0), 40);
	cr_expect_eq(rt_dispatch_cycles(&c, 1), 41);     /* 0.0625 -> 1 */
	cr_expect_eq(rt_dispatch_cycles(&c, 16), 41);    /* exactly 1 */
	cr_expect_eq(rt_dispatch_cycles(&c, 17), 42);
	cr_expect_eq(rt_dispatch_cycles(&c, 322), 61);   /* 20.125 -> 21 */
	cr_expect_eq(rt_dispatch_cycles(&c, 1024), 104);
}

Test(sched_cost, logical_bytes_follow_the_documented_rule, .timeout = 10)
{
	struct tb *b = tb_new();
	Kb__TensorRef *x = tcm(b, 0, 8, 8), *y = tcm(b, 0x100, 8, 8);
	Kb__OpSpec *o = op(b, "add", KB__SCOPE__SCOPE_KERNEL, y, 2, "src", x,
			   "other", y);
	Kb__DmaCmd dma = KB__DMA_CMD__INIT;
	Kb__Command dc = KB__COMMAND__INIT;

	extra_i(b, o, "axis", 1);
	cr_expect_eq(rt_opspec_logical_bytes(o), 4 + 3 * 12 + 4);
	rw(b, y);
	cr_expect_eq(rt_composite_logical_bytes(&b->comp), 44 + 12);
	cr_expect_eq(rt_command_logical_bytes(&b->cmd), 56);
	dc.body_case = KB__COMMAND__BODY_DMA;
	dc.dma = &dma;
	cr_expect_eq(rt_command_logical_bytes(&dc), 28);
	free(b);
}

Test(sched_cost, adr0065_t9_opt2_second_composite_is_under_1024_bytes, .timeout = 10)
{
	struct tb *b = opt2_second(128);
	uint64_t bytes = rt_command_logical_bytes(&b->cmd);

	/* 8 micro-ops 304 + gemm 52 + add 40 + 3 rw_handles 36 */
	cr_expect_eq(b->comp.n_ops, 10);
	cr_expect_eq(bytes, 432);
	cr_expect_lt(bytes, 1024);
	free(b);
}

/* ------------------------------------------------------------ plans */

Test(sched_plan, math_only_composite_is_one_chain_in_op_order, .timeout = 10)
{
	struct rt_config c = test_cfg();
	struct tb *b = tb_new();
	Kb__TensorRef *x = tcm(b, 0, 4, 64), *y = tcm(b, 0x1000, 4, 64),
		      *r = tcm(b, 0x2000, 4, 1);
	struct sched_plan p;

	op(b, "exp", KB__SCOPE__SCOPE_KERNEL, y, 1, "src", x);
	op(b, "rsum", KB__SCOPE__SCOPE_OUTPUT_TILE, r, 1, "src", y);
	op(b, "copy", KB__SCOPE__SCOPE_KERNEL, x, 1, "src", y);
	sched_plan_init(&p);
	cr_assert_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK, "%s",
		     rt_last_error());
	cr_assert_eq(p.n_stages, 3);
	cr_expect_str_eq(p.stages[0].op_name, "exp");
	cr_expect_str_eq(p.stages[1].op_name, "rsum");
	cr_expect_str_eq(p.stages[2].op_name, "copy");
	cr_expect_eq(p.stages[0].n_deps, 0);
	for (uint32_t s = 1; s < 3; s++) {
		cr_expect_eq(p.stages[s].engine, KB__ENGINE__ENGINE_MATH);
		cr_expect_eq(p.stages[s].n_deps, 1);
		cr_expect_eq(p.stages[s].deps[0], s - 1);
	}
	cr_expect_eq(p.staging_bytes, 0);
	sched_plan_release(&p);
	free(b);
}

/* 256^3 in 128-tiles, M innermost (j, then K, then i): 8 GEMMs; A read per
 * GEMM (8), B once per (j, K) pass over both M tiles (4); the second GEMM
 * of a pass holds the first's B tile; each of the 2 M tiles of a pass
 * accumulates in its own f32 accumulator. */
Test(sched_plan, gemm_256_cubed_in_128_tiles_is_8_gemms_and_12_reads, .timeout = 10)
{
	struct rt_config c = test_cfg();
	struct tb *b = tb_new();
	struct sched_plan p;
	uint64_t acc_of[2] = { 0, 0 };
	uint32_t g = 0;

	gemm(b, hbm(b, HBM_A, 256, 256), hbm(b, HBM_B, 256, 256),
	     tcm(b, 0, 256, 256));
	sched_plan_init(&p);
	cr_assert_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK, "%s",
		     rt_last_error());
	cr_expect_eq(count_engine(&p, KB__ENGINE__ENGINE_GEMM), 8);
	cr_expect_eq(count_engine(&p, KB__ENGINE__ENGINE_DMA_READ), 8 + 4);
	cr_expect_eq(count_engine(&p, KB__ENGINE__ENGINE_DMA_WRITE), 0);
	for (uint32_t s = 0; s < p.n_stages; s++) {
		const struct sched_stage *st = &p.stages[s];
		uint32_t i = g % 2, kk = g / 2 % 2, j = g / 4;

		if (st->engine != KB__ENGINE__ENGINE_GEMM)
			continue;
		cr_expect(st->has_acc);
		cr_expect_eq(st->acc.dtype, KB__DTYPE__DTYPE_F32);
		cr_expect_eq(st->first, kk == 0, "gemm %u", g);
		cr_expect_eq(st->last, kk == 1, "gemm %u", g);
		cr_expect_eq(st->stationary_held, i == 1, "gemm %u", g);
		/* the output tile (i, j) of out [256 x 256] */
		cr_expect_eq(st->out.addr, (uint64_t)i * 128 * st->out.row_stride + j * 128 * 2);
		if (kk == 0 && j == 0)
			acc_of[i] = st->acc.addr;
		else
			cr_expect_eq(st->acc.addr, acc_of[i], "gemm %u: accumulator", g);
		g++;
	}
	cr_expect_neq(acc_of[0], acc_of[1]);
	sched_plan_release(&p);
	free(b);
}

Test(sched_plan, dma_of_next_tile_overlaps_gemm_with_two_slots_per_operand, .timeout = 10)
{
	struct rt_config c = test_cfg();
	struct tb *b = tb_new();
	struct sched_plan p;
	uint32_t reads_a[8], gemms[8], na = 0, ng = 0;

	gemm(b, hbm(b, HBM_A, 256, 256), hbm(b, HBM_B, 256, 256),
	     tcm(b, 0, 256, 256));
	sched_plan_init(&p);
	cr_assert_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK);
	for (uint32_t s = 0; s < p.n_stages; s++) {
		if (p.stages[s].engine == KB__ENGINE__ENGINE_GEMM)
			gemms[ng++] = s;
		else if (p.stages[s].in[0].addr < HBM_B &&
			 p.stages[s].engine == KB__ENGINE__ENGINE_DMA_READ)
			reads_a[na++] = s;
	}
	cr_assert_eq(na, 8);
	cr_assert_eq(ng, 8);
	for (uint32_t t = 0; t < 8; t++) {
		/* read t+1 never waits for GEMM t: they can overlap */
		if (t + 1 < 8)
			cr_expect_not(depends_on(&p, reads_a[t + 1], gemms[t]));
		/* read t waits for GEMM t-2, which used the same slot */
		if (t >= 2)
			cr_expect(depends_on(&p, reads_a[t], gemms[t - 2]));
		cr_expect_eq(p.stages[reads_a[t]].out.addr,
			     p.stages[reads_a[t % 2]].out.addr);
		/* GEMMs follow one another in plan order on their one engine,
		 * which runs them in that order (in-order issue): no dependency,
		 * so each can queue behind the last (docs/stages.md) */
		if (t > 0) {
			cr_expect_gt(gemms[t], gemms[t - 1]);
			cr_expect_not(depends_on(&p, gemms[t], gemms[t - 1]));
		}
	}
	cr_expect_neq(p.stages[reads_a[0]].out.addr,
		      p.stages[reads_a[1]].out.addr);
	sched_plan_release(&p);
	free(b);
}

Test(sched_plan, adr0065_t5_dma_read_only_for_unpinned_operands, .timeout = 10)
{
	struct rt_config c = test_cfg();
	struct tb *b = tb_new();
	/* a pinned in TCM (tl_load / recipe scratch), b a tl_ref in HBM */
	Kb__TensorRef *a = tcm(b, 0, 256, 256), *bb = hbm(b, HBM_B, 256, 256);
	struct sched_plan p;

	gemm(b, a, bb, tcm(b, 0x40000, 256, 256));
	sched_plan_init(&p);
	cr_assert_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK);
	/* b's 4 tiles, each read once for the pass over both M tiles */
	cr_expect_eq(count_engine(&p, KB__ENGINE__ENGINE_DMA_READ), 4);
	for (uint32_t s = 0; s < p.n_stages; s++) {
		const struct sched_stage *st = &p.stages[s];

		if (st->engine == KB__ENGINE__ENGINE_DMA_READ) {
			cr_expect_eq(st->in[0].space, KB__SPACE__SPACE_HBM);
			cr_expect_geq(st->in[0].addr, HBM_B);
			cr_expect_eq(st->out.space, KB__SPACE__SPACE_TCM);
		}
		if (st->engine == KB__ENGINE__ENGINE_GEMM) {
			/* a consumed in place: a TCM view of the tile */
			cr_expect_eq(st->in[0].space, KB__SPACE__SPACE_TCM);
			cr_expect_lt(st->in[0].addr, 0x40000);
			cr_expect_geq(st->in[1].addr, MIB); /* staging */
		}
	}
	bb->pinned = true;
	bb->space = KB__SPACE__SPACE_TCM;
	bb->addr = 0x80000;
	cr_assert_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK);
	cr_expect_eq(count_engine(&p, KB__ENGINE__ENGINE_DMA_READ), 0);
	sched_plan_release(&p);
	free(b);
}

Test(sched_plan, adr0065_t3_no_dma_before_the_math_prologue_completes, .timeout = 10)
{
	struct rt_config c = test_cfg();
	struct tb *b = opt2_second(512); /* V spans 4 K tiles */
	struct sched_plan p;
	uint32_t dmas = 0;

	sched_plan_init(&p);
	cr_assert_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK, "%s",
		     rt_last_error());
	for (uint32_t s = 0; s < 8; s++)
		cr_expect_eq(p.stages[s].engine, KB__ENGINE__ENGINE_MATH);
	for (uint32_t s = 8; s < p.n_stages; s++) {
		Kb__Engine e = p.stages[s].engine;

		if (e != KB__ENGINE__ENGINE_DMA_READ &&
		    e != KB__ENGINE__ENGINE_DMA_WRITE)
			continue;
		dmas++;
		cr_expect(depends_on(&p, s, 7), "DMA stage %u may start "
			  "during the prologue", s);
	}
	cr_expect_eq(dmas, 4); /* only V, one tile per K step */
	sched_plan_release(&p);
	free(b);
}

Test(sched_plan, epilogue_scopes_run_per_k_tile_per_output_tile_and_once, .timeout = 10)
{
	struct rt_config c = test_cfg();
	struct tb *b = tb_new();
	Kb__TensorRef *C = tcm(b, 0, 256, 256), *bias = tcm(b, 0x20000, 256, 256),
		      *sum = tcm(b, 0x40000, 1, 256);
	struct sched_plan p;
	uint32_t kt = 0, ot = 0, kern = 0, last_gemm = 0;

	gemm(b, hbm(b, HBM_A, 256, 256), hbm(b, HBM_B, 256, 256), C);
	extra_i(b, op(b, "scale", KB__SCOPE__SCOPE_K_TILE, C, 1, "src", C),
		"scale", 2);
	op(b, "add", KB__SCOPE__SCOPE_OUTPUT_TILE, C, 2, "src", C, "other",
	   bias);
	extra_i(b, op(b, "rsum", KB__SCOPE__SCOPE_KERNEL, sum, 1, "src", C),
		"axis", 0);
	sched_plan_init(&p);
	cr_assert_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK, "%s",
		     rt_last_error());
	for (uint32_t s = 0; s < p.n_stages; s++) {
		const struct sched_stage *st = &p.stages[s];

		if (st->engine == KB__ENGINE__ENGINE_GEMM)
			last_gemm = s;
		if (st->engine != KB__ENGINE__ENGINE_MATH)
			continue;
		if (strcmp(st->op_name, "scale") == 0) {
			kt++;
			cr_expect_eq(s, last_gemm + 1, "K_TILE op right after "
				     "its GEMM");
		} else if (strcmp(st->op_name, "add") == 0) {
			uint32_t i = ot / 2, j = ot % 2;

			/* after the tile's last K step; operands sliced */
			cr_expect(p.stages[last_gemm].last);
			cr_expect(depends_on(&p, s, last_gemm));
			cr_expect_eq(st->in[1].addr,
				     0x20000 + i * 128 * 512 + j * 128 * 2);
			cr_expect_eq(st->in[1].rows, 128);
			cr_expect_eq(st->out.cols, 128);
			ot++;
		} else {
			kern++;
			cr_expect_eq(s, p.n_stages - 1);
			cr_expect_eq(st->in[0].rows, 256, "KERNEL op whole");
			for (uint32_t t = 0; t < s; t++)
				cr_expect(depends_on(&p, s, t) ||
					  p.stages[t].engine ==
						  KB__ENGINE__ENGINE_DMA_READ);
		}
	}
	cr_expect_eq(kt, 8);
	cr_expect_eq(ot, 4);
	cr_expect_eq(kern, 1);
	sched_plan_release(&p);
	free(b);
}

Test(sched_plan, transposed_b_tiles_are_sliced_in_stored_layout, .timeout = 10)
{
	struct rt_config c = test_cfg();
	struct tb *b = tb_new();
	Kb__TensorRef *bt = hbm(b, HBM_B, 256, 512); /* K tile stored [N,K] */
	struct sched_plan p;
	uint32_t nread = 0;

	bt->trans = true;
	gemm(b, tcm(b, 0, 128, 512), bt, tcm(b, 0x40000, 128, 256));
	sched_plan_init(&p);
	cr_assert_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK, "%s",
		     rt_last_error());
	/* loop: (i=0, j) for each kk; B tile (kk, j) is stored rows j.., cols kk.. */
	for (uint32_t s = 0; s < p.n_stages; s++) {
		const struct sched_stage *st = &p.stages[s];
		uint32_t j = nread / 4, kk = nread % 4;

		if (st->engine == KB__ENGINE__ENGINE_GEMM) {
			cr_expect(st->in[1].trans);
			cr_expect_eq(st->in[1].rows, 128); /* stored N rows */
			continue;
		}
		cr_expect_eq(st->in[0].addr,
			     HBM_B + j * 128 * 1024 + kk * 128 * 2);
		cr_expect_eq(st->in[0].row_stride, 1024);
		cr_expect_not(st->in[0].trans);
		nread++;
	}
	cr_expect_eq(nread, 8);
	sched_plan_release(&p);
	free(b);
}

Test(sched_plan, hbm_out_goes_through_staging_and_dma_write, .timeout = 10)
{
	struct rt_config c = test_cfg();
	struct tb *b = tb_new();
	struct sched_plan p;

	gemm(b, hbm(b, HBM_A, 256, 256), hbm(b, HBM_B, 256, 256),
	     hbm(b, HBM_C, 256, 256));
	sched_plan_init(&p);
	cr_assert_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK, "%s",
		     rt_last_error());
	cr_expect_eq(count_engine(&p, KB__ENGINE__ENGINE_DMA_WRITE), 4);
	/* a 2x32K + b 2x32K + out 2x32K + acc 64K = one 256 KiB region */
	cr_expect_eq(p.staging_bytes, 256 * 1024);
	for (uint32_t s = 0; s < p.n_stages; s++) {
		const struct sched_stage *st = &p.stages[s];

		if (st->engine != KB__ENGINE__ENGINE_DMA_WRITE)
			continue;
		cr_expect_eq(st->in[0].space, KB__SPACE__SPACE_TCM);
		cr_expect_eq(st->out.space, KB__SPACE__SPACE_HBM);
		cr_expect(p.stages[s - 1].engine == KB__ENGINE__ENGINE_GEMM &&
			  p.stages[s - 1].last);
		cr_expect_eq(p.stages[s - 1].out.addr, st->in[0].addr);
	}
	sched_plan_rebase(&p, MIB + 256 * 1024);
	cr_expect_geq(p.stages[0].out.addr, MIB + 256 * 1024);
	cr_expect_lt(p.stages[0].in[0].addr, HBM_B, "HBM views stay put");
	sched_plan_release(&p);
	free(b);
}

Test(sched_plan, staging_larger_than_a_region_is_a_clear_error, .timeout = 10)
{
	struct rt_config c = test_cfg();
	struct tb *b = tb_new();
	struct sched_plan p;

	c.tcm_staging_bytes = 256 * 1024; /* region = 128 KiB */
	gemm(b, hbm(b, HBM_A, 256, 256), hbm(b, HBM_B, 256, 256),
	     hbm(b, HBM_C, 256, 256));
	b->comp.id = 41;
	sched_plan_init(&p);
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_ESCRATCH);
	cr_expect(strstr(rt_last_error(), "composite 41"), "%s",
		  rt_last_error());
	cr_expect(strstr(rt_last_error(), "262144"), "%s", rt_last_error());
	cr_expect(strstr(rt_last_error(), "131072"), "%s", rt_last_error());
	sched_plan_release(&p);
	free(b);
}

Test(sched_plan, adr0065_t8_two_gemms_are_rejected, .timeout = 10)
{
	struct rt_config c = test_cfg();
	struct tb *b = tb_new();
	struct sched_plan p;

	gemm(b, tcm(b, 0, 64, 64), tcm(b, 0x2000, 64, 64), tcm(b, 0x4000, 64, 64));
	gemm(b, tcm(b, 0, 64, 64), tcm(b, 0x2000, 64, 64), tcm(b, 0x6000, 64, 64));
	b->comp.id = 9;
	sched_plan_init(&p);
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_ECOMPOSITE);
	cr_expect(strstr(rt_last_error(), "composite 9 has two GEMM"), "%s",
		  rt_last_error());
	sched_plan_release(&p);
	free(b);
}

Test(sched_plan, composite_above_the_size_cap_is_rejected_not_segmented, .timeout = 10)
{
	struct rt_config c = test_cfg();
	struct tb *b = tb_new();
	struct sched_plan p;
	Kb__TensorRef *x = tcm(b, 0, 8, 8);

	for (int i = 0; i < 19; i++) /* 19 x 52 bytes = 988 */
		op(b, "fma", KB__SCOPE__SCOPE_KERNEL, x, 3, "a", x, "b", x,
		   "c", x);
	for (int i = 0; i < 4; i++) /* + 48 = 1036 */
		rw(b, x);
	b->comp.id = 77;
	sched_plan_init(&p);
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_ECOMPOSITE);
	cr_expect(strstr(rt_last_error(), "composite 77 is 1036 logical bytes"),
		  "%s", rt_last_error());
	b->comp.n_rw_handles = 3; /* exactly at the cap: fine */
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK);
	sched_plan_release(&p);
	free(b);
}

Test(sched_plan, malformed_commands_name_the_command_and_problem, .timeout = 10)
{
	struct rt_config c = test_cfg();
	struct tb *b = tb_new();
	struct sched_plan p;
	Kb__TensorRef *a = tcm(b, 0, 64, 32), *bb = tcm(b, 0x2000, 64, 64);
	Kb__OpSpec *g = gemm(b, a, bb, tcm(b, 0x4000, 64, 64));

	sched_plan_init(&p);
	b->comp.id = 5;
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "composite 5: gemm shapes"), "%s",
		  rt_last_error());
	b->shapes[0][1] = 64;
	g->extras[1]->i = 65;
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "gemm extra k = 65"), "%s",
		  rt_last_error());
	g->extras[1]->i = 64;
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK, "%s",
		     rt_last_error());
	b->shapes[1][0] = 0;
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "zero dim"), "%s", rt_last_error());
	b->shapes[1][0] = 64;
	op(b, "frobnicate", KB__SCOPE__SCOPE_KERNEL, b->ops[0].out, 1, "src",
	   b->ops[0].out);
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "unknown MATH op kind \"frobnicate\""),
		  "%s", rt_last_error());
	b->ops[1].kind = (char *)"exp";
	b->ops[1].out = NULL;
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "op 1 (exp) has no out"), "%s",
		  rt_last_error());
	sched_plan_release(&p);
	free(b);
}

/* The scheduler checks MATH ops by the instruction set's rules (npu/isa.h)
 * before planning: arity, required extra, shape rule, reduction axis. */
Test(sched_plan, math_ops_obey_the_isa_shape_rules_and_extras, .timeout = 10)
{
	struct rt_config c = test_cfg();
	struct tb *b = tb_new();
	struct sched_plan p;
	Kb__TensorRef *x = tcm(b, 0, 4, 8), *col = tcm(b, 0x1000, 4, 1),
		      *row = tcm(b, 0x2000, 1, 8), *bad = tcm(b, 0x3000, 3, 8);
	Kb__OpSpec *o;

	sched_plan_init(&p);
	b->comp.id = 9;
	o = op(b, "add", KB__SCOPE__SCOPE_KERNEL, x, 2, "src_a", x, "src_b", bad);
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "composite 9: op 0 (add): input 0 has 4 rows, cannot broadcast with 3"),
		  "%s", rt_last_error());
	o->operands[1]->tensor = col; /* 4x8 + 4x1 broadcasts */
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK, "%s",
		     rt_last_error());
	o->kind = (char *)"scale";
	o->n_operands = 1;
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "needs extra 'scale'"), "%s",
		  rt_last_error());
	o->kind = (char *)"rsum";
	o->out = col; /* no axis: -1, rows x 1 */
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK, "%s",
		     rt_last_error());
	extra_i(b, o, "axis", 0);
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "out is 4x1, its inputs make 1x8"), "%s",
		  rt_last_error());
	o->out = row;
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK, "%s",
		     rt_last_error());
	o->extras[0]->i = 3;
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "axis 3"), "%s", rt_last_error());
	/* a huge float axis from the wire saturates, never converts as UB */
	o->extras[0]->value_case = KB__EXTRA__VALUE_F;
	o->extras[0]->f = 2e161;
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "axis 9223372036854775807"), "%s",
		  rt_last_error());
	o->extras[0]->f = 0.0; /* an integral float reads as that integer */
	cr_expect_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK, "%s",
		     rt_last_error());
	sched_plan_release(&p);
	free(b);
}

Test(sched_plan, dma_and_copy_commands_are_one_stage, .timeout = 10)
{
	struct rt_config c = test_cfg();
	struct tb *b = tb_new();
	Kb__DmaCmd dma = KB__DMA_CMD__INIT;
	Kb__CopyCmd cp = KB__COPY_CMD__INIT;
	Kb__Command cmd = KB__COMMAND__INIT;
	struct sched_plan p;

	dma.id = 3;
	dma.write = true;
	dma.src = tcm(b, 0x100, 16, 128);
	dma.dst = hbm(b, HBM_C, 16, 128);
	cmd.body_case = KB__COMMAND__BODY_DMA;
	cmd.dma = &dma;
	sched_plan_init(&p);
	cr_assert_eq(sched_plan_build(&cmd, &c, MIB, &p), RT_EOK);
	cr_expect_eq(p.n_stages, 1);
	cr_expect_eq(p.stages[0].engine, KB__ENGINE__ENGINE_DMA_WRITE);
	cr_expect_str_eq(p.stages[0].op_name, "dma_write");
	cp.id = 4;
	cp.src = tcm(b, 0x100, 16, 128);
	cp.dst = tcm(b, 0x9000, 16, 128);
	cmd.body_case = KB__COMMAND__BODY_COPY;
	cmd.copy = &cp;
	cr_assert_eq(sched_plan_build(&cmd, &c, MIB, &p), RT_EOK);
	cr_expect_eq(p.stages[0].engine, KB__ENGINE__ENGINE_MATH);
	cr_expect_str_eq(p.stages[0].op_name, "copy");
	cp.dst = tcm(b, 0x9000, 16, 64);
	cr_expect_eq(sched_plan_build(&cmd, &c, MIB, &p), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "copy command 4"), "%s",
		  rt_last_error());
	sched_plan_release(&p);
	free(b);
}

/* ------------------------------------------------------------ golden */

static const char *root(void)
{
	const char *r = getenv("KB_ROOT");

	return r ? r : ".";
}

/* flat-composite design test 1: the legacy `tl.composite(op="gemm", a, b,
 * epilogue=[add])` lowering [gemm KERNEL, add OUTPUT_TILE] gives exactly the
 * committed stage sequence. KB_GOLDEN_UPDATE=1 rewrites the file. */
Test(sched_golden, adr0065_t1_legacy_gemm_epilogue_stage_sequence, .timeout = 10)
{
	struct rt_config c = test_cfg();
	struct tb *b = tb_new();
	Kb__TensorRef *C = hbm(b, HBM_C, 256, 128);
	struct sched_plan p;
	struct rt_buf got, want;
	char path[1024];

	gemm(b, hbm(b, HBM_A, 256, 256), hbm(b, HBM_B, 256, 128), C);
	op(b, "add", KB__SCOPE__SCOPE_OUTPUT_TILE, C, 2, "src", C, "other",
	   tcm(b, 0x8000, 256, 128));
	b->comp.id = 1;
	sched_plan_init(&p);
	rt_buf_init(&got);
	rt_buf_init(&want);
	cr_assert_eq(sched_plan_build(&b->cmd, &c, MIB, &p), RT_EOK, "%s",
		     rt_last_error());
	cr_assert_eq(sched_plan_dump(&p, &got), RT_EOK);
	snprintf(path, sizeof(path), "%s/tests/golden/sched_legacy_gemm_epilogue.txt",
		 root());
	if (getenv("KB_GOLDEN_UPDATE")) {
		/* update mode writes; comparing the file with what was just
		 * written would check nothing (the next plain run compares) */
		cr_assert_eq(rt_buf_write_file(&got, path), RT_EOK);
	} else {
		cr_assert_eq(rt_buf_read_file(&want, path), RT_EOK, "%s",
			     rt_last_error());
		cr_expect_str_eq(got.data, want.data);
	}
	rt_buf_release(&got);
	rt_buf_release(&want);
	sched_plan_release(&p);
	free(b);
}

/* ------------------------------------------------------------ boundary */

static bool file_mentions(const char *path, const char *needle)
{
	struct rt_buf text;
	bool hit;

	rt_buf_init(&text);
	cr_assert_eq(rt_buf_read_file(&text, path), RT_EOK, "%s", path);
	hit = text.len && strstr(text.data, needle);
	rt_buf_release(&text);
	return hit;
}

/* D6.5 / D7: the scheduler is recipe-free. */
Test(sched_boundary, scheduler_sources_never_name_a_recipe, .timeout = 10)
{
	const char *dirs[] = {"scheduler/src", "scheduler/include", "scheduler"};
	char needle[32], path[2048];
	int files = 0;

	/* built at run time so this test file is not itself a hit */
	snprintf(needle, sizeof(needle), "softmax%cmerge", '_');
	for (size_t d = 0; d < 3; d++) {
		char dir[1024];
		DIR *h;
		struct dirent *e;

		snprintf(dir, sizeof(dir), "%s/%s", root(), dirs[d]);
		h = opendir(dir);
		cr_assert_not_null(h, "%s", dir);
		while ((e = readdir(h))) {
			size_t n = strlen(e->d_name);

			if (n < 3 || (strcmp(e->d_name + n - 2, ".c") &&
				      strcmp(e->d_name + n - 2, ".h") &&
				      strcmp(e->d_name + n - 3, ".md")))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			cr_expect_not(file_mentions(path, needle), "%s names a "
				      "recipe", path);
			files++;
		}
		closedir(h);
	}
	cr_expect_geq(files, 6);
}
