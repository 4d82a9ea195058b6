/* fuzz_npy.c — libFuzzer harness: .npy bytes. A parse that succeeds must
 * describe only bytes it was given; copying them all lets the sanitizers
 * catch an out-of-bounds claim the explicit check might miss. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rt_npy n;
	uint8_t *copy;
	size_t bytes;

	if (rt_npy_parse(data, size, &n) != RT_EOK)
		return 0;
	bytes = (size_t)n.count * n.elem_size;
	if (n.data < data || bytes > size - (size_t)(n.data - data))
		abort();
	copy = malloc(bytes ? bytes : 1);
	if (!copy)
		abort();
	memcpy(copy, n.data, bytes);
	free(copy);
	return 0;
}
