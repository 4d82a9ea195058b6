/* test_tl.c — the tl runtime driven directly (no daemons): a fake port
 * records every command and completes it after a fixed latency (DMA reads
 * serialised on one channel), so lowering, validation, scratch scopes,
 * lazy loads and dispatch costs are checked in isolation. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "eng.h"
#include "rt/config.h"
#include "npu/isa.h"
#include "sched.h"
#include "tl_host.h"

#define MAX_CMDS 4096

struct fake {
	Kb__Payload *sent[MAX_CMDS]; /* unpacked copies */
	uint64_t done_ps[MAX_CMDS];
	uint32_t n;
	uint64_t cmd_latency_ps;
	uint64_t dma_latency_ps;
	uint64_t read_free_ps;
	/* data mode: each command is planned by the real scheduler plan
	 * builder and its stages run by the real engine kernels at send */
	const struct rt_config *cfg;
	struct eng_memory *mem;
};

/* Runs one planned stage on the engines' data kernels. */
static void exec_stage(const struct sched_stage *st, uint32_t index,
		       const struct eng_memory *mem)
{
	struct sched_stage_msg m;
	enum rt_err err;

	sched_stage_msg_fill(&m, st, 0, index);
	switch (st->engine) {
	case KB__ENGINE__ENGINE_GEMM:
		err = eng_gemm_run(&m.stage, mem);
		break;
	case KB__ENGINE__ENGINE_MATH:
		err = eng_math_run(&m.stage, mem);
		break;
	default:
		err = eng_dma_run(&m.stage, mem);
		break;
	}
	cr_assert_eq(err, RT_EOK, "%s", rt_last_error());
}

/* Plans `cmd` with the scheduler's plan builder and runs its stages in
 * plan order (every dependency points backwards, so that order is valid). */
static void exec_command(const struct fake *f, const Kb__Command *cmd)
{
	struct sched_plan p;

	sched_plan_init(&p);
	cr_assert_eq(sched_plan_build(cmd, f->cfg, sched_region_base(f->cfg, 0),
				      &p), RT_EOK, "%s", rt_last_error());
	for (uint32_t i = 0; i < p.n_stages; i++)
		exec_stage(&p.stages[i], i, f->mem);
	sched_plan_release(&p);
}

static enum rt_err fake_send(void *ctx, uint32_t dst, uint64_t send_ps,
			     uint64_t extra_ps, const Kb__Payload *msg,
			     const struct rt_path *at_send)
{
	struct fake *f = ctx;
	uint8_t buf[65536];
	size_t len = kb__payload__pack(msg, buf);
	Kb__Payload *copy = kb__payload__unpack(NULL, len, buf);
	uint64_t end = send_ps + f->cmd_latency_ps;

	(void)dst, (void)extra_ps, (void)at_send;
	cr_assert(copy && f->n < MAX_CMDS);
	if (f->mem)
		exec_command(f, copy->command);
	if (copy->command->body_case == KB__COMMAND__BODY_DMA &&
	    !copy->command->dma->write) {
		uint64_t start = send_ps > f->read_free_ps ? send_ps : f->read_free_ps;

		end = start + f->dma_latency_ps;
		f->read_free_ps = end;
	}
	f->sent[f->n] = copy;
	f->done_ps[f->n++] = end;
	return RT_EOK;
}

static const struct tl_port_ops fake_ops = { .send = fake_send };

static struct rt_config test_cfg(void)
{
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	return cfg;
}

static uint64_t cmd_id(const Kb__Payload *p)
{
	const Kb__Command *c = p->command;

	return c->body_case == KB__COMMAND__BODY_COMPOSITE ? c->composite->id
	       : c->body_case == KB__COMMAND__BODY_DMA    ? c->dma->id
							  : c->copy->id;
}

struct run {
	struct fake fake;
	struct rt_config cfg;
	enum rt_err rc;
	struct tl_totals tot;
	char error[1024];
};

/* Runs `k` to completion, delivering completions in time order. */
static void run_kernel(struct run *r, tl_kernel_fn k, const struct tl_arg *args,
		       uint32_t n_args)
{
	struct tl_setup s = { 0 };
	struct tl *tl;
	bool delivered[MAX_CMDS] = { 0 };

	if (!r->fake.cmd_latency_ps)
		r->fake.cmd_latency_ps = 100000;
	if (!r->fake.dma_latency_ps)
		r->fake.dma_latency_ps = 100000;
	s.cfg = &r->cfg;
	s.kernel_name = "test";
	s.kernel = k;
	s.args = args;
	s.n_args = n_args;
	s.ranks = s.pes = 1;
	if (r->fake.mem) {
		r->fake.cfg = &r->cfg;
		s.mode = TL_DATA;
		s.hbm = r->fake.mem->hbm;
		s.hbm_size = r->fake.mem->hbm_size;
		s.tcm = r->fake.mem->tcm;
		s.tcm_size = r->fake.mem->tcm_size;
	}
	s.port = &fake_ops;
	s.port_ctx = &r->fake;
	cr_assert_eq(tl_new(&s, &tl), RT_EOK);
	r->rc = tl_start(tl, 0);
	while (r->rc == RT_EOK && !tl_finished(tl)) {
		uint32_t best = MAX_CMDS;

		for (uint32_t i = 0; i < r->fake.n; i++)
			if (!delivered[i] && (best == MAX_CMDS ||
					      r->fake.done_ps[i] < r->fake.done_ps[best]))
				best = i;
		cr_assert(best != MAX_CMDS, "kernel waits but nothing is in flight");
		delivered[best] = true;
		r->rc = tl_on_command_done(tl, cmd_id(r->fake.sent[best]),
					   r->fake.done_ps[best], NULL);
	}
	snprintf(r->error, sizeof(r->error), "%s", rt_last_error());
	tl_totals(tl, &r->tot);
	tl_destroy(&tl);
}

static void run_release(struct run *r)
{
	for (uint32_t i = 0; i < r->fake.n; i++)
		kb__payload__free_unpacked(r->fake.sent[i], NULL);
}

static struct run *run_new(void)
{
	struct run *r = calloc(1, sizeof(*r));

