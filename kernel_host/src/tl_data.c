/* tl_data.c — data-mode helpers: host access to TCM and HBM bytes, element
 * conversion, fills, reads and the seeded input stream. None of these cost
 * simulated time; they are how kernels create inputs and check outputs. */
#include "tl_private.h"

#include <stdlib.h>
#include <string.h>

#include "rt/half.h"
#include "rt/component.h"
#include "rt/npy.h"
#include "rt/rand.h"

uint8_t *tl_tcm_bytes(struct tl *tl, uint64_t addr, uint64_t n)
{
	if (!tl->s.tcm || addr > tl->s.tcm_size || n > tl->s.tcm_size - addr)
		return NULL;
	return tl->s.tcm + addr;
}

uint8_t *tl_hbm_bytes(struct tl *tl, uint64_t addr, uint64_t n)
{
	if (!tl->s.hbm || addr > tl->s.hbm_size || n > tl->s.hbm_size - addr)
		return NULL;
	return tl->s.hbm + addr;
}

static float load_elem(const uint8_t *p, enum tl_dtype dtype)
{
	uint16_t h;
	float f;

	switch (dtype) {
	case TL_F32:
		memcpy(&f, p, 4);
		return f;
	case TL_BF16:
		memcpy(&h, p, 2);
		return rt_bf16_to_f32(h);
	default:
		memcpy(&h, p, 2);
		return rt_f16_to_f32(h);
	}
}

static void store_elem(uint8_t *p, enum tl_dtype dtype, float v)
{
	uint16_t h;

	switch (dtype) {
	case TL_F32:
		memcpy(p, &v, 4);
		break;
	case TL_BF16:
		h = rt_f32_to_bf16(v);
		memcpy(p, &h, 2);
		break;
	default:
		h = rt_f32_to_f16(v);
		memcpy(p, &h, 2);
		break;
	}
}

static void to_floats(const uint8_t *src, enum tl_dtype dtype, size_t n,
		      float *out)
{
	uint32_t es = tl_dtype_size(dtype);
	size_t i;

	for (i = 0; i < n; i++)
		out[i] = load_elem(src + i * es, dtype);
}

bool tl_read_at(struct tl *tl, struct tl_site at, tl_tensor t, float *out,
		size_t n)
{
	struct tl_rec *r = tl_rec_get(tl, at, t, "tl_read");
	size_t count = (size_t)r->rows * r->cols, i, j;
	const uint8_t *bytes;

	tl_wait_cmd(tl, at, r->producer);
	if (tl->s.mode != TL_DATA)
		return false;
	if (n < count)
		tl_abort(tl, at, RT_EINVAL,
			 "tl_read: buffer of %zu floats for a %ux%u tensor", n,
			 tl_rec_lrows(r), tl_rec_lcols(r));
	bytes = r->tcm ? tl_tcm_bytes(tl, r->addr, tl_rec_bytes(r))
		       : tl_hbm_bytes(tl, r->addr, tl_rec_bytes(r));
	if (!bytes)
		return false;
	if (!r->trans) {
		to_floats(bytes, r->dtype, count, out);
		return true;
	}
	/* a transposed view reads out in its logical (cols x rows) order */
	for (i = 0; i < r->cols; i++)
		for (j = 0; j < r->rows; j++)
			out[i * r->rows + j] = load_elem(
				bytes + (j * r->cols + i) * tl_dtype_size(r->dtype),
				r->dtype);
	return true;
}

bool tl_hbm_write_at(struct tl *tl, struct tl_site at, uint64_t addr,
		     enum tl_dtype dtype, const float *src, size_t n)
{
	uint32_t es = tl_dtype_size(dtype);
	uint8_t *bytes;
	size_t i;

