/* tl_host.h — the host side of the tl runtime (not for kernel authors).
 *
 * Three parts:
 *   - the kernel registry: built-ins and `path/lib.so:NAME` lookup;
 *   - the tl runtime driven "sans I/O": it emits commands through a port
 *     (a const ops table) and is told about completions and IPCQ arrivals;
 *     the kernel runs on its own coroutine stack and suspends whenever it
 *     must wait. The host component drives it from real daemons; unit tests
 *     drive it directly with a fake port;
 *   - the host component (tl_host_ops), one per PE.
 *
 * Depends on runtime/ (the rt headers) and the generated wire schema. */
#ifndef TL_HOST_H
#define TL_HOST_H

#include <stdbool.h>
#include <stdint.h>

#include "kernbench.pb-c.h"
#include "rt/component.h"
#include "rt/ff.h"
#include "rt/config.h"
#include "rt/err.h"
#include "tl.h"

/* ------------------------------------------------------------ kernels */

/* tl_kernel_fn: tl.h */

/* A built-in kernel: one line in the registry table. */
struct tl_kernel_info {
	const char *name;
	tl_kernel_fn fn;
	const char *help; /* one line, args included */
};
#define TL_KERNEL(NAME, HELP) { #NAME, NAME, HELP }

/* A resolved kernel. */
struct tl_kernel_ref {
	char name[64];
	tl_kernel_fn fn;
	void *dl; /* dlopen handle for "lib.so:NAME", NULL for built-ins */
};

/* Finds `workload`: a built-in name or "path/lib.so:NAME" (dlopen + dlsym).
 * RT_ENOTFOUND with a line naming it when absent. Release with
 * tl_kernel_ref_release. */
enum rt_err tl_kernel_find(const char *workload, struct tl_kernel_ref *out);
/* Whether `workload` names a kernel, without loading anything: a built-in,
 * or path/lib.so:NAME whose file is a readable regular file. The launcher
 * uses this; only daemons dlopen user code (its constructors run there,
 * supervised like any daemon). */
enum rt_err tl_kernel_check(const char *workload);
void tl_kernel_ref_release(struct tl_kernel_ref *ref);
/* The built-in table (for `kernbench list`). */
const struct tl_kernel_info *tl_kernel_builtins(size_t *count);

/* ------------------------------------------------------------ runtime */

/* Where messages go: the PE's scheduler (commands), its rank's link
 * component (IPCQ) or the host of PE q of its rank, TL_PORT_PE(q)
 * (barriers); the port maps it to a component id. */
enum tl_port_dst { TL_PORT_SCHED = 0, TL_PORT_LINK = 1, TL_PORT_PE0 = 2 };
#define TL_PORT_PE(q) ((uint32_t)TL_PORT_PE0 + (q))

struct tl_port_ops {
	/* `at_send` is the critical path to send_ps (rt/path.h) or NULL; the
	 * port adds extra_ps and the latency to dst, each to its class. */
	enum rt_err (*send)(void *ctx, uint32_t dst, uint64_t send_ps,
			    uint64_t extra_ps, const Kb__Payload *msg,
			    const struct rt_path *at_send);
	/* Statistics (rt/component.h): by name (a kernel's own, made on the
	 * fly), or declared once (name, unit, description, sum or max) and
	 * then added to by handle. Each may be NULL: a port without
	 * stat_declare gets the runtime's own statistics by name. */
	void (*stat_add)(void *ctx, const char *name, uint64_t value);
	void (*stat_max)(void *ctx, const char *name, uint64_t value);
	uint32_t (*stat_declare)(void *ctx, const struct rt_stat_decl *decl);
	void (*stat_add_h)(void *ctx, uint32_t handle, uint64_t value);
	void (*stat_max_h)(void *ctx, uint32_t handle, uint64_t value);
	/* Full path of `file` in the output directory (may be NULL). */
	enum rt_err (*output_path)(void *ctx, const char *file, char *path,
				   size_t cap);
	/* Trace (each may be NULL): a slice of the kernel's own clock
	 * ("dispatch", "wait") with its call site; a counter of this PE. */
	void (*trace_slice)(void *ctx, const char *name, const char *file,
			    int line, uint64_t start_ps, uint64_t end_ps);
	void (*trace_counter)(void *ctx, const char *name, uint64_t ts_ps,
			      uint64_t value);
	/* A program step's slice, on a track of its own (may be NULL). */
	void (*trace_step)(void *ctx, const char *name, uint64_t start_ps, uint64_t end_ps);
	/* The critical path to the kernel's end (may be NULL). */
	void (*path_report)(void *ctx, const struct rt_path *path);
	/* Fast-forward (rt/ff.h; each may be NULL: loops never skip): a TL_FOR
	 * loop entered, an iteration of it finished (with the path to the
	 * kernel clock, or NULL), left; the time skipped so far. */
	void (*loop_enter)(void *ctx, struct rt_ff_loop *loop);
	void (*loop_tick)(void *ctx, struct rt_ff_loop *loop, const struct rt_path *path);
	void (*loop_leave)(void *ctx, struct rt_ff_loop *loop);
	uint64_t (*ff_offset)(void *ctx);
};

