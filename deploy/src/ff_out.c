/* ff_out.c — what fast-forward did, as summary.json and the report say it. */
#include "ff_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/daemon.h"

struct kb_ff {
	char mode[16];
	char reason[200];
	int active, exact;
	unsigned long long skips, skipped_iters, simulated_iters, skipped_ps, bound_ps;
};

/* Daemon 0's part: with fast-forward on, every daemon writes one, and only
 * a run of one daemon (--colocate all) skips. */
static bool ff_read(const struct rt_job *job, struct kb_ff *ff)
{
	char path[RT_PATH_MAX + 64], line[256];
	FILE *f;

	memset(ff, 0, sizeof(*ff));
	if (job->ff_mode == RT_FF_OFF)
		return false;
	snprintf(ff->mode, sizeof(ff->mode), "%s", rt_ff_mode_name(job->ff_mode));
	snprintf(path, sizeof(path), "%s/%s/ff.0", job->out_dir, RT_PARTS_DIR);
	f = fopen(path, "r");
	if (!f) {
		snprintf(ff->reason, sizeof(ff->reason), "no daemon reported");
		return true;
	}
	while (fgets(line, sizeof(line), f)) {
		char *val = strchr(line, ' ');

		if (!val)
			continue;
		*val++ = '\0';
		val[strcspn(val, "\n")] = '\0';
		const char *key = line;

		if (!strcmp(key, "reason"))
			snprintf(ff->reason, sizeof(ff->reason), "%s", val);
		else if (!strcmp(key, "active"))
			ff->active = val[0] == '1';
		else if (!strcmp(key, "exact"))
			ff->exact = val[0] == '1';
		else if (!strcmp(key, "skips"))
			sscanf(val, "%llu", &ff->skips);
		else if (!strcmp(key, "skipped_iterations"))
			sscanf(val, "%llu", &ff->skipped_iters);
		else if (!strcmp(key, "simulated_iterations"))
			sscanf(val, "%llu", &ff->simulated_iters);
		else if (!strcmp(key, "skipped_ps"))
			sscanf(val, "%llu", &ff->skipped_ps);
		else if (!strcmp(key, "bound_ps"))
			sscanf(val, "%llu", &ff->bound_ps);
	}
	fclose(f);
	return true;
}

static double bound_rel(const struct kb_ff *ff, uint64_t latency_ps)
{
	return latency_ps ? (double)ff->bound_ps / (double)latency_ps : 0.0;
}

void kb_ff_json(struct rt_json *j, const struct rt_job *job, uint64_t latency_ps)
{
	struct kb_ff ff;

	if (!ff_read(job, &ff))
		return;
	rt_json_object(j, "fast_forward", RT_JSON_LINES);
	rt_json_str(j, "mode", ff.mode);
	rt_json_bool(j, "active", ff.active);
	rt_json_str(j, "reason", ff.reason);
	rt_json_u64(j, "skips", ff.skips);
	rt_json_u64(j, "iterations_simulated", ff.simulated_iters);
	rt_json_u64(j, "iterations_skipped", ff.skipped_iters);
	rt_json_u64(j, "skipped_ps", ff.skipped_ps);
	rt_json_bool(j, "exact", ff.exact);
	rt_json_u64(j, "error_bound_ps", ff.bound_ps);
	rt_json_fixed(j, "error_bound_rel", bound_rel(&ff, latency_ps), 6);
	rt_json_str(j, "records", ff.skips ? "skipped iterations wrote no op-log records and are "
		    "not in delivery_digest; statistics and messages include them" : "complete");
	rt_json_close(j);
}

void kb_ff_print(const struct rt_job *job, uint64_t latency_ps)
{
	struct kb_ff ff;

	if (!ff_read(job, &ff))
		return;
	if (!ff.active) {
		printf("  %-22s %s: not used: %s\n", "fast-forward", ff.mode, ff.reason);
		return;
	}
	printf("  %-22s %s: %llu iterations simulated, %llu skipped in %llu skips (%.3f us); "
	       "%s, error bound %llu ps (%.4f%%)\n", "fast-forward", ff.mode, ff.simulated_iters,
	       ff.skipped_iters, ff.skips, (double)ff.skipped_ps / 1e6,
	       ff.exact ? "exact" : "estimated", ff.bound_ps, 100.0 * bound_rel(&ff, latency_ps));
}

size_t kb_ff_skips(const struct rt_job *job, struct kb_ff_skip **out)
{
	char path[RT_PATH_MAX + 64], line[256];
	size_t n = 0, cap = 0;
	FILE *f;

	*out = NULL;
	if (job->ff_mode == RT_FF_OFF)
		return 0;
	snprintf(path, sizeof(path), "%s/%s/ff.0", job->out_dir, RT_PARTS_DIR);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		struct kb_ff_skip s;

		unsigned long long at, per, k;

		if (sscanf(line, "skip %llu %llu %llu", &at, &per, &k) != 3)
			continue;
		s = (struct kb_ff_skip){ at, per, k };
		if (n == cap) {
			struct kb_ff_skip *g = realloc(*out, (cap = cap ? 2 * cap : 16) * sizeof(*g));

			if (!g)
				break;
			*out = g;
		}
		(*out)[n++] = s;
	}
	fclose(f);
	return n;
}
