/* kernels.h — the built-in kernels and their registry table. */
#ifndef TL_KERNELS_H
#define TL_KERNELS_H

#include <stddef.h>

#include "tl.h"
#include "tl_host.h"

extern const struct tl_kernel_info tl_builtin_kernels[];
extern const size_t tl_builtin_count;

int gemm(struct tl *tl, const struct tl_args *args);
int softmax(struct tl *tl, const struct tl_args *args);
int test_overlap(struct tl *tl, const struct tl_args *args);
int test_loads(struct tl *tl, const struct tl_args *args);
int test_flash(struct tl *tl, const struct tl_args *args);
int test_ops(struct tl *tl, const struct tl_args *args);
int test_ipcq(struct tl *tl, const struct tl_args *args);
int test_reduce(struct tl *tl, const struct tl_args *args);
int test_dma_sweep(struct tl *tl, const struct tl_args *args);

#endif
