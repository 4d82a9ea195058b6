/* tl_core.c — the tl runtime's core: lifecycle, the kernel coroutine,
 * handles, commands and waits, the PE_CPU clock and the scratch arena with
 * its scopes (scratch-scope design).
 *
 * Over 600 lines on purpose: the kernel coroutine and everything that
 * touches its private state (command records, handles, the PE_CPU clock,
 * the scratch arena and its scopes), in sections; tl_ops.c builds on it
 * through tl_private.h. */
#include "tl_private.h"

#include "rt/daemon.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TL_STACK_BYTES (4u << 20)

/* ------------------------------------------------------------ growth */

static void *grow(void *p, size_t elem, uint64_t *cap, uint64_t need)
{
	uint64_t n = *cap ? *cap : 16;
	void *q;

	while (n < need)
		n *= 2;
	q = realloc(p, (size_t)(n * elem));
	if (!q)
		return NULL;
	memset((uint8_t *)q + *cap * elem, 0, (size_t)((n - *cap) * elem));
	*cap = n;
	return q;
}

static bool grow32(void **p, size_t elem, uint32_t *cap, uint32_t need)
{
	uint64_t c = *cap;
	void *q;

	if (need <= *cap)
		return true;
	q = grow(*p, elem, &c, need);
	if (!q)
		return false;
	*p = q;
	*cap = (uint32_t)c;
	return true;
}

/* ------------------------------------------------------------ errors */

