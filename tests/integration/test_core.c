/* test_core.c — the simulation core through real daemons: determinism
 * across transports and colocation, lockstep against a single-process
 * reference, outputs, and every failure behaviour of issue #2. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "harness.h"

static char *summary_of(const char *dir)
{
	char path[1100];

	snprintf(path, sizeof(path), "%s/summary.json", dir);
	return kb_slurp(path, NULL);
}

static void field(const char *json, const char *key, char *out, size_t cap)
{
	cr_assert(kb_json_field(json, key, out, cap), "summary has no \"%s\"", key);
}

static void run_traffic(const char *dir, const char *transport, const char *colocate,
			const char *components, const char *messages, const char *seed)
{
	struct kb_result r;
	char comp[64], msgs[64];

	snprintf(comp, sizeof(comp), "components=%s", components);
	snprintf(msgs, sizeof(msgs), "messages=%s", messages);
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--transport", transport, "--colocate",
	       colocate, "--seed", seed, "--arg", comp, "--arg", msgs, NULL);
	cr_assert_eq(r.status, 0, "traffic over %s/%s failed: %s", transport, colocate, r.err);
}

Test(core_determinism, traffic_identical_over_transports_colocation_and_reruns, .timeout = 120)
{
	static const char *const transports[] = { "inproc", "ipc", "tcp" };
	static const char *const colocations[] = { "none", "all" };
	char base[256], dir[512], ref_dir[512], digest[64], ref_digest[64], a[1100], b[1100];
	char *ref;

	kb_tmpdir(base, sizeof(base), "det");
	snprintf(ref_dir, sizeof(ref_dir), "%s/ref", base);
	run_traffic(ref_dir, "ipc", "none", "6", "4000", "7");
	ref = summary_of(ref_dir);
	field(ref, "delivery_digest", ref_digest, sizeof(ref_digest));
	cr_assert_eq(kb_json_u64(ref, "messages"), 4000 / (6 * 4) * 6 * 4);
	for (int t = 0; t < 3; t++)
		for (int c = 0; c < 2; c++) {
			char *s;

			snprintf(dir, sizeof(dir), "%s/%s-%s", base, transports[t], colocations[c]);
			run_traffic(dir, transports[t], colocations[c], "6", "4000", "7");
			s = summary_of(dir);
			field(s, "delivery_digest", digest, sizeof(digest));
			cr_expect_str_eq(digest, ref_digest, "%s/%s digest differs", transports[t],
					 colocations[c]);
			cr_expect_eq(kb_json_u64(s, "sim_time_ps"), kb_json_u64(ref, "sim_time_ps"));
			/* everything above "transport" is the simulation's, not the run's */
			cr_expect_eq(strstr(s, "\"transport\"") - s, strstr(ref, "\"transport\"") - ref);
			cr_expect_eq(memcmp(s, ref, (size_t)(strstr(ref, "\"transport\"") - ref)), 0,
				     "%s/%s summary.json differs above \"transport\"", transports[t],
				     colocations[c]);
			snprintf(a, sizeof(a), "%s/trace.json", ref_dir);
			snprintf(b, sizeof(b), "%s/trace.json", dir);
			cr_expect(kb_same_file(a, b), "%s/%s trace.json differs", transports[t],
				  colocations[c]);
			snprintf(a, sizeof(a), "%s/op_log.jsonl", ref_dir);
			snprintf(b, sizeof(b), "%s/op_log.jsonl", dir);
			cr_expect(kb_same_file(a, b), "%s/%s op_log.jsonl differs", transports[t],
				  colocations[c]);
			free(s);
		}
	free(ref);
}

/* The single-process reference is the embedded mode: one daemon, inproc,
 * no windows at all; the multi-process run needs hundreds of windows. */
