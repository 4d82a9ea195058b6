/* workloads.h — what `kernbench run WORKLOAD` can run.
 *
 * A workload builds the topology (components and links) from the job. The
 * built-in `traffic` fixture lives here; kernels (built in or loaded from a
 * shared object) run on the PE topology (pe.c). May depend on: runtime,
 * scheduler, engines, kernel_host. */
#ifndef KB_WORKLOADS_H
#define KB_WORKLOADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "rt/buf.h"
#include "rt/err.h"
#include "rt/job.h"
#include "rt/topology.h"

struct kb_workload {
	const char *name;
	const char *summary; /* one line for `kernbench list` */
	enum rt_err (*build)(const struct rt_job *job, struct rt_topology *topo);
};

/* Resolves a workload name (a built-in, a kernel, or lib.so:NAME). */
enum rt_err kb_workload_find(const char *name, struct kb_workload *out);
/* The known workload name closest to `name` (two edits at most), or NULL. */
const char *kb_workload_suggest(const char *name);
/* Prints every built-in workload with its summary. */
void kb_workload_list(FILE *out);

/* The first shared object of the user's the job would load (a kernel
 * object's path, or an engine or memory model plug-in's), NULL if none:
 * what daemon threads of the launcher cannot contain (ADR 0037). */
const char *kb_job_shared_object(const struct rt_job *job);

/* Every model setting does something: the engines the topology has name
 * models this build has (checked without loading a plug-in), an engine the
 * workload lacks is left at its default model, and *.params go to plug-in
 * models only. RT_EUSAGE with one line otherwise. */
enum rt_err kb_job_check_models(const struct rt_job *job, const struct rt_topology *topo);

/* A program file: a workload named *.yaml or *.yml. */
bool kb_program_file(const char *workload);
/* Reads and checks a program YAML file (workloads/program_yaml.c) into
 * its canonical text `out` (tl_program_parse), at most `cap` bytes. */
enum rt_err kb_program_load(const char *path, char *out, size_t cap);
/* The same from the file's bytes (`name` for error lines; the fuzz
 * harness's entry). */
enum rt_err kb_program_load_text(const char *name, const char *text, size_t len, char *out,
				 size_t cap);
/* Checks, before any daemon starts, every model plug-in `cfg` names:
 * the path as written (a bare `my.so` says to write ./my.so), then, in a
 * short-lived child process, its ABI, class and parameters as the
 * engines will load it (preflight.c). RT_EUSAGE with the one line for a
 * refusal; RT_EPEER when the plug-in crashes, exits or hangs loading. */
enum rt_err kb_models_preflight(const struct rt_config *cfg);
/* `kernbench config`: the parameters each engine plug-in of `cfg`
 * declares, as lines starting with `prefix` (eng_plugins_describe). */
void kb_models_describe(const struct rt_config *cfg, const char *prefix, struct rt_buf *b);

/* The synthetic message fixture. */
enum rt_err kb_traffic_build(const struct rt_job *job, struct rt_topology *topo);
/* Every PE of every rank: host, scheduler, DMA, GEMM, MATH. */
enum rt_err kb_pe_build(const struct rt_job *job, struct rt_topology *topo);

#endif
