/* rand.h — the one pseudo-random generator: splitmix64 (Steele, Lea, Flood
 * 2014). Tiny, full-period, and a pure function of its state, so every
 * stream seeded from (run seed, component) replays exactly. Inline, so a hot
 * loop pays nothing for the call. */
#ifndef RT_RAND_H
#define RT_RAND_H

#include <stdint.h>

/* Advances `state` and returns the next value of its stream. */
static inline uint64_t rt_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The value a stream in state `x` yields next (a stateless hash of x). */
static inline uint64_t rt_mix64(uint64_t x)
{
	return rt_splitmix64(&x);
}

#endif