Test(core_lockstep, multi_process_delivers_what_single_process_reference_delivers, .timeout = 240)
{
	char base[256], multi[512], single[512], d1[64], d2[64];

	kb_tmpdir(base, sizeof(base), "lockstep");
	for (int seed = 1; seed <= 12; seed++) {
		char comp[16], msgs[16], seed_text[16];
		char *sm, *ss;

		snprintf(comp, sizeof(comp), "%d", 2 + seed % 7);
		snprintf(msgs, sizeof(msgs), "%d", 200 * seed);
		snprintf(seed_text, sizeof(seed_text), "%d", seed * 7919);
		snprintf(multi, sizeof(multi), "%s/multi-%d", base, seed);
		snprintf(single, sizeof(single), "%s/single-%d", base, seed);
		run_traffic(multi, "ipc", "none", comp, msgs, seed_text);
		run_traffic(single, "inproc", "all", comp, msgs, seed_text);
		sm = summary_of(multi);
		ss = summary_of(single);
		field(sm, "delivery_digest", d1, sizeof(d1));
		field(ss, "delivery_digest", d2, sizeof(d2));
		cr_expect_str_eq(d1, d2, "seed %d: lockstep run diverged from the reference", seed);
		cr_expect_gt(kb_json_u64(sm, "windows"), 1, "seed %d ran without windows", seed);
		cr_expect_eq(kb_json_u64(ss, "windows"), 1);
		cr_expect_eq(kb_json_u64(sm, "messages"), kb_json_u64(ss, "messages"));
		free(sm);
		free(ss);
	}
}

Test(core_outputs, summary_and_trace_have_required_content, .timeout = 60)
{
	char dir[256], path[600], v[64];
	char *s, *trace;
	size_t flows_s = 0, flows_f = 0;
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "outputs");
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--trace-windows", "--arg",
	       "components=3", "--arg", "messages=120", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	s = summary_of(dir);
	for (const char *const *k = (const char *const[]){ "sim_time_ps", "windows", "messages",
							    "wall_s", "merge_s", "delivery_digest", NULL };
	     *k; k++)
		field(s, *k, v, sizeof(v));
	{ /* wall_s is the whole run: the windows and the merge after them
	   * (each rounded: wall_s and merge_s to 1 ms) */
		char w[64], m[64], ww[64];

		field(s, "wall_s", w, sizeof(w));
		field(s, "merge_s", m, sizeof(m));
		field(s, "windows_wall_s", ww, sizeof(ww));
		/* a small run's merge may round to 0 ms: only its presence and
		 * sign are the test's (no wall-clock asserts) */
		cr_expect_geq(strtod(m, NULL), 0.0, "merge_s %s is negative", m);
		cr_expect_geq(strtod(w, NULL) + 0.0011, strtod(m, NULL) + strtod(ww, NULL),
			      "wall_s %s does not cover windows_wall_s %s + merge_s %s", w, ww, m);
	}
	snprintf(path, sizeof(path), "%s/trace.json", dir);
	trace = kb_slurp(path, NULL);
	cr_assert(trace);
	cr_expect(strstr(trace, "\"traceEvents\""));
	cr_expect(strstr(trace, "\"thread_name\""), "no track names");
	cr_expect(strstr(trace, "\"ph\":\"C\""), "no window counters");
	for (const char *p = trace; (p = strstr(p, "\"ph\":\"s\"")); p++)
		flows_s++;
	for (const char *p = trace; (p = strstr(p, "\"ph\":\"f\"")); p++)
		flows_f++;
	cr_expect_eq(flows_s, kb_json_u64(s, "messages"), "one flow start per message");
	cr_expect_eq(flows_f, kb_json_u64(s, "messages"), "one flow end per message");
	free(trace);
	free(s);
}

/* ---------------------------------------------------------------- failures */

/* Daemons a launcher failed to reap would be re-parented to us (we adopt
 * orphans), so "nothing left" is checked without counting other runs. */
static void expect_clean(pid_t launcher)
{
	usleep(300000);
	cr_expect_eq(kb_leftover_daemons(), 0, "kb- processes left behind");
	cr_expect_eq(kb_leftover_socket_dirs(launcher), 0, "socket directory left behind");
}

static void expect_fault(const char *fault, const char *needle, const char *watchdog)
{
	char dir[256];
	struct kb_result r;

	kb_tmpdir(dir, sizeof(dir), "fault");
	kb_adopt_orphans();
	setenv("KB_FAULT", fault, 1);
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--set", watchdog, "--arg",
	       "components=4", "--arg", "messages=400000", NULL);
	unsetenv("KB_FAULT");
	cr_expect_eq(r.status, 1, "fault %s: exit %d", fault, r.status);
	cr_expect(strstr(r.err, needle), "fault %s: stderr lacks '%s': %s", fault, needle, r.err);
	cr_expect(strstr(r.err, "t001"), "fault %s: error does not name the daemon: %s", fault, r.err);
	cr_expect_eq(strchr(r.err, '\n') - r.err + 1, (long)strlen(r.err), "not one line: %s", r.err);
	expect_clean(r.pid);
}

