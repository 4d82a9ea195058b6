/* report.c — summary.json and the human report on stdout.
 *
 * summary.json puts one key per line. Everything above "transport" is a
 * function of the inputs and config alone (byte-identical across runs,
 * transports and colocations); "transport" and the keys after it describe
 * how this particular run went (daemons, windows, wall time). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "energy.h"
#include "ff_out.h"
#include "release.h"
#include "report.h"
#include "stats_out.h"
#include "trace_out.h"
#include "rt/buf.h"
#include "rt/component.h"
#include "rt/config_doc.h"
#include "rt/json.h"
#include "steps.h"

static int stat_cmp(const void *a, const void *b)
{
	return strcmp((*(const struct kb_stat *const *)a)->name,
		      (*(const struct kb_stat *const *)b)->name);
}

/* A statistic set as an object, keys sorted by name (a stable order). */
static void json_set(struct rt_json *j, const char *key, const struct kb_stat_set *set)
{
	const struct kb_stat **order = calloc(set->n ? set->n : 1, sizeof(*order));

	if (!order) {
		j->err = rt_fail(RT_ENOMEM, "cannot sort %zu statistics", set->n);
		return;
	}
	for (size_t i = 0; i < set->n; i++)
		order[i] = &set->items[i];
	qsort(order, set->n, sizeof(*order), stat_cmp);
	rt_json_object(j, key, RT_JSON_LINES);
	for (size_t i = 0; i < set->n; i++)
		rt_json_u64(j, order[i]->name, order[i]->value);
	rt_json_close(j);
	free(order);
}

/* The resources utilisation is reported for (docs/metrics.md): each
 * engine, the DMA channels, the rank's HBM and its IPCQ links. */
enum resource { RES_DMA_READ, RES_DMA_WRITE, RES_GEMM, RES_MATH, RES_HBM, RES_LINK, RES_N };

static const char *const resource_names[RES_N] = { "dma_read", "dma_write", "gemm",
						   "math",     "hbm",       "link" };

/* Derived PE metrics, present when the run had kernel hosts. */
struct pe_metrics {
	bool present;
	uint64_t latency_ps;
	int bound;                 /* resource closest to its peak throughput */
	double hbm_bw_util;        /* busiest rank's HBM bytes / (hbm peak x latency) */
	uint64_t hbm_bytes;
	double busy[RES_N];        /* busiest instance: time occupied / latency */
	double throughput[RES_N];  /* busiest instance: work / (peak rate x latency) */
	bool has_path;             /* the critical path, summing to latency_ps */
	struct rt_path path;
	uint64_t tiles;            /* reported by attention kernels */
	double dispatch_per_tile;
	uint64_t peak_scratch;
	uint64_t dma_reads;
	uint64_t ipcq_bytes;
	/* ring figures (docs/attention.md) */
	uint64_t ipcq_transfer;    /* link busy time, every rank's links */
	uint64_t ipcq_wait;        /* kernel waits on receives */
	uint64_t ipcq_exposed;     /* link time on the critical path */
	double ipcq_hidden;        /* 1 - link busy time on the path / link busy time */
	/* a model's layer (llama_*_step): the whole model, and the memory
	 * roofline of the layer (its bytes over the rank's HBM peak) */
	uint64_t model_layers;
	uint64_t roofline_bytes, roofline_ps;
};

