/* test_colocate.c — grouping changes no result (ADR 0005, ADR 0017):
 * messages between components of one daemon are in-process copies, never
 * packed, and a run must still be byte-identical to one where every
 * message crossed a socket. Data-mode
 * ring attention (IPCQ bytes between ranks) and the pipelined GEMM
 * plug-in kernel (DMA, GEMM and scheduler traffic inside a PE) run with
 * a daemon per component, per PE, per rank and one for all, over inproc
 * (tcp for the plug-in kernel, ADR 0037) and ipc; every output file, the delivery digest and the simulation's
 * part of summary.json must equal the reference's. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define MAX_ARGV 40

/* Runs `kernbench run` with `args` (NULL-ended) plus the placement. */
static void run_placed(const char *dir, const char *const *args, const char *colocate,
		       const char *transport)
{
	const char *argv[MAX_ARGV];
	struct kb_result r;
	size_t n = 0;

	argv[n++] = "kernbench";
	argv[n++] = "run";
	for (; *args && n < MAX_ARGV - 13; args++)
		argv[n++] = *args;
	argv[n++] = "--quiet";
	argv[n++] = "--trace";
	argv[n++] = "on";
	argv[n++] = "--colocate";
	argv[n++] = colocate;
	argv[n++] = "--transport";
	argv[n++] = transport;
	argv[n++] = "--out";
	argv[n++] = dir;
	argv[n] = NULL;
	kb_runv(&r, (char *const *)argv);
	cr_assert_eq(r.status, 0, "%s --colocate %s --transport %s failed: %s", args[0] ? args[0] : "",
		     colocate, transport, r.err);
}

static char *summary_of(const char *dir)
{
	char path[600];
	char *s;

	snprintf(path, sizeof(path), "%s/summary.json", dir);
	s = kb_slurp(path, NULL);
	cr_assert_not_null(s, "no %s", path);
	return s;
}

/* Every file of `ref` but summary.json is in `dir`, byte for byte; the
 * summaries agree above "transport" (the run-dependent keys). Returns how
 * many files were compared. */
static int compare_outputs(const char *ref, const char *dir, const char *what)
{
	DIR *d = opendir(ref);
	struct dirent *e;
	char a[700], b[700];
	char *sr = summary_of(ref), *sd = summary_of(dir), *cut = strstr(sr, "\"transport\"");
	int files = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || !strcmp(e->d_name, "summary.json"))
			continue;
		snprintf(a, sizeof(a), "%s/%s", ref, e->d_name);
		snprintf(b, sizeof(b), "%s/%s", dir, e->d_name);
		cr_expect(kb_same_file(a, b), "%s: %s differs from the reference", what, e->d_name);
		files++;
	}
	closedir(d);
	cr_assert_not_null(cut);
	cr_expect_eq(strncmp(sr, sd, (size_t)(cut - sr)), 0,
		     "%s: summary.json differs above \"transport\"", what);
	cr_expect(strstr(sr, "\"delivery_digest\"") && strstr(sr, "\"delivery_digest\"") < cut,
		  "the delivery digest is part of the compared summary");
	free(sd);
	free(sr);
	return files;
}

/* The reference has a daemon per component over ipc: every message packed
 * and unpacked. Every other placement must give the same bytes. */
static void check_all_placements(const char *tag, const char *const *args, int min_files)
{
	static const char *const colocations[] = { "none", "pe", "rank", "all" };
	/* a kernel object never runs in daemon threads (ADR 0037): tcp then */
	const char *const transports[] = { strchr(args[0], ':') ? "tcp" : "inproc", "ipc" };
	char base[256], ref[400], dir[400], what[128];

	kb_tmpdir(base, sizeof(base), tag);
	snprintf(ref, sizeof(ref), "%s/ref", base);
	run_placed(ref, args, "none", "ipc");
	for (size_t c = 0; c < sizeof(colocations) / sizeof(colocations[0]); c++)
		for (size_t t = 0; t < sizeof(transports) / sizeof(transports[0]); t++) {
			if (!strcmp(colocations[c], "none") && !strcmp(transports[t], "ipc"))
				continue;
			snprintf(dir, sizeof(dir), "%s/%s-%s", base, colocations[c], transports[t]);
			snprintf(what, sizeof(what), "%s --colocate %s --transport %s", tag,
				 colocations[c], transports[t]);
			run_placed(dir, args, colocations[c], transports[t]);
			cr_assert_geq(compare_outputs(ref, dir, what), min_files,
				      "%s: too few output files compared", what);
		}
}

