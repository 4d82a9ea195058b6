/* program.c — programs of several kernels (tl_program_run, ADR 0042).
 *
 * Every PE runs the program's steps in order on its kernel's coroutine,
 * one tl runtime throughout: a step is a call of its kernel with the run's
 * arguments plus its own (which win) and its tensor bindings, then a wait
 * for everything it issued, then a barrier of the rank's PEs (counted in
 * the step), so the next step may read what any PE of the rank wrote, and
 * the steps' intervals cover the run. The tensors are placed in
 * HBM once, in order from address 0, 4 KiB apart.
 *
 * Per step the host records its interval, dispatch cycles, commands and
 * IPCQ bytes (the steps part, steps.RANK.PE); the launcher adds each
 * engine's busy time inside the step's intervals from the op log and
 * writes the steps into summary.json (deploy/src/steps.c). In data mode PE
 * 0 of each rank saves the tensors the step wrote once the rank is done
 * with it. */
#include "tl_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/daemon.h"
#include "tl_io.h"

#define PROG_ALIGN 4096u

static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t tensor_bytes(const struct tl_prog_tensor *t)
{
	return (uint64_t)t->rows * t->cols * tl_dtype_size(t->dtype);
}

static int find_tensor(const struct tl_program *p, const char *name)
{
	for (uint32_t i = 0; i < p->n_tensors; i++)
		if (!strcmp(p->tensors[i].name, name))
			return (int)i;
	return -1;
}

/* Every binding names a declared tensor, every tensor is well formed. */
static void validate(struct tl *tl, struct tl_site at, const struct tl_program *p)
{
	for (uint32_t i = 0; i < p->n_tensors; i++) {
		const struct tl_prog_tensor *t = &p->tensors[i];

		if (!t->name || !t->rows || !t->cols || (unsigned)t->dtype > TL_F32 ||
		    (unsigned)t->init > TL_INIT_RANDOM || find_tensor(p, t->name) != (int)i)
			tl_abort(tl, at, RT_EINVAL,
				 "program tensor %u ('%s'): needs a unique name, rows and cols >= 1, "
				 "a dtype and an init", i, t->name ? t->name : "?");
	}
	for (uint32_t k = 0; k < p->n_steps; k++)
		for (uint32_t j = 0; j < k; j++)
			if (!p->steps[k].name || !strcmp(p->steps[k].name, p->steps[j].name))
				tl_abort(tl, at, RT_EINVAL, "program step %u ('%s'): needs a unique "
					 "name", k, p->steps[k].name ? p->steps[k].name : "?");
	for (uint32_t k = 0; k < p->n_steps; k++)
		for (uint32_t b = 0; b < TL_PROG_MAX_BINDS && p->steps[k].binds[b][0]; b++)
			if (!p->steps[k].binds[b][1] || find_tensor(p, p->steps[k].binds[b][1]) < 0)
				tl_abort(tl, at, RT_EINVAL,
					 "program step '%s': parameter '%s' is bound to '%s', which the "
					 "program does not declare", p->steps[k].name,
					 p->steps[k].binds[b][0],
					 p->steps[k].binds[b][1] ? p->steps[k].binds[b][1] : "(nothing)");
}

static void place(struct tl *tl, struct tl_site at, const struct tl_program *p)
{
	uint64_t addr = 0, hbm = tl->s.cfg->hbm_bytes;

	tl->prog_addr = calloc(p->n_tensors ? p->n_tensors : 1, sizeof(*tl->prog_addr));
	tl->prog_out = calloc(p->n_tensors ? p->n_tensors : 1, sizeof(*tl->prog_out));
	if (!tl->prog_addr || !tl->prog_out)
		tl_abort(tl, at, RT_ENOMEM, "program: out of memory");
	for (uint32_t i = 0; i < p->n_tensors; i++) {
		uint64_t bytes = tensor_bytes(&p->tensors[i]);

		if (bytes > hbm || addr > hbm - bytes)
			tl_abort(tl, at, RT_EINVAL,
				 "program tensor '%s' (%ux%u, %llu bytes) does not fit: the tensors "
				 "before it take %llu of the %llu bytes of HBM (memory.hbm_bytes)",
				 p->tensors[i].name, p->tensors[i].rows, p->tensors[i].cols,
				 (unsigned long long)bytes, (unsigned long long)addr,
				 (unsigned long long)hbm);
		tl->prog_addr[i] = addr;
		addr = (addr + bytes + PROG_ALIGN - 1) / PROG_ALIGN * PROG_ALIGN;
	}
}

/* Rank r's copy of tensor i (as HBM holds it: rounded to its dtype) into
 * FILE, float32 [ranks, rows, cols]. */