	r->cfg = test_cfg();
	return r;
}

static const Kb__CompositeCmd *last_composite(const struct run *r)
{
	for (uint32_t i = r->fake.n; i-- > 0;)
		if (r->fake.sent[i]->command->body_case == KB__COMMAND__BODY_COMPOSITE)
			return r->fake.sent[i]->command->composite;
	return NULL;
}

/* ---------------------------------------------------------- kernels */

#define G 8
#define TILE 64
#define D 128

/* decode opt2 #2: softmax_merge prologue + P·V + add (flat-composite design test 2) */
static tl_tensor g_m, g_l, g_o;

static void opt2_tile(struct tl *tl, tl_tensor s, tl_tensor v)
{
	tl_future f = tl_composite(tl, &(struct tl_composite_desc){
		.prologue = { { "softmax_merge",
				{ { "s", s }, { "m", g_m }, { "l", g_l }, { "O", g_o } } } },
		.op = "gemm", .b = v, .out = g_o,
		.epilogue = { { .op = "add", .other = g_o } } });
	(void)f;
}

static int k_merge_once(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	g_m = tl_full(tl, G, 1, TL_F32, -1e30);
	g_l = tl_zeros(tl, G, 1, TL_F32);
	g_o = tl_zeros(tl, G, D, TL_F32);
	tl_tensor s = tl_load(tl, 0, G, TILE, TL_F32);
	tl_tensor v = tl_ref(tl, 1 << 20, TILE, D, TL_F16);
	opt2_tile(tl, s, v);
	return 0;
}

Test(tl_recipe, adr0065_t2_softmax_merge_lowers_to_10_ops_rw_m_l_O, .timeout = 10)
{
	static const char *const kinds[] = { "rmax", "max_elem", "exp_diff", "exp_diff",
					     "rsum", "fma", "mul_bcast", "copy", "gemm", "add" };
	struct run *r = run_new();
	const Kb__CompositeCmd *c;

	run_kernel(r, k_merge_once, NULL, 0);
	cr_assert_eq(r->rc, RT_EOK, "%s", r->error);
	c = last_composite(r);
	cr_assert_not_null(c);
	cr_assert_eq(c->n_ops, 10);
	for (size_t i = 0; i < 10; i++) {
		cr_expect_str_eq(c->ops[i]->kind, kinds[i], "op %zu", i);
		if (i < 8)
			cr_expect_eq(c->ops[i]->scope, KB__SCOPE__SCOPE_KERNEL);
	}
	cr_assert_eq(c->n_rw_handles, 3);
	/* m, l, O in that order: same addresses as the persistent handles */
	cr_expect_eq(c->rw_handles[0]->addr, c->ops[7]->out->addr);      /* m */
	cr_expect_eq(c->rw_handles[1]->addr, c->ops[5]->out->addr);      /* l */
	cr_expect_eq(c->rw_handles[2]->addr, c->ops[6]->out->addr);      /* O */
	/* auto-bind: the GEMM's a is P (exp_diff #2's out), pinned TCM */
	cr_expect_eq(c->ops[8]->operands[0]->tensor->addr, c->ops[3]->out->addr);
	cr_expect(c->ops[8]->operands[0]->tensor->pinned);
	cr_expect_not(c->ops[8]->operands[1]->tensor->pinned); /* V streamed */
	/* P has the shape of s */
	cr_expect_eq(c->ops[3]->out->shape[0], G);
	cr_expect_eq(c->ops[3]->out->shape[1], TILE);
	cr_expect_lt(rt_command_logical_bytes(r->fake.sent[r->fake.n - 1]->command), 1024);
	run_release(r);
	free(r);
}

static int k_legacy(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	tl_tensor A = tl_ref(tl, 0, 64, 64, TL_F16);
	tl_tensor B = tl_ref(tl, 8192, 64, 64, TL_F16);
	tl_tensor bias = tl_zeros(tl, 1, 64, TL_F32);
	tl_wait(tl, tl_composite(tl, &(struct tl_composite_desc){
		.op = "gemm", .a = A, .b = B,
		.epilogue = { { .op = "add", .other = bias }, { .op = "exp" } } }));
	return 0;
}

Test(tl_recipe, adr0065_d64_legacy_head_epilogue_form_lowers_flat, .timeout = 10)
{
	struct run *r = run_new();
	const Kb__CompositeCmd *c;

	run_kernel(r, k_legacy, NULL, 0);
	cr_assert_eq(r->rc, RT_EOK, "%s", r->error);
	c = last_composite(r);
	cr_assert_eq(c->n_ops, 3);
	cr_expect_str_eq(c->ops[0]->kind, "gemm");
	cr_expect_str_eq(c->ops[1]->kind, "add");
	cr_expect_eq(c->ops[1]->scope, KB__SCOPE__SCOPE_OUTPUT_TILE);
	cr_expect_str_eq(c->ops[2]->kind, "exp");
	cr_expect_eq(c->n_rw_handles, 0);
	cr_expect_eq(c->ops[1]->operands[0]->tensor->addr, c->ops[0]->out->addr);
	run_release(r);
	free(r);
}

/* ---------------------------------------------------------- validation */

static int k_two_gemms(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	tl_tensor A = tl_ref(tl, 0, 16, 16, TL_F16);
	tl_composite(tl, &(struct tl_composite_desc){
		.op = "gemm", .a = A, .b = A, .epilogue = { { .op = "gemm" } } });
	return 0;
}

static int k_autobind_conflict(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	g_m = tl_zeros(tl, G, 1, TL_F32);
	g_l = tl_zeros(tl, G, 1, TL_F32);
	g_o = tl_zeros(tl, G, D, TL_F32);
	tl_tensor s = tl_zeros(tl, G, TILE, TL_F32);
	tl_tensor v = tl_ref(tl, 0, TILE, D, TL_F16);
	tl_composite(tl, &(struct tl_composite_desc){
		.prologue = { { "softmax_merge",
				{ { "s", s }, { "m", g_m }, { "l", g_l }, { "O", g_o } } } },
		.op = "gemm", .a = s, .b = v, .out = g_o });
	return 0;
}

