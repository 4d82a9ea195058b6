/* rerun.h — running again what a result folder recorded.
 *
 * `kernbench run --from DIR` reads DIR/summary.json (its workload, mode,
 * seed, kernel arguments with their resolved values, --inputs and the
 * whole resolved configuration) and rewrites the command line into the
 * options that stand for it, so the one `run` parser checks everything as
 * usual; after the run the new delivery digest must equal the recorded
 * one. `--config FILE` naming a summary.json loads that run's
 * configuration as a layer like any config file; without WORKLOAD it is
 * `--from` the file's folder. The recorded configuration reaches the
 * parser as YAML in a sealed memory file (/proc/self/fd/N): nothing is
 * written to disk. ADR 0047. */
#ifndef KB_RERUN_H
#define KB_RERUN_H

#include <stdbool.h>

#include "rt/err.h"
#include "rt/job.h"

struct kb_rerun {
	bool active;                /* --from (or its --config form) was given */
	char from[RT_PATH_MAX];     /* the recorded summary.json */
	char digest[40];            /* its delivery_digest */
	int fds[16];                /* memory files holding recorded configs */
	unsigned n_fds;
	char **argv;                /* the rewritten command line (owned) */
	int argc;
};

/* Rewrites `run` argv (argv[0] "run") when it has --from or a --config
 * naming a summary.json; otherwise r->argv is a copy of argv. RT_EUSAGE
 * with one line for --from with WORKLOAD or an option it fixes itself
 * (--set, --arg, --config, --mode, --seed, --ranks, --pes, --inputs,
 * --machine), or a summary.json that cannot be read. */
enum rt_err kb_rerun_prepare(int argc, char **argv, struct kb_rerun *r);
/* After the run: the digest in result_dir/summary.json is the recorded
 * one; RT_EIO with the line saying both otherwise. */
enum rt_err kb_rerun_check(const struct kb_rerun *r, const char *result_dir);
void kb_rerun_release(struct kb_rerun *r);

#endif
