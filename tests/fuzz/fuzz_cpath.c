/* fuzz_cpath.c — libFuzzer harness: the critical path's segment records as
 * the launcher walks them back (rt_path_walk; deploy/src/cpath.c reads the
 * daemons' .cpath parts, which may come from another host). Input: byte 0
 * picks 1..8 components, the rest is 32-byte records dealt round-robin to
 * them; the walk starts at component 0's last record. Checked beyond "no
 * crash": it ends (a cycle of pointers is refused, never followed forever),
 * and every segment it hands on ends where the one after it began. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt/path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct input {
	const uint8_t *recs;
	size_t n_recs;
	uint32_t n_comp;
	uint64_t visited, last_start;
};

static enum rt_err read_rec(void *ctx, uint32_t comp, uint64_t seg, struct rt_path_seg *out)
{
	struct input *in = ctx;
	uint64_t i = seg * in->n_comp + comp;

	if (seg > in->n_recs || i >= in->n_recs)
		return rt_fail(RT_EDECODE, "no segment %llu", (unsigned long long)seg);
	memcpy(out, in->recs + i * RT_PATH_SEG_BYTES, sizeof(*out));
	return RT_EOK;
}

static enum rt_err visit(void *ctx, uint32_t comp, const struct rt_path_seg *seg)
{
	struct input *in = ctx;

	if (comp >= in->n_comp || seg->start_ps > seg->end_ps || seg->cls >= RT_PATH_CLASSES ||
	    (in->visited && seg->end_ps != in->last_start))
		abort(); /* the walk handed on a segment it should have refused */
	in->visited++;
	in->last_start = seg->start_ps;
	return RT_EOK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { 0 };
	uint64_t last;

	if (size < 1)
		return 0;
	in.n_comp = (uint32_t)(data[0] % 8) + 1;
	in.recs = data + 1;
	in.n_recs = (size - 1) / RT_PATH_SEG_BYTES;
	if (!in.n_recs)
		return 0;
	last = (in.n_recs - 1) / in.n_comp; /* component 0's last record */
	(void)rt_path_walk(read_rec, visit, &in, in.n_comp, 0, last, in.n_recs + 2);
	if (in.visited > in.n_recs + 2)
		abort();
	return 0;
}
