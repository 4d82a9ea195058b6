/* outputs.c — merges the daemons' output parts into the run's outputs.
 *
 * Every component wrote its own parts (op log lines with a sort key, trace
 * events, statistics) in its own event order. Merging by a key that does not
 * mention daemons makes the outputs identical whatever the transport or
 * colocation:
 *   op_log.jsonl  all records sorted by (start, end, component, seq)
 *   trace.json    all records sorted by time (trace_out.c)
 *   summary.json  statistics from the components' end-of-run reports (BYE),
 *                 summed (or maxed) over components, by kind */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "energy.h"
#include "launcher.h"
#include "merge.h"
#include "steps.h"
#include "report.h"
#include "stats_out.h"
#include "trace_out.h"
#include "rt/buf.h"
#include "rt/component.h"
#include "rt/daemon.h"
#include "rt/event.h"

#define OPLOG_KEY_LEN 66 /* "%020 %020 %010 %012 " */

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

static void out_path(const struct rt_job *job, const char *name, char *path, size_t cap)
{
	snprintf(path, cap, "%s/%s", job->out_dir, name);
}

/* ---------------------------------------------------------------- op log */

/* The op log is merged as a stream: each part is cut into sorted runs (a
 * part already in key order is its own run; a chunk that is not is sorted
 * and appended to a run file), then the runs are merged through a heap.
 * The launcher holds one chunk and the merge buffers, never the whole log. */

struct line {
	const char *p;
	size_t len;
};

/* Byte order of whole lines (strcmp's order for lines without NUL). */
static int line_order(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c ? c : (alen > blen) - (alen < blen);
}

static int line_cmp(const void *pa, const void *pb)
{
	const struct line *a = pa, *b = pb;

	return line_order(a->p, a->len, b->p, b->len);
}

/* A run: [off, end) of a part file (file = part index) or of the run file
 * (file = n_parts); head is its current line while merging. */
struct oplog_run {
	uint32_t file;
	uint64_t off, end;
	struct kb_src src;
	struct line head;
};

struct oplog_merge {
	char **paths;        /* part paths, then the run file's */
	uint32_t n_paths;
	struct oplog_run *runs;
	size_t cap_runs;
	uint32_t n_runs;
	struct kb_runs_file rf;
	struct rt_buf chunk; /* the part bytes being cut */
	struct line *lines;
	size_t cap_lines;
	struct rt_buf last;  /* the last line of the part's previous chunk */
	size_t chunk_bytes;  /* part bytes sorted at a time */
};

static enum rt_err add_run(struct oplog_merge *m, uint32_t file, uint64_t off, uint64_t end)
{
	struct oplog_run *grown;

	grown = kb_grow(m->runs, &m->cap_runs, m->n_runs, sizeof(*m->runs), 64);
	if (!grown)
		return rt_fail(RT_ENOMEM, "no memory to merge the op log");
	m->runs = grown;
	m->runs[m->n_runs++] = (struct oplog_run){ .file = file, .off = off, .end = end };
	return RT_EOK;
}

/* Splits chunk bytes [0, len) into lines, checking each has its key. */
static enum rt_err chunk_lines(struct oplog_merge *m, size_t len, const char *path, size_t *n_out)
{
	size_t n = 0;

	for (size_t i = 0; i < len;) {
		const char *nl = memchr(m->chunk.data + i, '\n', len - i);
		size_t ll = (size_t)(nl - (m->chunk.data + i));
		struct line *grown;

		grown = kb_grow(m->lines, &m->cap_lines, n, sizeof(*m->lines), 4096);
		if (!grown)
			return rt_fail(RT_ENOMEM, "no memory to sort the op log");
		m->lines = grown;
		if (ll <= OPLOG_KEY_LEN || memchr(m->chunk.data + i, '\0', ll))
			return rt_fail(RT_EIO, "corrupt op log part line in %s: %.60s", path,
				       m->chunk.data + i);
		m->lines[n++] = (struct line){ m->chunk.data + i, ll };
		i += ll + 1;
	}
	*n_out = n;
	return RT_EOK;
}

