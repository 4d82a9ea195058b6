/* test_sweep.c — issue 22 item 1: `kernbench sweep` over real runs: the
 * grid and zipped lists, ranges, a sweep file, results.csv against points
 * run by hand, resume, a repeated point run once, a failed point as a row,
 * usage errors before anything runs, and the same sweep split over tasks
 * (Slurm's job-array variables, and OpenMPI's mpirun) giving the same
 * folders and rows. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* One results.csv, split into rows of fields (quotes undone). */
struct csv {
	char *text;
	char *cells[64][80];
	int rows, cols;
};

static void csv_load(struct csv *c, const char *dir)
{
	char path[600], *p;
	int r = 0, f = 0;

	snprintf(path, sizeof(path), "%s/results.csv", dir);
	c->text = kb_slurp(path, NULL);
	cr_assert_not_null(c->text, "no %s", path);
	p = c->text;
	c->cells[0][0] = p;
	for (char *w = p; *p && r < 64; p++) {
		if (*p == '"') {
			for (p++; *p && !(*p == '"' && p[1] != '"'); p++)
				*w++ = *p == '"' ? *++p : *p;
			continue;
		}
		if (*p == ',' || *p == '\n') {
			bool eol = *p == '\n';

			*w = '\0';
			if (eol) {
				if (!r)
					c->cols = f + 1;
				r++;
				f = 0;
			} else if (f < 79) {
				f++;
			}
			w = p + 1;
			c->cells[r][f] = w;
			continue;
		}
		*w++ = *p;
	}
	c->rows = r - 1; /* without the header */
}

static int col(const struct csv *c, const char *name)
{
	for (int i = 0; i < c->cols; i++)
		if (!strcmp(c->cells[0][i], name))
			return i;
	cr_assert_fail("results.csv has no column %s", name);
	return -1;
}

static const char *at(const struct csv *c, int row, const char *name)
{
	return c->cells[row + 1][col(c, name)];
}

static int count_dirs(const char *dir)
{
	char path[600];
	DIR *d;
	struct dirent *e;
	int n = 0;

	snprintf(path, sizeof(path), "%s/points", dir);
	d = opendir(path);
	cr_assert_not_null(d, "no %s", path);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.' && !strstr(e->d_name, ".log");
	closedir(d);
	return n;
}

static const char *const gemm_axes[] = { "sweep", "gemm", "--set", "dma.bytes_per_cycle=32,64",
					 "--arg", "m=64:128:64", "--arg", "k=96", "--jobs", "2",
					 NULL };

static void run_sweep(struct kb_result *r, const char *const base[], const char *out,
		      const char *extra)
{
	char *argv[40];
	int n = 0;

	argv[n++] = (char *)"kernbench";
	for (int i = 0; base[i]; i++)
		argv[n++] = (char *)base[i];
	argv[n++] = (char *)"--out";
	argv[n++] = (char *)out;
	if (extra)
		argv[n++] = (char *)extra;
	argv[n] = NULL;
	kb_runv(r, argv);
}

/* Each row is the run of its point: the latency and digest of the same
 * options run by hand, one daemon per component. */
