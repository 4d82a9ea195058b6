/* err.c — error names, messages and the thread-local detail line. */
#include "rt/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[RT_ERR_LINE];

static const char *const names[] = {
#define RT_ERR_NAME(name, msg) "RT_E" #name,
	RT_ERR_MAP(RT_ERR_NAME)
#undef RT_ERR_NAME
};

static const char *const messages[] = {
#define RT_ERR_MSG(name, msg) msg,
	RT_ERR_MAP(RT_ERR_MSG)
#undef RT_ERR_MSG
};

const char *rt_err_name(enum rt_err code)
{
	return (unsigned)code < RT_E_COUNT ? names[code] : "RT_E?";
}

const char *rt_err_msg(enum rt_err code)
{
	return (unsigned)code < RT_E_COUNT ? messages[code] : "unknown error";
}

/* Length of the valid UTF-8 sequence at `p` that is not a C1 control
 * (U+0080..U+009F, which terminals may obey), 0 if there is none. */
static size_t utf8_char(const unsigned char *p)
{
	size_t n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;

	if (p[0] >= 0xf8 || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

size_t rt_escape_line(const char *in, char *out, size_t cap)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t used = 0;

	while (*p && used + 5 < cap) {
		size_t n = *p >= 0x80 ? utf8_char(p) : 1;

		if (*p < 0x20 || *p == 0x7f || n == 0) {
			used += (size_t)snprintf(out + used, cap - used, "\\x%02x", *p);
			p++;
			continue;
		}
		if (used + n >= cap)
			break;
		memcpy(out + used, p, n);
		used += n;
		p += n;
	}
	out[used] = '\0';
	return used;
}

enum rt_err rt_fail(enum rt_err code, const char *fmt, ...)
{
	char line[sizeof(last_error)];
	va_list ap;

	/* format aside: callers often pass rt_last_error() as an argument */
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* one line, whatever it quotes: control bytes and broken UTF-8 as \xHH */
	rt_escape_line(line, last_error, sizeof(last_error));
	return code;
}

void rt_print_error(const char *line)
{
	char shown[sizeof(last_error) * 4];

	rt_escape_line(line, shown, sizeof(shown));
	fprintf(stderr, "kernbench: error: %s\n", shown);
}

enum rt_err rt_err_keep(struct rt_error *e, enum rt_err code)
{
	e->code = code;
	snprintf(e->line, sizeof(e->line), "%s", last_error[0] ? last_error : rt_err_msg(code));
	return code;
}

enum rt_err rt_err_restore(const struct rt_error *e)
{
	/* the kept line is escaped already: copy it back as it is */
	snprintf(last_error, sizeof(last_error), "%s", e->line);
	return e->code;
}

int rt_exit_status(enum rt_err code)
{
	return code == RT_EOK ? 0 : code == RT_EUSAGE ? 2 : 1;
}

const char *rt_last_error(void)
{
	return last_error;
}