static bool lines_sorted(const struct oplog_merge *m, size_t n)
{
	for (size_t k = 1; k < n; k++)
		if (line_cmp(&m->lines[k - 1], &m->lines[k]) > 0)
			return false;
	return true;
}

/* Makes chunk [0, len) at `off` of part `file` a run: in place when it is
 * in order (joined to the part's previous run when that one continues it),
 * else sorted into the run file. */
static enum rt_err cut_chunk(struct oplog_merge *m, uint32_t file, uint64_t off, size_t len,
			     bool first)
{
	size_t n = 0;
	enum rt_err err = chunk_lines(m, len, m->paths[file], &n);
	struct oplog_run *prev = m->n_runs ? &m->runs[m->n_runs - 1] : NULL;
	uint64_t at;

	if (err || !n)
		return err;
	if (lines_sorted(m, n)) {
		if (!first && prev && prev->file == file && prev->end == off &&
		    line_order(m->last.data, m->last.len, m->lines[0].p, m->lines[0].len) <= 0)
			prev->end = off + len;
		else
			err = add_run(m, file, off, off + len);
	} else {
		qsort(m->lines, n, sizeof(*m->lines), line_cmp);
		at = m->rf.size;
		for (size_t k = 0; !err && k < n; k++)
			err = kb_runs_file_write(&m->rf, m->lines[k].p, m->lines[k].len + 1);
		if (!err)
			err = add_run(m, m->n_paths - 1, at, m->rf.size);
	}
	rt_buf_reset(&m->last);
	return err ? err : rt_buf_append(&m->last, m->lines[n - 1].p, m->lines[n - 1].len);
}

/* Cuts one part file into runs, a chunk at a time. */
static enum rt_err cut_part(struct oplog_merge *m, uint32_t file)
{
	const char *path = m->paths[file];
	FILE *f = fopen(path, "rb");
	uint64_t off = 0;
	size_t have = 0, got;
	bool first = true;
	enum rt_err err = RT_EOK;

	if (!f)
		return errno == ENOENT ? RT_EOK /* a component that logged nothing */
				       : rt_fail(RT_EIO, "cannot open %s: %s", path, strerror(errno));
	do {
		char *nl;
		size_t used;

		if (m->chunk.cap < have + m->chunk_bytes + 1)
			err = rt_buf_reserve(&m->chunk, have + m->chunk_bytes - m->chunk.len);
		if (err)
			break;
		got = fread(m->chunk.data + have, 1, m->chunk_bytes, f);
		have += got;
		m->chunk.len = have;
		nl = have ? memrchr(m->chunk.data, '\n', have) : NULL;
		if (!nl) {
			if (!got && have)
				err = rt_fail(RT_EIO, "corrupt op log part %s: last line has no end",
					      path);
			continue; /* a line longer than a chunk: read on */
		}
		used = (size_t)(nl - m->chunk.data) + 1;
		err = cut_chunk(m, file, off, used, first);
		first = false;
		off += used;
		memmove(m->chunk.data, m->chunk.data + used, have - used);
		have -= used;
		m->chunk.len = have;
	} while (!err && (got || have));
	if (!err && ferror(f))
		err = rt_fail(RT_EIO, "cannot read %s", path);
	fclose(f);
	return err;
}

static int run_cmp(const void *ctx, uint32_t a, uint32_t b)
{
	const struct oplog_run *runs = ctx;

	return line_order(runs[a].head.p, runs[a].head.len, runs[b].head.p, runs[b].head.len);
}

static enum rt_err run_next(struct oplog_merge *m, uint32_t i)
{
	struct oplog_run *r = &m->runs[i];

	return kb_src_line(&r->src, &r->head.p, &r->head.len);
}

/* Busy time of each rank's HBM: the union of its DMA records' intervals,
 * swept as the merge emits records in start order (so a rank's records
 * arrive in start order too). */