Test(sweep, grid_rows_match_points_run_by_hand, .timeout = 240)
{
	char dir[256], out[300], one[400], bpc[64], m[32];
	struct kb_result r;
	struct csv c;

	kb_tmpdir(dir, sizeof(dir), "sweep-grid");
	snprintf(out, sizeof(out), "%s/sw", dir);
	run_sweep(&r, gemm_axes, out, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	csv_load(&c, out);
	cr_assert_eq(c.rows, 4);
	cr_expect_eq(count_dirs(out), 4);
	for (int i = 0; i < 4; i++) {
		const char *row_m = at(&c, i, "m"), *row_b = at(&c, i, "dma.bytes_per_cycle");
		char *digest;

		/* the grid: the first axis varies slowest */
		cr_expect_str_eq(row_b, i < 2 ? "32" : "64");
		cr_expect_str_eq(row_m, i % 2 ? "128" : "64");
		cr_expect_str_eq(at(&c, i, "status"), "ok");
		snprintf(one, sizeof(one), "%s/one%d", dir, i);
		snprintf(bpc, sizeof(bpc), "dma.bytes_per_cycle=%s", row_b);
		snprintf(m, sizeof(m), "m=%s", row_m);
		kb_run_ok(one, (const char *const[]){ "gemm", "--set", bpc, "--arg", m, "--arg",
						      "k=96", NULL });
		cr_expect_eq(strtoull(at(&c, i, "latency_ps"), NULL, 10),
			     kb_summary_u64(one, "latency_ps"), "row %d", i);
		digest = kb_summary_field(one, "delivery_digest");
		cr_expect(strstr(digest, at(&c, i, "delivery_digest")), "row %d: %s vs %s", i,
			  digest, at(&c, i, "delivery_digest"));
		free(digest);
		cr_expect(strtod(at(&c, i, "wall_s"), NULL) >= 0);
		cr_expect(at(&c, i, "energy.total_fj")[0] && at(&c, i, "busy_util.gemm")[0]);
	}
	free(c.text);
	snprintf(one, sizeof(one), "%s/sweep.png", out);
	cr_expect(access(one, R_OK) == 0, "no sweep.png");
}

/* Run again, the sweep resumes: nothing runs, the rows are the same
 * bytes; a point whose folder was removed is the only one run again. */
Test(sweep, resumes_and_reruns_only_what_is_missing, .timeout = 240)
{
	char dir[256], out[300], path[700], *first, *second;
	struct kb_result r;
	struct csv c;

	kb_tmpdir(dir, sizeof(dir), "sweep-resume");
	snprintf(out, sizeof(out), "%s/sw", dir);
	run_sweep(&r, gemm_axes, out, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(path, sizeof(path), "%s/results.csv", out);
	first = kb_slurp(path, NULL);
	run_sweep(&r, gemm_axes, out, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.err, "0 run, 4 already done"), "%s", r.err);
	second = kb_slurp(path, NULL);
	cr_expect_str_eq(first, second, "results.csv changed on resume");
	csv_load(&c, out);
	snprintf(path, sizeof(path), "rm -rf %s/%s", out, at(&c, 2, "dir"));
	cr_assert_eq(system(path), 0);
	run_sweep(&r, gemm_axes, out, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.err, "1 run, 3 already done"), "%s", r.err);
	free(c.text);
	free(first);
	free(second);
}

/* --zip pairs the lists; two points with the same resolved configuration
 * share one folder and run once. */
Test(sweep, zip_and_a_repeated_point_runs_once, .timeout = 240)
{
	static const char *const zip[] = { "sweep", "gemm", "--zip", "--arg", "m=64,128,64",
					   "--arg", "n=32,32,32", "--arg", "k=64", NULL };
	char dir[256], out[300];
	struct kb_result r;
	struct csv c;

	kb_tmpdir(dir, sizeof(dir), "sweep-zip");
	snprintf(out, sizeof(out), "%s/sw", dir);
	run_sweep(&r, zip, out, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	csv_load(&c, out);
	cr_assert_eq(c.rows, 3);
	cr_expect_str_eq(at(&c, 1, "m"), "128");
	cr_expect_str_eq(at(&c, 2, "m"), "64");
	cr_expect_str_eq(at(&c, 0, "dir"), at(&c, 2, "dir"), "the same point, the same folder");
	cr_expect_str_eq(at(&c, 0, "latency_ps"), at(&c, 2, "latency_ps"));
	cr_expect_eq(count_dirs(out), 2);
	cr_expect(strstr(r.err, "2 run"), "%s", r.err);
	free(c.text);
	/* zipped lists of other lengths are a usage error */
	run_sweep(&r, (const char *const[]){ "sweep", "gemm", "--zip", "--arg", "m=64,128",
					     "--arg", "n=32,64,96", NULL }, out, NULL);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "same length") && kb_count_lines(r.err) == 1, "%s", r.err);
}

/* A point whose run fails is one row with its error line; the others run
 * and the sweep exits 1 at the end. */
