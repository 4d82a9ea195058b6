/* main.c — `kernbench`: the launcher's command line. */
#include <stdio.h>
#include <string.h>

#include "launcher.h"
#include "rt/buf.h"
#include "rt/config.h"
#include "rt/config_doc.h"
#include "version.h" /* generated: KB_BUILD_COMMIT from `git describe` */
#include "workloads.h"

/* The release; KB_BUILD_COMMIT says which commit it was built from. */
#define KB_RELEASE "0.1.0"

const char *kb_version(void)
{
	return "kernbench " KB_RELEASE " (" KB_BUILD_COMMIT ")";
}

static int cmd_run(int argc, char **argv)
{
	static struct rt_job job; /* large (memfd tables); one per process */
	static char *given[256];  /* argv as typed: getopt permutes argv */
	enum rt_err err;

	if (argc >= (int)(sizeof(given) / sizeof(given[0]))) {
		fprintf(stderr, "kernbench: error: more than %zu arguments\n",
			sizeof(given) / sizeof(given[0]) - 1);
		return 2;
	}
	memcpy(given, argv, (size_t)argc * sizeof(*argv));
	err = kb_cli_parse_run(argc, argv, &job);

	if (err == RT_EINTERRUPTED) {
		kb_cli_run_usage(stdout);
		return 0;
	}
	if (err) {
		fprintf(stderr, "kernbench: error: %s\n", rt_last_error());
		return 2;
	}
	return kb_launch(&job, argc, given);
}

static int cmd_config(int argc, char **argv)
{
	struct rt_config cfg;
	struct rt_buf b;
	int format;
	enum rt_err err = kb_cli_parse_config(argc, argv, &cfg, &format);

	if (err == RT_EINTERRUPTED) {
		puts("usage: kernbench config [--config F]... [--set key=value]... [--ranks R] "
		     "[--pes P]\n                       [--format yaml|json|markdown]\n\n"
		     "Prints the effective configuration (defaults < files < --set < flags) in a\n"
		     "form --config loads back; markdown prints the reference table of every key.");
		return 0;
	}
	if (err) {
		fprintf(stderr, "kernbench: error: %s\n", rt_last_error());
		return 2;
	}
	rt_buf_init(&b);
	err = format == 2 ? rt_config_doc(&b)
			  : rt_config_emit(&cfg, format ? RT_CONFIG_JSON : RT_CONFIG_YAML, &b);
	if (!err)
		fputs(b.data ? b.data : "", stdout);
	rt_buf_release(&b);
	return err ? 1 : 0;
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
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		puts(kb_version());
		return 0;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "list")) {
		puts("workloads (kernbench run NAME):");
		kb_workload_list(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "config"))
		return cmd_config(argc - 1, argv + 1);
	fprintf(stderr, "kernbench: error: unknown command '%s' (see `kernbench --help`)\n", argv[1]);
	return 2;
}
