/* view.c — 2-D strided views: shape, bounds checks, f32 load and store.
 *
 * Every byte an engine touches goes through eng_view_check first, so a bad
 * address from the wire becomes an RT_EOOB line, never a stray access. */
#include "eng.h"

#include <stdlib.h>
#include <string.h>

#include "rt/half.h"

void eng_view_dims(const Kb__View *v, uint32_t *rows, uint32_t *cols)
{
	*rows = v->trans ? v->cols : v->rows;
	*cols = v->trans ? v->rows : v->cols;
}

/* Base and size of the view's space; false for an unknown space. */
static bool space_of(const Kb__View *v, const struct eng_memory *mem,
		     uint8_t **base, uint64_t *size)
{
	if (v->space == KB__SPACE__SPACE_HBM) {
		*base = mem->hbm;
		*size = mem->hbm_size;
		return true;
	}
	if (v->space == KB__SPACE__SPACE_TCM) {
		*base = mem->tcm;
		*size = mem->tcm_size;
		return true;
	}
	return false;
}

/* Bytes from v->addr to one past the view's last element; false on
 * arithmetic overflow. Dims and dtype must already be valid. */
static bool view_span(const Kb__View *v, uint64_t *span)
{
	uint64_t row_bytes = (uint64_t)v->cols * rt_dtype_bytes(v->dtype);
	uint64_t body;

	if (__builtin_mul_overflow((uint64_t)(v->rows - 1), v->row_stride,
				   &body))
		return false;
	return !__builtin_add_overflow(body, row_bytes, span);
}

static enum rt_err view_shape_check(const Kb__Stage *stage, const char *which,
				    const Kb__View *v)
{
	uint64_t row_bytes = (uint64_t)v->cols * rt_dtype_bytes(v->dtype);

	if (rt_dtype_bytes(v->dtype) == 0)
		return rt_fail(RT_EINVAL,
			       "stage '%s' (command %llu, stage %u): %s view has unknown dtype %d",
			       stage->op_name, (unsigned long long)stage->command,
			       stage->index, which, (int)v->dtype);
	if (v->rows == 0 || v->cols == 0)
		return rt_fail(RT_EINVAL,
			       "stage '%s' (command %llu, stage %u): %s view is empty (%u x %u)",
			       stage->op_name, (unsigned long long)stage->command,
			       stage->index, which, v->rows, v->cols);
	if (v->rows > 1 && v->row_stride < row_bytes)
		return rt_fail(RT_EINVAL,
			       "stage '%s' (command %llu, stage %u): %s view row_stride %llu is below its row of %llu bytes",
			       stage->op_name, (unsigned long long)stage->command,
			       stage->index, which,
			       (unsigned long long)v->row_stride,
			       (unsigned long long)row_bytes);
	return RT_EOK;
}

enum rt_err eng_view_check(const Kb__Stage *stage, const char *which,
			   const Kb__View *v, const struct eng_memory *mem)
{
	uint8_t *base;
	uint64_t size, span, end;
	enum rt_err err;

	if (!v)
		return rt_fail(RT_EINVAL,
			       "stage '%s' (command %llu, stage %u): %s view is missing",
			       stage->op_name, (unsigned long long)stage->command,
			       stage->index, which);
	err = view_shape_check(stage, which, v);
	if (err)
		return err;
	if (!space_of(v, mem, &base, &size))
		return rt_fail(RT_EINVAL,
			       "stage '%s' (command %llu, stage %u): %s view has unknown space %d",
			       stage->op_name, (unsigned long long)stage->command,
			       stage->index, which, (int)v->space);
	if (!view_span(v, &span) || __builtin_add_overflow(v->addr, span, &end)
	    || end > size)
		return rt_fail(RT_EOOB,
			       "stage '%s' (command %llu, stage %u): %s view at %s address 0x%llx (%u x %u, row_stride %llu) is out of bounds: %s size is %llu bytes",
			       stage->op_name, (unsigned long long)stage->command,
			       stage->index, which, rt_space_name(v->space),
			       (unsigned long long)v->addr, v->rows, v->cols,
			       (unsigned long long)v->row_stride,
			       rt_space_name(v->space),
			       (unsigned long long)size);
	return RT_EOK;
}

/* Address of stored element (r, c) of a checked view. */
static uint8_t *elem_at(const Kb__View *v, uint8_t *base, uint32_t r,
			uint32_t c)
{
	return base + v->addr + (uint64_t)r * v->row_stride
	       + (uint64_t)c * rt_dtype_bytes(v->dtype);
}

static float load_elem(Kb__DType dtype, const uint8_t *p)
{
	uint16_t h;
	float f;

	if (dtype == KB__DTYPE__DTYPE_F32) {
		memcpy(&f, p, sizeof(f));
		return f;
	}
	memcpy(&h, p, sizeof(h));
	return dtype == KB__DTYPE__DTYPE_F16 ? rt_f16_to_f32(h)
					     : rt_bf16_to_f32(h);
}

