/* fuzz_payload.c — libFuzzer harness: component payloads decoded into a
 * 1 MiB bump arena, reset before every input as the daemons do. */
#include <stdint.h>
#include <stdlib.h>

#include "rt/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* one arena for the whole run, like a daemon's; the harness API
	 * offers no teardown hook, so it lives until exit */
	static struct rt_arena arena;
	Kb__Payload *msg = NULL;

	if (!arena.base && rt_arena_init(&arena, 1 << 20) != RT_EOK)
		abort();
	rt_arena_reset(&arena);
	if (rt_wire_decode_payload(data, size, &arena, &msg) == RT_EOK &&
	    !msg)
		abort();
	return 0;
}
