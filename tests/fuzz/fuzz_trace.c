/* fuzz_trace.c — libFuzzer harness: a component's trace part as the
 * launcher reads it back (rt_trace_part_parse: records + string table) and
 * the --trace-window / --trace-ranks / --trace-format option parsers.
 * Layout: byte 0 picks the target; for a part, bytes 1-2 (little endian)
 * give the record bytes, the rest is the string table; with bit 2 of byte
 * 0 set, the rest is a whole part file, split by rt_trace_part_split
 * (records, table, the table's length and a magic word). Any input must
 * give RT_EOK or a clean error, and every id of an accepted part must
 * resolve. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void part(const uint8_t *data, size_t size, bool whole_file)
{
	struct rt_trace_part p;
	const void *names = NULL;
	size_t n_recs, n_names;

	if (whole_file) {
		if (rt_trace_part_split(data, size, "fuzz", &n_recs, &names, &n_names) != RT_EOK)
			return;
		if (n_recs + n_names > size || (n_names && (const uint8_t *)names != data + n_recs))
			abort(); /* the split lies inside the bytes */
	} else {
		if (size < 2)
			return;
		n_recs = (size_t)(data[0] | data[1] << 8);
		data += 2;
		size -= 2;
		if (n_recs > size)
			n_recs = size;
		names = data + n_recs;
		n_names = size - n_recs;
	}
	if (rt_trace_part_parse(data, n_recs, names, n_names, "fuzz", &p) == RT_EOK) {
		/* accepted: every string id, of tracks and records, names a string */
#define RESOLVES(id) ((id) == RT_TRACE_NONE || (id) < p.n_names)
		for (unsigned t = 0; t < RT_TRACE_TRACKS; t++)
			if (!RESOLVES(p.track_name[t]))
				abort();
		for (size_t i = 0; i < p.n; i++)
			if (!RESOLVES(p.recs[i].name) || !RESOLVES(p.recs[i].cat) ||
			    !RESOLVES(p.recs[i].site) || !rt_trace_part_str(&p, p.recs[i].name) ||
			    !rt_trace_part_str(&p, p.recs[i].cat) ||
			    !rt_trace_part_str(&p, p.recs[i].site))
				abort();
#undef RESOLVES
	}
	rt_trace_part_release(&p);
}

static void option(uint8_t which, const uint8_t *data, size_t size)
{
	struct rt_trace_opts o = { 0 };
	char *text = malloc(size + 1);
	enum rt_err err;

	if (!text)
		return;
	memcpy(text, data, size);
	text[size] = '\0';
	err = which == 1 ? rt_trace_parse_window(text, &o)
	    : which == 2 ? rt_trace_parse_ranks(text, &o) : rt_trace_parse_format(text, &o);
	if (err != RT_EOK && err != RT_EINVAL)
		abort();
	if (err == RT_EOK && which == 1 && o.to_ps && o.to_ps <= o.from_ps)
		abort();
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] % 4 == 0)
		part(data + 1, size - 1, data[0] & 4);
	else
		option(data[0] % 4, data + 1, size - 1);
	return 0;
}
