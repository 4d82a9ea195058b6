/* grow.c — the doubling array (rt/grow.h). */
#include "rt/grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

bool rt_grow_to(void *items_ptr, size_t *cap, size_t need, size_t size, size_t first)
{
	size_t want = *cap ? *cap : (first ? first : 1);
	void *items;

	memcpy(&items, items_ptr, sizeof(items));
	if (items && need <= *cap)
		return true;
	while (want < need) {
		if (want > SIZE_MAX / 2)
			return false;
		want *= 2;
	}
	if (size && want > SIZE_MAX / size)
		return false;
	items = realloc(items, want * size);
	if (!items)
		return false;
	memcpy(items_ptr, &items, sizeof(items));
	*cap = want;
	return true;
}

bool rt_grow(void *items_ptr, size_t *cap, size_t n, size_t size, size_t first)
{
	return n < *cap || (n < SIZE_MAX && rt_grow_to(items_ptr, cap, n + 1, size, first));
}

