/* kernel_find.c — resolving a workload name to a kernel: a built-in from
 * the registry table, or "path/lib.so:NAME" through dlopen + dlsym (the
 * executable is linked -rdynamic, so the object resolves tl_* from it).
 * Only daemons load objects; the launcher checks the name against the
 * object's ELF dynamic symbols (runtime/src/elf_syms.c) without loading it. */
#include "tl.h"
#include "tl_host.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt/buf.h"
#include "rt/config.h"
#include "rt/elf_syms.h"
#include "rt/infile.h"

#include "../kernels/registry.h"

const struct tl_kernel_info *tl_kernel_builtins(size_t *count)
{
	*count = tl_builtin_count;
	return tl_builtin_kernels;
}

/* Splits "path:NAME" into `path`; checks both parts' lengths. */
static enum rt_err object_path(const char *workload, const char *colon, char *path, size_t cap)
{
	size_t n = (size_t)(colon - workload);

	if (n == 0 || n >= cap || !colon[1] ||
	    strlen(colon + 1) >= sizeof(((struct tl_kernel_ref *)0)->name))
		return rt_fail(RT_ENOTFOUND,
			       "kernel '%s': expected path/lib.so:NAME", workload);
	memcpy(path, workload, n);
	path[n] = '\0';
	return RT_EOK;
}

static enum rt_err find_in_object(const char *workload, const char *colon,
				  struct tl_kernel_ref *out)
{
	char path[1024];
	void *dl, *sym;
	enum rt_err err = object_path(workload, colon, path, sizeof(path));

	if (err)
		return err;
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

/* The exported function `want`, the one closest to it (two edits), and
 * the names of all of them (for the line when `want` is not there). */
struct sym_search {
	const char *want;
	bool found;
	size_t best;
	char near[128];
	struct rt_buf all;  /* "a, b, c" */
	unsigned n_all;
};

#define LISTED_MAX 12 /* exports named in the line; then "and N more" */

static void sym_seen(void *ctx, const char *name)
{
	struct sym_search *s = ctx;
	size_t d;

	if (s->n_all++ < LISTED_MAX)
		rt_buf_printf(&s->all, "%s%.60s", s->all.len ? ", " : "", name);
	if (!strcmp(name, s->want)) {
		s->found = true;
		return;
	}
	if (strlen(name) >= sizeof(s->near) || (d = rt_edit_distance(s->want, name)) >= s->best)
		return;
	s->best = d;
	snprintf(s->near, sizeof(s->near), "%s", name);
}

/* The object was built against this tl.h: its tl_abi_version (tl.h) is
 * this kernbench's, read from the file's bytes, not by loading it. */
static enum rt_err check_abi(const char *path, const struct rt_buf *file)
{
	uint32_t abi = 0;
	enum rt_err err = rt_elf_u32(file->data, file->len, "tl_abi_version", &abi);

	if (err == RT_ENOTFOUND)
		return rt_fail(RT_ENOTFOUND, "kernel object %s carries no tl.h ABI version (no "
			       "tl_abi_version symbol): rebuild it against this kernbench's tl.h "
			       "(ABI %u)", path, TL_ABI_VERSION);
	if (err)
		return rt_fail(RT_ENOTFOUND, "kernel object %s: %s", path, rt_last_error());
	if (abi != TL_ABI_VERSION)
		return rt_fail(RT_ENOTFOUND, "kernel object %s was built against tl.h ABI %u and this "
			       "kernbench has ABI %u: rebuild it against this kernbench's tl.h", path,
			       abi, TL_ABI_VERSION);
	return RT_EOK;
}

/* A misspelt kernel in a user's object is a usage error before any daemon
 * starts, found in the file's ELF symbol table: the launcher never loads
 * the object (its constructors must not run here). The line lists what the
 * object does export. */
static enum rt_err check_symbol(const char *path, const char *name)
{
	struct sym_search s = { .want = name, .best = 3 };
	struct rt_buf file;
	enum rt_err err;

	rt_buf_init(&file);
	rt_buf_init(&s.all);
	err = rt_infile_read(path, "kernel object", (size_t)1 << 30, false, &file);
	if (!err && (err = rt_elf_functions(file.data, file.len, sym_seen, &s)) != RT_EOK)
		err = rt_fail(RT_ENOTFOUND, "kernel object %s: %s", path, rt_last_error());
	if (!err && !s.found)
		err = rt_fail(RT_ENOTFOUND, "kernel '%s' not found in %s (it exports %s%s%s%s%s%s)",
			      name, path, s.n_all ? s.all.data : "no functions",
			      s.n_all > LISTED_MAX ? ", ..." : "", s.near[0] ? "; did you mean '" : "",
			      s.near, s.near[0] ? "'?" : "", "");
	if (!err)
		err = check_abi(path, &file);
	rt_buf_release(&file);
	rt_buf_release(&s.all);
	return err;
}

enum rt_err tl_kernel_check(const char *workload)
{
	const char *colon = strrchr(workload, ':');
	char path[1024];
	struct stat st;
	enum rt_err err;

	if (!colon) {
		for (size_t i = 0; i < tl_builtin_count; i++)
			if (strcmp(tl_builtin_kernels[i].name, workload) == 0)
				return RT_EOK;
		return rt_fail(RT_ENOTFOUND,
			       "unknown kernel '%s' (see `kernbench list`; a kernel in a shared object is path/lib.so:NAME)",
			       workload);
	}
	err = object_path(workload, colon, path, sizeof(path));
	if (err)
		return err;
	if (!strchr(path, '/')) /* dlopen searches the library path for a bare name */
		return rt_fail(RT_EUSAGE, "kernel '%s': an object path needs a '/' (dlopen would "
			       "search the system's library folders, not this one): write ./%s",
			       workload, workload);
	if (stat(path, &st) || access(path, R_OK))
		return rt_fail(RT_ENOTFOUND, "kernel '%s': cannot load %s: %s", workload, path,
			       strerror(errno));
	if (!S_ISREG(st.st_mode))
		return rt_fail(RT_ENOTFOUND, "kernel '%s': %s is not a regular file", workload, path);
	return check_symbol(path, colon + 1);
}

void tl_kernel_ref_release(struct tl_kernel_ref *ref)
{
	if (ref->dl)
		dlclose(ref->dl);
	ref->dl = NULL;
	ref->fn = NULL;
}
