/* sweep_results.c — a sweep's results.csv, sweep.json and plot
 * (sweep.h).
 *
 * A row per point: its index, the swept values, its status, then what its
 * summary.json says, read generically: every top-level number or string
 * of the deterministic part (above "transport") and of the objects in it,
 * flattened with dots (busy_util.gemm, energy.by_action.hbm,
 * critical_path.*, ...), plus wall_s. The bulky records (config, args,
 * by_kind, totals, per-instance statistics) stay in the point's folder.
 * So keys other parts of kernbench add to summary.json become columns
 * without a change here. Columns are the union over points, in the order
 * they first appear. */
#include "sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "csv.h"
#include "release.h"
#include "rt/buf.h"
#include "rt/grow.h"
#include "rt/json.h"
#include "rt/json_read.h"

/* Summary members that are not a point's figures: too big for a row, or
 * its axes already. */
static const char *const skipped[] = { "config", "args", "by_kind", "totals", "stat_info",
				       "instances", "command" };

struct cell {
	char *key;   /* column */
	char *value; /* owned */
};

struct row {
	struct cell *cells;
	size_t n, cap;
};

struct table {
	struct row *rows;     /* by point */
	char **cols;          /* summary columns, first-seen order */
	size_t n_cols, cap_cols;
	enum rt_err err;
};

static void add_col(struct table *t, const char *key)
{
	for (size_t i = 0; i < t->n_cols; i++)
		if (!strcmp(t->cols[i], key))
			return;
	if (!RT_GROW(t->cols, t->cap_cols, t->n_cols, 64)) {
		t->err = rt_fail(RT_ENOMEM, "sweep: out of memory");
		return;
	}
	if (!(t->cols[t->n_cols] = strdup(key)))
		t->err = rt_fail(RT_ENOMEM, "sweep: out of memory");
	else
		t->n_cols++;
}

static void add_cell(struct table *t, struct row *r, const char *key, const char *value)
{
	if (t->err)
		return;
	if (!RT_GROW(r->cells, r->cap, r->n, 64)) {
		t->err = rt_fail(RT_ENOMEM, "sweep: out of memory");
		return;
	}
	r->cells[r->n].key = strdup(key);
	r->cells[r->n].value = strdup(value);
	if (!r->cells[r->n].key || !r->cells[r->n].value)
		t->err = rt_fail(RT_ENOMEM, "sweep: out of memory");
	r->n++;
	add_col(t, key);
}

/* Scalars of `v` as cells "prefix.key", objects recursed into. */
static void flatten(struct table *t, struct row *r, const char *prefix, const struct rt_jval *v,
		    unsigned depth)
{
	char key[512];

	if (v->type == RT_J_OBJ) {
		if (depth > 4)
			return;
		for (size_t i = 0; i < v->n; i++) {
			snprintf(key, sizeof(key), "%s%s%s", prefix, prefix[0] ? "." : "", v->keys[i]);
			flatten(t, r, key, &v->items[i], depth + 1);
		}
		return;
	}
	if (v->type == RT_J_ARR)
		return;
	add_cell(t, r, prefix, v->type == RT_J_NULL ? "" : v->type == RT_J_BOOL
							       ? (v->b ? "true" : "false")
							       : v->text);
}

static bool is_skipped(const char *key)
{
	for (size_t i = 0; i < sizeof(skipped) / sizeof(skipped[0]); i++)
		if (!strcmp(key, skipped[i]))
			return true;
	return false;
}

/* A done point's summary.json into its row. */
static enum rt_err read_summary(struct table *t, struct row *r, const char *path)
{
	struct rt_buf text;
	struct rt_jval root;
	bool past = false;
	enum rt_err err;

	rt_buf_init(&text);
	err = rt_buf_read_file(&text, path);
	if (!err)
		err = rt_json_parse(text.data, text.len, path, &root);
	rt_buf_release(&text);
	if (err) {
		rt_jval_release(&root);
		return err;
	}
	for (size_t i = 0; root.type == RT_J_OBJ && i < root.n; i++) {
		past = past || !strcmp(root.keys[i], "transport");
		if ((past && strcmp(root.keys[i], "wall_s")) || is_skipped(root.keys[i]))
			continue;
		flatten(t, r, root.keys[i], &root.items[i], 1);
	}
	rt_jval_release(&root);
	return t->err;
}

static const char *cell(const struct row *r, const char *key)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->cells[i].key, key))
			return r->cells[i].value;
	return "";
}

static const char *status_of(const struct kb_point *p)
{
	return p->done ? "ok" : p->failed ? "failed" : "pending";
}

static enum rt_err csv_text(const struct kb_sweep *s, const struct table *t, struct rt_buf *b)
{
	enum rt_err err = kb_csv_field(b, "point", true);

