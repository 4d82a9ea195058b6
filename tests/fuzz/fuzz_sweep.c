/* fuzz_sweep.c — libFuzzer harness: what `kernbench sweep` reads from the
 * user, a value LIST (`--set k=LIST`) and a YAML sweep file
 * (kb_sweep_values, kb_sweep_file_parse). The first byte picks which. Any
 * input gives RT_OK with a usable plan (every axis has at least two values,
 * each a NUL-terminated string; the count agrees with the axes) or a usage
 * error, never a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sweep_spec.c" /* the launcher's parser, built into the harness */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_spec(const struct kb_sweep_spec *s)
{
	size_t points, index[KB_SWEEP_MAX_AXES];

	if (s->n_axes > KB_SWEEP_MAX_AXES || s->n_fixed > KB_SWEEP_MAX_FIXED)
		abort();
	for (size_t a = 0; a < s->n_axes; a++) {
		if (s->axes[a].n < 2 || s->axes[a].n > KB_SWEEP_MAX_VALUES)
			abort();
		for (size_t i = 0; i < s->axes[a].n; i++)
			if (!s->axes[a].values[i] || !s->axes[a].values[i][0])
				abort();
	}
	if (kb_sweep_count(s, &points) != RT_EOK)
		return;
	if (!points || points > KB_SWEEP_MAX_POINTS)
		abort();
	kb_sweep_point(s, points - 1, index);
	for (size_t a = 0; a < s->n_axes; a++)
		if (index[a] >= s->axes[a].n)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kb_sweep_spec s;
	char *text;
	enum rt_err err;

	if (!size)
		return 0;
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	kb_sweep_spec_init(&s);
	if (data[0] & 1) {
		char **values = NULL;
		size_t n = 0;
		bool geo;

		err = kb_sweep_values(text, "fuzz", &values, &n, &geo);
		if (err != RT_EOK && err != RT_EUSAGE && err != RT_ENOMEM)
			abort();
		for (size_t i = 0; i < n; i++)
			if (!values[i] || !values[i][0])
				abort();
		for (size_t i = 0; !err && i < n; i++)
			free(values[i]);
		if (!err)
			free(values);
	} else {
		err = kb_sweep_file_parse(&s, text, size - 1, "fuzz");
		if (err != RT_EOK && err != RT_EUSAGE && err != RT_ENOMEM)
			abort();
		check_spec(&s);
	}
	kb_sweep_spec_release(&s);
	free(text);
	return 0;
}
