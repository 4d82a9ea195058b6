/* fuzz_stage.c — libFuzzer harness: a payload from a scheduler's daemon,
 * decoded as an engine decodes it, then checked by each engine class
 * (eng_stage_check) and, when a class accepts it, counted, timed by every
 * built-in model of that class and executed on small data-mode memories.
 * Any input must be accepted or rejected with a clean error; never a
 * crash, an out-of-bounds access or a leak. */
#include <stdint.h>
#include <stdlib.h>

#include "eng.h"
#include "fuzz_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MEM_BYTES (128u << 10) /* small: data kernels stay fast */

/* Times the stage with every built-in model of `cls` (the engines' own
 * list, so a new built-in is fuzzed without touching this file). */
static void time_stage(const Kb__Stage *s, enum eng_class cls,
		       const struct rt_config *cfg)
{
	const struct eng_model_ops *ops;

	for (size_t i = 0; (ops = eng_model_builtin(i)) != NULL; i++) {
		struct eng_model m;
		uint64_t cycles;

		if (ops->engine != cls)
			continue;
		if (eng_model_init(&m, cls, ops->name, cfg) != RT_EOK)
			abort(); /* defaults are valid */
		(void)eng_model_latency(&m, s, NULL, &cycles);
		eng_model_release(&m);
	}
}

static enum rt_err run_stage(const Kb__Stage *s, enum eng_class cls,
			     const struct eng_memory *mem)
{
	switch (cls) {
	case ENG_DMA:
		return eng_dma_run(s, mem);
	case ENG_GEMM:
		return eng_gemm_run(s, mem);
	case ENG_MATH:
		return eng_math_run(s, mem);
	}
	return RT_EINVAL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t hbm[MEM_BYTES], tcm[MEM_BYTES];
	const struct eng_memory timing = { NULL, MEM_BYTES, NULL, MEM_BYTES };
	const struct eng_memory mem = { hbm, MEM_BYTES, tcm, MEM_BYTES };
	Kb__Payload *msg = fuzz_decode(data, size);

	if (!msg || msg->body_case != KB__PAYLOAD__BODY_STAGE)
		return 0;
	for (int c = ENG_DMA; c <= ENG_MATH; c++) {
		enum eng_class cls = (enum eng_class)c;

		if (eng_stage_check(msg->stage, cls, &timing) != RT_EOK)
			continue;
		(void)eng_stage_bytes(msg->stage);
		(void)eng_stage_elements(msg->stage);
		time_stage(msg->stage, cls, fuzz_config());
		/* a stage that passed the check must run */
		if (run_stage(msg->stage, cls, &mem) != RT_EOK)
			abort();
	}
	return 0;
}
