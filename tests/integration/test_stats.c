/* test_stats.c — issue 22 items 2 and 3: per-instance statistics with
 * their declared units (stats.csv, summary.json "instances"), the kernel
 * host's call sites, and energy priced from the op counts, checked against
 * a hand computation from the shapes the test chose. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* One parsed stats.csv row. */
struct row {
	char rank[256], pe[256], component[256], kind[256], stat[256], unit[256], desc[256];
	unsigned long long value;
};

/* Splits one RFC 4180 line into at most `max` fields (quotes undone). */
static int csv_split(const char *line, char fields[][256], int max)
{
	int n = 0;
	size_t k = 0;
	bool quoted = false;

	fields[0][0] = '\0';
	for (const char *p = line; *p && *p != '\n'; p++) {
		if (quoted && *p == '"' && p[1] == '"') {
			fields[n][k++] = '"';
			p++;
		} else if (*p == '"') {
			quoted = !quoted;
		} else if (*p == ',' && !quoted) {
			fields[n][k] = '\0';
			if (++n == max)
				return n;
			k = 0;
		} else if (k < 255) {
			fields[n][k++] = *p;
		}
	}
	fields[n][k] = '\0';
	return n + 1;
}

/* Reads DIR/stats.csv; the test fails on a malformed one. Caller frees. */
static struct row *read_stats(const char *dir, size_t *n_out)
{
	char path[600], f[9][256];
	char *text, *line, *save = NULL;
	struct row *rows;
	size_t n = 0;

	snprintf(path, sizeof(path), "%s/stats.csv", dir);
	text = kb_slurp(path, NULL);
	cr_assert_not_null(text, "no %s", path);
	rows = calloc((size_t)kb_count_lines(text) + 1, sizeof(*rows));
	line = strtok_r(text, "\n", &save);
	cr_assert_str_eq(line, "rank,pe,component,kind,statistic,value,unit,description");
	while ((line = strtok_r(NULL, "\n", &save))) {
		struct row *r = &rows[n++];

		cr_assert_eq(csv_split(line, f, 9), 8, "not 8 fields: %s", line);
		memcpy(r->rank, f[0], 256);
		memcpy(r->pe, f[1], 256);
		memcpy(r->component, f[2], 256);
		memcpy(r->kind, f[3], 256);
		memcpy(r->stat, f[4], 256);
		r->value = strtoull(f[5], NULL, 10);
		memcpy(r->unit, f[6], 256);
		memcpy(r->desc, f[7], 256);
	}
	free(text);
	*n_out = n;
	return rows;
}

static unsigned long long sum_of(const struct row *rows, size_t n, const char *kind,
				 const char *stat)
{
	unsigned long long s = 0;

	for (size_t i = 0; i < n; i++)
		if ((!kind || !strcmp(rows[i].kind, kind)) && !strcmp(rows[i].stat, stat))
			s += rows[i].value;
	return s;
}

static bool has_component(const struct row *rows, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(rows[i].component, name))
			return true;
	return false;
}

/* Every component is listed; every statistic of the built-in components
 * has a unit and a description; each summed statistic summed over a
 * kind's instances is the kind's figure in summary.json. */
Test(stats, every_instance_with_units_and_per_kind_sums, .timeout = 120)
{
	char dir[256], out[300], key[700], v[64];
	const char *const run[] = { "gqa_decode_opt2", "--pes", "3", "--colocate", "pe",
				    "--arg", "seq_kv=512", "--arg", "heads_q=24", "--arg",
				    "heads_kv=3", "--arg", "head_dim=64", "--arg", "tile=64", NULL };
	struct row *rows;
	size_t n;
	char *summary;

	kb_tmpdir(dir, sizeof(dir), "stats");
	snprintf(out, sizeof(out), "%s/run", dir);
	kb_run_ok(out, run);
	rows = read_stats(out, &n);
	for (unsigned pe = 0; pe < 3; pe++)
		for (unsigned u = 0; u < 5; u++) {
			static const char *const units[] = { "host", "sched", "dma", "gemm", "math" };
			char name[64];

			snprintf(name, sizeof(name), "r0.pe%u.%s", pe, units[u]);
			cr_expect(has_component(rows, n, name), "no rows for %s", name);
		}
	snprintf(key, sizeof(key), "%s/summary.json", out);
	summary = kb_slurp(key, NULL);
	cr_assert_not_null(summary);
	for (size_t i = 0; i < n; i++) {
		cr_expect(rows[i].unit[0] && rows[i].desc[0], "%s %s has no unit or description",
			  rows[i].component, rows[i].stat);
		if (strchr(rows[i].stat, '@') || !strcmp(rows[i].stat, "last_ps") ||
		    !strcmp(rows[i].stat, "energy_fj") || strstr(rows[i].stat, "_end_ps") ||
		    strstr(rows[i].stat, "peak_"))
			continue; /* per call site, maxed, or not a by_kind figure */
		snprintf(key, sizeof(key), "by_kind.%s.%s", rows[i].kind, rows[i].stat);
		cr_assert(kb_json_field(summary, key, v, sizeof(v)), "summary has no %s", key);
		cr_expect_eq(strtoull(v, NULL, 10), sum_of(rows, n, rows[i].kind, rows[i].stat),
			     "%s: summary %s, instances sum to %llu", key, v,
			     sum_of(rows, n, rows[i].kind, rows[i].stat));
	}
	/* the same values in summary.json's instances */
	cr_expect(strstr(summary, "\"r0.pe2.gemm\": {\"rank\": 0, \"pe\": 2, \"kind\": \"gemm\""),
		  "no instances entry for r0.pe2.gemm");
	cr_expect(strstr(summary, "\"busy_ps\": {\"unit\": \"ps\""), "no stat_info for busy_ps");
	free(summary);
	free(rows);
}

