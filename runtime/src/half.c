/* half.c — fp16 / bf16 <-> f32 storage conversions.
 *
 * Narrowing rounds to nearest, ties to even, in integer arithmetic on the bit
 * patterns, so the result never depends on the FPU's rounding mode. Overflow
 * becomes infinity, values below half the smallest fp16 subnormal become a
 * signed zero, and NaN stays NaN (quiet, sign and top payload bits kept). */
#include "rt/half.h"

#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_F16C_PATH 1
#endif

static uint32_t f32_bits(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	return x;
}

static float bits_f32(uint32_t x)
{
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

/* Drops the low `shift` bits of `v` (1 <= shift <= 31), rounding to nearest
 * even. A carry out of the kept bits is the caller's next exponent step. */
static uint32_t shift_round_even(uint32_t v, unsigned shift)
{
	uint32_t kept = v >> shift;
	uint32_t rem = v & ((1u << shift) - 1u);
	uint32_t half = 1u << (shift - 1u);

	if (rem > half || (rem == half && (kept & 1u)))
		kept++;
	return kept;
}

float rt_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;

	if (exp == 0x1f) /* inf / nan: payload moves to the top of f32's */
		return bits_f32(sign | 0x7f800000u | (man << 13));
	if (exp != 0)
		return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
	if (man == 0)
		return bits_f32(sign);
	/* subnormal: man * 2^-24, normalise into an f32 normal */
	exp = 113u; /* f32 exponent of 2^-14, the f16 subnormal scale + 10 */
	while (!(man & 0x400u)) {
		man <<= 1;
		exp--;
	}
	return bits_f32(sign | (exp << 23) | ((man & 0x3ffu) << 13));
}

uint16_t rt_f32_to_f16_portable(float f)
{
	uint32_t x = f32_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
	uint32_t exp = (x >> 23) & 0xffu;
	uint32_t man = x & 0x7fffffu;
	int32_t e = (int32_t)exp - 127 + 15; /* f16 biased exponent */

	if (exp == 0xff) /* inf, or nan forced quiet so it cannot become inf */
		return sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u);
	if (e >= 31)
		return sign | 0x7c00u;
	if (e <= 0) {
		/* f16 subnormal: value = m * 2^-24 with m = (1.man) >> (14 - e) */
		if (e < -10)
			return sign; /* below half the smallest subnormal */
		return sign | (uint16_t)shift_round_even(man | 0x800000u,
							 (unsigned)(14 - e));
	}
	/* normal; a rounding carry walks into the exponent (up to inf) */
	return sign | (uint16_t)(((uint32_t)e << 10) + shift_round_even(man, 13));
}

#ifdef HAVE_F16C_PATH
/* The F16C instruction gives the same bits as the integer code above for
 * every input (round to nearest even, subnormals, overflow to infinity,
 * NaN quieted with its top payload bits: tests/unit/test_half.c compares
 * the two), at a fraction of its cost: seeded inputs are rounded to fp16
 * once per element (ADR 0063). */
static bool have_f16c;

__attribute__((constructor)) static void detect_f16c(void)
{
	__builtin_cpu_init();
	have_f16c = __builtin_cpu_supports("f16c");
}

__attribute__((target("f16c"))) static uint16_t f32_to_f16_f16c(float f)
{
	return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
#endif

uint16_t rt_f32_to_f16(float f)
{
#ifdef HAVE_F16C_PATH
	if (have_f16c)
		return f32_to_f16_f16c(f);
#endif
	return rt_f32_to_f16_portable(f);
}

float rt_bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

uint16_t rt_f32_to_bf16(float f)
{
	uint32_t x = f32_bits(f);

	if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu))
		return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
	/* ties to even; the carry walks into the exponent (up to inf) */
	return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