/* What the kernel hosts reported: per-tile dispatch, scratch, IPCQ. */
static void kernel_metrics(const struct kb_agg *agg, struct pe_metrics *m)
{
	const struct kb_stat_set *host = kb_agg_kind(agg, "host");
	const uint64_t *cp = m->path.ps;

	m->tiles = kb_stat_get(host, "tiles");
	m->dispatch_per_tile = m->tiles ? (double)kb_stat_get(host, "dispatch_cycles") /
						  (double)m->tiles
					: 0.0;
	m->peak_scratch = kb_stat_get(host, "peak_scratch_bytes");
	m->dma_reads = kb_stat_get(kb_agg_kind(agg, "dma"), "dma_read_count");
	m->ipcq_bytes = kb_stat_get(host, "ipcq_bytes");
	/* the link busy time is counted by the hosts (one PE per rank) or by
	 * the rank link components (several) */
	m->ipcq_transfer = kb_stat_get(&agg->totals, "ipcq_link_busy_ps");
	m->ipcq_wait = kb_stat_get(host, "ipcq_recv_wait_ps");
	m->ipcq_exposed = cp[RT_PATH_LINK_QUEUEING] + cp[RT_PATH_LINK_SERIALISATION] +
			  cp[RT_PATH_LINK_LATENCY];
	/* the path's link-busy segments are disjoint in time and each lies in
	 * a link's busy time, so the fraction is in [0, 1] without a clamp */
	m->ipcq_hidden = m->ipcq_transfer
				 ? 1.0 - (double)(cp[RT_PATH_LINK_QUEUEING] +
						  cp[RT_PATH_LINK_SERIALISATION]) /
						 (double)m->ipcq_transfer
				 : 0.0;
}

/* The largest value of statistic `name` over components of the kinds
 * `a` and `b` (b may be NULL). */
static uint64_t max_of(const struct kb_agg *agg, const char *a, const char *b, const char *name)
{
	uint64_t x = kb_stat_get(kb_agg_kind_max(agg, a), name);
	uint64_t y = b ? kb_stat_get(kb_agg_kind_max(agg, b), name) : 0;

	return x > y ? x : y;
}

/* The IPCQ link (a rank and direction) with the most of `what`. */
static uint64_t busiest_link(const struct kb_agg *agg, const char *left, const char *right)
{
	uint64_t l = max_of(agg, "host", "link", left), r = max_of(agg, "host", "link", right);

	return l > r ? l : r;
}

/* Peak MACs per PE cycle of the GEMM: the array's R x C (the roofline's
 * gemm.macs_per_cycle when set; the tensor engine's array at its own clock,
 * gemm.clock_mhz). A plug-in model is measured against the array. */
static double gemm_peak(const struct rt_config *cfg)
{
	double array = (double)cfg->gemm_array_rows * (double)cfg->gemm_array_cols;

	if (!strcmp(cfg->gemm_model, "roofline") && cfg->gemm_macs_per_cycle)
		return (double)cfg->gemm_macs_per_cycle;
	if (!strcmp(cfg->gemm_model, "tensor_engine") && cfg->gemm_clock_mhz && cfg->clock_mhz)
		return array * (double)cfg->gemm_clock_mhz / (double)cfg->clock_mhz;
	return array;
}

/* busy_util and throughput_util of every resource (docs/metrics.md). */
static void utilisation(const struct rt_config *cfg, const struct kb_agg *agg,
			struct pe_metrics *m)
{
	double lat = (double)m->latency_ps;
	double cycles = lat / (double)rt_config_cycle_ps(cfg);
	/* a channel moves a transfer on up to dma.queues queues at once */
	double dma_peak = (double)cfg->dma_bytes_per_cycle * (cfg->dma_queues ? cfg->dma_queues : 1) *
			  cycles;

