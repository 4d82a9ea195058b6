/* attn_gen.c — the seeded input generator of the attention kernels:
 * standard normal samples (Box-Muller over splitmix64), rounded to fp16. */
#include <math.h>

#include "attn.h"

uint64_t attn_mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

float attn_normal(uint64_t seed, uint32_t which, uint64_t index)
{
	uint64_t base = attn_mix(seed ^ attn_mix((uint64_t)which + 1));
	uint64_t pair = index >> 1;
	double u1 = (double)((attn_mix(base + 2 * pair) >> 11) + 1) * 0x1.0p-53;
	double u2 = (double)(attn_mix(base + 2 * pair + 1) >> 11) * 0x1.0p-53;
	double r = sqrt(-2.0 * log(u1));
	double z = (index & 1) ? r * sin(2.0 * M_PI * u2) : r * cos(2.0 * M_PI * u2);

	return tl_f16_to_f32(tl_f32_to_f16((float)z));
}

void attn_normal_fill(uint64_t seed, uint32_t which, uint64_t first, uint64_t n, float *out)
{
	uint64_t base = attn_mix(seed ^ attn_mix((uint64_t)which + 1));
	uint64_t end = first + n;

	for (uint64_t pair = first >> 1; 2 * pair < end; pair++) {
		/* exactly attn_normal's operations, each done once per pair */
		double u1 = (double)((attn_mix(base + 2 * pair) >> 11) + 1) * 0x1.0p-53;
		double u2 = (double)(attn_mix(base + 2 * pair + 1) >> 11) * 0x1.0p-53;
		double r = sqrt(-2.0 * log(u1));

		if (2 * pair >= first)
			*out++ = tl_f16_to_f32(tl_f32_to_f16((float)(r * cos(2.0 * M_PI * u2))));
		if (2 * pair + 1 < end)
			*out++ = tl_f16_to_f32(tl_f32_to_f16((float)(r * sin(2.0 * M_PI * u2))));
	}
}
