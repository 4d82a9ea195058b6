/* test_plot.c — `kernbench plot OUT_DIR` draws a run's timeline and
 * utilisation (issue 10 item 9). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

static void write_text(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert(f, "%s", path);
	fwrite(text, 1, len, f);
	fclose(f);
}

static void expect_plot_refused(const char *dir, int status, const char *what)
{
	struct kb_result r;

	kb_run(&r, "plot", dir, NULL);
	cr_expect_eq(r.status, status, "%s: exit %d: %s", what, r.status, r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s: %s", what, r.err);
	cr_expect_null(strstr(r.err, "Traceback"), "%s: %s", what, r.err);
}

/* Hostile op logs (issue 19 item 9): bounded reads, one line each, never
 * a traceback or a picture of impossible records. */
Test(plot, hostile_op_logs_are_one_line_and_bounded, .timeout = 120)
{
	char dir[256], path[400];
	struct kb_result r;
	static const char bad_utf8[] = "\xff\xfe{}\n";
	static const char huge[] = "{\"start_ps\": 1e400, \"end_ps\": 1e400, \"rank\": 0, \"pe\": 0, "
				   "\"engine\": \"gemm\", \"op_kind\": \"gemm\"}\n";
	static const char backwards[] = "{\"start_ps\": 9, \"end_ps\": 3, \"rank\": 0, \"pe\": 0, "
					"\"engine\": \"gemm\", \"op_kind\": \"gemm\"}\n";

	kb_tmpdir(dir, sizeof(dir), "plot-hostile");
	snprintf(path, sizeof(path), "%s/op_log.jsonl", dir);
	cr_assert_eq(symlink("/dev/zero", path), 0);
	expect_plot_refused(dir, 1, "a link to /dev/zero");
	unlink(path);
	cr_assert_eq(mkdir(path, 0755), 0);
	expect_plot_refused(dir, 1, "a directory");
	rmdir(path);
	write_text(path, bad_utf8, sizeof(bad_utf8) - 1);
	expect_plot_refused(dir, 1, "invalid UTF-8");
	write_text(path, huge, sizeof(huge) - 1);
	expect_plot_refused(dir, 1, "a record at 1e400 ps");
	write_text(path, backwards, sizeof(backwards) - 1);
	expect_plot_refused(dir, 1, "a record ending before it starts");
	kb_run(&r, "plot", dir, "--window", "nan:nan", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
	kb_run(&r, "plot", dir, "--no-such", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
	kb_run(&r, "plot", dir, "-h", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
}
