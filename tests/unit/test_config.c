/* test_config.c — the config field table, YAML overlay, --set, validation
 * and the error lines users see. */
#include <criterion/criterion.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt/buf.h"
#include "rt/config.h"
#include "rt/config_doc.h"
#include "rt/job.h"

/* Writes `text` to a fresh temporary .yaml file; returns its path in `path`. */
static void write_temp(const char *text, char path[64])
{
	int fd;
	FILE *f;

	snprintf(path, 64, "/tmp/kb_test_config_XXXXXX.yaml");
	fd = mkstemps(path, 5);
	cr_assert(fd >= 0, "mkstemps failed");
	f = fdopen(fd, "w");
	cr_assert(f);
	fputs(text, f);
	fclose(f);
}

static uint64_t value_of(const struct rt_config *cfg,
			 const struct rt_config_field *f)
{
	const uint8_t *p = (const uint8_t *)cfg + f->offset;
	uint32_t v32;
	uint64_t v64;

	if (f->type == RT_CFG_U32) {
		memcpy(&v32, p, 4);
		return v32;
	}
	memcpy(&v64, p, 8);
	return v64;
}

/* Asserts every table field of `a` equals that of `b`. */
static void assert_same_fields(const struct rt_config *a,
			       const struct rt_config *b)
{
	for (size_t i = 0; i < rt_config_field_count; i++) {
		const struct rt_config_field *f = &rt_config_fields[i];
		if (f->type == RT_CFG_STR)
			cr_assert_str_eq((const char *)a + f->offset,
					 (const char *)b + f->offset, "%s",
					 f->key);
		else
			cr_assert_eq(value_of(a, f), value_of(b, f), "%s",
				     f->key);
	}
}

static void assert_error_has(const char *needle)
{
	cr_assert(strstr(rt_last_error(), needle),
		  "error line '%s' lacks '%s'", rt_last_error(), needle);
	cr_assert_null(strchr(rt_last_error(), '\n'),
		       "error is not one line: %s", rt_last_error());
}

Test(config_table, defaults_match_the_table_text, .timeout = 10)
{
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	for (size_t i = 0; i < rt_config_field_count; i++) {
		const struct rt_config_field *f = &rt_config_fields[i];
		if (f->type == RT_CFG_STR)
			cr_assert_str_eq((const char *)&cfg + f->offset, f->def);
		else
			cr_assert_eq(value_of(&cfg, f),
				     strtoull(f->def, NULL, 10), "%s", f->key);
	}
	/* the default machine is the trn2 preset (its sources are in
	 * deploy/configs/machines/trn2.yaml): a few of its figures */
	cr_assert_str_eq(cfg.machine_preset, "trn2");
	cr_assert_eq(cfg.ranks, 1);
	cr_assert_eq(cfg.pes, 8);                     /* 8 NeuronCore-v3 per chip */
	cr_assert_eq(cfg.hbm_bytes, 17179869184ULL);
	cr_assert_eq(cfg.dma_bytes_per_cycle, 27);    /* 27.2 GB/s per DMA engine */
	cr_assert_eq(cfg.dma_queues, 16);             /* 16 DMA engines per core */
	cr_assert_eq(cfg.dma_rows_per_queue, 8);      /* 128 partitions / 16 */
	cr_assert_eq(cfg.gemm_macs_per_cycle, 0);     /* roofline: from the array */
	cr_assert_eq(cfg.gemm_clock_mhz, 2400);       /* Tensor engine 2.4 GHz */
	cr_assert_eq(cfg.link_ipcq_cycles, 500);
	cr_assert_eq(cfg.ipcq_bytes_per_cycle, 160);  /* 1.28 TB/s over 4 links, per way */
	cr_assert_eq(cfg.hbm_bytes_per_cycle, 2900);  /* 2.9 TB/s at 1 GHz */
	cr_assert_eq(cfg.hbm_channels, 64);
	cr_assert_eq(cfg.dma_outstanding, 4);
	cr_assert_str_eq(cfg.hbm_model, "shared");
	cr_assert_eq(cfg.dispatch_cycles_per_kib, 64);
	cr_assert_eq(cfg.watchdog_ms, 30000);
	cr_assert_str_eq(cfg.gemm_model, "tensor_engine");
	cr_assert_str_eq(cfg.math_model, "simd");
	cr_assert_str_eq(cfg.dma_model, "linear");
	cr_assert_str_eq(cfg.bind_host, "127.0.0.1");
	cr_assert_eq(rt_config_cycle_ps(&cfg), 1000);
	cr_assert_eq(rt_config_validate(&cfg), RT_EOK, "%s", rt_last_error());
}

