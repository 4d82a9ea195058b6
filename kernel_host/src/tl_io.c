/* tl_io.c — tl_io.h: failures, seed, input and output paths, kernel
 * statistics and the IPCQ transfer model for kernels. */
#include "tl_io.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rt/component.h"
#include "tl_private.h"

_Noreturn void tl_fail_at(struct tl *tl, struct tl_site at, const char *fmt,
			  ...)
{
	char detail[640];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	tl_abort(tl, at, RT_EINVAL, "%s", detail);
}

uint64_t tl_seed(const struct tl *tl)
{
	return tl->s.seed;
}

bool tl_inputs_dir(const struct tl *tl, char *out, size_t cap)
{
	const char *dir = tl->s.inputs_dir ? tl->s.inputs_dir : "";

	if (strlen(dir) + 1 > cap)
		return false;
	snprintf(out, cap, "%s", dir);
	return true;
}

bool tl_output_file(struct tl *tl, const char *file, char *path, size_t cap)
{
	if (!tl->s.port->output_path)
		return false;
	return tl->s.port->output_path(tl->s.port_ctx, file, path, cap) ==
	       RT_EOK;
}

/* Statistic names are checked here, where the kernel makes them, so a bad
 * one is reported at the kernel's call site (the runtime would only know
 * the component). */
static void check_stat_name(struct tl *tl, struct tl_site at, const char *call,
			    const char *name)
{
	const char *why = rt_stat_name_check(name);

	if (why)
		tl_abort(tl, at, RT_EINVAL, "%s: %s", call, why);
}

void tl_stat_add_at(struct tl *tl, struct tl_site at, const char *name, uint64_t value)
{
	check_stat_name(tl, at, "tl_stat_add", name);
	if (tl->s.port->stat_add)
		tl->s.port->stat_add(tl->s.port_ctx, name, value);
}

void tl_stat_max_at(struct tl *tl, struct tl_site at, const char *name, uint64_t value)
{
	check_stat_name(tl, at, "tl_stat_max", name);
	if (tl->s.port->stat_max)
		tl->s.port->stat_max(tl->s.port_ctx, name, value);
}

uint64_t tl_ipcq_transfer_ps(const struct tl *tl, uint64_t bytes)
{
	const struct rt_config *cfg = tl->s.cfg;
	uint64_t bpc = cfg->ipcq_bytes_per_cycle ? cfg->ipcq_bytes_per_cycle : 1;

	return (cfg->link_ipcq_cycles + (bytes + bpc - 1) / bpc) * tl->cycle_ps;
}
