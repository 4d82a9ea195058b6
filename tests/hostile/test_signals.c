/* test_signals.c — every signal and limit (issue 19 item 4): each stop
 * signal ends a run with one line and nothing left, in the middle of the
 * run and while its outputs are merged; ulimit -f, ulimit -u and a pids
 * cgroup limit are one line; an output that cannot be written (stdout
 * included) fails the run; deeply nested YAML is refused at once. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../integration/harness.h"
#include "hostile.h"

/* Entries of `dir` other than . and .., the lock and `keep`. */
static int leftovers(const char *dir, const char *keep)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		     strcmp(e->d_name, ".kernbench.lock") && (!keep || strcmp(e->d_name, keep));
	if (d)
		closedir(d);
	return n;
}

static int n_children(pid_t pid)
{
	pid_t kids[256];

	return kb_children(pid, kids, 256);
}

static void expect_stopped(pid_t pid, int status, int sig, const char *err, const char *out)
{
	char want[32];

	snprintf(want, sizeof(want), "SIG%s", sigabbrev_np(sig));
	cr_expect_eq(status, sig == SIGINT ? 130 : 128 + sig, "%s: exit %d: %s", want, status, err);
	cr_expect(strstr(err, "interrupted by") && strstr(err, want), "%s: %s", want, err);
	cr_expect_eq(kb_count_lines(err), 1, "%s: %s", want, err);
	usleep(200000);
	cr_expect_eq(kb_leftover_daemons(), 0, "%s: daemons left", want);
	cr_expect_eq(kb_leftover_socket_dirs(pid), 0, "%s: socket folder left", want);
	cr_expect_eq(leftovers(out, NULL), 0, "%s: the run left files in %s", want, out);
}

/* A long traffic run, stopped by `sig` once its daemons run. */
static void stop_mid_run(int sig)
{
	char dir[256], out[300], errpath[300];
	char *argv[] = { (char *)"kernbench", (char *)"run", (char *)"traffic", (char *)"--quiet",
			 (char *)"--out", out, (char *)"--arg", (char *)"components=4", (char *)"--arg",
			 (char *)"messages=400000000", NULL };
	pid_t pid;
	char *err;
	int status;

	kb_tmpdir(dir, sizeof(dir), "stop-sig");
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(errpath, sizeof(errpath), "%s/stderr", dir);
	kb_adopt_orphans();
	pid = kbh_spawn(argv, errpath, -1, 0, true);
	cr_assert_geq(kbh_wait_children(pid, 4), 4);
	usleep(300000);
	kill(pid, sig);
	status = kb_wait(pid);
	err = kbh_stderr(errpath);
	expect_stopped(pid, status, sig, err, out);
	free(err);
}

Test(signals, every_stop_signal_mid_run_is_one_line_and_leaves_nothing, .timeout = 120)
{
	static const int sigs[] = { SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGXFSZ, SIGTERM, SIGHUP,
				    SIGINT };

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		stop_mid_run(sigs[i]);
}

/* The same while the launcher merges the outputs (its daemons are gone):
 * a traced run with a big op log, split into small chunks to merge. */
Test(signals, a_stop_signal_while_outputs_merge_leaves_nothing, .timeout = 120)
{
	char dir[256], out[300], errpath[300], stage[400];
	char *argv[] = { (char *)"kernbench", (char *)"run", (char *)"gemm", (char *)"--quiet",
			 (char *)"--out", out, (char *)"--arg", (char *)"m=2048", (char *)"--arg",
			 (char *)"k=2048", (char *)"--arg", (char *)"n=2048", (char *)"--pes",
			 (char *)"1", NULL };
	pid_t pid;
	char *err;
	int status, merging = 0;

	kb_tmpdir(dir, sizeof(dir), "stop-merge");
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(errpath, sizeof(errpath), "%s/stderr", dir);
	snprintf(stage, sizeof(stage), "%s/.kernbench-staging", out);
	setenv("KB_MERGE_CHUNK", "4096", 1);
	kb_adopt_orphans();
	pid = kbh_spawn(argv, errpath, -1, 0, true);
	unsetenv("KB_MERGE_CHUNK");
	cr_assert_geq(kbh_wait_children(pid, 3), 3);
	/* the daemons have ended and the staging folder is there: merging */
	for (int i = 0; i < 4000 && !merging; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			cr_assert_fail("the run ended before its merge could be caught");
		merging = n_children(pid) == 0 && !access(stage, F_OK);
		if (!merging)
			usleep(5000);
	}
	cr_assert(merging, "never saw the merge");
	kill(pid, SIGUSR1);
	status = kb_wait(pid);
	err = kbh_stderr(errpath);
	expect_stopped(pid, status, SIGUSR1, err, out);
	free(err);
}

