/* main.c — `kernbench`: the launcher's command line. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <stdbool.h>

#include "diff.h"
#include "hosts.h"
#include "launcher.h"
#include "rerun.h"
#include "sweep.h"
#include "rt/buf.h"
#include "rt/config.h"
#include "rt/config_doc.h"
#include "rt/keys.h"
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
	static struct kb_hosts hosts;
	static struct kb_rerun rerun;
	bool have_hosts = false;
	enum rt_err err;
	int rc;

	if (argc >= (int)(sizeof(given) / sizeof(given[0]))) {
		fprintf(stderr, "kernbench: error: more than %zu arguments\n",
			sizeof(given) / sizeof(given[0]) - 1);
		return 2;
	}
	memcpy(given, argv, (size_t)argc * sizeof(*argv));
	/* --from DIR becomes the options it stands for (rerun.h) */
	err = kb_rerun_prepare(argc, argv, &rerun);
	if (!err)
		err = kb_cli_parse_run(rerun.argc, rerun.argv, &job, &hosts, &have_hosts);

	if (err == RT_EINTERRUPTED) {
		kb_cli_run_usage(stdout);
		kb_rerun_release(&rerun);
		return 0;
	}
	if (err) {
		fprintf(stderr, "kernbench: error: %s\n", rt_last_error());
		kb_rerun_release(&rerun);
		return err == RT_EPEER ? 1 : 2; /* a plug-in that crashed loading */
	}
	rc = kb_launch(&job, have_hosts ? &hosts : NULL, argc, given);
	if (rc == 0 && kb_rerun_check(&rerun, job.result_dir)) {
		fprintf(stderr, "kernbench: error: %s\n", rt_last_error());
		rc = 1;
	}
	kb_rerun_release(&rerun);
	return rc;
}

static int cmd_config(int argc, char **argv)
{
	static struct rt_config_notes notes;
	char preset[1024];
	struct rt_config cfg;
	struct rt_buf b;
	int format;
	enum rt_err err = kb_cli_parse_config(argc, argv, &cfg, &format, preset, sizeof(preset));

	if (err == RT_EINTERRUPTED) {
		puts("usage: kernbench config [--machine NAME] [--config F]... [--set key=value]...\n"
		     "                       [--ranks R] [--pes P] [--format yaml|json|markdown]\n\n"
		     "Prints the effective configuration (defaults < --machine preset < files <\n"
		     "--set < flags) in a form --config loads back, with the preset's sources as\n"
		     "comments (deploy/configs/machines/NAME.yaml); markdown prints the reference\n"
		     "table of every key.");
		return 0;
	}
	if (err) {
		fprintf(stderr, "kernbench: error: %s\n", rt_last_error());
		return 2;
	}
	rt_buf_init(&b);
	if (format == 0 && preset[0] && rt_config_notes_read(preset, &notes) == RT_EOK) {
		err = rt_config_emit_noted(&cfg, &notes, &b);
		rt_config_notes_release(&notes);
	} else {
		err = format == 2 ? rt_config_doc(&b)
				  : rt_config_emit(&cfg, format ? RT_CONFIG_JSON : RT_CONFIG_YAML, &b);
	}
	if (!err)
		fputs(b.data ? b.data : "", stdout);
	rt_buf_release(&b);
	return err ? 1 : 0;
}

/* A plot script: installed beside the binary's share/ folder, or in the
 * source tree the binary was built in (build/bin, build/san/bin). */
bool kb_find_script(const char *name, char *path, size_t cap)
{
	static const char *const rel[] = {
		"../share/kernbench",
		"../../deploy/plot",
		"../../../deploy/plot",
	};
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n <= 0)
		return false;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return false;
	*slash = '\0';
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		snprintf(path, cap, "%s/%s/%s", exe, rel[i], name);
		if (!access(path, R_OK))
			return true;
	}
	return false;
}

/* `kernbench plot OUT_DIR [...]`: pictures drawn by a matplotlib script
 * run with Debian's python3 (deploy/plot/kernbench_plot.py). */
static int cmd_plot(int argc, char **argv)
{
	char script[PATH_MAX + 64];
	char *args[64];
	int n = 0;

	if (!kb_find_script("kernbench_plot.py", script, sizeof(script))) {
		fprintf(stderr, "kernbench: error: plot: kernbench_plot.py not found beside this binary (make install, or run from the build tree)\n");
		return 1;
	}
	args[n++] = (char *)"python3";
	args[n++] = script;
	for (int i = 1; i < argc && n < 63; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	execv("/usr/bin/python3", args);
	fprintf(stderr, "kernbench: error: plot: cannot run /usr/bin/python3: %s (run `make deps`)\n",
		strerror(errno));
	return 1;
}

/* `kernbench keygen --out FILE`: the run's CURVE keys, never overwritten */
static int cmd_keygen(int argc, char **argv)
{
	struct rt_keys k;
	enum rt_err err;

	if (argc != 3 || strcmp(argv[1], "--out")) {
		fprintf(stderr, "kernbench: error: usage: kernbench keygen --out FILE\n");
		return 2;
	}
	err = rt_keys_generate(&k);
	if (!err)
		err = rt_keys_write(&k, argv[2]);
	memset(&k, 0, sizeof(k));
	if (err) {
		fprintf(stderr, "kernbench: error: %s\n", rt_last_error());
		return 1;
	}
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
	if (!strcmp(argv[1], "agent"))
		return kb_agent_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "keygen"))
		return cmd_keygen(argc - 1, argv + 1);
	if (!strcmp(argv[1], "config"))
		return cmd_config(argc - 1, argv + 1);
	if (!strcmp(argv[1], "plot"))
		return cmd_plot(argc - 1, argv + 1);
	if (!strcmp(argv[1], "sweep"))
		return kb_sweep_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "diff"))
		return kb_diff_main(argc - 1, argv + 1);
	fprintf(stderr, "kernbench: error: unknown command '%s' (see `kernbench --help`)\n", argv[1]);
	return 2;
}
