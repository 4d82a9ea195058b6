/* fuzz_sched_plan.c — libFuzzer harness: a payload from a kernel host's
 * daemon, decoded as the scheduler decodes it, then planned
 * (sched_plan_build), its hazards collected and the plan dumped. Any input
 * must give a plan whose every stage depends only on earlier stages and
 * carries at most SCHED_MAX_IN inputs, or a clean error; never a crash or a
 * leak. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_decode.h"
#include "rt/buf.h"
#include "sched.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The invariants the scheduler core and the engines rely on. */
static void check_plan(const struct sched_plan *p)
{
	for (uint32_t s = 0; s < p->n_stages; s++) {
		const struct sched_stage *st = &p->stages[s];

		if (st->n_in > SCHED_MAX_IN || st->n_deps > SCHED_MAX_DEPS)
			abort();
		for (uint32_t d = 0; d < st->n_deps; d++)
			if (st->deps[d] >= s ||
			    (d > 0 && st->deps[d] <= st->deps[d - 1]))
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct rt_config *cfg = fuzz_config();
	Kb__Payload *msg = fuzz_decode(data, size);
	struct sched_hazard_set hz;
	struct sched_plan plan;
	struct rt_buf dump;

	if (!msg || msg->body_case != KB__PAYLOAD__BODY_COMMAND)
		return 0;
	(void)rt_command_logical_bytes(msg->command);
	sched_plan_init(&plan);
	if (sched_plan_build(msg->command, cfg, cfg->tcm_scratch_bytes,
			     &plan) == RT_EOK) {
		check_plan(&plan);
		sched_plan_rebase(&plan, cfg->tcm_scratch_bytes +
					 cfg->tcm_staging_bytes / 2);
		rt_buf_init(&dump);
		(void)sched_plan_dump(&plan, &dump);
		rt_buf_release(&dump);
	}
	sched_plan_release(&plan);
	sched_hazard_init(&hz);
	(void)sched_hazard_collect(&hz, msg->command, 0, 0);
	sched_hazard_release(&hz);
	return 0;
}
