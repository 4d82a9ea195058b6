/* test_sweep_spec.c — a sweep's value lists and axes (deploy/src/
 * sweep_spec.c): ranges are inclusive, x-ranges geometric, `\,` a comma;
 * the grid's first axis varies slowest; zipped lists must agree. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep_spec.h"

/* The list expanded and joined with '|', or "ERR: line". */
static const char *expand(const char *list)
{
	static char out[4096];
	char **v;
	size_t n, used = 0;
	bool geo;

	if (kb_sweep_values(list, "test", &v, &n, &geo)) {
		snprintf(out, sizeof(out), "ERR: %s", rt_last_error());
		return out;
	}
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		used += (size_t)snprintf(out + used, sizeof(out) - used, "%s%s", i ? "|" : "", v[i]);
		free(v[i]);
	}
	free(v);
	return out;
}

Test(sweep_values, lists_ranges_and_escapes, .timeout = 5)
{
	cr_expect_str_eq(expand("32,64,128"), "32|64|128");
	cr_expect_str_eq(expand("1024:8192:x2"), "1024|2048|4096|8192");
	cr_expect_str_eq(expand("1000:9000:x3"), "1000|3000|9000");
	cr_expect_str_eq(expand("8:64:8"), "8|16|24|32|40|48|56|64");
	cr_expect_str_eq(expand("0:10:4"), "0|4|8", "HI need not be on the grid");
	cr_expect_str_eq(expand("5:5:1"), "5");
	cr_expect_str_eq(expand("1,4:8:2,x"), "1|4|6|8|x");
	cr_expect_str_eq(expand("a\\,b,c"), "a,b|c");
	cr_expect_str_eq(expand("./my.so:k"), "./my.so:k", "one colon is a value");
	cr_expect_str_eq(expand("18446744073709551614:18446744073709551615:1"),
			 "18446744073709551614|18446744073709551615", "no overflow at the top");
	cr_expect(strstr(expand("8:1:1"), "is not a range"));
	cr_expect(strstr(expand("0:8:x2"), "LO >= 1 for xF"));
	cr_expect(strstr(expand("1:8:x1"), "is not a range"));
	cr_expect(strstr(expand("1:8:0"), "is not a range"));
	cr_expect(strstr(expand("1,,2"), "an empty value"));
	cr_expect(strstr(expand("1:100000:1"), "more than 4096 values"));
}

Test(sweep_axes, grid_order_zip_and_single_values, .timeout = 5)
{
	struct kb_sweep_spec s;
	size_t n, ix[KB_SWEEP_MAX_AXES];

	kb_sweep_spec_init(&s);
	cr_assert_eq(kb_sweep_add_axis(&s, KB_AXIS_SET, "dma.bytes_per_cycle=32,64"), RT_EOK);
	cr_assert_eq(kb_sweep_add_axis(&s, KB_AXIS_ARG, "tile=16:64:x2"), RT_EOK);
	cr_assert_eq(kb_sweep_add_axis(&s, KB_AXIS_ARG, "seq_kv=1024"), RT_EOK);
	cr_expect_eq(s.n_axes, 2, "one value is not an axis");
	cr_expect_eq(s.n_fixed, 2);
	cr_expect_str_eq(s.fixed[0], "--arg");
	cr_expect_str_eq(s.fixed[1], "seq_kv=1024");
	cr_expect(s.axes[1].numeric && s.axes[1].geometric);
	cr_assert_eq(kb_sweep_count(&s, &n), RT_EOK);
	cr_expect_eq(n, 6);
	kb_sweep_point(&s, 4, ix);
	cr_expect(ix[0] == 1 && ix[1] == 1, "point 4 = (64, 32): %zu %zu", ix[0], ix[1]);
	cr_expect_eq(kb_sweep_add_axis(&s, KB_AXIS_ARG, "tile=1,2"), RT_EUSAGE);
	s.zip = true;
	cr_expect_eq(kb_sweep_count(&s, &n), RT_EUSAGE, "2 and 3 values cannot be zipped");
	kb_sweep_spec_release(&s);
	kb_sweep_spec_init(&s);
	s.zip = true;
	kb_sweep_add_axis(&s, KB_AXIS_ARG, "m=1,2,3");
	kb_sweep_add_axis(&s, KB_AXIS_MACHINE, "a,b,c");
	cr_assert_eq(kb_sweep_count(&s, &n), RT_EOK);
	cr_expect_eq(n, 3);
	kb_sweep_point(&s, 2, ix);
	cr_expect(ix[0] == 2 && ix[1] == 2);
	cr_expect_str_eq(s.axes[1].column, "machine");
	kb_sweep_spec_release(&s);
}

Test(sweep_file, keys_lines_and_errors, .timeout = 5)
{
	static const char good[] = "workload: gemm\nset:\n  dma.bytes_per_cycle: [32, 64]\n"
				   "arg:\n  m: \"64:256:x2\"\n  k: 96\npes: [1, 2]\nzip: false\n"
				   "options: [--mode, data]\nobjectives: [latency_ps, energy.total_fj]\n";
	static const char bad[] = "workload: gemm\nset:\n  dma.bytes_per_cycle: [32, 64]\nspeed: 2\n";
	struct kb_sweep_spec s;
	size_t n;

	kb_sweep_spec_init(&s);
	cr_assert_eq(kb_sweep_file_parse(&s, good, strlen(good), "s.yaml"), RT_EOK, "%s",
		     rt_last_error());
	cr_expect_str_eq(s.workload, "gemm");
	cr_expect_eq(s.n_axes, 3);
	cr_expect_eq(s.n_objectives, 2);
	cr_expect_str_eq(s.objectives[1], "energy.total_fj");
	cr_assert_eq(kb_sweep_count(&s, &n), RT_EOK);
	cr_expect_eq(n, 2 * 3 * 2);
	cr_expect_eq(s.n_fixed, 4, "k=96 and the two options");
	kb_sweep_spec_release(&s);
	kb_sweep_spec_init(&s);
	cr_expect_eq(kb_sweep_file_parse(&s, bad, strlen(bad), "b.yaml"), RT_EUSAGE);
	cr_expect(strstr(rt_last_error(), "sweep file b.yaml: speed: unknown key") &&
		  strstr(rt_last_error(), "(line 4)"), "%s", rt_last_error());
	kb_sweep_spec_release(&s);
}
