/* fuzz_payload.c — libFuzzer harness: component payloads decoded into a
 * 1 MiB bump arena, reset before every input as the daemons do. Whatever
 * decodes is also copied the in-process way (rt/msg.h): the copy must pack
 * to the same bytes as the decoded message and have its digest, or a
 * colocation could change a result. */
#include <string.h>

#include "fuzz_decode.h"
#include "rt/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_copy(const Kb__Payload *msg)
{
	size_t size = rt_msg_size(&msg->base), need = 0, len = kb__payload__get_packed_size(msg);
	void *block = malloc(size);
	uint8_t *a = malloc(len + 1), *b = malloc(len + 1);
	uint64_t digest = 0;
	Kb__Payload *copy;

	if (!block || !a || !b)
		abort();
	copy = (Kb__Payload *)rt_msg_copy(&msg->base, block, size, &need, &digest);
	if (!copy || need != size || digest != rt_msg_digest(&msg->base) ||
	    digest != rt_msg_digest_reflective(&msg->base) ||
	    kb__payload__get_packed_size(copy) != len)
		abort();
	kb__payload__pack(msg, a);
	kb__payload__pack(copy, b);
	if (memcmp(a, b, len))
		abort();
	free(b);
	free(a);
	free(block);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Kb__Payload *msg = fuzz_decode(data, size);

	if (msg)
		check_copy(msg);
	return 0;
}
