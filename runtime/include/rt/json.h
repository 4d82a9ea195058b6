/* json.h — the one JSON writer. Every JSON text kernbench writes
 * (summary.json, op_log.jsonl records) goes through it, so every string is
 * escaped the same way (quotes, backslashes, control bytes, DEL and invalid
 * UTF-8 as U+FFFD) and every document is well formed by construction:
 * commas, colons and closing brackets are the writer's job, not the
 * caller's. Numbers are integers or fixed-point decimals (never NaN/Inf:
 * those become null). Errors are sticky: check rt_json_finish once.
 *
 *   struct rt_json j;
 *   rt_json_init(&j, &buf);
 *   rt_json_object(&j, NULL, RT_JSON_LINES);
 *   rt_json_str(&j, "workload", name);
 *   rt_json_u64(&j, "ranks", 2);
 *   rt_json_close(&j);
 *   err = rt_json_finish(&j); */
#ifndef RT_JSON_H
#define RT_JSON_H

#include <stdbool.h>
#include <stdint.h>

#include "rt/buf.h"
#include "rt/err.h"

/* How a container lays out its members. */
enum rt_json_layout {
	RT_JSON_LINES,   /* one member per line, indented two spaces a level */
	RT_JSON_INLINE,  /* on one line: {"a": 1, "b": 2} */
	RT_JSON_COMPACT, /* no spaces: {"a":1,"b":2} (JSON Lines records) */
};

#define RT_JSON_MAX_DEPTH 16

struct rt_json {
	struct rt_buf *out;
	unsigned depth;                               /* open containers */
	bool empty[RT_JSON_MAX_DEPTH];                /* no member yet */
	bool is_array[RT_JSON_MAX_DEPTH];
	enum rt_json_layout layout[RT_JSON_MAX_DEPTH];
	enum rt_err err;                              /* first failure */
};

/* Appends to `out` (not reset). */
void rt_json_init(struct rt_json *j, struct rt_buf *out);
/* Opens an object / array: as member `key` of the enclosing object, or as
 * an array element / the top-level value when `key` is NULL. */
void rt_json_object(struct rt_json *j, const char *key, enum rt_json_layout layout);
void rt_json_array(struct rt_json *j, const char *key, enum rt_json_layout layout);
/* Closes the innermost open container. */
void rt_json_close(struct rt_json *j);

void rt_json_str(struct rt_json *j, const char *key, const char *s);
void rt_json_u64(struct rt_json *j, const char *key, uint64_t v);
/* `v` as 16 lower-case hex digits, in a string ("00ff..."). */
void rt_json_hex64(struct rt_json *j, const char *key, uint64_t v);
/* `v` with `decimals` digits after the point; null if not finite. */
void rt_json_fixed(struct rt_json *j, const char *key, double v, int decimals);
/* Picoseconds as microseconds with six decimals, exactly (integer math). */
void rt_json_ps_as_us(struct rt_json *j, const char *key, uint64_t ps);
void rt_json_null(struct rt_json *j, const char *key);
void rt_json_bool(struct rt_json *j, const char *key, bool v);

/* Appends `s` as a quoted JSON string, escaped as described above. */
enum rt_err rt_json_escape(struct rt_buf *b, const char *s);

/* RT_EOK if everything was written and every container closed; otherwise
 * the first error (rt_fail'd). */
enum rt_err rt_json_finish(struct rt_json *j);

#endif
