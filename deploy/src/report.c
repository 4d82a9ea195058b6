/* report.c — summary.json and the human report on stdout.
 *
 * summary.json puts one key per line. Everything above "transport" is a
 * function of the inputs and config alone (byte-identical across runs,
 * transports and colocations); "transport" and the keys after it describe
 * how this particular run went (daemons, windows, wall time). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
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

/* Derived PE metrics, present when the run had kernel hosts. */
struct pe_metrics {
	bool present;
	uint64_t latency_ps;
	uint64_t busiest_ps;
	const char *busiest;
	double bound_util;
	double hbm_bw_util;        /* busiest rank's HBM bytes / (hbm peak x latency) */
	double dma_read_util;      /* busiest PE's read channel busy (union) / latency */
	uint64_t hbm_read_bytes;
	double busy[4];            /* busiest instance of each engine / latency */
	uint64_t tiles;            /* reported by attention kernels */
	double dispatch_per_tile;
	uint64_t peak_scratch;
	uint64_t dma_reads;
	uint64_t ipcq_bytes;
	/* ring figures (docs/attention.md), from measured intervals */
	uint64_t ipcq_transfer;    /* link busy time, every rank's links */
	uint64_t ipcq_wait;        /* kernel waits on receives */
	uint64_t ipcq_exposed;     /* ... while the awaited bytes were on the link */
	uint64_t ipcq_latency_wait;/* ... after the link, during its latency */
	uint64_t ipcq_imbalance;   /* ... before the link started: sender not ready */
	double ipcq_hidden;        /* 1 - exposed / transfer */
	/* a model's layer (llama_*_step): the whole model, and the memory
	 * roofline of the layer (its bytes over the rank's HBM peak) */
	uint64_t model_layers;
	uint64_t roofline_bytes, roofline_ps;
};

static const char *const engine_names[4] = { "dma_read", "dma_write", "gemm", "math" };

/* What the kernel hosts reported: per-tile dispatch, scratch, IPCQ. */
static void kernel_metrics(const struct kb_agg *agg, struct pe_metrics *m)
{
	const struct kb_stat_set *host = kb_agg_kind(agg, "host");

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
	m->ipcq_exposed = kb_stat_get(host, "ipcq_exposed_ps");
	m->ipcq_latency_wait = kb_stat_get(host, "ipcq_latency_wait_ps");
	m->ipcq_imbalance = kb_stat_get(host, "ipcq_imbalance_wait_ps");
	/* exposed <= transfer by construction (each receive's exposed part
	 * lies inside its own link interval): no clamp */
	m->ipcq_hidden = m->ipcq_transfer ? 1.0 - (double)m->ipcq_exposed /
							  (double)m->ipcq_transfer
					  : 0.0;
}

static void pe_metrics(const struct rt_job *job, const struct kb_agg *agg, struct pe_metrics *m)
{
	const struct rt_config *cfg = &job->config;
	static const char *const engines[][2] = {
		{ "dma", "dma_read_busy_ps" }, { "dma", "dma_write_busy_ps" },
		{ "gemm", "busy_ps" },     { "math", "busy_ps" },
	};
	const struct kb_stat_set *host = kb_agg_kind(agg, "host"), *dma = kb_agg_kind(agg, "dma");
	uint64_t cycle = rt_config_cycle_ps(cfg);

	memset(m, 0, sizeof(*m));
	m->latency_ps = kb_stat_get(host, "kernel_end_ps");
	m->present = agg->n_kinds && host->n;
	if (!m->present || !m->latency_ps)
		return;
	for (size_t i = 0; i < sizeof(engines) / sizeof(engines[0]); i++) {
		/* the busiest single engine instance bounds a kernel */
		uint64_t busy = kb_stat_get(kb_agg_kind_max(agg, engines[i][0]), engines[i][1]);

		m->busy[i] = (double)busy / (double)m->latency_ps;
		if (busy > m->busiest_ps) {
			m->busiest_ps = busy;
			m->busiest = engine_names[i];
		}
	}
	m->bound_util = (double)m->busiest_ps / (double)m->latency_ps;
	/* HBM bytes (reads and writes) of the busiest rank over the rank's
	 * peak for the whole latency. The rank memory component counts them;
	 * with hbm.model = ideal there is none, and every rank moves the same
	 * DMA bytes in the PE workloads, so the mean rank stands in. */
	m->hbm_read_bytes = kb_stat_get(kb_agg_kind_max(agg, "hbm"), "hbm_bytes");
	if (!kb_agg_kind(agg, "hbm")->n)
		m->hbm_read_bytes = (kb_stat_get(dma, "dma_read_bytes") +
				     kb_stat_get(dma, "dma_write_bytes")) /
				    (cfg->ranks ? cfg->ranks : 1);
	m->hbm_bw_util = (double)m->hbm_read_bytes /
			 ((double)cfg->hbm_bytes_per_cycle * ((double)m->latency_ps / (double)cycle));
	m->dma_read_util = m->busy[0];
	kernel_metrics(agg, m);
	m->model_layers = kb_stat_get(host, "model_layers");
	m->roofline_bytes = kb_stat_get(host, "roofline_bytes");
	m->roofline_ps = (m->roofline_bytes + cfg->hbm_bytes_per_cycle - 1) /
			 cfg->hbm_bytes_per_cycle * cycle;
}