	for (size_t x = 0; !err && x < s->spec.n_axes; x++)
		err = kb_csv_field(b, s->spec.axes[x].column, false);
	if (!err)
		err = kb_csv_field(b, "status", false);
	for (size_t c = 0; !err && c < t->n_cols; c++)
		err = kb_csv_field(b, t->cols[c], false);
	if (!err)
		err = rt_buf_printf(b, ",dir,error\n");
	for (size_t i = 0; !err && i < s->n_points; i++) {
		const struct kb_point *p = &s->points[i], *f = &s->points[p->first];
		char dir[64];

		err = kb_csv_u64(b, i, true);
		for (size_t x = 0; !err && x < s->spec.n_axes; x++)
			err = kb_csv_field(b, s->spec.axes[x].values[p->value[x]], false);
		if (!err)
			err = kb_csv_field(b, status_of(f), false);
		for (size_t c = 0; !err && c < t->n_cols; c++)
			err = kb_csv_field(b, cell(&t->rows[i], t->cols[c]), false);
		snprintf(dir, sizeof(dir), "points/%s", f->hash);
		if (!err)
			err = kb_csv_field(b, dir, false);
		if (!err)
			err = kb_csv_field(b, f->failed ? f->error : "", false);
		if (!err)
			err = rt_buf_append(b, "\n", 1);
	}
	return err;
}

/* sweep.json: what the sweep varied, for the plot and the Python API. */
static enum rt_err sweep_json(const struct kb_sweep *s, struct rt_buf *b)
{
	struct rt_json j;

	rt_json_init(&j, b);
	rt_json_object(&j, NULL, RT_JSON_LINES);
	rt_json_str(&j, "workload", s->spec.workload);
	rt_json_u64(&j, "points", s->n_points);
	rt_json_bool(&j, "zip", s->spec.zip);
	rt_json_array(&j, "axes", RT_JSON_LINES);
	for (size_t x = 0; x < s->spec.n_axes; x++) {
		const struct kb_axis *a = &s->spec.axes[x];

		rt_json_object(&j, NULL, RT_JSON_INLINE);
		rt_json_str(&j, "column", a->column);
		rt_json_str(&j, "option", kb_axis_option(a->kind));
		rt_json_bool(&j, "numeric", a->numeric);
		rt_json_bool(&j, "geometric", a->geometric);
		rt_json_array(&j, "values", RT_JSON_INLINE);
		for (size_t i = 0; i < a->n; i++)
			rt_json_str(&j, NULL, a->values[i]);
		rt_json_close(&j);
		rt_json_close(&j);
	}
	rt_json_close(&j);
	rt_json_array(&j, "objectives", RT_JSON_INLINE);
	for (unsigned i = 0; i < s->spec.n_objectives; i++)
		rt_json_str(&j, NULL, s->spec.objectives[i]);
	rt_json_close(&j);
	rt_json_close(&j);
	rt_buf_append(b, "\n", 1);
	return rt_json_finish(&j);
}

/* Writes `b` as OUT/NAME unless it already holds exactly these bytes
 * (*changed says which); through a temporary file and a rename, so a
 * reader (or another task) never sees half a file. */
static enum rt_err write_if_changed(const struct kb_sweep *s, const char *name,
				    const struct rt_buf *b, bool *changed)
{
	char path[1200], tmp[1300];
	struct rt_buf old;
	FILE *f;
	bool ok;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", s->out, name);
	rt_buf_init(&old);
	*changed = rt_buf_read_file(&old, path) || old.len != b->len ||
		   (b->len && memcmp(old.data, b->data, b->len));
	rt_buf_release(&old);
	if (!*changed)
		return RT_EOK;
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	/* a fresh file, never through a link planted at the temporary name;
	 * the rename replaces whatever `path` was (a link too) unfollowed */
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f && fd >= 0)
		close(fd);
	ok = f && fwrite(b->data ? b->data : "", 1, b->len, f) == b->len;
	ok = f && !fclose(f) && ok;
	if (!ok || rename(tmp, path)) {
		unlink(tmp);
		return rt_fail(RT_EIO, "sweep: cannot write %s: %s", path, strerror(errno));
	}
	return RT_EOK;
}

static bool newer(const char *a, const char *b)
{
	struct stat sa, sb;

	return !stat(a, &sa) && !stat(b, &sb) &&
	       (sa.st_mtim.tv_sec > sb.st_mtim.tv_sec ||
		(sa.st_mtim.tv_sec == sb.st_mtim.tv_sec && sa.st_mtim.tv_nsec >= sb.st_mtim.tv_nsec));
}

/* python3 kernbench_sweep_plot.py OUT [--wait]; its pid, or -1 with the
 * warning said. With --wait it imports matplotlib, then reads its stdin:
 * "draw" draws, end of file leaves. */