_Noreturn void tl_abort(struct tl *tl, struct tl_site at, enum rt_err code,
			const char *fmt, ...)
{
	char detail[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (at.line > 0)
		rt_fail(code, "kernel %s at %s:%d: %s", tl->s.kernel_name,
			at.file ? at.file : "?", at.line, detail);
	else /* not from a call site (e.g. a bad --arg value) */
		rt_fail(code, "kernel %s: %s", tl->s.kernel_name, detail);
	tl->err = code;
	tl->state = TL_FAILED;
	tl_coro_exit(&tl->coro);
}

/* ------------------------------------------------------------ lifecycle */

static void kernel_main(void *arg);

enum rt_err tl_new(const struct tl_setup *setup, struct tl **out)
{
	struct tl *tl;
	enum rt_err rc;

	*out = NULL;
	if (!setup->cfg || !setup->kernel || !setup->port || !setup->port->send)
		return rt_fail(RT_EINVAL, "tl_new: config, kernel and port are required");
	if (setup->mode == TL_DATA && setup->tcm &&
	    setup->tcm_size < setup->cfg->tcm_scratch_bytes)
		return rt_fail(RT_ECONFIG,
			       "TCM of r%u.pe%u is %llu bytes, smaller than tcm.scratch_bytes %llu",
			       setup->rank, setup->pe,
			       (unsigned long long)setup->tcm_size,
			       (unsigned long long)setup->cfg->tcm_scratch_bytes);
	tl = calloc(1, sizeof(*tl));
	if (!tl)
		return rt_fail(RT_ENOMEM, "tl_new: out of memory");
	tl->s = *setup;
	if (!tl->s.kernel_name)
		tl->s.kernel_name = "?";
	tl->args.items = setup->args;
	tl->args.n = setup->n_args;
	tl->args.owner = tl;
	tl->cycle_ps = rt_config_cycle_ps(setup->cfg);
	tl->n_slots = 1; /* slot 0 is TL_NONE */
	tl->n_cmds = 1;  /* command id 0 is "none" */
	if (!grow32((void **)&tl->slots, sizeof(*tl->slots), &tl->cap_slots, 64)) {
		free(tl);
		return rt_fail(RT_ENOMEM, "tl_new: out of memory");
	}
	rc = tl_coro_init(&tl->coro, TL_STACK_BYTES, kernel_main, tl);
	if (rc != RT_EOK) {
		free(tl->slots);
		free(tl);
		return rc;
	}
	*out = tl;
	return RT_EOK;
}

void tl_destroy(struct tl **tl_p)
{
	struct tl *tl = *tl_p;

	if (!tl)
		return;
	tl_coro_release(&tl->coro);
	tl_ipcq_release(tl);
	free(tl->slots);
	free(tl->cmds);
	free(tl->pending);
	free(tl->saves);
	free(tl->wire_buf);
	free(tl->lowering_buf);
	tl_sites_release(tl);
	tl_loops_release(tl);
	rt_buf_release(&tl->args_log);
	tl_program_release(tl);
	free(tl);
	*tl_p = NULL;
}

/* Leaves the arguments this kernel asked for, with their resolved values,
 * as a part file the launcher merges: summary.json lists them, and an
 * --arg no kernel asked for is rejected with this list. */
static void report_args(struct tl *tl)
{
	char file[64], path[1200];
	FILE *f;

	if (!tl->s.port->output_path)
		return;
	snprintf(file, sizeof(file), "%s/args.%u.%u", RT_PARTS_DIR, tl->s.rank, tl->s.pe);
	if (tl->s.port->output_path(tl->s.port_ctx, file, path, sizeof(path)) != RT_EOK)
		return;
	f = fopen(path, "wx"); /* exclusive: the staging folder is fresh */
	if (!f)
		return;
	fwrite(tl->args_log.data ? tl->args_log.data : "", 1, tl->args_log.len, f);
	fclose(f);
	/* an empty marker: this kernel asked for its --inputs folder */
	snprintf(file, sizeof(file), "%s/inputs.%u.%u", RT_PARTS_DIR, tl->s.rank, tl->s.pe);
	if (tl->inputs_asked &&
	    tl->s.port->output_path(tl->s.port_ctx, file, path, sizeof(path)) == RT_EOK) {
		f = fopen(path, "wx");
		if (f)
			fclose(f);
	}
}

static void report_end(struct tl *tl)
{
	/* times skipped by fast-forward (ADR 0059) come on top of the clock */
	uint64_t skipped = tl->s.port->ff_offset ? tl->s.port->ff_offset(tl->s.port_ctx) : 0;

	tl->tot.end_ps = tl->clock_ps + skipped;
	tl->tot.peak_scratch_bytes = tl->peak;
	tl_stat(tl, TL_ST_KERNEL_END, tl->clock_ps + skipped);
	tl_stat(tl, TL_ST_PEAK_SCRATCH, tl->peak);
	tl_stat(tl, TL_ST_KERNEL_PS, tl->clock_ps + skipped - tl->start_ps);
	tl_stat(tl, TL_ST_COMMANDS, tl->tot.commands);
	tl_sites_report(tl);
	if (tl->s.port->path_report && tl->path_ok)
		tl->s.port->path_report(tl->s.port_ctx, &tl->path);
	report_args(tl);
	tl_program_report(tl);
}

/* The coroutine body: the kernel, then a drain of its commands. */
static void kernel_main(void *arg)
{
	struct tl *tl = arg;
	struct tl_site end = { "(kernel return)", 0 };
	int rc;

	rc = tl->s.kernel(tl, &tl->args);
	if (rc != 0)
		tl_abort(tl, end, RT_EKERNEL, "returned %d", rc);
	tl_wait_all(tl, end);
	report_end(tl);
	tl->state = TL_DONE;
}

/* Runs the kernel until it waits, fails or finishes. */
static enum rt_err run(struct tl *tl)
{
	tl->state = TL_RUNNING;
	tl_coro_resume(&tl->coro);
	if (tl->state == TL_FAILED)
		return tl->err;
	return RT_EOK;
}

enum rt_err tl_start(struct tl *tl, uint64_t now_ps)
{
	if (tl->state != TL_IDLE)
		return rt_fail(RT_EPROTOCOL, "kernel %s started twice",
			       tl->s.kernel_name);
	tl->now_ps = now_ps;
	tl->start_ps = now_ps;
	tl->clock_ps = now_ps;
	/* the critical path starts with the run: a kernel started later
	 * (never, today) could not say what the time before it was */
	memset(&tl->path, 0, sizeof(tl->path));
	tl->path_ok = now_ps == 0;
	return run(tl);
}

bool tl_finished(const struct tl *tl)
{
	return tl->state == TL_DONE;
}

void tl_totals(const struct tl *tl, struct tl_totals *out)
{
	*out = tl->tot;
	out->peak_scratch_bytes = tl->peak;
}

/* ------------------------------------------------------------ commands */

uint64_t tl_cmd_new(struct tl *tl, struct tl_site at, enum tl_cmd_kind kind)
{
	uint64_t id = tl->n_cmds;
	void *q;

	if (id + 1 > tl->cap_cmds) {
		q = grow(tl->cmds, sizeof(*tl->cmds), &tl->cap_cmds, id + 1);
		if (!q)
			tl_abort(tl, at, RT_ENOMEM, "out of memory (commands)");
		tl->cmds = q;
	}
	if (!grow32((void **)&tl->pending, sizeof(*tl->pending),
		    &tl->cap_pending, tl->n_pending + 1))
		tl_abort(tl, at, RT_ENOMEM, "out of memory (commands)");
	tl->n_cmds++;
	tl_loop_note_cmd(tl);
	memset(&tl->cmds[id], 0, sizeof(tl->cmds[id]));
	tl->cmds[id].kind = kind;
	tl->cmds[id].at = at;
	tl->pending[tl->n_pending++] = id;
	return id;
}

/* Grows the bounding span [*lo, *hi) (empty when lo == hi) by
 * [addr, addr + bytes). */
static void span_add(uint64_t *lo, uint64_t *hi, uint64_t addr,
		     uint64_t bytes)
{
	if (bytes == 0)
		return;
	if (*lo == *hi) {
		*lo = addr;
		*hi = addr + bytes;
		return;
	}
	if (addr < *lo)
		*lo = addr;
	if (addr + bytes > *hi)
		*hi = addr + bytes;
}

void tl_cmd_touch_tcm(struct tl *tl, uint64_t id, uint64_t addr,
		      uint64_t bytes)
{
	span_add(&tl->cmds[id].tcm_lo, &tl->cmds[id].tcm_hi, addr, bytes);
}

void tl_cmd_read_hbm(struct tl *tl, uint64_t id, uint64_t addr,
		     uint64_t bytes)
{
	span_add(&tl->cmds[id].hbm_rlo, &tl->cmds[id].hbm_rhi, addr, bytes);
}

void tl_cmd_complete(struct tl *tl, uint64_t id, uint64_t at_ps)
{
	uint32_t i;

	tl->cmds[id].done = true;
	tl->cmds[id].done_ps = at_ps;
	for (i = 0; i < tl->n_pending; i++) {
		if (tl->pending[i] == id) {
			tl->pending[i] = tl->pending[--tl->n_pending];
			break;
		}
	}
}

void tl_cmd_set_path(struct tl *tl, uint64_t id, const struct rt_path *path)
{
	tl->cmds[id].has_path = path != NULL;
	if (path)
		tl->cmds[id].done_path = *path;
}

enum rt_err tl_on_command_done(struct tl *tl, uint64_t id, uint64_t now_ps,
			       const struct rt_path *path)
{
	if (id == 0 || id >= tl->n_cmds || tl->cmds[id].kind == TL_CMD_RECV ||
	    tl->cmds[id].done)
		return rt_fail(RT_EPROTOCOL,
			       "kernel host of r%u.pe%u: CommandDone for unknown or finished command %llu",
			       tl->s.rank, tl->s.pe, (unsigned long long)id);
	tl->now_ps = now_ps;
	tl_cmd_set_path(tl, id, path);
	tl_cmd_complete(tl, id, now_ps);
	return tl_resume_for(tl, id);
}

enum rt_err tl_resume_for(struct tl *tl, uint64_t id)
{
	if (tl->state == TL_WAITING && tl->waiting_for == id)
		return run(tl);
	return RT_EOK;
}

/* Suspends the kernel until command `id` is done, then moves the kernel
 * clock past its completion. */
/* A slice of the kernel's clock on the host's trace. */
static void trace_kernel(struct tl *tl, const char *what, struct tl_site at,
			 uint64_t start_ps, uint64_t end_ps)
{
	if (tl->s.port->trace_slice)
		tl->s.port->trace_slice(tl->s.port_ctx, what, at.file, at.line,
					start_ps, end_ps);
}

/* The scratch-in-use counter track, at the kernel's clock. */
static void trace_scratch(struct tl *tl)
{
	if (tl->s.port->trace_counter)
		tl->s.port->trace_counter(tl->s.port_ctx, "scratch_bytes",
					  tl->clock_ps, tl->cursor);
}

void tl_wait_cmd(struct tl *tl, struct tl_site at, uint64_t id)
{
	uint64_t start_ps = tl->clock_ps;

	if (id == 0)
		return;
	while (!tl->cmds[id].done) {
		tl->waiting_for = id;
		tl->wait_site = at;
		tl->state = TL_WAITING;
		tl_coro_yield(&tl->coro);
		tl->state = TL_RUNNING;
	}
	if (tl->cmds[id].kind == TL_CMD_RECV)
		tl_ipcq_waited(tl, id, start_ps); /* ring figures (ipcq.c) */
	if (tl->cmds[id].done_ps > tl->clock_ps) {
		/* the completion, not the kernel, decided the clock: its path
		 * is the kernel's from here on (rt/path.h). A message that
		 * came without one leaves its wait unexplained: the sender's
		 * side could not be followed */
		if (tl->cmds[id].has_path)
			tl->path = tl->cmds[id].done_path;
		else if (tl->cmds[id].kind == TL_CMD_RECV)
			rt_path_add(&tl->path, RT_PATH_SENDER_NOT_READY,
				    tl->cmds[id].done_ps - tl->clock_ps);
		else
			tl->path_ok = false;
		tl->clock_ps = tl->cmds[id].done_ps;
	}
	if (tl->clock_ps > start_ps) { /* the kernel stalled here */
		trace_kernel(tl, "wait", at, start_ps, tl->clock_ps);
		tl_stat(tl, TL_ST_WAIT, tl->clock_ps - start_ps);
		tl_site_wait(tl, at, tl->clock_ps - start_ps);
	}
}

void tl_wait_operand(struct tl *tl, struct tl_site at, uint64_t id)
{
	if (id && (tl->cmds[id].kind == TL_CMD_RECV ||
		   (tl->cmds[id].kind == TL_CMD_DMA && tl->cmds[id].load)))
		tl_wait_cmd(tl, at, id);
}

void tl_wait_tensor(struct tl *tl, struct tl_site at, tl_tensor t)
{
	struct tl_rec *r = tl_rec_get(tl, at, t, "tensor");

	tl_wait_cmd(tl, at, r->producer);
}

void tl_wait_all(struct tl *tl, struct tl_site at)
{
	while (tl->n_pending > 0)
		tl_wait_cmd(tl, at, tl->pending[0]);
}

/* ------------------------------------------------------------ dispatch */

void tl_charge(struct tl *tl, struct tl_site at, uint64_t cycles)
{
	tl->clock_ps += cycles * tl->cycle_ps;
	rt_path_add(&tl->path, RT_PATH_DISPATCH, cycles * tl->cycle_ps);
	tl->tot.dispatch_cycles += cycles;
	tl_stat(tl, TL_ST_DISPATCH, cycles);
	tl_site_dispatch(tl, at, cycles);
}

void tl_emit(struct tl *tl, struct tl_site at, Kb__Command *cmd)
{
	Kb__Payload msg = KB__PAYLOAD__INIT;
	uint64_t start_ps = tl->clock_ps;
	enum rt_err rc;

	tl_charge(tl, at, rt_dispatch_cycles(tl->s.cfg,
					 rt_command_logical_bytes(cmd)));
	trace_kernel(tl, cmd->body_case == KB__COMMAND__BODY_COMPOSITE ? "dispatch composite"
			 : cmd->body_case == KB__COMMAND__BODY_DMA     ? "dispatch dma"
								       : "dispatch copy",
		     at, start_ps, tl->clock_ps);
	tl->tot.commands++;
	msg.body_case = KB__PAYLOAD__BODY_COMMAND;
	msg.command = cmd;
	rc = tl->s.port->send(tl->s.port_ctx, TL_PORT_SCHED, tl->clock_ps, 0,
			      &msg, tl->path_ok ? &tl->path : NULL);
	if (rc != RT_EOK)
		tl_abort(tl, at, rc, "sending a command to the scheduler failed: %s",
			 rt_last_error());
}

/* ------------------------------------------------------------ handles */

tl_tensor tl_rec_new(struct tl *tl, struct tl_site at, struct tl_rec **out)
{
	uint32_t slot = tl->n_slots;
	struct tl_rec *r;
	tl_tensor t;

	if (!grow32((void **)&tl->slots, sizeof(*tl->slots), &tl->cap_slots,
		    slot + 1))
		tl_abort(tl, at, RT_ENOMEM, "out of memory (handles)");
	tl->n_slots++;
	r = &tl->slots[slot];
	uint32_t gen = r->gen ? r->gen : 1; /* bumped at scope exit */
	memset(r, 0, sizeof(*r));
	r->gen = gen;
	r->scope = tl->n_saves ? tl->saves[tl->n_saves - 1].serial : 0;
	t.slot = slot;
	t.gen = gen;
	t.scope = r->scope;
	*out = r;
	return t;
}

struct tl_rec *tl_rec_get(struct tl *tl, struct tl_site at, tl_tensor t,
			  const char *what)
{
	if (t.slot != 0 && t.slot < tl->n_slots &&
	    tl->slots[t.slot].gen == t.gen)
		return &tl->slots[t.slot];
	if (t.slot == 0)
		tl_abort(tl, at, RT_EKERNEL, "%s is TL_NONE (no tensor)", what);
	if (t.scope != 0)
		tl_abort(tl, at, RT_EKERNEL,
			 "%s: handle allocated in scratch scope %u was used after that scope ended; "
			 "allocate it before the scope begins to keep it, or tl_copy_to a persistent "
			 "tensor before tl_scratch_scope_end",
			 what, t.scope);
	tl_abort(tl, at, RT_EKERNEL, "%s is not a live tensor handle", what);
}

uint64_t tl_rec_bytes(const struct tl_rec *r)
{
	return (uint64_t)r->rows * r->cols * tl_dtype_size(r->dtype);
}

uint32_t tl_rec_lrows(const struct tl_rec *r)
{
	return r->trans ? r->cols : r->rows;
}

uint32_t tl_rec_lcols(const struct tl_rec *r)
{
	return r->trans ? r->rows : r->cols;
}

struct tl_tref tl_tref_of(const struct tl_rec *r)
{
	struct tl_tref t = {
		.tcm = r->tcm, .pinned = r->pinned, .trans = r->trans,
		.addr = r->addr, .rows = r->rows, .cols = r->cols,
		.dtype = r->dtype, .row_stride = r->row_stride,
	};
	return t;
}

uint32_t tl_dtype_size(enum tl_dtype dtype)
{
	return dtype == TL_F32 ? 4 : 2;
}

/* ------------------------------------------------------------ scratch */

static uint64_t scratch_alloc(struct tl *tl, struct tl_site at,
			      uint64_t bytes)
{
	uint64_t aligned = (bytes + 15) & ~(uint64_t)15;
	uint64_t total = tl->s.cfg->tcm_scratch_bytes;
	uint64_t left = total - tl->cursor;
	uint64_t addr = tl->cursor;

	if (aligned > left)
		tl_abort(tl, at, RT_ESCRATCH,
			 "scratch overflow: %llu bytes requested, %llu of %llu left; wrap the tile loop in tl_scratch_scope",
			 (unsigned long long)aligned, (unsigned long long)left,
			 (unsigned long long)total);
	tl->cursor += aligned;
	if (tl->cursor > tl->peak)
		tl->peak = tl->cursor;
	trace_scratch(tl);
	return addr;
}

tl_tensor tl_scratch_tensor(struct tl *tl, struct tl_site at, uint32_t rows,
			    uint32_t cols, enum tl_dtype dtype)
{
	struct tl_rec *r;
	uint64_t addr;
	tl_tensor t;

	if (rows == 0 || cols == 0)
		tl_abort(tl, at, RT_EKERNEL, "empty tensor %ux%u", rows, cols);
	addr = scratch_alloc(tl, at, (uint64_t)rows * cols * tl_dtype_size(dtype));
	t = tl_rec_new(tl, at, &r);
	r->tcm = true;
	r->pinned = true;
	r->addr = addr;
	r->rows = rows;
	r->cols = cols;
	r->dtype = dtype;
	return t;
}

uint64_t tl_scratch_used(const struct tl *tl)
{
	return tl->cursor;
}

uint64_t tl_scratch_peak(const struct tl *tl)
{
	return tl->peak;
}

uint64_t tl_scratch_size(const struct tl *tl)
{
	return tl->s.cfg->tcm_scratch_bytes;
}

void tl_scratch_scope_begin_at(struct tl *tl, struct tl_site at)
{
	struct tl_save *s;

	if (!grow32((void **)&tl->saves, sizeof(*tl->saves), &tl->cap_saves,
		    tl->n_saves + 1))
		tl_abort(tl, at, RT_ENOMEM, "out of memory (scopes)");
	s = &tl->saves[tl->n_saves++];
	s->cursor = tl->cursor;
	s->n_slots = tl->n_slots;
	s->serial = ++tl->scope_serial;
}

/* First pending command touching TCM [lo, hi), or 0. */
static uint64_t pending_touching(const struct tl *tl, uint64_t lo,
				 uint64_t hi)
{
	uint32_t i;

	for (i = 0; i < tl->n_pending; i++) {
		const struct tl_cmd *c = &tl->cmds[tl->pending[i]];

		if (c->tcm_lo < c->tcm_hi && c->tcm_lo < hi && lo < c->tcm_hi)
			return tl->pending[i];
	}
	return 0;
}

void tl_scratch_scope_end_at(struct tl *tl, struct tl_site at)
{
	struct tl_save s;
	uint64_t id;
	uint32_t i;

	if (tl->n_saves == 0)
		tl_abort(tl, at, RT_EKERNEL,
			 "tl_scratch_scope_end without a matching tl_scratch_scope_begin");
	s = tl->saves[tl->n_saves - 1];
	/* never recycle bytes a command may still read or write */
	while ((id = pending_touching(tl, s.cursor, tl->cursor)) != 0)
		tl_wait_cmd(tl, at, id);
#ifndef NDEBUG
	/* poison (0xFF: NaN in f16, bf16 and f32) so stale reads show */
	if (tl->s.tcm && tl->cursor > s.cursor)
		memset(tl->s.tcm + s.cursor, 0xFF, tl->cursor - s.cursor);
#endif
	for (i = s.n_slots; i < tl->n_slots; i++)
		tl->slots[i].gen++;
	tl->n_slots = s.n_slots;
	tl->cursor = s.cursor;
	tl->n_saves--;
	trace_scratch(tl);
}

/* ------------------------------------------------------------ identity */

uint32_t tl_program_id(const struct tl *tl) { return tl->s.pe; }
uint32_t tl_num_programs(const struct tl *tl) { return tl->s.pes; }
uint32_t tl_rank(const struct tl *tl) { return tl->s.rank; }
uint32_t tl_num_ranks(const struct tl *tl) { return tl->s.ranks; }
enum tl_mode tl_mode(const struct tl *tl) { return tl->s.mode; }
uint64_t tl_now_ps(const struct tl *tl) { return tl->clock_ps; }

/* Finds the last --arg called `name` (the last one wins: a program
 * step's own arguments come after the run's); *step: it is the step's. */
static const char *arg_find_in(const struct tl_args *args, const char *name, bool *step)
{
	*step = false;
	for (uint32_t i = args->n; i-- > 0;)
		if (strcmp(args->items[i].name, name) == 0) {
			*step = args->n_global && i >= args->n_global;
			return args->items[i].value;
		}
	return NULL;
}

static const char *arg_find(const struct tl_args *args, const char *name)
{
	bool step;

	return arg_find_in(args, name, &step);
}

/* Records that the kernel asked for `name` and what it resolved to (the
 * first lookup of a name counts; names are short, lookups few). A program
 * step's own argument is the program's, not the run's: not listed. */
static void arg_note(const struct tl_args *args, const char *name, bool given,
		     const char *value)
{
	struct tl *tl = args->owner;
	struct rt_buf *log;
	size_t len = strlen(name);
	enum rt_err err;
	bool step;

	if (!tl || (arg_find_in(args, name, &step) && step))
		return;
	log = &tl->args_log;
	for (const char *p = log->data; p && *p; p = strchr(p, '\n') + 1)
		if (!strncmp(p, name, len) && p[len] == '\t')
			return;
	err = rt_buf_printf(log, "%s\t%s\t", name, given ? "given" : "default");
	for (; !err && *value; value++) /* one line per name, whatever the value holds */
		err = rt_buf_append(log, (unsigned char)*value < 0x20 ? "?" : value, 1);
	if (!err)
		err = rt_buf_append(log, "\n", 1);
	/* a line cut short would make the launcher think --arg was never read */
	if (err)
		tl_abort(tl, (struct tl_site){ NULL, 0 }, RT_ENOMEM,
			 "out of memory noting that the kernel read --arg %.40s", name);
}

/* The shared decimal parser; a bad value ends the run naming the range. */
static uint64_t arg_number(const struct tl_args *args, const char *name,
			   uint64_t def, uint64_t min, uint64_t max)
{
	const char *v = arg_find(args, name);
	char text[24];
	uint64_t x = def;

	if (v && rt_parse_u64(v, min, max, &x) != RT_PARSE_OK)
		tl_abort(args->owner, (struct tl_site){ NULL, 0 }, RT_EUSAGE,
			 "--arg %s=%.40s%s: expected a decimal whole number "
			 "from %llu to %llu", name, v,
			 strlen(v) > 40 ? "..." : "",
			 (unsigned long long)min, (unsigned long long)max);
	snprintf(text, sizeof(text), "%llu", (unsigned long long)x);
	arg_note(args, name, v != NULL, text);
	return x;
}

uint64_t tl_arg_u64(const struct tl_args *args, const char *name,
		    uint64_t def)
{
	return arg_number(args, name, def, 0, UINT64_MAX);
}

uint32_t tl_arg_u32(const struct tl_args *args, const char *name,
		    uint32_t def, uint32_t min, uint32_t max)
{
	/* the kernel's own mistake, not the command line's: a range that is
	 * empty or leaves out the default would never hold */
	if (min > max || def < min || def > max)
		tl_abort(args->owner, (struct tl_site){ NULL, 0 }, RT_EINVAL,
			 "tl_arg_u32(\"%.40s\", default %u, range %u to %u): the default must lie "
			 "in a non-empty range", name, def, min, max);
	return (uint32_t)arg_number(args, name, def, min, max);
}

const char *tl_arg_str(const struct tl_args *args, const char *name,
		       const char *def)
{
	const char *v = arg_find(args, name);

	arg_note(args, name, v != NULL, v ? v : def ? def : "");
	return v ? v : def;
}
