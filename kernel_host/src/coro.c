/* coro.c — ucontext coroutine with a guarded mmap stack. */
#include "coro.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define TL_ASAN 1
#else
#define TL_ASAN 0
#endif

/* Switch notes for ASan: before a switch, name the stack we go to; after
 * it, finish. A NULL fake-stack slot tells ASan the fiber we leave is gone. */
static void switch_begin(void **fake_save, const void *bottom, size_t size)
{
#if TL_ASAN
	__sanitizer_start_switch_fiber(fake_save, bottom, size);
#else
	(void)fake_save, (void)bottom, (void)size;
#endif
}

static void switch_end(void *fake, const void **bottom_old, size_t *size_old)
{
#if TL_ASAN
	__sanitizer_finish_switch_fiber(fake, bottom_old, size_old);
#else
	(void)fake, (void)bottom_old, (void)size_old;
#endif
}

/* makecontext passes ints: the pointer travels in two halves. */
static void trampoline(unsigned hi, unsigned lo)
{
	struct tl_coro *c =
		(struct tl_coro *)(((uintptr_t)hi << 32) | (uintptr_t)lo);

	switch_end(NULL, &c->host_stack_bottom, &c->host_stack_size);
	c->fn(c->arg);
	tl_coro_exit(c);
}

enum rt_err tl_coro_init(struct tl_coro *c, size_t stack_size, tl_coro_fn fn,
			 void *arg)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t p;

	memset(c, 0, sizeof(*c));
	c->stack_size = (stack_size + page - 1) / page * page;
	c->map_size = c->stack_size + page;
	c->map = mmap(NULL, c->map_size, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (c->map == MAP_FAILED) {
		c->map = NULL;
		return rt_fail(RT_ENOMEM, "kernel stack: mmap of %zu bytes failed",
			       c->map_size);
	}
	/* the lowest page guards against overflow (stacks grow down) */
	mprotect(c->map, page, PROT_NONE);
	c->stack = (uint8_t *)c->map + page;
	c->fn = fn;
	c->arg = arg;
	if (getcontext(&c->self) != 0)
		return rt_fail(RT_ENOMEM, "kernel stack: getcontext failed");
	c->self.uc_stack.ss_sp = c->stack;
	c->self.uc_stack.ss_size = c->stack_size;
	c->self.uc_link = NULL;
	p = (uintptr_t)c;
	makecontext(&c->self, (void (*)(void))trampoline, 2,
		    (unsigned)(p >> 32), (unsigned)(p & 0xffffffffu));
	return RT_EOK;
}

void tl_coro_release(struct tl_coro *c)
{
	if (!c->map)
		return;
#if TL_ASAN
	ASAN_UNPOISON_MEMORY_REGION(c->stack, c->stack_size);
#endif
	munmap(c->map, c->map_size);
	c->map = NULL;
}

void tl_coro_resume(struct tl_coro *c)
{
	if (c->finished)
		return;
	switch_begin(&c->host_fake_stack, c->stack, c->stack_size);
	swapcontext(&c->host, &c->self);
	switch_end(c->host_fake_stack, NULL, NULL);
}

void tl_coro_yield(struct tl_coro *c)
{
	void *fake = NULL;

	switch_begin(&fake, c->host_stack_bottom, c->host_stack_size);
	swapcontext(&c->self, &c->host);
	switch_end(fake, &c->host_stack_bottom, &c->host_stack_size);
}

_Noreturn void tl_coro_exit(struct tl_coro *c)
{
	c->finished = true;
	switch_begin(NULL, c->host_stack_bottom, c->host_stack_size);
	setcontext(&c->host);
	__builtin_unreachable();
}
