/* test_sched_core.c — hazards, strict-FIFO admission (flat-composite design D6.3, test
 * requirement 4), staging regions and stage release, driven through the
 * core's plain calls with a tiny FIFO engine model standing in for the
 * engines. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "sched.h"

#define MIB (1024u * 1024u)

/* One hand-built composite: up to 4 ops over up to 12 tensors. */
struct cc {
	Kb__TensorRef t[12];
	uint32_t shapes[12][2];
	int nt;
	Kb__Operand o[12];
	int no;
	Kb__Operand *opnd[4][3];
	Kb__OpSpec ops[4];
	Kb__OpSpec *op_ptrs[4];
	Kb__TensorRef *rw[4];
	Kb__CompositeCmd comp;
	Kb__Command cmd;
};

static struct cc *cc_new(uint64_t id)
{
	struct cc *c = calloc(1, sizeof(*c));

	cr_assert_not_null(c);
	kb__composite_cmd__init(&c->comp);
	kb__command__init(&c->cmd);
	c->comp.id = id;
	c->comp.ops = c->op_ptrs;
	c->comp.rw_handles = c->rw;
	c->cmd.body_case = KB__COMMAND__BODY_COMPOSITE;
	c->cmd.composite = &c->comp;
	return c;
}

static Kb__TensorRef *ten(struct cc *c, Kb__Space space, uint64_t addr,
			  uint32_t rows, uint32_t cols)
{
	Kb__TensorRef *t = &c->t[c->nt];

	kb__tensor_ref__init(t);
	c->shapes[c->nt][0] = rows;
	c->shapes[c->nt][1] = cols;
	t->shape = c->shapes[c->nt++];
	t->n_shape = 2;
	t->space = space;
	t->addr = addr;
	t->pinned = space == KB__SPACE__SPACE_TCM;
	return t;
}

/* Appends kind(in0[, in1] -> out). */
static void op2(struct cc *c, const char *kind, Kb__TensorRef *out,
		Kb__TensorRef *in0, Kb__TensorRef *in1)
{
	size_t i = c->comp.n_ops;
	Kb__OpSpec *o = &c->ops[i];
	Kb__TensorRef *ins[2] = {in0, in1};

	kb__op_spec__init(o);
	o->kind = (char *)kind;
	o->out = out;
	o->operands = c->opnd[i];
	for (int k = 0; k < 2 && ins[k]; k++) {
		Kb__Operand *x = &c->o[c->no++];

		kb__operand__init(x);
		x->name = (char *)(k ? "b" : "a");
		x->tensor = ins[k];
		o->operands[o->n_operands++] = x;
	}
	c->op_ptrs[c->comp.n_ops++] = o;
}

/* A two-op MATH composite on TCM [base, base+0x300) sharing handle `h`. */
static struct cc *math_cmd(uint64_t id, uint64_t base, Kb__TensorRef *h_like)
{
	struct cc *c = cc_new(id);
	Kb__TensorRef *x = ten(c, KB__SPACE__SPACE_TCM, base, 4, 32);
	Kb__TensorRef *y = ten(c, KB__SPACE__SPACE_TCM, base + 0x100, 4, 32);

	op2(c, "exp", y, x, NULL);
	op2(c, "add", x, x, y);
	if (h_like) {
		Kb__TensorRef *h = ten(c, h_like->space, h_like->addr,
				       h_like->shape[0], h_like->shape[1]);

		c->rw[c->comp.n_rw_handles++] = h;
	}
	return c;
}

/* gemm over pinned TCM operands: no DMA, ready at once. */
static struct cc *tcm_gemm_cmd(uint64_t id, uint64_t base)
{
	struct cc *c = cc_new(id);
	Kb__TensorRef *a = ten(c, KB__SPACE__SPACE_TCM, base, 8, 128);
	Kb__TensorRef *b = ten(c, KB__SPACE__SPACE_TCM, base + 0x1000, 128, 128);
	Kb__TensorRef *o = ten(c, KB__SPACE__SPACE_TCM, base + 0x10000, 8, 128);

	op2(c, "gemm", o, a, b);
	return c;
}

