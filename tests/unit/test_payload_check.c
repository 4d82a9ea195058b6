/* test_payload_check.c — who checks what a payload holds (issue 21,
 * item 1): the runtime checks only its frame (a body, the critical path),
 * npu_check_payload the bounds of an NPU command's tensors and a stage's
 * views, and a daemon hands each delivery to its receiver's ops->check
 * before handle. Driven through a real daemon by direct calls. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "npu/payload.h"
#include "rt/component.h"
#include "rt/daemon.h"
#include "rt/job.h"
#include "rt/wire.h"

/* A stage whose first input view is rows x 4. */
static void stage_with_rows(Kb__Payload *p, Kb__Stage *s, Kb__View *v, Kb__View **in,
			    uint32_t rows)
{
	*v = (Kb__View)KB__VIEW__INIT;
	v->rows = rows;
	v->cols = 4;
	*s = (Kb__Stage)KB__STAGE__INIT;
	in[0] = v;
	s->n_in = 1;
	s->in = in;
	*p = (Kb__Payload)KB__PAYLOAD__INIT;
	p->body_case = KB__PAYLOAD__BODY_STAGE;
	p->stage = s;
}

Test(payload_check, the_runtime_checks_the_frame_and_npu_the_body, .timeout = 10)
{
	Kb__Payload p;
	Kb__Stage s;
	Kb__View v, *in[1];

	stage_with_rows(&p, &s, &v, in, (1u << 24) + 1);
	cr_expect_eq(rt_wire_check_payload(&p), RT_EOK, "the runtime looked into a stage");
	cr_assert_eq(npu_check_payload(&p), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "stage input view is 16777217x4"), "%s", rt_last_error());
	v.rows = 1u << 24;
	cr_expect_eq(npu_check_payload(&p), RT_EOK, "%s", rt_last_error());
	p.body_case = KB__PAYLOAD__BODY__NOT_SET;
	cr_expect_eq(rt_wire_check_payload(&p), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "payload has no body"), "%s", rt_last_error());
}

Test(payload_check, a_command_tensor_out_of_bounds_is_named, .timeout = 10)
{
	uint32_t shape[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
	Kb__TensorRef src = KB__TENSOR_REF__INIT, dst = KB__TENSOR_REF__INIT;
	Kb__DmaCmd dma = KB__DMA_CMD__INIT;
	Kb__Command cmd = KB__COMMAND__INIT;
	Kb__Payload p = KB__PAYLOAD__INIT;

	src.n_shape = 9;
	src.shape = shape;
	dma.src = &src;
	dma.dst = &dst;
	cmd.body_case = KB__COMMAND__BODY_DMA;
	cmd.dma = &dma;
	p.body_case = KB__PAYLOAD__BODY_COMMAND;
	p.command = &cmd;
	cr_expect_eq(rt_wire_check_payload(&p), RT_EOK);
	cr_assert_eq(npu_check_payload(&p), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "dma src tensor has 9 dimensions (at most 8)"), "%s",
		  rt_last_error());
	src.n_shape = 8;
	cr_expect_eq(npu_check_payload(&p), RT_EOK, "%s", rt_last_error());
	cmd.body_case = KB__COMMAND__BODY__NOT_SET;
	cr_expect_eq(npu_check_payload(&p), RT_EDECODE);
}

/* ---------------------------------------------------------------- daemon */

static uint32_t send_rows;   /* the sender's stage: first input rows */
static unsigned n_handled;   /* deliveries the receiver's handle took */
static char window_line[600]; /* the window's error line */

static enum rt_err sender_init(struct rt_ctx *ctx, void *state)
{
	(void)state;
	return rt_timer(ctx, 10, 0);
}

static enum rt_err sender_handle(struct rt_ctx *ctx, void *state, const struct rt_delivery *d)
{
	Kb__Payload p;
	Kb__Stage s;
	Kb__View v, *in[1];

	(void)state, (void)d;
	stage_with_rows(&p, &s, &v, in, send_rows);
	return rt_send(ctx, 1, rt_now(ctx), 0, &p);
}

static enum rt_err receiver_handle(struct rt_ctx *ctx, void *state, const struct rt_delivery *d)
{
	(void)ctx, (void)state, (void)d;
	n_handled++;
	return RT_EOK;
}

static const struct rt_component_ops sender_ops = {
	.name = "sender", .state_size = 8, .init = sender_init, .handle = sender_handle,
};
static const struct rt_component_ops receiver_ops = {
	.name = "receiver", .state_size = 8, .handle = receiver_handle,
	.check = npu_check_payload,
};

/* Runs the pair in one daemon up to 1 us; the window's result. */
static enum rt_err run_pair(uint32_t rows)
{
	static struct rt_job job;
	struct rt_topology topo;
	struct rt_daemon_opts o = { 0 };
	struct rt_daemon *d = NULL;
	Kb__Grant g = KB__GRANT__INIT;
	Kb__Envelope **out = NULL;
	size_t n_out = 0;
	uint32_t a, b;
	char dir[64] = "/tmp/kb-unit-pcheck-XXXXXX", parts[300], cmd[128];
	enum rt_err err;

	send_rows = rows;
	n_handled = 0;
	memset(&job, 0, sizeof(job));
	rt_config_defaults(&job.config);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(job.out_dir, sizeof(job.out_dir), "%s", dir);
	snprintf(parts, sizeof(parts), "%s/%s", dir, RT_PARTS_DIR);
	mkdir(parts, 0700);
	job.trace_off = true;
	rt_topology_init(&topo);
	cr_assert_eq(rt_topology_add(&topo, "send", &sender_ops, 0, 0, &a), RT_EOK);
	cr_assert_eq(rt_topology_add(&topo, "recv", &receiver_ops, 0, 0, &b), RT_EOK);
	cr_assert_eq(rt_topology_link(&topo, a, b, 5), RT_EOK);
	cr_assert_eq(rt_topology_place(&topo, RT_COLOCATE_ALL, NULL), RT_EOK);
	o.job = &job;
	o.topo = &topo;
	cr_assert_eq(rt_daemon_open(&o, &d), RT_EOK, "%s", rt_last_error());
	g.window = 1;
	g.end_ps = 1000000;
	err = rt_daemon_window(d, &g, &out, &n_out);
	snprintf(window_line, sizeof(window_line), "%s", err ? rt_last_error() : "");
	rt_daemon_close(&d);
	rt_topology_release(&topo);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
	return err;
}

Test(payload_check, a_daemon_hands_each_delivery_to_its_receivers_check, .timeout = 10)
{
	cr_assert_eq(run_pair(8), RT_EOK, "%s", window_line);
	cr_expect_eq(n_handled, 1);
	cr_assert_eq(run_pair((1u << 24) + 1), RT_EDECODE);
	cr_expect_eq(n_handled, 0, "the receiver took what its check refused");
	cr_expect(strstr(window_line, "recv: message from send: stage input view is"), "%s",
		  window_line);
}
