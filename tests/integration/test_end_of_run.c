/* test_end_of_run.c — a run that cannot finish is an error, and
 * statistics reach summary.json whatever their names (typed end-of-run
 * reports in BYE). The kernels are compiled here, against the public
 * headers, and run through real daemons. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Line numbers matter: the error lines name them. */
static const char kernels[] =
	"#include \"tl.h\"\n"                                                   /* 1 */
	"#include \"tl_io.h\"\n"                                                /* 2 */
	"int ring(struct tl *tl, const struct tl_args *args)\n"                /* 3 */
	"{\n"                                                                   /* 4 */
	"\t(void)args;\n"                                                       /* 5 */
	"\ttl_future f = tl_recv_async(tl, TL_LEFT, 16, 16, TL_F16);\n"        /* 6 */
	"\ttl_tensor t = tl_wait(tl, f);\n"                                     /* 7 */
	"\ttl_send(tl, TL_RIGHT, t);\n"                                         /* 8 */
	"\treturn 0;\n"                                                         /* 9 */
	"}\n"                                                                   /* 10 */
	"int one_side(struct tl *tl, const struct tl_args *args)\n"            /* 11 */
	"{\n"                                                                   /* 12 */
	"\t(void)args;\n"                                                       /* 13 */
	"\tif (tl_rank(tl) == 0)\n"                                             /* 14 */
	"\t\ttl_wait(tl, tl_recv_async(tl, TL_RIGHT, 8, 8, TL_F32));\n"        /* 15 */
	"\treturn 0;\n"                                                         /* 16 */
	"}\n"                                                                   /* 17 */
	"int unwaited(struct tl *tl, const struct tl_args *args)\n"            /* 18 */
	"{\n"                                                                   /* 19 */
	"\t(void)args;\n"                                                       /* 20 */
	"\ttl_recv_async(tl, TL_LEFT, 4, 4, TL_F16);\n"                         /* 21 */
	"\treturn 0;\n"                                                         /* 22 */
	"}\n"                                                                   /* 23 */
	"int stats(struct tl *tl, const struct tl_args *args)\n"               /* 24 */
	"{\n"                                                                   /* 25 */
	"\tchar name[32];\n"                                                    /* 26 */
	"\tconst char *bad = tl_arg_str(args, \"bad\", \"\");\n"                /* 27 */
	"\ttl_stat_add(tl, \"bytes moved\", 7);\n"                              /* 28 */
	"\ttl_stat_max(tl, \"say \\\"hi\\\" \\\\ back\", 3);\n"                 /* 29 */
	"\tfor (int i = 0; i < 100; i++) {\n"                                   /* 30 */
	"\t\tsnprintf(name, sizeof(name), \"s%03d\", i);\n"                     /* 31 */
	"\t\ttl_stat_add(tl, name, (unsigned)i);\n"                             /* 32 */
	"\t}\n"                                                                 /* 33 */
	"\tif (bad[0] == 'n')\n"                                                /* 34 */
	"\t\ttl_stat_add(tl, \"two\\nlines\", 1);\n"                            /* 35 */
	"\tif (bad[0] == 'l')\n"                                                /* 36 */
	"\t\ttl_stat_add(tl, \"x01234567890123456789012345678901234567890123456789"
	"012345678901234567890123456789012345678901234567890123456789012345678901"
	"23456789\", 1);\n"                                                     /* 37 */
	"\treturn 0;\n"                                                         /* 38 */
	"}\n"                                                                   /* 39 */
	"int late_fail(struct tl *tl, const struct tl_args *args)\n"           /* 40 */
	"{\n"                                                                   /* 41 */
	"\t(void)args;\n"                                                       /* 42 */
	"\tfor (int i = 0; i < 20; i++)\n"                                      /* 43 */
	"\t\ttl_full(tl, 16, 16, TL_F16, 1.0);\n"                               /* 44 */
	"\ttl_fail(tl, \"clock %llu\", (unsigned long long)tl_now_ps(tl));\n"  /* 45 */
	"}\n"                                                                   /* 46 */
	"int after_scope(struct tl *tl, const struct tl_args *args)\n"         /* 47 */
	"{\n"                                                                   /* 48 */
	"\ttl_tensor t;\n"                                                      /* 49 */
	"\t(void)args;\n"                                                       /* 50 */
	"\ttl_scratch_scope_begin(tl);\n"                                       /* 51 */
	"\tt = tl_full(tl, 4, 4, TL_F16, 1.0);\n"                               /* 52 */
	"\ttl_scratch_scope_end(tl);\n"                                         /* 53 */
	"\ttl_scale(tl, t, 2.0);\n"                                             /* 54 */
	"\treturn 0;\n"                                                         /* 55 */
	"}\n"                                                                   /* 56 */
	"int one_load(struct tl *tl, const struct tl_args *args)\n"            /* 57 */
	"{\n"                                                                   /* 58 */
	"\ttl_future f;\n"                                                      /* 59 */
	"\t(void)args;\n"                                                       /* 60 */
	"\tf = tl_load_async(tl, 0, 16, 16, TL_F16);\n"                         /* 61 */
	"\ttl_wait(tl, f);\n"                                                   /* 62 */
	"\treturn 0;\n"                                                         /* 63 */
	"}\n"                                                                   /* 64 */
	"int mixed(struct tl *tl, const struct tl_args *args)\n"               /* 65 */
	"{\n"                                                                   /* 66 */
	"\t(void)args;\n"                                                       /* 67 */
	"\ttl_stat_add(tl, \"x\", 1);\n"                                        /* 68 */
	"\ttl_stat_max(tl, \"x\", 1);\n"                                        /* 69 */
	"\treturn 0;\n"                                                         /* 70 */
	"}\n";