	m->busy[RES_DMA_READ] = (double)max_of(agg, "dma", NULL, "dma_read_busy_ps") / lat;
	m->busy[RES_DMA_WRITE] = (double)max_of(agg, "dma", NULL, "dma_write_busy_ps") / lat;
	m->busy[RES_GEMM] = (double)max_of(agg, "gemm", NULL, "busy_ps") / lat;
	m->busy[RES_MATH] = (double)max_of(agg, "math", NULL, "busy_ps") / lat;
	m->busy[RES_HBM] = (double)agg->hbm_busy_ps / lat;
	m->busy[RES_LINK] = (double)busiest_link(agg, "ipcq_link_left_busy_ps",
						 "ipcq_link_right_busy_ps") / lat;
	m->throughput[RES_DMA_READ] = (double)max_of(agg, "dma", NULL, "dma_read_bytes") / dma_peak;
	m->throughput[RES_DMA_WRITE] = (double)max_of(agg, "dma", NULL, "dma_write_bytes") /
				       dma_peak;
	m->throughput[RES_GEMM] = (double)max_of(agg, "gemm", NULL, "gemm_elements") /
				  (gemm_peak(cfg) * cycles);
	m->throughput[RES_MATH] = (double)max_of(agg, "math", NULL, "math_elements") /
				  ((double)cfg->math_lanes * cycles);
	m->throughput[RES_HBM] = m->hbm_bw_util;
	m->throughput[RES_LINK] = (double)busiest_link(agg, "ipcq_link_left_bytes",
						       "ipcq_link_right_bytes") /
				  ((double)cfg->ipcq_bytes_per_cycle * cycles);
	m->bound = 0;
	for (int i = 1; i < RES_N; i++) /* a tie keeps the first */
		if (m->throughput[i] > m->throughput[m->bound])
			m->bound = i;
}

static void pe_metrics(const struct rt_job *job, const struct kb_agg *agg, struct pe_metrics *m)
{
	const struct rt_config *cfg = &job->config;
	const struct kb_stat_set *host = kb_agg_kind(agg, "host"), *dma = kb_agg_kind(agg, "dma");
	uint64_t cycle = rt_config_cycle_ps(cfg);

	memset(m, 0, sizeof(*m));
	m->latency_ps = kb_stat_get(host, "kernel_end_ps");
	m->present = agg->n_kinds && host->n;
	if (!m->present || !m->latency_ps)
		return;
	/* HBM bytes (reads and writes) of the busiest rank over the rank's
	 * peak for the whole latency. The rank memory component counts them;
	 * with hbm.model = ideal there is none, and every rank moves the same
	 * DMA bytes in the PE workloads, so the mean rank stands in. */
	m->hbm_bytes = kb_stat_get(kb_agg_kind_max(agg, "hbm"), "hbm_bytes");
	if (!kb_agg_kind(agg, "hbm")->n)
		m->hbm_bytes = (kb_stat_get(dma, "dma_read_bytes") +
				kb_stat_get(dma, "dma_write_bytes")) /
			       (cfg->ranks ? cfg->ranks : 1);
	m->hbm_bw_util = (double)m->hbm_bytes /
			 ((double)cfg->hbm_bytes_per_cycle * ((double)m->latency_ps / (double)cycle));
	m->has_path = agg->has_path && agg->path_ps == m->latency_ps;
	if (m->has_path)
		m->path = agg->path;
	utilisation(cfg, agg, m);
	kernel_metrics(agg, m);
	m->model_layers = kb_stat_get(host, "model_layers");
	m->roofline_bytes = kb_stat_get(host, "roofline_bytes");
	m->roofline_ps = (m->roofline_bytes + cfg->hbm_bytes_per_cycle - 1) /
			 cfg->hbm_bytes_per_cycle * cycle;
}

static void json_util(struct rt_json *j, const char *key, const double *v)
{
	rt_json_object(j, key, RT_JSON_INLINE);
	for (int i = 0; i < RES_N; i++)
		rt_json_fixed(j, resource_names[i], v[i], 4);
	rt_json_close(j);
}