Test(core_failure, garbage_frame_is_rejected_with_a_clear_error, .timeout = 60)
{
	expect_fault("garbage@t001:4", "bad frame", "run.watchdog_ms=20000");
}

Test(core_failure, truncated_frame_is_rejected_with_a_clear_error, .timeout = 60)
{
	expect_fault("truncate@t001:4", "bad frame", "run.watchdog_ms=20000");
}

Test(core_failure, ready_with_another_schema_version_is_rejected, .timeout = 60)
{
	expect_fault("schema@t001", "schema version", "run.watchdog_ms=20000");
}

Test(core_failure, message_promised_inside_its_window_is_rejected, .timeout = 60)
{
	expect_fault("early@t001:3", "inside the window", "run.watchdog_ms=20000");
}

Test(core_failure, hung_daemon_trips_the_watchdog, .timeout = 60)
{
	expect_fault("hang@t001:3", "did not answer", "run.watchdog_ms=1500");
}

Test(core_failure, crashed_daemon_is_named, .timeout = 60)
{
	expect_fault("crash@t001:2", "died", "run.watchdog_ms=20000");
}

static pid_t start_long_run(const char *dir, const char *errpath, pid_t *children, int *n)
{
	char *argv[] = { (char *)"kernbench", (char *)"run", (char *)"traffic", (char *)"--quiet",
			 (char *)"--out", (char *)dir, (char *)"--arg", (char *)"components=4",
			 (char *)"--arg", (char *)"messages=400000000", NULL };
	pid_t pid;

	kb_adopt_orphans();
	pid = kb_spawn(argv, errpath);

	for (int i = 0; i < 100 && (*n = kb_children(pid, children, 16)) < 4; i++)
		usleep(50000);
	usleep(300000); /* let it get into the windows */
	return pid;
}

Test(core_failure, sigkilled_daemon_ends_the_run_and_leaves_nothing, .timeout = 60)
{
	char dir[256], errpath[300];
	pid_t children[16], pid;
	char *err;
	int n = 0;

	kb_tmpdir(dir, sizeof(dir), "kill");
	snprintf(errpath, sizeof(errpath), "%s/launcher.stderr", dir);
	pid = start_long_run(dir, errpath, children, &n);
	cr_assert_eq(n, 4, "expected 4 daemons, saw %d", n);
	kill(children[2], SIGKILL);
	cr_expect_eq(kb_wait(pid), 1);
	err = kb_slurp_stderr(errpath);
	cr_assert(err);
	cr_expect(strstr(err, "killed by signal 9"), "stderr: %s", err);
	cr_expect(strstr(err, "kb-traffic"), "stderr does not name the daemon: %s", err);
	free(err);
	expect_clean(pid);
}

Test(core_failure, ctrl_c_tears_down_and_exits_130, .timeout = 60)
{
	char dir[256], errpath[300];
	pid_t children[16], pid;
	char *err;
	int n = 0;

	kb_tmpdir(dir, sizeof(dir), "int");
	snprintf(errpath, sizeof(errpath), "%s/launcher.stderr", dir);
	pid = start_long_run(dir, errpath, children, &n);
	kill(pid, SIGINT);
	cr_expect_eq(kb_wait(pid), 130);
	err = kb_slurp_stderr(errpath);
	cr_expect(err && strstr(err, "interrupted"), "stderr: %s", err ? err : "");
	free(err);
	expect_clean(pid);
}

/* ---------------------------------------------------------------- bad input */

Test(core_config, missing_config_file_is_one_clear_line, .timeout = 30)
{
	struct kb_result r;

	kb_run(&r, "run", "traffic", "--config", "/nonexistent/kb.yaml", NULL);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "/nonexistent/kb.yaml"), "%s", r.err);
}

Test(core_config, unknown_set_key_names_the_key, .timeout = 30)
{
	struct kb_result r;

	kb_run(&r, "run", "traffic", "--set", "dma.bytes_per_cycl=4", NULL);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "dma.bytes_per_cycl"), "%s", r.err);
}

Test(core_config, zero_latency_link_is_rejected, .timeout = 30)
{
	struct kb_result r;

	kb_run(&r, "run", "gemm", "--set", "links.sched_engine_cycles=0", NULL);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "links.sched_engine_cycles"), "%s", r.err);
}

Test(core_config, unknown_workload_is_one_clear_line, .timeout = 30)
{
	struct kb_result r;

	kb_run(&r, "run", "no_such_kernel", "--quiet", NULL);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "no_such_kernel"), "%s", r.err);
}

