/* tl_io.c — tl_io.h: failures, seed, input and output paths, kernel
 * statistics and the IPCQ transfer model for kernels. */
#include "tl_io.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt/component.h"
#include "rt/half.h"
#include "rt/npy.h"
#include "rt/pe.h"
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

/* Asking counts as reading --inputs: the launcher rejects an --inputs no
 * kernel asked for, as it rejects an --arg no kernel read. */
bool tl_inputs_dir(struct tl *tl, char *out, size_t cap)
{
	const char *dir = tl->s.inputs_dir ? tl->s.inputs_dir : "";

	tl->inputs_asked = true;

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

	return (cfg->link_ipcq_cycles + pe_ipcq_cycles(cfg->ipcq_bytes_per_cycle, bytes)) *
	       tl->cycle_ps;
}

/* ------------------------------------------------------------ .npy files */

/* tl_npy_type and rt_npy_type list the same types in the same order. */
_Static_assert((int)TL_NPY_I32 == (int)RT_NPY_I32 &&
	       (int)TL_NPY_F64 == (int)RT_NPY_F64 && TL_NPY_MAX_DIMS == RT_NPY_MAX_DIMS,
	       "tl_npy_type mirrors rt_npy_type");

void tl_npy_read_at(struct tl *tl, struct tl_site at, const char *path,
		    struct tl_npy *out)
{
	tl_npy_read_max_at(tl, at, path, UINT64_MAX, out);
}

uint64_t tl_nonfinite(enum tl_npy_type type, const void *data, uint64_t count)
{
	return rt_npy_nonfinite((enum rt_npy_type)type, data, count);
}

void tl_npy_read_max_at(struct tl *tl, struct tl_site at, const char *path,
			uint64_t max_data_bytes, struct tl_npy *out)
{
	struct rt_npy n;
	size_t cap = max_data_bytes < SIZE_MAX ? (size_t)max_data_bytes : SIZE_MAX;

	memset(out, 0, sizeof(*out));
	if (rt_npy_read_max(path, cap, &n) != RT_EOK)
		tl_abort(tl, at, RT_EINVAL, "input %s: %s", path, rt_last_error());
	out->type = (enum tl_npy_type)n.type;
	out->ndim = n.ndim;
	memcpy(out->shape, n.shape, sizeof(out->shape));
	out->count = n.count;
	out->data = n.data;
	out->owned = n.owned;
}

void tl_npy_release(struct tl_npy *n)
{
	free(n->owned);
	memset(n, 0, sizeof(*n));
}

double tl_npy_get(const struct tl_npy *n, uint64_t i)
{
	const uint8_t *p = n->data;
	uint16_t h;
	int32_t k;
	float f;
	double d;

	switch (n->type) {
	case TL_NPY_F16:
		memcpy(&h, p + 2 * i, 2);
		return rt_f16_to_f32(h);
	case TL_NPY_F32:
		memcpy(&f, p + 4 * i, 4);
		return f;
	case TL_NPY_I32:
		memcpy(&k, p + 4 * i, 4);
		return k;
	default:
		memcpy(&d, p + 8 * i, 8);
		return d;
	}
}

bool tl_npy_write_at(struct tl *tl, struct tl_site at, const char *file,
		     enum tl_npy_type type, const uint64_t *shape,
		     uint32_t ndim, const void *data)
{
	char path[1200];

	if (!tl_output_file(tl, file, path, sizeof(path)))
		return false;
	if (rt_npy_write(path, (enum rt_npy_type)type, shape, ndim, data) != RT_EOK)
		tl_abort(tl, at, RT_EIO, "writing %s: %s", path, rt_last_error());
	return true;
}

bool tl_npy_write_part_at(struct tl *tl, struct tl_site at, const char *file,
			  enum tl_npy_type type, const uint64_t *shape, uint32_t ndim,
			  uint64_t first, uint64_t count, const void *data)
{
	char path[1200];

	if (!tl_output_file(tl, file, path, sizeof(path)))
		return false;
	if (rt_npy_write_part(path, (enum rt_npy_type)type, shape, ndim, first, count, data) !=
	    RT_EOK)
		tl_abort(tl, at, RT_EIO, "writing %s: %s", path, rt_last_error());
	return true;
}

const char *tl_npy_type_name(enum tl_npy_type type)
{
	static const char *const names[] = { "float16", "float32", "float64",
					     "int32" };

	return (unsigned)type < 4 ? names[type] : "?";
}

float tl_f16_to_f32(uint16_t h)
{
	return rt_f16_to_f32(h);
}

uint16_t tl_f32_to_f16(float f)
{
	return rt_f32_to_f16(f);
}