static int k_prologue_hbm(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	g_m = tl_zeros(tl, G, 1, TL_F32);
	g_l = tl_zeros(tl, G, 1, TL_F32);
	g_o = tl_zeros(tl, G, D, TL_F32);
	tl_tensor s = tl_ref(tl, 0, G, TILE, TL_F32); /* HBM */
	tl_tensor v = tl_ref(tl, 65536, TILE, D, TL_F16);
	tl_composite(tl, &(struct tl_composite_desc){
		.prologue = { { "softmax_merge",
				{ { "s", s }, { "m", g_m }, { "l", g_l }, { "O", g_o } } } },
		.op = "gemm", .b = v, .out = g_o });
	return 0;
}

static int k_math_hbm(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	tl_composite(tl, &(struct tl_composite_desc){
		.op = "exp", .a = tl_ref(tl, 0, 16, 16, TL_F16) });
	return 0;
}

static int k_too_big(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	tl_tensor A = tl_ref(tl, 0, 16, 16, TL_F16);
	tl_tensor x = tl_zeros(tl, 16, 16, TL_F32);
	tl_composite(tl, &(struct tl_composite_desc){
		.op = "gemm", .a = A, .b = A,
		.epilogue = { { .op = "add", .other = x }, { .op = "add", .other = x },
			      { .op = "add", .other = x }, { .op = "add", .other = x } } });
	return 0;
}

static void expect_error(tl_kernel_fn k, enum rt_err code, const char *needle,
			 struct rt_config *cfg)
{
	struct run *r = run_new();

	if (cfg)
		r->cfg = *cfg;
	run_kernel(r, k, NULL, 0);
	cr_expect_eq(r->rc, code, "got %d: %s", r->rc, r->error);
	cr_expect(strstr(r->error, needle) != NULL, "'%s' lacks '%s'", r->error, needle);
	cr_expect(strstr(r->error, "test_tl.c:") != NULL, "no file:line in '%s'", r->error);
	/* the launcher prints a daemon's error with other bytes escaped
	 * (\xe2\x80\x94 for a dash): a message must be printable ASCII */
	for (const char *c = r->error; *c; c++)
		cr_expect(*c >= 0x20 && *c <= 0x7e, "byte 0x%02x in '%s'", (unsigned char)*c,
			  r->error);
	run_release(r);
	free(r);
}

Test(tl_validate, adr0065_d61_two_gemms_rejected_at_emit, .timeout = 10)
{
	expect_error(k_two_gemms, RT_ECOMPOSITE, "D6.1", NULL);
}

Test(tl_validate, adr0065_t10_d66_explicit_a_with_primary_out_rejected, .timeout = 10)
{
	expect_error(k_autobind_conflict, RT_ECOMPOSITE, "D6.6", NULL);
}

Test(tl_validate, adr0065_d67_hbm_operand_on_prologue_rejected, .timeout = 10)
{
	expect_error(k_prologue_hbm, RT_ECOMPOSITE, "D6.7", NULL);
}

Test(tl_validate, adr0065_t11_hbm_operand_on_math_head_rejected, .timeout = 10)
{
	expect_error(k_math_hbm, RT_ECOMPOSITE, "D6.7", NULL);
}

Test(tl_validate, composite_above_logical_byte_cap_rejected, .timeout = 10)
{
	struct rt_config cfg = test_cfg();

	cfg.max_composite_logical_bytes = 128;
	expect_error(k_too_big, RT_ECOMPOSITE, "cap", &cfg);
}

/* Every op is validated against the instruction set (npu/isa.h) at emit
 * time, at the kernel's file:line: an unknown op once got arity 2 and
 * reached the scheduler. */
static int k_unknown_unary(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	tl_unary_at(tl, TL_HERE, "tanh", tl_zeros(tl, 4, 4, TL_F32));
	return 0;
}

static int k_binary_op_as_unary(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	tl_unary_at(tl, TL_HERE, "add", tl_zeros(tl, 4, 4, TL_F32));
	return 0;
}

static int k_unknown_head(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	tl_tensor x = tl_zeros(tl, 4, 4, TL_F32);
	tl_composite(tl, &(struct tl_composite_desc){ .op = "gelu", .a = x });
	return 0;
}

static int k_unknown_epilogue(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	tl_tensor A = tl_zeros(tl, 16, 16, TL_F16);
	tl_composite(tl, &(struct tl_composite_desc){
		.op = "gemm", .a = A, .b = A, .epilogue = { { .op = "relu" } } });
	return 0;
}

static int k_epilogue_bad_broadcast(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	tl_tensor A = tl_zeros(tl, 16, 16, TL_F16);
	tl_tensor x = tl_zeros(tl, 3, 16, TL_F32);
	tl_composite(tl, &(struct tl_composite_desc){
		.op = "gemm", .a = A, .b = A,
		.epilogue = { { .op = "add", .other = x } } });
	return 0;
}

static int k_binary_bad_broadcast(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	tl_add(tl, tl_zeros(tl, 4, 4, TL_F32), tl_zeros(tl, 3, 4, TL_F32));
	return 0;
}

Test(tl_validate, unknown_op_is_an_error_at_the_call_site_listing_the_isa, .timeout = 10)
{
	expect_error(k_unknown_unary, RT_EKERNEL, "unknown op 'tanh'", NULL);
	expect_error(k_unknown_unary, RT_EKERNEL, "rsum, softmax", NULL);
	expect_error(k_unknown_head, RT_EKERNEL,
		     "unknown op 'gelu'", NULL);
	expect_error(k_unknown_epilogue, RT_EKERNEL, "unknown op 'relu'", NULL);
}

Test(tl_validate, op_arity_and_shape_rule_come_from_the_isa, .timeout = 10)
{
	expect_error(k_binary_op_as_unary, RT_EKERNEL, "takes 2 inputs", NULL);
	expect_error(k_binary_bad_broadcast, RT_EKERNEL, "cannot broadcast", NULL);
	expect_error(k_epilogue_bad_broadcast, RT_ECOMPOSITE, "cannot broadcast",
		     NULL);
}