struct hbm_sweep {
	const struct rt_topology *topo;
	uint32_t ranks;
	uint64_t *busy, *from, *to; /* per rank: counted, current interval */
};

static enum rt_err hbm_sweep_init(struct hbm_sweep *h, const struct rt_topology *topo,
				  uint32_t ranks)
{
	h->topo = topo;
	h->ranks = ranks ? ranks : 1;
	h->busy = calloc(3 * (size_t)h->ranks, sizeof(uint64_t));
	h->from = h->busy + h->ranks;
	h->to = h->from + h->ranks;
	return h->busy ? RT_EOK : rt_fail(RT_ENOMEM, "no memory to sum HBM busy time");
}

/* One record, by its sort key "%020 start %020 end %010 component ...". */
static void hbm_sweep_add(struct hbm_sweep *h, const char *key)
{
	uint64_t start = strtoull(key, NULL, 10), end = strtoull(key + 21, NULL, 10);
	unsigned long comp = strtoul(key + 42, NULL, 10);
	const struct rt_component_desc *c;
	uint32_t r;

	if (comp >= h->topo->n_components)
		return;
	c = &h->topo->components[comp];
	if (strcmp(c->ops->name, "dma") || c->rank >= h->ranks)
		return;
	r = c->rank;
	if (start > h->to[r]) { /* a gap: close the interval so far */
		h->busy[r] += h->to[r] - h->from[r];
		h->from[r] = start;
		h->to[r] = start;
	}
	if (end > h->to[r])
		h->to[r] = end;
}

/* The busiest rank's HBM busy time. */
static uint64_t hbm_sweep_finish(struct hbm_sweep *h)
{
	uint64_t most = 0;

	for (uint32_t r = 0; r < h->ranks; r++) {
		uint64_t b = h->busy[r] + (h->to[r] - h->from[r]);

		most = b > most ? b : most;
	}
	free(h->busy);
	return most;
}

/* Merges the runs into `out`, without the sort keys; each record also
 * goes to the HBM sweep and to the program's steps (per-step busy times). */
static enum rt_err merge_runs(struct oplog_merge *m, FILE *out, const char *path,
			      struct hbm_sweep *sweep, struct kb_steps *steps)
{
	struct kb_heap heap;
	size_t cap = kb_merge_buf_size(m->n_runs);
	enum rt_err err = kb_heap_init(&heap, m->n_runs, run_cmp, m->runs);

	for (uint32_t i = 0; !err && i < m->n_runs; i++) {
		struct oplog_run *r = &m->runs[i];

		kb_src_init(&r->src, m->paths[r->file], r->off, r->end, cap);
		err = run_next(m, i);
		if (!err && r->head.p)
			kb_heap_push(&heap, i);
	}
	while (!err && heap.n) {
		uint32_t top = heap.ids[0];
		const struct line *h = &m->runs[top].head;

		hbm_sweep_add(sweep, h->p);
		if (fwrite(h->p + OPLOG_KEY_LEN, 1, h->len - OPLOG_KEY_LEN, out) !=
			    h->len - OPLOG_KEY_LEN || putc('\n', out) == EOF)
			err = rt_fail(RT_EIO, "cannot write %s: %s", path, strerror(errno));
		if (!err && steps && steps->n)
			kb_steps_oplog(steps, h->p + OPLOG_KEY_LEN, h->len - OPLOG_KEY_LEN);
		if (!err)
			err = run_next(m, top);
		if (!err)
			kb_heap_fix_top(&heap, !m->runs[top].head.p);
	}
	for (uint32_t i = 0; i < m->n_runs; i++)
		kb_src_release(&m->runs[i].src);
	kb_heap_release(&heap);
	return err;
}

