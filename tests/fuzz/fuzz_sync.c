/* fuzz_sync.c — libFuzzer harness: lockstep Sync frames. */
#include <stdint.h>
#include <stdlib.h>

#include "rt/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Kb__Sync *msg = NULL;

	if (rt_wire_decode_sync(data, size, &msg) == RT_EOK) {
		if (!msg)
			abort();
		rt_wire_free_sync(msg);
	}
	return 0;
}
