/* bench.h — what the bench programs share: wall time and the CPU time of
 * reaped children (seconds), medians, and reading a run's summary.json.
 * Header-only: each bench is one file. */
#ifndef KB_BENCH_H
#define KB_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorts v). */
static inline double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(v[0]), bench_cmp_double);
	return v[n / 2];
}

/* A top-level number of DIR/summary.json (two-space indented keys), or -1. */
static inline double bench_summary_number(const char *dir, const char *key)
{
	char path[512], line[512], pattern[80];
	FILE *f;
	double v = -1;

	snprintf(path, sizeof(path), "%s/summary.json", dir);
	snprintf(pattern, sizeof(pattern), "  \"%s\": %%lf", key);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, pattern, &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

/* The first `"key": number` anywhere in DIR/summary.json (a top-level key
 * comes before the same name in totals), or -1. */
static inline double bench_summary_first(const char *dir, const char *key)
{
	static char buf[1 << 17];
	char pat[128], path[512];
	FILE *f;
	size_t n;
	const char *p;

	snprintf(path, sizeof(path), "%s/summary.json", dir);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(buf, pat);
	return p ? strtod(p + strlen(pat), NULL) : -1;
}

#endif