Test(config_table, fields_are_unique_typed_documented_and_grouped,
     .timeout = 10)
{
	cr_assert_eq(rt_config_field_count, 67); /* 54 and issue 22's 13 energy.* */
	for (size_t i = 0; i < rt_config_field_count; i++) {
		const struct rt_config_field *f = &rt_config_fields[i];
		const char *dot = strchr(f->key, '.');
		cr_assert(dot && dot != f->key && dot[1], "%s", f->key);
		cr_assert(f->doc && f->doc[0] && f->unit && f->unit[0]);
		if (f->type == RT_CFG_U32)
			cr_assert_eq(f->size, 4, "%s", f->key);
		if (f->type == RT_CFG_U64)
			cr_assert_eq(f->size, 8, "%s", f->key);
		cr_assert_leq(f->offset + f->size, sizeof(struct rt_config));
		for (size_t j = 0; j < i; j++) {
			const struct rt_config_field *g = &rt_config_fields[j];
			size_t plen = (size_t)(dot - f->key);
			cr_assert_str_neq(f->key, g->key);
			cr_assert_neq(f->offset, g->offset, "%s", f->key);
			/* a section seen before must be the previous one */
			if (!strncmp(g->key, f->key, plen + 1))
				cr_assert(!strncmp(rt_config_fields[i - 1].key,
						   f->key, plen + 1),
					  "section of %s not contiguous",
					  f->key);
		}
	}
}

Test(config_load, file_overlays_only_the_keys_it_names, .timeout = 10)
{
	struct rt_config cfg, want;
	char path[64];

	write_temp("# comment\n"
		   "dma: {bytes_per_cycle: 32}\n"
		   "gemm:\n  model: roofline\n  tile_k: 64\n"
		   "links: {ipcq_cycles: 7}\n", path);
	rt_config_defaults(&cfg);
	rt_config_defaults(&want);
	cr_assert_eq(rt_config_load_file(&cfg, path), RT_EOK, "%s",
		     rt_last_error());
	unlink(path);
	want.dma_bytes_per_cycle = 32;
	strcpy(want.gemm_model, "roofline");
	want.gemm_tile_k = 64;
	want.link_ipcq_cycles = 7;
	assert_same_fields(&cfg, &want);
}

Test(config_load, empty_text_changes_nothing, .timeout = 10)
{
	struct rt_config cfg, want;

	rt_config_defaults(&cfg);
	rt_config_defaults(&want);
	cr_assert_eq(rt_config_load_text(&cfg, "", 0, "empty"), RT_EOK);
	cr_assert_eq(rt_config_load_text(&cfg, "# only\n", 7, "c"), RT_EOK);
	assert_same_fields(&cfg, &want);
}

Test(config_load, unknown_key_names_file_and_dotted_key, .timeout = 10)
{
	struct rt_config cfg;
	char path[64];

	write_temp("dma:\n  setup_cycles: 3\n  bytes_per_cycl: 3\n", path);
	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_load_file(&cfg, path), RT_ECONFIG);
	unlink(path);
	assert_error_has(path);
	assert_error_has("unknown key 'dma.bytes_per_cycl'");
	assert_error_has("did you mean 'dma.bytes_per_cycle'");
}

Test(config_load, unknown_section_is_rejected, .timeout = 10)
{
	static const char text[] = "dram: {bytes: 1}\n";
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_load_text(&cfg, text, strlen(text), "s.yaml"),
		     RT_ECONFIG);
	assert_error_has("config s.yaml: unknown key 'dram'");
}

Test(config_load, wrong_type_names_key_and_value, .timeout = 10)
{
	static const char text[] = "dma: {setup_cycles: fast}\n";
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_load_text(&cfg, text, strlen(text), "x.yaml"),
		     RT_ECONFIG);
	assert_error_has("config x.yaml: key 'dma.setup_cycles' expects an "
			 "unsigned integer, got 'fast'");
}