static pid_t start_plotter(const struct kb_sweep *s, int *fd)
{
	char script[4200];
	int p[2] = { -1, -1 };
	pid_t pid;

	if (!kb_find_script("kernbench_sweep_plot.py", script, sizeof(script))) {
		fprintf(stderr, "kernbench: warning: sweep: kernbench_sweep_plot.py not found beside "
			"this binary; no plot (results.csv is complete)\n");
		return -1;
	}
	/* a socket, not a pipe: a plotter that died is an EPIPE, not SIGPIPE */
	if (fd && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		char *argv[] = { (char *)"python3", script, (char *)s->out, fd ? (char *)"--wait" : NULL,
				 NULL };

		if (fd)
			dup2(p[0], STDIN_FILENO);
		execv("/usr/bin/python3", argv);
		_exit(127);
	}
	if (fd) {
		close(p[0]);
		*fd = pid > 0 ? p[1] : -1;
		if (pid < 0)
			close(p[1]);
	}
	return pid;
}

void kb_sweep_plot_early(struct kb_sweep *s)
{
	pid_t pid;

	if (!s->plot)
		return;
	pid = start_plotter(s, &s->plotter_fd);
	s->plotter = pid > 0 ? pid : 0;
	if (!s->plotter)
		s->plot = false; /* the warning is said */
}

/* Ends an early plot script: draws (`draw`) or leaves; its exit status. */
static int end_plotter(struct kb_sweep *s, bool draw)
{
	int wstatus = -1;

	if (!s->plotter)
		return -1;
	if (draw && send(s->plotter_fd, "draw\n", 5, MSG_NOSIGNAL) != 5)
		draw = false;
	close(s->plotter_fd);
	if (!draw) /* not wanted: no need to let it finish importing */
		kill(s->plotter, SIGTERM);
	while (waitpid(s->plotter, &wstatus, 0) < 0 && errno == EINTR)
		;
	s->plotter = 0;
	return draw ? wstatus : -1;
}

/* The plot: a warning, not a failure, when it cannot draw (the numbers
 * are in results.csv). */
static bool plot(struct kb_sweep *s, bool changed)
{
	char png[1200], csv[1200];
	int wstatus;
	pid_t pid;
	bool any = false;

	for (size_t i = 0; i < s->n_points; i++)
		any = any || s->points[s->points[i].first].done;
	/* one point with one objective: nothing to draw a line through */
	any = any && (s->spec.n_axes || s->spec.n_objectives == 2);
	snprintf(png, sizeof(png), "%s/sweep.png", s->out);
	snprintf(csv, sizeof(csv), "%s/results.csv", s->out);
	if (!any || (!changed && newer(png, csv))) {
		end_plotter(s, false);
		return any; /* nothing to draw, or drawn already from these results */
	}
	if (s->plotter) {
		wstatus = end_plotter(s, true);
	} else {
		pid = start_plotter(s, NULL);
		if (pid < 0 || waitpid(pid, &wstatus, 0) < 0)
			wstatus = -1;
	}
	if (wstatus == -1 || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus)) {
		fprintf(stderr, "kernbench: warning: sweep: the plot could not be drawn (the line "
			"above says why); results.csv is complete\n");
		return false;
	}
	return true;
}

static void table_release(struct table *t, size_t n_rows)
{
	for (size_t i = 0; t->rows && i < n_rows; i++) {
		for (size_t c = 0; c < t->rows[i].n; c++) {
			free(t->rows[i].cells[c].key);
			free(t->rows[i].cells[c].value);
		}
		free(t->rows[i].cells);
	}
	free(t->rows);
	for (size_t c = 0; c < t->n_cols; c++)
		free(t->cols[c]);
	free(t->cols);
}

enum rt_err kb_sweep_results(struct kb_sweep *s, bool *complete)
{
	struct table t = { 0 };
	struct rt_buf csv, js;
	char path[1400];
	bool changed = false, meta_changed = false;
	enum rt_err err = RT_EOK;

	*complete = true;
	for (size_t i = 0; i < s->n_points; i++) {
		const struct kb_point *f = &s->points[s->points[i].first];

		*complete = *complete && (f->done || f->failed);
	}
	if (!*complete) {
		end_plotter(s, false);
		return RT_EOK;
	}
	t.rows = calloc(s->n_points ? s->n_points : 1, sizeof(*t.rows));
	if (!t.rows)
		return rt_fail(RT_ENOMEM, "sweep: out of memory");
	for (size_t i = 0; !err && i < s->n_points; i++) {
		const struct kb_point *f = &s->points[s->points[i].first];

		if (!f->done)
			continue;
		snprintf(path, sizeof(path), "%s/points/%s/summary.json", s->out, f->hash);
		err = read_summary(&t, &t.rows[i], path);
	}
	rt_buf_init(&csv);
	rt_buf_init(&js);
	if (!err)
		err = csv_text(s, &t, &csv);
	if (!err)
		err = sweep_json(s, &js);
	if (!err)
		err = write_if_changed(s, "sweep.json", &js, &meta_changed);
	if (!err)
		err = write_if_changed(s, "results.csv", &csv, &changed);
	rt_buf_release(&csv);
	rt_buf_release(&js);
	table_release(&t, s->n_points);
	s->plotted = !err && s->plot && plot(s, changed || meta_changed);
	end_plotter(s, false);
	return err;
}