Test(signals, a_file_size_limit_is_one_line_and_leaves_nothing, .timeout = 60)
{
	static const rlim_t limits[] = { 10 * 1024, 100 * 1024, 2 * 1024 * 1024 };

	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		char dir[256], out[300], errpath[300];
		char *argv[] = { (char *)"kernbench", (char *)"run", (char *)"gemm", (char *)"--quiet",
				 (char *)"--mode", (char *)"data", (char *)"--out", out, NULL };
		pid_t pid;
		char *err;
		int status;

		kb_tmpdir(dir, sizeof(dir), "fsize");
		snprintf(out, sizeof(out), "%s/out", dir);
		snprintf(errpath, sizeof(errpath), "%s.stderr", dir);
		kb_adopt_orphans();
		pid = kbh_spawn(argv, errpath, RLIMIT_FSIZE, limits[i], false);
		status = kb_wait(pid);
		err = kbh_stderr(errpath);
		unlink(errpath);
		cr_expect(status != 0, "ulimit -f %llu: exit 0", (unsigned long long)limits[i]);
		cr_expect(strstr(err, "ulimit -f") || strstr(err, "File too large"),
			  "ulimit -f %llu: the line does not say why: %s",
			  (unsigned long long)limits[i], err);
		cr_expect_null(strstr(err, "No such file"), "a wrong reason: %s", err);
		cr_expect_eq(kb_count_lines(err), 1, "%s", err);
		usleep(200000);
		cr_expect_eq(kb_leftover_daemons(), 0);
		cr_expect_eq(leftovers(out, NULL), 0, "ulimit -f %llu left files",
			     (unsigned long long)limits[i]);
		free(err);
	}
}

/* stdout that cannot be written (/dev/full): the report is an output too. */
Test(signals, a_report_that_cannot_be_written_fails_the_run, .timeout = 60)
{
	char dir[256], cmd[1200], errpath[300], *err;
	int status;

	kb_tmpdir(dir, sizeof(dir), "devfull");
	snprintf(errpath, sizeof(errpath), "%s.stderr", dir);
	snprintf(cmd, sizeof(cmd), "%s run gemm --out %s/out > /dev/full 2> %s", kb_bin(), dir,
		 errpath);
	status = system(cmd);
	err = kbh_stderr(errpath);
	unlink(errpath);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d: %s", status, err);
	cr_expect(strstr(err, "standard output"), "%s", err);
	cr_expect_eq(kb_count_lines(err), 1, "%s", err);
	free(err);
	/* and any command whose output cannot be written */
	snprintf(cmd, sizeof(cmd), "%s list > /dev/full 2> %s", kb_bin(), errpath);
	status = system(cmd);
	err = kbh_stderr(errpath);
	unlink(errpath);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 1, "list: status %d: %s", status, err);
	cr_expect_eq(kb_count_lines(err), 1, "%s", err);
	free(err);
}

