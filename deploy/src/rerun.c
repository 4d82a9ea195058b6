/* rerun.c — `run --from DIR` and `--config summary.json` (rerun.h). */
#include "rerun.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "rt/buf.h"
#include "rt/infile.h"
#include "rt/json_read.h"

/* What --from fixes itself: a second source for any of these is refused. */
static const char *const fixed_by_from[] = { "set", "arg", "config", "mode", "seed",
					     "ranks", "pes", "inputs", "machine" };

#define SUMMARY_MAX (256u << 20)

/* A parsed summary.json (root) and where it came from. */
struct recorded {
	struct rt_jval root;
	char path[RT_PATH_MAX];
};

/* DIR, or DIR/summary.json, or the file itself. */
static void summary_path(const char *given, char *out, size_t cap)
{
	struct stat st;

	if (!stat(given, &st) && S_ISDIR(st.st_mode))
		snprintf(out, cap, "%s/summary.json", given);
	else
		snprintf(out, cap, "%s", given);
}

static enum rt_err read_recorded(const char *given, struct recorded *rec)
{
	struct rt_buf text;
	enum rt_err err;

	summary_path(given, rec->path, sizeof(rec->path));
	rt_buf_init(&text);
	err = rt_infile_read(rec->path, "summary", SUMMARY_MAX, false, &text);
	if (!err)
		err = rt_json_parse(text.data, text.len, rec->path, &rec->root);
	rt_buf_release(&text);
	if (!err && (!rt_jval_str(rt_jval_get(&rec->root, "workload")) ||
		     rt_jval_get(&rec->root, "config") == NULL ||
		     rt_jval_get(&rec->root, "config")->type != RT_J_OBJ))
		err = rt_fail(RT_EUSAGE, "%s is not a kernbench summary.json (no workload or config)",
			      rec->path);
	if (err)
		return rt_fail(RT_EUSAGE, "--from: %s", rt_last_error());
	return RT_EOK;
}

/* Is `path` a summary.json? (A JSON object with a workload and a config:
 * YAML config files never start with '{' and a config key.) */
static bool is_summary(const char *path)
{
	FILE *f;
	char head[64];
	size_t n;
	struct recorded rec;
	struct stat st;
	bool yes;

	/* a pipe given as --config must not lose bytes to a peek */
	if (stat(path, &st) || !S_ISREG(st.st_mode) || !(f = fopen(path, "r")))
		return false;
	n = fread(head, 1, sizeof(head) - 1, f);
	fclose(f);
	head[n] = '\0';
	if (!strstr(head, "{") || !strstr(head, "\"workload\""))
		return false;
	memset(&rec, 0, sizeof(rec));
	yes = read_recorded(path, &rec) == RT_EOK;
	rt_jval_release(&rec.root);
	return yes;
}

/* The recorded configuration as YAML (sections of key: value; strings
 * as JSON strings, which YAML reads as double-quoted scalars). */
static enum rt_err config_yaml(const struct recorded *rec, struct rt_buf *out)
{
	const struct rt_jval *cfg = rt_jval_get(&rec->root, "config");
	enum rt_err err = RT_EOK;

	for (size_t s = 0; !err && s < cfg->n; s++) {
		const struct rt_jval *sec = &cfg->items[s];

		if (sec->type != RT_J_OBJ)
			return rt_fail(RT_EUSAGE, "--from %s: config.%s is not a section", rec->path,
				       cfg->keys[s]);
		err = rt_buf_printf(out, "%s:\n", cfg->keys[s]);
		for (size_t k = 0; !err && k < sec->n; k++) {
			const struct rt_jval *v = &sec->items[k];

			if (v->type != RT_J_NUM && v->type != RT_J_STR)
				return rt_fail(RT_EUSAGE, "--from %s: config.%s.%s is not a number or "
					       "a string", rec->path, cfg->keys[s], sec->keys[k]);
			err = rt_buf_printf(out, "  %s: ", sec->keys[k]);
			if (!err)
				err = v->type == RT_J_STR ? rt_buf_json_str(out, v->text)
							  : rt_buf_append(out, v->text, v->len);
			if (!err)
				err = rt_buf_append(out, "\n", 1);
		}
	}
	return err;
}

/* The recorded configuration in a sealed memory file; its path into
 * `path` ("/proc/self/fd/N", read by the launcher itself). */
static enum rt_err config_file(struct kb_rerun *r, const struct recorded *rec, char *path,
			       size_t cap)
{
	struct rt_buf yaml;
	enum rt_err err;
	int fd;

	if (r->n_fds == sizeof(r->fds) / sizeof(r->fds[0]))
		return rt_fail(RT_EUSAGE, "too many --config summary.json files");
	rt_buf_init(&yaml);
	err = config_yaml(rec, &yaml);
	fd = err ? -1 : memfd_create("kernbench-recorded-config", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (!err && fd < 0)
		err = rt_fail(RT_EIO, "--from: cannot create a memory file: %s", strerror(errno));
	if (!err && (write(fd, yaml.data ? yaml.data : "", yaml.len) != (ssize_t)yaml.len ||
		     lseek(fd, 0, SEEK_SET) != 0 ||
		     fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK)))
		err = rt_fail(RT_EIO, "--from: cannot fill a memory file: %s", strerror(errno));
	rt_buf_release(&yaml);
	if (err) {
		if (fd >= 0)
			close(fd);
		return err;
	}
	r->fds[r->n_fds++] = fd;
	snprintf(path, cap, "/proc/self/fd/%d", fd);
	return RT_EOK;
}

