/* config_doc.h — the configuration reference, rendered from the field table
 * (rt_config_fields) so docs/config.md and `kernbench config` cannot drift
 * from what the loader accepts. */
#ifndef RT_CONFIG_DOC_H
#define RT_CONFIG_DOC_H

#include "rt/buf.h"
#include "rt/err.h"

/* Appends a Markdown table (key | default | unit | meaning) with one row per
 * field, in table order, to `out`. */
enum rt_err rt_config_doc(struct rt_buf *out);

#endif