static void oplog_merge_release(struct oplog_merge *m)
{
	for (uint32_t i = 0; m->paths && i < m->n_paths; i++)
		free(m->paths[i]);
	free(m->paths);
	free(m->runs);
	free(m->lines);
	kb_runs_file_close(&m->rf);
	rt_buf_release(&m->chunk);
	rt_buf_release(&m->last);
}

static enum rt_err oplog_merge_init(struct oplog_merge *m, const struct rt_job *job,
				    uint32_t n_parts)
{
	char dir[RT_PATH_MAX + 16], name[32];

	memset(m, 0, sizeof(*m));
	rt_buf_init(&m->chunk);
	rt_buf_init(&m->last);
	m->chunk_bytes = kb_merge_chunk_bytes();
	snprintf(dir, sizeof(dir), "%s/%s", job->out_dir, RT_PARTS_DIR);
	kb_runs_file_open(&m->rf, dir, "oplog.runs");
	m->paths = calloc(n_parts + 1, sizeof(*m->paths));
	if (!m->paths)
		return rt_fail(RT_ENOMEM, "no memory to merge the op log");
	m->n_paths = n_parts + 1;
	for (uint32_t id = 0; id < n_parts; id++) {
		snprintf(name, sizeof(name), "%u.oplog", id);
		m->paths[id] = malloc(RT_PATH_MAX + 64);
		if (!m->paths[id])
			return rt_fail(RT_ENOMEM, "no memory to merge the op log");
		part_path(job, name, m->paths[id], RT_PATH_MAX + 64);
	}
	m->paths[n_parts] = strdup(m->rf.path);
	return m->paths[n_parts] ? RT_EOK : rt_fail(RT_ENOMEM, "no memory to merge the op log");
}

/* op_log.jsonl: every part's records in (start, end, component, seq) order;
 * on the way, each rank's HBM busy time into agg->hbm_busy_ps and each
 * record into the program's steps. */
static enum rt_err write_oplog(const struct rt_job *job, const struct rt_topology *topo,
			       struct kb_agg *agg, struct kb_steps *steps)
{
	struct oplog_merge m;
	struct hbm_sweep sweep;
	char path[RT_PATH_MAX + 32];
	FILE *out = NULL;
	enum rt_err err = oplog_merge_init(&m, job, topo->n_components);

	if (!err)
		err = hbm_sweep_init(&sweep, topo, job->config.ranks);
	if (err) {
		oplog_merge_release(&m);
		return err;
	}

	for (uint32_t id = 0; !err && id < topo->n_components; id++)
		err = cut_part(&m, id);
	if (!err)
		err = kb_runs_file_close(&m.rf);
	rt_buf_release(&m.chunk); /* the merge needs only its buffers */
	free(m.lines);
	m.lines = NULL;
	out_path(job, "op_log.jsonl", path, sizeof(path));
	if (!err && !(out = fopen(path, "wb")))
		err = rt_fail(RT_EIO, "cannot create %s: %s", path, strerror(errno));
	if (out)
		setvbuf(out, NULL, _IOFBF, 1 << 20);
	if (!err)
		err = merge_runs(&m, out, path, &sweep, steps);
	if (out && fclose(out) && !err)
		err = rt_fail(RT_EIO, "cannot write %s: %s", path, strerror(errno));
	agg->hbm_busy_ps = hbm_sweep_finish(&sweep);
	oplog_merge_release(&m);
	return err;
}

/* ---------------------------------------------------------------- stats */