Test(sweep, failed_point_is_a_row_and_the_sweep_goes_on, .timeout = 240)
{
	char dir[256], out[300];
	struct kb_result r;
	struct csv c;

	kb_tmpdir(dir, sizeof(dir), "sweep-fail");
	snprintf(out, sizeof(out), "%s/sw", dir);
	run_sweep(&r, (const char *const[]){ "sweep", "gemm", "--arg", "m=64,70000,128", NULL },
		  out, NULL);
	cr_expect_eq(r.status, 1, "%s", r.err);
	csv_load(&c, out);
	cr_assert_eq(c.rows, 3);
	cr_expect_str_eq(at(&c, 0, "status"), "ok");
	cr_expect_str_eq(at(&c, 1, "status"), "failed");
	cr_expect(strstr(at(&c, 1, "error"), "'m'") || strstr(at(&c, 1, "error"), "m="),
		  "error: %s", at(&c, 1, "error"));
	cr_expect_str_eq(at(&c, 1, "latency_ps"), "");
	cr_expect_str_eq(at(&c, 2, "status"), "ok");
	cr_expect(strstr(r.err, "1 failed"), "%s", r.err);
	free(c.text);
}

/* Usage errors are found before any point runs: exit 2, one line, no
 * points folder. */
Test(sweep, usage_errors_before_anything_runs, .timeout = 60)
{
	static const char *const bad[][8] = {
		{ "sweep", "gemm", "--set", "dma.nosuch=1,2", NULL },
		{ "sweep", "gemm", "--set", "dma.bytes_per_cycle=0,64", NULL },
		{ "sweep", "gemm", "--arg", "m=1:9:0", NULL },
		{ "sweep", "gemm", "--arg", "m=8:1:x2", NULL },
		{ "sweep", "gemmm", "--arg", "m=1,2", NULL },
		{ "sweep", "gemm", "--task", "3/3", NULL },
		{ "sweep", "gemm", "--hosts", "h.yaml", NULL },
		{ "sweep", "--arg", "m=1,2", NULL },
	};
	char dir[256], out[300], points[400];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "sweep-usage");
	snprintf(out, sizeof(out), "%s/sw", dir);
	snprintf(points, sizeof(points), "%s/points", out);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		run_sweep(&r, bad[i], out, NULL);
		cr_expect_eq(r.status, 2, "case %zu: exit %d: %s", i, r.status, r.err);
		cr_expect_eq(kb_count_lines(r.err), 1, "case %zu: %s", i, r.err);
		cr_expect(access(points, F_OK) != 0, "case %zu made %s", i, points);
	}
}

/* A sweep file gives the same points (the same folders) as the command
 * line; plain progress is lines, with points done and an ETA. */
Test(sweep, file_equals_command_line, .timeout = 240)
{
	char dir[256], out[300], file[300], path[700];
	struct kb_result r;
	struct csv a, b;
	FILE *f;

	kb_tmpdir(dir, sizeof(dir), "sweep-file");
	snprintf(file, sizeof(file), "%s/s.yaml", dir);
	f = fopen(file, "w");
	cr_assert_not_null(f);
	fputs("workload: gemm\nset:\n  dma.bytes_per_cycle: [32, 64]\narg:\n  m: \"64:128:64\"\n"
	      "  k: 96\noptions: [--jobs-are-not-run-options]\n", f);
	fclose(f);
	snprintf(out, sizeof(out), "%s/file", dir);
	run_sweep(&r, (const char *const[]){ "sweep", "--file", file, NULL }, out, NULL);
	cr_expect_eq(r.status, 2, "an unknown run option is a usage error: %s", r.err);
	cr_expect(strstr(r.err, "--jobs-are-not-run-options") && kb_count_lines(r.err) == 1, "%s",
		  r.err);
	f = fopen(file, "w");
	fputs("workload: gemm\nset:\n  dma.bytes_per_cycle: [32, 64]\narg:\n  m: \"64:128:64\"\n"
	      "  k: 96\nobjectives: [latency_ps, energy.total_fj]\n", f);
	fclose(f);
	run_sweep(&r, (const char *const[]){ "sweep", "--file", file, "--progress", "plain", NULL },
		  out, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.err, "points done") && strstr(r.err, "ETA"), "%s", r.err);
	snprintf(path, sizeof(path), "%s/cli", dir);
	run_sweep(&r, gemm_axes, path, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	csv_load(&a, out);
	csv_load(&b, path);
	cr_assert_eq(a.rows, b.rows);
	for (int i = 0; i < a.rows; i++)
		cr_expect_str_eq(at(&a, i, "dir"), at(&b, i, "dir"), "row %d", i);
	free(a.text);
	free(b.text);
	snprintf(path, sizeof(path), "%s/sweep.json", out);
	a.text = kb_slurp(path, NULL);
	cr_expect(a.text && strstr(a.text, "\"objectives\": [\"latency_ps\", \"energy.total_fj\"]"),
		  "%s", a.text);
	free(a.text);
}

