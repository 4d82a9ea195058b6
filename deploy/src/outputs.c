/* outputs.c — merges the daemons' output parts into the run's outputs.
 *
 * Every component wrote its own parts (op log lines with a sort key, trace
 * events, statistics) in its own event order. Merging by a key that does not
 * mention daemons makes the outputs identical whatever the transport or
 * colocation:
 *   op_log.jsonl  all records sorted by (start, end, component, seq)
 *                 (oplog_out.c)
 *   trace.json    all records sorted by time (trace_out.c)
 *   summary.json  statistics from the components' end-of-run reports (BYE),
 *                 summed (or maxed) over components, by kind
 *
 * Over 600 lines on purpose: it is the one place that walks the parts
 * folder and orders the writers (each writer is its own file), and the
 * summary's sections all read the same merged reports. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "energy.h"
#include "outputs.h"
#include "merge.h"
#include "oplog_out.h"
#include "steps.h"
#include "report.h"
#include "tidy.h"
#include "stats_out.h"
#include "trace_out.h"
#include "rt/buf.h"
#include "rt/clock.h"
#include "rt/component.h"
#include "rt/daemon.h"
#include "rt/event.h"
#include "rt/grow.h"

static void part_path(const struct rt_job *job, const char *name, char *path, size_t cap)
{
	snprintf(path, cap, "%s/%s/%s", job->out_dir, RT_PARTS_DIR, name);
}

/* Reads a part if it exists (a component that wrote nothing has none). */
static enum rt_err read_part(const struct rt_job *job, const char *name, struct rt_buf *b)
{
	char path[RT_PATH_MAX + 64];

	part_path(job, name, path, sizeof(path));
	rt_buf_reset(b);
	if (access(path, F_OK))
		return RT_EOK;
	return rt_buf_read_file(b, path);
}

/* ---------------------------------------------------------------- stats */

static struct kb_stat *stat_slot(struct kb_stat_set *set, const char *name, bool is_max)
{
	for (size_t i = 0; i < set->n; i++)
		if (!strcmp(set->items[i].name, name))
			return &set->items[i];
	if (!RT_GROW(set->items, set->cap, set->n, 16))
		return NULL;
	set->items[set->n] = (struct kb_stat){ .name = name, .is_max = is_max };
	return &set->items[set->n++];
}

static enum rt_err stat_merge(struct kb_stat_set *set, const char *name, bool is_max, uint64_t v)
{
	struct kb_stat *s = stat_slot(set, name, is_max);

	if (!s)
		return rt_fail(RT_ENOMEM, "cannot merge statistic %s: out of memory", name);
	if (is_max)
		s->value = v > s->value ? v : s->value;
	else
		s->value += v;
	return RT_EOK;
}

/* The per-kind sum and max sets of `kind`, made on first use. */
static enum rt_err kind_sets(struct kb_agg *agg, const char *kind, struct kb_stat_set **sum,
			     struct kb_stat_set **max)
{
	size_t i = 0;

	while (i < agg->n_kinds && strcmp(agg->kinds[i].kind, kind))
		i++;
	if (i == agg->n_kinds) {
		if (agg->n_kinds == agg->cap_kinds) {
			size_t cap = agg->cap_kinds ? 2 * agg->cap_kinds : 8;
			struct kb_stat_set *k = realloc(agg->kinds, cap * sizeof(*k));

			if (k)
				agg->kinds = k;
			k = k ? realloc(agg->kinds_max, cap * sizeof(*k)) : NULL;
			if (!k)
				return rt_fail(RT_ENOMEM, "cannot merge statistics: out of memory");
			agg->kinds_max = k;
			agg->cap_kinds = cap;
		}
		agg->kinds[i] = (struct kb_stat_set){ .kind = kind };
		agg->kinds_max[i] = (struct kb_stat_set){ .kind = kind };
		agg->n_kinds++;
	}
	*sum = &agg->kinds[i];
	*max = &agg->kinds_max[i];
	return RT_EOK;
}

