/* fuzz_elf.c — libFuzzer harness: a user's kernel object, read for its
 * exported function names without loading it. Every name reported must lie
 * inside the given bytes and end there; copying it lets the sanitizers
 * catch a claim the explicit checks might miss. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt/elf_syms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct span {
	const uint8_t *data;
	size_t size;
};

static void seen(void *ctx, const char *name)
{
	const struct span *s = ctx;
	const uint8_t *p = (const uint8_t *)name;
	char *copy;
	size_t n;

	if (p < s->data || p >= s->data + s->size)
		abort();
	n = strnlen(name, (size_t)(s->data + s->size - p));
	if (p + n >= s->data + s->size)
		abort(); /* no NUL inside the bytes */
	copy = malloc(n + 1);
	if (!copy)
		abort();
	memcpy(copy, name, n + 1);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct span s = { data, size };

	(void)rt_elf_functions(data, size, seen, &s);
	return 0;
}