Test(tl_validate, adding_an_op_is_one_table_row, .timeout = 10)
{
	/* every row is consistent: a name, an arity the stage views carry,
	 * and the host/scheduler/engine lookups all find it */
	for (uint32_t id = 0; id < RT_ISA_COUNT; id++) {
		const struct rt_isa_op *op = rt_isa_get((enum rt_isa_id)id);

		cr_assert_eq(rt_isa_find(op->name), op);
		cr_assert(op->arity <= RT_ISA_MAX_ARITY);
		cr_assert(op->arity > 0 || op->shape == RT_ISA_SHAPE_OUT);
		cr_assert(strstr(rt_isa_names(), op->name));
		cr_assert_eq(rt_isa_op_logical_bytes(op),
			     4 + 12 * (op->arity + 1) + 4 * op->n_extras);
	}
	cr_assert_null(rt_isa_find("tanh"));
}

/* ---------------------------------------------------------- scratch */

static int k_sweep(struct tl *tl, const struct tl_args *a)
{
	uint64_t tiles = tl_arg_u64(a, "tiles", 4);
	bool scoped = tl_arg_u64(a, "scoped", 1);

	for (uint64_t j = 0; j < tiles; j++) {
		if (scoped)
			tl_scratch_scope_begin(tl);
		tl_tensor x = tl_load(tl, 0, 64, 64, TL_F16);
		tl_tensor y = tl_exp(tl, x);
		tl_tensor z = tl_sum(tl, y, -1);
		(void)z;
		if (scoped)
			tl_scratch_scope_end(tl);
	}
	return 0;
}

Test(tl_scratch, adr0063_t1_peak_bounded_by_one_tile_whatever_the_count, .timeout = 10)
{
	uint64_t peak[2];
	const uint64_t tiles[2] = { 2, 200 };

	for (int i = 0; i < 2; i++) {
		struct run *r = run_new();
		char n[16];
		struct tl_arg args[] = { { "tiles", n } };

		snprintf(n, sizeof(n), "%llu", (unsigned long long)tiles[i]);
		run_kernel(r, k_sweep, args, 1);
		cr_assert_eq(r->rc, RT_EOK, "%s", r->error);
		peak[i] = r->tot.peak_scratch_bytes;
		run_release(r);
		free(r);
	}
	/* one tile: 64x64 f16 + 64x64 f32 + 64x1 f32 */
	cr_expect_eq(peak[0], 8192 + 16384 + 256);
	cr_expect_eq(peak[1], peak[0]);
}

Test(tl_scratch, adr0063_overflow_names_kernel_bytes_and_fix, .timeout = 10)
{
	struct run *r = run_new();
	char tiles[24];
	struct tl_arg args[] = { { "tiles", tiles }, { "scoped", "0" } };

	/* one tile more than the scratch holds unscoped (a tile's footprint
	 * above: 8192 + 16384 + 256 bytes) */
	snprintf(tiles, sizeof(tiles), "%llu",
		 (unsigned long long)(r->cfg.tcm_scratch_bytes / (8192 + 16384 + 256) + 1));
	run_kernel(r, k_sweep, args, 2);
	cr_expect_eq(r->rc, RT_ESCRATCH);
	cr_expect(strstr(r->error, "kernel test") && strstr(r->error, "bytes requested") &&
		  strstr(r->error, "left") && strstr(r->error, "tl_scratch_scope"),
		  "%s", r->error);
	run_release(r);
	free(r);
}

static uint64_t g_cursor[4];

static int k_nested(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	tl_zeros(tl, 4, 4, TL_F32);               /* 64 B persistent */
	g_cursor[0] = tl_scratch_used(tl);
	tl_scratch_scope_begin(tl);
	tl_zeros(tl, 8, 8, TL_F32);               /* 256 B */
	g_cursor[1] = tl_scratch_used(tl);
	TL_SCRATCH_SCOPE(tl) {
		tl_zeros(tl, 16, 16, TL_F32);
	}
	g_cursor[2] = tl_scratch_used(tl);        /* back to the inner save */
	tl_scratch_scope_end(tl);
	g_cursor[3] = tl_scratch_used(tl);        /* back to the outer save */
	return 0;
}

Test(tl_scratch, adr0063_t5_nested_scopes_rewind_to_their_save_points, .timeout = 10)
{
	struct run *r = run_new();

	run_kernel(r, k_nested, NULL, 0);
	cr_assert_eq(r->rc, RT_EOK, "%s", r->error);
	cr_expect_eq(g_cursor[0], 64);
	cr_expect_eq(g_cursor[1], 64 + 256);
	cr_expect_eq(g_cursor[2], 64 + 256);
	cr_expect_eq(g_cursor[3], 64);
	cr_expect_eq(r->tot.peak_scratch_bytes, 64 + 256 + 1024);
	run_release(r);
	free(r);
}

static int k_use_after_scope(struct tl *tl, const struct tl_args *a)
{
	tl_tensor leaked = TL_NONE;

	(void)a;
	TL_SCRATCH_SCOPE(tl) {
		leaked = tl_zeros(tl, 4, 4, TL_F32);
	}
	tl_zeros(tl, 4, 4, TL_F32); /* reuses the slot and the bytes */
	tl_exp(tl, leaked);
	return 0;
}

Test(tl_scratch, adr0063_d2_use_after_scope_is_a_clear_error, .timeout = 10)
{
	expect_error(k_use_after_scope, RT_EKERNEL,
		     "allocated in scratch scope 1 was used after that scope ended", NULL);
}

static uint64_t g_scope_end_ps, g_load_done_ps;

static int k_inflight_at_scope_exit(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	TL_SCRATCH_SCOPE(tl) {
		tl_load(tl, 0, 64, 64, TL_F16); /* never consumed */
	}
	g_scope_end_ps = tl_now_ps(tl);
	return 0;
}

Test(tl_scratch, adr0062_in_flight_load_is_waited_for_before_its_scope_recycles, .timeout = 10)
{
	struct run *r = run_new();

	run_kernel(r, k_inflight_at_scope_exit, NULL, 0);
	cr_assert_eq(r->rc, RT_EOK, "%s", r->error);
	g_load_done_ps = r->fake.done_ps[0];
	cr_expect_geq(g_scope_end_ps, g_load_done_ps);
	run_release(r);
	free(r);
}

