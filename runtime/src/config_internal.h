/* config_internal.h — what config.c gives the layer builder
 * (config_layers.c) and the reference writer (config_doc.c): one source
 * loaded over a configuration, recording which keys it gives; a field's
 * value. Private to runtime/src. */
#ifndef RT_CONFIG_INTERNAL_H
#define RT_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "rt/config.h"

/* Loads YAML text / a file / one `key=value` over `cfg` (all or nothing)
 * and sets given[i] for every field i it names (given: at least
 * RT_CONFIG_FIELDS_MAX entries). A named preset is only recorded (in
 * cfg->machine_preset), never applied. */
enum rt_err rt_config_load_layer(struct rt_config *cfg, const char *text, size_t len,
				 const char *origin, bool *given);
enum rt_err rt_config_read_layer(struct rt_config *cfg, const char *path, bool *given);
enum rt_err rt_config_set_layer(struct rt_config *cfg, const char *assignment, bool *given);
/* Room for a section name (the part of a key before the dot). */
#define SECTION_NAME_MAX 32

/* Field `f` of `cfg` as a number (config_doc.c writes it out). */
uint64_t rt_config_field_u64(const struct rt_config *cfg, const struct rt_config_field *f);
/* Index of `key` in rt_config_fields, SIZE_MAX when unknown. */
size_t rt_config_field_index(const char *key);

#endif