/* Adds one statistic of one component to the totals and to its kind. */
static enum rt_err absorb_stat(struct kb_agg *agg, struct kb_stat_set *kind,
			       struct kb_stat_set *kind_max, const char *name, bool is_max,
			       uint64_t v)
{
	enum rt_err err = stat_merge(&agg->totals, name, is_max, v);

	if (!err)
		err = stat_merge(kind, name, is_max, v);
	return err ? err : stat_merge(kind_max, name, true, v);
}

static enum rt_err absorb_report(struct kb_agg *agg, const struct rt_component_desc *c,
				 uint32_t id, const Kb__ComponentReport *r)
{
	struct kb_stat_set *kind = NULL, *kind_max = NULL;
	enum rt_err err = kind_sets(agg, c->ops->name, &kind, &kind_max);

	agg->digest = rt_hash_u64(rt_hash_u64(agg->digest, id), r->digest);
	if (!err)
		err = absorb_stat(agg, kind, kind_max, "delivered", false, r->delivered);
	if (!err)
		err = absorb_stat(agg, kind, kind_max, "last_ps", true, r->last_ps);
	/* per-instance ones (per call site) are listed per component only */
	for (size_t i = 0; !err && i < r->n_stats; i++)
		if (!r->stats[i]->per_instance)
			err = absorb_stat(agg, kind, kind_max, r->stats[i]->name,
					  r->stats[i]->is_max, r->stats[i]->value);
	if (!err && !strcmp(c->ops->name, "host") && r->n_path == RT_PATH_CLASSES) {
		struct rt_path p;
		uint64_t total;

		memcpy(p.ps, r->path, sizeof(p.ps));
		total = rt_path_total(&p);
		if (!agg->has_path || total > agg->path_ps) { /* ids ascend: a tie keeps the first */
			agg->has_path = true;
			agg->path = p;
			agg->path_ps = total;
			agg->path_host = id;
			agg->path_segment = r->path_segment;
		}
	}
	return err;
}

enum rt_err kb_agg_build(struct kb_agg *agg, const struct rt_topology *topo,
			 const struct rt_end_reports *reports)
{
	enum rt_err err = RT_EOK;

	memset(agg, 0, sizeof(*agg));
	agg->digest = RT_HASH_INIT;
	for (uint32_t id = 0; !err && id < topo->n_components; id++) {
		const Kb__ComponentReport *r = id < reports->n_components ? reports->by_id[id] : NULL;

		err = r ? absorb_report(agg, &topo->components[id], id, r)
			: rt_fail(RT_EIO, "component %s sent no end-of-run report",
				  topo->components[id].name);
	}
	return err;
}

void kb_agg_release(struct kb_agg *agg)
{
	for (size_t i = 0; i < agg->n_kinds; i++) {
		free(agg->kinds[i].items);
		free(agg->kinds_max[i].items);
	}
	free(agg->kinds);
	free(agg->kinds_max);
	free(agg->totals.items);
	memset(agg, 0, sizeof(*agg));
}

uint64_t kb_stat_get(const struct kb_stat_set *set, const char *name)
{
	for (size_t i = 0; i < set->n; i++)
		if (!strcmp(set->items[i].name, name))
			return set->items[i].value;
	return 0;
}

const struct kb_stat_set *kb_agg_kind(const struct kb_agg *agg, const char *kind)
{
	static const struct kb_stat_set empty;

	for (size_t i = 0; i < agg->n_kinds; i++)
		if (!strcmp(agg->kinds[i].kind, kind))
			return &agg->kinds[i];
	return &empty;
}

const struct kb_stat_set *kb_agg_kind_max(const struct kb_agg *agg, const char *kind)
{
	const struct kb_stat_set *set = kb_agg_kind(agg, kind);

	return set->n ? &agg->kinds_max[set - agg->kinds] : set;
}

/* ---------------------------------------------------------------- folder */

/* Names inside the result folder that belong to kernbench. */
#define LOCK_NAME ".kernbench.lock"      /* flock()ed while a run uses the folder */
#define MANIFEST_NAME ".kernbench-results" /* the results of the last good run */
#define STAGE_NAME ".kernbench-staging"    /* where a run writes until it succeeds */
#define MANIFEST_MAX 65536

