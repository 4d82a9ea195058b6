/* test_confinement.c — nothing outside the output folder is touched
 * (issue 19 item 2): tensor names are plain file names of the folder, and
 * the sweeps of what killed launchers and agents left in /tmp never follow
 * a link (one sweep, tidy.c, for both). */
#include <criterion/criterion.h>
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

/* A kernel saving one tensor under the name --arg name= gives. */
static const char save_source[] =
	"#include \"tl.h\"\n"
	"int save(struct tl *tl, const struct tl_args *args);\n"
	"int save(struct tl *tl, const struct tl_args *args)\n"
	"{\n"
	"	const char *name = tl_arg_str(args, \"name\", \"t.npy\");\n"
	"\n"
	"	if (tl_program_id(tl))\n"
	"		return 0;\n"
	"	tl_save_npy(tl, name, 0, 4, 4, TL_F32);\n"
	"	return 0;\n"
	"}\n";

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

static bool file_says(const char *path, const char *text)
{
	char *got = kb_slurp(path, NULL);
	bool same = got && !strcmp(got, text);

	free(got);
	return same;
}

Test(confinement, tensor_names_are_plain_file_names_of_the_output_folder, .timeout = 240)
{
	static const char *const bad[] = {
		"../victim.txt", "../../../../../../tmp/victim.txt", "sub/t.npy", "..", ".",
		"../.kernbench.lock", ".kernbench-results", ".parts", "a\nnotes.txt",
		"esc\x1b[31mred", "summary.json", "op_log.jsonl", "trace.json",
	};
	char dir[256], so[400], workload[500], out[300], victim[300], arg[300], notes[400];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "confine");
	kb_build_kernel(dir, "save", save_source, so, sizeof(so));
	snprintf(workload, sizeof(workload), "%s:save", so);
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(victim, sizeof(victim), "%s/victim.txt", dir);
	snprintf(notes, sizeof(notes), "%s/notes.txt", out);
	write_file(victim, "mine\n");
	mkdir(out, 0755);
	write_file(notes, "the user's\n");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(arg, sizeof(arg), "name=%s", bad[i]);
		kb_run(&r, "run", workload, "--quiet", "--pes", "1", "--mode", "data", "--out", out,
		       "--arg", arg, NULL);
		cr_expect_eq(r.status, 1, "name '%s': exit %d: %s", bad[i], r.status, r.err);
		cr_expect(strstr(r.err, "tl_save_npy") && strstr(r.err, "output file name"),
			  "name '%s': the line does not name the tensor: %s", bad[i], r.err);
		cr_expect_eq(kb_count_lines(r.err), 1, "name '%s': %s", bad[i], r.err);
		cr_expect_null(strchr(r.err, '\x1b'), "an escape byte reached the terminal: %s", r.err);
		cr_expect(file_says(victim, "mine\n"), "name '%s' touched %s", bad[i], victim);
		cr_expect(file_says(notes, "the user's\n"), "name '%s' touched %s", bad[i], notes);
	}
	/* a plain name is fine, and the next run still leaves notes.txt alone */
	kb_run(&r, "run", workload, "--quiet", "--pes", "1", "--mode", "data", "--out", out,
	       "--arg", "name=good.npy", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	kb_run(&r, "run", workload, "--quiet", "--pes", "1", "--mode", "data", "--out", out,
	       "--arg", "name=good.npy", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(file_says(notes, "the user's\n"), "a run removed the user's notes.txt");
}

/* A pid that is no longer running (a child that has exited). */
static pid_t dead_pid(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	return pid;
}

/* /tmp/PREFIX<dead pid>-XXXXXX with `.parts` a link to `victims`, and a
 * link to a victim file beside it: what a sweep must never follow. */
static void plant(const char *prefix, const char *victims, char *planted, size_t cap)
{
	char link[600], path[600];

	snprintf(planted, cap, "/tmp/%s%d-Xq7Zt1", prefix, (int)dead_pid());
	cr_assert_eq(mkdir(planted, 0700), 0, "%s: %s", planted, strerror(errno));
	kb_track_dir(planted);
	snprintf(link, sizeof(link), "%s/.parts", planted);
	cr_assert_eq(symlink(victims, link), 0);
	snprintf(link, sizeof(link), "%s/o.npy", planted);
	snprintf(path, sizeof(path), "%s/keep.txt", victims);
	cr_assert_eq(symlink(path, link), 0);
	snprintf(path, sizeof(path), "%s/stale.part", planted);
	write_file(path, "left by a killed run\n");
}

static void expect_victims_intact(const char *victims, const char *planted)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/keep.txt", victims);
	cr_expect(file_says(path, "keep\n"), "the sweep followed a link into %s", victims);
	snprintf(path, sizeof(path), "%s/other.bin", victims);
	cr_expect(file_says(path, "other\n"), "the sweep followed a link into %s", victims);
	cr_expect_neq(access(planted, F_OK), 0, "the dead run's folder %s was not swept", planted);
}

