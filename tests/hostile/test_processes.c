/* test_processes.c — daemons that leave early, kernel objects that misbehave
 * while loading, processes kernels fork, and a suspended run. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../integration/harness.h"
#include "hostile.h"

static void expect_one_line(const char *err)
{
	cr_expect_eq(kb_count_lines(err), 1, "not one line: %s", err);
}

static void expect_nothing_left(pid_t launcher)
{
	usleep(300000);
	cr_expect_eq(kb_leftover_daemons(), 0, "kb- processes left behind");
	cr_expect_eq(kb_leftover_socket_dirs(launcher), 0, "socket directory left behind");
}

/* ---------------------------------------------------------------- item 10 */

static void exit_zero_mid_run(const char *transport)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "exit0");
	kb_adopt_orphans();
	setenv("KB_FAULT", "exit@t001:3", 1);
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--transport", transport, "--arg",
	       "components=4", "--arg", "messages=20000", NULL);
	unsetenv("KB_FAULT");
	cr_expect_eq(r.status, 1, "%s: a daemon left with status 0 and the run exited %d: %s",
		     transport, r.status, r.err);
	cr_expect(strstr(r.err, "t001") && strstr(r.err, "before the end of the run"),
		  "%s: the line does not name the daemon that left: %s", transport, r.err);
	expect_one_line(r.err);
	expect_nothing_left(r.pid);
}

Test(hostile_processes, daemon_exiting_0_mid_run_fails_the_run_at_once, .timeout = 60)
{
	exit_zero_mid_run("ipc");
}

Test(hostile_processes, inproc_daemon_calling_exit_0_fails_the_run, .timeout = 60)
{
	exit_zero_mid_run("inproc");
}

/* ---------------------------------------------------------------- item 11 */

/* Compiles a kernel object whose constructor runs `ctor` (C statements)
 * and which defines an empty kernel `k`; returns "path:k". */
static void build_object(const char *dir, const char *ctor, char *workload, size_t cap)
{
	char src[300], so[300], cmd[1200];
	FILE *f;

	snprintf(src, sizeof(src), "%s/obj.c", dir);
	snprintf(so, sizeof(so), "%s/obj.so", dir);
	f = fopen(src, "w");
	cr_assert(f);
	fprintf(f, "#include <signal.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
		   "#include <unistd.h>\n#include \"tl.h\"\n"
		   "__attribute__((constructor)) static void ctor(void) { %s }\n"
		   "int k(struct tl *tl, const struct tl_args *a);\n"
		   "int k(struct tl *tl, const struct tl_args *a) { (void)tl; (void)a; return 0; }\n",
		ctor);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -std=gnu17 -fPIC -shared -I%s/kernel_host/include -o %s %s",
		 getenv("KB_ROOT") ? getenv("KB_ROOT") : ".", so, src);
	cr_assert_eq(system(cmd), 0, "cannot compile %s", src);
	snprintf(workload, cap, "%s:k", so);
}

static void run_object_over(const char *transport, const char *ctor, const char *watchdog,
			    struct kb_result *r, char *dir, size_t cap)
{
	char workload[400];

	kb_tmpdir(dir, cap, "ctor");
	build_object(dir, ctor, workload, sizeof(workload));
	kb_adopt_orphans();
	kb_run(r, "run", workload, "--quiet", "--out", dir, "--set", watchdog, "--transport",
	       transport, NULL);
}

static void run_object(const char *ctor, const char *watchdog, struct kb_result *r, char *dir,
		       size_t cap)
{
	run_object_over("ipc", ctor, watchdog, r, dir, cap);
}

Test(hostile_processes, kernel_object_constructor_calling_exit_0_is_a_named_failure,
     .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	run_object("exit(0);", "run.watchdog_ms=20000", &r, dir, sizeof(dir));
	cr_expect_eq(r.status, 1, "the launcher ran the constructor itself? exit %d: %s", r.status,
		     r.err);
	cr_expect(strstr(r.err, "kb-host") && strstr(r.err, "before the end of the run"), "%s",
		  r.err);
	expect_one_line(r.err);
	expect_nothing_left(r.pid);
}

Test(hostile_processes, kernel_object_constructor_that_segfaults_is_a_named_failure,
     .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	setenv("ASAN_OPTIONS", "handle_segv=0", 1); /* die of the signal, as without it */
	run_object("raise(SIGSEGV);", "run.watchdog_ms=20000", &r, dir, sizeof(dir));
	unsetenv("ASAN_OPTIONS");
	cr_expect_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "kb-host") && strstr(r.err, "signal 11"), "%s", r.err);
	expect_one_line(r.err);
	expect_nothing_left(r.pid);
}

