/* buf.h — a growable byte buffer with printf-style and JSON helpers, used by
 * every writer of text output (summary.json, op_log.jsonl, trace.json). */
#ifndef RT_BUF_H
#define RT_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "rt/err.h"

struct rt_buf {
	char *data; /* NUL-terminated when len > 0 */
	size_t len;
	size_t cap;
};

void rt_buf_init(struct rt_buf *b);
void rt_buf_release(struct rt_buf *b);
void rt_buf_reset(struct rt_buf *b);
/* Appends; on allocation failure the buffer is left unchanged and RT_ENOMEM
 * is returned. */
/* Ensures room for `extra` more bytes (plus a NUL). */
enum rt_err rt_buf_reserve(struct rt_buf *b, size_t extra);
enum rt_err rt_buf_append(struct rt_buf *b, const void *bytes, size_t len);
enum rt_err rt_buf_printf(struct rt_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Appends `s` as a quoted, escaped JSON string. */
enum rt_err rt_buf_json_str(struct rt_buf *b, const char *s);

/* Reads a whole file into `b` (NUL-terminated). */
enum rt_err rt_buf_read_file(struct rt_buf *b, const char *path);
/* Writes `b` to `path` atomically enough for our use (write then rename). */
enum rt_err rt_buf_write_file(const struct rt_buf *b, const char *path);

/* A fast 64-bit hash, chainable: pass the previous hash as `h` (start with
 * RT_HASH_INIT). Used for delivery digests; independent of host byte order. */
#define RT_HASH_INIT 0xcbf29ce484222325ULL
uint64_t rt_hash(uint64_t h, const void *bytes, size_t len);
uint64_t rt_hash_u64(uint64_t h, uint64_t v);

#endif
