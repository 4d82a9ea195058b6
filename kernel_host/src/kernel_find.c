/* kernel_find.c — resolving a workload name to a kernel: a built-in from
 * the registry table, or "path/lib.so:NAME" through dlopen + dlsym (the
 * executable is linked -rdynamic, so the object resolves tl_* from it). */
#include "tl_host.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "../kernels/registry.h"

const struct tl_kernel_info *tl_kernel_builtins(size_t *count)
{
	*count = tl_builtin_count;
	return tl_builtin_kernels;
}

static enum rt_err find_in_object(const char *workload, const char *colon,
				  struct tl_kernel_ref *out)
{
	char path[1024];
	size_t n = (size_t)(colon - workload);
	void *dl, *sym;

	if (n == 0 || n >= sizeof(path) || !colon[1] ||
	    strlen(colon + 1) >= sizeof(out->name))
		return rt_fail(RT_ENOTFOUND,
			       "kernel '%s': expected path/lib.so:NAME", workload);
	memcpy(path, workload, n);
	path[n] = '\0';
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl)
		return rt_fail(RT_ENOTFOUND, "kernel '%s': cannot load %s: %s",
			       workload, path, dlerror());
	sym = dlsym(dl, colon + 1);
	if (!sym) {
		dlclose(dl);
		return rt_fail(RT_ENOTFOUND, "kernel '%s': %s has no symbol %s",
			       workload, path, colon + 1);
	}
	snprintf(out->name, sizeof(out->name), "%s", colon + 1);
	/* dlsym returns an object pointer; POSIX guarantees the conversion */
	memcpy(&out->fn, &sym, sizeof(out->fn));
	out->dl = dl;
	return RT_EOK;
}

enum rt_err tl_kernel_find(const char *workload, struct tl_kernel_ref *out)
{
	const char *colon = strrchr(workload, ':');
	size_t i;

	memset(out, 0, sizeof(*out));
	if (colon)
		return find_in_object(workload, colon, out);
	for (i = 0; i < tl_builtin_count; i++) {
		if (strcmp(tl_builtin_kernels[i].name, workload) == 0) {
			snprintf(out->name, sizeof(out->name), "%s", workload);
			out->fn = tl_builtin_kernels[i].fn;
			return RT_EOK;
		}
	}
	return rt_fail(RT_ENOTFOUND,
		       "unknown kernel '%s' (see `kernbench list`; a kernel in a shared object is path/lib.so:NAME)",
		       workload);
}

void tl_kernel_ref_release(struct tl_kernel_ref *ref)
{
	if (ref->dl)
		dlclose(ref->dl);
	ref->dl = NULL;
	ref->fn = NULL;
}
