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
#include "npu/pe.h"
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

_Noreturn void tl_arg_fail_at(struct tl *tl, struct tl_site at, const char *fmt, ...)
{
	char detail[640];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	tl_abort(tl, at, RT_EUSAGE, "%s", detail);
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
	const char *bad = rt_output_name_check(file);

	if (bad)
		tl_abort(tl, (struct tl_site){ NULL, 0 }, RT_EINVAL, "tl_output_file: %s", bad);
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

/* The unit or description of a kernel's statistic, checked at its call
 * site as its name is. */
static void check_stat_text(struct tl *tl, struct tl_site at, const char *call,
			    const char *name, const char *what, const char *text, size_t max)
{
	size_t len = 0;

	for (; text && text[len]; len++)
		if ((unsigned char)text[len] < 0x20 || (unsigned char)text[len] > 0x7e)
			tl_abort(tl, at, RT_EINVAL, "%s: statistic \"%.60s\": its %s has a "
				 "non-printable byte 0x%02x (printable ASCII only)", call, name, what,
				 (unsigned char)text[len]);
	if (len > max)
		tl_abort(tl, at, RT_EINVAL, "%s: statistic \"%.60s\": its %s is %zu bytes, at most "
			 "%zu", call, name, what, len, max);
}

/* Declares the kernel's statistic `name` (unit and description may be
 * NULL) and adds or maxes `value`. */
static void kernel_stat(struct tl *tl, struct tl_site at, bool max, const char *name,
			uint64_t value, const char *unit, const char *desc)
{
	const struct tl_port_ops *p = tl->s.port;
	const char *call = max ? "tl_stat_max" : "tl_stat_add";
	struct rt_stat_decl d = { name, unit, desc, max ? RT_STAT_MAX : RT_STAT_SUM, false };

	check_stat_name(tl, at, call, name);
	check_stat_text(tl, at, call, name, "unit", unit, RT_STAT_UNIT_MAX);
	check_stat_text(tl, at, call, name, "description", desc, RT_STAT_DESC_MAX);
	if (p->stat_declare && (max ? p->stat_max_h != NULL : p->stat_add_h != NULL))
		(max ? p->stat_max_h : p->stat_add_h)(tl->s.port_ctx,
						      p->stat_declare(tl->s.port_ctx, &d), value);
	else if (max ? p->stat_max != NULL : p->stat_add != NULL)
		(max ? p->stat_max : p->stat_add)(tl->s.port_ctx, name, value);
}

void tl_stat_add_at(struct tl *tl, struct tl_site at, const char *name, uint64_t value)
{
	kernel_stat(tl, at, false, name, value, NULL, NULL);
}

void tl_stat_max_at(struct tl *tl, struct tl_site at, const char *name, uint64_t value)
{
	kernel_stat(tl, at, true, name, value, NULL, NULL);
}

void tl_stat_add_desc_at(struct tl *tl, struct tl_site at, const char *name, uint64_t value,
			 const char *unit, const char *description)
{
	kernel_stat(tl, at, false, name, value, unit, description);
}

void tl_stat_max_desc_at(struct tl *tl, struct tl_site at, const char *name, uint64_t value,
			 const char *unit, const char *description)
{
	kernel_stat(tl, at, true, name, value, unit, description);
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
