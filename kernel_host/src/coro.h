/* coro.h — a minimal stackful coroutine (ucontext) for running one kernel
 * beside the host's event loop: the C counterpart of a greenlet. Switches
 * are annotated for AddressSanitizer. */
#ifndef TL_CORO_H
#define TL_CORO_H

#include <stdbool.h>
#include <stddef.h>
#include <ucontext.h>

#include "rt/err.h"

typedef void (*tl_coro_fn)(void *arg);

struct tl_coro {
	ucontext_t host;      /* where resume returns to */
	ucontext_t self;      /* the coroutine */
	void *map;            /* mmap'd guard page + stack */
	size_t map_size;
	void *stack;
	size_t stack_size;
	tl_coro_fn fn;
	void *arg;
	bool finished;        /* fn returned or tl_coro_exit was called */
	void *host_fake_stack;/* ASan bookkeeping */
	const void *host_stack_bottom;
	size_t host_stack_size;
};

/* Allocates a stack of `stack_size` bytes (plus a guard page) for fn(arg). */
enum rt_err tl_coro_init(struct tl_coro *c, size_t stack_size, tl_coro_fn fn,
			 void *arg);
void tl_coro_release(struct tl_coro *c);
/* Runs the coroutine until it yields or finishes (host side). */
void tl_coro_resume(struct tl_coro *c);
/* Returns control to the host (coroutine side). */
void tl_coro_yield(struct tl_coro *c);
/* Leaves the coroutine for good (coroutine side); never returns. */
_Noreturn void tl_coro_exit(struct tl_coro *c);

#endif
