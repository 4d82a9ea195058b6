/* json_read.c — the JSON reader (rt/json_read.h): a recursive descent over
 * the bytes with an explicit depth limit. */
#include "rt/json_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/buf.h"
#include "rt/job.h"

struct reader {
	const char *p, *start, *end;
	const char *origin;
	unsigned depth;
	enum rt_err err;
};

/* One error line with the line and column of `at`. */
static enum rt_err fail_at(struct reader *r, const char *at, const char *what)
{
	size_t line = 1, col = 1;

	if (r->err)
		return r->err;
	for (const char *q = r->start; q < at && q < r->end; q++) {
		col++;
		if (*q == '\n') {
			line++;
			col = 1;
		}
	}
	r->err = rt_fail(RT_EDECODE, "%s: line %zu, column %zu: %s", r->origin, line, col, what);
	return r->err;
}

static void skip_space(struct reader *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static bool literal(struct reader *r, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n))
		return false;
	r->p += n;
	return true;
}

static int hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0'
	     : c >= 'a' && c <= 'f' ? c - 'a' + 10
	     : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Four hex digits after "\u"; -1 when malformed. */
static long hex4(struct reader *r)
{
	long v = 0;

	if (r->end - r->p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		int d = hex_digit(r->p[i]);

		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	r->p += 4;
	return v;
}

static enum rt_err put_utf8(struct rt_buf *b, unsigned long cp)
{
	char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | cp >> 6);
		u[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | cp >> 12);
		u[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | cp >> 18);
		u[1] = (char)(0x80 | (cp >> 12 & 0x3f));
		u[2] = (char)(0x80 | (cp >> 6 & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return rt_buf_append(b, u, n);
}

/* A \u escape (the "\u" read), surrogate pairs joined. */
static enum rt_err unicode_escape(struct reader *r, struct rt_buf *b)
{
	const char *at = r->p - 2;
	long hi = hex4(r), lo;

	if (hi < 0)
		return fail_at(r, at, "\\u needs four hex digits");
	if (hi == 0)
		return fail_at(r, at, "\\u0000 (a NUL byte) is not accepted in a string");
	if (hi >= 0xdc00 && hi <= 0xdfff)
		return fail_at(r, at, "a lone low surrogate in a \\u escape");
	if (hi < 0xd800 || hi > 0xdbff)
		return put_utf8(b, (unsigned long)hi);
	if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u')
		return fail_at(r, at, "a high surrogate not followed by a low one");
	r->p += 2;
	lo = hex4(r);
	if (lo < 0xdc00 || lo > 0xdfff)
		return fail_at(r, at, "a high surrogate not followed by a low one");
	return put_utf8(b, 0x10000 + (((unsigned long)hi - 0xd800) << 10) +
				   ((unsigned long)lo - 0xdc00));
}

/* A string (the opening quote is at r->p) into `b`. */
static enum rt_err read_string(struct reader *r, struct rt_buf *b)
{
	static const char plain[] = "\"\\/bfnrt", made[] = "\"\\/\b\f\n\r\t";
	const char *open = r->p++;
	enum rt_err err = RT_EOK;

	while (!err) {
		const char *run = r->p;

		while (r->p < r->end && *r->p != '"' && *r->p != '\\' &&
		       (unsigned char)*r->p >= 0x20)
			r->p++;
		if (r->p > run)
			err = rt_buf_append(b, run, (size_t)(r->p - run));
		if (err)
			break;
		if (r->p >= r->end)
			return fail_at(r, open, "a string is not closed");
		if (*r->p == '"') {
			r->p++;
			if (!b->len && !(err = rt_buf_reserve(b, 1)))
				b->data[0] = '\0'; /* "" is an empty string, not NULL */
			return err ? (r->err = rt_fail(err, "%s: out of memory", r->origin)) : RT_EOK;
		}
		if ((unsigned char)*r->p < 0x20)
			return fail_at(r, r->p, "a control byte inside a string (escape it)");
		if (++r->p >= r->end)
			return fail_at(r, open, "a string is not closed");
		if (*r->p == 'u') {
			r->p++;
			err = unicode_escape(r, b);
		} else if (strchr(plain, *r->p) && *r->p) {
			err = rt_buf_append(b, &made[strchr(plain, *r->p) - plain], 1);
			r->p++;
		} else {
			return fail_at(r, r->p - 1, "an unknown escape in a string");
		}
	}
	return r->err ? r->err : err;
}

/* A number by RFC 8259's grammar; its text is kept. */
static enum rt_err read_number(struct reader *r, struct rt_jval *v)
{
	const char *s = r->p;

	if (r->p < r->end && *r->p == '-')
		r->p++;
	if (r->p >= r->end || *r->p < '0' || *r->p > '9')
		return fail_at(r, s, "expected a value");
	if (*r->p == '0')
		r->p++;
	else
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++;
	if (r->p < r->end && *r->p == '.') {
		if (++r->p >= r->end || *r->p < '0' || *r->p > '9')
			return fail_at(r, s, "a number needs digits after its '.'");
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++;
	}
	if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
		r->p++;
		if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
			r->p++;
		if (r->p >= r->end || *r->p < '0' || *r->p > '9')
			return fail_at(r, s, "a number needs digits in its exponent");
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++;
	}
	v->type = RT_J_NUM;
	v->len = (size_t)(r->p - s);
	v->text = strndup(s, v->len);
	return v->text ? RT_EOK : (r->err = rt_fail(RT_ENOMEM, "%s: out of memory", r->origin));
}

static enum rt_err read_value(struct reader *r, struct rt_jval *v);

/* Room for one more item (and key) in a container. */
static enum rt_err grow(struct reader *r, struct rt_jval *v, size_t *cap, bool keys)
{
	size_t c = *cap ? 2 * *cap : 8;
	struct rt_jval *items;
	char **k;

	if (v->n < *cap)
		return RT_EOK;
	items = realloc(v->items, c * sizeof(*items));
	if (items)
		v->items = items;
	k = items && keys ? realloc(v->keys, c * sizeof(*k)) : NULL;
	if (k)
		v->keys = k;
	if (!items || (keys && !k))
		return r->err = rt_fail(RT_ENOMEM, "%s: out of memory", r->origin);
	*cap = c;
	return RT_EOK;
}

static enum rt_err read_array(struct reader *r, struct rt_jval *v)
{
	size_t cap = 0;

	v->type = RT_J_ARR;
	r->p++;
	skip_space(r);
	if (r->p < r->end && *r->p == ']') {
		r->p++;
		return RT_EOK;
	}
	for (;;) {
		if (grow(r, v, &cap, false))
			return r->err;
		memset(&v->items[v->n], 0, sizeof(v->items[0]));
		v->n++;
		if (read_value(r, &v->items[v->n - 1]))
			return r->err;
		skip_space(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			continue;
		}
		if (r->p < r->end && *r->p == ']') {
			r->p++;
			return RT_EOK;
		}
		return fail_at(r, r->p, "expected ',' or ']' in an array");
	}
}

static bool key_seen(const struct rt_jval *v, const char *key, size_t len)
{
	for (size_t i = 0; i + 1 < v->n; i++)
		if (strlen(v->keys[i]) == len && !memcmp(v->keys[i], key, len))
			return true;
	return false;
}

static enum rt_err read_member(struct reader *r, struct rt_jval *v)
{
	struct rt_buf key;
	const char *at = r->p;

	rt_buf_init(&key);
	if (r->p >= r->end || *r->p != '"')
		return fail_at(r, r->p, "expected a key (a string) in an object");
	if (read_string(r, &key)) {
		rt_buf_release(&key);
		return r->err ? r->err : (r->err = rt_fail(RT_ENOMEM, "%s: out of memory", r->origin));
	}
	v->keys[v->n - 1] = key.data;
	if (strlen(key.data) != key.len || key_seen(v, key.data, key.len))
		return fail_at(r, at, "a key appears twice in an object");
	skip_space(r);
	if (r->p >= r->end || *r->p != ':')
		return fail_at(r, r->p, "expected ':' after a key");
	r->p++;
	return read_value(r, &v->items[v->n - 1]);
}

static enum rt_err read_object(struct reader *r, struct rt_jval *v)
{
	size_t cap = 0;

	v->type = RT_J_OBJ;
	r->p++;
	skip_space(r);
	if (r->p < r->end && *r->p == '}') {
		r->p++;
		return RT_EOK;
	}
	for (;;) {
		if (grow(r, v, &cap, true))
			return r->err;
		memset(&v->items[v->n], 0, sizeof(v->items[0]));
		v->keys[v->n] = NULL;
		v->n++;
		skip_space(r);
		if (read_member(r, v))
			return r->err;
		skip_space(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			continue;
		}
		if (r->p < r->end && *r->p == '}') {
			r->p++;
			return RT_EOK;
		}
		return fail_at(r, r->p, "expected ',' or '}' in an object");
	}
}

static enum rt_err read_value(struct reader *r, struct rt_jval *v)
{
	struct rt_buf s;
	enum rt_err err;

	skip_space(r);
	if (r->p >= r->end)
		return fail_at(r, r->p, "expected a value, found the end");
	if (*r->p == '{' || *r->p == '[') {
		if (++r->depth > RT_JSON_READ_MAX_DEPTH)
			return fail_at(r, r->p, "nested deeper than 64 levels");
		err = *r->p == '{' ? read_object(r, v) : read_array(r, v);
		r->depth--;
		return err;
	}
	if (*r->p == '"') {
		rt_buf_init(&s);
		err = read_string(r, &s);
		v->type = RT_J_STR;
		v->text = s.data;
		v->len = s.len;
		if (!err && strlen(v->text) != v->len)
			err = fail_at(r, r->p, "a NUL byte inside a string");
		return err;
	}
	if (literal(r, "true") || literal(r, "false")) {
		v->type = RT_J_BOOL;
		v->b = r->p[-1] == 'e' && r->p[-2] == 'u';
		return RT_EOK;
	}
	if (literal(r, "null")) {
		v->type = RT_J_NULL;
		return RT_EOK;
	}
	return read_number(r, v);
}

enum rt_err rt_json_parse(const char *text, size_t len, const char *origin, struct rt_jval *out)
{
	struct reader r = { text, text, text + len, origin ? origin : "JSON", 0, RT_EOK };

	memset(out, 0, sizeof(*out));
	if (!text)
		return rt_fail(RT_EDECODE, "%s: no text", r.origin);
	if (read_value(&r, out))
		return r.err;
	skip_space(&r);
	if (r.p != r.end)
		return fail_at(&r, r.p, "text after the value");
	return RT_EOK;
}

void rt_jval_release(struct rt_jval *v)
{
	for (size_t i = 0; i < v->n; i++) {
		rt_jval_release(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->text);
	memset(v, 0, sizeof(*v));
}

const struct rt_jval *rt_jval_get(const struct rt_jval *obj, const char *key)
{
	if (!obj || obj->type != RT_J_OBJ)
		return NULL;
	for (size_t i = 0; i < obj->n; i++)
		if (obj->keys[i] && !strcmp(obj->keys[i], key))
			return &obj->items[i];
	return NULL;
}

bool rt_jval_u64(const struct rt_jval *v, uint64_t *out)
{
	return v && v->type == RT_J_NUM && rt_parse_u64(v->text, 0, UINT64_MAX, out) == RT_PARSE_OK;
}

bool rt_jval_num(const struct rt_jval *v, double *out)
{
	char *end;

	if (!v || v->type != RT_J_NUM)
		return false;
	errno = 0;
	*out = strtod(v->text, &end);
	return *end == '\0';
}

const char *rt_jval_str(const struct rt_jval *v)
{
	return v && v->type == RT_J_STR ? v->text : NULL;
}
