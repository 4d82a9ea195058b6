/* config_layers.c — a configuration built in layers, and the machine
 * presets it can start from (rt/config.h, docs/config.md "Machine presets").
 *
 *   defaults < the preset's values < each --config file < each --set
 *            < the caller's flags (--ranks, --pes)
 *
 * Every source records the keys it gives; the preset named last (or by
 * `--machine`, which no file can rename) is applied at the end to the keys
 * nobody gave, so a preset never undoes a key a file set, whatever their
 * order on the command line. A preset is a YAML file of the same form as
 * any --config file, found by name in the presets folder beside the
 * binary: PREFIX/share/kernbench/machines when installed (`make install`),
 * deploy/configs/machines in the tree the binary was built in. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_internal.h"
#include "rt/buf.h"
#include "rt/config.h"
#include "rt/config_doc.h"
#include "rt/err.h"

/* Preset folders relative to the executable's folder: installed, then the
 * build trees (build/bin, build/san/bin, build/tests, build/san/tests). */
static const char *const preset_dirs[] = {
	"../share/kernbench/machines",
	"../../deploy/configs/machines",
	"../../../deploy/configs/machines",
};
#define N_PRESET_DIRS (sizeof(preset_dirs) / sizeof(preset_dirs[0]))

/* The folder of the running executable into `out`; false if unknown. */
static bool exe_dir(char *out, size_t cap)
{
	ssize_t n = readlink("/proc/self/exe", out, cap - 1);
	char *slash;

	if (n <= 0)
		return false;
	out[n] = '\0';
	slash = strrchr(out, '/');
	if (!slash)
		return false;
	*slash = '\0';
	return true;
}

/* Preset folder i (0 ...) that exists, into `out`; false past the last. */
static bool preset_dir(size_t i, char *out, size_t cap)
{
	char exe[PATH_MAX];

	if (i >= N_PRESET_DIRS || !exe_dir(exe, sizeof(exe)))
		return false;
	return (size_t)snprintf(out, cap, "%s/%s", exe, preset_dirs[i]) < cap;
}

static bool is_path(const char *name)
{
	size_t n = strlen(name);

	return strchr(name, '/') || (n > 5 && !strcmp(name + n - 5, ".yaml"));
}

static bool valid_name(const char *name)
{
	if (!name[0] || strlen(name) >= RT_PRESET_NAME_MAX)
		return false;
	for (const char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' || *c == '.'))
			return false;
	return true;
}

/* Names of the presets in the first folder that exists (sorted), as
 * "a, b, c", and that folder. */
struct preset_names {
	char names[32][RT_PRESET_NAME_MAX];
	size_t n;
	char dir[PATH_MAX];
};

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

static void list_presets(struct preset_names *p)
{
	char dir[PATH_MAX];

	p->n = 0;
	p->dir[0] = '\0';
	for (size_t i = 0; preset_dir(i, dir, sizeof(dir)); i++) {
		DIR *d = opendir(dir);
		struct dirent *e;

		if (!d)
			continue;
		if (!realpath(dir, p->dir))
			snprintf(p->dir, sizeof(p->dir), "%s", dir);
		while ((e = readdir(d)) && p->n < 32) {
			size_t len = strlen(e->d_name);

			if (len > 5 && len - 5 < RT_PRESET_NAME_MAX &&
			    !strcmp(e->d_name + len - 5, ".yaml")) {
				memcpy(p->names[p->n], e->d_name, len - 5);
				p->names[p->n++][len - 5] = '\0';
			}
		}
		closedir(d);
		qsort(p->names, p->n, sizeof(p->names[0]), name_cmp);
		return;
	}
}

void rt_config_preset_list(char *out, size_t cap)
{
	struct preset_names *p = malloc(sizeof(*p));
	size_t used = 0;

	out[0] = '\0';
	if (!p)
		return;
	list_presets(p);
	for (size_t i = 0; i < p->n && used < cap; i++)
		used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? ", " : "", p->names[i]);
	free(p);
}

/* The closest preset name to `name` (within three edits, or sharing its
 * first three letters), or NULL. */
static const char *nearest(const struct preset_names *p, const char *name)
{
	size_t best = 4, d;
	const char *pick = NULL;

	for (size_t i = 0; i < p->n; i++) {
		d = rt_edit_distance(name, p->names[i]);
		if (d < best) {
			best = d;
			pick = p->names[i];
		}
	}
	for (size_t i = 0; !pick && i < p->n; i++)
		if (strlen(name) >= 3 && !strncmp(name, p->names[i], 3))
			pick = p->names[i];
	return pick;
}

