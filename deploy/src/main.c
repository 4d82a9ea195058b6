/* main.c — `kernbench`: the launcher's command line. */
#include <stdio.h>
#include <string.h>

#include "launcher.h"
#include "rt/buf.h"
#include "rt/config.h"
#include "rt/config_doc.h"
#include "workloads.h"

static int cmd_run(int argc, char **argv)
{
	static struct rt_job job; /* large (memfd tables); one per process */
	enum rt_err err = kb_cli_parse_run(argc - 1, argv + 1, &job);

	if (err == RT_EINTERRUPTED) {
		kb_cli_run_usage(stdout);
		return 0;
	}
	if (err) {
		fprintf(stderr, "kernbench: error: %s\n", rt_last_error());
		return 2;
	}
	return kb_launch(&job, argc, argv);
}

static int cmd_config(void)
{
	struct rt_buf b;

	rt_buf_init(&b);
	rt_config_doc(&b);
	fputs(b.data ? b.data : "", stdout);
	rt_buf_release(&b);
	return 0;
}

int main(int argc, char **argv)
{
	kb_check_stack(argv);
	if (argc >= 2 && !strcmp(argv[1], "__daemon"))
		return kb_daemon_main(argc, argv);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		kb_cli_usage(stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "list")) {
		puts("workloads (kernbench run NAME):");
		kb_workload_list(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "config"))
		return cmd_config();
	fprintf(stderr, "kernbench: error: unknown command '%s' (see `kernbench --help`)\n", argv[1]);
	return 2;
}