static void store_elem(Kb__DType dtype, uint8_t *p, float f)
{
	uint16_t h;

	if (dtype == KB__DTYPE__DTYPE_F32) {
		memcpy(p, &f, sizeof(f));
		return;
	}
	h = dtype == KB__DTYPE__DTYPE_F16 ? rt_f32_to_f16(f)
					  : rt_f32_to_bf16(f);
	memcpy(p, &h, sizeof(h));
}

/* Checks the view and that data-mode memory backs its space. */
static enum rt_err view_base(const Kb__Stage *stage, const char *which,
			     const Kb__View *v, const struct eng_memory *mem,
			     uint8_t **base)
{
	uint64_t size;
	enum rt_err err = eng_view_check(stage, which, v, mem);

	if (err)
		return err;
	space_of(v, mem, base, &size);
	if (!*base)
		return rt_fail(RT_EINVAL,
			       "stage '%s' (command %llu, stage %u): %s view needs %s memory, which is not mapped (timing mode?)",
			       stage->op_name, (unsigned long long)stage->command,
			       stage->index, which, rt_space_name(v->space));
	return RT_EOK;
}

enum rt_err eng_view_load(const Kb__Stage *stage, const char *which,
			  const Kb__View *v, const struct eng_memory *mem,
			  float *dst)
{
	uint8_t *base;
	uint32_t rows, cols;
	enum rt_err err = view_base(stage, which, v, mem, &base);

	if (err)
		return err;
	eng_view_dims(v, &rows, &cols);
	for (uint32_t r = 0; r < rows; r++)
		for (uint32_t c = 0; c < cols; c++)
			dst[(size_t)r * cols + c] = load_elem(
				v->dtype, v->trans ? elem_at(v, base, c, r)
						   : elem_at(v, base, r, c));
	return RT_EOK;
}

enum rt_err eng_view_store(const Kb__Stage *stage, const char *which,
			   const Kb__View *v, const struct eng_memory *mem,
			   const float *src)
{
	uint8_t *base;
	uint32_t rows, cols;
	enum rt_err err = view_base(stage, which, v, mem, &base);

	if (err)
		return err;
	eng_view_dims(v, &rows, &cols);
	for (uint32_t r = 0; r < rows; r++)
		for (uint32_t c = 0; c < cols; c++)
			store_elem(v->dtype,
				   v->trans ? elem_at(v, base, c, r)
					    : elem_at(v, base, r, c),
				   src[(size_t)r * cols + c]);
	return RT_EOK;
}

/* Copies the logical matrix of `in` to `out` element by element, raw bytes
 * (bit-exact, NaN payloads kept) since both have the same dtype. */
static void copy_raw(const Kb__View *in, uint8_t *in_base,
		     const Kb__View *out, uint8_t *out_base, uint8_t *tmp)
{
	size_t es = rt_dtype_bytes(in->dtype);
	uint32_t rows, cols;

	eng_view_dims(in, &rows, &cols);
	for (uint32_t r = 0; r < rows; r++)
		for (uint32_t c = 0; c < cols; c++)
			memcpy(tmp + ((size_t)r * cols + c) * es,
			       in->trans ? elem_at(in, in_base, c, r)
					 : elem_at(in, in_base, r, c), es);
	for (uint32_t r = 0; r < rows; r++)
		for (uint32_t c = 0; c < cols; c++)
			memcpy(out->trans ? elem_at(out, out_base, c, r)
					  : elem_at(out, out_base, r, c),
			       tmp + ((size_t)r * cols + c) * es, es);
}

enum rt_err eng_view_copy(const Kb__Stage *stage, const Kb__View *in,
			  const Kb__View *out, const struct eng_memory *mem)
{
	uint8_t *in_base, *out_base;
	void *tmp;
	uint32_t rows, cols, out_rows, out_cols;
	enum rt_err err = view_base(stage, "in[0]", in, mem, &in_base);

	if (!err)
		err = view_base(stage, "out", out, mem, &out_base);
	if (err)
		return err;
	eng_view_dims(in, &rows, &cols);
	eng_view_dims(out, &out_rows, &out_cols);
	if (rows != out_rows || cols != out_cols)
		return rt_fail(RT_EINVAL,
			       "stage '%s' (command %llu, stage %u): copy from %u x %u into %u x %u",
			       stage->op_name, (unsigned long long)stage->command,
			       stage->index, rows, cols, out_rows, out_cols);
	tmp = malloc((size_t)rows * cols * sizeof(float));
	if (!tmp)
		return rt_fail(RT_ENOMEM,
			       "stage '%s' (command %llu, stage %u): no memory for a %u x %u copy",
			       stage->op_name, (unsigned long long)stage->command,
			       stage->index, rows, cols);
	if (in->dtype == out->dtype)
		copy_raw(in, in_base, out, out_base, tmp);
	else if (!(err = eng_view_load(stage, "in[0]", in, mem, tmp)))
		err = eng_view_store(stage, "out", out, mem, tmp);
	free(tmp);
	return err;
}
