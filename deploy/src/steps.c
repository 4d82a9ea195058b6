/* steps.c — per-step statistics of a program (steps.h).
 *
 * A step's figures in summary.json:
 *   start_ps, end_ps   when its first PE started it and its last PE ended
 *   elapsed_ps         end_ps minus the previous step's end_ps (the first:
 *                      minus 0): its share of the run, barrier included, so
 *                      the steps' elapsed times add up to the latency
 *   busy_ps            per engine, summed over the PEs: the union of the
 *                      engine's op-log intervals that began inside the
 *                      PE's interval of this step (a DMA channel's
 *                      transfers in flight overlap: counted once)
 *   busiest_ps         per engine, the busiest single PE
 *   dispatch_cycles, commands, ipcq_bytes   summed over the PEs */
#include "steps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/buf.h"
#include "rt/component.h"
#include "rt/daemon.h"

static const char *const engine_names[KB_STEP_ENGINES] = { "dma_read", "dma_write", "gemm",
							   "math" };

static enum rt_err read_file(const char *path, struct rt_buf *b)
{
	FILE *f = fopen(path, "rb");
	char chunk[4096];
	size_t n;

	b->len = 0;
	if (!f)
		return errno == ENOENT ? RT_EOK : rt_fail(RT_EIO, "cannot read %s", path);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if (rt_buf_append(b, chunk, n)) {
			fclose(f);
			return rt_fail(RT_ENOMEM, "no memory for %s", path);
		}
	fclose(f);
	return rt_buf_append(b, "", 1) ? rt_fail(RT_ENOMEM, "no memory for %s", path) : RT_EOK;
}

/* One line of a steps part: index name kernel start end dispatch
 * commands ipcq_bytes, tab-separated. */
static enum rt_err take_line(struct kb_steps *s, uint32_t pe, char *line, const char *path)
{
	char *f[8], *save = NULL;
	int n = 0;
	uint32_t k;
	struct kb_step *st;

	for (char *p = strtok_r(line, "\t", &save); p && n < 8; p = strtok_r(NULL, "\t", &save))
		f[n++] = p;
	if (n != 8)
		return rt_fail(RT_EPROTOCOL, "%s: a step line has %d fields, not 8", path, n);
	k = (uint32_t)strtoul(f[0], NULL, 10);
	if (k >= s->n) {
		size_t grown = (size_t)k + 1;
		struct kb_step *steps = realloc(s->steps, grown * sizeof(*steps));

		if (!steps)
			return rt_fail(RT_ENOMEM, "no memory for %u steps", k + 1);
		memset(steps + s->n, 0, (grown - s->n) * sizeof(*steps));
		for (size_t i = s->n; i < grown; i++)
			steps[i].start_ps = UINT64_MAX;
		s->steps = steps;
		s->n = (uint32_t)grown;
	}
	st = &s->steps[k];
	snprintf(st->name, sizeof(st->name), "%s", f[1]);
	snprintf(st->kernel, sizeof(st->kernel), "%s", f[2]);
	s->pe_start[(size_t)pe * s->n_cap + k] = strtoull(f[3], NULL, 10);
	s->pe_end[(size_t)pe * s->n_cap + k] = strtoull(f[4], NULL, 10);
	if (s->pe_start[(size_t)pe * s->n_cap + k] < st->start_ps)
		st->start_ps = s->pe_start[(size_t)pe * s->n_cap + k];
	if (s->pe_end[(size_t)pe * s->n_cap + k] > st->end_ps)
		st->end_ps = s->pe_end[(size_t)pe * s->n_cap + k];
	st->dispatch_cycles += strtoull(f[5], NULL, 10);
	st->commands += strtoull(f[6], NULL, 10);
	st->ipcq_bytes += strtoull(f[7], NULL, 10);
	return RT_EOK;
}

enum rt_err kb_steps_read(const struct rt_job *job, const struct rt_topology *topo,
			  struct kb_steps *out)
{
	uint32_t pes = job->config.pes, ranks = job->config.ranks;
	struct rt_buf b;
	enum rt_err err = RT_EOK;

	memset(out, 0, sizeof(*out));
	out->n_pes = ranks * pes;
	out->pes_per_rank = pes;
	out->n_cap = 1024; /* steps a program may have (more: an error) */
	out->pe_start = calloc((size_t)out->n_pes * out->n_cap, sizeof(uint64_t));
	out->pe_end = calloc((size_t)out->n_pes * out->n_cap, sizeof(uint64_t));
	if (!out->pe_start || !out->pe_end)
		return rt_fail(RT_ENOMEM, "no memory for the steps of %u PEs", out->n_pes);
	rt_buf_init(&b);
	for (uint32_t id = 0; !err && id < topo->n_components; id++) {
		const struct rt_component_desc *c = &topo->components[id];
		char path[RT_PATH_MAX + 64], *save = NULL;

		if (strcmp(c->ops->name, "host"))
			continue;
		snprintf(path, sizeof(path), "%s/%s/steps.%u.%u", job->out_dir, RT_PARTS_DIR,
			 c->rank, c->pe);
		err = read_file(path, &b);
		for (char *line = b.len ? strtok_r(b.data, "\n", &save) : NULL; !err && line;
		     line = strtok_r(NULL, "\n", &save))
			if (*line)
				err = take_line(out, c->rank * pes + c->pe, line, path);
		if (!err && out->n > out->n_cap)
			err = rt_fail(RT_EPROTOCOL, "a program of %u steps: at most %u", out->n,
				      out->n_cap);
	}
	rt_buf_release(&b);
	if (!err && out->n) {
		out->busy = calloc((size_t)out->n * out->n_pes * KB_STEP_ENGINES, sizeof(uint64_t));
		out->chan_end = calloc((size_t)out->n_pes * KB_STEP_ENGINES, sizeof(uint64_t));
		if (!out->busy || !out->chan_end)
			err = rt_fail(RT_ENOMEM, "no memory for the steps' busy times");
	}
	return err;
}