static void summary_pe(struct rt_json *j, const struct pe_metrics *m)
{
	rt_json_u64(j, "latency_ps", m->latency_ps);
	rt_json_str(j, "bound_engine", resource_names[m->bound]);
	rt_json_fixed(j, "bound_util", m->throughput[m->bound], 4);
	rt_json_fixed(j, "hbm_bw_util", m->hbm_bw_util, 4);
	rt_json_fixed(j, "dma_read_util", m->busy[RES_DMA_READ], 4);
	json_util(j, "busy_util", m->busy);
	json_util(j, "throughput_util", m->throughput);
	if (m->has_path) {
		rt_json_object(j, "critical_path", RT_JSON_INLINE);
		for (int c = 0; c < RT_PATH_CLASSES; c++)
			rt_json_u64(j, rt_path_class_name((enum rt_path_class)c), m->path.ps[c]);
		rt_json_close(j);
	} else {
		rt_json_null(j, "critical_path");
	}
	rt_json_u64(j, "tiles", m->tiles);
	rt_json_fixed(j, "dispatch_cycles_per_tile", m->dispatch_per_tile, 2);
	rt_json_u64(j, "peak_scratch_bytes", m->peak_scratch);
	rt_json_u64(j, "dma_read_count", m->dma_reads);
	rt_json_u64(j, "ipcq_bytes", m->ipcq_bytes);
	rt_json_u64(j, "ipcq_transfer_ps", m->ipcq_transfer);
	rt_json_u64(j, "ipcq_wait_ps", m->ipcq_wait);
	if (m->has_path)
		rt_json_u64(j, "ipcq_exposed_ps", m->ipcq_exposed);
	else
		rt_json_null(j, "ipcq_exposed_ps");
	/* no IPCQ traffic (or no path): nothing to hide, the fraction is undefined */
	if (m->ipcq_transfer && m->has_path)
		rt_json_fixed(j, "ipcq_hidden_fraction", m->ipcq_hidden, 4);
	else
		rt_json_null(j, "ipcq_hidden_fraction");
	if (m->model_layers) { /* identical layers: the model is layers x one */
		rt_json_u64(j, "model_layers", m->model_layers);
		rt_json_u64(j, "model_latency_ps", m->model_layers * m->latency_ps);
	}
	if (m->roofline_bytes) {
		rt_json_u64(j, "roofline_bytes", m->roofline_bytes);
		rt_json_u64(j, "roofline_ps", m->roofline_ps);
		rt_json_fixed(j, "roofline_fraction",
			      (double)m->roofline_ps / (double)m->latency_ps, 4);
	}
}

/* What the run ran: non-finite counts, the kernel arguments with their
 * resolved values, the model names and the whole configuration (all
 * deterministic, so above "transport"). */
static void summary_provenance(struct rt_json *j, const struct rt_job *job,
			       const struct kb_run_facts *f, const struct kb_agg *agg)
{
	const struct kb_stat_set *host = kb_agg_kind(agg, "host");

	rt_json_u64(j, "nonfinite_inputs", kb_stat_get(host, "nonfinite_inputs"));
	rt_json_u64(j, "nonfinite_outputs", kb_stat_get(host, "nonfinite_outputs"));
	rt_json_object(j, "args", RT_JSON_LINES);
	for (const char *p = f->args; p && *p; p = strchr(p, '\n') + 1) {
		char name[64], value[256];
		size_t nlen = strcspn(p, "\t");
		const char *v = p + nlen + 1;

		v += strcspn(v, "\t") + 1; /* skip "given"/"default" */
		snprintf(name, sizeof(name), "%.*s", (int)nlen, p);
		snprintf(value, sizeof(value), "%.*s", (int)strcspn(v, "\n"), v);
		rt_json_str(j, name, value);
	}
	/* a workload without kernel hosts (traffic) reads its --arg itself:
	 * record them as given (once per name, the value it reads), so
	 * `run --from` can run it again */
	for (uint32_t i = 0; (!f->args || !*f->args) && i < job->n_args; i++) {
		bool seen = false;

		for (uint32_t k = 0; k < i && !seen; k++)
			seen = !strcmp(job->args[k].name, job->args[i].name);
		if (!seen)
			rt_json_str(j, job->args[i].name, rt_job_arg_str(job, job->args[i].name, ""));
	}
	rt_json_close(j);
	rt_json_object(j, "models", RT_JSON_INLINE);
	rt_json_str(j, "dma", job->config.dma_model);
	rt_json_str(j, "gemm", job->config.gemm_model);
	rt_json_str(j, "math", job->config.math_model);
	rt_json_close(j);
	rt_config_json(j, "config", &job->config);
}