/* Builds the kernels once per test (each test has its own directory). */
static void build(char *dir, size_t dir_cap, char *so, size_t so_cap)
{
	static char source[sizeof(kernels) + 64];

	kb_tmpdir(dir, dir_cap, "endrun");
	/* stdio after the numbered lines would shift nothing: put it first on
	 * line 1 together with tl.h */
	snprintf(source, sizeof(source), "#include <stdio.h>\n%s", kernels);
	kb_build_kernel(dir, "k", source, so, so_cap);
}

/* The kernel file's line n (the stdio include shifts by one). */
static void at_line(char *buf, size_t cap, int n)
{
	snprintf(buf, cap, "k.c:%d", n + 1);
}

static void run_kernel(struct kb_result *r, const char *so, const char *kernel, const char *dir,
		       const char *ranks, const char *extra1, const char *extra2)
{
	char target[700], out[600];

	snprintf(target, sizeof(target), "%s:%s", so, kernel);
	snprintf(out, sizeof(out), "%s/out", dir);
	kb_run(r, "run", target, "--quiet", "--pes", "1", "--ranks", ranks, "--out", out, extra1,
	       extra2, NULL);
}

static void expect_no_summary(const char *dir)
{
	char path[700];
	char *json;

	snprintf(path, sizeof(path), "%s/out/summary.json", dir);
	json = kb_slurp(path, NULL);
	cr_expect_null(json, "a failed run left %s", path);
	free(json);
}

Test(end_of_run, ring_deadlock_of_two_ranks_names_each_blocked_wait, .timeout = 60)
{
	char dir[256], so[600], wait_at[32], posted_at[32], want[400];
	struct kb_result r;

	build(dir, sizeof(dir), so, sizeof(so));
	kb_adopt_orphans();
	run_kernel(&r, so, "ring", dir, "2", NULL, NULL);
	cr_assert_eq(r.status, 1, "a deadlocked ring must fail (exit %d): %s", r.status, r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "one line expected:\n%s", r.err);
	at_line(wait_at, sizeof(wait_at), 7);
	at_line(posted_at, sizeof(posted_at), 6);
	for (int rank = 0; rank < 2; rank++) {
		snprintf(want, sizeof(want), "r%d.pe0.host: kernel ring did not finish: blocked at "
			 "%s (kernel clock", rank, wait_at);
		cr_expect(strstr(r.err, want), "missing \"%s\" in: %s", want, r.err);
		snprintf(want, sizeof(want), "IPCQ receive posted at %s from the left neighbour "
			 "(rank %d)", posted_at, 1 - rank);
		cr_expect(strstr(r.err, want), "missing \"%s\" in: %s", want, r.err);
	}
	cr_expect_null(strstr(r.out, "latency"), "no report for a failed run: %s", r.out);
	expect_no_summary(dir);
	cr_expect_eq(kb_leftover_daemons(), 0);
}

