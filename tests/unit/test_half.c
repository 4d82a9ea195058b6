/* test_half.c — fp16 / bf16 conversions: exact values, ties to even,
 * inf / nan, subnormals, and a round trip of every fp16 pattern. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "rt/half.h"

static float from_bits(uint32_t x)
{
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

Test(half, f16_exact_values_convert_both_ways, .timeout = 5)
{
	cr_assert_eq(rt_f32_to_f16(1.0f), 0x3c00);
	cr_assert_eq(rt_f32_to_f16(-2.0f), 0xc000);
	cr_assert_eq(rt_f32_to_f16(65504.0f), 0x7bff);
	cr_assert_eq(rt_f32_to_f16(0.5f), 0x3800);
	cr_assert_eq(rt_f32_to_f16(-0.0f), 0x8000);
	cr_assert_eq(rt_f16_to_f32(0x3c00), 1.0f);
	cr_assert_eq(rt_f16_to_f32(0x3555), 0.333251953125f);
	cr_assert_eq(rt_f16_to_f32(0x7bff), 65504.0f);
}

Test(half, f16_rounds_ties_to_even, .timeout = 5)
{
	/* 1 + 2^-11 is halfway between 1 and 1 + 2^-10: even is 1 */
	cr_assert_eq(rt_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
	/* 1 + 3 * 2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9: up */
	cr_assert_eq(rt_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
	/* just above the tie rounds up */
	cr_assert_eq(rt_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
	/* the carry walks into the exponent; 65520 is the tie with 2^16 */
	cr_assert_eq(rt_f32_to_f16(65519.0f), 0x7bff);
	cr_assert_eq(rt_f32_to_f16(65520.0f), 0x7c00);
}

Test(half, f16_inf_nan_and_overflow, .timeout = 5)
{
	uint16_t nan = rt_f32_to_f16(NAN);

	cr_assert_eq(rt_f32_to_f16(INFINITY), 0x7c00);
	cr_assert_eq(rt_f32_to_f16(-INFINITY), 0xfc00);
	cr_assert_eq(rt_f32_to_f16(1e10f), 0x7c00);
	cr_assert_eq(nan & 0x7c00, 0x7c00);
	cr_assert_neq(nan & 0x3ff, 0);
	/* a signalling nan whose payload is only in the low bits stays nan */
	cr_assert_neq(rt_f32_to_f16(from_bits(0x7f800001u)) & 0x3ff, 0);
	cr_assert(isinf(rt_f16_to_f32(0xfc00)) && rt_f16_to_f32(0xfc00) < 0);
	cr_assert(isnan(rt_f16_to_f32(0x7e00)));
}

Test(half, f16_subnormals_are_exact_and_round_to_even, .timeout = 5)
{
	cr_assert_eq(rt_f16_to_f32(0x0001), 0x1p-24f);
	cr_assert_eq(rt_f16_to_f32(0x03ff), 1023 * 0x1p-24f);
	cr_assert_eq(rt_f16_to_f32(0x8200), -0x1p-15f);
	cr_assert_eq(rt_f32_to_f16(0x1p-24f), 0x0001);
	cr_assert_eq(rt_f32_to_f16(3 * 0x1p-24f), 0x0003);
	/* half the smallest subnormal ties to even zero; just above, 1 */
	cr_assert_eq(rt_f32_to_f16(0x1p-25f), 0x0000);
	cr_assert_eq(rt_f32_to_f16(0x1.0001p-25f), 0x0001);
	/* 1.5 and 2.5 subnormal units tie to 2 */
	cr_assert_eq(rt_f32_to_f16(1.5f * 0x1p-24f), 0x0002);
	cr_assert_eq(rt_f32_to_f16(2.5f * 0x1p-24f), 0x0002);
	/* largest subnormal + half a unit rounds up into the smallest normal */
	cr_assert_eq(rt_f32_to_f16(1023.5f * 0x1p-24f), 0x0400);
	cr_assert_eq(rt_f32_to_f16(-0x1p-30f), 0x8000);
}

Test(half, f16_every_pattern_round_trips, .timeout = 5)
{
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = rt_f16_to_f32((uint16_t)h);

		if (isnan(f))
			continue;
		cr_assert_eq(rt_f32_to_f16(f), h, "pattern 0x%04x", h);
	}
}

Test(half, bf16_exact_rounding_and_specials, .timeout = 5)
{
	cr_assert_eq(rt_f32_to_bf16(1.0f), 0x3f80);
	cr_assert_eq(rt_bf16_to_f32(0xc040), -3.0f);
	/* 1 + 2^-8 ties between 1 and 1 + 2^-7: even is 1 */
	cr_assert_eq(rt_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
	cr_assert_eq(rt_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
	cr_assert_eq(rt_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
	cr_assert_eq(rt_f32_to_bf16(INFINITY), 0x7f80);
	cr_assert_eq(rt_f32_to_bf16(-INFINITY), 0xff80);
	cr_assert_eq(rt_f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80);
	/* a nan with payload only in the dropped bits stays nan */
	cr_assert_neq(rt_f32_to_bf16(from_bits(0x7f800001u)) & 0x7f, 0);
	/* subnormals keep their top bits */
	cr_assert_eq(rt_f32_to_bf16(from_bits(0x00010000u)), 0x0001);
	cr_assert_eq(rt_bf16_to_f32(0x0001), from_bits(0x00010000u));
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = rt_bf16_to_f32((uint16_t)h);

		if (!isnan(f))
			cr_assert_eq(rt_f32_to_bf16(f), h, "pattern 0x%04x", h);
	}
}

/* rt_f32_to_f16 may use the F16C instruction (ADR 0063): it must give the
 * integer code's bits for every class of input. Every 2^32 / 97 th bit
 * pattern, plus every pattern whose exponent lies where fp16's range ends
 * (subnormals, the overflow edge) and of inf / NaN, every 7th mantissa. */
Test(half, f16_fast_path_equals_the_integer_code, .timeout = 60)
{
	for (uint64_t x = 0; x < (1ull << 32); x += 97) {
		float f;
		uint32_t b = (uint32_t)x;

		memcpy(&f, &b, sizeof(f));
		cr_assert_eq(rt_f32_to_f16(f), rt_f32_to_f16_portable(f), "bits 0x%08x", b);
	}
	for (uint32_t k = 100; k <= 146; k++) /* around 2^-24 .. 2^15, then inf/nan */
		for (uint32_t s = 0; s < 2; s++)
			for (uint32_t m = 0; m < (1u << 23); m += 7) {
				uint32_t e = k == 146 ? 255 : k, b = s << 31 | e << 23 | m;
				float f;

				memcpy(&f, &b, sizeof(f));
				cr_assert_eq(rt_f32_to_f16(f), rt_f32_to_f16_portable(f),
					     "bits 0x%08x", b);
			}
}
