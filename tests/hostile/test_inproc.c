/* test_inproc.c — daemon threads fail like daemon processes (issue 19
 * item 3, ADR 0037): --transport inproc refuses the shared objects it
 * cannot contain (kernels, model plug-ins: a crash, abort, _exit or a
 * constructor that never returns would take the launcher with it), and
 * what runs in threads (built-in kernels and models) that aborts, crashes
 * or overflows its stack ends in one line naming the daemon, a failure
 * status and nothing left behind. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../integration/harness.h"
#include "hostile.h"

static const char empty_kernel[] =
	"#include \"tl.h\"\n"
	"int k(struct tl *tl, const struct tl_args *args);\n"
	"int k(struct tl *tl, const struct tl_args *args) { (void)tl; (void)args; return 0; }\n";

/* Entries of `dir` other than . and .. and the folder's lock. */
static int leftovers(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		     strcmp(e->d_name, ".kernbench.lock");
	if (d)
		closedir(d);
	return n;
}

Test(inproc, refuses_kernel_objects_and_model_plugins_with_one_line, .timeout = 60)
{
	char dir[256], so[400], workload[500], out[300], plugin[600];
	const char *plugins = getenv("KB_PLUGINS");
	struct kb_result r;

	cr_assert(plugins, "KB_PLUGINS unset: run through `make integration`");
	kb_tmpdir(dir, sizeof(dir), "inproc-obj");
	kb_build_kernel(dir, "empty", empty_kernel, so, sizeof(so));
	snprintf(workload, sizeof(workload), "%s:k", so);
	snprintf(out, sizeof(out), "%s/out", dir);
	kb_run(&r, "run", workload, "--quiet", "--out", out, "--transport", "inproc", NULL);
	cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "--transport inproc") && strstr(r.err, so) &&
		  strstr(r.err, "--transport ipc"), "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
	cr_expect_neq(access(out, F_OK), 0, "a refused run touched its output folder");
	/* the same object runs as daemon processes */
	kb_run(&r, "run", workload, "--quiet", "--out", out, NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);

	snprintf(plugin, sizeof(plugin), "gemm.model=%s/gemm_fixed.so", plugins);
	kb_run(&r, "run", "gemm", "--quiet", "--out", out, "--transport", "inproc", "--set",
	       plugin, NULL);
	cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "gemm_fixed.so") && strstr(r.err, "--transport inproc"), "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
}

/* What runs in threads and dies of a signal: one line naming the daemon,
 * the signal's status, no staging folder, no process left. */
static void expect_named_death(const struct kb_result *r, const char *dir, const char *daemon,
			       int sig)
{
	cr_expect_eq(r->status, 128 + sig, "exit %d: %s", r->status, r->err);
	cr_expect(strstr(r->err, daemon) && strstr(r->err, "inproc thread") &&
		  strstr(r->err, "killed by signal"), "the line does not name %s: %s", daemon,
		  r->err);
	cr_expect_eq(kb_count_lines(r->err), 1, "%s", r->err);
	cr_expect_eq(leftovers(dir), 0, "the run left files in %s", dir);
	usleep(200000);
	cr_expect_eq(kb_leftover_daemons(), 0);
}

Test(inproc, an_abort_in_a_daemon_thread_is_one_line_and_leaves_nothing, .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "inproc-abort");
	kb_adopt_orphans();
	setenv("KB_FAULT", "crash@t001:3", 1);
	setenv("ASAN_OPTIONS", "handle_abort=0", 1);
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--transport", "inproc", "--arg",
	       "components=4", "--arg", "messages=2000", NULL);
	unsetenv("ASAN_OPTIONS");
	unsetenv("KB_FAULT");
	expect_named_death(&r, dir, "kb-traffic t001", SIGABRT);
}

Test(inproc, a_kernel_overflowing_its_stack_is_one_line_and_leaves_nothing, .timeout = 60)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "inproc-overflow");
	kb_adopt_orphans();
	setenv("ASAN_OPTIONS", "handle_segv=0", 1);
	kb_run(&r, "run", "test_overflow", "--quiet", "--pes", "2", "--out", dir, "--transport",
	       "inproc", NULL);
	expect_named_death(&r, dir, "kb-host r0.pe0.host", SIGSEGV);
	/* as a process: the same daemon named, exit 1 */
	kb_run(&r, "run", "test_overflow", "--quiet", "--pes", "2", "--out", dir, NULL);
	unsetenv("ASAN_OPTIONS");
	cr_expect_eq(r.status, 1, "%s", r.err);
	cr_expect(strstr(r.err, "kb-host r0.pe0.host") && strstr(r.err, "signal 11"), "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
}