/* ---------------------------------------------------------- lazy loads */

static uint64_t g_after_load_ps, g_after_use_ps;

static int k_lazy(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	tl_tensor x = tl_load(tl, 0, 64, 64, TL_F16);
	g_after_load_ps = tl_now_ps(tl);
	tl_exp(tl, x);
	g_after_use_ps = tl_now_ps(tl);
	return 0;
}

Test(tl_lazy, adr0062_d2_load_returns_at_once_and_first_use_waits, .timeout = 10)
{
	struct run *r = run_new();
	uint64_t cyc = rt_config_cycle_ps(&r->cfg);
	uint64_t dma = rt_dispatch_cycles(&r->cfg, 28) * cyc;

	run_kernel(r, k_lazy, NULL, 0);
	cr_assert_eq(r->rc, RT_EOK, "%s", r->error);
	cr_expect_eq(g_after_load_ps, dma);             /* issue cost only */
	cr_expect_gt(g_after_use_ps, r->fake.done_ps[0]); /* waited, then issued */
	cr_expect_eq(r->fake.sent[0]->command->body_case, KB__COMMAND__BODY_DMA);
	cr_expect_eq(r->fake.n, 2); /* one DMA read + one MATH composite */
	run_release(r);
	free(r);
}

/* ---------------------------------------------------------- dispatch */

/* opt3: the same tile as separate commands (scale, merge steps, P·V, add,
 * copies back into the running state). */
static void opt3_tile(struct tl *tl, tl_tensor s, tl_tensor v)
{
	tl_tensor m_loc = tl_max(tl, s, -1);
	tl_tensor m_new = tl_maximum(tl, g_m, m_loc);
	tl_tensor corr = tl_exp(tl, tl_sub(tl, g_m, m_new));
	tl_tensor p = tl_exp(tl, tl_sub(tl, s, m_new));
	tl_tensor l_new = tl_add(tl, tl_mul(tl, g_l, corr), tl_sum(tl, p, -1));
	tl_tensor o_new = tl_add(tl, tl_mul(tl, g_o, corr), tl_dot(tl, p, v));
	tl_copy_to(tl, g_m, m_new);
	tl_copy_to(tl, g_l, l_new);
	tl_copy_to(tl, g_o, o_new);
}

static int k_tiles(struct tl *tl, const struct tl_args *a)
{
	bool opt2 = tl_arg_u64(a, "opt2", 1);

	g_m = tl_full(tl, G, 1, TL_F32, -1e30);
	g_l = tl_zeros(tl, G, 1, TL_F32);
	g_o = tl_zeros(tl, G, D, TL_F32);
	tl_tensor s = tl_zeros(tl, G, TILE, TL_F32);
	tl_tensor v = tl_ref(tl, 0, TILE, D, TL_F16);
	for (int j = 0; j < 8; j++) {
		TL_SCRATCH_SCOPE(tl) {
			if (opt2)
				opt2_tile(tl, s, v);
			else
				opt3_tile(tl, s, v);
		}
	}
	return 0;
}

Test(tl_dispatch, adr0065_t7_opt3_over_opt2_dispatch_ratio_above_2, .timeout = 10)
{
	uint64_t cycles[2];

	for (int i = 0; i < 2; i++) {
		struct run *r = run_new();
		struct tl_arg args[] = { { "opt2", i == 0 ? "1" : "0" } };

		run_kernel(r, k_tiles, args, 1);
		cr_assert_eq(r->rc, RT_EOK, "%s", r->error);
		cycles[i] = r->tot.dispatch_cycles;
		run_release(r);
		free(r);
	}
	cr_log_info("per-tile dispatch: opt2 %llu, opt3 %llu cycles (x%.2f)",
		    (unsigned long long)cycles[0] / 8, (unsigned long long)cycles[1] / 8,
		    (double)cycles[1] / (double)cycles[0]);
	cr_expect_gt(cycles[1], 2 * cycles[0]);
}

/* ---------------------------------------------------------- IPCQ queues */

#include "../../kernel_host/src/tl_private.h"

#define IPCQ_ROUNDS 1000

static int k_recv_loop(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	for (int i = 0; i < IPCQ_ROUNDS; i++) {
		TL_SCRATCH_SCOPE(tl) {
			tl_future f = tl_recv_async(tl, TL_LEFT, 1, 64, TL_F16);

			tl_wait(tl, f);
		}
	}
	return 0;
}

/* Issue 9 defect 6: the receive FIFOs never compacted, so a long ring grew
 * them by one entry per message. A drained FIFO now starts over. */
Test(tl_ipcq, receive_queues_stay_small_over_many_messages, .timeout = 10)
{
	struct rt_config cfg = test_cfg();
	struct fake f = { 0 };
	struct tl_setup s = { 0 };
	Kb__IpcqData m = KB__IPCQ_DATA__INIT;
	struct tl *tl;
	uint64_t now = 0;
	enum rt_err rc;

	s.cfg = &cfg;
	s.kernel_name = "recv_loop";
	s.kernel = k_recv_loop;
	s.ranks = 2;
	s.pes = 1;
	s.port = &fake_ops;
	s.port_ctx = &f;
	cr_assert_eq(tl_new(&s, &tl), RT_EOK);
	rc = tl_start(tl, 0);
	m.dir = TL_RIGHT; /* sent right by my left neighbour */
	m.nbytes = 128;
	for (int i = 0; rc == RT_EOK && !tl_finished(tl) && i < IPCQ_ROUNDS; i++) {
		now += 1000000;
		rc = tl_on_ipcq(tl, &m, now, NULL);
	}
	cr_assert_eq(rc, RT_EOK, "%s", rt_last_error());
	cr_assert(tl_finished(tl));
	cr_expect_leq(tl->ipcq[TL_LEFT].cap_posted, 8, "posted FIFO grew to %u entries",
		      tl->ipcq[TL_LEFT].cap_posted);
	cr_expect_leq(tl->ipcq[TL_LEFT].n_posted, 1);
	tl_destroy(&tl);
	for (uint32_t i = 0; i < f.n; i++)
		kb__payload__free_unpacked(f.sent[i], NULL);
}

