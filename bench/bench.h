/* bench.h — clocks shared by the bench programs: wall time and the CPU time
 * of reaped children, both in seconds. Header-only: each bench is one file. */
#ifndef KB_BENCH_H
#define KB_BENCH_H

#include <sys/resource.h>
#include <time.h>

static inline double bench_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* User + system time of every child reaped so far. */
static inline double bench_children_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_CHILDREN, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

#endif
