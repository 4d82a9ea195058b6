/* main.c — `kernbench`: the launcher's command line. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stdbool.h>

#include "hosts.h"
#include "launcher.h"
#include "rerun.h"
#include "spmd.h"
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

/* Started by mpirun or srun with no hosts file: *s says which process
 * this is (s->size 0: not such a launch, a one-host run). The options
 * that only such a launch takes are refused without one. */
static enum rt_err spmd_launch(const struct kb_spmd_opts *o, struct kb_spmd *s)
{
	enum rt_err err = kb_spmd_detect(getenv, s);

	if (err == RT_ENOTFOUND) {
		memset(s, 0, sizeof(*s));
		if (o->rendezvous || o->coordinator)
			return rt_fail(RT_EUSAGE, "--%s is for a run started by mpirun or srun (this "
				       "one was not: no OMPI_COMM_WORLD_* or SLURM step variables)",
				       o->rendezvous ? "rendezvous" : "coordinator");
		if (o->agent_timeout_s)
			return rt_fail(RT_EUSAGE, "--agent-timeout needs --hosts FILE, or a run started "
				       "by mpirun or srun");
		return RT_EOK;
	}
	return err;
}

int kb_cli_run(int argc, char **argv)
{
	static struct rt_job job; /* large (memfd tables); one per process */
	static char *given[256];  /* argv as typed, for summary.json */
	static struct kb_hosts hosts;
	static struct kb_rerun rerun;
	struct kb_spmd_opts spmd_opts = { 0 };
	struct kb_spmd spmd = { 0 };
	bool have_hosts = false;
	enum rt_err err;
	int rc;

	if (argc >= (int)(sizeof(given) / sizeof(given[0]))) {
		fprintf(stderr, "kernbench: error: run: more than %zu arguments\n",
			sizeof(given) / sizeof(given[0]) - 1);
		return 2;
	}
	memcpy(given, argv, (size_t)argc * sizeof(*argv));
	/* --from DIR becomes the options it stands for (rerun.h) */
	err = kb_rerun_prepare(argc, argv, &rerun);
	if (!err)
		err = kb_cli_parse_run(rerun.argc, rerun.argv, &job, &hosts, &have_hosts, &spmd_opts);
	if (!err && !have_hosts)
		err = spmd_launch(&spmd_opts, &spmd);

	if (err == RT_EINTERRUPTED) {
		kb_cli_run_usage(stdout);
		kb_rerun_release(&rerun);
		return 0;
	}
	if (err) {
		rt_print_error(rt_last_error());
		kb_rerun_release(&rerun);
		return rt_exit_status(err); /* RT_EUSAGE: 2; a plug-in that crashed loading: 1 */
	}
	if (spmd.size)
		rc = kb_spmd_run(&spmd, &spmd_opts, &job, argc, given);
	else
		rc = kb_launch(&job, have_hosts ? &hosts : NULL, argc, given);
	if (spmd.size && spmd.rank) { /* an agent: the results are process 0's */
		kb_rerun_release(&rerun);
		return rc;
	}
	if (rc == 0 && kb_rerun_check(&rerun, job.result_dir)) {
		rt_print_error(rt_last_error());
		rc = 1;
	}
	kb_rerun_release(&rerun);
	return rc;
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
int kb_cli_plot(int argc, char **argv)
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

/* A command's output that could not be written (> /dev/full, a closed
 * pipe) fails it: what it printed is lost. */
static int check_stdout(int rc)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return rc;
	if (!rc) {
		char line[200];

		snprintf(line, sizeof(line), "cannot write to standard output: %s",
			 strerror(errno ? errno : EIO));
		rt_print_error(line);
	}
	return rc ? rc : 1;
}

int main(int argc, char **argv)
{
	kb_check_stack(argv);
	if (argc >= 2 && !strcmp(argv[1], "__daemon"))
		return kb_daemon_main(argc, argv);
	if (argc < 2) {
		kb_cli_usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		kb_cli_usage(stdout);
		return check_stdout(0);
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		puts(kb_version());
		return check_stdout(0);
	}
	return check_stdout(kb_cli_main(argc - 1, argv + 1));
}