static void save(struct tl *tl, struct tl_site at, const struct tl_program *p, uint32_t i,
		 const char *file)
{
	const struct tl_prog_tensor *t = &p->tensors[i];
	uint64_t n = (uint64_t)t->rows * t->cols;
	uint64_t shape[3] = { tl->s.ranks, t->rows, t->cols };
	float *v = malloc((size_t)n * sizeof(float));

	if (!v)
		tl_abort(tl, at, RT_ENOMEM, "program: out of memory saving '%s'", t->name);
	tl_hbm_read_at(tl, at, tl->prog_addr[i], t->dtype, v, (size_t)n);
	tl_npy_write_part_at(tl, at, file, TL_NPY_F32, shape, 3, tl->s.rank * n, n, v);
	free(v);
}

/* The rank a tensor's random values are drawn for. */
static uint32_t init_rank(const struct tl *tl, const struct tl_prog_tensor *t)
{
	uint32_t div = t->rank_div ? t->rank_div : 1, mod = t->rank_mod ? t->rank_mod : tl->s.ranks;

	return tl->s.rank / div % mod;
}

/* Data mode, PE 0 of each rank: the initialised tensors, saved. Random
 * element e of tensor i on rank r is offset + scale * u, u uniform in
 * [-1, 1) from splitmix64 of (seed, the tensor's name, (r / rank_div) %
 * rank_mod, e). */
static void init_tensors(struct tl *tl, struct tl_site at, const struct tl_program *p)
{
	char file[300];

	if (tl->s.mode != TL_DATA || tl->s.pe != 0)
		return;
	for (uint32_t i = 0; i < p->n_tensors; i++) {
		const struct tl_prog_tensor *t = &p->tensors[i];
		uint64_t n = (uint64_t)t->rows * t->cols, key = tl->s.seed;
		float *v;

		if (t->init == TL_INIT_NONE)
			continue;
		v = calloc((size_t)n, sizeof(float));
		if (!v)
			tl_abort(tl, at, RT_ENOMEM, "program: out of memory for '%s'", t->name);
		for (const char *c = t->name; *c; c++)
			key = mix(key ^ (uint8_t)*c);
		key = mix(key ^ ((uint64_t)init_rank(tl, t) + 1));
		for (uint64_t e = 0; t->init == TL_INIT_RANDOM && e < n; e++)
			v[e] = (float)(t->offset +
				       t->scale * ((double)(mix(key ^ mix(e)) >> 11) * 0x1.0p-52 - 1.0));
		tl_hbm_write_at(tl, at, tl->prog_addr[i], t->dtype, v, (size_t)n);
		free(v);
		snprintf(file, sizeof(file), "%s.npy", t->name);
		save(tl, at, p, i, file);
	}
}

/* A step's kernel: its own, or found by name (built in, or path/lib.so:NAME). */
static tl_kernel_fn step_kernel(struct tl *tl, struct tl_site at, const struct tl_prog_step *s,
				struct tl_kernel_ref *ref)
{
	if (s->kernel)
		return s->kernel;
	if (!s->kernel_name || tl_kernel_find(s->kernel_name, ref) != RT_EOK)
		tl_abort(tl, at, RT_EINVAL, "program step '%s': %s", s->name,
			 s->kernel_name ? rt_last_error() : "no kernel");
	return ref->fn;
}

/* The run's arguments, then the step's: the step's win (the last one of
 * a name wins). */
static struct tl_arg *step_args(struct tl *tl, struct tl_site at, const struct tl_prog_step *s,
				uint32_t *n)
{
	uint32_t k = 0;
	struct tl_arg *a;

	while (k < TL_PROG_MAX_ARGS && s->args[k][0])
		k++;
	free(tl->prog_args);
	a = tl->prog_args = calloc(tl->s.n_args + k + 1, sizeof(*a));
	if (!a)
		tl_abort(tl, at, RT_ENOMEM, "program: out of memory");
	memcpy(a, tl->s.args, tl->s.n_args * sizeof(*a));
	for (uint32_t i = 0; i < k; i++)
		a[tl->s.n_args + i] = (struct tl_arg){ s->args[i][0], s->args[i][1] };
	*n = tl->s.n_args + k;
	return a;
}

