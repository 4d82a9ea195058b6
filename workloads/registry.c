/* registry.c — workload lookup: built-ins first, then kernels. */
#include <string.h>

#include "rt/config.h"
#include "tl_host.h"
#include "workloads.h"

static const struct kb_workload builtins[] = {
	{ "traffic", "synthetic lockstep fixture: --arg components=K --arg messages=M "
		     "[--arg tokens=T] [--ranks R]", kb_traffic_build },
};

enum rt_err kb_workload_find(const char *name, struct kb_workload *out)
{
	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (!strcmp(builtins[i].name, name)) {
			*out = builtins[i];
			return RT_EOK;
		}
	if (kb_program_file(name)) { /* a program's steps run on the PEs */
		out->name = name;
		out->summary = "program";
		out->build = kb_pe_build;
		return RT_EOK;
	}
	/* checked, not loaded: user code runs only inside daemons */
	if (tl_kernel_check(name) == RT_EOK) {
		out->name = name;
		out->summary = "kernel";
		out->build = kb_pe_build;
		return RT_EOK;
	}
	if (strchr(name, ':'))
		return RT_ENOTFOUND; /* tl_kernel_find said why */
	return rt_fail(RT_ENOTFOUND, "unknown workload '%s' (see `kernbench list`; a kernel in a "
		       "shared object is named path/lib.so:NAME)", name);
}

const char *kb_workload_suggest(const char *name)
{
	size_t n, best = 3; /* at most two edits away */
	const struct tl_kernel_info *k = tl_kernel_builtins(&n);
	const char *near = NULL;

	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (rt_edit_distance(name, builtins[i].name) < best) {
			best = rt_edit_distance(name, builtins[i].name);
			near = builtins[i].name;
		}
	for (size_t i = 0; i < n; i++)
		if (rt_edit_distance(name, k[i].name) < best) {
			best = rt_edit_distance(name, k[i].name);
			near = k[i].name;
		}
	return near;
}

void kb_workload_list(FILE *out)
{
	size_t n;
	const struct tl_kernel_info *k = tl_kernel_builtins(&n);

	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		fprintf(out, "  %-22s %s\n", builtins[i].name, builtins[i].summary);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "  %-22s %s\n", k[i].name, k[i].help);
}