/* ---------------------------------------------------------- reductions */

/* Every reduction op of the instruction set on 1xN, Nx1 and MxN along both
 * axes, through tl_max / tl_sum in data mode (real plan builder, real
 * engine kernels), against an fp64 reference. tl_sum(x, 0) of a 1xN row
 * once gave [sum, 0, 0, ...] from uninitialised memory: the engine chose
 * the direction from the shape instead of the axis. */
#define RED_OUT_ADDR 0x40000u

static struct {
	const char *op;
	uint32_t rows, cols;
	int axis;
	bool trans; /* reduce the transpose of the stored cols x rows */
} g_red;

static int k_reduce(struct tl *tl, const struct tl_args *a)
{
	tl_tensor x = g_red.trans
		? tl_trans(tl, tl_load(tl, 0, g_red.cols, g_red.rows, TL_F32))
		: tl_load(tl, 0, g_red.rows, g_red.cols, TL_F32);
	tl_tensor y = tl_reduce_at(tl, TL_HERE, g_red.op, x, g_red.axis);

	(void)a;
	tl_store(tl, RED_OUT_ADDR, y);
	return 0;
}

/* fp64 reduction of row-major x (rows x cols) along `axis`. */
static void ref_reduce(bool is_max, const float *x, uint32_t rows,
		       uint32_t cols, int axis, double *out, uint32_t *n_out)
{
	bool over_rows = axis == 0;
	uint32_t n = over_rows ? cols : rows, len = over_rows ? rows : cols;

	for (uint32_t o = 0; o < n; o++) {
		double acc = is_max ? -INFINITY : 0.0;

		for (uint32_t i = 0; i < len; i++) {
			double v = over_rows ? x[(size_t)i * cols + o]
					     : x[(size_t)o * cols + i];

			acc = is_max ? (v > acc ? v : acc) : acc + v;
		}
		out[o] = acc;
	}
	*n_out = n;
}

static void check_reduce(const char *op, uint32_t rows, uint32_t cols,
			 int axis, bool trans)
{
	struct run *r = run_new();
	struct eng_memory mem = { 0 };
	double want[256];
	uint32_t n_out;
	float *x, *got;

	mem.hbm_size = 1u << 20;
	mem.tcm_size = r->cfg.tcm_scratch_bytes + r->cfg.tcm_staging_bytes;
	mem.hbm = calloc(1, mem.hbm_size);
	mem.tcm = calloc(1, mem.tcm_size);
	cr_assert(mem.hbm && mem.tcm && rows * cols <= 4096);
	x = malloc((size_t)rows * cols * sizeof(float)); /* logical, row-major */
	for (uint32_t i = 0; i < rows * cols; i++) /* mixed signs, non-integer */
		x[i] = (float)((int)(i * 7u % 11u) - 5) * 0.75f + 0.125f * (float)i;
	if (rows == 1 && cols == 5) { /* the row of the defect report */
		static const float row[5] = { 1, 2, 3, 4, 5.5f };
		memcpy(x, row, sizeof(row));
	}
	for (uint32_t r0 = 0; r0 < rows; r0++) /* stored: x, or its transpose */
		for (uint32_t c0 = 0; c0 < cols; c0++)
			((float *)mem.hbm)[trans ? (size_t)c0 * rows + r0
						 : (size_t)r0 * cols + c0] =
				x[(size_t)r0 * cols + c0];
	got = (float *)(mem.hbm + RED_OUT_ADDR);
	for (uint32_t i = 0; i < 256; i++) /* poison: unwritten shows as NaN */
		got[i] = NAN;
	g_red.op = op;
	g_red.rows = rows;
	g_red.cols = cols;
	g_red.axis = axis;
	g_red.trans = trans;
	r->fake.mem = &mem;
	run_kernel(r, k_reduce, NULL, 0);
	cr_assert_eq(r->rc, RT_EOK, "%s", r->error);
	ref_reduce(strcmp(op, "rmax") == 0, x, rows, cols, axis, want, &n_out);
	for (uint32_t o = 0; o < n_out; o++)
		cr_assert(fabs(got[o] - want[o]) <= 1e-5 * (1.0 + fabs(want[o])),
			  "%s of %ux%u%s along axis %d: out[%u] = %g, fp64 %g", op,
			  rows, cols, trans ? " (transposed view)" : "", axis, o,
			  (double)got[o], want[o]);
	cr_assert(isnan(got[n_out]), "%s wrote past its %u outputs", op, n_out);
	run_release(r);
	free(r);
	free(x);
	free(mem.hbm);
	free(mem.tcm);
}

Test(tl_reduce, every_reduction_on_row_column_and_matrix_along_both_axes,
     .timeout = 30)
{
	static const uint32_t shapes[][2] = { { 1, 5 }, { 1, 37 }, { 9, 1 },
					      { 6, 13 }, { 1, 1 } };
	static const int axes[] = { 0, 1, -1 };

	for (uint32_t id = 0; id < RT_ISA_COUNT; id++) {
		const struct rt_isa_op *op = rt_isa_get((enum rt_isa_id)id);

		if (op->shape != RT_ISA_SHAPE_REDUCE)
			continue;
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
			for (size_t a = 0; a < sizeof(axes) / sizeof(axes[0]); a++)
				for (int t = 0; t <= 1; t++)
					check_reduce(op->name, shapes[s][0],
						     shapes[s][1], axes[a], t);
	}
}

Test(tl_reduce, sum_of_the_reported_row_along_axis_0_is_the_row, .timeout = 10)
{
	check_reduce("rsum", 1, 5, 0, false); /* [1 2 3 4 5.5], not [15.5 0 0 0 0] */
}

Test(tl_reduce, bad_axis_is_an_error_at_the_call_site, .timeout = 10)
{
	struct run *r = run_new();

	g_red.op = "rsum";
	g_red.rows = 4;
	g_red.cols = 4;
	g_red.axis = 2;
	g_red.trans = false;
	run_kernel(r, k_reduce, NULL, 0);
	cr_assert_eq(r->rc, RT_EKERNEL);
	cr_assert(strstr(r->error, "test_tl.c:") &&
		  strstr(r->error, "axis 2"), "%s", r->error);
	run_release(r);
	free(r);
}

