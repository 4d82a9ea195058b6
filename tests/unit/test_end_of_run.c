/* test_end_of_run.c — the one JSON writer (escaping and well-formedness),
 * statistic name checks, and a scheduler that ends the run still holding a
 * command reports it from fini. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/component.h"
#include "rt/json.h"
#include "rt/wire.h"
#include "sched.h"

static char *escaped(const char *s)
{
	static char out[256];
	struct rt_buf b;

	rt_buf_init(&b);
	cr_assert_eq(rt_json_escape(&b, s), RT_EOK);
	snprintf(out, sizeof(out), "%s", b.data);
	rt_buf_release(&b);
	return out;
}

Test(json, strings_are_escaped_whatever_their_bytes, .timeout = 5)
{
	cr_expect_str_eq(escaped("bytes moved"), "\"bytes moved\"");
	cr_expect_str_eq(escaped("say \"hi\" \\"), "\"say \\\"hi\\\" \\\\\"");
	cr_expect_str_eq(escaped("a\nb\tc\x01"), "\"a\\u000ab\\u0009c\\u0001\"");
	cr_expect_str_eq(escaped("del\x7f"), "\"del\\u007f\"");
	/* valid UTF-8 passes through; invalid bytes become U+FFFD */
	cr_expect_str_eq(escaped("caf\xc3\xa9 \xe2\x82\xac"), "\"caf\xc3\xa9 \xe2\x82\xac\"");
	cr_expect_str_eq(escaped("bad\xff\xc3"), "\"bad\\ufffd\\ufffd\"");
	cr_expect_str_eq(escaped("overlong\xc0\xaf"), "\"overlong\\ufffd\\ufffd\"");
	cr_expect_str_eq(escaped("surrogate\xed\xa0\x80"), "\"surrogate\\ufffd\\ufffd\\ufffd\"");
}

Test(json, writer_places_commas_and_brackets_in_every_layout, .timeout = 5)
{
	struct rt_buf b;
	struct rt_json j;

	rt_buf_init(&b);
	rt_json_init(&j, &b);
	rt_json_object(&j, NULL, RT_JSON_LINES);
	rt_json_str(&j, "name", "x\"y");
	rt_json_object(&j, "inline", RT_JSON_INLINE);
	rt_json_fixed(&j, "a", 0.5, 2);
	rt_json_fixed(&j, "nan", NAN, 2);
	rt_json_close(&j);
	rt_json_array(&j, "list", RT_JSON_COMPACT);
	rt_json_u64(&j, NULL, 1);
	rt_json_ps_as_us(&j, NULL, 1234567);
	rt_json_hex64(&j, NULL, 255);
	rt_json_close(&j);
	rt_json_object(&j, "empty", RT_JSON_LINES);
	rt_json_close(&j);
	rt_json_close(&j);
	cr_assert_eq(rt_json_finish(&j), RT_EOK, "%s", rt_last_error());
	cr_expect_str_eq(b.data, "{\n  \"name\": \"x\\\"y\",\n  \"inline\": {\"a\": 0.50, \"nan\": null},"
				 "\n  \"list\": [1,1.234567,\"00000000000000ff\"],\n  \"empty\": {}\n}");
	rt_buf_release(&b);
}

Test(json, misuse_is_an_error_not_bad_output, .timeout = 5)
{
	struct rt_buf b;
	struct rt_json j;

	rt_buf_init(&b);
	rt_json_init(&j, &b);
	rt_json_array(&j, NULL, RT_JSON_COMPACT);
	rt_json_u64(&j, "key in an array", 1);
	cr_expect_eq(rt_json_finish(&j), RT_EINVAL);
	rt_buf_reset(&b);
	rt_json_init(&j, &b);
	rt_json_object(&j, NULL, RT_JSON_COMPACT);
	rt_json_u64(&j, NULL, 1); /* a value without a key */
	cr_expect_eq(rt_json_finish(&j), RT_EINVAL);
	rt_buf_reset(&b);
	rt_json_init(&j, &b);
	rt_json_object(&j, NULL, RT_JSON_COMPACT);
	cr_expect_eq(rt_json_finish(&j), RT_EINVAL, "an open object must not pass");
	rt_buf_release(&b);
}

Test(stat_name, printable_names_pass_and_the_rest_say_why, .timeout = 5)
{
	char long_name[200];

	cr_expect_null(rt_stat_name_check("bytes moved"));
	cr_expect_null(rt_stat_name_check("say \"hi\" \\ ok"));
	cr_expect(strstr(rt_stat_name_check(""), "empty"));
	cr_expect(strstr(rt_stat_name_check("a\nb"), "\"a\\x0ab\" has a non-printable byte 0x0a"));
	cr_expect(strstr(rt_stat_name_check("delivered"), "reserved"));
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	cr_expect(strstr(rt_stat_name_check(long_name), "longer than 128 bytes"));
	long_name[RT_STAT_NAME_MAX] = '\0';
	cr_expect_null(rt_stat_name_check(long_name), "exactly the maximum is fine");
}

/* A DMA read command the scheduler accepts. */
static void dma_cmd(Kb__Command *cmd, Kb__DmaCmd *dma, Kb__TensorRef *src, Kb__TensorRef *dst,
		    uint32_t *shape)
{
	kb__command__init(cmd);
	kb__dma_cmd__init(dma);
	kb__tensor_ref__init(src);
	kb__tensor_ref__init(dst);
	shape[0] = 4;
	shape[1] = 32;
	src->space = KB__SPACE__SPACE_HBM;
	dst->space = KB__SPACE__SPACE_TCM;
	src->n_shape = dst->n_shape = 2;
	src->shape = dst->shape = shape;
	dma->id = 7;
	dma->src = src;
	dma->dst = dst;
	cmd->body_case = KB__COMMAND__BODY_DMA;
	cmd->dma = dma;
}

