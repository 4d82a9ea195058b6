/* test_attn_gen.c — the attention kernels' seeded inputs: attn_normal_fill,
 * which generates a row range at once (and is what kernels now use), gives
 * the bits attn_normal gives one element at a time, from any offset. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernel_host/kernels/attn.h"

Test(attn_gen, fill_equals_the_element_generator_from_any_offset, .timeout = 30)
{
	static const uint64_t firsts[] = { 0, 1, 2, 7, 4095, 1000001 };
	static const uint64_t lens[] = { 1, 2, 3, 256, 257, 5000 };
	float *got = malloc(5000 * sizeof(float));

	cr_assert(got);
	for (uint32_t which = 0; which < 3; which++)
		for (size_t f = 0; f < sizeof(firsts) / sizeof(firsts[0]); f++)
			for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
				uint64_t seed = 1 + 7919 * f + which;

				memset(got, 0xff, 5000 * sizeof(float));
				attn_normal_fill(seed, which, firsts[f], lens[l], got);
				for (uint64_t i = 0; i < lens[l]; i++) {
					float want = attn_normal(seed, which, firsts[f] + i);

					cr_assert_eq(memcmp(&got[i], &want, sizeof(float)), 0,
						     "seed %llu tensor %u element %llu: %a, want %a",
						     (unsigned long long)seed, which,
						     (unsigned long long)(firsts[f] + i), got[i], want);
				}
			}
	free(got);
}