/* ---------------------------------------------------------- fills */

/* tl_full is a MATH `fill` command: one dispatch of a one-op composite
 * (4 + 12 out + 4 extra = 20 logical bytes), PE_MATH time, and the value
 * lands in TCM when the command completes (data mode, real engine). */
static int k_fill(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	tl_store(tl, 0x40000, tl_full(tl, 3, 5, TL_F16, -2.5));
	tl_store(tl, 0x50000, tl_full(tl, 2, 4, TL_F32, 1e30));
	return 0;
}

Test(tl_fill, full_is_a_math_command_charged_like_one, .timeout = 10)
{
	struct run *r = run_new();
	struct eng_memory mem = { 0 };
	const Kb__CompositeCmd *c;
	uint16_t h;
	float f;

	mem.hbm_size = 1u << 20;
	mem.tcm_size = r->cfg.tcm_scratch_bytes + r->cfg.tcm_staging_bytes;
	mem.hbm = calloc(1, mem.hbm_size);
	mem.tcm = calloc(1, mem.tcm_size);
	r->fake.mem = &mem;
	run_kernel(r, k_fill, NULL, 0);
	cr_assert_eq(r->rc, RT_EOK, "%s", r->error);
	/* fill, store, fill, store */
	cr_assert_eq(r->fake.n, 4);
	c = r->fake.sent[0]->command->composite;
	cr_assert_not_null(c);
	cr_assert_eq(c->n_ops, 1);
	cr_assert_str_eq(c->ops[0]->kind, "fill");
	cr_assert_eq(c->ops[0]->n_operands, 0);
	cr_assert_eq(rt_command_logical_bytes(r->fake.sent[0]->command), 20);
	cr_assert_eq(r->tot.dispatch_cycles,
		     2 * rt_dispatch_cycles(&r->cfg, 20) +
		     2 * rt_dispatch_cycles(&r->cfg, RT_ISA_MOVE_LOGICAL_BYTES));
	for (int i = 0; i < 15; i++) {
		memcpy(&h, mem.hbm + 0x40000 + 2 * i, 2);
		cr_assert_eq(h, 0xC100, "f16 -2.5 at %d: %#x", i, h); /* -2.5 */
	}
	for (int i = 0; i < 8; i++) {
		memcpy(&f, mem.hbm + 0x50000 + 4 * i, 4);
		cr_assert_eq(f, 1e30f);
	}
	run_release(r);
	free(r);
	free(mem.hbm);
	free(mem.tcm);
}

/* tl_empty allocates scratch and issues nothing: a load into it is the
 * first command, the tensor's bytes are the load's, it takes its place in
 * the arena like any allocation, and tl_scratch_size is the arena. */
static uint64_t g_empty_used, g_empty_size;

static int k_empty(struct tl *tl, const struct tl_args *a)
{
	uint64_t before = tl_scratch_used(tl);
	tl_tensor e = tl_empty(tl, 4, 8, TL_F16);

	(void)a;
	g_empty_used = tl_scratch_used(tl) - before;
	g_empty_size = tl_scratch_size(tl);
	tl_load_async_into(tl, e, 0x1000);
	tl_store(tl, 0x60000, e);
	return 0;
}

Test(tl_fill, empty_issues_no_command_and_holds_what_is_loaded, .timeout = 10)
{
	struct run *r = run_new();
	struct eng_memory mem = { 0 };

	mem.hbm_size = 1u << 20;
	mem.tcm_size = r->cfg.tcm_scratch_bytes + r->cfg.tcm_staging_bytes;
	mem.hbm = calloc(1, mem.hbm_size);
	mem.tcm = calloc(1, mem.tcm_size);
	for (int i = 0; i < 64; i++)
		mem.hbm[0x1000 + i] = (uint8_t)(i * 7 + 1);
	r->fake.mem = &mem;
	run_kernel(r, k_empty, NULL, 0);
	cr_assert_eq(r->rc, RT_EOK, "%s", r->error);
	/* the load and the store only */
	cr_assert_eq(r->fake.n, 2);
	cr_assert_not_null(r->fake.sent[0]->command->dma);
	cr_assert(!r->fake.sent[0]->command->dma->write);
	cr_assert_eq(g_empty_used, 64);
	cr_assert_eq(g_empty_size, r->cfg.tcm_scratch_bytes);
	cr_assert_eq(memcmp(mem.hbm + 0x60000, mem.hbm + 0x1000, 64), 0);
	run_release(r);
	free(r);
	free(mem.hbm);
	free(mem.tcm);
}

/* ---------------------------------------------------------- epilogues */

/* A row (1 x N) or column (M x 1) epilogue operand broadcasts over a GEMM
 * that the scheduler tiles: each output tile must see the matching slice
 * of it (a whole 1 x 256 row against a 128-wide tile does not broadcast). */
#define EPI_M 200u
#define EPI_K 48u
#define EPI_N 160u

static bool g_epi_column;

static int k_gemm_bias(struct tl *tl, const struct tl_args *a)
{
	tl_tensor A = tl_load(tl, 0, EPI_M, EPI_K, TL_F32);
	tl_tensor B = tl_load(tl, 0x10000, EPI_K, EPI_N, TL_F32);
	tl_tensor bias = g_epi_column ? tl_load(tl, 0x20000, EPI_M, 1, TL_F32)
				      : tl_load(tl, 0x20000, 1, EPI_N, TL_F32);
	tl_future f = tl_composite(tl, &(struct tl_composite_desc){
		.op = "gemm", .a = A, .b = B,
		.epilogue = { { .op = "add", .other = bias } } });

	(void)a;
	tl_store(tl, 0x40000, tl_wait(tl, f));
	return 0;
}