/* gemm over HBM operands: needs a staging region. */
static struct cc *gemm_cmd(uint64_t id, uint64_t out_addr)
{
	struct cc *c = cc_new(id);
	Kb__TensorRef *a = ten(c, KB__SPACE__SPACE_HBM, 0, 128, 256);
	Kb__TensorRef *b = ten(c, KB__SPACE__SPACE_HBM, 0x100000, 256, 128);
	Kb__TensorRef *o = ten(c, KB__SPACE__SPACE_TCM, out_addr, 128, 128);

	op2(c, "gemm", o, a, b);
	return c;
}

static struct rt_config core_cfg(void)
{
	struct rt_config c;

	memset(&c, 0, sizeof(c));
	c.pes = 1;
	c.tcm_scratch_bytes = MIB;
	c.tcm_staging_bytes = MIB / 2;
	c.gemm_tile_m = c.gemm_tile_n = c.gemm_tile_k = 128;
	c.max_composite_logical_bytes = 1024;
	return c;
}

/* ------------------------------------------------------------ engine model */

#define SIM_MAX 512

/* Stages sent and not yet finished, per engine in arrival order; and the
 * log of everything the core did. */
struct sim {
	struct sched_core core;
	struct rt_config cfg;
	uint64_t q_cmd[4][SIM_MAX];
	uint32_t q_stage[4][SIM_MAX];
	uint32_t q_head[4], q_tail[4];
	uint64_t log_cmd[SIM_MAX * 2]; /* sends: id; dones: id | 1<<63 */
	uint32_t n_log;
	uint64_t done_issued[16];
};

#define DONE_BIT (1ull << 63)

static void sim_take_actions(struct sim *s)
{
	for (uint32_t i = 0; i < s->core.n_actions; i++) {
		const struct sched_action *a = &s->core.actions[i];

		cr_assert_lt(s->n_log, SIM_MAX * 2);
		if (a->kind == SCHED_COMMAND_DONE) {
			s->log_cmd[s->n_log++] = a->id | DONE_BIT;
			s->done_issued[a->id % 16] = a->issued_ps;
			continue;
		}
		Kb__Engine e = a->cmd->plan.stages[a->stage].engine;

		s->q_cmd[e][s->q_tail[e] % SIM_MAX] = a->id;
		s->q_stage[e][s->q_tail[e]++ % SIM_MAX] = a->stage;
		s->log_cmd[s->n_log++] = a->id;
	}
}

static struct sim *sim_new(void)
{
	struct sim *s = calloc(1, sizeof(*s));

	cr_assert_not_null(s);
	s->cfg = core_cfg();
	sched_core_init(&s->core, &s->cfg, 0, 0);
	return s;
}

static void sim_destroy(struct sim *s)
{
	sched_core_release(&s->core);
	free(s);
}

static void submit(struct sim *s, struct cc *c, uint64_t issued)
{
	cr_assert_eq(sched_core_submit(&s->core, &c->cmd, issued), RT_EOK, "%s",
		     rt_last_error());
	sim_take_actions(s);
}

/* Finishes the oldest stage of the first busy engine; false when idle. */
static bool sim_step(struct sim *s)
{
	for (int e = 0; e < 4; e++) {
		if (s->q_head[e] == s->q_tail[e])
			continue;
		uint32_t at = s->q_head[e]++ % SIM_MAX;

		cr_assert_eq(sched_core_stage_done(&s->core, s->q_cmd[e][at],
						   s->q_stage[e][at]),
			     RT_EOK, "%s", rt_last_error());
		sim_take_actions(s);
		return true;
	}
	return false;
}

static uint32_t log_pos(const struct sim *s, uint64_t entry, bool first)
{
	uint32_t pos = UINT32_MAX;

	for (uint32_t i = 0; i < s->n_log; i++)
		if (s->log_cmd[i] == entry) {
			pos = i;
			if (first)
				break;
		}
	return pos;
}

/* ------------------------------------------------------------ hazards */

static struct sched_range rng(Kb__Space sp, uint32_t pe, uint64_t lo,
			      uint64_t hi)
{
	return (struct sched_range){.space = sp, .pe = pe, .lo = lo, .hi = hi};
}

