/* report.c — summary.json and the human report on stdout.
 *
 * summary.json puts one key per line. Everything above "transport" is a
 * function of the inputs and config alone (byte-identical across runs,
 * transports and colocations); "transport" and the keys after it describe
 * how this particular run went (daemons, windows, wall time). */
#include <stdio.h>
#include <string.h>

#include "report.h"
#include "rt/buf.h"
#include "rt/component.h"

static void json_set(struct rt_buf *b, const struct kb_stat_set *set, const char *indent)
{
	/* stable order: sorted by name */
	const struct kb_stat *order[KB_MAX_STATS];

	for (size_t i = 0; i < set->n; i++) {
		size_t k = i;

		while (k > 0 && strcmp(order[k - 1]->name, set->items[i].name) > 0) {
			order[k] = order[k - 1];
			k--;
		}
		order[k] = &set->items[i];
	}
	rt_buf_printf(b, "{");
	for (size_t i = 0; i < set->n; i++)
		rt_buf_printf(b, "%s\n%s  \"%s\": %llu", i ? "," : "", indent, order[i]->name,
			      (unsigned long long)order[i]->value);
	rt_buf_printf(b, "\n%s}", indent);
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
	uint64_t cycle = rt_config_cycle_ps(cfg);

	memset(m, 0, sizeof(*m));
	m->latency_ps = kb_stat_get(kb_agg_kind(agg, "host"), "kernel_end_ps");
	m->present = agg->n_kinds && kb_agg_kind(agg, "host")->n;
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
		m->hbm_read_bytes = (kb_stat_get(kb_agg_kind(agg, "dma"), "dma_read_bytes") +
				     kb_stat_get(kb_agg_kind(agg, "dma"), "dma_write_bytes")) /
				    (cfg->ranks ? cfg->ranks : 1);
	m->hbm_bw_util = (double)m->hbm_read_bytes /
			 ((double)cfg->hbm_bytes_per_cycle * ((double)m->latency_ps / (double)cycle));
	m->dma_read_util = m->busy[0];
	kernel_metrics(agg, m);
}

