/* fuzz_payload.c — libFuzzer harness: component payloads decoded into a
 * 1 MiB bump arena, reset before every input as the daemons do. */
#include "fuzz_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	(void)fuzz_decode(data, size);
	return 0;
}