Test(sched_hazard, raw_war_waw_conflict_and_disjoint_ranges_do_not, .timeout = 10)
{
	struct sched_range r1 = rng(KB__SPACE__SPACE_TCM, 0, 0, 100);
	struct sched_range w1 = rng(KB__SPACE__SPACE_TCM, 0, 100, 200);
	struct sched_range r2 = rng(KB__SPACE__SPACE_TCM, 0, 150, 160);
	struct sched_range w2 = rng(KB__SPACE__SPACE_TCM, 0, 50, 60);
	struct sched_range far = rng(KB__SPACE__SPACE_TCM, 0, 200, 300);
	struct sched_range other_pe = rng(KB__SPACE__SPACE_TCM, 1, 0, 200);
	struct sched_range hbm = rng(KB__SPACE__SPACE_HBM, 0, 0, 200);
	struct sched_hazard_set a = {.reads = &r1, .n_reads = 1, .writes = &w1,
				     .n_writes = 1};
	struct sched_hazard_set raw = {.reads = &r2, .n_reads = 1};
	struct sched_hazard_set war = {.writes = &w2, .n_writes = 1};
	struct sched_hazard_set waw = {.writes = &r2, .n_writes = 1};
	struct sched_hazard_set rar = {.reads = &r1, .n_reads = 1};
	struct sched_hazard_set apart = {.reads = &far, .n_reads = 1,
					 .writes = &far, .n_writes = 1};
	struct sched_hazard_set pe1 = {.writes = &other_pe, .n_writes = 1};
	struct sched_hazard_set hb = {.writes = &hbm, .n_writes = 1};

	cr_expect(sched_hazard_conflicts(&raw, &a));
	cr_expect(sched_hazard_conflicts(&war, &a));
	cr_expect(sched_hazard_conflicts(&waw, &a));
	cr_expect_not(sched_hazard_conflicts(&rar, &a));
	cr_expect_not(sched_hazard_conflicts(&apart, &a), "[200,300) touches "
		      "[100,200) only at the edge");
	cr_expect_not(sched_hazard_conflicts(&pe1, &a));
	cr_expect_not(sched_hazard_conflicts(&hb, &a));
}

Test(sched_hazard, rw_handles_are_read_and_written, .timeout = 10)
{
	struct cc *c = math_cmd(1, 0x1000, NULL);
	struct sched_hazard_set h;
	Kb__TensorRef *m = ten(c, KB__SPACE__SPACE_TCM, 0x9000, 8, 1);

	c->rw[c->comp.n_rw_handles++] = m;
	m->dtype = KB__DTYPE__DTYPE_F32;
	sched_hazard_init(&h);
	cr_assert_eq(sched_hazard_collect(&h, &c->cmd, 0, 3), RT_EOK);
	cr_expect_eq(h.n_reads, 3 + 1);  /* exp x; add x, y; m */
	cr_expect_eq(h.n_writes, 2 + 1); /* y; x; m */
	cr_expect_eq(h.writes[2].lo, 0x9000);
	cr_expect_eq(h.writes[2].hi, 0x9000 + 8 * 4);
	cr_expect_eq(h.writes[2].pe, 3);
	sched_hazard_release(&h);
	free(c);
}

/* ------------------------------------------------------------ admission */