/* The command line being built. */
struct args {
	char **v;
	int n, cap;
};

static enum rt_err push(struct args *a, const char *s)
{
	if (a->n + 2 > a->cap) {
		int cap = a->cap ? 2 * a->cap : 64;
		char **grown = realloc(a->v, (size_t)cap * sizeof(*grown));

		if (!grown)
			return rt_fail(RT_ENOMEM, "run: out of memory for the command line");
		a->v = grown;
		a->cap = cap;
	}
	a->v[a->n] = strdup(s);
	if (!a->v[a->n])
		return rt_fail(RT_ENOMEM, "run: out of memory for the command line");
	a->v[++a->n] = NULL;
	return RT_EOK;
}

static enum rt_err push2(struct args *a, const char *opt, const char *val)
{
	enum rt_err err = push(a, opt);

	return err || !val ? err : push(a, val);
}

/* One option of the given command line, as getopt_long found it. */
struct given {
	const struct option *o;
	const char *val;
};

static bool fixed(const char *name)
{
	for (size_t i = 0; i < sizeof(fixed_by_from) / sizeof(fixed_by_from[0]); i++)
		if (!strcmp(fixed_by_from[i], name))
			return true;
	return false;
}

/* What the recorded run was: workload, mode, seed, arguments, inputs and
 * configuration, as options. */
static enum rt_err recorded_options(struct kb_rerun *r, const struct recorded *rec,
				    struct args *a)
{
	const struct rt_jval *args = rt_jval_get(&rec->root, "args");
	const char *mode = rt_jval_str(rt_jval_get(&rec->root, "mode"));
	const struct rt_jval *seed = rt_jval_get(&rec->root, "seed");
	const char *inputs = rt_jval_str(rt_jval_get(&rec->root, "inputs"));
	char path[64], text[512];
	enum rt_err err = push(a, rt_jval_str(rt_jval_get(&rec->root, "workload")));

	if (!err && mode)
		err = push2(a, "--mode", mode);
	if (!err && seed && seed->type == RT_J_NUM)
		err = push2(a, "--seed", seed->text);
	for (size_t i = 0; !err && args && args->type == RT_J_OBJ && i < args->n; i++) {
		if (!rt_jval_str(&args->items[i]))
			return rt_fail(RT_EUSAGE, "--from %s: args.%s is not a string", rec->path,
				       args->keys[i]);
		snprintf(text, sizeof(text), "%s=%s", args->keys[i], args->items[i].text);
		err = push2(a, "--arg", text);
	}
	if (!err && inputs)
		err = push2(a, "--inputs", inputs);
	if (!err)
		err = config_file(r, rec, path, sizeof(path));
	return err ? err : push2(a, "--config", path);
}

static enum rt_err scan(int argc, char **argv, struct given *g, int *n_given, const char **pos,
			int *n_pos, bool *unknown)
{
	char **copy = calloc((size_t)argc + 1, sizeof(*copy));
	const struct option *table = kb_cli_run_option_table();
	int id, index;

	if (!copy)
		return rt_fail(RT_ENOMEM, "run: out of memory reading the command line");
	memcpy(copy, argv, (size_t)argc * sizeof(*copy));
	*n_given = *n_pos = 0;
	*unknown = false;
	optind = 1;
	opterr = 0;
	while ((id = getopt_long(argc, copy, "", table, &index)) != -1 && *n_given < 256) {
		if (id == '?') {
			*unknown = true; /* the run parser says what is wrong */
			break;
		}
		g[(*n_given)++] = (struct given){ &table[index], optarg };
	}
	for (int i = optind; !*unknown && i < argc && *n_pos < 4; i++)
		pos[(*n_pos)++] = copy[i];
	free(copy);
	optind = 1;
	return RT_EOK;
}

