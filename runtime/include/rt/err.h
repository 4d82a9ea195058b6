/* err.h — kernbench's one error enum, built from an X-macro table that also
 * yields each code's name and message (libuv UV_ERRNO_MAP style).
 *
 * Functions named as actions return enum rt_err. A failing function records a
 * one-line, user-facing detail with rt_fail(); the caller that reports the
 * error prints rt_last_error(). The detail buffer is thread-local so daemons
 * hosted as threads (inproc transport) do not trample each other.
 *
 * A failure path that cleans up before it reports keeps its error first
 * (rt_err_keep into a struct rt_error): cleanup that fails records lines
 * of its own, and the kept error, not the last line, is what is reported
 * (ADR 0068). Exit statuses: RT_EUSAGE, and only it, is 2 (rt_exit_status). */
#ifndef RT_ERR_H
#define RT_ERR_H

#include <stddef.h>

#define RT_ERR_MAP(X)                                              \
	X(OK, "ok")                                                \
	X(NOMEM, "out of memory")                                  \
	X(INVAL, "invalid argument")                               \
	X(CONFIG, "bad configuration")                             \
	X(DECODE, "malformed message")                             \
	X(SCHEMA, "schema version mismatch")                       \
	X(PROTOCOL, "lockstep protocol violation")                 \
	X(OOB, "address out of bounds")                            \
	X(SCRATCH, "scratch overflow")                             \
	X(COMPOSITE, "composite invariant violated")               \
	X(IO, "input/output error")                                \
	X(PEER, "daemon failed")                                   \
	X(TIMEOUT, "watchdog timeout")                             \
	X(TRANSPORT, "transport error")                            \
	X(KERNEL, "kernel error")                                  \
	X(NOTFOUND, "not found")                                   \
	X(UNFINISHED, "the run ended with unfinished work")        \
	X(INTERRUPTED, "interrupted")                              \
	X(USAGE, "bad command-line value")                         \
	X(AGAIN, "try again")

enum rt_err {
#define RT_ERR_ENUM(name, msg) RT_E##name,
	RT_ERR_MAP(RT_ERR_ENUM)
#undef RT_ERR_ENUM
	RT_E_COUNT
};

/* The longest detail line kept (bytes, with the NUL). */
#define RT_ERR_LINE 1024

/* An error and its detail line, held aside while cleanup runs, or handed
 * from one thread to another. */
struct rt_error {
	enum rt_err code;
	char line[RT_ERR_LINE];
};

/* "RT_EOOB" style name of a code. */
const char *rt_err_name(enum rt_err code);
/* Short human message of a code ("address out of bounds"). */
const char *rt_err_msg(enum rt_err code);

/* Record a formatted one-line detail for `code` and return `code`. */
enum rt_err rt_fail(enum rt_err code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The detail recorded last on this thread ("" when none): one line, its
 * control bytes, C1 controls and broken UTF-8 escaped as \xHH. */
const char *rt_last_error(void);
/* Keeps `code` and this thread's detail (the code's message when there
 * is none) in *e; returns `code`. */
enum rt_err rt_err_keep(struct rt_error *e, enum rt_err code);
/* Makes *e this thread's error again; returns its code. */
enum rt_err rt_err_restore(const struct rt_error *e);
/* The status a command exits with for `code`: 0 for RT_EOK, 2 for
 * RT_EUSAGE (fix the command line), 1 for everything else. */
int rt_exit_status(enum rt_err code);
/* Copies `in` into `out` (cap bytes, NUL-terminated) with those bytes
 * escaped; returns the length written. */
size_t rt_escape_line(const char *in, char *out, size_t cap);
/* "kernbench: error: LINE" on stderr, LINE escaped: what every error
 * line of the program goes through. */
void rt_print_error(const char *line);

#endif