static void victims_dir(const char *base, char *victims, size_t cap)
{
	char path[600];

	snprintf(victims, cap, "%s/victims", base);
	cr_assert_eq(mkdir(victims, 0755), 0);
	snprintf(path, sizeof(path), "%s/keep.txt", victims);
	write_file(path, "keep\n");
	snprintf(path, sizeof(path), "%s/other.bin", victims);
	write_file(path, "other\n");
}

Test(confinement, an_agent_sweeping_dead_agents_folders_never_follows_links, .timeout = 60)
{
	char dir[256], victims[300], planted[128], err[300];
	char *argv[] = { (char *)kb_bin(), (char *)"agent", (char *)"--coordinator",
			 (char *)"tcp://127.0.0.1:9", (char *)"--index", (char *)"0", NULL };
	pid_t agent;

	kb_tmpdir(dir, sizeof(dir), "sweep-agent");
	victims_dir(dir, victims, sizeof(victims));
	plant("kb-agent-", victims, planted, sizeof(planted));
	snprintf(err, sizeof(err), "%s/agent.err", dir);
	agent = kb_spawn(argv, err);
	usleep(1500000); /* it sweeps first, then waits for its coordinator */
	kill(agent, SIGTERM);
	kb_wait(agent);
	expect_victims_intact(victims, planted);
}

Test(confinement, a_launcher_sweeping_dead_launchers_folders_never_follows_links, .timeout = 60)
{
	char dir[256], victims[300], planted[128], out[300];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "sweep-launcher");
	victims_dir(dir, victims, sizeof(victims));
	plant("kb-", victims, planted, sizeof(planted));
	snprintf(out, sizeof(out), "%s/out", dir);
	kb_run(&r, "run", "traffic", "--quiet", "--out", out, NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	expect_victims_intact(victims, planted);
}

/* Found by the hostile attack (issue 19): a FIFO nobody writes given as
 * the hosts or the keys file hung the run; a link planted as the staging
 * folder failed it with "File exists". */
Test(confinement, planted_fifos_and_a_staging_link_neither_hang_nor_fail_a_run, .timeout = 60)
{
	char dir[256], fifo[300], out[300], stage[400];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "planted");
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	kb_run(&r, "run", "gemm", "--quiet", "--out", dir, "--hosts", fifo, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
	kb_run(&r, "run", "gemm", "--quiet", "--out", dir, "--keys", fifo, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	kb_run(&r, "agent", "--coordinator", "tcp://10.0.0.1:5555", "--keys", fifo, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(stage, sizeof(stage), "%s/.kernbench-staging", out);
	cr_assert_eq(mkdir(out, 0755), 0);
	cr_assert_eq(symlink(dir, stage), 0);
	kb_run(&r, "run", "gemm", "--quiet", "--pes", "1", "--out", out, NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(access(fifo, F_OK), 0, "the run removed what the link pointed at");
}
