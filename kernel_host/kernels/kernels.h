/* kernels.h — the built-in kernels. They see the public tl.h and tl_io.h
 * only (the Makefile gives this folder no other include path); the
 * registry table is in registry.h. */
#ifndef TL_KERNELS_H
#define TL_KERNELS_H

#include <stddef.h>

#include "tl.h"

int gemm(struct tl *tl, const struct tl_args *args);
int softmax(struct tl *tl, const struct tl_args *args);
int collective(struct tl *tl, const struct tl_args *args);
int matmul(struct tl *tl, const struct tl_args *args);
int add(struct tl *tl, const struct tl_args *args);
int coll(struct tl *tl, const struct tl_args *args);
int test_overlap(struct tl *tl, const struct tl_args *args);
int test_loads(struct tl *tl, const struct tl_args *args);
int test_load_into(struct tl *tl, const struct tl_args *args);
int test_flash(struct tl *tl, const struct tl_args *args);
int test_ops(struct tl *tl, const struct tl_args *args);
int test_ipcq(struct tl *tl, const struct tl_args *args);
int test_reduce(struct tl *tl, const struct tl_args *args);
int test_dma_sweep(struct tl *tl, const struct tl_args *args);
int test_overflow(struct tl *tl, const struct tl_args *args);
int test_chain(struct tl *tl, const struct tl_args *args);
int test_no_wait(struct tl *tl, const struct tl_args *args);

#endif