/* --from SRC: the recorded options, then what the user added. */
static enum rt_err rewrite_from(struct kb_rerun *r, const char *src, const struct given *g,
				int n_given, int n_pos, const char *workload, struct args *a)
{
	struct recorded rec;
	bool has_out = false;
	char out[RT_PATH_MAX + 16], opt[80];
	const char *digest;
	enum rt_err err;

	if (n_pos)
		return rt_fail(RT_EUSAGE, "run --from %s: the recorded run names its workload; "
			       "drop WORKLOAD '%s'", src, workload);
	for (int i = 0; i < n_given; i++)
		if (fixed(g[i].o->name) && !(!strcmp(g[i].o->name, "config") && !strcmp(g[i].val, src)))
			return rt_fail(RT_EUSAGE, "run --from %s: --%s would change what the folder "
				       "recorded (a rerun takes its --set, --arg, --config, --mode, "
				       "--seed, --ranks, --pes and --inputs from it)", src,
				       g[i].o->name);
	memset(&rec, 0, sizeof(rec));
	err = read_recorded(src, &rec);
	digest = err ? NULL : rt_jval_str(rt_jval_get(&rec.root, "delivery_digest"));
	if (!err && !digest)
		err = rt_fail(RT_EUSAGE, "run --from: %s records no delivery_digest", rec.path);
	if (!err) {
		snprintf(r->from, sizeof(r->from), "%s", rec.path);
		snprintf(r->digest, sizeof(r->digest), "%s", digest);
		err = recorded_options(r, &rec, a);
	}
	for (int i = 0; !err && i < n_given; i++) {
		if (!strcmp(g[i].o->name, "from") || fixed(g[i].o->name))
			continue;
		has_out = has_out || !strcmp(g[i].o->name, "out");
		snprintf(opt, sizeof(opt), "--%s", g[i].o->name);
		err = push2(a, opt, g[i].o->has_arg ? g[i].val : NULL);
	}
	if (!err && !has_out) { /* beside the recorded results, never over them */
		snprintf(out, sizeof(out), "%s", rec.path);
		*(strrchr(out, '/') ? strrchr(out, '/') + 1 : out) = '\0';
		strcat(out, "rerun");
		err = push2(a, "--out", out);
	}
	rt_jval_release(&rec.root);
	r->active = !err;
	return err;
}

/* No --from: the command as given, each --config naming a summary.json
 * replaced by that run's configuration. */
static enum rt_err rewrite_configs(struct kb_rerun *r, int argc, char **argv, struct args *a)
{
	enum rt_err err = RT_EOK;

	for (int i = 1; !err && i < argc; i++) {
		const char *val = NULL;
		struct recorded rec;
		char path[64];

		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			val = argv[i + 1];
		else if (!strncmp(argv[i], "--config=", 9))
			val = argv[i] + 9;
		if (!val || !is_summary(val)) {
			err = push(a, argv[i]);
			continue;
		}
		memset(&rec, 0, sizeof(rec));
		err = read_recorded(val, &rec);
		if (!err)
			err = config_file(r, &rec, path, sizeof(path));
		rt_jval_release(&rec.root);
		if (!err)
			err = push2(a, "--config", path);
		i += val == argv[i + 1];
	}
	return err;
}

enum rt_err kb_rerun_prepare(int argc, char **argv, struct kb_rerun *r)
{
	static struct given g[256];
	const char *pos[4], *from = NULL, *summary = NULL;
	int n_given = 0, n_pos = 0, n_summaries = 0;
	struct args a = { 0 };
	bool unknown = false;
	enum rt_err err;

	memset(r, 0, sizeof(*r));
	err = scan(argc, argv, g, &n_given, pos, &n_pos, &unknown);
	for (int i = 0; !err && !unknown && i < n_given; i++) {
		if (!strcmp(g[i].o->name, "from")) {
			if (from)
				err = rt_fail(RT_EUSAGE, "run: --from given twice");
			from = g[i].val;
		}
		if (!strcmp(g[i].o->name, "config") && is_summary(g[i].val)) {
			summary = g[i].val;
			n_summaries++;
		}
	}
	/* --config DIR/summary.json alone, no workload: a rerun of DIR */
	if (!err && !unknown && !from && !n_pos && n_summaries == 1)
		from = summary;
	if (!err)
		err = push(&a, argv[0]);
	if (!err && from && !unknown)
		err = rewrite_from(r, from, g, n_given, n_pos, n_pos ? pos[0] : "", &a);
	else if (!err)
		err = rewrite_configs(r, argc, argv, &a);
	r->argv = a.v;
	r->argc = a.n;
	return err;
}

enum rt_err kb_rerun_check(const struct kb_rerun *r, const char *result_dir)
{
	struct recorded now;
	const char *digest;
	enum rt_err err;

	if (!r->active)
		return RT_EOK;
	memset(&now, 0, sizeof(now));
	err = read_recorded(result_dir, &now);
	digest = err ? NULL : rt_jval_str(rt_jval_get(&now.root, "delivery_digest"));
	if (!err && (!digest || strcmp(digest, r->digest)))
		err = rt_fail(RT_EIO, "rerun of %s: delivery digest %s, the recorded run had %s "
			      "(the binary or the model changed; `kernbench diff` the two folders)",
			      r->from, digest ? digest : "(none)", r->digest);
	rt_jval_release(&now.root);
	return err;
}

void kb_rerun_release(struct kb_rerun *r)
{
	for (int i = 0; r->argv && i < r->argc; i++)
		free(r->argv[i]);
	free(r->argv);
	for (unsigned i = 0; i < r->n_fds; i++)
		close(r->fds[i]);
	memset(r, 0, sizeof(*r));
}
