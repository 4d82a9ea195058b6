/* registry.h — the table of built-in kernels (registry.c), read by
 * kernel_find.c. Apart from the kernels, which see only public headers. */
#ifndef TL_KERNEL_REGISTRY_H
#define TL_KERNEL_REGISTRY_H

#include <stddef.h>

#include "tl_host.h"

extern const struct tl_kernel_info tl_builtin_kernels[];
extern const size_t tl_builtin_count;

#endif