Test(sched_fini, scheduler_holding_a_command_reports_it_unfinished, .timeout = 5)
{
	struct rt_config cfg;
	Kb__Command cmd;
	Kb__DmaCmd dma;
	Kb__TensorRef src, dst;
	uint32_t shape[2];
	void *state = calloc(1, sched_ops.state_size);
	struct sched_core *core = state; /* the component state starts with its core */

	memset(&cfg, 0, sizeof(cfg));
	cfg.pes = 1;
	cfg.tcm_scratch_bytes = 1 << 20;
	cfg.tcm_staging_bytes = 1 << 19;
	cfg.gemm_tile_m = cfg.gemm_tile_n = cfg.gemm_tile_k = 128;
	cfg.max_composite_logical_bytes = 1024;
	cfg.hbm_bytes = 1 << 24;
	sched_core_init(core, &cfg, 0, 0);
	dma_cmd(&cmd, &dma, &src, &dst, shape);
	cr_assert_eq(sched_core_submit(core, &cmd, 0), RT_EOK, "%s", rt_last_error());
	/* its stage was sent; no StageDone ever comes back */
	cr_expect_eq(sched_ops.fini(NULL, state), RT_EUNFINISHED);
	cr_expect(strstr(rt_last_error(), "holds 1 command(s); the oldest, command 7, is running"),
		  "%s", rt_last_error());
	memset(state, 0, sched_ops.state_size);
	sched_core_init(core, &cfg, 0, 0);
	cr_expect_eq(sched_ops.fini(NULL, state), RT_EOK, "an idle scheduler finished");
	free(state);
}

/* BYE's reports are outside bytes that reach summary.json and the error
 * line: a statistic name or unfinished line with a control byte is a
 * decode error. */
Test(wire_bye, reports_with_bad_names_or_lines_are_rejected, .timeout = 5)
{
	Kb__Sync sync = KB__SYNC__INIT, *out = NULL;
	Kb__Bye bye = KB__BYE__INIT;
	Kb__ComponentReport report, *reports[1] = { &report };
	Kb__Stat stat, *stats[1] = { &stat };
	struct rt_buf b;

	kb__component_report__init(&report);
	kb__stat__init(&stat);
	stat.name = (char *)"say \"hi\"";
	report.n_stats = 1;
	report.stats = stats;
	bye.n_reports = 1;
	bye.reports = reports;
	sync.body_case = KB__SYNC__BODY_BYE;
	sync.bye = &bye;
	rt_buf_init(&b);
	cr_assert_eq(rt_wire_encode_sync(&sync, &b), RT_EOK);
	cr_expect_eq(rt_wire_decode_sync((uint8_t *)b.data, b.len, &out), RT_EOK, "%s",
		     rt_last_error());
	rt_wire_free_sync(out);
	stat.name = (char *)"two\nlines";
	cr_assert_eq(rt_wire_encode_sync(&sync, &b), RT_EOK);
	cr_expect_eq(rt_wire_decode_sync((uint8_t *)b.data, b.len, &out), RT_EDECODE);
	cr_expect(strstr(rt_last_error(), "non-printable byte 0x0a"), "%s", rt_last_error());
	stat.name = (char *)"fine";
	report.unfinished = (char *)"blocked\nforged line";
	cr_assert_eq(rt_wire_encode_sync(&sync, &b), RT_EOK);
	cr_expect_eq(rt_wire_decode_sync((uint8_t *)b.data, b.len, &out), RT_EDECODE);
	rt_buf_release(&b);
}

/* Every Criterion test in tests/unit and tests/integration declares a
 * .timeout, so a hung test fails instead of stalling the suite. */
Test(suite, every_test_declares_a_timeout, .timeout = 10)
{
	static const char *const dirs[] = { "tests/unit", "tests/integration" };
	const char *root = getenv("KB_ROOT") ? getenv("KB_ROOT") : ".";
	int seen = 0;

	for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
		char path[2048];
		DIR *dir;
		struct dirent *e;

		snprintf(path, sizeof(path), "%s/%s", root, dirs[d]);
		dir = opendir(path);
		cr_assert_not_null(dir, "cannot list %s", path);
		while ((e = readdir(dir))) {
			size_t len = strlen(e->d_name);
			struct rt_buf text;

			if (len < 3 || strcmp(e->d_name + len - 2, ".c"))
				continue;
			snprintf(path, sizeof(path), "%s/%s/%s", root, dirs[d], e->d_name);
			rt_buf_init(&text);
			cr_assert_eq(rt_buf_read_file(&text, path), RT_EOK, "%s", path);
			for (const char *p = text.data; p && (p = strstr(p, "\nTest(")); p++) {
				const char *body = strstr(p, "\n{");
				size_t header = body ? (size_t)(body - p) : strlen(p);
				char *timeout = memmem(p, header, ".timeout", 8);

				seen++;
				cr_expect_not_null(timeout, "%s: %.*s has no .timeout", e->d_name,
						   (int)(header > 100 ? 100 : header), p + 1);
			}
			rt_buf_release(&text);
		}
		closedir(dir);
	}
	cr_expect_gt(seen, 100, "found only %d tests: wrong KB_ROOT?", seen);
}