/* One name=value workload argument. */
struct tl_arg {
	const char *name;
	const char *value;
};

struct tl_setup {
	const struct rt_config *cfg;
	const char *kernel_name; /* for error lines */
	tl_kernel_fn kernel;
	const struct tl_arg *args;
	uint32_t n_args;
	uint32_t rank, pe, ranks, pes;
	enum tl_mode mode;
	uint64_t seed;
	const char *inputs_dir; /* --inputs, "" or NULL when absent */
	uint8_t *hbm; /* data mode: this rank's HBM; NULL in timing mode */
	uint64_t hbm_size;
	uint8_t *tcm; /* data mode: this PE's TCM */
	uint64_t tcm_size;
	const struct tl_port_ops *port;
	void *port_ctx;
	/* a program from a YAML file: its canonical text (tl_program_parse), or
	 * NULL; the kernel is then the program's driver */
	const char *program_text;
};

/* Creates the runtime (the kernel is not started). Caller owns *out. */
enum rt_err tl_new(const struct tl_setup *setup, struct tl **out);
void tl_destroy(struct tl **tl_p);

/* Starts the kernel at `now_ps`; runs it until it waits or returns. A
 * kernel error or non-zero return is returned with rt_fail's line. */
enum rt_err tl_start(struct tl *tl, uint64_t now_ps);
/* The scheduler finished command `id` at now_ps: resumes the kernel if it
 * was waiting for it. `path` is the critical path to now_ps, or NULL (then
 * the kernel reports no path). */
enum rt_err tl_on_command_done(struct tl *tl, uint64_t id, uint64_t now_ps,
			       const struct rt_path *path);
/* An IPCQ message arrived from the rank's link component at now_ps (`path` as
 * above). */
enum rt_err tl_on_ipcq(struct tl *tl, const Kb__IpcqData *msg,
		       uint64_t now_ps, const struct rt_path *path);
/* A barrier message from another PE of the rank arrived at now_ps (`path`
 * as above). */
enum rt_err tl_on_pe_sync(struct tl *tl, const Kb__PeSync *msg, uint64_t now_ps,
			  const struct rt_path *path);
/* A program in its canonical text form, one item a line (what the
 * launcher makes of a program YAML file and hands every host):
 *   tensor NAME ROWS COLS f16|bf16|f32 none|zeros|random SCALE OFFSET
 *   step NAME KERNEL
 *   arg NAME VALUE          (of the step above)
 *   bind PARAMETER TENSOR   (of the step above)
 * Names are 1-63 bytes of [A-Za-z0-9_.-], values have no blanks. */
struct tl_program_text {
	struct tl_program prog;
	struct tl_prog_tensor *tensors;
	struct tl_prog_step *steps;
	char *text; /* owned copy the names point into */
};
/* Parses `text`; RT_EINVAL with a line naming the item otherwise. Release
 * with tl_program_text_release. */
enum rt_err tl_program_parse(const char *text, struct tl_program_text *out);
void tl_program_text_release(struct tl_program_text *p);
/* The kernel that runs setup->program_text. */
int tl_program_text_kernel(struct tl *tl, const struct tl_args *args);

/* True once the kernel has returned and all its commands completed. */
bool tl_finished(const struct tl *tl);

/* Totals, also reported through the port's stats at the end. */
struct tl_totals {
	uint64_t end_ps;
	uint64_t dispatch_cycles;
	uint64_t commands;
	uint64_t peak_scratch_bytes;
	uint64_t ipcq_bytes;
};
void tl_totals(const struct tl *tl, struct tl_totals *out);
/* Fast-forward's digest of the kernel's state relative to t_ps
 * (rt_component_ops.ff_digest, ADR 0059). */
uint64_t tl_ff_digest(const struct tl *tl, uint64_t t_ps);

/* ------------------------------------------------------------ component */

/* The kernel host, one per PE (component name "host"): runs the job's
 * workload kernel, talks to its PE_SCHEDULER and to the neighbour hosts. */
extern const struct rt_component_ops tl_host_ops;
/* The IPCQ ring links of one rank, shared by its PEs (src/link.c). */
extern const struct rt_component_ops tl_link_ops;

#endif