/* A result file name as a manifest may list it: one plain name (the
 * rule kernels' output names follow, rt_output_name_check), so no name
 * can split a manifest line. */
static bool plain_name(const char *name)
{
	for (const char *p = name; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return false;
	return name[0] && name[0] != '.' && !strchr(name, '/') && strlen(name) < 256;
}

/* Creates `path` and its missing parents (an existing folder is fine);
 * *made says whether the last one was created here. */
static enum rt_err make_path(const char *path, bool *made)
{
	char buf[RT_PATH_MAX];

	*made = false;
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(buf, 0755); /* the final mkdir reports */
			*p = '/';
		}
	if (!mkdir(buf, 0755))
		*made = true;
	else if (errno != EEXIST)
		return rt_fail(RT_EIO, "cannot create output folder %s: %s", path, strerror(errno));
	return RT_EOK;
}

/* Takes the folder's lock; a second run into the same folder is told so. */
static enum rt_err lock_folder(int at, const char *dir, struct kb_outdir *od)
{
	int fd = openat(at, LOCK_NAME, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK |
			O_CLOEXEC, 0644);
	char pid[32] = "";
	struct stat st;
	ssize_t n;

	od->made_lock = fd >= 0;
	if (fd < 0 && errno == EEXIST)
		fd = openat(at, LOCK_NAME, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return rt_fail(RT_EIO, "output folder %s: cannot create %s: %s", dir, LOCK_NAME,
			       strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return rt_fail(RT_EIO, "output folder %s: %s is not a regular file", dir, LOCK_NAME);
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		od->made_lock = false;
		n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		close(fd);
		return rt_fail(RT_EIO, "output folder %s is in use by another kernbench run%s%s%s; "
			       "wait for it or choose another --out", dir, pid[0] ? " (pid " : "",
			       pid, pid[0] ? ")" : "");
	}
	n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) || pwrite(fd, pid, (size_t)n, 0) != n) {
		/* the pid is only for the message above */
	}
	od->lock_fd = fd;
	return RT_EOK;
}

/* OUT/.parts inside the staging folder, for the daemons' part files. */
static int mkdir_parts(const struct rt_job *job)
{
	char parts[RT_PATH_MAX + 16];

	snprintf(parts, sizeof(parts), "%s/%s", job->out_dir, RT_PARTS_DIR);
	return mkdir(parts, 0700);
}

/* Writes the manifest beside the results, atomically (temporary file in
 * the staging folder, created exclusively, then renamed). */
static enum rt_err write_manifest(int stagefd, int at, const struct rt_buf *list)
{
	int fd = openat(stagefd, ".manifest", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			0644);
	bool ok = fd >= 0 && write(fd, list->data ? list->data : "", list->len) ==
				     (ssize_t)list->len;

	if (fd >= 0)
		ok = !close(fd) && ok;
	if (!ok || renameat(stagefd, ".manifest", at, MANIFEST_NAME))
		return rt_fail(RT_EIO, "cannot write the results manifest %s: %s", MANIFEST_NAME,
			       strerror(errno));
	return RT_EOK;
}

