/* harness.h — helpers for integration tests: run the real `kernbench`
 * binary (path from $KB_BIN, set by `make integration`), capture its exit
 * status and stderr, and read fields of the outputs it wrote. */
#ifndef KB_TEST_HARNESS_H
#define KB_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct kb_result {
	int status;       /* exit code, or 128 + signal */
	pid_t pid;        /* the launcher's pid */
	char err[4096];   /* captured stderr (truncated) */
	char out[8192];   /* captured stdout (truncated) */
};

/* Path of the kernbench binary. */
const char *kb_bin(void);
/* A fresh empty directory under /tmp for one test's outputs. */
void kb_tmpdir(char *path, size_t cap, const char *tag);
/* Removes `dir` (recursively) when this test process exits. */
void kb_track_dir(const char *dir);
/* Runs `kernbench ARGS...` (NULL-terminated) to completion. */
void kb_run(struct kb_result *res, const char *arg0, ...);
/* Same with an argv array. */
void kb_runv(struct kb_result *res, char *const argv[]);
/* Runs `kernbench run EXTRA... --quiet --out DIR`; the test fails unless it
 * exits 0. */
void kb_run_ok(const char *dir, const char *const extra[]);
/* Starts kernbench in the background; returns its pid. */
pid_t kb_spawn(char *const argv[], const char *stderr_path);
/* Waits for a spawned run; returns exit code or 128 + signal. */
int kb_wait(pid_t pid);

/* Reads a file into a malloc'd NUL-terminated string (NULL if missing). */
char *kb_slurp(const char *path, size_t *len);
/* Reads a captured stderr file, without sanitizer notices. */
char *kb_slurp_stderr(const char *path);
/* The raw text of the value at `path` in a JSON object: a top-level key
 * ("latency_ps") or a dotted path into nested objects
 * ("totals.dispatch_cycles", "by_kind.host.tiles"). Keys are matched
 * exactly, at their own level only. False when absent. */
bool kb_json_field(const char *json, const char *path, char *out, size_t cap);
/* The same, as an unsigned integer; the calling test fails if the key is
 * missing or not an unsigned integer (never a silent 0). */
uint64_t kb_json_u64(const char *json, const char *path);
/* `path` in DIR/summary.json as an integer; the calling test fails if the
 * file or the key is missing or not an unsigned integer. */
uint64_t kb_summary_u64(const char *dir, const char *path);
/* A top-level field of DIR/summary.json as text (caller frees); asserts. */
char *kb_summary_field(const char *dir, const char *key);
/* Two runs of one job gave the same result: op_log.jsonl, trace.json,
 * critical_path.jsonl, o.npy (with `tensors`; else neither has one) byte
 * for byte, and the same delivery digest, latency and message count. */
void kb_expect_same_run(const char *one, const char *many, bool tensors);
/* True if the two files exist and are byte-identical. */
bool kb_same_file(const char *a, const char *b);

/* Writes `source` (a kernel against the public headers) to DIR/NAME.c,
 * compiles it as DIR/NAME.so (path into `so`); the test fails if it does
 * not compile. */
void kb_build_kernel(const char *dir, const char *name, const char *source, char *so,
		     size_t cap);
/* True if `text` is one well-formed JSON value (RFC 8259, strings checked
 * for escapes and control bytes); else false with the offset in *bad_at. */
bool kb_json_valid(const char *text, size_t *bad_at);
/* Number of lines in `text` (a last line without '\n' counts). */
int kb_count_lines(const char *text);

/* Makes this process adopt orphans, so daemons a launcher failed to reap
 * would become our children and be seen by kb_leftover_daemons. */
void kb_adopt_orphans(void);
/* Live (non-zombie) "kb-" processes among our children, after reaping. */
int kb_leftover_daemons(void);
/* Socket directories /tmp/kb-<pid>-* of launcher `pid` still present. */
int kb_leftover_socket_dirs(pid_t pid);
/* Children of `pid` (their pids into `out`, count returned). */
int kb_children(pid_t pid, pid_t *out, int cap);

#endif