static enum rt_err unknown_preset(const char *name)
{
	struct preset_names *p = malloc(sizeof(*p));
	char list[1024] = "";
	const char *near;
	enum rt_err err;

	if (!p)
		return rt_fail(RT_ENOMEM, "machine preset '%s': out of memory", name);
	list_presets(p);
	if (!p->n) {
		free(p);
		return rt_fail(RT_ECONFIG, "unknown machine preset '%.63s': no presets folder beside "
			       "this binary (PREFIX/share/kernbench/machines, or deploy/configs/machines "
			       "in its build tree); give a file instead (--machine path/to/machine.yaml)",
			       name);
	}
	rt_config_preset_list(list, sizeof(list));
	near = nearest(p, name);
	err = rt_fail(RT_ECONFIG, "unknown machine preset '%.63s'%s%s%s; the presets are %s (%s)",
		      name, near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "", list,
		      p->dir);
	free(p);
	return err;
}

enum rt_err rt_config_preset_path(const char *name, char *path, size_t cap)
{
	char dir[PATH_MAX];

	if (is_path(name)) {
		if ((size_t)snprintf(path, cap, "%s", name) >= cap)
			return rt_fail(RT_ECONFIG, "machine preset file %.200s: path too long", name);
		if (access(path, R_OK))
			return rt_fail(RT_ECONFIG, "machine preset file %.200s: cannot be read", name);
		return RT_EOK;
	}
	if (!valid_name(name))
		return rt_fail(RT_ECONFIG, "machine preset '%.63s': a name is letters, digits, '_', "
			       "'-' and '.' (at most %d bytes), or a path to a .yaml file", name,
			       RT_PRESET_NAME_MAX - 1);
	for (size_t i = 0; preset_dir(i, dir, sizeof(dir)); i++) {
		if ((size_t)snprintf(path, cap, "%s/%s.yaml", dir, name) >= cap)
			continue;
		if (!access(path, R_OK))
			return RT_EOK;
	}
	return unknown_preset(name);
}

/* ------------------------------------------------------------ layers */

static size_t preset_index(void)
{
	static size_t idx = SIZE_MAX;

	if (idx == SIZE_MAX)
		idx = rt_config_field_index("machine.preset");
	return idx;
}

void rt_config_layers_init(struct rt_config_layers *l)
{
	memset(l, 0, sizeof(*l));
	rt_config_defaults(&l->cfg);
}

enum rt_err rt_config_layers_file(struct rt_config_layers *l, const char *path)
{
	return rt_config_read_layer(&l->cfg, path, l->given);
}

enum rt_err rt_config_layers_text(struct rt_config_layers *l, const char *text, size_t len,
				  const char *origin)
{
	return rt_config_load_layer(&l->cfg, text, len, origin, l->given);
}

enum rt_err rt_config_layers_set(struct rt_config_layers *l, const char *assignment)
{
	return rt_config_set_layer(&l->cfg, assignment, l->given);
}

enum rt_err rt_config_layers_machine(struct rt_config_layers *l, const char *name)
{
	if (strlen(name) >= RT_PRESET_NAME_MAX || !name[0])
		return rt_fail(RT_ECONFIG, "--machine '%.63s%s': a preset name or path has 1 to %d "
			       "bytes", name, strlen(name) > 63 ? "..." : "", RT_PRESET_NAME_MAX - 1);
	snprintf(l->preset, sizeof(l->preset), "%s", name);
	l->forced = true;
	return RT_EOK;
}

/* Copies field i of `from` into `to`. */
static void copy_field(struct rt_config *to, const struct rt_config *from, size_t i)
{
	const struct rt_config_field *f = &rt_config_fields[i];

	memcpy((uint8_t *)to + f->offset, (const uint8_t *)from + f->offset, f->size);
}

/* The preset's own values: the defaults with the preset file over them. A
 * preset is a whole machine: it may not name another preset. */
static enum rt_err load_preset(const char *name, char *path, size_t cap, struct rt_config *p)
{
	bool given[RT_CONFIG_FIELDS_MAX] = { false };
	enum rt_err err;

	rt_config_defaults(p);
	path[0] = '\0';
	if (!strcmp(name, RT_DEFAULT_PRESET)) {
		/* the built-in defaults are this preset (tests/unit/test_config.c);
		 * its file gives the sources when it is there */
		if (rt_config_preset_path(name, path, cap))
			path[0] = '\0';
		return RT_EOK;
	}
	err = rt_config_preset_path(name, path, cap);
	if (!err)
		err = rt_config_read_layer(p, path, given);
	if (!err && given[preset_index()])
		err = rt_fail(RT_ECONFIG, "machine preset file %.200s names a preset itself "
			      "('%s'); a preset describes a whole machine", path, p->machine_preset);
	return err;
}

