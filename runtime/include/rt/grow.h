/* grow.h — the one growable array: room for one more element (rt_grow)
 * or for a count known at once (rt_grow_to), the capacity doubling from a
 * first size, overflow checked. */
#ifndef RT_GROW_H
#define RT_GROW_H

#include <stdbool.h>
#include <stddef.h>

/* Room for element `n` (0-based) of `size` bytes in the array *items_ptr
 * points to (a T **), whose capacity is *cap: rt_grow_to(n + 1) when
 * n >= *cap (`first` from empty, then doubling). False, with the array and *cap unchanged, when memory
 * runs out (the caller says what it was growing). */
bool rt_grow(void *items_ptr, size_t *cap, size_t n, size_t size, size_t first);

/* rt_grow for `items` (a T *) and its size_t capacity `cap`. */
#define RT_GROW(items, cap, n, first) rt_grow(&(items), &(cap), (n), sizeof(*(items)), (first))

/* Room for `need` elements: *cap doubled (from `first` when 0) until it
 * holds them, and an array allocated even for none, so the caller always
 * has one. False, with the array and *cap unchanged, when memory runs out. */
bool rt_grow_to(void *items_ptr, size_t *cap, size_t need, size_t size, size_t first);

#define RT_GROW_TO(items, cap, need, first) \
	rt_grow_to(&(items), &(cap), (need), sizeof(*(items)), (first))

#endif