static void check_gemm_bias(bool column)
{
	struct run *r = run_new();
	struct eng_memory mem = { 0 };
	float *hbm, *got;

	mem.hbm_size = 1u << 20;
	mem.tcm_size = r->cfg.tcm_scratch_bytes + r->cfg.tcm_staging_bytes;
	mem.hbm = calloc(1, mem.hbm_size);
	mem.tcm = calloc(1, mem.tcm_size);
	hbm = (float *)mem.hbm;
	for (uint32_t i = 0; i < EPI_M * EPI_K; i++)
		hbm[i] = (float)((int)(i % 13u) - 6) * 0.25f;
	for (uint32_t i = 0; i < EPI_K * EPI_N; i++)
		hbm[0x10000 / 4 + i] = (float)((int)(i % 7u) - 3) * 0.5f;
	for (uint32_t i = 0; i < (column ? EPI_M : EPI_N); i++)
		hbm[0x20000 / 4 + i] = 100.0f + (float)i;
	g_epi_column = column;
	r->cfg.gemm_tile_m = r->cfg.gemm_tile_n = r->cfg.gemm_tile_k = 64;
	r->fake.mem = &mem;
	run_kernel(r, k_gemm_bias, NULL, 0);
	cr_assert_eq(r->rc, RT_EOK, "%s", r->error);
	got = hbm + 0x40000 / 4;
	for (uint32_t i = 0; i < EPI_M; i++)
		for (uint32_t j = 0; j < EPI_N; j++) {
			double want = hbm[0x20000 / 4 + (column ? i : j)];

			for (uint32_t p = 0; p < EPI_K; p++)
				want += (double)hbm[i * EPI_K + p] *
					hbm[0x10000 / 4 + p * EPI_N + j];
			cr_assert(fabs(got[i * EPI_N + j] - want) < 1e-3,
				  "%s bias: C[%u,%u] = %g, fp64 %g",
				  column ? "column" : "row", i, j,
				  (double)got[i * EPI_N + j], want);
		}
	run_release(r);
	free(r);
	free(mem.hbm);
	free(mem.tcm);
}

Test(tl_epilogue, row_and_column_operands_are_sliced_to_each_gemm_tile,
     .timeout = 30)
{
	check_gemm_bias(false);
	check_gemm_bias(true);
}

/* ---------------------------------------------------------- critical path */

/* The kernel's path (rt/path.h, ADR 0030): dispatch on its own clock, the
 * path of a completion that came after the clock, and a receive whose
 * message carried no path counted as sender_not_ready. */
struct path_fake {
	struct rt_path sent;   /* the last command's path at its send */
	bool sent_has;
	struct rt_path reported;
	bool has_report;
};

static enum rt_err path_send(void *ctx, enum tl_port_dst dst, uint64_t send_ps,
			     uint64_t extra_ps, const Kb__Payload *msg, const struct rt_path *at)
{
	struct path_fake *f = ctx;

	(void)dst, (void)send_ps, (void)extra_ps, (void)msg;
	f->sent_has = at != NULL;
	if (at)
		f->sent = *at;
	return RT_EOK;
}

static void path_report(void *ctx, const struct rt_path *p)
{
	struct path_fake *f = ctx;

	f->reported = *p;
	f->has_report = true;
}

static const struct tl_port_ops path_ops = { .send = path_send, .path_report = path_report };

static int k_two_recvs(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	tl_wait(tl, tl_recv_async(tl, TL_LEFT, 1, 64, TL_F16));
	tl_wait(tl, tl_recv_async(tl, TL_LEFT, 1, 64, TL_F16));
	return 0;
}

static int k_fill_then_wait(struct tl *tl, const struct tl_args *a)
{
	(void)a;
	tl_wait(tl, (tl_future){ tl_zeros(tl, 8, 8, TL_F16) });
	return 0;
}

Test(tl_path, the_kernel_clock_explains_every_picosecond, .timeout = 10)
{
	struct rt_config cfg = test_cfg();
	struct path_fake f = { 0 };
	struct tl_setup s = { 0 };
	Kb__IpcqData m = KB__IPCQ_DATA__INIT;
	struct rt_path arrived = { 0 };
	struct tl *tl;

	s.cfg = &cfg;
	s.kernel_name = "two_recvs";
	s.kernel = k_two_recvs;
	s.ranks = 2;
	s.pes = 1;
	s.port = &path_ops;
	s.port_ctx = &f;
	cr_assert_eq(tl_new(&s, &tl), RT_EOK);
	cr_assert_eq(tl_start(tl, 0), RT_EOK);
	m.dir = TL_RIGHT;
	m.nbytes = 128;
	/* the first message carries a path (its sender's): the kernel takes it */
	arrived.ps[RT_PATH_GEMM] = 3000;
	arrived.ps[RT_PATH_LINK_LATENCY] = 2000;
	cr_assert_eq(tl_on_ipcq(tl, &m, 5000, &arrived), RT_EOK, "%s", rt_last_error());
	/* the second carries none: its wait is unexplained */
	cr_assert_eq(tl_on_ipcq(tl, &m, 9000, NULL), RT_EOK, "%s", rt_last_error());
	cr_assert(tl_finished(tl));
	cr_assert(f.has_report);
	cr_expect_eq(f.reported.ps[RT_PATH_GEMM], 3000);
	cr_expect_eq(f.reported.ps[RT_PATH_LINK_LATENCY], 2000);
	cr_expect_eq(f.reported.ps[RT_PATH_SENDER_NOT_READY], 4000);
	cr_expect_eq(rt_path_total(&f.reported), 9000);
	tl_destroy(&tl);

	/* a command: its dispatch is on the path it is sent with; a completion
	 * without a path loses the kernel's path (nothing is reported) */
	memset(&f, 0, sizeof(f));
	s.kernel_name = "fill_then_wait";
	s.kernel = k_fill_then_wait;
	s.ranks = 1;
	cr_assert_eq(tl_new(&s, &tl), RT_EOK);
	cr_assert_eq(tl_start(tl, 0), RT_EOK);
	cr_assert(f.sent_has);
	cr_expect_gt(f.sent.ps[RT_PATH_DISPATCH], 0);
	cr_expect_eq(rt_path_total(&f.sent), f.sent.ps[RT_PATH_DISPATCH]);
	cr_assert_eq(tl_on_command_done(tl, 1, 1000000, NULL), RT_EOK, "%s", rt_last_error());
	cr_assert(tl_finished(tl));
	cr_expect_not(f.has_report, "a path was reported though a completion carried none");
	tl_destroy(&tl);
}