	/* never under a pending command: a lazy load issued earlier must see
	 * the old bytes, as a blocking load would (both modes, so timing
	 * mode keeps data mode's clock) */
	tl_wait_hbm_range(tl, at, addr, addr + (uint64_t)n * es);
	if (tl->s.mode != TL_DATA)
		return false;
	bytes = tl_hbm_bytes(tl, addr, (uint64_t)n * es);
	if (!bytes)
		tl_abort(tl, at, RT_EOOB,
			 "tl_hbm_write of %zu elements at %llu is outside HBM", n,
			 (unsigned long long)addr);
	for (i = 0; i < n; i++)
		store_elem(bytes + i * es, dtype, src[i]);
	return true;
}

bool tl_hbm_read_at(struct tl *tl, struct tl_site at, uint64_t addr,
		    enum tl_dtype dtype, float *dst, size_t n)
{
	const uint8_t *bytes;

	tl_wait_all(tl, at);
	if (tl->s.mode != TL_DATA)
		return false;
	bytes = tl_hbm_bytes(tl, addr, (uint64_t)n * tl_dtype_size(dtype));
	if (!bytes)
		tl_abort(tl, at, RT_EOOB,
			 "tl_hbm_read of %zu elements at %llu is outside HBM", n,
			 (unsigned long long)addr);
	to_floats(bytes, dtype, n, dst);
	return true;
}

bool tl_save_npy_at(struct tl *tl, struct tl_site at, const char *file,
		    uint64_t addr, uint32_t rows, uint32_t cols,
		    enum tl_dtype dtype)
{
	uint64_t shape[2] = { rows, cols };
	uint64_t n = (uint64_t)rows * cols;
	char path[1024];
	const uint8_t *bytes;
	float *wide = NULL;
	enum rt_err rc;

	const char *bad = rt_output_name_check(file);

	/* a plain file of the output folder, never a path out of it */
	if (bad)
		tl_abort(tl, at, RT_EINVAL, "tl_save_npy: %s", bad);
	tl_wait_all(tl, at);
	if (tl->s.mode != TL_DATA || !tl->s.port->output_path)
		return false;
	bytes = tl_hbm_bytes(tl, addr, n * tl_dtype_size(dtype));
	if (!bytes)
		tl_abort(tl, at, RT_EOOB, "tl_save_npy %s: tensor outside HBM",
			 file);
	rc = tl->s.port->output_path(tl->s.port_ctx, file, path, sizeof(path));
	if (rc != RT_EOK)
		tl_abort(tl, at, rc, "tl_save_npy %s: %s", file, rt_last_error());
	if (dtype == TL_BF16) { /* NumPy has no bf16: widen */
		wide = malloc((size_t)n * sizeof(float));
		if (!wide)
			tl_abort(tl, at, RT_ENOMEM, "tl_save_npy: out of memory");
		to_floats(bytes, dtype, (size_t)n, wide);
	}
	rc = rt_npy_write(path, dtype == TL_F16 ? RT_NPY_F16 : RT_NPY_F32,
			  shape, 2, wide ? (const void *)wide : bytes);
	if (rc == RT_EOK) /* NaN/Inf results: warned about */
		tl_stat(tl, TL_ST_NONFINITE_OUT,
			rt_npy_nonfinite(dtype == TL_F16 ? RT_NPY_F16 : RT_NPY_F32,
					 wide ? (const void *)wide : bytes, n));
	free(wide);
	if (rc != RT_EOK)
		tl_abort(tl, at, rc, "tl_save_npy %s: %s", file, rt_last_error());
	return true;
}

void tl_random_uniform(const struct tl *tl, uint64_t stream, float *out,
		       size_t n)
{
	uint64_t state = tl->s.seed;
	size_t i;

	/* fold (rank, program, stream) into the seed through the mixer */
	state ^= rt_splitmix64(&state) + tl->s.rank;
	state ^= rt_splitmix64(&state) + tl->s.pe;
	state ^= rt_splitmix64(&state) + stream;
	for (i = 0; i < n; i++)
		out[i] = (float)((double)(rt_splitmix64(&state) >> 11) * 0x1.0p-52 - 1.0);
}