static struct kb_stat *stat_slot(struct kb_stat_set *set, const char *name, bool is_max)
{
	for (size_t i = 0; i < set->n; i++)
		if (!strcmp(set->items[i].name, name))
			return &set->items[i];
	if (set->n == set->cap) {
		size_t cap = set->cap ? 2 * set->cap : 16;
		struct kb_stat *grown = realloc(set->items, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		set->items = grown;
		set->cap = cap;
	}
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

/* A result file name as a manifest may list it: one plain name. */
static bool plain_name(const char *name)
{
	return name[0] && name[0] != '.' && !strchr(name, '/') && strlen(name) < 256;
}

/* Removes `name` in folder `at` only if it is ours: a regular file (or, with
 * `dirs`, a folder whose entries are ours) owned by this user. A link is
 * never followed; anything else is left alone. */
static void remove_owned(int at, const char *name, bool dirs)
{
	struct stat st;

	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) || st.st_uid != geteuid())
		return;
	if (S_ISREG(st.st_mode)) {
		unlinkat(at, name, 0);
	} else if (S_ISDIR(st.st_mode) && dirs) {
		int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		struct dirent *e;

		if (!d) {
			if (fd >= 0)
				close(fd);
			return;
		}
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				remove_owned(dirfd(d), e->d_name, true);
		closedir(d);
		unlinkat(at, name, AT_REMOVEDIR);
	}
}

/* Creates `path` and its missing parents (an existing folder is fine). */
static enum rt_err make_path(const char *path)
{
	char buf[RT_PATH_MAX];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(buf, 0755); /* the final mkdir reports */
			*p = '/';
		}
	if (mkdir(buf, 0755) && errno != EEXIST)
		return rt_fail(RT_EIO, "cannot create output folder %s: %s", path, strerror(errno));
	return RT_EOK;
}

/* Takes the folder's lock; a second run into the same folder is told so. */
static enum rt_err lock_folder(int at, const char *dir, int *lock_fd)
{
	int fd = openat(at, LOCK_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
			0644);
	char pid[32] = "";
	struct stat st;
	ssize_t n;

	if (fd < 0)
		return rt_fail(RT_EIO, "output folder %s: cannot create %s: %s", dir, LOCK_NAME,
			       strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return rt_fail(RT_EIO, "output folder %s: %s is not a regular file", dir, LOCK_NAME);
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
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
	*lock_fd = fd;
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
				remove_owned(at, line, false);
	}
	if (fd >= 0)
		close(fd);
	free(text);
	remove_owned(at, MANIFEST_NAME, false);
}

enum rt_err kb_outputs_prepare(struct rt_job *job, int *lock_fd)
{
	const char *dir = job->result_dir;
	enum rt_err err = make_path(dir);
	int dfd = -1;

	*lock_fd = -1;
	if (!err && (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		err = rt_fail(RT_EIO, "cannot open output folder %s: %s", dir, strerror(errno));
	if (!err)
		err = lock_folder(dfd, dir, lock_fd);
	if (!err) {
		remove_previous_results(dfd);
		remove_owned(dfd, STAGE_NAME, true); /* left by a killed run */
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

void kb_outputs_abandon(struct rt_job *job)
{
	int dfd = open(job->result_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dfd < 0)
		return;
	remove_owned(dfd, STAGE_NAME, true);
	close(dfd);
	memcpy(job->out_dir, job->result_dir, sizeof(job->out_dir));
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
enum rt_err kb_outputs_commit(struct rt_job *job)
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
			remove_owned(dfd, names[i], false);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	rt_buf_release(&list);
	if (stagefd >= 0)
		close(stagefd);
	if (dfd >= 0)
		close(dfd);
	kb_outputs_abandon(job);
	return err;
}

void kb_outputs_discard(const struct rt_job *job)
{
	int fd = open(job->out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return;
	remove_owned(fd, RT_PARTS_DIR, true);
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
 * (RT_EINVAL) that lists the names the kernel does ask for. */
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
		err = rt_fail(RT_EINVAL, "--arg %s=%.60s: kernel %s never reads '%s' (it reads: %s)",
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
	return rt_fail(RT_EINVAL, "--inputs %.200s: workload %s reads no input files", job->inputs_dir,
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
		err = write_oplog(job, topo, &agg, &steps);
	if (!err)
		kb_steps_finish(&steps);
	if (!err)
		err = kb_trace_write(job, topo);
	if (!err)
		err = kb_cpath_write(job, topo, &agg);
	if (!err)
		err = kb_stats_csv_write(job, topo, &facts->reports, &energy);
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
