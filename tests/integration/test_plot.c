/* test_plot.c — `kernbench plot OUT_DIR` draws a run's timeline and
 * utilisation (issue 10 item 9). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static bool starts_with_file(const char *path, const char *magic, size_t n)
{
	size_t len = 0;
	char *s = kb_slurp(path, &len);
	bool ok = s && len > n && !memcmp(s, magic, n);

	free(s);
	return ok;
}

Test(plot, timeline_and_utilisation_as_png_and_svg, .timeout = 120)
{
	char dir[256], path[400];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "plot");
	kb_run(&r, "run", "gemm", "--arg", "m=512", "--arg", "n=256", "--quiet", "--out", dir,
	       NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	kb_run(&r, "plot", dir, "--arrows", "--window", "0:5", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(path, sizeof(path), "%s/timeline.png", dir);
	cr_expect(starts_with_file(path, "\x89PNG", 4), "no PNG timeline");
	snprintf(path, sizeof(path), "%s/utilisation.png", dir);
	cr_expect(starts_with_file(path, "\x89PNG", 4), "no PNG utilisation chart");
	kb_run(&r, "plot", dir, "--format", "svg", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(path, sizeof(path), "%s/timeline.svg", dir);
	cr_expect(starts_with_file(path, "<?xml", 5), "no SVG timeline");
}

Test(plot, bad_input_is_one_line, .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "plot-bad");
	kb_run(&r, "plot", dir, NULL);
	cr_expect_eq(r.status, 1);
	cr_expect(strstr(r.err, "op_log.jsonl"), "%s", r.err);
	cr_expect_eq(strchr(r.err, '\n'), strrchr(r.err, '\n'), "%s", r.err);
	kb_run(&r, "plot", dir, "--window", "9:3", NULL);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "--window"), "%s", r.err);
}