Test(sched_core, adr0065_t4_strict_fifo_for_composites_sharing_an_rw_handle, .timeout = 10)
{
	struct sim *s = sim_new();
	struct cc *h = cc_new(0);
	Kb__TensorRef *m = ten(h, KB__SPACE__SPACE_TCM, 0x80000, 8, 1);
	struct cc *c1 = math_cmd(1, 0x1000, m);
	struct cc *c3 = math_cmd(3, 0x3000, NULL);
	struct cc *c2 = math_cmd(2, 0x2000, m);
	struct cc *c4 = math_cmd(4, 0x4000, NULL);

	submit(s, c1, 100);
	cr_expect_eq(s->core.n_actions, 1, "c1's first stage goes out");
	submit(s, c3, 110);
	cr_expect_eq(s->core.n_actions, 0, "non-conflicting c3 is admitted at once, but its "
		     "MATH stage issues in order behind c1's second one");
	submit(s, c2, 120);
	cr_expect_eq(s->core.n_actions, 0, "c2 shares m with c1: it waits");
	submit(s, c4, 130);
	cr_expect_eq(s->core.n_actions, 0, "c4 queues behind c2 (no overtaking)");
	cr_expect_eq(sched_core_running(&s->core), 2);
	while (sim_step(s))
		;
	cr_expect_eq(sched_core_running(&s->core), 0);
	/* c2 starts only after c1 and c3 (every earlier command) are done,
	 * and its stages never interleave with c1's */
	cr_expect_gt(log_pos(s, 2, true), log_pos(s, 1 | DONE_BIT, true));
	cr_expect_gt(log_pos(s, 2, true), log_pos(s, 3 | DONE_BIT, true));
	cr_expect_gt(log_pos(s, 4, true), log_pos(s, 3 | DONE_BIT, true));
	cr_expect_lt(log_pos(s, 1 | DONE_BIT, true), log_pos(s, 2 | DONE_BIT, true));
	cr_expect_neq(log_pos(s, 4 | DONE_BIT, true), UINT32_MAX);
	cr_expect_eq(s->done_issued[2], 120, "CommandDone echoes issued_ps");
	sim_destroy(s);
	free(h);
	free(c1);
	free(c2);
	free(c3);
	free(c4);
}

Test(sched_core, third_staged_command_waits_for_a_free_region, .timeout = 10)
{
	struct sim *s = sim_new();
	struct cc *g1 = gemm_cmd(1, 0x10000), *g2 = gemm_cmd(2, 0x20000),
		  *g3 = gemm_cmd(3, 0x30000);
	uint64_t r0 = sched_region_base(&s->cfg, 0);
	uint64_t r1 = sched_region_base(&s->cfg, 1);

	cr_expect_eq(r0, MIB);
	cr_expect_eq(r1, MIB + MIB / 4);
	submit(s, g1, 0);
	cr_expect_eq(s->core.actions[0].cmd->region, 0);
	cr_expect_eq(s->core.actions[0].cmd->plan.stages[0].out.addr, r0);
	submit(s, g2, 0);
	cr_expect_eq(s->core.actions[0].cmd->region, 1);
	cr_expect_eq(s->core.actions[0].cmd->plan.stages[0].out.addr, r1);
	submit(s, g3, 0);
	cr_expect_eq(s->core.n_actions, 0, "both regions busy: g3 waits");
	while (log_pos(s, 1 | DONE_BIT, true) == UINT32_MAX &&
	       log_pos(s, 2 | DONE_BIT, true) == UINT32_MAX)
		cr_assert(sim_step(s));
	/* the region g1 freed is the one g3 now uses */
	cr_expect_neq(log_pos(s, 1 | DONE_BIT, true), UINT32_MAX);
	cr_expect_eq(log_pos(s, 2 | DONE_BIT, true), UINT32_MAX);
	cr_expect_gt(log_pos(s, 3, true), log_pos(s, 1 | DONE_BIT, true));
	for (uint32_t i = 0; i < s->core.n_cmds; i++)
		if (s->core.cmds[i]->id == 3)
			cr_expect_eq(s->core.cmds[i]->region, 0);
	while (sim_step(s))
		;
	cr_expect_eq(s->core.n_free_regions, 2);
	sim_destroy(s);
	free(g1);
	free(g2);
	free(g3);
}