Test(core_cli, help_and_list_tell_the_truth, .timeout = 30)
{
	struct kb_result r;

	kb_run(&r, "--help", NULL);
	cr_expect_eq(r.status, 0);
	cr_expect(strstr(r.out, "run WORKLOAD"));
	kb_run(&r, "run", "--help", NULL);
	cr_expect_eq(r.status, 0);
	cr_expect(strstr(r.out, "--colocate"));
	kb_run(&r, "list", NULL);
	cr_expect_eq(r.status, 0);
	cr_expect(strstr(r.out, "traffic"));
	cr_expect(strstr(r.out, "gemm"));
}

/* Strangers on the endpoint: tests/hostile/test_strangers.c. */

Test(core_config, malformed_kernel_argument_is_one_clear_line, .timeout = 60)
{
	struct kb_result r;
	char dir[256];

	kb_tmpdir(dir, sizeof(dir), "badarg");
	kb_run(&r, "run", "gqa_decode_opt2", "--quiet", "--out", dir, "--colocate", "all", "--arg",
	       "seq_kv=8k", NULL);
	cr_expect_eq(r.status, 2, "a bad --arg value is a usage error: %s", r.err);
	cr_expect(strstr(r.err, "seq_kv=8k") && strstr(r.err, "decimal whole number"), "%s", r.err);
	cr_expect_eq(strchr(r.err, '\n') - r.err + 1, (long)strlen(r.err), "not one line: %s", r.err);
}

Test(core_config, misspelt_arguments_are_caught, .timeout = 60)
{
	struct kb_result r;
	char dir[256];

	kb_tmpdir(dir, sizeof(dir), "typo");
	kb_run(&r, "run", "traffic", "--quiet", "--out", dir, "--arg", "component=3", NULL);
	cr_expect_eq(r.status, 2, "traffic knows its arguments: unknown is a usage error");
	cr_expect(strstr(r.err, "component"), "%s", r.err);
	kb_run(&r, "run", "gqa_decode_opt2", "--quiet", "--out", dir, "--colocate", "all", "--arg",
	       "seq_kvv=512", "--arg", "tile=64", NULL);
	/* an --arg no kernel reads is a usage error listing what it does read */
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "never reads 'seq_kvv'"), "no error: %s", r.err);
	cr_expect(strstr(r.err, "seq_kv,") && strstr(r.err, "tile"), "no list: %s", r.err);
	/* ring_attention's own arguments change nothing on one rank: not read */
	kb_run(&r, "run", "gqa_decode_opt2", "--quiet", "--out", dir, "--colocate", "all", "--arg",
	       "layout=zigzag", "--arg", "seq_kv=64", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "never reads 'layout'"), "no error: %s", r.err);
	kb_run(&r, "run", "gqa_prefill", "--quiet", "--out", dir, "--colocate", "all", "--arg",
	       "pass=q", "--arg", "seq_kv=64", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "never reads 'pass'"), "no error: %s", r.err);
}

/* Even a SIGKILLed launcher leaves nothing for long: its daemons die with
 * it (PR_SET_PDEATHSIG) and the next run removes its socket directory. */
Test(core_failure, killed_launcher_takes_its_daemons_and_next_run_sweeps_its_socket, .timeout = 60)
{
	char dir[256], errpath[300], again[300];
	pid_t children[16], pid;
	struct kb_result r;
	int n = 0;

	kb_tmpdir(dir, sizeof(dir), "killlauncher");
	snprintf(errpath, sizeof(errpath), "%s/launcher.stderr", dir);
	pid = start_long_run(dir, errpath, children, &n);
	cr_assert_eq(n, 4);
	kill(pid, SIGKILL);
	kb_wait(pid);
	cr_expect_eq(kb_leftover_socket_dirs(pid), 1, "a SIGKILLed launcher cannot clean up");
	/* SIGKILL is immediate, but tearing down a sanitized process's mappings
	 * on a loaded machine is not: allow it a few seconds to vanish */
	for (int i = 0; i < 100 && kb_leftover_daemons() > 0; i++)
		usleep(50000);
	cr_expect_eq(kb_leftover_daemons(), 0, "daemons outlived their launcher");
	snprintf(again, sizeof(again), "%s/again", dir);
	kb_run(&r, "run", "traffic", "--quiet", "--out", again, "--arg", "messages=100", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect_eq(kb_leftover_socket_dirs(pid), 0, "the next run did not sweep it");
}