/* The kernel host itemises dispatch cycles and waiting by call site: the
 * sites add up to the host's totals, and each names a source line. */
Test(stats, kernel_host_by_call_site_adds_up, .timeout = 120)
{
	char dir[256], out[300];
	const char *const run[] = { "gqa_prefill", "--pes", "2", "--colocate", "all", "--arg",
				    "seq_q=128", "--arg", "seq_kv=256", "--arg", "heads_q=4",
				    "--arg", "heads_kv=2", "--arg", "head_dim=64", "--arg",
				    "tile=64", NULL };
	struct row *rows;
	size_t n;

	kb_tmpdir(dir, sizeof(dir), "stats-sites");
	snprintf(out, sizeof(out), "%s/run", dir);
	kb_run_ok(out, run);
	rows = read_stats(out, &n);
	for (unsigned pe = 0; pe < 2; pe++) {
		char host[32];
		unsigned long long disp = 0, wait = 0, disp_sites = 0, wait_sites = 0;
		int sites = 0;

		snprintf(host, sizeof(host), "r0.pe%u.host", pe);
		for (size_t i = 0; i < n; i++) {
			if (strcmp(rows[i].component, host))
				continue;
			if (!strcmp(rows[i].stat, "dispatch_cycles"))
				disp = rows[i].value;
			else if (!strcmp(rows[i].stat, "wait_ps"))
				wait = rows[i].value;
			else if (!strncmp(rows[i].stat, "dispatch_cycles@", 16))
				disp_sites += rows[i].value, sites++;
			else if (!strncmp(rows[i].stat, "wait_ps@", 8))
				wait_sites += rows[i].value;
			if (strchr(rows[i].stat, '@'))
				cr_expect(strstr(rows[i].stat, ".c:") ||
					  strstr(rows[i].stat, "(return)"),
					  "site without a line: %s", rows[i].stat);
		}
		cr_expect_gt(sites, 1, "%s: %d dispatch sites", host, sites);
		cr_expect_gt(disp, 0);
		cr_expect_eq(disp_sites, disp, "%s: sites %llu, total %llu", host, disp_sites, disp);
		cr_expect_eq(wait_sites, wait, "%s: sites %llu, total %llu", host, wait_sites, wait);
	}
	free(rows);
}

/* stats.csv and the deterministic part of summary.json (instances and
 * energy included) are byte-identical across groupings and transports. */
Test(stats, same_bytes_across_groupings, .timeout = 180)
{
	static const char *const modes[][4] = {
		{ "--colocate", "none", "--transport", "ipc" },
		{ "--colocate", "pe", "--transport", "inproc" },
		{ "--colocate", "all", "--transport", "inproc" },
	};
	char dir[256], out[3][300], csv[3][1000], path[3][1000];
	char *text[3];

	kb_tmpdir(dir, sizeof(dir), "stats-group");
	for (int i = 0; i < 3; i++) {
		const char *run[] = { "ring_attention", "--ranks", "2", "--pes", "2", modes[i][0],
				      modes[i][1], modes[i][2], modes[i][3], "--arg", "heads_q=8",
				      "--arg", "heads_kv=2", "--arg", "head_dim=64", "--arg",
				      "tile=64", "--arg", "seq_kv=128", "--arg", "seq_q=64", NULL };

		snprintf(out[i], sizeof(out[i]), "%s/g%d", dir, i);
		kb_run_ok(out[i], run);
		snprintf(csv[i], sizeof(csv[i]), "%s/stats.csv", out[i]);
		if (i)
			cr_expect(kb_same_file(csv[0], csv[i]), "stats.csv differs with %s %s",
				  modes[i][1], modes[i][3]);
		snprintf(path[i], sizeof(path[i]), "%s/summary.json", out[i]);
		text[i] = kb_slurp(path[i], NULL);
		cr_assert_not_null(text[i]);
		*strstr(text[i], "  \"transport\"") = '\0';
		if (i)
			cr_expect_str_eq(text[0], text[i], "summary.json differs with %s %s",
					 modes[i][1], modes[i][3]);
	}
	for (int i = 0; i < 3; i++)
		free(text[i]);
}

