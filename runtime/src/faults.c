/* faults.c — KB_FAULT points and KB_FAULT_ALLOC (rt/faults.h). Compiled
 * twice: the release object has the stub, the test build's (obj-test) the
 * hooks and the allocation wrappers the test link's --wrap flags select. */
#include "rt/faults.h"

#ifndef KB_TEST_BUILD
enum rt_err rt_fault_point(const char *point)
{
	(void)point;
	return RT_EOK;
}
#else
#include <errno.h>
#include <execinfo.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum rt_err rt_fault_point(const char *point)
{
	static const struct {
		const char *name;
		enum rt_err code;
	} codes[] = { { "einval", RT_EINVAL }, { "enomem", RT_ENOMEM }, { "eio", RT_EIO } };
	const char *spec = getenv("KB_FAULT");
	const char *at = spec ? strchr(spec, '@') : NULL;

	if (!at || strcmp(at + 1, point))
		return RT_EOK;
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strlen(codes[i].name) == (size_t)(at - spec) &&
		    !strncmp(spec, codes[i].name, (size_t)(at - spec)))
			return rt_fail(codes[i].code, "%s failed: %s injected by KB_FAULT", point,
				       rt_err_name(codes[i].code));
	return RT_EOK;
}

/* ---------------------------------------------------------------- faultsim */

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

/* -1: off; 0: count only; N: the Nth allocation fails */
static long fail_at = -1;
static unsigned long made; /* atomic: allocations so far */

/* Is this process the one KB_FAULT_ALLOC aims at? */
static bool aimed_here(const char *who)
{
	const char *me = program_invocation_short_name;

	if (!who)
		return strncmp(me, "kb-", 3) != 0;
	if (!strcmp(who, "daemon"))
		return strncmp(me, "kb-", 3) == 0;
	return !strcmp(who, me);
}

static void report_count(void)
{
	char line[160];
	int n = snprintf(line, sizeof(line), "kb-faultsim: %s made %lu allocations\n",
			 program_invocation_short_name, __atomic_load_n(&made, __ATOMIC_RELAXED));

	if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

/* Read before main (and before any thread): the wrappers only read fail_at. */
__attribute__((constructor)) static void arm_alloc_faults(void)
{
	const char *spec = getenv("KB_FAULT_ALLOC");
	const char *at;
	char *end;
	long n;

	if (!spec || !*spec)
		return;
	at = strchr(spec, '@');
	n = strtol(spec, &end, 10);
	if (end == spec || n < 0 || (*end && end != at) || !aimed_here(at ? at + 1 : NULL))
		return;
	fail_at = n;
	if (n == 0)
		atexit(report_count);
}

/* KB_FAULT_ALLOC_TRACE=1: where the failed allocation was made, on
 * stderr (the binary links with -rdynamic: the frames have names). */
static void show_caller(void)
{
	void *frames[12];
	const char *trace = getenv("KB_FAULT_ALLOC_TRACE");

	if (trace && *trace == '1')
		backtrace_symbols_fd(frames, backtrace(frames, 12), STDERR_FILENO);
}

/* Counts one allocation; true if it is the one to fail. */
static bool fails_now(void)
{
	unsigned long k;

	if (fail_at < 0)
		return false;
	k = __atomic_add_fetch(&made, 1, __ATOMIC_RELAXED);
	if (fail_at == 0 || k != (unsigned long)fail_at)
		return false;
	show_caller();
	errno = ENOMEM;
	return true;
}

void *__wrap_malloc(size_t size)
{
	return fails_now() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return fails_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
	return fails_now() ? NULL : __real_realloc(p, size);
}

char *__wrap_strdup(const char *s)
{
	return fails_now() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
	return fails_now() ? NULL : __real_strndup(s, n);
}
#endif
