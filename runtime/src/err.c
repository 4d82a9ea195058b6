/* err.c — error names, messages and the thread-local detail line. */
#include "rt/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

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

enum rt_err rt_fail(enum rt_err code, const char *fmt, ...)
{
	char line[sizeof(last_error)];
	va_list ap;

	/* format aside: callers often pass rt_last_error() as an argument */
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	memcpy(last_error, line, sizeof(line));
	return code;
}

const char *rt_last_error(void)
{
	return last_error;
}
