/* config_doc.c — the configuration reference and the configuration
 * written back out (rt/config_doc.h): rendered from config.c's field table,
 * so docs/config.md and `kernbench config` cannot drift from what the loader
 * accepts. Uses config.c's table and value reader (config_internal.h). */
#include "rt/config_doc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "rt/buf.h"
#include "rt/json.h"


/* "1 to 64", or "at most 255 bytes" for a string, into `out`. */
static const char *range_text(const struct rt_config_field *f, char *out, size_t cap)
{
	if (f->type == RT_CFG_STR)
		snprintf(out, cap, "at most %zu bytes", f->size - 1);
	else
		snprintf(out, cap, "%llu to %llu", (unsigned long long)f->min,
			 (unsigned long long)f->max);
	return out;
}

enum rt_err rt_config_doc(struct rt_buf *out)
{
	enum rt_err err = rt_buf_printf(out, "| key | default | range | unit | "
					"meaning |\n|---|---|---|---|---|\n");
	char range[64];

	for (size_t i = 0; !err && i < rt_config_field_count; i++) {
		const struct rt_config_field *f = &rt_config_fields[i];
		err = rt_buf_printf(out, "| `%s` | `%s` | %s | %s | %s |\n", f->key, f->def,
				    range_text(f, range, sizeof(range)), f->unit, f->doc);
	}
	return err;
}

/* One field's value as YAML/JSON text: a number, or a JSON string (which
 * YAML reads as a double-quoted scalar). */
static enum rt_err emit_value(const struct rt_config *cfg, const struct rt_config_field *f,
			      struct rt_buf *out)
{
	if (f->type == RT_CFG_STR)
		return rt_buf_json_str(out, (const char *)cfg + f->offset);
	return rt_buf_printf(out, "%llu", (unsigned long long)rt_config_field_u64(cfg, f));
}

/* The notes above key i: its source lines (indented) and, when its value
 * is not the preset's, what the preset says. */
static enum rt_err emit_note(const struct rt_config *cfg, const struct rt_config_notes *n,
			     size_t i, struct rt_buf *out)
{
	const struct rt_config_field *f = &rt_config_fields[i];
	const char *at = n->before[i];
	enum rt_err err = RT_EOK;
	struct rt_buf v;

	while (!err && at && *at) {
		const char *end = strchr(at, '\n');

		err = rt_buf_printf(out, "  %.*s\n", (int)(end ? end - at : (long)strlen(at)), at);
		at = end ? end + 1 : NULL;
	}
	if (err || !strcmp(f->key, "machine.preset") ||
	    !memcmp((const uint8_t *)cfg + f->offset, (const uint8_t *)&n->preset + f->offset,
		    f->size))
		return err;
	rt_buf_init(&v);
	err = emit_value(&n->preset, f, &v);
	if (!err)
		err = rt_buf_printf(out, "  # overridden: the preset has %s\n", v.data ? v.data : "");
	rt_buf_release(&v);
	return err;
}

static enum rt_err emit_yaml(const struct rt_config *cfg, const struct rt_config_notes *n,
			     struct rt_buf *out)
{
	enum rt_err err = rt_buf_printf(out, "# kernbench configuration (`kernbench config`); "
					"loads back with --config\n");
	char range[64];

	if (!err && n)
		err = rt_buf_printf(out, "# machine preset %s (%s), its sources as comments:\n%s",
				    cfg->machine_preset, n->path, n->header ? n->header : "");
	for (size_t i = 0; !err && i < rt_config_field_count; i++) {
		const struct rt_config_field *f = &rt_config_fields[i];
		size_t plen = strcspn(f->key, "."), start = out->len;

		if (!i || strncmp(rt_config_fields[i - 1].key, f->key, plen + 1))
			err = rt_buf_printf(out, "%s%.*s:\n", i ? "\n" : "", (int)plen, f->key);
		if (!err && n)
			err = emit_note(cfg, n, i, out);
		start = out->len;
		if (!err)
			err = rt_buf_printf(out, "  %s: ", f->key + plen + 1);
		if (!err)
			err = emit_value(cfg, f, out);
		if (!err)
			err = rt_buf_printf(out, "%*s# [%s] %s; %s\n",
					    out->len - start < 38 ? (int)(38 - (out->len - start)) : 1,
					    "", f->unit, f->doc, range_text(f, range, sizeof(range)));
	}
	return err;
}

void rt_config_json(struct rt_json *j, const char *key, const struct rt_config *cfg)
{
	char section[SECTION_NAME_MAX] = "";

	rt_json_object(j, key, RT_JSON_LINES);
	for (size_t i = 0; i < rt_config_field_count; i++) {
		const struct rt_config_field *f = &rt_config_fields[i];
		size_t plen = strcspn(f->key, ".");

		if (strlen(section) != plen || strncmp(section, f->key, plen)) {
			if (section[0])
				rt_json_close(j);
			snprintf(section, sizeof(section), "%.*s", (int)plen, f->key);
			rt_json_object(j, section, RT_JSON_LINES);
		}
		if (f->type == RT_CFG_STR)
			rt_json_str(j, f->key + plen + 1, (const char *)cfg + f->offset);
		else
			rt_json_u64(j, f->key + plen + 1, rt_config_field_u64(cfg, f));
	}
	if (section[0])
		rt_json_close(j);
	rt_json_close(j);
}

static enum rt_err emit_json(const struct rt_config *cfg, struct rt_buf *out)
{
	struct rt_json j;

	rt_json_init(&j, out);
	rt_config_json(&j, NULL, cfg);
	rt_buf_append(out, "\n", 1);
	return rt_json_finish(&j);
}

enum rt_err rt_config_emit(const struct rt_config *cfg, enum rt_config_format format,
			   struct rt_buf *out)
{
	return format == RT_CONFIG_JSON ? emit_json(cfg, out) : emit_yaml(cfg, NULL, out);
}

enum rt_err rt_config_emit_noted(const struct rt_config *cfg, const struct rt_config_notes *n,
				 struct rt_buf *out)
{
	return emit_yaml(cfg, n, out);
}