static void summary_json(const struct rt_job *job, const struct kb_run_facts *f,
			 const struct kb_agg *agg, const struct pe_metrics *m, struct rt_buf *b)
{
	const struct rt_config *cfg = &job->config;

	rt_buf_printf(b, "{\n  \"workload\": ");
	rt_buf_json_str(b, job->workload);
	rt_buf_printf(b, ",\n  \"mode\": \"%s\",\n  \"ranks\": %u,\n  \"pes\": %u,\n  \"seed\": %llu,\n",
		      job->mode == RT_MODE_DATA ? "data" : "timing", cfg->ranks, cfg->pes,
		      (unsigned long long)job->seed);
	rt_buf_printf(b, "  \"sim_time_ps\": %llu,\n  \"messages\": %llu,\n"
		      "  \"delivery_digest\": \"%016llx\",\n",
		      (unsigned long long)kb_stat_get(&agg->totals, "last_ps"),
		      (unsigned long long)kb_stat_get(&agg->totals, "delivered"),
		      (unsigned long long)agg->digest);
	if (m->present) {
		rt_buf_printf(b, "  \"latency_ps\": %llu,\n  \"bound_engine\": \"%s\",\n"
			      "  \"bound_util\": %.4f,\n  \"hbm_bw_util\": %.4f,\n"
			      "  \"dma_read_util\": %.4f,\n",
			      (unsigned long long)m->latency_ps, m->busiest ? m->busiest : "none",
			      m->bound_util, m->hbm_bw_util, m->dma_read_util);
		rt_buf_printf(b, "  \"busy_util\": {");
		for (int i = 0; i < 4; i++)
			rt_buf_printf(b, "%s\"%s\": %.4f", i ? ", " : "", engine_names[i], m->busy[i]);
		rt_buf_printf(b, "},\n  \"tiles\": %llu,\n  \"dispatch_cycles_per_tile\": %.2f,\n"
			      "  \"peak_scratch_bytes\": %llu,\n  \"dma_read_count\": %llu,\n"
			      "  \"ipcq_bytes\": %llu,\n",
			      (unsigned long long)m->tiles, m->dispatch_per_tile,
			      (unsigned long long)m->peak_scratch, (unsigned long long)m->dma_reads,
			      (unsigned long long)m->ipcq_bytes);
		rt_buf_printf(b, "  \"ipcq_transfer_ps\": %llu,\n  \"ipcq_wait_ps\": %llu,\n"
			      "  \"ipcq_exposed_ps\": %llu,\n  \"ipcq_latency_wait_ps\": %llu,\n"
			      "  \"ipcq_imbalance_wait_ps\": %llu,\n",
			      (unsigned long long)m->ipcq_transfer, (unsigned long long)m->ipcq_wait,
			      (unsigned long long)m->ipcq_exposed,
			      (unsigned long long)m->ipcq_latency_wait,
			      (unsigned long long)m->ipcq_imbalance);
		/* no IPCQ traffic: nothing to hide, the fraction is undefined */
		if (m->ipcq_transfer)
			rt_buf_printf(b, "  \"ipcq_hidden_fraction\": %.4f,\n", m->ipcq_hidden);
		else
			rt_buf_printf(b, "  \"ipcq_hidden_fraction\": null,\n");
	}
	rt_buf_printf(b, "  \"totals\": ");
	json_set(b, &agg->totals, "  ");
	rt_buf_printf(b, ",\n  \"by_kind\": {");
	for (size_t i = 0; i < agg->n_kinds; i++) {
		rt_buf_printf(b, "%s\n    \"%s\": ", i ? "," : "", agg->kinds[i].kind);
		json_set(b, &agg->kinds[i], "    ");
	}
	rt_buf_printf(b, "\n  },\n  \"transport\": \"%s\",\n  \"colocate\": \"%s\",\n"
		      "  \"daemons\": %u,\n  \"lookahead_ps\": %llu,\n  \"windows\": %llu,\n"
		      "  \"grants\": %llu,\n"
		      "  \"routed_messages\": %llu,\n  \"windows_wall_s\": %.6f,\n  \"wall_s\": %.3f\n}\n",
		      rt_transport_name(job->transport), rt_colocate_name(job->colocate), f->daemons,
		      (unsigned long long)(f->lookahead_ps == UINT64_MAX ? 0 : f->lookahead_ps),
		      (unsigned long long)f->coord.windows, (unsigned long long)f->coord.grants,
		      (unsigned long long)f->coord.routed, f->coord.windows_wall_s, f->wall_s);
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
	}
	printf("  %-22s %llu.%06llu us\n", "simulated time", (unsigned long long)(sim / 1000000),
	       (unsigned long long)(sim % 1000000));
	printf("  %-22s %llu (routed between daemons: %llu)\n", "messages",
	       (unsigned long long)kb_stat_get(&agg->totals, "delivered"),
	       (unsigned long long)f->coord.routed);
	printf("  %-22s %llu\n  %-22s %.3f s\n  %-22s %016llx\n", "windows",
	       (unsigned long long)f->coord.windows, "wall time", f->wall_s, "delivery digest",
	       (unsigned long long)agg->digest);
	printf("  %-22s %s/summary.json, op_log.jsonl%s\n", "outputs", job->out_dir,
	       job->trace_off ? "" : ", trace.json");
}

/* A kernel argument no program read is most likely a typo: say so. */
static void warn_unread_args(const struct rt_job *job, const struct kb_agg *agg)
{
	const struct kb_stat_set *host = kb_agg_kind(agg, "host");
	char name[96];

	if (!host->n)
		return;
	for (uint32_t i = 0; i < job->n_args; i++) {
		snprintf(name, sizeof(name), "arg_used:%s", job->args[i].name);
		if (!kb_stat_get(host, name))
			fprintf(stderr, "kernbench: warning: --arg %s=%s was not read by kernel %s "
				"(misspelt?)\n", job->args[i].name, job->args[i].value, job->workload);
	}
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
	warn_unread_args(job, agg);
	rt_buf_init(&b);
	summary_json(job, facts, agg, &m, &b);
	snprintf(path, sizeof(path), "%s/summary.json", job->out_dir);
	err = rt_buf_write_file(&b, path);
	rt_buf_release(&b);
	if (!err && !job->quiet)
		print_report(job, facts, agg, &m);
	return err;
}
