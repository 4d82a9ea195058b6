/* json_read.h — a small JSON reader (RFC 8259) for what kernbench reads
 * back: a result folder's summary.json (`run --from`, `diff`, `sweep`).
 * The bytes are a file's, so every malformed input is an error line with
 * the line and column, never a crash: nesting is limited, strings are
 * checked (escapes, control bytes, \u surrogate pairs decoded to UTF-8),
 * numbers keep their text. Duplicate keys are refused.
 *
 *   struct rt_jval root;
 *   if (rt_json_parse(text, len, "out/x/summary.json", &root)) ...
 *   const struct rt_jval *lat = rt_jval_get(&root, "latency_ps");
 *   rt_jval_release(&root); */
#ifndef RT_JSON_READ_H
#define RT_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt/err.h"

enum rt_jtype { RT_J_NULL, RT_J_BOOL, RT_J_NUM, RT_J_STR, RT_J_ARR, RT_J_OBJ };

struct rt_jval {
	enum rt_jtype type;
	bool b;                 /* RT_J_BOOL */
	char *text;             /* RT_J_STR: the decoded string (may hold no
				 * NUL: JSON's \u0000 is refused); RT_J_NUM:
				 * the number as written */
	size_t len;             /* of text */
	struct rt_jval *items;  /* RT_J_ARR / RT_J_OBJ: n values */
	char **keys;            /* RT_J_OBJ: n keys, in document order */
	size_t n;
};

/* Deepest nesting accepted. */
#define RT_JSON_READ_MAX_DEPTH 64

/* Parses exactly one JSON value (surrounding white space allowed) into
 * *out; RT_EDECODE with "ORIGIN: line L, column C: what" otherwise.
 * Release *out with rt_jval_release (also after a failure). */
enum rt_err rt_json_parse(const char *text, size_t len, const char *origin,
			  struct rt_jval *out);
void rt_jval_release(struct rt_jval *v);

/* Member `key` of object `obj`, or NULL (also when obj is not one). */
const struct rt_jval *rt_jval_get(const struct rt_jval *obj, const char *key);
/* The value as an unsigned integer: a number of decimal digits only that
 * fits 64 bits. */
bool rt_jval_u64(const struct rt_jval *v, uint64_t *out);
/* The value as a double (a number; false otherwise). */
bool rt_jval_num(const struct rt_jval *v, double *out);
/* The string, or NULL when v is not a string. */
const char *rt_jval_str(const struct rt_jval *v);

#endif
