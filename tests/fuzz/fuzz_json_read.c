/* fuzz_json_read.c — libFuzzer harness: rt_json_parse, the reader of a
 * result folder's summary.json (`run --from`, `diff`, `sweep`). Any input
 * gives RT_OK with a well-formed tree (every object key and string set and
 * NUL-free, numbers keep their text) or RT_EDECODE, never a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt/json_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct rt_jval *v, unsigned depth)
{
	uint64_t u;
	double d;

	if (depth > RT_JSON_READ_MAX_DEPTH + 1)
		abort();
	switch (v->type) {
	case RT_J_STR:
	case RT_J_NUM:
		if (!v->text || strlen(v->text) != v->len)
			abort();
		if (v->type == RT_J_NUM && !rt_jval_num(v, &d))
			abort();
		(void)rt_jval_u64(v, &u);
		break;
	case RT_J_OBJ:
		for (size_t i = 0; i < v->n; i++)
			if (!v->keys[i] || rt_jval_get(v, v->keys[i]) != &v->items[i])
				abort(); /* keys are unique: the first is the one */
		/* fall through */
	case RT_J_ARR:
		for (size_t i = 0; i < v->n; i++)
			check(&v->items[i], depth + 1);
		break;
	default:
		if (v->n || v->items)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rt_jval v;
	enum rt_err err = rt_json_parse((const char *)data, size, "fuzz", &v);

	if (err != RT_EOK && err != RT_EDECODE && err != RT_ENOMEM)
		abort();
	if (!err)
		check(&v, 0);
	rt_jval_release(&v);
	return 0;
}