Test(config_load, negative_and_out_of_range_numbers_are_rejected,
     .timeout = 10)
{
	static const char neg[] = "links: {ipcq_cycles: -5}\n";
	static const char big[] = "machine: {pes: 4294967296}\n";
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_load_text(&cfg, neg, strlen(neg), "n.yaml"),
		     RT_ECONFIG);
	assert_error_has("key 'links.ipcq_cycles' expects an unsigned "
			 "integer, got '-5'");
	cr_assert_eq(rt_config_load_text(&cfg, big, strlen(big), "b.yaml"),
		     RT_ECONFIG);
	assert_error_has("key 'machine.pes' is out of range");
}

Test(config_load, list_where_a_value_belongs_is_rejected, .timeout = 10)
{
	static const char text[] = "gemm: {model: [a, b]}\n";
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_load_text(&cfg, text, strlen(text), "l.yaml"),
		     RT_ECONFIG);
	assert_error_has("key 'gemm.model' expects a single value, got a list");
}

Test(config_load, duplicate_key_is_rejected, .timeout = 10)
{
	static const char text[] = "run: {watchdog_ms: 1, watchdog_ms: 2}\n";
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_load_text(&cfg, text, strlen(text), "d.yaml"),
		     RT_ECONFIG);
	assert_error_has("key 'run.watchdog_ms' appears twice");
}

Test(config_load, missing_file_names_the_file, .timeout = 10)
{
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_load_file(&cfg, "/nonexistent/kb.yaml"),
		     RT_ECONFIG);
	assert_error_has("config /nonexistent/kb.yaml:");
}

Test(config_load, failed_load_leaves_config_unchanged, .timeout = 10)
{
	static const char text[] = "dma: {bytes_per_cycle: 1}\n"
				   "math: {lanes: many}\n";
	struct rt_config cfg, want;

	rt_config_defaults(&cfg);
	rt_config_defaults(&want);
	cr_assert_eq(rt_config_load_text(&cfg, text, strlen(text), "f.yaml"),
		     RT_ECONFIG);
	assert_error_has("key 'math.lanes'");
	assert_same_fields(&cfg, &want);
}

Test(config_load, syntax_error_is_one_line_naming_the_file, .timeout = 10)
{
	static const char text[] = "dma: {setup_cycles: 1\n";
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_load_text(&cfg, text, strlen(text), "y.yaml"),
		     RT_ECONFIG);
	assert_error_has("config y.yaml: ");
}

Test(config_load, default_yaml_gives_exactly_the_defaults, .timeout = 10)
{
	const char *root = getenv("KB_ROOT") ? getenv("KB_ROOT") : ".";
	struct rt_config cfg, want;
	char path[4096];

	/* start from zeros: every default is nonzero, so a field the file
	 * forgets shows up as a mismatch */
	memset(&cfg, 0, sizeof(cfg));
	rt_config_defaults(&want);
	snprintf(path, sizeof(path), "%s/deploy/configs/default.yaml", root);
	cr_assert_eq(rt_config_load_file(&cfg, path), RT_EOK, "%s",
		     rt_last_error());
	assert_same_fields(&cfg, &want);
}

Test(config_load, every_example_config_loads_and_validates, .timeout = 10)
{
	const char *root = getenv("KB_ROOT") ? getenv("KB_ROOT") : ".";
	char pattern[4096];
	glob_t g;

	snprintf(pattern, sizeof(pattern), "%s/deploy/configs/*.yaml", root);
	cr_assert_eq(glob(pattern, 0, NULL, &g), 0, "no configs at %s",
		     pattern);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		struct rt_config cfg;
		rt_config_defaults(&cfg);
		cr_assert_eq(rt_config_load_file(&cfg, g.gl_pathv[i]), RT_EOK,
			     "%s", rt_last_error());
		cr_assert_eq(rt_config_validate(&cfg), RT_EOK, "%s: %s",
			     g.gl_pathv[i], rt_last_error());
	}
	globfree(&g);
}

