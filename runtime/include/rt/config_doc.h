/* config_doc.h — the configuration reference, rendered from the field table
 * (rt_config_fields) so docs/config.md and `kernbench config` cannot drift
 * from what the loader accepts. */
#ifndef RT_CONFIG_DOC_H
#define RT_CONFIG_DOC_H

#include "rt/buf.h"
#include "rt/config.h"
#include "rt/err.h"

/* Appends a Markdown table (key | default | range | unit | meaning) with one
 * row per field, in table order, to `out`. */
enum rt_err rt_config_doc(struct rt_buf *out);

enum rt_config_format { RT_CONFIG_YAML, RT_CONFIG_JSON };

/* Appends every field of `cfg` as YAML (commented with unit, meaning and
 * range) or JSON, grouped by section; either form loads back with
 * --config and gives exactly `cfg`. */
enum rt_err rt_config_emit(const struct rt_config *cfg, enum rt_config_format format,
			   struct rt_buf *out);

/* A preset file's comments, printed with the configuration (`kernbench
 * config --machine NAME`): the block above its first section, and per key
 * the comment lines above it and its trailing comment (its source). */
struct rt_config_notes {
	char path[1024];                        /* the preset file */
	struct rt_config preset;                /* its values (overrides are marked) */
	char *header;                           /* "# ..." lines, or NULL */
	char *before[RT_CONFIG_FIELDS_MAX];     /* per field: "# ..." lines, or NULL */
};

/* Reads the preset file at `path` (caller releases). */
enum rt_err rt_config_notes_read(const char *path, struct rt_config_notes *n);
void rt_config_notes_release(struct rt_config_notes *n);
/* rt_config_emit's YAML with the notes: the header after the first line,
 * each key's source lines above it, and a line for a key whose value is not
 * the preset's. Loads back exactly like rt_config_emit's. */
enum rt_err rt_config_emit_noted(const struct rt_config *cfg, const struct rt_config_notes *n,
				 struct rt_buf *out);

struct rt_json;
/* Writes `cfg` as member `key` (NULL: a value) of `j`: one object per
 * section, as rt_config_emit's JSON. */
void rt_config_json(struct rt_json *j, const char *key, const struct rt_config *cfg);

#endif
