/* clock.c — CLOCK_MONOTONIC in the units callers want (rt/clock.h). */
#include "rt/clock.h"

#include <time.h>

static struct timespec mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts;
}

uint64_t rt_mono_ms(void)
{
	struct timespec ts = mono();

	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t rt_mono_us(void)
{
	struct timespec ts = mono();

	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

double rt_mono_s(void)
{
	struct timespec ts = mono();

	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