void kb_steps_record(struct kb_steps *s, uint64_t start, uint64_t end, uint32_t rank,
		     uint32_t pe, const char *engine)
{
	uint64_t from;
	uint32_t e = KB_STEP_ENGINES, p, k;

	if (!s->n)
		return;
	for (uint32_t i = 0; i < KB_STEP_ENGINES; i++)
		if (!strcmp(engine, engine_names[i]))
			e = i;
	p = rank * s->pes_per_rank + pe;
	if (e == KB_STEP_ENGINES || p >= s->n_pes)
		return;
	for (k = 0; k < s->n; k++) /* a handful of steps: a scan */
		if (start >= s->pe_start[(size_t)p * s->n_cap + k] &&
		    start <= s->pe_end[(size_t)p * s->n_cap + k])
			break;
	if (k == s->n)
		return; /* between steps (a barrier) */
	from = start > s->chan_end[p * KB_STEP_ENGINES + e] ? start
							    : s->chan_end[p * KB_STEP_ENGINES + e];
	if (end > from)
		s->busy[((size_t)k * s->n_pes + p) * KB_STEP_ENGINES + e] += end - from;
	if (end > s->chan_end[p * KB_STEP_ENGINES + e])
		s->chan_end[p * KB_STEP_ENGINES + e] = end;
}

void kb_steps_finish(struct kb_steps *s)
{
	for (uint32_t k = 0; k < s->n; k++)
		for (uint32_t p = 0; p < s->n_pes; p++)
			for (uint32_t e = 0; e < KB_STEP_ENGINES; e++) {
				uint64_t b = s->busy[((size_t)k * s->n_pes + p) * KB_STEP_ENGINES + e];

				s->steps[k].busy_ps[e] += b;
				if (b > s->steps[k].busiest_ps[e])
					s->steps[k].busiest_ps[e] = b;
			}
}

void kb_steps_json(const struct kb_steps *s, struct rt_json *j)
{
	uint64_t prev = 0;

	if (!s || !s->n)
		return;
	rt_json_array(j, "steps", RT_JSON_LINES);
	for (uint32_t k = 0; k < s->n; k++) {
		const struct kb_step *st = &s->steps[k];

		rt_json_object(j, NULL, RT_JSON_INLINE);
		rt_json_str(j, "name", st->name);
		rt_json_str(j, "kernel", st->kernel);
		rt_json_u64(j, "start_ps", st->start_ps == UINT64_MAX ? 0 : st->start_ps);
		rt_json_u64(j, "end_ps", st->end_ps);
		rt_json_u64(j, "elapsed_ps", st->end_ps > prev ? st->end_ps - prev : 0);
		rt_json_u64(j, "dispatch_cycles", st->dispatch_cycles);
		rt_json_u64(j, "commands", st->commands);
		rt_json_u64(j, "ipcq_bytes", st->ipcq_bytes);
		rt_json_object(j, "busy_ps", RT_JSON_INLINE);
		for (uint32_t e = 0; e < KB_STEP_ENGINES; e++)
			rt_json_u64(j, engine_names[e], st->busy_ps[e]);
		rt_json_close(j);
		rt_json_object(j, "busiest_ps", RT_JSON_INLINE);
		for (uint32_t e = 0; e < KB_STEP_ENGINES; e++)
			rt_json_u64(j, engine_names[e], st->busiest_ps[e]);
		rt_json_close(j);
		rt_json_close(j);
		prev = st->end_ps > prev ? st->end_ps : prev;
	}
	rt_json_close(j);
}

void kb_steps_print(const struct kb_steps *s)
{
	uint64_t prev = 0;

	if (!s || !s->n)
		return;
	printf("  %-22s %10s %10s   %s\n", "step", "elapsed", "share", "busiest engine (one PE)");
	for (uint32_t k = 0; k < s->n; k++) {
		const struct kb_step *st = &s->steps[k];
		uint64_t el = st->end_ps > prev ? st->end_ps - prev : 0, last = s->steps[s->n - 1].end_ps;
		uint32_t best = 0;

		for (uint32_t e = 1; e < KB_STEP_ENGINES; e++)
			if (st->busiest_ps[e] > st->busiest_ps[best])
				best = e;
		printf("  %-22.22s %7.3f us %9.1f%%   %s %.3f us\n", st->name, (double)el / 1e6,
		       last ? 100.0 * (double)el / (double)last : 0.0, engine_names[best],
		       (double)st->busiest_ps[best] / 1e6);
		prev = st->end_ps > prev ? st->end_ps : prev;
	}
}

void kb_steps_release(struct kb_steps *s)
{
	free(s->steps);
	free(s->pe_start);
	free(s->pe_end);
	free(s->busy);
	free(s->chan_end);
	memset(s, 0, sizeof(*s));
}