enum rt_err rt_config_layers_finish(struct rt_config_layers *l, struct rt_config *out)
{
	const size_t pi = preset_index();
	const char *name = l->forced ? l->preset : l->given[pi] ? l->cfg.machine_preset : NULL;
	struct rt_config *p;
	enum rt_err err = RT_EOK;

	if (name) {
		p = malloc(sizeof(*p));
		if (!p)
			return rt_fail(RT_ENOMEM, "machine preset: out of memory");
		err = load_preset(name, l->preset_path, sizeof(l->preset_path), p);
		for (size_t i = 0; !err && i < rt_config_field_count; i++)
			if (i != pi && !l->given[i])
				copy_field(&l->cfg, p, i);
		if (!err && strlen(name) < sizeof(l->cfg.machine_preset))
			memmove(l->cfg.machine_preset, name, strlen(name) + 1);
		free(p);
	}
	if (!err)
		*out = l->cfg;
	return err;
}

/* ------------------------------------------------------------ sources */

/* A copy of `line` without its end of line, or NULL. */
static char *dup_line(const char *line, size_t len)
{
	char *s = malloc(len + 1);

	if (s) {
		memcpy(s, line, len);
		s[len] = '\0';
	}
	return s;
}

/* Appends "text\n" to *acc (a heap string). */
static bool append_note(char **acc, const char *text)
{
	size_t old = *acc ? strlen(*acc) : 0, n = strlen(text);
	char *s = realloc(*acc, old + n + 2);

	if (!s)
		return false;
	memcpy(s + old, text, n);
	s[old + n] = '\n';
	s[old + n + 1] = '\0';
	*acc = s;
	return true;
}

/* The comment of a `key: value  # comment` line, or NULL: the first '#'
 * outside quotes that follows a blank. */
static const char *trailing_comment(const char *line)
{
	bool quoted = false;

	for (const char *c = line; *c; c++) {
		if (*c == '"')
			quoted = !quoted;
		else if (*c == '#' && !quoted && c > line && (c[-1] == ' ' || c[-1] == '\t'))
			return c;
	}
	return NULL;
}

/* One line of the preset file: a section, a key (gets the pending
 * comments and its own trailing one) or a comment. */
static bool note_line(struct rt_config_notes *n, const char *line, char section[32],
		      char **pending, bool *in_header)
{
	const char *p = line + strspn(line, " \t"), *colon, *tc;
	char key[96];

	if (!*p)
		return true;
	if (*p == '#') {
		if (*in_header && p == line)
			return append_note(&n->header, p);
		return append_note(pending, p);
	}
	colon = strchr(p, ':');
	if (!colon || colon - p >= 32)
		return true;
	if (p == line) { /* a section */
		*in_header = false;
		snprintf(section, 32, "%.*s", (int)(colon - p), p);
		free(*pending);
		*pending = NULL;
		return true;
	}
	snprintf(key, sizeof(key), "%s.%.*s", section, (int)(colon - p), p);
	tc = trailing_comment(colon);
	if (tc && !append_note(pending, tc))
		return false;
	size_t i = rt_config_field_index(key);
	if (i != SIZE_MAX && *pending) {
		free(n->before[i]);
		n->before[i] = *pending;
		*pending = NULL;
	}
	free(*pending);
	*pending = NULL;
	return true;
}

enum rt_err rt_config_notes_read(const char *path, struct rt_config_notes *n)
{
	bool given[RT_CONFIG_FIELDS_MAX] = { false }, in_header = true, ok = true;
	struct rt_buf text;
	char section[32] = "", *pending = NULL;
	enum rt_err err;

	memset(n, 0, sizeof(*n));
	rt_config_defaults(&n->preset);
	err = rt_config_read_layer(&n->preset, path, given);
	if (err)
		return err;
	snprintf(n->path, sizeof(n->path), "%s", path);
	rt_buf_init(&text);
	err = rt_buf_read_file(&text, path);
	for (const char *l = text.data; !err && ok && l && *l;) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);
		char *line = dup_line(l, len);

		ok = line && note_line(n, line, section, &pending, &in_header);
		free(line);
		l = end ? end + 1 : NULL;
	}
	free(pending);
	rt_buf_release(&text);
	if (!err && !ok)
		err = rt_fail(RT_ENOMEM, "machine preset %.200s: out of memory", path);
	if (err)
		rt_config_notes_release(n);
	return err;
}

void rt_config_notes_release(struct rt_config_notes *n)
{
	free(n->header);
	for (size_t i = 0; i < RT_CONFIG_FIELDS_MAX; i++)
		free(n->before[i]);
	memset(n, 0, sizeof(*n));
}
