/* clock.h — the one reading of the monotonic clock for wall-time
 * measures (timeouts, progress, wall_s): never simulated time, never an
 * input to a result. */
#ifndef RT_CLOCK_H
#define RT_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds, microseconds and seconds. */
uint64_t rt_mono_ms(void);
uint64_t rt_mono_us(void);
double rt_mono_s(void);

#endif