/* The rows of a sweep without wall_s: what tasks must agree on. */
static char *rows_without_wall(const char *dir)
{
	struct csv c;
	char *out = calloc(1, 65536);
	size_t n = 0;

	csv_load(&c, dir);
	for (int i = 0; out && i < c.rows; i++)
		for (int k = 0; k < c.cols; k++)
			if (strcmp(c.cells[0][k], "wall_s") && n < 65000)
				n += (size_t)snprintf(out + n, 65536 - n, "%s%c", c.cells[i + 1][k],
						      k + 1 < c.cols ? ',' : '\n');
	free(c.text);
	return out;
}

/* Slurm job array: each task (SLURM_ARRAY_TASK_ID of _COUNT) runs its
 * share into the same folders through the recipe deploy/slurm/
 * kernbench-sweep.sbatch (run with bash, the variables as sbatch sets
 * them); the task that sees every point done writes results.csv, whose
 * rows are the local sweep's. */
Test(sweep, slurm_array_tasks_share_the_points, .timeout = 300)
{
	char dir[256], local[300], arr[300], *want, *got;
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "sweep-slurm");
	snprintf(local, sizeof(local), "%s/local", dir);
	snprintf(arr, sizeof(arr), "%s/array", dir);
	run_sweep(&r, gemm_axes, local, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	setenv("SLURM_ARRAY_TASK_COUNT", "3", 1);
	setenv("SLURM_ARRAY_TASK_MIN", "5", 1);
	setenv("KERNBENCH", kb_bin(), 1);
	for (int t = 0; t < 3; t++) {
		char id[8], path[400], cmd[2400];
		size_t n;

		snprintf(id, sizeof(id), "%d", 5 + t);
		setenv("SLURM_ARRAY_TASK_ID", id, 1);
		n = (size_t)snprintf(cmd, sizeof(cmd), "bash %s/deploy/slurm/kernbench-sweep.sbatch",
				     getenv("KB_ROOT"));
		for (int i = 1; gemm_axes[i]; i++)
			n += (size_t)snprintf(cmd + n, sizeof(cmd) - n, " %s", gemm_axes[i]);
		snprintf(cmd + n, sizeof(cmd) - n, " --out %s 2>%s/task%d.err", arr, dir, t);
		cr_assert_eq(system(cmd), 0, "task %d: %s", t, cmd);
		snprintf(path, sizeof(path), "%s/results.csv", arr);
		cr_expect_eq(access(path, F_OK) == 0, t == 2, "task %d: results.csv %s", t,
			     t == 2 ? "missing" : "written early");
	}
	unsetenv("SLURM_ARRAY_TASK_ID");
	cr_expect_eq(count_dirs(arr), 4);
	want = rows_without_wall(local);
	got = rows_without_wall(arr);
	cr_expect_str_eq(got, want);
	free(want);
	free(got);
}

/* OpenMPI's mpirun starts one sweep per rank (OMPI_COMM_WORLD_RANK/SIZE):
 * the same points, the same folders, one results.csv. */