Test(config_set, applies_numbers_and_strings, .timeout = 10)
{
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_set(&cfg, "links.ipcq_cycles=42"), RT_EOK);
	cr_assert_eq(rt_config_set(&cfg, "gemm.model=roofline"), RT_EOK);
	cr_assert_eq(rt_config_set(&cfg, "machine.ranks=4"), RT_EOK);
	cr_assert_eq(cfg.link_ipcq_cycles, 42);
	cr_assert_str_eq(cfg.gemm_model, "roofline");
	cr_assert_eq(cfg.ranks, 4);
}

Test(config_set, unknown_key_is_named, .timeout = 10)
{
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_set(&cfg, "dma.bytes_per_cycl=3"), RT_ECONFIG);
	assert_error_has("--set dma.bytes_per_cycl=3: unknown key");
}

Test(config_set, bad_value_and_missing_equals_are_rejected, .timeout = 10)
{
	struct rt_config cfg;
	char longname[400];

	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_set(&cfg, "dma.setup_cycles=fast"), RT_ECONFIG);
	assert_error_has("key 'dma.setup_cycles' expects an unsigned integer");
	cr_assert_eq(rt_config_set(&cfg, "dma.setup_cycles=-1"), RT_ECONFIG);
	cr_assert_eq(rt_config_set(&cfg, "dma.setup_cycles="), RT_ECONFIG);
	cr_assert_eq(rt_config_set(&cfg, "dma.setup_cycles"), RT_ECONFIG);
	assert_error_has("expected key=value");
	memset(longname, 'x', sizeof(longname));
	memcpy(longname, "run.bind_host=", 14);
	longname[sizeof(longname) - 1] = '\0';
	cr_assert_eq(rt_config_set(&cfg, longname), RT_ECONFIG);
	assert_error_has("too long");
	cr_assert_eq(cfg.dma_setup_cycles, 91); /* the default, unchanged */
	cr_assert_str_eq(cfg.bind_host, "127.0.0.1");
}

Test(config_validate, rejects_zero_link_latency, .timeout = 10)
{
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cfg.link_sched_engine_cycles = 0;
	cr_assert_eq(rt_config_validate(&cfg), RT_ECONFIG);
	assert_error_has("links.sched_engine_cycles = 0");
}

Test(config_validate, rejects_clock_that_does_not_divide_1e6, .timeout = 10)
{
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cfg.clock_mhz = 3;
	cr_assert_eq(rt_config_validate(&cfg), RT_ECONFIG);
	assert_error_has("machine.clock_mhz = 3 must divide 1000000");
	assert_error_has("whole number of picoseconds");
	cfg.clock_mhz = 0;
	cr_assert_eq(rt_config_validate(&cfg), RT_ECONFIG);
	cfg.clock_mhz = 1250;
	cr_assert_eq(rt_config_validate(&cfg), RT_EOK, "%s", rt_last_error());
	cr_assert_eq(rt_config_cycle_ps(&cfg), 800);
}

Test(config_validate, rejects_out_of_range_machine_and_zero_rates,
     .timeout = 10)
{
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cfg.ranks = 65;
	cr_assert_eq(rt_config_validate(&cfg), RT_ECONFIG);
	assert_error_has("machine.ranks = 65, must be 1 to 64");
	rt_config_defaults(&cfg);
	cfg.pes = 0;
	cr_assert_eq(rt_config_validate(&cfg), RT_ECONFIG);
	rt_config_defaults(&cfg);
	cfg.gemm_tile_k = 0;
	cr_assert_eq(rt_config_validate(&cfg), RT_ECONFIG);
	assert_error_has("gemm.tile_k");
	rt_config_defaults(&cfg);
	cfg.math_lanes = 0;
	cr_assert_eq(rt_config_validate(&cfg), RT_ECONFIG);
	rt_config_defaults(&cfg);
	cfg.tcm_scratch_bytes = 0;
	cr_assert_eq(rt_config_validate(&cfg), RT_ECONFIG);
	rt_config_defaults(&cfg);
	cfg.gemm_model[0] = '\0';
	cr_assert_eq(rt_config_validate(&cfg), RT_ECONFIG);
	assert_error_has("gemm.model is empty");
}

Test(config_doc, renders_one_row_per_field, .timeout = 10)
{
	struct rt_buf b;
	size_t lines = 0;

	rt_buf_init(&b);
	cr_assert_eq(rt_config_doc(&b), RT_EOK);
	for (size_t i = 0; i < b.len; i++)
		lines += b.data[i] == '\n';
	cr_assert_eq(lines, rt_config_field_count + 2);
	cr_assert(strstr(b.data, "| `links.ipcq_cycles` | `500` | 1 to 1000000000 | cycles |"));
	rt_buf_release(&b);
}