Test(sched_core, every_stage_waits_for_its_deps_and_done_comes_last, .timeout = 10)
{
	struct sim *s = sim_new();
	struct cc *g = gemm_cmd(7, 0x10000);
	uint32_t n_stages, sends = 0;
	bool seen_done = false;

	submit(s, g, 55);
	n_stages = s->core.cmds[0]->plan.n_stages;
	cr_assert_eq(n_stages, 2 * 3); /* 2 K tiles x (read a, read b, gemm) */
	while (sim_step(s)) {
		const struct sched_cmd *c = s->core.n_cmds ? s->core.cmds[0] : NULL;

		for (uint32_t i = 0; c && i < s->core.n_actions; i++) {
			const struct sched_stage *st =
				&c->plan.stages[s->core.actions[i].stage];

			for (uint32_t d = 0; d < st->n_deps; d++)
				cr_expect(c->done[st->deps[d]]);
		}
	}
	for (uint32_t i = 0; i < s->n_log; i++) {
		cr_expect_not(seen_done, "nothing after CommandDone");
		if (s->log_cmd[i] & DONE_BIT)
			seen_done = true;
		else
			sends++;
	}
	cr_expect(seen_done);
	cr_expect_eq(sends, n_stages);
	cr_expect_eq(s->done_issued[7], 55);
	sim_destroy(s);
	free(g);
}

/* A ready stage never overtakes an earlier stage of the same engine (the
 * list-scheduling anomaly: a later-ready GEMM running first made a slower
 * DMA finish a kernel sooner); other engines are not held up. */
Test(sched_core, each_engine_issues_in_program_order, .timeout = 10)
{
	struct sim *s = sim_new();
	struct cc *g1 = gemm_cmd(1, 0x10000);      /* reads, then its GEMMs */
	struct cc *g2 = tcm_gemm_cmd(2, 0x40000);  /* GEMM ready at once */
	uint32_t n_gemm = 0;

	submit(s, g1, 0);
	submit(s, g2, 0);
	cr_expect_eq(sched_core_running(&s->core), 2, "no conflict: both admitted");
	cr_expect_eq(s->core.n_actions, 0, "g2's ready GEMM waits for g1's GEMMs");
	cr_expect_eq(s->q_tail[KB__ENGINE__ENGINE_GEMM], 0);
	cr_expect_eq(s->q_tail[KB__ENGINE__ENGINE_DMA_READ], 4, "g1's reads all went");
	while (sim_step(s))
		;
	n_gemm = s->q_tail[KB__ENGINE__ENGINE_GEMM];
	cr_assert_eq(n_gemm, 3);
	cr_expect_eq(s->q_cmd[KB__ENGINE__ENGINE_GEMM][0], 1);
	cr_expect_eq(s->q_cmd[KB__ENGINE__ENGINE_GEMM][1], 1);
	cr_expect_eq(s->q_cmd[KB__ENGINE__ENGINE_GEMM][2], 2, "g2's GEMM last");
	cr_expect_eq(sched_core_running(&s->core), 0);
	sim_destroy(s);
	free(g1);
	free(g2);
}

Test(sched_core, unexpected_stage_done_and_duplicate_ids_are_errors, .timeout = 10)
{
	struct sim *s = sim_new();
	struct cc *c = math_cmd(9, 0x1000, NULL);

	submit(s, c, 0);
	cr_expect_eq(sched_core_stage_done(&s->core, 9, 1), RT_EPROTOCOL,
		     "stage 1 was never issued");
	cr_expect(strstr(rt_last_error(), "command 9 stage 1"), "%s",
		  rt_last_error());
	cr_expect_eq(sched_core_stage_done(&s->core, 8, 0), RT_EPROTOCOL);
	cr_expect_eq(sched_core_submit(&s->core, &c->cmd, 0), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "command 9"), "%s", rt_last_error());
	cr_expect_eq(sched_core_stage_done(&s->core, 9, 0), RT_EOK);
	cr_expect_eq(sched_core_stage_done(&s->core, 9, 0), RT_EPROTOCOL,
		     "stage 0 finished twice");
	sim_destroy(s);
	free(c);
}

Test(sched_core, malformed_command_is_rejected_and_leaves_nothing_behind, .timeout = 10)
{
	struct sim *s = sim_new();
	struct cc *c = math_cmd(11, 0x1000, NULL);

	c->ops[0].kind = (char *)"no_such_op";
	cr_expect_eq(sched_core_submit(&s->core, &c->cmd, 0), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "composite 11"), "%s",
		  rt_last_error());
	cr_expect_eq(s->core.n_cmds, 0);
	sim_destroy(s);
	free(c);
}