/* The build and the command line as typed: how this run was asked for. */
static void summary_invocation(struct rt_json *j, const struct kb_run_facts *f)
{
	rt_json_str(j, "version", kb_version());
	rt_json_array(j, "command", RT_JSON_INLINE);
	rt_json_str(j, NULL, "kernbench");
	for (int i = 0; i < f->argc; i++)
		rt_json_str(j, NULL, f->argv[i]);
	rt_json_close(j);
}

static enum rt_err summary_json(const struct rt_job *job, const struct rt_topology *topo,
				const struct kb_run_facts *f, const struct kb_agg *agg,
				const struct pe_metrics *m, const struct kb_energy *energy,
				struct rt_buf *b)
{
	const struct rt_config *cfg = &job->config;
	struct rt_json j;

	rt_json_init(&j, b);
	rt_json_object(&j, NULL, RT_JSON_LINES);
	rt_json_str(&j, "workload", job->workload);
	rt_json_str(&j, "mode", job->mode == RT_MODE_DATA ? "data" : "timing");
	rt_json_u64(&j, "ranks", cfg->ranks);
	rt_json_u64(&j, "pes", cfg->pes);
	rt_json_u64(&j, "seed", job->seed);
	if (job->inputs_dir[0]) /* what `run --from` needs to run it again */
		rt_json_str(&j, "inputs", job->inputs_dir);
	rt_json_u64(&j, "sim_time_ps", kb_stat_get(&agg->totals, "last_ps"));
	rt_json_u64(&j, "messages", kb_stat_get(&agg->totals, "delivered"));
	rt_json_hex64(&j, "delivery_digest", agg->digest);
	if (m->present)
		summary_pe(&j, m);
	kb_steps_json(f->steps, &j);
	kb_ff_json(&j, job, m->present ? m->latency_ps : 0);
	kb_energy_json(&j, energy);
	summary_provenance(&j, job, f, agg);
	json_set(&j, "totals", &agg->totals);
	rt_json_object(&j, "by_kind", RT_JSON_LINES);
	for (size_t i = 0; i < agg->n_kinds; i++)
		json_set(&j, agg->kinds[i].kind, &agg->kinds[i]);
	rt_json_close(&j);
	kb_stats_json(&j, topo, &f->reports, energy);
	/* from here on: how this particular run went */
	rt_json_str(&j, "transport", rt_transport_name(job->transport));
	summary_invocation(&j, f);
	rt_json_str(&j, "colocate", rt_colocate_name(job->colocate));
	rt_json_u64(&j, "daemons", f->daemons);
	rt_json_u64(&j, "lookahead_ps", f->lookahead_ps == UINT64_MAX ? 0 : f->lookahead_ps);
	rt_json_u64(&j, "windows", f->coord.windows);
	/* across hosts: windows of the run's coordinator (0 on one host) */
	rt_json_u64(&j, "global_windows", f->global_windows);
	rt_json_u64(&j, "grants", f->coord.grants);
	rt_json_u64(&j, "routed_messages", f->coord.routed);
	rt_json_fixed(&j, "windows_wall_s", f->coord.windows_wall_s, 6);
	rt_json_fixed(&j, "merge_s", f->merge_s, 3); /* part of wall_s */
	rt_json_fixed(&j, "wall_s", f->wall_s, 3);
	rt_json_close(&j);
	rt_buf_append(b, "\n", 1);
	return rt_json_finish(&j);
}

/* The critical path's split, largest classes first (ties in class order),
 * classes with no time left out. */
