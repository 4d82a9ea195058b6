/* merge_bench.c — the launcher's memory against the size of what it merges.
 *
 * Runs the big case (ring_attention, 64 ranks x 8 PEs, a daemon per
 * rank, pass=q, 16K keys per rank) traced and untraced, and prints the
 * output size, the launcher's own peak RSS (the line KB_REPORT_RSS=1 makes
 * it print), the largest peak RSS of any process of the run (launcher
 * or daemon, from wait4) and launcher RSS / output size. Target (issue):
 * launcher peak < 256 MB; before the merge streamed it was ~0.7 x the
 * output (720 MB for 1.2 GB). Figures are printed, never asserted. Needs
 * KB_BIN (set by `make bench`). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static char ring[] = "ring_attention --ranks 64 --pes 8 --colocate rank --arg pass=q "
		    "--arg seq_kv=16384 --quiet --trace";

/* Bytes of the regular files in `dir` (the run's outputs). */
static unsigned long long dir_bytes(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned long long total = 0;
	char path[1024];
	struct stat st;

	while (d && (e = readdir(d))) {
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (e->d_name[0] != '.' && !stat(path, &st) && S_ISREG(st.st_mode))
			total += (unsigned long long)st.st_size;
	}
	if (d)
		closedir(d);
	return total;
}

/* The launcher's peak RSS in KB from its stderr (in `path`), 0 if absent. */
static unsigned long long launcher_kb(const char *path)
{
	char line[512];
	unsigned long long v = 0;
	FILE *f = fopen(path, "r");

	while (f && fgets(line, sizeof(line), f)) {
		const char *k = strstr(line, "launcher peak RSS ");

		if (k)
			v = strtoull(k + 18, NULL, 10);
	}
	if (f)
		fclose(f);
	return v;
}

/* Runs kernbench; the largest peak RSS of its processes into *max_kb. */
static int run(const char *bin, char *const argv[], const char *err_path, long *max_kb,
	       double *wall)
{
	struct rusage ru;
	double t0 = bench_now_s();
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		if (!freopen(err_path, "w", stderr))
			_exit(126);
		setenv("KB_REPORT_RSS", "1", 1);
		execv(bin, argv);
		_exit(127);
	}
	if (pid < 0 || wait4(pid, &status, 0, &ru) != pid)
		return -1;
	*wall = bench_now_s() - t0;
	*max_kb = ru.ru_maxrss;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int main(void)
{
	const char *bin = getenv("KB_BIN");
	char out[] = "/tmp/kb-merge-bench-XXXXXX", rm[64], err_path[64];
	static const char *const traces[] = { "off", "on" };
	int failed = 0;

	if (!bin) {
		fprintf(stderr, "merge_bench: set KB_BIN to the kernbench binary\n");
		return 1;
	}
	if (!mkdtemp(out)) {
		perror("merge_bench: mkdtemp");
		return 1;
	}
	snprintf(err_path, sizeof(err_path), "%s.stderr", out);
	printf("launcher memory, ring_attention 64 ranks x 8 PEs, --colocate rank, pass=q, "
	       "seq_kv=16384 (target: launcher < 256 MB)\n");
	for (int t = 0; t < 2; t++) {
		char words[sizeof(ring)], *argv[32], *save = NULL;
		int n = 0;
		unsigned long long bytes, lkb;
		long max_kb = 0;
		double wall = 0;
		int rc;

		argv[n++] = (char *)"kernbench";
		argv[n++] = (char *)"run";
		memcpy(words, ring, sizeof(ring));
		for (char *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save))
			argv[n++] = w;
		argv[n++] = (char *)traces[t];
		argv[n++] = (char *)"--out";
		argv[n++] = out;
		argv[n] = NULL;
		rc = run(bin, argv, err_path, &max_kb, &wall);

		if (rc) {
			fprintf(stderr, "merge_bench: run with --trace %s failed (status %d)\n",
				traces[t], rc);
			failed = 1;
			continue;
		}
		bytes = dir_bytes(out);
		lkb = launcher_kb(err_path);
		printf("  --trace %-3s output %7.1f MB, launcher peak %6.1f MB (%.3fx the output), "
		       "largest process %6.1f MB, wall %.1f s\n",
		       traces[t], (double)bytes / 1e6, (double)lkb / 1024.0,
		       bytes ? (double)lkb * 1024.0 / (double)bytes : 0.0, (double)max_kb / 1024.0,
		       wall);
	}
	unlink(err_path);
	snprintf(rm, sizeof(rm), "rm -rf %s", out);
	if (system(rm) != 0)
		fprintf(stderr, "merge_bench: could not remove %s\n", out);
	return failed;
}
