/* json.c — the one JSON writer (see json.h). */
#include "rt/json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void rt_json_init(struct rt_json *j, struct rt_buf *out)
{
	memset(j, 0, sizeof(*j));
	j->out = out;
}

static void put(struct rt_json *j, const char *s, size_t len)
{
	if (!j->err)
		j->err = rt_buf_append(j->out, s, len);
}

static void put_str(struct rt_json *j, const char *s)
{
	put(j, s, strlen(s));
}

/* Newline and indentation for depth `depth` (LINES layout only). */
static void newline(struct rt_json *j, unsigned depth)
{
	put(j, "\n", 1);
	for (unsigned i = 0; i < depth; i++)
		put(j, "  ", 2);
}

/* Writes the separator and key of the next value; checks it may go here. */
static void begin_value(struct rt_json *j, const char *key)
{
	unsigned d = j->depth;
	enum rt_json_layout layout;

	if (j->err)
		return;
	if (d == 0) {
		if (key)
			j->err = rt_fail(RT_EINVAL, "json: key \"%s\" outside an object", key);
		return;
	}
	if (j->is_array[d - 1] == (key != NULL)) {
		j->err = rt_fail(RT_EINVAL, "json: %s", key ? "a key inside an array"
						      : "a value without a key inside an object");
		return;
	}
	layout = j->layout[d - 1];
	if (!j->empty[d - 1])
		put(j, ",", 1);
	if (layout == RT_JSON_LINES)
		newline(j, d);
	else if (layout == RT_JSON_INLINE && !j->empty[d - 1])
		put(j, " ", 1);
	j->empty[d - 1] = false;
	if (key) {
		rt_json_escape(j->out, key);
		put_str(j, layout == RT_JSON_COMPACT ? ":" : ": ");
	}
}

static void open_container(struct rt_json *j, const char *key, enum rt_json_layout layout,
			   bool array)
{
	begin_value(j, key);
	if (j->err)
		return;
	if (j->depth == RT_JSON_MAX_DEPTH) {
		j->err = rt_fail(RT_EINVAL, "json: nested deeper than %d", RT_JSON_MAX_DEPTH);
		return;
	}
	j->empty[j->depth] = true;
	j->is_array[j->depth] = array;
	j->layout[j->depth] = layout;
	j->depth++;
	put(j, array ? "[" : "{", 1);
}

void rt_json_object(struct rt_json *j, const char *key, enum rt_json_layout layout)
{
	open_container(j, key, layout, false);
}

void rt_json_array(struct rt_json *j, const char *key, enum rt_json_layout layout)
{
	open_container(j, key, layout, true);
}

void rt_json_close(struct rt_json *j)
{
	unsigned d = j->depth;

	if (j->err)
		return;
	if (d == 0) {
		j->err = rt_fail(RT_EINVAL, "json: close without an open container");
		return;
	}
	if (j->layout[d - 1] == RT_JSON_LINES && !j->empty[d - 1])
		newline(j, d - 1);
	put(j, j->is_array[d - 1] ? "]" : "}", 1);
	j->depth--;
}

void rt_json_str(struct rt_json *j, const char *key, const char *s)
{
	begin_value(j, key);
	if (!j->err)
		j->err = rt_json_escape(j->out, s ? s : "");
}

/* A number or literal already formatted. */
static void put_scalar(struct rt_json *j, const char *key, const char *text)
{
	begin_value(j, key);
	put_str(j, text);
}

void rt_json_u64(struct rt_json *j, const char *key, uint64_t v)
{
	char text[24];

	snprintf(text, sizeof(text), "%llu", (unsigned long long)v);
	put_scalar(j, key, text);
}

void rt_json_hex64(struct rt_json *j, const char *key, uint64_t v)
{
	char text[24];

	snprintf(text, sizeof(text), "\"%016llx\"", (unsigned long long)v);
	put_scalar(j, key, text);
}

void rt_json_fixed(struct rt_json *j, const char *key, double v, int decimals)
{
	char text[64];

	if (!isfinite(v) || fabs(v) >= 1e30)
		snprintf(text, sizeof(text), "null");
	else
		snprintf(text, sizeof(text), "%.*f", decimals < 0 ? 0 : decimals > 12 ? 12 : decimals,
			 v);
	put_scalar(j, key, text);
}

void rt_json_ps_as_us(struct rt_json *j, const char *key, uint64_t ps)
{
	char text[32];

	snprintf(text, sizeof(text), "%llu.%06llu", (unsigned long long)(ps / 1000000),
		 (unsigned long long)(ps % 1000000));
	put_scalar(j, key, text);
}

void rt_json_null(struct rt_json *j, const char *key)
{
	put_scalar(j, key, "null");
}

void rt_json_bool(struct rt_json *j, const char *key, bool v)
{
	put_scalar(j, key, v ? "true" : "false");
}

enum rt_err rt_json_finish(struct rt_json *j)
{
	if (!j->err && j->depth)
		j->err = rt_fail(RT_EINVAL, "json: %u container(s) left open", j->depth);
	return j->err;
}

/* ---------------------------------------------------------------- strings */

/* Length of the valid UTF-8 sequence at `s` (1-4), or 0 if invalid
 * (overlong forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];
	size_t n;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

enum rt_err rt_json_escape(struct rt_buf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	enum rt_err err = rt_buf_append(b, "\"", 1);

	while (!err && *p) {
		size_t n = utf8_len(p), run = 0;

		if (*p == '"' || *p == '\\') {
			err = rt_buf_printf(b, "\\%c", *p);
			p++;
		} else if (*p < 0x20 || *p == 0x7f) {
			err = rt_buf_printf(b, "\\u%04x", *p);
			p++;
		} else if (!n) {
			err = rt_buf_append(b, "\\ufffd", 6); /* not UTF-8: replaced */
			p++;
		} else {
			/* a run of bytes that need no escape, copied at once */
			while (p[run] && p[run] != '"' && p[run] != '\\' && p[run] >= 0x20 &&
			       p[run] != 0x7f && (n = utf8_len(p + run)))
				run += n;
			err = rt_buf_append(b, p, run);
			p += run;
		}
	}
	return err ? err : rt_buf_append(b, "\"", 1);
}

/* rt/buf.h's: here beside the one escaper for every JSON text, so that
 * buf.c needs nothing of json.c */
enum rt_err rt_buf_json_str(struct rt_buf *b, const char *s)
{
	return rt_json_escape(b, s);
}
