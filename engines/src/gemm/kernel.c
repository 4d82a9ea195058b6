/* gemm/kernel.c — the PE_GEMM data kernel: C = A·B in f32, optionally
 * accumulated in an f32 `acc` view across K passes (first zeroes it, last
 * stores it into out), rounded to out's dtype on store. */
#include "eng.h"

#include <stdlib.h>

/* c[m x n] += a[m x k] · b[k x n], summing k in ascending order in f32. */
static void mac(const float *a, const float *b, float *c, uint64_t m,
		uint64_t k, uint64_t n)
{
	for (uint64_t i = 0; i < m; i++)
		for (uint64_t j = 0; j < n; j++) {
			float sum = c[i * n + j];

			for (uint64_t p = 0; p < k; p++)
				sum += a[i * k + p] * b[p * n + j];
			c[i * n + j] = sum;
		}
}

/* Loads A, B and the starting accumulator into a/b/c. */
static enum rt_err load_operands(const Kb__Stage *s,
				 const struct eng_memory *mem, float *a,
				 float *b, float *c, size_t mn)
{
	enum rt_err err = eng_view_load(s, "in[0]", s->in[0], mem, a);

	if (!err)
		err = eng_view_load(s, "in[1]", s->in[1], mem, b);
	if (err)
		return err;
	if (s->acc && !s->first)
		return eng_view_load(s, "acc", s->acc, mem, c);
	for (size_t i = 0; i < mn; i++)
		c[i] = 0.0f;
	return RT_EOK;
}

static enum rt_err store_result(const Kb__Stage *s,
				const struct eng_memory *mem, const float *c)
{
	enum rt_err err = RT_EOK;

	if (s->acc)
		err = eng_view_store(s, "acc", s->acc, mem, c);
	if (!err && (!s->acc || s->last))
		err = eng_view_store(s, "out", s->out, mem, c);
	return err;
}

enum rt_err eng_gemm_run(const Kb__Stage *stage, const struct eng_memory *mem)
{
	uint64_t m, k, n;
	float *a, *b, *c;
	enum rt_err err = eng_stage_check(stage, ENG_GEMM, mem);

	if (err)
		return err;
	eng_gemm_dims(stage, &m, &k, &n);
	a = malloc(m * k * sizeof(float));
	b = malloc(k * n * sizeof(float));
	c = malloc(m * n * sizeof(float));
	if (!a || !b || !c) {
		err = rt_fail(RT_ENOMEM,
			      "stage '%s' (command %llu, stage %u): no memory for a %llu x %llu x %llu GEMM",
			      stage->op_name,
			      (unsigned long long)stage->command, stage->index,
			      (unsigned long long)m, (unsigned long long)k,
			      (unsigned long long)n);
		goto out_free;
	}
	err = load_operands(stage, mem, a, b, c, m * n);
	if (err)
		goto out_free;
	mac(a, b, c, m, k, n);
	err = store_result(stage, mem, c);
out_free:
	free(c);
	free(b);
	free(a);
	return err;
}