Test(end_of_run, kernel_waiting_on_itself_fails, .timeout = 60)
{
	char dir[256], so[600];
	struct kb_result r;

	build(dir, sizeof(dir), so, sizeof(so));
	/* one rank: its left neighbour is itself, and it never sends */
	run_kernel(&r, so, "ring", dir, "1", NULL, NULL);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "from the left neighbour (rank 0: itself)"), "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
}

Test(end_of_run, only_the_blocked_rank_is_named, .timeout = 60)
{
	char dir[256], so[600], want[200];
	struct kb_result r;

	build(dir, sizeof(dir), so, sizeof(so));
	run_kernel(&r, so, "one_side", dir, "2", NULL, NULL);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	at_line(want, sizeof(want), 15);
	cr_expect(strstr(r.err, "r0.pe0.host: kernel one_side did not finish"), "%s", r.err);
	cr_expect(strstr(r.err, want), "no %s in: %s", want, r.err);
	cr_expect(strstr(r.err, "from the right neighbour (rank 1)"), "%s", r.err);
	cr_expect_null(strstr(r.err, "r1.pe0.host"), "rank 1 finished: %s", r.err);
}

Test(end_of_run, receive_never_waited_for_blocks_the_kernel_return, .timeout = 60)
{
	char dir[256], so[600], want[200];
	struct kb_result r;

	build(dir, sizeof(dir), so, sizeof(so));
	run_kernel(&r, so, "unwaited", dir, "2", NULL, NULL);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	at_line(want, sizeof(want), 21);
	cr_expect(strstr(r.err, "blocked at its return (waiting for its commands to drain)"), "%s",
		  r.err);
	cr_expect(strstr(r.err, want), "no %s in: %s", want, r.err);
}

/* The same deadlock, the same line, whatever the transport and colocation
 * (tcp, one daemon for everything; a kernel object never runs in daemon
 * threads: ADR 0037). */
Test(end_of_run, deadlock_line_is_the_same_across_deployments, .timeout = 90)
{
	char dir[256], so[600], first[4096];
	struct kb_result r;

	build(dir, sizeof(dir), so, sizeof(so));
	run_kernel(&r, so, "ring", dir, "2", NULL, NULL);
	cr_assert_eq(r.status, 1, "%s", r.err);
	snprintf(first, sizeof(first), "%s", r.err);
	run_kernel(&r, so, "ring", dir, "2", "--transport", "tcp");
	cr_expect_eq(r.status, 1, "%s", r.err);
	cr_expect_str_eq(r.err, first);
	run_kernel(&r, so, "ring", dir, "2", "--colocate", "all");
	cr_expect_eq(r.status, 1, "%s", r.err);
	cr_expect_str_eq(r.err, first);
}

/* An engine whose stage never ends (test hook: its daemon's timers never
 * fire) leaves the engine holding the stage, the scheduler the command and
 * the kernel blocked: one line names all three. */