/* ---------------------------------------------------------------- energy */

/* Every energy.* price at 0 but those in `keep` ("key=value" each). */
static void energy_sets(const char **argv, int *n, const char *const keep[])
{
	static const char *const keys[] = {
		"mac_f16_fj", "mac_bf16_fj", "mac_f32_fj", "math_op_fj", "math_exp_fj",
		"tcm_read_fj_per_byte", "tcm_write_fj_per_byte", "hbm_fj_per_byte",
		"link_fj_per_byte", "gemm_static_uw", "math_static_uw", "dma_static_uw",
		"cpu_static_uw",
	};
	static char sets[16][80];

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *value = "0";

		for (int k = 0; keep[k]; k += 2)
			if (!strcmp(keep[k], keys[i]))
				value = keep[k + 1];
		snprintf(sets[i], sizeof(sets[i]), "energy.%s=%s", keys[i], value);
		argv[(*n)++] = "--set";
		argv[(*n)++] = sets[i];
	}
}

/* A one-tile GEMM (m, n, k within the 128-element tiles): the engines do
 * m*n*k f16 MACs, read A and B from HBM once and write the f32 C once. */
Test(energy, gemm_macs_and_hbm_bytes_priced_by_hand, .timeout = 120)
{
	const unsigned m = 48, k = 112, n = 80;
	const unsigned long long mac = 1234, hbm = 5678;
	const char *const keep[] = { "mac_f16_fj", "1234", "hbm_fj_per_byte", "5678", NULL };
	char dir[256], out[300];
	const char *argv[64] = { "gemm", "--arg", "m=48", "--arg", "k=112", "--arg", "n=80",
				 "--pes", "1" };
	int argc = 9;
	unsigned long long want_mac = (unsigned long long)m * n * k * mac;
	unsigned long long want_hbm = (2ull * m * k + 2ull * k * n + 4ull * m * n) * hbm;

	energy_sets(argv, &argc, keep);
	argv[argc] = NULL;
	kb_tmpdir(dir, sizeof(dir), "energy-gemm");
	snprintf(out, sizeof(out), "%s/run", dir);
	kb_run_ok(out, argv);
	cr_expect_eq(kb_summary_u64(out, "energy.by_action.mac"), want_mac);
	cr_expect_eq(kb_summary_u64(out, "energy.by_action.hbm"), want_hbm);
	cr_expect_eq(kb_summary_u64(out, "energy.by_action.static"), 0);
	cr_expect_eq(kb_summary_u64(out, "energy.total_fj"), want_mac + want_hbm);
	cr_expect_eq(kb_summary_u64(out, "energy.by_kind.gemm"), want_mac);
	cr_expect_eq(kb_summary_u64(out, "energy.by_kind.dma"), want_hbm);
}

/* Static power: each engine instance burns its power over the simulated
 * time (uW x ps / 1000 = fJ, rounded down per instance). */
Test(energy, static_power_over_the_simulated_time, .timeout = 120)
{
	const char *const keep[] = { "gemm_static_uw", "1000003", "math_static_uw", "7",
				     "dma_static_uw", "300001", "cpu_static_uw", "4999", NULL };
	const unsigned long long uw[] = { 1000003, 7, 300001, 4999 };
	char dir[256], out[300];
	const char *argv[64] = { "softmax", "--pes", "3", "--colocate", "all" };
	int argc = 5;
	unsigned long long sim, want = 0;

	energy_sets(argv, &argc, keep);
	argv[argc] = NULL;
	kb_tmpdir(dir, sizeof(dir), "energy-static");
	snprintf(out, sizeof(out), "%s/run", dir);
	kb_run_ok(out, argv);
	sim = kb_summary_u64(out, "sim_time_ps");
	cr_assert_gt(sim, 0);
	for (int i = 0; i < 4; i++)
		want += 3 * (uw[i] * sim / 1000);
	cr_expect_eq(kb_summary_u64(out, "energy.total_fj"), want);
	cr_expect_eq(kb_summary_u64(out, "energy.by_action.static"), want);
	cr_expect_eq(kb_summary_u64(out, "energy.by_kind.gemm"), 3 * (uw[0] * sim / 1000));
}