/* ------------------------------------------------------------ issue 13 */

Test(config_range, every_field_documents_a_range_holding_its_default, .timeout = 10)
{
	struct rt_config cfg;
	struct rt_buf b;
	char row[256];

	rt_config_defaults(&cfg);
	rt_buf_init(&b);
	cr_assert_eq(rt_config_doc(&b), RT_EOK);
	for (size_t i = 0; i < rt_config_field_count; i++) {
		const struct rt_config_field *f = &rt_config_fields[i];

		if (f->type == RT_CFG_STR)
			continue;
		cr_assert_leq(f->min, f->max, "%s", f->key);
		cr_assert(value_of(&cfg, f) >= f->min && value_of(&cfg, f) <= f->max, "%s",
			  f->key);
		if (f->type == RT_CFG_U32)
			cr_assert_leq(f->max, UINT32_MAX, "%s", f->key);
		snprintf(row, sizeof(row), "| `%s` | `%s` | %llu to %llu |", f->key, f->def,
			 (unsigned long long)f->min, (unsigned long long)f->max);
		cr_assert(strstr(b.data, row), "docs table lacks the range: %s", row);
	}
	rt_buf_release(&b);
}

Test(config_range, out_of_range_values_name_key_and_range, .timeout = 10)
{
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_set(&cfg, "dma.setup_cycles=18446744073709551615"), RT_ECONFIG);
	assert_error_has("'dma.setup_cycles' is out of range");
	assert_error_has("must be 0 to 1000000000 (cycles)");
	cr_assert_eq(rt_config_set(&cfg, "links.host_sched_cycles=18446744073709552"), RT_ECONFIG);
	assert_error_has("links.host_sched_cycles");
	cr_assert_eq(rt_config_set(&cfg, "run.watchdog_ms=18446744073709551615"), RT_ECONFIG);
	assert_error_has("1 to 86400000");
	cr_assert_eq(rt_config_set(&cfg, "machine.pes=010"), RT_ECONFIG);
	cr_assert_eq(rt_config_set(&cfg, "machine.pes=0x10"), RT_ECONFIG);
	cr_assert_eq(cfg.dma_setup_cycles, 91); /* the default, unchanged */
	cr_assert_eq(cfg.watchdog_ms, 30000);
}

Test(config_range, cycles_times_picoseconds_is_checked, .timeout = 10)
{
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cfg.clock_mhz = 1; /* 1000000 ps per cycle */
	cfg.dma_setup_cycles = 1000001;
	cr_assert_eq(rt_config_validate(&cfg), RT_ECONFIG);
	assert_error_has("dma.setup_cycles = 1000001 cycles");
	cfg.dma_setup_cycles = 1000000;
	cr_assert_eq(rt_config_validate(&cfg), RT_EOK, "%s", rt_last_error());
	cfg.link_ipcq_cycles = UINT64_MAX; /* set by hand: the range catches it */
	cr_assert_eq(rt_config_validate(&cfg), RT_ECONFIG);
	assert_error_has("links.ipcq_cycles");
}

Test(config_yaml, second_document_and_syntax_errors_give_the_line, .timeout = 10)
{
	static const char two[] = "dma: {setup_cycles: 1}\n---\ndma: {setup_cycles: 2}\n";
	static const char bad[] = "dma:\n  setup_cycles: 1\n  bytes_per_cycle: [1\n";
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_load_text(&cfg, two, strlen(two), "t.yaml"), RT_ECONFIG);
	assert_error_has("second YAML document starts at line 2");
	cr_assert_eq(cfg.dma_setup_cycles, 91); /* the default, unchanged */
	cr_assert_eq(rt_config_load_text(&cfg, bad, strlen(bad), "b.yaml"), RT_ECONFIG);
	assert_error_has("config b.yaml: YAML error: did not find expected ',' or ']'");
	assert_error_has("line 4");
}