static void print_path(const struct pe_metrics *m)
{
	int order[RT_PATH_CLASSES], n = 0;

	for (int c = 0; c < RT_PATH_CLASSES; c++)
		if (m->path.ps[c])
			order[n++] = c;
	for (int i = 1; i < n; i++) /* insertion sort: stable, a dozen classes */
		for (int k = i; k > 0 && m->path.ps[order[k]] > m->path.ps[order[k - 1]]; k--) {
			int t = order[k];

			order[k] = order[k - 1];
			order[k - 1] = t;
		}
	printf("  %-22s", "critical path");
	for (int i = 0; i < n; i++)
		printf("%s %s %.1f%%", i ? "," : "", rt_path_class_name((enum rt_path_class)order[i]),
		       100.0 * (double)m->path.ps[order[i]] / (double)m->latency_ps);
	printf("\n");
}

static void print_util(const char *what, const double *v)
{
	printf("  %-22s", what);
	for (int i = 0; i < RES_N; i++)
		printf(" %s %.1f%%", resource_names[i], 100.0 * v[i]);
	printf("\n");
}

/* "12.345 uJ" (fJ scaled to the largest unit that keeps it >= 1). */
static void energy_text(uint64_t fj, char *out, size_t cap)
{
	static const char *const units[] = { "fJ", "pJ", "nJ", "uJ", "mJ", "J" };
	double v = (double)fj;
	unsigned u = 0;

	while (v >= 1000.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1000.0;
		u++;
	}
	snprintf(out, cap, "%.3f %s", v, units[u]);
}

static void print_energy(const struct kb_energy *e)
{
	char total[32], per[32];

	if (!e->total_fj)
		return;
	energy_text(e->total_fj, total, sizeof(total));
	printf("  %-22s %s (", "energy", total);
	for (unsigned i = 0, shown = 0; i < KB_EN_COUNT; i++)
		if (e->by_action[i])
			printf("%s%s %.1f%%", shown++ ? ", " : "", kb_energy_action_names[i],
			       100.0 * (double)e->by_action[i] / (double)e->total_fj);
	if (e->tokens) {
		energy_text(e->total_fj / e->tokens, per, sizeof(per));
		printf("), %s/token\n", per);
	} else {
		printf(")\n");
	}
}

static void print_report(const struct rt_job *job, const struct kb_run_facts *f,
			 const struct kb_agg *agg, const struct pe_metrics *m,
			 const struct kb_energy *energy)
{
	uint64_t sim = kb_stat_get(&agg->totals, "last_ps");

	printf("kernbench %s: %u rank(s) x %u PE(s), %s mode, %s, colocate %s, %u daemons\n",
	       job->workload, job->config.ranks, job->config.pes,
	       job->mode == RT_MODE_DATA ? "data" : "timing", rt_transport_name(job->transport),
	       rt_colocate_name(job->colocate), f->daemons);
	if (m->present) {
		printf("  %-22s %llu.%06llu us\n", "latency",
		       (unsigned long long)(m->latency_ps / 1000000),
		       (unsigned long long)(m->latency_ps % 1000000));
		printf("  %-22s %s at %.1f%% of its peak throughput (busy %.1f%%; hbm bw %.1f%%)\n",
		       "bound by", resource_names[m->bound], 100.0 * m->throughput[m->bound],
		       100.0 * m->busy[m->bound], 100.0 * m->hbm_bw_util);
		print_util("throughput", m->throughput);
		print_util("busy", m->busy);
		if (m->has_path)
			print_path(m);
		printf("  %-22s %llu\n  %-22s %llu bytes\n", "dma reads",
		       (unsigned long long)m->dma_reads, "peak scratch",
		       (unsigned long long)m->peak_scratch);
		if (m->tiles)
			printf("  %-22s %.1f  (%llu tiles)\n", "dispatch cycles/tile",
			       m->dispatch_per_tile, (unsigned long long)m->tiles);
		if (m->ipcq_transfer && m->has_path)
			printf("  %-22s %llu bytes, link time on the critical path %.3f us, "
			       "%.1f%% of link busy time hidden\n", "ipcq",
			       (unsigned long long)m->ipcq_bytes, (double)m->ipcq_exposed / 1e6,
			       100.0 * m->ipcq_hidden);
		if (m->roofline_bytes)
			printf("  %-22s %.3f us (%llu bytes / HBM peak): the layer runs at %.1f%% of "
			       "it\n", "memory roofline", (double)m->roofline_ps / 1e6,
			       (unsigned long long)m->roofline_bytes,
			       100.0 * (double)m->roofline_ps / (double)m->latency_ps);
		if (m->model_layers)
			printf("  %-22s %.3f us (%llu layers x this one)\n", "whole model",
			       (double)(m->model_layers * m->latency_ps) / 1e6,
			       (unsigned long long)m->model_layers);
	}
	kb_steps_print(f->steps);
	kb_ff_print(job, m->present ? m->latency_ps : 0);
	print_energy(energy);
	printf("  %-22s %llu.%06llu us\n", "simulated time", (unsigned long long)(sim / 1000000),
	       (unsigned long long)(sim % 1000000));
	printf("  %-22s %llu (routed between daemons: %llu)\n", "messages",
	       (unsigned long long)kb_stat_get(&agg->totals, "delivered"),
	       (unsigned long long)f->coord.routed);
	printf("  %-22s %llu\n  %-22s %.3f s (merging the outputs %.3f s)\n  %-22s %016llx\n",
	       "windows", (unsigned long long)f->coord.windows, "wall time", f->wall_s, f->merge_s,
	       "delivery digest", (unsigned long long)agg->digest);
	printf("  %-22s %s/summary.json, stats.csv%s%s%s%s\n", "outputs", job->result_dir,
	       job->oplog_off ? "" : ", op_log.jsonl", job->trace_off ? "" : ", ",
	       job->trace_off ? "" : kb_trace_file_name(job),
	       job->trace_off || !agg->has_path || !agg->path_segment ? "" : ", critical_path.jsonl");
}