/* IPCQ bytes: every PE of every rank sends one rows x cols f16 tile. */
Test(energy, link_bytes_priced_by_hand, .timeout = 120)
{
	const char *const keep[] = { "link_fj_per_byte", "777", NULL };
	char dir[256], out[300], so[600];
	const char *argv[64] = { so, "--ranks", "3", "--pes", "2", "--arg", "rows=16", "--arg",
				 "cols=40" };
	int argc = 9;

	snprintf(so, sizeof(so), "%s/ipcq_probe.so:ipcq_probe", getenv("KB_PLUGINS"));
	energy_sets(argv, &argc, keep);
	argv[argc] = NULL;
	kb_tmpdir(dir, sizeof(dir), "energy-link");
	snprintf(out, sizeof(out), "%s/run", dir);
	kb_run_ok(out, argv);
	cr_expect_eq(kb_summary_u64(out, "energy.total_fj"), 3ull * 2 * 16 * 40 * 2 * 777);
	cr_expect_eq(kb_summary_u64(out, "energy.by_action.link"), 3ull * 2 * 16 * 40 * 2 * 777);
}

/* Energy per token: decode computes one token (per sequence), prefill
 * seq_q; the figure is the total over the tokens. */
Test(energy, per_token_divides_by_the_tokens, .timeout = 120)
{
	char dir[256], out[300], v[400];
	const char *const run[] = { "gqa_prefill", "--pes", "2", "--colocate", "all", "--arg",
				    "seq_q=96", "--arg", "seq_kv=96", "--arg", "heads_q=4", "--arg",
				    "heads_kv=2", "--arg", "head_dim=64", "--arg", "tile=64", NULL };
	char *summary;
	unsigned long long total;

	kb_tmpdir(dir, sizeof(dir), "energy-token");
	snprintf(out, sizeof(out), "%s/run", dir);
	kb_run_ok(out, run);
	cr_expect_eq(kb_summary_u64(out, "energy.tokens"), 96);
	total = kb_summary_u64(out, "energy.total_fj");
	cr_assert_gt(total, 0);
	snprintf(v, sizeof(v), "%s/summary.json", out);
	summary = kb_slurp(v, NULL);
	cr_assert(kb_json_field(summary, "energy.per_token_fj", v, sizeof(v)));
	cr_expect(strtod(v, NULL) > (double)total / 96 - 0.1 &&
		  strtod(v, NULL) < (double)total / 96 + 0.1, "per token %s, total %llu", v, total);
	free(summary);
}

/* A kernel's own statistics carry the unit and description it gives
 * tl_stat_add / tl_stat_max (the three-argument form still compiles and
 * leaves them empty). */
Test(stats, kernel_statistics_carry_their_units, .timeout = 120)
{
	static const char src[] =
		"#include \"tl.h\"\n"
		"#include \"tl_io.h\"\n"
		"int k(struct tl *tl, const struct tl_args *args)\n"
		"{\n"
		"\t(void)args;\n"
		"\ttl_stat_add(tl, \"widgets\", 3, \"widgets\", \"widgets made, \\\"quoted\\\"\");\n"
		"\ttl_stat_add(tl, \"widgets\", 4);\n"
		"\ttl_stat_max(tl, \"deepest\", 9 + tl_program_id(tl), \"levels\", \"deepest level\");\n"
		"\ttl_stat_add(tl, \"plain\", 1);\n"
		"\treturn 0;\n"
		"}\n";
	char dir[256], so[600], work[700], out[300];
	const char *run[] = { work, "--pes", "2", NULL };
	struct row *rows;
	size_t n;
	int seen = 0;

	kb_tmpdir(dir, sizeof(dir), "stats-kernel");
	kb_build_kernel(dir, "units", src, so, sizeof(so));
	snprintf(work, sizeof(work), "%s:k", so);
	snprintf(out, sizeof(out), "%s/run", dir);
	kb_run_ok(out, run);
	rows = read_stats(out, &n);
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(rows[i].stat, "widgets")) {
			cr_expect_eq(rows[i].value, 7);
			cr_expect_str_eq(rows[i].unit, "widgets");
			cr_expect_str_eq(rows[i].desc, "widgets made, \"quoted\"");
			seen++;
		} else if (!strcmp(rows[i].stat, "deepest")) {
			cr_expect_str_eq(rows[i].unit, "levels");
			cr_expect_eq(rows[i].value, 9 + (unsigned long long)atoi(rows[i].pe));
			seen++;
		} else if (!strcmp(rows[i].stat, "plain")) {
			cr_expect_str_eq(rows[i].unit, "");
			seen++;
		}
	}
	cr_expect_eq(seen, 6, "rows for 3 statistics on 2 PEs: %d", seen);
	cr_expect_eq(kb_summary_u64(out, "by_kind.host.deepest"), 10);
	cr_expect_eq(kb_summary_u64(out, "totals.widgets"), 14);
	free(rows);
}