Test(config_yaml, emitted_yaml_and_json_load_back_exactly, .timeout = 10)
{
	struct rt_config cfg, back;
	struct rt_buf b;

	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_set(&cfg, "gemm.model=lib \"x\": #1.so"), RT_EOK);
	cr_assert_eq(rt_config_set(&cfg, "links.ipcq_cycles=7"), RT_EOK);
	for (int format = 0; format < 2; format++) {
		rt_buf_init(&b);
		cr_assert_eq(rt_config_emit(&cfg, format ? RT_CONFIG_JSON : RT_CONFIG_YAML, &b),
			     RT_EOK);
		memset(&back, 0, sizeof(back));
		cr_assert_eq(rt_config_load_text(&back, b.data, b.len, "emitted"), RT_EOK, "%s: %s",
			     rt_last_error(), b.data);
		assert_same_fields(&back, &cfg);
		rt_buf_release(&b);
	}
}

Test(config_yaml, relative_model_path_resolves_against_the_file, .timeout = 10)
{
	char dir[] = "/tmp/kb_test_cfgdir_XXXXXX", path[128], want[160];
	struct rt_config cfg;
	FILE *f;

	cr_assert(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/c.yaml", dir);
	f = fopen(path, "w");
	cr_assert(f);
	fputs("gemm: {model: plugins/g.so}\nmath: {model: simd}\n", f);
	fclose(f);
	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_load_file(&cfg, path), RT_EOK, "%s", rt_last_error());
	snprintf(want, sizeof(want), "%s/plugins/g.so", dir);
	cr_assert_str_eq(cfg.gemm_model, want);
	cr_assert_str_eq(cfg.math_model, "simd");
	unlink(path);
	rmdir(dir);
}

Test(config_parse, one_decimal_parser_for_every_number, .timeout = 10)
{
	uint64_t v = 99;

	cr_assert_eq(rt_parse_u64("0", 0, 10, &v), RT_PARSE_OK);
	cr_assert_eq(v, 0);
	cr_assert_eq(rt_parse_u64("18446744073709551615", 0, UINT64_MAX, &v), RT_PARSE_OK);
	cr_assert_eq(v, UINT64_MAX);
	cr_assert_eq(rt_parse_u64("18446744073709551616", 0, UINT64_MAX, &v),
		     RT_PARSE_OUT_OF_RANGE);
	cr_assert_eq(rt_parse_u64("4294967360", 1, UINT32_MAX, &v), RT_PARSE_OUT_OF_RANGE);
	cr_assert_eq(rt_parse_u64("010", 0, 100, &v), RT_PARSE_NOT_A_NUMBER);
	cr_assert_eq(rt_parse_u64("0x10", 0, 100, &v), RT_PARSE_NOT_A_NUMBER);
	cr_assert_eq(rt_parse_u64("-1", 0, 100, &v), RT_PARSE_NOT_A_NUMBER);
	cr_assert_eq(rt_parse_u64(" 1", 0, 100, &v), RT_PARSE_NOT_A_NUMBER);
	cr_assert_eq(rt_parse_u64("99999999999999999999x", 0, 100, &v), RT_PARSE_NOT_A_NUMBER);
	cr_assert_eq(rt_parse_u64("", 0, 100, &v), RT_PARSE_NOT_A_NUMBER);
	cr_assert_eq(v, UINT64_MAX, "a failed parse changed the value");
}

Test(config_load, devices_and_writerless_fifos_are_refused, .timeout = 10)
{
	char fifo[64] = "/tmp/kb_test_cfgfifo_XXXXXX"; /* + "/c.yaml" */
	struct rt_config cfg;

	rt_config_defaults(&cfg);
	cr_assert_eq(rt_config_load_file(&cfg, "/dev/zero"), RT_ECONFIG);
	assert_error_has("config /dev/zero: is a character device");
	cr_assert(mkdtemp(fifo));
	strcat(fifo, "/c.yaml");
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(rt_config_load_file(&cfg, fifo), RT_ECONFIG);
	assert_error_has("the pipe gave no data");
	unlink(fifo);
	*strrchr(fifo, '/') = '\0';
	rmdir(fifo);
}

/* deploy/configs/default.yaml is `kernbench config` at the defaults (below
 * its own header comment), so its ranges and units cannot drift. */