Test(sweep, mpirun_ranks_share_the_points, .timeout = 300)
{
	char dir[256], local[300], mpi[300], errpath[400], *want, *got;
	char *argv[40];
	struct kb_result r;
	int n = 0, rc;
	pid_t pid;

	cr_assert_eq(system("command -v mpirun >/dev/null 2>&1"), 0,
		     "mpirun is not on PATH: run `make deps` (installs openmpi-bin)");
	kb_tmpdir(dir, sizeof(dir), "sweep-mpi");
	snprintf(local, sizeof(local), "%s/local", dir);
	snprintf(mpi, sizeof(mpi), "%s/mpi", dir);
	snprintf(errpath, sizeof(errpath), "%s/mpirun.err", dir);
	run_sweep(&r, gemm_axes, local, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	argv[n++] = (char *)"mpirun";
	argv[n++] = (char *)"--allow-run-as-root";
	argv[n++] = (char *)"--oversubscribe";
	argv[n++] = (char *)"-np";
	argv[n++] = (char *)"2";
	argv[n++] = (char *)kb_bin();
	for (int i = 0; gemm_axes[i]; i++)
		argv[n++] = (char *)gemm_axes[i];
	argv[n++] = (char *)"--task";
	argv[n++] = (char *)"auto";
	argv[n++] = (char *)"--out";
	argv[n++] = mpi;
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		freopen(errpath, "w", stderr);
		execvp("mpirun", argv);
		_exit(127);
	}
	rc = kb_wait(pid);
	cr_assert_eq(rc, 0, "mpirun exited %d: %s", rc, kb_slurp(errpath, NULL));
	cr_expect_eq(count_dirs(mpi), 4);
	/* whichever rank finished last wrote it; a plain rerun gathers too */
	run_sweep(&r, gemm_axes, mpi, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.err, "0 run, 4 already done"), "%s", r.err);
	want = rows_without_wall(local);
	got = rows_without_wall(mpi);
	cr_expect_str_eq(got, want);
	free(want);
	free(got);
}

/* --progress plain writes lines, not a redrawn bar, and says when the run
 * is done; off and --quiet write none. (The lines in between come every
 * few seconds of a long run: wall time is not asserted.) */
Test(progress, plain_lines_off_and_quiet, .timeout = 120)
{
	char dir[256], out[300], want[64];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "progress");
	snprintf(out, sizeof(out), "%s/p", dir);
	kb_run(&r, "run", "gemm", "--arg", "m=256", "--out", out, "--progress", "plain", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(want, sizeof(want), "kernbench: progress: done, %llu window",
		 (unsigned long long)kb_summary_u64(out, "windows"));
	cr_expect(strstr(r.err, want), "no '%s' in: %s", want, r.err);
	cr_expect_null(strchr(r.err, '\r'), "a bar in a log: %s", r.err);
	kb_run(&r, "run", "gemm", "--out", out, "--progress", "off", NULL);
	cr_expect_eq(r.status, 0);
	cr_expect_null(strstr(r.err, "progress"), "%s", r.err);
	kb_run(&r, "run", "gemm", "--out", out, "--progress", "plain", "--quiet", NULL);
	cr_expect_eq(r.status, 0);
	cr_expect_str_eq(r.err, "");
	kb_run(&r, "run", "gemm", "--out", out, "--progress", "sometimes", NULL);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "expected auto, bar, plain or off"), "%s", r.err);
}

/* --machine LIST is an axis of machine presets: each row is the preset's
 * run (its PE count, its energy prices), in the machine column. */