Test(end_of_run, engine_and_scheduler_holding_work_are_named_with_the_kernel, .timeout = 60)
{
	char dir[256], so[600], want[200];
	struct kb_result r;

	build(dir, sizeof(dir), so, sizeof(so));
	setenv("KB_FAULT", "freeze@r0.pe0.dma", 1);
	run_kernel(&r, so, "one_load", dir, "1", NULL, NULL);
	unsetenv("KB_FAULT");
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
	at_line(want, sizeof(want), 62);
	cr_expect(strstr(r.err, "r0.pe0.host: kernel one_load did not finish: blocked at"), "%s",
		  r.err);
	cr_expect(strstr(r.err, want), "no %s in: %s", want, r.err);
	at_line(want, sizeof(want), 61);
	cr_expect(strstr(r.err, "waiting for DMA command 1 issued at"), "%s", r.err);
	cr_expect(strstr(r.err, want), "no %s in: %s", want, r.err);
	cr_expect(strstr(r.err, "r0.pe0.sched: scheduler did not finish: it holds 1 command(s); "
			  "the oldest, command 1, is running with 0 of 1 stages done"), "%s", r.err);
	cr_expect(strstr(r.err, "r0.pe0.dma: engine dma_read did not finish: it holds 1 stage(s); "
			  "the first is stage 0 of command 1 (dma_read)"), "%s", r.err);
	cr_expect_eq(kb_leftover_daemons(), 0);
}

/* ---------------------------------------------------------------- statistics */

Test(end_of_run, statistics_with_any_printable_name_reach_valid_json, .timeout = 60)
{
	char dir[256], so[600], path[700], want[64];
	struct kb_result r;
	size_t bad_at = 0;
	char *json;

	build(dir, sizeof(dir), so, sizeof(so));
	run_kernel(&r, so, "stats", dir, "1", NULL, NULL);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	snprintf(path, sizeof(path), "%s/out/summary.json", dir);
	json = kb_slurp(path, NULL);
	cr_assert_not_null(json);
	cr_expect(kb_json_valid(json, &bad_at), "summary.json is not JSON at byte %zu: %.60s",
		  bad_at, json + bad_at);
	cr_expect(strstr(json, "\"bytes moved\": 7"), "%s", json);
	cr_expect(strstr(json, "\"say \\\"hi\\\" \\\\ back\": 3"), "%s", json);
	/* no silent limit on how many: all 100 (plus the runtime's own) */
	for (int i = 0; i < 100; i++) {
		snprintf(want, sizeof(want), "\"s%03d\": %d", i, i);
		cr_expect(strstr(json, want), "missing %s", want);
	}
	free(json);
}

/* Runs `stats` with --arg bad=BAD: one line at kernel line `line` that
 * contains `phrase`, and no outputs. */
static void expect_bad_stat(const char *bad, int line, const char *phrase)
{
	char dir[256], so[600], want[200], arg[64];
	struct kb_result r;

	build(dir, sizeof(dir), so, sizeof(so));
	snprintf(arg, sizeof(arg), "bad=%s", bad);
	run_kernel(&r, so, "stats", dir, "1", "--arg", arg);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	at_line(want, sizeof(want), line);
	cr_expect(strstr(r.err, want), "no %s in: %s", want, r.err);
	cr_expect(strstr(r.err, phrase), "no \"%s\" in: %s", phrase, r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
	expect_no_summary(dir);
}

Test(end_of_run, statistic_name_with_a_newline_fails_at_the_call_site, .timeout = 60)
{
	expect_bad_stat("newline", 35, "tl_stat_add: statistic name \"two\\x0alines\" has a "
			"non-printable byte 0x0a");
}

/* The runtime's own check (any component): one statistic both summed and
 * maxed is an error naming the component, not a silently merged value. */
Test(end_of_run, statistic_both_summed_and_maxed_fails_the_run, .timeout = 60)
{
	char dir[256], so[600];
	struct kb_result r;

	build(dir, sizeof(dir), so, sizeof(so));
	run_kernel(&r, so, "mixed", dir, "1", NULL, NULL);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "r0.pe0.host at "), "%s", r.err);
	cr_expect(strstr(r.err, "statistic \"x\" is both summed and maxed"), "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
	expect_no_summary(dir);
}

Test(end_of_run, overlong_statistic_name_fails_at_the_call_site, .timeout = 60)
{
	expect_bad_stat("long", 37, "is longer than 128 bytes");
}