Test(config_yaml, default_yaml_is_the_emitted_defaults, .timeout = 10)
{
	const char *root = getenv("KB_ROOT") ? getenv("KB_ROOT") : ".";
	struct rt_config cfg;
	struct rt_buf want, file;
	char path[4096];
	const char *body;

	rt_config_defaults(&cfg);
	rt_buf_init(&want);
	rt_buf_init(&file);
	cr_assert_eq(rt_config_emit(&cfg, RT_CONFIG_YAML, &want), RT_EOK);
	snprintf(path, sizeof(path), "%s/deploy/configs/default.yaml", root);
	cr_assert_eq(rt_buf_read_file(&file, path), RT_EOK);
	body = strstr(file.data, "\nmachine:");
	cr_assert_not_null(body);
	cr_assert_str_eq(body + 1, strchr(want.data, '\n') + 1,
			 "default.yaml differs from `kernbench config` (regenerate its body)");
	rt_buf_release(&want);
	rt_buf_release(&file);
}

/* ------------------------------------------------------------ plug-in params */

/* Loads `text` over the defaults; returns the error (RT_EOK if none). */
static enum rt_err load_over_defaults(struct rt_config *cfg, const char *text)
{
	rt_config_defaults(cfg);
	return rt_config_load_text(cfg, text, strlen(text), "p.yaml");
}

/* A plug-in's parameters as a YAML mapping, flow or block style, become the
 * very string `--set gemm.params=...` gives (in document order). */
Test(config_params, yaml_mapping_is_the_set_string, .timeout = 10)
{
	struct rt_config a, b, c, set;

	rt_config_defaults(&set);
	cr_assert_eq(rt_config_set(&set, "gemm.params=cycles=900,mode=fast"), RT_EOK, "%s",
		     rt_last_error());
	cr_assert_eq(load_over_defaults(&a, "gemm:\n  params: {cycles: 900, mode: fast}\n"),
		     RT_EOK, "%s", rt_last_error());
	cr_assert_eq(load_over_defaults(&b, "gemm:\n  array_rows: 64\n  params:\n"
					    "    cycles: 900\n    mode: fast\n  array_cols: 32\n"),
		     RT_EOK, "%s", rt_last_error());
	cr_assert_eq(load_over_defaults(&c, "gemm:\n  params: \"cycles=900,mode=fast\"\n"), RT_EOK,
		     "%s", rt_last_error());
	cr_expect_str_eq(a.gemm_params, set.gemm_params);
	cr_expect_str_eq(b.gemm_params, set.gemm_params);
	cr_expect_str_eq(c.gemm_params, set.gemm_params);
	/* keys around a block mapping are still read */
	cr_expect_eq(b.gemm_array_rows, 64);
	cr_expect_eq(b.gemm_array_cols, 32);
	/* each engine has its own */
	cr_assert_eq(load_over_defaults(&a, "math:\n  params: {lanes: 4}\ndma:\n  params: {x: y}\n"),
		     RT_EOK, "%s", rt_last_error());
	cr_expect_str_eq(a.math_params, "lanes=4");
	cr_expect_str_eq(a.dma_params, "x=y");
	cr_expect_str_eq(a.gemm_params, "none");
	/* an empty mapping: no parameters */
	cr_assert_eq(load_over_defaults(&a, "gemm:\n  params: {}\n"), RT_EOK);
	cr_expect_str_eq(a.gemm_params, "none");
}

/* What the name=value,... form cannot carry is one line naming the key and
 * its line, and the configuration is left as it was. */
Test(config_params, bad_yaml_params_are_one_line, .timeout = 10)
{
	static const struct {
		const char *text, *says;
	} bad[] = {
		{ "gemm:\n  params:\n    cycles: [1, 2]\n", "value of parameter 'cycles' must be a scalar" },
		{ "gemm:\n  params:\n    cycles: {a: 1}\n", "must be a scalar" },
		{ "gemm:\n  params: [1, 2]\n", "must be a mapping" },
		{ "gemm:\n  params: {a=b: 1}\n", "parameter name 'a=b'" },
		{ "gemm:\n  params: {a: \"1,2\"}\n", "may not contain ','" },
	};
	struct rt_config cfg;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(load_over_defaults(&cfg, bad[i].text), RT_ECONFIG, "%s", bad[i].text);
		cr_expect(strstr(rt_last_error(), "key 'gemm.params'") &&
			  strstr(rt_last_error(), "p.yaml") && strstr(rt_last_error(), bad[i].says),
			  "%s -> %s", bad[i].text, rt_last_error());
		cr_expect(!strchr(rt_last_error(), '\n'));
		cr_expect_str_eq(cfg.gemm_params, "none");
	}
	cr_expect_eq(load_over_defaults(&cfg, "gemm:\n  array_rows: 8\n  params: [1]\n"), RT_ECONFIG);
	cr_expect(strstr(rt_last_error(), "(line 3)"), "%s", rt_last_error());
	cr_expect_eq(cfg.gemm_array_rows, 128, "nothing applied from a refused file");
}

