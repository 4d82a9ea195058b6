/* test_trace_rt.c — binary trace records: the writer's string table, a part
 * written and read back, filters and option parsers. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt/trace.h"

Test(trace_rt, intern_gives_one_id_per_string, .timeout = 10)
{
	struct rt_trace_writer w;
	char name[16];

	rt_trace_writer_init(&w);
	cr_expect_eq(rt_trace_intern(&w, "gemm"), 0);
	cr_expect_eq(rt_trace_intern(&w, "exp"), 1);
	snprintf(name, sizeof(name), "ge%s", "mm"); /* another pointer, same text */
	cr_expect_eq(rt_trace_intern(&w, name), 0);
	rt_trace_name_track(&w, 2, "dma_write");
	cr_expect_eq(w.track_name[2], 2);
	cr_expect_eq(w.track_name[1], RT_TRACE_NONE);
	rt_trace_writer_release(&w);
}

Test(trace_rt, a_part_reads_back_as_written, .timeout = 10)
{
	char dir[] = "/tmp/kb-trace-unit-XXXXXX", cmd[64];
	FILE *f;
	struct rt_trace_writer w;
	struct rt_trace_part p;
	struct rt_trace_rec r = { .ts_ps = 5, .val = 7, .seq = 9, .src = 2,
				  .kind = RT_TRACE_SLICE, .track = 1 };

	cr_assert(mkdtemp(dir));
	rt_trace_writer_init(&w);
	rt_trace_name_track(&w, 1, "gemm");
	r.name = rt_trace_intern(&w, "matmul");
	r.cat = rt_trace_intern(&w, "gemm");
	r.site = RT_TRACE_NONE;
	for (int i = 0; i < 3; i++) {
		r.ts_ps = 5 + (uint64_t)i;
		cr_assert_eq(rt_trace_put(&w, &r), RT_EOK);
		cr_assert_eq(rt_trace_flush(&w, dir, "4", i == 2), RT_EOK);
	}
	rt_trace_writer_release(&w);
	cr_assert_eq(rt_trace_part_read(dir, "4", &p), RT_EOK, "%s", rt_last_error());
	cr_expect_eq(p.n, 3);
	cr_expect_eq(p.recs[2].ts_ps, 7);
	cr_expect_str_eq(rt_trace_part_str(&p, p.recs[0].name), "matmul");
	cr_expect_str_eq(rt_trace_part_str(&p, p.recs[0].cat), "gemm");
	cr_expect_str_eq(rt_trace_part_str(&p, p.track_name[1]), "gemm");
	cr_expect_str_eq(rt_trace_part_str(&p, p.recs[0].site), "");
	rt_trace_part_release(&p);
	snprintf(cmd, sizeof(cmd), "%s/4.tnames", dir);
	cr_expect_neq(access(cmd, F_OK), 0, "the string table is in the part, not beside it");
	snprintf(cmd, sizeof(cmd), "%s/4.trace", dir);
	f = fopen(cmd, "ab");
	cr_assert(f);
	fwrite("x", 1, 1, f);
	fclose(f);
	cr_expect_eq(rt_trace_part_read(dir, "4", &p), RT_EPROTOCOL, "a part must end in its table");
	rt_trace_part_release(&p);
	cr_expect_eq(rt_trace_part_read(dir, "missing", &p), RT_EOK, "a missing part is empty");
	cr_expect_eq(p.n, 0);
	rt_trace_part_release(&p);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}

Test(trace_rt, a_record_naming_a_missing_string_is_refused, .timeout = 10)
{
	struct rt_trace_rec r = { .kind = RT_TRACE_SLICE, .track = 1, .name = 3,
				  .cat = RT_TRACE_NONE, .site = RT_TRACE_NONE };
	uint16_t names[RT_TRACE_TRACKS + 2];
	struct rt_trace_part p;

	for (int i = 0; i < RT_TRACE_TRACKS; i++)
		names[i] = RT_TRACE_NONE;
	memcpy(&names[RT_TRACE_TRACKS], "a\0b", 4);
	cr_expect_eq(rt_trace_part_parse(&r, sizeof(r), names, sizeof(names), "t", &p),
		     RT_EPROTOCOL);
	rt_trace_part_release(&p);
	r.name = 1;
	cr_expect_eq(rt_trace_part_parse(&r, sizeof(r), names, sizeof(names), "t", &p), RT_EOK);
	cr_expect_str_eq(rt_trace_part_str(&p, 1), "b");
	rt_trace_part_release(&p);
}

Test(trace_rt, window_and_ranks_parse_exactly, .timeout = 10)
{
	struct rt_trace_opts o = { 0 };

	cr_assert_eq(rt_trace_parse_window("10:25.5", &o), RT_EOK);
	cr_expect_eq(o.from_ps, 10000000u);
	cr_expect_eq(o.to_ps, 25500000u);
	cr_assert_eq(rt_trace_parse_window("0.000001:", &o), RT_EOK);
	cr_expect_eq(o.from_ps, 1u);
	cr_expect_eq(o.to_ps, 0u, "empty END: to the end");
	cr_expect_eq(rt_trace_parse_window("0.0000001:1", &o), RT_EINVAL, "finer than 1 ps");
	cr_expect_eq(rt_trace_parse_window("5:5", &o), RT_EINVAL);
	cr_expect_eq(rt_trace_parse_window("-1:5", &o), RT_EINVAL);
	cr_assert_eq(rt_trace_parse_ranks("0,2-3,63", &o), RT_EOK);
	cr_expect_eq(o.ranks, 0x800000000000000dull);
	cr_expect_eq(rt_trace_parse_ranks("3-1", &o), RT_EINVAL);
	cr_expect_eq(rt_trace_parse_ranks("1,", &o), RT_EINVAL);
}

Test(trace_rt, wanted_applies_window_and_ranks, .timeout = 10)
{
	struct rt_trace_opts o = { .from_ps = 100, .to_ps = 200, .ranks = 0x2 };

	cr_expect(rt_trace_wanted(&o, 1, 150, 150));
	cr_expect(rt_trace_wanted(&o, 1, 50, 100), "a slice reaching into the window");
	cr_expect(!rt_trace_wanted(&o, 1, 50, 99));
	cr_expect(!rt_trace_wanted(&o, 1, 201, 300));
	cr_expect(!rt_trace_wanted(&o, 0, 150, 150), "rank 0 not asked for");
	o.ranks = 0;
	o.to_ps = 0;
	cr_expect(rt_trace_wanted(&o, 5, 1000000, 1000000), "no END: to the end");
}