Test(colocate, ring_attention_data_mode_identical_in_every_grouping, .timeout = 240)
{
	static const char *const pass_q[] = { "ring_attention", "--mode", "data", "--ranks", "2",
					      "--pes", "2", "--arg", "heads_q=4", "--arg",
					      "heads_kv=2", "--arg", "head_dim=32", "--arg", "tile=32",
					      "--arg", "seq_kv=64", "--arg", "pass=q", NULL };
	static const char *const pass_kv[] = { "ring_attention", "--mode", "data", "--ranks", "2",
					       "--pes", "2", "--arg", "heads_q=4", "--arg",
					       "heads_kv=2", "--arg", "head_dim=32", "--arg",
					       "tile=32", "--arg", "seq_kv=32", "--arg", "seq_q=32",
					       "--arg", "pass=kv", "--seed", "3", NULL };

	/* o.npy, op_log.jsonl, trace.json and the inputs */
	check_all_placements("coloc-ring-q", pass_q, 4);
	check_all_placements("coloc-ring-kv", pass_kv, 4);
}

Test(colocate, pipelined_gemm_data_mode_identical_in_every_grouping, .timeout = 240)
{
	const char *plugins = getenv("KB_PLUGINS");
	char so[600];
	const char *args[] = { so, "--mode", "data", "--pes", "2", "--arg", "m=256", "--arg",
			       "k=128", "--arg", "n=256", NULL };

	cr_assert(plugins, "KB_PLUGINS unset: run through `make integration`");
	snprintf(so, sizeof(so), "%s/gemm_pingpong.so:gemm_pingpong", plugins);
	/* c.npy, op_log.jsonl, trace.json and the inputs */
	check_all_placements("coloc-gemm-pp", args, 4);
}

/* A message bigger than the daemon's 8 MiB decoding arena (a 12 MiB IPCQ
 * tile): an in-process copy has no size limit, so a decoded one must not
 * either, or a daemon per component would fail where one daemon succeeds. */
Test(colocate, message_bigger_than_the_decode_arena_in_every_grouping, .timeout = 240)
{
	const char *plugins = getenv("KB_PLUGINS");
	char so[600];
	const char *args[] = { so, "--mode", "data", "--ranks", "2", "--pes", "1", "--set",
			       "memory.tcm_scratch_bytes=33554432", "--arg", "rows=2048", "--arg",
			       "cols=3072", NULL };
	static const char *const colocations[] = { "none", "rank", "all" };
	char base[256], dir[400], ref[400];

	cr_assert(plugins, "KB_PLUGINS unset: run through `make integration`");
	snprintf(so, sizeof(so), "%s/ipcq_probe.so:ipcq_probe", plugins);
	kb_tmpdir(base, sizeof(base), "coloc-big");
	snprintf(ref, sizeof(ref), "%s/ref", base);
	run_placed(ref, args, "all", "tcp"); /* one daemon; a kernel object never in a thread */
	for (size_t c = 0; c < sizeof(colocations) / sizeof(colocations[0]); c++) {
		snprintf(dir, sizeof(dir), "%s/%s", base, colocations[c]);
		run_placed(dir, args, colocations[c], "ipc");
		compare_outputs(ref, dir, colocations[c]);
	}
}

/* `traffic --ranks R` splits its components over R ranks: each rank a
 * daemon under --colocate rank, the deliveries those of one rank. */
Test(colocate, traffic_spread_over_ranks_delivers_the_same, .timeout = 60)
{
	char base[256], one[300], three[300];
	struct kb_result r;
	char *a, *b;

	kb_tmpdir(base, sizeof(base), "traffic_ranks");
	snprintf(one, sizeof(one), "%s/one", base);
	snprintf(three, sizeof(three), "%s/three", base);
	kb_run(&r, "run", "traffic", "--arg", "components=7", "--quiet", "--out", one, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	kb_run(&r, "run", "traffic", "--arg", "components=7", "--ranks", "3", "--colocate", "rank",
	       "--quiet", "--out", three, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	a = kb_summary_field(one, "delivery_digest");
	b = kb_summary_field(three, "delivery_digest");
	cr_expect_str_eq(a, b);
	cr_expect_eq(kb_summary_u64(three, "daemons"), 3);
	free(a);
	free(b);
	/* fewer components than ranks: one each, the last rank empty */
	kb_run(&r, "run", "traffic", "--arg", "components=2", "--ranks", "3", "--colocate", "rank",
	       "--quiet", "--out", three, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(kb_summary_u64(three, "daemons"), 2);
}