static void run_step(struct tl *tl, struct tl_site at, const struct tl_program *p, uint32_t k)
{
	const struct tl_prog_step *s = &p->steps[k];
	const char *program = tl->s.kernel_name;
	struct tl_kernel_ref ref = { 0 };
	struct tl_args args = { 0 };
	uint64_t start = tl->clock_ps, cycles = tl->tot.dispatch_cycles;
	uint64_t commands = tl->tot.commands, ipcq = tl->tot.ipcq_bytes;
	tl_kernel_fn fn = step_kernel(tl, at, s, &ref);
	struct tl_arg *items;
	char file[300];
	int rc;

	items = step_args(tl, at, s, &args.n);
	args.items = items;
	args.owner = tl;
	args.n_global = tl->s.n_args;
	args.binds = s->binds;
	memset(tl->prog_out, 0, p->n_tensors * sizeof(*tl->prog_out));
	tl->s.kernel_name = s->name; /* error lines name the step */
	rc = fn(tl, &args);
	if (rc != 0)
		tl_abort(tl, at, RT_EKERNEL, "program step '%s' (kernel %s) returned %d", s->name,
			 s->kernel_name ? s->kernel_name : "?", rc);
	tl_wait_all(tl, at);
	tl->s.kernel_name = program;
	tl_barrier_at(tl, at); /* the next step sees what the whole rank wrote */
	if (tl->s.port->trace_step)
		tl->s.port->trace_step(tl->s.port_ctx, s->name, start, tl->clock_ps);
	rt_buf_printf(&tl->steps_log, "%u\t%s\t%s\t%llu\t%llu\t%llu\t%llu\t%llu\n", k, s->name,
		      s->kernel_name ? s->kernel_name : "?", (unsigned long long)start,
		      (unsigned long long)tl->clock_ps,
		      (unsigned long long)(tl->tot.dispatch_cycles - cycles),
		      (unsigned long long)(tl->tot.commands - commands),
		      (unsigned long long)(tl->tot.ipcq_bytes - ipcq));
	for (uint32_t i = 0; tl->s.mode == TL_DATA && tl->s.pe == 0 && i < p->n_tensors; i++)
		if (tl->prog_out[i]) {
			snprintf(file, sizeof(file), "%s.%s.npy", s->name, p->tensors[i].name);
			save(tl, at, p, i, file);
		}
	free(items);
	tl->prog_args = NULL;
	tl_kernel_ref_release(&ref);
}

int tl_program_run_at(struct tl *tl, struct tl_site at, const struct tl_program *p)
{
	if (tl->prog)
		tl_abort(tl, at, RT_EKERNEL, "tl_program_run inside a program step");
	validate(tl, at, p);
	tl->prog = p;
	place(tl, at, p);
	init_tensors(tl, at, p);
	for (uint32_t k = 0; k < p->n_steps; k++)
		run_step(tl, at, p, k);
	tl->prog = NULL;
	return 0;
}

static int bound_tensor(const struct tl_args *args, const char *name)
{
	const struct tl *tl = args->owner;

	for (uint32_t b = 0; args->binds && tl && tl->prog && b < TL_PROG_MAX_BINDS &&
			     args->binds[b][0];
	     b++)
		if (!strcmp(args->binds[b][0], name))
			return find_tensor(tl->prog, args->binds[b][1]);
	return -1;
}

bool tl_arg_has_tensor(const struct tl_args *args, const char *name)
{
	return bound_tensor(args, name) >= 0;
}

struct tl_hbm tl_arg_tensor(const struct tl_args *args, const char *name,
			    enum tl_access access)
{
	struct tl *tl = args->owner;
	int i = bound_tensor(args, name);
	char binds[256] = "";

	if (i < 0) {
		for (uint32_t b = 0; args->binds && b < TL_PROG_MAX_BINDS && args->binds[b][0]; b++)
			snprintf(binds + strlen(binds), sizeof(binds) - strlen(binds), "%s%s",
				 b ? ", " : "", args->binds[b][0]);
		tl_abort(tl, (struct tl_site){ NULL, 0 }, RT_EINVAL,
			 "asks for tensor '%s', which %s (it binds: %s)", name,
			 tl && tl->prog ? "this program step does not bind"
					: "only a program step can bind (tl_program_run)",
			 binds[0] ? binds : "nothing");
	}
	if (access == TL_OUT)
		tl->prog_out[i] = true;
	return (struct tl_hbm){ tl->prog_addr[i], tl->prog->tensors[i].rows,
				tl->prog->tensors[i].cols, tl->prog->tensors[i].dtype };
}

void tl_program_report(struct tl *tl)
{
	char file[64], path[1200];
	FILE *f;

	if (!tl->steps_log.len || !tl->s.port->output_path)
		return;
	snprintf(file, sizeof(file), "%s/steps.%u.%u", RT_PARTS_DIR, tl->s.rank, tl->s.pe);
	if (tl->s.port->output_path(tl->s.port_ctx, file, path, sizeof(path)) != RT_EOK)
		return;
	f = fopen(path, "wx");
	if (!f)
		return;
	fwrite(tl->steps_log.data, 1, tl->steps_log.len, f);
	fclose(f);
}

void tl_program_release(struct tl *tl)
{
	free(tl->prog_addr);
	free(tl->prog_out);
	free(tl->prog_args);
	if (tl->prog_text)
		tl_program_text_release(tl->prog_text);
	free(tl->prog_text);
	tl->prog_addr = NULL;
	tl->prog_out = NULL;
	tl->prog_args = NULL;
	tl->prog_text = NULL;
	rt_buf_release(&tl->steps_log);
}