static void summary_pe(struct rt_json *j, const struct pe_metrics *m)
{
	rt_json_u64(j, "latency_ps", m->latency_ps);
	rt_json_str(j, "bound_engine", m->busiest ? m->busiest : "none");
	rt_json_fixed(j, "bound_util", m->bound_util, 4);
	rt_json_fixed(j, "hbm_bw_util", m->hbm_bw_util, 4);
	rt_json_fixed(j, "dma_read_util", m->dma_read_util, 4);
	rt_json_object(j, "busy_util", RT_JSON_INLINE);
	for (int i = 0; i < 4; i++)
		rt_json_fixed(j, engine_names[i], m->busy[i], 4);
	rt_json_close(j);
	rt_json_u64(j, "tiles", m->tiles);
	rt_json_fixed(j, "dispatch_cycles_per_tile", m->dispatch_per_tile, 2);
	rt_json_u64(j, "peak_scratch_bytes", m->peak_scratch);
	rt_json_u64(j, "dma_read_count", m->dma_reads);
	rt_json_u64(j, "ipcq_bytes", m->ipcq_bytes);
	rt_json_u64(j, "ipcq_transfer_ps", m->ipcq_transfer);
	rt_json_u64(j, "ipcq_wait_ps", m->ipcq_wait);
	rt_json_u64(j, "ipcq_exposed_ps", m->ipcq_exposed);
	rt_json_u64(j, "ipcq_latency_wait_ps", m->ipcq_latency_wait);
	rt_json_u64(j, "ipcq_imbalance_wait_ps", m->ipcq_imbalance);
	/* no IPCQ traffic: nothing to hide, the fraction is undefined */
	if (m->ipcq_transfer)
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

static enum rt_err summary_json(const struct rt_job *job, const struct kb_run_facts *f,
				const struct kb_agg *agg, const struct pe_metrics *m,
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
	rt_json_u64(&j, "sim_time_ps", kb_stat_get(&agg->totals, "last_ps"));
	rt_json_u64(&j, "messages", kb_stat_get(&agg->totals, "delivered"));
	rt_json_hex64(&j, "delivery_digest", agg->digest);
	if (m->present)
		summary_pe(&j, m);
	kb_steps_json(f->steps, &j);
	summary_provenance(&j, job, f, agg);
	json_set(&j, "totals", &agg->totals);
	rt_json_object(&j, "by_kind", RT_JSON_LINES);
	for (size_t i = 0; i < agg->n_kinds; i++)
		json_set(&j, agg->kinds[i].kind, &agg->kinds[i]);
	rt_json_close(&j);
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
	rt_json_fixed(&j, "wall_s", f->wall_s, 3);
	rt_json_close(&j);
	rt_buf_append(b, "\n", 1);
	return rt_json_finish(&j);
}

static void print_report(const struct rt_job *job, const struct kb_run_facts *f,
			 const struct kb_agg *agg, const struct pe_metrics *m)
{
	uint64_t sim = kb_stat_get(&agg->totals, "last_ps");

	printf("kernbench %s: %u rank(s) x %u PE(s), %s mode, %s, colocate %s, %u daemons\n",
	       job->workload, job->config.ranks, job->config.pes,
	       job->mode == RT_MODE_DATA ? "data" : "timing", rt_transport_name(job->transport),
	       rt_colocate_name(job->colocate), f->daemons);
	if (m->present)
		printf("  %-22s %llu.%06llu us\n  %-22s %s %.1f%%  (hbm bw %.1f%%)\n", "latency",
		       (unsigned long long)(m->latency_ps / 1000000),
		       (unsigned long long)(m->latency_ps % 1000000), "bound by",
		       m->busiest ? m->busiest : "none", 100.0 * m->bound_util,
		       100.0 * m->hbm_bw_util);
	if (m->present) {
		printf("  %-22s", "engine busy");
		for (int i = 0; i < 4; i++)
			printf(" %s %.1f%%", engine_names[i], 100.0 * m->busy[i]);
		printf("\n  %-22s %llu\n  %-22s %llu bytes\n", "dma reads",
		       (unsigned long long)m->dma_reads, "peak scratch",
		       (unsigned long long)m->peak_scratch);
		if (m->tiles)
			printf("  %-22s %.1f  (%llu tiles)\n", "dispatch cycles/tile",
			       m->dispatch_per_tile, (unsigned long long)m->tiles);
		if (m->ipcq_transfer)
			printf("  %-22s %llu bytes, %.1f%% hidden under compute\n", "ipcq",
			       (unsigned long long)m->ipcq_bytes, 100.0 * m->ipcq_hidden);
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
	printf("  %-22s %llu.%06llu us\n", "simulated time", (unsigned long long)(sim / 1000000),
	       (unsigned long long)(sim % 1000000));
	printf("  %-22s %llu (routed between daemons: %llu)\n", "messages",
	       (unsigned long long)kb_stat_get(&agg->totals, "delivered"),
	       (unsigned long long)f->coord.routed);
	printf("  %-22s %llu\n  %-22s %.3f s\n  %-22s %016llx\n", "windows",
	       (unsigned long long)f->coord.windows, "wall time", f->wall_s, "delivery digest",
	       (unsigned long long)agg->digest);
	printf("  %-22s %s/summary.json, op_log.jsonl%s\n", "outputs", job->result_dir,
	       job->trace_off ? "" : ", trace.json");
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
			    const struct kb_run_facts *facts, const struct kb_agg *agg)
{
	struct rt_buf b;
	struct pe_metrics m;
	char path[RT_PATH_MAX + 32];
	enum rt_err err;

	(void)topo;
	pe_metrics(job, agg, &m);
	warn_nonfinite(agg);
	rt_buf_init(&b);
	err = summary_json(job, facts, agg, &m, &b);
	snprintf(path, sizeof(path), "%s/summary.json", job->out_dir);
	if (!err)
		err = rt_buf_write_file(&b, path);
	rt_buf_release(&b);
	if (!err && !job->quiet)
		print_report(job, facts, agg, &m);
	return err;
}
