/* test_grow.c — rt/grow.h, the one doubling array (by one, or to a count),
 * and rt/clock.h. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "rt/clock.h"
#include "rt/grow.h"

Test(grow, starts_at_first_then_doubles_and_keeps_the_elements, .timeout = 10)
{
	uint64_t *v = NULL;
	size_t cap = 0, n = 0;

	for (; n < 100; n++) {
		cr_assert(RT_GROW(v, cap, n, 8), "element %zu", n);
		v[n] = n * n;
	}
	cr_expect_eq(cap, 128, "8, 16, 32, 64, 128: got %zu", cap);
	for (size_t i = 0; i < n; i++)
		cr_expect_eq(v[i], i * i);
	free(v);
}

Test(grow, no_growth_while_there_is_room, .timeout = 10)
{
	int *v = malloc(4 * sizeof(*v)), *before = v;
	size_t cap = 4;

	cr_assert(RT_GROW(v, cap, 3, 8));
	cr_expect(v == before && cap == 4);
	free(v);
}

Test(grow, a_size_that_would_overflow_is_refused_and_nothing_changes, .timeout = 10)
{
	char (*v)[1024] = malloc(sizeof(*v)), (*before)[1024] = v;
	size_t cap = SIZE_MAX / 1024;

	cr_expect_not(RT_GROW(v, cap, cap, 8));
	cr_expect(v == before && cap == SIZE_MAX / 1024);
	free(v);
}

Test(grow, to_a_count_doubles_until_it_holds_it_and_keeps_the_elements, .timeout = 10)
{
	uint32_t *v = NULL;
	size_t cap = 0;

	cr_assert(RT_GROW_TO(v, cap, 0, 16), "room for none");
	cr_expect(v != NULL && cap == 16, "an array even for none: cap %zu", cap);
	v[15] = 7;
	cr_assert(RT_GROW_TO(v, cap, 16, 16));
	cr_expect_eq(cap, 16, "no growth while there is room");
	cr_assert(RT_GROW_TO(v, cap, 100, 16));
	cr_expect_eq(cap, 128, "16, 32, 64, 128: got %zu", cap);
	cr_expect_eq(v[15], 7, "the elements stay");
	free(v);
}

Test(grow, to_a_count_that_would_overflow_is_refused_and_nothing_changes, .timeout = 10)
{
	char (*v)[1024] = malloc(sizeof(*v)), (*before)[1024] = v;
	size_t cap = 1;

	cr_expect_not(RT_GROW_TO(v, cap, SIZE_MAX / 512, 8));
	cr_expect(v == before && cap == 1);
	free(v);
}

Test(clock, the_monotonic_readings_agree_and_never_go_back, .timeout = 10)
{
	double s = rt_mono_s();
	uint64_t ms = rt_mono_ms(), us = rt_mono_us();

	cr_expect(us / 1000 >= ms && (double)ms / 1000 >= s - 0.001, "%f s, %llu ms, %llu us", s,
		  (unsigned long long)ms, (unsigned long long)us);
	cr_expect(rt_mono_us() >= us);
}