Test(sweep, machine_presets_are_an_axis, .timeout = 240)
{
	static const char *const axes[] = { "sweep", "gemm", "--machine", "trn2,tpu_v5e",
					    "--arg", "m=64", NULL };
	char dir[256], out[300], one[400];
	struct kb_result r;
	struct csv c;

	kb_tmpdir(dir, sizeof(dir), "sweep-machine");
	snprintf(out, sizeof(out), "%s/sw", dir);
	run_sweep(&r, axes, out, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	csv_load(&c, out);
	cr_assert_eq(c.rows, 2);
	for (int i = 0; i < 2; i++) {
		const char *m = at(&c, i, "machine");

		cr_expect_str_eq(m, i ? "tpu_v5e" : "trn2");
		snprintf(one, sizeof(one), "%s/one%d", dir, i);
		kb_run_ok(one, (const char *const[]){ "gemm", "--machine", m, "--arg", "m=64", NULL });
		cr_expect_eq(strtoull(at(&c, i, "pes"), NULL, 10), kb_summary_u64(one, "pes"));
		cr_expect_eq(strtoull(at(&c, i, "energy.total_fj"), NULL, 10),
			     kb_summary_u64(one, "energy.total_fj"), "row %d", i);
	}
	cr_expect_str_neq(at(&c, 0, "pes"), at(&c, 1, "pes"));
	free(c.text);
}

/* Issue 19 item 2 for the sweep: nothing outside OUT. A link planted at
 * OUT/points, at a point's log or at results.csv, sweep.json or
 * sweep.png is never followed: the sweep refuses the first (exit 2) and
 * replaces the others with its own files; the victim keeps its bytes. */
Test(sweep, planted_links_are_never_followed, .timeout = 240)
{
	static const char *const outs[] = { "results.csv", "sweep.json", "sweep.png" };
	static const char *const two[] = { "sweep", "gemm", "--arg", "m=64,128", "--arg", "k=96",
					   "--jobs", "2", NULL };
	char dir[256], out[300], victim[300], vdir[300], path[700], log[1000];
	struct kb_result r;
	struct stat st;
	struct dirent *e;
	DIR *d;
	char *text;
	FILE *f;

	kb_tmpdir(dir, sizeof(dir), "sweep-links");
	snprintf(out, sizeof(out), "%s/sw", dir);
	snprintf(victim, sizeof(victim), "%s/victim.txt", dir);
	snprintf(vdir, sizeof(vdir), "%s/victim-dir", dir);
	f = fopen(victim, "w");
	cr_assert_not_null(f);
	fputs("precious\n", f);
	fclose(f);
	cr_assert_eq(mkdir(vdir, 0755), 0);
	cr_assert_eq(mkdir(out, 0755), 0);

	/* OUT/points a link to another folder: refused before anything runs */
	snprintf(path, sizeof(path), "%s/points", out);
	cr_assert_eq(symlink(vdir, path), 0);
	run_sweep(&r, two, out, NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "points") && strstr(r.err, "link"), "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
	d = opendir(vdir);
	cr_assert_not_null(d);
	while ((e = readdir(d)))
		cr_expect(e->d_name[0] == '.', "%s written into the linked folder", e->d_name);
	closedir(d);
	cr_assert_eq(unlink(path), 0);

	/* the sweep's own files links to the victim */
	for (size_t i = 0; i < sizeof(outs) / sizeof(outs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", out, outs[i]);
		cr_assert_eq(symlink(victim, path), 0);
	}
	run_sweep(&r, two, out, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	for (size_t i = 0; i < sizeof(outs) / sizeof(outs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", out, outs[i]);
		cr_expect(!lstat(path, &st) && S_ISREG(st.st_mode), "%s is not the sweep's own file",
			  outs[i]);
	}
	text = kb_slurp(victim, NULL);
	cr_expect_str_eq(text ? text : "", "precious\n", "the victim was written through a link");
	free(text);

	/* a point's log a link: the point runs again (its folder removed)
	 * into a fresh log, the victim untouched */
	snprintf(path, sizeof(path), "%s/points", out);
	d = opendir(path);
	cr_assert_not_null(d);
	log[0] = '\0';
	while ((e = readdir(d)))
		if (strstr(e->d_name, ".log") && !log[0])
			snprintf(log, sizeof(log), "%s/%s", path, e->d_name);
	closedir(d);
	cr_assert(log[0], "no point log in %s", path);
	snprintf(path, sizeof(path), "rm -rf '%.*s'", (int)(strlen(log) - 4), log);
	cr_assert_eq(system(path), 0);
	cr_assert_eq(unlink(log), 0);
	cr_assert_eq(symlink(victim, log), 0);
	run_sweep(&r, two, out, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(!lstat(log, &st) && S_ISREG(st.st_mode), "%s is not a fresh log", log);
	text = kb_slurp(victim, NULL);
	cr_expect_str_eq(text ? text : "", "precious\n", "the victim was written through a link");
	free(text);
}