Test(hostile_processes, kernel_object_constructor_that_loops_trips_the_watchdog,
     .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	run_object("for (;;) pause();", "run.watchdog_ms=1500", &r, dir, sizeof(dir));
	cr_expect_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "kb-host") && strstr(r.err, "did not answer"), "%s", r.err);
	expect_one_line(r.err);
	expect_nothing_left(r.pid);
}

/* A kernel's child that escapes into its own session still dies with the
 * run: it writes its pid, and must be gone (not merely re-parented) after. */
Test(hostile_processes, process_a_kernel_forks_does_not_outlive_the_run, .timeout = 60)
{
	char dir[256], ctor[600], pidfile[300];
	struct kb_result r;
	char *text;
	pid_t stray;

	kb_tmpdir(dir, sizeof(dir), "fork");
	snprintf(pidfile, sizeof(pidfile), "%s/stray.pid", dir);
	snprintf(ctor, sizeof(ctor),
		 "if (fork() == 0) { setsid(); "
		 "FILE *f = fopen(\"%s\", \"w\"); fprintf(f, \"%%d\", (int)getpid()); fclose(f); "
		 "for (;;) pause(); }",
		 pidfile);
	run_object(ctor, "run.watchdog_ms=20000", &r, dir, sizeof(dir));
	text = kb_slurp(pidfile, NULL);
	cr_assert(text, "the constructor never forked (exit %d: %s)", r.status, r.err);
	stray = (pid_t)atoi(text);
	free(text);
	usleep(200000);
	waitpid(stray, NULL, WNOHANG); /* if it was re-parented to us */
	cr_expect(kill(stray, 0) < 0 && errno == ESRCH, "pid %d a kernel forked is still alive",
		  (int)stray);
	if (kill(stray, 0) == 0) {
		kill(stray, SIGKILL);
		waitpid(stray, NULL, 0);
	}
}

/* ---------------------------------------------------------------- item 12 */

/* Ctrl-Z then fg, longer than the watchdog: the run goes on (and is then
 * interrupted on purpose, so the test does not wait for it to finish). */
Test(hostile_processes, suspend_longer_than_the_watchdog_does_not_fail_the_run, .timeout = 90)
{
	char dir[256], errpath[300];
	char *argv[] = { (char *)"kernbench", (char *)"run", (char *)"traffic", (char *)"--quiet",
			 (char *)"--out", dir, (char *)"--set", (char *)"run.watchdog_ms=2000",
			 (char *)"--arg", (char *)"components=4", (char *)"--arg",
			 (char *)"messages=400000000", NULL };
	pid_t pid, kids[16];
	char *err;
	int n;

	kb_tmpdir(dir, sizeof(dir), "suspend");
	snprintf(errpath, sizeof(errpath), "%s/launcher.stderr", dir);
	kb_adopt_orphans();
	pid = kbh_spawn(argv, errpath, -1, 0, true);
	cr_assert_geq(kbh_wait_children(pid, 4), 4);
	usleep(500000);
	/* Ctrl-Z reaches the processes in no particular order: here the
	 * daemons first, so the launcher is stopped while it waits for them */
	n = kb_children(pid, kids, 16);
	for (int i = 0; i < n; i++)
		kill(kids[i], SIGSTOP);
	usleep(300000);
	kill(pid, SIGSTOP);
	sleep(5);
	/* fg: the launcher may well run before its daemons do */
	kill(pid, SIGCONT);
	usleep(700000);
	kill(-pid, SIGCONT);
	sleep(3);
	err = kbh_stderr(errpath);
	cr_expect_eq(waitpid(pid, NULL, WNOHANG), 0, "the run ended after the suspend: %s", err);
	free(err);
	kill(pid, SIGINT);
	cr_expect_eq(kb_wait(pid), 130);
	err = kbh_stderr(errpath);
	cr_expect_null(strstr(err, "did not answer"), "the watchdog counted the suspend: %s", err);
	free(err);
	expect_nothing_left(pid);
}

/* One daemon runs the whole job in one window: the watchdog must measure
 * "no event executed", not window length (daemons send heartbeats). */
Test(hostile_processes, colocate_all_run_longer_than_the_watchdog_completes, .timeout = 120)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "long-window");
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--colocate", "all", "--set",
	       "run.watchdog_ms=600", "--arg", "components=4", "--arg", "messages=300000", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect_gt(kb_summary_u64(dir, "messages"), 0);
}