/* NaN or infinity in an input or an output: the numbers cannot be trusted. */
static void warn_nonfinite(const struct kb_agg *agg)
{
	const struct kb_stat_set *host = kb_agg_kind(agg, "host");
	uint64_t in = kb_stat_get(host, "nonfinite_inputs");
	uint64_t out = kb_stat_get(host, "nonfinite_outputs");

	if (in || out)
		fprintf(stderr, "kernbench: warning: %llu non-finite (NaN or infinite) input "
			"elements and %llu in the outputs; see nonfinite_* in summary.json\n",
			(unsigned long long)in, (unsigned long long)out);
}

enum rt_err kb_report_write(const struct rt_job *job, const struct rt_topology *topo,
			    const struct kb_run_facts *facts, const struct kb_agg *agg,
			    const struct kb_energy *energy)
{
	struct rt_buf b;
	struct pe_metrics m;
	char path[RT_PATH_MAX + 32];
	enum rt_err err;

	pe_metrics(job, agg, &m);
	/* every PE component tracks paths: one that does not reach the latency
	 * is a bug in a component, not a result */
	if (job->config.critical_path && m.present && m.latency_ps && !m.has_path)
		return rt_fail(RT_EPROTOCOL,
			       "the critical path %s (%llu ps) does not reach the latency (%llu ps): a "
			       "component lost track of it",
			       agg->has_path ? "ends early" : "is missing",
			       (unsigned long long)agg->path_ps, (unsigned long long)m.latency_ps);
	warn_nonfinite(agg);
	rt_buf_init(&b);
	err = summary_json(job, topo, facts, agg, &m, energy, &b);
	snprintf(path, sizeof(path), "%s/summary.json", job->out_dir);
	if (!err)
		err = rt_buf_write_file(&b, path);
	rt_buf_release(&b);
	if (!err && !job->quiet) {
		print_report(job, facts, agg, &m, energy);
		/* a report that cannot be written fails the run (> /dev/full) */
		if (fflush(stdout) || ferror(stdout))
			err = rt_fail(RT_EIO, "cannot write the report to standard output: %s",
				      strerror(errno ? errno : EIO));
	}
	return err;
}