/* Removes the files the last good run listed as its results. */
static void remove_previous_results(int at)
{
	/* non-blocking: a FIFO planted under the manifest's name must not hang */
	int fd = openat(at, MANIFEST_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	char *text = malloc(MANIFEST_MAX + 1), *line, *save = NULL;
	struct stat st;
	ssize_t n = -1;

	if (fd >= 0 && text && !fstat(fd, &st) && S_ISREG(st.st_mode))
		n = read(fd, text, MANIFEST_MAX);
	if (n > 0) {
		text[n] = '\0';
		for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			if (plain_name(line))
				kb_remove_owned(at, line, false);
	}
	if (fd >= 0)
		close(fd);
	free(text);
	kb_remove_owned(at, MANIFEST_NAME, false);
}

enum rt_err kb_outputs_prepare(struct rt_job *job, struct kb_outdir *od)
{
	const char *dir = job->result_dir;
	enum rt_err err = make_path(dir, &od->made_dir);
	int dfd = -1;

	od->lock_fd = -1;
	if (!err && (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		err = rt_fail(RT_EIO, "cannot open output folder %s: %s", dir, strerror(errno));
	if (!err)
		err = lock_folder(dfd, dir, od);
	if (!err) {
		struct stat st;

		kb_remove_owned(dfd, STAGE_NAME, true); /* left by a killed run */
		/* a link planted under kernbench's own name goes (not what it
		 * points at): the staging folder is always a fresh real one */
		if (!fstatat(dfd, STAGE_NAME, &st, AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode) &&
		    st.st_uid == geteuid())
			unlinkat(dfd, STAGE_NAME, 0);
		if (mkdirat(dfd, STAGE_NAME, 0700))
			err = rt_fail(RT_EIO, "cannot create %s/%s: %s", dir, STAGE_NAME,
				      strerror(errno));
	}
	if (!err) {
		char stage[RT_PATH_MAX + sizeof(STAGE_NAME) + 1];
		int len = snprintf(stage, sizeof(stage), "%s/%s", dir, STAGE_NAME);

		if (len < 0 || (size_t)len >= sizeof(job->out_dir))
			err = rt_fail(RT_EINVAL, "output folder path %s is too long", dir);
		else
			memcpy(job->out_dir, stage, (size_t)len + 1);
		if (!err && mkdir_parts(job))
			err = rt_fail(RT_EIO, "cannot create %s/%s: %s", job->out_dir, RT_PARTS_DIR,
				      strerror(errno));
	}
	if (dfd >= 0)
		close(dfd);
	return err;
}

void kb_outputs_abandon(struct rt_job *job, struct kb_outdir *od, bool refused)
{
	int dfd = open(job->result_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	memcpy(job->out_dir, job->result_dir, sizeof(job->out_dir));
	if (dfd < 0 || od->lock_fd < 0) { /* only a run holding the folder may clear it */
		if (dfd >= 0)
			close(dfd);
		return;
	}
	kb_remove_owned(dfd, STAGE_NAME, true);
	if (!refused)
		remove_previous_results(dfd);
	else if (od->made_lock || od->made_dir)
		kb_remove_owned(dfd, LOCK_NAME, false); /* still held: no run takes it meanwhile */
	close(dfd);
	if (refused && od->made_dir)
		rmdir(job->result_dir); /* only if empty: nothing else was there */
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The staged result files, sorted (caller frees the array and names). */
static enum rt_err staged_names(int stagefd, char ***names_out, size_t *n_out)
{
	DIR *d = fdopendir(dup(stagefd));
	struct dirent *e;
	char **names = NULL, **grown;
	size_t n = 0;
	struct stat st;

	if (!d)
		return rt_fail(RT_EIO, "cannot list the staging folder: %s", strerror(errno));
	while ((e = readdir(d))) {
		if (!plain_name(e->d_name) || fstatat(stagefd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue;
		grown = realloc(names, (n + 1) * sizeof(*names));
		if (!grown || !(grown[n] = strdup(e->d_name))) {
			names = grown ? grown : names;
			break;
		}
		names = grown;
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), name_cmp);
	*names_out = names;
	*n_out = n;
	return e ? rt_fail(RT_ENOMEM, "out of memory listing the results") : RT_EOK;
}

/* Moves the results into place (a rename replaces a link, never writes
 * through it), then lists them in the manifest for the next run. */
enum rt_err kb_outputs_commit(struct rt_job *job, struct kb_outdir *od)
{
	const char *dir = job->result_dir;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), stagefd = -1;
	char **names = NULL;
	size_t n = 0;
	struct rt_buf list;
	enum rt_err err = RT_EOK;

	rt_buf_init(&list);
	if (dfd < 0 || (stagefd = openat(dfd, STAGE_NAME, O_RDONLY | O_DIRECTORY |
					   O_NOFOLLOW | O_CLOEXEC)) < 0)
		err = rt_fail(RT_EIO, "cannot open %s/%s: %s", dir, STAGE_NAME, strerror(errno));
	if (!err)
		err = staged_names(stagefd, &names, &n);
	if (!err) /* the previous run's results go as this run's come */
		remove_previous_results(dfd);
	for (size_t i = 0; !err && i < n; i++) {
		err = rt_buf_printf(&list, "%s\n", names[i]);
		if (!err && renameat(stagefd, names[i], dfd, names[i]))
			err = rt_fail(RT_EIO, "cannot move %s into %s: %s", names[i], dir,
				      strerror(errno));
	}
	if (!err)
		err = write_manifest(stagefd, dfd, &list);
	if (err) /* no half set of results: take back what was moved */
		for (size_t i = 0; i < n; i++)
			kb_remove_owned(dfd, names[i], false);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	rt_buf_release(&list);
	if (stagefd >= 0)
		close(stagefd);
	if (dfd >= 0) {
		kb_remove_owned(dfd, STAGE_NAME, true);
		close(dfd);
	}
	memcpy(job->out_dir, job->result_dir, sizeof(job->out_dir));
	(void)od; /* the lock stays held until the process ends */
	return err;
}

void kb_outputs_discard(const struct rt_job *job)
{
	int fd = open(job->out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return;
	kb_remove_owned(fd, RT_PARTS_DIR, true);
	close(fd);
}

/* ---------------------------------------------------------------- args */

/* Merges every kernel host's args part ("name\tgiven|default\tvalue"
 * lines) into `out`: one line per name, sorted. Traffic and other
 * workloads without kernel hosts have none. */
static enum rt_err gather_args(const struct rt_job *job, const struct rt_topology *topo,
			       struct rt_buf *out)
{
	struct rt_buf all, part;
	char name[32], **lines = NULL;
	size_t n = 0;
	enum rt_err err = RT_EOK;

	rt_buf_init(&all);
	rt_buf_init(&part);
	for (uint32_t id = 0; !err && id < topo->n_components; id++) {
		const struct rt_component_desc *c = &topo->components[id];

		if (strcmp(c->ops->name, "host"))
			continue;
		snprintf(name, sizeof(name), "args.%u.%u", c->rank, c->pe);
		err = read_part(job, name, &part);
		if (!err && part.len)
			err = rt_buf_append(&all, part.data, part.len);
	}
	for (size_t i = 0; !err && i < all.len; i++)
		n += all.data[i] == '\n';
	lines = calloc(n ? n : 1, sizeof(*lines));
	if (!err && !lines)
		err = rt_fail(RT_ENOMEM, "cannot sort %zu argument records", n);
	for (size_t i = 0, k = 0; !err && k < n; k++) {
		lines[k] = all.data + i;
		i = (size_t)(strchr(all.data + i, '\n') - all.data) + 1;
		all.data[i - 1] = '\0';
	}
	if (!err && n)
		qsort(lines, n, sizeof(*lines), name_cmp);
	/* every host saw the same --arg list, so equal names carry equal lines */
	for (size_t k = 0; !err && k < n; k++)
		if (!k || strcmp(lines[k - 1], lines[k]))
			err = rt_buf_printf(out, "%s\n", lines[k]);
	free(lines);
	rt_buf_release(&all);
	rt_buf_release(&part);
	return err;
}

/* Whether merged args text has a "name\tgiven\t" line. */
static bool arg_given(const char *text, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = text; p && *p; p = strchr(p, '\n') + 1)
		if (!strncmp(p, name, len) && !strncmp(p + len, "\tgiven\t", 7))
			return true;
	return false;
}

/* An --arg no kernel asked for is most likely a typo: a usage error
 * (RT_EUSAGE) that lists the names the kernel does ask for. */
static enum rt_err check_args_read(const struct rt_job *job, const struct rt_topology *topo,
				   const struct rt_buf *args)
{
	struct rt_buf asked;
	enum rt_err err = RT_EOK;
	bool hosts = false;

	for (uint32_t id = 0; id < topo->n_components; id++)
		hosts = hosts || !strcmp(topo->components[id].ops->name, "host");
	if (!hosts) /* other workloads check their own arguments up front */
		return RT_EOK;
	for (uint32_t i = 0; !err && i < job->n_args; i++) {
		if (arg_given(args->data, job->args[i].name))
			continue;
		rt_buf_init(&asked);
		for (const char *p = args->data; p && *p; p = strchr(p, '\n') + 1)
			rt_buf_printf(&asked, "%s%.*s", asked.len ? ", " : "", (int)strcspn(p, "\t"),
				      p);
		err = rt_fail(RT_EUSAGE, "--arg %s=%.60s: kernel %s never reads '%s' (it reads: %s)",
			      job->args[i].name, job->args[i].value, job->workload,
			      job->args[i].name, asked.len ? asked.data : "no arguments");
		rt_buf_release(&asked);
	}
	return err;
}

/* An --inputs no kernel host asked for (its "inputs.R.P" marker part) was
 * silently ignored: a usage error like an --arg no kernel read. */
static enum rt_err check_inputs_read(const struct rt_job *job, const struct rt_topology *topo)
{
	char name[32], path[RT_PATH_MAX + 64];

	if (!job->inputs_dir[0])
		return RT_EOK;
	for (uint32_t id = 0; id < topo->n_components; id++) {
		const struct rt_component_desc *c = &topo->components[id];

		if (strcmp(c->ops->name, "host"))
			continue;
		snprintf(name, sizeof(name), "inputs.%u.%u", c->rank, c->pe);
		part_path(job, name, path, sizeof(path));
		if (!access(path, F_OK))
			return RT_EOK;
	}
	return rt_fail(RT_EUSAGE, "--inputs %.200s: workload %s reads no input files", job->inputs_dir,
		       job->workload);
}

/* With KB_REPORT_RSS=1 in the environment, one stderr line gives the
 * launcher's own peak resident memory once the outputs are merged (daemons
 * in processes of their own are not counted, embedded ones are): what the
 * tests and bench/merge_bench check the streaming merge with. It is not in
 * summary.json, whose bytes must not depend on the run. */
static void report_peak_rss(void)
{
	const char *env = getenv("KB_REPORT_RSS");
	struct rusage ru;

	if (env && !strcmp(env, "1") && !getrusage(RUSAGE_SELF, &ru))
		fprintf(stderr, "kernbench: launcher peak RSS %ld KB\n", ru.ru_maxrss);
}

enum rt_err kb_outputs_merge(const struct rt_job *job, const struct rt_topology *topo,
			     const struct kb_run_facts *facts)
{
	double merge_started = rt_mono_s();
	struct kb_run_facts f = *facts;
	struct kb_steps steps = { 0 };
	struct kb_agg agg;
	struct kb_energy energy = { 0 };
	struct rt_buf args;
	enum rt_err err = kb_agg_build(&agg, topo, &facts->reports);

	if (!err)
		err = kb_energy_compute(&job->config, topo, &facts->reports,
					kb_stat_get(&agg.totals, "last_ps"), &energy);
	rt_buf_init(&args);
	if (!err)
		err = gather_args(job, topo, &args);
	if (!err)
		err = check_args_read(job, topo, &args);
	if (!err)
		err = check_inputs_read(job, topo);
	f.args = args.data ? args.data : "";
	if (!err)
		err = kb_steps_read(job, topo, &steps);
	f.steps = &steps;
	if (!err)
		err = kb_oplog_write(job, topo, &agg.hbm_busy_ps, &steps);
	if (!err)
		kb_steps_finish(&steps);
	if (!err)
		err = kb_trace_write(job, topo);
	if (!err)
		err = kb_cpath_write(job, topo, &agg);
	if (!err)
		err = kb_stats_csv_write(job, topo, &facts->reports, &energy);
	/* the summary is the last output: what it records as wall time is the
	 * whole run, the merge of every other output included */
	f.merge_s = rt_mono_s() - merge_started;
	f.wall_s = rt_mono_s() - f.started_s;
	if (!err)
		err = kb_report_write(job, topo, &f, &agg, &energy);
	kb_outputs_discard(job);
	report_peak_rss();
	rt_buf_release(&args);
	kb_steps_release(&steps);
	kb_energy_release(&energy);
	kb_agg_release(&agg);
	return err;
}