Test(signals, a_pids_cgroup_limit_is_one_line_before_spawning, .timeout = 60)
{
	char cg[128], file[200], dir[256], errpath[300];
	char *argv[] = { (char *)kb_bin(), (char *)"run", (char *)"gemm", (char *)"--quiet",
			 (char *)"--out", dir, NULL };
	const char *bases[] = { "/sys/fs/cgroup/pids", "/sys/fs/cgroup" };
	const char *base = NULL;
	pid_t pid;
	char *err;
	int status;
	FILE *f;

	for (size_t i = 0; i < 2 && !base; i++) {
		snprintf(file, sizeof(file), "%s/cgroup.procs", bases[i]);
		snprintf(cg, sizeof(cg), "%s/kbtest-pids-%d", bases[i], (int)getpid());
		if (!access(file, W_OK) && !mkdir(cg, 0755)) {
			snprintf(file, sizeof(file), "%s/pids.max", cg);
			if (!access(file, W_OK))
				base = bases[i];
			else
				rmdir(cg);
		}
	}
	if (!base)
		cr_skip_test("no writable pids cgroup here");
	snprintf(file, sizeof(file), "%s/pids.max", cg);
	f = fopen(file, "w");
	cr_assert(f);
	fprintf(f, "30\n");
	fclose(f);
	kb_tmpdir(dir, sizeof(dir), "pids");
	snprintf(errpath, sizeof(errpath), "%s.stderr", dir);
	kb_adopt_orphans();
	pid = fork();
	if (pid == 0) {
		int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		snprintf(file, sizeof(file), "%s/cgroup.procs", cg);
		f = fopen(file, "w");
		if (!f)
			_exit(126);
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
		dup2(fd, 2);
		execv(kb_bin(), argv);
		_exit(127);
	}
	status = kb_wait(pid);
	err = kbh_stderr(errpath);
	unlink(errpath);
	rmdir(cg);
	cr_expect_eq(status, 1, "exit %d: %s", status, err);
	cr_expect(strstr(err, "pids cgroup") && strstr(err, "pids.max 30"), "%s", err);
	cr_expect_eq(kb_count_lines(err), 1, "%s", err);
	cr_expect_null(strstr(err, "Resource temporarily"), "%s", err);
	free(err);
}

Test(signals, ulimit_u_is_one_line_before_spawning, .timeout = 60)
{
	char dir[256], errpath[300], cmd[1200], *err;
	int status;

	if (geteuid() != 0)
		cr_skip_test("root is never held to ulimit -u: needs root to test it as nobody");
	kb_tmpdir(dir, sizeof(dir), "nproc");
	chmod(dir, 0777);
	snprintf(errpath, sizeof(errpath), "%s/stderr", dir);
	snprintf(cmd, sizeof(cmd),
		 "setpriv --reuid=%u --regid=%u --clear-groups bash -c 'ulimit -u 40; exec %s run "
		 "gemm --quiet --out %s/out' 2> %s", (unsigned)kbh_nobody(), (unsigned)kbh_nobody(),
		 kb_bin(), dir, errpath);
	status = system(cmd);
	err = kbh_stderr(errpath);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d: %s", status, err);
	cr_expect(strstr(err, "ulimit -u"), "%s", err);
	cr_expect_eq(kb_count_lines(err), 1, "%s", err);
	cr_expect_null(strstr(err, "Resource temporarily"), "%s", err);
	free(err);
}

/* Quadratic in libyaml, refused at once by the depth bound. */
Test(signals, deeply_nested_yaml_is_refused_at_once, .timeout = 20)
{
	char dir[256], path[300], hosts[300];
	struct kb_result r;
	FILE *f;

	kb_tmpdir(dir, sizeof(dir), "deep-yaml");
	snprintf(path, sizeof(path), "%s/deep.yaml", dir);
	f = fopen(path, "w");
	cr_assert(f);
	for (int i = 0; i < 300000; i++)
		fputc('[', f);
	for (int i = 0; i < 300000; i++)
		fputc(']', f);
	fclose(f);
	kb_run(&r, "config", "--config", path, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "nested deeper than 64"), "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);

	snprintf(hosts, sizeof(hosts), "%s/hosts.yaml", dir);
	f = fopen(hosts, "w");
	cr_assert(f);
	fprintf(f, "coordinator: tcp://127.0.0.1:5555\nhosts:\n  - ranks: ");
	for (int i = 0; i < 100000; i++)
		fputc('[', f);
	fclose(f);
	kb_run(&r, "run", "gemm", "--hosts", hosts, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "nested deeper than 64"), "%s", r.err);

	/* block nesting and "- - -" entries count too; a normal file passes */
	f = fopen(path, "w");
	for (int i = 0; i < 200; i++)
		fprintf(f, "%*sk%d:\n", 2 * i, "", i);
	fclose(f);
	kb_run(&r, "config", "--config", path, NULL);
	cr_expect(strstr(r.err, "nested deeper than 64"), "%s", r.err);
	f = fopen(path, "w");
	fprintf(f, "dma:\n  setup_cycles: 32 # [[[[ a comment\nrun:\n  bind_host: \"127.0.0.1\"\n");
	fclose(f);
	kb_run(&r, "config", "--config", path, NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
}