/* ---------------------------------------------------------------- presets */

/* deploy/configs/machines/NAME.yaml */
static void preset_file(const char *name, char *path, size_t cap)
{
	const char *root = getenv("KB_ROOT") ? getenv("KB_ROOT") : ".";

	snprintf(path, cap, "%s/deploy/configs/machines/%s.yaml", root, name);
}

/* The built-in defaults are the default preset's file, key for key. */
Test(config_preset, the_defaults_are_the_trn2_preset, .timeout = 10)
{
	struct rt_config defaults, file;
	char path[4096];

	rt_config_defaults(&defaults);
	rt_config_defaults(&file);
	preset_file(RT_DEFAULT_PRESET, path, sizeof(path));
	cr_assert_eq(rt_config_load_file(&file, path), RT_EOK, "%s", rt_last_error());
	assert_same_fields(&file, &defaults);
}

/* True when the key line at `line` (in `text`) carries a comment, or the
 * lines above it up to a comment are keys too (a comment may head a group
 * of keys): its source or modelling choice is written next to it. */
static bool sourced(const char *text, const char *line)
{
	const char *eol = strchr(line, '\n');

	if (memchr(line, '#', eol ? (size_t)(eol - line) : strlen(line)))
		return true;
	while (line > text + 1) {
		const char *prev = line - 1, *p;

		while (prev > text && prev[-1] != '\n')
			prev--;
		p = prev + strspn(prev, " ");
		if (*p == '#')
			return true;
		if (p == prev || *p == '\n') /* a section or a blank line */
			return false;
		line = prev;
	}
	return false;
}

/* Every preset loads, validates, names every machine key (all but run.*)
 * and gives each a source or a modelling choice in a comment next to it
 * (above it or after it), and none names another preset. */
Test(config_preset, every_preset_is_whole_and_sourced, .timeout = 10)
{
	static const char *const presets[] = { "trn2", "ascend910b", "tpu_v5e" };

	for (size_t p = 0; p < sizeof(presets) / sizeof(presets[0]); p++) {
		struct rt_config cfg;
		struct rt_buf text;
		char path[4096];

		preset_file(presets[p], path, sizeof(path));
		rt_config_defaults(&cfg);
		cr_assert_eq(rt_config_load_file(&cfg, path), RT_EOK, "%s", rt_last_error());
		cr_expect_eq(rt_config_validate(&cfg), RT_EOK, "%s: %s", presets[p], rt_last_error());
		rt_buf_init(&text);
		cr_assert_eq(rt_buf_read_file(&text, path), RT_EOK);
		cr_expect_null(strstr(text.data, "\n  preset:"), "%s names a preset", presets[p]);
		for (size_t i = 0; i < rt_config_field_count; i++) {
			const char *key = rt_config_fields[i].key, *dot = strchr(key, '.');
			char section[40], line[80];
			const char *at, *sec;

			if (!strncmp(key, "run.", 4) || !strcmp(key, "machine.preset"))
				continue;
			snprintf(section, sizeof(section), "\n%.*s:\n", (int)(dot - key), key);
			snprintf(line, sizeof(line), "\n  %s:", dot + 1);
			sec = strstr(text.data, section);
			cr_assert_not_null(sec, "%s lacks section %.*s", presets[p], (int)(dot - key),
					   key);
			at = strstr(sec, line);
			cr_expect_not_null(at, "%s does not name %s", presets[p], key);
			if (!at)
				continue;
			cr_expect(sourced(text.data, at + 1), "%s: %s has no source comment (on "
				  "its line, or above it and the keys it groups with)", presets[p],
				  key);
		}
		rt_buf_release(&text);
	}
}
