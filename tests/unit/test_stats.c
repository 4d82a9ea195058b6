/* test_stats.c — the statistics declaration API (rt/component.h): a
 * component declares its statistics with unit and description and adds by
 * handle; the declarations travel in its end-of-run report. Driven through
 * a real daemon by direct calls (rt_daemon_open), no socket. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt/component.h"
#include "rt/daemon.h"
#include "rt/job.h"

/* What the probe does at init: 0 the good path, else one bad call. */
static int probe_mode;

static const struct rt_stat_decl probe_stats[] = {
	RT_STAT_DECL("busy_ps", "ps", "time busy"),
	RT_STAT_DECL_MAX("depth", "entries", "deepest queue"),
};

static enum rt_err probe_init(struct rt_ctx *ctx, void *state)
{
	uint32_t h[2], again;
	struct rt_stat_decl bad = RT_STAT_DECL("x", "ps", "fine");

	(void)state;
	rt_stat_declare_all(ctx, probe_stats, 2, h);
	cr_expect_eq(h[0], 0);
	cr_expect_eq(h[1], 1, "handles are indexes in declaration order");
	again = rt_stat_declare(ctx, &(struct rt_stat_decl)RT_STAT_DECL("busy_ps", "s", "other"));
	cr_expect_eq(again, h[0], "declaring a name again gives its handle");
	rt_stat_add_h(ctx, h[0], 5);
	rt_stat_add(ctx, "busy_ps", 2); /* by name: the declared one */
	rt_stat_max_h(ctx, h[1], 3);
	rt_stat_max_h(ctx, h[1], 1);
	rt_stat_add(ctx, "on_the_fly", 4); /* undeclared: no unit */
	rt_stat_add_h(ctx, RT_STAT_NONE, 9); /* ignored */
	if (probe_mode == 1)
		bad.unit = "p\ts";
	if (probe_mode == 2)
		bad.merge = RT_STAT_MAX, bad.name = "busy_ps";
	if (probe_mode == 3) {
		static char desc[RT_STAT_DESC_MAX + 2];

		memset(desc, 'd', sizeof(desc) - 1);
		bad.description = desc;
	}
	if (probe_mode)
		cr_expect_eq(rt_stat_declare(ctx, &bad), RT_STAT_NONE);
	return RT_EOK;
}

static enum rt_err probe_handle(struct rt_ctx *ctx, void *state, const struct rt_delivery *d)
{
	(void)ctx, (void)state, (void)d;
	return RT_EOK;
}

static const struct rt_component_ops probe_ops = {
	.name = "probe",
	.state_size = 8,
	.init = probe_init,
	.handle = probe_handle,
};

/* Opens a one-component daemon; its init result. */
static enum rt_err open_probe(struct rt_job *job, struct rt_topology *topo,
			      struct rt_daemon **d, char *dir)
{
	uint32_t id;
	struct rt_daemon_opts o = { 0 };
	char parts[300];

	memset(job, 0, sizeof(*job));
	rt_config_defaults(&job->config);
	snprintf(dir, 64, "/tmp/kb-unit-stats-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(job->out_dir, sizeof(job->out_dir), "%s", dir);
	snprintf(parts, sizeof(parts), "%s/%s", dir, RT_PARTS_DIR);
	mkdir(parts, 0700);
	job->trace_off = true;
	rt_topology_init(topo);
	cr_assert_eq(rt_topology_add(topo, "p0", &probe_ops, 0, 0, &id), RT_EOK);
	cr_assert_eq(rt_topology_place(topo, RT_COLOCATE_ALL, NULL), RT_EOK);
	o.job = job;
	o.topo = topo;
	return rt_daemon_open(&o, d);
}

static void cleanup(struct rt_topology *topo, const char *dir)
{
	char cmd[128];

	rt_topology_release(topo);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}

Test(stat_decl, handles_units_and_merge_reach_the_report, .timeout = 10)
{
	static struct rt_job job;
	struct rt_topology topo;
	struct rt_daemon *d = NULL;
	Kb__Bye bye = KB__BYE__INIT;
	const Kb__ComponentReport *r;
	char dir[64];

	probe_mode = 0;
	cr_assert_eq(open_probe(&job, &topo, &d, dir), RT_EOK, "%s", rt_last_error());
	cr_assert_eq(rt_daemon_finish(d, &bye), RT_EOK, "%s", rt_last_error());
	cr_assert_eq(bye.n_reports, 1);
	r = bye.reports[0];
	cr_assert_eq(r->n_stats, 3);
	cr_expect_str_eq(r->stats[0]->name, "busy_ps");
	cr_expect_eq(r->stats[0]->value, 7);
	cr_expect_str_eq(r->stats[0]->unit, "ps", "the first declaration's unit stays");
	cr_expect_str_eq(r->stats[0]->description, "time busy");
	cr_expect_not(r->stats[0]->is_max);
	cr_expect_str_eq(r->stats[1]->name, "depth");
	cr_expect_eq(r->stats[1]->value, 3);
	cr_expect(r->stats[1]->is_max);
	cr_expect_str_eq(r->stats[2]->name, "on_the_fly");
	cr_expect_eq(r->stats[2]->value, 4);
	cr_expect_str_eq(r->stats[2]->unit, "");
	rt_daemon_close(&d);
	cleanup(&topo, dir);
}

/* A bad declaration fails the component's init with one line saying why. */
static void expect_refused(int mode, const char *phrase)
{
	static struct rt_job job;
	struct rt_topology topo;
	struct rt_daemon *d = NULL;
	char dir[64];

	probe_mode = mode;
	cr_expect_neq(open_probe(&job, &topo, &d, dir), RT_EOK);
	cr_expect(strstr(rt_last_error(), phrase), "%s", rt_last_error());
	rt_daemon_close(&d);
	cleanup(&topo, dir);
}

Test(stat_decl, bad_unit_description_or_merge_fail_the_component, .timeout = 10)
{
	expect_refused(1, "statistic \"x\": its unit has a non-printable byte");
	expect_refused(2, "statistic \"busy_ps\" is both summed and maxed");
	expect_refused(3, "statistic \"x\": its description is too long");
}