/* ---------------------------------------------------------------- error lines */

/* An error names the time on the kernel's clock (which runs ahead of the
 * host's event time with every dispatch), not the event that resumed it. */
Test(end_of_run, kernel_error_names_the_kernel_clock, .timeout = 60)
{
	char dir[256], so[600], want[64];
	unsigned long long named = 0, clock = 0;
	struct kb_result r;
	const char *at;

	build(dir, sizeof(dir), so, sizeof(so));
	run_kernel(&r, so, "late_fail", dir, "1", NULL, NULL);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	at_line(want, sizeof(want), 45);
	cr_expect(strstr(r.err, want), "no %s in: %s", want, r.err);
	at = strstr(r.err, "r0.pe0.host at ");
	cr_assert_not_null(at, "%s", r.err);
	cr_assert_eq(sscanf(at, "r0.pe0.host at %llu ps", &named), 1, "%s", r.err);
	at = strstr(r.err, ": clock ");
	cr_assert_not_null(at, "%s", r.err);
	cr_assert_eq(sscanf(at, ": clock %llu", &clock), 1, "%s", r.err);
	cr_expect_gt(clock, 0, "20 dispatches cost time: %s", r.err);
	cr_expect_eq(named, clock, "the line names %llu ps, the kernel's clock is %llu ps", named,
		     clock);
}

Test(end_of_run, use_after_scope_says_how_to_fix_it, .timeout = 60)
{
	char dir[256], so[600], want[64];
	struct kb_result r;

	build(dir, sizeof(dir), so, sizeof(so));
	run_kernel(&r, so, "after_scope", dir, "1", NULL, NULL);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	at_line(want, sizeof(want), 54);
	cr_expect(strstr(r.err, want), "no %s in: %s", want, r.err);
	cr_expect(strstr(r.err, "used after that scope ended"), "%s", r.err);
	cr_expect(strstr(r.err, "allocate it before the scope begins to keep it, or tl_copy_to a "
			  "persistent tensor before tl_scratch_scope_end"), "%s", r.err);
	cr_expect_eq(kb_count_lines(r.err), 1, "%s", r.err);
}

/* ---------------------------------------------------------------- harness */

/* The summary reader finds a key at its own level only, and a missing key
 * is absent (kb_json_u64 / kb_summary_u64 then fail the test, never 0). */
Test(harness, json_lookup_is_by_level_and_missing_keys_are_absent, .timeout = 5)
{
	const char *json = "{\n  \"a\": 1,\n  \"s\": \"x\\\": 9\",\n  \"totals\": {\n"
			   "    \"x\": 2,\n    \"a\": 3\n  },\n  \"list\": [1, {\"x\": 4}],\n"
			   "  \"z\": 5\n}\n";
	char v[32];

	cr_assert(kb_json_valid(json, NULL));
	cr_expect(kb_json_field(json, "a", v, sizeof(v)) && !strcmp(v, "1"), "%s", v);
	cr_expect(kb_json_field(json, "totals.a", v, sizeof(v)) && !strcmp(v, "3"), "%s", v);
	cr_expect(kb_json_field(json, "totals.x", v, sizeof(v)) && !strcmp(v, "2"), "%s", v);
	cr_expect(kb_json_field(json, "z", v, sizeof(v)) && !strcmp(v, "5"), "%s", v);
	cr_expect_not(kb_json_field(json, "x", v, sizeof(v)), "x is only nested");
	cr_expect_not(kb_json_field(json, "missing", v, sizeof(v)));
	cr_expect_not(kb_json_field(json, "totals.missing", v, sizeof(v)));
	cr_expect_not(kb_json_valid("{\"a\": 1,}", NULL), "trailing comma");
	cr_expect_not(kb_json_valid("{\"a\": \"tab\there\"}", NULL), "raw control byte");
	cr_expect_not(kb_json_valid("{\"a\": \"q\"\"}", NULL), "unescaped quote");
}
