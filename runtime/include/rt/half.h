/* half.h — fp16 and bf16 storage conversions (round to nearest even),
 * shared by engines, the kernel host and tests. */
#ifndef RT_HALF_H
#define RT_HALF_H

#include <stdint.h>

float rt_f16_to_f32(uint16_t h);
uint16_t rt_f32_to_f16(float f);
/* rt_f32_to_f16 in integer arithmetic, what it gives without F16C. */
uint16_t rt_f32_to_f16_portable(float f);
float rt_bf16_to_f32(uint16_t h);
uint16_t rt_f32_to_bf16(float f);

#endif
