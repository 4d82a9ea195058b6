/* fuzz_decode.h — what the payload harnesses share: decode the input as a
 * daemon does (one 1 MiB bump arena for the whole run, reset before every
 * input; libFuzzer offers no teardown hook, so it lives until exit) and the
 * default configuration. */
#ifndef FUZZ_DECODE_H
#define FUZZ_DECODE_H

#include <stdint.h>
#include <stdlib.h>

#include "rt/config.h"
#include "npu/payload.h"
#include "rt/wire.h"

/* The input decoded as a Payload, or NULL when the decoder refuses it. */
static inline Kb__Payload *fuzz_decode(const uint8_t *data, size_t size)
{
	static struct rt_arena arena;
	Kb__Payload *msg = NULL;

	if (!arena.base && rt_arena_init(&arena, 1 << 20) != RT_EOK)
		abort();
	rt_arena_reset(&arena);
	/* what a daemon checks before an NPU component takes it */
	if (rt_wire_decode_payload(data, size, &arena, &msg) != RT_EOK ||
	    npu_check_payload(msg) != RT_EOK)
		return NULL;
	if (!msg) /* success must hand back a message */
		abort();
	return msg;
}

/* Every field at its default. */
static inline const struct rt_config *fuzz_config(void)
{
	static struct rt_config cfg;
	static int ready;

	if (!ready) {
		rt_config_defaults(&cfg);
		ready = 1;
	}
	return &cfg;
}

#endif
